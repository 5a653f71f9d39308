"""``gen_ai.response.finish_reasons`` read one way by every telemetry translator: an array, the
JSON text of one, or any other string kept as one stated reason (never dropped)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lithify.translate._common import finish_reasons
from tests.test_genai import BASE, fact
from tests.test_openllmetry import fact as openllmetry_fact
from tests.test_vercel_ai import CALL
from tests.test_vercel_ai import fact as vercel_fact

# (attribute value, the canonical reason of the one output message that states none)
CASES = [
    (["length"], "length"),
    ('["tool_calls"]', "tool_call"),
    ("stop", "stop"),
    ('["stop"', '["stop"'),  # looks like JSON and is not: kept as stated
    ('{"a":1}', '{"a":1}'),
    ("[1e400]", "[1e400]"),  # a number JSON cannot hold: not an array, one reason
]


@given(st.lists(st.text() | st.integers(-(2**63), 2**63 - 1), max_size=4))
def test_an_array_and_its_json_text_read_alike(reasons: list[Any]) -> None:
    assert finish_reasons(reasons) == reasons
    assert finish_reasons(orjson.dumps(reasons).decode()) == reasons


@given(st.text())
def test_any_string_gives_at_least_one_reason(value: str) -> None:
    got = finish_reasons(value)
    assert got, value
    if not value.lstrip().startswith("["):
        assert got == [value]


def test_other_values_give_none() -> None:
    assert finish_reasons(None) == []
    assert finish_reasons(3) == []
    assert finish_reasons({"a": 1}) == []


@pytest.mark.parametrize(("value", "expected"), CASES)
def test_genai_span(value: Any, expected: str) -> None:
    out = orjson.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "a"}]}])
    f = fact(
        {
            **BASE,
            "gen_ai.output.messages": out.decode(),
            "gen_ai.response.finish_reasons": value,
        }
    )
    assert [m.finish_reason for m in f.output_messages] == [expected]


@pytest.mark.parametrize(("value", "expected"), CASES)
def test_openllmetry_span(value: Any, expected: str) -> None:
    f = openllmetry_fact(
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "q",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "a",
            "gen_ai.response.finish_reasons": value,
        }
    )
    assert [m.finish_reason for m in f.output_messages] == [expected]


@pytest.mark.parametrize(("value", "expected"), CASES)
def test_vercel_ai_span(value: Any, expected: str) -> None:
    f = vercel_fact({**CALL, "ai.response.text": "a", "gen_ai.response.finish_reasons": value})
    assert [m.finish_reason for m in f.output_messages] == [expected]
