"""The embedded default: one SQLite file in WAL mode, ``synchronous=FULL``.

One connection writes (a lock serializes threads; ``BEGIN IMMEDIATE`` and the busy timeout
serialize processes); each stream of reads opens its own read-only connection, which WAL lets
run beside the writer on a consistent snapshot.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import lz4.block

from lithify.store._backend import R
from lithify.store._query import Cursor, Query
from lithify.store._sql import SqlStore
from lithify.store._types import StoreError, StoreUnavailable
from lithify.store.migrations import MIGRATIONS, Migration

# Primary result codes that mean "not now" rather than "never": busy or locked past the
# timeout, I/O errors, a full disk, a file that cannot be opened.
_UNAVAILABLE = {
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_PROTOCOL,
}
_BROKEN = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}

# Multi-row VALUES: 500 rows of 16 columns stay far below SQLite's 32766 bound parameters.
_CHUNK = 500

# Random keys (call ids, trace ids, response ids) spread every batch over the whole of their
# indexes: once a store holds a few hundred thousand calls, each insert dirties a page of each,
# written to the WAL and again at a checkpoint, so the bytes a batch writes grow with the page.
# Measured on a store grown to a million calls (docs/serve.md): from 300,000 calls on, 4 KB
# pages wrote 40-45% of the bytes of 16 KB pages, at 10-23% less of the writer's CPU. A 4 KB body
# then spills into an overflow page, yet reading a store back and exporting it cost the same.
PAGE_SIZE = 4096

# Fact bodies are stored LZ4-compressed (a block after this marker byte; codec bodies start with
# 1 or 2, so bodies written uncompressed read as before). Facts are mostly text: 3.2x smaller
# bodies; measured on 512-fact batches, a third less writer CPU per fact (compression included),
# faster inserts and a store of ~4 KB a fact instead of ~16. Reading pays one LZ4 decompression
# per fact, where a body is taken from its row (``Backend._joiner``). Not in SQL: a function
# there gave its result to SQLite, which copied it, and the row copied it again (a fact body is
# about 20 KB, most of what an export reads).
_LZ4 = 0x10
_PACK_FROM = 512  # smaller bodies are left as they are


def pack_body(body: bytes) -> bytes:
    """A fact body as this backend stores it. Callers may pack ahead (the receiver does, in its
    worker processes); a packed body is left as it is."""
    if len(body) < _PACK_FROM or body[0] == _LZ4:
        return body
    packed = lz4.block.compress(body, store_size=True)
    return b"\x10" + packed if len(packed) + 1 < len(body) else body


def unpack_body(body: bytes | None) -> bytes | None:
    """The codec bytes of a body as stored (or as ``pack_body`` made it)."""
    if body and body[0] == _LZ4:
        return lz4.block.decompress(memoryview(body)[1:])
    return body


def _trigrams(needle: str) -> str:
    """An FTS5 query for the documents that hold every trigram of a needle (3 characters or
    more): each trigram a string of its own, at most 32 of them (fewer only widen the
    candidates, which the text then decides)."""
    grams = sorted({needle[i : i + 3] for i in range(len(needle) - 2)})[:32]
    return " AND ".join('"' + g.replace('"', '""') + '"' for g in grams)


# The text index's documents are mostly text of few words, kept LZ4-compressed past a few
# hundred bytes (a tag byte first: 1 compressed, 0 as is); lithify_doc() gives the text back.
_DOC_PACK_FROM = 256


def pack_doc(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) < _DOC_PACK_FROM:
        return b"\x00" + raw
    return b"\x01" + lz4.block.compress(raw, store_size=True)


def unpack_doc(doc: bytes) -> str:
    if doc[:1] == b"\x01":
        return lz4.block.decompress(memoryview(doc)[1:]).decode("utf-8")
    return bytes(doc[1:]).decode("utf-8")


def _functions(conn: sqlite3.Connection) -> None:
    conn.create_function("lithify_doc", 1, unpack_doc, deterministic=True)


def _translate(e: sqlite3.Error, path: Path) -> Exception:
    code = getattr(e, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in _UNAVAILABLE:
        return StoreUnavailable(f"SQLite store {path}: {e}")
    if primary in _BROKEN:
        return StoreError(f"SQLite store {path} is not a usable database: {e}")
    return e


class SQLiteStore(SqlStore):
    dialect = "sqlite"
    _degradations_sql = (
        "SELECT j.key, COUNT(*), SUM(j.value) FROM {facts}, json_each(facts.degradations) AS j"
        "{where} GROUP BY j.key"
    )

    _fact_body = "b.body"
    _fact_sha = "b.json_sha256"
    _fact_from = "facts JOIN fact_bodies AS b ON b.id = facts.rowid"

    _packer = staticmethod(pack_body)

    def _unpack(self, body: bytes) -> bytes:
        return unpack_body(body) or body

    def __init__(
        self,
        path: str | Path,
        *,
        timeout: float = 30.0,
        migrations: tuple[Migration, ...] = MIGRATIONS,
        summaries: bool = True,
    ) -> None:
        if sqlite3.sqlite_version_info < (3, 35):
            raise StoreError(f"SQLite {sqlite3.sqlite_version} is too old: lithify needs 3.35+")
        self.path = Path(path).expanduser().absolute()
        self.url = f"sqlite://{self.path}"
        # The bare path: a URL would read `?`, `#` and `%xx` in a file name as URL syntax.
        self.connect_url = str(self.path)
        self.migrations = migrations
        self._keep_summaries = summaries
        self._timeout = timeout
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._conn = self._connect()
            self._migrate()
        except sqlite3.Error as e:
            self.close()
            raise _translate(e, self.path) from e
        except BaseException:
            self.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        new = not self.path.exists()
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE … COMMIT).
        conn = sqlite3.connect(
            self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        if new:
            self.path.chmod(0o600)  # facts hold prompts and outputs: keep them the user's
            # Only a new file takes a page size (before WAL is on); a store keeps the one it
            # was made with (docs/store.md, Page size).
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        _functions(conn)
        conn.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk (WAL fsynced) before insert_facts returns, so an
        # acknowledged batch survives a power loss, not only a process crash (NORMAL's bound).
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")
        conn.execute("PRAGMA cache_size=-65536")  # 64 MB: index pages of a large store stay hot
        # Checkpoint every 128 MB of WAL, not SQLite's 1000 pages: a batch dirties pages of every
        # index, and each checkpoint writes them all back. Checkpointing less often wrote an
        # index page once for several batches: +20% batch insert throughput measured on a store
        # of 25k facts. Counted in bytes, whatever the store's page size. The WAL file is cut
        # back to 64 MB after each checkpoint.
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute(f"PRAGMA wal_autocheckpoint={(128 << 20) // size}")
        conn.execute(f"PRAGMA journal_size_limit={64 * 1024 * 1024}")
        return conn

    def _run(self, fn: Callable[[Cursor], R], *, write: bool) -> R:
        with self._lock:
            if self._conn is None:
                raise StoreError(f"{self.url} is closed")
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    result = fn(conn.cursor())
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise _translate(e, self.path) from e
            return result

    @contextlib.contextmanager
    def _snapshot(self, batch_size: int) -> Iterator[Query]:
        try:
            conn = sqlite3.connect(
                f"{self.path.as_uri()}?mode=ro",
                uri=True,
                timeout=self._timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e
        _functions(conn)

        def query(sql: str, params: list[Any]) -> Iterator[tuple[Any, ...]]:
            try:
                cur = conn.execute(sql, params)
                while rows := cur.fetchmany(batch_size):
                    yield from rows
            except sqlite3.Error as e:
                raise _translate(e, self.path) from e

        try:
            # One read transaction: every query of the context reads the snapshot the first
            # one took, whatever writers commit meanwhile.
            conn.execute("BEGIN")
            yield query
        except sqlite3.Error as e:
            raise _translate(e, self.path) from e
        finally:
            conn.close()

    def _insert(
        self, cur: Cursor, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
    ) -> list[tuple[Any, Any]]:
        columns, rows = self._as_schema(columns, rows)
        # The digest and the body go to fact_bodies, under the fact's rowid.
        split = table == "facts"
        if split:
            n = 2 if columns[-2] == "json_sha256" else 1
            assert columns[-1] == "body"
            apart = ", ".join(columns[-n:])
            bodies: dict[Any, tuple[Any, ...]] = {}
            for row in rows:
                # Of a batch's rows with one (inference_call_id, model_call_id), the first is
                # the one that can be stored.
                bodies.setdefault((row[0], row[1]), row[-n:])
            columns, rows = columns[:-n], [row[:-n] for row in rows]
        stored: list[tuple[Any, Any]] = []
        row_sql = "(" + ", ".join("?" * len(columns)) + ")"
        head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
        tail = f" ON CONFLICT DO NOTHING RETURNING rowid, {columns[0]}, {columns[1]}"
        for i in range(0, len(rows), _CHUNK):
            chunk = rows[i : i + _CHUNK]
            params = [v for row in chunk for v in row]
            cur.execute(head + ", ".join([row_sql] * len(chunk)) + tail, params)
            returned = cur.fetchall()
            if split:
                assert isinstance(cur, sqlite3.Cursor)
                kept = []
                for rowid, key, second in returned:
                    *digest, body = bodies[key, second]
                    kept.append((rowid, *digest, pack_body(body)))
                sql = f"INSERT INTO fact_bodies (id, {apart}) VALUES (?{', ?' * n})"
                cur.executemany(sql, kept)
            stored.extend((key, second) for _, key, second in returned)
        return stored

    # -- session summaries and text index ----------------------------------------------------
    def _ensure_sessions(self, cur: Cursor, sids: list[str]) -> None:
        assert isinstance(cur, sqlite3.Cursor)
        cur.executemany(
            "INSERT INTO sessions (session_id, calls, first_at, last_at, input_tokens, "
            "output_tokens, tokens, duration_ms, degraded_calls, docs, texts) "
            "VALUES (?, 0, '', '', 0, 0, 0, -1, 0, 0, x'') ON CONFLICT DO NOTHING",
            [(sid,) for sid in sids],
        )

    def _update_sessions(self, cur: Cursor, rows: list[tuple[Any, ...]]) -> None:
        assert isinstance(cur, sqlite3.Cursor)
        cur.executemany(
            "UPDATE sessions SET calls = ?, first_at = ?, last_at = ?, input_tokens = ?, "
            "output_tokens = ?, tokens = ?, duration_ms = ?, degraded_calls = ?, docs = ?, "
            "texts = ? WHERE id = ?",
            rows,
        )

    def _add_text(self, cur: Cursor, docs: list[tuple[int, int, str]]) -> None:
        assert isinstance(cur, sqlite3.Cursor)
        rows = [((sid << 32) | n, text) for sid, n, text in docs]
        cur.executemany(
            "INSERT INTO session_docs (id, doc) VALUES (?, ?)",
            [(i, pack_doc(text)) for i, text in rows],
        )
        cur.executemany("INSERT INTO session_text (rowid, text) VALUES (?, ?)", rows)

    def _clear_text(self, cur: Cursor) -> None:
        cur.execute("DELETE FROM session_docs")
        cur.execute("INSERT INTO session_text (session_text) VALUES ('delete-all')")

    def _text_docs(self, cur: Cursor, needle: str, limit: int) -> list[int]:
        cur.execute(
            "SELECT d.id >> 32 FROM session_text JOIN session_docs AS d ON d.id = "
            "session_text.rowid WHERE session_text MATCH ? AND instr(lithify_doc(d.doc), ?) > 0 "
            f"LIMIT {int(limit)}",
            (_trigrams(needle), needle),
        )
        return [int(r[0]) for r in cur.fetchall()]

    def _text_probe(self, needle: str) -> tuple[str, list[Any]]:
        # A session's documents are a rowid range: read them, rather than ask FTS5, whose
        # lists for a common needle's trigrams are long.
        return (
            "EXISTS (SELECT 1 FROM session_docs AS d WHERE d.id >= (s.id << 32) AND "
            "d.id < ((s.id + 1) << 32) AND instr(lithify_doc(d.doc), ?) > 0)",
            [needle],
        )

    def _session_calls(self, calls: str) -> str:
        # Without statistics SQLite may take the model's index to find one session's calls,
        # and read every call of that model for each session.
        return "facts INDEXED BY facts_session" if calls == "facts" else calls

    def _id_set(self, ids: list[int]) -> tuple[str, list[Any]]:
        return "s.id IN (SELECT value FROM json_each(?))", [json.dumps(ids)]

    def _rows_of(self, cur: Cursor, sql: str, params: Sequence[Any]) -> Iterator[Any]:
        assert isinstance(cur, sqlite3.Cursor)
        reader = cur.connection.execute(sql, params)
        while rows := reader.fetchmany(500):
            yield from rows

    def _put_blobs(self, cur: Cursor, rows: list[tuple[bytes, bytes]]) -> None:
        assert isinstance(cur, sqlite3.Cursor)
        cur.executemany(
            "INSERT INTO blobs (sha256, data) VALUES (?, ?) ON CONFLICT DO NOTHING", rows
        )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
