"""Fixtures for the store contract suite: a fresh SQLite file or PostgreSQL schema per test.

PostgreSQL comes from ``$LITHIFY_TEST_POSTGRES`` (a URL) when set, else from
``scripts/postgres``, which starts (or reuses) a throwaway server in ``.pg/``. The PostgreSQL
tests are never skipped: without a server they fail.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
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
