"""OTel GenAI semantic conventions: span attributes, span events and log events to facts.

One test per rule of docs/canonical.md that applies to this source, the semconv spec cases, the
wire forms (JSON string vs structured AnyValue, OTLP/JSON vs protobuf), and property tests.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord as PbLogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from lithify.core import identity
from lithify.model import (
    DEGRADATION_REASONS,
    NO_FACT_REASONS,
    InferenceCall,
    MediaPart,
    Message,
    ReasoningPart,
    Skip,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
    UriPart,
)
from lithify.translate import genai, translate_document, translate_protobuf
from lithify.translate._common import Degradations
from lithify.translate.otlp import LogRecord, Span
from lithify.translate.telemetry import translate_attributes, translate_span, translate_spans
from tests.conftest import CORPUS
from tests.helpers import assert_valid_messages
from tests.otlp_values import json_attrs, json_value, pb_attrs, pb_value

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"
SPAN2 = "00f067aa0ba902b7"
T0 = 1_760_000_000_000_000_000

BASE = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o",
}


def _dumps(v: Any) -> str:
    return orjson.dumps(v).decode()


def fact(attrs: dict[str, Any], events: list[dict[str, Any]] | None = None) -> InferenceCall:
    span = Span(TRACE, SPAN, None, "chat gpt-4o", 3, T0, T0 + 5_000_000, attrs, events or [])
    result = translate_span(span)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def spanned(**attrs: Any) -> InferenceCall:
    """A fact from a chat span carrying the given semconv attributes (values JSON-encoded)."""
    keys = {
        "input": genai.INPUT,
        "output": genai.OUTPUT,
        "system": genai.SYSTEM,
        "tools": genai.TOOLS,
    }
    full = dict(BASE)
    for k, v in attrs.items():
        full[keys.get(k, k)] = _dumps(v) if k in keys else v
    return fact(full)


def text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


# ---------------------------------------------------------------------------------------------
# OTLP builders: the same Python values as OTLP/JSON or as protobuf


def json_trace(attrs: dict[str, Any]) -> dict[str, Any]:
    span = {
        "traceId": TRACE,
        "spanId": SPAN,
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 5_000_000),
        "attributes": json_attrs(attrs),
    }
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": json_attrs({"service.name": "svc"})},
                "scopeSpans": [{"scope": {"name": "genai", "version": "1"}, "spans": [span]}],
            }
        ]
    }


def pb_trace(attrs: dict[str, Any]) -> bytes:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(pb_attrs({"service.name": "svc"}))
    ss = rs.scope_spans.add()
    ss.scope.name, ss.scope.version = "genai", "1"
    ss.spans.append(
        PbSpan(
            trace_id=bytes.fromhex(TRACE),
            span_id=bytes.fromhex(SPAN),
            name="chat gpt-4o",
            kind=PbSpan.SpanKind.SPAN_KIND_CLIENT,
            start_time_unix_nano=T0,
            end_time_unix_nano=T0 + 5_000_000,
            attributes=pb_attrs(attrs),
        )
    )
    return req.SerializeToString()


# A log record: (event_name, body, attributes, trace_id, span_id, time)
Rec = tuple[str, Any, dict[str, Any], str | None, str | None, int]


def json_logs(records: list[Rec]) -> dict[str, Any]:
    out = []
    for name, body, attrs, trace, span, t in records:
        r: dict[str, Any] = {
            "eventName": name,
            "timeUnixNano": str(t),
            "attributes": json_attrs(attrs),
        }
        if body is not None:
            r["body"] = json_value(body)
        if trace:
            r["traceId"] = trace
        if span:
            r["spanId"] = span
        out.append(r)
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": json_attrs({"service.name": "svc"})},
                "scopeLogs": [{"scope": {"name": "genai"}, "logRecords": out}],
            }
        ]
    }


def pb_logs(records: list[Rec]) -> bytes:
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    rl.resource.attributes.extend(pb_attrs({"service.name": "svc"}))
    sl = rl.scope_logs.add()
    sl.scope.name = "genai"
    for name, body, attrs, trace, span, t in records:
        r = PbLogRecord(event_name=name, time_unix_nano=t, attributes=pb_attrs(attrs))
        if body is not None:
            r.body.CopyFrom(pb_value(body))
        if trace:
            r.trace_id = bytes.fromhex(trace)
        if span:
            r.span_id = bytes.fromhex(span)
        sl.log_records.append(r)
    return req.SerializeToString()


def _facts(results: list[Any]) -> list[InferenceCall]:
    out = [r for r in results if isinstance(r, InferenceCall)]
    for f in out:
        assert_valid_messages(f)
    return out


def _no_raw(f: InferenceCall) -> dict[str, Any]:
    d = msgspec.to_builtins(f)
    d.pop("raw")
    return d


# ---------------------------------------------------------------------------------------------
# Messages


def test_roles_are_kept_as_stated_and_aliases_normalized() -> None:
    f = spanned(
        input=[
            text("developer", "be brief"),
            text("USER", "hi"),
            text("critic", "odd role"),
            text("model", "gemini alias"),
            {"parts": [{"type": "text", "content": "no role"}]},
        ],
        output=[{"parts": [{"type": "text", "content": "hello"}], "finish_reason": "stop"}],
    )
    assert [m.role for m in f.input_messages] == [
        "developer",
        "user",
        "critic",
        "assistant",
        "user",
    ]
    assert [m.role for m in f.output_messages] == ["assistant"]


def test_system_instructions_become_a_leading_system_message() -> None:
    f = spanned(
        system=[{"type": "text", "content": "You are terse."}],
        input=[text("user", "hi")],
    )
    assert f.input_messages[0] == Message("system", [TextPart("You are terse.")], None)
    assert f.input_messages[1].role == "user"
    # Plain text (not JSON) is taken as the instruction text.
    g = fact({**BASE, genai.SYSTEM: "Be kind.", genai.INPUT: _dumps([text("user", "x")])})
    assert g.input_messages[0] == Message("system", [TextPart("Be kind.")], None)


def test_tool_results_are_split_one_per_tool_message() -> None:
    f = spanned(
        input=[
            {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": "a", "name": "f", "arguments": {}},
                    {"type": "tool_call", "id": "b", "name": "g", "arguments": {}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"type": "tool_call_response", "id": "a", "response": "ra"},
                    {"type": "tool_call_response", "id": "b", "response": {"k": 1}},
                    {"type": "text", "content": "and now?"},
                ],
            },
            {
                "role": "tool",
                "parts": [
                    {"type": "tool_call_response", "id": "c", "response": "rc"},
                    {"type": "tool_call_response", "id": "d", "response": "rd"},
                ],
            },
        ],
    )
    msgs = f.input_messages
    assert [m.role for m in msgs] == ["assistant", "tool", "tool", "user", "tool", "tool"]
    assert msgs[1].parts == [ToolCallResponsePart("a", "ra")]
    assert msgs[2].parts == [ToolCallResponsePart("b", {"k": 1})]
    assert msgs[3].parts == [TextPart("and now?")]
    assert [m.parts[0].id for m in msgs[4:]] == ["c", "d"]  # type: ignore[union-attr]


def test_tool_result_is_kept_exactly() -> None:
    f = spanned(
        input=[
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": "1", "response": '{"a": 1}'}],
            },
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": "2", "response": [1, "x"]}],
            },
        ]
    )
    assert f.input_messages[0].parts == [ToolCallResponsePart("1", '{"a": 1}')]
    assert f.input_messages[1].parts == [ToolCallResponsePart("2", [1, "x"])]


def test_finish_reasons_are_mapped_and_fall_back_by_index() -> None:
    f = spanned(
        input=[{**text("user", "q"), "finish_reason": "stop"}],
        output=[
            {**text("assistant", "a"), "finish_reason": "tool_calls"},
            text("assistant", "b"),
            {**text("assistant", "c"), "finish_reason": "Weird_Reason"},
        ],
        **{
            "gen_ai.response.finish_reasons": ["x", "end_turn", "y"],
            "gen_ai.request.choice.count": 3,
        },
    )
    assert f.input_messages[0].finish_reason is None
    assert [m.finish_reason for m in f.output_messages] == ["tool_call", "stop", "weird_reason"]


def test_split_output_messages_of_one_choice_are_merged() -> None:
    output = [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "1", "name": "a", "arguments": {}}],
            "finish_reason": "tool_calls",
        },
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "2", "name": "b", "arguments": {}}],
            "finish_reason": "tool_calls",
        },
    ]
    merged = spanned(output=output)
    assert len(merged.output_messages) == 1
    assert [p.id for p in merged.output_messages[0].parts] == ["1", "2"]  # type: ignore[union-attr]
    assert merged.output_messages[0].finish_reason == "tool_call"
    # n=2: they may be two choices, so they stay apart.
    apart = spanned(output=output, **{"gen_ai.request.choice.count": 2})
    assert len(apart.output_messages) == 2


def test_reasoning_parts_are_kept_in_place() -> None:
    f = spanned(
        output=[
            {
                "role": "assistant",
                "parts": [
                    {"type": "reasoning", "content": "think first"},
                    {"type": "text", "content": "answer"},
                ],
                "finish_reason": "stop",
            }
        ]
    )
    assert f.output_messages[0].parts == [ReasoningPart("think first"), TextPart("answer")]
    assert f.degradations == {}


def test_opaque_reasoning_is_counted_not_a_part() -> None:
    f = spanned(
        output=[
            {
                "role": "assistant",
                "parts": [
                    {"type": "redacted_thinking", "data": "EmwK..."},
                    {"type": "reasoning", "content": "visible", "signature": "sig=="},
                    {"type": "text", "content": "ok"},
                ],
            }
        ]
    )
    assert f.output_messages[0].parts == [ReasoningPart("visible"), TextPart("ok")]
    assert f.degradations == {"opaque_reasoning": 2}


def test_malformed_arguments_become_empty_and_count() -> None:
    f = spanned(
        output=[
            {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": "1", "name": "a", "arguments": '{"x": '},
                    {"type": "tool_call", "id": "2", "name": "b", "arguments": "[1, 2]"},
                    {"type": "tool_call", "id": "3", "name": "c", "arguments": '{"ok": true}'},
                ],
            }
        ]
    )
    args = [p.arguments for p in f.output_messages[0].parts]  # type: ignore[union-attr]
    assert args == [{}, {}, {"ok": True}]
    assert f.degradations == {"malformed_arguments": 2}
    raw_parts = orjson.loads(f.raw["attributes"][genai.OUTPUT])[0]["parts"]
    assert [p["arguments"] for p in raw_parts[:2]] == ['{"x": ', "[1, 2]"]  # kept on raw


def test_empty_string_arguments_are_an_empty_object_without_count() -> None:
    f = spanned(
        output=[
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "1", "name": "a", "arguments": ""}],
            }
        ]
    )
    assert f.output_messages[0].parts == [ToolCallPart("1", "a", {})]
    assert f.degradations == {}


def test_missing_tool_call_ids_are_synthesized_and_paired() -> None:
    attrs = dict(
        input=[
            text("user", "weather and time?"),
            {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "name": "weather", "arguments": {"c": "Paris"}},
                    {"type": "tool_call", "id": None, "name": "time", "arguments": {}},
                ],
            },
            # Answered in the other order, each response naming its tool.
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "name": "time", "response": "noon"}],
            },
            {"role": "tool", "parts": [{"type": "tool_call_response", "response": "rain"}]},
        ]
    )
    f = spanned(**attrs)
    weather, time_ = f.input_messages[1].parts
    assert isinstance(weather, ToolCallPart) and isinstance(time_, ToolCallPart)
    assert weather.id != time_.id and weather.id.startswith("lithify_")
    assert f.input_messages[2].parts == [ToolCallResponsePart(time_.id, "noon")]
    assert f.input_messages[3].parts == [ToolCallResponsePart(weather.id, "rain")]
    assert f.degradations == {"synthesized_id": 2}
    assert spanned(**attrs).input_messages == f.input_messages  # deterministic


def test_response_without_any_call_is_an_orphan() -> None:
    f = spanned(
        input=[{"role": "tool", "parts": [{"type": "tool_call_response", "response": "x"}]}]
    )
    part = f.input_messages[0].parts[0]
    assert isinstance(part, ToolCallResponsePart) and part.id.startswith("lithify_")
    assert f.degradations == {"orphan_tool_response": 1}


def test_unsupported_parts_are_dropped_and_counted_message_kept() -> None:
    f = spanned(
        input=[
            {
                "role": "user",
                "parts": [
                    # base64 that does not decode (5 characters): no part, malformed_media
                    {
                        "type": "blob",
                        "modality": "image",
                        "mime_type": "image/png",
                        "content": "iVBOR",
                    },
                    # a server tool call without its typed description
                    {"type": "server_tool_call", "name": "web_search", "server_tool_call": {}},
                    {"type": "some_future_part"},
                ],
            },
            text("user", "what is this?"),
        ]
    )
    assert f.input_messages[0] == Message("user", [], None)
    assert f.degradations == {"malformed_media": 1, "unsupported_content": 2}


def test_empty_text_is_dropped_without_count() -> None:
    f = spanned(output=[{"role": "assistant", "parts": [{"type": "text", "content": ""}]}])
    assert f.output_messages == [Message("assistant", [], None)]
    assert f.degradations == {}


def test_malformed_messages_attribute_is_counted_and_kept_on_raw() -> None:
    broken = '[{"role": "user", "parts": [{"type": "text", "content": "hi"'
    f = fact({**BASE, genai.INPUT: broken, genai.OUTPUT: _dumps([text("assistant", "ok")])})
    assert f.input_messages == []
    assert f.output_messages[0].parts == [TextPart("ok")]
    assert f.degradations == {"malformed_messages": 1}
    assert f.raw["attributes"][genai.INPUT] == broken


def test_content_reference_without_content_is_a_degradation() -> None:
    f = fact(
        {
            **BASE,
            "gen_ai.input.messages_ref": "gs://b/in.json",
            "gen_ai.output.messages_ref": "gs://b/out.json",
        }
    )
    assert f.input_messages == [] and f.output_messages == []
    assert f.degradations == {"content_reference": 2}
    # With the content present too, nothing was lost.
    g = fact(
        {
            **BASE,
            genai.INPUT: _dumps([text("user", "hi")]),
            "gen_ai.input.messages_ref": "gs://b/in.json",
        }
    )
    assert g.degradations == {}


def test_tool_definitions_and_builtin_tools() -> None:
    tools = orjson.loads(
        (CORPUS / "otlp/semconv_case_tool_definitions_function_and_builtin.json").read_bytes()
    )
    f = spanned(input=[text("user", "hi")], tools=tools)
    assert f.tools == [
        ToolDefinition(
            "get_weather",
            "Get the current weather in a given location",
            {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The city and state, e.g. San Francisco, CA",
                    }
                },
                "required": ["location"],
            },
        ),
        ToolDefinition("web_search", None, {}, builtin=tools[1]),
    ]
    assert f.degradations == {}


def test_credentials_inside_messages_are_redacted() -> None:
    key = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2"
    f = spanned(input=[text("user", f"my key is {key}, help")])
    assert f.input_messages[0].parts == [TextPart("my key is [REDACTED], help")]
    assert key not in orjson.dumps(msgspec.to_builtins(f)).decode()  # raw too
    assert f.degradations["redacted_provider_key"] >= 2  # the message and the raw attribute


# ---------------------------------------------------------------------------------------------
# Which spans are ours


def test_non_genai_span_is_skipped() -> None:
    http = Span(TRACE, SPAN, None, "GET /", 3, T0, T0 + 1, {"http.request.method": "GET"})
    assert translate_span(http) == Skip("not_genai", "span 'GET /'")


# What openai-v2 (default mode) and any instrumentation with capture off leave on the chat span.
METADATA = {
    **BASE,
    "gen_ai.response.model": "gpt-4o-2024-08-06",
    "gen_ai.response.id": "chatcmpl-9",
    "gen_ai.response.finish_reasons": ["stop"],
    "gen_ai.usage.input_tokens": 12,
    "gen_ai.usage.output_tokens": 7,
    "gen_ai.request.temperature": 0.2,
    "gen_ai.request.max_tokens": 100,
    "gen_ai.conversation.id": "conv-7",
}


def test_a_content_free_model_span_is_a_metadata_only_fact() -> None:
    """Capture off, or the content on log events: the span's metadata is kept as a capture of
    the call without messages, counted content_not_captured; the call is read from a capture
    with content when one arrives (docs/store.md, Call identity)."""
    span = Span(TRACE, SPAN, SPAN2, "chat gpt-4o", 3, T0, T0 + 5_000_000, dict(METADATA))
    f = translate_span(span)
    assert isinstance(f, InferenceCall), f
    # No part; the finish reason it states, as an output without parts (identity.fill).
    assert (f.input_messages, f.tools) == ([], [])
    assert f.output_messages == [Message("assistant", [], "stop")]
    assert f.degradations == {"content_not_captured": 1}
    assert f.source.name == "otel-genai"
    assert (f.provider, f.model, f.model_call_id) == ("openai", "gpt-4o-2024-08-06", "chatcmpl-9")
    assert (f.input_tokens, f.output_tokens) == (12, 7)
    assert f.request == {"max_tokens": 100, "temperature": 0.2}
    assert (f.session_id, f.trace_id, f.span_id, f.parent_span_id) == (
        "conv-7",
        TRACE,
        SPAN,
        SPAN2,
    )
    assert (f.duration_ms, f.started_at) == (5.0, "2025-10-09T08:53:20.000000000Z")
    assert f.raw["kind"] == "otlp_span"
    # The identity of the span, which its log events share: the two are one call.
    content = fact({**METADATA, genai.INPUT: _dumps([text("user", "hi")])})
    assert f.inference_call_id == content.inference_call_id
    # OTLP/JSON and protobuf give the same fact.
    (j,) = translate_document(json_trace(dict(METADATA)))
    (b,) = translate_protobuf(pb_trace(dict(METADATA)), "otlp-traces")
    assert isinstance(j, InferenceCall) and j == b
    assert j.degradations == {"content_not_captured": 1} and j.model_call_id == "chatcmpl-9"


def test_a_content_free_span_under_an_agent_takes_the_trace_as_session() -> None:
    agent = Span(
        TRACE,
        SPAN2,
        None,
        "invoke_agent a",
        1,
        T0,
        T0 + 9,
        {"gen_ai.operation.name": "invoke_agent"},
    )
    chat = Span(TRACE, SPAN, SPAN2, "chat", 3, T0 + 1, T0 + 2, dict(BASE))
    skip, f = translate_spans([agent, chat])
    assert isinstance(skip, Skip) and skip.reason == "not_genai"
    assert isinstance(f, InferenceCall) and f.session_id == TRACE and f.parent_span_id == SPAN2
    assert f.degradations == {"content_not_captured": 1}


def test_a_content_free_span_without_span_context_is_skipped() -> None:
    """Nothing could join it to its content: a file of spans without ids, a flat attribute map."""
    bare = Span(None, None, None, "chat", 3, T0, T0 + 1, dict(METADATA))
    result = translate_span(bare)
    assert isinstance(result, Skip) and result.reason == "content_not_captured"
    result = translate_attributes(dict(METADATA))
    assert isinstance(result, Skip) and result.reason == "content_not_captured"


def test_a_content_free_span_keeps_what_build_counts_from_its_attributes() -> None:
    """An output schema on the request is counted as on any span; so are credentials in raw."""
    key = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2"
    attrs = {
        **BASE,
        "gen_ai.request.structured_output_schema": '{"type": "object"}',
        "http.request.header.authorization": f"Bearer {key}",
    }
    f = translate_span(Span(TRACE, SPAN, None, "chat", 3, T0, T0 + 1, attrs))
    assert isinstance(f, InferenceCall)
    assert f.degradations["content_not_captured"] == 1
    assert f.degradations["output_schema"] == 1
    assert f.degradations["redacted_authorization"] >= 1
    assert key not in orjson.dumps(msgspec.to_builtins(f)).decode()


def test_an_agent_span_is_no_model_call_whatever_content_it_repeats() -> None:
    """Pydantic AI's agent run span carries gen_ai.system_instructions and the whole run as
    pydantic_ai.all_messages (semconv allows messages on invoke_agent spans too): a summary of
    the run, not a call. It was a fact of its own before (a system message, nothing else)."""
    summary = [
        text("user", "hi"),
        {"role": "assistant", "parts": [{"type": "text", "content": "yo"}]},
    ]
    for attrs in (
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather-agent",
            genai.SYSTEM: _dumps([{"type": "text", "content": "Be brief."}]),
            "pydantic_ai.all_messages": _dumps(summary),
        },
        {"gen_ai.operation.name": "invoke_agent", genai.INPUT: _dumps(summary[:1])},
        {"openinference.span.kind": "AGENT", genai.OUTPUT: _dumps(summary[1:])},
    ):
        span = Span(TRACE, SPAN, None, "invoke_agent weather-agent", 1, T0, T0 + 9, attrs)
        assert translate_span(span) == Skip("not_genai", "span 'invoke_agent weather-agent'")


def test_other_conventions_are_left_to_their_extractors() -> None:
    legacy = {**BASE, "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi"}
    assert genai.span_content(legacy, [], Degradations(), "s") is None
    oi = {"llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "hi"}
    assert genai.span_content(oi, [], Degradations(), "s") is None
    deprecated = {**BASE, "gen_ai.prompt": '[{"role":"user","content":"hi"}]'}
    assert genai.span_content(deprecated, [], Degradations(), "s") is None


# ---------------------------------------------------------------------------------------------
# Wire forms


CALL = {
    **BASE,
    "gen_ai.response.id": "chatcmpl-1",
    "gen_ai.usage.input_tokens": 12,
    "gen_ai.usage.output_tokens": 3,
    "gen_ai.conversation.id": "conv-7",
    "gen_ai.response.finish_reasons": ["tool_calls"],
}
INPUT = [
    {"role": "user", "parts": [{"type": "text", "content": "order A-1?"}], "name": None},
    {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": None, "name": "lookup", "arguments": {"id": "A-1", "n": 2}}
        ],
    },
    {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": None, "response": {"status": "sent"}}],
    },
]
OUTPUT = [
    {
        "role": "assistant",
        "parts": [{"type": "text", "content": "It shipped."}],
        "finish_reason": "stop",
    }
]
SYSTEM = [{"type": "text", "content": "Be brief."}]
TOOLS = [
    {"type": "function", "name": "lookup", "description": None, "parameters": {"type": "object"}}
]


def _content(structured: bool) -> dict[str, Any]:
    vals = {genai.INPUT: INPUT, genai.OUTPUT: OUTPUT, genai.SYSTEM: SYSTEM, genai.TOOLS: TOOLS}
    return {k: (v if structured else _dumps(v)) for k, v in vals.items()}


def test_structured_and_string_attributes_give_equal_facts() -> None:
    as_string = fact({**CALL, **_content(structured=False)})
    as_struct = fact({**CALL, **_content(structured=True)})
    assert _no_raw(as_string) == _no_raw(as_struct)
    assert as_string.input_messages[0] == Message("system", [TextPart("Be brief.")], None)
    call = as_string.input_messages[2].parts[0]
    assert isinstance(call, ToolCallPart) and call.arguments == {"id": "A-1", "n": 2}
    assert as_string.input_messages[3].parts == [ToolCallResponsePart(call.id, {"status": "sent"})]
    assert as_string.degradations == {"synthesized_id": 1}
    assert as_string.session_id == "conv-7" and as_string.model_call_id == "chatcmpl-1"


def test_protobuf_and_json_spans_give_equal_facts() -> None:
    for structured in (False, True):
        attrs = {**CALL, **_content(structured)}
        from_json = _facts(list(translate_document(json_trace(attrs))))
        from_pb = _facts(list(translate_protobuf(pb_trace(attrs))))
        assert len(from_json) == 1
        assert from_json == from_pb
        assert from_json[0].output_messages == [
            Message("assistant", [TextPart("It shipped.")], "stop")
        ]


def _details_record(trace: str | None = TRACE, span: str | None = SPAN) -> Rec:
    return (
        genai.OPERATION_DETAILS,
        None,
        {**CALL, **_content(structured=True)},
        trace,
        span,
        T0 + 9,
    )


def test_operation_details_log_event_is_one_call() -> None:
    doc = json_logs([_details_record()])
    (f,) = _facts(list(translate_document(doc)))
    span_fact = fact({**CALL, **_content(structured=False)})
    # Same call, same identity and content as the span that carries it.
    assert f.inference_call_id == span_fact.inference_call_id
    assert f.input_messages == span_fact.input_messages
    assert f.output_messages == span_fact.output_messages
    assert f.tools == span_fact.tools
    assert (f.provider, f.model, f.input_tokens, f.session_id) == ("openai", "gpt-4o", 12, "conv-7")
    assert f.observed_at is not None and f.started_at is None
    assert f.raw["kind"] == "otlp_log"
    # Protobuf gives the same fact.
    assert _facts(list(translate_protobuf(pb_logs([_details_record()]), "otlp-logs"))) == [f]


def test_operation_details_content_in_body_and_without_span_context() -> None:
    body = {genai.INPUT: INPUT, genai.OUTPUT: OUTPUT}
    rec: Rec = (genai.OPERATION_DETAILS, body, dict(BASE), None, None, T0)
    (f,) = _facts(list(translate_document(json_logs([rec]))))
    assert f.trace_id is None and len(f.input_messages) == 3
    (g,) = _facts(list(translate_document(json_logs([rec]))))
    assert g.inference_call_id == f.inference_call_id  # identity hashes the raw record
    empty: Rec = (genai.OPERATION_DETAILS, None, dict(BASE), TRACE, SPAN, T0)
    (skip,) = translate_document(json_logs([empty]))
    assert isinstance(skip, Skip) and skip.reason == "content_not_captured"


def _v1_events(span: str, t: int) -> list[Rec]:
    """The per-message events opentelemetry-instrumentation-openai-v2 emits without the opt-in."""
    a = {"gen_ai.system": "openai"}
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"id": "A-1"}'},
    }
    return [
        ("gen_ai.system.message", {"content": "Be brief."}, a, TRACE, span, t),
        ("gen_ai.user.message", {"content": "order A-1?"}, a, TRACE, span, t),
        ("gen_ai.assistant.message", {"tool_calls": [call]}, a, TRACE, span, t),
        ("gen_ai.tool.message", {"content": "sent", "id": "call_1"}, a, TRACE, span, t),
        (
            "gen_ai.choice",
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "It shipped."},
            },
            a,
            TRACE,
            span,
            t + 7,
        ),
    ]


def test_per_message_log_events_are_grouped_by_span() -> None:
    first, second = _v1_events(SPAN, T0), _v1_events(SPAN2, T0 + 100)
    interleaved = [first[0], second[0], *first[1:], *second[1:]]
    others: list[Rec] = [
        ("gen_ai.user.message", {"content": "lost"}, {}, None, None, T0),
        ("http.request", "GET /", {}, TRACE, SPAN, T0),
        ("gen_ai.evaluation.result", None, {"gen_ai.evaluation.score.value": 0.9}, TRACE, SPAN, T0),
    ]
    results = list(translate_document(json_logs([*interleaved, *others])))
    assert [type(r).__name__ for r in results] == [
        "InferenceCall",
        "InferenceCall",
        "Skip",
        "Skip",
        "Skip",
    ]
    assert [r.reason for r in results[2:]] == ["uncorrelated_events", "not_genai", "feedback_event"]  # type: ignore[union-attr]
    f, g = _facts(results)
    assert (f.span_id, g.span_id) == (SPAN, SPAN2)
    assert f.input_messages == [
        Message("system", [TextPart("Be brief.")], None),
        Message("user", [TextPart("order A-1?")], None),
        Message("assistant", [ToolCallPart("call_1", "lookup", {"id": "A-1"})], None),
        Message("tool", [ToolCallResponsePart("call_1", "sent")], None),
    ]
    assert f.output_messages == [Message("assistant", [TextPart("It shipped.")], "stop")]
    assert f.provider == "openai" and f.degradations == {}
    assert (
        f.inference_call_id == fact({**BASE, genai.INPUT: "[]"}).inference_call_id
    )  # span identity
    assert len(f.raw) == 5 and all(r["kind"] == "otlp_log" for r in f.raw)
    assert f.started_at is not None and f.started_at < f.observed_at  # type: ignore[operator]
    assert "feedback_event" in NO_FACT_REASONS
    # The same batch as protobuf gives the same facts.
    assert _facts(list(translate_protobuf(pb_logs(interleaved), "otlp-logs"))) == [f, g]


def test_choice_events_are_ordered_by_index() -> None:
    a: dict[str, Any] = {}
    recs: list[Rec] = [
        (
            "gen_ai.choice",
            {"index": 1, "finish_reason": "length", "message": {"content": "B"}},
            a,
            TRACE,
            SPAN,
            T0,
        ),
        (
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"content": "A"}},
            a,
            TRACE,
            SPAN,
            T0,
        ),
    ]
    (f,) = _facts(list(translate_document(json_logs(recs))))
    assert f.output_messages == [
        Message("assistant", [TextPart("A")], "stop"),
        Message("assistant", [TextPart("B")], "length"),
    ]


def test_per_message_events_without_content_are_not_a_fact() -> None:
    recs: list[Rec] = [
        ("gen_ai.user.message", None, {"gen_ai.system": "openai"}, TRACE, SPAN, T0),
        (
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant"}},
            {},
            TRACE,
            SPAN,
            T0,
        ),
    ]
    (skip,) = translate_document(json_logs(recs))
    assert isinstance(skip, Skip) and skip.reason == "content_not_captured"


# ---------------------------------------------------------------------------------------------
# Span events (older instrumentations)


def test_prompt_and_completion_span_events() -> None:
    prompt = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
            ],
        },
        # openai-v2 2.0b0 wrote an assistant turn's tool calls as a bare list.
        [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    completion = [{"role": "assistant", "content": "Hello!"}]
    events = [
        {
            "name": "gen_ai.content.prompt",
            "time_unix_nano": T0,
            "attributes": {"gen_ai.prompt": _dumps(prompt)},
        },
        {
            "name": "gen_ai.content.completion",
            "time_unix_nano": T0,
            "attributes": {"gen_ai.completion": _dumps(completion)},
        },
    ]
    f = fact({**BASE, "gen_ai.response.finish_reasons": ["stop"]}, events)
    assert f.input_messages == [
        Message("system", [TextPart("Be brief.")], None),
        Message(
            "user",
            [TextPart("hi"), UriPart("image", None, "https://example.com/x.png")],
            None,
        ),
        Message("assistant", [ToolCallPart("c1", "f", {"a": 1})], None),
        Message("tool", [ToolCallResponsePart("c1", "done")], None),
    ]
    assert f.output_messages == [Message("assistant", [TextPart("Hello!")], "stop")]
    assert f.degradations == {"content_reference": 1}


def test_plain_text_prompt_event() -> None:
    events = [
        {"name": "gen_ai.content.prompt", "attributes": {"gen_ai.prompt": "Say hi"}},
        {"name": "gen_ai.content.completion", "attributes": {"gen_ai.completion": "Hi"}},
    ]
    f = fact(dict(BASE), events)
    assert f.input_messages == [Message("user", [TextPart("Say hi")], None)]
    assert f.output_messages == [Message("assistant", [TextPart("Hi")], None)]


def test_per_message_span_events() -> None:
    events = [
        {
            "name": "gen_ai.user.message",
            "attributes": {"gen_ai.event.content": '{"role":"user","content":"hi"}'},
        },
        {"name": "gen_ai.assistant.message", "attributes": {"content": "earlier answer"}},
        {
            "name": "gen_ai.choice",
            "attributes": {
                "gen_ai.event.content": _dumps(
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {"tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
                    }
                )
            },
        },
    ]
    f = fact(dict(BASE), events)
    assert f.input_messages == [
        Message("user", [TextPart("hi")], None),
        Message("assistant", [TextPart("earlier answer")], None),
    ]
    (call,) = f.output_messages[0].parts
    assert isinstance(call, ToolCallPart) and call.name == "f" and call.id.startswith("lithify_")
    assert f.output_messages[0].finish_reason == "tool_call"
    assert f.degradations == {"synthesized_id": 1}


def test_span_attributes_win_over_span_events() -> None:
    events = [{"name": "gen_ai.content.prompt", "attributes": {"gen_ai.prompt": "from event"}}]
    f = fact({**BASE, genai.INPUT: _dumps([text("user", "from attribute")])}, events)
    assert f.input_messages == [Message("user", [TextPart("from attribute")], None)]


# ---------------------------------------------------------------------------------------------
# The semantic-conventions spec cases (bare attribute values), each wrapped in a span


def _case(name: str) -> Any:
    return orjson.loads((CORPUS / "otlp" / f"semconv_case_{name}.json").read_bytes())


def test_semconv_case_input_messages_tool_call_round_trip() -> None:
    f = fact({**BASE, genai.INPUT: _dumps(_case("input_messages_tool_call_round_trip"))})
    assert f.input_messages == [
        Message("user", [TextPart("What's the weather in Paris?")], None),
        Message(
            "assistant",
            [ToolCallPart("call_VSPygqKTWdrhaFErNvMV18Yl", "get_weather", {"location": "Paris"})],
            None,
        ),
        Message(
            "tool", [ToolCallResponsePart("call_VSPygqKTWdrhaFErNvMV18Yl", "rainy, 57°F")], None
        ),
    ]
    assert f.output_messages == [] and f.degradations == {}


def test_semconv_case_output_messages_reasoning_redacted_thinking() -> None:
    f = fact({**BASE, genai.OUTPUT: _dumps(_case("output_messages_reasoning_redacted_thinking"))})
    assert f.output_messages == [
        Message("assistant", [ReasoningPart("The user wants a short answer.")], "stop")
    ]
    assert f.degradations == {"opaque_reasoning": 1}
    assert "EmwKAhgBEgy3va3pzix" in f.raw["attributes"][genai.OUTPUT]


def test_semconv_case_system_instructions_text_and_generic() -> None:
    f = fact({**BASE, genai.SYSTEM: _dumps(_case("system_instructions_text_and_generic"))})
    assert f.input_messages == [Message("system", [TextPart("You are a helpful bot")], None)]
    assert f.degradations == {"unsupported_content": 1}


def test_semconv_case_tool_definitions_function_and_builtin() -> None:
    f = fact(
        {
            **BASE,
            genai.INPUT: "[]",
            genai.TOOLS: _dumps(_case("tool_definitions_function_and_builtin")),
        }
    )
    assert [t.name for t in f.tools] == ["get_weather", "web_search"]
    assert f.tools[0].parameters["required"] == ["location"]
    assert f.tools[1].builtin is not None and f.degradations == {}


# ---------------------------------------------------------------------------------------------
# Properties


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_VOCAB_KEYS = [
    "type", "content", "role", "parts", "id", "name", "arguments", "response", "result",
    "finish_reason", "tool_calls", "function", "tool_call_id", "message", "index", "text",
    "signature", "reasoning_content", "modality", "mime_type", "uri", "file_id",
    "server_tool_call", "server_tool_call_response", "image_url", "url",
]  # fmt: skip
_VOCAB_VALUES = [
    "text", "reasoning", "tool_call", "tool_call_response", "redacted_thinking", "blob",
    "assistant", "user", "tool", "stop", "tool_calls", "", "{}", '{"a": 1}', "[",
    "uri", "file", "server_tool_call", "server_tool_call_response", "image_url", "image",
    "AAAA", "data:image/png;base64,AAAA", "https://x.test/a.png",
]  # fmt: skip
shaped = st.recursive(
    st.sampled_from(_VOCAB_VALUES) | st.none() | st.integers(-2, 3),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(_VOCAB_KEYS), inner, max_size=5)
    ),
    max_leaves=30,
)
anything = json_values | shaped
_KEYS = [
    genai.INPUT,
    genai.OUTPUT,
    genai.SYSTEM,
    genai.TOOLS,
    "gen_ai.response.finish_reasons",
    "gen_ai.request.choice.count",
]


def _check(result: InferenceCall | Skip) -> None:
    if isinstance(result, Skip):
        assert result.reason in NO_FACT_REASONS
        return
    assert_valid_messages(result)
    assert set(result.degradations) <= set(DEGRADATION_REASONS)
    if "content_not_captured" in result.degradations:  # a span's metadata, nothing else
        assert result.degradations["content_not_captured"] == 1
        # No part: at most the finish reasons the span states, as outputs without parts.
        assert result.input_messages == [] and identity.part_count(result) == 0
        outputs = result.output_messages
        assert all(m.role == "assistant" for m in outputs)
        assert not outputs or any(m.finish_reason is not None for m in outputs)
        assert result.span_id is not None and result.raw["kind"] == "otlp_span"
    for m in [*result.input_messages, *result.output_messages]:
        for p in m.parts:
            if isinstance(p, ToolCallPart | ToolCallResponsePart):
                assert p.id
            if isinstance(p, ToolCallResponsePart):
                # a tool message: one result, then only the media that tool returned
                assert m.role == "tool" and m.parts[0] is p
                assert all(isinstance(q, MediaPart) for q in m.parts[1:])


@given(st.dictionaries(st.sampled_from(_KEYS), anything, min_size=1), st.booleans())
def test_any_attribute_values_never_raise_and_validate(
    values: dict[str, Any], encode: bool
) -> None:
    attrs = dict(BASE)
    for k, v in values.items():
        attrs[k] = _dumps(v) if encode else v
    span = Span(TRACE, SPAN, None, "chat", 3, T0, T0 + 1, attrs)
    first = translate_span(span)
    _check(first)
    assert translate_span(span) == first  # deterministic


_ids = st.text("0123456789abcdef", min_size=1, max_size=32).filter(lambda t: t.strip("0"))
_metadata = st.fixed_dictionaries(
    {"gen_ai.operation.name": st.sampled_from(["chat", "text_completion", "generate_content"])},
    optional={
        "gen_ai.provider.name": st.text(max_size=8),
        "gen_ai.request.model": st.text(max_size=8),
        "gen_ai.response.model": st.text(max_size=8),
        "gen_ai.response.id": st.text(max_size=8),
        "gen_ai.conversation.id": st.text(max_size=8),
        "gen_ai.usage.input_tokens": st.integers(-3, 2**40) | st.floats() | st.text(max_size=3),
        "gen_ai.usage.output_tokens": st.integers(-3, 2**40) | st.floats() | st.text(max_size=3),
        "gen_ai.request.temperature": st.floats(0, 2),
        "gen_ai.response.finish_reasons": st.lists(st.sampled_from(["stop", "length"])),
        # What capture off leaves of the content: nothing, empty or null values.
        genai.INPUT: st.sampled_from(["", None]),
        genai.OUTPUT: st.sampled_from(["", None]),
        genai.TOOLS: json_values.map(_dumps),
    },
)


@given(_metadata, st.one_of(st.none(), st.tuples(_ids, _ids)), st.one_of(st.none(), _ids))
def test_a_content_free_model_span_is_its_metadata_or_a_skip(
    attrs: dict[str, Any], ids: tuple[str, str] | None, parent: str | None
) -> None:
    """Never a fact with messages: with span context the span's metadata read as any span's
    (what the same attributes give beside content), without it a content_not_captured skip."""
    trace, span_id = ids or (None, None)
    result = translate_span(Span(trace, span_id, parent, "chat", 3, T0, T0 + 1, attrs))
    if ids is None:
        assert isinstance(result, Skip) and result.reason == "content_not_captured"
        return
    _check(result)
    assert isinstance(result, InferenceCall)
    assert result.degradations["content_not_captured"] == 1
    with_content = translate_span(
        Span(trace, span_id, parent, "chat", 3, T0, T0 + 1, {**attrs, genai.INPUT: "[]"})
    )
    assert isinstance(with_content, InferenceCall)
    keep = ("inference_call_id", "session_id", "trace_id", "span_id", "parent_span_id")
    keep += ("provider", "model", "request", "input_tokens", "output_tokens", "model_call_id")
    keep += ("duration_ms", "started_at", "observed_at", "tools")
    for name in keep:
        assert getattr(result, name) == getattr(with_content, name), name


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "name": st.sampled_from(
                    [
                        genai.PROMPT_EVENT,
                        genai.COMPLETION_EVENT,
                        genai.CHOICE,
                        genai.OPERATION_DETAILS,
                        *genai._MESSAGE_EVENTS,
                        "x",
                    ]
                ),
                "attributes": st.dictionaries(
                    st.sampled_from(
                        [
                            "gen_ai.prompt",
                            "gen_ai.completion",
                            "gen_ai.event.content",
                            "content",
                            "tool_calls",
                            "message",
                            genai.INPUT,
                            genai.OUTPUT,
                        ]
                    ),
                    anything | anything.map(_dumps),
                    max_size=3,
                ),
            }
        ),
        max_size=5,
    )
)
def test_any_span_events_never_raise_and_validate(events: list[dict[str, Any]]) -> None:
    span = Span(TRACE, SPAN, None, "chat", 3, T0, T0 + 1, dict(BASE), events)
    _check(translate_span(span))


@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    genai.OPERATION_DETAILS,
                    genai.CHOICE,
                    genai.EVALUATION,
                    *genai._MESSAGE_EVENTS,
                    None,
                    "other",
                ]
            ),
            anything | anything.map(_dumps),
            st.dictionaries(st.sampled_from(_KEYS), anything, max_size=3),
            st.sampled_from([(TRACE, SPAN), (TRACE, SPAN2), (None, None)]),
        ),
        max_size=6,
    )
)
def test_any_log_records_never_raise_and_validate(recs: list[tuple[Any, ...]]) -> None:
    records = [
        LogRecord(ids[0], ids[1], name, T0 + i, None, 9, body, attrs)
        for i, (name, body, attrs, ids) in enumerate(recs)
    ]
    results = list(genai.log_facts(records))
    for r in results:
        _check(r)
    groups = {
        (r.trace_id, r.span_id)
        for r in records
        if r.trace_id and r.event_name in (genai.CHOICE, *genai._MESSAGE_EVENTS)
    }
    others = sum(
        1
        for r in records
        if not (r.trace_id and r.event_name in (genai.CHOICE, *genai._MESSAGE_EVENTS))
    )
    assert len(results) == len(groups) + others
