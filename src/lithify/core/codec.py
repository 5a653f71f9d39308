"""Lossless bytes for facts, and the escaping of values into query columns.

A stored fact is one tag byte and a msgpack body. msgpack holds NUL, NaN, ±Infinity, ``-0.0``,
bytes and 64-bit integers as they are; what it cannot hold (strings with lone surrogates, as
text or as map keys, and integers beyond 64 bits) takes the rare escaped path, where such
values become msgpack extension values. Facts without them — nearly all — pay for one plain
msgspec encode and decode.
"""

from __future__ import annotations

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
