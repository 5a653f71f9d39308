"""What the recorded exchanges (tests/recorded/, SOURCES.md) must convert to, item by item of
issue 12: the real shapes of tool schemas, opaque state, other vendors' extensions. Their whole
facts are in tests/golden/recorded/; these tests name the rule each one is there for."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
import pytest

from lithify.model import InferenceCall, Message, ReasoningPart, TextPart, ToolCallPart
from lithify.translate import translate_document
from lithify.translate.provider import translate_exchange
from lithify.translate.sse import iter_events, sse_text
from tests.conftest import RECORDED
from tests.helpers import assert_valid_messages

ALL = sorted(p.relative_to(RECORDED).as_posix() for p in RECORDED.rglob("*.exchange.json"))


def doc(rel: str) -> dict[str, Any]:
    return orjson.loads((RECORDED / f"{rel}.exchange.json").read_bytes())


def fact(rel: str) -> InferenceCall:
    (result,) = translate_document(doc(rel))
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def same_but_raw(a: InferenceCall, b: InferenceCall, *also: str) -> None:
    drop = dict.fromkeys(("raw", *also))
    assert msgspec.structs.replace(a, **drop) == msgspec.structs.replace(b, **drop)


@pytest.mark.parametrize("rel", ALL)
def test_raw_is_the_exchange_as_sent_and_translates_again(rel: str) -> None:
    """Nothing in these exchanges is a credential: no schema property, no opaque blob is
    altered, and the fact read back from its raw is the same fact."""
    f = fact(rel.removesuffix(".exchange.json"))
    d = doc(rel.removesuffix(".exchange.json"))
    sent = d["response"]
    if isinstance(sent, str):  # a stream is kept as its events written back, lines ended by \n
        sent = sse_text(list(iter_events(sent)))
    assert f.raw == {"request": d["request"], "response": sent}
    assert not [r for r in f.degradations if r.startswith("redacted_")]
    assert translate_exchange(f.raw["request"], f.raw["response"]) == f


@pytest.mark.parametrize(
    ("rel", "schema_at"),
    [
        ("openai-chat/tool_schema_password", ("tools", 0, "function", "parameters")),
        ("openai-responses/compaction_input", ("tools", 0, "parameters")),
        ("anthropic/tool_schema_password", ("tools", 0, "input_schema")),
        ("gemini/tool_schema_password", ("tools", 0, "functionDeclarations", 0, "parameters_json_schema")),
    ],
)  # fmt: skip
def test_1_tool_schemas_keep_credential_named_properties(rel: str, schema_at: tuple[Any, ...]) -> None:  # fmt: skip
    f = fact(rel)
    schema: Any = doc(rel)["request"]
    for key in schema_at:
        schema = schema[key]
    assert {"password", "api_key"} <= set(schema["properties"])
    login = next(t for t in f.tools if t.name == "login")
    assert login.parameters == schema


def test_1_gemini_schema_names_survive_the_conversion_to_json_schema() -> None:
    refresh = next(t for t in fact("gemini/tool_schema_password").tools if t.name != "login")
    assert set(refresh.parameters["properties"]) == {"refresh_token", "access_token"}


@pytest.mark.parametrize(
    ("rel", "blob"),
    [
        ("gemini/vertex_thought_signature", "_sk-N2AM"),
        ("openai-chat/gemini_compat_thought_signature", "_sk-N2AM"),
        ("openai-responses/compaction_input", "-sk-proj-"),
        ("openai-responses/encrypted_reasoning_streaming", "_sk-N2AM"),
        ("anthropic/thinking_signature", "+sk-ant-api03-"),
    ],
)
def test_2_key_shapes_inside_opaque_state_are_kept(rel: str, blob: str) -> None:
    f = fact(rel)
    assert blob in orjson.dumps(f.raw).decode()
    assert f.degradations.get("opaque_reasoning", 0) >= 1


def test_3_mistral_thinking_is_reasoning_in_output_history_and_stream() -> None:
    plain, streamed = (
        fact("openai-chat/mistral_thinking"),
        fact("openai-chat/mistral_thinking_streaming"),
    )
    thought = "17 × 23 = 17 × 20 + 17 × 3 = 340 + 51 = 391."
    answer = Message("assistant", [ReasoningPart(thought), TextPart("17 × 23 = 391.")], "stop")
    assert plain.output_messages == streamed.output_messages == [answer]
    history = Message(
        "assistant", [ReasoningPart("12 times 12 is 144."), TextPart("12 × 12 = 144.")]
    )
    assert plain.input_messages[1] == history
    assert plain.degradations == streamed.degradations == {}
    assert plain.source.name == "openai-chat"


def test_4_anthropic_compaction_is_text_the_model_saw() -> None:
    plain, streamed = fact("anthropic/compaction"), fact("anthropic/compaction_streaming")
    same_but_raw(plain, streamed)
    assert plain.output_messages[0].parts[0] == TextPart("Summary: user said hello.")
    assert plain.degradations == {}
    replay = fact("anthropic/compaction_replay")
    assert replay.input_messages[3] == Message("assistant", plain.output_messages[0].parts)
    assert replay.degradations == {}


def test_4_responses_compaction_is_opaque_state() -> None:
    f = fact("openai-responses/compaction_input")
    assert f.degradations == {"opaque_reasoning": 1}
    assert [m.role for m in f.input_messages] == ["user"]


def test_5_groq_usage_from_the_last_chunk() -> None:
    f = fact("openai-chat/groq_compound_streaming")
    assert (f.input_tokens, f.output_tokens) == (1873, 64)


def test_6_done_after_the_usage_chunk_is_a_whole_stream() -> None:
    f = fact("openai-chat/snowflake_no_finish_reason_streaming")
    assert f.degradations == {}
    assert f.output_messages == [
        Message("assistant", [TextPart("Snowflake Cortex streams without a finish reason.")], None)
    ]
    assert (f.input_tokens, f.output_tokens) == (21, 12)


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("openai-chat/url_citations", {"text_citation": 1}),
        ("openai-responses/url_citations", {"text_citation": 1}),  # web_search: a builtin tool
        ("anthropic/citations", {"text_citation": 1}),
        ("anthropic/citations_streaming", {"text_citation": 1}),
        ("openai-chat/groq_compound", {}),  # executed_tools are server tool parts (issue 16)
        ("openai-chat/groq_compound_streaming", {}),
        ("openai-chat/gemini_compat_thought_signature", {"opaque_reasoning": 2}),
    ],
)  # fmt: skip
def test_7_what_rides_beside_the_parts_is_counted(rel: str, expected: dict[str, int]) -> None:
    assert fact(rel).degradations == expected


def test_7_cited_text_is_kept_whole() -> None:
    plain, streamed = fact("anthropic/citations"), fact("anthropic/citations_streaming")
    same_but_raw(plain, streamed)
    parts = plain.output_messages[0].parts
    assert "".join(p.content for p in parts if isinstance(p, TextPart)) == (
        "According to the document, the grass is green."
    )


def test_8_small_mappings() -> None:
    assert fact("gemini/vertex_thought_signature").started_at == "2026-01-01T00:00:01.123456000Z"
    assert fact("openai-responses/url_citations").duration_ms == 4000.0
    assert fact("openai-chat/together_eos").output_messages[0].finish_reason == "stop"


def test_9_synthesized_ids_survive_a_changed_system_instruction() -> None:
    first, second = fact("gemini/adk_turn1"), fact("gemini/adk_turn2")
    assert first.input_messages[0] != second.input_messages[0]  # the instruction changed
    (made,) = first.output_messages[0].parts
    assert isinstance(made, ToolCallPart) and made.id.startswith("lithify_")
    assert second.input_messages[2].parts == [made]
    assert second.input_messages[3].parts[0].id == made.id
    assert "orphan_tool_response" not in second.degradations
