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
# page's sessions and keeps each count while the session's calls stay as they were (its calls,
# first and last time, tokens). A request derives those it expects to finish within
# SEGMENT_BUDGET seconds (from the time per call derivations have taken), fewest calls first;
# a thread of the server derives the others after it, and a later view shows them (None until
# then). The list's time stays bounded whatever its sessions hold (docs/ui-speed.md).
SEGMENT_BUDGET = 0.05
_SEGMENTS_KEPT = 20_000
_PENDING_KEPT = 1_000
_segments: OrderedDict[tuple[Any, ...], int] = OrderedDict()
_pending: OrderedDict[tuple[Any, ...], tuple[FactStore, str]] = OrderedDict()
_segments_lock = threading.Condition()
_per_call = [0.001]  # seconds a call's derivation takes, as measured (a cautious start)
_worker: list[threading.Thread] = []


def forget_segment_counts() -> None:
    """Forget every segment count kept or waiting (a benchmark's first view)."""
    with _segments_lock:
        _segments.clear()
        _pending.clear()


def segment_counts_pending() -> int:
    """Segment counts the server's thread has yet to derive."""
    with _segments_lock:
        return len(_pending)


def _segment_key(store: FactStore, s: SessionSummary) -> tuple[Any, ...]:
    return (store.url, s.session_id, s.calls, s.first_at, s.last_at, s.input_tokens)


def _derive(store: FactStore, sids: list[str], deadline: float | None) -> dict[str, int]:
    """Segment counts of these sessions, in one read grouped by session; stops at
    ``deadline`` (None: never)."""
    found: dict[str, int] = {}
    t0, calls_read = time.perf_counter(), 0
    for sid, calls in itertools.groupby(
        store.iter_facts(FactFilter(session_id=sids, order="session")),
        key=lambda f: f.session_id,
    ):
        facts = list(calls)
        calls_read += len(facts)
        found[sid or ""] = len(segment_session(sid, facts))
        if deadline is not None and time.perf_counter() > deadline:
            break
    if calls_read:
        with _segments_lock:
            _per_call[0] = 0.8 * _per_call[0] + 0.2 * (time.perf_counter() - t0) / calls_read
    return found


def _keep(keys: dict[str, tuple[Any, ...]], found: dict[str, int]) -> None:
    with _segments_lock:
        for sid, n in found.items():
            if sid in keys:
                _segments[keys[sid]] = n
                _pending.pop(keys[sid], None)
        while len(_segments) > _SEGMENTS_KEPT:
            _segments.popitem(last=False)


def _work() -> None:
    """The server's thread that derives the counts requests left (daemon: it never holds up
    an exit). A store closed meanwhile, or any failure, drops that count."""
    while True:
        with _segments_lock:
            while not _pending:
                _segments_lock.wait()
            key, (store, sid) = _pending.popitem(last=False)
        t0 = time.perf_counter()
        try:
            _keep({sid: key}, _derive(store, [sid], None))
        except Exception:  # a count is a hint: the next view asks again
            continue
        # Half the interpreter at most: the requests it serves meanwhile come first.
        time.sleep(time.perf_counter() - t0)


def segment_counts(
    store: FactStore, page: list[SessionSummary], budget: float = SEGMENT_BUDGET
) -> list[int | None]:
    """The segment count of each session; None where it was not derived in time."""
    keys = {s.session_id: _segment_key(store, s) for s in page}
    with _segments_lock:
        known = {sid: _segments[k] for sid, k in keys.items() if k in _segments}
        per_call = _per_call[0]
    todo = sorted((s for s in page if s.session_id not in known), key=lambda s: s.calls)
    now, spent, fits, later = [], 0.0, True, []
    for s in todo:
        spent += s.calls * per_call
        fits = fits and spent <= budget
        (now if fits else later).append(s)
    if now:
        found = _derive(store, [s.session_id for s in now], time.perf_counter() + budget)
        _keep(keys, found)
        known.update(found)
        later += [s for s in now if s.session_id not in found]
    if later:
        with _segments_lock:
            for s in later:
                _pending[keys[s.session_id]] = (store, s.session_id)
                _pending.move_to_end(keys[s.session_id])
            while len(_pending) > _PENDING_KEPT:
                _pending.popitem(last=False)
            if not _worker:
                _worker.append(threading.Thread(target=_work, name="segments", daemon=True))
                _worker[0].start()
            _segments_lock.notify()
    return [known.get(s.session_id) for s in page]


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
