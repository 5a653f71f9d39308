from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

TESTS = Path(__file__).parent
CORPUS = TESTS / "corpus"
GOLDEN = TESTS / "golden"
RECORDED = TESTS / "recorded"

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture
def corpus() -> Path:
    return CORPUS


# The store fixtures (a fresh SQLite file or PostgreSQL schema per test) serve every test folder.
from tests.scale.cluster import ray_joined  # noqa: E402, F401  (a Ray cluster per test module)
from tests.store.conftest import (  # noqa: E402
    new_store_url,
    own_postgres,
    pg_store_url,
    pg_url,
    sqlite_store_url,
    store_url,
)

__all__ = [
    "new_store_url",
    "own_postgres",
    "pg_store_url",
    "pg_url",
    "sqlite_store_url",
    "store_url",
]
