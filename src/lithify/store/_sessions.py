"""Browsing a store by session (``sessions``), with keyset pagination in several orders, and the
feedback coverage and size a store overview shows: the reads ``lithify ui`` makes (docs/store.md,
Browsing sessions). The list reads per-session summaries and a text index that every write keeps
in its own transaction (``_note_sessions``). Calls are counted one per call, from each call's
first capture (``_calls``), never per capture."""

from __future__ import annotations

import base64
import contextlib
import functools
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson

from lithify.core import codec
from lithify.model import (
    Message,
)
from lithify.store._captures import _DUPLICATE, _STORED, CaptureIndex
from lithify.store._query import Cursor, _select_in, fact_where
from lithify.store._rows import FACT_COLUMNS, _feedback_decoder, time_bound
from lithify.store._text import SEP, SessionText, TextNote, message_text
from lithify.store._types import (
    Activity,
    FactFilter,
    FeedbackCoverage,
    FeedbackValue,
    SessionFilter,
    SessionPage,
    SessionSummary,
)

# The list reads the summaries (the sessions table, docs/store.md, Browsing sessions): a page
# is an index range, whatever the store holds. Sort keys: the summary column each one is.
SORTS = {
    "last": "last_at",
    "first": "first_at",
    "calls": "calls",
    "tokens": "tokens",
    "duration": "duration_ms",
}
_MAX_LIMIT = 500
_SUMMARY = (
    "s.id, s.session_id, s.calls, s.first_at, s.last_at, s.input_tokens, s.output_tokens, "
    "s.degraded_calls, s.duration_ms"
)
# (id, session_id, calls, first_at, last_at, input_tokens, output_tokens, degraded_calls,
# duration_ms)
_Row = tuple[int, str, int, str, str, int, int, int, int]
_KEY_AT = {"last_at": 4, "first_at": 3, "calls": 2, "duration_ms": 8}

# The text index: documents of the pieces of text new to their session, casefolded, joined by
# a separator no needle it answers holds. A trigram index finds the documents that may hold a
# needle of 3 characters or more; a shorter one is looked for in the documents of each session
# in turn (a walk); needles with the separator or with what the documents cannot hold are
# searched by reading the calls, a bounded number per page, as before the index.
_TEXT_MIN = 3
_UNINDEXABLE = ("\x00", SEP, "\ufffd")
_SEARCH_BATCH = 100  # the reading search (no index): sessions per batch, calls per page
_SEARCH_CALLS = 10_000

_SID, _SORT_AT, _IN_TOK, _OUT_TOK, _DEG = (
    FACT_COLUMNS.index(c)
    for c in ("session_id", "sort_at", "input_tokens", "output_tokens", "degradations")
)

_AGGREGATES = (
    "session_id, COUNT(*), MIN(sort_at), MAX(sort_at), COALESCE(SUM(input_tokens), 0), "
    "COALESCE(SUM(output_tokens), 0), SUM(CASE WHEN degradations = '{}' THEN 0 ELSE 1 END)"
)
_STATE = "id, session_id, calls, first_at, last_at, input_tokens, output_tokens, degraded_calls"
_STATE += ", docs, texts"

_SIZE_SQL = {
    "sqlite": "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
    "postgres": "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
    "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    "WHERE n.nspname = current_schema() AND c.relkind = 'r'",
}


def _cursor(sort: str, descending: bool, key: Any, session_id: str) -> str:
    """An opaque page cursor: the sort, and where the page before ended, in column form."""
    raw = orjson.dumps([sort, descending, key, session_id])
    return base64.urlsafe_b64encode(raw).decode()


def _after(cursor: str | None, sort: str, descending: bool) -> tuple[Any, str] | None:
    """The (sort key, session_id) a cursor holds; ValueError when it is not one ``sessions``
    made for this sort."""
    if not cursor:
        return None
    try:
        got_sort, got_desc, key, session_id = orjson.loads(base64.urlsafe_b64decode(cursor))
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a session page cursor: {cursor!r}") from e
    kind = str if SORTS.get(sort, "").endswith("_at") else int
    if (
        (got_sort, got_desc) != (sort, descending)
        or type(key) is not kind
        or not isinstance(session_id, str)
    ):
        raise ValueError(f"not a session page cursor for this sort: {cursor!r}")
    return key, session_id


def _key(row: _Row, column: str) -> Any:
    return row[_KEY_AT[column]] if column in _KEY_AT else row[5] + row[6]


def _duration_ms(first: str, last: str) -> int:
    """Milliseconds from the first call to the last (their RFC 3339 times, to the
    microsecond); -1 when either is not such a time."""
    try:
        a = datetime.fromisoformat((codec.uncol(first) or "")[:26].replace("Z", "") + "+00:00")
        b = datetime.fromisoformat((codec.uncol(last) or "")[:26].replace("Z", "") + "+00:00")
    except ValueError:
        return -1
    return (b - a) // timedelta(milliseconds=1)


def _value_cond(value: FeedbackValue) -> tuple[str, list[Any]]:
    """The feedback columns' condition for one value (as ``feedback_row`` stores it)."""
    if isinstance(value, bool):
        return "value_kind = 'bool' AND value_number = ?", [float(value)]
    if isinstance(value, int | float):
        return "value_kind = 'number' AND value_number = ?", [float(value)]
    return "value_kind = 'string' AND value_text = ?", [codec.col(value)]


def _has_text(messages: Iterable[Message], needle: str) -> bool:
    return any(needle in t.casefold() for t in message_text(messages))


def _needle_indexed(needle: str) -> bool:
    return not any(c in needle for c in _UNINDEXABLE) and not any(
        "\ud800" <= c <= "\udfff" for c in needle
    )


class SessionQueries(CaptureIndex):
    """The session-browsing half of a store: the summaries and text index it keeps as it
    writes, and the list it reads from them."""

    # A search asks the index for at most this many documents holding the needle: fewer, and
    # the page is those sessions in order; more (a common word), and it walks the list in
    # order reading each session's documents, at most ``search_walk`` sessions a page.
    search_candidates = 2000
    search_walk = 1000

    # Whether this store's schema has the summaries (a store opened with older migrations, as
    # tests of upgrades do, has not: its writes leave them alone).
    _summarized = True

    # -- backend hooks -------------------------------------------------------------------
    def _ensure_sessions(self, cur: Cursor, sids: list[str]) -> None:
        """Summary rows for these sessions, empty where there were none."""
        raise NotImplementedError

    def _update_sessions(self, cur: Cursor, rows: list[tuple[Any, ...]]) -> None:
        """Set (calls, first_at, last_at, input_tokens, output_tokens, tokens, duration_ms,
        degraded_calls, docs, texts) of the summaries with these ids (each row's last)."""
        raise NotImplementedError

    def _add_text(self, cur: Cursor, docs: list[tuple[int, int, str]]) -> None:
        """Add (session id, document number, text) documents to the text index."""
        raise NotImplementedError

    def _clear_text(self, cur: Cursor) -> None:
        raise NotImplementedError

    def _text_docs(self, cur: Cursor, needle: str, limit: int) -> list[int]:
        """The session ids of at most ``limit`` documents holding ``needle``."""
        raise NotImplementedError

    def _text_probe(self, needle: str) -> tuple[str, list[Any]]:
        """A condition on ``s`` (a sessions row): its documents hold ``needle``."""
        raise NotImplementedError

    def _id_set(self, ids: list[int]) -> tuple[str, list[Any]]:
        """A condition on ``s``: its id is one of these."""
        raise NotImplementedError

    def _rows_of(self, cur: Cursor, sql: str, params: Sequence[Any]) -> Iterable[Any]:
        """A query's rows, streamed on the transaction of ``cur`` while ``cur`` writes."""
        raise NotImplementedError

    def _session_calls(self, calls: str) -> str:
        """``calls`` as a correlated subquery reads one session's calls from it."""
        return calls

    _for_update = ""  # locks the summary rows a write reads (PostgreSQL: writers run together)

    # -- writing -------------------------------------------------------------------------
    def _note_sessions(
        self,
        cur: Cursor,
        rows: Sequence[tuple[Any, ...]],
        outcomes: Sequence[int],
        touched: set[str],
        notes: Sequence[TextNote | None],
    ) -> None:
        """Keep the summaries and the text index of the sessions a write touched: ``rows``
        (facts rows as written, with ``outcomes``, and the ``notes`` of their text: None where
        the rows came without, their bodies are read) add their calls and their text; the
        sessions in ``touched`` (whose calls the capture index decided again) are summed
        again from their calls."""
        if not self._summarized:
            return
        adds: dict[str, list[Any]] = {}
        texts: dict[str, list[int]] = {}
        for i, row in enumerate(rows):
            sid = row[_SID]
            if sid is None or outcomes[i] == _DUPLICATE:
                continue
            texts.setdefault(sid, []).append(i)  # every capture's text: see ``sessions``
            if outcomes[i] != _STORED or sid in touched:
                continue
            at, degraded = row[_SORT_AT], int(row[_DEG] != "{}")
            tin, tout = row[_IN_TOK] or 0, row[_OUT_TOK] or 0
            a = adds.get(sid)
            if a is None:
                adds[sid] = [1, at, at, tin, tout, degraded]
            else:
                a[0] += 1
                a[1], a[2] = min(a[1], at), max(a[2], at)
                a[3] += tin
                a[4] += tout
                a[5] += degraded
        touched = {t for t in touched if t is not None}
        sids = sorted(set(adds) | set(texts) | touched)
        if not sids:
            return
        self._ensure_sessions(cur, sids)
        state = {
            r[1]: r
            for r in _select_in(
                cur, f"SELECT {_STATE} FROM sessions WHERE session_id", sids, self._for_update
            )
        }
        counted: dict[str, Any] = {}
        if touched:
            calls = self._calls(cur)
            for r in _select_in(
                cur,
                f"SELECT {_AGGREGATES} FROM {calls} WHERE session_id",
                touched,
                " GROUP BY session_id",
            ):
                counted[r[0]] = [int(r[1]), r[2], r[3], int(r[4]), int(r[5]), int(r[6] or 0)]
        updates: list[tuple[Any, ...]] = []
        docs: list[tuple[int, int, str]] = []
        for sid in sids:
            sid_id, _, n, first, last, tin, tout, deg, ndocs, have = state[sid]
            if sid in touched:
                n, first, last, tin, tout, deg = counted.get(sid, [0, "", "", 0, 0, 0])
            elif sid in adds:
                a = adds[sid]
                if n:
                    n, first, last = n + a[0], min(first, a[1]), max(last, a[2])
                    tin, tout, deg = tin + a[3], tout + a[4], deg + a[5]
                else:
                    n, first, last, tin, tout, deg = a
            have = bytes(have)
            if sid in texts:
                t = SessionText(have)
                for i in sorted(texts[sid], key=lambda i: (rows[i][_SORT_AT], rows[i][0])):
                    note, stored = notes[i], rows[i][-1]
                    body = functools.partial(self._codec_bytes, stored, cur)
                    if note is None:
                        t.add_body(body())
                    else:
                        t.add(note, body)
                if t.pieces:
                    docs.append((sid_id, ndocs, t.doc()))
                    ndocs += 1
                have = t.state()
            duration = _duration_ms(first, last) if n else -1
            updates.append(
                (n, first, last, tin, tout, tin + tout, duration, deg, ndocs, have, sid_id)
            )
        self._update_sessions(cur, updates)
        if docs:
            self._add_text(cur, docs)

    def _rebuild_sessions(self, cur: Cursor) -> None:
        """Fill the summaries and the text index from the calls (both emptied first)."""
        cur.execute("DELETE FROM sessions")
        self._clear_text(cur)
        cur.execute(
            "INSERT INTO sessions (session_id, calls, first_at, last_at, input_tokens, "
            "output_tokens, tokens, duration_ms, degraded_calls, docs, texts) "
            "SELECT session_id, 0, '', '', 0, 0, 0, -1, 0, 0, ? FROM (SELECT session_id FROM "
            "facts WHERE session_id IS NOT NULL UNION SELECT session_id FROM fact_variants "
            "WHERE session_id IS NOT NULL) AS u",
            (b"",),
        )
        calls = self._calls(cur)
        updates: list[tuple[Any, ...]] = []
        sql = f"SELECT {_AGGREGATES} FROM {calls} WHERE session_id IS NOT NULL GROUP BY session_id"
        for sid, n, first, last, tin, tout, deg in self._rows_of(cur, sql, []):
            updates.append((int(n), first, last, int(tin), int(tout), int(deg or 0), sid))
            if len(updates) == 1000:
                self._set_counts(cur, updates)
                updates = []
        self._set_counts(cur, updates)
        # Every capture's text, facts rows and variants, a session's documents in turn.
        with self._text_index_off(cur):
            self._fill_text(cur)

    @contextlib.contextmanager
    def _text_index_off(self, cur: Cursor) -> Iterator[None]:
        """While the text index is filled whole: built once after rather than grown."""
        yield

    def _fill_text(self, cur: Cursor) -> None:
        join = self._cur_joiner(cur)
        tables = [("facts", self._fact_body), ("fact_variants", self._variant_body)]
        if self._fills:  # a call read as its fill is in the fill's session
            tables.append(("call_fills", self._variant_body))
        for table, body in tables:
            source = self._fact_from if table == "facts" else table
            order = "session_id, sort_at, inference_call_id"
            stream = self._rows_of(
                cur,
                f"SELECT session_id, {body} FROM {source} WHERE session_id IS NOT NULL "
                f"ORDER BY {order}",
                [],
            )
            current: str | None = None
            texts = SessionText(b"")
            for sid, raw in stream:
                if sid != current:
                    if current is not None:
                        self._append_text(cur, current, texts)
                    cur.execute("SELECT texts FROM sessions WHERE session_id = ?", (sid,))
                    current, texts = sid, SessionText(bytes(cur.fetchone()[0]))
                texts.add_body(join(raw))
            if current is not None:
                self._append_text(cur, current, texts)

    def _set_counts(self, cur: Cursor, rows: list[tuple[Any, ...]]) -> None:
        for n, first, last, tin, tout, deg, sid in rows:
            cur.execute(
                "UPDATE sessions SET calls = ?, first_at = ?, last_at = ?, input_tokens = ?, "
                "output_tokens = ?, tokens = ?, duration_ms = ?, degraded_calls = ? "
                "WHERE session_id = ?",
                (n, first, last, tin, tout, tin + tout, _duration_ms(first, last), deg, sid),
            )

    def _append_text(self, cur: Cursor, sid: str, texts: SessionText) -> None:
        cur.execute("SELECT id, docs FROM sessions WHERE session_id = ?", (sid,))
        sid_id, n = cur.fetchone()
        more = 1 if texts.pieces else 0
        cur.execute(
            "UPDATE sessions SET docs = ?, texts = ? WHERE id = ?",
            (int(n) + more, texts.state(), sid_id),
        )
        if more:
            self._add_text(cur, [(int(sid_id), int(n), texts.doc())])

    # -- reading -------------------------------------------------------------------------
    def _session_where(self, calls: str, f: SessionFilter) -> tuple[str, list[Any]]:
        """The conditions on ``s`` (a summary row) a filter sets, after ``WHERE s.calls > 0``,
        and their parameters."""
        clauses: list[str] = []
        params: list[Any] = []
        where, p = fact_where(
            FactFilter(
                model=f.model, provider=f.provider, source=f.source, since=f.since, until=f.until
            )
        )
        if where:
            # One of its calls matches them all; its first and last call bound the time range
            # first, from the summary (a walk in time order then stops early).
            lo, hi = time_bound(f.since), time_bound(f.until)
            if lo is not None:
                clauses.append("s.last_at >= ?")
                params.append(lo)
            if hi is not None:
                clauses.append("s.first_at < ?")
                params.append(hi)
            clauses.append(
                f"EXISTS (SELECT 1 FROM {self._session_calls(calls)}{where} "
                "AND facts.session_id = s.session_id)"
            )
            params += p

        def with_feedback(cond: str, p: list[Any]) -> str:
            params.extend([*p, *p])
            return (
                "(s.session_id IN (SELECT target_id FROM feedback WHERE target_kind = 'session'"
                f"{cond}) OR s.session_id IN (SELECT facts.session_id FROM {calls} JOIN feedback "
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
                "s.degraded_calls > 0 AND EXISTS (SELECT 1 FROM "
                f"{self._session_calls(calls)} WHERE "
                f"facts.session_id = s.session_id AND {has})"
            )
            params.append(f.degradation)
        return "".join(f" AND {c}" for c in clauses), params

    def _list_sql(
        self,
        cur: Cursor,
        f: SessionFilter,
        after: tuple[Any, str] | None,
        extra: tuple[str, list[Any]] | None = None,
    ) -> tuple[str, list[Any], str]:
        """The list's query without its LIMIT, its parameters, and its ORDER BY."""
        column = SORTS[f.sort]
        conds, params = self._session_where(self._calls(cur), f)
        if extra is not None:
            conds += f" AND {extra[0]}"
            params += extra[1]
        d, op = ("DESC", "<") if f.descending else ("ASC", ">")
        if after is not None:
            conds += f" AND (s.{column}, s.session_id) {op} (?, ?)"
            params += [after[0], after[1]]
        order = f" ORDER BY s.{column} {d}, s.session_id {d}"
        # Sessions whose calls all moved to another (by the capture rule) keep a row of 0 calls.
        # The unary plus keeps SQLite's planner off the calls index for it (it took that index
        # and sorted every session for a page deep in a walk).
        sql = f"SELECT {_SUMMARY} FROM sessions AS s WHERE +s.calls > 0{conds}"
        return sql, params, order

    def _list_rows(
        self,
        cur: Cursor,
        f: SessionFilter,
        after: tuple[Any, str] | None,
        limit: int,
        extra: tuple[str, list[Any]] | None = None,
    ) -> list[_Row]:
        sql, params, order = self._list_sql(cur, f, after, extra)
        cur.execute(f"{sql}{order} LIMIT {int(limit)}", params)
        return [tuple(r) for r in cur.fetchall()]  # type: ignore[misc]

    def _summaries(self, cur: Cursor, rows: Sequence[_Row]) -> list[SessionSummary]:
        ids = [r[1] for r in rows]
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
                session_id=codec.uncol(r[1]) or "",
                calls=int(r[2]),
                first_at=codec.uncol(r[3]) or None,
                last_at=codec.uncol(r[4]) or None,
                input_tokens=int(r[5]),
                output_tokens=int(r[6]),
                degraded_calls=int(r[7]),
                models=sorted(kinds[r[1]][0]),
                providers=sorted(kinds[r[1]][1]),
                sources=sorted(kinds[r[1]][2]),
                feedback=counts[r[1]],
                labels=dict(sorted(labels[r[1]].items())),
                duration_ms=None if r[8] < 0 else int(r[8]),
            )
            for r in rows
        ]

    def sessions(self, filters: SessionFilter | None = None) -> SessionPage:
        """A page of sessions in the filter's order (``SessionFilter``); ``ValueError`` for an
        unknown sort, or a cursor this store did not make for it."""
        f = filters or SessionFilter()
        if f.sort not in SORTS:
            raise ValueError(f"unknown session sort {f.sort!r}: one of {', '.join(SORTS)}")
        limit = max(1, min(int(f.limit), _MAX_LIMIT))
        after = _after(f.after, f.sort, f.descending)
        column = SORTS[f.sort]
        needle = (f.text or "").strip().casefold()

        def next_of(rows: Sequence[_Row]) -> str:
            return _cursor(f.sort, f.descending, _key(rows[-1], column), rows[-1][1])

        if not needle:

            def page(cur: Cursor) -> SessionPage:
                rows = self._list_rows(cur, f, after, limit + 1)
                more = len(rows) > limit
                rows = rows[:limit]
                return SessionPage(
                    self._summaries(cur, rows), next_of(rows) if more else None, len(rows)
                )

            return self._run(page, write=False)
        if not _needle_indexed(needle):
            return self._read_search(f, after, limit, needle)

        def walk(cur: Cursor, most: int) -> tuple[list[_Row], str | None, int, bool]:
            """The page of the first ``most`` sessions in the list's order whose documents
            hold the needle, read one session after another: (rows, next, scanned, full)."""
            sql, params, order = self._list_sql(cur, f, after)
            probe, p = self._text_probe(needle)
            cur.execute(
                f"SELECT * FROM ({sql}{order} LIMIT {most}) AS s WHERE {probe}{order} "
                f"LIMIT {limit + 1}",
                [*params, *p],
            )
            rows = [tuple(r) for r in cur.fetchall()]
            if len(rows) > limit:
                rows = rows[:limit]
                last = (_key(rows[-1], column), rows[-1][1])  # type: ignore[arg-type]
                op = ">=" if f.descending else "<="
                cur.execute(
                    f"SELECT COUNT(*) FROM ({sql} AND (s.{column}, s.session_id) {op} (?, ?)"
                    f"{order} LIMIT {most}) AS w",
                    [*params, *last],
                )
                scanned = int(cur.fetchone()[0])
                return rows, next_of(rows), scanned, True  # type: ignore[arg-type]
            cur.execute(f"{sql}{order} LIMIT 1 OFFSET {most - 1}", params)
            edge = cur.fetchone()
            if edge is None:  # the list ends within the walk
                return rows, None, len(rows), False  # type: ignore[return-value]
            nxt = _cursor(f.sort, f.descending, _key(tuple(edge), column), edge[1])  # type: ignore[arg-type]
            return rows, nxt, most, False  # type: ignore[return-value]

        def search(cur: Cursor) -> tuple[list[_Row], str | None, int, bool]:
            contested = self._contested(cur)
            if len(needle) >= _TEXT_MIN:
                # A common needle fills the page from the first sessions: try them first, as
                # the index would name most documents of the store.
                rows, nxt, scanned, full = walk(cur, min(4 * limit, self.search_walk))
                if full:
                    return rows, nxt, scanned, contested
                docs = self._text_docs(cur, needle, self.search_candidates + 1)
                if len(docs) <= self.search_candidates:
                    # every session that holds it: the page is theirs
                    ids = sorted(set(docs))
                    rows = self._list_rows(cur, f, after, limit + 1, self._id_set(ids))
                    more = len(rows) > limit
                    rows = rows[:limit]
                    return rows, next_of(rows) if more else None, len(ids), contested
            # A needle neither rare nor common enough, or with no trigram: walk further.
            rows, nxt, scanned, _ = walk(cur, self.search_walk)
            return rows, nxt, scanned, contested

        rows, nxt, scanned, contested = self._run(search, write=False)
        if contested and rows:
            rows = self._verified(rows, needle)
        summaries = self._run(lambda cur: self._summaries(cur, rows), write=False)
        return SessionPage(summaries, nxt, scanned)

    def _verified(self, rows: list[_Row], needle: str) -> list[_Row]:
        """Of sessions the index names, those whose calls hold ``needle``: the index holds
        every capture's text, and where captures of one call differ only the first counts."""

        def q(cur: Cursor) -> set[str]:
            return {
                r[0]
                for r in _select_in(
                    cur,
                    "SELECT DISTINCT session_id FROM fact_captures WHERE session_id",
                    [r[1] for r in rows],
                )
            }

        contested = self._run(q, write=False)
        if not contested:
            return rows
        found = self._sessions_with_text(sorted(contested), needle)
        return [r for r in rows if r[1] not in contested or r[1] in found]

    def _read_search(
        self, f: SessionFilter, after: tuple[Any, str] | None, limit: int, needle: str
    ) -> SessionPage:
        """A search the index cannot answer: read the calls of the sessions in the list's
        order, in batches, stopping after about ``_SEARCH_CALLS`` calls or a full page."""
        column = SORTS[f.sort]
        found: list[_Row] = []
        scanned = read = 0
        exhausted = False
        while len(found) < limit and read < _SEARCH_CALLS:
            batch = self._run(
                lambda cur, a=after: self._list_rows(cur, f, a, _SEARCH_BATCH), write=False
            )
            matching = self._sessions_with_text([r[1] for r in batch], needle)
            consumed = 0
            for r in batch:
                consumed += 1
                scanned += 1
                read += r[2]
                after = (_key(r, column), r[1])
                if r[1] in matching:
                    found.append(r)
                    if len(found) == limit:
                        break
            if len(batch) < _SEARCH_BATCH and consumed == len(batch):
                exhausted = True
                break
        nxt = None if exhausted or after is None else _cursor(f.sort, f.descending, *after)
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
