"""Feedback facts: scores and labels on a call, a session or a trace.

Two sources share this module: OTel ``gen_ai.evaluation.result`` log events (the evaluated span
is the record's span context) and feedback documents posted to ``/v1/feedback`` or imported
from files. See docs/feedback.md.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from lithify.core.hashing import stable_hash
from lithify.core.times import ns_to_rfc3339
from lithify.model import FEEDBACK_TARGETS, Feedback, Skip
from lithify.translate.otlp import LogRecord
from lithify.translate.redact import redact_value

EVALUATION_EVENT = "gen_ai.evaluation.result"

# The shorthand target keys a document may use instead of {"target": {"kind", "id"}}.
_TARGET_KEYS = {
    "inference_call_id": "call",
    "call_id": "call",
    "session_id": "session",
    "trace_id": "trace",
}


def call_id_of_span(trace_id: str, span_id: str) -> str:
    """The ``inference_call_id`` the span's own fact has (see telemetry._span_identity)."""
    return stable_hash("otlp", trace_id, span_id)


def _value(value: Any) -> bool | int | float | str | None:
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def from_evaluation(record: LogRecord) -> Feedback | Skip:
    """One ``gen_ai.evaluation.result`` event; the score wins over the label as the value."""
    attrs = record.attributes
    name = attrs.get("gen_ai.evaluation.name")
    if not isinstance(name, str) or not name:
        return Skip("feedback_event", "an evaluation event without gen_ai.evaluation.name")
    value = _value(attrs.get("gen_ai.evaluation.score.value"))
    if value is None or isinstance(value, str):
        label = attrs.get("gen_ai.evaluation.score.label")
        value = label if isinstance(label, str) and label else value
    if value is None:
        return Skip("feedback_event", f"evaluation {name!r} without a score or a label")
    if record.trace_id and record.span_id:
        kind, target = "call", call_id_of_span(record.trace_id, record.span_id)
    elif record.trace_id:
        kind, target = "trace", record.trace_id
    else:
        return Skip("uncorrelated_events", f"evaluation {name!r} without span context")
    raw = redact_value(record.to_raw(), Counter())
    observed = ns_to_rfc3339(record.time_unix_nano or record.observed_time_unix_nano)
    return Feedback(
        feedback_id=stable_hash("otel-evaluation", raw),
        target_kind=kind,  # type: ignore[arg-type]
        target_id=target,
        name=name,
        value=value,
        source="otel",
        observed_at=observed,
        raw=raw,
    )


def looks_like_feedback(doc: dict[str, Any]) -> bool:
    return (
        "name" in doc
        and "value" in doc
        and (isinstance(doc.get("target"), dict) or any(k in doc for k in _TARGET_KEYS))
    )


def from_document(doc: Any, *, source: str = "file") -> Feedback | Skip:
    """A feedback document: ``{"target": {"kind", "id"}, "name", "value"}`` (or a shorthand
    target key such as ``"session_id"``), with optional ``id``, ``source`` and ``observed_at``."""
    if not isinstance(doc, dict):
        return Skip("unrecognized_format", "feedback is a JSON object")
    target = doc.get("target")
    kind = target_id = None
    if isinstance(target, dict):
        kind, target_id = target.get("kind"), target.get("id")
    else:
        for key, k in _TARGET_KEYS.items():
            if doc.get(key) is not None:
                kind, target_id = k, doc[key]
                break
    if kind not in FEEDBACK_TARGETS:
        return Skip(
            "unrecognized_format", f"feedback target kind must be one of {FEEDBACK_TARGETS}"
        )
    if not isinstance(target_id, str) or not target_id:
        return Skip("unrecognized_format", "feedback needs a target id (a non-empty string)")
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        return Skip("unrecognized_format", "feedback needs a name (a non-empty string)")
    value = _value(doc.get("value"))
    if value is None:
        return Skip(
            "unrecognized_format", "feedback value must be a finite number, a bool or a string"
        )
    src = doc.get("source") if isinstance(doc.get("source"), str) and doc["source"] else source
    observed = doc.get("observed_at") if isinstance(doc.get("observed_at"), str) else None
    raw = redact_value(doc, Counter())
    explicit = doc.get("id")
    identity = (
        ("feedback-id", explicit) if isinstance(explicit, str) and explicit else ("feedback", raw)
    )
    return Feedback(
        feedback_id=stable_hash(*identity),
        target_kind=kind,  # type: ignore[arg-type]
        target_id=target_id,
        name=name,
        value=value,
        source=src,
        observed_at=observed,
        raw=raw,
    )
