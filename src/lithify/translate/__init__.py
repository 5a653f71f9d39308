"""Translators: pure functions from a source payload to canonical facts (or reasons for none).

``translate_document`` takes one decoded JSON document, ``translate_protobuf`` one OTLP protobuf
request, ``translate_stream`` one SSE body; each yields ``InferenceCall`` or ``Skip`` and never
raises on bad input.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lithify.model import Feedback, InferenceCall, Skip
from lithify.translate import feedback, provider
from lithify.translate.otlp import (
    Decoded,
    OTLPDecodeError,
    is_bare_span,
    json_logs,
    json_spans,
    pb_logs,
    pb_spans,
)
from lithify.translate.telemetry import translate_attributes, translate_logs, translate_spans

Result = InferenceCall | Feedback | Skip

TELEMETRY_FORMATS = ("otlp", "otlp-traces", "otlp-logs", "attributes")
FORMATS = ("auto", *TELEMETRY_FORMATS, "exchange", *provider.PROVIDERS, "feedback")


def detect(doc: Any) -> str | None:
    """The format of one JSON document, by its shape."""
    if not isinstance(doc, dict):
        return None
    if "resourceSpans" in doc or "resource_spans" in doc or is_bare_span(doc):
        return "otlp-traces"
    if "resourceLogs" in doc or "resource_logs" in doc:
        return "otlp-logs"
    if "request" in doc and "response" in doc:
        return "exchange"
    if feedback.looks_like_feedback(doc):
        return "feedback"
    if isinstance(doc.get("attributes"), dict) or any(
        isinstance(k, str) and k.startswith(("gen_ai.", "llm.")) for k in doc
    ):
        return "attributes"
    if provider.looks_like_provider_body(doc):
        return "provider"
    return None


def _guard(it: Iterator[Result]) -> Iterator[Result]:
    try:
        yield from it
    except OTLPDecodeError as e:
        yield Skip("unrecognized_format", str(e))
    except RecursionError:
        yield Skip("undecodable", "nested too deeply to represent")
    except Exception as e:  # a translator defect must not stop a run: count it, name it
        yield provider.translator_error(e)


def _lazy(translate: Any, *args: Any, **kwargs: Any) -> Iterator[Result]:
    """One translation, run when iterated: inside ``_guard``, which a call made to build its
    argument would escape."""
    yield translate(*args, **kwargs)


def _units(decoded: Decoded[Any], translate: Any) -> Iterator[Result]:
    """A request's results: a skip for each unit it could not decode, then its facts."""
    for where in decoded.rejected:
        yield Skip("undecodable", where)
    for _ in range(decoded.unnamed):
        yield Skip("undecodable", "a unit that could not be decoded, past the ones named")
    yield from _guard(translate(decoded.units))


def _json_otlp(doc: Any, decode: Any, translate: Any, repair: bool) -> Iterator[Result]:
    try:
        decoded = decode(doc, repair)
    except OTLPDecodeError as e:
        yield Skip("undecodable", str(e))
        return
    yield from _units(decoded, translate)


def translate_document(doc: Any, fmt: str = "auto", *, repair: bool = False) -> Iterator[Result]:
    """The results of one decoded JSON document. ``repair``: it may hold lone surrogates
    (``otlp.load_json`` read text orjson refused): an OTLP unit with them is kept repaired and
    counted ``invalid_text``, as the receiver does."""
    kind = detect(doc) if fmt in ("auto", "otlp") else fmt
    if fmt == "otlp" and kind not in ("otlp-traces", "otlp-logs"):
        kind = None
    if doc is None or doc == {} or doc == []:
        yield Skip("empty", "empty document")
    elif kind == "otlp-traces":
        yield from _json_otlp(doc, json_spans, translate_spans, repair)
    elif kind == "otlp-logs":
        yield from _json_otlp(doc, json_logs, translate_logs, repair)
    elif kind == "attributes":
        if not isinstance(doc, dict):
            yield Skip("unrecognized_format", "an attribute map is a JSON object")
        elif isinstance(doc.get("attributes"), dict):
            yield from _guard(_lazy(translate_attributes, doc["attributes"], raw=doc))
        else:
            yield from _guard(_lazy(translate_attributes, doc))
    elif kind == "exchange":
        if not isinstance(doc, dict):
            yield Skip("unrecognized_format", "an exchange is a JSON object")
        else:
            hint = doc.get("provider") if doc.get("provider") in provider.PROVIDERS else "auto"
            meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else None
            yield provider.translate_exchange(
                doc.get("request"), doc.get("response"), fmt=hint, meta=meta
            )
    elif kind == "feedback":
        yield feedback.from_document(doc)
    elif kind == "provider" or kind in provider.PROVIDERS:
        hint = kind if kind in provider.PROVIDERS else "auto"
        if isinstance(doc, dict) and provider.is_request(doc) and not provider.is_error_body(doc):
            yield provider.translate_exchange(doc, None, fmt=hint)
        else:
            yield provider.translate_exchange(None, doc, fmt=hint)
    else:
        yield Skip("unrecognized_format", "the document matches no known source format")


def translate_protobuf(data: bytes, fmt: str = "auto") -> Iterator[Result]:
    """One OTLP protobuf request. Traces and logs share a wire layout closely enough that a
    logs request can parse as traces; a span without a trace id says it was not one."""
    if fmt == "otlp-logs":
        try:
            yield from _units(pb_logs(data), translate_logs)
        except OTLPDecodeError as e:
            yield Skip("undecodable", str(e))
        return
    try:
        spans: Decoded[Any] | None = pb_spans(data)
    except OTLPDecodeError as e:
        if fmt == "otlp-traces":
            yield Skip("undecodable", str(e))
            return
        spans = None
    if spans is not None and (
        fmt == "otlp-traces" or (spans.units and all(s.trace_id for s in spans.units))
    ):
        yield from _units(spans, translate_spans)
        return
    try:
        records = pb_logs(data)
    except OTLPDecodeError as e:
        if spans is None:
            yield Skip("undecodable", str(e))
            return
        records = None
    if records is not None and (records.units or records.rejected):
        yield from _units(records, translate_logs)
    elif spans is not None and (spans.units or spans.rejected):
        yield from _units(spans, translate_spans)
    else:
        yield Skip("empty", "an OTLP request with no spans or log records")


def translate_stream(text: str, fmt: str = "auto", request: Any = None) -> Result:
    """One streamed (SSE) response body, with its request when known."""
    return provider.translate_exchange(
        request, text, fmt=fmt if fmt in provider.PROVIDERS else "auto"
    )


__all__ = [
    "FORMATS",
    "Result",
    "detect",
    "translate_document",
    "translate_protobuf",
    "translate_stream",
]
