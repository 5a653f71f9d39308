"""Fixtures: a receiver on a fresh SQLite store, in this process, on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from lithify.ingest.receiver import ServeConfig
from lithify.store import FactStore, open_store
from tests.serve.helpers import LiveServer, live_server

# Threads instead of worker processes: the same code path after the pool, without spawn time.
# The process pool is exercised by the tests that run a real `lithify serve`.
BASE = ServeConfig(workers=0, token_refresh=0.2, retry_after=1)


@pytest.fixture
def store(sqlite_store_url: str) -> Iterator[FactStore]:
    with open_store(sqlite_store_url) as s:
        yield s


@pytest.fixture
def server(sqlite_store_url: str) -> Iterator[LiveServer]:
    config = replace(BASE, store=sqlite_store_url)
    with live_server(config, open_store(sqlite_store_url)) as srv:
        yield srv
