"""What the two OpenAI translators share: how an exchange starts and how it ends as a fact.

Chat Completions and Responses differ in their messages and streams (openai_chat.py,
openai_responses.py) but not in the rest: the request parameters kept, the session and timing
the transport knew, the raw form of a stream, the fields a fact takes from the response body.
Mistral's thinking chunks, a content form of Chat-compatible servers, are read here too, since
telling the Chat and Anthropic request shapes apart needs them (messages_format.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lithify.core.times import seconds_to_rfc3339
from lithify.core.values import as_float, as_int
from lithify.model import InferenceCall, Message, Part, Skip, ToolDefinition
from lithify.translate._common import Degradations, as_str, finish, text_parts, transport_times
from lithify.translate.sse import SSEEvent, iter_events, raw_stream


@dataclass(frozen=True, slots=True)
class Api:
    """Where one OpenAI API keeps the fields every exchange has."""

    name: str
    # Usage keys, the API's own spelling first (compatible servers send the other one).
    input_tokens: tuple[str, str]
    output_tokens: tuple[str, str]
    created: str
    # The body's end time: a duration when the transport measured none (None: the API has none).
    completed: str | None = None
    # The response echoes the request's metadata, where a session id may be.
    echoes_metadata: bool = False


# Later keys win: the newer spelling of the max-tokens parameter over the older one.
_PARAM_KEYS = (
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("max_tokens", "max_tokens"),
    ("max_completion_tokens", "max_tokens"),
    ("max_output_tokens", "max_tokens"),
    ("stop", "stop"),
    ("seed", "seed"),
    ("n", "n"),
    ("frequency_penalty", "frequency_penalty"),
    ("presence_penalty", "presence_penalty"),
    ("tool_choice", "tool_choice"),
    ("reasoning_effort", "reasoning_effort"),
)

_SESSION_HEADERS = ("lithify-session-id", "x-lithify-session-id")


def request_params(request: dict[str, Any] | None) -> dict[str, Any]:
    """The sampling parameters the request set (null means not set), keys sorted."""
    if request is None:
        return {}
    out: dict[str, Any] = {}
    for key, name in _PARAM_KEYS:
        if request.get(key) is not None:
            out[name] = request[key]
    reasoning = request.get("reasoning")
    if (
        "reasoning_effort" not in out
        and isinstance(reasoning, dict)
        and reasoning.get("effort") is not None
    ):
        out["reasoning_effort"] = reasoning["effort"]
    # The pre-tools API spelled tool_choice as function_call.
    if "tool_choice" not in out and request.get("function_call") is not None:
        out["tool_choice"] = request["function_call"]
    return dict(sorted(out.items()))


def _session_from_meta(meta: dict[str, Any]) -> str | None:
    sid = as_str(meta.get("session_id"))
    if sid:
        return sid
    headers = meta.get("headers")
    if isinstance(headers, dict):
        for k, v in headers.items():
            if isinstance(k, str) and k.lower() in _SESSION_HEADERS and as_str(v):
                return str(v)
    return None


def _metadata_session(body: dict[str, Any] | None) -> str | None:
    md = body.get("metadata") if body is not None else None
    return as_str(md.get("session_id")) if isinstance(md, dict) else None


def transport_fields(meta: dict[str, Any] | None, *bodies: dict[str, Any] | None) -> dict[str, Any]:
    """Provider, session and timing the transport knew, then what the bodies carry."""
    meta = meta if isinstance(meta, dict) else {}
    session = _session_from_meta(meta)
    for body in bodies:
        session = session or _metadata_session(body)
    return {
        "provider": as_str(meta.get("provider")) or "openai",
        "session_id": session,
        **transport_times(meta),
    }


def field(doc: Any, key: str = "type") -> str | None:
    """A string field of an object (a type or role tag), else None: tags of other types are
    unhashable or meaningless."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def content_parts(
    content: Any, deg: Degradations, part: Callable[[Any, Degradations], list[Part]]
) -> list[Part]:
    """A message's content as parts: a string is its text; an object, or each entry of a list,
    is read by ``part`` (each API has its own kinds); anything else is counted."""
    if content is None:
        return []
    if isinstance(content, str):
        return text_parts(content)
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        deg.add("unsupported_content")
        return []
    return [q for p in content for q in part(p, deg)]


def is_thinking_chunk(p: Any) -> bool:
    """Mistral's reasoning content chunk, ``{"type": "thinking", "thinking": [text chunks]}``
    (Anthropic's thinking block holds a string there, never a list)."""
    return field(p) == "thinking" and isinstance(p.get("thinking"), list)


def thinking_text(p: dict[str, Any]) -> str:
    return "".join(
        c["text"] for c in p["thinking"] if field(c) == "text" and isinstance(c.get("text"), str)
    )


@dataclass(slots=True)
class Exchange:
    """One request and response as a translator starts from them."""

    request: Any  # as given, for raw
    req: dict[str, Any] | None
    events: list[SSEEvent] | None  # a streamed response's
    body: dict[str, Any] | None  # a plain response's
    raw_response: Any

    @classmethod
    def of(cls, request: Any, response: Any) -> Exchange:
        events = _as_events(response)
        body = response if isinstance(response, dict) else None
        return cls(
            request=request,
            req=request if isinstance(request, dict) else None,
            events=events,
            body=body,
            raw_response=body if events is None else raw_stream(events),
        )

    def fact(
        self,
        api: Api,
        body: dict[str, Any] | None,
        deg: Degradations,
        meta: dict[str, Any] | None,
        *,
        inputs: list[Message],
        outputs: list[Message],
        tools: list[ToolDefinition],
    ) -> InferenceCall | Skip:
        """The fact: the messages and tools the translator read, and what the response body
        (the plain one, or the one a stream was folded into) says about the call."""
        req = self.req
        body = body or {}
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        call_id = as_str(body.get("id"))
        model = as_str(body.get("model")) or (as_str(req.get("model")) if req is not None else None)
        bodies = (req, body) if api.echoes_metadata else (req,)
        transport = transport_fields(meta, *bodies)
        if api.completed is not None and transport["duration_ms"] is None:
            start, end = as_float(body.get(api.created)), as_float(body.get(api.completed))
            if start and end and end >= start:
                transport["duration_ms"] = (end - start) * 1000
        return _build(
            source=api.name,
            deg=deg,
            identity=(api.name, call_id) if call_id else None,
            raw={"request": self.request, "response": self.raw_response},
            model=model,
            input_messages=inputs,
            output_messages=outputs,
            tools=tools,
            request=request_params(req),
            input_tokens=as_int(usage.get(api.input_tokens[0], usage.get(api.input_tokens[1]))),
            output_tokens=as_int(usage.get(api.output_tokens[0], usage.get(api.output_tokens[1]))),
            started_at=seconds_to_rfc3339(body.get(api.created)),
            model_call_id=call_id,
            **transport,
        )


def _as_events(response: Any) -> list[SSEEvent] | None:
    """The events of a streamed body (given as events or as SSE text), else None."""
    if isinstance(response, str):
        return list(iter_events(response))
    if isinstance(response, list):
        return [e for e in response if isinstance(e, SSEEvent)]
    return None


def _build(**fields: Any) -> InferenceCall | Skip:
    """``finish``, except that a payload too deeply nested for the encoders (orjson reads 1024
    levels; the encoders stop earlier) is a skip rather than an exception."""
    try:
        return finish(**fields)
    except (TypeError, RecursionError) as e:
        return Skip("undecodable", f"the payload cannot be encoded: {e}"[:200], fields["source"])
