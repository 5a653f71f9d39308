"""OpenAI Chat Completions exchanges (plain or streamed) to facts.

The mapping follows docs/canonical.md; the choices it leaves open are in docs/sources/openai.md.
What it shares with the Responses translator is in openai_common.py. One module past 500 lines:
it is one format's whole mapping (request, response, stream, vendor variants), read top to bottom
against its reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lithify.model import (
    InferenceCall,
    Message,
    Part,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    Skip,
    TextPart,
    ToolCallResponsePart,
    ToolDefinition,
)
from lithify.translate._common import (
    Degradations,
    as_str,
    blob_part,
    error_detail,
    file_part,
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
    audio_mime,
    content_parts,
    field,
    file_input_part,
    freeform_arguments,
    inline_part,
    is_thinking_chunk,
    media_url_part,
    streamed_audio_part,
    thinking_text,
    tool_output,
)
from lithify.translate.sse import SSEEvent, lost

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

    def __init__(self, audio_type: str | None = None) -> None:
        self.deg = Degradations()
        # (name, id) of calls in order, so results without an id pair by name and order.
        self.pending: list[tuple[str, str]] = []
        # The MIME type of spoken answers: the request's audio.format.
        self.audio_type = audio_type

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


# Content entries that point at media by URL: the entry's key for it, and the modality. OpenAI's
# image_url is {url, detail} (Mistral also sends the URL as a plain string); vLLM documents
# audio_url and video_url, Mistral document_url (a URL or a data URL).
_MEDIA_URLS = {
    "image_url": "image",
    "audio_url": "audio",
    "video_url": "video",
    "document_url": "document",
}


def _media_part(p: Any, deg: Degradations) -> list[Part] | None:
    """A media entry of a content list as its part (none when it cannot be read: counted), or
    None when the entry is not media. ``detail``, ``filename`` and such stay on raw."""
    kind = field(p)
    if kind in _MEDIA_URLS:
        ref = p.get(kind)
        url = ref.get("url") if isinstance(ref, dict) else ref
        if not isinstance(url, str) or not url:
            deg.add("malformed_messages")
            return []
        part: Part | None = media_url_part(url, deg, _MEDIA_URLS[kind])
    elif kind == "input_audio":
        part = _input_audio(p.get("input_audio"), deg)
    elif kind == "file":
        # OpenAI nests {file_data | file_id, filename} under "file"; Mistral puts file_id beside
        # the type.
        f = p.get("file")
        part = file_input_part(f if isinstance(f, dict) else {"file_id": p.get("file_id")}, deg)
    else:
        return None
    return [part] if part is not None else []


def _input_audio(audio: Any, deg: Degradations) -> Part | None:
    """OpenAI's ``{data, format}`` (base64, MIME type from the format); Mistral's plain string
    (base64, a data URL, or a URL)."""
    if isinstance(audio, str) and audio:
        if ":" in audio and not audio.startswith("data:"):
            return media_url_part(audio, deg, "audio")
        return inline_part(audio, deg, modality="audio")
    data = audio.get("data") if isinstance(audio, dict) else None
    if not isinstance(data, str) or not data:
        deg.add("malformed_messages")
        return None
    return inline_part(data, deg, modality="audio", mime=audio_mime(audio.get("format")))


def _content_part(p: Any, deg: Degradations) -> list[Part]:
    """One entry of a content list: text (a bare string too), a refusal, Mistral's thinking
    chunk, media; a Mistral reference chunk (the sources the text before it cites) counts
    ``text_citation``; a part of any other type is counted."""
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
    media = _media_part(p, deg)
    if media is not None:
        return media
    if isinstance(p, dict) and kind == "reference" and isinstance(p.get("reference_ids"), list):
        deg.add("text_citation", max(1, len(p["reference_ids"])))
        return []
    deg.add("unsupported_content")
    return []


# What of a Groq executed tool is its result rather than its call.
_EXECUTED_RESULTS = ("output", "search_results", "code_results", "browser_results")


def _executed_tools(tools: Any, deg: Degradations) -> list[Part]:
    """Groq's ``executed_tools`` (the searches, code and browsing its compound systems ran before
    answering): each a ``server_tool_call`` named by its ``type``, the entry less its results
    (``arguments`` as the JSON text Groq gave), then a ``server_tool_call_response`` with the
    results it has (``output``, ``search_results``, ``code_results``, ``browser_results``). A
    chart code produced (``code_results[].png``) follows as an image blob, taken out of the
    response. Groq gives them no id."""
    if not isinstance(tools, list):
        return []
    parts: list[Part] = []
    for tool in tools:
        kind = field(tool)
        if not kind:
            deg.add("malformed_messages")
            continue
        call = {k: v for k, v in tool.items() if k not in _EXECUTED_RESULTS}
        parts.append(ServerToolCallPart(id=None, name=kind, server_tool_call=call))
        result = {k: tool[k] for k in _EXECUTED_RESULTS if tool.get(k) is not None}
        if not result:
            continue
        images: list[Part] = []
        if isinstance(result.get("code_results"), list):
            result["code_results"] = [_code_result(r, images, deg) for r in result["code_results"]]
        parts.append(ServerToolCallResponsePart(None, {"type": kind, **result}))
        parts += images
    return parts


def _code_result(r: Any, images: list[Part], deg: Degradations) -> Any:
    png = r.get("png") if isinstance(r, dict) else None
    if not isinstance(png, str) or not png:
        return r
    blob = blob_part(png, "image/png", deg, "image")
    if blob is not None:
        images.append(blob)
    return {k: v for k, v in r.items() if k != "png"}


def _audio_parts(audio: Any, ctx: _Context) -> list[Part]:
    """A spoken answer (``message.audio``): its transcript as text, then its bytes as an audio
    blob (MIME type from the request's ``audio.format``). A replayed answer with no bytes, only
    ``{"id": …}``, is a ``file`` part: the audio OpenAI keeps under that id. ``id`` and
    ``expires_at`` stay on raw."""
    if not _has_audio(audio):
        return []
    parts = text_parts(audio["transcript"]) if isinstance(audio.get("transcript"), str) else []
    data = audio.get("data")
    if data:
        blob = _audio_blob(data, ctx)
        if blob is not None:
            parts.append(blob)
    elif as_str(audio.get("id")):
        parts.append(file_part(audio["id"], None, ctx.deg, "audio"))
    return parts


def _audio_blob(data: Any, ctx: _Context) -> Part | None:
    """The audio bytes: one base64 string, or (a folded stream's) the pieces it came in."""
    if isinstance(data, str):
        return inline_part(data, ctx.deg, modality="audio", mime=ctx.audio_type)
    pieces = [d for d in data if isinstance(d, str)] if isinstance(data, list) else []
    return streamed_audio_part(pieces, ctx.audio_type, ctx.deg)


def _generated_images(images: Any, deg: Degradations) -> list[Part]:
    """Images the model generated, as OpenRouter and other gateways return them beside the text
    (``message.images``: ``image_url`` entries, data URLs): image parts after the text."""
    if not isinstance(images, list):
        return []
    parts: list[Part] = []
    for entry in images:
        got = _media_part(entry, deg)
        if got is None:
            deg.add("unsupported_content")
        else:
            parts += got
    return parts


def _server_side(msg: dict[str, Any], deg: Degradations) -> None:
    """Count what rides beside the parts: citations of the text (OpenAI and Groq
    ``annotations``), Gemini's thought signature (its OpenAI-compatible endpoint puts it in
    ``extra_content.google``)."""
    entries = msg.get("annotations")
    if isinstance(entries, list):
        deg.add("text_citation", len(entries))
    calls = msg.get("tool_calls")
    for holder in [msg, *(calls if isinstance(calls, list) else [])]:
        extra = holder.get("extra_content") if isinstance(holder, dict) else None
        google = extra.get("google") if isinstance(extra, dict) else None
        if isinstance(google, dict) and google.get("thought_signature"):
            deg.add("opaque_reasoning")


def _reasoning_parts(msg: dict[str, Any], deg: Degradations) -> list[Part]:
    """One part per readable ``reasoning_details`` entry, in order, and per reasoning string
    (``reasoning_content``, ``reasoning``; one when equal) the details do not repeat.
    OpenRouter's ``reasoning`` is its details' text joined, and a client replays the details
    alone, so the answer and its replay give the same parts."""
    details: list[str] = []
    entries = msg.get("reasoning_details")
    for d in entries if isinstance(entries, list) else []:
        if not isinstance(d, dict):
            continue
        if d.get("type") == "reasoning.encrypted" or d.get("signature"):
            deg.add("opaque_reasoning")
        text = d.get("text") if d.get("type") == "reasoning.text" else d.get("summary")
        if isinstance(text, str) and text:
            details.append(text)
    # Compared without whitespace: a server may join the details with line breaks.
    repeated = "".join("".join(details).split()) if details else None
    texts: list[str] = []
    for key in ("reasoning_content", "reasoning"):
        v = msg.get(key)
        if isinstance(v, str) and v and v not in texts and "".join(v.split()) != repeated:
            texts.append(v)
    return [ReasoningPart(t) for t in [*texts, *details]]


def _call_part(tc: Any, ordinal: int, ctx: _Context) -> Part | None:
    """One entry of ``tool_calls`` (function or custom tool) as a tool-call part."""
    if not isinstance(tc, dict):
        ctx.deg.add("malformed_messages")
        return None
    fn = tc.get("function")
    custom = tc.get("custom")
    call_id = as_str(tc.get("id"))
    if tc.get("type") == "custom" and isinstance(custom, dict):
        name, text = custom.get("name"), custom.get("input")
        return _make_call(call_id, name, text, ordinal, ctx, freeform_arguments)
    if isinstance(fn, dict):
        return _make_call(call_id, fn.get("name"), fn.get("arguments"), ordinal, ctx)
    ctx.deg.add("unsupported_content")
    return None


def _make_call(
    call_id: str | None,
    name: Any,
    args: Any,
    ordinal: int,
    ctx: _Context,
    read: Callable[[Any, Degradations], dict[str, Any]] = parse_arguments,
) -> Part:
    """A tool call; ``read`` makes its arguments object (a custom tool's: freeform_arguments)."""
    name = name if isinstance(name, str) else ""
    if call_id is None:
        call_id = synthesized_call_id(NAME, name, args, ordinal)
        ctx.deg.add("synthesized_id")
    ctx.pending.append((name, call_id))
    return tool_call(call_id, name, read(args, ctx.deg))


def _has_audio(audio: Any) -> bool:
    # Some compatible servers send a zero-valued audio object on text answers.
    return isinstance(audio, dict) and any(audio.get(k) for k in ("id", "data", "transcript"))


def _assistant_parts(msg: dict[str, Any], ctx: _Context) -> list[Part]:
    """An answer's parts in the order they were made: reasoning, the tools the server ran, the
    text (or refusal), a spoken answer, generated images, then the tool calls."""
    parts = _reasoning_parts(msg, ctx.deg)
    parts += _executed_tools(msg.get("executed_tools"), ctx.deg)
    parts += content_parts(msg.get("content"), ctx.deg, _content_part)
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append(TextPart(refusal))
    parts += _audio_parts(msg.get("audio"), ctx)
    parts += _generated_images(msg.get("images"), ctx.deg)
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
        # Images (or other media) in the result follow it as parts of their own.
        result, media = tool_output(msg.get("content"), ctx.deg, _media_part)
        return Message("tool", [ToolCallResponsePart(id=the_id, result=result), *media])
    if as_str(msg.get("name")) is not None:
        # Who spoke (AutoGen's agents, OpenAI's few-shot example_user): a Message has no place
        # for it, so the message is kept and the name counted; it stays on raw.
        ctx.deg.add("participant_name")
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


def _arguments(pieces: list[Any]) -> Any:
    """A streamed call's arguments from its fragments: the strings joined; one fragment that
    is not a string (a server that sends the object) as it is; strings and other values mixed
    as the list, which the mapping counts as malformed (``raw`` holds each)."""
    if all(isinstance(p, str) for p in pieces):
        return "".join(pieces)
    return pieces[0] if len(pieces) == 1 else pieces


class _StreamChoice:
    def __init__(self) -> None:
        self.role: str | None = None
        self.text: dict[str, list[str]] = {}
        # Content sent as a list of chunks (Mistral's thinking and text chunks), in order.
        self.chunks: list[dict[str, Any]] | None = None
        # Tool calls by (index, order started); the call each index's fragments now join.
        self.calls: dict[tuple[int, int], dict[str, Any]] = {}
        self._call_at: dict[int, tuple[int, int]] = {}
        self.function_call: dict[str, list[str]] | None = None
        # A spoken answer: id, transcript and base64 pieces as they came, the last expiry.
        self.audio: dict[str, Any] | None = None
        self.images: list[Any] = []
        self.annotations: list[Any] = []
        self.executed: dict[Any, dict[str, Any]] = {}
        # OpenRouter's reasoning details, each sent in fragments that name its type and index
        # (the latest detail of each type and index takes the fragments that follow).
        self.details: list[dict[str, Any]] = []
        self._detail_at: dict[tuple[str | None, int], dict[str, Any]] = {}
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
        if isinstance(delta.get("audio"), dict):
            self._audio(delta["audio"])
        if isinstance(delta.get("images"), list):
            self.images += delta["images"]
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
        if isinstance(delta.get("reasoning_details"), list):
            for detail in delta["reasoning_details"]:
                if isinstance(detail, dict):
                    self._detail(detail)
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

    def _audio(self, audio: dict[str, Any]) -> None:
        acc = self.audio
        if acc is None:
            acc = self.audio = {"id": None, "transcript": [], "data": [], "expires_at": None}
        if acc["id"] is None and as_str(audio.get("id")):
            acc["id"] = audio["id"]
        for key in ("transcript", "data"):
            if isinstance(audio.get(key), str):
                acc[key].append(audio[key])
        if audio.get("expires_at") is not None:
            acc["expires_at"] = audio["expires_at"]

    def _detail(self, detail: dict[str, Any]) -> None:
        """A fragment of a reasoning detail: its text, summary and encrypted data join those of
        the fragments before it with the same type and index, unless it names another id (then
        it starts a detail of its own); its other fields (signature, id, format) replace
        theirs."""
        kind, idx, ident = detail.get("type"), detail.get("index"), detail.get("id")
        key = (kind if isinstance(kind, str) else None, idx if type(idx) is int else 0)
        acc = self._detail_at.get(key)
        if acc is None or (isinstance(ident, str) and acc.get("id") not in (None, ident)):
            acc = self._detail_at[key] = {}
            self.details.append(acc)
        for name, value in detail.items():
            earlier = acc.get(name)
            if name in ("text", "summary", "data") and isinstance(earlier, str):
                acc[name] = earlier + value if isinstance(value, str) else earlier
            elif value is not None:
                acc[name] = value

    def _content_chunks(self, content: Any) -> None:
        """Content as chunks; adjacent text (and thinking) fragments join into one chunk."""
        if self.chunks is None:
            earlier = "".join(self.text.pop("content", []))
            self.chunks = [{"type": "text", "text": earlier}] if earlier else []
        for chunk in content if isinstance(content, list) else [content]:
            if isinstance(chunk, str):  # a bare string in a list of chunks is text as well
                chunk = {"type": "text", "text": chunk}
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
        """A fragment joins the call at its ``index``, unless it names an id other than that
        call's: Ollama (and LiteLLM's bridges) send index 0 for every call of a batch, each
        with its own id. Such a fragment continues the call with its id, else starts one."""
        idx = frag.get("index")
        fid = as_str(frag.get("id"))
        known = {c["id"]: key for key, c in self.calls.items() if c["id"] is not None}
        if isinstance(idx, int) and not isinstance(idx, bool):
            key = self._call_at.get(idx)
            if key is not None and fid is not None and self.calls[key]["id"] not in (None, fid):
                key = known.get(fid)
        elif fid is not None:
            # Without an index, a new id starts a new call; anything else continues the last one.
            idx, key = max(self.calls, default=(-1, 0))[0] + 1, known.get(fid)
        else:
            idx, key = 0, max(self.calls, default=None)
        if key is None:
            # Keys sort as the calls were sent: by index, then by which came first.
            key = (idx, len(self.calls))
            self.calls[key] = {"id": None, "type": None, "name": None, "args": [], "extra": None}
        self._call_at[key[0]] = key
        call = self.calls[key]
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
            if args is not None:
                call["args"].append(args)

    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": self.role or "assistant"}
        for key, pieces in self.text.items():
            msg[key] = "".join(pieces)
        if self.chunks is not None:
            msg["content"] = self.chunks
        if self.audio is not None:
            audio = {**self.audio, "transcript": "".join(self.audio["transcript"])}
            if not any(audio["data"]):
                audio["data"] = ""
            if _has_audio(audio):
                msg["audio"] = audio
        if self.images:
            msg["images"] = self.images
        if self.annotations:
            msg["annotations"] = self.annotations
        if self.executed:
            msg["executed_tools"] = list(self.executed.values())
        if self.details:
            msg["reasoning_details"] = self.details
        if self.extra is not None:
            msg["extra_content"] = self.extra
        if self.calls:
            calls = []
            for _, c in sorted(self.calls.items()):
                args = _arguments(c["args"])
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
        self.lost = 0  # events that could not be read, mid-stream (sse.lost)
        for i, e in enumerate(events):
            if e.data.strip() == "[DONE]":
                self.done = True
                continue
            data = e.json()
            if isinstance(data, dict):
                self._chunk(data)
            elif lost(events, i):
                self.lost += 1

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


# vLLM's constrained decoding, as extra request fields: before v0.12 each its own field, since in
# ``structured_outputs`` (``json_object`` there is JSON mode alone, no count).
_GUIDED = ("guided_json", "guided_regex", "guided_choice", "guided_grammar", "structural_tag")
_STRUCTURED = ("json", "regex", "choice", "grammar", "structural_tag")


def output_schema(req: dict[str, Any]) -> bool:
    """Whether the request held the answer to a form given outside the messages:
    ``response_format`` of type ``json_schema``, or a schema beside another type, as compatible
    servers take one (Fireworks, Together: ``{"type": "json_object", "schema": …}``); vLLM's
    JSON schema, regex, choice or grammar. JSON mode alone (``json_object``) is no count: the
    API has the prompt ask for JSON itself, so the row shows what shaped the answer."""
    fmt = req.get("response_format")
    if isinstance(fmt, dict) and (
        fmt.get("type") == "json_schema"
        or isinstance(fmt.get("json_schema"), dict)
        or isinstance(fmt.get("schema"), dict)
    ):
        return True
    if any(req.get(key) not in (None, "", [], {}) for key in _GUIDED):
        return True
    so = req.get("structured_outputs")
    return isinstance(so, dict) and any(so.get(k) not in (None, "", [], {}) for k in _STRUCTURED)


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
    spoken = req.get("audio") if req is not None else None
    ctx = _Context(audio_mime(spoken.get("format")) if isinstance(spoken, dict) else None)
    if ex.events is not None:
        stream = _Stream(ex.events)
        if stream.error is not None and not stream.chunks:
            return Skip("error_response", error_detail(stream.error), NAME)
        if not stream.chunks and req is None:
            return Skip("empty", "a stream without one complete chunk", NAME)
        body = stream.body()
        ctx.deg.add("malformed_messages", stream.lost)
        if not stream.complete:  # cut, or cut short by an error event: before its final event
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
    search = req.get("web_search_options") if req is not None else None
    if isinstance(search, dict):
        # The search models' web search, run by the provider: the built-in tool Responses
        # offers as {"type": "web_search", …} with the same options.
        tools.append(ToolDefinition("web_search", None, {}, {**search, "type": "web_search"}))
    if req is not None and output_schema(req):
        ctx.deg.add("output_schema")
    return ex.fact(API, body, ctx.deg, meta, inputs=inputs, outputs=outputs, tools=tools)
