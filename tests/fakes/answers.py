"""What the fake provider says, independent of any wire format.

A test scripts a conversation as a list of steps: an ``Answer`` (the logical reply, rendered in
whatever format the request arrived in, streamed or not) or a ``Fault`` (an HTTP error in that
provider's error format). The same ``Answer`` with the same ``key`` renders to the same ids, text,
tool calls and usage in every form, so a streamed reply and its non-streamed twin are one answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """A tool call the model makes; ``arguments`` is the JSON text as the model wrote it."""

    name: str
    arguments: str

    @classmethod
    def of(cls, name: str, args: dict[str, Any]) -> Call:
        return cls(name, json.dumps(args, ensure_ascii=False, separators=(",", ":")))

    @property
    def args(self) -> Any:
        """The parsed arguments (formats without an arguments string carry this object)."""
        return json.loads(self.arguments)


@dataclass(frozen=True)
class Choice:
    """One candidate answer: reasoning blocks, then text, then tool calls."""

    text: str = ""
    reasoning: tuple[str, ...] = ()
    calls: tuple[Call, ...] = ()
    truncated: bool = False  # stopped at the output token limit
    # A spoken answer (Chat Completions' audio output): these bytes, with the text as their
    # transcript instead of as content.
    audio: bytes = b""

    @property
    def finish(self) -> str:
        """The canonical (OTel) finish reason this choice must convert to."""
        if self.truncated:
            return "length"
        return "tool_call" if self.calls else "stop"


@dataclass(frozen=True)
class Answer:
    """One reply. ``output_tokens`` counts everything generated, ``reasoning_tokens`` included.

    ``key`` seeds every id in the reply (response id, tool-call ids, item ids); by default it is
    the step's position in the script, so re-running a script gives the same ids.
    """

    choices: tuple[Choice, ...]
    input_tokens: int = 42
    output_tokens: int = 17
    reasoning_tokens: int = 0
    model: str | None = None  # the response model; default: the request's
    key: str | None = None
    gemini_call_ids: bool = False  # the Gemini API may or may not give function calls ids
    delay: float = 0.0  # seconds before the response starts
    event_delay: float = 0.0  # seconds between streamed events
    cut_after: int | None = None  # a stream stops after this many events, with no clean end
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers

    @property
    def choice(self) -> Choice:
        return self.choices[0]


def answer(
    text: str = "",
    *,
    reasoning: tuple[str, ...] | list[str] = (),
    calls: tuple[Call, ...] | list[Call] = (),
    truncated: bool = False,
    audio: bytes = b"",
    **kw: Any,
) -> Answer:
    """A one-choice answer."""
    return Answer(
        choices=(Choice(text, tuple(reasoning), tuple(calls), truncated, audio),),
        **kw,
    )


@dataclass(frozen=True)
class Fault:
    """An HTTP error reply in the provider's own error format (or ``body`` verbatim)."""

    status: int = 500
    message: str = "The server had an error while processing your request."
    retry_after: float | None = None  # seconds, sent as retry-after (and retry-after-ms)
    delay: float = 0.0
    body: bytes | None = None


@dataclass(frozen=True)
class Reply:
    """A reply sent verbatim, for shapes ``Answer`` does not render (a vendor's extensions of a
    format, written from its API reference): ``body`` answers a plain request, ``events``
    (``(name, data)``, data JSON-able or a literal string such as ``[DONE]``) a streamed one."""

    body: Any = None
    events: tuple[tuple[str | None, Any], ...] = ()
    delay: float = 0.0
    event_delay: float = 0.0
    cut_after: int | None = None


Step = Answer | Fault | Reply
