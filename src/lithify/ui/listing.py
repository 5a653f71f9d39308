"""The session list: its filter from query parameters, its pages, and every session a filter
selects (docs/ui.md, Sessions)."""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime
from typing import Any

import msgspec

from lithify.model import DEGRADATION_REASONS
from lithify.store import FactStore, FeedbackValue, SessionFilter

# The feedback names the viewer writes (docs/ui.md, Curate); `exclude` keeps a call or a
# session out of every export unless it asks for them.
LABEL, SCORE, COMMENT, EXCLUDE = "label", "score", "comment", "exclude"


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
    )


def _duration_s(first: str | None, last: str | None) -> float | None:
    try:
        a = datetime.fromisoformat((first or "")[:26].replace("Z", "") + "+00:00")
        b = datetime.fromisoformat((last or "")[:26].replace("Z", "") + "+00:00")
    except ValueError:
        return None
    return round((b - a).total_seconds(), 3)


def sessions(store: FactStore, params: dict[str, str]) -> dict[str, Any]:
    f = session_filter(params)
    page = store.sessions(f)
    return {
        "filter": {k: v for k, v in params.items() if k != "after" and v},
        "sessions": [
            {**msgspec.to_builtins(s), "duration_s": _duration_s(s.first_at, s.last_at)}
            for s in page.sessions
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
