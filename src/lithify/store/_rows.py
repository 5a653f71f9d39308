"""Rows as the tables hold them: the columns, and a fact's or a feedback fact's row (query
columns in their escaped column form, the body in codec bytes)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import msgspec
import orjson

from lithify.core import codec
from lithify.core.factfile import fact_sha256
from lithify.core.times import datetime_to_rfc3339
from lithify.model import FEEDBACK_TARGETS, Feedback, InferenceCall
from lithify.store._text import WORKER, Read, TextNote, text_note
from lithify.store._types import Prepared, TimeBound

FACT_COLUMNS = (
    "inference_call_id",
    "model_call_id",
    "session_id",
    "trace_id",
    "span_id",
    "provider",
    "model",
    "source",
    "started_at",
    "observed_at",
    "sort_at",
    "input_tokens",
    "output_tokens",
    "degradations",
    "ingested_at",
    "json_sha256",
    "body",
)
# The columns a query filters and orders on: the ones before a fact's digest and body (SQLite
# keeps those two apart, in fact_bodies).
QUERY_COLUMNS = FACT_COLUMNS[: FACT_COLUMNS.index("json_sha256")]

# A capture of a stored call that differs from it: the fact's columns and its content digest.
VARIANT_COLUMNS = ("digest", *FACT_COLUMNS)

FEEDBACK_COLUMNS = (
    "feedback_id",
    "target_kind",
    "target_id",
    "name",
    "value_kind",
    "value_number",
    "value_text",
    "source",
    "observed_at",
    "sort_at",
    "ingested_at",
    "body",
)

# Token columns feed SUM() in stats; SQLite's SUM raises on 64-bit overflow. Absurd counts stay
# on the stored fact but are left out of the column (and so of the sums).
_TOKEN_MAX = 2**48
_INT64_MAX = 2**63 - 1

_feedback_decoder = codec.Decoder(Feedback)


def now() -> str:
    """The current UTC time in the fact timestamp format (fixed width, sorts as text)."""
    return datetime_to_rfc3339(datetime.now(UTC))


def time_bound(value: TimeBound) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return datetime_to_rfc3339(value)


def _tokens(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _TOKEN_MAX:
        return value
    return None


def _text(value: Any) -> str | None:
    return codec.col(value) if isinstance(value, str) else None


def _degradations(value: Any) -> str:
    out: dict[str, int] = {}
    if isinstance(value, dict):
        for k, n in value.items():
            if isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool):
                out[codec.col(k) or ""] = max(-_INT64_MAX, min(n, _INT64_MAX))
    return orjson.dumps(out, option=orjson.OPT_SORT_KEYS).decode()


def _require_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    return value


def fact_row(fact: InferenceCall, ingested_at: str) -> tuple[Any, ...]:
    if not isinstance(fact, InferenceCall):
        raise TypeError(f"expected an InferenceCall, got {type(fact).__name__}")
    _require_id(fact.inference_call_id, "inference_call_id")
    source = fact.source.name if fact.source is not None else ""
    return (
        codec.col(fact.inference_call_id),
        _text(fact.model_call_id),
        _text(fact.session_id),
        _text(fact.trace_id),
        _text(fact.span_id),
        _text(fact.provider),
        _text(fact.model),
        codec.col(source) if isinstance(source, str) else "",
        _text(fact.started_at),
        _text(fact.observed_at),
        _text(fact.started_at) or _text(fact.observed_at) or "",
        _tokens(fact.input_tokens),
        _tokens(fact.output_tokens),
        _degradations(fact.degradations),
        ingested_at,
        # The digest an export's facts.sha256 names the fact by, made once here rather than
        # by every export (encoding and hashing each fact was a quarter of an export's CPU).
        fact_sha256(fact),
        codec.encode(fact),
    )


def feedback_row(fb: Feedback, ingested_at: str) -> tuple[Any, ...]:
    if not isinstance(fb, Feedback):
        raise TypeError(f"expected a Feedback, got {type(fb).__name__}")
    _require_id(fb.feedback_id, "feedback_id")
    _require_id(fb.target_id, "target_id")
    if fb.target_kind not in FEEDBACK_TARGETS:
        raise ValueError(f"target_kind must be one of {FEEDBACK_TARGETS}, got {fb.target_kind!r}")
    value = fb.value
    number: float | None = None
    text: str | None = None
    if isinstance(value, bool):
        kind, number = "bool", float(value)
    elif isinstance(value, int | float):
        kind = "number"
        try:
            number = float(value)
        except OverflowError:
            number = None
        if number is not None and not math.isfinite(number):
            number = None  # SQLite stores NaN as NULL; keep both backends alike
    elif isinstance(value, str):
        kind, text = "string", codec.col(value)
    else:
        raise ValueError(f"feedback value must be a number, bool or string, got {value!r}")
    return (
        codec.col(fb.feedback_id),
        fb.target_kind,
        codec.col(fb.target_id),
        codec.col(fb.name) if isinstance(fb.name, str) else "",
        kind,
        number,
        text,
        codec.col(fb.source) if isinstance(fb.source, str) else "",
        _text(fb.observed_at),
        _text(fb.observed_at) or "",
        ingested_at,
        codec.encode(fb),
    )


_FACT_INGESTED = FACT_COLUMNS.index("ingested_at")
_FEEDBACK_INGESTED = FEEDBACK_COLUMNS.index("ingested_at")


# A fact row's body on its way to the writer, when the fact holds blobs: this tag, then msgpack
# of [the body as stored, [[sha256, bytes], ...]]. The blobs ride in the row itself, so a row
# taken out of its ``Prepared`` (the receiver moves rows one by one) keeps them; the writer takes
# them out (``take_blobs``) before the row meets SQL. Codec tags are 1-3, SQLite's LZ4 0x10.
_PENDING = 4
_pending_encoder = msgspec.msgpack.Encoder()
_pending_decoder = msgspec.msgpack.Decoder(tuple[bytes, list[tuple[bytes, bytes]]])


def store_body(
    body: bytes, pack: Callable[[bytes], bytes] | None = None, blob_min: int = codec.BLOB_MIN
) -> bytes:
    """A fact's codec bytes as a row carries them to the writer: long base64 cut out as blobs
    (``codec.split_blobs``), then through ``pack``, with the blobs beside it."""
    stored, blobs = codec.split_blobs(body, blob_min)
    if pack is not None:
        stored = pack(stored)
    if not blobs:
        return stored
    return bytes((_PENDING,)) + _pending_encoder.encode((stored, list(blobs.items())))


def take_blobs(rows: list[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], dict[bytes, bytes]]:
    """The fact rows with bodies as stored, and the blobs they carried, by SHA-256."""
    blobs: dict[bytes, bytes] = {}
    out: list[tuple[Any, ...]] = []
    for row in rows:
        body = row[-1]
        if body and body[0] == _PENDING:
            stored, items = _pending_decoder.decode(memoryview(body)[1:])
            blobs.update(items)
            row = (*row[:-1], stored)
        out.append(row)
    return out, blobs


def prepare(
    facts: Iterable[InferenceCall],
    feedback: Iterable[Feedback] = (),
    pack: Callable[[bytes], bytes] | None = None,
    blob_min: int = codec.BLOB_MIN,
) -> Prepared:
    """The rows ``insert_prepared`` writes, fact bodies through ``pack`` (how a backend keeps
    them, ``FactStore.preparer``), blobs cut out; raises like ``insert_facts`` on an invalid
    item."""
    facts = list(facts)
    rows = [fact_row(f, "") for f in facts]
    notes = text_notes(facts, rows, WORKER)
    rows = [(*r[:-1], store_body(r[-1], pack, blob_min)) for r in rows]
    return Prepared(rows, [feedback_row(f, "") for f in feedback], notes)


_FACT_SESSION = FACT_COLUMNS.index("session_id")


def text_notes(
    facts: list[InferenceCall], rows: list[tuple[Any, ...]], read: Read
) -> list[TextNote | None]:
    """The text index's notes of facts and their rows (bodies still whole codec bytes), leaving
    out what ``read`` has read: every writer makes them as the receiver's workers do (which
    remember what they read across requests, ``WORKER``), so that the index is the same
    whichever wrote it."""
    return [
        None if (sid := r[_FACT_SESSION]) is None else text_note(f, r[-1], sid, read)
        for f, r in zip(facts, rows, strict=True)
    ]


def _stamp(rows: list[tuple[Any, ...]], index: int, at: str) -> list[tuple[Any, ...]]:
    return [(*r[:index], at, *r[index + 1 :]) for r in rows]
