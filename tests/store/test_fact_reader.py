"""FactReader: a stream of facts decoded against the fact before, equal to decoding each alone."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lithify.core import codec
from lithify.model import (
    InferenceCall,
    Message,
    Source,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
)
from tests.export.test_trainer import messages as message_lists
from tests.store.helpers import same

_decoder = codec.Decoder(InferenceCall)
TOOLS = [
    ToolDefinition("get", "Get it", {"type": "object", "properties": {"x": {"type": "integer"}}})
]


def _call(key: str, inputs: list[Message], output: Message, **fields: object) -> InferenceCall:
    fields.setdefault("tools", TOOLS)
    return InferenceCall(
        inference_call_id=key,
        session_id="s",
        source=Source("t"),
        input_messages=inputs,
        output_messages=[output],
        **fields,  # type: ignore[arg-type]
    )


def tool_loop(n: int, text: str = "result") -> list[InferenceCall]:
    """A session whose every call replays the input before, its output and a tool result."""
    history = [Message("system", [TextPart("be brief")]), Message("user", [TextPart("go")])]
    calls = []
    for k in range(n):
        out = Message("assistant", [ToolCallPart(f"c{k}", "get", {"x": k})], "tool_calls")
        calls.append(_call(f"k{k}", list(history), out, raw={"span": k}))
        history += [
            Message("assistant", out.parts),
            Message("tool", [ToolCallResponsePart(f"c{k}", f"{text} {k}")]),
        ]
    return calls


def read(facts: list[InferenceCall]) -> list[InferenceCall]:
    reader = codec.FactReader()
    return [reader.decode(codec.encode(f)) for f in facts]


def test_a_tool_loop_reads_back_equal_and_shares_what_it_replays() -> None:
    facts = tool_loop(5)
    got = read(facts)
    assert all(same(a, b) for a, b in zip(got, facts, strict=True))
    for before, after in itertools.pairwise(got):
        # The replayed history is the previous fact's decoded messages, not a new copy.
        n = len(before.input_messages)
        assert all(
            a is b for a, b in zip(after.input_messages[:n], before.input_messages, strict=True)
        )
        assert after.input_messages[n] is not before.output_messages[0]  # other finish_reason
        assert after.tools is before.tools


def test_what_differs_is_decoded_anew() -> None:
    a, b = tool_loop(2)
    changed = _call(
        "k1",
        [Message("system", [TextPart("other")]), *b.input_messages[1:]],
        b.output_messages[0],
        tools=[],
    )
    got = read([a, changed])
    assert same(got[1], changed)
    assert got[1].input_messages[0] is not got[0].input_messages[0]
    assert got[1].input_messages[1] is got[0].input_messages[1]  # same bytes at the same place
    assert got[1].tools == []


def test_escaped_facts_in_the_stream() -> None:
    """Facts msgpack cannot hold plainly (lone surrogates) take the full decoder, and the
    stream goes on comparing against the last plain fact."""
    facts = tool_loop(4, text="x\ud800")  # from the second call on, inputs hold a surrogate
    facts.insert(2, tool_loop(1)[0])
    assert codec.encode(facts[1])[0] == 2 and codec.encode(facts[2])[0] == 1
    assert all(same(a, b) for a, b in zip(read(facts), facts, strict=True))


def test_a_corrupt_body_is_reported() -> None:
    reader = codec.FactReader()
    good = codec.encode(tool_loop(1)[0])
    for bad in (b"", b"\x01\xc1", good[:-3], b"\x07" + good[1:]):
        with pytest.raises(codec.CorruptFact):
            reader.decode(bad)
    assert same(reader.decode(good), tool_loop(1)[0])  # the reader is still usable


@settings(max_examples=80)
@given(st.lists(st.tuples(message_lists, st.integers(0, 3), st.booleans()), max_size=6))
def test_any_stream_reads_back_as_each_fact_alone(
    steps: list[tuple[list[Message], int, bool]],
) -> None:
    """Each fact keeps a random part of the previous input and adds arbitrary messages (lone
    surrogates, huge integers and NaN included): the reader gives what decoding alone gives."""
    facts: list[InferenceCall] = []
    prev: list[Message] = []
    for i, (new, keep, tools) in enumerate(steps):
        inputs = prev[: len(prev) - keep] + new
        output = new[-1] if new else Message("assistant", [])
        facts.append(_call(f"f{i}", inputs, output, tools=TOOLS if tools else []))
        prev = inputs
    reader = codec.FactReader()
    for fact in facts:
        data = codec.encode(fact)
        assert same(reader.decode(data), _decoder.decode(data))
