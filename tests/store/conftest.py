"""Fixtures for the store contract suite: a fresh SQLite file or PostgreSQL schema per test.

PostgreSQL comes from ``$LITHIFY_TEST_POSTGRES`` (a URL) when set, else from
``scripts/postgres``, which starts (or reuses) a throwaway server in ``.pg/``. The PostgreSQL
tests are never skipped: without a server they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "postgres"


def start_postgres(folder: Path | None = None) -> str:
    """Start (or reuse) a throwaway server with scripts/postgres; return its URL."""
    args = ["bash", str(SCRIPT), "start"] + (["--dir", str(folder)] if folder else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=180)
    return out.stdout.strip().splitlines()[-1]


@contextmanager
def throwaway_postgres_folder(prefix: str) -> Iterator[Path]:
    """A folder for a PostgreSQL server of a test's own (which it may stop and start), and
    the server in it destroyed afterwards."""
    folder = Path(
        tempfile.mkdtemp(prefix=prefix)
    )  # not tmp_path: its 0700 parents shut out postgres
    try:
        yield folder
    finally:
        subprocess.run(["bash", str(SCRIPT), "destroy", "--dir", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def own_postgres() -> Iterator[tuple[Path, str]]:
    """A running throwaway PostgreSQL of this test's own: (its folder, its URL)."""
    with throwaway_postgres_folder("lithify-own-pg-") as folder:
        yield folder, start_postgres(folder)


def with_schema(url: str, schema: str) -> str:
    """The URL with ``search_path`` set to one schema (libpq's ``options`` parameter)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture(scope="session")
def pg_url() -> str:
    return os.environ.get("LITHIFY_TEST_POSTGRES") or start_postgres()


@pytest.fixture
def pg_store_url(pg_url: str) -> Iterator[str]:
    schema = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield with_schema(pg_url, schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def sqlite_store_url(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'facts.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A URL naming a fresh, empty store on each backend."""
    name = "sqlite_store_url" if request.param == "sqlite" else "pg_store_url"
    return request.getfixturevalue(name)


@pytest.fixture(params=["sqlite", "postgres"])
def new_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """Makes URLs of fresh, empty stores on each backend: one per call (for property tests,
    whose examples each need a store of their own)."""
    schemas: list[str] = []

    def make() -> str:
        name = uuid.uuid4().hex[:16]
        if request.param == "sqlite":
            return f"sqlite://{tmp_path / name}.db"
        pg_url = request.getfixturevalue("pg_url")
        schemas.append(f"t_{name}")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA t_{name}")
        return with_schema(pg_url, f"t_{name}")

    yield make
    if schemas:
        with psycopg.connect(request.getfixturevalue("pg_url"), autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
