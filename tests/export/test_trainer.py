"""The trainer mapping (docs/export.md, Trainer messages) and Responses items, rule by rule."""

from __future__ import annotations

import math
from typing import Any

import jsonschema_rs
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lithify.export.trainer import (
    SKIP_REASONS,
    RowSkip,
    flat_tools,
    response_items,
    result_text,
    trainer_messages,
    trainer_tools,
)
from lithify.export.validate import native_schema
from lithify.model import Message, ReasoningPart, TextPart, ToolCallPart, ToolCallResponsePart
from lithify.schemas import validator
from tests.export.helpers import WEATHER, assistant, call, text, think, tool, user


def schema_for(m: dict[str, Any]) -> str:
    if m["role"] == "tool":
        return "trainer-tool-message"
    if m["role"] == "assistant":
        return (
            "trainer-assistant-tool-call-message"
            if "tool_calls" in m
            else "trainer-assistant-message"
        )
    return "trainer-text-message"


def assert_trainer_valid(messages: list[dict[str, Any]]) -> None:
    for m in messages:
        errors = [e.message for e in validator(schema_for(m)).iter_errors(m)]
        assert not errors, (m, errors)


def skip_reason(messages: list[Message]) -> str:
    with pytest.raises(RowSkip) as e:
        trainer_messages(messages)
    return e.value.reason


def test_text_roles_join_text_parts() -> None:
    out = trainer_messages(
        [
            Message("system", [TextPart("You are "), TextPart("terse.")]),
            Message("developer", [TextPart("Answer in French.")]),
            Message("user", [TextPart("a"), TextPart("b")]),
        ]
    )
    assert out == [
        {"role": "system", "content": "You are terse."},
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "ab"},
    ]
    assert_trainer_valid(out)


def test_assistant_reasoning_goes_to_thinking_never_content() -> None:
    out = trainer_messages(
        [
            user("Weather?"),
            assistant(think("step 1"), think("step 2"), text("Let me look."), call("c1", city="X")),
        ]
    )
    msg = out[1]
    assert msg == {
        "role": "assistant",
        "thinking": "step 1\n\nstep 2",
        "content": "Let me look.",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "X"}},
            }
        ],
    }
    assert "step" not in msg["content"]
    assert_trainer_valid(out)


def test_reasoning_only_and_text_only_assistant_turns() -> None:
    out = trainer_messages(
        [user("q"), assistant(think("hmm")), user("go on"), assistant(text("ok"))]
    )
    assert out[1] == {"role": "assistant", "thinking": "hmm"}
    assert out[3] == {"role": "assistant", "content": "ok"}
    assert_trainer_valid(out)


def test_tool_message_takes_name_from_matching_call_and_result_text() -> None:
    msgs = [
        user("q"),
        assistant(call("c1", city="A"), call("c2", "get_time", tz="UTC")),
        tool("c2", "12:00"),
        tool("c1", {"z": 1, "a": [1, 2.5, None, True], "m": {"b": "é", "a": 0}}),
    ]
    out = trainer_messages(msgs)
    assert out[2] == {"role": "tool", "name": "get_time", "tool_call_id": "c2", "content": "12:00"}
    assert out[3]["name"] == "get_weather"
    # Compact JSON with sorted keys, at every depth; non-ASCII kept as is.
    assert out[3]["content"] == '{"a":[1,2.5,null,true],"m":{"a":0,"b":"é"},"z":1}'
    assert_trainer_valid(out)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ("  spaced\n", "  spaced\n"),  # strings verbatim, never parsed
        ('{"a": 1}', '{"a": 1}'),
        (42, "42"),
        (1.5, "1.5"),
        (True, "true"),
        (None, "null"),
        ([{"b": 1, "a": 2}], '[{"a":2,"b":1}]'),
    ],
)
def test_result_text(result: Any, expected: str) -> None:
    assert result_text(result) == expected


def test_a_later_call_with_the_same_id_names_the_response() -> None:
    out = trainer_messages(
        [
            user("q"),
            assistant(call("c1", "first")),
            tool("c1", "r1"),
            assistant(call("c1", "second")),
            tool("c1", "r2"),
        ]
    )
    assert [m.get("name") for m in out if m["role"] == "tool"] == ["first", "second"]


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([user("q"), tool("nope", "r")], "orphan_tool_response"),
        ([tool("c1", "r"), assistant(call("c1"))], "orphan_tool_response"),  # answer before call
        ([Message("user", [ReasoningPart("x")])], "reasoning_outside_assistant"),
        ([Message("system", [ReasoningPart("x")])], "reasoning_outside_assistant"),
        ([Message("tool", [ReasoningPart("x")])], "reasoning_outside_assistant"),
        ([user("q"), assistant(text("a"), think("b"))], "part_order"),
        ([user("q"), assistant(call("c1"), text("after"))], "part_order"),
        ([user("q"), assistant(think("a"), text("b"), think("c"))], "part_order"),
        ([user("q"), assistant(call("c1"), think("late"))], "part_order"),
        ([user("q"), assistant()], "empty_assistant"),
        ([Message("user", [ToolCallPart("c1", "f", {})])], "misplaced_part"),
        ([Message("user", [ToolCallResponsePart("c1", "r")])], "misplaced_part"),
        ([user("q"), assistant(call("c1")), Message("tool", [TextPart("r")])], "misplaced_part"),
        ([user("q"), Message("assistant", [ToolCallResponsePart("c1", "r")])], "misplaced_part"),
        ([user("q"), Message("tool", [])], "empty_tool_message"),
        ([Message("function", [TextPart("x")])], "unknown_role"),
        ([user("q"), assistant(call("c1", x=math.nan))], "unrepresentable_value"),
        ([user("q"), assistant(call("c1")), tool("c1", {"x": math.inf})], "unrepresentable_value"),
        ([user("q"), assistant(call("c1", x=2**70))], "unrepresentable_value"),
    ],
)
def test_unrepresentable_rows_are_skipped_with_a_reason(
    messages: list[Message], reason: str
) -> None:
    assert skip_reason(messages) == reason
    assert reason in SKIP_REASONS


def test_a_user_message_without_parts_is_empty_text() -> None:
    # The turn happened; what it held (an image, say) was counted as a degradation upstream.
    assert trainer_messages([Message("user", [])]) == [{"role": "user", "content": ""}]


def test_tools_as_json_schemas() -> None:
    assert trainer_tools([WEATHER]) == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    flat = flat_tools([WEATHER])
    assert flat == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]


# -- Responses items --------------------------------------------------------------------------


ITEM = jsonschema_rs.validator_for({"$defs": native_schema()["$defs"], "$ref": "#/$defs/InputItem"})


def test_response_items_keep_part_order_and_ids() -> None:
    msgs = [
        Message("developer", [TextPart("be nice")]),
        user("q"),
        assistant(
            think("a"),
            think("b"),
            call("c1", city="P"),
            think("c"),
            call("c2", city="Q"),
            text("x"),
            text("y"),
        ),
        tool("c1", "r1"),
        tool("c2", {"b": 1, "a": 2}),
    ]
    items = response_items(msgs, "seed")
    kinds = [i["type"] for i in items]
    assert kinds == [
        "message",
        "message",
        "reasoning",
        "function_call",
        "reasoning",
        "function_call",
        "message",
        "function_call_output",
        "function_call_output",
    ]
    assert items[0] == {"type": "message", "role": "developer", "content": "be nice"}
    assert items[2]["summary"] == [
        {"type": "summary_text", "text": "a"},
        {"type": "summary_text", "text": "b"},
    ]
    assert items[2]["id"].startswith("rs_") and items[2]["id"] != items[4]["id"]
    assert items[3] == {
        "type": "function_call",
        "call_id": "c1",
        "name": "get_weather",
        "arguments": '{"city":"P"}',
    }
    assert items[6] == {"type": "message", "role": "assistant", "content": "xy"}
    assert items[8] == {"type": "function_call_output", "call_id": "c2", "output": '{"a":2,"b":1}'}
    for it in items:
        assert ITEM.is_valid(it), it
    # Deterministic: the same messages and seed give the same ids.
    assert response_items(msgs, "seed") == items
    assert response_items(msgs, "other")[2]["id"] != items[2]["id"]


@pytest.mark.parametrize("bad", ["a\x00b", "\ud800"])
def test_response_items_refuse_ids_nemo_gym_cannot_hold(bad: str) -> None:
    with pytest.raises(RowSkip) as e:
        response_items([user("q"), assistant(call(bad))], "s")
    assert e.value.reason == "invalid_id"


# -- properties -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
ids = st.sampled_from(["c1", "c2", "c3", "", "id\x00", "\ud800"])
parts = st.one_of(
    st.builds(TextPart, st.text(max_size=8)),
    st.builds(ReasoningPart, st.text(max_size=8)),
    st.builds(
        ToolCallPart,
        ids,
        st.text(max_size=5),
        st.dictionaries(st.text(max_size=4), json_values, max_size=3),
    ),
    st.builds(ToolCallResponsePart, ids, json_values),
)
roles = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", ""])
messages = st.lists(
    st.builds(Message, roles, st.lists(parts, max_size=4), st.none() | st.just("stop")),
    max_size=6,
)


def _encodable(out: Any) -> bool:
    try:
        orjson.dumps(out)
    except orjson.JSONEncodeError:
        return False
    return True


@given(messages)
def test_trainer_mapping_is_faithful_or_skips(msgs: list[Message]) -> None:
    try:
        out = trainer_messages(msgs)
    except RowSkip as e:
        assert e.reason in SKIP_REASONS
        return
    if not _encodable(out):
        return  # a lone surrogate in text: the row encoder counts it (unrepresentable_value)
    assert_trainer_valid(out)
    # Nothing is lost or invented: every part of every message is accounted for, in order.
    produced = iter(out)
    for m in msgs:
        if m.role == "tool":
            for p in m.parts:
                t = next(produced)
                assert isinstance(p, ToolCallResponsePart)
                assert t["tool_call_id"] == p.id and t["content"] == result_text(p.result)
            continue
        t = next(produced)
        texts = "".join(p.content for p in m.parts if isinstance(p, TextPart))
        reasoning = [p.content for p in m.parts if isinstance(p, ReasoningPart)]
        calls = [p for p in m.parts if isinstance(p, ToolCallPart)]
        if m.role != "assistant":
            assert t == {"role": m.role, "content": texts}
            continue
        assert t.get("content") == (
            texts if any(isinstance(p, TextPart) for p in m.parts) else None
        )
        assert t.get("thinking") == ("\n\n".join(reasoning) if reasoning else None)
        assert [
            (c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in t.get("tool_calls", [])
        ] == [(c.id, c.name, c.arguments) for c in calls]
    assert next(produced, None) is None


@given(messages)
def test_response_items_are_valid_or_skip(msgs: list[Message]) -> None:
    try:
        items = response_items(msgs, "seed")
    except RowSkip as e:
        assert e.reason in SKIP_REASONS
        return
    if not _encodable(items):
        return
    for it in items:
        assert ITEM.is_valid(it), it
    calls = sum(isinstance(p, ToolCallPart) for m in msgs for p in m.parts)
    outputs = sum(isinstance(p, ToolCallResponsePart) for m in msgs for p in m.parts)
    assert sum(i["type"] == "function_call" for i in items) == calls
    assert sum(i["type"] == "function_call_output" for i in items) == outputs
