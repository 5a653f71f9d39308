"""OpenInference flattened attributes (llm.input_messages.N.message.* …) to facts."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import orjson
from hypothesis import given
from hypothesis import strategies as st

from lithify.model import (
    DEGRADATION_REASONS,
    InferenceCall,
    Message,
    ReasoningPart,
    Skip,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
)
from lithify.translate import openinference
from lithify.translate._common import Degradations
from lithify.translate.otlp import json_spans
from lithify.translate.telemetry import translate_attributes, translate_spans
from tests.conftest import CORPUS
from tests.helpers import assert_valid_messages

IN = "llm.input_messages"
OUT = "llm.output_messages"


def fact(attrs: dict[str, Any]) -> InferenceCall:
    result = translate_attributes({"openinference.span.kind": "LLM", **attrs})
    assert isinstance(result, InferenceCall), result
    assert result.source.name == "openinference"
    assert_valid_messages(result)
    return result


def msgs(messages: list[Any]) -> list[dict[str, Any]]:
    return msgspec.to_builtins(messages)


def texts(messages: list[Any]) -> list[str]:
    return [p["content"] for m in msgs(messages) for p in m["parts"] if p["type"] == "text"]


def span_fact(rel: str) -> InferenceCall:
    doc = orjson.loads((CORPUS / rel).read_bytes())
    (result,) = list(translate_spans(json_spans(doc).units))
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def call(prefix: str, m: int, cid: str | None, name: str, args: str | None) -> dict[str, Any]:
    base = f"{prefix}.message.tool_calls.{m}.tool_call"
    out: dict[str, Any] = {f"{base}.function.name": name}
    if cid is not None:
        out[f"{base}.id"] = cid
    if args is not None:
        out[f"{base}.function.arguments"] = args
    return out


# --- ordering and roles ---------------------------------------------------------------------


def test_messages_and_contents_sort_numerically() -> None:
    items: list[tuple[str, Any]] = []
    for i in range(12):
        items += [(f"{IN}.{i}.message.role", "user"), (f"{IN}.{i}.message.content", f"m{i}")]
    for j in range(11):
        items += [
            (f"{OUT}.0.message.contents.{j}.message_content.type", "text"),
            (f"{OUT}.0.message.contents.{j}.message_content.text", f"c{j}"),
        ]
    random.Random(3).shuffle(items)
    f = fact(dict(items))
    assert texts(f.input_messages) == [f"m{i}" for i in range(12)]
    assert texts(f.output_messages) == [f"c{j}" for j in range(11)]


def test_roles_are_kept_and_function_becomes_tool() -> None:
    f = fact(
        {
            f"{IN}.0.message.role": "developer",
            f"{IN}.0.message.content": "be brief",
            f"{IN}.1.message.role": "system",
            f"{IN}.1.message.content": "sys",
            f"{IN}.2.message.role": "function",
            f"{IN}.2.message.name": "f",
            f"{IN}.2.message.content": "42",
        }
    )
    assert [m.role for m in f.input_messages] == ["developer", "system", "tool"]


def test_no_messages_is_none() -> None:
    attrs = {"llm.tools.0.tool.json_schema": '{"name": "f"}', "llm.model_name": "gpt-4o"}
    assert openinference.span_content(attrs, [], Degradations(), "t:s") is None
    result = translate_attributes({"openinference.span.kind": "LLM", **attrs})
    assert isinstance(result, Skip) and result.reason == "content_not_captured"


def test_a_span_with_hidden_messages_is_a_metadata_only_fact() -> None:
    """OPENINFERENCE_HIDE_INPUTS / HIDE_OUTPUTS: no messages, the metadata stays on the span;
    with its OTLP identity the span is kept as a capture of the call without messages."""
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o",
        "llm.provider": "openai",
        "llm.token_count.prompt": 21,
        "llm.token_count.completion": 4,
        "llm.invocation_parameters": '{"temperature": 0.5}',
        "session.id": "s-1",
        "input.value": "__REDACTED__",
        "output.value": "__REDACTED__",
    }
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "parentSpanId": "00f067aa0ba902b7",
        "name": "ChatCompletion",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2000001",
        "attributes": [{"key": k, "value": _any(v)} for k, v in attrs.items()],
    }
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    (f,) = list(translate_spans(json_spans(doc).units))
    assert isinstance(f, InferenceCall), f
    assert f.source.name == "openinference"
    assert (f.input_messages, f.output_messages, f.tools) == ([], [], [])
    assert f.degradations == {"content_not_captured": 1}
    assert (f.provider, f.model, f.input_tokens, f.output_tokens) == ("openai", "gpt-4o", 21, 4)
    assert f.request == {"temperature": 0.5}
    assert (f.session_id, f.parent_span_id, f.duration_ms) == ("s-1", "00f067aa0ba902b7", 2.0)


def _any(v: Any) -> dict[str, Any]:
    return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}


# --- tool calls and results -----------------------------------------------------------------


def test_tool_results_pair_by_id_then_name_then_order() -> None:
    f = fact(
        {
            f"{IN}.0.message.role": "assistant",
            **call(f"{IN}.0", 0, "a", "get_a", "{}"),
            **call(f"{IN}.0", 1, "b", "get_b", "{}"),
            **call(f"{IN}.0", 2, "c", "get_c", "{}"),
            f"{IN}.1.message.role": "function",
            f"{IN}.1.message.name": "get_b",
            f"{IN}.1.message.content": "rb",
            f"{IN}.2.message.role": "tool",
            f"{IN}.2.message.tool_call_id": "c",
            f"{IN}.2.message.content": "rc",
            f"{IN}.3.message.role": "tool",
            f"{IN}.3.message.content": "ra",
        }
    )
    results = [m["parts"][0] for m in msgs(f.input_messages)[1:]]
    assert [(r["id"], r["result"]) for r in results] == [("b", "rb"), ("c", "rc"), ("a", "ra")]
    assert f.degradations == {}


def test_user_message_carrying_a_tool_call_id_is_a_tool_result() -> None:
    # openinference-instrumentation-anthropic records a tool_result block this way
    f = fact(
        {
            f"{IN}.0.message.role": "user",
            f"{IN}.0.message.tool_call_id": "toolu_1",
            f"{IN}.0.message.content": "sunny",
        }
    )
    assert msgs(f.input_messages) == [
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "toolu_1", "result": "sunny"}],
            "finish_reason": None,
        }
    ]


def _answered_call() -> dict[str, Any]:
    return {f"{IN}.0.message.role": "assistant", **call(f"{IN}.0", 0, "c1", "f", "{}")}


def test_contents_beside_a_tool_result_are_kept_after_it() -> None:
    # A result with content beside other contents (an Anthropic user turn holding a tool_result
    # and text, recorded with tool_call_id): the rest of the message follows as a user message.
    f = fact(
        {
            **_answered_call(),
            f"{IN}.1.message.role": "user",
            f"{IN}.1.message.tool_call_id": "c1",
            f"{IN}.1.message.content": "the result",
            f"{IN}.1.message.contents.0.message_content.type": "text",
            f"{IN}.1.message.contents.0.message_content.text": "the result",
            f"{IN}.1.message.contents.1.message_content.type": "text",
            f"{IN}.1.message.contents.1.message_content.text": "and a follow-up question",
            f"{IN}.1.message.contents.2.message_content.type": "reasoning",
            f"{IN}.1.message.contents.2.message_content.text": "hmm",
        }
    )
    assert f.input_messages == [
        Message("assistant", [ToolCallPart("c1", "f", {})]),
        Message("tool", [ToolCallResponsePart("c1", "the result")]),
        Message("user", [TextPart("and a follow-up question"), ReasoningPart("hmm")]),
    ]
    assert f.degradations == {}


def test_the_text_contents_of_a_tool_message_without_content_are_its_result() -> None:
    f = fact(
        {
            **_answered_call(),
            f"{IN}.1.message.role": "tool",
            f"{IN}.1.message.tool_call_id": "c1",
            f"{IN}.1.message.contents.0.message_content.type": "text",
            f"{IN}.1.message.contents.0.message_content.text": "part one",
            f"{IN}.1.message.contents.1.message_content.type": "reasoning",
            f"{IN}.1.message.contents.1.message_content.text": "hmm",
            f"{IN}.1.message.contents.2.message_content.type": "text",
            f"{IN}.1.message.contents.2.message_content.text": "part two",
        }
    )
    result = [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]
    assert f.input_messages[1:] == [
        Message("tool", [ToolCallResponsePart("c1", result)]),
        Message("user", [ReasoningPart("hmm")]),
    ]
    assert f.degradations == {}


def test_malformed_and_empty_arguments() -> None:
    f = fact(
        {
            f"{OUT}.0.message.role": "assistant",
            **call(OUT + ".0", 0, "a", "f", '{"x": '),
            **call(OUT + ".0", 1, "b", "f", '"just a string"'),
            **call(OUT + ".0", 2, "c", "f", ""),
            **call(OUT + ".0", 3, "d", "f", None),  # Responses calls with "{}" omit the key
            **call(OUT + ".0", 4, "e", "f", '{"ok": true}'),
        }
    )
    assert [p["arguments"] for p in msgs(f.output_messages)[0]["parts"]] == [
        {},
        {},
        {},
        {},
        {"ok": True},
    ]
    assert f.degradations == {"malformed_arguments": 2}


def test_missing_output_call_ids_are_recovered_from_the_raw_response() -> None:
    body = {
        "type": "message",
        "role": "assistant",
        "stop_reason": "tool_use",
        "content": [
            {"type": "tool_use", "id": "toolu_A", "name": "f", "input": {}},
            {"type": "tool_use", "id": "toolu_B", "name": "g", "input": {}},
        ],
    }
    attrs = {
        f"{OUT}.0.message.role": "assistant",
        **call(OUT + ".0", 0, None, "f", "{}"),
        **call(OUT + ".0", 1, None, "g", "{}"),
    }
    f = fact({**attrs, "output.value": orjson.dumps(body).decode()})
    assert [p["id"] for p in msgs(f.output_messages)[0]["parts"]] == ["toolu_A", "toolu_B"]
    assert f.output_messages[0].finish_reason == "tool_call"
    assert f.degradations == {}
    bare = fact(attrs)
    assert all(p["id"].startswith("lithify_") for p in msgs(bare.output_messages)[0]["parts"])
    assert bare.degradations == {"synthesized_id": 2}


def test_legacy_function_call_attributes() -> None:
    f = fact(
        {
            f"{OUT}.0.message.role": "assistant",
            f"{OUT}.0.message.function_call_name": "get_weather",
            f"{OUT}.0.message.function_call_arguments_json": '{"city": "Paris"}',
        }
    )
    part = msgs(f.output_messages)[0]["parts"][0]
    assert (part["name"], part["arguments"]) == ("get_weather", {"city": "Paris"})
    assert f.degradations == {"synthesized_id": 1}


def test_server_side_calls_are_server_tool_calls() -> None:
    f = fact(
        {
            f"{OUT}.0.message.role": "assistant",
            **call(OUT + ".0", 0, "ws_1", "web_search_call", None),
            f"{OUT}.1.message.role": "assistant",
            f"{OUT}.1.message.contents.0.message_content.type": "text",
            f"{OUT}.1.message.contents.0.message_content.text": "Found it.",
        }
    )
    assert msgs(f.output_messages) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "server_tool_call",
                    "id": "ws_1",
                    "name": "web_search",
                    "server_tool_call": {"type": "web_search_call"},
                },
                {"type": "text", "content": "Found it."},
            ],
            "finish_reason": None,
        }
    ]
    assert f.degradations == {}


# --- content --------------------------------------------------------------------------------


def test_image_url_contents_are_uri_parts() -> None:
    f = span_fact("openinference/envoy_chat_multimodal.span.json")
    url = (
        "https://upload.wikimedia.org/wikipedia/commons/thumb/d/dd/"
        "Gfp-wisconsin-madison-the-nature-boardwalk.jpg/"
        "2560px-Gfp-wisconsin-madison-the-nature-boardwalk.jpg"
    )
    assert msgs(f.input_messages) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "What is in this image?"},
                {"type": "uri", "modality": "image", "mime_type": None, "uri": url},
            ],
            "finish_reason": None,
        }
    ]
    assert f.degradations == {"content_reference": 1}
    # no output content; the finish reason comes from the raw chat completion
    assert msgs(f.output_messages) == [
        {"role": "assistant", "parts": [], "finish_reason": "length"}
    ]


def test_content_and_contents_are_both_kept_without_duplicates() -> None:
    f = fact(
        {
            f"{IN}.0.message.role": "user",
            f"{IN}.0.message.content": "look",
            f"{IN}.0.message.contents.0.message_content.type": "text",
            f"{IN}.0.message.contents.0.message_content.text": "look",
            f"{IN}.0.message.contents.1.message_content.type": "text",
            f"{IN}.0.message.contents.1.message_content.text": "closely",
            f"{IN}.1.message.role": "user",
            f"{IN}.1.message.content": "first",
            f"{IN}.1.message.contents.0.message_content.type": "image",
            f"{IN}.1.message.contents.0.message_content.image.image.url": "data:image/png;base64,AAAA",
        }
    )
    assert [texts([m]) for m in f.input_messages] == [["look", "closely"], ["first"]]
    # the 4 zero bytes of the data URL, after the plain content
    assert msgs(f.input_messages)[1]["parts"][1] == {
        "type": "blob",
        "modality": "image",
        "mime_type": "image/png",
        "size": 3,
        "sha256": "709e80c88487a2411e1ee4dfb9f22a861492d20c4765150c0c794abd70f8147c",
        "content": "AAAA",
    }
    assert f.degradations == {}


def test_reasoning_contents_and_opaque_signatures() -> None:
    f = fact(
        {
            f"{OUT}.0.message.role": "assistant",
            f"{OUT}.0.message.contents.0.message_content.type": "reasoning",
            f"{OUT}.0.message.contents.0.message_content.text": "think",
            f"{OUT}.0.message.contents.0.message_content.signature": "sig==",
            f"{OUT}.0.message.contents.1.message_content.type": "text",
            f"{OUT}.0.message.contents.1.message_content.text": "answer",
        }
    )
    assert msgs(f.output_messages)[0]["parts"] == [
        {"type": "reasoning", "content": "think"},
        {"type": "text", "content": "answer"},
    ]
    assert f.degradations == {"opaque_reasoning": 1}


# --- merging split Responses answers ------------------------------------------------------------

_RESPONSE = {
    "object": "response",
    "status": "completed",
    "output": [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Need weather."}],
            "encrypted_content": "gAAA",
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get",
            "arguments": '{"c": "Paris"}',
        },
        {"type": "function_call", "call_id": "call_2", "name": "get", "arguments": '{"c": "Rome"}'},
    ],
}


def _responses_output_attrs() -> dict[str, Any]:
    return {
        f"{OUT}.0.message.role": "assistant",
        f"{OUT}.0.message.contents.0.message_content.type": "text",
        f"{OUT}.0.message.contents.0.message_content.text": "Need weather.",
        f"{OUT}.1.message.role": "assistant",
        f"{OUT}.1.message.contents.0.message_content.type": "text",
        f"{OUT}.1.message.contents.0.message_content.text": "Checking.",
        f"{OUT}.2.message.role": "assistant",
        **call(OUT + ".2", 0, "call_1", "get", '{"c": "Paris"}'),
        f"{OUT}.3.message.role": "assistant",
        **call(OUT + ".3", 0, "call_2", "get", '{"c": "Rome"}'),
    }


def test_split_responses_output_merges_into_one_assistant_message() -> None:
    f = fact({**_responses_output_attrs(), "output.value": orjson.dumps(_RESPONSE).decode()})
    assert len(f.output_messages) == 1
    out = msgs(f.output_messages)[0]
    assert [p["type"] for p in out["parts"]] == ["reasoning", "text", "tool_call", "tool_call"]
    assert out["parts"][0]["content"] == "Need weather."
    assert out["finish_reason"] == "tool_call"
    assert f.degradations == {"opaque_reasoning": 1}


def test_without_the_raw_body_reasoning_cannot_be_told_from_text() -> None:
    f = fact(_responses_output_attrs())
    out = msgs(f.output_messages)[0]
    assert [p["type"] for p in out["parts"]] == ["text", "text", "tool_call", "tool_call"]
    assert out["finish_reason"] is None


def test_replayed_responses_input_merges_and_relabels_reasoning() -> None:
    request = {
        "model": "o4-mini",
        "input": [
            {"role": "user", "content": "Weather?"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Need weather."}],
            },
            {"type": "function_call", "call_id": "call_1", "name": "get", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        ],
    }
    f = fact(
        {
            "input.value": orjson.dumps(request).decode(),
            f"{IN}.1.message.role": "user",
            f"{IN}.1.message.content": "Weather?",
            f"{IN}.2.message.role": "assistant",
            f"{IN}.2.message.contents.0.message_content.type": "text",
            f"{IN}.2.message.contents.0.message_content.text": "Need weather.",
            f"{IN}.3.message.role": "assistant",
            **call(f"{IN}.3", 0, "call_1", "get", None),
            f"{IN}.4.message.role": "tool",
            f"{IN}.4.message.tool_call_id": "call_1",
            f"{IN}.4.message.content": "sunny",
        }
    )
    m = msgs(f.input_messages)
    assert [x["role"] for x in m] == ["user", "assistant", "tool"]
    assert [p["type"] for p in m[1]["parts"]] == ["reasoning", "tool_call"]


def _captured_responses_turn(prefix: str, start: int) -> dict[str, Any]:
    """One Responses answer as openinference-instrumentation-openai 0.1.66 records it (captured
    against a local fake server): reasoning, message and each function call as separate messages."""
    p = [f"{prefix}.{start + i}.message" for i in range(4)]
    return {
        f"{p[0]}.role": "assistant",
        f"{p[0]}.contents.0.message_content.type": "reasoning",
        f"{p[0]}.contents.0.message_content.text": "Need both cities.",
        f"{p[0]}.contents.0.message_content.encrypted_content": "gAAAA",
        f"{p[1]}.role": "assistant",
        f"{p[1]}.contents.0.message_content.type": "text",
        f"{p[1]}.contents.0.message_content.text": "Checking both.",
        f"{p[2]}.role": "assistant",
        **call(p[2].removesuffix(".message"), 0, "call_A", "get_weather", '{"city":"Paris"}'),
        f"{p[3]}.role": "assistant",
        **call(p[3].removesuffix(".message"), 0, "call_B", "get_weather", '{"city":"Rome"}'),
    }


def test_captured_responses_output_equals_its_replay_in_the_next_call() -> None:
    head = {
        f"{IN}.0.message.role": "system",
        f"{IN}.0.message.content": "Be brief.",
        f"{IN}.1.message.role": "user",
        f"{IN}.1.message.content": "Weather in Paris and Rome?",
    }
    first = fact(
        {
            **head,
            **_captured_responses_turn(OUT, 0),
            "output.value": orjson.dumps(
                {
                    "object": "response",
                    "status": "completed",
                    "output": [
                        {"type": "function_call", "call_id": "call_A", "name": "get_weather"}
                    ],
                }
            ).decode(),
        }
    )
    second = fact(
        {
            **head,
            **_captured_responses_turn(IN, 2),
            f"{IN}.6.message.role": "tool",
            f"{IN}.6.message.tool_call_id": "call_A",
            f"{IN}.6.message.content": "18C",
            f"{IN}.7.message.role": "tool",
            f"{IN}.7.message.tool_call_id": "call_B",
            f"{IN}.7.message.content": "22C",
        }
    )
    (out,) = first.output_messages
    assert [p["type"] for p in msgs([out])[0]["parts"]] == [
        "reasoning",
        "text",
        "tool_call",
        "tool_call",
    ]
    assert out.finish_reason == "tool_call"
    replay = second.input_messages[2]
    assert (replay.role, replay.parts) == (out.role, out.parts)
    assert [m.role for m in second.input_messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
    ]
    assert first.degradations == second.degradations == {"opaque_reasoning": 1}


def test_several_choices_stay_separate_with_finish_reasons_by_index() -> None:
    body = {
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "a"}},
            {
                "index": 1,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": "b"},
            },
        ],
    }
    attrs = {
        "llm.invocation_parameters": '{"n": 2}',
        f"{OUT}.0.message.role": "assistant",
        f"{OUT}.0.message.content": "a",
        f"{OUT}.1.message.role": "assistant",
        f"{OUT}.1.message.content": "b",
    }
    f = fact({**attrs, "output.value": orjson.dumps(body).decode()})
    assert [(texts([m]), m.finish_reason) for m in f.output_messages] == [
        (["a"], "stop"),
        (["b"], "length"),
    ]
    # the raw body alone also says there were two choices
    del attrs["llm.invocation_parameters"]
    assert len(fact({**attrs, "output.value": orjson.dumps(body).decode()}).output_messages) == 2


def test_own_finish_reason_attribute_wins() -> None:
    f = fact(
        {
            f"{OUT}.0.message.role": "assistant",
            f"{OUT}.0.message.content": "x",
            "llm.finish_reason": "max_tokens",
            "output.value": '{"choices": [{"finish_reason": "stop"}]}',
        }
    )
    assert f.output_messages[0].finish_reason == "length"


# --- failed calls, completions API ------------------------------------------------------------


def test_failed_call_keeps_its_input_and_has_no_output() -> None:
    f = span_fact("openinference/envoy_chat_bad_request.span.json")
    assert msgs(f.input_messages) == [{"role": "user", "parts": [], "finish_reason": None}]
    assert f.output_messages == []
    assert f.raw["status"]["code"] == 2


def test_completions_api_prompts_and_choices() -> None:
    f = fact(
        {
            "llm.prompts": ["Once upon a time"],
            "llm.choices.0.completion.text": " there was a fox.",
            "output.value": '{"choices": [{"finish_reason": "stop", "text": " there was a fox."}]}',
        }
    )
    assert texts(f.input_messages) == ["Once upon a time"]
    assert msgs(f.output_messages) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": " there was a fox."}],
            "finish_reason": "stop",
        }
    ]
    g = fact({"llm.prompts.0.prompt.text": "Hello"})
    assert texts(g.input_messages) == ["Hello"] and g.output_messages == []


# --- tools --------------------------------------------------------------------------------------


def test_tool_json_schemas_of_every_provider_shape() -> None:
    schemas = [
        {
            "type": "function",
            "function": {"name": "chat", "description": "d", "parameters": {"type": "object"}},
        },
        {
            "type": "function",
            "name": "responses",
            "parameters": {"type": "object", "required": ["q"]},
            "strict": True,
        },
        {"name": "anthropic", "description": "a", "input_schema": {"type": "object"}},
        {"type": "web_search_preview"},
    ]
    attrs: dict[str, Any] = {f"{IN}.0.message.content": "hi"}
    for i, s in enumerate(schemas):
        attrs[f"llm.tools.{i}.tool.json_schema"] = orjson.dumps(s).decode()
    attrs["llm.tools.4.tool.json_schema"] = "{not json"
    f = fact(attrs)
    assert msgspec.to_builtins(f.tools) == [
        {"name": "chat", "description": "d", "parameters": {"type": "object"}},
        {
            "name": "responses",
            "description": None,
            "parameters": {"type": "object", "required": ["q"]},
        },
        {"name": "anthropic", "description": "a", "parameters": {"type": "object"}},
        {"name": "web_search", "description": None, "parameters": {},
         "builtin": {"type": "web_search_preview"}},
    ]  # fmt: skip
    assert f.degradations == {"unsupported_tool": 1}  # the schema that is not JSON


# --- output schemas -------------------------------------------------------------------------

ANSWER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def test_a_schema_in_the_recorded_request_is_counted_once() -> None:
    # The OpenAI instrumentation keeps response_format and Responses' text in the invocation
    # parameters, the Google GenAI one the SDK's config; every one records the request body
    # (input.value), the only place the Anthropic one keeps output_format.
    attrs = {f"{IN}.0.message.content": "Where is the Louvre?", f"{OUT}.0.message.content": "{}"}
    chat = {"response_format": {"type": "json_schema", "json_schema": {"name": "place", "schema": ANSWER_SCHEMA}}}  # fmt: skip
    responses = {"text": {"format": {"type": "json_schema", "name": "place", "schema": ANSWER_SCHEMA}}}  # fmt: skip
    genai_config = {"response_mime_type": "application/json", "response_json_schema": ANSWER_SCHEMA}
    anthropic = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "Where is the Louvre?"}], "output_format": {"type": "json_schema", "schema": ANSWER_SCHEMA}}  # fmt: skip
    for key, request, counted in [
        ("llm.invocation_parameters", chat, True),
        ("llm.invocation_parameters", responses, True),
        ("llm.invocation_parameters", genai_config, True),
        ("input.value", anthropic, True),
        # vLLM's constrained decoding, as extra body fields of a Chat request.
        ("input.value", {"model": "qwen", "messages": [], "guided_choice": ["Paris"]}, True),
        ("input.value", {"model": "qwen", "structured_outputs": {"regex": "[A-Z]+"}}, True),
        ("llm.invocation_parameters", {"response_format": {"type": "json_object"}}, False),
        ("llm.invocation_parameters", {"text": {"format": {"type": "text"}}}, False),
        ("llm.invocation_parameters", {"response_mime_type": "application/json"}, False),
        ("input.value", {**anthropic, "output_format": None}, False),
    ]:
        f = fact({**attrs, key: orjson.dumps(request).decode()})
        assert f.degradations == ({"output_schema": 1} if counted else {}), request


# --- corpus through the real readers -----------------------------------------------------------


def test_parallel_tools_span() -> None:
    f = span_fact("openinference/envoy_chat_parallel_tools.span.json")
    assert msgs(f.output_messages) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_Xc4Aiih37EUJvqjoZlu4Vdoi",
                    "name": "get_current_weather",
                    "arguments": {"location": "San Francisco, CA"},
                }
            ],
            "finish_reason": "tool_call",
        }
    ]
    assert [t.name for t in f.tools] == ["get_current_weather"]


def test_flat_attribute_corpus_file() -> None:
    doc = orjson.loads(
        (CORPUS / "openinference/flat_attributes_tool_calls_contents.json").read_bytes()
    )
    result = translate_attributes(doc)
    assert isinstance(result, InferenceCall)
    m = msgs(result.input_messages)
    assert [x["role"] for x in m] == ["user", "assistant", "tool"]
    assert m[1]["parts"][1]["id"] == "1234" and m[2]["parts"][0]["id"] == "1234"
    assert result.output_messages[0].finish_reason == "stop"
    assert result.raw == doc


# --- properties ---------------------------------------------------------------------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_value = (
    _json
    | st.sampled_from(
        ["user", "assistant", "tool", "function", "text", "image", "reasoning", "{}", '{"a": 1}']
    )
    | _json.map(lambda v: orjson.dumps(v).decode())
)
_field = st.sampled_from(
    [
        "message.role",
        "message.content",
        "message.name",
        "message.tool_call_id",
        "message.function_call_name",
        "message.function_call_arguments_json",
        "message.contents.0.message_content.type",
        "message.contents.0.message_content.text",
        "message.contents.1.message_content.type",
        "message.contents.1.message_content.image.image.url",
        "message.contents.1.message_content.signature",
        "message.contents.2.message_content.file.file.url",
        "message.contents.2.message_content.file.file.id",
        "message.contents.2.message_content.file.file.name",
        "message.tool_calls.0.tool_call.id",
        "message.tool_calls.0.tool_call.function.name",
        "message.tool_calls.0.tool_call.function.arguments",
        "tool.json_schema",
        "prompt.text",
        "completion.text",
    ]
)
_key = st.builds(
    lambda p, n, f: f"{p}.{n}.{f}",
    st.sampled_from([IN, OUT, "llm.tools", "llm.prompts", "llm.choices"]),
    st.integers(0, 12),
    _field,
) | st.sampled_from(
    ["output.value", "input.value", "llm.invocation_parameters", "llm.finish_reason", "llm.prompts"]
)
_raw_body = st.fixed_dictionaries(
    {},
    optional={
        "object": st.sampled_from(["response", "chat.completion"]),
        "status": st.sampled_from(["completed", "incomplete", "failed", "queued"]),
        "choices": st.lists(
            st.dictionaries(st.sampled_from(["finish_reason", "message", "index"]), _json)
        ),
        "output": st.lists(
            st.dictionaries(
                st.sampled_from(["type", "summary", "name", "call_id"]),
                _json | st.just("reasoning"),
            )
        ),
        "content": st.lists(_json),
        "stop_reason": _json,
    },
).map(lambda d: orjson.dumps(d).decode())


@given(st.dictionaries(_key, _value, max_size=12), st.none() | _raw_body)
def test_arbitrary_attribute_values_never_raise_and_messages_validate(
    attrs: dict[str, Any], body: str | None
) -> None:
    if body is not None:
        attrs = {**attrs, "output.value": body}
    result = translate_attributes({"openinference.span.kind": "LLM", **attrs})
    assert isinstance(result, InferenceCall | Skip)
    if isinstance(result, InferenceCall):
        assert_valid_messages(result)
        assert set(result.degradations) <= set(DEGRADATION_REASONS)
        assert all(m.finish_reason is None for m in result.input_messages)


@given(st.dictionaries(_key, _json | st.integers(), max_size=8))
def test_span_content_never_raises_on_unbounded_values(attrs: dict[str, Any]) -> None:
    content = openinference.span_content(attrs, [], Degradations(), "None:None")
    assert content is None or content.source == "openinference"
