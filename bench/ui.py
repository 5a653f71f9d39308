"""Benchmark: what `lithify ui` answers, in server time (the page's data, no HTTP), on a store of
generated agent sessions; and what the session summaries cost the writes.

    .venv/bin/python bench/ui.py                          # 100,000 calls on SQLite
    .venv/bin/python bench/ui.py --calls 1000000          # the issue's size (≈4 min to generate)
    .venv/bin/python bench/ui.py --postgres URL           # the same facts copied into PostgreSQL
    .venv/bin/python bench/ui.py --ingest 6000 [--postgres URL]   # writes, schema 6 vs 7

The store mixes bench/export.py's sessions of 10 calls (200 interleaving in time, realistic
message sizes) with one 200-call agent session per 10,000 calls (10 interleaving; call k replays
2k messages), generated on first use and cached in bench/out/ (the PostgreSQL copy is made once,
at schema 6, then migrated, as an upgraded store is). Each backend runs in a process of its own,
which reports its peak RSS. Each figure is the median and the 95th percentile of ``--rounds``
requests of one kind: the session list (first page, ten pages in, sorted, filtered; "first view"
forgets the segment counts first), a session's store reads and its page (10 and 200 calls), and
searches (a common word, a rare string, a word in no session, two letters), with each median's
ratio to the baseline (a 10-call session's bare reads) of the same run. Figures: docs/ui-speed.md.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

import export  # bench/export.py: its messages, tools and sessions of 10 calls
from lithify.model import (
    InferenceCall,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
)
from lithify.store import (
    FactFilter,
    FactStore,
    FeedbackFilter,
    SchemaTooNew,
    SessionFilter,
    open_store,
)
from lithify.store.migrations import MIGRATIONS
from lithify.ui import listing, views

LONG = 200  # calls of a long agent session
LONG_EVERY = 10_000  # one long session per this many calls: 1% of the calls at 1,000,000
LONG_CONCURRENT = 10
SPAN = 3 * 100_000  # seconds the short sessions' calls cover (export.generate: 3 s apart)


def _long_session(
    texts: export.Texts, rng: random.Random, s: int, systems: list[Message]
) -> list[tuple[list[Message], Message]]:
    """The (input, output) of a long session's calls: a tool loop of ``LONG`` calls with
    shorter messages than export's (call k replays 2k messages)."""
    history = [systems[s % len(systems)], Message("user", [TextPart(texts(150, 900))])]
    calls = []
    for k in range(LONG):
        parts: list = [ReasoningPart(texts(40, 240))]
        if k == LONG - 1:
            parts.append(TextPart(texts(300, 1500)))
            calls.append((list(history), Message("assistant", parts, "stop")))
            break
        call_id = f"call_long_{s:05d}_{k}"
        args = {"order_id": f"A-{rng.randrange(10**6)}", "fields": ["status"]}
        parts.append(ToolCallPart(call_id, export.TOOLS[k % len(export.TOOLS)].name, args))
        out = Message("assistant", parts, "tool_calls")
        calls.append((list(history), out))
        history += [
            Message("assistant", out.parts),
            Message("tool", [ToolCallResponsePart(call_id, texts(60, 400))]),
        ]
    return calls


def _fact(s: str, k: int, t: int, inputs: list[Message], output: Message) -> InferenceCall:
    return export.fact(s, int(s[-7:]), f"{s}/{k}", k, t, inputs, output)


def generate(path: Path, calls: int, seed: int = 11) -> tuple[int, float]:
    """Write ``calls`` facts into a new store: sessions of 10 calls (export's, 200 interleaving
    in time) and one long session of ``LONG`` calls per ``LONG_EVERY`` calls, spread over the
    same time span, 10 interleaving; (facts, seconds)."""
    rng = random.Random(seed)
    texts = export.Texts(rng)
    systems = [Message("system", [TextPart(texts(600, 2000))]) for _ in range(4)]
    longs = calls // LONG_EVERY
    shorts = (calls - longs * LONG) // export.CALLS_PER_SESSION
    base = 1_760_000_000

    def facts() -> Iterator[InferenceCall]:
        for first in range(0, shorts, export.CONCURRENT):
            group = range(first, min(first + export.CONCURRENT, shorts))
            convs = {s: export._session(texts, rng, s, systems) for s in group}
            for k in range(export.CALLS_PER_SESSION):
                for s in group:
                    yield _fact(f"sess-{s:07d}", k, base + s * 3 + k * 7, *convs[s][k])
            del convs
        step = (shorts * 3) // max(1, longs)
        for first in range(0, longs, LONG_CONCURRENT):
            group = range(first, min(first + LONG_CONCURRENT, longs))
            convs = {s: _long_session(texts, rng, s, systems) for s in group}
            for k in range(LONG):
                for s in group:
                    yield _fact(f"long-{s:07d}", k, base + s * step + k * 13, *convs[s][k])
            del convs

    return export.write_store(path, facts())


def store_for(calls: int) -> tuple[Path, str]:
    """The cached store of ``calls`` facts (made when missing), and a note on it."""
    export.OUT.mkdir(parents=True, exist_ok=True)
    path = export.OUT / f"ui-{calls}-calls-{LONG}-long-{export.PAGE_SIZE // 1024}k-pages.db"
    if path.exists():
        return path, f"cached {path.name} ({path.stat().st_size / 1e9:.1f} GB)"
    n, secs = generate(path, calls)
    size = path.stat().st_size / 1e9
    return path, f"generated {n:,} facts in {secs:.0f} s ({size:.1f} GB): {path.name}"


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


def _copy(source: FactStore, url: str) -> str:
    """Copy the facts into PostgreSQL once (at schema version 6, the bulk rows as an existing
    store holds them), then open it migrated: the session summaries and text index are filled
    by the migration, as an upgraded store's are. A note on what was done."""
    try:
        with open_store(url, migrations=MIGRATIONS[:6]) as pg:
            done = pg.count() >= source.count()
    except SchemaTooNew:
        return "copied and migrated before"
    note = "copied before"
    if not done:
        t0 = time.perf_counter()
        with open_store(url, migrations=MIGRATIONS[:6]) as pg:
            batch = []
            for fact in source.iter_facts(FactFilter(order="session")):
                batch.append(fact)
                if len(batch) == 2000:
                    pg.insert_facts(batch)
                    batch = []
            pg.insert_facts(batch)
        note = f"copied in {time.perf_counter() - t0:.0f} s"
    t0 = time.perf_counter()
    with open_store(url):
        pass
    return f"{note}, opened (migrating if needed) in {time.perf_counter() - t0:.0f} s"


def _session_reads(store: FactStore, sid: str) -> int:
    """What a session page reads of the store (views.session's reads, nothing derived)."""
    calls = list(store.iter_facts(FactFilter(session_id=sid, order="session")))
    ids = [c.inference_call_id for c in calls]
    n = sum(1 for _ in store.iter_feedback(FeedbackFilter(target_kind="session", target_id=sid)))
    n += sum(1 for _ in store.iter_feedback(FeedbackFilter(target_kind="call", target_id=ids)))
    store.call_aliases(ids)
    return len(calls) + n


def bench(store: FactStore, rounds: int) -> list[tuple[str, float, float]]:
    """(request kind, median ms, p95 ms) of each kind; the first is the baseline."""
    rng = random.Random(3)
    deep: dict[str, Any] = {}
    for _ in range(10):
        deep = listing.sessions(store, {"after": deep.get("next") or ""})
    short = [s.session_id for s in store.sessions(SessionFilter(limit=200)).sessions]
    long = [
        s.session_id
        for s in store.sessions(SessionFilter(sort="calls", limit=200)).sessions
        if s.calls >= LONG
    ] or short

    def cold(params: dict[str, str]) -> Callable[[], Any]:
        def run() -> Any:
            listing.forget_segment_counts()
            return listing.sessions(store, params)

        return run

    steps: list[tuple[str, Callable[[], Any]]] = [
        ("baseline: a 10-call session's facts", lambda: _session_reads(store, rng.choice(short))),
        ("session list, first page", lambda: listing.sessions(store, {})),
        ("  the same, first view", cold({})),
        ("session list, 10 pages in", lambda: listing.sessions(store, {"after": deep["next"]})),
        ("session list, most calls first", lambda: listing.sessions(store, {"sort": "calls"})),
        ("  the same, first view", cold({"sort": "calls"})),
        (
            "session list, by duration, asc",
            lambda: listing.sessions(store, {"sort": "duration", "dir": "asc"}),
        ),
        ("session list, one model", lambda: listing.sessions(store, {"model": "claude-sonnet-4"})),
        ("a 10-call session: store reads", lambda: _session_reads(store, rng.choice(short))),
        ("a 200-call session: store reads", lambda: _session_reads(store, rng.choice(long))),
        ("a 10-call session page", lambda: views.session(store, rng.choice(short))),
        ("a 200-call session page", lambda: views.session(store, rng.choice(long))),
        ("search, a common word", lambda: listing.sessions(store, {"q": "shipping"})),
        ("search, a rare string", lambda: listing.sessions(store, {"q": "a-12345"})),
        ("search, a word in no session", lambda: listing.sessions(store, {"q": "zyxwvut"})),
        ("search, 2 letters (no index)", lambda: listing.sessions(store, {"q": "qz"})),
    ]
    out = []
    for name, fn in steps:
        out.append((name, *_time(fn, rounds)))
        # The counts a list left to the server's thread are derived before the next kind is
        # timed (the thread would take turns with it for the interpreter).
        deadline = time.monotonic() + 120
        while listing.segment_counts_pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the last one taken may still be being derived
    return out


def _peak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(backend: str, calls: int, rounds: int, url: str | None) -> None:
    """One backend's figures, as JSON on stdout, with this process's peak RSS."""
    path, note = store_for(calls)
    out: dict[str, Any] = {"note": note}
    with open_store(f"sqlite:///{path}") as sqlite:
        if backend == "SQLite":
            out["rows"] = bench(sqlite, rounds)
        else:
            assert url is not None
            out["copy"] = _copy(sqlite, url)
            with open_store(url) as pg:
                out["rows"] = bench(pg, rounds)
    out["peak_mb"] = _peak_mb()
    print(json.dumps(out))


def _facts(n: int, seed: int = 5) -> list[InferenceCall]:
    """``n`` facts of the bench's mix, in memory: for the ingest figures."""
    rng = random.Random(seed)
    texts = export.Texts(rng, size=1 << 20)
    systems = [Message("system", [TextPart(texts(600, 2000))]) for _ in range(4)]
    out: list[InferenceCall] = []
    s = 0
    while len(out) < n:
        if s % 200 == 199:
            conv = _long_session(texts, rng, s, systems)
            out += [_fact(f"long-{s:07d}", k, 1_760_000_000 + k, *conv[k]) for k in range(LONG)]
        else:
            conv = export._session(texts, rng, s, systems)
            out += [
                _fact(f"sess-{s:07d}", k, 1_760_000_000 + k * 7, *c) for k, c in enumerate(conv)
            ]
        s += 1
    return out[:n]


PATHS = ("insert_facts", "insert_prepared", "group commits")


def ingest(n: int, rounds: int, url: str | None) -> None:
    """Facts per second written with the session summaries and text index (schema 7) and
    without (6), alternating in this run, through insert_facts and insert_prepared."""
    import tempfile

    facts = _facts(n)
    batches = [facts[i : i + export.BATCH] for i in range(0, n, export.BATCH)]
    targets = [("SQLite", None)] + ([("PostgreSQL", url)] if url else [])
    for backend, base in targets:
        times: dict[tuple[str, int], list[float]] = {}
        for r in range(rounds):
            for version in (6, 7):
                for path in PATHS:
                    with tempfile.TemporaryDirectory(dir=export.OUT) as tmp:
                        target = f"sqlite:///{tmp}/i.db"
                        if base is not None:
                            schema = f"bench_ingest_{r}_{version}_{path[7]}"
                            with psycopg.connect(base, autocommit=True) as conn:
                                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                                conn.execute(f"CREATE SCHEMA {schema}")
                            target = f"{base}?options=-csearch_path%3D{schema}"
                        with open_store(target, migrations=MIGRATIONS[:version]) as store:
                            prep = store.preparer()
                            t0 = time.perf_counter()
                            if path == "insert_prepared":
                                ready = [prep(b) for b in batches]
                                t0 = time.perf_counter()
                                for b in ready:
                                    store.insert_prepared([b])
                            elif path == "group commits":
                                # the receiver's: requests of 20 facts, 50 to a commit
                                small = [prep(facts[i : i + 20]) for i in range(0, n, 20)]
                                t0 = time.perf_counter()
                                for i in range(0, len(small), 50):
                                    store.insert_prepared(small[i : i + 50])
                            else:
                                for b in batches:
                                    store.insert_facts(b)
                            times.setdefault((path, version), []).append(time.perf_counter() - t0)
                        if base is not None:
                            with psycopg.connect(base, autocommit=True) as conn:
                                conn.execute(f"DROP SCHEMA {schema} CASCADE")
        print(
            f"\n{backend}: ingest of {n:,} facts in batches of {export.BATCH}, median of {rounds}"
        )
        for path in PATHS:
            a = statistics.median(times[path, 6])
            b = statistics.median(times[path, 7])
            print(
                f"  {path:16s} schema 6 {n / a:8.0f} facts/s   schema 7 {n / b:8.0f} facts/s"
                f"   time ratio {b / a:5.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--postgres", help="also copy the facts into this PostgreSQL and measure it")
    ap.add_argument("--ingest", type=int, help="measure the write path on this many facts instead")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.calls, args.rounds, args.postgres)
        return
    if args.ingest:
        ingest(args.ingest, max(1, min(args.rounds, 5)), args.postgres)
        return
    backends = ["SQLite"] + (["PostgreSQL"] if args.postgres else [])
    for backend in backends:
        argv = [sys.executable, __file__, "--child", backend, "--calls", str(args.calls)]
        argv += ["--rounds", str(args.rounds)] + (
            ["--postgres", args.postgres] if args.postgres else []
        )
        t0 = time.perf_counter()
        res = json.loads(subprocess.run(argv, check=True, capture_output=True).stdout)
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        print(f"\n{backend}, {args.calls:,} calls ({res['note']}; {res.get('copy', '')})")
        print(
            f"server time in ms, {args.rounds} rounds; bench process peak RSS "
            f"{res['peak_mb']:.0f} MB; load after {load}; {time.perf_counter() - t0:.0f} s"
        )
        base = res["rows"][0][1] or 1e-9
        print(f"  {'request':40s} {'median':>8s} {'p95':>8s} {'median/baseline':>16s}")
        for name, med, p95 in res["rows"]:
            print(f"  {name:40s} {med:8.1f} {p95:8.1f} {med / base:16.1f}")


if __name__ == "__main__":
    main()
