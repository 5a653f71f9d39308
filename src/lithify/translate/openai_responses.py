"""openai_responses request/response exchanges (plain or streamed) to facts (see docs/canonical.md)."""

from __future__ import annotations

from typing import Any

from lithify.model import InferenceCall, Skip
from lithify.translate.sse import SSEEvent

NAME = "openai-responses"


def looks_like_request(doc: dict[str, Any]) -> bool:
    return False


def looks_like_response(doc: dict[str, Any]) -> bool:
    return False


def looks_like_stream(events: list[SSEEvent]) -> bool:
    return False


def translate(
    request: dict[str, Any] | None,
    response: dict[str, Any] | list[SSEEvent] | None,
    *,
    meta: dict[str, Any] | None = None,
) -> InferenceCall | Skip:
    """One exchange to a fact. response is a body or the events of a streamed body; either
    side may be missing. meta carries what the transport knew (headers, session)."""
    return Skip("unrecognized_format", NAME + " not implemented")
