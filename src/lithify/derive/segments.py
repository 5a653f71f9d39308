"""Segments: a session's calls joined into trajectories by proven continuity (docs/derive.md).

A call continues a trajectory when its input, in canonical form, is exactly the input of the
trajectory's last call, then one of that call's output messages, then anything new. Several
trajectories may be open at once (sub-agents interleaving in one session): a call continues
the one it replays, the most recently active one if several fit, and starts a new segment
only when it continues none.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from lithify.core.hashing import stable_hash
from lithify.derive import Segment, Turn
from lithify.derive.canonical import Forms, canonical_messages
from lithify.derive.sessions import DeriveStats, dedupe, iter_sessions
from lithify.model import InferenceCall

if TYPE_CHECKING:
    from lithify.derive.feedback import FeedbackIndex

# A new call is first compared with this many of the session's most recently active
# trajectories; only when none continues is every open trajectory looked up in the index.
FAST_WINDOW = 8
# How many of the most recently active trajectories a split is explained against.
REASON_WINDOW = 32


def _extends(forms: list[bytes], prefix: list[bytes]) -> bool:
    """Whether the input of ``forms`` begins with the messages of ``prefix``. Forms are
    self-delimiting, so this is their concatenations' ``startswith``; compared as lists, equal
    forms are mostly the same objects (``Forms`` shares them) and cost a pointer each, where
    bytes would be compared byte by byte, the whole history again for every call."""
    return len(forms) >= len(prefix) and forms[: len(prefix)] == prefix


class _Call:
    __slots__ = ("chosen", "fact", "forms", "new_from", "out")

    def __init__(self, fact: InferenceCall, forms: list[bytes], new_from: int) -> None:
        self.fact = fact
        # Canonical input and outputs (a form a message); released once the call is no longer
        # a tail, since only tails are compared.
        self.forms = forms
        self.out: list[bytes] = canonical_messages(fact.output_messages)
        self.new_from = new_from  # where this turn's new messages start in its input
        self.chosen = 0  # the choice the next call replayed; the first when none does

    def replayed_by(self, forms: list[bytes]) -> int | None:
        """The choice a call whose input is ``forms`` replays after this call's input."""
        n = len(self.forms)
        if len(forms) <= n or not _extends(forms, self.forms):
            return None
        after = forms[n]  # a whole form: it equals an output's exactly when it starts with it
        for j, out in enumerate(self.out):
            if after == out:
                return j
        return None


class _Segment:
    __slots__ = ("active", "calls", "index", "reason")

    def __init__(self, index: int, reason: str | None, first: _Call) -> None:
        self.index = index
        self.reason = reason
        self.calls = [first]
        self.active = 0  # when it last started or grew: higher is more recent


class _Open:
    """The open trajectories of one session, indexed by what a continuation must replay."""

    def __init__(self) -> None:
        # (messages in the replayed history, the replayed output) → (segment, choice).
        self.tails: dict[tuple[int, bytes], list[tuple[_Segment, int]]] = {}
        self.recent: OrderedDict[int, _Segment] = OrderedDict()  # least recently active first
        self.clock = 0
        # Built once the session has more open trajectories than the fast window: most never do.
        self.indexed = False

    def add(self, seg: _Segment) -> None:
        """Register the segment's new tail call as what later calls may continue."""
        self.clock += 1
        seg.active = self.clock
        self.recent[seg.index] = seg
        self.recent.move_to_end(seg.index)
        if self.indexed:
            self._index(seg)
        elif len(self.recent) > FAST_WINDOW:
            self.indexed = True
            for open_seg in self.recent.values():
                self._index(open_seg)

    def _index(self, seg: _Segment) -> None:
        tail = seg.calls[-1]
        n = len(tail.fact.input_messages) + 1
        for j, out in enumerate(tail.out):
            self.tails.setdefault((n, out), []).append((seg, j))

    def remove_tail(self, seg: _Segment) -> None:
        tail = seg.calls[-1]
        n = len(tail.fact.input_messages) + 1
        for out in tail.out if self.indexed else ():
            entries = self.tails.get((n, out))
            if entries is None:
                continue
            entries[:] = [e for e in entries if e[0] is not seg]
            if not entries:
                del self.tails[(n, out)]
        tail.forms, tail.out = [], []

    def find(self, forms: list[bytes]) -> tuple[_Segment, int] | None:
        """The open trajectory a call whose input is ``forms`` (its messages' forms) continues,
        and the choice it replays: the most recently active one if several do; within one, the
        lowest of equal choices."""
        for i, seg in enumerate(reversed(self.recent.values())):
            if i == FAST_WINDOW:
                break
            j = seg.calls[-1].replayed_by(forms)
            if j is not None:
                return seg, j
        if not self.indexed:
            return None
        best: tuple[_Segment, int] | None = None
        for k in range(1, len(forms) + 1):
            for seg, j in self.tails.get((k, forms[k - 1]), ()):
                if seg.calls[-1].replayed_by(forms) != j:
                    continue
                if best is None or seg.active > best[0].active:
                    best = (seg, j)
        return best

    def reason(self, forms: list[bytes]) -> str:
        """Why the call continues no open trajectory, against the most recent one whose input
        its own extends."""
        for i, seg in enumerate(reversed(self.recent.values())):
            if i == REASON_WINDOW:
                break
            tail = seg.calls[-1]
            if _extends(forms, tail.forms):
                return "prior_output_not_replayed" if tail.out else "prior_output_absent"
        return "input_history_changed"


def segment_id(session_id: str | None, first_call_id: str) -> str:
    """Deterministic: the session id and the id of the segment's first call."""
    return stable_hash("segment", session_id, first_call_id)


def segment_session(
    session_id: str | None,
    calls: Iterable[InferenceCall],
    stats: DeriveStats | None = None,
) -> list[Segment]:
    """The segments of one session's calls (any order; duplicates are dropped), in the order
    of their first calls. Without a session, every call is a segment of its own."""
    ordered, dropped = dedupe(calls)
    if stats is not None:
        stats.duplicates += dropped
    return _segments_of(session_id, ordered, stats)


def _segments_of(
    session_id: str | None, ordered: list[InferenceCall], stats: DeriveStats | None
) -> list[Segment]:
    if session_id is None:
        segments = [_single(fact) for fact in ordered]
    else:
        segments = _segment(session_id, ordered)
    if stats is not None:
        stats.calls += len(ordered)
        stats.segments += len(segments)
        for seg in segments:
            if seg.split_reason is not None:
                stats.split(seg.split_reason)
            stats.alternatives += sum(len(t.alternatives) for t in seg.turns)
    return segments


def _single(fact: InferenceCall) -> Segment:
    turn = Turn(
        call=fact,
        new_messages=list(fact.input_messages),
        chosen=0,
        alternatives=list(range(1, len(fact.output_messages))),
    )
    return Segment(
        segment_id=segment_id(None, fact.inference_call_id),
        session_id=None,
        index=0,
        split_reason="no_session",
        turns=[turn],
    )


def _segment(session_id: str, facts: list[InferenceCall]) -> list[Segment]:
    segments: list[_Segment] = []
    open_ = _Open()
    canonical = Forms()
    for fact in facts:
        forms = canonical.of(fact.input_messages)
        found = open_.find(forms)
        if found is not None:
            seg, choice = found
            open_.remove_tail(seg)
            seg.calls[-1].chosen = choice
            new_from = len(seg.calls[-1].fact.input_messages) + 1
            seg.calls.append(_Call(fact, forms, new_from))
        else:
            reason = open_.reason(forms) if segments else None
            seg = _Segment(len(segments), reason, _Call(fact, forms, new_from=0))
            segments.append(seg)
        open_.add(seg)
    return [_finish(session_id, seg) for seg in segments]


def _finish(session_id: str, seg: _Segment) -> Segment:
    turns = []
    for call in seg.calls:
        n = len(call.fact.output_messages)
        turns.append(
            Turn(
                call=call.fact,
                new_messages=call.fact.input_messages[call.new_from :],
                chosen=call.chosen,
                alternatives=[i for i in range(n) if i != call.chosen] if n > 1 else [],
            )
        )
    return Segment(
        segment_id=segment_id(session_id, seg.calls[0].fact.inference_call_id),
        session_id=session_id,
        index=seg.index,
        split_reason=seg.reason,
        turns=turns,
    )


def iter_segments(
    facts: Iterable[InferenceCall],
    feedback: FeedbackIndex | None = None,
    stats: DeriveStats | None = None,
) -> Iterator[Segment]:
    """Segments of facts grouped by session (see ``iter_sessions``), one session in memory at a
    time; with ``feedback``, each segment carries its joined feedback."""
    for session_id, calls in iter_sessions(facts, stats):
        for seg in _segments_of(session_id, calls, stats):
            yield seg if feedback is None else feedback.attach(seg)
