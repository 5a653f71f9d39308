"""lithify's own fact files: one canonical fact or feedback fact per JSON line, read back exactly.

`lithify convert` writes them; `lithify import` and `lithify export --facts` read them. A line is
the fact's JSON as msgspec encodes the struct (fields in definition order, so a fact's line
starts with ``{"inference_call_id":`` and a feedback fact's with ``{"feedback_id":``): that head
tells a fact line from any other input.

JSON cannot carry every value a fact may hold: NaN and ±Infinity (an OTLP double attribute), and
strings with lone surrogates (as values or keys). A fact holding one is written as an escaped
line: such a value becomes the string ``lithify:esc:`` + ``NaN`` / ``Infinity`` /
``-Infinity``, or + the hex of the string's UTF-8 (``surrogatepass``); a string that itself
begins with the marker is escaped the same way, so the mapping is one-to-one; and the line ends
with the member ``"lithify:escaped":true`` (a fact's own last member is ``raw``, whose JSON never
ends that way), so plain lines are told apart without reading them. Integers of any size,
``-0.0`` and NUL are plain JSON. Facts without such values (nearly all) are plain lines, written
and read by msgspec straight from and into the structs.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from lithify.model import (
    Feedback,
    InferenceCall,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    ToolCallPart,
    ToolCallResponsePart,
)

MARK = "lithify:esc:"
ESCAPED = "lithify:escaped"
_ESCAPED_END = b',"' + ESCAPED.encode() + b'":true}'
_FLOATS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
# How a fact line starts; blanks allowed, newlines not (a pretty-printed document is not a line).
_HEAD = re.compile(rb'[ \t]*\{[ \t]*"(inference_call_id|feedback_id)"[ \t]*:')

_json = msgspec.json.Encoder()
_any = msgspec.json.Decoder()
_decoders: dict[bytes, tuple[type[InferenceCall] | type[Feedback], Any]] = {
    b"inference_call_id": (InferenceCall, msgspec.json.Decoder(InferenceCall)),
    b"feedback_id": (Feedback, msgspec.json.Decoder(Feedback)),
}

Fact = InferenceCall | Feedback


class FactLineError(ValueError):
    """A line that starts like a fact but is not one (corrupt, cut short, wrong field types)."""


class InputError(Exception):
    """An input that could not be read at all: a fact file, or (``ingest.files``) any input."""


def write_line(obj: Fact, buf: bytearray, *, finite: bool = False) -> None:
    """Append ``obj``'s line, newline included, to ``buf``. ``finite``: the caller knows that
    ``obj`` holds no NaN or ±Infinity (its source could make none), and the search for them, a
    tenth of a conversion, is skipped."""
    start = len(buf)
    if finite or not _non_finite(obj):
        try:
            _json.encode_into(obj, buf, -1)
            buf += b"\n"
            return
        except UnicodeEncodeError:  # a lone surrogate
            del buf[start:]
    doc = _escape(msgspec.to_builtins(obj))
    doc[ESCAPED] = True
    _json.encode_into(doc, buf, -1)
    buf += b"\n"


def encode_line(obj: Fact) -> bytes:
    """``obj``'s line, newline included."""
    buf = bytearray()
    write_line(obj, buf)
    return bytes(buf)


def fact_json(fact: Fact) -> bytes:
    """The JSON a fact's digest is of (an export's ``facts.sha256``, and what a store keeps of
    each fact): msgspec's encoding, NaN and ±Infinity as null; a fact with a lone surrogate,
    which JSON cannot hold, as its escaped line without the newline."""
    try:
        return _json.encode(fact)
    except UnicodeEncodeError:
        return encode_line(fact)[:-1]


def fact_sha256(fact: Fact) -> bytes:
    """The SHA-256 of ``fact_json``: what a store keeps of each fact it writes."""
    return hashlib.sha256(fact_json(fact)).digest()


def _non_finite(obj: Fact) -> bool:
    """Whether ``obj`` holds NaN or ±Infinity, which msgspec's JSON encoder silently writes as
    null. Only ``duration_ms`` and the values typed ``Any`` can."""
    if type(obj) is Feedback:
        return _bad([obj.value, obj.raw])
    roots = [obj.duration_ms, obj.raw, obj.request]
    for messages in (obj.input_messages, obj.output_messages):
        for m in messages:
            for p in m.parts:
                t = type(p)
                if t is ToolCallPart:
                    roots.append(p.arguments)
                elif t is ToolCallResponsePart:
                    roots.append(p.result)
                elif t is ServerToolCallPart:
                    roots.append(p.server_tool_call)
                elif t is ServerToolCallResponsePart:
                    roots.append(p.server_tool_call_response)
    for tool in obj.tools:
        roots.append(tool.parameters)
        if tool.builtin is not None:
            roots.append(tool.builtin)
    return _bad(roots)


def _bad(container: dict[str, Any] | list[Any]) -> bool:
    # On every fact's way out, so as few calls as can be: one per non-empty container, strings
    # (most of a fact) skipped first. x - x is NaN (true) for NaN and ±Infinity, else 0.0.
    for x in container.values() if type(container) is dict else container:
        t = type(x)
        if t is str:
            continue
        if t is float:
            if x - x:
                return True
        elif (t is dict or t is list) and x and _bad(x):
            return True
    return False


def _escape_str(s: str) -> str:
    return MARK + s.encode("utf-8", "surrogatepass").hex()


def _escape(value: Any) -> Any:
    t = type(value)
    if t is str:
        if value.startswith(MARK):
            return _escape_str(value)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return _escape_str(value)
        return value
    if t is float:
        if value != value:
            return MARK + "NaN"
        if value in (float("inf"), float("-inf")):
            return MARK + ("Infinity" if value > 0 else "-Infinity")
        return value
    if t is dict:
        return {_escape(k): _escape(v) for k, v in value.items()}
    if t is list:
        return [_escape(v) for v in value]
    return value


def _unescape_str(s: str, key: bool) -> Any:
    rest = s[len(MARK) :]
    if rest in _FLOATS and not key:
        return _FLOATS[rest]
    try:
        return bytes.fromhex(rest).decode("utf-8", "surrogatepass")
    except ValueError:
        raise FactLineError(f"a malformed escaped value {s[:40]!r}") from None


def _unescape(value: Any) -> Any:
    if type(value) is str:
        return _unescape_str(value, False) if value.startswith(MARK) else value
    if type(value) is dict:
        return {
            (_unescape_str(k, True) if k.startswith(MARK) else k): _unescape(v)
            for k, v in value.items()
        }
    if type(value) is list:
        return [_unescape(v) for v in value]
    return value


def is_fact_line(data: bytes) -> bool:
    """Whether ``data`` starts like a fact line (it may still be another document that names a
    call first, such as a feedback document: ``decode_line`` tells)."""
    return _HEAD.match(data) is not None


def decode_line(line: bytes) -> Fact | None:
    """The fact or feedback fact on ``line`` exactly as it was written; None when the line is
    not one (any other input lithify reads). Raises ``FactLineError`` for a line that has a
    fact's fields and no more but is not a valid fact."""
    m = _HEAD.match(line)
    if m is None:
        return None
    kind, typed = _decoders[m.group(1)]
    try:
        if not line[-len(_ESCAPED_END) - 8 :].rstrip().endswith(_ESCAPED_END):
            return typed.decode(line)  # type: ignore[no-any-return]
        doc = _any.decode(line)
        del doc[ESCAPED]
        return msgspec.convert(_unescape(doc), kind)
    except msgspec.DecodeError as e:  # ValidationError included
        error = str(e).split("\n", 1)[0][:200]
    try:
        doc = _any.decode(line)
    except msgspec.DecodeError as e:
        raise FactLineError(f"not JSON ({str(e)[:200]})") from None
    # A feedback document may name its target call first ({"inference_call_id": …, "name": …,
    # "value": …}): keys a fact does not have make it another document, not a corrupt fact.
    if isinstance(doc, dict) and doc.keys() - {ESCAPED} <= set(kind.__struct_fields__):
        raise FactLineError(
            f"not a {'fact' if kind is InferenceCall else 'feedback fact'}: {error}"
        )
    return None


BOM = b"\xef\xbb\xbf"


def without_bom(data: bytes) -> bytes:
    """A file's first bytes without the UTF-8 byte order mark Windows tools write (PowerShell's
    ``Out-File``, Notepad): JSON forbids it, and it would cost the file's first document."""
    return data[3:] if data.startswith(BOM) else data


def open_file(path: Path) -> IO[bytes]:
    """``path`` for reading, gunzipped when it ends in ``.gz`` (what every reader of lithify
    takes .gz to mean); ``InputError`` when it cannot be opened."""
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rb")
        return open(path, "rb")
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from None


def read_facts(path: Path) -> Iterator[tuple[str, Fact]]:
    """The facts and feedback facts of a fact file (plain or gzipped), each with its file and
    line; raises ``InputError`` at the first line that is not one."""
    if not path.is_file():
        raise InputError(f"{path}: {'no such file' if not path.exists() else 'not a regular file'}")
    with open_file(path) as fh:
        try:
            for lineno, line in enumerate(fh, 1):
                if lineno == 1:
                    line = without_bom(line)
                if not line.strip():
                    continue
                try:
                    fact = decode_line(line)
                except FactLineError as e:
                    raise InputError(f"{path}:{lineno}: {e}") from None
                if fact is None:
                    raise InputError(f"{path}:{lineno}: not a fact line") from None
                yield f"{path}:{lineno}", fact
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            raise InputError(f"{path}: {e}") from None
