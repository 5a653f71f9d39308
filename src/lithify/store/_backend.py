"""What a backend supplies: connections, transactions, snapshots and dialect hooks."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from lithify.core import codec
from lithify.store._query import _IN_CHUNK, Cursor, Query, _select_in
from lithify.store._rows import prepare
from lithify.store._types import Prepared
from lithify.store.migrations import Migration

R = TypeVar("R")


class Backend:
    """The hooks a backend (SQLite, PostgreSQL) implements for the shared SQL."""

    dialect: str
    url: str
    migrations: tuple[Migration, ...]

    # -- backend hooks ---------------------------------------------------------------------
    def _run(self, fn: Callable[[Cursor], R], *, write: bool) -> R:
        """Run ``fn`` in one transaction (the write lock held when ``write``); errors mapped."""
        raise NotImplementedError

    def _snapshot(self, batch_size: int) -> contextlib.AbstractContextManager[Query]:
        """A read-only connection of its own, on one snapshot of the database while the context
        lasts: it gives a function that streams a query's rows, ``batch_size`` at a time
        (several streams may be read side by side)."""
        raise NotImplementedError

    def _stream(self, sql: str, params: list[Any], batch_size: int) -> Iterator[tuple[Any, ...]]:
        """Rows of a query, read in batches on a connection of its own."""
        with self._snapshot(batch_size) as query:
            yield from query(sql, params)

    def _insert(
        self, cur: Cursor, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
    ) -> list[tuple[Any, Any]]:
        """Insert rows in this order, skipping any that collide; return the first two columns
        of those inserted (of facts: inference_call_id and model_call_id, which tell which of
        a batch's rows with one id was stored: the first with that pair)."""
        raise NotImplementedError

    def _lock_schema(self, cur: Cursor) -> None:
        """Serialize concurrent migrations (SQLite's write lock already does)."""

    def _share_captures(self, cur: Cursor, own: bool) -> None:
        """Taken before a transaction writes facts: the right to read the capture index
        (shared by writers), or to change it (``own``: one writer at a time). SQLite's write
        lock already makes every writer the only one."""

    def _own_captures(self, cur: Cursor) -> bool:
        """Change a shared right to read the capture index into the right to change it, when no
        other writer shares it; False when one does."""
        return True

    _degradations_sql: str
    # Where a fact's body is read from (SQLite keeps bodies in a table of their own).
    _fact_body = "body"
    _fact_sha = "json_sha256"
    _fact_from = "facts"
    _variant_body = "body"
    # Whether the schema has json_sha256 (a store opened with older migrations, as tests do,
    # has not: its reads give no kept digests).
    _digests = True

    # How this backend keeps a fact's body (SQLite compresses); a module-level function, so
    # that a preparer made with it can go to worker processes. None: as the codec wrote it.
    _packer: Callable[[bytes], bytes] | None = None

    def _pack(self, body: bytes) -> bytes:
        """A body as this backend stores it."""
        return body if self._packer is None else self._packer(body)

    def preparer(self) -> Callable[..., Prepared]:
        """``prepare`` with bodies as this store keeps them, for ``insert_prepared``: picklable,
        so worker processes build the rows (and a packed row crosses back smaller)."""
        if self._packer is None and self.blob_min == codec.BLOB_MIN:
            return prepare
        return functools.partial(prepare, pack=self._packer, blob_min=self.blob_min)

    def _as_schema(
        self, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        """``columns`` and ``rows`` as this store's schema holds them: without ``json_sha256``
        when it was opened at a version before the digests (as tests of upgrades do)."""
        if self._digests or "json_sha256" not in columns:
            return columns, rows
        i = columns.index("json_sha256")
        return columns[:i] + columns[i + 1 :], [r[:i] + r[i + 1 :] for r in rows]

    def _unpack(self, body: bytes) -> bytes:
        """A body as stored (or as ``prepare`` left it) without the backend's packing: codec
        bytes, or codec bytes with blobs cut out (``codec.join_blobs`` puts them back)."""
        return body

    # -- blobs (docs/store.md, Blobs) ------------------------------------------------------
    # Base64 strings at least this long are kept once each, in the blobs table, by SHA-256.
    blob_min: int = codec.BLOB_MIN

    def _insert_blobs(self, cur: Cursor, blobs: dict[bytes, bytes]) -> None:
        """Store the blobs not stored yet. Asking first keeps a session's re-sent images from
        crossing to the database again; two writers adding one blob at once meet at the
        primary key (ON CONFLICT DO NOTHING), in SHA-256 order so that they never deadlock."""
        if not blobs:
            return
        have = {
            bytes(r[0]) for r in _select_in(cur, "SELECT sha256 FROM blobs WHERE sha256", blobs)
        }
        rows = sorted((sha, data) for sha, data in blobs.items() if sha not in have)
        if rows:
            self._put_blobs(cur, rows)

    def _put_blobs(self, cur: Cursor, rows: list[tuple[bytes, bytes]]) -> None:
        for sha, data in rows:
            cur.execute(
                "INSERT INTO blobs (sha256, data) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (sha, data),
            )

    def _joiner(self, fetch: Callable[[list[bytes]], dict[bytes, bytes]]) -> Callable[[Any], bytes]:
        """Codec bytes of bodies read as stored (``_fact_body``, ``_variant_body``), blobs
        fetched with ``fetch`` and cached for the bodies after (a session repeats them)."""
        cache = codec.BlobCache()
        unpack = self._unpack
        return lambda body: codec.join_blobs(unpack(bytes(body)), fetch, cache)

    def _cur_joiner(self, cur: Cursor) -> Callable[[Any], bytes]:
        def fetch(shas: list[bytes]) -> dict[bytes, bytes]:
            rows = _select_in(cur, "SELECT sha256, data FROM blobs WHERE sha256", shas)
            return {bytes(sha): bytes(data) for sha, data in rows}

        return self._joiner(fetch)

    def _query_joiner(self, query: Query) -> Callable[[Any], bytes]:
        def fetch(shas: list[bytes]) -> dict[bytes, bytes]:
            found: dict[bytes, bytes] = {}
            for i in range(0, len(shas), _IN_CHUNK):
                chunk = shas[i : i + _IN_CHUNK]
                marks = ", ".join("?" * len(chunk))
                for sha, data in query(
                    f"SELECT sha256, data FROM blobs WHERE sha256 IN ({marks})", chunk
                ):
                    found[bytes(sha)] = bytes(data)
            return found

        return self._joiner(fetch)

    def _codec_bytes(self, body: bytes, cur: Cursor) -> bytes:
        """The codec bytes of a row's body as ``_write`` holds it (blobs already stored)."""
        return self._cur_joiner(cur)(body)

    def close(self) -> None:
        raise NotImplementedError
