"""Canonical messages → trainer messages and OpenAI Responses items (docs/export.md).

Pure functions. What a target cannot express is never bent into shape: the row is skipped with
a reason from ``SKIP_REASONS`` (``RowSkip``), and the export counts it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import Any

import orjson

from lithify.export.media import MEDIA_TYPES, BlobPart, FilePart, Media, MediaPart, UriPart
from lithify.export.media import data_url as _data_url
from lithify.export.media import file_name as _file_name
from lithify.export.media import mime_of as _mime_of
from lithify.model import (
    Message,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
)

# Why a row was not exported. A closed vocabulary: adding a reason is a contract change
# (docs/export.md lists them).
SKIP_REASONS: dict[str, str] = {
    "no_output": "the target call has no output message to learn from",
    "non_assistant_output": "the target call's output message is not the assistant's (its role "
    "is system, user, …): there is no assistant turn to learn",
    "reasoning_only": "the target assistant turn holds only reasoning, and the profile's format "
    "has no reasoning field (openai): nothing would be left to learn",
    "no_prompt": "the input has no user or tool message to answer (e.g. a response captured "
    "without its request: at most its echoed instructions)",
    "empty_assistant": "an assistant turn with no parts",
    "empty_tool_message": "a tool message without a tool result",
    "orphan_tool_response": "a tool result whose call is not earlier in the conversation",
    "reasoning_outside_assistant": "reasoning in a system, developer, user or tool message",
    "misplaced_part": "a tool call outside an assistant turn, a tool result outside a tool "
    "message, or text in a tool message",
    "part_order": "assistant parts in an order trainer messages cannot express "
    "(they hold reasoning, then text, then tool calls)",
    "unknown_role": "a role other than system, developer, user, assistant or tool",
    "invalid_id": "a tool-call id holding NUL or a lone surrogate",
    "unrepresentable_value": "a value JSON output cannot carry: a non-finite number, an integer "
    "beyond 64 bits, a lone surrogate",
    "degraded_fact": "a call that lost content at conversion (see LOSSY_DEGRADATIONS); "
    "--keep-degraded exports it anyway",
    "excluded": "a call a person excluded: feedback `exclude` = true on it, its trace or its "
    "session (lithify ui's exclude)",
    "no_reward": "an RL row without a numeric reward from feedback",
    "identical_pair": "a preference pair whose chosen and rejected completions are the same",
    "eval_prompt_in_train": "an eval row whose exact prompt is also a train row's prompt",
    "flagged": "a row carrying a quality flag that is dropped (--drop-flag, --keep-flag; "
    "its defaults: docs/export.md, Quality flags)",
    "media_reference": "media recorded only by reference (a provider file id; a URL where the "
    "format needs the bytes): the content is not in the facts",
    "media_unsupported": "a medium the profile's format has no place for (docs/export.md, "
    "Media and server tools)",
    "media_too_large": "a blob over --max-inline-bytes that the format would have to inline",
    "server_tool_unsupported": "a tool the provider ran itself (web search, code execution, "
    "computer use…): the format has no item for it",
    "over_token_budget": "a row longer than --max-tokens in the --tokenizer's tokens (with "
    "--fit split, an SFT row no cut at a turn boundary brings within it)",
    "chat_template_error": "the --tokenizer's chat template fails on the row (e.g. Llama 3.1's "
    "on two tool calls in one message): the trainer could not render it either",
}

# Degradations that change what the model saw or said; rows built on such calls are skipped
# unless asked (opaque reasoning and redactions leave the visible conversation intact).
# ``content_reference`` is not one: a file or uri part records where the content was, and each
# profile decides what a reference can become (``media_reference`` when nothing).
# ``output_schema`` is: the schema that shaped the answer was part of what the model saw, and a
# row without it teaches that shape unprompted. ``content_not_captured`` is: a call read from a
# span that kept only its metadata has no messages at all.
LOSSY_DEGRADATIONS = frozenset(
    {
        "unsupported_content",
        "malformed_messages",
        "malformed_arguments",
        "truncated_stream",
        "orphan_tool_response",
        "unsupported_tool",
        "malformed_media",
        "output_schema",
        "content_not_captured",
    }
)

# The feedback that keeps a call out of every export (``excluded``): true on the call, its trace
# or its session, as derivation joins feedback to a turn.
EXCLUDE_FEEDBACK = "exclude"

TEXT_ROLES = frozenset({"system", "developer", "user"})
# Text parts are one stream of characters: joined as they are. Reasoning parts are separate
# blocks (Responses summary paragraphs), so a blank line keeps them apart.
TEXT_JOIN = ""
REASONING_JOIN = "\n\n"


class RowSkip(Exception):
    """A row that cannot be represented; ``reason`` is a key of ``SKIP_REASONS``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        assert reason in SKIP_REASONS, reason
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


# -- values --------------------------------------------------------------------------------

_INT_MIN = -(2**63)
_UINT_MAX = 2**64 - 1


def check_value(value: Any) -> None:
    """Raise ``RowSkip`` for values orjson would silently change (NaN → null) or refuse."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        # Strings first: they are most of what tool arguments and results hold, and this walk
        # runs on every row's.
        if t is str or t is bool or v is None:
            continue
        if isinstance(v, dict):
            for k in v:
                if not isinstance(k, str):
                    raise RowSkip("unrepresentable_value", f"a {type(k).__name__} object key")
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise RowSkip("unrepresentable_value", repr(v))
        elif isinstance(v, int) and not _INT_MIN <= v <= _UINT_MAX:
            raise RowSkip("unrepresentable_value", "an integer beyond 64 bits")


def result_text(result: Any) -> str:
    """A tool result as text: a string verbatim, any other value as compact sorted-key JSON."""
    if isinstance(result, str):
        return result
    check_value(result)
    try:
        return orjson.dumps(result, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError as e:
        raise RowSkip("unrepresentable_value", str(e)) from None


def arguments_text(arguments: dict[str, Any]) -> str:
    """Tool-call arguments as the compact JSON string string-argument targets read."""
    try:
        return orjson.dumps(arguments).decode()
    except orjson.JSONEncodeError as e:
        raise RowSkip("unrepresentable_value", str(e)) from None


def check_id(value: str) -> None:
    """Raise ``RowSkip`` for an id NeMo Gym rows cannot hold (NUL, a lone surrogate)."""
    if "\x00" in value:
        raise RowSkip("invalid_id", "NUL in a tool-call id")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RowSkip("invalid_id", "a lone surrogate in a tool-call id") from None


# -- trainer messages ------------------------------------------------------------------------


def _text_only(m: Message) -> str:
    texts: list[str] = []
    for p in m.parts:
        if isinstance(p, TextPart):
            texts.append(p.content)
        elif isinstance(p, ReasoningPart):
            raise RowSkip("reasoning_outside_assistant", f"reasoning in a {m.role} message")
        elif isinstance(p, MEDIA_TYPES):
            raise RowSkip("media_unsupported", f"a {p.modality} in a {m.role} message")
        elif isinstance(p, ServerToolCallPart | ServerToolCallResponsePart):
            raise RowSkip("server_tool_unsupported", f"a server tool part in a {m.role} message")
        else:
            raise RowSkip("misplaced_part", f"a {type(p).__name__} in a {m.role} message")
    return TEXT_JOIN.join(texts)


# The text entry of a content list, per media mode.
_TEXT_ENTRY = {"images": "text", "openai": "text", "responses": "input_text"}


def _text_entry(mode: str, text: str) -> dict[str, Any]:
    return {"type": _TEXT_ENTRY[mode], "text": text}


# The image types OpenAI fine-tuning accepts.
_OPENAI_IMAGES = frozenset({"image/png", "image/jpeg", "image/webp"})
_OPENAI = "JPEG, PNG, WEBP"


def _medium(p: MediaPart, role: str, media: Media, images: list[BlobPart] | None) -> dict[str, Any]:
    """A media part as a content entry of ``media.mode``; ``images`` collects TRL images."""
    if isinstance(p, FilePart):
        # A provider file id names content in someone's account: no trainer can read it.
        raise RowSkip("media_reference", f"a {p.modality} sent as file id {p.file_id!r}")
    mode = media.mode
    if mode == "none" or (mode == "openai" and role != "user"):
        raise RowSkip("media_unsupported", f"a {p.modality} in a {role} message")
    if isinstance(p, BlobPart) and mode in ("openai", "responses") and p.size > media.max_inline:
        raise RowSkip("media_too_large", f"a {p.size}-byte {p.modality}")
    if mode == "responses" and p.modality == "document":
        if isinstance(p, UriPart):
            return {"type": "input_file", "file_url": p.uri}
        return {"type": "input_file", "file_data": _data_url(p), "filename": _file_name(p)}
    image = p.modality == "image" and (
        isinstance(p, UriPart) or (_mime_of(p) or "").startswith("image/")
    )
    if not image:
        raise RowSkip("media_unsupported", f"a {p.modality} ({p.mime_type}) in a {role} message")
    if mode == "images":
        if isinstance(p, UriPart):
            # datasets would fetch it at load time: the export would depend on the network.
            raise RowSkip("media_reference", "an image at a URL (its bytes were not recorded)")
        assert images is not None
        images.append(p)
        return {"type": "image"}
    url = p.uri if isinstance(p, UriPart) else _data_url(p)
    if mode == "openai" and isinstance(p, BlobPart) and _mime_of(p) not in _OPENAI_IMAGES:
        raise RowSkip("media_unsupported", f"a {_mime_of(p)} image (OpenAI takes {_OPENAI})")
    if mode == "openai":
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "input_image", "detail": "auto", "image_url": url}


def _content(m: Message, media: Media, images: list[BlobPart] | None) -> str | list[dict[str, Any]]:
    """A system, developer or user message's content: text, or (with media, and always for TRL
    vision rows) a list of entries, runs of text parts joined into one."""
    if media.mode == "none":
        for p in m.parts:
            if isinstance(p, MEDIA_TYPES):
                _medium(p, m.role, media, images)  # raises the reason
    if media.mode != "images" and not any(isinstance(p, MEDIA_TYPES) for p in m.parts):
        return _text_only(m)
    entries: list[dict[str, Any]] = []
    run: list[str] = []
    for p in m.parts:
        if isinstance(p, TextPart):
            run.append(p.content)
            continue
        if not isinstance(p, MEDIA_TYPES):
            _text_only(Message(m.role, [p]))  # raises the reason
        if run:
            entries.append(_text_entry(media.mode, TEXT_JOIN.join(run)))
            run = []
        entries.append(_medium(p, m.role, media, images))
    if run:
        entries.append(_text_entry(media.mode, TEXT_JOIN.join(run)))
    return entries


_RANK = {ReasoningPart: 0, TextPart: 1, ToolCallPart: 2}


def _assistant(m: Message, media: Media) -> dict[str, Any]:
    thinking: list[str] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    phase = 0
    for p in m.parts:
        rank = _RANK.get(type(p))
        if rank is None:
            if isinstance(p, ServerToolCallPart | ServerToolCallResponsePart):
                raise RowSkip("server_tool_unsupported", f"server tool {_server_name(p)!r}")
            if isinstance(p, MEDIA_TYPES):
                raise RowSkip("media_unsupported", f"a {p.modality} in an assistant message")
            raise RowSkip("misplaced_part", "a tool result in an assistant message")
        if rank < phase:
            raise RowSkip("part_order", "an assistant message with " + _shape(m))
        phase = rank
        if isinstance(p, ReasoningPart):
            thinking.append(p.content)
        elif isinstance(p, TextPart):
            texts.append(p.content)
        else:
            assert isinstance(p, ToolCallPart)
            check_value(p.arguments)
            calls.append(
                {
                    "id": p.id,
                    "type": "function",
                    "function": {"name": p.name, "arguments": p.arguments},
                }
            )
    if not m.parts:
        raise RowSkip("empty_assistant")
    out: dict[str, Any] = {"role": "assistant"}
    if thinking:
        out["thinking"] = REASONING_JOIN.join(thinking)
    if texts:
        text = TEXT_JOIN.join(texts)
        out["content"] = [_text_entry("images", text)] if media.mode == "images" else text
    if calls:
        out["tool_calls"] = calls
    return out


def _server_name(p: ServerToolCallPart | ServerToolCallResponsePart) -> str:
    if isinstance(p, ServerToolCallPart):
        return p.name
    kind = p.server_tool_call_response.get("type")
    return kind if isinstance(kind, str) else "?"


def _shape(m: Message) -> str:
    names = {ReasoningPart: "reasoning", TextPart: "text", ToolCallPart: "tool_call"}
    seq: list[str] = []
    for p in m.parts:
        n = names.get(type(p), "tool_call_response")
        if not seq or seq[-1] != n:
            seq.append(n)
    return " → ".join(seq)


_NO_MEDIA = Media()


def trainer_messages(
    messages: Iterable[Message],
    calls: dict[str, str] | None = None,
    media: Media = _NO_MEDIA,
    images: list[BlobPart] | None = None,
) -> list[dict[str, Any]]:
    """Trainer messages in the canonical trainer form (``thinking``, arguments as objects).

    ``calls`` maps tool-call ids seen so far to their names; it is updated in place, so a
    conversation can be mapped in pieces (prompt, then completion). ``media`` says what media
    parts become; TRL vision rows append the images they show to ``images``, in order.
    """
    names: dict[str, str] = {} if calls is None else calls
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role in TEXT_ROLES:
            out.append({"role": m.role, "content": _content(m, media, images)})
        elif m.role == "assistant":
            msg = _assistant(m, media)
            for c in msg.get("tool_calls", ()):
                names[c["id"]] = c["function"]["name"]
            out.append(msg)
        elif m.role == "tool":
            out.extend(_tool_messages(m, names, media, images))
        else:
            raise RowSkip("unknown_role", repr(m.role))
    return out


# Media modes whose user messages take the media a tool returned (TOOL_MEDIA_AS_USER).
_TOOL_MEDIA_MODES = frozenset({"images", "openai", "responses"})
TOOL_MEDIA_AS_USER = "tool_media_as_user"


def tool_media_moved(messages: Iterable[Message], media: Media) -> bool:
    """Whether ``trainer_messages`` moves media a tool returned into a user message here."""
    return media.mode in _TOOL_MEDIA_MODES and any(
        m.role == "tool" and any(isinstance(p, MEDIA_TYPES) for p in m.parts) for m in messages
    )


def _tool_messages(
    m: Message,
    names: dict[str, str],
    media: Media = _NO_MEDIA,
    images: list[BlobPart] | None = None,
) -> list[dict[str, Any]]:
    """A tool message's results as trainer tool messages; the media the tool returned with them
    (a computer-use screenshot) follow as a user message where the format takes media in user
    messages (no format has a place for them in a tool message: OpenAI and NeMo Gym tool
    outputs are strings, and TRL's vision SFT gives images to no tool message)."""
    out: list[dict[str, Any]] = []
    returned: list[dict[str, Any]] = []
    vision = media.mode == "images"
    for p in m.parts:
        if isinstance(p, ToolCallResponsePart):
            name = names.get(p.id)
            if name is None:
                raise RowSkip("orphan_tool_response", f"no earlier call with id {p.id!r}")
            text = result_text(p.result)
            out.append(
                {
                    "role": "tool",
                    "name": name,
                    "tool_call_id": p.id,
                    "content": [_text_entry("images", text)] if vision else text,
                }
            )
        elif isinstance(p, ReasoningPart):
            raise RowSkip("reasoning_outside_assistant", "reasoning in a tool message")
        elif isinstance(p, MEDIA_TYPES) and out:
            if media.mode not in _TOOL_MEDIA_MODES:
                raise RowSkip("media_unsupported", f"a {p.modality} returned by a tool")
            returned.append(_medium(p, "user", media, images))
        else:
            raise RowSkip("misplaced_part", f"a {type(p).__name__} in a tool message")
    if not out:
        raise RowSkip("empty_tool_message")
    if returned:
        out.append({"role": "user", "content": returned})
    return out


def trainer_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as the JSON Schemas chat templates and TRL read."""
    out: list[dict[str, Any]] = []
    for t in tools:
        check_value(t.parameters)
        fn: dict[str, Any] = {"name": t.name}
        if t.description is not None:
            fn["description"] = t.description
        fn["parameters"] = t.parameters
        out.append({"type": "function", "function": fn})
    return out


# -- Responses items (NeMo Gym native) -------------------------------------------------------


def reasoning_id(seed: str, index: int) -> str:
    """A deterministic id for a reasoning item (NeMo Gym requires one)."""
    digest = hashlib.sha256(f"{seed}\x00{index}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"rs_{digest[:32]}"


def response_items(
    messages: Iterable[Message],
    seed: str,
    calls: dict[str, str] | None = None,
    media: Media = _NO_MEDIA,
) -> list[dict[str, Any]]:
    """OpenAI Responses input items, as NeMo Gym reads them, in part order.

    Runs of reasoning parts become one reasoning item (a summary entry per part), runs of text
    one assistant message. ``seed`` makes reasoning ids unique and stable (the segment id and
    where the piece starts); ``calls`` tracks tool-call ids across pieces of a conversation.
    Media in system, developer and user messages become ``input_image`` / ``input_file``
    content (``media``), and so do the media a tool returned, in a user message after its
    output; NeMo Gym 0.4.0 has no item for a server tool.
    """
    names: dict[str, str] = {} if calls is None else calls
    items: list[dict[str, Any]] = []
    n = 0
    for m in messages:
        if m.role in TEXT_ROLES:
            content = _content(m, media, None)
            items.append({"type": "message", "role": m.role, "content": content})
        elif m.role == "assistant":
            if not m.parts:
                raise RowSkip("empty_assistant")
            for kind, group in groupby(m.parts, key=type):
                run = list(group)
                if kind is ReasoningPart:
                    summary = [{"type": "summary_text", "text": p.content} for p in run]
                    items.append(
                        {"type": "reasoning", "id": reasoning_id(seed, n), "summary": summary}
                    )
                    n += 1
                elif kind is TextPart:
                    text = TEXT_JOIN.join(p.content for p in run)
                    items.append({"type": "message", "role": "assistant", "content": text})
                elif kind is ToolCallPart:
                    for p in run:
                        check_id(p.id)
                        check_value(p.arguments)
                        names[p.id] = p.name
                        items.append(
                            {
                                "type": "function_call",
                                "call_id": p.id,
                                "name": p.name,
                                "arguments": arguments_text(p.arguments),
                            }
                        )
                else:
                    _assistant(Message(m.role, run), media)  # raises the reason
                    raise RowSkip("misplaced_part", f"a {kind.__name__} in an assistant message")
        elif m.role == "tool":
            for t in _tool_messages(m, names, media):
                if t["role"] == "user":  # the media the tool returned (TOOL_MEDIA_AS_USER)
                    items.append({"type": "message", "role": "user", "content": t["content"]})
                    continue
                check_id(t["tool_call_id"])
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": t["tool_call_id"],
                        "output": t["content"],
                    }
                )
        else:
            raise RowSkip("unknown_role", repr(m.role))
    return items


def flat_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as Responses function tools: flat, with ``strict`` and ``parameters``.

    ``strict`` is false: a captured definition does not say it was strict, and strict mode
    demands schema constraints the capture may not meet.
    """
    out: list[dict[str, Any]] = []
    for t in tools:
        check_value(t.parameters)
        tool: dict[str, Any] = {"type": "function", "name": t.name}
        if t.description is not None:
            tool["description"] = t.description
        tool["parameters"] = t.parameters
        tool["strict"] = False
        out.append(tool)
    return out
