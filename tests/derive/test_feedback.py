"""Feedback joined to calls, segments and sessions: most specific target first, unique-or-drop."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from lithify.core.codec import encode
from lithify.derive.feedback import FEEDBACK_DROP_REASONS, FeedbackIndex
from lithify.derive.segments import iter_segments, segment_session
from lithify.derive.sessions import sort_facts
from lithify.model import TextPart
from lithify.translate.feedback import call_id_of_span
from tests.derive.helpers import (
    EXAMPLES,
    assistant,
    call,
    facts_of,
    feedback,
    replayed,
    user,
    with_,
)

Q = [user("hi")]


def _session() -> list:
    """Two segments in session "s": c1 → c2, then c3 (a new task); c1 and c2 in trace "t"."""
    c1 = with_(call("c1", Q, [assistant(TextPart("a"))], second=1), trace_id="t")
    c2 = with_(
        call(
            "c2",
            [*Q, replayed(c1.output_messages[0]), user("more")],
            [assistant(TextPart("b"))],
            second=2,
        ),
        trace_id="t",
    )
    c3 = call("c3", [user("other")], [assistant(TextPart("c"))], second=3)
    return [c1, c2, c3]


def _values(joined: dict) -> dict:
    return {name: (fb.target_kind, fb.value) for name, fb in joined.items()}


def test_a_call_takes_its_own_feedback_over_its_traces() -> None:
    c1, c2, _ = _session()
    index = FeedbackIndex(
        [
            feedback("f1", "call", "c1", "score", 0.9),
            feedback("f2", "trace", "t", "score", 0.1),
            feedback("f3", "trace", "t", "label", "good"),
        ]
    )
    assert _values(index.for_call(c1)) == {"label": ("trace", "good"), "score": ("call", 0.9)}
    assert _values(index.for_call(c2)) == {"label": ("trace", "good"), "score": ("trace", 0.1)}
    assert index.dropped() == {}


def test_a_segment_takes_its_latest_scored_call_then_its_session() -> None:
    facts = _session()
    index = FeedbackIndex(
        [
            feedback("f1", "call", "c1", "score", 0.2),
            feedback("f2", "call", "c1", "early", True),
            feedback("f3", "call", "c2", "score", 0.8),
            feedback("f4", "session", "s", "score", 0.5),
            feedback("f5", "session", "s", "solved", False),
        ]
    )
    loop, other = (index.attach(s) for s in segment_session("s", facts))
    assert [(f.name, f.target_id, f.value) for f in loop.feedback] == [
        ("early", "c1", True),
        ("score", "c2", 0.8),
        ("solved", "s", False),
    ]
    assert [(f.name, f.target_id, f.value) for f in other.feedback] == [
        ("score", "s", 0.5),
        ("solved", "s", False),
    ]
    assert _values(index.for_session("s")) == {
        "score": ("session", 0.5),
        "solved": ("session", False),
    }
    # Each turn: its call's feedback, else its session's (what SFT and DPO rows use).
    assert [[(f.name, f.target_id) for f in t.feedback] for t in loop.turns] == [
        [("early", "c1"), ("score", "c1"), ("solved", "s")],
        [("score", "c2"), ("solved", "s")],
    ]
    assert [[(f.name, f.target_id) for f in t.feedback] for t in other.turns] == [
        [("score", "s"), ("solved", "s")]
    ]


def test_disagreeing_feedback_is_dropped_and_the_lookup_falls_back() -> None:
    facts = _session()
    items = [
        feedback("f1", "call", "c2", "score", 1.0),
        feedback("f2", "call", "c2", "score", 0.0),  # disagrees with f1: both dropped
        feedback("f3", "trace", "t", "score", 0.5),
        feedback("f4", "call", "c1", "thumb", True),
        feedback("f5", "call", "c1", "thumb", 1),  # True is not 1: ambiguous
        feedback("f6", "call", "c3", "score", 1),
        feedback("f7", "call", "c3", "score", 1.0, second=9),  # the same value: one join
    ]
    index = FeedbackIndex(items)
    segments = [index.attach(s) for s in segment_session("s", facts)]
    assert _values(index.for_call(facts[1])) == {"score": ("trace", 0.5)}
    assert index.for_call(facts[0]).get("thumb") is None
    assert [(f.feedback_id, f.value) for f in segments[1].feedback] == [("f6", 1)]
    assert index.dropped() == {"ambiguous": 4}
    assert set(index.dropped()) <= set(FEEDBACK_DROP_REASONS)


def test_feedback_on_nothing_derived_counts_as_unmatched() -> None:
    index = FeedbackIndex(
        [
            feedback("f1", "call", "gone", "score", 1),
            feedback("f2", "session", "nowhere", "score", 1),
            feedback("f3", "trace", "t", "score", 1),
            feedback("f4", "call", "c1", "x", "a"),
            feedback("f5", "call", "c1", "x", "b"),
        ]
    )
    list(iter_segments(_session(), index))
    assert index.dropped() == {"ambiguous": 2, "unmatched": 2}


def test_the_same_feedback_twice_is_one_fact() -> None:
    fb = feedback("f1", "call", "c1", "score", 0.7)
    index = FeedbackIndex([fb, fb, with_(fb, raw={"redelivered": True})])
    assert index.for_call(_session()[0])["score"].value == 0.7
    assert index.dropped() == {}


def test_evaluation_feedback_on_a_recorded_span_joins_its_call() -> None:
    # gen_ai.evaluation.result events name the evaluated span; its call id is the span's fact id.
    c1, c2 = facts_of(EXAMPLES / "openai-v2.traces.json")
    assert c2.trace_id is not None and c2.span_id is not None
    target = call_id_of_span(c2.trace_id, c2.span_id)
    assert target == c2.inference_call_id
    index = FeedbackIndex([feedback("e1", "call", target, "relevance", 0.93)])
    [seg] = iter_segments(sort_facts([c2, c1]), index)
    assert [(f.name, f.value) for f in seg.feedback] == [("relevance", 0.93)]
    assert index.dropped() == {}


@given(st.randoms(use_true_random=False))
def test_joins_do_not_depend_on_feedback_order(rnd: random.Random) -> None:
    items = [
        feedback("f1", "call", "c2", "score", 1.0),
        feedback("f2", "call", "c2", "score", 1, second=2),
        feedback("f3", "trace", "t", "score", 0.5),
        feedback("f4", "session", "s", "label", "ok"),
        feedback("f5", "session", "s", "label", "ok", second=3),
        feedback("f6", "call", "c3", "x", True),
        feedback("f7", "call", "c3", "x", False),
    ]
    facts = _session()
    reference = [encode(s) for s in iter_segments(facts, FeedbackIndex(items))]
    rnd.shuffle(items)
    index = FeedbackIndex(items)
    assert [encode(s) for s in iter_segments(facts, index)] == reference
    assert index.dropped() == {"ambiguous": 2}
