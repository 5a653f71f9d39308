"""Property tests: generated sessions (tool loops, compactions, retries, several choices,
interleaved trajectories, duplicate captures) against what the generator knows to be true."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lithify.core.codec import encode
from lithify.derive import SPLIT_REASONS, Segment
from lithify.derive.segments import iter_segments
from lithify.derive.sessions import DeriveStats, sort_facts
from lithify.model import InferenceCall, Message, TextPart
from tests.derive.helpers import (
    assert_replays,
    assistant,
    call,
    replayed,
    system,
    tool,
    tool_call,
    user,
    with_,
)
from tests.store.helpers import VALUES

ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["new", "step", "step", "step", "compact", "retry", "duplicate"]),
        st.integers(0, 15),  # which trajectory / fact
        st.integers(0, 3),  # output choices of the new call (0: the call failed)
        st.integers(0, 2),  # new messages after the replay, or which duplicate
        VALUES,  # a tool argument / result value
        st.sampled_from(["s1", "s2", None]),
    ),
    max_size=30,  # below REASON_WINDOW: a retry is always explained against its own tail
)


@dataclass
class _Traj:
    session: str | None
    tail: InferenceCall


@dataclass
class _World:
    """The generator's truth: each call's predecessor and how it relates to it."""

    facts: list[InferenceCall] = field(default_factory=list)
    trajs: list[_Traj] = field(default_factory=list)
    # call id → (predecessor id, choice replayed) when the call continues its predecessor
    continues: dict[str, tuple[str, int]] = field(default_factory=dict)
    # call id → the split reason the generator expects (calls in a session only)
    expected_reason: dict[str, str] = field(default_factory=dict)
    n: int = 0

    def uid(self) -> str:
        self.n += 1
        return f"c{self.n}"

    def emit(self, traj: _Traj, inp: list[Message], choices: int, value: Any) -> InferenceCall:
        cid = self.uid()
        outs = []
        for j in range(choices):
            if j % 2:
                outs.append(assistant(TextPart(f"{cid} answer {j}")))
            else:
                outs.append(assistant(tool_call(f"{cid}-t{j}", "f", v=value), finish="tool_call"))
        fact = call(cid, inp, outs, session=traj.session, model_call_id=f"resp-{cid}")
        fact = with_(fact, started_at=f"2025-06-01T10:{self.n // 60:02d}:{self.n % 60:02d}.0Z")
        self.facts.append(fact)
        traj.tail = fact
        return fact


def _world(actions: list[tuple[Any, ...]]) -> _World:
    w = _World()
    for kind, k, choices, extra, value, session in actions:
        if kind == "new" or not w.trajs:
            traj = _Traj(session, None)  # type: ignore[arg-type]
            w.trajs.append(traj)
            fact = w.emit(traj, [system("sys"), user(f"task {w.n + 1}")], choices, value)
            w.expected_reason[fact.inference_call_id] = "input_history_changed"
            continue
        traj = w.trajs[k % len(w.trajs)]
        tail = traj.tail
        if kind == "duplicate":
            original = w.facts[k % len(w.facts)]
            copies = [
                original,
                with_(original, trace_id="recaptured"),
                with_(
                    original,
                    inference_call_id=f"{original.inference_call_id}-proxy",
                    started_at="2025-06-01T11:00:00.0Z",
                ),
            ]
            w.facts.append(copies[extra])
        elif kind == "compact":
            inp = [system("sys"), user(f"summary {w.n + 1}"), user("go on")]
            fact = w.emit(traj, inp, choices, value)
            w.expected_reason[fact.inference_call_id] = "input_history_changed"
        elif kind == "retry" or not tail.output_messages:
            fact = w.emit(traj, tail.input_messages, choices, value)
            reason = "prior_output_not_replayed" if tail.output_messages else "prior_output_absent"
            w.expected_reason[fact.inference_call_id] = reason
        else:
            j = extra % len(tail.output_messages)
            chosen = tail.output_messages[j]
            new: list[Message] = []
            for part in chosen.parts:
                if hasattr(part, "arguments") and extra:
                    new.append(tool(part.id, value))  # type: ignore[union-attr]
            if extra == 2:
                new.append(user("continue"))
            fact = w.emit(traj, [*tail.input_messages, replayed(chosen), *new], choices, value)
            w.continues[fact.inference_call_id] = (tail.inference_call_id, j)
    return w


def _segments(facts: list[InferenceCall], stats: DeriveStats | None = None) -> list[Segment]:
    return list(iter_segments(sort_facts(facts, stats), stats=stats))


@given(ACTIONS, st.randoms(use_true_random=False))
def test_generated_sessions_segment_as_the_generator_built_them(
    actions: list[tuple[Any, ...]], rnd: random.Random
) -> None:
    w = _world(actions)
    stats = DeriveStats()
    segments = _segments(w.facts, stats)
    # Every call, once, in exactly one segment; duplicates dropped and counted.
    ids = [t.call.inference_call_id for s in segments for t in s.turns]
    unique = {f.inference_call_id for f in w.facts if not f.inference_call_id.endswith("-proxy")}
    assert sorted(ids) == sorted(unique)
    assert (stats.calls, stats.duplicates) == (len(unique), len(w.facts) - len(unique))
    assert stats.segments == len(segments)
    assert_replays(segments)

    where: dict[str, tuple[Segment, int]] = {}
    for seg in segments:
        for i, turn in enumerate(seg.turns):
            where[turn.call.inference_call_id] = (seg, i)
    by_session: dict[str | None, list[Segment]] = {}
    for seg in segments:
        by_session.setdefault(seg.session_id, []).append(seg)
    for sid, segs in by_session.items():
        if sid is None:
            assert all(s.split_reason == "no_session" and len(s.turns) == 1 for s in segs)
            continue
        assert [s.index for s in segs] == list(range(len(segs)))
        assert segs[0].split_reason is None
        assert all(s.split_reason in SPLIT_REASONS for s in segs[1:])
        for seg in segs:
            first = seg.turns[0].call
            if seg.index > 0:
                assert seg.split_reason == w.expected_reason[first.inference_call_id]
    for cid, (pred, choice) in w.continues.items():
        seg, i = where[cid]
        if seg.session_id is None:
            continue
        assert i > 0 and seg.turns[i - 1].call.inference_call_id == pred
        assert seg.turns[i - 1].chosen == choice

    # Determinism: any arrival order gives byte-identical segments.
    shuffled = list(w.facts)
    rnd.shuffle(shuffled)
    assert [encode(s) for s in _segments(shuffled)] == [encode(s) for s in segments]
