"""What only the SQLite backend has: pragmas, the file, another process holding the lock."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from lithify.store import StoreError, StoreUnavailable, open_store
from lithify.store.sqlite import SQLiteStore
from tests.store.helpers import make_fact


def test_wal_and_full_sync(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "f.db") as store:
        conn = store._conn
        assert conn is not None
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_new_stores_take_small_pages_and_old_ones_keep_theirs(tmp_path: Path) -> None:
    # A 16 KB store from before: its page size stays, and it checkpoints at the same 128 MB.
    with contextlib.closing(sqlite3.connect(tmp_path / "old.db")) as conn:
        conn.execute("PRAGMA page_size=16384")
        conn.execute("PRAGMA journal_mode=WAL")
    for name, size in (("new.db", 4096), ("old.db", 16384)):
        with SQLiteStore(tmp_path / name) as store:
            store.insert_facts([make_fact(f"call-{i}") for i in range(3)])
            conn = store._conn
            assert conn is not None
            assert conn.execute("PRAGMA page_size").fetchone()[0] == size
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] * size == 128 << 20
        with open_store(f"sqlite://{tmp_path / name}") as store:
            assert len(list(store.iter_facts())) == 3


def test_a_held_write_lock_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    with SQLiteStore(path, timeout=10) as store:
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
        start = time.monotonic()
        release.start()
        try:
            assert store.insert_facts([make_fact("waited")]).inserted == 1
            assert time.monotonic() - start >= 0.25
        finally:
            release.join()
            other.close()


def test_a_lock_held_past_the_timeout_is_unavailable_then_recovers(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    with SQLiteStore(path, timeout=0.2) as store:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreUnavailable, match="locked"):
            store.insert_facts([make_fact("blocked")])
        assert store.count() == 0  # reads go on beside the writer (WAL)
        other.execute("COMMIT")
        other.close()
        assert store.insert_facts([make_fact("blocked")]).inserted == 1


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable database"):
        SQLiteStore(path)


def test_a_folder_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises((StoreError, OSError)):
        SQLiteStore(tmp_path / "file" / "sub" / "f.db")


def test_fact_bodies_are_stored_compressed_and_read_back_exactly(tmp_path: Path) -> None:
    from lithify.core import codec
    from tests.store.helpers import same

    path = tmp_path / "f.db"
    text = " ".join(f"word{i % 50}" for i in range(4000))  # ~30 KB of text, as prompts are
    big, small = make_fact("big", raw={"prompt": text}), make_fact("small")
    with SQLiteStore(path) as store:
        store.insert_facts([big, small])
        rows = dict(
            sqlite3.connect(path)
            .execute(
                "SELECT f.inference_call_id, b.body FROM facts f "
                "JOIN fact_bodies b ON b.id = f.rowid"
            )
            .fetchall()
        )
        stored = rows[big.inference_call_id]
        assert stored[0] == 0x10 and len(stored) < len(codec.encode(big)) / 3  # an LZ4 block
        assert rows[small.inference_call_id] == codec.encode(small)  # small: left as it is
        assert same(store.get_fact(big.inference_call_id), big)
        read = {f.inference_call_id: f for f in store.iter_facts()}
        assert same(read[big.inference_call_id], big) and same(read[small.inference_call_id], small)
    # A body an earlier lithify wrote uncompressed reads as before.
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "UPDATE fact_bodies SET body = ? WHERE id = "
        "(SELECT rowid FROM facts WHERE inference_call_id = ?)",
        (codec.encode(big), big.inference_call_id),
    )
    conn.close()
    with SQLiteStore(path) as store:
        assert same(store.get_fact(big.inference_call_id), big)
        assert sum(same(f, big) for f in store.iter_facts()) == 1


def test_a_store_at_this_version_opens_while_a_writer_holds_the_lock(tmp_path: Path) -> None:
    """Opening reads the schema version, and takes the write lock only to migrate: a reader
    (lithify facts, the ui) opens while the proxy's recorder is in a write transaction."""
    url = f"sqlite:///{tmp_path}/facts.db"
    open_store(url).close()
    writer = sqlite3.connect(tmp_path / "facts.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # held until the end of the test
    opened: list[int] = []

    def read() -> None:
        with open_store(url) as store:
            opened.append(store.count())

    t = threading.Thread(target=read)
    t.start()
    t.join(timeout=10)  # far below the 30 s busy timeout a write lock would wait for
    done_while_locked = not t.is_alive()
    writer.execute("ROLLBACK")
    t.join()
    assert done_while_locked and opened == [0]
