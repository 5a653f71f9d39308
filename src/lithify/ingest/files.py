"""Reading input files into translator results, one unit at a time, in constant memory.

A unit is what one translator call sees: a JSONL line, a whole JSON document, an OTLP protobuf
request, an SSE body. A line of lithify's own fact files (core/factfile.py) is a unit too, read
back as the fact it holds, not translated. A unit that cannot be decoded becomes a
``Skip("undecodable")`` that names the file and line; a file that cannot be read at all raises
``InputError``.

An input is a local file, a file under a URL (ingest/remote.py), or a ``LineRange``: the lines
of a JSON lines input that start in a range of its bytes, one task's share of a large input
(docs/scale.md, Splitting one large input).
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypeAlias

import msgspec

from lithify.core.factfile import (
    FactLineError,
    InputError,
    decode_line,
    is_fact_line,
    open_file,
    without_bom,
)
from lithify.core.text import loads
from lithify.ingest.remote import RemoteFile, expand_url, is_url
from lithify.model import Skip
from lithify.translate import (
    Result,
    _guard,
    gemini,
    translate_document,
    translate_protobuf,
    translate_stream,
)
from lithify.translate.otlp import (
    OTLPDecodeError,
    decode_json_spans,
    load_json,
    non_finite_decoded,
)
from lithify.translate.provider import translate_exchange
from lithify.translate.sse import looks_like_sse
from lithify.translate.telemetry import translate_spans

PROTOBUF_SUFFIXES = {".pb", ".binpb", ".protobuf"}
JSONL_SUFFIXES = {".jsonl", ".ndjson"}
SSE_SUFFIXES = {".sse"}


class Located(msgspec.Struct, frozen=True):
    location: str
    result: Result
    # The result holds no NaN or ±Infinity: its unit was decoded the typed OTLP/JSON way, which
    # made none (a fact file's writer then need not search it for them).
    finite: bool = False


class LineRange(msgspec.Struct):
    """The lines of a JSON lines input ``file`` that start in its bytes ``[start, end)``
    (``owned_lines``), numbered from 1 at the first of them. Once read, ``lines`` is how many
    it held, blank ones included: the next range's first line is that many lines on."""

    file: Path | RemoteFile
    start: int
    end: int
    lines: int = 0

    def __str__(self) -> str:
        return str(self.file)


Input: TypeAlias = Path | RemoteFile | LineRange


def expand(paths: Iterable[str | Input]) -> Iterator[Input]:
    """Files in the order given; folders contribute their files in sorted order, recursively,
    and so do URLs (``remote.expand_url``); a listed file or a ``LineRange`` stays as it is.
    Raises ``remote.NoFilesystem`` for a URL that no installed filesystem reads."""
    for given in paths:
        if isinstance(given, RemoteFile | LineRange):
            yield given
            continue
        if is_url(given):
            yield from expand_url(str(given))
            continue
        p = Path(given)
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for name in sorted(files):
                    if not name.startswith("."):
                        yield Path(root) / name
        else:
            yield p


def _suffix(path: Path | RemoteFile) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def _decode_error(e: Exception) -> str:
    return str(e).split("\n", 1)[0][:200]


Progress = Callable[[int], None]

_TRACE_FORMATS = frozenset({"auto", "otlp", "otlp-traces"})


def translate_json(data: bytes, fmt: str = "auto") -> Iterator[Result]:
    """The results of one JSON document (a JSONL line, a file, a request body): what
    ``translate_document`` gives for it decoded. An OTLP/JSON trace request in the exporters'
    form is decoded straight from its bytes, the fast way; text orjson refuses (a lone surrogate
    escape, bytes that are not UTF-8) is read tolerantly and repaired unit by unit, as the
    receiver does. Raises OTLPDecodeError for bytes that are not JSON."""
    return _translate_json(data, fmt)[0]


def _translate_json(data: bytes, fmt: str) -> tuple[Iterator[Result], bool]:
    """``translate_json``, and whether its results are known to hold no NaN or ±Infinity."""
    if fmt in _TRACE_FORMATS:
        non_finite_decoded()  # cleared: what the decode below makes is what counts
        spans = decode_json_spans(data)
        if spans is not None:
            return _guard(translate_spans(spans)), not non_finite_decoded()
    doc, repair = load_json(data)
    return translate_document(doc, fmt, repair=repair), False


_BLANK_START = (b"", b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c")


def _lines(
    path: Input, fh: Iterable[bytes], fmt: str, progress: Progress | None
) -> Iterator[Located]:
    counted = path if isinstance(path, LineRange) else None
    for lineno, line in enumerate(fh, 1):
        if counted is not None:
            counted.lines = lineno
        if lineno == 1:
            line = without_bom(line)
        if progress is not None:
            progress(len(line))
        # A line that starts with neither blank is not blank: no copy of it made by strip().
        if line[:1] in _BLANK_START and not line.strip():
            continue
        loc = f"{path}:{lineno}"
        if fmt == "auto":
            try:
                fact = decode_line(line)
            except FactLineError as e:
                yield Located(loc, Skip("undecodable", f"line {lineno}: {e}", loc))
                continue
            if fact is not None:
                yield Located(loc, fact)
                continue
        try:
            results, finite = _translate_json(line, fmt)
        except OTLPDecodeError as e:
            why = _decode_error(e).removeprefix("the body is not valid JSON: ")
            yield Located(loc, Skip("undecodable", f"line {lineno}: not JSON ({why})", loc))
            continue
        for r in results:
            yield Located(loc, r, finite)


def _read_all(path: Path | RemoteFile, fh: IO[bytes]) -> bytes:
    try:
        return without_bom(fh.read())
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise InputError(f"{path}: {e}") from None


def owned_lines(fh: IO[bytes], start: int, end: int, *, piece: int = 1 << 20) -> Iterator[bytes]:
    """The lines of the seekable file ``fh`` that start in its bytes ``[start, end)``, each
    whole (the last may run past ``end``): a line starts at 0 or right after a newline. Ranges
    that cover a file without overlapping give each of its lines (as iterating over the file
    gives them) to exactly one range."""
    if start > 0:
        fh.seek(start - 1)
        # The rest of the line holding byte start - 1 is an earlier range's: skipped in
        # pieces, so that a line longer than memory is never held to be skipped.
        while (skipped := fh.readline(piece)) and not skipped.endswith(b"\n"):
            pass
        at = fh.tell()
    else:
        fh.seek(0)
        at = 0
    while at < end:
        line = fh.readline()
        if not line:
            return
        yield line
        at += len(line)


def _open(path: Path | RemoteFile) -> IO[bytes]:
    if isinstance(path, Path):
        return open_file(path)
    try:
        return path.open()
    except OSError as e:
        raise InputError(f"{path}: {e}") from None


def _check(path: Path | RemoteFile) -> None:
    """``InputError`` for an input that is not a readable regular file."""
    if isinstance(path, RemoteFile):
        if path.error is not None:
            raise InputError(f"{path}: {path.error}")
        if path.size is None:
            raise InputError(f"{path}: no such file")
        return
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if not path.is_file():
        raise InputError(f"{path}: not a regular file")


def splittable(path: Path | RemoteFile) -> bool:
    """Whether ``path`` is read line by line from a seekable file: JSON lines, not gzipped
    (a gzip stream can only be read from its start)."""
    return _suffix(path) in JSONL_SUFFIXES and path.suffix != ".gz"


def read_file(
    path: Input, fmt: str = "auto", progress: Progress | None = None
) -> Iterator[Located]:
    """Every translator result of one input, in file order. ``progress`` is told of bytes read."""
    if isinstance(path, LineRange):
        if not splittable(path.file):
            raise ValueError(f"{path}: only plain JSON lines are read by ranges")
        _check(path.file)
        with _open(path.file) as fh:
            try:
                lines = owned_lines(fh, path.start, path.end)
                yield from _lines(path, lines, fmt, progress)
            except (OSError, EOFError) as e:
                raise InputError(f"{path}: {e}") from None
        return
    _check(path)
    suffix = _suffix(path)
    with _open(path) as fh:
        if suffix in JSONL_SUFFIXES:
            try:
                yield from _lines(path, fh, fmt, progress)
            except (OSError, EOFError, gzip.BadGzipFile) as e:
                raise InputError(f"{path}: {e}") from None
            return
        data = _read_all(path, fh)
    if progress is not None:
        progress(len(data))
    loc = str(path)
    if suffix in PROTOBUF_SUFFIXES:
        for r in translate_protobuf(data, fmt):
            yield Located(loc, r)
        return
    head = data.lstrip()[:1]
    if suffix in SSE_SUFFIXES or (head not in (b"{", b"[") and _is_sse(data)):
        # Bytes that are not UTF-8 as lone surrogates: the translator replaces and counts them.
        yield Located(loc, translate_stream(data.decode("utf-8", "surrogateescape"), fmt))
        return
    if not head:
        yield Located(loc, Skip("empty", "empty file", loc))
        return
    if head in (b"{", b"["):
        if fmt == "auto" and is_fact_line(data):
            # A fact file named otherwise than .jsonl (`convert -o facts.json`): line by line.
            yield from _lines(path, io.BytesIO(data), fmt, None)
            return
        spans = None
        if fmt in _TRACE_FORMATS:
            non_finite_decoded()  # cleared: what the decode below makes is what counts
            spans = decode_json_spans(data)
        if spans is not None:
            finite = not non_finite_decoded()
            for r in _guard(translate_spans(spans)):
                yield Located(loc, r, finite)
            return
        try:
            doc, repair = load_json(data)
        except OTLPDecodeError:
            # The Collector's file exporter writes one request per line, even in `.json` files.
            yield from _lines(path, io.BytesIO(data), fmt, None)
            return
        if is_chunk_array(doc):
            # Gemini without `alt=sse` streams one JSON array of response chunks: one response.
            yield Located(loc, translate_exchange(None, doc))
            return
        docs = (
            doc
            if isinstance(doc, list) and doc and all(isinstance(d, dict) for d in doc)
            else [doc]
        )
        for d in docs:
            for r in translate_document(d, fmt, repair=repair):
                yield Located(loc, r)
        return
    if suffix in (".json", ".txt"):
        yield Located(loc, Skip("undecodable", "not JSON", loc))
        return
    for r in translate_protobuf(data, fmt):
        yield Located(loc, r)


def is_chunk_array(doc: Any) -> bool:
    return (
        isinstance(doc, list)
        and len(doc) > 0
        and all(isinstance(d, dict) and gemini.looks_like_response(d) for d in doc)
    )


def _is_sse(data: bytes) -> bool:
    return looks_like_sse(data[:256].decode("utf-8", "replace"))


def load_body(path: Path) -> Any:
    """A request or response body for a file pair: JSON, or SSE text for a streamed response."""
    with open_file(path) as fh:
        data = _read_all(path, fh)
    if not data.strip():
        return None
    if data.lstrip()[:1] in (b"{", b"["):
        try:
            return loads(data)[0]  # lone surrogate escapes read: the translator fixes the text
        except (ValueError, RecursionError) as e:
            raise InputError(f"{path}: not JSON ({_decode_error(e)})") from None
    text = data.decode("utf-8", "surrogateescape")  # bad bytes: replaced and counted later
    if looks_like_sse(text):
        return text
    raise InputError(f"{path}: neither JSON nor an SSE stream")


def read_pair(request: Path | None, response: Path | None, fmt: str = "auto") -> Located:
    """One exchange from a request file and a response file (either may be absent)."""
    req = load_body(request) if request else None
    resp = load_body(response) if response else None
    loc = " + ".join(str(p) for p in (request, response) if p)
    hint = fmt if fmt not in ("auto", "exchange") else "auto"
    return Located(loc, translate_exchange(req, resp, fmt=hint))
