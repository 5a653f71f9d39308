"""Vercel AI SDK span attributes to canonical content (docs/sources/vercel-ai.md).

With ``experimental_telemetry: {isEnabled: true}`` the SDK (the ``ai`` npm package) writes one
span per provider call — ``ai.generateText.doGenerate``, ``ai.streamText.doStream``,
``ai.generateObject.doGenerate``, ``ai.streamObject.doStream`` — under one span for the whole
run (``ai.generateText``, ``ai.streamText``, …). A call span holds its content in the SDK's own
keys: ``ai.prompt.messages`` (its provider-level prompt as JSON: messages of typed parts),
``ai.prompt.tools`` (one JSON string per tool), ``ai.prompt.toolChoice``, and the answer as
``ai.response.text`` / ``.reasoning`` / ``.toolCalls`` / ``.object`` with
``ai.response.finishReason``. The run span is a summary of the run, no model call: telemetry.py
skips it (``is_run_span``) as it skips agent spans.
"""

from __future__ import annotations

import re
from typing import Any

from lithify.core.values import as_int
from lithify.model import (
    Message,
    Part,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
)
from lithify.translate._common import (
    Degradations,
    blob_part,
    builtin_tool,
    file_part,
    finish_reason,
    finish_reasons,
    json_value,
    modality_of,
    parse_arguments,
    synthesized_id,
    tool_definition,
)
from lithify.translate._telemetry import Content, metadata, request_params, uri_media

SOURCE = "vercel-ai"

OPERATION = "ai.operationId"
MESSAGES = "ai.prompt.messages"
TOOLS = "ai.prompt.tools"
TOOL_CHOICE = "ai.prompt.toolChoice"
_TEXT = "ai.response.text"
_REASONING = "ai.response.reasoning"
_TOOL_CALLS = "ai.response.toolCalls"
_OBJECT = "ai.response.object"
_PROVIDER_METADATA = "ai.response.providerMetadata"
_FINISH = "ai.response.finishReason"
# Written only when outputs are recorded (`recordOutputs`, on by default): one of them present
# means the answer was captured, even an empty one.
_OUTPUT_KEYS = (_TEXT, _REASONING, _TOOL_CALLS, _OBJECT, _PROVIDER_METADATA)

# One provider call (the spans that hold a call's content), and the run around the calls.
CALL_OPERATIONS = frozenset(
    {
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    }
)
RUN_OPERATIONS = frozenset(
    {"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"}
)
# generateObject / streamObject hold the answer to a JSON schema (on the run span, `ai.schema`).
_OBJECT_OPERATIONS = frozenset({"ai.generateObject.doGenerate", "ai.streamObject.doStream"})

# The ids the SDK makes up when the provider sent none (createIdGenerator: prefix, '-', 24
# characters): no provider's response id, so no model_call_id.
_GENERATED_ID = re.compile(r"^ai(?:txt|obj)-[0-9A-Za-z]{24}$")
# Keys of a part's providerOptions / providerMetadata that hold reasoning no one can read:
# Anthropic `signature` / `redactedData`, OpenAI `reasoningEncryptedContent`, Google
# `thoughtSignature`.
_OPAQUE_KEY = re.compile(r"signature|encrypted|redacted", re.IGNORECASE)

# The SDK's settings (`ai.settings.*`, camelCase) that are canonical request parameters, filling
# what the gen_ai.request.* keys do not give (seed is only here; maxTokens is AI SDK 4's name).
_SETTINGS = {
    "ai.settings.temperature": "temperature",
    "ai.settings.topP": "top_p",
    "ai.settings.topK": "top_k",
    "ai.settings.maxOutputTokens": "max_tokens",
    "ai.settings.maxTokens": "max_tokens",
    "ai.settings.stopSequences": "stop",
    "ai.settings.seed": "seed",
    "ai.settings.frequencyPenalty": "frequency_penalty",
    "ai.settings.presencePenalty": "presence_penalty",
}
_SESSION_KEYS = ("ai.telemetry.metadata.sessionId", "ai.telemetry.metadata.session_id")


def operation(attrs: dict[str, Any]) -> str | None:
    op = attrs.get(OPERATION)
    return op if isinstance(op, str) else None


def is_run_span(attrs: dict[str, Any]) -> bool:
    """The span around a whole generateText / streamText / … run: it repeats the run's prompt
    (``ai.prompt``) and final answer, a summary and no model call."""
    return operation(attrs) in RUN_OPERATIONS


def is_call_span(attrs: dict[str, Any]) -> bool:
    return operation(attrs) in CALL_OPERATIONS


def session_of(attrs: dict[str, Any]) -> str | None:
    """The session the application put in the telemetry metadata (``metadata: {sessionId}``,
    the key observability vendors read)."""
    for key in _SESSION_KEYS:
        v = attrs.get(key)
        if isinstance(v, str | int) and not isinstance(v, bool) and v != "":
            return str(v)
    return None


# ---------------------------------------------------------------------------------------------
# values


def _decode(value: Any, deg: Degradations) -> Any:
    """A JSON attribute: a string is parsed (``malformed_messages`` when it is not JSON, giving
    None); a value a trace store already parsed is taken as it is."""
    if isinstance(value, str | bytes):
        try:
            return json_value(value, deg)
        except (ValueError, RecursionError):
            deg.add("malformed_messages")
            return None
    return value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _opaque(part: dict[str, Any]) -> bool:
    """Whether a part carries reasoning state no one can read (a signature, encrypted or
    redacted content) in its provider options or metadata, or AI SDK 4's ``signature``."""
    if _str(part.get("signature")) is not None:
        return True
    for key in ("providerOptions", "providerMetadata"):
        options = part.get(key)
        if not isinstance(options, dict):
            continue
        for per_provider in options.values():
            if isinstance(per_provider, dict) and any(
                _OPAQUE_KEY.search(k) and v not in (None, "", False)
                for k, v in per_provider.items()
            ):
                return True
    return False


class _Calls:
    """Tool-call ids: a call without one gets a synthesized id; a result without one takes the
    oldest unanswered call (of its tool, where it names one)."""

    def __init__(self, seed: str, deg: Degradations) -> None:
        self.seed = seed
        self.deg = deg
        self.open: list[tuple[str, str]] = []

    def call_id(self, value: Any, name: str, *position: Any) -> str:
        id_ = _str(value)
        if id_ is None:
            id_ = synthesized_id(self.seed, *position)
            self.deg.add("synthesized_id")
        self.open.append((id_, name))
        return id_

    def result_id(self, value: Any, name: Any, *position: Any) -> str:
        id_ = _str(value)
        if id_ is not None:
            self.open = [c for c in self.open if c[0] != id_]
            return id_
        for i, (open_id, open_name) in enumerate(self.open):
            if not isinstance(name, str) or open_name == name:
                del self.open[i]
                return open_id
        if self.open and isinstance(name, str):
            return self.open.pop(0)[0]
        self.deg.add("orphan_tool_response")
        return synthesized_id(self.seed, *position)


def _tool_call(p: dict[str, Any], calls: _Calls, deg: Degradations, *position: Any) -> Part | None:
    name = p.get("toolName")
    if not isinstance(name, str) or not name:
        deg.add("unsupported_content")
        return None
    if p.get("providerExecuted") is True:
        # A tool the provider ran itself (web search, code execution): the part kept whole.
        return ServerToolCallPart(_str(p.get("toolCallId")), name, p)
    # `input` (AI SDK 5+; the parsed object in a prompt, the model's JSON text in a response),
    # `args` (AI SDK 4).
    args = p["input"] if "input" in p else p.get("args")
    return ToolCallPart(
        calls.call_id(p.get("toolCallId"), name, *position), name, parse_arguments(args, deg)
    )


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _data_part(data: Any, mime: str | None, modality: str, deg: Degradations) -> Part | None:
    """Media data as the SDK writes it: base64 (bytes are written so), a data URL, or a URL
    (a ``URL`` object serializes as its text). Base64 that does not decode gives no part and
    counts ``malformed_media``, as missing data does."""
    if not isinstance(data, str) or not data:
        deg.add("malformed_media")
        return None
    if _URL.match(data):  # base64 holds no colon
        return uri_media(data, mime, deg, modality)
    return blob_part(data, mime, deg, modality)


def _media(p: dict[str, Any], kind: str, deg: Degradations) -> Part | None:
    """A ``file`` part ``{data, mediaType (mimeType in AI SDK 4), filename}``, or AI SDK 4's
    ``image`` part ``{image, mimeType}``."""
    mime = _str(p.get("mediaType")) or _str(p.get("mimeType"))
    if kind == "image":
        return _data_part(p.get("image"), mime, "image", deg)
    return _data_part(p.get("data"), mime, modality_of(mime), deg)


_IMAGE_ITEMS = frozenset({"image-data", "image-url", "image-file-id", "image"})


def _output_media(item: dict[str, Any], deg: Degradations) -> Part | None:
    """A medium in a tool result's ``content`` output: ``image-data`` / ``file-data`` /
    ``media`` (base64 ``data``), ``image-url`` / ``file-url`` (``url``), ``image-file-id`` /
    ``file-id`` (``fileId``, or one id per provider), AI SDK 4's ``image``."""
    kind = item.get("type")
    mime = _str(item.get("mediaType")) or _str(item.get("mimeType"))
    modality = "image" if kind in _IMAGE_ITEMS else modality_of(mime)
    if kind in ("image-data", "file-data", "media", "image"):
        return _data_part(item.get("data"), mime, modality, deg)
    if kind in ("image-url", "file-url"):
        return _data_part(item.get("url"), mime, modality, deg)
    if kind in ("image-file-id", "file-id"):
        fid = item.get("fileId")
        if isinstance(fid, dict):  # one id per provider
            fid = next((v for v in fid.values() if isinstance(v, str) and v), None)
        if isinstance(fid, str) and fid:
            return file_part(fid, mime, deg, modality)
        deg.add("malformed_media")
        return None
    deg.add("unsupported_content")
    return None


def _result(p: dict[str, Any], deg: Degradations) -> tuple[bool, Any, list[Part]]:
    """What the model was sent as a tool's result, and the media that came with it:
    ``(found, result, media)``. ``output`` (AI SDK 5+) by its type; AI SDK 4's ``result`` (and
    its ``content`` list)."""
    output = p.get("output")
    if isinstance(output, dict):
        kind = output.get("type")
        if kind in ("text", "json", "error-text", "error-json") and "value" in output:
            return True, output["value"], []
        if kind == "execution-denied":
            # The provider sends the reason (or its own words when there is none).
            reason = output.get("reason")
            return True, reason if isinstance(reason, str) else output, []
        if kind == "content" and isinstance(output.get("value"), list):
            return (True, *_content_output(output["value"], deg))
        deg.add("unsupported_content")
        return False, None, []
    if isinstance(p.get("content"), list):  # AI SDK 4: the result as content parts
        return (True, *_content_output(p["content"], deg))
    if "result" in p:
        return True, p["result"], []
    deg.add("malformed_messages")
    return False, None, []


def _content_output(items: list[Any], deg: Degradations) -> tuple[Any, list[Part]]:
    """A result given as content: its text items stay the structured result, media follow it."""
    texts: list[Any] = []
    media: list[Part] = []
    for item in items:
        if not isinstance(item, dict):
            deg.add("unsupported_content")
        elif item.get("type") == "text" and isinstance(item.get("text"), str):
            texts.append(item)
        elif (m := _output_media(item, deg)) is not None:
            media.append(m)
    return texts, media


def _message(m: Any, i: int, calls: _Calls, deg: Degradations) -> list[Message]:
    """One prompt message as canonical messages: tool results each in a ``tool`` message."""
    if not isinstance(m, dict):
        deg.add("malformed_messages")
        return []
    role = m.get("role")
    role = role if isinstance(role, str) and role else "user"
    content = m.get("content")
    if isinstance(content, str):
        return [Message(role, [TextPart(content)] if content else [])]
    if not isinstance(content, list):
        deg.add("malformed_messages")
        return [Message(role, [])]
    parts: list[Part] = []
    results: list[Message] = []
    for j, p in enumerate(content):
        if not isinstance(p, dict):
            deg.add("unsupported_content")
            continue
        kind = p.get("type")
        if _opaque(p):
            deg.add("opaque_reasoning")
        if kind == "text":
            if _str(p.get("text")) is not None:
                parts.append(TextPart(p["text"]))
            elif p.get("text") not in (None, ""):
                deg.add("unsupported_content")
        elif kind == "reasoning":
            if _str(p.get("text")) is not None:
                parts.append(ReasoningPart(p["text"]))
        elif kind == "redacted-reasoning":  # AI SDK 4: Anthropic's redacted thinking
            if not _opaque(p):
                deg.add("opaque_reasoning")
        elif kind in ("file", "image"):
            if (media := _media(p, kind, deg)) is not None:
                parts.append(media)
        elif kind == "tool-call":
            if (call := _tool_call(p, calls, deg, "input", i, j)) is not None:
                parts.append(call)
        elif kind == "tool-result" and role == "assistant" and p.get("providerExecuted") is True:
            parts.append(ServerToolCallResponsePart(_str(p.get("toolCallId")), p))
        elif kind == "tool-result":
            found, result, media = _result(p, deg)
            if found:
                id_ = calls.result_id(p.get("toolCallId"), p.get("toolName"), "result", i, j)
                results.append(Message("tool", [ToolCallResponsePart(id_, result), *media]))
        elif kind == "tool-approval-response":
            pass  # the SDK's approval of a call: providers never send it to the model
        else:
            deg.add("unsupported_content")
    if role == "tool":
        # Only results belong here; anything else the message held follows as a user turn.
        return [*results, Message("user", parts)] if parts else results
    if results and not parts:
        return results
    if role == "assistant":
        return [Message(role, parts), *results]
    return [*results, Message(role, parts)]


def _input(attrs: dict[str, Any], calls: _Calls, deg: Degradations) -> list[Message]:
    prompt = _decode(attrs.get(MESSAGES), deg)
    if prompt is None:
        return []
    if not isinstance(prompt, list):
        deg.add("malformed_messages")
        return []
    out: list[Message] = []
    for i, m in enumerate(prompt):
        out.extend(_message(m, i, calls, deg))
    return out


def _finish(attrs: dict[str, Any]) -> str | None:
    """``ai.response.finishReason`` (else the span's ``gen_ai.response.finish_reasons``), the
    SDK's spelling (``tool-calls``, ``content-filter``) onto the canonical one; ``unknown`` (AI
    SDK 4/5: the provider gave none) is null."""
    value = attrs.get(_FINISH)
    if not isinstance(value, str) or not value:
        reasons = finish_reasons(attrs.get("gen_ai.response.finish_reasons"))
        value = reasons[0] if reasons else None
    if not isinstance(value, str) or value.strip().lower() == "unknown":
        return None
    return finish_reason(value.replace("-", "_"))


def _output(attrs: dict[str, Any], calls: _Calls, deg: Degradations) -> list[Message]:
    if not any(k in attrs for k in _OUTPUT_KEYS):
        return []
    parts: list[Part] = []
    reasoning = attrs.get(_REASONING)
    if isinstance(reasoning, str):
        if reasoning:
            parts.append(ReasoningPart(reasoning))
    elif reasoning is not None:
        deg.add("unsupported_content")
    for key in (_TEXT, _OBJECT):
        text = attrs.get(key)
        if isinstance(text, str):
            if text:
                parts.append(TextPart(text))
        elif text is not None:
            deg.add("unsupported_content")
    if _TOOL_CALLS in attrs:
        tool_calls = _decode(attrs[_TOOL_CALLS], deg)
        if isinstance(tool_calls, list):
            for k, c in enumerate(tool_calls):
                if not isinstance(c, dict):
                    deg.add("malformed_messages")
                    continue
                if _opaque(c):
                    deg.add("opaque_reasoning")
                if (call := _tool_call(c, calls, deg, "output", k)) is not None:
                    parts.append(call)
        elif tool_calls is not None:
            deg.add("malformed_messages")
    return [Message("assistant", parts, _finish(attrs))]


def _tools(attrs: dict[str, Any], deg: Degradations) -> list[ToolDefinition]:
    """``ai.prompt.tools``: one JSON string per tool (a list of them as one JSON text, or parsed,
    from a trace store). A function tool ``{type: function, name, description, inputSchema}``
    (``parameters`` in AI SDK 4); a provider tool ``{type: provider | provider-defined, id,
    name, args}`` is a built-in tool named ``name``."""
    value = attrs.get(TOOLS)
    if value is None:
        return []
    if isinstance(value, str):
        value = _decode(value, deg)
        if value is None:
            return []
    if not isinstance(value, list):
        value = [value]
    out: list[ToolDefinition] = []
    for item in value:
        tool = _decode(item, deg) if isinstance(item, str | bytes) else item
        if tool is None:
            continue
        if isinstance(tool, dict) and tool.get("type") in ("provider", "provider-defined"):
            name = _str(tool.get("name"))
            if name is None:
                deg.add("unsupported_tool")
            elif (builtin := builtin_tool(tool, name)) is not None:
                out.append(builtin)
            continue
        if isinstance(tool, dict) and "inputSchema" in tool:
            tool = {**tool, "parameters": tool["inputSchema"]}
        if (definition := tool_definition(tool, deg)) is not None:
            out.append(definition)
    return out


def _tool_choice(attrs: dict[str, Any]) -> Any:
    """``ai.prompt.toolChoice`` (``{"type": "auto" | "none" | "required"}`` or ``{"type":
    "tool", "toolName"}``): the mode as a string, a named tool as the SDK states it. ``auto`` is
    what the SDK records whenever tools are given, set or not, and what providers do unasked
    (@ai-sdk/openai then sends no ``tool_choice``): not a parameter that was set."""
    choice = attrs.get(TOOL_CHOICE)
    if isinstance(choice, str):
        try:
            choice = json_value(choice, Degradations())
        except (ValueError, RecursionError):
            return None
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind in ("none", "required"):
        return kind
    if kind == "tool":
        return choice
    return None


def _provider(attrs: dict[str, Any]) -> str | None:
    """The SDK names a provider with its API (``openai.chat``, ``openai.responses``,
    ``anthropic.messages``, ``google.generative-ai``): the provider is the name before the first
    dot."""
    value = attrs.get("ai.model.provider") or attrs.get("gen_ai.system")
    if not isinstance(value, str) or not value:
        return None
    return value.split(".", 1)[0] or value


def span_metadata(attrs: dict[str, Any]) -> dict[str, Any]:
    """What the SDK's keys say beyond the shared gen_ai.* ones: the provider's name, the seed and
    the other settings, usage and ids from the ``ai.*`` keys (older releases wrote no gen_ai.*
    usage); a response id the SDK made up is none."""
    fields = metadata(attrs)
    fields["provider"] = _provider(attrs)
    if fields["model"] is None:
        for key in ("ai.response.model", "ai.model.id"):
            if _str(attrs.get(key)) is not None:
                fields["model"] = attrs[key]
                break
    request = request_params(attrs)
    for key, name in _SETTINGS.items():
        v = attrs.get(key)
        if name not in request and v is not None and v != "":
            request[name] = v
    if (choice := _tool_choice(attrs)) is not None and "tool_choice" not in request:
        request["tool_choice"] = choice
    fields["request"] = dict(sorted(request.items()))
    for field, keys in (
        ("input_tokens", ("ai.usage.inputTokens", "ai.usage.promptTokens")),
        ("output_tokens", ("ai.usage.outputTokens", "ai.usage.completionTokens")),
    ):
        for key in keys:
            if fields[field] is None and attrs.get(key) is not None:
                fields[field] = as_int(attrs[key])
    call_id = fields["model_call_id"] or _str(attrs.get("ai.response.id"))
    fields["model_call_id"] = None if call_id is None or _GENERATED_ID.match(call_id) else call_id
    return fields


def metadata_only(attrs: dict[str, Any], deg: Degradations) -> Content:
    """A call span without its content (``recordInputs`` and ``recordOutputs`` off): the SDK's
    metadata, no messages (telemetry.py counts ``content_not_captured``)."""
    return Content(SOURCE, tools=_tools(attrs, deg), metadata=span_metadata(attrs))


def span_content(
    attrs: dict[str, Any], events: list[dict[str, Any]], deg: Degradations, seed: str
) -> Content | None:
    """The content of a call span, or None when the span is not one (or holds no content)."""
    if OPERATION not in attrs and MESSAGES not in attrs:
        return None  # every span of the other conventions: one lookup each
    if not (is_call_span(attrs) or (MESSAGES in attrs and not is_run_span(attrs))):
        return None
    if MESSAGES not in attrs and not any(k in attrs for k in _OUTPUT_KEYS):
        return None  # content not recorded: a metadata-only capture (telemetry.py)
    calls = _Calls(seed, deg)
    inputs = _input(attrs, calls, deg)
    outputs = _output(attrs, calls, deg)
    if operation(attrs) in _OBJECT_OPERATIONS and attrs.get("ai.settings.output") != "no-schema":
        deg.add("output_schema")
    return Content(SOURCE, inputs, outputs, _tools(attrs, deg), metadata=span_metadata(attrs))
