"""Gemini / Vertex AI generateContent exchanges (plain or streamed) to facts.

Mapping rules: docs/canonical.md; the choices made where it is silent: docs/sources/anthropic-gemini.md.
Field names are accepted in camelCase (the REST wire form) and snake_case (the google-genai SDK's
own dumps). A streamed body is first reassembled into the response a non-streamed call returns,
then both go through the same code, so the two give the same fact. One module past 500 lines: it
is one format's whole mapping (request, response, stream, Vertex and AI Studio), read top to bottom
against its reference.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import deque
from functools import cache
from typing import Any

from lithify.core.times import fixed_rfc3339
from lithify.core.values import as_int
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
    builtin_tool,
    error_detail,
    finish,
    finish_reason,
    parse_arguments,
    synthesized_call_id,
    text_parts,
    tool_call,
    transport_times,
    url_part,
)
from lithify.translate.sse import SSEEvent, event_json, lost, raw_stream

NAME = "gemini"

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")

# Integer finish reasons, as protobuf clients send them (`enum-encoding=int`). The two APIs number
# them differently from 6 on; Vertex (aiplatform v1 Candidate.FinishReason) is where integer
# enums are seen, so it is the default.
_VERTEX_FINISH = (
    "FINISH_REASON_UNSPECIFIED",
    "STOP",
    "MAX_TOKENS",
    "SAFETY",
    "RECITATION",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "MALFORMED_FUNCTION_CALL",
    "MODEL_ARMOR",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "IMAGE_OTHER",
    "UNEXPECTED_TOOL_CALL",
    "NO_IMAGE",
)
# generativelanguage v1beta Candidate.FinishReason.
_GEMINI_FINISH = (
    "FINISH_REASON_UNSPECIFIED",
    "STOP",
    "MAX_TOKENS",
    "SAFETY",
    "RECITATION",
    "OTHER",
    "LANGUAGE",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "MALFORMED_FUNCTION_CALL",
    "IMAGE_SAFETY",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
)
# Gemini names the shared mapping does not know.
_FINISH_EXTRA = {
    "model_armor": "content_filter",
    "image_prohibited_content": "content_filter",
    "image_recitation": "content_filter",
    "finish_reason_unspecified": None,
}
# Gemini Schema `Type` enum → JSON Schema type (0, TYPE_UNSPECIFIED, means "no type").
_SCHEMA_TYPES = (None, "string", "number", "integer", "boolean", "array", "object", "null")
_SCHEMA_INTS = frozenset(
    {"maxItems", "minItems", "minLength", "maxLength", "minProperties", "maxProperties"}
)
# Keys beside a part's payload: read (or counted) by ``content_parts``, never a payload themselves.
_PART_META = frozenset(
    {
        "thought",
        "thoughtSignature",
        "videoMetadata",
        "partMetadata",
        "audioTranscription",
        "speechMetadata",
        # How the model reads the media beside them (which pages, sheet, cells or stretch of
        # audio; the token budget): on raw, as `videoMetadata` is.
        "mediaResolution",
        "mediaProcessing",
        "documentMetadata",
        "spreadsheetMetadata",
        "audioMetadata",
    }
)
# Protobuf JSON reads bytes in either base64 alphabet; the URL-safe one is turned standard.
_URLSAFE = str.maketrans("-_", "+/")


# --- field access -----------------------------------------------------------------------------


@cache
def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def _g(doc: Any, key: str) -> Any:
    """``doc[key]`` under its camelCase or snake_case name; None when absent or not a dict."""
    if not isinstance(doc, dict):
        return None
    value = doc.get(key)
    return doc.get(_snake(key)) if value is None else value


def part_field(doc: Any, key: str) -> Any:
    """A Gemini field by its camelCase ``key``, written either way (for telemetry that records
    Gemini parts); None when absent."""
    return _g(doc, key)


def snake_name(key: str) -> str:
    """The snake_case spelling of a camelCase Gemini field name, as the SDKs dump it."""
    return _snake(key)


def _has(doc: Any, key: str) -> bool:
    return isinstance(doc, dict) and (key in doc or _snake(key) in doc)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _indexed(candidates: Any) -> list[tuple[int, dict[str, Any]]]:
    """Candidates with their index. Protobuf JSON omits index 0, so a lone candidate without
    one is 0; when several lack it, their list position stands in."""
    cands = _dicts(candidates)
    missing = sum(1 for c in cands if as_int(c.get("index")) is None)
    out = []
    for pos, c in enumerate(cands):
        index = as_int(c.get("index"))
        out.append((index if index is not None else (0 if missing == 1 else pos), c))
    return out


# --- shape detection ------------------------------------------------------------------------


def looks_like_request(doc: dict[str, Any]) -> bool:
    contents = _g(doc, "contents")
    if isinstance(contents, list):
        return "messages" not in doc and "input" not in doc
    return _has(doc, "systemInstruction") and "messages" not in doc


def looks_like_response(doc: dict[str, Any]) -> bool:
    if isinstance(_g(doc, "candidates"), list):
        return True
    return _has(doc, "promptFeedback") or (
        _has(doc, "usageMetadata") and (_has(doc, "modelVersion") or _has(doc, "responseId"))
    )


def looks_like_stream(events: list[SSEEvent]) -> bool:
    for ev in events[:8]:
        data = event_json(ev)
        if isinstance(data, dict):
            return looks_like_response(data)
    return False


# --- ids --------------------------------------------------------------------------------------


class _Ids:
    """Tool-call ids: the given one, else one synthesized from the call itself (name,
    arguments, place among its turn's calls), so that a call's id in one response equals its id
    wherever the call is replayed, whatever changed around it (a client such as Google ADK
    rewrites its system instruction between turns).

    Results without an id take the id of the oldest unanswered call of the same name from the
    latest model turn."""

    def __init__(self, deg: Degradations) -> None:
        self.deg = deg
        self.pending: dict[str, deque[str]] = {}

    def model_turn(self) -> None:
        self.pending = {}

    def call(self, value: Any, name: str, args: Any, ordinal: int) -> str:
        if isinstance(value, str) and value:
            id_ = value
        else:
            self.deg.add("synthesized_id")
            id_ = synthesized_call_id(NAME, name, args, ordinal)
        self.pending.setdefault(name, deque()).append(id_)
        return id_

    def result(self, value: Any, name: str, response: Any, ordinal: int) -> str:
        queue = self.pending.get(name)
        if isinstance(value, str) and value:
            if queue and value in queue:
                queue.remove(value)
            return value
        if queue:
            return queue.popleft()
        self.deg.add("orphan_tool_response")
        return synthesized_call_id(NAME, name, response, "result", ordinal)


# --- parts and turns ------------------------------------------------------------------------


def _role(role: Any) -> str:
    if role == "model":
        return "assistant"
    if role == "function":
        return "tool"
    return role if isinstance(role, str) and role else "user"


def _parts_of(content: Any, deg: Degradations) -> list[Any]:
    parts = _g(content, "parts")
    if parts is None:
        return []
    if isinstance(parts, list):
        return parts
    deg.add("malformed_messages")
    return []


def content_parts(part: Any, deg: Degradations) -> list[Part]:
    """One Gemini ``Part`` that is not a function call or response (text, thought, inline or
    file data, code execution, a built-in tool), camelCase or snake_case, as canonical parts:
    an audio part's ``audioTranscription`` is a text part before its blob. Counts what it
    cannot carry (a ``thoughtSignature`` or a thought image as ``opaque_reasoning``,
    ``speechMetadata`` or an unknown payload as ``unsupported_content``)."""
    if not isinstance(part, dict):
        if isinstance(part, str):  # the SDK accepts bare strings as text parts
            return text_parts(part)
        deg.add("malformed_messages")
        return []
    if _g(part, "thoughtSignature"):
        deg.add("opaque_reasoning")
    speech = _g(part, "speechMetadata")
    if speech and (
        not isinstance(speech, dict) or any(v not in (None, "") for v in speech.values())
    ):
        # The speaker and style a TTS model was told to voice this text with: a text part has
        # no field for it, and writing it as text would put words in the prompt it never had.
        deg.add("unsupported_content")
    if _g(part, "thought") is True and (
        isinstance(_g(part, "inlineData"), dict) or isinstance(_g(part, "fileData"), dict)
    ):
        # A draft the model made while thinking (Gemini 3 image models' interim images):
        # reasoning that is not text, so no part, lest a trainer take it for the answer.
        deg.add("opaque_reasoning")
        return []
    # The words of a spoken answer come first, as Chat's `message.audio.transcript` does.
    transcription = _g(part, "audioTranscription")
    if transcription is not None and not isinstance(transcription, dict):
        deg.add("malformed_messages")
    out = text_parts(_g(transcription, "text"))
    payload = _payload(part, deg)
    return [*out, payload] if payload is not None else out


def _payload(part: dict[str, Any], deg: Degradations) -> Part | None:
    """The one payload of a part (its metadata read by ``content_parts``)."""
    text = part.get("text")
    if isinstance(text, str):
        if not text:
            return None
        return ReasoningPart(text) if _g(part, "thought") is True else TextPart(text)
    inline = _g(part, "inlineData")
    if isinstance(inline, dict):
        return _inline(inline, deg)
    file = _g(part, "fileData")
    if isinstance(file, dict) and isinstance(_g(file, "fileUri"), str):
        return url_part(_g(file, "fileUri"), as_str(_g(file, "mimeType")), deg)
    code = _g(part, "executableCode")
    if isinstance(code, dict):
        # Code the model wrote and Google ran (the code execution tool): a server tool call.
        call = {"type": "executable_code", **_camel_keys(code)}
        return ServerToolCallPart(
            id=as_str(code.get("id")), name="code_execution", server_tool_call=call
        )
    result = _g(part, "codeExecutionResult")
    if isinstance(result, dict):
        response = {"type": "code_execution_result", **_camel_keys(result)}
        return ServerToolCallResponsePart(
            id=as_str(result.get("id")), server_tool_call_response=response
        )
    tool = _g(part, "toolCall")
    if isinstance(tool, dict):
        # A built-in tool the model called and the API runs (Google Search, URL context, …),
        # named by its `toolType`; the client echoes it back.
        call = {"type": "tool_call", **_camel_keys(tool)}
        kind = _g(tool, "toolType")
        name = kind.lower() if isinstance(kind, str) else "tool_call"
        return ServerToolCallPart(id=as_str(tool.get("id")), name=name, server_tool_call=call)
    done = _g(part, "toolResponse")
    if isinstance(done, dict):
        response = {"type": "tool_response", **_camel_keys(done)}
        return ServerToolCallResponsePart(
            id=as_str(done.get("id")), server_tool_call_response=response
        )
    # Any newer payload (an SDK dump spells every unset field out as null: those hold nothing).
    if any(k != "text" and not _is_meta(k) and v is not None for k, v in part.items()):
        deg.add("unsupported_content")
    return None


def _inline(inline: dict[str, Any], deg: Degradations) -> Part | None:
    data = inline.get("data")
    if isinstance(data, str) and ("-" in data or "_" in data):
        data = "".join(data.translate(_URLSAFE).split())
        data += "=" * (-len(data) % 4)
    if not isinstance(data, str | bytes):
        deg.add("malformed_media")
        return None
    return blob_part(data, as_str(_g(inline, "mimeType")), deg)


def _camel_keys(value: Any, depth: int = 0) -> Any:
    """A value Google describes (code, its result, grounding) with its keys in camelCase, the
    REST spelling, so the SDK's snake_case dumps give the same fact."""
    if depth > 32:
        return value
    if isinstance(value, dict):
        return {
            (_camel(k) if isinstance(k, str) else k): _camel_keys(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_camel_keys(v, depth + 1) for v in value]
    return value


def _is_meta(key: str) -> bool:
    return key in _PART_META or any(_snake(m) == key for m in _PART_META)


def _turn(role: str, parts: list[Any], deg: Degradations, ids: _Ids) -> list[Message]:
    """One turn: function responses become ``tool`` messages, other parts stay in the turn's
    role; runs are kept in source order."""
    out: list[Message] = []
    current: list[Part] = []
    pending = False
    calls = results = 0
    for part in parts:
        response = _g(part, "functionResponse")
        if isinstance(response, dict):
            if pending:
                out.append(Message(role, current))
                current, pending = [], False
            name = response.get("name")
            name = name if isinstance(name, str) else ""
            id_ = ids.result(response.get("id"), name, response.get("response"), results)
            results += 1
            if _g(part, "thoughtSignature"):
                deg.add("opaque_reasoning")
            result = response.get("response")
            tool: list[Part] = [ToolCallResponsePart(id_, {} if result is None else result)]
            # Media the function returned (multimodal function responses) follow its result.
            for media in _parts_of(response, deg):
                tool += content_parts(media, deg)
            out.append(Message("tool", tool))
            continue
        pending = True
        call = _g(part, "functionCall")
        if isinstance(call, dict):
            if _g(part, "thoughtSignature"):
                deg.add("opaque_reasoning")
            name = call.get("name")
            name = name if isinstance(name, str) else ""
            id_ = ids.call(call.get("id"), name, call.get("args"), calls)
            calls += 1
            current.append(tool_call(id_, name, parse_arguments(call.get("args"), deg)))
            continue
        current += content_parts(part, deg)
    if pending or not out:
        out.append(Message(role, current))
    return out


def _system_messages(system: Any, deg: Degradations) -> list[Message]:
    """``systemInstruction`` (a Content, its parts, or a string) as one leading system message;
    an empty one gives none."""
    if system is None or system == "":
        return []
    if isinstance(system, str):
        return [Message("system", [TextPart(system)])]
    parts = system if isinstance(system, list) else _parts_of(system, deg)
    out: list[Part] = []
    for p in parts:
        for part in content_parts(p, deg):
            out.append(TextPart(part.content) if isinstance(part, ReasoningPart) else part)
    return [Message("system", out)] if parts else []


def _contents(req: dict[str, Any]) -> list[Any]:
    contents = _g(req, "contents")
    if isinstance(contents, list):
        return contents
    if contents is None:
        return []
    return [contents]  # one Content object, or a bare string the SDK would wrap


def _input_messages(
    req: dict[str, Any], deg: Degradations, ids: _Ids, history: Any = None
) -> list[Message]:
    """The system instruction and the contents; ``history`` (the SDK's automatic function
    calling history, which begins with the contents the call was given) in their place when
    there is one: the function calls the SDK made and their results are what the model read."""
    out = _system_messages(_config(req, "systemInstruction"), deg)
    if isinstance(_config(req, "cachedContent"), str) and _config(req, "cachedContent"):
        # Context the model read from a cache made beforehand: only its name is recorded.
        deg.add("content_reference")
    contents = history if isinstance(history, list) and history else _contents(req)
    for content in contents:
        if isinstance(content, str):
            out.append(Message("user", [TextPart(content)] if content else []))
            continue
        if not isinstance(content, dict):
            deg.add("malformed_messages")
            continue
        role = _role(content.get("role"))
        if role == "assistant":
            ids.model_turn()
        out.extend(_turn(role, _parts_of(content, deg), deg, ids))
    return out


# --- tools and parameters ---------------------------------------------------------------------


def json_schema(schema: Any, depth: int = 0) -> Any:
    """A Gemini ``Schema`` (OpenAPI subset, enum types as integers or upper-case names) as JSON
    Schema: lower-case types, ``nullable`` as a ``"null"`` type, camelCase keywords,
    ``propertyOrdering`` dropped. Unknown keywords are kept."""
    if not isinstance(schema, dict) or depth > 64:
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        k = _camel(key) if isinstance(key, str) else key
        if k == "type":
            t = _schema_type(value)
            if t is not None:
                out["type"] = t
        elif k in ("nullable", "propertyOrdering"):
            continue
        elif k == "properties" and isinstance(value, dict):
            out[k] = {name: json_schema(v, depth + 1) for name, v in value.items()}
        elif k == "items":
            out[k] = json_schema(value, depth + 1)
        elif k == "anyOf" and isinstance(value, list):
            out[k] = [json_schema(v, depth + 1) for v in value]
        elif k in _SCHEMA_INTS:
            n = as_int(value)
            out[k] = value if n is None else n
        else:
            out[k] = value
    if _g(schema, "nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


@cache
def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _schema_type(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return _SCHEMA_TYPES[value] if 0 <= value < len(_SCHEMA_TYPES) else value
    if isinstance(value, str):
        t = value.lower()
        return None if t == "type_unspecified" else t
    return value


def _tools(tools: Any, deg: Degradations) -> list[ToolDefinition]:
    out: list[ToolDefinition] = []
    if tools is None:
        return out
    for tool in tools if isinstance(tools, list) else [tools]:
        if not isinstance(tool, dict):
            deg.add("unsupported_tool")
            continue
        for key, value in tool.items():
            if _camel(key) != "functionDeclarations":
                # Google Search, code execution, retrieval, URL context, …: built-ins, named as
                # their calls are (google_search, code_execution, url_context).
                if value is not None:
                    out += filter(None, [builtin_tool({_camel(key): value}, _snake(_camel(key)))])
                continue
            for decl in value if isinstance(value, list) else [value]:
                d = _function_declaration(decl)
                if d is None:
                    deg.add("unsupported_tool")
                else:
                    out.append(d)
    return out


def _function_declaration(decl: Any) -> ToolDefinition | None:
    name = _g(decl, "name")
    if not isinstance(name, str):
        return None
    params = _g(decl, "parametersJsonSchema")
    if not isinstance(params, dict):
        params = json_schema(_g(decl, "parameters"))
    desc = _g(decl, "description")
    return ToolDefinition(
        name=name,
        description=desc if isinstance(desc, str) else None,
        parameters=params if isinstance(params, dict) else {},
    )


def _config(req: dict[str, Any], key: str) -> Any:
    """A request field, at the top level (wire form) or in the SDK's ``config`` object."""
    value = _g(req, key)
    return _g(_g(req, "config"), key) if value is None else value


def output_schema(req: dict[str, Any]) -> bool:
    """Whether ``responseSchema`` or ``responseJsonSchema`` (in ``generationConfig``, or the SDK's
    ``config``; either spelling) constrains the answer. ``responseMimeType: application/json``
    alone is no count: JSON mode has the prompt ask for JSON itself."""
    for config in (_g(req, "generationConfig"), _g(req, "config")):
        for key in ("responseSchema", "responseJsonSchema"):
            # SDK dumps spell every unset field out as null.
            if _g(config, key) is not None:
                return True
    return False


_PARAMS = (
    ("temperature", "temperature"),
    ("topP", "top_p"),
    ("topK", "top_k"),
    ("maxOutputTokens", "max_tokens"),
    ("stopSequences", "stop"),
    ("seed", "seed"),
    ("candidateCount", "n"),
    ("presencePenalty", "presence_penalty"),
    ("frequencyPenalty", "frequency_penalty"),
)


def _request_params(req: dict[str, Any]) -> dict[str, Any]:
    sources = [_g(req, "generationConfig"), _g(req, "config")]
    out: dict[str, Any] = {}
    for src, dst in _PARAMS:
        for s in sources:
            if _g(s, src) is not None:
                out[dst] = _g(s, src)
                break
    for s in sources:
        thinking = _g(s, "thinkingConfig")
        if isinstance(thinking, dict):
            budget = as_int(_g(thinking, "thinkingBudget"))
            if budget is not None:
                out["reasoning_budget_tokens"] = budget
            level = _g(thinking, "thinkingLevel")
            if isinstance(level, str) and level:
                out["reasoning_effort"] = level.lower()
            break
    calling = _g(_config(req, "toolConfig"), "functionCallingConfig")
    if calling is not None:
        out["tool_choice"] = calling
    return dict(sorted(out.items()))


# --- provider, model, finish reasons ------------------------------------------------------


_PROVIDER_ALIASES = {
    "vertex": "gcp.vertex_ai",
    "vertex_ai": "gcp.vertex_ai",
    "vertexai": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
}


def _provider(meta: dict[str, Any], resp: dict[str, Any] | None) -> str:
    given = meta.get("provider")
    if isinstance(given, str) and given:
        return _PROVIDER_ALIASES.get(given.lower(), given)
    url = meta.get("url")
    if isinstance(url, str):
        if "aiplatform.googleapis.com" in url:
            return "gcp.vertex_ai"
        if "generativelanguage.googleapis.com" in url:
            return "gcp.gemini"
    # `trafficType` (on-demand vs provisioned throughput) exists only in Vertex responses.
    if _has(_g(resp, "usageMetadata"), "trafficType"):
        return "gcp.vertex_ai"
    return "gcp.gemini"


def _model_name(value: Any) -> str | None:
    """``models/gemini-2.5-pro`` or a Vertex resource path to the bare model name."""
    if not isinstance(value, str) or not value:
        return None
    return value.rsplit("models/", 1)[-1] or None


def _model_from_url(url: Any) -> str | None:
    if not isinstance(url, str):
        return None
    m = re.search(r"models/([^/:?#]+)", url)
    return m.group(1) if m else None


def _finish(value: Any, explicit_gemini: bool) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        table = _GEMINI_FINISH if explicit_gemini else _VERTEX_FINISH
        value = table[value] if 0 <= value < len(table) else str(value)
    if isinstance(value, str) and value.strip().lower() in _FINISH_EXTRA:
        return _FINISH_EXTRA[value.strip().lower()]
    return finish_reason(value)


# --- streams ----------------------------------------------------------------------------------


def _mergeable(prev: dict[str, Any], part: dict[str, Any]) -> bool:
    """Adjacent text fragments of one kind join; a second signature starts a new part."""
    if not isinstance(prev.get("text"), str) or not isinstance(part.get("text"), str):
        return False
    if set(prev) - {"text", "thought", "thoughtSignature"} or set(part) - {
        "text",
        "thought",
        "thoughtSignature",
    }:
        return False
    if bool(prev.get("thought")) != bool(part.get("thought")):
        return False
    return not (prev.get("thoughtSignature") and part.get("thoughtSignature"))


@cache
def _path_step() -> re.Pattern[str]:
    """A step of a JSON path (RFC 9535) as Vertex names a streamed argument: ``$``, then member
    names (``.name``, ``['name']``, ``["name"]``) and array indexes (``[0]``). Compiled on first
    use: its ranges up to U+10FFFF take about 8 ms to compile, which every conversion would pay
    at import (genai imports this module) for the few streams of partial arguments."""
    return re.compile(
        r"\.([A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*)"  # .name (any non-ASCII letter too)
        r"|\[(\d+)\]"  # [0]
        r"|\['((?:[^'\\]|\\.)*)'\]"  # ['name']
        r"|\[\"((?:[^\"\\]|\\.)*)\"\]",  # ["name"]
        re.ASCII,
    )


_ARG_VALUES = (("stringValue", str), ("numberValue", int | float), ("boolValue", bool))


def _json_path(text: Any) -> list[str | int] | None:
    if not isinstance(text, str) or not text.startswith("$"):
        return None
    steps: list[str | int] = []
    at = 1
    while at < len(text):
        m = _path_step().match(text, at)
        if m is None:
            return None
        name, index, single, double = m.groups()
        if index is not None:
            steps.append(int(index))
        elif name is not None:
            steps.append(name)
        else:  # a quoted name, its escapes undone
            steps.append(re.sub(r"\\(.)", r"\1", single if single is not None else double))
        at = m.end()
    return steps or None


def _place_arg(args: dict[str, Any], piece: Any) -> bool:
    """One ``partialArgs`` entry into a call's arguments; False when its value cannot be
    placed (a path that is not one, or that crosses a value of another kind)."""
    if not isinstance(piece, dict):
        return False
    value: Any = None
    for key, kind in _ARG_VALUES:
        if _has(piece, key):
            value = _g(piece, key)
            if not isinstance(value, kind):
                return False
            break
    else:
        if not _has(piece, "nullValue"):
            return True  # nothing sent for the path yet
    steps = _json_path(_g(piece, "jsonPath"))
    if steps is None:
        return False
    node: Any = args
    for k, step in enumerate(steps):
        at = isinstance(step, int)
        # A name needs an object, an index an array; arrays stream in order, so an index is
        # one sent already or the next.
        if not isinstance(node, list if at else dict) or (at and step > len(node)):
            return False
        has = step < len(node) if at else step in node
        old = node[step] if has else None
        rest = steps[k + 1 :]
        if rest and old is None:
            # What the path names from here is new: made whole, or not at all.
            if any(isinstance(s, int) and s for s in rest):
                return False
            value = _nest(rest, value)
        elif not rest and isinstance(old, str) and isinstance(value, str):
            value = old + value
        if rest and old is not None:
            node = old
            continue
        if at and not has:
            node.append(value)
        else:
            node[step] = value
        return True
    return False


def _nest(steps: list[str | int], value: Any) -> Any:
    """``value`` at ``steps`` below a new container (every index 0)."""
    for step in reversed(steps):
        value = [value] if isinstance(step, int) else {step: value}
    return value


def _normal_part(part: Any) -> Any:
    """A streamed part with its text-merge keys in camelCase (snake_case dumps merge too)."""
    if not isinstance(part, dict):
        return part
    out = dict(part)
    for key in ("thought_signature",):
        if key in out:
            out["thoughtSignature"] = out.pop(key)
    return out


class _Stream:
    """The response a streamed body describes, rebuilt chunk by chunk."""

    def __init__(self) -> None:
        self.candidates: dict[int, dict[str, Any]] = {}
        self.top: dict[str, Any] = {}
        self.error: Any = None
        self.chunks = 0
        self.unplaced = 0  # streamed argument values whose JSON path could not be followed
        self.deg = Degradations()  # what the chunks' contents could not carry, as a body's

    def feed(self, chunk: dict[str, Any]) -> None:
        self.chunks += 1
        if chunk.get("error") is not None and _g(chunk, "candidates") is None:
            self.error = chunk["error"]
            return
        for key in (
            "usageMetadata",
            "modelVersion",
            "responseId",
            "promptFeedback",
            "createTime",
            "automaticFunctionCallingHistory",
        ):
            value = _g(chunk, key)
            if value is not None:
                self.top[key] = value
        for index, cand in _indexed(_g(chunk, "candidates")):
            acc = self.candidates.setdefault(index, {"index": index, "parts": [], "role": None})
            content = cand.get("content")
            if isinstance(content, dict):
                if isinstance(content.get("role"), str):
                    acc["role"] = content["role"]
                for part in _parts_of(content, self.deg):
                    if not self._call_fragment(acc, part):
                        self._add(acc["parts"], _normal_part(part))
            reason = _g(cand, "finishReason")
            if reason is not None:
                acc["finishReason"] = reason
            for key in _BESIDE_CONTENT:
                value = _g(cand, key)
                if isinstance(value, dict):
                    self._merge(acc.setdefault(key, {}), _camel_keys(value), key)

    def _call_fragment(self, acc: dict[str, Any], part: Any) -> bool:
        """Vertex's streamed function-call arguments (``streamFunctionCallArguments``): a call
        comes as a fragment with its name, fragments of ``partialArgs`` (each a JSON path and a
        value; a string continues the string at its path), each saying ``willContinue`` but the
        last, and an empty call that ends it. They fold into the call whole. True when ``part``
        was such a fragment."""
        call = _g(part, "functionCall")
        if not isinstance(call, dict):
            return False
        pieces = _g(call, "partialArgs")
        more = _g(call, "willContinue") is True
        held = acc.get("open")  # the part of the call being streamed, if one is
        if not (more or isinstance(pieces, list) or (held is not None and not call)):
            return False  # a call sent whole
        name, id_ = call.get("name"), call.get("id")
        whole = held["functionCall"] if held is not None else None
        if whole is None or (name and name != whole["name"]) or (id_ and id_ != whole.get("id")):
            whole = {"name": name if isinstance(name, str) else "", "args": {}}
            if isinstance(id_, str):
                whole["id"] = id_
            held = {"functionCall": whole}
            acc["parts"].append(held)
        signature = _g(part, "thoughtSignature")
        if signature and not held.get("thoughtSignature"):
            held["thoughtSignature"] = signature
        if isinstance(call.get("args"), dict):
            whole["args"].update(call["args"])
        for piece in pieces if isinstance(pieces, list) else []:
            if not _place_arg(whole["args"], piece):
                self.unplaced += 1
        acc["open"] = held if more else None
        return True

    @staticmethod
    def _merge(acc: dict[str, Any], piece: dict[str, Any], key: str) -> None:
        """Each chunk cites the sources of its own text: citation lists add up. Grounding and
        URL context come whole, with the last chunks: a later value replaces an earlier one."""
        for k, v in piece.items():
            if key == "citationMetadata" and isinstance(v, list) and isinstance(acc.get(k), list):
                acc[k] = [*acc[k], *v]
            else:
                acc[k] = v

    @staticmethod
    def _add(parts: list[Any], part: Any) -> None:
        if parts and isinstance(part, dict) and isinstance(parts[-1], dict):
            prev = parts[-1]
            if _mergeable(prev, part):
                merged = {**prev, "text": prev["text"] + part["text"]}
                if part.get("thoughtSignature"):
                    merged["thoughtSignature"] = part["thoughtSignature"]
                parts[-1] = merged
                return
        parts.append(part)

    def complete(self) -> bool:
        if not self.candidates:
            # A prompt blocked before any candidate is a complete answer.
            return _g(self.top.get("promptFeedback"), "blockReason") is not None
        return all("finishReason" in c for c in self.candidates.values())

    def assemble(self) -> dict[str, Any]:
        cands = []
        for index in sorted(self.candidates):
            c = self.candidates[index]
            cand: dict[str, Any] = {
                "index": index,
                "content": {"role": c["role"] or "model", "parts": _join_audio(c["parts"])},
            }
            for key in ("finishReason", *_BESIDE_CONTENT):
                if key in c:
                    cand[key] = c[key]
            cands.append(cand)
        return {"candidates": cands, **self.top}


# Raw audio, samples and nothing else (no header, no frames): two slices of one sound,
# concatenated, are the sound. Gemini streams speech as `audio/L16;codec=pcm;rate=24000`.
# Containers (WAV, MP3, Ogg, …) are not joined: each piece has a header of its own.
_RAW_AUDIO = frozenset(
    {"audio/l8", "audio/l16", "audio/l20", "audio/l24", "audio/pcm", "audio/pcma", "audio/pcmu"}
)
# What an audio piece may hold besides its bytes and its words.
_AUDIO_PIECE_KEYS = frozenset({"inlineData", "audioTranscription", "thoughtSignature", "thought"})


def _audio_piece(part: Any) -> tuple[str | None, bytes | None] | None:
    """``(MIME type, bytes)`` of a streamed slice of raw audio, ``(None, None)`` for a part
    holding only the words of one (``audioTranscription``); None for any other part (a thought,
    a container format, base64 that does not decode: those are read on their own)."""
    if not isinstance(part, dict) or _g(part, "thought") is True:
        return None
    if any(_camel(k) not in _AUDIO_PIECE_KEYS for k in part if isinstance(k, str)):
        return None
    inline = _g(part, "inlineData")
    if inline is None:
        return (None, None) if isinstance(_g(part, "audioTranscription"), dict) else None
    mime = _g(inline, "mimeType")
    if not isinstance(mime, str):
        return None
    mime = "".join(mime.split()).lower()
    if mime.partition(";")[0] not in _RAW_AUDIO:
        return None
    data = _g(inline, "data")
    if isinstance(data, bytes):
        return mime, data
    if not isinstance(data, str):
        return None
    text = "".join(data.translate(_URLSAFE).split())
    try:
        return mime, base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _join_audio(parts: list[Any]) -> list[Any]:
    """A stream sends spoken answers a slice a chunk, the whole response in one part: adjacent
    slices of one raw-audio MIME type (and the pieces of their transcript) join into one part,
    bytes concatenated and transcript text joined, so a stream gives its whole response's
    fact. As for text, two thought signatures keep the slices apart."""
    out: list[Any] = []
    run: list[dict[str, Any]] = []
    mime: str | None = None
    chunks: list[bytes] = []
    signed = False

    def close() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            out.append(_joined(run, chunks))

    for part in parts:
        piece = _audio_piece(part)
        if piece is None:
            close()
            run, mime, chunks, signed = [], None, [], False
            out.append(part)
            continue
        kind, data = piece
        signature = bool(_g(part, "thoughtSignature"))
        if run and ((kind and mime and kind != mime) or (signed and signature)):
            close()
            run, mime, chunks, signed = [], None, [], False
        run.append(part)
        mime, signed = mime or kind, signed or signature
        if data is not None:
            chunks.append(data)
    close()
    return out


def _joined(run: list[dict[str, Any]], chunks: list[bytes]) -> dict[str, Any]:
    """One part for a run of audio slices: the first MIME type as written, the bytes one after
    the other, the transcript's text joined (its other fields as the last piece gave them)."""
    out: dict[str, Any] = {}
    inline = next((_g(p, "inlineData") for p in run if _has(p, "inlineData")), None)
    if isinstance(inline, dict):
        out["inlineData"] = {"mimeType": _g(inline, "mimeType"), "data": b"".join(chunks)}
    words = [_g(p, "audioTranscription") for p in run]
    words = [w for w in words if isinstance(w, dict)]
    if words:
        said = [_g(w, "text") for w in words]
        merged: dict[str, Any] = {}
        for w in words:
            merged.update(_camel_keys(w))
        merged["text"] = "".join(t for t in said if isinstance(t, str))
        out["audioTranscription"] = merged
    signature = next((_g(p, "thoughtSignature") for p in run if _g(p, "thoughtSignature")), None)
    if signature:
        out["thoughtSignature"] = signature
    return out


def _read_stream(events: list[Any], deg: Degradations) -> _Stream:
    stream = _Stream()
    for i, ev in enumerate(events):
        data = event_json(ev)
        if isinstance(data, dict):
            stream.feed(data)
        elif isinstance(data, list):  # a JSON-array stream (no `alt=sse`) arrives as lists
            for d in data:
                if isinstance(d, dict):
                    stream.feed(d)
        elif lost(events, i):
            deg.add("malformed_messages")
    if not stream.complete():
        deg.add("truncated_stream")
    deg.add("malformed_arguments", stream.unplaced)
    deg.update(stream.deg)
    return stream


# --- the fact ---------------------------------------------------------------------------------


def _usage(usage: Any) -> tuple[int | None, int | None]:
    if not isinstance(usage, dict):
        return None, None
    # Thinking tokens are billed as output but reported apart from the candidates' tokens.
    out = [as_int(_g(usage, k)) for k in ("candidatesTokenCount", "thoughtsTokenCount")]
    known = [n for n in out if n is not None]
    return as_int(_g(usage, "promptTokenCount")), (sum(known) if known else None)


def _output_messages(
    resp: dict[str, Any], deg: Degradations, ids: _Ids, explicit_gemini: bool, error: bool
) -> list[Message]:
    out: list[Message] = []
    for _, cand in sorted(_indexed(_g(resp, "candidates")), key=lambda ic: ic[0]):
        ids.model_turn()
        content = cand.get("content")
        msgs = _turn("assistant", _parts_of(content, deg), deg, ids)
        searched = [*_grounding(_g(cand, "groundingMetadata")), *_url_context(cand)]
        parts = [*searched, *(p for m in msgs for p in m.parts)]
        deg.add("text_citation", _citations(_g(cand, "citationMetadata")))
        reason = _finish(_g(cand, "finishReason"), explicit_gemini)
        if reason is None and error:
            reason = "error"
        out.append(Message("assistant", parts, reason))
    return out


# What a candidate carries beside its content that a stream sends in pieces: merged key by key.
_BESIDE_CONTENT = ("groundingMetadata", "urlContextMetadata", "citationMetadata")
# What a grounded answer searched, by the tool that searched (the first key present).
_GROUNDING_QUERIES = (
    ("webSearchQueries", "google_search"),
    ("retrievalQueries", "retrieval"),
    ("imageSearchQueries", "google_search"),
)


def _grounding(metadata: Any) -> list[Part]:
    """A candidate's ``groundingMetadata`` as the search Google ran before the answer: a
    ``server_tool_call`` (the tool, its queries) and a ``server_tool_call_response`` holding the
    whole metadata (chunks, supports, search entry point) in camelCase. They lead the message:
    the search came before the words that cite it."""
    if not isinstance(metadata, dict) or not metadata:
        return []
    grounding = _camel_keys(metadata)
    call: dict[str, Any] = {"type": "grounding"}
    name = "grounding"
    for key, tool in _GROUNDING_QUERIES:
        if grounding.get(key) is not None:
            name = tool
            call = {"type": tool, key: grounding[key]}
            break
    response = {"type": "grounding_metadata", **grounding}
    return [ServerToolCallPart(None, name, call), ServerToolCallResponsePart(None, response)]


def _url_context(candidate: dict[str, Any]) -> list[Part]:
    """The pages the URL context tool fetched (``urlContextMetadata``): a ``url_context`` call
    naming them and a response holding the metadata (each URL's retrieval status)."""
    metadata = _g(candidate, "urlContextMetadata")
    if not isinstance(metadata, dict) or not metadata:
        return []
    context = _camel_keys(metadata)
    pages = context.get("urlMetadata")
    urls = [_g(m, "retrievedUrl") for m in pages] if isinstance(pages, list) else []
    call = {"type": "url_context", "urls": [u for u in urls if isinstance(u, str)]}
    response = {"type": "url_context_metadata", **context}
    return [
        ServerToolCallPart(None, "url_context", call),
        ServerToolCallResponsePart(None, response),
    ]


def _citations(metadata: Any) -> int:
    """How many sources a candidate's ``citationMetadata`` cites (Vertex ``citations``, the
    Gemini API ``citationSources``): the text is whole, the citations stay on raw."""
    cited = _g(metadata, "citations")
    if cited is None:
        cited = _g(metadata, "citationSources")
    return len(cited) if isinstance(cited, list) else 0


def _explicit_gemini(meta: dict[str, Any], provider: str) -> bool:
    url = meta.get("url")
    return (isinstance(url, str) and "generativelanguage.googleapis.com" in url) or (
        provider == "gcp.gemini" and isinstance(meta.get("provider"), str)
    )


def translate(
    request: dict[str, Any] | None,
    response: dict[str, Any] | list[SSEEvent] | None,
    *,
    meta: dict[str, Any] | None = None,
) -> InferenceCall | Skip:
    """One exchange to a fact. response is a body or the events of a streamed body; either
    side may be missing. meta carries what the transport knew (session_id, model, provider,
    url)."""
    meta = meta if isinstance(meta, dict) else {}
    req = request if isinstance(request, dict) else None
    deg = Degradations()
    resp: dict[str, Any] | None = None
    error = False
    if isinstance(response, list):
        stream = _read_stream(response, deg)
        if stream.error is not None and not stream.candidates:
            return Skip("error_response", error_detail(stream.error), NAME)
        error = stream.error is not None
        if stream.chunks:
            resp = stream.assemble()
        raw_response: Any = raw_stream(response)
    elif isinstance(response, dict):
        if response.get("error") is not None and _g(response, "candidates") is None:
            return Skip("error_response", error_detail(response["error"]), NAME)
        resp = response
        raw_response = response
    else:
        raw_response = None
    if req is None and resp is None:
        return Skip("empty", "neither a request nor a response", NAME)
    if (
        resp is None
        and req is not None
        and not (_has(req, "contents") or _config(req, "systemInstruction") is not None)
    ):
        return Skip("unrecognized_format", "no Gemini contents", NAME)
    if req is None and resp is not None and not looks_like_response(resp):
        return Skip("unrecognized_format", "no Gemini candidates", NAME)

    ids = _Ids(deg)
    # The google-genai SDK's own dump of a response whose function calls it ran itself.
    history = _g(resp, "automaticFunctionCallingHistory")
    if not (isinstance(history, list) and history):
        history = None
    inputs = _input_messages(req or {}, deg, ids, history) if req or history else []
    if req is not None and output_schema(req):
        deg.add("output_schema")
    provider = _provider(meta, resp)
    outputs: list[Message] = []
    if resp is not None:
        outputs = _output_messages(resp, deg, ids, _explicit_gemini(meta, provider), error)
    input_tokens, output_tokens = _usage(_g(resp, "usageMetadata"))
    response_id = as_str(_g(resp, "responseId"))
    model = (
        as_str(_g(resp, "modelVersion"))
        or _model_name(_g(req, "model"))
        or _model_name(meta.get("model"))
        or _model_from_url(meta.get("url"))
    )
    session = meta.get("session_id")
    return finish(
        source=NAME,
        deg=deg,
        identity=(NAME, response_id) if response_id else None,
        raw={"request": request, "response": raw_response},
        assembled=isinstance(response, list),
        session_id=session if isinstance(session, str) and session else None,
        provider=provider,
        model=model,
        input_messages=inputs,
        output_messages=outputs,
        tools=_tools(_config(req, "tools"), deg) if req else [],
        request=_request_params(req) if req else {},
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        started_at=fixed_rfc3339(_g(resp, "createTime")),
        model_call_id=response_id,
        **transport_times(meta),
    )
