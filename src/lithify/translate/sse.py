"""Server-Sent Events: the text of a streamed provider response into its events."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(slots=True, frozen=True)
class SSEEvent:
    event: str | None
    data: str

    def json(self) -> Any:
        """The data as JSON, or None when it is not JSON (``[DONE]``, a cut-off line)."""
        try:
            return orjson.loads(self.data)
        except orjson.JSONDecodeError:
            return None


def iter_events(text: str) -> Iterator[SSEEvent]:
    """Events in order, per the SSE spec: blank-line separated, multi-line data joined by '\\n'.

    A last event without its terminating blank line is still yielded: a truncated stream keeps
    what it delivered.
    """
    event: str | None = None
    data: list[str] = []
    # Only CR, LF and CRLF end a line in SSE; str.splitlines would also split on U+2028 and
    # friends, which a model's answer may hold inside a JSON string.
    for line in _LINE_END.split(text):
        if not line.strip():
            if data:
                yield SSEEvent(event, "\n".join(data))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value.strip()
        elif name == "data":
            data.append(value)
    if data:
        yield SSEEvent(event, "\n".join(data))


def looks_like_sse(text: str) -> bool:
    head = text.lstrip()[:200]
    return head.startswith(("data:", "event:", ":", "id:", "retry:"))
