"""OpenAI Chat Completions exchanges (plain or streamed) to facts.

The mapping follows docs/canonical.md; the choices it leaves open are in docs/sources/openai.md.
What it shares with the Responses translator is in openai_common.py. One module past 500 lines:
it is one format's whole mapping (request, response, stream, vendor variants), read top to bottom
against its reference.
"""

from __future__ import annotations

from typing import Any

from lithify.model import (
    InferenceCall,
    Message,
    Part,
    ReasoningPart,
    Skip,
    TextPart,
    ToolCallResponsePart,
)
from lithify.translate._common import (
    Degradations,
    as_str,
    error_detail,
    finish_reason,
    parse_arguments,
    synthesized_call_id,
    synthesized_id,
    text_parts,
    tool_call,
    tool_definition,
)
from lithify.translate.messages_format import messages_format
from lithify.translate.openai_common import (
    Api,
    Exchange,
    content_parts,
    field,
    is_thinking_chunk,
    thinking_text,
)
from lithify.translate.sse import SSEEvent

NAME = "openai-chat"
API = Api(
    NAME,
    input_tokens=("prompt_tokens", "input_tokens"),
    output_tokens=("completion_tokens", "output_tokens"),
    created="created",
)

# ---------------------------------------------------------------------------------------------
# Shape detection
# ---------------------------------------------------------------------------------------------


def looks_like_request(doc: dict[str, Any]) -> bool:
    """A Chat Completions request: ``messages`` that are not Anthropic's (messages_format.py)."""
    return messages_format(doc) == NAME


def _is_chat_choices(choices: Any, key: str) -> bool:
    return isinstance(choices, list) and any(isinstance(c, dict) and key in c for c in choices)


def looks_like_response(doc: dict[str, Any]) -> bool:
    if not isinstance(doc, dict):
        return False
    if doc.get("object") in ("chat.completion", "chat.completion.chunk"):
        return True
    return _is_chat_choices(doc.get("choices"), "message")


def _is_chunk(data: Any) -> bool:
    return isinstance(data, dict) and (
        data.get("object") == "chat.completion.chunk"
        or _is_chat_choices(data.get("choices"), "delta")
    )


def looks_like_stream(events: list[SSEEvent]) -> bool:
    for e in events:
        if not isinstance(e, SSEEvent) or e.event not in (None, "", "message"):
            continue
        if _is_chunk(e.json()):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------


class _Context:
    """Per-fact state: degradation counts and the tool calls still waiting for a result."""

    def __init__(self) -> None:
        self.deg = Degradations()
        # (name, id) of calls in order, so results without an id pair by name and order.
        self.pending: list[tuple[str, str]] = []

    def answer(self, call_id: str | None, name: str | None) -> str:
        """The id a tool result answers: its own, else the oldest open call of that name."""
        if call_id is not None:
            self.pending = [p for p in self.pending if p[1] != call_id]
            return call_id
        for i, (pending_name, pid) in enumerate(self.pending):
            if name is None or pending_name == name:
                del self.pending[i]
                return pid
        self.deg.add("orphan_tool_response")
        return synthesized_id(NAME, "orphan", name, len(self.pending))


def _content_part(p: Any, deg: Degradations) -> list[Part]:
    """One entry of a content list: text (a bare string too), a refusal, Mistral's thinking
    chunk; media and unknown parts are counted."""
    if isinstance(p, str):
        return text_parts(p)
    kind = p.get("type") if isinstance(p, dict) else None
    if isinstance(p, dict) and kind == "text" and isinstance(p.get("text"), str | None):
        return text_parts(p.get("text"))
    if isinstance(p, dict) and kind == "refusal" and isinstance(p.get("refusal"), str | None):
        return text_parts(p.get("refusal"))
    if is_thinking_chunk(p):
        text = thinking_text(p)
        return [ReasoningPart(text)] if text else []
    deg.add("unsupported_content")
    return []


def _server_side(msg: dict[str, Any], deg: Degradations) -> None:
    """Count what rides beside the parts: citations of the text (OpenAI and Groq
    ``annotations``), tools the server ran (Groq ``executed_tools``), Gemini's thought
    signature (its OpenAI-compatible endpoint puts it in ``extra_content.google``)."""
    for key, reason in (
        ("annotations", "text_citation"),
        ("executed_tools", "unsupported_content"),
    ):
        entries = msg.get(key)
        if isinstance(entries, list):
            deg.add(reason, len(entries))
    calls = msg.get("tool_calls")
    for holder in [msg, *(calls if isinstance(calls, list) else [])]:
        extra = holder.get("extra_content") if isinstance(holder, dict) else None
        google = extra.get("google") if isinstance(extra, dict) else None
        if isinstance(google, dict) and google.get("thought_signature"):
            deg.add("opaque_reasoning")


def _reasoning_parts(msg: dict[str, Any], deg: Degradations) -> list[Part]:
    texts: list[str] = []
    for key in ("reasoning_content", "reasoning"):
        v = msg.get(key)
        if isinstance(v, str) and v and v not in texts:
            texts.append(v)
    details = msg.get("reasoning_details")
    if isinstance(details, list):
        for d in details:
            if not isinstance(d, dict):
                continue
            if d.get("type") == "reasoning.encrypted" or d.get("signature"):
                deg.add("opaque_reasoning")
            # The detail list repeats the reasoning string; it adds text only when that is absent.
            text = d.get("text") if d.get("type") == "reasoning.text" else d.get("summary")
            if not texts and isinstance(text, str) and text:
                texts.append(text)
    return [ReasoningPart(t) for t in texts]


def _call_part(tc: Any, ordinal: int, ctx: _Context) -> Part | None:
    """One entry of ``tool_calls`` (function or custom tool) as a tool-call part."""
    if not isinstance(tc, dict):
        ctx.deg.add("malformed_messages")
        return None
    fn = tc.get("function")
    custom = tc.get("custom")
    if tc.get("type") == "custom" and isinstance(custom, dict):
        name, args = custom.get("name"), custom.get("input")
    elif isinstance(fn, dict):
        name, args = fn.get("name"), fn.get("arguments")
    else:
        ctx.deg.add("unsupported_content")
        return None
    return _make_call(as_str(tc.get("id")), name, args, ordinal, ctx)


def _make_call(call_id: str | None, name: Any, args: Any, ordinal: int, ctx: _Context) -> Part:
    name = name if isinstance(name, str) else ""
    if call_id is None:
        call_id = synthesized_call_id(NAME, name, args, ordinal)
        ctx.deg.add("synthesized_id")
    ctx.pending.append((name, call_id))
    return tool_call(call_id, name, parse_arguments(args, ctx.deg))


def _has_audio(audio: Any) -> bool:
    # Some compatible servers send a zero-valued audio object on text answers.
    return isinstance(audio, dict) and any(audio.get(k) for k in ("id", "data", "transcript"))


def _assistant_parts(msg: dict[str, Any], ctx: _Context) -> list[Part]:
    parts = _reasoning_parts(msg, ctx.deg)
    parts += content_parts(msg.get("content"), ctx.deg, _content_part)
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append(TextPart(refusal))
    if _has_audio(msg.get("audio")):
        ctx.deg.add("unsupported_content")
    _server_side(msg, ctx.deg)
    ordinal = 0
    calls = msg.get("tool_calls")
    if isinstance(calls, list):
        for tc in calls:
            part = _call_part(tc, ordinal, ctx)
            if part is not None:
                parts.append(part)
                ordinal += 1
    elif calls is not None:
        ctx.deg.add("malformed_messages")
    fc = msg.get("function_call")
    # A zero-valued function_call ({name: "", arguments: ""}) is no call at all.
    if isinstance(fc, dict) and (as_str(fc.get("name")) or as_str(fc.get("arguments"))):
        parts.append(_make_call(None, fc.get("name"), fc.get("arguments"), ordinal, ctx))
    return parts


def _input_message(msg: Any, ctx: _Context) -> Message | None:
    if not isinstance(msg, dict):
        ctx.deg.add("malformed_messages")
        return None
    role = as_str(msg.get("role")) or "user"
    if role in ("tool", "function"):
        call_id = as_str(msg.get("tool_call_id"))
        name = as_str(msg.get("name"))
        # A legacy function result names its function; pairing by name needs no id.
        the_id = ctx.answer(call_id, name if call_id is None else None)
        return Message("tool", [ToolCallResponsePart(id=the_id, result=msg.get("content"))])
    if role == "assistant":
        return Message(role, _assistant_parts(msg, ctx))
    return Message(role, content_parts(msg.get("content"), ctx.deg, _content_part))


def _choice_index(pos: int, choice: dict[str, Any]) -> tuple[int, int]:
    idx = choice.get("index")
    if isinstance(idx, int) and not isinstance(idx, bool):
        return (idx, pos)
    return (pos, pos)


def _output_messages(body: dict[str, Any], ctx: _Context) -> list[Message]:
    choices = body.get("choices")
    if not isinstance(choices, list):
        return []
    ordered = sorted(
        ((c, _choice_index(i, c)) for i, c in enumerate(choices) if isinstance(c, dict)),
        key=lambda t: t[1],
    )
    out: list[Message] = []
    for choice, _ in ordered:
        msg = choice.get("message")
        if not isinstance(msg, dict):
            msg = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        out.append(
            Message(
                as_str(msg.get("role")) or "assistant",
                _assistant_parts(msg, ctx),
                finish_reason(choice.get("finish_reason")),
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------------


class _StreamChoice:
    def __init__(self) -> None:
        self.role: str | None = None
        self.text: dict[str, list[str]] = {}
        # Content sent as a list of chunks (Mistral's thinking and text chunks), in order.
        self.chunks: list[dict[str, Any]] | None = None
        self.calls: dict[int, dict[str, Any]] = {}
        self.function_call: dict[str, list[str]] | None = None
        self.audio: dict[str, Any] | None = None
        self.annotations: list[Any] = []
        self.executed: dict[Any, dict[str, Any]] = {}
        self.extra: Any = None
        self.finish: Any = None

    def add(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("role"), str):
            self.role = self.role or delta["role"]
        content = delta.get("content")
        if isinstance(content, list | dict) or (self.chunks is not None and content is not None):
            self._content_chunks(content)
        for key in ("content", "reasoning_content", "reasoning", "refusal"):
            v = delta.get(key)
            if isinstance(v, str) and (key != "content" or self.chunks is None):
                self.text.setdefault(key, []).append(v)
        if _has_audio(delta.get("audio")):
            self.audio = delta["audio"]
        if isinstance(delta.get("annotations"), list):
            self.annotations += delta["annotations"]
        if isinstance(delta.get("executed_tools"), list):
            # Groq sends each executed tool twice (its arguments, then its output): one by index.
            for pos, tool in enumerate(delta["executed_tools"]):
                if isinstance(tool, dict):
                    key = tool.get("index")
                    if not isinstance(key, int):  # no index: a tool of its own
                        key = f"{len(self.executed)}.{pos}"
                    self.executed.setdefault(key, {}).update(tool)
        if delta.get("extra_content") is not None:
            self.extra = delta["extra_content"]
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for frag in calls:
                if isinstance(frag, dict):
                    self._call_fragment(frag)
        fc = delta.get("function_call")
        if isinstance(fc, dict):
            acc = self.function_call or {"name": [], "arguments": []}
            for key in ("name", "arguments"):
                if isinstance(fc.get(key), str):
                    acc[key].append(fc[key])
            self.function_call = acc

    def _content_chunks(self, content: Any) -> None:
        """Content as chunks; adjacent text (and thinking) fragments join into one chunk."""
        if self.chunks is None:
            earlier = "".join(self.text.pop("content", []))
            self.chunks = [{"type": "text", "text": earlier}] if earlier else []
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for chunk in content if isinstance(content, list) else [content]:
            last = self.chunks[-1] if self.chunks else None
            if (
                field(chunk) == "text"
                and field(last) == "text"
                and isinstance(chunk.get("text"), str)
                and isinstance(last.get("text"), str)
            ):
                last["text"] += chunk["text"]
            elif is_thinking_chunk(chunk) and is_thinking_chunk(last):
                joined = thinking_text(last) + thinking_text(chunk)
                last["thinking"] = [{"type": "text", "text": joined}]
            elif isinstance(chunk, dict):
                self.chunks.append(dict(chunk))

    def _call_fragment(self, frag: dict[str, Any]) -> None:
        idx = frag.get("index")
        fid = as_str(frag.get("id"))
        if not isinstance(idx, int) or isinstance(idx, bool):
            # Without an index, a new id starts a new call; anything else continues the last one.
            known = {c["id"]: i for i, c in self.calls.items() if c["id"] is not None}
            if fid is not None and fid in known:
                idx = known[fid]
            elif fid is not None or not self.calls:
                idx = max(self.calls, default=-1) + 1
            else:
                idx = max(self.calls)
        call = self.calls.setdefault(
            idx, {"id": None, "type": None, "name": None, "args": [], "extra": None}
        )
        call["id"] = call["id"] or fid
        if frag.get("extra_content") is not None:
            call["extra"] = frag["extra_content"]
        if isinstance(frag.get("type"), str):
            call["type"] = call["type"] or frag["type"]
        fn = frag.get("custom") if isinstance(frag.get("custom"), dict) else frag.get("function")
        if isinstance(fn, dict):
            if as_str(fn.get("name")):
                call["name"] = call["name"] or fn["name"]
            args = fn.get("input") if "input" in fn else fn.get("arguments")
            if isinstance(args, str):
                call["args"].append(args)

    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": self.role or "assistant"}
        for key, pieces in self.text.items():
            msg[key] = "".join(pieces)
        if self.chunks is not None:
            msg["content"] = self.chunks
        if self.audio is not None:
            msg["audio"] = self.audio
        if self.annotations:
            msg["annotations"] = self.annotations
        if self.executed:
            msg["executed_tools"] = list(self.executed.values())
        if self.extra is not None:
            msg["extra_content"] = self.extra
        if self.calls:
            calls = []
            for _, c in sorted(self.calls.items()):
                args = "".join(c["args"])
                if c["type"] == "custom":
                    call = {
                        "id": c["id"],
                        "type": "custom",
                        "custom": {"name": c["name"], "input": args},
                    }
                else:
                    fn = {"name": c["name"], "arguments": args}
                    call = {"id": c["id"], "type": "function", "function": fn}
                if c["extra"] is not None:
                    call["extra_content"] = c["extra"]
                calls.append(call)
            msg["tool_calls"] = calls
        if self.function_call is not None:
            msg["function_call"] = {k: "".join(v) for k, v in self.function_call.items()}
        return msg


class _Stream:
    """A streamed response folded back into the body the plain response would have been."""

    def __init__(self, events: list[SSEEvent]) -> None:
        self.head: dict[str, Any] = {}
        self.usage: Any = None
        self.choices: dict[int, _StreamChoice] = {}
        self.done = False
        self.chunks = 0
        self.error: Any = None
        for e in events:
            if e.data.strip() == "[DONE]":
                self.done = True
                continue
            data = e.json()
            if isinstance(data, dict):
                self._chunk(data)

    def _chunk(self, data: dict[str, Any]) -> None:
        if data.get("error") is not None and "choices" not in data:
            self.error = data["error"]
            return
        self.chunks += 1
        for key in ("id", "model", "created", "system_fingerprint"):
            if key not in self.head and data.get(key) not in (None, ""):
                self.head[key] = data[key]
        groq = data.get("x_groq")
        if isinstance(data.get("usage"), dict):
            self.usage = data["usage"]
        elif isinstance(groq, dict) and isinstance(groq.get("usage"), dict):
            self.usage = groq["usage"]  # Groq's last chunk
        choices = data.get("choices")
        if not isinstance(choices, list):
            return
        for pos, c in enumerate(choices):
            if not isinstance(c, dict):
                continue
            idx = _choice_index(pos, c)[0]
            choice = self.choices.setdefault(idx, _StreamChoice())
            delta = c.get("delta") if isinstance(c.get("delta"), dict) else c.get("message")
            if isinstance(delta, dict):
                choice.add(delta)
            if c.get("finish_reason") not in (None, ""):
                choice.finish = c["finish_reason"]

    @property
    def complete(self) -> bool:
        # `[DONE]` after the usage chunk ends a whole stream even when a choice never said why
        # it finished (Snowflake Cortex): the finish reason is unknown, nothing was cut.
        return self.done and (
            self.usage is not None or all(c.finish is not None for c in self.choices.values())
        )

    def body(self) -> dict[str, Any]:
        body = dict(self.head)
        body["choices"] = [
            {
                "index": idx,
                "message": c.message(),
                # A stream cut by an error event ends its open choices with that error.
                "finish_reason": c.finish
                if c.finish is not None or self.error is None
                else "error",
            }
            for idx, c in sorted(self.choices.items())
        ]
        if self.usage is not None:
            body["usage"] = self.usage
        return body


# ---------------------------------------------------------------------------------------------
# Translate
# ---------------------------------------------------------------------------------------------


def translate(
    request: dict[str, Any] | None,
    response: dict[str, Any] | list[SSEEvent] | None,
    *,
    meta: dict[str, Any] | None = None,
) -> InferenceCall | Skip:
    """One exchange to a fact. response is a body or the events of a streamed body; either
    side may be missing. meta carries what the transport knew (headers, session)."""
    ex = Exchange.of(request, response)
    req, body = ex.req, ex.body
    ctx = _Context()
    if ex.events is not None:
        stream = _Stream(ex.events)
        if stream.error is not None and not stream.chunks:
            return Skip("error_response", error_detail(stream.error), NAME)
        if not stream.chunks and req is None:
            return Skip("empty", "a stream without one complete chunk", NAME)
        body = stream.body()
        if not stream.complete and stream.error is None:
            ctx.deg.add("truncated_stream")
    messages = req.get("messages") if req is not None else None
    if not isinstance(messages, list) and (
        body is None or not isinstance(body.get("choices"), list)
    ):
        return Skip("unrecognized_format", "neither chat messages nor choices", NAME)

    if not isinstance(messages, list):
        if messages is not None:
            ctx.deg.add("malformed_messages")
        messages = []
    inputs = [m for m in (_input_message(m, ctx) for m in messages) if m is not None]
    ctx.pending.clear()
    outputs = _output_messages(body, ctx) if body is not None else []
    tools = []
    for key in ("tools", "functions"):
        defs = req.get(key) if req is not None else None
        if isinstance(defs, list):
            tools += [t for t in (tool_definition(d, ctx.deg) for d in defs) if t is not None]
    return ex.fact(API, body, ctx.deg, meta, inputs=inputs, outputs=outputs, tools=tools)
