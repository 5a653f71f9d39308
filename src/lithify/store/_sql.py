"""The SQL store both backends share: migrations, writes (one transaction per batch, group
commits), reads, statistics and ingest tokens; the capture index is its other half
(``_captures``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from itertools import chain, islice, pairwise
from typing import Any, Self

from lithify.core import codec
from lithify.model import Feedback, InferenceCall
from lithify.store._backend import R
from lithify.store._captures import (
    _ANY_CAPTURE,
    _DUPLICATE,
    _STORED,
    _VARIANT,
    _CapturesBusy,
    _result,
    named,
)
from lithify.store._query import Cursor, _and, _limit, fact_where, feedback_where
from lithify.store._rows import (
    _FACT_INGESTED,
    _FEEDBACK_INGESTED,
    FACT_COLUMNS,
    FEEDBACK_COLUMNS,
    _feedback_decoder,
    _stamp,
    fact_row,
    feedback_row,
    now,
    take_blobs,
    text_notes,
)
from lithify.store._sessions import SessionQueries
from lithify.store._text import Read, TextNote
from lithify.store._types import (
    DegradationCount,
    FactFilter,
    FeedbackFilter,
    Group,
    InsertResult,
    PartBound,
    Prepared,
    SchemaTooNew,
    Stats,
    TokenExists,
    TokenInfo,
)
from lithify.store.migrations import (
    DIGESTS_VERSION,
    FILLS_VERSION,
    SCHEMA_VERSION_TABLE,
    SESSIONS_VERSION,
)

# A write's facts rows as ordered, their outcomes, the sessions decided again, their text notes.
_Noted = tuple[list[Any], list[int], set[str], list[TextNote | None]]


def _token_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise ValueError("a token name is 1 to 100 characters")
    if not name.isprintable():
        raise ValueError("a token name holds printable characters only")
    return name


_UNPACKED = 64  # bodies a read unpacks together (iter_digested)

# Whether the schema_version table exists yet (a new database has none).
_HAS_VERSIONS = {
    "sqlite": "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
    "postgres": "SELECT 1 FROM pg_tables WHERE tablename = 'schema_version' "
    "AND schemaname = current_schema()",
}


class SqlStore(SessionQueries):
    """The shared half of both backends; subclasses supply connections and dialect hooks."""

    # False: the session summaries and text index are not kept (``open_store(summaries=False)``).
    _keep_summaries = True

    # -- schema ----------------------------------------------------------------------------
    def _migrate(self) -> None:
        latest = self.migrations[-1].version if self.migrations else 0
        self._summarized = self._keep_summaries and latest >= SESSIONS_VERSION
        self._fills = latest >= FILLS_VERSION
        self._digests = latest >= DIGESTS_VERSION

        def up_to_date(cur: Cursor) -> bool:
            cur.execute(_HAS_VERSIONS[self.dialect])
            if cur.fetchone() is None:
                return False
            cur.execute("SELECT MAX(version) FROM schema_version")
            return (cur.fetchone()[0] or 0) == latest

        # A store at this version opens with a read: a reader never waits for (nor holds up) a
        # writer such as the proxy's recorder. Anything else takes the write lock and decides.
        if self._run(up_to_date, write=False):
            return

        def step(cur: Cursor) -> None:
            self._lock_schema(cur)
            cur.execute(SCHEMA_VERSION_TABLE[self.dialect])
            cur.execute("SELECT MAX(version) FROM schema_version")
            current = cur.fetchone()[0] or 0
            if current > latest:
                raise SchemaTooNew(
                    f"{self.url} has schema version {current}, this lithify knows up to "
                    f"{latest}: upgrade lithify to use this store"
                )
            rebuild = sessions = False
            for m in self.migrations:
                if m.version <= current:
                    continue
                for stmt in m.statements(self.dialect):
                    cur.execute(stmt)
                rebuild |= m.rebuild_captures
                sessions |= m.rebuild_sessions
                cur.execute(
                    "INSERT INTO schema_version (version, description, applied_at) "
                    "VALUES (?, ?, ?)",
                    (m.version, m.description, now()),
                )
            if rebuild:  # once, by this version's rule, into the index as the last one left it
                self._rebuild_captures(cur)
            if (rebuild or sessions) and self._summarized:  # the calls the index now decides
                self._rebuild_sessions(cur)

        self._run(step, write=True)

    def schema_version(self) -> int:
        def q(cur: Cursor) -> int:
            cur.execute("SELECT MAX(version) FROM schema_version")
            return int(cur.fetchone()[0] or 0)

        return self._run(q, write=False)

    # -- writing ---------------------------------------------------------------------------
    def _writing(self, fn: Callable[[Cursor, bool], R]) -> R:
        """``fn(cur, own)`` in a write transaction. A batch that must change the capture index
        while another writer reads it starts again, owning the index from the start (a writer
        never waits for it while holding a share: two such writers would deadlock)."""
        try:
            return self._run(lambda cur: fn(cur, False), write=True)
        except _CapturesBusy:
            return self._run(lambda cur: fn(cur, True), write=True)

    def _write(
        self,
        cur: Cursor,
        table: str,
        columns: tuple[str, ...],
        rows: list[tuple[Any, ...]],
        own: bool = False,
        collisions: list[str] | None = None,
        blobs: dict[bytes, bytes] | None = None,
        sessions: list[_Noted] | None = None,
        notes: Sequence[TextNote | None] = (),
    ) -> list[int]:
        """Insert rows; what became of each (``_STORED``, ``_DUPLICATE``, ``_VARIANT``), in the
        order given; the ids of calls the facts made collide go to ``collisions``; ``blobs``:
        the bytes the fact bodies refer to (rows from ``prepare`` carry theirs); ``notes``: the
        text index's note of each fact row (none: read from the bodies); ``sessions``: where to
        leave what the session summaries need, for the caller to note once for several writes
        (else they are noted here). Facts need ``_share_captures`` first."""
        if table == "facts":
            # The blobs first: the capture index may read these facts back whole.
            rows, carried = take_blobs(rows)
            self._insert_blobs(cur, {**carried, **(blobs or {})})
        # A stable order by id: concurrent batches then take row locks in one order (no
        # deadlock), and within a batch the first of equal ids is tried first.
        order = sorted(range(len(rows)), key=lambda i: rows[i][0])
        ordered = [rows[i] for i in order]
        stored = set(self._insert(cur, table, columns, ordered))
        outcomes: list[int] = []
        for row in ordered:
            if (row[0], row[1]) in stored:
                stored.discard((row[0], row[1]))
                outcomes.append(_STORED)
            else:
                outcomes.append(_DUPLICATE)
        if table == "facts":
            touched: set[str] = set()
            fills: list[tuple[Any, ...]] = []
            self._keep_captures(
                cur,
                ordered,
                outcomes,
                own,
                [] if collisions is None else collisions,
                touched,
                fills,
            )
            noted = [notes[i] for i in order] if len(notes) == len(rows) else [None] * len(rows)
            # The fills' text too: a call read as its fill is in the fill's session.
            written = (
                [*ordered, *fills],
                [*outcomes, *[_VARIANT] * len(fills)],
                touched,
                [*noted, *[None] * len(fills)],
            )
            if sessions is None:
                self._note_sessions(cur, *written)
            else:
                sessions.append(written)
        out = [_STORED] * len(rows)
        for j, i in enumerate(order):
            out[i] = outcomes[j]
        return out

    def insert_facts(self, batch: Iterable[InferenceCall]) -> InsertResult:
        """Store a batch in one transaction; colliding facts are reported, never changed (a
        differing capture of a stored call is kept apart, as a variant)."""
        facts = list(batch)
        at = now()
        rows = [fact_row(f, at) for f in facts]
        if not rows:
            return InsertResult(0, 0, [])
        # The batch's own reading (the proxy keeps none); none for a store without summaries.
        notes = text_notes(facts, rows, Read()) if self._summarized else ()
        blobs: dict[bytes, bytes] = {}
        for i, row in enumerate(rows):
            stored, found = codec.split_blobs(row[-1], self.blob_min)
            if found:
                rows[i] = (*row[:-1], stored)
                blobs.update(found)

        def write(cur: Cursor, own: bool) -> tuple[list[int], list[str]]:
            self._share_captures(cur, own)
            collisions: list[str] = []
            outcomes = self._write(
                cur, "facts", FACT_COLUMNS, rows, own, collisions, blobs, notes=notes
            )
            return outcomes, collisions

        return _result([f.inference_call_id for f in facts], *self._writing(write))

    def insert_feedback(self, batch: Iterable[Feedback]) -> InsertResult:
        items = list(batch)
        at = now()
        rows = [feedback_row(f, at) for f in items]
        if not rows:
            return InsertResult(0, 0, [])
        outcomes = self._run(
            lambda cur: self._write(cur, "feedback", FEEDBACK_COLUMNS, rows), write=True
        )
        return _result([f.feedback_id for f in items], outcomes)

    def insert_prepared(
        self, batches: Sequence[Prepared]
    ) -> list[tuple[InsertResult, InsertResult]]:
        """Write several prepared batches in ONE transaction (a group commit); return each
        batch's (facts, feedback) results as if it had been inserted alone, in this order."""
        if not batches:
            return []
        at = now()
        facts = [_stamp(b.facts, _FACT_INGESTED, at) for b in batches]
        feedback = _stamp([r for b in batches for r in b.feedback], _FEEDBACK_INGESTED, at)

        def write(cur: Cursor, own: bool) -> tuple[list[tuple[list[int], list[str]]], list[int]]:
            # Facts batch after batch, each as if it were inserted alone after the ones before
            # (which capture of a call is stored depends on it). Row locks then follow id order
            # within a batch only: a deadlock with another group commit is retried.
            if any(facts):
                self._share_captures(cur, own)
            done: list[tuple[list[int], list[str]]] = []
            # The session summaries once for the group, not once a batch: a group of many small
            # requests then reads and writes each session's summary once.
            sessions: list[_Noted] = []
            for rows, b in zip(facts, batches, strict=True):
                collisions: list[str] = []
                if rows:
                    outcomes = self._write(
                        cur, "facts", FACT_COLUMNS, rows, own, collisions, sessions=sessions,
                        notes=b.texts,
                    )  # fmt: skip
                    done.append((outcomes, collisions))
                else:
                    done.append(([], collisions))
            if sessions:
                self._note_sessions(
                    cur,
                    [r for rows, _, _, _ in sessions for r in rows],
                    [o for _, outcomes, _, _ in sessions for o in outcomes],
                    set().union(*(t for _, _, t, _ in sessions)),
                    [n for _, _, _, noted in sessions for n in noted],
                )
            return (
                done,
                self._write(cur, "feedback", FEEDBACK_COLUMNS, feedback) if feedback else [],
            )

        fact_outcomes, feedback_outcomes = (
            self._writing(write) if any(facts) or feedback else ([([], []) for _ in facts], [])
        )
        out: list[tuple[InsertResult, InsertResult]] = []
        g = 0
        for b, (outcomes, collisions) in zip(batches, fact_outcomes, strict=True):
            ids = [codec.uncol(r[0]) or "" for r in b.facts]
            fb_ids = [codec.uncol(r[0]) or "" for r in b.feedback]
            out.append(
                (
                    _result(ids, outcomes, collisions),
                    _result(fb_ids, feedback_outcomes[g : g + len(fb_ids)]),
                )
            )
            g += len(fb_ids)
        return out

    # -- ingest tokens ---------------------------------------------------------------------
    def create_token(self, name: str, token_hash: str, prefix: str) -> TokenInfo:
        """Record a new token by its hash; ``TokenExists`` if a live token has the name."""
        name = _token_name(name)
        at = now()

        def q(cur: Cursor) -> None:
            cur.execute(
                "SELECT 1 FROM ingest_tokens WHERE name = ? AND revoked_at IS NULL", (name,)
            )
            if cur.fetchone() is not None:
                raise TokenExists(f"a live token is already named {name!r}: revoke it first")
            cur.execute(
                "INSERT INTO ingest_tokens (name, token_hash, prefix, created_at) "
                "VALUES (?, ?, ?, ?)",
                (name, token_hash, prefix, at),
            )

        self._run(q, write=True)
        return TokenInfo(name, prefix, at)

    def list_tokens(self) -> list[TokenInfo]:
        """Every token ever created, live and revoked, oldest first."""

        def q(cur: Cursor) -> list[Any]:
            cur.execute(
                "SELECT name, prefix, created_at, revoked_at FROM ingest_tokens "
                "ORDER BY created_at, token_id"
            )
            return cur.fetchall()

        return [TokenInfo(*row) for row in self._run(q, write=False)]

    def revoke_token(self, name: str) -> int:
        """Revoke the live token of that name; the number revoked (0 or 1)."""
        at = now()

        def q(cur: Cursor) -> int:
            cur.execute(
                "UPDATE ingest_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL "
                "RETURNING token_id",
                (at, name),
            )
            return len(cur.fetchall())

        return self._run(q, write=True)

    def token_hashes(self) -> list[tuple[str, str, bool]]:
        """(token_hash, name, live) of every token: what a receiver checks bearer tokens with."""

        def q(cur: Cursor) -> list[Any]:
            cur.execute("SELECT token_hash, name, revoked_at IS NULL FROM ingest_tokens")
            return cur.fetchall()

        return [(h, n, bool(live)) for h, n, live in self._run(q, write=False)]

    # -- reading ---------------------------------------------------------------------------
    def iter_facts(
        self, filters: FactFilter | None = None, *, batch_size: int = 500
    ) -> Iterator[InferenceCall]:
        """Facts in (started_at or observed_at, inference_call_id) order, in constant memory;
        grouped by session first with ``FactFilter(order="session")``."""
        for fact, _ in self.iter_digested(filters, batch_size=batch_size):
            yield fact

    def iter_digested(
        self, filters: FactFilter | None = None, *, batch_size: int = 500
    ) -> Iterator[tuple[InferenceCall, bytes | None]]:
        """``iter_facts``, each fact with the SHA-256 of its JSON (``core.factfile.fact_sha256``)
        the store kept when it was written; ``None`` when it kept none (a fact stored before
        version 12, or a capture read under its call's id)."""
        where, params = fact_where(filters)
        limit = filters.limit if filters else None
        order = "time" if filters is None else filters.order
        if order == "time":
            parts: tuple[tuple[str | None, str], ...] = ((None, "sort_at, inference_call_id"),)
        elif order == "session":
            # Two queries rather than one ORDER BY with NULLS LAST: each follows an index
            # (facts_session, facts_order) on both backends, whose NULL orders differ.
            parts = (
                ("session_id IS NOT NULL", "session_id, sort_at, inference_call_id"),
                ("session_id IS NULL", "sort_at, inference_call_id"),
            )
        else:
            raise ValueError(f"unknown fact order {order!r}: use 'time' or 'session'")
        left = None if limit is None else max(0, int(limit))
        reader = codec.FactReader()  # per stream: it decodes each fact against the one before
        with self._snapshot(batch_size) as query:
            join = self._query_joiner(query)  # blobs fetched as facts need them, cached
            contested = any(True for _ in query(_ANY_CAPTURE, []))
            bodies = chain.from_iterable(
                self._call_bodies(query, _and(where, cond), params, keys, contested)
                for cond, keys in parts
            )
            rows = islice(bodies, left)
            # Bodies unpacked a few dozen at a time, back to back: each LZ4 call lets go of the
            # GIL, and one such call between two facts' Python kept a thread waiting for the
            # GIL (an export's writer) waking without getting it, a context switch a fact.
            while chunk := list(islice(rows, _UNPACKED)):
                for data, (_, sha256, call_id) in zip(
                    [join(r[0]) for r in chunk], chunk, strict=True
                ):
                    fact = reader.decode(data)
                    read = named(fact, call_id)
                    # Renamed, its JSON is not the one the digest is of.
                    yield read, bytes(sha256) if sha256 is not None and read is fact else None

    def iter_feedback(
        self, filters: FeedbackFilter | None = None, *, batch_size: int = 500
    ) -> Iterator[Feedback]:
        """Feedback in (observed_at, feedback_id) order."""
        where, params = feedback_where(filters)
        sql = (
            f"SELECT body FROM feedback{where} ORDER BY sort_at, feedback_id"
            f"{_limit(filters.limit if filters else None)}"
        )
        for (body,) in self._stream(sql, params, batch_size):
            yield _feedback_decoder.decode(body)

    def count(self, filters: FactFilter | None = None) -> int:
        """The calls whose first capture ``filters`` match."""
        where, params = fact_where(filters)

        def q(cur: Cursor) -> int:
            cur.execute(f"SELECT COUNT(*) FROM {self._calls(cur)}{where}", params)
            return int(cur.fetchone()[0] or 0)

        return self._run(q, write=False)

    def session_parts(
        self, filters: FactFilter | None, size: int
    ) -> list[tuple[PartBound | None, PartBound | None]]:
        """``FactFilter.part`` bounds that cut the calls ``filters`` select, in session order,
        into parts of at least ``size`` calls each but the last: whole sessions, then the calls
        without one by time (all of one time in one part). The first part is open at its start,
        the last at its end, each ``to`` the next ``from``."""
        f = replace(filters or FactFilter(), part=None, limit=None)
        where, params = fact_where(f)

        def q(cur: Cursor) -> list[PartBound]:
            cuts: list[PartBound] = []
            held = 0
            for kind, key, cond in (
                ("session", "session_id", "session_id IS NOT NULL"),
                ("time", "sort_at", "session_id IS NULL"),
            ):
                cur.execute(
                    f"SELECT {key}, COUNT(*) FROM {self._calls(cur)}{_and(where, cond)} "
                    f"GROUP BY {key} ORDER BY {key}",
                    params,
                )
                while chunk := cur.fetchmany(4096):
                    for value, n in chunk:
                        if held >= size:
                            cuts.append((kind, codec.uncol(value) or ""))
                            held = 0
                        held += n
            return cuts

        bounds: list[PartBound | None] = [None, *self._run(q, write=False), None]
        return list(pairwise(bounds))

    def count_feedback(self, filters: FeedbackFilter | None = None) -> int:
        where, params = feedback_where(filters)
        return self._scalar(f"SELECT COUNT(*) FROM feedback{where}", params)

    def _scalar(self, sql: str, params: list[Any]) -> int:
        def q(cur: Cursor) -> int:
            cur.execute(sql, params)
            return int(cur.fetchone()[0] or 0)

        return self._run(q, write=False)

    def stats(self, filters: FactFilter | None = None, *, session_limit: int = 20) -> Stats:
        """Counts by model, provider, source, session and degradation reason, and token sums."""
        where, params = fact_where(filters)
        sums = "COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0)"

        def groups(cur: Cursor, calls: str, column: str) -> list[Group]:
            cur.execute(f"SELECT {column}, {sums} FROM {calls}{where} GROUP BY {column}", params)
            rows = sorted(cur.fetchall(), key=lambda r: (-r[1], r[0] is None, r[0] or ""))
            return [Group(codec.uncol(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]

        def q(cur: Cursor) -> Stats:
            calls = self._calls(cur)
            cur.execute(f"SELECT {sums}, COUNT(DISTINCT session_id) FROM {calls}{where}", params)
            total, tin, tout, sessions = cur.fetchone()
            cur.execute("SELECT COUNT(*) FROM feedback")
            feedback = cur.fetchone()[0]
            cur.execute(
                f"SELECT session_id, {sums} FROM {calls}{_and(where, 'session_id IS NOT NULL')} "
                f"GROUP BY session_id ORDER BY COUNT(*) DESC, session_id"
                f"{_limit(session_limit)}",
                params,
            )
            top = sorted(cur.fetchall(), key=lambda r: (-r[1], r[0]))
            cur.execute(self._degradations_sql.format(facts=calls, where=where), params)
            deg = sorted(cur.fetchall(), key=lambda r: (-r[2], r[0]))
            cur.execute(self._left_out_sql(where), params)
            dropped = cur.fetchone()[0]
            cur.execute(
                f"SELECT COUNT(*) FROM fact_captures{_and(where, 'kept = 1 AND collided = 1')}",
                params,
            )
            collisions = cur.fetchone()[0]
            richer = 0
            if dropped:
                cur.execute(self._richer_dropped_sql(where), params)
                richer = cur.fetchone()[0]
            return Stats(
                facts=int(total),
                sessions=int(sessions),
                input_tokens=int(tin),
                output_tokens=int(tout),
                feedback=int(feedback),
                by_model=groups(cur, calls, "model"),
                by_provider=groups(cur, calls, "provider"),
                by_source=groups(cur, calls, "source"),
                by_session=[Group(codec.uncol(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in top],
                degradations=[
                    DegradationCount(codec.uncol(r[0]) or "", int(r[1]), int(r[2])) for r in deg
                ],
                variants=int(dropped),
                dropped_captures=int(dropped),
                id_collisions=int(collisions),
                richer_dropped=int(richer),
            )

        return self._run(q, write=False)

    # -- lifetime --------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"
