"""Feedback facts from OTel evaluation events and from feedback documents."""

from __future__ import annotations

from lithify.model import Feedback, Skip
from lithify.translate import translate_document
from lithify.translate.feedback import call_id_of_span, from_document
from lithify.translate.otlp import LogRecord
from lithify.translate.telemetry import translate_logs

TRACE, SPAN = "ab" * 16, "cd" * 8


def _record(**attrs: object) -> LogRecord:
    return LogRecord(
        TRACE,
        SPAN,
        "gen_ai.evaluation.result",
        1_700_000_000_000_000_000,
        None,
        9,
        None,
        dict(attrs),
    )


def test_evaluation_event_targets_the_evaluated_call() -> None:
    (fb,) = translate_logs(
        [_record(**{"gen_ai.evaluation.name": "relevance", "gen_ai.evaluation.score.value": 0.75})]
    )
    assert isinstance(fb, Feedback)
    assert (fb.target_kind, fb.target_id) == ("call", call_id_of_span(TRACE, SPAN))
    assert (fb.name, fb.value, fb.source) == ("relevance", 0.75, "otel")
    assert fb.observed_at == "2023-11-14T22:13:20.000000000Z"


def test_label_when_there_is_no_score_and_redelivery_is_the_same_fact() -> None:
    rec = _record(**{"gen_ai.evaluation.name": "tone", "gen_ai.evaluation.score.label": "polite"})
    (a,) = translate_logs([rec])
    (b,) = translate_logs([rec])
    assert a.value == "polite" and a.feedback_id == b.feedback_id


def test_evaluation_without_value_or_context() -> None:
    (s,) = translate_logs([_record(**{"gen_ai.evaluation.name": "x"})])
    assert isinstance(s, Skip) and s.reason == "feedback_event"
    rec = LogRecord(
        None,
        None,
        "gen_ai.evaluation.result",
        None,
        None,
        0,
        None,
        {"gen_ai.evaluation.name": "x", "gen_ai.evaluation.score.value": 1},
    )
    (s,) = translate_logs([rec])
    assert isinstance(s, Skip) and s.reason == "uncorrelated_events"


def test_documents_shorthand_and_explicit_targets() -> None:
    a = from_document({"session_id": "s", "name": "ok", "value": True})
    b = from_document({"target": {"kind": "session", "id": "s"}, "name": "ok", "value": True})
    assert isinstance(a, Feedback) and isinstance(b, Feedback)
    assert (a.target_kind, a.target_id, a.value) == ("session", "s", True)
    assert a.feedback_id != b.feedback_id  # different documents, no explicit id
    c = from_document({"id": "f1", "trace_id": "t", "name": "n", "value": 1})
    d = from_document({"id": "f1", "trace_id": "t", "name": "n", "value": 2})
    assert c.feedback_id == d.feedback_id  # an explicit id is the identity


def test_bad_documents_say_why() -> None:
    for doc, why in (
        ({"session_id": "s", "name": "n", "value": float("nan")}, "finite"),
        ({"session_id": "", "name": "n", "value": 1}, "target id"),
        ({"target": {"kind": "user", "id": "u"}, "name": "n", "value": 1}, "kind"),
        ({"session_id": "s", "name": "", "value": 1}, "name"),
    ):
        r = from_document(doc)
        assert isinstance(r, Skip) and why in r.detail, (doc, r)


def test_documents_are_recognised_by_shape_and_redacted() -> None:
    (fb,) = translate_document({"session_id": "s", "name": "n", "value": 1, "api_key": "secret"})
    assert isinstance(fb, Feedback) and fb.raw["api_key"] == "[REDACTED]"
