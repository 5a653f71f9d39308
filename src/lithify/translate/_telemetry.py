"""Shared by the telemetry conventions: the content an extractor finds, and the span metadata."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import orjson

from lithify.core.times import ns_to_rfc3339
from lithify.core.values import as_int
from lithify.model import (
    MODALITIES,
    InferenceCall,
    Message,
    Part,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
)
from lithify.translate import anthropic, gemini, openai_chat, openai_responses
from lithify.translate._common import (
    Degradations,
    blob_part,
    file_part,
    finish_fields,
    modality_of,
    synthesized_call_id,
    url_part,
)
from lithify.translate.openai_common import (
    audio_mime,
    file_input_part,
    inline_part,
    media_url_part,
)


class Content(msgspec.Struct):
    """What a convention extractor found on one span or event group."""

    source: str
    input_messages: list[Message] = msgspec.field(default_factory=list)
    output_messages: list[Message] = msgspec.field(default_factory=list)
    tools: list[ToolDefinition] = msgspec.field(default_factory=list)
    # Metadata fields the convention reads itself (provider, model, request, tokens,
    # model_call_id), replacing what the shared keys give (``metadata``).
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# media and server-tool parts, as the conventions and the provider content they embed spell them

# Pydantic AI's media parts before its instrumentation format 4 (``_otel_messages``): a URL per
# kind, ``{type: <kind>-url, url}``, and inline bytes, ``{type: binary, media_type, content}``
# (``binary_content`` in its version-1 events). The kind is the modality.
_URL_KINDS = {
    "image-url": "image",
    "audio-url": "audio",
    "video-url": "video",
    "document-url": "document",
}

# Part types that carry media: the OTel parts, the OpenAI and Anthropic content blocks that
# older instrumentations serialize into their message attributes, and Pydantic AI's own.
MEDIA_TYPES = frozenset(
    {
        "blob",
        "file",
        "uri",
        "image_url",
        "input_image",
        "input_audio",
        "input_file",
        "image",
        "document",
        "binary",
        *_URL_KINDS,
    }
)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def stated_modality(value: Any) -> str | None:
    """The source's modality when it is one of the canonical four (case aside), else None."""
    if isinstance(value, str):
        key = value.strip().lower()
        if key in MODALITIES:
            return key
    return None


def modality(value: Any, mime_type: str | None) -> str:
    """The source's modality when it is one of the canonical four, else the MIME type's
    (docs/canonical.md, Parts beyond v1)."""
    return stated_modality(value) or modality_of(mime_type)


def uri_media(uri: str, mime: str | None, deg: Degradations, kind: str | None) -> Part | None:
    """A URI; a data URL (base64, or percent-encoded) holds the bytes: a blob whose MIME type is
    ``mime``, else the URL's. ``kind`` None: the modality follows that MIME type."""
    if uri.startswith("data:"):
        return inline_part(uri, deg, modality=kind, mime=mime)
    return url_part(uri, mime, deg, kind)


def media_part(p: dict[str, Any], kind: str, deg: Degradations) -> Part | None:
    """A part of one of ``MEDIA_TYPES`` as a canonical blob, file or uri part; media whose data
    is missing or does not decode gives no part and counts ``malformed_media``. The OpenAI shapes
    go through the helpers the OpenAI translators use, so a span and the exchange it records give
    the same parts."""
    part: Part | None = None
    if kind == "blob":  # OTel {modality, mime_type, content: base64}
        mime = _str(p.get("mime_type"))
        if (data := _str(p.get("content"))) is not None:
            return blob_part(data, mime, deg, modality(p.get("modality"), mime))
    elif kind == "uri":  # OTel {modality, mime_type, uri}
        mime = _str(p.get("mime_type"))
        if (uri := _str(p.get("uri"))) is not None:
            return uri_media(uri, mime, deg, stated_modality(p.get("modality")))
    elif kind == "file" and isinstance(p.get("file"), dict):  # OpenAI chat {file: {…}}
        return file_input_part(p["file"], deg)  # counts what it cannot read itself
    elif kind == "file":  # OTel {modality, mime_type, file_id}
        mime = _str(p.get("mime_type"))
        if (file_id := _str(p.get("file_id"))) is not None:
            return file_part(file_id, mime, deg, modality(p.get("modality"), mime))
    elif kind == "image_url":  # OpenAI chat {image_url: {url, detail}} (or a bare URL)
        iu = p.get("image_url")
        url = _str(iu.get("url") if isinstance(iu, dict) else iu)
        if url is not None:
            return media_url_part(url, deg, "image")
    elif kind == "input_image":  # Responses {image_url: str} or {file_id}
        if (url := _str(p.get("image_url"))) is not None:
            return media_url_part(url, deg, "image")
        if (file_id := _str(p.get("file_id"))) is not None:
            return file_part(file_id, None, deg, "image")
    elif kind == "input_audio":  # OpenAI chat {input_audio: {data, format}}; Mistral: the data
        ia = p.get("input_audio")
        if isinstance(ia, dict) and (data := _str(ia.get("data"))) is not None:
            return inline_part(data, deg, modality="audio", mime=audio_mime(ia.get("format")))
        if (data := _str(ia)) is not None:
            return inline_part(data, deg, modality="audio")
    elif kind == "input_file":  # Responses {file_data | file_url | file_id}
        return file_input_part(p, deg)
    elif kind == "binary":  # Pydantic AI {media_type, content | binary_content: base64}
        mime = _str(p.get("media_type"))
        if (data := _str(p.get("content")) or _str(p.get("binary_content"))) is not None:
            return blob_part(data, mime, deg, modality_of(mime))
    elif kind in _URL_KINDS:  # Pydantic AI {url}
        if (url := _str(p.get("url"))) is not None:
            return uri_media(url, None, deg, _URL_KINDS[kind])
    else:  # Anthropic image / document {source: {type: base64 | url | file, …}}
        part = _anthropic_source(p.get("source"), "image" if kind == "image" else None, deg)
    if part is None:
        deg.add("malformed_media")
    return part


def _anthropic_source(src: Any, kind: str | None, deg: Degradations) -> Part | None:
    if not isinstance(src, dict):
        return None
    mime = _str(src.get("media_type"))
    st = src.get("type")
    if st == "base64" and (data := _str(src.get("data"))) is not None:
        return blob_part(data, mime, deg, kind or modality_of(mime))
    if st == "url" and (url := _str(src.get("url"))) is not None:
        return uri_media(url, mime, deg, kind)
    if st == "file" and (file_id := _str(src.get("file_id"))) is not None:
        return file_part(file_id, mime, deg, kind)
    return None


def server_tool_part(p: dict[str, Any], kind: str, deg: Degradations) -> Part | None:
    """OTel ``server_tool_call`` ``{id, name, server_tool_call: {type, …}}`` and
    ``server_tool_call_response`` ``{id, server_tool_call_response: {type, …}}``; a part
    without its typed description is no part (``unsupported_content``)."""
    body = p.get(kind)
    id_ = p.get("id")
    id_ = id_ if isinstance(id_, str) and id_ else None
    if isinstance(body, dict) and isinstance(body.get("type"), str):
        if kind == "server_tool_call":
            name = p.get("name")
            if isinstance(name, str):
                return ServerToolCallPart(id_, name, body)
        else:
            return ServerToolCallResponsePart(id_, body)
    deg.add("unsupported_content")
    return None


def _first(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = attrs.get(k)
        if v is not None and v != "":
            return v
    return None


_REQUEST_KEYS = {
    "temperature": ("gen_ai.request.temperature",),
    "top_p": ("gen_ai.request.top_p",),
    "top_k": ("gen_ai.request.top_k",),
    "max_tokens": ("gen_ai.request.max_tokens", "gen_ai.request.max_output_tokens"),
    "stop": ("gen_ai.request.stop_sequences",),
    "seed": ("gen_ai.request.seed", "gen_ai.openai.request.seed"),
    "frequency_penalty": ("gen_ai.request.frequency_penalty",),
    "presence_penalty": ("gen_ai.request.presence_penalty",),
    "n": ("gen_ai.request.choice.count",),
    "reasoning_effort": (
        "gen_ai.request.reasoning.effort",
        "gen_ai.openai.request.reasoning_effort",
    ),
    "tool_choice": ("gen_ai.request.tool_choice",),
}
# Each key's parameter and its rank among that parameter's keys (the first one set wins).
_REQUEST_INDEX = {
    key: (name, rank) for name, keys in _REQUEST_KEYS.items() for rank, key in enumerate(keys)
}
# OpenInference keeps the sampling parameters as one JSON object; these names map straight over.
_INVOCATION_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_tokens": "max_tokens",
    "max_completion_tokens": "max_tokens",
    "max_output_tokens": "max_tokens",
    "stop": "stop",
    "seed": "seed",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "n": "n",
    "tool_choice": "tool_choice",
    "reasoning_effort": "reasoning_effort",
}


def request_params(attrs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    inv = attrs.get("llm.invocation_parameters")
    if isinstance(inv, str):
        try:
            inv = orjson.loads(inv)
        except orjson.JSONDecodeError:
            inv = None
    if isinstance(inv, dict):
        for k, name in _INVOCATION_KEYS.items():
            if inv.get(k) is not None:
                out[name] = inv[k]
        if isinstance(inv.get("reasoning"), dict) and inv["reasoning"].get("effort") is not None:
            out["reasoning_effort"] = inv["reasoning"]["effort"]
    # A span sets few of the keys: find those in one pass in C, not with a lookup per key.
    found = _REQUEST_INDEX.keys() & attrs.keys()
    if found:
        ranks: dict[str, int] = {}
        for key in found:
            v = attrs[key]
            if v is None or v == "":
                continue
            name, rank = _REQUEST_INDEX[key]
            if rank < ranks.get(name, len(_REQUEST_INDEX)):
                ranks[name] = rank
                out[name] = v
    return dict(sorted(out.items()))


_SESSION_KEYS = ("gen_ai.conversation.id", "session.id", "lithify.session_id")


def session_of(attrs: dict[str, Any]) -> str | None:
    v = _first(attrs, _SESSION_KEYS)
    return str(v) if v is not None and not isinstance(v, dict | list) else None


_PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
_MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
_INPUT_TOKEN_KEYS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
_OUTPUT_TOKEN_KEYS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)


def metadata(attrs: dict[str, Any]) -> dict[str, Any]:
    """Model, provider, usage, ids and sampling parameters, from any of the conventions' keys."""
    provider = _first(attrs, _PROVIDER_KEYS)
    model = _first(attrs, _MODEL_KEYS)
    call_id = attrs.get("gen_ai.response.id")
    return {
        # as_str, where _first has already refused None and ""
        "provider": provider if isinstance(provider, str) else None,
        "model": model if isinstance(model, str) else None,
        "request": request_params(attrs),
        "input_tokens": as_int(_first(attrs, _INPUT_TOKEN_KEYS)),
        "output_tokens": as_int(_first(attrs, _OUTPUT_TOKEN_KEYS)),
        "model_call_id": call_id if isinstance(call_id, str) and call_id else None,
    }


# A JSON schema the answer was held to, as instrumentations record it: OpenLLMetry's own
# attribute (its OpenAI, Google GenAI and Vertex AI instrumentations write the schema; some the
# whole response_format, `{"type": "json_object"}` included), and OpenInference's request
# parameters and request body, read as the provider's request is. OpenInference's Google GenAI
# instrumentation records the SDK's config itself as the parameters.
_SCHEMA_ATTRIBUTE = "gen_ai.request.structured_output_schema"
_REQUEST_ATTRIBUTES = ("llm.invocation_parameters", "input.value")
_REQUEST_READERS = (
    openai_chat.output_schema,
    openai_responses.output_schema,
    anthropic.output_schema,
    gemini.output_schema,
    lambda config: gemini.output_schema({"config": config}),
)
# Every reader's constraint sits under one of these keys (vLLM's guided_* and structured_outputs
# among them): a request body without one is not parsed.
_SCHEMA_KEY = re.compile(
    r'"(?:schema|json_schema|response_schema|responseSchema|response_json_schema|responseJsonSchema'
    r'|guided_(?:json|regex|choice|grammar)|structural_tag|structured_outputs)"'
)


def _decoded(value: Any) -> Any:
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _names_schema(value: Any) -> bool:
    value = _decoded(value) if isinstance(value, str) else value
    if isinstance(value, dict) and value.get("type") in ("json_object", "text"):
        # A response_format recorded whole: JSON mode alone is no schema.
        return openai_chat.output_schema({"response_format": value})
    return bool(value)


def output_schema(attrs: dict[str, Any]) -> bool:
    """Whether the span records a JSON schema the request held the answer to (``output_schema``)."""
    schema = attrs.get(_SCHEMA_ATTRIBUTE)
    if schema is not None and _names_schema(schema):
        return True
    for key in _REQUEST_ATTRIBUTES:
        request = attrs.get(key)
        if request is None:  # every span of the other conventions: nothing to read
            continue
        if isinstance(request, str):
            # The cheap test first: input.value is the whole request, media and all.
            cheap = 'chema"' in request or "guided_" in request or "structur" in request
            found = cheap and _SCHEMA_KEY.search(request) is not None
            request = _decoded(request) if found else None
        if isinstance(request, dict) and any(read(request) for read in _REQUEST_READERS):
            return True
    return False


def timing(start: int | None, end: int | None) -> dict[str, Any]:
    duration = None
    # Negative times are bad numbers (null, as their timestamps are), not a start to count from.
    if start and end and 0 < start <= end:
        try:  # int / int is a finite float, or raises
            duration = (end - start) / 1_000_000
        except OverflowError:  # OTLP/JSON carries times as strings: any length of digits
            duration = None
    return {
        "duration_ms": duration,
        "started_at": ns_to_rfc3339(start),
        "observed_at": ns_to_rfc3339(end),
    }


# Providers whose telemetry writers (the google-genai OTel instrumentation, Google ADK's own
# spans, `gcp.vertex.agent` being ADK's name for itself) make up tool-call ids: Gemini sends
# calls without ids, and they write `<name>_<index>`, the index being the part's place in its
# Content; ADK gives calls ids of its own, `adk-<uuid4>`, which it strips before each request.
_GOOGLE_PROVIDERS = frozenset(
    {"gemini", "gcp.gemini", "gcp.vertex_ai", "gcp.gen_ai", "vertex_ai", "gcp.vertex.agent"}
)
# The instrumentation scopes of those writers, for the records that name no provider: the
# google-genai instrumentation's 0.x experimental mode (util-genai 0.3b0) writes neither
# gen_ai.system nor gen_ai.provider.name, on the span or on its operation.details record.
_GOOGLE_SCOPES = frozenset({"opentelemetry.instrumentation.google_genai"})
_MADE_UP = re.compile(r"^(.+)_(\d{1,6})$")
_ADK_ID = re.compile(r"^adk-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def google_call_ids(
    inputs: list[Message], outputs: list[Message], deg: Degradations
) -> tuple[list[Message], list[Message]]:
    """Messages with the ids Google's telemetry writers make up for id-less Gemini calls replaced
    by the id the Gemini translator gives such a call (``synthesized_call_id("gemini", name,
    arguments, ordinal among the turn's calls)``, counted ``synthesized_id``), so the span and the
    exchange it records give the same parts; each result written ``<name>_<index>`` (its own
    index, not its call's: the made-up ids pair a turn's results with the wrong calls) answers the
    oldest unanswered such call of its name in the latest assistant turn
    (docs/sources/otel-genai.md, Google GenAI). A call id is taken as made up only when it is
    ``<its name>_<n>`` with ``n`` at least the part's own place in the message (the writers drop
    parts they cannot read, never add any), or ADK's ``adk-<uuid4>`` (a result with such an id
    takes its call's new id). In an output message, which may be the pieces of a streamed answer
    joined (each piece's parts counted from 0 by the writer), ``n`` need only be at least the
    number of calls before it."""
    pending: dict[str, list[str]] = {}
    renamed: dict[str, str] = {}
    changed = False

    def one(message: Message, output: bool) -> Message:
        nonlocal pending, changed
        parts = list(message.parts)
        calls = 0
        turn: dict[str, list[str]] = {}
        for j, part in enumerate(parts):
            if isinstance(part, ToolCallPart):
                m = _MADE_UP.match(part.id)
                made_up = (
                    m and m.group(1) == part.name and int(m.group(2)) >= (calls if output else j)
                )
                if made_up or _ADK_ID.match(part.id):
                    new = synthesized_call_id("gemini", part.name, part.arguments, calls)
                    renamed[part.id] = new
                    parts[j] = ToolCallPart(new, part.name, part.arguments)
                    turn.setdefault(part.name, []).append(new)
                    deg.add("synthesized_id")
                calls += 1
            elif isinstance(part, ToolCallResponsePart):
                m = _MADE_UP.match(part.id)
                queue = pending.get(m.group(1)) if m else None
                if _ADK_ID.match(part.id) and part.id in renamed:
                    parts[j] = ToolCallResponsePart(renamed[part.id], part.result)
                elif queue:
                    parts[j] = ToolCallResponsePart(queue.pop(0), part.result)
        if calls:
            pending = turn  # results answer the latest model turn
        if parts == list(message.parts):
            return message
        changed = True
        return Message(message.role, parts, message.finish_reason)

    new_inputs = [one(m, False) for m in inputs]
    new_outputs = [one(m, True) for m in outputs]
    return (new_inputs, new_outputs) if changed else (inputs, outputs)


def build(
    content: Content,
    deg: Degradations,
    attrs: dict[str, Any],
    *,
    identity: tuple[Any, ...] | None,
    raw: Any,
    trace_id: str | None,
    span_id: str | None,
    parent_span_id: str | None,
    session_id: str | None,
    times: dict[str, Any],
    screened: bool = False,
    scope: dict[str, Any] | None = None,
) -> InferenceCall:
    """A fact from a span's or log record's content and metadata; ``scope``: the
    instrumentation scope that wrote it (names a Google writer when no provider does)."""
    if output_schema(attrs):
        deg.add("output_schema")
    fields = dict(content.metadata) if content.metadata else metadata(attrs)
    inputs, outputs = content.input_messages, content.output_messages
    google = fields.get("provider") in _GOOGLE_PROVIDERS or (
        fields.get("provider") is None and (scope or {}).get("name") in _GOOGLE_SCOPES
    )
    if google and (inputs or outputs):
        inputs, outputs = google_call_ids(inputs, outputs, deg)
    fields.update(times)
    fields["session_id"] = session_id
    fields["trace_id"] = trace_id
    fields["span_id"] = span_id
    fields["parent_span_id"] = parent_span_id
    fields["input_messages"] = inputs
    fields["output_messages"] = outputs
    fields["tools"] = content.tools
    return finish_fields(content.source, deg, identity, raw, screened, fields)
