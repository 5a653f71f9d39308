"""The session list: its filter from query parameters, its pages, and every session a filter
selects (docs/ui.md, Sessions)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import threading
import time
from collections import OrderedDict
from typing import Any

import msgspec

from lithify.derive.segments import segment_session
from lithify.model import DEGRADATION_REASONS
from lithify.store import FactFilter, FactStore, FeedbackValue, SessionFilter, SessionSummary

# The feedback names the viewer writes (docs/ui.md, Curate); `exclude` keeps a call or a
# session out of every export unless it asks for them.
LABEL, SCORE, COMMENT, EXCLUDE = "label", "score", "comment", "exclude"


# The list's orders (docs/ui.md, Sessions): the `sort` parameter, each descending unless
# `dir=asc`.
SORTS = {
    "last": "last activity",
    "first": "first seen",
    "calls": "calls",
    "tokens": "tokens",
    "duration": "duration",
}


# -- sessions ----------------------------------------------------------------------------------
def session_filter(params: dict[str, str]) -> SessionFilter:
    """The list's filter from its query parameters (docs/ui.md, JSON twins); ValueError for a
    value that is not one."""

    def one(name: str) -> str | None:
        v = params.get(name, "").strip()
        return v or None

    has = one("feedback")
    if has not in (None, "yes", "no"):
        raise ValueError("feedback is yes or no")
    wanted: list[tuple[str, FeedbackValue]] = []
    if one("label"):
        wanted.append((LABEL, one("label") or ""))
    if one("exclude") == "yes":
        wanted.append((EXCLUDE, True))
    limit = int(one("limit") or 50)
    if not 1 <= limit <= 500:
        raise ValueError("limit is 1 to 500")
    bounds: list[float | None] = []
    for name in ("score_min", "score_max"):
        v = one(name)
        try:
            bound = None if v is None else float(v)
        except ValueError:
            raise ValueError(f"{name} is a number") from None
        if bound is not None and not math.isfinite(bound):
            raise ValueError(f"{name} is a finite number")
        bounds.append(bound)
    sort = one("sort") or "last"
    if sort not in SORTS:
        raise ValueError(f"sort is one of {', '.join(SORTS)}")
    direction = one("dir") or "desc"
    if direction not in ("asc", "desc"):
        raise ValueError("dir is asc or desc")
    degradation = one("degradation")
    if degradation is not None and degradation not in DEGRADATION_REASONS:
        raise ValueError(f"degradation is one of {', '.join(DEGRADATION_REASONS)}")
    return SessionFilter(
        model=one("model"),
        provider=one("provider"),
        source=one("source"),
        since=one("since"),
        until=one("until"),
        has_feedback=None if has is None else has == "yes",
        feedback=tuple(wanted),
        text=one("q"),
        limit=limit,
        after=one("after"),
        degradation=degradation,
        score_min=bounds[0],
        score_max=bounds[1],
        sort=sort,
        descending=direction == "desc",
    )


# Segments are derived (derive/segments.py), never stored: the list derives the segments of its
# page's sessions, at most SEGMENT_BUDGET seconds a request, and keeps each count while the
# session's calls stay as they were (its calls, first and last time, tokens). A count not
# derived in time is None, and comes with a later request: the list's cost stays bounded by
# the page whatever its sessions hold (docs/ui-speed.md).
SEGMENT_BUDGET = 0.05
_SEGMENTS_KEPT = 20_000
_segments: OrderedDict[tuple[Any, ...], int] = OrderedDict()
_segments_lock = threading.Lock()


def forget_segment_counts() -> None:
    """Forget every segment count kept (a benchmark's first view)."""
    with _segments_lock:
        _segments.clear()


def _segment_key(store: FactStore, s: SessionSummary) -> tuple[Any, ...]:
    return (store.url, s.session_id, s.calls, s.first_at, s.last_at, s.input_tokens)


def segment_counts(
    store: FactStore, page: list[SessionSummary], budget: float = SEGMENT_BUDGET
) -> list[int | None]:
    """The segment count of each session (None: not derived within ``budget`` seconds)."""
    keys = [_segment_key(store, s) for s in page]
    with _segments_lock:
        counts: list[int | None] = [_segments.get(k) for k in keys]
    todo = [s.session_id for s, n in zip(page, counts, strict=True) if n is None]
    if not todo:
        return counts
    found: dict[str, int] = {}
    deadline = time.perf_counter() + budget
    # One read of the sessions left, grouped by session, in the page's order of ids.
    for sid, calls in itertools.groupby(
        store.iter_facts(FactFilter(session_id=todo, order="session")),
        key=lambda f: f.session_id,
    ):
        found[sid or ""] = len(segment_session(sid, calls))
        if time.perf_counter() > deadline:
            break
    with _segments_lock:
        for i, (s, k) in enumerate(zip(page, keys, strict=True)):
            if counts[i] is None and s.session_id in found:
                counts[i] = _segments[k] = found[s.session_id]
        while len(_segments) > _SEGMENTS_KEPT:
            _segments.popitem(last=False)
    return counts


def sessions(store: FactStore, params: dict[str, str]) -> dict[str, Any]:
    f = session_filter(params)
    page = store.sessions(f)
    segments = segment_counts(store, page.sessions)
    return {
        "filter": {k: v for k, v in params.items() if k != "after" and v},
        "sessions": [
            {
                **msgspec.to_builtins(s),
                "duration_s": None if s.duration_ms is None else s.duration_ms / 1000,
                "segments": n,
            }
            for s, n in zip(page.sessions, segments, strict=True)
        ],
        "next": page.next,
        "scanned": page.scanned,
    }


SELECTION_LIMIT = 10_000  # sessions one request labels or exports; beyond, the CLI's filters


def selected_sessions(store: FactStore, params: dict[str, str]) -> list[str]:
    """The ids of every session the list's filter selects (all its pages), at most
    ``SELECTION_LIMIT``; ``ValueError`` beyond."""
    query = {k: v for k, v in params.items() if k not in ("after", "limit")}
    out: list[str] = []
    after: str | None = None
    while True:
        page = store.sessions(dataclasses.replace(session_filter(query), limit=500, after=after))
        out.extend(s.session_id for s in page.sessions)
        if len(out) > SELECTION_LIMIT:
            raise ValueError(
                f"the filter selects more than {SELECTION_LIMIT:,} sessions: narrow it, or use "
                "lithify export's own filters (--model, --source, --since, --until, --where)"
            )
        if page.next is None:
            return out
        after = page.next
