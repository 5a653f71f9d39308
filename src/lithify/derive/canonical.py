"""The canonical form messages are compared in (docs/export.md): bytes equal iff the messages are.

Two messages are the same when their roles and parts are, with ``finish_reason`` ignored (an
output carries one, its replay in the next input does not) and dict key order ignored. Types
stay apart: ``true`` is not ``1`` and ``1`` is not ``1.0`` (Python's ``True == 1`` and
``1 == 1.0`` would merge them, so values are compared as typed bytes, never with ``==``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from lithify.model import Message

_encoder = msgspec.msgpack.Encoder(order="sorted")
# 0xC1 is never used by msgpack, so a fallback encoding cannot equal a fast one.
_FALLBACK = b"\xc1"


def canonical_message(message: Message) -> bytes:
    """Sorted-key msgpack of ``(role, parts)``; a typed text form for values msgpack refuses.

    Every form is self-delimiting (msgpack is; the typed form carries its length), so a
    concatenation of forms starts with another concatenation only when the messages do.
    """
    try:
        return _encoder.encode((message.role, message.parts))
    except (UnicodeEncodeError, OverflowError, TypeError):
        # Lone surrogates and integers beyond 64 bits (both survive the store's codec).
        value = msgspec.to_builtins((message.role, message.parts))
        text = _typed(value).encode("utf-8", "surrogatepass")
        return _FALLBACK + len(text).to_bytes(8, "big") + text


def canonical_messages(messages: list[Message]) -> list[bytes]:
    return [canonical_message(m) for m in messages]


class Forms:
    """Canonical forms of a stream of inputs, reusing those of the messages the previous input
    held at the same place.

    Facts read from a store share the messages a session's calls repeat (core.codec.FactReader
    hands out the previous fact's message objects for bytes it held too): each is then encoded
    once, not once per call that replays it. The same object always has the same form.
    """

    __slots__ = ("_forms", "_messages")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._forms: list[bytes] = []

    def of(self, messages: list[Message]) -> list[bytes]:
        """``canonical_messages(messages)``."""
        prev, prev_forms = self._messages, self._forms
        n = len(prev)
        forms = [
            prev_forms[i] if i < n and prev[i] is m else canonical_message(m)
            for i, m in enumerate(messages)
        ]
        self._messages, self._forms = messages, forms
        return forms


def _typed(value: Any) -> str:
    """``repr`` keeps True, 1, 1.0, '1' and None apart; dicts get their keys sorted."""
    if isinstance(value, dict):
        items = sorted((_typed(k), _typed(v)) for k, v in value.items())
        return "{" + ",".join(f"{k}:{v}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_typed(v) for v in value) + "]"
    return repr(value)
