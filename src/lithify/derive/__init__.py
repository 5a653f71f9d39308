"""Derivations: pure, deterministic functions of facts — sessions, segments, feedback joins.

The types here are the contract between derivation and export (docs/export.md); how
sessions, segments and feedback joins are formed: docs/derive.md (sessions.py, segments.py,
feedback.py).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from lithify.model import Feedback, InferenceCall, Message

# Why a new segment starts (closed list, docs/export.md); None for the first segment of a session.
SPLIT_REASONS = {
    "prior_output_absent": "the previous call has no output message to continue from",
    "input_history_changed": "the input is not the previous input plus its output (e.g. a compacted context)",
    "prior_output_not_replayed": "the previous output is not replayed at the start of the new messages",
    "no_session": "a call without a session is a segment of its own",
}

# What ``DeriveStats.alternatives`` counts, as summaries and dataset cards explain it.
ALTERNATIVES = (
    "output choices of calls with several (n > 1) that the trajectory did not continue with: "
    "no row carries them"
)


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    """One call within a segment."""

    call: InferenceCall
    # The messages this turn adds: the full input for a segment's first turn, else only what
    # follows the replayed history (tool results, a new user message).
    new_messages: list[Message]
    # The index in ``call.output_messages`` of the choice the segment continues with (0, and
    # out of range, when the call has no output: such a turn always ends its segment).
    chosen: int
    # The other choices at this turn (candidates for preference pairs), in index order.
    alternatives: list[int] = msgspec.field(default_factory=list)
    # The call's feedback (its own, else its trace's), else its session's: one fact per name,
    # sorted by name; joined by derivation (feedback.py), unique-or-drop.
    feedback: list[Feedback] = msgspec.field(default_factory=list)


class Segment(msgspec.Struct, frozen=True, kw_only=True):
    """A trajectory a trainer can replay: turns joined by proven continuity."""

    segment_id: str  # deterministic: from the session id and the first call's id
    session_id: str | None
    index: int  # position of the segment within its session (0-based)
    split_reason: str | None  # why this segment starts (SPLIT_REASONS), None for the first
    turns: list[Turn]
    feedback: list[Feedback] = msgspec.field(default_factory=list)  # joined, unique-or-drop


FeedbackTarget = Literal["call", "segment", "session"]
