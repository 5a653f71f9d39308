"""Vercel AI SDK spans (ai.generateText.doGenerate, ai.streamText.doStream …) to facts
(docs/sources/vercel-ai.md). The attribute values are the shapes `ai` 6.0.326 writes (its
packages/ai/src/telemetry and generate-text sources; tests/producers/vercel-ai records real ones)
and, where noted, those of AI SDK 4."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import msgspec
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from lithify.model import DEGRADATION_REASONS, InferenceCall, Skip
from lithify.translate import vercel_ai
from lithify.translate._common import Degradations
from lithify.translate.otlp import json_spans
from lithify.translate.telemetry import translate_attributes, translate_spans
from tests.helpers import assert_valid_messages
from tests.otlp_values import json_attrs
from tests.producers.conversation import PARAMETERS, SYSTEM, USER

ANSWER = "Paris: 18 °C and cloudy. Zürich: 12 °C with light rain — take an umbrella."
TOOL = orjson.dumps(
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for one city.",
        "inputSchema": PARAMETERS,
    }
).decode()
PROMPT = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": [{"type": "text", "text": USER}]},
    {
        "role": "assistant",
        "content": [
            {
                "type": "tool-call",
                "toolCallId": "call_plain_0001_0",
                "toolName": "get_weather",
                "input": {"city": "Paris", "unit": "celsius"},
            },
            {
                "type": "tool-call",
                "toolCallId": "call_plain_0001_1",
                "toolName": "get_weather",
                "input": {"city": "Zürich", "unit": "celsius"},
            },
        ],
    },
    {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "call_plain_0001_0",
                "toolName": "get_weather",
                "output": {
                    "type": "text",
                    "value": '{"temperature": 18, "unit": "celsius", "conditions": "cloudy"}',
                },
            },
            {
                "type": "tool-result",
                "toolCallId": "call_plain_0001_1",
                "toolName": "get_weather",
                "output": {"type": "text", "value": "12 °C, light rain"},
            },
        ],
    },
]

# The second call span of tests/producers/vercel-ai's `plain` run (ai 6.0.326), as recorded.
RECORDED: dict[str, Any] = {
    "operation.name": "ai.generateText.doGenerate weather-agent",
    "resource.name": "weather-agent",
    "ai.operationId": "ai.generateText.doGenerate",
    "ai.telemetry.functionId": "weather-agent",
    "ai.model.provider": "openai.chat",
    "ai.model.id": "gpt-4o-mini",
    "ai.settings.maxOutputTokens": 256,
    "ai.settings.temperature": 0.2,
    "ai.settings.seed": 7,
    "ai.settings.maxRetries": 0,
    "ai.telemetry.metadata.sessionId": "weather-session-plain",
    "ai.request.headers.user-agent": "ai/6.0.326",
    "ai.prompt.messages": orjson.dumps(PROMPT).decode(),
    "ai.prompt.tools": [TOOL],
    "ai.prompt.toolChoice": '{"type":"auto"}',
    "gen_ai.system": "openai.chat",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.request.max_tokens": 256,
    "gen_ai.request.temperature": 0.2,
    "ai.response.finishReason": "stop",
    "ai.response.text": ANSWER,
    "ai.response.id": "chatcmpl-plain-0002",
    "ai.response.model": "gpt-4o-mini-2024-07-18",
    "ai.response.timestamp": "2026-01-01T00:00:02.000Z",
    "ai.response.providerMetadata": (
        '{"openai":{"acceptedPredictionTokens":0,"rejectedPredictionTokens":0}}'
    ),
    "ai.usage.inputTokens": 193,
    "ai.usage.inputTokenDetails.noCacheTokens": 193,
    "ai.usage.inputTokenDetails.cacheReadTokens": 0,
    "ai.usage.outputTokens": 23,
    "ai.usage.outputTokenDetails.textTokens": 23,
    "ai.usage.outputTokenDetails.reasoningTokens": 0,
    "ai.usage.totalTokens": 216,
    "ai.usage.reasoningTokens": 0,
    "ai.usage.cachedInputTokens": 0,
    "gen_ai.response.finish_reasons": ["stop"],
    "gen_ai.response.id": "chatcmpl-plain-0002",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.usage.input_tokens": 193,
    "gen_ai.usage.output_tokens": 23,
}
CALL = {"ai.operationId": "ai.generateText.doGenerate", "ai.model.provider": "openai.chat"}


def fact(attrs: dict[str, Any]) -> InferenceCall:
    result = translate_attributes(attrs)
    assert isinstance(result, InferenceCall), result
    assert result.source.name == "vercel-ai"
    assert_valid_messages(result)
    return result


def call_with(
    messages: list[Any] | None = None, **outputs: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    attrs: dict[str, Any] = dict(CALL)
    if messages is not None:
        attrs["ai.prompt.messages"] = orjson.dumps(messages).decode()
    attrs.update({f"ai.response.{k}": v for k, v in outputs.items()})
    f = fact(attrs)
    return (
        msgspec.to_builtins(f.input_messages),
        msgspec.to_builtins(f.output_messages),
        dict(f.degradations),
    )


def user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(parts)}]


def test_a_recorded_call_span_gives_the_whole_call() -> None:
    f = fact(RECORDED)
    assert msgspec.to_builtins(f.input_messages) == [
        {"role": "system", "parts": [{"type": "text", "content": SYSTEM}], "finish_reason": None},
        {"role": "user", "parts": [{"type": "text", "content": USER}], "finish_reason": None},
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_plain_0001_0",
                    "name": "get_weather",
                    "arguments": {"city": "Paris", "unit": "celsius"},
                },
                {
                    "type": "tool_call",
                    "id": "call_plain_0001_1",
                    "name": "get_weather",
                    "arguments": {"city": "Zürich", "unit": "celsius"},
                },
            ],
            "finish_reason": None,
        },
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": "call_plain_0001_0",
                    # A string result stays the string the model was sent, JSON-looking or not.
                    "result": '{"temperature": 18, "unit": "celsius", "conditions": "cloudy"}',
                }
            ],
            "finish_reason": None,
        },
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": "call_plain_0001_1",
                    "result": "12 °C, light rain",
                }
            ],
            "finish_reason": None,
        },
    ]
    assert msgspec.to_builtins(f.output_messages) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": ANSWER}],
            "finish_reason": "stop",
        }
    ]
    assert msgspec.to_builtins(f.tools) == [
        {
            "name": "get_weather",
            "description": "Current weather for one city.",
            "parameters": PARAMETERS,
        }
    ]
    assert f.provider == "openai"  # the SDK's `openai.chat`: provider and API
    assert f.model == "gpt-4o-mini-2024-07-18"
    # seed only in ai.settings; the SDK's default toolChoice auto is no parameter that was set
    assert f.request == {"max_tokens": 256, "seed": 7, "temperature": 0.2}
    assert (f.input_tokens, f.output_tokens) == (193, 23)
    assert f.model_call_id == "chatcmpl-plain-0002"
    assert f.session_id == "weather-session-plain"
    assert f.degradations == {}


def test_text_reasoning_and_opaque_reasoning() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "reasoning",
                    "text": "think",
                    "providerOptions": {"anthropic": {"signature": "sig=="}},
                },
                {"type": "reasoning", "text": "more"},
                {"type": "redacted-reasoning", "data": "xxx"},  # AI SDK 4
                {"type": "text", "text": "hello"},
                {"type": "text", "text": ""},
            ],
        }
    ]
    inputs, _, deg = call_with(messages)
    assert inputs[0]["parts"] == [
        {"type": "reasoning", "content": "think"},
        {"type": "reasoning", "content": "more"},
        {"type": "text", "content": "hello"},
    ]
    assert deg == {"opaque_reasoning": 2}


def test_file_parts_are_media() -> None:
    png = b"\x89PNG\r\n\x1a\nfake"
    b64 = base64.b64encode(png).decode()
    inputs, _, deg = call_with(
        user(
            {"type": "file", "data": b64, "mediaType": "image/png"},
            {"type": "file", "data": "https://example.com/a.pdf", "mediaType": "application/pdf"},
            {"type": "file", "data": f"data:audio/wav;base64,{b64}", "mediaType": "audio/wav"},
            {"type": "image", "image": b64, "mimeType": "image/png"},  # AI SDK 4
            {"type": "file", "data": "!!not base64!!", "mediaType": "image/png"},
            {"type": "file", "mediaType": "image/png"},
        )
    )
    blob = {
        "modality": "image",
        "mime_type": "image/png",
        "size": len(png),
        "sha256": hashlib.sha256(png).hexdigest(),
        "content": b64,
    }
    assert inputs[0]["parts"] == [
        {"type": "blob", **blob},
        {
            "type": "uri",
            "modality": "document",
            "mime_type": "application/pdf",
            "uri": "https://example.com/a.pdf",
        },
        {"type": "blob", **blob, "modality": "audio", "mime_type": "audio/wav"},
        {"type": "blob", **blob},
    ]
    assert deg == {"content_reference": 1, "malformed_media": 2}


def test_tool_calls_and_their_results_of_every_output_type() -> None:
    def result(id_: str, output: Any) -> dict[str, Any]:
        return {"type": "tool-result", "toolCallId": id_, "toolName": "f", "output": output}

    calls = [
        {"type": "tool-call", "toolCallId": f"c{i}", "toolName": "f", "input": args}
        for i, args in enumerate([{"a": 1}, '{"b": 2}', "not json", ""])
    ]
    messages = [
        {"role": "assistant", "content": calls},
        {
            "role": "tool",
            "content": [
                result("c0", {"type": "json", "value": {"ok": True}}),
                result("c1", {"type": "error-text", "value": "boom"}),
                result("c2", {"type": "execution-denied", "reason": "no"}),
                result(
                    "c3",
                    {
                        "type": "content",
                        "value": [
                            {"type": "text", "text": "see"},
                            {"type": "image-url", "url": "https://example.com/x.png"},
                            {"type": "file-id", "fileId": {"openai": "file-1"}},
                        ],
                    },
                ),
                {"type": "tool-approval-response", "approvalId": "a", "approved": True},
            ],
        },
    ]
    inputs, _, deg = call_with(messages)
    assert [p["arguments"] for p in inputs[0]["parts"]] == [{"a": 1}, {"b": 2}, {}, {}]
    assert inputs[1:] == [
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "c0", "result": {"ok": True}}],
            "finish_reason": None,
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "c1", "result": "boom"}],
            "finish_reason": None,
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "c2", "result": "no"}],
            "finish_reason": None,
        },
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": "c3",
                    "result": [{"type": "text", "text": "see"}],
                },
                {
                    "type": "uri",
                    "modality": "image",
                    "mime_type": None,
                    "uri": "https://example.com/x.png",
                },
                {"type": "file", "modality": "document", "mime_type": None, "file_id": "file-1"},
            ],
            "finish_reason": None,
        },
    ]
    assert deg == {"malformed_arguments": 1, "content_reference": 2}


def test_ai_sdk_4_calls_and_results() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [
                {"type": "tool-call", "toolCallId": "c", "toolName": "f", "args": {"x": 1}}
            ],
        },
        {
            "role": "tool",
            "content": [
                {"type": "tool-result", "toolCallId": "c", "toolName": "f", "result": {"y": 2}}
            ],
        },
    ]
    inputs, _, deg = call_with(messages)
    assert inputs[0]["parts"][0]["arguments"] == {"x": 1}
    assert inputs[1]["parts"] == [{"type": "tool_call_response", "id": "c", "result": {"y": 2}}]
    assert deg == {}


def test_ids_missing_are_synthesized_and_results_pair() -> None:
    messages = [
        {"role": "assistant", "content": [{"type": "tool-call", "toolName": "f", "input": {}}]},
        {
            "role": "tool",
            "content": [
                {"type": "tool-result", "toolName": "f", "output": {"type": "text", "value": "r"}},
                {"type": "tool-result", "toolName": "g", "output": {"type": "text", "value": "s"}},
            ],
        },
    ]
    inputs, _, deg = call_with(messages)
    call_id = inputs[0]["parts"][0]["id"]
    assert call_id.startswith("lithify_")
    assert inputs[1]["parts"][0]["id"] == call_id
    assert deg == {"synthesized_id": 1, "orphan_tool_response": 1}


def test_provider_executed_tools_are_server_tool_parts() -> None:
    search = {
        "type": "tool-call",
        "toolCallId": "ws1",
        "toolName": "web_search",
        "input": {"query": "weather"},
        "providerExecuted": True,
    }
    found = {
        "type": "tool-result",
        "toolCallId": "ws1",
        "toolName": "web_search",
        "output": {"type": "json", "value": [{"url": "https://example.com"}]},
        "providerExecuted": True,
    }
    inputs, _, deg = call_with([{"role": "assistant", "content": [search, found]}])
    assert inputs[0]["parts"] == [
        {"type": "server_tool_call", "id": "ws1", "name": "web_search", "server_tool_call": search},
        {"type": "server_tool_call_response", "id": "ws1", "server_tool_call_response": found},
    ]
    assert deg == {}


def test_unknown_parts_and_malformed_messages_are_counted() -> None:
    inputs, _, deg = call_with([*user({"type": "source", "url": "x"}), 5])
    assert inputs == [{"role": "user", "parts": [], "finish_reason": None}]
    assert deg == {"unsupported_content": 1, "malformed_messages": 1}
    f = fact({**CALL, "ai.prompt.messages": "{not json"})
    assert f.input_messages == [] and f.degradations == {"malformed_messages": 1}


def test_the_answer_reasoning_text_then_tool_calls() -> None:
    calls = '[{"toolCallId":"c","toolName":"f","input":"{\\"a\\": 1}"}]'
    _, outputs, deg = call_with(
        [], reasoning="why", text="so", toolCalls=calls, finishReason="tool-calls"
    )
    assert outputs == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "why"},
                {"type": "text", "content": "so"},
                {"type": "tool_call", "id": "c", "name": "f", "arguments": {"a": 1}},
            ],
            "finish_reason": "tool_call",
        }
    ]
    assert deg == {}


def test_finish_reasons_map_onto_the_canonical_ones() -> None:
    for sdk, canonical in [
        ("stop", "stop"),
        ("length", "length"),
        ("content-filter", "content_filter"),
        ("tool-calls", "tool_call"),
        ("error", "error"),
        ("other", "other"),
        ("unknown", None),
    ]:
        _, outputs, _ = call_with([], text="x", finishReason=sdk)
        assert outputs[0]["finish_reason"] == canonical, sdk


def test_tools_tool_choice_and_settings() -> None:
    provider_tool = {
        "type": "provider",
        "id": "openai.web_search",
        "name": "web_search",
        "args": {},
    }
    attrs = {
        **CALL,
        "ai.prompt.messages": "[]",
        "ai.prompt.tools": [
            TOOL,
            orjson.dumps(provider_tool).decode(),
            "{bad",
            '{"type": "function"}',
        ],
        "ai.prompt.toolChoice": '{"type":"tool","toolName":"get_weather"}',
        "ai.settings.topP": 0.9,
        "ai.settings.stopSequences": ["END"],
        "ai.settings.maxRetries": 2,
    }
    f = translate_attributes(attrs)
    assert isinstance(f, InferenceCall)
    assert [(t.name, t.builtin) for t in f.tools] == [
        ("get_weather", None),
        ("web_search", provider_tool),
    ]
    assert f.degradations == {"malformed_messages": 1, "unsupported_tool": 1}
    assert f.request == {
        "stop": ["END"],
        "tool_choice": {"type": "tool", "toolName": "get_weather"},
        "top_p": 0.9,
    }
    f = fact({**CALL, "ai.prompt.messages": "[]", "ai.prompt.toolChoice": '{"type":"required"}'})
    assert f.request == {"tool_choice": "required"}


def test_an_id_the_sdk_made_up_is_no_model_call_id() -> None:
    f = fact({**CALL, "ai.response.text": "x", "ai.response.id": "aitxt-0123456789abcdefABCDEFGH"})
    assert f.model_call_id is None
    f = fact({**CALL, "ai.response.text": "x", "ai.response.id": "chatcmpl-1"})
    assert f.model_call_id == "chatcmpl-1"


def test_ai_sdk_4_usage_and_generate_object() -> None:
    f = fact(
        {
            "ai.operationId": "ai.generateObject.doGenerate",
            "ai.model.provider": "anthropic.messages",
            "ai.model.id": "claude-x",
            "ai.prompt.messages": orjson.dumps(user({"type": "text", "text": "q"})).decode(),
            "ai.response.object": '{"a": 1}',
            "ai.usage.promptTokens": 5,
            "ai.usage.completionTokens": 3,
        }
    )
    assert (f.provider, f.model, f.input_tokens, f.output_tokens) == ("anthropic", "claude-x", 5, 3)
    assert msgspec.to_builtins(f.output_messages[0].parts) == [
        {"type": "text", "content": '{"a": 1}'}
    ]
    assert f.degradations == {"output_schema": 1}  # generateObject holds the answer to a schema


def _doc(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "ai"}, "spans": spans}]}]}


def _span(span_id: str, parent: str, attrs: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        "traceId": "ab" * 16,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": "1767225601000000000",
        "attributes": json_attrs(attrs),
    }


def test_the_run_span_is_skipped_and_its_calls_share_the_trace_as_session() -> None:
    run = {
        "ai.operationId": "ai.streamText",
        "ai.model.provider": "openai.chat",
        "ai.model.id": "gpt-4o-mini",
        "ai.prompt": '{"system": "s", "prompt": "p"}',
        "ai.response.text": ANSWER,
    }
    attrs = {k: v for k, v in RECORDED.items() if k != "ai.telemetry.metadata.sessionId"}
    spans = [
        _span("1" * 16, "", run, "ai.streamText"),
        _span("2" * 16, "1" * 16, attrs, "ai.streamText.doStream"),
        _span("3" * 16, "1" * 16, {"ai.operationId": "ai.toolCall"}, "ai.toolCall"),
    ]
    results = list(translate_spans(json_spans(_doc(spans)).units))
    assert [r.reason for r in results if isinstance(r, Skip)] == ["not_genai", "not_genai"]
    (f,) = [r for r in results if isinstance(r, InferenceCall)]
    assert f.session_id == "ab" * 16
    # The application's sessionId wins over the trace.
    spans[1] = _span("2" * 16, "1" * 16, RECORDED, "ai.streamText.doStream")
    (f,) = [
        r for r in translate_spans(json_spans(_doc(spans)).units) if isinstance(r, InferenceCall)
    ]
    assert f.session_id == "weather-session-plain"


def test_a_call_span_without_content_is_its_metadata() -> None:
    """recordInputs and recordOutputs off: the span keeps its metadata, no content."""
    attrs = {
        k: v
        for k, v in RECORDED.items()
        if not k.startswith(("ai.prompt.", "ai.response.text", "ai.response.providerMetadata"))
    }
    spans = [_span("2" * 16, "", attrs, "ai.generateText.doGenerate")]
    (f,) = list(translate_spans(json_spans(_doc(spans)).units))
    assert isinstance(f, InferenceCall), f
    assert (f.source.name, f.provider, f.model_call_id) == (
        "vercel-ai",
        "openai",
        "chatcmpl-plain-0002",
    )
    assert f.input_messages == f.output_messages == []
    assert f.request == {"max_tokens": 256, "seed": 7, "temperature": 0.2}
    assert f.degradations == {"content_not_captured": 1}
    # Without a span identity nothing could join it to its content.
    assert isinstance(translate_attributes(attrs), Skip)


def test_other_conventions_spans_are_not_claimed() -> None:
    deg = Degradations()
    assert vercel_ai.span_content({"gen_ai.request.model": "m"}, [], deg, "s") is None
    assert vercel_ai.span_content({"ai.operationId": "ai.embed.doEmbed"}, [], deg, "s") is None
    assert vercel_ai.span_content({"ai.operationId": "ai.generateText"}, [], deg, "s") is None
    assert not deg


# ---------------------------------------------------------------------------------------------
# property: whatever the attributes hold, a fact or a skip, never an exception

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
part_types = st.sampled_from(
    [
        "text",
        "reasoning",
        "redacted-reasoning",
        "file",
        "image",
        "tool-call",
        "tool-result",
        "tool-approval-response",
        "other",
    ]
)
parts = st.fixed_dictionaries(
    {"type": part_types},
    optional={
        "text": json_values,
        "data": st.one_of(st.text(), st.just("aGVsbG8="), json_values),
        "image": json_values,
        "mediaType": st.one_of(st.sampled_from(["image/png", "application/pdf", ""]), json_values),
        "toolCallId": st.one_of(st.text(max_size=4), json_values),
        "toolName": st.one_of(st.sampled_from(["f", "g"]), json_values),
        "input": json_values,
        "args": json_values,
        "output": st.one_of(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(
                        [
                            "text",
                            "json",
                            "error-text",
                            "error-json",
                            "execution-denied",
                            "content",
                            "x",
                        ]
                    )
                },
                optional={"value": json_values, "reason": json_values},
            ),
            json_values,
        ),
        "result": json_values,
        "providerExecuted": st.booleans(),
        "providerOptions": json_values,
    },
)
messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.one_of(
                st.sampled_from(["system", "user", "assistant", "tool"]), json_values
            ),
            "content": st.one_of(st.text(), st.lists(parts, max_size=4), json_values),
        }
    )
    | json_values,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    prompt=st.one_of(
        messages.map(lambda m: orjson.dumps(m).decode()), messages, json_values, st.text()
    ),
    response=st.dictionaries(
        st.sampled_from(
            ["text", "reasoning", "toolCalls", "object", "finishReason", "id", "model"]
        ),
        st.one_of(json_values, st.lists(parts, max_size=3).map(lambda p: orjson.dumps(p).decode())),
    ),
    tools=st.one_of(
        json_values, st.lists(st.one_of(st.text(), json_values.map(orjson.dumps)), max_size=3)
    ),
    choice=json_values,
    usage=json_values,
)
def test_any_attribute_values_give_valid_facts(
    prompt: Any, response: dict[str, Any], tools: Any, choice: Any, usage: Any
) -> None:
    attrs: dict[str, Any] = {
        **CALL,
        "ai.prompt.messages": prompt,
        "ai.prompt.tools": tools,
        "ai.prompt.toolChoice": choice,
        "ai.usage.inputTokens": usage,
        **{f"ai.response.{k}": v for k, v in response.items()},
    }
    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
    result = translate_attributes(attrs)
    assert isinstance(result, InferenceCall | Skip)
    if isinstance(result, InferenceCall):
        assert result.source.name == "vercel-ai"
        assert_valid_messages(result)
        assert set(result.degradations) <= set(DEGRADATION_REASONS)
        for m in result.output_messages:
            assert m.role == "assistant"
        for m in result.input_messages:
            assert m.finish_reason is None
