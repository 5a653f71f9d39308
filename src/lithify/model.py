"""The canonical model: one immutable fact per model call, shared by every stage.

The JSON form of these structs is the contract (``docs/canonical.md``): field order is
definition order, parts are tagged by ``type``, and a message always carries
``finish_reason`` (null on input messages).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

SCHEMA_VERSION = 1


# Text and reasoning parts refuse unknown fields, as the schema does (additionalProperties false):
# the GenAI fast path decodes the conventions' own parts of these types straight into them.
class TextPart(
    msgspec.Struct, tag="text", tag_field="type", frozen=True, forbid_unknown_fields=True
):
    content: str


class ReasoningPart(
    msgspec.Struct, tag="reasoning", tag_field="type", frozen=True, forbid_unknown_fields=True
):
    content: str


class ToolCallPart(msgspec.Struct, tag="tool_call", tag_field="type", frozen=True):
    id: str
    name: str
    arguments: dict[str, Any]


class ToolCallResponsePart(msgspec.Struct, tag="tool_call_response", tag_field="type", frozen=True):
    id: str
    result: Any


# Media and server-side tool parts extend seed schema inference-message v1 (v2 of the schema;
# docs/canonical.md, Parts beyond v1). A fact without them encodes exactly as before.
MODALITIES = ("image", "audio", "video", "document")


class BlobPart(
    msgspec.Struct, tag="blob", tag_field="type", frozen=True, forbid_unknown_fields=True
):
    """Bytes sent inline: ``content`` is their canonical base64, ``sha256`` (hex) and ``size``
    describe the decoded bytes, by which the store keeps each distinct blob once."""

    modality: str
    mime_type: str | None
    size: int
    sha256: str
    content: str


class FilePart(
    msgspec.Struct, tag="file", tag_field="type", frozen=True, forbid_unknown_fields=True
):
    """Content uploaded to the provider beforehand, recorded only by its id."""

    modality: str
    mime_type: str | None
    file_id: str


class UriPart(msgspec.Struct, tag="uri", tag_field="type", frozen=True, forbid_unknown_fields=True):
    """Content the model fetched from a URI (never a data URL: that is a ``blob``)."""

    modality: str
    mime_type: str | None
    uri: str


class ServerToolCallPart(
    msgspec.Struct,
    tag="server_tool_call",
    tag_field="type",
    frozen=True,
    forbid_unknown_fields=True,
):
    """A tool the provider ran itself (web search, code execution, MCP…); ``server_tool_call``
    is the call as the provider described it, with a ``type`` key."""

    id: str | None
    name: str
    server_tool_call: dict[str, Any]


class ServerToolCallResponsePart(
    msgspec.Struct,
    tag="server_tool_call_response",
    tag_field="type",
    frozen=True,
    forbid_unknown_fields=True,
):
    id: str | None
    server_tool_call_response: dict[str, Any]


MediaPart = BlobPart | FilePart | UriPart

Part = (
    TextPart
    | ReasoningPart
    | ToolCallPart
    | ToolCallResponsePart
    | BlobPart
    | FilePart
    | UriPart
    | ServerToolCallPart
    | ServerToolCallResponsePart
)


class Message(msgspec.Struct, frozen=True):
    role: str
    parts: list[Part]
    finish_reason: str | None = None


# omit_defaults leaves ``builtin`` out when it is None, so a function tool encodes exactly as
# before it existed; description and parameters have no default so that they always appear.
class ToolDefinition(msgspec.Struct, frozen=True, omit_defaults=True):
    """A tool offered to the model. ``builtin`` holds a provider's built-in tool (web search,
    code execution, computer use, MCP…) as the request defined it; ``name`` is then the name
    its calls carry and ``parameters`` is ``{}`` (the provider owns its schema)."""

    name: str
    description: str | None
    parameters: dict[str, Any]
    builtin: dict[str, Any] | None = None


class Source(msgspec.Struct, frozen=True):
    """Which translator produced a fact (``name``) and its version."""

    name: str
    version: int = 1


class InferenceCall(msgspec.Struct, frozen=True, kw_only=True):
    inference_call_id: str
    session_id: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    source: Source
    provider: str | None = None
    model: str | None = None
    input_messages: list[Message] = msgspec.field(default_factory=list)
    output_messages: list[Message] = msgspec.field(default_factory=list)
    tools: list[ToolDefinition] = msgspec.field(default_factory=list)
    request: dict[str, Any] = msgspec.field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_ms: float | None = None
    started_at: str | None = None
    observed_at: str | None = None
    model_call_id: str | None = None
    degradations: dict[str, int] = msgspec.field(default_factory=dict)
    raw: Any = None


FEEDBACK_TARGETS = ("call", "session", "trace")


class Feedback(msgspec.Struct, frozen=True, kw_only=True):
    """A score or label on a call, a session or a trace (docs/export.md and docs/feedback.md).

    ``feedback_id`` is deterministic from the source identity, so a redelivery is the same fact;
    ``target_id`` is an ``inference_call_id``, a ``session_id`` or a ``trace_id``; ``source``
    names where it came from (``http``, ``otel``, ``file``, …).
    """

    feedback_id: str
    target_kind: Literal["call", "session", "trace"]
    target_id: str
    name: str
    value: bool | int | float | str
    source: str
    observed_at: str | None = None
    raw: Any = None


class Skip(msgspec.Struct, frozen=True):
    """An input unit that gave no fact, with a reason from ``NO_FACT_REASONS``."""

    reason: str
    detail: str = ""
    source: str | None = None


# Closed vocabularies. Adding a reason is a contract change: document it in docs/canonical.md.
DEGRADATION_REASONS: dict[str, str] = {
    "opaque_reasoning": "encrypted, redacted or signed reasoning that is not readable text; kept on raw",
    "malformed_arguments": "tool-call arguments that were not a JSON object; carried as {} and kept on raw",
    "synthesized_id": "a tool call without an id was given a deterministic one",
    "unsupported_content": "a part of a type no source documents; kept on raw",
    "malformed_media": "inline media whose base64 did not decode; kept on raw",
    "unsupported_tool": "a tool definition that could not be read (not an object, or without a name or type); kept on raw",
    "output_schema": "the request constrained the answer to a JSON schema (or a regex, choice or "
    "grammar) given outside the messages (response_format, text.format, responseSchema, "
    "output_format, vLLM's structured_outputs): a row would hold the answer without what shaped "
    "it; the schema stays on raw",
    "malformed_messages": "a message attribute, body or stream event that could not be decoded; kept on raw",
    "invalid_text": "text that was not valid Unicode (invalid UTF-8, a lone surrogate): each bad character replaced by U+FFFD",
    "content_reference": "content uploaded elsewhere or left at a URI: a file or uri part records only the reference",
    "orphan_tool_response": "a tool result whose call id could not be recovered",
    "truncated_stream": "a streamed response that ended before its final event",
    "text_citation": "a citation or annotation on text (URL and document citations); the text is kept whole, the citation on raw",
    "participant_name": "a message's `name` (who spoke, in a multi-party chat): the message is kept, the name stays on raw",
    "content_not_captured": "a model-call span without message content (capture off, or the "
    "content on log events): the fact keeps the span's metadata — model, usage, session, response "
    "id — and no messages; the call is read from a capture with content when one arrives",
    "redacted_authorization": "an Authorization header value was replaced",
    "redacted_bearer_token": "a bearer token inside a string was replaced",
    "redacted_provider_key": "a provider API key (sk-…, sk-ant-…, AIza…) was replaced",
    "redacted_credential_field": "the value of a credential-named key was replaced",
}

NO_FACT_REASONS: dict[str, str] = {
    "not_genai": "a span or record that is not a model call (agent, tool, HTTP, …)",
    "content_not_captured": "a model-call span without an OTLP identity (no trace and span id: "
    "nothing could join it), or log events of a call, without any message content (capture off)",
    "uncorrelated_events": "per-message log events with no span context to group them by",
    "undecodable": "bytes that are not valid JSON or protobuf",
    "unrecognized_format": "a document whose shape matches no known source format",
    "error_response": "a provider error body: the call produced no output",
    "empty": "an empty document",
    "translator_error": "a defect in lithify met this input: please report it with the input",
    "feedback_event": "an evaluation or feedback event (gen_ai.evaluation.result): not a model call",
}

_encoder = msgspec.json.Encoder()
_fact_decoder = msgspec.json.Decoder(InferenceCall)
_message_decoder = msgspec.json.Decoder(Message)


def encode(obj: Any) -> bytes:
    return _encoder.encode(obj)


def decode_fact(data: bytes | str) -> InferenceCall:
    return _fact_decoder.decode(data)


def decode_message(data: bytes | str) -> Message:
    return _message_decoder.decode(data)


def to_builtins(obj: Any) -> Any:
    return msgspec.to_builtins(obj)
