"""OTel GenAI semantic conventions to canonical content: span attributes, span events, log events.

Three generations of the conventions are read (see docs/sources/otel-genai.md):

- v1.37+: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` / ``gen_ai.system_instructions``
  / ``gen_ai.tool.definitions`` as JSON strings on the span, or as structured AnyValues on the
  ``gen_ai.client.inference.operation.details`` log event;
- v1.28–1.36: one event per message (``gen_ai.user.message`` … ``gen_ai.choice``), as log
  records (grouped here by the span they belong to) or as span events;
- before that: ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` span events.

One module past 500 lines: the generations share the message model and the merging of split
outputs, and a reader follows one span from attributes to fact in one file.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import msgspec
import orjson

from lithify.core.hashing import stable_hash
from lithify.core.times import ns_to_rfc3339
from lithify.core.values import as_int
from lithify.model import (
    BlobPart,
    FilePart,
    InferenceCall,
    Message,
    Part,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    Skip,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
    UriPart,
)
from lithify.translate._common import (
    SYNTHESIZED,
    Degradations,
    blob_part,
    file_part,
    finish_reason,
    finish_reasons,
    json_value,
    parse_arguments,
    synthesized_call_id,
    synthesized_id,
    tool_definition,
)
from lithify.translate._telemetry import (
    MEDIA_TYPES,
    Content,
    build,
    media_part,
    modality,
    server_tool_part,
    session_of,
    stated_modality,
    uri_media,
)
from lithify.translate.gemini import content_parts as gemini_parts
from lithify.translate.gemini import part_field, snake_name
from lithify.translate.otlp import LogRecord

SOURCE = "otel-genai"

INPUT = "gen_ai.input.messages"
OUTPUT = "gen_ai.output.messages"
SYSTEM = "gen_ai.system_instructions"
TOOLS = "gen_ai.tool.definitions"
_MESSAGE_KEYS = (SYSTEM, INPUT, OUTPUT)
_REF_KEYS = tuple(k + "_ref" for k in (*_MESSAGE_KEYS, TOOLS))

OPERATION_DETAILS = "gen_ai.client.inference.operation.details"
CHOICE = "gen_ai.choice"
EVALUATION = "gen_ai.evaluation.result"
PROMPT_EVENT = "gen_ai.content.prompt"
COMPLETION_EVENT = "gen_ai.content.completion"
_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}

# Pydantic AI's instrumentation format 1 with ``event_mode='attributes'``: the per-message events
# above as one JSON array in this span attribute, each event's body merged with its attributes.
EVENTS_ATTRIBUTE = "events"

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_ROLE_ALIASES = {"model": "assistant", "function": "tool"}

_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_REASONING_TYPES = frozenset({"reasoning", "thinking", "reasoning_text", "summary_text"})
# Provider state that stands for reasoning without being readable: counted, never a part.
_OPAQUE_TYPES = frozenset(
    {"redacted_thinking", "redacted_reasoning", "encrypted_reasoning", "thought_signature"}
)
_OPAQUE_FIELDS = ("signature", "encrypted_content", "thought_signature", "thoughtSignature")
_SERVER_TYPES = frozenset({"server_tool_call", "server_tool_call_response"})
# Pydantic AI's version-1 events name a content part's type ``kind`` (and have no ``type``).
_KINDS = frozenset(
    {"text", "thinking", "binary", "file", "image-url", "audio-url", "video-url", "document-url"}
)
_MEDIA = (BlobPart, FilePart, UriPart)


# What marks a part without ``type`` as a Gemini ``Part`` (snake_case as the SDKs dump it, or
# camelCase as the REST API writes it); a bare ``{text}`` reads the same either way.
_GEMINI_FIELDS = (
    "thought",
    "thoughtSignature",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    "toolCall",
    "toolResponse",
    "audioTranscription",
)
_GEMINI_KEYS = frozenset({*_GEMINI_FIELDS, *map(snake_name, _GEMINI_FIELDS)})

_BAD = object()  # an attribute that could not be decoded (already counted)


# ---------------------------------------------------------------------------------------------
# decoding attribute values


def _present(attrs: dict[str, Any], key: str) -> bool:
    return attrs.get(key) not in (None, "")


def _strict(value: Any, deg: Degradations) -> Any:
    """A JSON-string attribute decoded; structured values pass through."""
    if isinstance(value, str | bytes):
        try:
            return json_value(value, deg)
        except (ValueError, RecursionError):
            deg.add("malformed_messages")
            return _BAD
    return value


def _loose(value: Any, deg: Degradations) -> Any:
    """Like ``_strict``, but text that does not look like JSON is kept as text."""
    if isinstance(value, str) and value.strip()[:1] not in ("[", "{"):
        return value
    return _strict(value, deg)


def _items(value: Any, deg: Degradations, *, texts: bool = False) -> list[Any]:
    """A decoded attribute as a list of items; a lone object is a list of one.

    Some SDKs cannot set nested attributes and write an array of JSON strings instead. With
    ``texts`` (items may be parts, and a part may be plain text), an item that is not JSON stays
    text.
    """
    if value is _BAD or value is None:
        return []
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, list):
        deg.add("malformed_messages")
        return []
    out: list[Any] = []
    for item in value:
        if isinstance(item, str) and item.strip()[:1] == "{":
            if texts:
                with contextlib.suppress(ValueError, RecursionError):
                    item = json_value(item, deg)
            else:
                item = _strict(item, deg)
                if item is _BAD:
                    continue
        out.append(item)
    return out


def _role(value: Any) -> str | None:
    """The role as the source states it; canonical names are matched case-insensitively."""
    if not isinstance(value, str) or not value.strip():
        return None
    key = value.strip().lower()
    if key in _ROLES:
        return key
    return _ROLE_ALIASES.get(key, value)


# ---------------------------------------------------------------------------------------------
# messages and parts


class _Builder:
    """Converts messages of one call, giving ids to tool calls that lack one and pairing the
    responses that lack one with those calls (by name when the response names its tool, else
    in order)."""

    def __init__(self, deg: Degradations, seed: str) -> None:
        self.deg = deg
        self.seed = seed
        self.pending: list[tuple[str, str]] = []  # (name, id) of calls not yet answered
        # Tool calls recorded without their arguments: what instrumentations keep of a call
        # with content capture off (its name and id), so they are no captured content.
        self.uncaptured = 0
        # Gemini ``function_call`` parts so far in the part list being read: an id-less one's
        # ordinal among its turn's calls, as the Gemini translator counts them.
        self.gemini_calls = 0

    def captured(self, messages: list[Message]) -> bool:
        """Whether ``messages`` hold any content beyond calls recorded without arguments."""
        return sum(len(m.parts) for m in messages) > self.uncaptured

    # -- ids --

    def call_id(
        self, raw_id: Any, name: str, pos: tuple[Any, ...], *, gemini: tuple[Any, int] | None = None
    ) -> str:
        """The call's id, else one synthesized: from the call itself for a Gemini part
        (``gemini``: its arguments and ordinal; the Gemini translator's id, the same in the
        response and in every later request that replays it), else from the span and the
        part's place."""
        id_ = _id(raw_id)
        if id_ is None:
            if gemini is not None:
                id_ = synthesized_call_id("gemini", name, *gemini)
            else:
                id_ = synthesized_id(self.seed, *pos)
            self.deg.add("synthesized_id")
        self.pending.append((name, id_))
        return id_

    def response_id(self, raw_id: Any, name: Any, pos: tuple[Any, ...]) -> str:
        id_ = _id(raw_id)
        if id_ is not None:
            for i, (_, pid) in enumerate(self.pending):
                if pid == id_:
                    del self.pending[i]
                    return id_
            # A result whose id no call has answers the first call the source gave no id of
            # its tool: named by the result, or by the id Vertex AI makes up, `<name>_<index>`.
            for i, (pname, pid) in enumerate(self.pending):
                if pname and pid.startswith(SYNTHESIZED):
                    named = name == pname if isinstance(name, str) and name else None
                    if named or (named is None and id_.startswith(f"{pname}_")):
                        del self.pending[i]
                        return pid
            return id_
        for i, (pname, pid) in enumerate(self.pending):
            if not isinstance(name, str) or not name or pname == name:
                del self.pending[i]
                return pid
        self.deg.add("orphan_tool_response")
        return synthesized_id(self.seed, "orphan", *pos)

    # -- parts --

    def part(self, p: Any, pos: tuple[Any, ...]) -> Part | None:
        """One semconv part (or an OpenAI-style content part) to a canonical part."""
        if isinstance(p, str):
            return TextPart(p) if p else None
        if not isinstance(p, dict):
            if p is not None:
                self.deg.add("unsupported_content")
            return None
        kind = p.get("type")
        if kind is None and isinstance(p.get("kind"), str) and p["kind"] in _KINDS:
            kind = p["kind"]
        if not isinstance(kind, str | None):
            kind = "?"
        if kind in _TEXT_TYPES or (kind is None and isinstance(p.get("text"), str)):
            if p.get("visible") is False:
                # Pydantic AI: a request-scoped system prompt an earlier request was sent with;
                # the model does not see it on this one.
                return None
            self._citations(p)
            return _text_part(self._string(p, "content", "text"))
        if kind == "refusal":
            return _text_part(self._string(p, "refusal", "content"))
        if kind in _REASONING_TYPES:
            if any(p.get(f) for f in _OPAQUE_FIELDS):
                self.deg.add("opaque_reasoning")
            text = self._string(p, "content", "thinking", "text")
            return ReasoningPart(text) if text else None
        if kind in _OPAQUE_TYPES:
            self.deg.add("opaque_reasoning")
            return None
        if kind == "tool_call":
            name = _name(p.get("name"))
            args = parse_arguments(p.get("arguments"), self.deg)
            return ToolCallPart(self.call_id(p.get("id"), name, pos), name, args)
        if kind == "tool_call_response":
            result = p["response"] if "response" in p else p.get("result")
            return ToolCallResponsePart(self.response_id(p.get("id"), p.get("name"), pos), result)
        if kind in MEDIA_TYPES:
            return media_part(p, kind, self.deg)
        if kind in _SERVER_TYPES:
            return server_tool_part(p, kind, self.deg)
        self.deg.add("unsupported_content")
        return None

    def _string(self, p: dict[str, Any], *keys: str) -> str | None:
        """The first non-empty string among ``keys``; a value of another kind under any of them
        cannot be carried (counted once)."""
        if any(not isinstance(p.get(k), str | None) for k in keys):
            self.deg.add("unsupported_content")
        return _first_str(p, *keys)

    def _citations(self, p: dict[str, Any]) -> None:
        """Citations on text (OpenAI ``annotations``, Anthropic ``citations``) stay on ``raw``."""
        for key in ("annotations", "citations"):
            if isinstance(p.get(key), list):
                self.deg.add("text_citation", len(p[key]))

    def _gemini(self, p: dict[str, Any], pos: tuple[Any, ...]) -> list[Part]:
        """A Gemini ``Part`` (google-genai and Vertex AI events write their SDK's parts)."""
        # The google-genai SDK dumps every field of a part, most of them null.
        p = {k: v for k, v in p.items() if v is not None}
        call = part_field(p, "functionCall")
        response = part_field(p, "functionResponse")
        if not isinstance(call, dict) and not isinstance(response, dict):
            return gemini_parts(p, self.deg)
        if part_field(p, "thoughtSignature"):
            self.deg.add("opaque_reasoning")
        if isinstance(call, dict):
            name = _name(call.get("name"))
            args = parse_arguments(call.get("args"), self.deg)
            ordinal = self.gemini_calls
            self.gemini_calls += 1
            id_ = self.call_id(call.get("id"), name, pos, gemini=(call.get("args"), ordinal))
            return [ToolCallPart(id_, name, args)]
        rid = self.response_id(response.get("id"), response.get("name"), pos)
        result = response.get("response")
        # As the Gemini translator reads it, so a span and its exchange agree.
        out: list[Part] = [ToolCallResponsePart(rid, {} if result is None else result)]
        media = response.get("parts")
        for item in media if isinstance(media, list) else []:
            out += gemini_parts(item, self.deg)
        return out

    def parts(self, items: Any, pos: tuple[Any, ...]) -> list[Part]:
        if isinstance(items, str):
            return [TextPart(items)] if items else []
        if isinstance(items, dict):
            items = [items]
        if not isinstance(items, list):
            if items is not None:
                self.deg.add("unsupported_content")
            return []
        out: list[Part] = []
        self.gemini_calls = 0
        for j, p in enumerate(items):
            if _is_gemini(p):
                out.extend(self._gemini(p, (*pos, j)))
                continue
            part = self.part(p, (*pos, j))
            if part is not None:
                out.append(part)
        return out

    def tool_call(self, call: Any, pos: tuple[Any, ...]) -> ToolCallPart | None:
        """An OpenAI-style tool call: ``{id, type, function: {name, arguments}}`` or flat."""
        if not isinstance(call, dict):
            self.deg.add("unsupported_content")
            return None
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        name = _name(fn.get("name"))
        if fn.get("arguments") is None:
            # Not a call without arguments (OpenAI-style calls always carry them, `{}` at
            # least): the instrumentation left them out, so ``{}`` would be a guess.
            self.uncaptured += 1
            self.deg.add("malformed_arguments")
        args = parse_arguments(fn.get("arguments"), self.deg)
        return ToolCallPart(self.call_id(call.get("id"), name, pos), name, args)

    # -- messages --

    def message(
        self, obj: Any, default_role: str | None, pos: tuple[Any, ...], finish: str | None
    ) -> list[Message]:
        """One source message: semconv ``{role, parts}`` or chat-style ``{role, content, …}``.

        Tool results come out as their own ``tool`` messages (docs/canonical.md, Messages: one per result).
        """
        if isinstance(obj, list):
            # An early openai-v2 put an assistant turn's tool calls in the prompt as a bare list.
            obj = {"role": "assistant", "tool_calls": obj}
        if not isinstance(obj, dict):
            self.deg.add("malformed_messages")
            return []
        content = obj.get("content")
        if "parts" not in obj and isinstance(content, dict) and "parts" in content:
            # google-genai's events hold a whole Gemini ``Content``: its role is the turn's.
            role = obj.get("role") or content.get("role")
            obj = {**obj, "role": role, "content": content.get("parts")}
        role = _role(obj.get("role"))
        if "parts" in obj:
            if _unseen(obj["parts"]):
                return []  # nothing in it reached the model on this request
            own = self.parts(obj.get("parts"), pos)
            # Chat-form fields beside the parts, unless they repeat what the parts hold.
            ids = {p.id for p in own if isinstance(p, ToolCallPart)}
            calls = [
                (k, c)
                for k, c in self._calls(obj)
                if not (isinstance(c, dict) and _id(c.get("id")) in ids)
            ]
            reasoning = [p for p in self._reasoning(obj) if p not in own]
            parts = [*reasoning, *own, *self._beside(obj, calls, pos)]
        else:
            parts = self._chat_parts(obj, role or default_role, pos)
        if role is None:
            role = default_role or _infer_role(parts)
        return _split(role, parts, finish)

    def _chat_parts(
        self, obj: dict[str, Any], role: str | None, pos: tuple[Any, ...]
    ) -> list[Part]:
        parts = self._reasoning(obj)
        if role == "tool" or "tool_call_id" in obj:
            # Without ``content`` (or with null, Vertex AI's capture off) the result was not
            # captured: nothing to carry.
            if obj.get("content") is not None:
                id_ = obj.get("tool_call_id", obj.get("id"))
                rid = self.response_id(id_, obj.get("name"), (*pos, 0))
                parts.append(ToolCallResponsePart(rid, obj["content"]))
            return parts
        content = obj.get("content")
        if content is None and isinstance(obj.get("text"), str):
            content = obj["text"]
        content, calls = _claim_calls(content, self._calls(obj))
        parts.extend(self.parts(content, (*pos, "content")))
        parts.extend(self._beside(obj, calls, pos))
        return parts

    def _reasoning(self, obj: dict[str, Any]) -> list[Part]:
        """Chat-form reasoning beside the content (``reasoning_content``, ``reasoning``)."""
        reasoning = self._string(obj, "reasoning_content", "reasoning")
        return [ReasoningPart(reasoning)] if reasoning else []

    def _calls(self, obj: dict[str, Any]) -> list[tuple[int, Any]]:
        """Chat-form ``tool_calls`` with their places (a JSON string, a list or a lone call)."""
        calls = _strict(obj.get("tool_calls"), self.deg) if obj.get("tool_calls") else []
        if isinstance(calls, dict):
            calls = [calls]
        if isinstance(calls, list):
            return list(enumerate(calls))
        if calls is not _BAD:
            self.deg.add("malformed_messages")
        return []

    def _beside(
        self, obj: dict[str, Any], calls: list[tuple[int, Any]], pos: tuple[Any, ...]
    ) -> list[Part]:
        """What a chat-form message holds after its content: a refusal (text, as the Chat
        Completions translator keeps it), then its tool calls; citations are counted."""
        parts: list[Part] = []
        self._citations(obj)
        refusal = _text_part(self._string(obj, "refusal"))
        if refusal is not None:
            parts.append(refusal)
        for k, call in calls:
            part = self.tool_call(call, (*pos, "tool_calls", k))
            if part is not None:
                parts.append(part)
        if isinstance(obj.get("function_call"), dict):
            part = self.tool_call(obj["function_call"], (*pos, "function_call"))
            if part is not None:
                parts.append(part)
        return parts

    def messages(
        self,
        value: Any,
        section: str,
        *,
        output: bool,
        finish_reasons: list[Any] | None = None,
    ) -> list[Message]:
        out: list[Message] = []
        for i, obj in enumerate(_items(_strict(value, self.deg), self.deg)):
            fr = None
            if output:
                stated = obj.get("finish_reason") if isinstance(obj, dict) else None
                fr = finish_reason(stated)
                # An empty reason is stated: a piece of a streamed answer, not yet finished
                # (Google ADK writes one output message per chunk, `""` until the last), which
                # the span's reasons, one per choice, do not describe.
                if fr is None and stated != "" and finish_reasons and i < len(finish_reasons):
                    fr = finish_reason(finish_reasons[i])
            out.extend(self.message(obj, "assistant" if output else None, (section, i), fr))
        return out

    def system(self, value: Any) -> list[Message]:
        """``gen_ai.system_instructions``: a list of parts (or plain text) as one system message
        (a tool result among them is a ``tool`` message of its own, as anywhere)."""
        decoded = _loose(value, self.deg)
        if decoded is _BAD:
            return []
        if isinstance(decoded, dict) and "parts" in decoded:
            decoded = decoded["parts"]
        if isinstance(decoded, list):
            decoded = _items(decoded, self.deg, texts=True)
        return _split("system", self.parts(decoded, ("system",)), None)


def _unseen(parts: Any) -> bool:
    """Parts that are all marked ``visible: false`` (Pydantic AI's request-scoped system prompts
    that an earlier request was sent with)."""
    return (
        isinstance(parts, list)
        and bool(parts)
        and all(isinstance(p, dict) and p.get("visible") is False for p in parts)
    )


def _id(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _name(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _text_part(text: str | None) -> TextPart | None:
    return TextPart(text) if text else None


def _is_gemini(p: Any) -> bool:
    return (
        isinstance(p, dict)
        and p.get("type") is None
        and any(p.get(k) is not None for k in _GEMINI_KEYS)
    )


def _claim_calls(content: Any, calls: list[tuple[int, Any]]) -> tuple[Any, list[tuple[int, Any]]]:
    """Vertex AI repeats a choice's ``function_call`` parts as ``tool_calls`` beside the message,
    with ids it made up: each such call gives its id to the first unclaimed part of its name and
    adds no part of its own. The content comes back with those ids, with the calls left over."""
    if not isinstance(content, list) or not calls:
        return content, calls
    content = list(content)
    free = [j for j, p in enumerate(content) if _is_gemini(p)]
    rest: list[tuple[int, Any]] = []
    for k, call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        for j in free:
            fc = part_field(content[j], "functionCall")
            if isinstance(fc, dict) and name is not None and fc.get("name") == name:
                free.remove(j)
                if not _id(fc.get("id")) and _id(call.get("id")):
                    key = (
                        "function_call"
                        if isinstance(content[j].get("function_call"), dict)
                        else "functionCall"
                    )
                    content[j] = {**content[j], key: {**fc, "id": call["id"]}}
                break
        else:
            rest.append((k, call))
    return content, rest


def _first_str(obj: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        v = obj.get(key)
        if isinstance(v, str) and v:
            return v
    return None


def _infer_role(parts: list[Part]) -> str:
    """A role for a message whose source gave none, from what it holds."""
    if parts and all(isinstance(p, ToolCallResponsePart) for p in parts):
        return "tool"
    if any(
        isinstance(
            p, ToolCallPart | ReasoningPart | ServerToolCallPart | ServerToolCallResponsePart
        )
        for p in parts
    ):
        return "assistant"
    return "user"


def _split(role: str, parts: list[Part], finish: str | None) -> list[Message]:
    """Tool results as one ``tool`` message each; the rest keeps the source role.

    Results come before the remaining content of a user turn (they answer the previous turn)
    and after the content of an assistant turn (they answer its calls). In a ``tool`` message,
    media that follow a result are what that tool returned and stay with it.
    """
    if role == "tool" and len(parts) == 1:  # the common case: a tool message, one result
        return [Message(role, parts, finish)]
    if not any(isinstance(p, ToolCallResponsePart) for p in parts):
        return [Message(role, parts, finish)]
    groups: list[list[Part]] = []
    rest: list[Part] = []
    for p in parts:
        if isinstance(p, ToolCallResponsePart):
            groups.append([p])
        elif role == "tool" and groups and isinstance(p, _MEDIA):
            groups[-1].append(p)
        else:
            rest.append(p)
    tools = [Message("tool", g) for g in groups]
    if not rest:
        return tools
    head = Message(role, rest, finish)
    return [head, *tools] if role == "assistant" else [*tools, head]


def _choices(outputs: list[Message], attrs: dict[str, Any]) -> list[Message]:
    """The output messages with the split messages of one choice merged, unless the request
    asked for several choices (then each message is a choice)."""
    n = as_int(attrs.get("gen_ai.request.choice.count"))
    if n is not None and n > 1:
        return outputs
    return _merge(outputs, stated=n is not None)


def _merge(messages: list[Message], *, stated: bool) -> list[Message]:
    """Consecutive assistant messages of one choice become one message, parts in order.

    Finish reasons that disagree keep the messages apart (nothing is guessed). When the request
    did not state that it asked for one choice (util-genai leaves the count off its
    ``operation.details`` record), two messages that each end as a whole answer does are two
    choices, not one answer split.
    """
    out: list[Message] = []
    for m in messages:
        prev = out[-1] if out else None
        if (
            prev is not None
            and m.role == "assistant"
            and prev.role == "assistant"
            and (m.finish_reason is None or prev.finish_reason in (None, m.finish_reason))
            and (stated or not (_whole_answer(prev) and _whole_answer(m)))
        ):
            out[-1] = Message(
                "assistant", [*prev.parts, *m.parts], prev.finish_reason or m.finish_reason
            )
        else:
            out.append(m)
    return out


def _whole_answer(m: Message) -> bool:
    """An output message that finished on its own as an answer: it holds text and ended for a
    reason other than calling tools. A split answer's pieces do not each end so."""
    return m.finish_reason not in (None, "tool_call") and any(
        isinstance(p, TextPart) for p in m.parts
    )


def _tools(value: Any, deg: Degradations) -> list[ToolDefinition]:
    if isinstance(value, str):
        tools, counts = _tools_of_text(value)
        for reason, n in counts:
            deg.add(reason, n)
        return list(tools)
    return _decode_tools(value, deg)


@lru_cache(maxsize=64)
def _tools_of_text(value: str) -> tuple[tuple[ToolDefinition, ...], tuple[tuple[str, int], ...]]:
    """The tool definitions of one JSON text, and what they counted. An agent offers the same
    tools on every call, so the same text comes back span after span (definitions are frozen)."""
    deg = Degradations()
    return tuple(_decode_tools(value, deg)), tuple(deg.items())


def _decode_tools(value: Any, deg: Degradations) -> list[ToolDefinition]:
    out = []
    for obj in _items(_strict(value, deg), deg):
        td = tool_definition(obj, deg)
        if td is not None:
            out.append(td)
    return out


# ---------------------------------------------------------------------------------------------
# the fast path: semconv message JSON in its common shape, decoded straight into typed structs
#
# Most spans carry messages exactly as the conventions write them. Those are decoded by msgspec
# into the structs below and converted without the general walk. Anything else (an unknown part
# type or field, a missing or empty id, a role or value of another type, JSON that msgspec and
# orjson could read differently) raises, and the span goes through the general path instead, so
# a fact never depends on which path built it. Unknown fields are refused because msgspec skips
# them without the checks orjson applies (it accepts 1e400 there); values of free shape (tool
# arguments, tool responses) are kept as raw JSON and decoded by orjson, as the general path does.

_ABSENT = msgspec.Raw(b"")  # a field the source did not set


class _Fast(msgspec.Struct, tag_field="type", forbid_unknown_fields=True, gc=False):
    pass


class _FToolCall(_Fast, tag="tool_call"):
    id: str
    name: str
    arguments: msgspec.Raw = _ABSENT


class _FToolResponse(_Fast, tag="tool_call_response"):
    id: str
    response: msgspec.Raw = _ABSENT
    result: msgspec.Raw = _ABSENT


class _FBlob(_Fast, tag="blob"):
    modality: str
    content: str
    mime_type: str | None = None


class _FFile(_Fast, tag="file"):
    modality: str
    file_id: str
    mime_type: str | None = None


class _FUri(_Fast, tag="uri"):
    modality: str
    uri: str
    mime_type: str | None = None


class _FServerCall(_Fast, tag="server_tool_call"):
    name: str
    server_tool_call: msgspec.Raw
    id: str | None = None


class _FServerResponse(_Fast, tag="server_tool_call_response"):
    server_tool_call_response: msgspec.Raw
    id: str | None = None


# Text and reasoning decode straight into the canonical parts, which refuse unknown fields too.
_FPart = (
    TextPart
    | ReasoningPart
    | _FToolCall
    | _FToolResponse
    | _FBlob
    | _FFile
    | _FUri
    | _FServerCall
    | _FServerResponse
)


class _FMessage(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    role: str
    parts: list[_FPart]
    finish_reason: str | None = None


_FAST_MESSAGES = msgspec.json.Decoder(list[_FMessage])
_FAST_PARTS = msgspec.json.Decoder(list[_FPart])
_EMPTY = (None, "")


class _NotFast(Exception):
    """The value needs the general path."""


def _fast_decode(value: Any, decoder: Any) -> Any:
    if not isinstance(value, str | bytes):
        raise _NotFast
    try:
        return decoder.decode(value)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        raise _NotFast from None


def _json(raw: msgspec.Raw) -> Any:
    try:
        return orjson.loads(memoryview(raw))
    except orjson.JSONDecodeError:
        raise _NotFast from None


def _fast_parts(parts: list[Any], deg: Degradations) -> tuple[list[Part], bool]:
    """Canonical parts, and whether any is a tool result (the message may need a split)."""
    out: list[Part] = []
    results = False
    for p in parts:
        cls = type(p)
        if cls is TextPart or cls is ReasoningPart:
            if p.content:
                out.append(p)
        elif cls is _FToolCall:
            if not p.id:
                raise _NotFast
            args = None if p.arguments is _ABSENT else _json(p.arguments)
            if type(args) is not dict:
                args = parse_arguments(args, deg)
            out.append(ToolCallPart(p.id, p.name, args))
        elif cls is _FToolResponse:
            if not p.id:
                raise _NotFast
            # Both are decoded: the general path's orjson would refuse the whole value for either.
            response = None if p.response is _ABSENT else _json(p.response)
            result = None if p.result is _ABSENT else _json(p.result)
            out.append(ToolCallResponsePart(p.id, result if p.response is _ABSENT else response))
            results = True
        else:
            part = _fast_other(p, deg)
            if part is not None:
                out.append(part)
    return out, results


def _fast_other(p: Any, deg: Degradations) -> Part | None:
    """A media or server-tool part, as ``media_part`` / ``server_tool_part`` make it."""
    cls = type(p)
    if cls is _FServerCall or cls is _FServerResponse:
        body = _json(p.server_tool_call if cls is _FServerCall else p.server_tool_call_response)
        if type(body) is not dict or not isinstance(body.get("type"), str):
            raise _NotFast
        if cls is _FServerCall:
            return ServerToolCallPart(p.id or None, p.name, body)
        return ServerToolCallResponsePart(p.id or None, body)
    mime = p.mime_type or None
    if cls is _FBlob:
        if p.content:
            return blob_part(p.content, mime, deg, modality(p.modality, mime))
    elif cls is _FFile:
        if p.file_id:
            return file_part(p.file_id, mime, deg, modality(p.modality, mime))
    elif p.uri:
        return uri_media(p.uri, mime, deg, stated_modality(p.modality))
    deg.add("malformed_media")
    return None


def _fast_messages(
    value: Any, out: list[Message], deg: Degradations, reasons: list[Any] | None
) -> None:
    """Append the messages of one attribute; ``reasons`` is None for input messages, else the
    span's finish reasons (the fallback for a message without its own)."""
    for i, m in enumerate(_fast_decode(value, _FAST_MESSAGES)):
        role = m.role
        if role not in _ROLES:
            role = _role(role)
            if role is None:
                raise _NotFast
        fr = None
        if reasons is not None:
            fr = finish_reason(m.finish_reason)
            if fr is None and m.finish_reason != "" and i < len(reasons):  # as in messages()
                fr = finish_reason(reasons[i])
        parts, results = _fast_parts(m.parts, deg)
        if results:
            out.extend(_split(role, parts, fr))
        else:
            out.append(Message(role, parts, fr))


def _fast_system(value: Any, deg: Degradations) -> list[Message]:
    if isinstance(value, str) and value.strip()[:1] not in ("[", "{"):
        return [Message("system", [TextPart(value)] if value else [])]
    parts, results = _fast_parts(_fast_decode(value, _FAST_PARTS), deg)
    return _split("system", parts, None) if results else [Message("system", parts)]


def _fast_content(attrs: dict[str, Any], deg: Degradations) -> Content | None:
    """The same content as the general path, or None when the span needs that path."""
    get = attrs.get
    local = Degradations()
    try:
        inputs: list[Message] = []
        system = get(SYSTEM)
        if system not in _EMPTY:
            inputs.extend(_fast_system(system, local))
        value = get(INPUT)
        if value not in _EMPTY:
            _fast_messages(value, inputs, local, None)
        outputs: list[Message] = []
        value = get(OUTPUT)
        if value not in _EMPTY:
            reasons = finish_reasons(get("gen_ai.response.finish_reasons"))
            _fast_messages(value, outputs, local, reasons)
            if len(outputs) > 1:
                outputs = _choices(outputs, attrs)
    except _NotFast:
        return None
    value = get(TOOLS)
    tools = _tools(value, local) if value not in _EMPTY else []
    if local:
        deg.update(local)
    return Content(SOURCE, inputs, outputs, tools)


# ---------------------------------------------------------------------------------------------
# spans


def _attribute_content(
    attrs: dict[str, Any], deg: Degradations, seed: str, *, fast: bool = True
) -> Content:
    if fast:
        content = _fast_content(attrs, deg)
        if content is not None:
            return content
    b = _Builder(deg, seed)
    inputs: list[Message] = []
    if _present(attrs, SYSTEM):
        inputs.extend(b.system(attrs[SYSTEM]))
    if _present(attrs, INPUT):
        inputs.extend(b.messages(attrs[INPUT], "in", output=False))
    outputs: list[Message] = []
    if _present(attrs, OUTPUT):
        reasons = finish_reasons(attrs.get("gen_ai.response.finish_reasons"))
        outputs = b.messages(attrs[OUTPUT], "out", output=True, finish_reasons=reasons)
        outputs = _choices(outputs, attrs)
    tools = _tools(attrs[TOOLS], deg) if _present(attrs, TOOLS) else []
    return Content(SOURCE, inputs, outputs, tools)


def _references(attrs: dict[str, Any], deg: Degradations) -> bool:
    """Count content that was uploaded elsewhere and is only referenced here."""
    if attrs.keys().isdisjoint(_REF_KEYS):
        return False
    found = False
    for ref in _REF_KEYS:
        if _present(attrs, ref) and not _present(attrs, ref.removesuffix("_ref")):
            deg.add("content_reference")
            found = True
    return found


def span_content(
    attrs: dict[str, Any], events: list[dict[str, Any]], deg: Degradations, seed: str
) -> Content | None:
    """The call's messages and tools if the span carries GenAI semconv content, else None."""
    get = attrs.get
    if get(INPUT) not in _EMPTY or get(OUTPUT) not in _EMPTY or get(SYSTEM) not in _EMPTY:
        _references(attrs, deg)
        return _attribute_content(attrs, deg, seed)
    if _present(attrs, EVENTS_ATTRIBUTE):
        events = [*events, *_attribute_events(attrs[EVENTS_ATTRIBUTE], deg)]
    content = _event_content(attrs, events, deg, seed)
    if content is not None:
        return content
    if _references(attrs, deg):
        return Content(SOURCE, tools=span_tools(attrs, deg))
    return None


def span_tools(attrs: dict[str, Any], deg: Degradations) -> list[ToolDefinition]:
    """The tools a span says the call offered (``gen_ai.tool.definitions``), content or not:
    Pydantic AI keeps them on a span whose messages are log events."""
    return _tools(attrs[TOOLS], deg) if _present(attrs, TOOLS) else []


def span_finishes(attrs: dict[str, Any]) -> list[Message]:
    """The finish reasons a span states (``gen_ai.response.finish_reasons``) as output messages
    without parts, one a choice: what a span whose messages are log events knows of its answers.
    Pydantic AI 1.x writes its ``gen_ai.choice`` events without one; the span's then marks a
    truncated answer as truncated when the call is read (``identity.fill``)."""
    reasons = [
        finish_reason(r) for r in finish_reasons(attrs.get("gen_ai.response.finish_reasons"))
    ]
    if not any(r is not None for r in reasons):
        return []
    return [Message("assistant", [], r) for r in reasons]


def _attribute_events(value: Any, deg: Degradations) -> list[dict[str, Any]]:
    """Pydantic AI's ``events`` attribute (instrumentation format 1, ``event_mode='attributes'``)
    as span events: each entry is an event's body merged with its attributes, named by its
    ``event.name``. A span attribute of that name that holds no such entries gives none."""
    if isinstance(value, str | bytes):
        marker = '"event.name"' if isinstance(value, str) else b'"event.name"'
        if marker not in value:
            return []  # some other attribute that happens to be called `events`
        value = _strict(value, deg)
    if not isinstance(value, list):
        return []
    return [
        {"name": e["event.name"], "attributes": e}
        for e in value
        if isinstance(e, dict) and isinstance(e.get("event.name"), str)
    ]


def _event_payload(body: Any, attributes: dict[str, Any], deg: Degradations) -> dict[str, Any]:
    """What a per-message event says: a log record's body, or a span event's attributes
    (some SDKs put the body there as JSON under ``gen_ai.event.content``)."""
    payload: Any = body
    if payload is None:
        payload = attributes.get("gen_ai.event.content", attributes)
    if isinstance(payload, str | bytes):
        try:
            decoded = json_value(payload, deg)
        except (ValueError, RecursionError):
            decoded = None
        payload = decoded if isinstance(decoded, dict) else {"content": payload}
    if not isinstance(payload, dict):
        return {"content": payload}
    return payload


# What opentelemetry-instrumentation-google-genai 0.x (generate_content.py, ``_CONTENT_ELIDED``)
# and Google ADK's own log records (``USER_CONTENT_ELIDED``) write as an event's content with
# content capture off.
ELIDED = "<elided>"


class _EventGroup:
    """Messages of one call gathered from its per-message events, in event order."""

    def __init__(self, deg: Degradations, seed: str, reasons: list[Any] | None = None) -> None:
        self.b = _Builder(deg, seed)
        # The span's gen_ai.response.finish_reasons: the reason of a choice that states none.
        self.reasons = reasons or []
        self.inputs: list[Message] = []
        self.choices: list[tuple[int, int, list[Message]]] = []
        # Whether every choice holds a whole Gemini ``Content`` (google-genai 0.x's events).
        self.gemini_choices = True
        self.count = 0
        # The tool events since the last other event: (id, content) of each, in order.
        self._results: list[tuple[Any, Any]] = []

    def add(self, name: str, payload: dict[str, Any]) -> None:
        pos = ("event", self.count)
        self.count += 1
        if payload.get("content") == ELIDED:
            # Content capture off (google-genai 0.x, ADK): a placeholder, not the message's words.
            payload = {k: v for k, v in payload.items() if k != "content"}
        if name == CHOICE:
            msg = payload.get("message")
            if isinstance(msg, str | bytes):
                msg = _strict(msg, self.b.deg)
            if not isinstance(msg, dict):
                msg = {k: v for k, v in payload.items() if k not in ("index", "finish_reason")}
            elif "tool_calls" in payload and "tool_calls" not in msg:
                # OpenLLMetry and Vertex AI put the choice's tool calls beside its message.
                msg = {**msg, "tool_calls": payload["tool_calls"]}
            content = payload.get("content")
            self.gemini_choices &= isinstance(content, dict) and "parts" in content
            index = as_int(payload.get("index"))
            order = index if index is not None else len(self.choices)
            fr = finish_reason(payload.get("finish_reason"))
            if fr is None and 0 <= order < len(self.reasons):
                fr = finish_reason(self.reasons[order])
            self.choices.append(
                (order, len(self.choices), self.b.message(msg, "assistant", pos, fr))
            )
        else:
            role = _MESSAGE_EVENTS[name]
            if role == "tool":
                # The event is a tool result whatever role its body states (Vertex AI writes
                # the role of the Gemini turn that held it, ``user``).
                payload = {**payload, "role": role}
                self._results.append((payload.get("id"), payload.get("content")))
            elif self._results:
                payload = _without_repeats(payload, self._results)
            self.inputs.extend(self.b.message(payload, role, pos, None))
        if _MESSAGE_EVENTS.get(name) != "tool":
            self._results = []

    def outputs(self) -> list[Message]:
        out: list[tuple[int, list[Message]]] = []
        for order, _, ms in sorted(self.choices, key=lambda c: c[:2]):
            if out and out[-1][0] == order and _pieces(out[-1][1], ms):
                # Several choice events of one index: the pieces of one streamed choice (Google
                # ADK's stable-semconv logs write one per chunk), joined back into one answer.
                out[-1] = (order, [_joined(out[-1][1][0], ms[0])])
            else:
                out.append((order, list(ms)))
        if self.gemini_choices and _chunks([ms for _, ms in out]):
            # google-genai 0.x streamed: a choice event per chunk, `index` counting candidates
            # across chunks (0, 1, 2, …), only the last stating a finish reason: the pieces of
            # one choice. Two streamed candidates end twice and are left as written.
            joined = out[0][1][0]
            for _, ms in out[1:]:
                joined = _joined(joined, ms[0])
            return [joined]
        return [m for _, ms in out for m in ms]


def _chunks(choices: list[list[Message]]) -> bool:
    """Whether choices of successive indexes are the chunks of one streamed choice: more than
    one, each next one a piece of the one before (``_pieces``), the last finished."""
    return (
        len(choices) > 1
        and all(_pieces(prev, ms) for prev, ms in itertools.pairwise(choices))
        and choices[-1][0].finish_reason is not None
    )


def _pieces(prev: list[Message], ms: list[Message]) -> bool:
    """Whether two choice events of one index can be one answer: one assistant message each,
    the first not finished (a piece states no finish reason until the last)."""
    return (
        len(prev) == len(ms) == 1
        and prev[0].role == ms[0].role == "assistant"
        and prev[0].finish_reason is None
    )


def _joined(prev: Message, piece: Message) -> Message:
    """A choice and its next streamed piece: a text (or reasoning) piece continues the text (or
    reasoning) the choice ends with; other parts follow in order."""
    parts = list(prev.parts)
    for part in piece.parts:
        last = parts[-1] if parts else None
        if isinstance(part, TextPart) and isinstance(last, TextPart):
            parts[-1] = TextPart(last.content + part.content)
        elif isinstance(part, ReasoningPart) and isinstance(last, ReasoningPart):
            parts[-1] = ReasoningPart(last.content + part.content)
        else:
            parts.append(part)
    return Message("assistant", parts, piece.finish_reason)


def _without_repeats(payload: dict[str, Any], results: list[tuple[Any, Any]]) -> dict[str, Any]:
    """A Gemini turn's event without the function results the tool events just before it gave.
    Vertex AI writes each result of a turn holding more than results as a tool event (id
    ``<name>_<k>``, k counting the turn's results) and then the whole turn, the results again
    (opentelemetry-python-contrib#3280). Only a result equal to its tool event is a repeat."""
    content = payload.get("content")
    if not isinstance(content, list):
        return payload
    given = {(id_, key) for id_, c in results if (key := _same(c)) is not None}
    kept: list[Any] = []
    k = 0
    for part in content:
        fr = part_field(part, "functionResponse")
        if isinstance(fr, dict):
            k += 1
            if (f"{fr.get('name')}_{k - 1}", _same(fr.get("response"))) in given:
                continue
        kept.append(part)
    return {**payload, "content": kept} if len(kept) < len(content) else payload


def _same(value: Any) -> bytes | None:
    """A JSON value as bytes that equal values share (None: not JSON, equal to nothing)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None


def _event_content(
    attrs: dict[str, Any], events: list[dict[str, Any]], deg: Degradations, seed: str
) -> Content | None:
    """Content from span events, for spans whose attributes carry none."""
    group = _EventGroup(deg, seed, finish_reasons(attrs.get("gen_ai.response.finish_reasons")))
    prompt: list[Message] = []
    completion: list[Message] = []
    for e in events:
        name = e.get("name") if isinstance(e, dict) else None
        if not isinstance(name, str):
            continue
        ea = e.get("attributes") if isinstance(e, dict) else None
        if not isinstance(ea, dict):
            continue
        if name == OPERATION_DETAILS and any(_present(ea, k) for k in _MESSAGE_KEYS):
            # The event repeats the span's own attributes; the span's metadata still applies.
            return _attribute_content({**attrs, **ea}, deg, seed)
        if name in _MESSAGE_EVENTS or name == CHOICE:
            group.add(name, _event_payload(None, ea, deg))
        elif name == PROMPT_EVENT and _present(ea, "gen_ai.prompt"):
            prompt.extend(_whole(ea["gen_ai.prompt"], group.b, "prompt", "user", None))
        elif name == COMPLETION_EVENT and _present(ea, "gen_ai.completion"):
            reasons = finish_reasons(attrs.get("gen_ai.response.finish_reasons"))
            completion.extend(
                _whole(ea["gen_ai.completion"], group.b, "completion", "assistant", reasons)
            )
    outputs = [*completion, *group.outputs()]
    if not group.b.captured([*prompt, *group.inputs, *outputs]):
        return None  # capture off: a span of metadata only (telemetry.translate_span)
    tools = _tools(attrs[TOOLS], deg) if _present(attrs, TOOLS) else []
    return Content(SOURCE, [*prompt, *group.inputs], outputs, tools)


def _whole(
    value: Any, b: _Builder, section: str, role: str, reasons: list[Any] | None
) -> list[Message]:
    """A ``gen_ai.prompt`` / ``gen_ai.completion`` event value: a JSON list of chat messages
    (or choices), or plain text, which is one message of the given role."""
    decoded = _loose(value, b.deg)
    if decoded is _BAD:
        return []
    if isinstance(decoded, str):
        return [Message(role, [TextPart(decoded)] if decoded else [])]
    output = role == "assistant"
    out: list[Message] = []
    for i, obj in enumerate(_items(decoded, b.deg)):
        fr = None
        if output and isinstance(obj, dict):
            fr = finish_reason(obj.get("finish_reason"))
            if isinstance(obj.get("message"), dict):
                obj = obj["message"]
        if output and fr is None and reasons and i < len(reasons):
            fr = finish_reason(reasons[i])
        out.extend(b.message(obj, role, (section, i), fr))
    return out


# ---------------------------------------------------------------------------------------------
# log records


def _record_time(r: LogRecord) -> int | None:
    return r.time_unix_nano or r.observed_time_unix_nano


def _details_fact(r: LogRecord) -> InferenceCall | Skip:
    """``gen_ai.client.inference.operation.details``: one record is one whole call."""
    view = {**r.body, **r.attributes} if isinstance(r.body, dict) else r.attributes
    raw = r.to_raw()
    correlated = bool(r.trace_id and r.span_id)
    seed = f"{r.trace_id}:{r.span_id}" if correlated else stable_hash(raw)
    deg = Degradations()
    if any(_present(view, k) for k in _MESSAGE_KEYS):
        _references(view, deg)
        content = _attribute_content(view, deg, seed)
    elif _references(view, deg):
        content = Content(SOURCE, tools=_tools(view[TOOLS], deg) if _present(view, TOOLS) else [])
    else:
        return Skip("content_not_captured", f"{OPERATION_DETAILS} record without content")
    deg.add("invalid_text", r.repaired)
    return build(
        content,
        deg,
        view,
        # Same identity as the span it describes (telemetry._span_identity), so the two dedupe.
        identity=("otlp", r.trace_id, r.span_id) if correlated else None,
        raw=raw,
        trace_id=r.trace_id,
        span_id=r.span_id,
        parent_span_id=None,
        session_id=session_of(view),
        times={
            "duration_ms": None,
            "started_at": None,
            "observed_at": ns_to_rfc3339(_record_time(r)),
        },
        scope=r.scope,
    )


def _group_fact(records: list[LogRecord]) -> InferenceCall | Skip:
    """Per-message events of one span: one call."""
    first = records[0]
    deg = Degradations()
    group = _EventGroup(deg, f"{first.trace_id}:{first.span_id}")
    attrs: dict[str, Any] = {}
    for r in records:
        for k, v in r.attributes.items():
            attrs.setdefault(k, v)
        group.add(r.event_name or "", _event_payload(r.body, r.attributes, deg))
    inputs, outputs = group.inputs, group.outputs()
    if not group.b.captured([*inputs, *outputs]):
        return Skip("content_not_captured", f"events of span {first.span_id} carry no content")
    deg.add("invalid_text", sum(r.repaired for r in records))
    times = [t for t in map(_record_time, records) if t]
    return build(
        Content(SOURCE, inputs, outputs),
        deg,
        attrs,
        identity=("otlp", first.trace_id, first.span_id),
        raw=[r.to_raw() for r in records],
        trace_id=first.trace_id,
        span_id=first.span_id,
        parent_span_id=None,
        session_id=session_of(attrs),
        times={
            "duration_ms": None,
            "started_at": ns_to_rfc3339(min(times)) if times else None,
            "observed_at": ns_to_rfc3339(max(times)) if times else None,
        },
        scope=first.scope,
    )


def log_facts(records: list[LogRecord]) -> Iterator[InferenceCall | Skip]:
    """Facts from GenAI log events of one batch, grouped by the span they belong to.

    Results come in record order; a group of per-message events takes the place of its first
    record.
    """
    order: list[Skip | LogRecord | tuple[str, str]] = []
    groups: dict[tuple[str, str], list[LogRecord]] = {}
    for r in records:
        name = r.event_name
        if name == OPERATION_DETAILS:
            order.append(r)
        elif name in _MESSAGE_EVENTS or name == CHOICE:
            if not (r.trace_id and r.span_id):
                order.append(Skip("uncorrelated_events", f"{name} record without span context"))
                continue
            key = (r.trace_id, r.span_id)
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(r)
        elif name == EVALUATION:
            order.append(Skip("feedback_event", f"{name}: feedback is not a model call"))
        else:
            order.append(Skip("not_genai", f"log record {name!r}"))
    for item in order:
        if isinstance(item, Skip):
            yield item
        elif isinstance(item, LogRecord):
            yield _details_fact(item)
        else:
            yield _group_fact(groups[item])
