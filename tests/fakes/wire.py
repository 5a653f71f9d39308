"""The four wire formats the fake speaks: one ``Answer`` as a JSON body or as SSE events.

Shapes follow the real APIs (the SDKs' own types and the recordings in ``tests/corpus``): OpenAI
Chat Completions, OpenAI Responses, Anthropic Messages and the Gemini API. Every id derives from
the answer's key, so a streamed reply and its non-streamed twin carry the same ids.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from tests.fakes.answers import Answer, Choice, Fault

CHAT = "openai-chat"
RESPONSES = "openai-responses"
ANTHROPIC = "anthropic"
GEMINI = "gemini"

FINGERPRINT = "fp_lithify0"
CREATED = 1767225600  # 2026-01-01T00:00:00Z; the n-th answer is created n seconds later

# OpenAI answers with the dated snapshot an alias points to; the others echo the requested name.
SNAPSHOTS = {
    "gpt-4o-mini": "gpt-4o-mini-2024-07-18",
    "gpt-4o": "gpt-4o-2024-08-06",
    "gpt-5-mini": "gpt-5-mini-2025-08-07",
    "gpt-5": "gpt-5-2025-08-07",
}

# Data is a JSON-able value, or a literal string sent as is (``[DONE]``).
Event = tuple[str | None, Any]


@dataclass(frozen=True)
class Ctx:
    request: dict[str, Any]
    answer: Answer
    key: str
    model: str
    created: int


def frags(text: str, size: int) -> list[str]:
    """A text in fixed-size pieces (by characters, so no code point is ever split)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def signature(key: str, *where: Any) -> str:
    """A stable opaque blob standing in for a thinking signature or encrypted reasoning."""
    digest = hashlib.sha256(repr((key, *where)).encode()).digest()
    # Base64, as the real blobs are (google-genai decodes thoughtSignature as bytes).
    return base64.b64encode(digest * 3).decode()


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def sse_text(provider: str, events: list[Event]) -> list[bytes]:
    """Each event as the bytes of one SSE frame, in the framing each provider uses."""
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else dumps(data)
        if provider == GEMINI:
            out.append(f"data: {payload}\r\n\r\n".encode())
        elif name is None:
            out.append(f"data: {payload}\n\n".encode())
        else:
            out.append(f"event: {name}\ndata: {payload}\n\n".encode())
    return out


# --- OpenAI Chat Completions ---------------------------------------------------------------


def _chat_finish(ch: Choice) -> str:
    return "length" if ch.truncated else "tool_calls" if ch.calls else "stop"


def _chat_call_id(key: str, j: int, i: int) -> str:
    return f"call_{key}_{i}" if j == 0 else f"call_{key}_c{j}_{i}"


def _chat_audio_id(key: str, j: int) -> str:
    return f"audio_{key}" if j == 0 else f"audio_{key}_c{j}"


# Streamed audio arrives in pieces of this many bytes, each piece base64 of its own (padded).
AUDIO_PIECE = 8


def _chat_usage(a: Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": a.input_tokens,
        "completion_tokens": a.output_tokens,
        "total_tokens": a.input_tokens + a.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": a.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def chat_body(c: Ctx) -> dict[str, Any]:
    choices = []
    for j, ch in enumerate(c.answer.choices):
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": ch.text or None,
            "refusal": None,
            "annotations": [],
        }
        if ch.reasoning:
            # The field vLLM, DeepSeek and other compatible servers add; OpenAI's SDK keeps it.
            msg["reasoning_content"] = "".join(ch.reasoning)
        if ch.audio:
            # A spoken answer: no content, the text is the audio's transcript.
            msg["content"] = None
            msg["audio"] = {
                "id": _chat_audio_id(c.key, j),
                "data": base64.b64encode(ch.audio).decode(),
                "expires_at": c.created + 3600,
                "transcript": ch.text,
            }
        if ch.calls:
            msg["tool_calls"] = [
                {
                    "id": _chat_call_id(c.key, j, i),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for i, call in enumerate(ch.calls)
            ]
        choices.append(
            {"index": j, "message": msg, "logprobs": None, "finish_reason": _chat_finish(ch)}
        )
    return {
        "id": f"chatcmpl-{c.key}",
        "object": "chat.completion",
        "created": c.created,
        "model": c.model,
        "choices": choices,
        "usage": _chat_usage(c.answer),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }


def chat_events(c: Ctx) -> list[Event]:
    include_usage = bool((c.request.get("stream_options") or {}).get("include_usage"))
    head = {
        "id": f"chatcmpl-{c.key}",
        "object": "chat.completion.chunk",
        "created": c.created,
        "model": c.model,
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }

    def chunk(j: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            **head,
            "choices": [{"index": j, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            out["usage"] = None
        return out

    per_choice: list[list[dict[str, Any]]] = []
    for j, ch in enumerate(c.answer.choices):
        chunks = [chunk(j, {"role": "assistant", "content": "", "refusal": None})]
        if ch.reasoning:
            chunks += [chunk(j, {"reasoning_content": f}) for f in frags("".join(ch.reasoning), 6)]
        if ch.audio:
            # The transcript first, then the audio in pieces, then its expiry alone.
            aid = _chat_audio_id(c.key, j)
            chunks += [chunk(j, {"audio": {"id": aid, "transcript": f}}) for f in frags(ch.text, 7)]
            chunks += [
                chunk(j, {"audio": {"id": aid, "data": base64.b64encode(piece).decode()}})
                for piece in (
                    ch.audio[i : i + AUDIO_PIECE] for i in range(0, len(ch.audio), AUDIO_PIECE)
                )
            ]
            chunks.append(chunk(j, {"audio": {"id": aid, "expires_at": c.created + 3600}}))
        elif ch.text:
            chunks += [chunk(j, {"content": f}) for f in frags(ch.text, 7)]
        for i, call in enumerate(ch.calls):
            first = {
                "index": i,
                "id": _chat_call_id(c.key, j, i),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            chunks.append(chunk(j, {"tool_calls": [first]}))
            chunks += [
                chunk(j, {"tool_calls": [{"index": i, "function": {"arguments": f}}]})
                for f in frags(call.arguments, 5)
                if f
            ]
        chunks.append(chunk(j, {}, _chat_finish(ch)))
        per_choice.append(chunks)
    # Several choices stream interleaved, as the real API sends them.
    events: list[Event] = [
        (None, ck) for group in zip_longest(*per_choice) for ck in group if ck is not None
    ]
    if include_usage:
        events.append((None, {**head, "choices": [], "usage": _chat_usage(c.answer)}))
    events.append((None, "[DONE]"))
    return events


def openai_error(f: Fault) -> dict[str, Any]:
    if f.status == 429:
        kind, code = "requests", "rate_limit_exceeded"
    elif f.status >= 500:
        kind, code = "server_error", None
    else:
        kind, code = "invalid_request_error", None
    return {"error": {"message": f.message, "type": kind, "param": None, "code": code}}


# --- OpenAI Responses ------------------------------------------------------------------------


def _responses_items(c: Ctx) -> list[dict[str, Any]]:
    ch = c.answer.choice
    items: list[dict[str, Any]] = []
    if ch.reasoning:
        item: dict[str, Any] = {
            "id": f"rs_{c.key}_{len(items)}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": t} for t in ch.reasoning],
        }
        if "reasoning.encrypted_content" in (c.request.get("include") or []):
            item["encrypted_content"] = signature(c.key, "reasoning")
        items.append(item)
    if ch.text:
        items.append(
            {
                "id": f"msg_{c.key}_{len(items)}",
                "type": "message",
                "status": "incomplete" if ch.truncated else "completed",
                "content": [
                    {"type": "output_text", "annotations": [], "logprobs": [], "text": ch.text}
                ],
                "role": "assistant",
            }
        )
    for i, call in enumerate(ch.calls):
        items.append(
            {
                "id": f"fc_{c.key}_{len(items)}",
                "type": "function_call",
                "status": "completed",
                "arguments": call.arguments,
                "call_id": f"call_{c.key}_{i}",
                "name": call.name,
            }
        )
    return items


def responses_body(c: Ctx, *, final: bool = True) -> dict[str, Any]:
    r = c.request
    a = c.answer
    truncated = a.choice.truncated
    reasoning = r.get("reasoning") or {}
    return {
        "id": f"resp_{c.key}",
        "object": "response",
        "created_at": c.created,
        "status": ("incomplete" if truncated else "completed") if final else "in_progress",
        "background": False,
        "completed_at": c.created + 1 if final else None,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if final and truncated else None,
        "instructions": r.get("instructions"),
        "max_output_tokens": r.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": c.model,
        "output": _responses_items(c) if final else [],
        "parallel_tool_calls": r.get("parallel_tool_calls", True),
        "previous_response_id": r.get("previous_response_id"),
        "prompt_cache_key": None,
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "safety_identifier": None,
        "service_tier": "default",
        "store": r.get("store", True),
        "temperature": r.get("temperature", 1.0),
        "text": r.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": r.get("tool_choice", "auto"),
        "tools": r.get("tools") or [],
        "top_logprobs": 0,
        "top_p": r.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": {
            "input_tokens": a.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": a.output_tokens,
            "output_tokens_details": {"reasoning_tokens": a.reasoning_tokens},
            "total_tokens": a.input_tokens + a.output_tokens,
        }
        if final
        else None,
        "user": None,
        "metadata": r.get("metadata") or {},
    }


def responses_events(c: Ctx) -> list[Event]:
    events: list[Event] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, **fields, "sequence_number": len(events)}))

    start = responses_body(c, final=False)
    emit("response.created", response=start)
    emit("response.in_progress", response=start)
    for n, item in enumerate(_responses_items(c)):
        iid = item["id"]
        if item["type"] == "reasoning":
            emit("response.output_item.added", item={**item, "summary": []}, output_index=n)
            # Older items may lack encrypted_content on "added"; the finished item has it.
            events[-1][1]["item"].pop("encrypted_content", None)
            for s, part in enumerate(item["summary"]):
                common = {"item_id": iid, "output_index": n, "summary_index": s}
                emit(
                    "response.reasoning_summary_part.added",
                    **common,
                    part={"type": "summary_text", "text": ""},
                )
                for f in frags(part["text"], 8):
                    emit("response.reasoning_summary_text.delta", **common, delta=f)
                emit("response.reasoning_summary_text.done", **common, text=part["text"])
                emit("response.reasoning_summary_part.done", **common, part=part)
        elif item["type"] == "message":
            text = item["content"][0]["text"]
            emit(
                "response.output_item.added",
                item={**item, "status": "in_progress", "content": []},
                output_index=n,
            )
            common = {"content_index": 0, "item_id": iid, "output_index": n}
            empty = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            emit("response.content_part.added", **common, part=empty)
            for f in frags(text, 7):
                emit("response.output_text.delta", **common, delta=f, logprobs=[])
            emit("response.output_text.done", **common, text=text, logprobs=[])
            emit("response.content_part.done", **common, part=item["content"][0])
        else:
            emit(
                "response.output_item.added",
                item={**item, "status": "in_progress", "arguments": ""},
                output_index=n,
            )
            for f in frags(item["arguments"], 5):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=iid,
                    output_index=n,
                    delta=f,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=iid,
                output_index=n,
                arguments=item["arguments"],
                name=item["name"],
            )
        emit("response.output_item.done", item=item, output_index=n)
    final = responses_body(c)
    kind = "response.incomplete" if c.answer.choice.truncated else "response.completed"
    emit(kind, response=final)
    return events


# --- Anthropic Messages ----------------------------------------------------------------------


def _anthropic_stop(ch: Choice) -> str:
    return "max_tokens" if ch.truncated else "tool_use" if ch.calls else "end_turn"


def _anthropic_blocks(c: Ctx) -> list[dict[str, Any]]:
    ch = c.answer.choice
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": t, "signature": signature(c.key, "thinking", k)}
        for k, t in enumerate(ch.reasoning)
    ]
    if ch.text:
        blocks.append({"type": "text", "text": ch.text})
    blocks += [
        {"type": "tool_use", "id": f"toolu_{c.key}_{i}", "name": call.name, "input": call.args}
        for i, call in enumerate(ch.calls)
    ]
    return blocks


def _anthropic_usage(a: Answer, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": a.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def anthropic_body(c: Ctx) -> dict[str, Any]:
    return {
        "id": f"msg_{c.key}",
        "type": "message",
        "role": "assistant",
        "model": c.model,
        "content": _anthropic_blocks(c),
        "stop_reason": _anthropic_stop(c.answer.choice),
        "stop_sequence": None,
        "usage": _anthropic_usage(c.answer, c.answer.output_tokens),
    }


def anthropic_events(c: Ctx) -> list[Event]:
    start = {**anthropic_body(c), "content": [], "stop_reason": None}
    # The real API reports a token or so of output at the start; message_delta has the total.
    start["usage"] = _anthropic_usage(c.answer, 1)
    events: list[Event] = [("message_start", {"type": "message_start", "message": start})]
    for n, block in enumerate(_anthropic_blocks(c)):
        kind = block["type"]
        if kind == "thinking":
            empty = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": f} for f in frags(block["thinking"], 9)
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            empty = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": f} for f in frags(block["text"], 7)]
        else:
            empty = {**block, "input": {}}
            arguments = c.answer.choice.calls[int(block["id"].rsplit("_", 1)[1])].arguments
            deltas = [{"type": "input_json_delta", "partial_json": ""}]
            deltas += [
                {"type": "input_json_delta", "partial_json": f} for f in frags(arguments, 5) if f
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": n, "content_block": empty},
            )
        )
        if n == 0:
            events.append(("ping", {"type": "ping"}))
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": n, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": n}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _anthropic_stop(c.answer.choice), "stop_sequence": None},
                "usage": {"output_tokens": c.answer.output_tokens},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic_error(f: Fault, key: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(f.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": f.message}, "request_id": key}


# --- Gemini ----------------------------------------------------------------------------------


def _gemini_finish(ch: Choice) -> str:
    # Gemini says STOP for a function-call answer too.
    return "MAX_TOKENS" if ch.truncated else "STOP"


def _gemini_calls(c: Ctx, ch: Choice) -> list[dict[str, Any]]:
    parts = []
    for i, call in enumerate(ch.calls):
        fc: dict[str, Any] = {"name": call.name, "args": call.args}
        if c.answer.gemini_call_ids:
            fc = {"id": f"fc_{c.key}_{i}", **fc}
        part: dict[str, Any] = {"functionCall": fc}
        if i == 0 and ch.reasoning:
            # Thinking models sign the first function call of a turn.
            part["thoughtSignature"] = signature(c.key, "thought")
        parts.append(part)
    return parts


def _gemini_usage(a: Answer, final: bool) -> dict[str, Any]:
    usage: dict[str, Any] = {"promptTokenCount": a.input_tokens}
    if final:
        usage["candidatesTokenCount"] = a.output_tokens - a.reasoning_tokens
    usage["totalTokenCount"] = a.input_tokens + (a.output_tokens if final else a.reasoning_tokens)
    usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": a.input_tokens}]
    if a.reasoning_tokens:
        usage["thoughtsTokenCount"] = a.reasoning_tokens
    return usage


def gemini_body(c: Ctx) -> dict[str, Any]:
    ch = c.answer.choice
    parts: list[dict[str, Any]] = []
    if ch.reasoning:
        parts.append({"text": "".join(ch.reasoning), "thought": True})
    if ch.text:
        parts.append({"text": ch.text})
    parts += _gemini_calls(c, ch)
    return {
        "candidates": [
            {
                "content": {"parts": parts, "role": "model"},
                "finishReason": _gemini_finish(ch),
                "index": 0,
            }
        ],
        "usageMetadata": _gemini_usage(c.answer, True),
        "modelVersion": c.model,
        "responseId": c.key,
    }


def gemini_events(c: Ctx) -> list[Event]:
    ch = c.answer.choice
    part_chunks: list[list[dict[str, Any]]] = []
    if ch.reasoning:
        part_chunks += [[{"text": f, "thought": True}] for f in frags("".join(ch.reasoning), 11)]
    if ch.text:
        part_chunks += [[{"text": f}] for f in frags(ch.text, 9)]
    if ch.calls:
        # Function calls arrive whole, all in one chunk.
        part_chunks.append(_gemini_calls(c, ch))
    events: list[Event] = []
    for n, parts in enumerate(part_chunks):
        last = n == len(part_chunks) - 1
        cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if last:
            cand["finishReason"] = _gemini_finish(ch)
        cand["index"] = 0
        events.append(
            (
                None,
                {
                    "candidates": [cand],
                    "usageMetadata": _gemini_usage(c.answer, last),
                    "modelVersion": c.model,
                    "responseId": c.key,
                },
            )
        )
    return events


_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def gemini_error(f: Fault) -> dict[str, Any]:
    return {
        "error": {
            "code": f.status,
            "message": f.message,
            "status": _GOOGLE_STATUS.get(f.status, "UNKNOWN"),
        }
    }


# --- dispatch --------------------------------------------------------------------------------


def body(provider: str, c: Ctx) -> dict[str, Any]:
    return {
        CHAT: chat_body,
        RESPONSES: responses_body,
        ANTHROPIC: anthropic_body,
        GEMINI: gemini_body,
    }[provider](c)


def events(provider: str, c: Ctx) -> list[Event]:
    return {
        CHAT: chat_events,
        RESPONSES: responses_events,
        ANTHROPIC: anthropic_events,
        GEMINI: gemini_events,
    }[provider](c)


def error(provider: str, f: Fault, key: str) -> dict[str, Any]:
    if provider == ANTHROPIC:
        return anthropic_error(f, key)
    if provider == GEMINI:
        return gemini_error(f)
    return openai_error(f)
