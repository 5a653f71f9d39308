"""Shared by the flattened-attribute conventions (OpenLLMetry, OpenInference).

Both spell a message list as indexed keys (``prefix.N.field``), carry content either as plain
strings or as provider content blocks, and record tool results without always naming the call
they answer. This module groups the keys, turns content into canonical parts, splits tool results
into their own messages and pairs id-less results with the calls they answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from typing import Any

import msgspec
import orjson

from lithify.core.hashing import stable_hash
from lithify.model import (
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
)
from lithify.translate import anthropic
from lithify.translate._common import Degradations, file_part, parse_arguments, synthesized_id
from lithify.translate._telemetry import MEDIA_TYPES, media_part, server_tool_part

Fields = dict[str, Any]

# Provider-run tool calls the instrumentations record as if they were function calls: server
# tool calls, named by the tool. A computer_call is run by the client, and its recording here
# carries no action: unsupported content.
SERVER_CALLS = frozenset({"web_search_call", "file_search_call", "computer_call"})

# Block types that mark a JSON list as serialized provider content rather than user text.
_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "function_call", "function"})
_RESULT_BLOCKS = frozenset({"tool_result", "tool_call_response", "function_call_output"})
_REASONING_BLOCKS = frozenset({"thinking", "reasoning", "summary_text", "reasoning_text"})
_OPAQUE_BLOCKS = frozenset({"redacted_thinking"})
# Anthropic's server tools (the call, and each tool's result block: every `*_tool_result` but
# the client's own `tool_result`) and the OTel parts.
_SERVER_CALL_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use", "server_tool_call"})
_SERVER_RESULT_BLOCKS = frozenset(
    {
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_result",
        "server_tool_call_response",
    }
)
# Media a tool result may hold (Anthropic: a computer-use screenshot): they follow the result.
_OTHER_BLOCKS = frozenset({"refusal", "audio", "search_result", "container_upload"})
KNOWN_BLOCKS = (
    _TEXT_BLOCKS
    | _CALL_BLOCKS
    | _RESULT_BLOCKS
    | _REASONING_BLOCKS
    | _OPAQUE_BLOCKS
    | MEDIA_TYPES
    | _SERVER_CALL_BLOCKS
    | _SERVER_RESULT_BLOCKS
    | _OTHER_BLOCKS
)

_ROLE_ALIASES = {"function": "tool", "model": "assistant", "computer-call": "tool"}


class PendingResult(msgspec.Struct):
    """A tool result whose call id may still have to be recovered by pairing."""

    id: str | None
    name: str | None
    result: Any
    media: list[Part] = msgspec.field(
        default_factory=list
    )  # what the tool returned beside the result


Piece = Part | PendingResult


class Draft(msgspec.Struct):
    """One source message before tool results are split out and paired."""

    role: str
    parts: list[Piece] = msgspec.field(default_factory=list)
    finish_reason: str | None = None
    thinking: bool = False  # an OpenLLMetry "thinking" completion, split from its answer


class Ctx:
    """Per-span state: degradation counts and deterministic id synthesis."""

    def __init__(self, deg: Degradations, seed: str, attrs: dict[str, Any]) -> None:
        self.deg = deg
        self._seed = seed
        self._attrs = attrs
        self._effective: str | None = None
        # (name, id) pairs recovered from a raw response body, used before synthesizing.
        self.recoverable: list[tuple[str, str]] = []

    @property
    def seed(self) -> str:
        # A flat attribute map has no span identity ("None:None"): without the content in the
        # seed, every such map would synthesize the same ids.
        if self._effective is None:
            self._effective = self._seed
            if self._seed.startswith("None:"):
                with suppress(TypeError, ValueError, orjson.JSONEncodeError):
                    self._effective = "attrs:" + stable_hash(self._attrs)
        return self._effective

    def call_id(self, value: Any, name: str, *position: Any) -> str:
        """The recorded id, else one recovered from the raw response, else a synthesized one."""
        got = ident(value)
        if got is not None:
            return got
        for i, (n, rid) in enumerate(self.recoverable):
            if n == name:
                del self.recoverable[i]
                return rid
        self.deg.add("synthesized_id")
        return synthesized_id(self.seed, *position)


def ident(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def text_of(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def norm_role(value: Any, default: str) -> str:
    """Roles as the source states them; provider aliases normalized; missing means ``default``."""
    if not isinstance(value, str) or not value.strip():
        return default
    return _ROLE_ALIASES.get(value.strip().lower(), value)


def loads(value: str) -> Any:
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None


def dumps_text(value: Any) -> str:
    """A structured value as the JSON text the model most likely saw."""
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        return str(value)


# ---------------------------------------------------------------------------------------------
# Indexed keys


def _index(s: str) -> int | None:
    return int(s) if s.isascii() and s.isdigit() else None


def group_indexed(attrs: dict[str, Any], prefixes: Iterable[str]) -> dict[str, dict[int, Fields]]:
    """``{prefix: {N: {field: value}}}`` for keys ``prefix.N.field`` (``field`` may be "")."""
    pre = tuple(prefixes)
    out: dict[str, dict[int, Fields]] = {p: {} for p in pre}
    for key, value in attrs.items():
        if not isinstance(key, str):
            continue
        for p in pre:
            if key.startswith(p):
                head, _, rest = key[len(p) :].partition(".")
                n = _index(head)
                if n is not None:
                    out[p].setdefault(n, {})[rest] = value
                break
    return out


def by_index(groups: dict[int, Fields]) -> list[tuple[int, Fields]]:
    """Entries in numeric index order (10 after 9)."""
    return sorted(groups.items())


def sub_indexed(fields: Fields, prefix: str, strip: str = "") -> list[tuple[int, Fields]]:
    """Nested ``prefix.M.rest`` fields of one message, numerically ordered, ``strip`` removed."""
    out: dict[int, Fields] = {}
    for key, value in fields.items():
        if key.startswith(prefix):
            head, _, rest = key[len(prefix) :].partition(".")
            n = _index(head)
            if n is not None:
                out.setdefault(n, {})[rest.removeprefix(strip)] = value
    return sorted(out.items())


# ---------------------------------------------------------------------------------------------
# Content


def is_block(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    t = obj.get("type")
    return (isinstance(t, str) and t in KNOWN_BLOCKS) or isinstance(obj.get("function"), dict)


def decode_blocks(value: str) -> list[Any] | None:
    """A JSON-serialized list of provider content blocks, else None (the string is text)."""
    if not value.lstrip().startswith("["):
        return None
    parsed = loads(value)
    if isinstance(parsed, list) and parsed and all(is_block(b) for b in parsed):
        return parsed
    return None


def is_call(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    return isinstance(obj.get("function"), dict) or obj.get("type") in _CALL_BLOCKS


def as_call_list(content: Any, decode: bool) -> list[Any] | None:
    """Content that is only a list of tool calls (Koog records them under role "tool")."""
    if isinstance(content, str) and decode:
        content = loads(content) if content.lstrip().startswith("[") else None
    if isinstance(content, list) and content and all(is_call(c) for c in content):
        return content
    return None


def tool_call(
    ctx: Ctx, call_id: Any, name: Any, arguments: Any, *position: Any
) -> ToolCallPart | ServerToolCallPart | None:
    """A canonical tool call; a provider-run call is a server tool call named by its tool
    (``web_search_call`` → ``web_search``); a ``computer_call`` is the client-side ``computer``
    tool called with its action, as the Responses translator has it (unsupported content when
    no action was recorded: there is nothing of the call to carry)."""
    n = name if isinstance(name, str) else ("" if name is None else dumps_text(name))
    if n == "computer_call":
        if arguments in (None, "", {}):
            ctx.deg.add("unsupported_content")
            return None
        args = parse_arguments(arguments, ctx.deg)
        return ToolCallPart(id=ctx.call_id(call_id, "computer", *position), name="computer",
                            arguments=args)  # fmt: skip
    if n in SERVER_CALLS and arguments in (None, "", {}):
        return ServerToolCallPart(ident(call_id), n.removesuffix("_call"), {"type": n})
    args = parse_arguments(arguments, ctx.deg)
    return ToolCallPart(id=ctx.call_id(call_id, n, *position), name=n, arguments=args)


def call_from_dict(
    ctx: Ctx, obj: dict[str, Any], *position: Any
) -> ToolCallPart | ServerToolCallPart | None:
    """OpenAI ``{id, function: {name, arguments}}``, flat ``{id, name, arguments}`` or
    Anthropic ``{id, name, input}`` / Responses ``{call_id, name, arguments}``."""
    nested = obj.get("function")
    fn: dict[str, Any] = nested if isinstance(nested, dict) else obj
    args = fn.get("arguments") if "arguments" in fn else fn.get("input", obj.get("input"))
    cid = obj.get("id") if obj.get("type") != "function_call" else obj.get("call_id", obj.get("id"))
    return tool_call(ctx, cid, fn.get("name"), args, *position)


def _block_piece(ctx: Ctx, block: Any, position: tuple[Any, ...]) -> list[Piece]:
    if isinstance(block, str):
        return [TextPart(block)] if block else []
    if not isinstance(block, dict):
        ctx.deg.add("unsupported_content")
        return []
    t = block.get("type")
    if t in _TEXT_BLOCKS or (t is None and isinstance(block.get("text"), str)):
        # Anthropic `citations`, Responses `annotations`: counted, as the provider translators do
        for notes in (block.get("citations"), block.get("annotations")):
            if isinstance(notes, list) and notes:
                ctx.deg.add("text_citation", len(notes))
        text = block.get("text", block.get("content"))
        return [TextPart(text)] if isinstance(text, str) and text else []
    if t == "refusal":
        text = block.get("refusal")
        return [TextPart(text)] if isinstance(text, str) and text else []
    if t in _REASONING_BLOCKS:
        text = block.get("thinking", block.get("text", block.get("content")))
        if block.get("signature") or block.get("encrypted_content"):
            ctx.deg.add("opaque_reasoning")
        return [ReasoningPart(text)] if isinstance(text, str) and text else []
    if t in _OPAQUE_BLOCKS:
        ctx.deg.add("opaque_reasoning")
        return []
    if t in MEDIA_TYPES:
        return list(_media_parts(block, t, ctx.deg))
    if t in ("server_tool_call", "server_tool_call_response"):
        part = server_tool_part(block, t, ctx.deg)
        return [part] if part is not None else []
    if t in _SERVER_CALL_BLOCKS:  # Anthropic {id, name, input}: the block is the description
        call = dict(block)
        if "input" in call:  # an object, as the Anthropic translator keeps it
            call["input"] = parse_arguments(call["input"], ctx.deg)
        name = block.get("name")
        return [
            ServerToolCallPart(ident(block.get("id")), name if isinstance(name, str) else "", call)
        ]
    if t in _SERVER_RESULT_BLOCKS or (
        isinstance(t, str) and t.endswith("_tool_result") and t != "tool_result"
    ):  # Anthropic {tool_use_id, content}
        return [ServerToolCallResponsePart(ident(block.get("tool_use_id")), block)]
    if t == "container_upload" and isinstance(block.get("file_id"), str) and block["file_id"]:
        # a file the code-execution container is given: uploaded beforehand, sent by id
        return [file_part(block["file_id"], None, ctx.deg, "document")]
    if t == "search_result" and isinstance(block.get("content"), list):
        # search results a client supplies: their text blocks are what the model read
        inner = [b for b in block["content"] if not (isinstance(b, dict) and b.get("type") == t)]
        return block_pieces(ctx, inner, *position)
    if t in _CALL_BLOCKS or isinstance(block.get("function"), dict):
        call = call_from_dict(ctx, block, *position)
        return [call] if call is not None else []
    if t in _RESULT_BLOCKS:
        rid = block.get("tool_use_id", block.get("call_id", block.get("id")))
        media: list[Part] = []
        if "content" in block:
            result = block["content"]
            if isinstance(result, list) and any(anthropic.leaves_tool_result(b) for b in result):
                # Images and documents leave the result and follow it as media parts, as the
                # Anthropic translator does, so the span and the exchange give one call.
                for b in result:
                    if anthropic.leaves_tool_result(b):
                        media.extend(_media_parts(b, b["type"], ctx.deg))
                result = [b for b in result if not anthropic.leaves_tool_result(b)]
        elif "response" in block:
            result = block["response"]  # OTel names it response; canonical name is result
        else:
            result = block.get("output", block.get("result"))
        return [PendingResult(ident(rid), None, "" if result is None else result, media)]
    ctx.deg.add("unsupported_content")
    return []


def _media_parts(block: dict[str, Any], t: str, deg: Degradations) -> list[Part]:
    """A media block's parts. Besides the shapes ``media_part`` reads: Anthropic documents made
    of text (``source.type`` ``text`` or ``content``), read as the Anthropic translator reads
    them, and the Responses blocks OpenLLMetry re-types (``input_image`` as ``image``,
    ``input_file`` as ``file``, their fields kept)."""
    src = block.get("source")
    if t == "document" and isinstance(src, dict) and src.get("type") in ("text", "content"):
        return anthropic.media_parts(block, deg)
    if t == "image" and "source" not in block and ("image_url" in block or "file_id" in block):
        t = "input_image"
    elif t == "file" and "file" not in block and ("file_data" in block or "filename" in block):
        t = "input_file"
    part = media_part(block, t, deg)
    return [part] if part is not None else []


def block_pieces(ctx: Ctx, blocks: list[Any], *position: Any) -> list[Piece]:
    out: list[Piece] = []
    for j, b in enumerate(blocks):
        out.extend(_block_piece(ctx, b, (*position, j)))
    return out


def content_pieces(ctx: Ctx, content: Any, decode: bool, *position: Any) -> list[Piece]:
    """Message content in any recorded form: text, serialized blocks, parsed blocks, scalars."""
    if content is None:
        return []
    if isinstance(content, str):
        if decode and (blocks := decode_blocks(content)) is not None:
            return block_pieces(ctx, blocks, *position)
        return [TextPart(content)] if content else []
    if isinstance(content, list):
        return block_pieces(ctx, content, *position)
    if isinstance(content, dict):
        if is_block(content):
            return block_pieces(ctx, [content], *position)
        return [TextPart(dumps_text(content))]
    if isinstance(content, bool | int | float):
        return [TextPart(dumps_text(content))]
    ctx.deg.add("unsupported_content")
    return []


def reasoning_pieces(*values: Any) -> list[Piece]:
    """Sibling reasoning fields (``reasoning_content``, ``reasoning``), each plain text or a
    (serialized) list of summary blocks. Servers that fill both with the same text (vLLM) give
    it once, as the Chat Completions translator reads them."""
    seen: list[list[str]] = []
    for value in values:
        if isinstance(value, str) and value.lstrip().startswith("["):
            parsed = loads(value)
            if isinstance(parsed, list):
                value = parsed
        texts: list[str] = []
        for item in value if isinstance(value, list) else [value]:
            text = item.get("text") if isinstance(item, dict) else item
            if isinstance(text, str) and text:
                texts.append(text)
        if texts and texts not in seen:
            seen.append(texts)
    return [ReasoningPart(t) for texts in seen for t in texts]


def message_draft(
    ctx: Ctx,
    *,
    role: Any,
    default_role: str,
    content: Any,
    decode: bool,
    position: tuple[Any, ...],
    tool_call_id: Any = None,
    name: Any = None,
    before: Sequence[Piece] | None = None,
    after: Sequence[Piece] | None = None,
    calls: list[ToolCallPart | ServerToolCallPart] | None = None,
    finish_reason: str | None = None,
    unwrap_result: Callable[[Any], tuple[Any, Any] | None] | None = None,
) -> Draft:
    """One source message. ``before`` are parts the source placed ahead of the content
    (sibling reasoning, semconv parts), ``after`` those it placed behind it (a refusal, the
    media a tool returned); ``calls`` are tool calls recorded beside it, last."""
    thinking = isinstance(role, str) and role.strip().lower() == "thinking"
    r = "assistant" if thinking else norm_role(role, default_role)
    pieces: list[Piece] = list(before or [])
    tcid = ident(tool_call_id)
    if thinking:
        text = content if isinstance(content, str) else None
        if text:
            pieces.append(ReasoningPart(text))
        elif content is not None:
            pieces.extend(content_pieces(ctx, content, decode, *position))
    elif r == "tool" or (tcid is not None and r != "assistant"):
        call_list = as_call_list(content, decode)
        if call_list is not None:
            # Koog logs the assistant's tool calls under role "tool": they are calls, not results.
            r = "assistant"
            pieces.extend(block_pieces(ctx, call_list, *position))
        elif not any(isinstance(p, PendingResult) for p in pieces):
            result = content
            unwrapped = unwrap_result(content) if unwrap_result else None
            if unwrapped is not None:
                uid, result = unwrapped
                tcid = tcid or ident(uid)
            r = "tool"
            pieces.append(PendingResult(tcid, text_of(name), "" if result is None else result))
    else:
        pieces.extend(content_pieces(ctx, content, decode, *position))
    pieces.extend(after or [])
    if calls:
        seen = {p.id for p in pieces if isinstance(p, ToolCallPart)}
        pieces.extend(c for c in calls if c.id not in seen)
    return Draft(r, pieces, finish_reason, thinking)


# ---------------------------------------------------------------------------------------------
# Assembly


class Pairer:
    """Splits tool results into their own messages and gives id-less results a call id.

    Pairing rule: a result that names its call keeps that id; one that does not takes the oldest
    call still unanswered (with the same function name when the result names one), which is the
    call it follows in order. With no call left to answer it is an orphan: a synthesized id,
    counted as ``orphan_tool_response``.
    """

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.pending: list[tuple[str, str]] = []
        self._orphans = 0

    def _resolve(self, r: PendingResult) -> str:
        if r.id is not None:
            for i, (cid, _) in enumerate(self.pending):
                if cid == r.id:
                    del self.pending[i]
                    break
            return r.id
        for i, (cid, name) in enumerate(self.pending):
            if r.name is None or name == r.name:
                del self.pending[i]
                return cid
        self.ctx.deg.add("orphan_tool_response")
        self._orphans += 1
        return synthesized_id(self.ctx.seed, "orphan", self._orphans)

    def messages(self, drafts: Iterable[Draft], *, output: bool = False) -> list[Message]:
        out: list[Message] = []
        for d in drafts:
            # In a tool message, media after a result are what that tool returned.
            results: list[tuple[PendingResult, list[Part]]] = []
            others: list[Part] = []
            for p in d.parts:
                if isinstance(p, PendingResult):
                    results.append((p, []))
                elif d.role == "tool" and results and isinstance(p, MediaPart):
                    results[-1][1].append(p)
                else:
                    others.append(p)
            for r, media in results:
                response = ToolCallResponsePart(self._resolve(r), r.result)
                out.append(Message("tool", [response, *r.media, *media]))
            if others or not results:
                # A tool message holds one result; anything else the source put beside it is
                # the user's content (CANONICAL: the tool messages, then the remaining content).
                role = "user" if d.role == "tool" and results else d.role
                out.append(Message(role, others, d.finish_reason if output else None))
            self.pending.extend((p.id, p.name) for p in others if isinstance(p, ToolCallPart))
        return out


def merge_assistant_runs(
    messages: list[Message], allow: Callable[[Message, Message], bool] | None = None
) -> list[Message]:
    """Consecutive assistant messages become one turn, parts in order, last finish reason."""
    out: list[Message] = []
    for m in messages:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.role == "assistant"
            and m.role == "assistant"
            and (allow is None or allow(prev, m))
        ):
            out[-1] = Message(
                "assistant", [*prev.parts, *m.parts], m.finish_reason or prev.finish_reason
            )
        else:
            out.append(m)
    return out


def fill_finish(messages: list[Message], reasons: list[str | None]) -> list[Message]:
    """Output messages without their own finish reason take the span's, index for index (one
    reason shared by all when they agree and there is one message)."""
    if not reasons or not messages:
        return messages
    if len(reasons) != len(messages):
        if len(messages) != 1 or len(set(reasons)) != 1:
            return messages
        reasons = reasons[:1]
    return [
        m if m.finish_reason is not None or r is None else Message(m.role, m.parts, r)
        for m, r in zip(messages, reasons, strict=True)
    ]
