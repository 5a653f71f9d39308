"""Feedback joined to calls, segments and sessions, unique-or-drop (docs/derive.md).

Rules, by name:

- a call's feedback: what targets the call itself, else what targets its trace;
- a session's feedback: what targets the session;
- a turn's feedback: its call's, else its session's;
- a segment's feedback: its latest call's that has one (turns read last to first), else its
  session's.

``FeedbackIndex.attach`` is where derivation joins them to segments and turns: exports read
``segment.feedback`` and ``turn.feedback`` and never look feedback up again.

When feedback facts with one name on one target disagree, none of them is used: the join is
ambiguous and counted, and the lookup goes on as if that target had none. Equal values given
more than once are one value (the earliest fact is the one returned).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

import msgspec

from lithify.core.codec import encode
from lithify.derive import Segment
from lithify.model import Feedback, InferenceCall

# Why a feedback fact was not joined (closed list; the export summary prints it).
FEEDBACK_DROP_REASONS = {
    "ambiguous": "another feedback fact with the same name on the same target has a different value",
    "unmatched": "no derived call, trace or session is its target (absent, or filtered out)",
}

_Key = tuple[str, str]  # (target_kind, target_id)


def _value_key(value: object) -> tuple[str, object]:
    # Feedback values are compared as JSON values: a bool is not a number, 1 equals 1.0.
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, int | float):
        return "number", value
    return type(value).__name__, value


def _order(fb: Feedback) -> tuple[str, str]:
    return fb.observed_at or "", fb.feedback_id


def _by_name(found: dict[str, Feedback]) -> dict[str, Feedback]:
    return dict(sorted(found.items()))


class FeedbackIndex:
    """Feedback facts by target, ready to join; holds all given feedback in memory.

    Lookups record which targets were met, so that ``dropped()`` after a full derivation
    counts the feedback that matched nothing.

    ``aliases`` maps the ids of other captures of a call (dropped by the capture rule) to the
    id of the capture kept (``sessions.resolve_facts``, ``FactStore.call_aliases``): feedback
    on any capture of a call is feedback on the call.
    """

    def __init__(
        self, feedback: Iterable[Feedback], aliases: Mapping[str, str] | None = None
    ) -> None:
        by_id: dict[str, Feedback] = {}
        # The same feedback_id twice is one fact; the first in (observed_at, id, bytes) order.
        for fb in sorted(feedback, key=lambda f: (_order(f), encode(f))):
            by_id.setdefault(fb.feedback_id, fb)
        groups: dict[_Key, dict[str, list[Feedback]]] = defaultdict(lambda: defaultdict(list))
        for fb in by_id.values():
            target = fb.target_id
            if aliases and fb.target_kind == "call":
                target = aliases.get(target, target)
            groups[(fb.target_kind, target)][fb.name].append(fb)
        self._drops: Counter[str] = Counter()
        self._sizes: dict[_Key, int] = {}
        self._by_target: dict[_Key, dict[str, Feedback]] = {}
        for key, names in groups.items():
            joined: dict[str, Feedback] = {}
            used = 0
            for name, items in names.items():
                if len({_value_key(fb.value) for fb in items}) > 1:
                    self._drops["ambiguous"] += len(items)
                    continue
                joined[name] = min(items, key=_order)
                used += len(items)
            if joined:
                self._by_target[key] = joined
                self._sizes[key] = used
        self._met: set[_Key] = set()

    def _get(self, kind: str, target: str | None) -> dict[str, Feedback]:
        if target is None:
            return {}
        key = (kind, target)
        found = self._by_target.get(key)
        if found is None:
            return {}
        self._met.add(key)
        return found

    def for_call(self, call: InferenceCall) -> dict[str, Feedback]:
        """Feedback by name on one call: its own, else its trace's."""
        trace = self._get("trace", call.trace_id)
        own = self._get("call", call.inference_call_id)
        if not trace and not own:
            return {}  # most calls: no feedback
        return _by_name({**trace, **own})

    def for_session(self, session_id: str | None) -> dict[str, Feedback]:
        return _by_name(self._get("session", session_id))

    def attach(self, segment: Segment) -> Segment:
        """The segment with its feedback joined (the one place feedback is joined): each
        turn's ``feedback``, its call's else its session's, and the segment's, its latest
        call's else its session's; one fact per name each, sorted by name."""
        session = self.for_session(segment.session_id)
        calls = [self.for_call(turn.call) for turn in segment.turns]
        if not session and not any(calls):
            return segment  # most segments: nothing to join
        joined: dict[str, Feedback] = {}
        for own in reversed(calls):
            for name, fb in own.items():
                joined.setdefault(name, fb)
        for name, fb in session.items():
            joined.setdefault(name, fb)
        turns = [
            msgspec.structs.replace(turn, feedback=list(_by_name({**session, **own}).values()))
            for turn, own in zip(segment.turns, calls, strict=True)
        ]
        return msgspec.structs.replace(
            segment, turns=turns, feedback=list(_by_name(joined).values())
        )

    def take_met(self) -> set[tuple[str, str]]:
        """The targets looked up since the last call, forgotten here: a task of a distributed
        export hands them back, and the driver's index ``meet``s them (its ``dropped`` then
        counts as if it had looked them up itself)."""
        met, self._met = self._met, set()
        return met

    def meet(self, targets: Iterable[tuple[str, str]]) -> None:
        """Count ``targets`` as looked up here."""
        self._met.update(targets)

    def dropped(self) -> dict[str, int]:
        """Feedback facts not joined, by reason (FEEDBACK_DROP_REASONS); ``unmatched`` is final
        once every derived call and session has been looked up."""
        drops = Counter(self._drops)
        for key, n in self._sizes.items():
            if key not in self._met:
                drops["unmatched"] += n
        return dict(sorted((k, v) for k, v in drops.items() if v))
