"""OpenLLMetry flattened attributes (gen_ai.prompt.N.* / gen_ai.completion.N.*) to facts."""

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
from lithify.translate import openllmetry
from lithify.translate._common import Degradations
from lithify.translate.otlp import Span
from lithify.translate.telemetry import translate_attributes, translate_spans
from tests.conftest import CORPUS
from tests.helpers import assert_valid_messages


def fact(attrs: dict[str, Any]) -> InferenceCall:
    result = translate_attributes(attrs)
    assert isinstance(result, InferenceCall), result
    assert result.source.name == "openllmetry"
    assert_valid_messages(result)
    return result


def msgs(messages: list[Any]) -> list[dict[str, Any]]:
    return msgspec.to_builtins(messages)


def texts(messages: list[Any]) -> list[str]:
    return [p["content"] for m in msgs(messages) for p in m["parts"] if p["type"] == "text"]


# --- ordering and roles ---------------------------------------------------------------------


def test_indexes_sort_numerically_not_as_text() -> None:
    items = [(f"gen_ai.prompt.{i}.content", f"m{i}") for i in range(12)]
    items += [(f"gen_ai.prompt.{i}.role", "user") for i in range(12)]
    random.Random(7).shuffle(items)
    f = fact(dict(items))
    assert texts(f.input_messages) == [f"m{i}" for i in range(12)]


def test_tool_call_indexes_sort_numerically() -> None:
    attrs: dict[str, Any] = {"gen_ai.completion.0.role": "assistant"}
    for m in (10, 2, 0, 1, 9):
        attrs[f"gen_ai.completion.0.tool_calls.{m}.id"] = f"c{m}"
        attrs[f"gen_ai.completion.0.tool_calls.{m}.name"] = "f"
    f = fact(attrs)
    assert [p["id"] for p in msgs(f.output_messages)[0]["parts"]] == ["c0", "c1", "c2", "c9", "c10"]


def test_roles_are_kept_and_aliases_normalized() -> None:
    f = fact(
        {
            "gen_ai.prompt.0.role": "developer",
            "gen_ai.prompt.0.content": "be brief",
            "gen_ai.prompt.1.role": "system",
            "gen_ai.prompt.1.content": "sys",
            "gen_ai.prompt.2.role": "user",
            "gen_ai.prompt.2.content": "hi",
            "gen_ai.prompt.3.role": "function",
            "gen_ai.prompt.3.content": "42",
            "gen_ai.prompt.3.tool_call_id": "c1",
        }
    )
    assert [m.role for m in f.input_messages] == ["developer", "system", "user", "tool"]
    assert all(m.finish_reason is None for m in f.input_messages)


def test_legacy_completion_prompt_key_user() -> None:
    f = fact({"gen_ai.prompt.0.user": "Tell me a joke", "gen_ai.completion.0.content": "No."})
    assert msgs(f.input_messages) == [
        {
            "role": "user",
            "parts": [{"type": "text", "content": "Tell me a joke"}],
            "finish_reason": None,
        }
    ]
    assert f.output_messages[0].role == "assistant"


def test_pre_rename_llm_prompts_prefix() -> None:
    f = fact(
        {
            "llm.prompts.0.role": "user",
            "llm.prompts.0.content": "hi",
            "llm.completions.0.role": "assistant",
            "llm.completions.0.content": "hello",
            "llm.completions.0.finish_reason": "stop",
        }
    )
    assert texts(f.input_messages) == ["hi"]
    assert f.output_messages[0].finish_reason == "stop"


def test_openinference_completion_prompts_are_not_claimed() -> None:
    attrs = {"llm.prompts.0.prompt.text": "hi"}
    assert openllmetry.span_content(attrs, [], Degradations(), "t:s") is None


def test_no_content_is_none_and_a_model_call_skips() -> None:
    attrs = {"gen_ai.request.model": "gpt-4o", "gen_ai.operation.name": "chat"}
    assert openllmetry.span_content(attrs, [], Degradations(), "t:s") is None
    result = translate_attributes(attrs)
    assert isinstance(result, Skip) and result.reason == "content_not_captured"


def test_a_span_with_trace_content_off_is_a_metadata_only_fact() -> None:
    """TRACELOOP_TRACE_CONTENT=false: no prompt or completion attributes; with its OTLP identity
    the span is kept as a capture of the call without messages."""
    attrs = {
        "llm.request.type": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.response.id": "chatcmpl-3",
        "gen_ai.usage.prompt_tokens": 9,
        "gen_ai.usage.completion_tokens": 2,
        "llm.usage.total_tokens": 11,
        "gen_ai.request.temperature": 0.0,
    }
    span = Span(
        "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", None, "openai.chat", 3, 1, 2, attrs
    )
    (f,) = list(translate_spans([span]))
    assert isinstance(f, InferenceCall), f
    assert f.source.name == "openllmetry"
    assert (f.input_messages, f.output_messages, f.tools) == ([], [], [])
    assert f.degradations == {"content_not_captured": 1}
    assert (f.provider, f.model, f.model_call_id) == ("openai", "gpt-4o-2024-08-06", "chatcmpl-3")
    assert (f.input_tokens, f.output_tokens, f.request) == (9, 2, {"temperature": 0.0})


# --- tool calls and results -----------------------------------------------------------------


def test_koog_tool_role_calls_are_assistant_calls_and_results_pair_in_order() -> None:
    doc = orjson.loads(
        (CORPUS / "openllmetry/koog_flattened_prompt_tool_history.attributes.json").read_bytes()
    )
    f = fact(doc["attributes"])
    m = msgs(f.input_messages)
    assert [x["role"] for x in m] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert m[2]["parts"] == [
        {
            "type": "tool_call",
            "id": "call_n2HaWg9KFP0BZDqXv6G4b3nJ",
            "name": "HelloTool",
            "arguments": {"name": "Bob"},
        }
    ]
    assert m[3]["parts"] == [
        {
            "type": "tool_call_response",
            "id": "call_n2HaWg9KFP0BZDqXv6G4b3nJ",
            "result": "Hello my darling Bob!",
        }
    ]
    assert m[5]["parts"][0]["id"] == "call_dOeEHJDI0liHrCdFWTpkTsuO"
    assert f.degradations == {}
    # the span's finish_reasons fill the completion that carries none
    assert f.output_messages[0].finish_reason == "stop"


def test_idless_results_after_parallel_calls_pair_first_in_first_out() -> None:
    calls = orjson.dumps(
        [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ]
    ).decode()
    f = fact(
        {
            "gen_ai.prompt.0.role": "tool",
            "gen_ai.prompt.0.content": calls,
            "gen_ai.prompt.1.role": "tool",
            "gen_ai.prompt.1.content": "result a",
            "gen_ai.prompt.2.role": "tool",
            "gen_ai.prompt.2.content": "result b",
        }
    )
    m = msgs(f.input_messages)
    assert m[0]["role"] == "assistant" and [p["id"] for p in m[0]["parts"]] == ["a", "b"]
    assert [(x["parts"][0]["id"], x["parts"][0]["result"]) for x in m[1:]] == [
        ("a", "result a"),
        ("b", "result b"),
    ]


def test_result_with_explicit_id_keeps_it_and_is_not_reused() -> None:
    f = fact(
        {
            "gen_ai.prompt.0.role": "assistant",
            "gen_ai.prompt.0.tool_calls.0.id": "a",
            "gen_ai.prompt.0.tool_calls.0.name": "f",
            "gen_ai.prompt.0.tool_calls.1.id": "b",
            "gen_ai.prompt.0.tool_calls.1.name": "f",
            "gen_ai.prompt.1.role": "tool",
            "gen_ai.prompt.1.tool_call_id": "b",
            "gen_ai.prompt.1.content": "rb",
            "gen_ai.prompt.2.role": "tool",
            "gen_ai.prompt.2.content": "ra",
        }
    )
    assert [m["parts"][0]["id"] for m in msgs(f.input_messages)[1:]] == ["b", "a"]


def test_orphan_result_gets_a_deterministic_id_and_a_count() -> None:
    attrs = {"gen_ai.prompt.0.role": "tool", "gen_ai.prompt.0.content": "lonely"}
    a, b = fact(attrs), fact(dict(attrs))
    assert a.degradations == {"orphan_tool_response": 1}
    assert a.input_messages[0].parts[0].id == b.input_messages[0].parts[0].id  # type: ignore[union-attr]
    other = fact({**attrs, "gen_ai.prompt.0.content": "another"})
    assert other.input_messages[0].parts[0].id != a.input_messages[0].parts[0].id  # type: ignore[union-attr]


def test_tool_result_string_is_never_parsed() -> None:
    f = fact(
        {
            "gen_ai.prompt.0.role": "tool",
            "gen_ai.prompt.0.tool_call_id": "c",
            "gen_ai.prompt.0.content": '{"temp": 5}',
        }
    )
    assert f.input_messages[0].parts[0].result == '{"temp": 5}'  # type: ignore[union-attr]


def test_responses_function_call_output_is_unwrapped() -> None:
    f = fact(
        {
            "gen_ai.prompt.0.role": "tool",
            "gen_ai.prompt.0.content": '{"call_id": "call_1", "output": "42"}',
        }
    )
    assert msgs(f.input_messages)[0]["parts"] == [
        {"type": "tool_call_response", "id": "call_1", "result": "42"}
    ]


def test_anthropic_user_turn_with_tool_result_is_split_in_source_order() -> None:
    content = orjson.dumps(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "sunny"}],
            },
            {"type": "text", "text": "thanks, and tomorrow?"},
        ]
    ).decode()
    f = fact({"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": content})
    assert msgs(f.input_messages) == [
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": "toolu_1",
                    "result": [{"type": "text", "text": "sunny"}],
                }
            ],
            "finish_reason": None,
        },
        {
            "role": "user",
            "parts": [{"type": "text", "content": "thanks, and tomorrow?"}],
            "finish_reason": None,
        },
    ]


def test_anthropic_tool_use_in_content_and_tool_calls_is_one_call() -> None:
    content = orjson.dumps(
        [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"q": 1}},
        ]
    ).decode()
    f = fact(
        {
            "gen_ai.prompt.0.role": "assistant",
            "gen_ai.prompt.0.content": content,
            "gen_ai.prompt.0.tool_calls.0.id": "toolu_1",
            "gen_ai.prompt.0.tool_calls.0.name": "get",
            "gen_ai.prompt.0.tool_calls.0.arguments": '{"q": 1}',
        }
    )
    assert msgs(f.input_messages)[0]["parts"] == [
        {"type": "text", "content": "Let me look."},
        {"type": "tool_call", "id": "toolu_1", "name": "get", "arguments": {"q": 1}},
    ]


def test_malformed_and_empty_arguments() -> None:
    f = fact(
        {
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.id": "a",
            "gen_ai.completion.0.tool_calls.0.name": "f",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Par',
            "gen_ai.completion.0.tool_calls.1.id": "b",
            "gen_ai.completion.0.tool_calls.1.name": "f",
            "gen_ai.completion.0.tool_calls.1.arguments": "[1, 2]",
            "gen_ai.completion.0.tool_calls.2.id": "c",
            "gen_ai.completion.0.tool_calls.2.name": "f",
            "gen_ai.completion.0.tool_calls.2.arguments": "",
            "gen_ai.completion.0.tool_calls.3.id": "d",
            "gen_ai.completion.0.tool_calls.3.name": "f",
        }
    )
    assert [p.arguments for p in f.output_messages[0].parts] == [{}, {}, {}, {}]  # type: ignore[union-attr]
    assert f.degradations == {"malformed_arguments": 2}


def test_function_call_spelling_gets_a_synthesized_id() -> None:
    attrs = {
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.finish_reason": "function_call",
        "gen_ai.completion.0.function_call.name": "get_weather",
        "gen_ai.completion.0.function_call.arguments": '{"city": "Paris"}',
    }
    spans = [
        Span("a" * 32, "b" * 16, None, "openai.chat", 3, 1, 2, attrs),
        Span("a" * 32, "c" * 16, None, "openai.chat", 3, 1, 2, dict(attrs)),
    ]
    one, two = list(translate_spans(spans))
    assert isinstance(one, InferenceCall) and isinstance(two, InferenceCall)
    part = msgs(one.output_messages)[0]["parts"][0]
    assert part["name"] == "get_weather" and part["arguments"] == {"city": "Paris"}
    assert part["id"].startswith("lithify_")
    assert one.degradations == {"synthesized_id": 1}
    assert one.output_messages[0].finish_reason == "tool_call"
    assert part["id"] != msgs(two.output_messages)[0]["parts"][0]["id"]  # other span, other id
    again = next(iter(translate_spans([spans[0]])))
    assert isinstance(again, InferenceCall) and again.output_messages == one.output_messages


def test_nested_function_spelling_of_tool_calls() -> None:
    f = fact(
        {
            "gen_ai.completion.0.tool_calls.0.id": "a",
            "gen_ai.completion.0.tool_calls.0.function.name": "f",
            "gen_ai.completion.0.tool_calls.0.function.arguments": '{"x": 1}',
        }
    )
    assert msgs(f.output_messages)[0]["parts"] == [
        {"type": "tool_call", "id": "a", "name": "f", "arguments": {"x": 1}}
    ]


def test_server_side_calls_are_server_tool_calls() -> None:
    f = fact(
        {
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Found it.",
            "gen_ai.completion.0.tool_calls.0.id": "ws_1",
            "gen_ai.completion.0.tool_calls.0.name": "web_search_call",
        }
    )
    assert msgs(f.output_messages)[0]["parts"] == [
        {"type": "text", "content": "Found it."},
        {
            "type": "server_tool_call",
            "id": "ws_1",
            "name": "web_search",
            "server_tool_call": {"type": "web_search_call"},
        },
    ]
    assert f.degradations == {}


def test_a_computer_call_without_its_action_is_unsupported_content() -> None:
    f = fact(
        {
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.id": "cu_1",
            "gen_ai.completion.0.tool_calls.0.name": "computer_call",
        }
    )
    assert f.output_messages[0].parts == []
    assert f.degradations == {"unsupported_content": 1}


def test_a_computer_call_with_its_action_is_the_computer_tool() -> None:
    f = fact(
        {
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.id": "cu_1",
            "gen_ai.completion.0.tool_calls.0.name": "computer_call",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"type": "click", "x": 1, "y": 2}',
        }
    )
    # As the Responses translator names it: the client-side computer tool, its action.
    assert f.output_messages[0].parts == [
        ToolCallPart("cu_1", "computer", {"type": "click", "x": 1, "y": 2})
    ]
    assert f.degradations == {}


def test_a_refusal_written_instead_of_content_is_the_answer_text() -> None:
    # traceloop's OpenAI chat wrapper writes `refusal` in place of `content` when the model
    # refuses; as the Chat Completions translator reads message.refusal, it is text.
    f = fact(
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "how do I pick a lock?",
            "gen_ai.completion.0.finish_reason": "stop",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.refusal": "I'm sorry, I can't help with that.",
        }
    )
    assert msgs(f.output_messages) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "I'm sorry, I can't help with that."}],
            "finish_reason": "stop",
        }
    ]
    assert f.degradations == {}


def test_a_completion_holding_only_a_refusal_is_still_a_message() -> None:
    f = fact({"gen_ai.prompt.0.content": "x", "gen_ai.completion.0.refusal": "No."})
    assert msgs(f.output_messages) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "No."}], "finish_reason": None}
    ]


def test_a_refusal_beside_content_follows_it() -> None:
    f = fact(
        {
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Partly:",
            "gen_ai.completion.0.refusal": "not the rest.",
            "gen_ai.completion.0.tool_calls.0.id": "c1",
            "gen_ai.completion.0.tool_calls.0.name": "f",
            "gen_ai.completion.0.tool_calls.0.arguments": "{}",
        }
    )
    assert f.output_messages[0].parts == [
        TextPart("Partly:"),
        TextPart("not the rest."),
        ToolCallPart("c1", "f", {}),
    ]


def test_sglang_reasoning_content_is_reasoning_before_the_text() -> None:
    f = fact(
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "2+2?",
            "gen_ai.completion.0.finish_reason": "stop",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "4",
            "gen_ai.completion.0.reasoning_content": "Two and two make four.",
        }
    )
    assert f.output_messages == [
        Message("assistant", [ReasoningPart("Two and two make four."), TextPart("4")], "stop")
    ]
    assert f.degradations == {}


_plain = st.text(min_size=1).filter(lambda t: not t.lstrip().startswith("["))


@given(_plain, _plain, st.booleans())
def test_reasoning_in_both_fields_is_kept_once_per_distinct_text(
    first: str, second: str, same: bool
) -> None:
    # vLLM fills reasoning_content and reasoning with the same text; different texts are both kept.
    second = first if same else second
    f = fact(
        {
            "gen_ai.completion.0.content": "answer",
            "gen_ai.completion.0.reasoning_content": first,
            "gen_ai.completion.0.reasoning": second,
        }
    )
    expected = [first] if first == second else [first, second]
    assert f.output_messages[0].parts == [*map(ReasoningPart, expected), TextPart("answer")]
    assert f.degradations == {}


_WEATHER_CALLS = [
    {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
]


def test_tool_calls_written_as_one_json_value_or_a_parsed_list() -> None:
    # A producer (respan's agent-framework instrumentation) writes json.dumps(tool_calls) under
    # gen_ai.{prompt,completion}.N.tool_calls; a trace store hands the same value back parsed.
    for value in (orjson.dumps(_WEATHER_CALLS).decode(), _WEATHER_CALLS):
        f = fact(
            {
                "gen_ai.prompt.0.role": "user",
                "gen_ai.prompt.0.content": "Weather in Paris?",
                "gen_ai.prompt.1.role": "assistant",
                "gen_ai.prompt.1.tool_calls": value,
                "gen_ai.prompt.2.role": "tool",
                "gen_ai.prompt.2.content": "sunny",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.tool_calls": value,
            }
        )
        call = ToolCallPart("call_1", "get_weather", {"city": "Paris"})
        assert f.input_messages == [
            Message("user", [TextPart("Weather in Paris?")]),
            Message("assistant", [call]),
            Message("tool", [ToolCallResponsePart("call_1", "sunny")]),
        ]
        assert f.output_messages == [Message("assistant", [call])]
        assert f.degradations == {}


_call = st.fixed_dictionaries(
    {
        "id": st.text(min_size=1, max_size=8),
        "name": st.text(min_size=1, max_size=8),
        "arguments": st.dictionaries(st.text(max_size=4), st.integers(-(2**53), 2**53), max_size=3),
    }
)


@given(st.lists(_call, min_size=1, max_size=4))
def test_tool_calls_as_one_value_equal_the_indexed_keys(calls: list[dict[str, Any]]) -> None:
    indexed: dict[str, Any] = {"gen_ai.completion.0.role": "assistant"}
    listed = []
    for m, c in enumerate(calls):
        args = orjson.dumps(c["arguments"]).decode()
        indexed |= {
            f"gen_ai.completion.0.tool_calls.{m}.id": c["id"],
            f"gen_ai.completion.0.tool_calls.{m}.name": c["name"],
            f"gen_ai.completion.0.tool_calls.{m}.arguments": args,
        }
        listed.append({"id": c["id"], "function": {"name": c["name"], "arguments": args}})
    expected = fact(indexed)
    for value in (listed, orjson.dumps(listed).decode()):
        got = fact(
            {"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.tool_calls": value}
        )
        assert got.output_messages == expected.output_messages
        assert got.degradations == expected.degradations == {}


def test_a_tool_calls_value_that_is_no_list_of_calls_is_counted() -> None:
    f = fact(
        {
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "hi",
            "gen_ai.completion.0.tool_calls": "[not json",
            "gen_ai.completion.1.role": "assistant",
            "gen_ai.completion.1.tool_calls": '[1, {"id": "c", "function": {"name": "f"}}]',
        }
    )
    # (the tool-call-only completion merges into the one before it, as split completions do)
    assert f.output_messages == [Message("assistant", [TextPart("hi"), ToolCallPart("c", "f", {})])]
    assert f.degradations == {"malformed_messages": 2}


def test_text_citations_in_serialized_content_are_counted() -> None:
    # As the Anthropic (`citations`) and Responses (`annotations`) translators count them.
    cited = [
        {
            "type": "text",
            "text": "Paris",
            "citations": [
                {"type": "char_location", "cited_text": "Paris is", "document_index": 0},
                {"type": "char_location", "cited_text": "the capital", "document_index": 0},
            ],
        }
    ]
    annotated = [
        {
            "type": "output_text",
            "text": "See the docs",
            "annotations": [{"type": "url_citation", "url": "https://example.com"}],
        }
    ]
    f = fact(
        {
            "gen_ai.prompt.0.role": "assistant",
            "gen_ai.prompt.0.content": orjson.dumps(cited).decode(),
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "thanks",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": orjson.dumps(annotated).decode(),
        }
    )
    assert texts(f.input_messages) == ["Paris", "thanks"]
    assert texts(f.output_messages) == ["See the docs"]
    assert f.degradations == {"text_citation": 3}


# --- content --------------------------------------------------------------------------------


def test_images_in_serialized_content_are_uri_parts() -> None:
    content = orjson.dumps(
        [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        ]
    ).decode()
    f = fact({"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": content})
    assert msgs(f.input_messages)[0]["parts"] == [
        {"type": "text", "content": "What is this?"},
        {"type": "uri", "modality": "image", "mime_type": None, "uri": "https://example.com/a.png"},
    ]
    assert f.degradations == {"content_reference": 1}


def test_json_looking_user_text_stays_text() -> None:
    for text in ("[1, 2]", '[{"a": 1}]', '{"type": "text"}', "[not json"):
        f = fact({"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": text})
        assert texts(f.input_messages) == [text]


def test_parsed_and_stringified_values_from_trace_stores() -> None:
    f = fact(
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": {"question": "why?"},
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": 42,
            "gen_ai.prompt.2.role": "user",
            "gen_ai.prompt.2.content": [{"type": "text", "text": "parsed"}],
        }
    )
    assert texts(f.input_messages) == ['{"question":"why?"}', "42", "parsed"]


def test_responses_reasoning_summary_comes_before_the_text() -> None:
    f = fact(
        {
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Paris.",
            "gen_ai.completion.0.reasoning": '[{"type": "summary_text", "text": "Capital of France."}]',
        }
    )
    assert msgs(f.output_messages)[0]["parts"] == [
        {"type": "reasoning", "content": "Capital of France."},
        {"type": "text", "content": "Paris."},
    ]


def test_anthropic_thinking_completion_merges_into_its_answer() -> None:
    f = fact(
        {
            "gen_ai.completion.0.finish_reason": "tool_use",
            "gen_ai.completion.0.role": "thinking",
            "gen_ai.completion.0.content": "I should call the tool.",
            "gen_ai.completion.1.role": "assistant",
            "gen_ai.completion.1.content": "Calling.",
            "gen_ai.completion.1.tool_calls.0.id": "toolu_1",
            "gen_ai.completion.1.tool_calls.0.name": "f",
            "gen_ai.completion.1.tool_calls.0.arguments": "{}",
        }
    )
    assert len(f.output_messages) == 1
    out = msgs(f.output_messages)[0]
    assert [p["type"] for p in out["parts"]] == ["reasoning", "text", "tool_call"]
    assert out["finish_reason"] == "tool_call"


# --- split completions ------------------------------------------------------------------------


def test_parallel_tool_calls_split_over_completions_merge_back() -> None:
    doc = orjson.loads(
        (CORPUS / "openllmetry/koog_flattened_two_completions.attributes.json").read_bytes()
    )
    f = fact(doc["attributes"])
    assert len(f.output_messages) == 1
    out = msgs(f.output_messages)[0]
    assert [p["name"] for p in out["parts"]] == ["HelloTool", "ByeTool"]
    assert out["finish_reason"] == "tool_call"


def _two_tool_completions(**extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for i in (0, 1):
        attrs[f"gen_ai.completion.{i}.role"] = "assistant"
        attrs[f"gen_ai.completion.{i}.finish_reason"] = "tool_calls"
        attrs[f"gen_ai.completion.{i}.tool_calls.0.id"] = f"c{i}"
        attrs[f"gen_ai.completion.{i}.tool_calls.0.name"] = "f"
    return {**attrs, **extra}


def test_several_requested_choices_are_not_merged() -> None:
    assert len(fact(_two_tool_completions()).output_messages) == 1
    f = fact(_two_tool_completions(**{"gen_ai.request.choice.count": 2}))
    assert len(f.output_messages) == 2


def test_text_choices_are_not_merged() -> None:
    f = fact(
        {
            "gen_ai.completion.0.content": "one",
            "gen_ai.completion.0.finish_reason": "stop",
            "gen_ai.completion.1.content": "two",
            "gen_ai.completion.1.finish_reason": "stop",
        }
    )
    assert [m.finish_reason for m in f.output_messages] == ["stop", "stop"]
    assert texts(f.output_messages) == ["one", "two"]


def test_text_completion_then_tool_only_completion_with_stop_is_not_merged() -> None:
    f = fact(
        {
            "gen_ai.completion.0.content": "one",
            "gen_ai.completion.0.finish_reason": "stop",
            "gen_ai.completion.1.tool_calls.0.id": "c",
            "gen_ai.completion.1.tool_calls.0.name": "f",
            "gen_ai.completion.1.finish_reason": "tool_calls",
        }
    )
    assert len(f.output_messages) == 2


# --- whole-string prompt / completion ---------------------------------------------------------


def test_deprecated_whole_string_prompt_and_completion() -> None:
    doc = orjson.loads(
        (CORPUS / "otlp/flat_attributes_deprecated_gen_ai_prompt_completion.json").read_bytes()
    )
    f = fact(doc)
    m = msgs(f.input_messages)
    assert [x["role"] for x in m] == ["user", "assistant", "tool"]
    assert m[1]["parts"][1] == {
        "type": "tool_call",
        "id": "1234",
        "name": "get_weather",
        "arguments": {"location": "Paris"},
    }
    assert m[2]["parts"] == [{"type": "tool_call_response", "id": "1234", "result": "rainy, 57°F"}]
    assert msgs(f.output_messages) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "text",
                    "content": "The weather in Paris is currently rainy with a temperature of 57°F.",
                }
            ],
            "finish_reason": "stop",
        }
    ]


def test_whole_string_plain_text_and_chat_messages() -> None:
    f = fact({"gen_ai.prompt": "just text", "gen_ai.completion": "answer"})
    assert [(m.role, texts([m])) for m in f.input_messages + f.output_messages] == [
        ("user", ["just text"]),
        ("assistant", ["answer"]),
    ]
    chat = orjson.dumps(
        [
            {"role": "system", "content": "sys"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "a", "content": "ok"},
        ]
    ).decode()
    f = fact({"gen_ai.prompt": chat})
    assert [m.role for m in f.input_messages] == ["system", "assistant", "tool"]


def test_whole_string_on_span_events() -> None:
    events = [
        {
            "name": "gen_ai.content.prompt",
            "attributes": {"gen_ai.prompt": '[{"role": "user", "content": "hi"}]'},
        },
        {"name": "gen_ai.content.completion", "attributes": {"gen_ai.completion": "hello"}},
    ]
    content = openllmetry.span_content({}, events, Degradations(), "t:s")
    assert content is not None
    assert texts(content.input_messages) == ["hi"] and texts(content.output_messages) == ["hello"]


# --- tools ------------------------------------------------------------------------------------


def test_request_functions_become_tool_definitions_in_numeric_order() -> None:
    attrs: dict[str, Any] = {"gen_ai.prompt.0.content": "hi"}
    for i in range(11):
        attrs[f"llm.request.functions.{i}.name"] = f"t{i}"
    attrs["llm.request.functions.0.description"] = "Get weather"
    attrs["llm.request.functions.0.parameters"] = (
        '{"type": "object", "properties": {"city": {"type": "string"}}}'
    )
    attrs["llm.request.functions.1.input_schema"] = '{"type": "object"}'
    attrs["llm.request.functions.2.parameters"] = "{broken"
    f = fact(attrs)
    assert [t.name for t in f.tools] == [f"t{i}" for i in range(11)]
    assert msgspec.to_builtins(f.tools[0]) == {
        "name": "t0",
        "description": "Get weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    assert f.tools[1].parameters == {"type": "object"}
    assert f.tools[2].parameters == {}


def test_tool_definition_without_name_is_counted() -> None:
    f = fact({"gen_ai.prompt.0.content": "hi", "llm.request.functions.0.description": "x"})
    assert f.tools == [] and f.degradations == {"unsupported_tool": 1}


# --- output schemas -------------------------------------------------------------------------

ANSWER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def test_a_structured_output_schema_is_counted_once() -> None:
    # OpenLLMetry's OpenAI, Google GenAI and Vertex AI instrumentations write the schema; its
    # OpenAI one dumps any other response_format whole, JSON mode included.
    attrs = {"gen_ai.prompt.0.content": "Where is the Louvre?", "gen_ai.completion.0.content": "{}"}
    key = "gen_ai.request.structured_output_schema"
    for schema, counted in [
        (orjson.dumps(ANSWER_SCHEMA).decode(), True),
        (
            orjson.dumps(
                {"type": "json_schema", "json_schema": {"name": "place", "schema": ANSWER_SCHEMA}}
            ).decode(),
            True,
        ),
        ('{"type": "json_object"}', False),
        ('{"type": "text"}', False),
        ("", False),
    ]:
        f = fact({**attrs, key: schema})
        assert f.degradations == ({"output_schema": 1} if counted else {}), schema
        assert f.raw[key] == schema


# --- corpus through the real readers -----------------------------------------------------------


def test_corpus_files_through_translate_attributes() -> None:
    for rel, n_in, n_out in [
        ("openllmetry/koog_flattened_prompt_tool_history.attributes.json", 6, 1),
        ("openllmetry/koog_flattened_two_completions.attributes.json", 2, 1),
        ("otlp/flat_attributes_deprecated_gen_ai_prompt_completion.json", 3, 1),
    ]:
        doc = orjson.loads((CORPUS / rel).read_bytes())
        result = translate_attributes(doc.get("attributes", doc), raw=doc)
        assert isinstance(result, InferenceCall), rel
        assert result.raw == doc
        assert (len(result.input_messages), len(result.output_messages)) == (n_in, n_out), rel
        assert_valid_messages(result)


# --- properties -------------------------------------------------------------------------------

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
_block = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["text", "tool_use", "tool_result", "image_url", "thinking", "function", "x"]
        )
    },
    optional={
        "text": _json,
        "id": _json,
        "name": _json,
        "input": _json,
        "content": _json,
        "tool_use_id": _json,
        "function": _json,
        "thinking": _json,
        "signature": _json,
    },
)
_value = (
    _json
    | st.sampled_from(
        ["user", "assistant", "tool", "thinking", "function", "system", "tool_calls", "stop"]
    )
    | st.lists(_block, max_size=3)
    | st.lists(_block, max_size=3).map(lambda b: orjson.dumps(b).decode())
    | _json.map(lambda v: orjson.dumps(v).decode())
)
_field = st.sampled_from(
    [
        "role",
        "content",
        "user",
        "tool_call_id",
        "finish_reason",
        "reasoning",
        "reasoning_content",
        "refusal",
        "tool_calls",
        "name",
        "",
        "tool_calls.0.id",
        "tool_calls.0.name",
        "tool_calls.0.arguments",
        "tool_calls.1.function.name",
        "tool_calls.1.function.arguments",
        "function_call.name",
        "function_call.arguments",
        "parameters",
        "description",
    ]
)
_key = st.builds(
    lambda p, n, f: f"{p}{n}.{f}",
    st.sampled_from(
        [
            "gen_ai.prompt.",
            "gen_ai.completion.",
            "llm.prompts.",
            "llm.completions.",
            "llm.request.functions.",
        ]
    ),
    st.integers(0, 12),
    _field,
) | st.sampled_from(
    [
        "gen_ai.prompt",
        "gen_ai.completion",
        "gen_ai.request.choice.count",
        "gen_ai.response.finish_reasons",
        "gen_ai.request.structured_output_schema",
    ]
)


@given(st.dictionaries(_key, _value, max_size=12))
def test_arbitrary_attribute_values_never_raise_and_messages_validate(
    attrs: dict[str, Any],
) -> None:
    result = translate_attributes(attrs)
    assert isinstance(result, InferenceCall | Skip)
    if isinstance(result, InferenceCall):
        assert_valid_messages(result)
        assert set(result.degradations) <= set(DEGRADATION_REASONS)
        assert all(m.finish_reason is None for m in result.input_messages)


@given(st.dictionaries(_key, _json | st.integers(), max_size=8))
def test_span_content_never_raises_on_unbounded_values(attrs: dict[str, Any]) -> None:
    content = openllmetry.span_content(attrs, [], Degradations(), "None:None")
    assert content is None or content.source == "openllmetry"
