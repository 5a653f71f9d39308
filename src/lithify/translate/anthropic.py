"""Anthropic Messages exchanges (plain or streamed) to facts.

Mapping rules: docs/canonical.md; the choices made where it is silent: docs/sources/anthropic-gemini.md.
A streamed body is first reassembled into the message a non-streamed call returns, then both go
through the same code, so the two give the same fact. One module past 500 lines: it is one
format's whole mapping (request, response, stream), read top to bottom against its reference.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from lithify.core.values import as_int
from lithify.model import (
    InferenceCall,
    Message,
    Part,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    Skip,
    ToolCallResponsePart,
)
from lithify.translate._common import (
    Degradations,
    as_str,
    blob_part,
    error_detail,
    file_part,
    finish,
    finish_reason,
    parse_arguments,
    synthesized_call_id,
    text_parts,
    tool_call,
    tool_definition,
    transport_times,
    url_part,
)
from lithify.translate.messages_format import messages_format
from lithify.translate.sse import SSEEvent, event_json, lost, raw_stream

NAME = "anthropic"

_STREAM_TYPES = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }
)
# Blocks that carry media: in a turn, and inside a tool result (a computer-use screenshot).
_MEDIA = frozenset({"image", "document"})
# Blocks that record a tool the API ran itself; every `*_tool_result` block but the client's
# own `tool_result` is what such a tool returned (web search, web fetch, code execution, …).
_SERVER_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})
# How deep a document's `content` source may nest blocks before it is taken as malformed.
_MAX_DEPTH = 8
# Anthropic platforms that serve the Messages API under another provider name (OTel names).
_PLATFORMS = {"vertex": "gcp.vertex_ai", "bedrock": "aws.bedrock"}

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# Claude Code before v2.1.78: "user_<sha256>_account_<uuid or empty>_session_<uuid>".
_LEGACY_SESSION = re.compile(rf"(?:^|_)session_({_UUID})$")


# --- shape detection ------------------------------------------------------------------------


def looks_like_request(doc: dict[str, Any]) -> bool:
    """A Messages request: ``messages`` that are not Chat Completions' (messages_format.py)."""
    return messages_format(doc) == NAME


def looks_like_response(doc: dict[str, Any]) -> bool:
    if not isinstance(doc.get("content"), list):
        return False
    return doc.get("type") == "message" or ("stop_reason" in doc and doc.get("role") == "assistant")


def looks_like_stream(events: list[SSEEvent]) -> bool:
    for ev in events[:8]:
        if isinstance(ev, SSEEvent) and ev.event in _STREAM_TYPES:
            return True
        data = event_json(ev)
        if not isinstance(data, dict):
            continue
        kind = data.get("type")
        if kind in _STREAM_TYPES or (kind == "error" and isinstance(data.get("error"), dict)):
            return True
    return False


# --- request side -----------------------------------------------------------------------------


class _Ids:
    """Ids for tool calls and results that came without one (invalid, but never dropped), from
    what each is and its place among its message's calls (or results)."""

    def __init__(self, deg: Degradations) -> None:
        self.deg = deg
        self.calls = self.results = 0

    def message(self) -> None:
        self.calls = self.results = 0

    def call(self, value: Any, name: str, args: Any) -> str:
        self.calls += 1
        if isinstance(value, str) and value:
            return value
        self.deg.add("synthesized_id")
        return synthesized_call_id(NAME, name, args, self.calls - 1)

    def result(self, value: Any, result: Any) -> str:
        self.results += 1
        if isinstance(value, str) and value:
            return value
        self.deg.add("orphan_tool_response")
        return synthesized_call_id(NAME, "", result, "result", self.results - 1)


def _tool_result(block: dict[str, Any], ids: _Ids, deg: Degradations) -> Message:
    """A ``tool`` message: the result, then the images and documents the tool returned.

    The result is what the model saw: a string stays a string, blocks stay blocks, except that
    image and document blocks that are media leave the list and follow as media parts in their
    order (a screenshot-only result is ``[]``). `is_error` is not part of the value; it stays on
    raw.
    """
    content = block.get("content", "")
    if content is None:
        content = ""
    result = content
    media: list[Part] = []
    if isinstance(content, list) and any(leaves_tool_result(b) for b in content):
        result = [b for b in content if not leaves_tool_result(b)]
        for b in content:
            if leaves_tool_result(b):
                media.extend(_media(b, deg, 0))
    # The id of a result without one is made of the content as sent, media included.
    part = ToolCallResponsePart(id=ids.result(block.get("tool_use_id"), content), result=result)
    return Message("tool", [part, *media])


def _one(part: Part | None) -> list[Part]:
    return [part] if part is not None else []


def leaves_tool_result(block: Any) -> bool:
    """Whether a block of a tool result is media that follows the result as parts of its own
    (public for telemetry that records Anthropic blocks, to split results the same way).

    A document of content blocks is text (and images) the tool returned, not a file: it stays
    in the result, as a ``search_result`` does, so the result keeps what the model read.
    """
    if not isinstance(block, dict) or block.get("type") not in _MEDIA:
        return False
    source = block.get("source")
    return not (
        block.get("type") == "document"
        and isinstance(source, dict)
        and source.get("type") == "content"
    )


def _media(block: dict[str, Any], deg: Degradations, depth: int) -> list[Part]:
    """The parts of an ``image`` or ``document`` block, from its ``source``."""
    image = block.get("type") == "image"
    source = block.get("source")
    if not isinstance(source, dict):
        deg.add("malformed_messages")
        return []
    kind = source.get("type")
    mime = as_str(source.get("media_type"))
    modality = "image" if image else None  # a document's modality follows its MIME type
    if kind == "base64":
        data = source.get("data")
        if not isinstance(data, str):
            deg.add("malformed_media")
            return []
        return _one(blob_part(data, mime, deg, modality))
    if kind == "url" and isinstance(source.get("url"), str):
        return _one(url_part(source["url"], mime, deg, modality or "document"))
    if kind == "file" and isinstance(source.get("file_id"), str):
        return [file_part(source["file_id"], mime, deg, modality or "document")]
    if kind == "text" and isinstance(source.get("data"), str) and not image:
        # A plain-text document is a document the model read, not words of the turn: its text
        # as UTF-8 bytes (a lone surrogate kept as the JSON gave it).
        data = source["data"].encode("utf-8", "surrogatepass")
        return _one(blob_part(data, mime or "text/plain", deg, "document"))
    if kind == "content" and not image:
        # A document made of content blocks (text, images): their own parts, in order.
        if depth >= _MAX_DEPTH:
            deg.add("malformed_messages")
            return []
        inner = source.get("content")
        return [p for b in _blocks(inner, deg) for p in _block_parts(b, deg, None, depth + 1)]
    deg.add("unsupported_content")
    return []


def media_parts(block: dict[str, Any], deg: Degradations) -> list[Part]:
    """The parts of an ``image`` or ``document`` block, for telemetry that records Anthropic
    blocks: the same parts this translator gives."""
    return _media(block, deg, 0)


def _block_parts(block: Any, deg: Degradations, ids: _Ids | None, depth: int = 0) -> list[Part]:
    """The canonical parts of one content block (never a client tool result). ``ids`` is None
    inside a document's own content, where no tool call can stand."""
    if isinstance(block, str):
        return text_parts(block)
    if not isinstance(block, dict):
        deg.add("malformed_messages")
        return []
    kind = block.get("type")
    if kind == "text":
        citations = block.get("citations")
        if isinstance(citations, list):
            deg.add("text_citation", len(citations))
        return text_parts(block.get("text"), deg)
    if kind == "compaction":
        # The summary of the compacted conversation is what the model answers from; a null
        # content is a failed compaction, which the API treats as a no-op.
        if block.get("encrypted_content") or block.get("signature"):
            deg.add("opaque_reasoning")
        # Its `tool_changes` (tool_addition / tool_removal entries) say which tools are in
        # effect from a point of the compacted range on: neither a part nor the call's `tools`
        # (a removal, and the point, cannot be written there), so each is counted as the same
        # block standing alone in a message is.
        changes = block.get("tool_changes")
        if isinstance(changes, list):
            deg.add("unsupported_content", len(changes))
        return text_parts(block.get("content"))
    if kind == "thinking":
        if block.get("signature"):
            deg.add("opaque_reasoning")
        text = block.get("thinking")
        return [ReasoningPart(text)] if isinstance(text, str) and text else []
    if kind == "redacted_thinking":
        deg.add("opaque_reasoning")
        return []
    if kind == "tool_use" and ids is not None:
        name = block.get("name")
        name = name if isinstance(name, str) else ""
        args = block.get("input")
        caller = block.get("caller")
        if caller is not None and not (isinstance(caller, dict) and caller.get("type") == "direct"):
            # A call that code in the sandbox made (programmatic tool calling), not the model:
            # the part has no field for who called it, so the call is counted (a row would
            # teach the model a call it did not write) and `caller` stays on raw.
            deg.add("unsupported_content")
        return [tool_call(ids.call(block.get("id"), name, args), name, parse_arguments(args, deg))]
    if kind in _MEDIA:
        return _media(block, deg, depth)
    if kind in _SERVER_CALLS:
        # The block as the API wrote it, its input an object (a stream sends it as JSON text).
        call = dict(block)
        if "input" in call:
            call["input"] = parse_arguments(call["input"], deg)
        name = block.get("name")
        return [
            ServerToolCallPart(
                id=as_str(block.get("id")),
                name=name if isinstance(name, str) else "",
                server_tool_call=call,
            )
        ]
    if isinstance(kind, str) and kind.endswith("_tool_result") and kind != "tool_result":
        return [
            ServerToolCallResponsePart(
                id=as_str(block.get("tool_use_id")), server_tool_call_response=block
            )
        ]
    if kind == "mcp_tool_listing":
        # The tools the API fetched from an MCP server for this turn (beta): as the Responses
        # `mcp_list_tools` item is, a call named `mcp_list_tools` (the block less its tools) and
        # its response (the tools), which together give the block back. It has no id.
        call = {k: v for k, v in block.items() if k != "tools"}
        listing: list[Part] = [ServerToolCallPart(None, "mcp_list_tools", call)]
        if block.get("tools") is not None:
            response = {"type": kind, "tools": block["tools"]}
            listing.append(ServerToolCallResponsePart(None, response))
        return listing
    if kind == "fallback":
        # Where one model's output gives way to another's (beta): the parts before it are the
        # model that declined, the parts after it the fallback model's. It stays one message:
        # it is one turn, sent back as one assistant message, and two output messages would
        # read as two choices. Counted, so a turn holding two models' text can be left out.
        deg.add("unsupported_content")
        return []
    if kind == "search_result" and depth < _MAX_DEPTH:
        # Search results a client supplies for the model to cite: their text is what it read,
        # as a document of content blocks is; `source` and `title` stay on raw.
        inner = _blocks(block.get("content"), deg)
        return [p for b in inner for p in _block_parts(b, deg, None, depth + 1)]
    if kind == "container_upload" and isinstance(block.get("file_id"), str):
        # A file the code execution container is given: uploaded beforehand, sent by id.
        return [file_part(block["file_id"], None, deg, "document")]
    # Anything newer: not a canonical part.
    deg.add("unsupported_content")
    return []


def _blocks(content: Any, deg: Degradations) -> list[Any]:
    """Message content as a list of blocks: a string is one text block."""
    if isinstance(content, str):
        return [content]
    if content is None:
        return []
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list):
        return content
    deg.add("malformed_messages")
    return []


def _turn(role: str, content: Any, deg: Degradations, ids: _Ids) -> list[Message]:
    """One source message; tool results split out into their own ``tool`` messages, in order."""
    ids.message()
    out: list[Message] = []
    parts: list[Part] = []
    pending = False  # a run of other blocks not yet emitted
    for block in _blocks(content, deg):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            if pending:
                out.append(Message(role, parts))
                parts, pending = [], False
            out.append(_tool_result(block, ids, deg))
            continue
        parts.extend(_block_parts(block, deg, ids))
        pending = True
    if pending or not out:
        out.append(Message(role, parts))
    return out


def _output_parts(content: Any, deg: Degradations, ids: _Ids) -> list[Part]:
    ids.message()
    return [p for b in _blocks(content, deg) for p in _block_parts(b, deg, ids)]


def _system_messages(system: Any, deg: Degradations) -> list[Message]:
    """``system`` as a leading system message; ``cache_control`` and other block keys are dropped."""
    if system is None or system == "" or system == []:
        return []
    if isinstance(system, str):
        return [Message("system", text_parts(system))]
    blocks = system if isinstance(system, list) else [system]
    parts: list[Part] = []
    for b in blocks:
        if isinstance(b, str):
            parts.extend(text_parts(b))
        elif isinstance(b, dict) and b.get("type", "text") == "text":
            parts.extend(text_parts(b.get("text"), deg))
        else:
            deg.add("unsupported_content")
    return [Message("system", parts)]


def _input_messages(req: dict[str, Any], deg: Degradations, ids: _Ids) -> list[Message]:
    out = _system_messages(req.get("system"), deg)
    msgs = req.get("messages")
    if msgs is None:
        return out
    if not isinstance(msgs, list):
        deg.add("malformed_messages")
        return out
    for m in msgs:
        role = m.get("role") if isinstance(m, dict) else None
        if not isinstance(role, str) or not role:
            deg.add("malformed_messages")
            continue
        out.extend(_turn(role, m.get("content"), deg, ids))
    return out


def _request_params(req: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for src, dst in (
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("top_k", "top_k"),
        ("max_tokens", "max_tokens"),
        ("stop_sequences", "stop"),
        ("tool_choice", "tool_choice"),
    ):
        if req.get(src) is not None:
            out[dst] = req[src]
    thinking = req.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = as_int(thinking.get("budget_tokens"))
        if budget is not None:
            out["reasoning_budget_tokens"] = budget
    config = req.get("output_config")
    if isinstance(config, dict) and isinstance(config.get("effort"), str):
        out["reasoning_effort"] = config["effort"]
    return dict(sorted(out.items()))


def _tools(req: dict[str, Any], deg: Degradations) -> list[Any]:
    tools = req.get("tools")
    if not isinstance(tools, list):
        return []
    out = []
    for t in tools:
        d = tool_definition(t, deg)
        if d is not None:
            out.append(d)
    return out


def output_schema(req: dict[str, Any]) -> bool:
    """Whether structured outputs constrain the answer to a JSON schema: ``output_config.format``,
    or the beta's ``output_format``; both ``{"type": "json_schema", "schema": …}``.
    ``output_config`` holding only an ``effort`` is no count."""
    config = req.get("output_config")
    for fmt in (
        req.get("output_format"),
        config.get("format") if isinstance(config, dict) else None,
    ):
        if isinstance(fmt, dict) and (
            fmt.get("type") == "json_schema" or isinstance(fmt.get("schema"), dict)
        ):
            return True
    return False


def session_from_user_id(user_id: Any) -> str | None:
    """The session a ``metadata.user_id`` embeds: Claude Code's JSON form (``{"session_id": …}``,
    v2.1.78+) or its legacy ``user_<hash>_account_<id>_session_<uuid>`` string; else None."""
    if isinstance(user_id, dict):
        return as_str(user_id.get("session_id"))
    if not isinstance(user_id, str) or not user_id:
        return None
    if user_id.lstrip().startswith("{"):
        try:
            doc = orjson.loads(user_id)
        except orjson.JSONDecodeError:
            return None
        return as_str(doc.get("session_id")) if isinstance(doc, dict) else None
    m = _LEGACY_SESSION.search(user_id)
    return m.group(1) if m else None


def _session(req: dict[str, Any] | None, meta: dict[str, Any]) -> str | None:
    explicit = meta.get("session_id")
    if isinstance(explicit, str) and explicit:
        return explicit
    md = req.get("metadata") if req else None
    if not isinstance(md, dict):
        return None
    return as_str(md.get("session_id")) or session_from_user_id(md.get("user_id"))


def _provider(req: dict[str, Any] | None, meta: dict[str, Any]) -> str:
    given = meta.get("provider")
    if isinstance(given, str) and given:
        return given
    version = req.get("anthropic_version") if req else None
    if isinstance(version, str):
        for prefix, name in _PLATFORMS.items():
            if version.startswith(prefix):
                return name
    return "anthropic"


# --- streams ----------------------------------------------------------------------------------


_DELTA_BLOCK = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "tool_use",
    "compaction_delta": "compaction",
}
# Every block type ``_block_parts`` reads (besides each server tool's ``*_tool_result``): a delta
# of an unknown type on one of these says something the block as read does not hold.
_KNOWN_BLOCKS = frozenset(
    {
        "text",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "tool_result",
        "compaction",
        "fallback",
        "search_result",
        "container_upload",
        "mcp_tool_listing",
        *_MEDIA,
        *_SERVER_CALLS,
    }
)


def _known_block(kind: Any) -> bool:
    return kind in _KNOWN_BLOCKS or (isinstance(kind, str) and kind.endswith("_tool_result"))


class _Stream:
    """The message a streamed body describes, rebuilt event by event."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[Any, dict[str, Any]] = {}
        self.json: dict[Any, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: Any = None
        self.stop_sequence: Any = None
        self.done = False
        self.error: Any = None
        # Blocks of a known type that got a delta of a type this module does not know: what it
        # said is kept on raw only (unsupported_content, once per block).
        self.unread: set[Any] = set()
        self.malformed = 0  # text, thinking or signature pieces that were not strings

    def _append(self, block: dict[str, Any], key: str, piece: Any) -> None:
        if isinstance(piece, str):
            prev = block.get(key)
            block[key] = (prev if isinstance(prev, str) else "") + piece
        elif piece is not None:  # counted, as a whole body's text that is not a string is
            self.malformed += 1

    def _block(self, index: Any, kind: str) -> dict[str, Any]:
        if index not in self.blocks:
            self.blocks[index] = {"type": kind}
        return self.blocks[index]

    def feed(self, data: dict[str, Any], event: str | None) -> None:
        kind = data.get("type") or event
        index = data.get("index")
        if not isinstance(index, int | str):
            index = None
        if kind == "message_start" and isinstance(data.get("message"), dict):
            self.message = dict(data["message"])
            if isinstance(self.message.get("usage"), dict):
                self.usage.update(self.message["usage"])
            for i, b in enumerate(self.message.get("content") or []):
                if isinstance(b, dict):
                    self.blocks.setdefault(f"start{i}", dict(b))
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            self.blocks[index] = dict(data["content_block"])
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            self._delta(index, data["delta"])
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, dict):
                if delta.get("stop_reason") is not None:
                    self.stop_reason = delta["stop_reason"]
                if delta.get("stop_sequence") is not None:
                    self.stop_sequence = delta["stop_sequence"]
            if isinstance(data.get("usage"), dict):
                self.usage.update({k: v for k, v in data["usage"].items() if v is not None})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.error = data.get("error") or data

    def _delta(self, index: Any, delta: dict[str, Any]) -> None:
        dtype = delta.get("type")
        if dtype not in _DELTA_BLOCK:
            # A newer delta: kept on raw, and counted once per block, on every block this module
            # reads (a server tool call as well as text) and on an index no block was opened at.
            # A block of an unknown type is counted already, as the whole body's are.
            block = self.blocks.get(index)
            if not isinstance(block, dict) or _known_block(block.get("type")):
                self.unread.add(index)
            return
        block = self._block(index, _DELTA_BLOCK[dtype])
        if dtype == "text_delta":
            self._append(block, "text", delta.get("text"))
        elif dtype == "citations_delta":
            citations = block.get("citations")
            block["citations"] = [
                *(citations if isinstance(citations, list) else []),
                delta.get("citation"),
            ]
        elif dtype == "compaction_delta":
            # Each compaction delta carries the whole summary, not a fragment of it.
            block.update({k: delta[k] for k in ("content", "encrypted_content") if k in delta})
        elif dtype == "thinking_delta":
            self._append(block, "thinking", delta.get("thinking"))
        elif dtype == "signature_delta":
            self._append(block, "signature", delta.get("signature"))
        elif isinstance(delta.get("partial_json"), str):
            self.json.setdefault(index, []).append(delta["partial_json"])

    def started(self) -> bool:
        return self.message is not None or bool(self.blocks) or self.stop_reason is not None

    def assemble(self) -> dict[str, Any]:
        content = []
        for index, block in self.blocks.items():
            fragments = "".join(self.json.get(index, ()))
            if fragments:
                # Joined fragments are parsed with the non-streamed input, in one place.
                block = {**block, "input": fragments}
            content.append(block)
        msg = dict(self.message or {})
        msg["content"] = content
        if self.stop_reason is not None:
            msg["stop_reason"] = self.stop_reason
        if self.stop_sequence is not None:
            msg["stop_sequence"] = self.stop_sequence
        msg["usage"] = self.usage
        return msg


def _read_stream(events: list[Any], deg: Degradations) -> _Stream:
    stream = _Stream()
    for i, ev in enumerate(events):
        data = event_json(ev)
        if isinstance(data, dict):
            stream.feed(data, ev.event if isinstance(ev, SSEEvent) else None)
        elif lost(events, i):
            deg.add("malformed_messages")
    deg.add("unsupported_content", len(stream.unread))
    deg.add("malformed_messages", stream.malformed)
    if not stream.done:
        deg.add("truncated_stream")
    return stream


# --- the fact ---------------------------------------------------------------------------------


def _usage_tokens(usage: Any) -> tuple[int | None, int | None]:
    if not isinstance(usage, dict):
        return None, None
    # `input_tokens` excludes cached tokens; the total (the OTel meaning) is the sum of all three.
    parts = [
        as_int(usage.get(k))
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    known = [p for p in parts if p is not None]
    return (sum(known) if known else None), as_int(usage.get("output_tokens"))


def translate(
    request: dict[str, Any] | None,
    response: dict[str, Any] | list[SSEEvent] | None,
    *,
    meta: dict[str, Any] | None = None,
) -> InferenceCall | Skip:
    """One exchange to a fact. response is a body or the events of a streamed body; either
    side may be missing. meta carries what the transport knew (session_id, model, provider)."""
    meta = meta if isinstance(meta, dict) else {}
    req = request if isinstance(request, dict) else None
    deg = Degradations()
    resp: dict[str, Any] | None = None
    error: Any = None
    if isinstance(response, list):
        stream = _read_stream(response, deg)
        error = stream.error
        if error is not None and not stream.started():
            return Skip("error_response", error_detail(error), NAME)
        if stream.started():
            resp = stream.assemble()
        raw_response: Any = raw_stream(response)
    elif isinstance(response, dict):
        if response.get("type") == "error" or ("error" in response and "content" not in response):
            return Skip("error_response", error_detail(response.get("error")), NAME)
        resp = response
        raw_response = response
    else:
        raw_response = None
    if req is None and resp is None:
        if isinstance(response, list):
            return Skip("empty", "a stream without any message event", NAME)
        return Skip("empty", "neither a request nor a response", NAME)
    if resp is None and req is not None and "messages" not in req and "system" not in req:
        return Skip("unrecognized_format", "no Anthropic messages or response content", NAME)
    if (
        req is None
        and resp is not None
        and not isinstance(response, list)
        and not any(k in resp for k in ("content", "id", "stop_reason"))
    ):
        return Skip("unrecognized_format", "no Anthropic response content", NAME)

    ids = _Ids(deg)
    inputs = _input_messages(req, deg, ids) if req else []
    if req is not None and output_schema(req):
        deg.add("output_schema")
    outputs: list[Message] = []
    if resp is not None:
        parts = _output_parts(resp.get("content"), deg, ids)
        reason = "error" if error is not None else finish_reason(resp.get("stop_reason"))
        outputs = [Message("assistant", parts, reason)]
    input_tokens, output_tokens = _usage_tokens(resp.get("usage") if resp else None)
    response_id = as_str(resp.get("id")) if resp else None
    model = (
        (as_str(resp.get("model")) if resp else None)
        or (as_str(req.get("model")) if req else None)
        or as_str(meta.get("model"))
    )
    return finish(
        source=NAME,
        deg=deg,
        identity=(NAME, response_id) if response_id else None,
        raw={"request": request, "response": raw_response},
        assembled=isinstance(response, list),
        session_id=_session(req, meta),
        provider=_provider(req, meta),
        model=model,
        input_messages=inputs,
        output_messages=outputs,
        tools=_tools(req, deg) if req else [],
        request=_request_params(req) if req else {},
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        model_call_id=response_id,
        **transport_times(meta),
    )
