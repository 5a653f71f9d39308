"""Every content type the provider SDKs define has an entry in a table of how lithify handles it.

The lists come from the installed SDKs (`anthropic`, `google-genai`): the discriminated unions of
Anthropic content blocks, deltas, stream events and media sources (and their beta counterparts),
and the fields of Gemini's ``Part``, ``FunctionResponsePart``, ``Candidate`` and
``GenerateContentResponse``. A newer SDK that adds a type or a field fails here, naming it, until
someone decides what lithify does with it (docs/sources/anthropic-gemini.md): so content the
translators do not know is a decision, never a silent loss.

Each entry also holds a minimal payload, run through the translator, and what it must give:
the canonical part types, and the degradations counted.
"""

from __future__ import annotations

import base64
import json
import types
import typing
from typing import Any

import pytest

anthropic_sdk = pytest.importorskip("anthropic")
genai_types = pytest.importorskip("google.genai.types")

from anthropic import types as at  # noqa: E402
from anthropic.types import beta as bt  # noqa: E402

from lithify.model import InferenceCall, Message  # noqa: E402
from lithify.translate import anthropic, gemini  # noqa: E402
from lithify.translate.sse import SSEEvent  # noqa: E402
from tests.helpers import assert_valid_messages  # noqa: E402

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
PDF = base64.b64encode(b"%PDF-1.4").decode()


# --- reading the SDKs -------------------------------------------------------------------------


def _members(annotation: Any) -> list[Any]:
    """The classes a (possibly annotated, optional, listed) union names."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, typing.Required, typing.NotRequired) or (
        origin is not None and getattr(origin, "__name__", "") == "Iterable"
    ):
        return [m for a in typing.get_args(annotation) for m in _members(a)]
    return [annotation]


def _field(cls: Any, name: str) -> Any:
    if hasattr(cls, "model_fields"):
        field = cls.model_fields.get(name)
        return field.annotation if field is not None else None
    return typing.get_type_hints(cls).get(name)  # a TypedDict (request params)


def _type_names(annotation: Any) -> set[str]:
    """The ``type`` literals of the members of a union of blocks."""
    out: set[str] = set()
    for cls in _members(annotation):
        if cls is type(None) or cls in (str, dict):
            continue
        literal = _field(cls, "type")
        assert literal is not None, f"{cls} has no `type`"
        out.update(a for m in _members(literal) for a in typing.get_args(m))
    return out


def _tag(part: Any) -> str:
    return part.__struct_config__.tag


def _kinds(messages: list[Message]) -> list[str]:
    return [_tag(p) for m in messages for p in m.parts]


# --- Anthropic --------------------------------------------------------------------------------

_SERVER_RESULT = ["server_tool_call_response"]
# Block type → (a minimal block, the parts it gives, the degradations it counts).
ANTHROPIC_BLOCKS: dict[str, tuple[dict[str, Any], list[str], dict[str, int]]] = {
    "text": ({"type": "text", "text": "hi"}, ["text"], {}),
    "thinking": (
        {"type": "thinking", "thinking": "plan", "signature": "c2ln"},
        ["reasoning"],
        {"opaque_reasoning": 1},
    ),
    "redacted_thinking": (
        {"type": "redacted_thinking", "data": "e30="},
        [],
        {"opaque_reasoning": 1},
    ),
    "tool_use": (
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
        ["tool_call"],
        {},
    ),
    # The client's own result: a `tool` message (run in a user turn, below).
    "tool_result": (
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
        ["tool_call_response"],
        {},
    ),
    "server_tool_use": (
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": 1}},
        ["server_tool_call"],
        {},
    ),
    "mcp_tool_use": (
        {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "x", "server_name": "s", "input": {}},
        ["server_tool_call"],
        {},
    ),
    "mcp_tool_result": (
        {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "content": [], "is_error": False},
        _SERVER_RESULT,
        {},
    ),
    "mcp_tool_listing": (
        {"type": "mcp_tool_listing", "server_name": "s", "tools": []},
        ["server_tool_call", "server_tool_call_response"],
        {},
    ),
    **{
        kind: ({"type": kind, "tool_use_id": "srvtoolu_1", "content": {}}, _SERVER_RESULT, {})
        for kind in (
            "web_search_tool_result",
            "web_fetch_tool_result",
            "code_execution_tool_result",
            "bash_code_execution_tool_result",
            "text_editor_code_execution_tool_result",
            "tool_search_tool_result",
            "advisor_tool_result",
        )
    },
    "container_upload": (
        {"type": "container_upload", "file_id": "file_1"},
        ["file"],
        {"content_reference": 1},
    ),
    "compaction": ({"type": "compaction", "content": "summary"}, ["text"], {}),
    "fallback": (
        {"type": "fallback", "from": {}, "to": {}, "trigger": {}},
        [],
        {"unsupported_content": 1},
    ),
    "image": (
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ["blob"],
        {},
    ),
    "document": (
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        },
        ["blob"],
        {},
    ),
    "search_result": (
        {
            "type": "search_result",
            "source": "https://x",
            "title": "t",
            "content": [{"type": "text", "text": "found"}],
        },
        ["text"],
        {},
    ),
    # Beta request blocks standing alone: which tools are in effect from here on.
    "tool_addition": ({"type": "tool_addition", "tool": {}}, [], {"unsupported_content": 1}),
    "tool_removal": ({"type": "tool_removal", "tool_name": "x"}, [], {"unsupported_content": 1}),
}

# Image and document `source.type` → the part it gives (a `content` document gives its blocks').
ANTHROPIC_SOURCES = {
    "base64": "blob",
    "url": "uri",
    "file": "file",
    "text": "blob",
    "content": "text",
}
# Blocks a client `tool_result` may hold: kept in the result as sent, or media following it.
ANTHROPIC_TOOL_RESULT_BLOCKS = {
    "text": "result",
    "search_result": "result",
    "tool_reference": "result",
    # Beta: a browser toolset member's tabs and downloads, which the API renders as text.
    "browser_state": "result",
    "image": "media",
    "document": "media",  # a `content` document stays in the result
}
# Response fields: what lithify reads, and what is metadata about the call left on raw.
ANTHROPIC_MESSAGE_FIELDS = {
    "id": "model_call_id",
    "type": "detection",
    "role": "detection",
    "model": "model",
    "content": "output parts",
    "stop_reason": "finish_reason",
    "stop_sequence": "raw (metadata)",
    "usage": "tokens",
    "container": "raw (code execution container id and expiry)",
    "diagnostics": "raw (cache-miss diagnostics)",
    "stop_details": "raw (refusal category and explanation; the refusal is the finish reason)",
    "context_management": "raw (edits the API applied to the context)",
    "input_transformations": "raw (thinking blocks the API dropped from the input)",
}
ANTHROPIC_STREAM_EVENTS = {
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
}


def _anthropic_block_unions() -> dict[str, Any]:
    return {
        "ContentBlock": at.ContentBlock,
        "ContentBlockParam": at.ContentBlockParam,
        "BetaContentBlock": bt.BetaContentBlock,
        "BetaContentBlockParam": bt.BetaContentBlockParam,
        "content_block_start": _field(at.RawContentBlockStartEvent, "content_block"),
        "beta content_block_start": _field(bt.BetaRawContentBlockStartEvent, "content_block"),
        "message content": _message_content(at.MessageParam),
        "beta message content": _message_content(bt.BetaMessageParam),
    }


def _message_content(param: Any) -> Any:
    """What the ``content`` of any message a request may send can hold (user, assistant, and
    in 2.16 a system message too)."""
    return typing.Union[tuple(_field(m, "content") for m in _members(param))]  # noqa: UP007


@pytest.mark.parametrize("union", sorted(_anthropic_block_unions()))
def test_every_anthropic_block_type_has_a_handling(union: str) -> None:
    names = _type_names(_anthropic_block_unions()[union])
    assert names, union
    assert names <= set(ANTHROPIC_BLOCKS), f"{union}: {sorted(names - set(ANTHROPIC_BLOCKS))}"


def test_every_anthropic_delta_and_event_has_a_handling() -> None:
    for union in (at.RawContentBlockDelta, bt.BetaRawContentBlockDelta):
        assert _type_names(union) <= set(anthropic._DELTA_BLOCK), _type_names(union)
    for union in (at.RawMessageStreamEvent, bt.BetaRawMessageStreamEvent):
        assert _type_names(union) <= ANTHROPIC_STREAM_EVENTS <= anthropic._STREAM_TYPES


def test_every_anthropic_media_source_and_tool_result_block_has_a_handling() -> None:
    for cls in (at.ImageBlockParam, at.DocumentBlockParam, bt.BetaImageBlockParam):
        assert _type_names(_field(cls, "source")) <= set(ANTHROPIC_SOURCES), cls
    assert _type_names(_field(bt.BetaRequestDocumentBlockParam, "source")) <= set(ANTHROPIC_SOURCES)
    for cls in (at.ToolResultBlockParam, bt.BetaToolResultBlockParam):
        names = _type_names(_field(cls, "content"))
        assert names <= set(ANTHROPIC_TOOL_RESULT_BLOCKS), sorted(names)


def test_every_anthropic_message_field_has_a_handling() -> None:
    for cls in (at.Message, bt.BetaMessage):
        fields = set(cls.model_fields)
        assert fields <= set(ANTHROPIC_MESSAGE_FIELDS), sorted(
            fields - set(ANTHROPIC_MESSAGE_FIELDS)
        )


def _anthropic_fact(request: Any, response: Any) -> InferenceCall:
    result = anthropic.translate(request, response)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


@pytest.mark.parametrize("kind", sorted(ANTHROPIC_BLOCKS))
def test_anthropic_block_gives_its_parts_or_is_counted(kind: str) -> None:
    """In a request, in an answer and in a stream alike (a client tool result only in a user
    turn: it is what the client sends)."""
    block, parts, counted = ANTHROPIC_BLOCKS[kind]
    request = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": [block]}],
    }
    f = _anthropic_fact(request, None)
    assert _kinds(f.input_messages) == parts
    assert f.degradations == counted
    if kind == "tool_result":
        return
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [block]}
    f = _anthropic_fact(None, {**message, "stop_reason": "end_turn", "usage": {}})
    assert (_kinds(f.output_messages), f.degradations) == (parts, counted)
    events = [
        {"type": "message_start", "message": {**message, "content": [], "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    f = _anthropic_fact(None, [SSEEvent(e["type"], json.dumps(e)) for e in events])
    assert (_kinds(f.output_messages), f.degradations) == (parts, counted)
    # A delta of a type lithify does not know, on that block, is counted once, unless the block
    # is of a type no part holds (counted already, whole).
    newer = {"type": "content_block_delta", "index": 0, "delta": {"type": "newer_delta"}}
    events.insert(2, newer)
    f = _anthropic_fact(None, [SSEEvent(e["type"], json.dumps(e)) for e in events])
    unknown = kind in ("tool_addition", "tool_removal")
    more = {} if unknown else {"unsupported_content": counted.get("unsupported_content", 0) + 1}
    assert (_kinds(f.output_messages), f.degradations) == (parts, {**counted, **more})


# --- Gemini -----------------------------------------------------------------------------------

_CALL = {"name": "f", "args": {"a": 1}, "id": "c1"}
# Part field → (a minimal part holding it, in the SDK's snake_case, the parts a model turn gives,
# the degradations counted). Metadata fields sit beside the media they describe.
_IMAGE = {"inline_data": {"mime_type": "image/png", "data": PNG}}
GEMINI_PART_FIELDS: dict[str, tuple[dict[str, Any], list[str], dict[str, int]]] = {
    "text": ({"text": "hi"}, ["text"], {}),
    "thought": ({"text": "plan", "thought": True}, ["reasoning"], {}),
    "thought_signature": (
        {"text": "hi", "thought_signature": "c2ln"},
        ["text"],
        {"opaque_reasoning": 1},
    ),
    "inline_data": (_IMAGE, ["blob"], {}),
    "file_data": (
        {"file_data": {"file_uri": "gs://b/a.pdf", "mime_type": "application/pdf"}},
        ["uri"],
        {"content_reference": 1},
    ),
    "function_call": ({"function_call": _CALL}, ["tool_call"], {}),
    "function_response": (
        {"function_response": {"name": "f", "id": "c1", "response": {"r": 1}}},
        ["tool_call_response"],
        {},
    ),
    "executable_code": (
        {"executable_code": {"language": "PYTHON", "code": "print(1)"}},
        ["server_tool_call"],
        {},
    ),
    "code_execution_result": (
        {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "1"}},
        ["server_tool_call_response"],
        {},
    ),
    "tool_call": (
        {"tool_call": {"id": "t1", "tool_type": "GOOGLE_SEARCH_WEB", "args": {"q": "x"}}},
        ["server_tool_call"],
        {},
    ),
    "tool_response": (
        {"tool_response": {"id": "t1", "tool_type": "GOOGLE_SEARCH_WEB", "response": {}}},
        ["server_tool_call_response"],
        {},
    ),
    "audio_transcription": (
        {
            "inline_data": {"mime_type": "audio/wav", "data": PNG},
            "audio_transcription": {"text": "said"},
        },
        ["text", "blob"],
        {},
    ),
    "speech_metadata": (
        {"text": "hi", "speech_metadata": {"speaker": "A"}},
        ["text"],
        {"unsupported_content": 1},
    ),
    # Metadata about how the media beside it is read: on raw, as `videoMetadata` is.
    "video_metadata": ({**_IMAGE, "video_metadata": {"fps": 1.0}}, ["blob"], {}),
    "media_resolution": ({**_IMAGE, "media_resolution": {"num_tokens": 10}}, ["blob"], {}),
    "media_processing": ({**_IMAGE, "media_processing": "STATIC"}, ["blob"], {}),
    "document_metadata": ({**_IMAGE, "document_metadata": {"start_page": 1}}, ["blob"], {}),
    "spreadsheet_metadata": ({**_IMAGE, "spreadsheet_metadata": {"sheet_index": 1}}, ["blob"], {}),
    "audio_metadata": ({**_IMAGE, "audio_metadata": {"start_offset": "1s"}}, ["blob"], {}),
    "part_metadata": ({"text": "hi", "part_metadata": {"source": "x"}}, ["text"], {}),
}
# A function's multimodal result: media parts after its `tool_call_response`.
GEMINI_FUNCTION_RESPONSE_PART_FIELDS = {
    "inline_data": "blob",
    "file_data": "uri",
    "media_processing": "raw",
    "media_resolution": "raw",
    "video_metadata": "raw",
    "document_metadata": "raw",
    "spreadsheet_metadata": "raw",
    "audio_metadata": "raw",
}
GEMINI_CANDIDATE_FIELDS = {
    "content": "output parts",
    "grounding_metadata": "server_tool_call + server_tool_call_response (google_search)",
    "url_context_metadata": "server_tool_call + server_tool_call_response (url_context)",
    "citation_metadata": "text_citation",
    "finish_reason": "finish_reason",
    "index": "output order",
    "finish_message": "raw (the API's explanation of the finish reason)",
    "token_count": "raw",
    "avg_logprobs": "raw",
    "logprobs_result": "raw",
    "safety_ratings": "raw",
    "continuation_token": "raw (opaque state a client passes to continue)",
}
GEMINI_RESPONSE_FIELDS = {
    "candidates": "output messages",
    "usage_metadata": "tokens",
    "model_version": "model",
    "response_id": "model_call_id",
    "create_time": "started_at",
    "prompt_feedback": "raw (a blocked prompt gives no output message)",
    "automatic_function_calling_history": "input messages (the SDK's own function calls)",
    "sdk_http_response": "raw",
    "model_status": "raw",
    "parsed": "raw (the SDK's parse of the text, which is kept)",
}


def test_every_gemini_field_has_a_handling() -> None:
    for cls, table in (
        (genai_types.Part, GEMINI_PART_FIELDS),
        (genai_types.FunctionResponsePart, GEMINI_FUNCTION_RESPONSE_PART_FIELDS),
        (genai_types.Candidate, GEMINI_CANDIDATE_FIELDS),
        (genai_types.GenerateContentResponse, GEMINI_RESPONSE_FIELDS),
    ):
        fields = set(cls.model_fields)
        assert fields <= set(table), f"{cls.__name__}: {sorted(fields - set(table))}"


@pytest.mark.parametrize("field", sorted(GEMINI_PART_FIELDS))
def test_gemini_part_gives_its_parts_or_is_counted(field: str) -> None:
    """The part as the SDK writes it (validated and dumped by it), as the REST wire's camelCase,
    and with every unset field spelled out as null (a plain ``model_dump``)."""
    example, parts, counted = GEMINI_PART_FIELDS[field]
    sdk = genai_types.Part.model_validate(example)
    assert getattr(sdk, field) is not None
    snake = sdk.model_dump(mode="json", exclude_none=True)
    nulls = sdk.model_dump(mode="json")
    camel = gemini._camel_keys(snake)
    for part in (snake, nulls, camel):
        call = part.get("function_call") or part.get("functionCall")
        history = [{"role": "model", "parts": [{"function_call": _CALL}]}] if not call else []
        request = {"contents": [{"role": "user", "parts": [{"text": "q"}]}, *history]}
        request["contents"].append({"role": "model", "parts": [part]})
        result = gemini.translate(request, None)
        assert isinstance(result, InferenceCall), result
        assert_valid_messages(result)
        last = result.input_messages[len(request["contents"]) - 1 :]
        assert (_kinds(last), result.degradations) == (parts, counted), part


def test_gemini_function_response_media_follow_the_result() -> None:
    media = genai_types.FunctionResponsePart.model_validate(_IMAGE)
    part = {
        "function_response": {
            "name": "f",
            "id": "c1",
            "response": {},
            "parts": [media.model_dump(mode="json", exclude_none=True)],
        }
    }
    model = {"role": "model", "parts": [{"function_call": _CALL}]}
    result = gemini.translate({"contents": [model, {"role": "user", "parts": [part]}]}, None)
    assert isinstance(result, InferenceCall)
    assert _kinds(result.input_messages[1:]) == ["tool_call_response", "blob"]
    assert result.degradations == {}
