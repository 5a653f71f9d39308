"""Per-message log events of one call sent in several OTLP requests (docs/store.md, Call
identity): the SDK's batch processor exports on a timer, so a call longer than its delay sends
its input events as it starts and its choices when it ends. Every test runs on SQLite and
PostgreSQL and compares the store with the same rule over fact files."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.core.codec import encode
from lithify.core.identity import fill
from lithify.derive.sessions import sort_facts
from lithify.model import InferenceCall, Message, TextPart
from lithify.store import FactFilter, open_store
from lithify.store.migrations import LATEST, MIGRATIONS
from lithify.translate import translate_document
from lithify.translate.otlp import Span
from lithify.translate.telemetry import translate_span
from tests.store.helpers import drop_digests, raw_execute
from tests.test_genai import METADATA, T0, TRACE, Rec, json_logs

SESSION = FactFilter(order="session")
SPANS = ("00000000000000a1", "00000000000000a2")
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
# openai-v2's default mode: one record per message, the answer a gen_ai.choice (util-genai 1.30).
EVENTS: list[list[tuple[str, Any]]] = [
    [
        ("gen_ai.system.message", {"content": "You answer briefly."}),
        ("gen_ai.user.message", {"content": "Weather in Paris?"}),
        (
            "gen_ai.choice",
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "tool_calls": [CALL]},
            },
        ),
    ],
    [
        ("gen_ai.system.message", {"content": "You answer briefly."}),
        ("gen_ai.user.message", {"content": "Weather in Paris?"}),
        ("gen_ai.assistant.message", {"tool_calls": [CALL]}),
        ("gen_ai.tool.message", {"id": "call_1", "content": "18 °C, cloudy"}),
        (
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"content": "18 °C and cloudy."}},
        ),
    ],
]


def _records(call: int) -> list[Rec]:
    attrs = {"gen_ai.system": "openai"}
    t0 = T0 + call * 10_000_000
    return [(n, b, attrs, TRACE, SPANS[call], t0 + i) for i, (n, b) in enumerate(EVENTS[call])]


def _span(call: int) -> InferenceCall:
    """The chat span: the call's metadata, no content (its content is on the events)."""
    t0 = T0 + call * 10_000_000
    attrs = {**METADATA, "gen_ai.response.id": f"chatcmpl-{call}"}
    f = translate_span(Span(TRACE, SPANS[call], None, "chat gpt-4o", 3, t0, t0 + 9, attrs))
    assert isinstance(f, InferenceCall), f
    return f


def _captures(requests: list[list[Rec]]) -> list[InferenceCall]:
    """What the translator makes of each request, with the calls' spans."""
    out = [_span(0), _span(1)]
    for records in requests:
        out += [r for r in translate_document(json_logs(records)) if isinstance(r, InferenceCall)]
    return out


def _by_phase(call: int) -> list[list[Rec]]:
    """The call's input events in one request, its choice in the next."""
    records = _records(call)
    return [records[:-1], records[-1:]]


def _whole() -> list[InferenceCall]:
    return sort_facts(_captures([_records(0) + _records(1)]))


def _messages(f: InferenceCall) -> Any:
    return msgspec.to_builtins((f.input_messages, f.output_messages))


def _stored(url: str, captures: list[InferenceCall], cuts: list[int]) -> list[InferenceCall]:
    with open_store(url) as store:
        for a, b in itertools.pairwise([0, *cuts, len(captures)]):
            if b > a:
                store.insert_facts(captures[a:b])
        return list(store.iter_facts(SESSION))


def test_a_call_sent_in_two_requests_is_read_whole(store_url: str) -> None:
    captures = _captures(_by_phase(0) + _by_phase(1))
    random.Random(2).shuffle(captures)
    read = _stored(store_url, captures, [1, 3])
    want = _whole()
    assert [_messages(f) for f in read] == [_messages(f) for f in want]
    # The messages of each call, with the span's metadata and finish reason.
    first, second = read
    assert [m.role for m in first.input_messages] == ["system", "user"]
    assert first.output_messages[0].finish_reason == "tool_call"
    assert [m.role for m in second.input_messages] == ["system", "user", "assistant", "tool"]
    assert second.output_messages == [Message("assistant", [TextPart("18 °C and cloudy.")], "stop")]
    assert (second.model, second.output_tokens, second.model_call_id) == (
        "gpt-4o-2024-08-06",
        7,
        "chatcmpl-1",
    )
    # Nothing is lost: the read call holds both requests' records.
    assert [r["event_name"] for r in second.raw] == [n for n, _ in EVENTS[1]]
    assert [encode(f) for f in read] == [encode(f) for f in sort_facts(captures)]


def test_a_version_10_store_reads_its_split_calls_whole(store_url: str) -> None:
    """Version 10 read such a call from its input's events alone (its answer in no row):
    opened by this version, the fills are made again and the call is read whole."""
    captures = _captures(_by_phase(0) + _by_phase(1))
    with open_store(store_url) as store:
        store.insert_facts(captures)
    # The fills as version 10 left them (the metadata's alone), and version 11 forgotten.
    raw_execute(
        store_url,
        *drop_digests(store_url),
        "DELETE FROM call_fills",
        "DELETE FROM schema_version WHERE version > 10",
    )
    with open_store(store_url, migrations=MIGRATIONS[:10]) as old:
        assert old.schema_version() == 10
        assert all(f.output_messages == [] for f in old.iter_facts(SESSION))
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST == 12
        read = list(store.iter_facts(SESSION))
    assert [_messages(f) for f in read] == [_messages(f) for f in _whole()]
    assert [encode(f) for f in read] == [encode(f) for f in sort_facts(captures)]


def test_record_by_record_no_half_is_joined_to_a_piece_of_the_input(store_url: str) -> None:
    """A processor that sends each record alone makes pieces of one input that disagree (a
    system message, a user message): each a call of its own (id_collision) or captures of one
    call that disagree with each other, and no answer is joined to a piece, which would be a
    conversation that never was."""
    captures = _captures([[r] for r in _records(0) + _records(1)])
    read = _stored(store_url, captures, [4])
    _no_invented_conversation(read)
    assert [encode(f) for f in read] == [encode(f) for f in sort_facts(captures)]


def _no_invented_conversation(read: list[InferenceCall]) -> None:
    """A call read with an answer has no input or the call's whole input."""
    whole = {f.span_id: f for f in _whole()}
    for f in read:
        if any(m.parts for m in f.output_messages):
            assert f.input_messages in ([], whole[f.span_id].input_messages)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_cut_order_and_batching_reads_as_the_fact_files_do(
    new_store_url: Callable[[], str], data: st.DataObject
) -> None:
    records = _records(0) + _records(1)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(records) - 1), max_size=4)))
    requests = [records[a:b] for a, b in itertools.pairwise([0, *cuts, len(records)])]
    captures = data.draw(st.permutations(_captures(requests)))
    batches = sorted(data.draw(st.lists(st.integers(0, len(captures)), max_size=3)))
    want = sort_facts(captures)
    read = _stored(new_store_url(), captures, batches)
    assert [encode(f) for f in read] == [encode(f) for f in want]
    choice = [[name == "gen_ai.choice" for name, *_ in req] for req in requests]
    if all(all(c) or not any(c) for c in choice):
        # No capture holds both halves: a call read with both took one (identity._halves).
        _no_invented_conversation(read)


def test_fill_takes_a_missing_half_with_its_counts_and_records() -> None:
    inputs, choice = _captures(_by_phase(1))[2:]
    inputs = msgspec.structs.replace(inputs, degradations={"malformed_messages": 1})
    choice = msgspec.structs.replace(choice, degradations={"malformed_messages": 2, "x": 1})
    assert fill(inputs, [choice]).output_messages == []  # halves only when asked
    read = fill(inputs, [choice], halves=True)
    assert read.input_messages == inputs.input_messages
    assert read.output_messages == choice.output_messages
    assert read.degradations == {"malformed_messages": 3, "x": 1}
    assert read.raw == [*inputs.raw, *choice.raw]
    # Each half from the first capture (in rank order) that has it; none: unchanged.
    assert fill(choice, [inputs], halves=True).input_messages == inputs.input_messages
    assert fill(inputs, [inputs], halves=True) is inputs


def test_a_piece_set_apart_later_undoes_a_half_taken_before(store_url: str) -> None:
    """The input's pieces sent alone, the user's last and ranked last: until it arrives the
    call's captures agree and its halves are read together; the user's piece contradicts the
    call's first capture (the system prompt) and is set apart as another call, and then the
    call is read without a half (the store reads again every call sharing the new capture's
    ids, though the new capture is not theirs), as the fact files read it."""
    attrs = {"gen_ai.system": "openai"}
    events = [
        ("gen_ai.system.message", {"content": "You are a weather assistant. " * 4}),
        ("gen_ai.user.message", {"content": "Hi"}),
        (
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"content": "Sunny, 20 °C."}},
        ),
    ]
    captures = [_span(0)] + [
        f
        for i, (n, b) in enumerate(events)
        for f in translate_document(json_logs([(n, b, attrs, TRACE, SPANS[0], T0 + i)]))
        if isinstance(f, InferenceCall)
    ]
    user = next(f for f in captures if [m.role for m in f.input_messages] == ["user"])
    rest = [f for f in captures if f is not user]
    with open_store(store_url) as store:
        store.insert_facts(rest)
        (before,) = store.iter_facts(SESSION)
        assert [m.role for m in before.input_messages] == ["system"]
        assert before.output_messages[0].parts == [TextPart("Sunny, 20 °C.")]
        assert store.insert_facts([user]).collisions == 1
        read = list(store.iter_facts(SESSION))
    assert [encode(f) for f in read] == [encode(f) for f in sort_facts(captures)]
    assert len(read) == 2
    for f in read:
        assert not (f.input_messages and any(m.parts for m in f.output_messages))
