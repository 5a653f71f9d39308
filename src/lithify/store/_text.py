"""The text index's side of a write: what a fact's messages say, as the index holds it
(``text_note``, made where rows are built: the receiver's worker processes), and which of them
are new to their session (``SessionText``, in the writer)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
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
# receiver's worker processes), so that the writer only looks digests up: (its input messages'
# count, the digests of every prefix of its input, b"" for a body the codec escaped, the
# digests of its messages, and each message's text as the index holds it).
TextNote = tuple[int, bytes, bytes, tuple[str, ...]]


def _digest(data: bytes | msgspec.Raw) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST).digest()


def _indexed(m: Message) -> str:
    """A message's text as the index holds it: its pieces casefolded, the empty ones left out,
    joined by the separator."""
    return SEP.join(_indexable(p) for t in message_text((m,)) if (p := t.casefold()))


def _keys(body: bytes) -> tuple[int, bytes, bytes, list[msgspec.Raw] | None]:
    """A fact's messages as the index knows them, from its codec bytes: (input count, prefix
    digests, message digests, the messages' bytes). A message is known by the digest of its
    bytes; a body the codec escaped (values msgpack cannot carry as they are) has no prefixes,
    and its messages are known by their own encoding (None for the bytes)."""
    try:
        if body[:1] != _PLAIN:
            raise msgspec.DecodeError("an escaped body")
        said = _said.decode(memoryview(body)[1:])
    except (msgspec.DecodeError, msgspec.ValidationError):
        fact = _fact_decoder.decode(body)
        messages = (*fact.input_messages, *fact.output_messages)
        keys = b"".join(_digest(codec.encode(m)) for m in messages)
        return len(fact.input_messages), b"", keys, None
    h = hashlib.blake2b(digest_size=DIGEST)
    prefixes = [h.digest()]
    for raw in said.input_messages:
        h.update(raw)
        prefixes.append(h.digest())
    raws = [*said.input_messages, *said.output_messages]
    return len(said.input_messages), b"".join(prefixes), b"".join(map(_digest, raws)), raws


def text_note(fact: InferenceCall, body: bytes, texts: dict[bytes, str] | None = None) -> TextNote:
    """The ``TextNote`` of a fact and its codec bytes; ``texts``: the text of messages met
    before, by digest (a request's calls replay one conversation: each message is read once,
    and its text crosses to the writer once)."""
    n, prefixes, keys, _ = _keys(body)
    seen = {} if texts is None else texts
    out: list[str] = []
    for k, m in enumerate((*fact.input_messages, *fact.output_messages)):
        d = keys[k * DIGEST : (k + 1) * DIGEST]
        text = seen.get(d)
        if text is None:
            text = seen[d] = _indexed(m)
        out.append(text)
    return n, prefixes, keys, tuple(out)


class SessionText:
    """The messages of one session not in its text index yet, and their text. A message is
    known by the digest of its bytes, so a call's replay of the conversation is not indexed
    again; and the input of the session's last call indexed is known as a whole (its count and
    digest), so a call that replays it as its first messages is checked with one digest of
    their bytes, not a digest each. ``state``: the summary's ``texts`` (that count, 4 bytes,
    and digest, then the digests of the messages indexed)."""

    def __init__(self, state: bytes) -> None:
        state = bytes(state)
        self.replay_n = int.from_bytes(state[:4], "big") if state else 0
        self.replay = state[4 : 4 + DIGEST]
        known = state[4 + DIGEST :]
        self.have = {known[i : i + DIGEST] for i in range(0, len(known), DIGEST)}
        self.known = known
        self.pieces: list[str] = []
        self.digests: list[bytes] = []

    def _fresh(self, n: int, prefixes: bytes, keys: bytes) -> list[int]:
        """Which of a fact's messages are new to the session (their places), now known. Its
        first ``n`` (the input) are skipped when they replay the last input indexed; that input
        then becomes this one. A body without prefixes leaves the last input as it was."""
        start = 0
        if prefixes:
            last = self.replay_n if 0 < self.replay_n <= n else 0
            if last and prefixes[last * DIGEST : (last + 1) * DIGEST] == self.replay:
                start = last
            self.replay_n, self.replay = n, prefixes[n * DIGEST : (n + 1) * DIGEST]
        fresh: list[int] = []
        for k in range(start, len(keys) // DIGEST):
            d = keys[k * DIGEST : (k + 1) * DIGEST]
            if d not in self.have:
                self.have.add(d)
                self.digests.append(d)
                fresh.append(k)
        return fresh

    def add(self, note: TextNote) -> None:
        """The new messages of a fact, by its note."""
        n, prefixes, keys, texts = note
        for k in self._fresh(n, prefixes, keys):
            if texts[k]:
                self.pieces.append(texts[k])

    def add_body(self, body: bytes) -> None:
        """The new messages of a fact, from its codec bytes: only those are decoded."""
        n, prefixes, keys, raws = _keys(body)
        fresh = self._fresh(n, prefixes, keys)
        if not fresh:
            return
        if raws is None:
            fact = _fact_decoder.decode(body)
            messages = (*fact.input_messages, *fact.output_messages)
            texts = [_indexed(messages[k]) for k in fresh]
        else:
            texts = [_indexed(_message.decode(raws[k])) for k in fresh]
        self.pieces.extend(t for t in texts if t)

    def state(self) -> bytes:
        head = self.replay_n.to_bytes(4, "big") + self.replay.ljust(DIGEST, b"\0")
        return head + self.known + b"".join(self.digests)

    def doc(self) -> str:
        return SEP.join(self.pieces)
