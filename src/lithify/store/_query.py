"""The SQL both dialects share for filtering and reading: WHERE clauses from filters, and the
cursor protocol (placeholders are ``?``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from lithify.core import codec
from lithify.store._rows import time_bound
from lithify.store._types import FactFilter, FeedbackFilter, Match, TimeBound


def _where(
    conds: list[tuple[str, Match]], since: TimeBound, until: TimeBound
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for column, match in conds:
        if match is None:
            continue
        values = [match] if isinstance(match, str) else list(match)
        if not values:
            clauses.append("1 = 0")
            continue
        clauses.append(f"{column} IN ({', '.join('?' * len(values))})")
        params.extend(codec.col(v) for v in values)
    lo, hi = time_bound(since), time_bound(until)
    if lo is not None:
        clauses.append("sort_at >= ?")
        params.append(lo)
    if hi is not None:
        clauses.append("sort_at < ?")
        params.append(hi)
    sql = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    return sql, params


# The bounds of ``FactFilter.part`` in the session read's order: sessions by id, then the
# calls without one by time.
_PART_FROM = {
    "session": "(session_id >= ? OR session_id IS NULL)",
    "time": "(session_id IS NULL AND sort_at >= ?)",
}
_PART_TO = {"session": "session_id < ?", "time": "(session_id IS NOT NULL OR sort_at < ?)"}
# Both bounds of one kind (every part but the first, the last and the one where the sessions
# end): the two above simplified (``session_id < ?`` is never true of a NULL) into one range,
# which an index walks from one bound to the other. Under the OR, the lower bound is one no
# index can use: each part then walked the index from its start, and a store read in parts
# took time quadratic in its size.
_PART_RANGE = {
    "session": "session_id >= ? AND session_id < ?",
    "time": "session_id IS NULL AND sort_at >= ? AND sort_at < ?",
}


def fact_where(f: FactFilter | None) -> tuple[str, list[Any]]:
    f = f or FactFilter()
    conds: list[tuple[str, Match]] = [
        ("session_id", f.session_id),
        ("model", f.model),
        ("source", f.source),
        ("provider", f.provider),
        ("trace_id", f.trace_id),
    ]
    where, params = _where(conds, f.since, f.until)
    if f.part is None:
        return where, params
    lo, hi = f.part
    if lo is not None and hi is not None and lo[0] == hi[0]:
        where = _and(where, _PART_RANGE[lo[0]])
        return where, [*params, codec.col(lo[1]), codec.col(hi[1])]
    for bound, sql in zip(f.part, (_PART_FROM, _PART_TO), strict=True):
        if bound is not None:
            kind, value = bound
            where = _and(where, sql[kind])
            params.append(codec.col(value))
    return where, params


def feedback_where(f: FeedbackFilter | None) -> tuple[str, list[Any]]:
    f = f or FeedbackFilter()
    conds: list[tuple[str, Match]] = [
        ("target_kind", f.target_kind),
        ("target_id", f.target_id),
        ("name", f.name),
        ("source", f.source),
    ]
    return _where(conds, f.since, f.until)


def _and(where: str, cond: str | None) -> str:
    """``where`` (empty, or `` WHERE …``) with one more condition."""
    if cond is None:
        return where
    return f"{where} AND {cond}" if where else f" WHERE {cond}"


def _limit(limit: int | None) -> str:
    if limit is None:
        return ""
    return f" LIMIT {max(0, int(limit))}"


class Cursor(Protocol):
    """The part of a DB-API cursor the shared SQL needs (placeholders are ``?``)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def fetchmany(self, size: int) -> list[Any]: ...


Query = Callable[[str, list[Any]], Iterator[tuple[Any, ...]]]

_IN_CHUNK = 500  # values per IN (…) list: far below SQLite's bound on parameters


def _select_in(
    cur: Cursor, head: str, values: Iterable[Any], tail: str = "", params: Sequence[Any] = ()
) -> list[Any]:
    """Rows of ``head IN (values) tail`` (``params`` bind ``tail``), in as many statements as
    the list of values needs."""
    values = sorted(values)
    rows: list[Any] = []
    for i in range(0, len(values), _IN_CHUNK):
        chunk = values[i : i + _IN_CHUNK]
        cur.execute(f"{head} IN ({', '.join('?' * len(chunk))}){tail}", [*chunk, *params])
        rows.extend(cur.fetchall())
    return rows
