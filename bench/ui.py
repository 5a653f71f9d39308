"""Benchmark: what `lithify ui` answers, in server time (the page's data, no HTTP), on a store of
generated agent sessions.

    .venv/bin/python bench/ui.py                          # 100,000 calls on SQLite
    .venv/bin/python bench/ui.py --calls 1000000          # the issue's size (≈12 min to generate)
    .venv/bin/python bench/ui.py --postgres URL           # the same facts copied into PostgreSQL

The store is bench/export.py's (sessions of 10 calls, 200 of them interleaving in time, realistic
message sizes), generated on first use and cached in bench/out/. Each figure is the median and
the 95th percentile of ``--rounds`` requests: the first page of the session list, a page ten
pages in (keyset), a filtered page (one model), a session page (segments derived, feedback
joined), and text searches for a word in every session and for one in none (a search reads at
most about 20,000 calls per page: the worst case).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from export import store_for  # bench/export.py: the same generated store
from lithify.store import FactFilter, FactStore, open_store
from lithify.ui import listing, views


def _time(fn: Callable[[], Any], rounds: int) -> tuple[float, float]:
    """(median, p95) in milliseconds."""
    fn()  # warm: the first read pages the store in
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))]


def _copy(source: FactStore, target: FactStore) -> None:
    if target.count() >= source.count():
        return
    batch = []
    for fact in source.iter_facts(FactFilter(order="session")):
        batch.append(fact)
        if len(batch) == 2000:
            target.insert_facts(batch)
            batch = []
    target.insert_facts(batch)


def bench(store: FactStore, rounds: int) -> list[tuple[str, float, float]]:
    rng = random.Random(3)
    deep = {}
    for _ in range(10):
        deep = listing.sessions(store, {"after": deep.get("next") or ""})
    sids = [s.key for s in store.stats(session_limit=1000).by_session if s.key]
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("session list, first page", lambda: listing.sessions(store, {})),
        ("session list, 10 pages in", lambda: listing.sessions(store, {"after": deep["next"]})),
        ("session list, one model", lambda: listing.sessions(store, {"model": "claude-sonnet-4"})),
        ("a session", lambda: views.session(store, rng.choice(sids))),
        ("search, a common word", lambda: listing.sessions(store, {"q": "shipping"})),
        ("search, a word in no session", lambda: listing.sessions(store, {"q": "zyxwvut"})),
    ]
    return [(name, *_time(fn, rounds)) for name, fn in steps]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--postgres", help="also copy the facts into this PostgreSQL and measure it")
    args = ap.parse_args()
    path, note = store_for(args.calls)
    print(note)
    with open_store(f"sqlite:///{path}") as sqlite:
        results = {"SQLite": bench(sqlite, args.rounds)}
        if args.postgres:
            with open_store(args.postgres) as pg:
                _copy(sqlite, pg)
                results["PostgreSQL"] = bench(pg, args.rounds)
    for backend, rows in results.items():
        print(f"\n{backend}, {args.calls:,} calls: server time in ms (median / p95)")
        for name, med, p95 in rows:
            print(f"  {name:32s} {med:8.1f} {p95:8.1f}")


if __name__ == "__main__":
    main()
