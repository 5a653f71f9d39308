"""Provider exchanges to facts: pick the provider module by shape, hand it request and response.

A streamed response arrives as SSE text (or its parsed events) and is reassembled by the module.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

from lithify.model import InferenceCall, Skip
from lithify.translate import anthropic, gemini, openai_chat, openai_responses
from lithify.translate._common import error_detail, valid_text
from lithify.translate.sse import SSEEvent, events_of, iter_events

# Detection order matters only for ambiguous shapes; the most specific shapes come first.
PROVIDERS: dict[str, ModuleType] = {
    m.NAME: m for m in (openai_responses, anthropic, gemini, openai_chat)
}


def translator_error(e: BaseException) -> Skip:
    return Skip("translator_error", f"{type(e).__name__}: {e}"[:300])


def is_error_body(doc: Any) -> bool:
    """A provider error document: an ``error`` object and nothing a response would carry."""
    if not isinstance(doc, dict) or "error" not in doc or doc.get("error") is None:
        return False
    return not any(k in doc for k in ("choices", "output", "content", "candidates"))


def _pick(fmt: str, request: Any, response: Any) -> ModuleType | None:
    if fmt in PROVIDERS:
        return PROVIDERS[fmt]
    if isinstance(response, list):
        for m in PROVIDERS.values():
            if m.looks_like_stream(response):
                return m
    if isinstance(response, dict):
        for m in PROVIDERS.values():
            if m.looks_like_response(response):
                return m
    if isinstance(request, dict):
        for m in PROVIDERS.values():
            if m.looks_like_request(request):
                return m
    return None


def translate_exchange(
    request: Any,
    response: Any,
    *,
    fmt: str = "auto",
    meta: dict[str, Any] | None = None,
) -> InferenceCall | Skip:
    """One request/response exchange; ``response`` may be a body, SSE text or SSE events."""
    if isinstance(response, str):
        response = list(iter_events(response))
    elif isinstance(response, list):
        response = events_of(response)
    if is_error_body(response):
        return Skip("error_response", error_detail(response.get("error")))
    if request is not None and not isinstance(request, dict):
        request = None
    if response is not None and not isinstance(response, dict | list):
        response = None
    if request is None and response is None:
        return Skip("empty", "neither a request nor a response")
    module = _pick(fmt, request, response)
    if module is None:
        return Skip("unrecognized_format", "not a known provider request or response")
    try:
        result = module.translate(request, response, meta=meta)
    except RecursionError:
        return Skip("undecodable", "nested too deeply to represent")
    except Exception as e:  # a translator defect must not stop a run: count it, name it
        return translator_error(e)
    if isinstance(result, InferenceCall) and _split_characters(response):
        return valid_text(result)
    return result


# A JSON escape of half a character (a UTF-16 surrogate), which a stream's events may split.
_HALF = re.compile(r"\\u[dD][89a-fA-F]")


def _split_characters(response: Any) -> bool:
    """Whether a stream's events may hold halves of characters, each escaped in its own event."""
    return isinstance(response, list) and any(
        isinstance(e, SSEEvent) and _HALF.search(e.data) is not None for e in response
    )


def looks_like_provider_body(doc: dict[str, Any]) -> bool:
    return is_error_body(doc) or any(
        m.looks_like_request(doc) or m.looks_like_response(doc) for m in PROVIDERS.values()
    )


def is_request(doc: dict[str, Any]) -> bool:
    return any(m.looks_like_request(doc) for m in PROVIDERS.values())


def stream_events(text: str) -> list[SSEEvent]:
    return list(iter_events(text))
