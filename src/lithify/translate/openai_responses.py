"""OpenAI Responses API exchanges (plain or streamed) to facts.

The mapping follows docs/canonical.md; the choices it leaves open are in docs/sources/openai.md.
What it shares with the Chat Completions translator is in openai_common.py.
"""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from lithify.core.imagetype import image_type_of_base64
from lithify.model import (
    InferenceCall,
    Message,
    Part,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    Skip,
    ToolCallPart,
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
from lithify.translate.openai_common import (
    Api,
    Exchange,
    audio_mime,
    content_parts,
    field,
    file_input_part,
    freeform_arguments,
    inline_part,
    media_url_part,
    streamed_audio_part,
    tool_output,
)
from lithify.translate.sse import SSEEvent, lost

NAME = "openai-responses"
API = Api(
    NAME,
    input_tokens=("input_tokens", "prompt_tokens"),
    output_tokens=("output_tokens", "completion_tokens"),
    created="created_at",
    completed="completed_at",
    echoes_metadata=True,
)

_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_START_EVENTS = frozenset({"response.created", "response.in_progress", "response.queued"})
# Tools the client runs: the model's call, then the client's result as a tool message. The
# value is the call's name and the field holding its arguments; the built-in tools have no name
# of their own, so the tool's is used.
_CLIENT_CALLS: dict[str, tuple[str | None, str]] = {
    "function_call": (None, "arguments"),
    "custom_tool_call": (None, "input"),
    "computer_call": ("computer", "action"),
    "local_shell_call": ("local_shell", "action"),
    "shell_call": ("shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
}
_CALL_ITEMS = frozenset(_CLIENT_CALLS)
_RESULT_ITEMS = frozenset(f"{k}_output" for k in _CLIENT_CALLS)
# Tools the provider runs inside the model's turn: the tool's name (None: the item names the MCP
# tool) and the fields that are its result rather than its call.
_SERVER_CALLS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "web_search_call": ("web_search", ()),
    "file_search_call": ("file_search", ("results",)),
    "code_interpreter_call": ("code_interpreter", ("outputs",)),
    "image_generation_call": ("image_generation", ("result",)),
    "mcp_call": (None, ("output", "error")),
    "mcp_list_tools": ("mcp_list_tools", ("tools", "error")),
    "mcp_approval_request": (None, ()),
}
# Tools the provider runs whose call and result are items of their own, linked by call_id (tool
# search, a program the model wrote for programmatic tool calling, a shell in OpenAI's own
# container): the call's name, or None for the result. Tool search and the shell may be run by
# the client instead (_Walker._provider_ran).
_SERVER_PAIRS: dict[str, str | None] = {
    "tool_search_call": "tool_search",
    "tool_search_output": None,
    "program": "program",
    "program_output": None,
    "shell_call": "shell",
    "shell_call_output": None,
}
# The shell environments OpenAI runs itself; `local` (or none) is the client's machine.
_HOSTED = frozenset({"container_auto", "container_reference"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
# Request fields that point at content stored on the provider's side instead of carrying it.
_REFERENCES = ("previous_response_id", "conversation", "prompt")


# ---------------------------------------------------------------------------------------------
# Shape detection
# ---------------------------------------------------------------------------------------------


def looks_like_request(doc: dict[str, Any]) -> bool:
    """A Responses request: ``input`` as text or items, and not an embeddings/moderation call."""
    if not isinstance(doc, dict) or any(k in doc for k in ("messages", "contents", "output")):
        return False
    # Span attribute maps carry `input` too, under dotted keys a request never has.
    if any(isinstance(k, str) and "." in k for k in doc):
        return False
    inp = doc.get("input")
    if isinstance(inp, list):
        if inp and not all(isinstance(i, dict) for i in inp):
            return False
    elif not isinstance(inp, str):
        return isinstance(doc.get("instructions"), str) and "model" in doc
    if any(k in doc for k in ("encoding_format", "dimensions")):
        return False
    model = doc.get("model")
    return not (isinstance(model, str) and ("embed" in model or "moderation" in model))


def looks_like_response(doc: dict[str, Any]) -> bool:
    if not isinstance(doc, dict):
        return False
    if doc.get("object") == "response":
        return True
    return isinstance(doc.get("output"), list) and "status" in doc and "choices" not in doc


def _event_type(e: SSEEvent, data: Any) -> str | None:
    if isinstance(data, dict) and isinstance(data.get("type"), str):
        return data["type"]
    return e.event


def looks_like_stream(events: list[SSEEvent]) -> bool:
    for e in events:
        if not isinstance(e, SSEEvent):
            continue
        if isinstance(e.event, str) and e.event.startswith("response."):
            return True
        kind = _event_type(e, e.json())
        if isinstance(kind, str) and kind.startswith("response."):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Items to messages
# ---------------------------------------------------------------------------------------------


class _Walker:
    """Folds a list of items into messages: assistant-side items that follow each other become
    one assistant message, parts in item order."""

    def __init__(
        self, deg: Degradations, pending: list[tuple[str, str]], output: bool, shell_hosted: bool
    ) -> None:
        self.deg = deg
        # Everything in a response's output is the model's one turn: nothing there ends it.
        self.output = output
        self.pending = pending
        # Where a shell call that names no environment ran: where the offered shell tool runs.
        self.shell_hosted = shell_hosted
        # Each shell call's call_id and whether it was hosted, so its output is read as it was.
        self.shells: dict[str, bool] = {}
        self.messages: list[Message] = []
        self.assistant: list[Part] | None = None

    def flush(self) -> None:
        if self.assistant is not None:
            self.messages.append(Message("assistant", self.assistant))
            self.assistant = None

    def add_assistant(self, parts: list[Part]) -> None:
        if self.assistant is None:
            self.assistant = []
        self.assistant.extend(parts)

    def add(self, m: Message) -> None:
        self.flush()
        self.messages.append(m)

    def item(self, item: Any) -> None:
        if not isinstance(item, dict):
            self.deg.add("malformed_messages")
            return
        kind = field(item)
        if kind == "message" or (kind is None and "role" in item):
            role = as_str(item.get("role")) or "user"
            parts = content_parts(item.get("content"), self.deg, _content_part)
            if role == "assistant":
                self.add_assistant(parts)
            else:
                self.add(Message(role, parts))
        elif kind == "reasoning":
            self.add_assistant(_reasoning(item, self.deg))
        elif kind in _SERVER_PAIRS and self._provider_ran(item, kind):
            self._server_pair(item, kind)
        elif kind in _CALL_ITEMS:
            self._programmatic(item)
            self.add_assistant([self._call(item, *_CLIENT_CALLS[kind])])
        elif kind in _RESULT_ITEMS:
            self._programmatic(item)
            self.add(Message("tool", self._result(item, kind)))
        elif kind in _SERVER_CALLS:
            self.add_assistant(_server_tool(item, kind, self.deg))
        elif kind == "tool_search_call":  # run by the client: a tool call loading tools
            self.add_assistant([self._call(item, "tool_search", "arguments")])
        elif kind == "tool_search_output":  # the client's result: the tools it loaded
            call_id = self._answer(as_str(item.get("call_id")))
            self.add(Message("tool", [ToolCallResponsePart(call_id, item.get("tools"))]))
        elif kind == "mcp_approval_response":
            # The user's decision on an MCP call the model asked to make: a turn of the user's.
            approval = as_str(item.get("approval_request_id"))
            self.add(Message("user", [ServerToolCallResponsePart(approval, dict(item))]))
        elif kind == "item_reference" or (kind is None and _bare_reference(item)):
            # The reference makes `type` optional: an item of nothing but an `id` is one too.
            self.deg.add("content_reference")
            self.flush()
        elif kind == "compaction":
            # The earlier conversation, compacted into state only the provider can read: opaque
            # like encrypted reasoning, and no turn of its own.
            if item.get("encrypted_content"):
                self.deg.add("opaque_reasoning")
        else:
            self.deg.add("unsupported_content")
            # Calls the model made sit inside its turn; their outputs and anything else come
            # from the other side and end the turn.
            if not self.output and not (
                isinstance(kind, str) and kind.endswith(("_call", "_request", "_tools"))
            ):
                self.flush()

    def _call(self, item: dict[str, Any], tool: str | None, key: str) -> Part:
        """A call the client runs; ``tool`` names a built-in tool (None: the item names it),
        ``key`` is the field holding its arguments."""
        kind = field(item)
        name = tool or (item.get("name") if isinstance(item.get("name"), str) else "")
        namespace = as_str(item.get("namespace"))
        if tool is None and namespace is not None:
            # A function of a namespace tool: named as the model addresses it and as its
            # definition is (_tool_definitions), so crm.lookup and billing.lookup stay apart.
            name = f"{namespace}.{name}"
        args = item.get(key)
        # The computer tool may batch its actions in a list instead of one action.
        if kind == "computer_call" and args is None and isinstance(item.get("actions"), list):
            args = {"actions": item["actions"]}
        call_id = as_str(item.get("call_id"))
        if call_id is None:
            ordinal = sum(1 for p in self.assistant or [] if isinstance(p, ToolCallPart))
            call_id = synthesized_call_id(NAME, name, args, ordinal)
            self.deg.add("synthesized_id")
        self.pending.append((as_str(item.get("id")) or "", call_id))
        read = freeform_arguments if kind == "custom_tool_call" else parse_arguments
        return tool_call(call_id, name, read(args, self.deg))

    def _programmatic(self, item: dict[str, Any]) -> None:
        """A call a program issued (``caller: {type: "program"}``), or its result, which went
        back to that program: the part cannot say the model did not make it, so it is counted."""
        caller = item.get("caller")
        if isinstance(caller, dict) and caller.get("type") not in (None, "direct"):
            self.deg.add("unsupported_content")

    def _provider_ran(self, item: dict[str, Any], kind: str) -> bool:
        """Whether an item of _SERVER_PAIRS is the provider's. Tool search is, unless it says
        the client ran it. A shell call is when its ``environment`` is a container of OpenAI's;
        one that names none ran where the offered shell tool runs. A shell output is read as its
        call was (by call_id), else by the offered tool."""
        if kind.startswith("tool_search_"):
            return item.get("execution") != "client"
        if not kind.startswith("shell_call"):
            return True
        call_id = as_str(item.get("call_id"))
        if kind == "shell_call_output":
            return self.shells.get(call_id or "", self.shell_hosted)
        env = item.get("environment")
        hosted = _hosted(env) if isinstance(env, dict) else self.shell_hosted
        if call_id is not None:
            self.shells[call_id] = hosted
        return hosted

    def _server_pair(self, item: dict[str, Any], kind: str) -> None:
        """A provider-run tool whose call and result are items of their own, each kept whole and
        linked by its call_id: tool search, a program the model wrote and its output, a hosted
        shell's commands and what they printed."""
        # The output names its call by call_id; a call without one is known by its item id.
        ref = as_str(item.get("call_id")) or as_str(item.get("id"))
        name = _SERVER_PAIRS[kind]
        if name is not None:
            self.add_assistant([ServerToolCallPart(ref, name, dict(item))])
        else:
            self.add_assistant([ServerToolCallResponsePart(ref, dict(item))])

    def _result(self, item: dict[str, Any], kind: str) -> list[Part]:
        """A client tool's result: one tool_call_response part, then the media it returned."""
        call_id = as_str(item.get("call_id"))
        if call_id is None and kind == "local_shell_call_output":
            # The reference gives this item only an `id`, "the ID of the local shell tool call":
            # taken when it names an open call (by its call_id or its item id).
            ref = as_str(item.get("id"))
            call_id = next((c for i, c in self.pending if ref in (i, c)), None)
        call_id = self._answer(call_id)
        output = item.get("output")
        if kind in ("function_call_output", "custom_tool_call_output"):
            result, media = tool_output(output, self.deg, _media)
            return [ToolCallResponsePart(id=call_id, result=result), *media]
        if kind != "computer_call_output" or not isinstance(output, dict):
            return [ToolCallResponsePart(id=call_id, result=output)]
        # A screenshot: the result says what came back, the image follows as a part of its own.
        for key in ("image_url", "file_id"):
            ref = output.get(key)
            if isinstance(ref, str) and ref:
                rest = {k: v for k, v in output.items() if k != key}
                media = (
                    media_url_part(ref, self.deg, "image")
                    if key == "image_url"
                    else file_part(ref, None, self.deg, "image")
                )
                response = ToolCallResponsePart(id=call_id, result=rest)
                return [response] if media is None else [response, media]
        return [ToolCallResponsePart(id=call_id, result=output)]

    def _answer(self, call_id: str | None) -> str:
        if call_id is not None:
            self.pending[:] = [p for p in self.pending if p[1] != call_id]
            return call_id
        if self.pending:
            return self.pending.pop(0)[1]
        self.deg.add("orphan_tool_response")
        return synthesized_id(NAME, "orphan", len(self.messages))

    def done(self) -> list[Message]:
        self.flush()
        return self.messages


def _hosted(environment: Any) -> bool:
    return isinstance(environment, dict) and environment.get("type") in _HOSTED


def _bare_reference(item: dict[str, Any]) -> bool:
    """An ``item_reference`` without its optional ``type``: ``{"id": …}`` and nothing else."""
    return as_str(item.get("id")) is not None and set(item) <= {"id", "type"}


def _content_part(p: Any, deg: Degradations) -> list[Part]:
    """One entry of a message's content: text (its citations counted), a refusal, an image, a
    file or audio; anything else is counted."""
    kind = field(p)
    if isinstance(p, dict) and kind in _TEXT_PARTS and isinstance(p.get("text"), str | None):
        if isinstance(p.get("annotations"), list):
            deg.add("text_citation", len(p["annotations"]))
        return text_parts(p.get("text"))
    if isinstance(p, dict) and kind == "refusal" and isinstance(p.get("refusal"), str | None):
        return text_parts(p.get("refusal"))
    media = _media(p, deg)
    if media is not None:
        return media
    deg.add("unsupported_content")
    return []


# Image generation's output_format (the default, png, is often not echoed: then the bytes say).
_IMAGE_FORMATS = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "webp": "image/webp",
    "gif": "image/gif",
    "svg": "image/svg+xml",
}


def _input_image(p: dict[str, Any], deg: Degradations) -> Part | None:
    url, file_id = as_str(p.get("image_url")), as_str(p.get("file_id"))
    if url is not None:
        return media_url_part(url, deg, "image")
    if file_id is not None:
        return file_part(file_id, None, deg, "image")
    deg.add("malformed_messages")
    return None


def _input_audio(p: dict[str, Any], deg: Degradations) -> Part | None:
    audio = p.get("input_audio")
    data = as_str(audio.get("data")) if isinstance(audio, dict) else None
    if data is None:
        deg.add("malformed_messages")
        return None
    return inline_part(data, deg, modality="audio", mime=audio_mime(audio.get("format")))


_MEDIA = {"input_image": _input_image, "input_file": file_input_part, "input_audio": _input_audio}


def _media(entry: Any, deg: Degradations) -> list[Part] | None:
    """A media entry of a tool's output list as its parts (none when unreadable: counted), or
    None when the entry is not media."""
    kind = field(entry)
    if kind not in _MEDIA:
        return None
    part = _MEDIA[kind](entry, deg)
    return [part] if part is not None else []


def _server_tool(item: dict[str, Any], kind: str, deg: Degradations) -> list[Part]:
    """A tool the provider ran: the item, less its result, as the call; the result (when the
    item has one) as the response; a generated image after both, as a blob part."""
    tool, result_keys = _SERVER_CALLS[kind]
    name = tool or (item.get("name") if isinstance(item.get("name"), str) else "") or kind
    item_id = as_str(item.get("id"))
    call = {k: v for k, v in item.items() if k not in result_keys}
    parts: list[Part] = [ServerToolCallPart(id=item_id, name=name, server_tool_call=call)]
    if kind == "image_generation_call":
        image = as_str(item.get("result"))
        if image is not None:
            parts.append(ServerToolCallResponsePart(item_id, {"type": kind}))
            blob = blob_part(image, _generated_image_type(item, image), deg, "image")
            if blob is not None:
                parts.append(blob)
        return parts
    result = {k: item[k] for k in result_keys if item.get(k) is not None}
    media: list[Part] = []
    if kind == "code_interpreter_call" and isinstance(result.get("outputs"), list):
        # Images the code made (a data URL or a container file's URL) follow the response
        # as parts of their own, in output order; their entries keep everything but the URL.
        outputs = []
        for out in result["outputs"]:
            url = as_str(out.get("url")) if field(out) == "image" else None
            if url is None:
                outputs.append(out)
                continue
            outputs.append({k: v for k, v in out.items() if k != "url"})
            image = media_url_part(url, deg, "image")
            if image is not None:
                media.append(image)
        result["outputs"] = outputs
    if result:
        parts.append(ServerToolCallResponsePart(item_id, {"type": kind, **result}))
    return parts + media


def _generated_image_type(item: dict[str, Any], data: str) -> str | None:
    fmt = item.get("output_format")
    if isinstance(fmt, str) and fmt.lower() in _IMAGE_FORMATS:
        return _IMAGE_FORMATS[fmt.lower()]
    return image_type_of_base64(data)


def _reasoning(item: dict[str, Any], deg: Degradations) -> list[Part]:
    parts: list[Part] = []
    for key, kind in (("summary", "summary_text"), ("content", "reasoning_text")):
        entries = item.get(key)
        if not isinstance(entries, list):
            continue
        for s in entries:
            if isinstance(s, dict) and s.get("type") == kind and isinstance(s.get("text"), str):
                if s["text"]:
                    parts.append(ReasoningPart(s["text"]))
            else:
                deg.add("unsupported_content")
    if item.get("encrypted_content"):
        deg.add("opaque_reasoning")
    return parts


def _items(
    value: Any,
    deg: Degradations,
    pending: list[tuple[str, str]],
    *,
    output: bool = False,
    shell_hosted: bool = False,
) -> list[Message]:
    w = _Walker(deg, pending, output, shell_hosted)
    if isinstance(value, str):
        w.add(Message("user", text_parts(value)))
    elif isinstance(value, list):
        for item in value:
            w.item(item)
    elif value is not None:
        deg.add("malformed_messages")
    return w.done()


def _instructions(value: Any, deg: Degradations) -> list[Message]:
    if isinstance(value, str):
        return [Message("system", text_parts(value))] if value else []
    # A response built from a stored prompt echoes its instructions as input items.
    return _items(value, deg, []) if isinstance(value, list) else []


def status_finish(body: dict[str, Any], calls: bool) -> str | None:
    """The Responses status as an OTel finish reason; ``calls``: the output holds a call the
    client is to run (a tool_call part)."""
    status = body.get("status")
    if status == "completed":
        return "tool_call" if calls else "stop"
    if status == "incomplete":
        details = body.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if reason in (None, "", "max_output_tokens"):
            return "length"
        return finish_reason(reason)
    if status == "failed":
        return "error"
    if status in (None, "", "in_progress", "queued"):
        return None
    return finish_reason(status)


# ---------------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------------


def _slot(items: list[Any], index: Any, default: dict[str, Any]) -> dict[str, Any]:
    """items[index], grown and filled with ``default`` as needed (indices are small ints)."""
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 1024:
        index = 0
    while len(items) <= index:
        items.append(None)
    if not isinstance(items[index], dict):
        items[index] = dict(default)
    return items[index]


def _write(target: dict[str, Any], attr: str, delta: Any, whole: Any) -> None:
    """Append a delta to a text field, or set the whole text a ``.done`` event carries."""
    if isinstance(whole, str):
        target[attr] = whole
    elif isinstance(delta, str):
        current = target.get(attr)
        target[attr] = (current if isinstance(current, str) else "") + delta


class _Stream:
    """A streamed response: the final response object when it came, else one rebuilt from the
    items and deltas that did."""

    def __init__(self, events: list[SSEEvent]) -> None:
        self.snapshot: dict[str, Any] | None = None
        self.final: dict[str, Any] | None = None
        self.error: Any = None
        self.items: dict[Any, dict[str, Any]] = {}
        self.by_id: dict[str, Any] = {}
        # A spoken answer's transcript and base64 pieces (response.audio.*): no response object
        # has a place for audio, so these events are all there is of it.
        self.transcript: list[str] = []
        self.audio: list[str] = []
        self.lost = 0  # events that could not be read, mid-stream (sse.lost)
        for i, e in enumerate(events):
            data = e.json()
            if isinstance(data, dict):
                self._event(_event_type(e, data), data)
            elif lost(events, i):
                self.lost += 1

    def _item(self, data: dict[str, Any], kind: str) -> dict[str, Any]:
        key = data.get("output_index")
        item_id = as_str(data.get("item_id"))
        if not isinstance(key, int) or isinstance(key, bool):
            key = self.by_id.get(item_id, item_id) if item_id else len(self.items)
        if key not in self.items:
            # An item known only from its deltas (its output_item.added never came): a message
            # there is the model's, as every message of a response's output is.
            self.items[key] = {"type": kind, "id": item_id}
            if kind == "message":
                self.items[key]["role"] = "assistant"
        if item_id:
            self.by_id.setdefault(item_id, key)
        return self.items[key]

    def _event(self, kind: str | None, data: dict[str, Any]) -> None:
        response = data.get("response")
        if kind in _START_EVENTS and isinstance(response, dict):
            self.snapshot = response
        elif kind in _FINAL_EVENTS and isinstance(response, dict):
            self.final = response
        elif kind == "error":
            self.error = data.get("error") if isinstance(data.get("error"), dict) else data
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = data.get("item")
            if isinstance(item, dict):
                key = data.get("output_index")
                if not isinstance(key, int) or isinstance(key, bool):
                    key = self.by_id.get(as_str(item.get("id")) or "", len(self.items))
                self.items[key] = dict(item)
                if as_str(item.get("id")):
                    self.by_id.setdefault(item["id"], key)
        elif isinstance(kind, str):
            self._delta(kind, data)

    def _delta(self, kind: str, data: dict[str, Any]) -> None:
        text = data.get("delta") if kind.endswith(".delta") else None
        if kind in ("response.audio.delta", "response.audio.transcript.delta"):
            if isinstance(text, str):
                (self.audio if kind == "response.audio.delta" else self.transcript).append(text)
        elif kind == "response.output_text.annotation.added":
            part = self._part(data, "content", "output_text")
            notes = part.get("annotations")
            part["annotations"] = [
                *(notes if isinstance(notes, list) else []),
                data.get("annotation"),
            ]
        elif kind.startswith(("response.output_text.", "response.refusal.")):
            attr = "refusal" if kind.startswith("response.refusal.") else "text"
            part = self._part(data, "content", "refusal" if attr == "refusal" else "output_text")
            _write(part, attr, text, data.get(attr) if kind.endswith(".done") else None)
        elif kind.startswith("response.content_part."):
            part = data.get("part")
            if isinstance(part, dict):
                # A message's text or refusal, or a reasoning item's text (reasoning_text).
                ptype = field(part) if field(part) in ("refusal", "reasoning_text") else None
                self._part(data, "content", ptype or "output_text").update(part)
        elif kind.startswith("response.shell_call_command."):
            self._shell_command(data, kind)
        elif kind.startswith("response.shell_call_output_content."):
            self._shell_output(data, kind)
        elif kind.startswith(
            ("response.function_call_arguments.", "response.custom_tool_call_input.")
        ):
            custom = kind.startswith("response.custom_tool_call_input.")
            attr = "input" if custom else "arguments"
            item = self._item(data, "custom_tool_call" if custom else "function_call")
            _write(item, attr, text, data.get(attr) if kind.endswith(".done") else None)
        elif kind.startswith(
            ("response.code_interpreter_call_code.", "response.mcp_call_arguments.")
        ):
            # A server tool's code or arguments, for a stream cut before its item was done.
            code = kind.startswith("response.code_interpreter_call_code.")
            attr = "code" if code else "arguments"
            item = self._item(data, "code_interpreter_call" if code else "mcp_call")
            _write(item, attr, text, data.get(attr) if kind.endswith(".done") else None)
        elif kind.startswith(("response.reasoning_summary_", "response.reasoning_text.")):
            summary = kind.startswith("response.reasoning_summary_")
            part = self._part(
                data,
                "summary" if summary else "content",
                "summary_text" if summary else "reasoning_text",
            )
            if isinstance(data.get("part"), dict):
                part.update(data["part"])
            _write(part, "text", text, data.get("text") if kind.endswith(".done") else None)

    def _shell_command(self, data: dict[str, Any], kind: str) -> None:
        """A shell call's command, streamed into ``action.commands[command_index]`` (added with
        its start, then deltas, then done with the whole), for a stream cut before its item was
        done."""
        item = self._item(data, "shell_call")
        action = item.get("action")
        if not isinstance(action, dict):
            action = item["action"] = {}
        commands = action.get("commands")
        if not isinstance(commands, list):
            commands = action["commands"] = []
        index = data.get("command_index")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 1024:
            index = len(commands)
        while len(commands) <= index:
            commands.append("")
        current = commands[index] if isinstance(commands[index], str) else ""
        text = data.get("delta") if kind.endswith(".delta") else data.get("command")
        if isinstance(text, str):
            commands[index] = current + text if kind.endswith(".delta") else text

    def _shell_output(self, data: dict[str, Any], kind: str) -> None:
        """What a shell command printed, streamed into ``output[command_index]`` (stdout and
        stderr deltas joined; done gives the whole run), for a stream cut before the
        shell_call_output item was done."""
        item = self._item(data, "shell_call_output")
        runs = item.get("output")
        if not isinstance(runs, list):
            runs = item["output"] = []
        run = _slot(runs, data.get("command_index"), {})
        delta = data.get("delta")
        if kind.endswith(".delta") and isinstance(delta, dict):
            for stream in ("stdout", "stderr"):
                _write(run, stream, delta.get(stream), None)
        whole = data.get("output")
        if kind.endswith(".done") and isinstance(whole, list) and len(whole) == 1:
            run.update(whole[0] if isinstance(whole[0], dict) else {})

    def _part(self, data: dict[str, Any], where: str, kind: str) -> dict[str, Any]:
        item = self._item(
            data, "reasoning" if where == "summary" or kind == "reasoning_text" else "message"
        )
        parts = item.get(where)
        if not isinstance(parts, list):
            parts = item[where] = []
        index = data.get("summary_index" if where == "summary" else "content_index")
        return _slot(parts, index, {"type": kind})

    def output(self) -> list[dict[str, Any]]:
        def order(key: Any) -> tuple[int, str]:
            return (key, "") if isinstance(key, int) else (1 << 30, str(key))

        out = []
        for key in sorted(self.items, key=order):
            item = self.items[key]
            for where in ("content", "summary"):
                if isinstance(item.get(where), list):
                    item[where] = [p for p in item[where] if p is not None]
            out.append(item)
        return out

    def body(self) -> dict[str, Any] | None:
        """The response object, and whether the stream reached its final event."""
        if self.final is not None:
            body = self.final
            # Some compatible servers send a final response without its output items.
            if not body.get("output") and self.items:
                body = {**body, "output": self.output()}
            return body
        if self.snapshot is None and not self.items and self.error is None and not self.spoken:
            return None
        body = {**(self.snapshot or {}), "output": self.output()}
        body["status"] = "failed" if self.error is not None else None
        return body

    @property
    def started(self) -> bool:
        return self.snapshot is not None or bool(self.items) or self.spoken

    @property
    def spoken(self) -> bool:
        return any(self.transcript) or any(self.audio)

    def spoken_parts(self, deg: Degradations) -> list[Part]:
        """The spoken answer as Chat's ``message.audio`` gives it: the transcript as text, then
        the bytes as an audio blob (MIME type unknown: a Responses request names no format)."""
        parts: list[Part] = text_parts("".join(self.transcript))
        blob = streamed_audio_part(self.audio, None, deg) if any(self.audio) else None
        return parts if blob is None else [*parts, blob]


# ---------------------------------------------------------------------------------------------
# Translate
# ---------------------------------------------------------------------------------------------


def _offered(req: dict[str, Any] | None, body: dict[str, Any] | None) -> list[Any]:
    # The response echoes the tools it was offered; the request's own list wins when present.
    defs = req.get("tools") if req is not None and "tools" in req else None
    if defs is None and body is not None:
        defs = body.get("tools")
    return defs if isinstance(defs, list) else []


def _tool_definitions(d: Any, deg: Degradations) -> list[ToolDefinition]:
    """One entry of ``tools``. A namespace's function and custom tools are definitions of their
    own, named as their calls are (``crm.lookup``, _Walker._call); the namespace's description
    has no place in a flat list of tools and counts ``unsupported_tool`` (it stays on raw)."""
    if (
        isinstance(d, dict)
        and d.get("type") == "namespace"
        and as_str(d.get("name")) is not None
        and isinstance(d.get("tools"), list)
    ):
        if as_str(d.get("description")) is not None:
            deg.add("unsupported_tool")
        members = (tool_definition(m, deg) for m in d["tools"])
        return [replace(t, name=f"{d['name']}.{t.name}") for t in members if t is not None]
    t = tool_definition(d, deg)
    return [] if t is None else [t]


def output_schema(req: dict[str, Any]) -> bool:
    """Whether ``text.format`` constrains the answer to a JSON schema (type ``json_schema``).
    ``json_object`` and ``text`` are no count: JSON mode has the prompt ask for JSON itself."""
    text = req.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    return isinstance(fmt, dict) and (
        fmt.get("type") == "json_schema" or isinstance(fmt.get("schema"), dict)
    )


def translate(
    request: dict[str, Any] | None,
    response: dict[str, Any] | list[SSEEvent] | None,
    *,
    meta: dict[str, Any] | None = None,
) -> InferenceCall | Skip:
    """One exchange to a fact. response is a body or the events of a streamed body; either
    side may be missing. meta carries what the transport knew (headers, session)."""
    ex = Exchange.of(request, response)
    req, body, events = ex.req, ex.body, ex.events
    deg = Degradations()
    spoken: list[Part] = []
    if events is not None:
        stream = _Stream(events)
        if stream.error is not None and not stream.started and stream.final is None:
            return Skip("error_response", error_detail(stream.error), NAME)
        body = stream.body()
        if body is None and req is None:
            return Skip("empty", "a stream without one complete event", NAME)
        deg.add("malformed_messages", stream.lost)
        if stream.final is None:  # cut, or cut short by an error event (not response.failed)
            deg.add("truncated_stream")
        spoken = stream.spoken_parts(deg)
    if req is None and body is None:
        return Skip("empty", "neither a request nor a response", NAME)
    # A body that is not a response object (no output list) says nothing about the answer.
    if body is not None and events is None and not isinstance(body.get("output"), list):
        body = None
    if body is None and (req is None or not any(k in req for k in ("input", "instructions"))):
        return Skip("unrecognized_format", "neither Responses input nor output", NAME)

    offered = _offered(req, body)
    hosted = any(field(d) == "shell" and _hosted(d.get("environment")) for d in offered)
    pending: list[tuple[str, str]] = []
    inputs: list[Message] = []
    if req is not None:
        instructions = req.get("instructions")
        if instructions is None and body is not None:
            instructions = body.get("instructions")
        inputs = _instructions(instructions, deg) + _items(
            req.get("input"), deg, pending, shell_hosted=hosted
        )
        deg.add("content_reference", sum(1 for k in _REFERENCES if req.get(k)))
    elif body is not None:
        inputs = _instructions(body.get("instructions"), deg)

    outputs: list[Message] = []
    if body is not None:
        produced = _items(body.get("output"), deg, [], output=True, shell_hosted=hosted)
        calls = any(isinstance(p, ToolCallPart) for m in produced for p in m.parts)
        reason = status_finish(body, calls)
        if spoken:
            # After the turn's items: the audio events name no item to place it by.
            if produced and produced[-1].role == "assistant":
                produced[-1] = Message("assistant", [*produced[-1].parts, *spoken])
            else:
                produced.append(Message("assistant", spoken))
        if not produced and (reason is not None or events is None):
            produced = [Message("assistant", [])]
        outputs = [Message(m.role, m.parts, reason) for m in produced]
    tools = [t for d in offered for t in _tool_definitions(d, deg)]
    # The response echoes the format too: a stored prompt (``prompt``) may set it, unseen in the
    # request, and a capture may hold the response alone.
    stated = req if req is not None and "text" in req else body
    if stated is not None and output_schema(stated):
        deg.add("output_schema")
    return ex.fact(API, body, deg, meta, inputs=inputs, outputs=outputs, tools=tools)
