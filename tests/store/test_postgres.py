"""What only the PostgreSQL backend has: a server that goes away and comes back."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from lithify.model import Message, TextPart
from lithify.store import FactFilter, SessionFilter, StoreUnavailable, open_store
from tests.store.conftest import SCRIPT, start_postgres, throwaway_postgres_folder, with_schema
from tests.store.helpers import make_fact


@pytest.fixture(scope="module")
def own_folder() -> Iterator[Path]:
    """A throwaway server of this module's own, which its tests may stop and start."""
    with throwaway_postgres_folder("lithify-pg-outage-") as folder:
        yield folder


@pytest.fixture
def own_server(own_folder: Path) -> tuple[Path, str]:
    return own_folder, start_postgres(own_folder)  # running, whatever an earlier test did


def _pg(folder: Path, cmd: str) -> None:
    subprocess.run(["bash", str(SCRIPT), cmd, "--dir", str(folder)], check=True, timeout=120)


def test_server_stopped_then_restarted(own_server: tuple[Path, str]) -> None:
    folder, url = own_server
    store = open_store(url)
    acknowledged = [make_fact(f"a{i}", session_id="s") for i in range(50)]
    assert store.insert_facts(acknowledged).inserted == 50

    _pg(folder, "stop")
    for call in (
        lambda: store.insert_facts([make_fact("during")]),
        lambda: store.count(),
        lambda: store.stats(),
        lambda: store.get_fact(acknowledged[0].inference_call_id),
        lambda: list(store.iter_facts()),
        lambda: list(store.iter_feedback()),
    ):
        with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1"):
            call()
    with pytest.raises(StoreUnavailable):
        open_store(url)

    assert start_postgres(folder) == url  # same port, so the same URL
    # The same store object recovers by itself on its next call.
    assert store.insert_facts([make_fact("after")]).inserted == 1
    assert store.count() == 51
    assert store.count(FactFilter(session_id="s")) == 50
    assert len(list(store.iter_facts())) == 51
    store.close()


def test_a_connection_killed_under_the_store_is_replaced(own_server: tuple[Path, str]) -> None:
    _, url = own_server
    with open_store(url) as store:
        before = store.count()
        store.insert_facts([make_fact("one")])
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'lithify'"
            )
        # A stale connection is retried once on a fresh one: the call succeeds.
        assert store.insert_facts([make_fact("two")]).inserted == 1
        assert store.count() == before + 2


def test_streams_use_their_own_connection_and_release_it(own_server: tuple[Path, str]) -> None:
    # This module's own server: connections of other tests (run in parallel on the shared
    # server, e.g. a running receiver's) must not change the count.
    _, url = own_server
    schema = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # type: ignore[arg-type]
    pg_store_url = with_schema(url, schema)
    with open_store(pg_store_url) as store:
        store.insert_facts([make_fact(f"f{i}") for i in range(100)])
        stream = store.iter_facts(batch_size=10)
        first = next(stream)
        # A write on the store's own connection while the stream's cursor is open.
        assert store.insert_facts([make_fact("beside")]).inserted == 1
        rest = list(stream)
        assert 1 + len(rest) == 100 and first.inference_call_id < rest[0].inference_call_id

        def lithify_connections() -> int:
            with psycopg.connect(pg_store_url, autocommit=True) as admin:
                row = admin.execute(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'lithify'"
                ).fetchone()
                assert row is not None
                return int(row[0])

        before = lithify_connections()
        for _ in range(5):
            next(store.iter_facts(batch_size=5))  # abandoned at once
        assert lithify_connections() == before


def test_the_text_index_documents_are_lz4_compressed(pg_store_url: str) -> None:
    # pglz was the database server's largest single cost on realistic traffic (migration 8).
    words = " ".join(f"word{i % 97} order{i % 13}" for i in range(600))  # ≈ 9 KB, compressible
    fact = make_fact(
        "long", session_id="s-lz4", input_messages=[Message("user", [TextPart(words)])]
    )
    with open_store(pg_store_url) as store:
        store.insert_facts([fact])
        assert store.sessions(SessionFilter(text="word96 order5")).sessions
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        try:
            conn.execute("SET default_toast_compression = 'lz4'")
            built_with_lz4 = True
        except psycopg.Error:  # a server built without lz4: the migration leaves pglz
            built_with_lz4 = False
        kinds = {r[0] for r in conn.execute("SELECT pg_column_compression(text) FROM session_text")}
        bodies = {r[0] for r in conn.execute("SELECT pg_column_compression(body) FROM facts")}
    assert kinds == bodies == ({"lz4"} if built_with_lz4 else {"pglz"})  # as bodies (migration 2)
