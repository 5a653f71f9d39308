"""The text index's side of a write: what a fact's messages say, as the index holds it
(``text_note``, made where rows are built: the receiver's worker processes), and which of them
are new to their session (``SessionText``, in the writer)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import orjson

from lithify.core import codec
from lithify.model import (
    InferenceCall,
    Message,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
)

_fact_decoder = codec.Decoder(InferenceCall)

# Documents are the pieces of text new to their session, casefolded, joined by a separator no
# needle the index answers holds; a message is known by a digest of its bytes.
DIGEST = 8
SEP = "\x1f"
_HEAD = 4 + DIGEST


def _json(value: Any) -> str:
    """JSON text of a value (integers past 64 bits, which orjson refuses, as the standard
    library writes them)."""
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:
        return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))


def message_text(messages: Iterable[Message]) -> Iterable[str]:
    """The searchable text of messages: text and reasoning, tool names and arguments, tool
    results and server tools (JSON where they are not text)."""
    for m in messages:
        for p in m.parts:
            if isinstance(p, TextPart | ReasoningPart):
                yield p.content
            elif isinstance(p, ToolCallPart):
                yield p.name
                yield _json(p.arguments)
            elif isinstance(p, ToolCallResponsePart):
                if isinstance(p.result, str):
                    yield p.result
                else:
                    yield _json(p.result)
            elif isinstance(p, ServerToolCallPart):
                yield p.name
                yield _json(p.server_tool_call)
            elif isinstance(p, ServerToolCallResponsePart):
                yield _json(p.server_tool_call_response)
            # media parts have no text to search: their bytes are not words


def _indexable(piece: str) -> str:
    """A casefolded piece as the index holds it: NUL and lone surrogates (which neither
    database's text takes) become U+FFFD, which no needle the index answers holds, so no
    match is lost or made."""
    if piece.isascii() and "\x00" not in piece:
        return piece
    return "".join("\ufffd" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in piece)


class _Said(msgspec.Struct):
    """What a fact said, its messages as their msgpack bytes (codec bodies are maps: the rest
    is skipped)."""

    input_messages: list[msgspec.Raw] = []
    output_messages: list[msgspec.Raw] = []


_said = msgspec.msgpack.Decoder(_Said)
# The codec's tag of a body that is plain msgpack (a value it escapes has another, and holds
# extension values a message read as msgpack would take for data).
_PLAIN = codec.encode(Message("user", []))[:1]
_message = msgspec.msgpack.Decoder(Message)

# What the text index needs of a fact, made where its rows are built (``text_note``: the
# receiver's worker processes), so that the writer looks digests up: each message's digest,
# and its text as the index holds it, or None for a message the process has read before in the
# same session (a replay: the writer reads it from the body in the rare case it is new there).
# Compact, as it crosses back from the worker with the rows: the digests end to end, and the
# texts (None alone when the process had read every message).
TextNote = tuple[bytes, tuple[str | None, ...] | None]


class Read:
    """The messages this process has read, by session, with their digests: a conversation's
    replays are then neither hashed with BLAKE2b, read nor sent again. A message is known here
    by its length and Python's hash of its bytes (SipHash, with this process's random key: 64
    bits, as the digest; keeping the bytes to compare would cost a cold read of each, more than
    the digest saves). At most ``most`` messages, then forgotten all at once (~15 MB)."""

    most = 100_000

    def __init__(self) -> None:
        self.digests: dict[tuple[str, int, int], bytes] = {}

    @property
    def size(self) -> int:
        return len(self.digests)

    def note(
        self, session: str, raws: list[msgspec.Raw], messages: tuple[Message, ...]
    ) -> TextNote:
        if len(self.digests) > self.most:
            self.digests.clear()
        digests: list[bytes] = []
        texts: list[str | None] = []
        for raw, m in zip(raws, messages, strict=True):
            data = bytes(raw)
            key = (session, len(data), hash(data))
            d = self.digests.get(key)
            if d is None:
                d = self.digests[key] = _digest(data)
                texts.append(_indexed(m))
            else:
                texts.append(None)
            digests.append(d)
        return b"".join(digests), None if texts.count(None) == len(texts) else tuple(texts)


# The receiver's worker processes remember across requests (``prepare``).
WORKER = Read()


def _digest(data: bytes | msgspec.Raw) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST).digest()


def _indexed(m: Message) -> str:
    """A message's text as the index holds it: its pieces casefolded, the empty ones left out,
    joined by the separator."""
    return SEP.join([_indexable(p) for t in message_text((m,)) if (p := t.casefold())])


def _raws(body: bytes) -> list[msgspec.Raw] | None:
    """A fact's messages as their bytes, from its codec bytes; None for a body the codec
    escaped (values msgpack cannot carry as they are)."""
    try:
        if body[:1] != _PLAIN:
            raise msgspec.DecodeError("an escaped body")
        said = _said.decode(memoryview(body)[1:])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return [*said.input_messages, *said.output_messages]


def _messages(fact: InferenceCall) -> tuple[Message, ...]:
    return (*fact.input_messages, *fact.output_messages)


def _keys(body: bytes) -> list[bytes]:
    """The digests a fact's messages are known by, from its codec bytes: that of each
    message's bytes; in a body the codec escaped, that of its own encoding."""
    raws = _raws(body)
    if raws is None:
        return [_digest(codec.encode(m)) for m in _messages(_fact_decoder.decode(body))]
    return [_digest(r) for r in raws]


def text_note(fact: InferenceCall, body: bytes, session: str, read: Read) -> TextNote:
    """The ``TextNote`` of a fact of ``session`` (its column form) and its codec bytes, leaving
    out the text of the messages ``read`` has read."""
    raws = _raws(body)
    if raws is None:
        messages = _messages(fact)
        return b"".join(_digest(codec.encode(m)) for m in messages), tuple(map(_indexed, messages))
    return read.note(session, raws, _messages(fact))


def _reader(body: Callable[[], bytes]) -> Callable[[int], str]:
    """The text of a fact's k-th message, from its codec bytes (``body``): read on demand, and
    only the messages asked for decoded."""
    messages: list[Message | msgspec.Raw] = []

    def read(k: int) -> str:
        if not messages:
            data = body()
            raws = _raws(data)
            messages.extend(_messages(_fact_decoder.decode(data)) if raws is None else raws)
        m = messages[k]
        return _indexed(m if isinstance(m, Message) else _message.decode(m))

    return read


class SessionText:
    """The messages of one session not in its text index yet, and their text. A message is
    known by the digest of its bytes, so a call's replay of the conversation is not indexed
    again. ``state``: the summary's ``texts``: 12 bytes passed on as they are (earlier writers
    kept there the count and digest of the last input indexed, to skip its replay; every
    message that names is indexed, so one that still reads it skips only known messages), then
    the digests of the messages indexed."""

    def __init__(self, state: bytes) -> None:
        state = bytes(state)
        self.head = state[:_HEAD] or bytes(_HEAD)
        known = state[_HEAD:]
        self.have = {known[i : i + DIGEST] for i in range(0, len(known), DIGEST)}
        self.known = known
        self.pieces: list[str] = []
        self.digests: list[bytes] = []

    def add(self, note: TextNote, body: Callable[[], bytes]) -> None:
        """The new messages of a fact, by its note; the text the note leaves out is read from
        the fact's codec bytes (``body``) where needed."""
        read: Callable[[int], str] | None = None
        digests, texts = note
        for k in range(len(digests) // DIGEST):
            d = digests[k * DIGEST : (k + 1) * DIGEST]
            if d in self.have:
                continue
            self.have.add(d)
            self.digests.append(d)
            text = None if texts is None else texts[k]
            if text is None:
                read = read or _reader(body)
                text = read(k)
            if text:
                self.pieces.append(text)

    def add_body(self, body: bytes) -> None:
        """The new messages of a fact, from its codec bytes: only those are decoded."""
        self.add((b"".join(_keys(body)), None), lambda: body)

    def state(self) -> bytes:
        return self.head + self.known + b"".join(self.digests)

    def doc(self) -> str:
        return SEP.join(self.pieces)
