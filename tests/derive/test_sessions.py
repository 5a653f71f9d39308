"""Sessions: call order, grouping, and deduplication of the same call captured twice."""

from __future__ import annotations

import random

import pytest

from lithify.core.codec import encode
from lithify.derive.sessions import (
    DeriveStats,
    call_order_key,
    dedupe,
    iter_sessions,
    sort_facts,
)
from lithify.model import TextPart
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
