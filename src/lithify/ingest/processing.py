"""Request processing for `lithify serve`: inflate, decode, translate one OTLP or feedback body
and build its store rows — pure and picklable, run in a worker process (or a thread), so the
event loop only moves bytes."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import brotli
import cramjam
import lz4.frame
import orjson
import zstandard

from lithify.model import Feedback, InferenceCall, Skip
from lithify.store import (
    Prepared,
    prepare,
)
from lithify.translate import feedback as feedback_doc
from lithify.translate.otlp import OTLPDecodeError, TooManyUnits, decode_logs, decode_spans
from lithify.translate.provider import translator_error
from lithify.translate.telemetry import translate_logs, translate_spans

DEFAULT_MAX_BODY = 20 * 1024 * 1024  # the OTLP specification's recommended limit
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_CONTENT_TYPES = {PROTOBUF: "protobuf", "application/protobuf": "protobuf", JSON: "json"}
# Every compression the Collector's otlphttp exporter can send (confighttp), and none.
_ENCODINGS = ("gzip", "deflate", "zlib", "zstd", "lz4", "snappy", "x-snappy-framed", "identity", "")
ACCEPTED_ENCODINGS = "gzip, x-gzip, deflate, zlib, zstd, lz4, snappy, x-snappy-framed or none"
_ENCODING_ALIASES = {"x-gzip": "gzip"}  # RFC 9110 §8.4.1.3: x-gzip is gzip

# google.rpc.Code values for the Status body (informative only: OTLP clients go by HTTP status).
_RPC_CODE = {400: 3, 401: 16, 404: 5, 405: 12, 408: 4, 413: 8, 415: 3, 429: 8, 431: 8, 500: 13,
             503: 14}  # fmt: skip

# Units that could not be taken: a defect met them, or they were not OTLP objects at all.
REJECTED = frozenset({"translator_error", "undecodable"})
# Taken, but worth telling the sender: capture is off, or events cannot be tied to a call.
_CAPTURE_ON = "turn content capture on, e.g. OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_WARN = {
    # Log records without content, and spans without span context (nothing could join them).
    "content_not_captured": "{n} model-call {unit} carried no message content, so gave no fact "
    f"({_CAPTURE_ON})",
    "uncorrelated_events": "{n} per-message log events had no span context and gave no fact",
}
# Spans without content are kept for their metadata (degradation content_not_captured).
_METADATA_ONLY = (
    "{n} model-call {unit} carried no message content: stored with their metadata only, read "
    "with the content of their log events when those arrive (send the application's OTLP logs "
    f"here too: openai-v2 and Pydantic AI write the messages there), else {_CAPTURE_ON}"
)


class BodyTooLarge(Exception):
    pass


class BadBody(Exception):
    pass


@dataclass(slots=True)
class Processed:
    """What one request body gave: rows to write, counts for the answer and the log."""

    status: int = 200  # 200, or 400 / 413 for a body that cannot be taken at all
    message: str = ""
    units: int = 0  # spans, log records or feedback items in the request
    facts: int = 0
    feedback: int = 0
    degraded: int = 0  # facts with at least one degradation
    rejected: int = 0
    errors: list[str] = field(default_factory=list)  # why units were rejected
    warnings: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    rows: Prepared | None = None
    decoded_bytes: int = 0


def inflate(body: bytes, encoding: str, limit: int, *, partial: bool = False) -> bytes:
    """The body without its Content-Encoding (one of ``_ENCODINGS``, or ``br``), never holding
    much more than ``limit`` bytes of output: a decompression bomb is cut off as soon as it is
    over. ``partial``: a body cut off or corrupt after some output gives that output (the proxy
    records a stream as far as it got) rather than ``BadBody``."""
    if encoding in ("", "identity") or not body:  # an empty body is empty in any coding
        if len(body) > limit:
            raise BodyTooLarge
        return body
    if encoding in ("snappy", "x-snappy-framed"):
        return _unsnappy(body, encoding, limit)
    # Streams of members (gzip), frames (zstd, LZ4) or one zlib stream, each decoder fed with a
    # ceiling on its output. HTTP "deflate" (and the Collector's "zlib") is zlib, sometimes raw.
    new_decoder, several = _STREAMS[encoding]
    out = bytearray()
    data = body
    while True:
        d = new_decoder()
        try:
            out += d.decompress(data, limit + 1 - len(out))
        except _DECODE_ERRORS as e:
            if new_decoder is _zlib and not out:
                new_decoder = _raw_deflate
                continue
            if partial and out:
                return bytes(out)
            raise BadBody(f"the body is not valid {encoding} data: {e}") from None
        if len(out) > limit:
            raise BodyTooLarge
        if not d.eof:
            if partial and out:
                return bytes(out)
            raise BadBody(f"the {encoding} body is truncated")
        data = d.unused_data or b""  # lz4.frame: None when the frame ends the input
        if not data.strip(b"\x00"):  # trailing padding some writers leave
            return bytes(out)
        if not several:
            raise BadBody(f"trailing bytes after the {encoding} data")


def _gzip() -> Any:
    return zlib.decompressobj(31)


def _zlib() -> Any:
    return zlib.decompressobj(15)


def _raw_deflate() -> Any:
    return zlib.decompressobj(-15)


class _Zstd:
    """zstandard's decompressor with zlib's ``decompress(data, max_length)``, which it lacks (its
    streaming reader is bounded but passes over a cut-off frame in silence). A zstd block
    inflates to at most 128 KiB and takes at least 4 bytes, so the input is fed in pieces that
    cannot inflate more than ``SLACK`` past ``max_length``.

    The window a frame may ask for is zstd's default bound, 128 MiB: the Collector's encoder
    asks for 4 to 32 MiB by level. Its buffer is only touched as far as output is written."""

    BLOCK = 128 * 1024
    SLACK = 1024 * 1024

    def __init__(self) -> None:
        self._d = zstandard.ZstdDecompressor().decompressobj()
        self.unused_data = b""

    @property
    def eof(self) -> bool:
        return bool(self._d.eof)

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = bytearray()
        view = memoryview(data)
        at = 0
        while at < len(data) and len(out) < max_length and not self._d.eof:
            blocks = (max_length - len(out) + self.SLACK) // self.BLOCK - 1  # one may be begun
            out += self._d.decompress(view[at : at + 4 * blocks])
            at += 4 * blocks
        if self._d.eof:
            self.unused_data = self._d.unused_data + data[at:]
        return bytes(out)


def _lz4() -> Any:
    return lz4.frame.LZ4FrameDecompressor()


class _Brotli:
    """brotli's decompressor with zlib's ``decompress(data, max_length)``: its output buffer
    stops growing at the limit (a little past it). One stream: brotli reports no unused data."""

    unused_data = b""

    def __init__(self) -> None:
        self._d = brotli.Decompressor()

    @property
    def eof(self) -> bool:
        return bool(self._d.is_finished())

    def decompress(self, data: bytes, max_length: int) -> bytes:
        return bytes(self._d.process(data, output_buffer_limit=max(1, max_length)))


# Content-Encoding -> (a new decoder, whether members or frames may follow one another).
_STREAMS: dict[str, tuple[Callable[[], Any], bool]] = {
    "gzip": (_gzip, True),
    "deflate": (_zlib, False),
    "zlib": (_zlib, False),
    "zstd": (_Zstd, True),
    "lz4": (_lz4, True),
    "br": (_Brotli, False),  # no OTLP exporter sends it: the proxy's clients may
}


# lz4.frame raises RuntimeError ("LZ4F_decompress failed with code: ERROR_...").
_DECODE_ERRORS = (zlib.error, zstandard.ZstdError, RuntimeError, brotli.error)
# Every framed snappy stream begins with this chunk; no snappy block can (its first copy would
# reach 1.9 GB back, before the start of the output).
_SNAPPY_FRAMED = b"\xff\x06\x00\x00sNaPpY"


def _unsnappy(body: bytes, encoding: str, limit: int) -> bytes:
    """Snappy as the Collector sends it: ``snappy`` is one block (Collector v0.125+) or, before,
    the framing format, told apart by the stream identifier as the Collector's own receiver does;
    ``x-snappy-framed`` is the framing format. A block states its size up front; a framed stream
    is decoded chunk by chunk (64 KiB at most each), so neither is inflated past the limit."""
    framed = body.startswith(_SNAPPY_FRAMED)
    if not framed and encoding == "x-snappy-framed":
        raise BadBody("the body is not framed snappy data: it does not start with sNaPpY")
    try:
        if not framed:
            if cramjam.snappy.decompress_raw_len(body) > limit:
                raise BodyTooLarge
            return bytes(cramjam.snappy.decompress_raw(body))
        out = bytearray()
        at = 0
        while at < len(body):
            kind, size = body[at], int.from_bytes(body[at + 1 : at + 4], "little")
            end = at + 4 + size
            if end > len(body):
                raise BadBody(f"the {encoding} body is truncated")
            if kind in (0x00, 0x01):  # compressed / uncompressed data; checked with its CRC
                out += cramjam.snappy.decompress(_SNAPPY_FRAMED + body[at:end])
                if len(out) > limit:
                    raise BodyTooLarge
            elif kind < 0x80:  # reserved, unskippable
                raise BadBody(f"the body is not valid {encoding} data: chunk type {kind:#04x}")
            at = end  # the stream identifier again, padding and skippable chunks
        return bytes(out)
    except cramjam.DecompressionError as e:
        raise BadBody(f"the body is not valid {encoding} data: {e}") from None


def _guarded(results: Iterator[Any]) -> Iterator[Any]:
    """Like ``lithify.translate``'s own guard: a defect becomes a counted Skip, never a crash."""
    try:
        yield from results
    except RecursionError:
        yield Skip("undecodable", "nested too deeply to represent")
    except Exception as e:
        yield translator_error(e)


def max_units(limit: int) -> int:
    """Spans or log records (with their resources and scopes) one request may hold: one per
    256 bytes of the body limit. An empty span is two bytes on the wire and takes hundreds
    decoded; this keeps a request's decoded form within a few times the limit."""
    return max(1, limit // 256)


def _listed(summary: str, items: list[str], total: int, most: int = 5) -> str:
    """``summary: a; b; c`` naming the first ``most`` of ``total`` items, and how many more."""
    shown = items[:most]
    more = f"; and {total - len(shown)} more" if total > len(shown) else ""
    return f"{summary}: {'; '.join(shown)}{more}"


def process(
    signal: str,
    kind: str,
    body: bytes,
    content_encoding: str,
    limit: int,
    preparer: Callable[..., Prepared] = prepare,
) -> Processed:
    """Inflate, decode and translate one request body; build its store rows (``preparer``: the
    store's own, ``FactStore.preparer``, so bodies are already as it keeps them — SQLite's are a
    third of the size on their way back from a worker). Never raises on bad input: the outcome says
    400 / 413 and why."""
    try:
        data = inflate(body, content_encoding, limit)
    except BodyTooLarge:
        return Processed(413, f"the decompressed body is larger than the {limit}-byte limit")
    except BadBody as e:
        return Processed(400, str(e))
    if signal == "feedback":
        return _process_feedback(data)
    unit = "spans" if signal == "traces" else "log records"
    try:
        decoded = (decode_spans if signal == "traces" else decode_logs)(
            data, kind, max_units(limit)
        )
    except TooManyUnits as e:
        return Processed(413, str(e), decoded_bytes=len(data))
    except OTLPDecodeError as e:
        return Processed(400, str(e), decoded_bytes=len(data))
    units: list[Any] = decoded.units
    rejected = decoded.rejected_count
    out = Processed(units=len(units) + rejected, decoded_bytes=len(data))
    if rejected:
        out.rejected += rejected
        errors = decoded.rejected
        out.errors.append(_listed(f"{rejected} {unit} could not be decoded", errors, rejected))
    repaired = sum(u.repaired > 0 for u in units)
    if repaired:
        out.warnings.append(
            f"{repaired} {unit} held text that was not valid UTF-8 (or a lone surrogate "
            "escape): taken with each bad character replaced by U+FFFD (degradation invalid_text)"
        )
    translated = translate_spans(units) if signal == "traces" else translate_logs(units)
    facts: list[InferenceCall] = []
    feedback: list[Feedback] = []
    skipped: Counter[str] = Counter()
    failures: list[Skip] = []
    metadata_only = 0
    for r in _guarded(translated):
        if isinstance(r, InferenceCall):
            facts.append(r)
            out.degraded += bool(r.degradations)
            metadata_only += "content_not_captured" in r.degradations
        elif isinstance(r, Feedback):
            feedback.append(r)
        elif r.reason in REJECTED:
            failures.append(r)
        else:
            skipped[r.reason] += 1
    if failures:
        # Translation stopped at the defect: every unit without a result was not taken. (Log
        # events of one call share a result, so for logs this may count a few taken records.)
        taken = len(facts) + len(feedback) + sum(skipped.values())
        out.rejected += max(len(failures), len(units) - taken)
        out.errors.append(
            f"{failures[0].reason}: {failures[0].detail} — a defect in lithify met these "
            f"{unit}; please report it with the request"
        )
    try:
        rows = preparer(facts, feedback)
    except (ValueError, TypeError):
        rows = _prepare_each(facts, feedback, preparer, out)  # to find the ones that cannot
    out.facts, out.feedback = len(rows.facts), len(rows.feedback)
    out.rows = rows if rows.facts or rows.feedback else None
    out.skipped = dict(skipped)
    for reason, template in _WARN.items():
        if skipped.get(reason):
            out.warnings.append(template.format(n=skipped[reason], unit=unit))
    if metadata_only:
        out.warnings.append(_METADATA_ONLY.format(n=metadata_only, unit=unit))
    return out


def _prepare_each(
    facts: list[InferenceCall],
    feedback: list[Feedback],
    preparer: Callable[..., Prepared],
    out: Processed,
) -> Prepared:
    """The rows of the items that can be stored, the others rejected one by one."""
    rows = Prepared([], [])
    for fact in facts:
        try:
            one = preparer([fact])
            rows.facts.extend(one.facts)
            rows.texts.extend(one.texts)
        except (ValueError, TypeError) as e:
            out.rejected += 1
            out.errors.append(f"a fact could not be stored: {e}")
    for item in feedback:
        try:
            rows.feedback.extend(prepare([], [item]).feedback)
        except (ValueError, TypeError) as e:
            out.rejected += 1
            out.errors.append(f"feedback could not be stored: {e}")
    return rows


# Bodies at least this large go to a worker in a memory file rather than through the pool's
# pipe; below it the file's system calls cost more than the pipe.
SHARE_FROM = 64 * 1024


def share(body: bytes) -> int | None:
    """A memory file (memfd, close-on-exec) holding ``body``, for ``process_shared`` in a worker;
    None where there are none (not Linux) or it cannot be made. The caller closes it."""
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    try:
        fd: int = create("lithify-body", os.MFD_CLOEXEC)
    except OSError:
        return None
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        os.close(fd)
        return None
    return fd


def process_shared(
    owner: int,
    fd: int,
    file_id: tuple[int, int],
    signal: str,
    kind: str,
    content_encoding: str,
    limit: int,
    preparer: Callable[..., Prepared] = prepare,
) -> Processed | None:
    """``process`` of a body the receiver (process ``owner``) left in a memory file (``share``)
    instead of sending it through the pool's pipe, where it is pickled, and read back 64 KiB at a
    time: measured, that cost a worker 12 µs of CPU a span, against 4 this way. None when the
    file cannot be read here (no /proc, another user): the receiver then sends the bytes.
    ``file_id`` (inode, size) makes sure the descriptor still names that file: a request whose
    caller went away has its file closed, and the number may be another file's by now."""
    try:
        with open(f"/proc/{owner}/fd/{fd}", "rb", buffering=0) as f:
            st = os.fstat(f.fileno())
            if (st.st_ino, st.st_size) != file_id:
                return None
            body = f.readall()
    except OSError:
        return None
    if len(body) != file_id[1]:
        return None
    return process(signal, kind, body, content_encoding, limit, preparer)


def _process_feedback(data: bytes) -> Processed:
    """A feedback document, or a JSON list of them (docs/serve.md)."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        return Processed(400, f"the body is not valid JSON: {e}")
    items = doc if isinstance(doc, list) else [doc]
    out = Processed(units=len(items), decoded_bytes=len(data))
    good: list[Feedback] = []
    for i, item in enumerate(items):
        r = feedback_doc.from_document(item, source="http")
        if isinstance(r, Feedback):
            good.append(r)
        else:
            out.rejected += 1
            if len(out.errors) < 20:
                out.errors.append(f"item {i}: {r.detail}")
    if items and not good:
        return Processed(400, "no valid feedback: " + "; ".join(out.errors), units=len(items))
    try:
        out.rows = prepare([], good) if good else None
    except (ValueError, TypeError) as e:
        return Processed(400, f"feedback could not be stored: {e}", units=len(items))
    out.feedback = len(good)
    return out


def _worker_init() -> None:
    """Worker processes: die with the receiver, and leave SIGINT/SIGTERM to it (it drains and
    then shuts the pool down; a Ctrl-C sent to the whole process group must not kill a worker
    in the middle of a request)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a receiver killed -9 takes us along


def _warm() -> int:
    time.sleep(0.05)  # long enough that each warm-up task lands on its own worker
    return os.getpid()
