"""Sessions: facts deduplicated, ordered and grouped by session (docs/derive.md).

The store reads facts grouped by session (``FactFilter(order="session")``); ``iter_sessions``
turns that stream into one group per session, holding one session at a time. Fact files come
in any order: ``sort_facts`` deduplicates and orders them the same way in memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

import msgspec

from lithify.core.codec import col, encode, uncol
from lithify.core.identity import (
    Capture,
    aliases,
    assign,
    capture_digest,
    content_keys,
    fill,
    lack,
    lacked_parts,
    split_ids,
)
from lithify.model import InferenceCall


class DeriveStats(msgspec.Struct, kw_only=True):
    """What derivation saw and made, counted as it goes; the export summary holds it as it is.
    The facts read are ``calls + duplicates``."""

    calls: int = 0  # distinct calls, each in one segment
    # Facts dropped as another capture of a call: here, or by the capture rule of the source
    # (a store, ``sort_facts``) that derivation reads from.
    duplicates: int = 0
    # Of those, the distinct captures holding more message parts than the one their call is
    # read from (the rule ranks a session first: a proxy's capture without one loses to the
    # span that dropped its reasoning). Rows lack those parts; counted so the loss is seen.
    richer_dropped: int = 0
    sessions: int = 0  # groups with a session id
    segments: int = 0
    splits: dict[str, int] = msgspec.field(default_factory=dict)  # starts by SPLIT_REASONS
    # Output choices other than the one a turn continues with (n > 1): no row carries them.
    alternatives: int = 0

    def split(self, reason: str) -> None:
        """Count a segment start; reasons stay in name order, as summaries list them."""
        n = self.splits.get(reason)
        if n is None:  # a reason not seen yet: at most four times a derivation
            self.splits = dict(sorted({**self.splits, reason: 1}.items()))
        else:
            self.splits[reason] = n + 1

    def add(self, part: DeriveStats) -> None:
        """Add the counts of a part of the derivation (a worker's, a Ray task's)."""
        self.calls += part.calls
        self.duplicates += part.duplicates
        self.richer_dropped += part.richer_dropped
        self.sessions += part.sessions
        self.segments += part.segments
        self.alternatives += part.alternatives
        splits = Counter(self.splits)
        splits.update(part.splits)
        self.splits = dict(sorted(splits.items()))  # in name order, as ``split`` keeps


def call_order_key(fact: InferenceCall) -> tuple[str, str]:
    """A session's call order (docs/export.md): (started_at or observed_at, inference_call_id),
    as the store's ``sort_at`` column and index order it ('' first when there is no time)."""
    t = fact.started_at or fact.observed_at
    return col(t) if t else "", col(fact.inference_call_id)


def session_order_key(fact: InferenceCall) -> tuple[bool, str, str, str]:
    """The store's ``order="session"``: by session id, facts without a session last.

    Strings compare in their column form (code point order, as both databases compare them),
    so files and stores give sessions in one order.
    """
    sid = col(fact.session_id)
    return (sid is None, sid or "", *call_order_key(fact))


def _capture(fact: InferenceCall) -> Capture:
    """The rule's view of a fact, in the column forms a store compares, so that files and
    stores rank and name calls alike."""
    in_key, out_key = content_keys(fact)
    sort_at, call_id = call_order_key(fact)
    return Capture(
        capture_digest(encode(fact)),
        lack(fact),
        sort_at,
        call_id,
        col(fact.model_call_id),
        col(fact.session_id),
        in_key,
        out_key,
    )


def resolve(facts: Iterable[InferenceCall]) -> tuple[list[InferenceCall], list[InferenceCall]]:
    """``_resolve`` without the names."""
    kept, dropped, _ = _resolve(facts)
    return kept, dropped


def _resolve(
    facts: Iterable[InferenceCall],
    richer: list[InferenceCall] | None = None,
    left_out: dict[str, list[int]] | None = None,
) -> tuple[list[InferenceCall], list[InferenceCall], list[tuple[str, str, bool]]]:
    """The identity rule (``core.identity``) over ``facts``: the calls, each as its first
    capture (named by its call id, filled: ``identity.fill``), in call order; the other
    captures of those calls (exact copies included), in rank order; and ``(inference_call_id,
    call_id, first)`` of every capture sharing an id, for ``identity.aliases``. ``richer``
    receives the other captures holding more message parts than their call's first capture
    (exact copies once); ``left_out``, by call id, how many of each are the call's
    (``[dropped, richer]``): a filter selects calls, and counts what they left out.

    Only captures sharing an id with another are ranked: every other one is a call of its own.
    """
    facts = list(facts)
    ids = Counter(f.inference_call_id for f in facts)
    model_ids = Counter(f.model_call_id for f in facts if f.model_call_id is not None)
    contested: list[tuple[Capture, InferenceCall]] = []
    kept: list[InferenceCall] = []
    for f in facts:
        shared = ids[f.inference_call_id] > 1 or (
            f.model_call_id is not None and model_ids[f.model_call_id] > 1
        )
        if shared:
            contested.append((_capture(f), f))
        else:
            kept.append(f)
    dropped: list[InferenceCall] = []
    names: list[tuple[str, str, bool]] = []
    if contested:
        contested.sort(key=lambda cf: cf[0].rank)
        seen: set[bytes] = set()
        copies: list[bytes] = []
        unique: list[tuple[Capture, InferenceCall]] = []
        for c, f in contested:
            if c.digest in seen:
                # The same capture twice (a redelivery): its original names its call, as a
                # store, which keeps one copy, does.
                dropped.append(f)
                copies.append(c.digest)
            else:
                seen.add(c.digest)
                unique.append((c, f))
        call_of: dict[bytes, str] = {}  # a capture's digest → its call's id
        read: dict[bytes, int] = {}  # a call → the parts field of its first capture's lack
        at: dict[bytes, int] = {}  # a call → its first capture's place in ``kept``
        others: dict[bytes, list[InferenceCall]] = {}  # a call → its other captures, ranked
        ids_of: dict[bytes, set[str]] = {}  # a call → its captures' inference_call_ids
        held: list[tuple[str, bytes]] = []  # (inference_call_id, call) of every capture
        for (c, f), a in zip(unique, assign(c for c, _ in unique), strict=True):
            call_id = uncol(a.call_id) or ""
            call_of[c.digest] = call_id
            names.append((f.inference_call_id, call_id, a.call == c.digest))
            ids_of.setdefault(a.call, set()).add(f.inference_call_id)
            held.append((f.inference_call_id, a.call))
            if a.call != c.digest:
                dropped.append(f)
                others.setdefault(a.call, []).append(f)
                if left_out is not None:
                    left_out.setdefault(call_id, [0, 0])[0] += 1
                # A call's first capture ranks before its others: ``read`` has it already.
                if lacked_parts(c.lack) < read[a.call]:
                    if richer is not None:
                        richer.append(f)
                    if left_out is not None:
                        left_out[call_id][1] += 1
                continue
            read[c.digest] = lacked_parts(c.lack)
            at[c.digest] = len(kept)
            if a.call_id != c.inference_call_id:
                kept.append(msgspec.structs.replace(f, inference_call_id=call_id))
            else:
                kept.append(f)
        split = split_ids(held)
        for call, more in others.items():
            kept[at[call]] = fill(kept[at[call]], more, halves=not ids_of[call] & split)
        if left_out is not None:
            for digest in copies:
                left_out.setdefault(call_of[digest], [0, 0])[0] += 1
    kept.sort(key=call_order_key)  # calls have distinct ids: no ties
    return kept, dropped, names


def dedupe(facts: Iterable[InferenceCall]) -> tuple[list[InferenceCall], int]:
    """One fact per call, in call order: ``inference_call_id`` and ``model_call_id`` identify
    it, and the capture rule picks the one kept, as a store does.

    Returns the kept facts and how many were dropped.
    """
    kept, dropped = resolve(facts)
    return kept, len(dropped)


def sort_facts(
    facts: Iterable[InferenceCall], stats: DeriveStats | None = None
) -> list[InferenceCall]:
    """Facts from anywhere (files, in any order, duplicates included), deduplicated and in
    the store's session order, ready for ``iter_sessions``. Holds them all in memory."""
    richer: list[InferenceCall] = []
    kept, dropped, _ = resolve_facts(facts, richer)
    if stats is not None:
        stats.duplicates += len(dropped)
        stats.richer_dropped += len(richer)
    return kept


def resolve_facts(
    facts: Iterable[InferenceCall],
    richer: list[InferenceCall] | None = None,
    left_out: dict[str, list[int]] | None = None,
) -> tuple[list[InferenceCall], list[InferenceCall], dict[str, str]]:
    """``sort_facts`` (the kept facts), the dropped ones, and the other ids of kept calls that
    feedback may name (``FeedbackIndex`` aliases; a store gives them with ``call_aliases``).
    ``richer`` receives the dropped captures holding more message parts than the capture their
    call is read from, each distinct capture once (``DeriveStats.richer_dropped``; a store
    counts them with ``count_richer_dropped``); ``left_out``, by call id, how many of the dropped
    and of those richer captures are the call's (a store counts those of the calls a filter
    selects the same way)."""
    kept, dropped, names = _resolve(facts, richer, left_out)
    kept.sort(key=session_order_key)
    return kept, dropped, aliases(names)


def next_session(last: str | None, sid: str) -> str:
    """The column form of ``sid``, a session starting after the one whose column form is
    ``last`` (None: the first); raises ``ValueError`` unless it comes after it in order."""
    key = col(sid)
    if last is not None and key <= last:
        raise ValueError(
            f"facts are not grouped by session: {sid!r} came back, or came after "
            f"{uncol(last)!r} (sessions must come in order)"
        )
    return key


def iter_sessions(
    facts: Iterable[InferenceCall], stats: DeriveStats | None = None
) -> Iterator[tuple[str | None, list[InferenceCall]]]:
    """``(session_id, calls)`` per session, calls deduplicated and in call order; a call without
    a session is a group of its own (``(None, [call])``).

    ``facts`` must come grouped by session, sessions in their order (``FactFilter(order=
    "session")`` or ``sort_facts``); only one session is held at a time. A session that comes
    back after another one, or out of that order, raises ``ValueError``: splitting a session
    silently would change its segments. (Checking the order, not remembering every session
    seen, keeps memory flat however many sessions there are.)
    """
    last: str | None = None  # the column form of the last session's id: they only increase
    current: str | None = None
    group: list[InferenceCall] = []

    def flush() -> tuple[str | None, list[InferenceCall]]:
        calls, dropped = dedupe(group)
        if stats is not None:
            stats.duplicates += dropped
            stats.sessions += 1
        return current, calls

    for fact in facts:
        sid = fact.session_id
        if sid is None:
            if group:
                yield flush()
                group = []
            yield None, [fact]
            continue
        if sid != current or not group:
            if group:
                yield flush()
                group = []
            last = next_session(last, sid)
            current = sid
        group.append(fact)
    if group:
        yield flush()
