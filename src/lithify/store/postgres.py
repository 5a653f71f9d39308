"""PostgreSQL through psycopg 3: one connection for calls, one more per stream of reads.

A lost server surfaces as ``StoreUnavailable`` and drops the connection; the next call opens a
new one, so the store recovers by itself once the server is back. A call that finds its
connection stale (the server restarted since the last call) retries once on a fresh one: every
operation is idempotent, inserts included, because the database deduplicates.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from lithify.store._backend import R
from lithify.store._query import Cursor, Query
from lithify.store._sql import SqlStore
from lithify.store._types import StoreError, StoreUnavailable
from lithify.store.migrations import MIGRATIONS, Migration

_SCHEMA_LOCK = 0x6C69746869667921  # any constant: serializes migrations of one database
# Fact writers share it; the one writer that changes the capture index owns it (SqlStore._writing).
_CAPTURES_LOCK = 0x6C69746869667922
_RETRIES = 5  # deadlock / serialization failures: retried, then reported as unavailable
# Aborted by the server for concurrency, not for the request: safe to run again.
_ROLLBACK = (
    pg_errors.TransactionRollback,
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
)
_ARRAY_TYPES = {
    "input_tokens": "bigint",
    "output_tokens": "bigint",
    "value_number": "float8",
    "body": "bytea",
    "digest": "bytea",
    "json_sha256": "bytea",
    "variant": "integer",
    "lack": "bigint",
    "in_key": "bytea",
    "out_key": "bytea",
    "call": "bytea",
    "collided": "integer",
    "kept": "integer",
}


def _like(needle: str) -> str:
    """A LIKE pattern for a substring (backslash, the default escape, escapes)."""
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class _PgCursor:
    """A psycopg cursor that takes the shared SQL's ``?`` placeholders."""

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self.raw = cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(sql.replace("?", "%s"), params)

    def fetchone(self) -> Any:
        return self.raw.fetchone()

    def fetchall(self) -> list[Any]:
        return self.raw.fetchall()

    def fetchmany(self, size: int) -> list[Any]:
        return self.raw.fetchmany(size)


def _insert_sql(table: str, columns: tuple[str, ...]) -> str:
    # One statement per batch whatever its size: each column goes as one array and unnest()
    # turns the arrays back into rows (bytea in binary, so blobs are not hex-escaped).
    types = [_ARRAY_TYPES.get(c, "text") for c in columns]
    arrays = ", ".join(f"{'%b' if t == 'bytea' else '%s'}::{t}[]" for t in types)
    exprs = ", ".join(f"{c}::jsonb" if c == "degradations" else c for c in columns)
    names = ", ".join(columns)
    return (
        f"INSERT INTO {table} ({names}) SELECT {exprs} FROM unnest({arrays}) AS u({names}) "
        f"ON CONFLICT DO NOTHING RETURNING {columns[0]}, {columns[1]}"
    )


class PostgresStore(SqlStore):
    dialect = "postgres"
    _degradations_sql = (
        "SELECT j.key, COUNT(*), SUM(j.value::bigint) FROM {facts}, "
        "jsonb_each_text(facts.degradations) AS j{where} GROUP BY j.key"
    )

    def __init__(
        self,
        url: str,
        *,
        display_url: str | None = None,
        connect_timeout: int = 5,
        migrations: tuple[Migration, ...] = MIGRATIONS,
        summaries: bool = True,
    ) -> None:
        self._conninfo = url
        self.url = display_url or url
        self.connect_url = url
        self.migrations = migrations
        self._keep_summaries = summaries
        self._kwargs: dict[str, Any] = {"application_name": "lithify"}
        try:
            given = conninfo_to_dict(url)
        except psycopg.ProgrammingError as e:
            raise StoreError(f"not a PostgreSQL URL: {self.url}: {e}") from e
        if "connect_timeout" not in given:
            self._kwargs["connect_timeout"] = connect_timeout
        self._lock = threading.RLock()
        self._readers: list[psycopg.Connection[Any]] = []
        self._readers_lock = threading.Lock()
        self._names = itertools.count()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self._migrate()

    def _connect(self, *, autocommit: bool) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._conninfo, autocommit=autocommit, **self._kwargs)
        except psycopg.OperationalError as e:
            raise StoreUnavailable(f"PostgreSQL store {self.url} is unreachable: {e}") from e

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    def _run(self, fn: Callable[[Cursor], R], *, write: bool) -> R:
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.url} is closed")
            attempt = 0
            while True:
                attempt += 1
                stale = self._conn is not None and (self._conn.closed or self._conn.broken)
                if stale:
                    self._drop()
                fresh = self._conn is None
                if self._conn is None:
                    self._conn = self._connect(autocommit=True)
                conn = self._conn
                try:
                    with conn.transaction(), conn.cursor(binary=True) as cur:
                        return fn(_PgCursor(cur))
                except _ROLLBACK as e:
                    if attempt < _RETRIES:
                        continue
                    raise StoreUnavailable(f"PostgreSQL store {self.url}: {e}") from e
                except (psycopg.OperationalError, psycopg.InterfaceError) as e:
                    if conn.closed or conn.broken:
                        self._drop()
                        if not fresh and attempt == 1:
                            continue  # the server went away since the last call: try anew
                        raise StoreUnavailable(
                            f"PostgreSQL store {self.url} lost its connection: {e}"
                        ) from e
                    raise StoreUnavailable(f"PostgreSQL store {self.url}: {e}") from e

    @contextlib.contextmanager
    def _snapshot(self, batch_size: int) -> Iterator[Query]:
        if self._closed:
            raise StoreError(f"{self.url} is closed")
        conn = self._idle_reader()
        if conn is None:
            conn = self._connect(autocommit=False)
            # One snapshot for every query of the context (READ COMMITTED would take one per
            # cursor, and reads that merge several cursors could see a write half done).
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
        opened: list[Any] = []

        def query(sql: str, params: list[Any]) -> Iterator[tuple[Any, ...]]:
            try:
                # A named (server-side) cursor: rows arrive batch_size at a time. Names are
                # the store's own count, never reused on a connection read again.
                cur = conn.cursor(name=f"lithify_stream_{next(self._names)}", binary=True)
                opened.append(cur)
                with cur:
                    cur.itersize = batch_size
                    cur.execute(sql.replace("?", "%s"), params)
                    yield from cur
            except (psycopg.OperationalError, psycopg.InterfaceError) as e:
                raise StoreUnavailable(f"PostgreSQL store {self.url}: {e}") from e

        try:
            yield query
        finally:
            self._release_reader(conn, opened)

    # Read connections are kept for the next snapshot (a page's reads open several: a new
    # connection costs milliseconds), at most this many idle.
    _IDLE_READERS = 4

    def _idle_reader(self) -> psycopg.Connection[Any] | None:
        """A kept read connection that still answers (one the server dropped meanwhile, as
        when it restarted, is closed: the snapshot then takes a new one)."""
        while True:
            with self._readers_lock:
                if not self._readers:
                    return None
                conn = self._readers.pop()
            try:
                conn.execute("SELECT 1")  # the snapshot's first statement: it begins here
                return conn
            except psycopg.Error:
                with contextlib.suppress(psycopg.Error):
                    conn.close()

    def _release_reader(self, conn: psycopg.Connection[Any], opened: list[Any]) -> None:
        """End the snapshot (its cursors closed first, so that none is closed later on a
        snapshot of another read) and keep the connection, or close it."""
        kept = False
        with contextlib.suppress(psycopg.Error):
            for cur in opened:
                cur.close()
            conn.rollback()
            with self._readers_lock:
                if not self._closed and len(self._readers) < self._IDLE_READERS:
                    self._readers.append(conn)
                    kept = True
        if not kept:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def _lock_schema(self, cur: Cursor) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))

    def _share_captures(self, cur: Cursor, own: bool) -> None:
        # Writers run side by side on PostgreSQL: one that reads the capture index while another
        # changes it could miss a capture the other is adding (both uncommitted).
        lock = "pg_advisory_xact_lock" if own else "pg_advisory_xact_lock_shared"
        cur.execute(f"SELECT {lock}(?)", (_CAPTURES_LOCK,))

    def _own_captures(self, cur: Cursor) -> bool:
        cur.execute("SELECT pg_try_advisory_xact_lock(?)", (_CAPTURES_LOCK,))
        return bool(cur.fetchone()[0])

    def _insert(
        self, cur: Cursor, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
    ) -> list[tuple[Any, Any]]:
        assert isinstance(cur, _PgCursor)
        columns, rows = self._as_schema(columns, rows)
        arrays = [list(col) for col in zip(*rows, strict=True)]
        cur.raw.execute(_insert_sql(table, columns), arrays)
        return [(r[0], r[1]) for r in cur.raw.fetchall()]

    # -- session summaries and text index ----------------------------------------------------
    # A write locks the summary rows it changes (FOR UPDATE), in session_id order, after
    # making the missing ones: writers of one session then take turns, and each reads the
    # summary (and the text digests) as the last one committed it.
    _for_update = " ORDER BY session_id FOR UPDATE"

    def _ensure_sessions(self, cur: Cursor, sids: list[str]) -> None:
        assert isinstance(cur, _PgCursor)
        cur.raw.execute(
            "INSERT INTO sessions (session_id, calls, first_at, last_at, input_tokens, "
            "output_tokens, tokens, duration_ms, degraded_calls, docs, texts) "
            "SELECT u, 0, '', '', 0, 0, 0, -1, 0, 0, '' FROM unnest(%s::text[]) AS u "
            "ORDER BY u ON CONFLICT DO NOTHING",
            [sids],
        )

    def _update_sessions(self, cur: Cursor, rows: list[tuple[Any, ...]]) -> None:
        assert isinstance(cur, _PgCursor)
        cols = list(zip(*rows, strict=True))
        cur.raw.execute(
            "UPDATE sessions AS s SET calls = u.calls, first_at = u.first_at, "
            "last_at = u.last_at, input_tokens = u.i, output_tokens = u.o, tokens = u.t, "
            "duration_ms = u.d, degraded_calls = u.g, docs = u.docs, texts = u.texts "
            "FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::bigint[], %s::bigint[], "
            "%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], %b::bytea[], "
            "%s::bigint[]) AS u(calls, first_at, last_at, i, o, t, d, g, docs, texts, id) "
            "WHERE s.id = u.id",
            [list(c) for c in cols],
        )

    def _add_text(self, cur: Cursor, docs: list[tuple[int, int, str]]) -> None:
        assert isinstance(cur, _PgCursor)
        cur.raw.execute(
            "INSERT INTO session_text (session, text) "
            "SELECT * FROM unnest(%s::bigint[], %s::text[])",
            [[d[0] for d in docs], [d[2] for d in docs]],
        )

    def _clear_text(self, cur: Cursor) -> None:
        cur.execute("DELETE FROM session_text")

    @contextlib.contextmanager
    def _text_index_off(self, cur: Cursor) -> Iterator[None]:
        # A GIN index built over the filled table takes a fraction of the time of one grown
        # row by row.
        cur.execute(
            "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index AS i JOIN pg_class AS c ON "
            "c.oid = i.indexrelid WHERE c.relname = 'session_text_trgm' AND "
            "c.relnamespace = current_schema()::regnamespace"
        )
        found = cur.fetchone()
        if found is not None:
            cur.execute("DROP INDEX session_text_trgm")
        yield
        if found is not None:
            cur.execute(found[0])

    def _text_docs(self, cur: Cursor, needle: str, limit: int) -> list[int]:
        cur.execute(
            f"SELECT session FROM session_text WHERE text LIKE ? LIMIT {int(limit)}",
            (_like(needle),),
        )
        return [int(r[0]) for r in cur.fetchall()]

    def _text_probe(self, needle: str) -> tuple[str, list[Any]]:
        return (
            "EXISTS (SELECT 1 FROM session_text AS t WHERE t.session = s.id "
            "AND strpos(t.text, ?) > 0)",
            [needle],
        )

    def _id_set(self, ids: list[int]) -> tuple[str, list[Any]]:
        return "s.id = ANY(?::bigint[])", [ids]

    def _rows_of(self, cur: Cursor, sql: str, params: Sequence[Any]) -> Iterator[Any]:
        assert isinstance(cur, _PgCursor)
        with cur.raw.connection.cursor(name="lithify_rebuild", binary=True) as rows:
            rows.itersize = 500
            rows.execute(sql.replace("?", "%s"), params)
            yield from rows

    def _put_blobs(self, cur: Cursor, rows: list[tuple[bytes, bytes]]) -> None:
        assert isinstance(cur, _PgCursor)
        shas, data = zip(*rows, strict=True)
        cur.raw.execute(
            "INSERT INTO blobs (sha256, data) SELECT * FROM unnest(%b::bytea[], %b::bytea[]) "
            "ON CONFLICT DO NOTHING",
            [list(shas), list(data)],
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop()
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            with contextlib.suppress(psycopg.Error):
                conn.close()
