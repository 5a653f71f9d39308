"""Browsing a store by session (``sessions``), with keyset pagination, and the feedback coverage
and size a store overview shows: the reads ``lithify ui`` makes (docs/store.md, Browsing
sessions). Calls are counted one per call, from each call's first capture (``_calls``), never
per capture."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from lithify.core import codec
from lithify.model import (
    Message,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
)
from lithify.store._captures import CaptureIndex
from lithify.store._query import Cursor, _select_in, fact_where
from lithify.store._rows import _feedback_decoder
from lithify.store._types import (
    Activity,
    FactFilter,
    FeedbackCoverage,
    FeedbackValue,
    SessionFilter,
    SessionPage,
    SessionSummary,
)

# A text search reads calls' bodies (there is no text index): it looks through sessions in
# batches and stops after this many calls, handing back where it stopped, so that one request
# costs a bounded time whatever the store holds.
_SEARCH_BATCH = 100
_SEARCH_CALLS = 10_000
_MAX_LIMIT = 500

# (session_id, calls, first_at, last_at, input_tokens, output_tokens, degraded_calls)
_Row = tuple[str, int, str, str, int, int, int]

_AGGREGATES = (
    "session_id, COUNT(*), MIN(sort_at), MAX(sort_at), COALESCE(SUM(input_tokens), 0), "
    "COALESCE(SUM(output_tokens), 0), SUM(CASE WHEN degradations = '{}' THEN 0 ELSE 1 END)"
)

_SIZE_SQL = {
    "sqlite": "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
    "postgres": "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
    "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    "WHERE n.nspname = current_schema() AND c.relkind = 'r'",
}


def _cursor(last_at: str, session_id: str) -> str:
    """An opaque page cursor: where the page before ended, in column form."""
    return base64.urlsafe_b64encode(orjson.dumps([last_at, session_id])).decode()


def _after(cursor: str | None) -> tuple[str, str] | None:
    """The (last_at, session_id) a cursor holds, in column form; ValueError when it is not one
    ``sessions`` made."""
    if not cursor:
        return None
    try:
        last_at, session_id = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a session page cursor: {cursor!r}") from e
    if not isinstance(last_at, str) or not isinstance(session_id, str):
        raise ValueError(f"not a session page cursor: {cursor!r}")
    return last_at, session_id


def _value_cond(value: FeedbackValue) -> tuple[str, list[Any]]:
    """The feedback columns' condition for one value (as ``feedback_row`` stores it)."""
    if isinstance(value, bool):
        return "value_kind = 'bool' AND value_number = ?", [float(value)]
    if isinstance(value, int | float):
        return "value_kind = 'number' AND value_number = ?", [float(value)]
    return "value_kind = 'string' AND value_text = ?", [codec.col(value)]


def message_text(messages: Iterable[Message]) -> Iterable[str]:
    """The searchable text of messages: text and reasoning, tool names and arguments, tool
    results and server tools (JSON where they are not text)."""
    for m in messages:
        for p in m.parts:
            if isinstance(p, TextPart | ReasoningPart):
                yield p.content
            elif isinstance(p, ToolCallPart):
                yield p.name
                yield orjson.dumps(p.arguments, default=str).decode()
            elif isinstance(p, ToolCallResponsePart):
                if isinstance(p.result, str):
                    yield p.result
                else:
                    yield orjson.dumps(p.result, default=str).decode()
            elif isinstance(p, ServerToolCallPart):
                yield p.name
                yield orjson.dumps(p.server_tool_call, default=str).decode()
            elif isinstance(p, ServerToolCallResponsePart):
                yield orjson.dumps(p.server_tool_call_response, default=str).decode()
            # media parts have no text to search: their bytes are not words


def _has_text(messages: Iterable[Message], needle: str) -> bool:
    return any(needle in t.casefold() for t in message_text(messages))


class SessionQueries(CaptureIndex):
    """The session-browsing half of a store."""

    def _session_where(self, calls: str, f: SessionFilter) -> tuple[str, list[Any]]:
        """The conditions on ``session_id`` a filter sets (after ``WHERE session_id IS NOT
        NULL``), and their parameters."""
        clauses: list[str] = []
        params: list[Any] = []
        where, p = fact_where(
            FactFilter(
                model=f.model, provider=f.provider, source=f.source, since=f.since, until=f.until
            )
        )
        if where:
            clauses.append(f"session_id IN (SELECT session_id FROM {calls}{where})")
            params += p

        def with_feedback(cond: str, p: list[Any]) -> str:
            params.extend([*p, *p])
            return (
                "(session_id IN (SELECT target_id FROM feedback WHERE target_kind = 'session'"
                f"{cond}) OR session_id IN (SELECT facts.session_id FROM {calls} JOIN feedback "
                "ON feedback.target_kind = 'call' AND feedback.target_id = "
                f"facts.inference_call_id WHERE facts.session_id IS NOT NULL{cond}))"
            )

        if f.has_feedback is not None:
            any_feedback = with_feedback("", [])
            clauses.append(any_feedback if f.has_feedback else f"NOT {any_feedback}")
        for name, value in f.feedback:
            cond, p = _value_cond(value)
            clauses.append(with_feedback(f" AND name = ? AND {cond}", [codec.col(name), *p]))
        if f.score_min is not None or f.score_max is not None:
            cond, p = " AND name = ? AND value_kind = 'number'", [codec.col(f.score_name)]
            for op, bound in ((">=", f.score_min), ("<=", f.score_max)):
                if bound is not None:
                    cond += f" AND value_number {op} ?"
                    p.append(float(bound))
            clauses.append(with_feedback(cond, p))
        if f.degradation:
            # Reasons are snake_case words: a key test on the JSON object of each call.
            has = (
                "jsonb_exists(degradations, ?)"
                if self.dialect == "postgres"
                else "json_type(degradations, '$.' || ?) IS NOT NULL"
            )
            clauses.append(
                f"session_id IN (SELECT session_id FROM {calls} WHERE session_id IS NOT NULL "
                f"AND {has})"
            )
            params.append(f.degradation)
        return "".join(f" AND {c}" for c in clauses), params

    def _session_rows(
        self, cur: Cursor, f: SessionFilter, after: tuple[str, str] | None, limit: int
    ) -> list[_Row]:
        calls = self._calls(cur)
        conds, params = self._session_where(calls, f)
        if not conds and calls == "facts":
            return self._latest_rows(cur, after, limit)
        having = ""
        if after is not None:
            having = " HAVING (MAX(sort_at), session_id) < (?, ?)"
            params = [*params, *after]
        cur.execute(
            f"SELECT {_AGGREGATES} FROM {calls} WHERE session_id IS NOT NULL{conds} "
            f"GROUP BY session_id{having} "
            f"ORDER BY MAX(sort_at) DESC, session_id DESC LIMIT {int(limit)}",
            params,
        )
        return [tuple(r) for r in cur.fetchall()]  # type: ignore[misc]

    def _latest_rows(self, cur: Cursor, after: tuple[str, str] | None, limit: int) -> list[_Row]:
        """The unfiltered list, without aggregating every session: walk the calls newest
        first (facts_order) keeping each session's last call (one facts_session seek each),
        then aggregate the page's sessions alone. The same order and cursor as the GROUP BY."""
        keyset, params = "", []
        if after is not None:
            keyset = " AND f.sort_at <= ? AND (f.sort_at < ? OR f.session_id < ?)"
            params = [after[0], after[0], after[1]]
        cur.execute(
            "SELECT f.session_id FROM facts AS f WHERE f.session_id IS NOT NULL"
            f"{keyset} AND NOT EXISTS (SELECT 1 FROM facts AS g WHERE g.session_id = "
            "f.session_id AND (g.sort_at, g.inference_call_id) > (f.sort_at, "
            "f.inference_call_id)) ORDER BY f.sort_at DESC, f.session_id DESC "
            f"LIMIT {int(limit)}",
            params,
        )
        ids = [r[0] for r in cur.fetchall()]
        rows = {
            r[0]: tuple(r)
            for r in _select_in(
                cur,
                f"SELECT {_AGGREGATES} FROM facts WHERE session_id",
                ids,
                " GROUP BY session_id",
            )
        }
        return [rows[i] for i in ids]  # type: ignore[misc]

    def _summaries(self, cur: Cursor, rows: Sequence[_Row]) -> list[SessionSummary]:
        ids = [r[0] for r in rows]
        if not ids:
            return []
        calls = self._calls(cur)
        kinds: dict[str, tuple[set[str], set[str], set[str]]] = {
            i: (set(), set(), set()) for i in ids
        }
        for sid, model, provider, source in _select_in(
            cur,
            f"SELECT session_id, model, provider, source FROM {calls} WHERE session_id",
            ids,
            " GROUP BY session_id, model, provider, source",
        ):
            for found, value in zip(kinds[sid], (model, provider, source), strict=True):
                if value is not None:
                    found.add(codec.uncol(value) or "")
        counts = dict.fromkeys(ids, 0)
        for sid, n in _select_in(
            cur,
            f"SELECT facts.session_id, COUNT(*) FROM {calls} JOIN feedback ON "
            "feedback.target_kind = 'call' AND feedback.target_id = facts.inference_call_id "
            "WHERE facts.session_id",
            ids,
            " GROUP BY facts.session_id",
        ):
            counts[sid] += int(n)
        labels: dict[str, dict[str, list[FeedbackValue]]] = {i: {} for i in ids}
        for sid, body in _select_in(
            cur,
            "SELECT target_id, body FROM feedback WHERE target_kind = 'session' AND target_id",
            ids,
            " ORDER BY sort_at, feedback_id",
        ):
            fb = _feedback_decoder.decode(body)
            counts[sid] += 1
            values = labels[sid].setdefault(fb.name, [])
            if not any(type(v) is type(fb.value) and v == fb.value for v in values):
                values.append(fb.value)
        return [
            SessionSummary(
                session_id=codec.uncol(r[0]) or "",
                calls=int(r[1]),
                first_at=codec.uncol(r[2]) or None,
                last_at=codec.uncol(r[3]) or None,
                input_tokens=int(r[4]),
                output_tokens=int(r[5]),
                degraded_calls=int(r[6] or 0),
                models=sorted(kinds[r[0]][0]),
                providers=sorted(kinds[r[0]][1]),
                sources=sorted(kinds[r[0]][2]),
                feedback=counts[r[0]],
                labels=dict(sorted(labels[r[0]].items())),
            )
            for r in rows
        ]

    def sessions(self, filters: SessionFilter | None = None) -> SessionPage:
        """A page of sessions, newest first (``SessionFilter``); ``ValueError`` for a cursor
        this store did not make."""
        f = filters or SessionFilter()
        limit = max(1, min(int(f.limit), _MAX_LIMIT))
        after = _after(f.after)
        needle = (f.text or "").strip().casefold()
        if not needle:

            def page(cur: Cursor) -> SessionPage:
                rows = self._session_rows(cur, f, after, limit + 1)
                more = len(rows) > limit
                rows = rows[:limit]
                nxt = _cursor(rows[-1][3], rows[-1][0]) if more else None
                return SessionPage(self._summaries(cur, rows), nxt, len(rows))

            return self._run(page, write=False)
        found: list[_Row] = []
        scanned = read = 0
        exhausted = False
        while len(found) < limit and read < _SEARCH_CALLS:
            batch = self._run(
                lambda cur, a=after: self._session_rows(cur, f, a, _SEARCH_BATCH), write=False
            )
            matching = self._sessions_with_text([r[0] for r in batch], needle)
            consumed = 0
            for r in batch:
                consumed += 1
                scanned += 1
                read += r[1]
                after = (r[3], r[0])
                if r[0] in matching:
                    found.append(r)
                    if len(found) == limit:
                        break
            if len(batch) < _SEARCH_BATCH and consumed == len(batch):
                exhausted = True
                break
        nxt = None if exhausted or after is None else _cursor(*after)
        summaries = self._run(lambda cur: self._summaries(cur, found), write=False)
        return SessionPage(summaries, nxt, scanned)

    def _sessions_with_text(self, ids: list[str], needle: str) -> set[str]:
        """Which of these sessions (column forms) have a call with ``needle`` in its text."""
        if not ids:
            return set()
        found: set[str] = set()
        current: str | None = None
        # A session's calls replay its conversation, and a read grouped by session shares the
        # replayed messages between them (codec.FactReader): each message object is searched
        # once per session, so a session costs its text once, not once per call. The dict
        # holds the objects so that their ids stay theirs.
        searched: dict[int, Message] = {}
        for fact in self.iter_facts(  # type: ignore[attr-defined]
            FactFilter(session_id=[codec.uncol(i) or "" for i in ids], order="session")
        ):
            sid = codec.col(fact.session_id)
            if sid != current:
                current, searched = sid, {}
            if sid in found:
                continue
            new: list[Message] = []
            for m in (*fact.input_messages, *fact.output_messages):
                if id(m) not in searched:
                    searched[id(m)] = m
                    new.append(m)
            if _has_text(new, needle):
                found.add(sid)  # type: ignore[arg-type]
        return found

    def feedback_coverage(self) -> FeedbackCoverage:
        """Feedback facts by name, and the calls and sessions that have any."""

        def q(cur: Cursor) -> FeedbackCoverage:
            calls = self._calls(cur)
            cur.execute("SELECT name, COUNT(*) FROM feedback GROUP BY name")
            by_name = sorted(
                ((codec.uncol(n) or "", int(c)) for n, c in cur.fetchall()),
                key=lambda x: (-x[1], x[0]),
            )
            cur.execute(
                f"SELECT COUNT(DISTINCT facts.inference_call_id) FROM {calls} JOIN feedback ON "
                "feedback.target_kind = 'call' AND feedback.target_id = facts.inference_call_id"
            )
            with_calls = int(cur.fetchone()[0] or 0)
            cur.execute(
                "SELECT COUNT(*) FROM (SELECT target_id FROM feedback WHERE target_kind = "
                f"'session' UNION SELECT facts.session_id FROM {calls} JOIN feedback ON "
                "feedback.target_kind = 'call' AND feedback.target_id = facts.inference_call_id "
                "WHERE facts.session_id IS NOT NULL) AS u"
            )
            with_sessions = int(cur.fetchone()[0] or 0)
            return FeedbackCoverage(sum(c for _, c in by_name), by_name, with_calls, with_sessions)

        return self._run(q, write=False)

    def activity(self, filters: FactFilter | None = None) -> list[Activity]:
        """Calls and tokens per UTC day (by ``sort_at``), one per call, oldest first."""

        def q(cur: Cursor) -> list[Activity]:
            where, params = fact_where(filters)
            cur.execute(
                "SELECT substr(sort_at, 1, 10) AS day, COUNT(*), COALESCE(SUM(input_tokens), 0), "
                f"COALESCE(SUM(output_tokens), 0) FROM {self._calls(cur)}{where} "
                "GROUP BY day ORDER BY day",
                params,
            )
            return [
                Activity(codec.uncol(d) or "", int(n), int(i), int(o))
                for d, n, i, o in cur.fetchall()
                if d is not None
            ]

        return self._run(q, write=False)

    def size(self) -> int:
        """Bytes the store's tables take (SQLite: the database file's pages; PostgreSQL: the
        tables of its schema, indexes and TOAST included)."""

        def q(cur: Cursor) -> int:
            cur.execute(_SIZE_SQL[self.dialect])
            return int(cur.fetchone()[0] or 0)

        return self._run(q, write=False)
