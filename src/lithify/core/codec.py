"""Lossless bytes for facts, and the escaping of values into query columns.

A stored fact is one tag byte and a msgpack body. msgpack holds NUL, NaN, ±Infinity, ``-0.0``,
bytes and 64-bit integers as they are; what it cannot hold (strings with lone surrogates, as
text or as map keys, and integers beyond 64 bits) takes the rare escaped path, where such
values become msgpack extension values. Facts without them — nearly all — pay for one plain
msgspec encode and decode.
"""

from __future__ import annotations

import binascii
import hashlib
import re
import threading
from collections.abc import Callable, Mapping
from datetime import date, datetime, time, timedelta
from typing import Any, Generic, TypeVar, overload

import msgspec
from msgspec.msgpack import Ext

from lithify.model import InferenceCall, Message, ToolDefinition

_PLAIN = 1  # msgpack of the struct, decoded straight into its type
_ESCAPED = 2  # msgpack of the struct's builtins with extension values, then converted

_EXT_STR = 1  # a string with lone surrogates: its UTF-8 with surrogatepass
_EXT_INT = 2  # an integer outside msgpack's range: its decimal text
_EXT_MAP = 3  # a map with a key of the above: msgpack of its [key, value] pairs

_MSGPACK_MIN = -(2**63)
_MSGPACK_MAX = 2**64 - 1

_encoder = msgspec.msgpack.Encoder()
T = TypeVar("T")
# Types msgpack holds natively: keep them out of to_builtins' lossy string forms.
_NATIVE = (bytes, bytearray, memoryview, datetime, date, time, timedelta)


class CorruptFact(ValueError):
    """Stored bytes that are not a fact this codec wrote."""


def _escape(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return Ext(_EXT_STR, value.encode("utf-8", "surrogatepass"))
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if _MSGPACK_MIN <= value <= _MSGPACK_MAX:
            return value
        return Ext(_EXT_INT, str(value).encode())
    if isinstance(value, list | tuple):
        return [_escape(v) for v in value]
    if isinstance(value, dict):
        items = [(_escape(k), _escape(v)) for k, v in value.items()]
        if any(isinstance(k, Ext) for k, _ in items):
            # Ext values are not hashable, so such keys cannot stay map keys.
            return Ext(_EXT_MAP, _encoder.encode([[k, v] for k, v in items]))
        return dict(items)
    return value


def _ext_hook(code: int, data: memoryview) -> Any:
    if code == _EXT_STR:
        return bytes(data).decode("utf-8", "surrogatepass")
    if code == _EXT_INT:
        return int(bytes(data))
    if code == _EXT_MAP:
        pairs = msgspec.msgpack.decode(data, ext_hook=_ext_hook)
        return {k: v for k, v in pairs}
    raise CorruptFact(f"unknown extension type {code}")


def encode(obj: msgspec.Struct) -> bytes:
    """Bytes that decode to a value equal to ``obj`` in every leaf (NaN, -0.0, bool vs int)."""
    try:
        return bytes((_PLAIN,)) + _encoder.encode(obj)
    except (UnicodeEncodeError, OverflowError):
        builtins = msgspec.to_builtins(obj, builtin_types=_NATIVE)
        return bytes((_ESCAPED,)) + _encoder.encode(_escape(builtins))


class Decoder(Generic[T]):
    """Decodes what ``encode`` wrote for one struct type."""

    def __init__(self, type_: type[T]) -> None:
        self._type = type_
        self._plain = msgspec.msgpack.Decoder(type_)
        self._any = msgspec.msgpack.Decoder(ext_hook=_ext_hook)

    def decode(self, data: bytes | memoryview) -> T:
        view = memoryview(data)
        if not view:
            raise CorruptFact("empty fact body")
        try:
            if view[0] == _PLAIN:
                return self._plain.decode(view[1:])
            if view[0] == _ESCAPED:
                return msgspec.convert(self._any.decode(view[1:]), self._type)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as e:
            raise CorruptFact(str(e)) from e
        raise CorruptFact(f"unknown codec tag {view[0]}")


# Query columns are plain text for indexes and filters. PostgreSQL text holds neither NUL nor
# (as psycopg encodes it) lone surrogates, and JSONB no \u0000: such values, and clean values
# that happen to start with the marker, are stored escaped. The mapping is injective, so
# uniqueness and equality filters mean the same on the column as on the fact.
_MARK = "lithify:esc:"


@overload
def col(value: str) -> str: ...
@overload
def col(value: None) -> None: ...
def col(value: str | None) -> str | None:
    """The column form of a string: itself, unless it cannot be stored as text."""
    if value is None:
        return None
    if "\x00" not in value and not value.startswith(_MARK):
        if value.isascii():  # ids, models, timestamps: the common case, no encode needed
            return value
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return value
    return _MARK + value.encode("utf-8", "surrogatepass").hex()


def uncol(value: str | None) -> str | None:
    """The string a column value stands for."""
    if value is None or not value.startswith(_MARK):
        return value
    return bytes.fromhex(value[len(_MARK) :]).decode("utf-8", "surrogatepass")


def _shell_type() -> type[msgspec.Struct]:
    """``InferenceCall`` with its input messages and tools left as raw msgpack: the parts a
    session's facts repeat, decoded apart (``FactReader``)."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    names: dict[str, str] = {}
    for f in msgspec.structs.fields(InferenceCall):
        names[f.name] = f.encode_name
        typ = f.type
        if f.name == "input_messages":
            typ = list[msgspec.Raw]
        elif f.name == "tools":
            typ = msgspec.Raw
        if f.default_factory is not msgspec.NODEFAULT:
            fields.append((f.name, typ, msgspec.field(default_factory=f.default_factory)))
        elif f.default is not msgspec.NODEFAULT:
            fields.append((f.name, typ, f.default))
        else:
            fields.append((f.name, typ))
    # Decoded as InferenceCall is: the same names on the wire, the same handling of the rest.
    config = InferenceCall.__struct_config__
    return msgspec.defstruct(
        "_FactShell",
        fields,
        kw_only=True,
        rename=names,
        array_like=config.array_like,
        forbid_unknown_fields=config.forbid_unknown_fields,
        tag=config.tag,
        tag_field=config.tag_field,
    )


class FactReader:
    """Decodes the facts of one read stream, decoding what a fact repeats of the one before once.

    A session's calls replay the conversation so far — call k's input is call k-1's input and a
    few new messages — and offer the same tools. Read grouped by session, most of a fact is then
    bytes the previous fact held too: those messages and tools are taken from the previous fact
    (equal bytes decode to equal values), so reading a session costs about its new content. The
    facts share those values, as immutable facts may. Equal to ``Decoder(InferenceCall)``.
    """

    def __init__(self) -> None:
        self._full = Decoder(InferenceCall)
        self._shell = msgspec.msgpack.Decoder(_SHELL)
        self._message = msgspec.msgpack.Decoder(Message)
        self._tools = msgspec.msgpack.Decoder(list[ToolDefinition])
        self._prev_raw: list[msgspec.Raw] = []
        self._prev_messages: list[Message] = []
        self._prev_tools: tuple[msgspec.Raw, list[ToolDefinition]] | None = None

    def decode(self, data: bytes) -> InferenceCall:
        view = memoryview(data)
        if not view or view[0] != _PLAIN:
            return self._full.decode(data)
        try:
            shell = self._shell.decode(view[1:])
            raws: list[msgspec.Raw] = shell.input_messages
            prev_raw, prev = self._prev_raw, self._prev_messages
            messages: list[Message] = []
            for i, raw in enumerate(raws):
                # A replay keeps its place: compare with the message at the same index.
                if i < len(prev_raw) and prev_raw[i] == raw:
                    messages.append(prev[i])
                else:
                    messages.append(self._message.decode(raw))
            tools_raw: msgspec.Raw = shell.tools
            last = self._prev_tools
            if last is not None and last[0] == tools_raw:
                tools = last[1]
            else:
                tools = self._tools.decode(tools_raw)
                self._prev_tools = (tools_raw, tools)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as e:
            raise CorruptFact(str(e)) from e
        self._prev_raw, self._prev_messages = raws, messages
        shell.input_messages = messages
        shell.tools = tools
        return InferenceCall(**msgspec.structs.asdict(shell))


_SHELL = _shell_type()


# -- Blobs -------------------------------------------------------------------------------------
# Agents re-send their whole conversation on every call, so the same image arrives in many
# facts, and in each one twice or more (the canonical part's base64 and the source's spelling in
# `raw`). A store keeps each distinct blob once: ``split_blobs`` cuts every long base64 string
# out of a fact's codec bytes (a bare base64 string, or the payload of a ``data:…;base64,`` URL),
# leaving a reference to the SHA-256 of its decoded bytes; ``join_blobs`` splices the base64 back.
# The cut is of bytes, not values: the skeleton plus the re-encoded runs are the codec bytes
# again, byte for byte, and only a run that re-encodes to itself (canonical padded base64 on one
# line, in the standard or the URL-safe alphabet) is cut: any other spelling stays whole.

BLOB_MIN = 1024  # base64 runs at least this long are kept as blobs (768 decoded bytes)
_SPLICED = 3  # tag of a stored body: msgpack [skeleton, [[offset, sha256], ...]]

# Candidates are msgpack str16 / str32 headers (found with bytes.find, which is memchr-fast where
# a regex scan is not) whose string is at least ``min_len`` long and opens with base64 or a data
# URL head; the run must then end where the string does and re-encode to itself. A header byte
# met inside other bytes can at worst cut a run that is not a whole string: still exact, being a
# byte cut that the join puts back.
# One anchored match per header: a text string fails it at its first space or punctuation.
_CANDIDATE = re.compile(
    rb"(?:\xda(..)|\xdb(....))(data:[\x20-\x2b\x2d-\x7e]{0,200}?;base64,)?[A-Za-z0-9+/_-]{16}",
    re.DOTALL,
)
# Each reference: (offset in the skeleton, SHA-256, alphabet: 0 standard, 1 URL-safe).
Ref = tuple[int, bytes, int]
_blob_refs = msgspec.msgpack.Decoder(tuple[bytes, list[Ref]])
# The URL-safe alphabet (RFC 4648 §5; pydantic's and so google-genai's JSON bytes) spells `+/`
# as `-_`: such runs are decoded and re-spelled through these tables.
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")


def split_blobs(body: bytes, min_len: int = BLOB_MIN) -> tuple[bytes, dict[bytes, bytes]]:
    """``body`` (codec bytes) with its long canonical base64 runs cut out, and the decoded
    bytes of those runs by SHA-256; ``body`` itself and ``{}`` when it has none."""
    if len(body) < min_len:  # the common fact: nothing to look for
        return body, {}
    blobs: dict[bytes, bytes] = {}
    cuts: list[tuple[int, int, bytes, int]] = []  # (start, end, sha256, alphabet) of each run
    total = len(body)
    for marker, width in ((b"\xda", 2), (b"\xdb", 4)):  # str16 headers, then str32 ones
        head = body.find(marker)
        while head >= 0:
            after = head + 1
            m = _CANDIDATE.match(body, head)
            if m is not None:
                end = head + 1 + width + int.from_bytes(m.group(1) or m.group(2), "big")
                start = m.end() - 16  # the base64 run, after a data URL's head
                found = _blob(body, start, end, min_len, blobs) if end <= total else None
                if found is not None:
                    cuts.append((start, end, *found))
                    after = end
            head = body.find(marker, after)
    if not cuts:
        return body, {}
    cuts.sort()
    view = memoryview(body)
    pieces: list[memoryview] = []
    refs: list[Ref] = []
    prev = cut = 0
    for start, end, sha, alphabet in cuts:
        if start < prev:
            continue  # overlaps a run cut already: only where the bytes are no msgpack string
        pieces.append(view[prev:start])
        cut += start - prev
        refs.append((cut, sha, alphabet))
        prev = end
    pieces.append(view[prev:])
    return bytes((_SPLICED,)) + _encoder.encode((b"".join(pieces), refs)), blobs


def _blob(
    body: bytes, start: int, end: int, min_len: int, blobs: dict[bytes, bytes]
) -> tuple[bytes, int] | None:
    """The SHA-256 of the bytes the run ``body[start:end]`` spells (kept in ``blobs``) and its
    alphabet, when it is long canonical base64; else None."""
    if end - start < min_len:
        return None
    key = (end - start, body[start : start + 64], body[end - 64 : end])
    known = _runs.get(key)
    run = body[start:end]
    if known is not None and known[0] == run:  # one memcmp for a decode, encode and hash
        blobs[known[1]] = known[2]
        return known[1], known[3]
    alphabet, standard = 0, run
    if b"-" in run or b"_" in run:
        if b"+" in run or b"/" in run:
            return None  # two alphabets: no base64 re-spells it
        alphabet, standard = 1, run.translate(_FROM_URLSAFE)
    try:
        data = binascii.a2b_base64(standard, strict_mode=True)
    except binascii.Error:
        return None
    if binascii.b2a_base64(data, newline=False) != standard:
        return None  # not its canonical spelling: kept whole
    sha = hashlib.sha256(data).digest()
    blobs[sha] = data
    _runs.put(key, (run, sha, data, alphabet))
    return sha, alphabet


class _Runs:
    """The runs cut lately in this process, with their hash and bytes: a session's next call
    holds the images of the calls before, and a memcmp then stands for a base64 decode, an
    encode and a SHA-256 (about 50 times the cost). Bounded by the bytes it holds."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._size = 0
        self._items: dict[tuple[int, bytes, bytes], tuple[bytes, bytes, bytes, int]] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[int, bytes, bytes]) -> tuple[bytes, bytes, bytes, int] | None:
        return self._items.get(key)

    def put(self, key: tuple[int, bytes, bytes], value: tuple[bytes, bytes, bytes, int]) -> None:
        size = len(value[0]) + len(value[2])
        if size > self._limit:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._size -= len(old[0]) + len(old[2])
            self._items[key] = value
            self._size += size
            while self._size > self._limit:
                first = next(iter(self._items))
                gone = self._items.pop(first)
                self._size -= len(gone[0]) + len(gone[2])

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._size = 0


_runs = _Runs(48 << 20)


def forget_runs() -> None:
    """Empty this process's memory of the runs it cut (a benchmark's run starts cold)."""
    _runs.clear()


def blob_refs(stored: bytes | memoryview) -> list[bytes]:
    """The SHA-256s a stored body refers to, each once, in order of first use."""
    view = memoryview(stored)
    if not view or view[0] != _SPLICED:
        return []
    _, refs = spliced(view)
    return list(dict.fromkeys(sha for _, sha, _ in refs))


def spliced(view: memoryview) -> tuple[bytes, list[Ref]]:
    """The skeleton and the (offset, SHA-256, alphabet) references of a body ``split_blobs``
    cut."""
    try:
        return _blob_refs.decode(view[1:])
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise CorruptFact(f"unreadable blob references: {e}") from e


class BlobCache:
    """The base64 of recently joined blobs, up to ``limit`` bytes: a session's calls repeat
    the same images, so a stream of reads fetches and encodes each about once."""

    def __init__(self, limit: int = 64 << 20) -> None:
        self._limit = limit
        self._size = 0
        self._items: dict[bytes, bytes] = {}  # insertion order: oldest first

    def get(self, sha: bytes) -> bytes | None:
        found = self._items.pop(sha, None)
        if found is not None:
            self._items[sha] = found  # most recently used last
        return found

    def put(self, sha: bytes, encoded: bytes) -> None:
        if sha in self._items or len(encoded) > self._limit:
            return
        self._items[sha] = encoded
        self._size += len(encoded)
        while self._size > self._limit:
            oldest = next(iter(self._items))
            self._size -= len(self._items.pop(oldest))


def join_blobs(
    stored: bytes,
    fetch: Callable[[list[bytes]], Mapping[bytes, bytes]],
    cache: BlobCache | None = None,
) -> bytes:
    """The codec bytes of a stored body: ``stored`` itself, or its skeleton with the base64 of
    each referenced blob spliced back (``fetch``: decoded bytes by SHA-256, for those asked)."""
    view = memoryview(stored)
    if not view or view[0] != _SPLICED:
        return stored
    skeleton, refs = spliced(view)
    standard: dict[bytes, bytes] = {}  # the standard base64 of each blob referred to
    missing: list[bytes] = []
    for _, sha, _ in refs:
        if sha in standard:
            continue
        hit = cache.get(sha) if cache is not None else None
        if hit is None:
            missing.append(sha)
            standard[sha] = b""
        else:
            standard[sha] = hit
    if missing:
        found = fetch(missing)
        for sha in missing:
            data = found.get(sha)
            if data is None:
                raise CorruptFact(f"blob {sha.hex()} is missing from the store")
            standard[sha] = binascii.b2a_base64(data, newline=False)
            if cache is not None:
                cache.put(sha, standard[sha])
    urlsafe: dict[bytes, bytes] = {}
    out = bytearray()
    prev = 0
    for at, sha, alphabet in refs:
        out += skeleton[prev:at]
        if alphabet == 0:
            out += standard[sha]
        elif alphabet == 1:
            if sha not in urlsafe:
                urlsafe[sha] = standard[sha].translate(_TO_URLSAFE)
            out += urlsafe[sha]
        else:
            raise CorruptFact(f"unknown base64 alphabet {alphabet}")
        prev = at
    out += skeleton[prev:]
    return bytes(out)
