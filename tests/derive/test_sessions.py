"""Sessions: call order, grouping, and deduplication of the same call captured twice."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lithify.core.codec import encode
from lithify.core.identity import fill
from lithify.derive.sessions import (
    DeriveStats,
    call_order_key,
    dedupe,
    iter_sessions,
    sort_facts,
)
from lithify.model import Message, TextPart
from tests.derive.helpers import EXAMPLES, assistant, at, call, facts_of, user, with_


def _ids(facts: list) -> list[str]:
    return [f.inference_call_id for f in facts]


def test_calls_are_ordered_by_started_at_else_observed_at_then_id() -> None:
    a = call("a", [user("1")], [], second=5)
    b = call("b", [user("2")], [], second=5)
    c = with_(call("c", [user("3")], [], second=0), started_at=None, observed_at=at(3))
    d = with_(call("d", [user("4")], [], second=0), started_at=None)  # no time: first
    ordered = sorted([a, b, c, d], key=call_order_key)
    assert _ids(ordered) == ["d", "c", "a", "b"]


def test_iter_sessions_groups_runs_and_gives_sessionless_calls_alone() -> None:
    facts = [
        call("a2", [user("x")], [], session="A", second=2),
        call("a1", [user("x")], [], session="A", second=1),
        call("b1", [user("x")], [], session="B", second=1),
        call("n1", [user("x")], [], session=None, second=1),
        call("n2", [user("x")], [], session=None, second=2),
    ]
    stats = DeriveStats()
    groups = [(sid, _ids(calls)) for sid, calls in iter_sessions(facts, stats)]
    assert groups == [("A", ["a1", "a2"]), ("B", ["b1"]), (None, ["n1"]), (None, ["n2"])]
    assert (stats.sessions, stats.duplicates) == (2, 0)


def test_a_session_that_comes_back_is_refused() -> None:
    facts = [
        call("a1", [user("x")], [], session="A"),
        call("b1", [user("x")], [], session="B"),
        call("a2", [user("x")], [], session="A"),
    ]
    with pytest.raises(ValueError, match="not grouped by session"):
        list(iter_sessions(facts))
    interrupted = [facts[0], call("n", [user("x")], [], session=None), facts[2]]
    with pytest.raises(ValueError, match="'A' came back"):
        list(iter_sessions(interrupted))


def test_same_call_twice_is_one_fact_by_identity_and_by_model_call_id() -> None:
    first = call("x", [user("q")], [], second=1, model_call_id="resp_1")
    recapture = with_(first, trace_id="t")  # same identity, different capture
    proxy = call("y", [user("q")], [], second=2, model_call_id="resp_1")  # same response id
    other = call("z", [user("q")], [], second=3, model_call_id="resp_2")
    kept, dropped = dedupe([other, proxy, recapture, first])
    assert _ids(kept) == ["x", "z"] and dropped == 2
    # Which capture of "x" is kept does not depend on arrival order.
    again, _ = dedupe([first, other, recapture, proxy])
    assert [encode(f) for f in kept] == [encode(f) for f in again]


def test_captures_linked_through_another_capture_are_one_call() -> None:
    # y shares x's identity, z shares y's response id; all three recorded the same content.
    x = call("x", [user("q")], [], second=0, model_call_id="m1")
    y = call("x", [user("q")], [], second=1, model_call_id="m2")
    z = call("z", [user("q")], [], second=2, model_call_id="m2")
    for order in ([x, y, z], [z, y, x]):
        kept, dropped = dedupe(order)
        assert dropped == 2 and _ids(kept) == ["x"]
    # z answered otherwise: the shared response id does not make it the same call.
    z2 = call("z", [user("q")], [assistant(TextPart("no"))], second=2, model_call_id="m2")
    for order in ([x, y, z2], [z2, y, x]):
        kept, dropped = dedupe(order)
        assert dropped == 1 and _ids(kept) == ["x", "z"]


def test_sort_facts_is_independent_of_input_order_on_the_shipped_examples() -> None:
    facts = [f for p in sorted(EXAMPLES.glob("*.json")) for f in facts_of(p)]
    assert len(facts) == 10
    reference = [encode(f) for f in sort_facts(facts)]
    rng = random.Random(7)
    for _ in range(20):
        rng.shuffle(facts)
        assert [encode(f) for f in sort_facts(facts)] == reference
    # Logs and traces of one run share identities and content: one call each, read from the
    # trace capture (it carries the session its log event lacks). The two openai recordings
    # share response ids (one fake provider answered both) but are two runs in two sessions:
    # the ids collide, the content tells them apart, six calls.
    stats = DeriveStats()
    kept = sort_facts(facts, stats)
    assert stats.duplicates == 4
    assert [(f.session_id, f.model_call_id) for f in kept] == [
        ("43c6a7f90cec7797ee20722063bddfc9", "chatcmpl-plain-0001"),
        ("43c6a7f90cec7797ee20722063bddfc9", "chatcmpl-plain-0002"),
        ("b68b8d05059ba2e5fbf5521fd83b5afb", "chatcmpl-plain-0001"),
        ("b68b8d05059ba2e5fbf5521fd83b5afb", "chatcmpl-plain-0002"),
        ("weather-session-plain", None),
        ("weather-session-plain", None),
    ]


def test_a_call_read_from_its_log_events_takes_the_metadata_of_its_span() -> None:
    """openai-v2's default mode: the span holds the model, usage, response id and session and no
    message; its log events hold the messages alone. One call, read from the log events (they
    have parts) with the span's metadata: in the span's session, at the span's time."""
    log = with_(
        call("c", [user("Weather?")], [assistant(TextPart("Sunny."))], session=None, second=4),
        started_at=None,
        observed_at=at(4),
        raw={"log": 1},
    )
    span = with_(
        log,
        input_messages=[],
        output_messages=[],
        session_id="agent-trace",
        model="gpt-5",
        input_tokens=40,
        output_tokens=3,
        model_call_id="chatcmpl-1",
        parent_span_id="p1",
        started_at=at(1),
        request={"temperature": 0.2},
        degradations={"content_not_captured": 1},
        raw={"span": 1},
    )
    other = call(
        "d", [user("Thanks")], [assistant(TextPart("Bye."))], session="agent-trace", second=9
    )
    for order in ([span, log, other], [other, log, span]):
        stats = DeriveStats()
        groups = list(iter_sessions(sort_facts(order, stats), stats))
        assert [(sid, _ids(calls)) for sid, calls in groups] == [("agent-trace", ["c", "d"])]
        read = groups[0][1][0]
        assert read == with_(
            log,
            session_id="agent-trace",
            model="gpt-5",
            input_tokens=40,
            output_tokens=3,
            model_call_id="chatcmpl-1",
            parent_span_id="p1",
            started_at=at(1),
            request={"temperature": 0.2},
        )
        assert stats.duplicates == 1 and stats.richer_dropped == 0


_FIELDS = ("session_id", "model", "input_tokens", "model_call_id", "started_at", "request")
_VALUES: dict[str, list[Any]] = {
    "session_id": [None, "s1", "s2"],
    "model": [None, "gpt-5", "gpt-4o"],
    "input_tokens": [None, 0, 12],  # 0 is a count, not an empty field
    "model_call_id": [None, "r1"],
    "started_at": [None, at(1), at(2)],
    "request": [{}, {"temperature": 0.2}, {"seed": 7}],
}


_FINISHES = [None, "stop", "length"]
# An other capture's outputs: none, one (a span's finish reason: no part), or two (another
# number of outputs than the first capture's: no reason of theirs is taken).
_OUTPUTS = st.one_of(
    st.just([]),
    st.sampled_from(_FINISHES).map(lambda r: [Message("assistant", [], r)]),
    st.just([Message("assistant", [], "length"), Message("assistant", [], "stop")]),
)


@settings(max_examples=300, deadline=None)
@given(
    first=st.fixed_dictionaries({k: st.sampled_from(_VALUES[k]) for k in _FIELDS}),
    finish=st.sampled_from(_FINISHES),
    others=st.lists(
        st.tuples(
            st.fixed_dictionaries({k: st.sampled_from(_VALUES[k]) for k in _FIELDS}), _OUTPUTS
        ),
        max_size=3,
    ),
)
def test_a_fill_only_adds_what_the_first_capture_left_empty(
    first: dict[str, Any], finish: str | None, others: list[tuple[dict[str, Any], list[Message]]]
) -> None:
    base = call("c", [user("q")], [Message("assistant", [TextPart("a")], finish)])
    head = with_(base, **first, raw={"n": -1})
    rest = [
        with_(base, input_messages=[], output_messages=out, **o, raw={"n": i})
        for i, (o, out) in enumerate(others)
    ]
    got = fill(head, rest)
    assert (got.input_messages, got.raw, got.degradations) == (
        head.input_messages,
        head.raw,
        head.degradations,
    )
    assert [m.parts for m in got.output_messages] == [m.parts for m in head.output_messages]
    for k in _FIELDS:
        mine = getattr(head, k)
        if mine not in (None, {}):
            assert getattr(got, k) == mine  # never changed
        else:  # the first other capture that has it, else still empty
            found = [getattr(r, k) for r in rest if getattr(r, k) not in (None, {})]
            assert getattr(got, k) == (found[0] if found else mine)
    # A finish reason: the first capture's, else the first other one-output capture's.
    reasons = [r.output_messages[0].finish_reason for r in rest if len(r.output_messages) == 1]
    stated = [r for r in reasons if r is not None]
    assert got.output_messages[0].finish_reason == (finish or (stated[0] if stated else None))
    assert (got is head) == (got == head)  # unchanged is the very capture (stores test `is`)
