"""Benchmark: `lithify serve` under load, on loopback, into SQLite and PostgreSQL.

    .venv/bin/python bench/serve.py                      # both backends, ≈1 minute
    .venv/bin/python bench/serve.py --backend sqlite --seconds 20 --clients 4,16 \
        --encoding protobuf,json --rounds 3 --before ../old/src    # before/after, interleaved
    .venv/bin/python bench/serve.py --backend sqlite --transport both --rounds 5   # HTTP vs gRPC

Starts a real `lithify serve` process on a fresh store, then N concurrent OTLP/HTTP exporters
(threads with keep-alive connections, as the SDK's exporters use) each send batches of 512
realistic GenAI spans (bench/convert.py's generator, ≈5 KB of content a span; every batch gets
fresh random trace and response ids, so nothing deduplicates, and sessions that end: see
``Batches``) for a fixed time, waiting the
Retry-After of a 429/503 before the next. Prints spans/s stored, the CPU the server's processes
spent per stored span, p50/p99 request latency, the server's peak resident memory, requests per
commit, the answers, and losses: spans acknowledged (HTTP 200) but not in the store — must be 0.
The ceiling is the same spans converted without the server: one process, and one per core.

``--clients`` and ``--encoding`` take lists; every combination runs ``--rounds`` times, each on
a fresh server and store. ``--before SRC`` runs each also from another checkout's ``src`` (a
``git worktree`` of the commit before a change), back to back, the order swapped every round,
and prints medians and the after/before ratios.

``--transport grpc`` sends the same bodies as OTLP/gRPC ``TraceService/Export`` calls (one
channel per exporter, as the SDK's exporter keeps); ``both`` alternates HTTP and gRPC runs, each
on a fresh server and store, ``--rounds`` times (the order swapped every round, so a machine
shared with other work weighs on both alike) and prints the medians and their ratio.

``--growth 300`` measures the writer alone as one SQLite store grows by 300 requests (153,600
spans): its CPU a span (the text index and the row inserts apart) and the bytes it writes a
request, every 50 requests, and the B-trees whose pages a commit wrote most; ``--page-size``
makes that store with another page size than a new store's.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import hashlib
import http.client
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert import make_requests
from export import with_page_size
from lithify.store import open_store
from lithify.translate import translate_protobuf

ROOT = Path(__file__).resolve().parents[1]
LITHIFY = Path(sys.executable).with_name("lithify")


class Batches:
    """Fresh copies of a few template requests, each batch as real traffic's: random trace and
    response ids (counters would append to their indexes) and fresh span ids, so every span is a
    new fact; span times that move on, 10 ms a span (times repeated from batch to batch would
    scatter the store's time-ordered indexes as no exporter does); and sessions that end (a
    fixed set would keep the session list small and never add text new to a session): 8 spans
    of a batch share a session, which takes 16 calls from two batches of one template. Each
    template is encoded once with marker ids, sessions and times; a batch is a copy of its bytes
    with its own written over the markers (fixed width in both encodings), so any number of
    batches costs the exporters a copy and a few small writes a span (≈1 µs), not a protobuf or
    JSON encoding."""

    def __init__(self, templates: list[bytes], encoding: str) -> None:
        self.encoding = encoding
        self.counter = 0
        self.lock = threading.Lock()
        self.run = uuid.uuid4().bytes[:6]
        # (body, [(trace id, span id, response id, start, end, session) offsets, duration], spans)
        self.templates: list[tuple[bytes, list[tuple[tuple[int, ...], int]], int]] = []
        for t, raw in enumerate(templates):
            marker = 0xA5_5A_00_00_00 + t  # never a batch number
            req = ExportTraceServiceRequest.FromString(raw)
            took = self._stamp(req, t, marker)
            body = req.SerializeToString() if encoding == "protobuf" else _to_json(req)
            spots = []
            for i, duration in enumerate(took, 1):
                trace, span, resp = self._ids(marker, i)
                start, end = (self._time(x) for x in _time_markers(t, i))
                if encoding == "json":
                    trace, span = trace.hex().encode(), span.hex().encode()
                at = [body.find(x) for x in (trace, span, resp, start, end)]
                session = self._session(t, marker, i)  # 8 spans share it: the one after resp
                at.append(body.find(session, at[2]))
                assert all(a >= 0 for a in at) and body.count(trace) == 1, "marker not unique"
                assert body.count(start) == 1 and body.count(end) == 1, "marker not unique"
                where = (
                    at[0], at[1], at[2] + len(b"chatcmpl-") + 13, at[3], at[4],
                    at[5] + len(session) - 19,
                )  # fmt: skip
                spots.append((where, duration))
            self.templates.append((body, spots, len(took)))

    def _ids(self, k: int, n: int) -> tuple[bytes, bytes, bytes]:
        trace = self.run + k.to_bytes(6, "big") + n.to_bytes(4, "big")
        span = k.to_bytes(5, "big") + n.to_bytes(3, "big")
        return trace, span, f"chatcmpl-{self.run.hex()}-{k:013d}-{n:05d}".encode()

    def _session(self, t: int, k: int, n: int) -> bytes:
        """Span n's conversation in a batch of template t whose sessions are generation k."""
        return f"conv-{self.run.hex()}-{t}-{k:013d}-{(n - 1) // 8:05d}".encode()

    def _time(self, ns: int) -> bytes:
        """A time as the encoding writes it: fixed64, or 19 decimal digits."""
        return ns.to_bytes(8, "little") if self.encoding == "protobuf" else str(ns).encode()

    def _stamp(self, req: ExportTraceServiceRequest, t: int, k: int) -> list[int]:
        """Marker ids, sessions and times into template t; its spans' durations."""
        took = []
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for s in ss.spans:
                    took.append(s.end_time_unix_nano - s.start_time_unix_nano)
                    s.trace_id, s.span_id, resp = self._ids(k, len(took))
                    s.start_time_unix_nano, s.end_time_unix_nano = _time_markers(t, len(took))
                    for kv in s.attributes:
                        if kv.key == "gen_ai.response.id":
                            kv.value.string_value = resp.decode()
                        elif kv.key == "gen_ai.conversation.id":
                            kv.value.string_value = self._session(t, k, len(took)).decode()
        return took

    def next(self) -> tuple[bytes, int]:
        with self.lock:
            k = self.counter
            self.counter += 1
        body, spots, n = self.templates[k % len(self.templates)]
        out = bytearray(body)
        k5 = k.to_bytes(5, "big")
        if self.encoding == "json":
            k5 = k5.hex().encode()
        # Random trace and response ids and sessions, as real ones are: they spread over the
        # store's indexes as real traffic's do (counters would append to them).
        rng = random.Random(self.run + k.to_bytes(8, "big"))
        traces = rng.randbytes(16 * n)
        responses = rng.randbytes(7 * n).hex().encode()
        # A session takes 8 spans of each of two batches of one template: k and k + templates.
        m = len(self.templates)
        sessions = [
            hashlib.blake2b(b"%b %d %d %d" % (self.run, k // (2 * m), k % m, g)).hexdigest()
            for g in range((n + 7) // 8)
        ]
        w5 = len(k5)
        for j, ((t, s, r, start, end, g), duration) in enumerate(spots):
            trace = traces[16 * j : 16 * j + 16]
            if self.encoding == "json":
                trace = trace.hex().encode()
            out[t : t + len(trace)] = trace
            out[s : s + w5] = k5
            out[r : r + 13] = responses[14 * j : 14 * j + 13]
            out[g : g + 13] = sessions[j // 8][:13].encode()
            at = _EPOCH + (k * n + j) * 10_000_000
            began, ended = self._time(at), self._time(at + duration)  # both of one width
            out[start : start + len(began)] = began
            out[end : end + len(ended)] = ended
        return bytes(out), n


# Span times from 2026-01-01, 19 decimal digits as nanoseconds until 2286: fixed width in JSON.
_EPOCH = 1_767_225_600_000_000_000


def _time_markers(template: int, span: int) -> tuple[int, int]:
    """A template span's start and end while it is encoded: values no batch's times take."""
    base = 7_000_000_000_000_000_000 + template * 10**12 + span * 10**6
    return base + 1, base + 2


def _to_json(req: ExportTraceServiceRequest) -> bytes:
    """OTLP/JSON as exporters write it (hex ids, integer enums, int64 as strings)."""
    spans = []
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                attrs = []
                for kv in s.attributes:
                    v = kv.value
                    which = v.WhichOneof("value")
                    if which == "string_value":
                        val: dict[str, object] = {"stringValue": v.string_value}
                    elif which == "int_value":
                        val = {"intValue": str(v.int_value)}
                    elif which == "double_value":
                        val = {"doubleValue": v.double_value}
                    elif which == "bool_value":
                        val = {"boolValue": v.bool_value}
                    else:
                        val = {
                            "arrayValue": {
                                "values": [
                                    {"stringValue": x.string_value} for x in v.array_value.values
                                ]
                            }
                        }
                    attrs.append({"key": kv.key, "value": val})
                spans.append(
                    {
                        "traceId": s.trace_id.hex(),
                        "spanId": s.span_id.hex(),
                        "name": s.name,
                        "kind": s.kind,
                        "startTimeUnixNano": str(s.start_time_unix_nano),
                        "endTimeUnixNano": str(s.end_time_unix_nano),
                        "attributes": attrs,
                    }
                )
    doc = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}]}
    return orjson.dumps(doc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    store: str, workers: int | None, extra: list[str], grpc_on: bool = False, src: str | None = None
) -> tuple[subprocess.Popen[bytes], int, int | None, Path]:
    """The server, its HTTP port and its gRPC port (None: off); ``src``: another checkout's
    ``src`` to run it from (PYTHONPATH, inherited by its workers)."""
    log = Path(tempfile.mkstemp(prefix="lithify-serve-", suffix=".log")[1])
    grpc_flag = ["--grpc-port", str(_free_port())] if grpc_on else ["--no-grpc"]
    cmd = [str(LITHIFY), "serve", "--store", store, "--port", "0", *grpc_flag, *extra]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": src} if src else None
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if '"event":"listening"' in line:
                ev = orjson.loads(line)
                return proc, int(ev["port"]), ev.get("grpc_port"), log
        if proc.poll() is not None:
            raise RuntimeError(f"lithify serve exited: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("lithify serve did not start in 60 s")


# gRPC codes as the HTTP statuses the HTTP face gives for the same refusal.
_GRPC_STATUS = {"RESOURCE_EXHAUSTED": 429, "UNAVAILABLE": 503, "INVALID_ARGUMENT": 400}


class _GrpcClient:
    """One exporter's channel: ``post`` is one TraceService/Export call, answered as HTTP is
    (status, retry-after seconds)."""

    def __init__(self, port: int) -> None:
        import grpc

        self.grpc = grpc
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.export = self.channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
        )

    def post(self, body: bytes) -> tuple[int, float]:
        try:
            self.export(body, timeout=120)
        except self.grpc.RpcError as e:
            return _GRPC_STATUS.get(e.code().name, 500), 1.0  # type: ignore[attr-defined]
        return 200, 0.0

    def close(self) -> None:
        self.channel.close()


class _HttpClient:
    def __init__(self, port: int, ctype: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Content-Type": ctype}

    def post(self, body: bytes) -> tuple[int, float]:
        self.conn.request("POST", "/v1/traces", body=body, headers=self.headers)
        resp = self.conn.getresponse()
        resp.read()
        return resp.status, float(resp.getheader("Retry-After") or 1)

    def close(self) -> None:
        self.conn.close()


def load(
    port: int, batches: Batches, clients: int, seconds: float, grpc_port: int | None = None
) -> dict[str, object]:
    """Send for ``seconds``; each exporter makes its next body (a patched copy, ``Batches``)
    and sends it, and after a 429/503 waits the Retry-After it was given. Over gRPC when
    ``grpc_port`` is given."""
    latencies: list[float] = []
    acked = 0
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    ctype = "application/x-protobuf" if batches.encoding == "protobuf" else "application/json"

    def client() -> None:
        nonlocal acked
        conn = _GrpcClient(grpc_port) if grpc_port else _HttpClient(port, ctype)
        while time.monotonic() < stop:
            body, n = batches.next()
            t0 = time.perf_counter()
            status, retry_after = conn.post(body)
            dt = time.perf_counter() - t0
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status == 200:
                    acked += n
                    latencies.append(dt)
            if status != 200:
                time.sleep(retry_after)
        conn.close()

    stop = time.monotonic() + seconds
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    latencies.sort()
    return {
        "elapsed": elapsed,
        "acked": acked,
        "statuses": statuses,
        "p50": statistics.median(latencies) if latencies else float("nan"),
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        if latencies
        else float("nan"),
    }


class Memory:
    """Samples the resident memory of the server's processes (receiver and workers) every
    0.1 s while the load runs: the largest of the receiver's, of any worker's, and of the sum."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.receiver = self.worker = self.total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            rss = [_rss(p) for p in self.pids]
            self.receiver = max(self.receiver, rss[0])
            self.worker = max(self.worker, *rss[1:], 0)
            self.total = max(self.total, sum(rss))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _rss(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def run_backend(
    name: str,
    store: str,
    args: argparse.Namespace,
    templates: list[bytes],
    transport: str = "http",
    *,
    clients: int | None = None,
    encoding: str | None = None,
    src: str | None = None,
) -> dict[str, object]:
    clients = clients or args.clients[0]
    encoding = encoding or args.encoding[0]
    extra = ["--max-inflight", str(args.max_inflight)] if args.max_inflight else []
    proc, port, grpc_port, log = start_server(store, args.workers, extra, transport == "grpc", src)
    try:
        batches = Batches(templates, encoding)
        # Warm-up: a few requests, not counted.
        load(port, batches, 2, 2.0, grpc_port)
        with open_store(store) as s:
            before = s.count()
        pids = [proc.pid, *_children(proc.pid)]
        idle = [_rss(p) for p in pids]
        cpu0, h0 = _cpu(pids), _health(port)
        split0 = _cpu_split(pids)
        mem = Memory(pids)
        result = load(port, batches, clients, args.seconds, grpc_port)
        mem.stop()
        cpu1, h1 = _cpu(pids), _health(port)
        split1 = _cpu_split(pids)
        with open_store(store) as s:
            after = s.count()
        result["cpu_s"] = cpu1 - cpu0
        commits = int(h1["commits"]) - int(h0["commits"])
        result["per_commit"] = (int(h1["batches_committed"]) - int(h0["batches_committed"])) / max(
            1, commits
        )
        result.update(
            rss_receiver=mem.receiver, rss_worker=mem.worker, rss_total=mem.total,
            rss_idle=sum(idle), growth=mem.total - sum(idle),
        )  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    stored = after - before
    lost = int(result["acked"]) - stored  # type: ignore[call-overload]
    if lost == 0:
        log.unlink(missing_ok=True)
    else:
        print(f"{name}: LOSSES, server log kept at {log}", file=sys.stderr)
    result.update(backend=f"{name} ({transport})", stored=stored, lost=lost)
    for k in split0:
        result[f"cpu_{k}_us"] = (split1[k] - split0[k]) / max(1, stored) * 1e6
    result["rate"] = stored / float(result["elapsed"])  # type: ignore[arg-type]
    result["cpu_us"] = float(result["cpu_s"]) / max(1, stored) * 1e6  # type: ignore[arg-type]
    return result


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


def _cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the server's processes have used so far."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _cpu_split(pids: list[int]) -> dict[str, float]:
    """CPU seconds so far of the writer thread (SQL and commits), the rest of the receiver
    process (HTTP, the event loop, moving bytes to and from workers), and the workers."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {"writer": 0.0, "receiver": 0.0, "workers": 0.0}
    for i, pid in enumerate(pids):
        for task in Path(f"/proc/{pid}/task").glob("*") if i == 0 else [Path(f"/proc/{pid}")]:
            with contextlib.suppress(OSError):
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                cpu = (int(fields[11]) + int(fields[12])) / tick
                if i:
                    out["workers"] += cpu
                elif (task / "comm").read_text().strip() == "lithify-writer":
                    out["writer"] += cpu
                else:
                    out["receiver"] += cpu
    return out


def stages(templates: list[bytes], rounds: int) -> None:
    """CPU per span of each stage of a request's path, run one after the other in this process
    on the benchmark's bodies (thread CPU time; the medians over the batches): what the workers
    do, stage by stage, then the writer's insert and commit on a fresh SQLite store."""
    import gzip
    import pickle

    from lithify.core import codec
    from lithify.ingest.processing import inflate, process
    from lithify.store import Prepared, _rows
    from lithify.store._rows import fact_row
    from lithify.store.sqlite import pack_body
    from lithify.translate.otlp import decode_spans
    from lithify.translate.redact import screen
    from lithify.translate.telemetry import translate_spans

    text_notes = getattr(_rows, "text_notes", None)
    for encoding in ("protobuf", "json"):
        batches = Batches(templates, encoding)
        times: dict[str, list[float]] = {}

        def timed(name: str, fn: Any, *a: Any, _times: dict[str, list[float]] = times) -> Any:
            c = time.thread_time()
            out = fn(*a)
            _times.setdefault(name, []).append((time.thread_time() - c) / 512 * 1e6)
            return out

        with fresh_store("sqlite", argparse.Namespace()) as url, open_store(url) as store:
            run = store._run  # type: ignore[attr-defined]

            def split_commit(fn: Any, *, write: bool, run: Any = run, store: Any = store) -> Any:
                # The store's own transaction, its COMMIT timed apart (WAL write and fsync).
                conn = store._conn  # type: ignore[attr-defined]
                if not write:
                    return run(fn, write=write)
                with store._lock:  # type: ignore[attr-defined]
                    conn.execute("BEGIN IMMEDIATE")
                    result = timed("writer: insert (SQL)", fn, conn.cursor())
                    timed("writer: commit (WAL, fsync)", conn.execute, "COMMIT")
                    return result

            store._run = split_commit  # type: ignore[attr-defined]
            prep = store.preparer()
            for _ in range(max(8, rounds * 8)):
                body, _n = batches.next()
                gz = gzip.compress(body, 6)
                timed("body to a worker (pickle)", pickle.dumps, body)
                timed("decompress (gzip, if sent)", inflate, gz, "gzip", 1 << 27)
                timed("screen (credentials)", screen, body)
                dec = timed("decode (screen included)", decode_spans, body, encoding, 81920)
                facts = timed("translate", lambda d=dec: list(translate_spans(d.units)))
                rows = timed("rows: columns + encode", lambda f=facts: [fact_row(x, "") for x in f])
                timed("  of which encode (codec)", lambda f=facts: [codec.encode(x) for x in f])
                timed(
                    "blobs (split_blobs)",
                    lambda r=rows: [codec.split_blobs(x[-1], codec.BLOB_MIN) for x in r],
                )
                timed("compress (LZ4)", lambda r=rows: [pack_body(x[-1]) for x in r])
                if text_notes is not None:  # the text index's notes (absent before they were)
                    timed("text notes (digests, text)", text_notes, facts, rows, _rows.WORKER)
                out = timed("worker: process() whole", process, "traces", encoding, body, "",
                            1 << 27, prep)  # fmt: skip
                wire = timed("rows to the receiver (pickle)", pickle.dumps, out)
                back = timed("  and unpickle", pickle.loads, wire)
                rows_in: Prepared = back.rows
                timed("writer: insert_prepared whole", store.insert_prepared, [rows_in])
        print(f"stages, {encoding} (cpu µs/span, median of {len(times['translate'])} batches):")
        for name, values in times.items():
            print(f"  {name:<34}{statistics.median(values[2:]):>7.1f}")


def _written() -> int:
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("wchar"))


def growth(templates: list[bytes], requests: int, page_size: int | None = None) -> None:
    """The writer's CPU a span, and the bytes it writes a request (WAL and checkpoints), as one
    SQLite store grows: each request built by a worker's ``process()`` in this process, then
    written by ``insert_prepared`` (only that is timed; its text index and row inserts apart);
    a line every 50 requests, with the B-trees whose pages the next request's commit wrote most
    (that request is not counted)."""
    from lithify.ingest.processing import process

    step = 50
    batches = Batches(templates, "protobuf")
    with fresh_store("sqlite", argparse.Namespace()) as url:
        path = url.removeprefix("sqlite://")
        if page_size:
            with_page_size(path, page_size)
        with open_store(url) as store:
            conn = store._conn  # type: ignore[attr-defined]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
            print(
                f"the writer as one SQLite store of {size // 1024} KB pages grows (load "
                f"{os.getloadavg()[0]:.1f}), over the {step} requests before each line:"
            )
            print(
                f"{'facts':>9}{'CPU µs/span':>13}{'text index':>12}{'inserts':>9}"
                f"{'MB written/request':>20}   pages a commit wrote"
            )
            parts = {"_add_text": 0.0, "_insert": 0.0}
            for name in parts:
                setattr(store, name, _timed(getattr(store, name), parts, name))
            prep = store.preparer()
            cpu, spans, written = 0.0, 0, _written()
            for k in range(requests):
                body, n = batches.next()
                rows = process("traces", "protobuf", body, "", 1 << 27, prep).rows
                c = time.thread_time()
                store.insert_prepared([rows])
                cpu += time.thread_time() - c
                spans += n
                if (k + 1) % step:
                    continue
                w = _written()
                text, inserts = (parts[x] / spans * 1e6 for x in ("_add_text", "_insert"))
                top = _pages_written(store, path, size, batches, prep)
                print(
                    f"{(k + 1) * n:>9,}{cpu / spans * 1e6:>13.1f}{text:>12.1f}{inserts:>9.1f}"
                    f"{(w - written) / step / 1e6:>20.1f}   {top}"
                )
                cpu, spans, written = 0.0, 0, _written()
                parts.update(dict.fromkeys(parts, 0.0))


def _timed(fn: Any, into: dict[str, float], name: str) -> Any:
    """``fn``, its thread CPU time added up in ``into[name]``."""

    def timed(*args: Any) -> Any:
        c = time.thread_time()
        try:
            return fn(*args)
        finally:
            into[name] += time.thread_time() - c

    return timed


def _pages_written(store: Any, path: str, size: int, batches: Batches, prep: Any) -> str:
    """Which B-trees one more request's commit wrote pages of: the WAL emptied by a checkpoint,
    the request written, then its frames' page numbers looked up in ``dbstat``."""
    from lithify.ingest.processing import process

    conn = store._conn
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    body, _n = batches.next()
    store.insert_prepared([process("traces", "protobuf", body, "", 1 << 27, prep).rows])
    data = Path(path + "-wal").read_bytes()
    frame = 24 + size  # a frame: its header (the page number first) and the page
    pages = [int.from_bytes(data[at : at + 4], "big") for at in range(32, len(data), frame)]
    owner = dict(conn.execute("SELECT pageno, name FROM dbstat"))
    counts = collections.Counter(owner.get(p, "(free)") for p in pages)
    top = ", ".join(
        f"{name.removeprefix('sqlite_autoindex_')} {c}" for name, c in counts.most_common(4)
    )
    return f"{len(pages)}: {top}"


def _health(port: int) -> dict[str, object]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/health")
    doc: dict[str, object] = orjson.loads(conn.getresponse().read())
    conn.close()
    return doc


def ceiling(templates: list[bytes], seconds: float, procs: int) -> float:
    """Spans/s of plain conversion (protobuf → facts), without HTTP or store."""

    if procs == 1:
        return _convert_for(templates, seconds)
    with concurrent.futures.ProcessPoolExecutor(procs) as pool:
        rates = list(pool.map(_convert_for, [templates] * procs, [seconds] * procs))
    return sum(rates)


_convert_cpu: list[float] = []  # CPU µs per span of the single-process ceiling


def _convert_for(templates: list[bytes], seconds: float) -> float:
    n = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds:
        for data in templates:
            n += sum(1 for _ in translate_protobuf(data, "otlp-traces"))
    _convert_cpu.append((time.process_time() - c0) / n * 1e6)
    return n / (time.perf_counter() - t0)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def _words(text: str) -> list[str]:
    return text.split(",")


@contextlib.contextmanager
def fresh_store(backend: str, args: argparse.Namespace) -> Iterator[str]:
    """A store URL no run has used: a new SQLite file, or a new PostgreSQL schema."""
    if backend == "sqlite":
        tmp = Path(
            tempfile.mkdtemp(prefix="lithify-bench-serve-", dir=os.environ.get("LITHIFY_BENCH_TMP"))
        )
        try:
            yield f"sqlite://{tmp / 'facts.db'}"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # the store (hundreds of MB) and its WAL
        return
    if args.postgres is None:
        args.postgres = (
            subprocess.run(
                ["bash", str(ROOT / "scripts" / "postgres"), "start"],
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
    url = args.postgres
    schema = "bench_" + uuid.uuid4().hex[:12]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # type: ignore[arg-type]
    try:
        sep = "&" if "?" in url else "?"
        yield f"{url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")  # type: ignore[arg-type]


def _mib(n: object) -> str:
    return f"{int(n) / 2**20:,.0f}"  # type: ignore[call-overload]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--clients", type=_ints, default=[4], help="concurrent exporters, e.g. 4,16")
    ap.add_argument("--seconds", type=float, default=20.0, help="load time per run")
    ap.add_argument("--workers", type=int, default=None, help="lithify serve --workers")
    ap.add_argument("--max-inflight", type=int, default=None, help="lithify serve --max-inflight")
    ap.add_argument(
        "--encoding", type=_words, default=["protobuf"], help="protobuf, json or protobuf,json"
    )
    ap.add_argument("--postgres", help="a PostgreSQL URL (default: scripts/postgres)")
    ap.add_argument("--transport", choices=["http", "grpc", "both"], default="http")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of every run (medians)")
    ap.add_argument(
        "--before", metavar="SRC", help="also run the server from another checkout's src, "
        "interleaved with this one's (the order swapped every round): medians and ratios",
    )  # fmt: skip
    ap.add_argument("--no-ceiling", action="store_true", help="skip the conversion-only ceiling")
    ap.add_argument("--stages", action="store_true", help="only the CPU of each stage, in-process")
    ap.add_argument(
        "--growth", type=int, metavar="REQUESTS", help="only the writer's CPU as one SQLite store "
        "grows by REQUESTS requests (≈ 3 minutes for 300)",
    )  # fmt: skip
    ap.add_argument("--page-size", type=int, help="--growth: the new store's page size (bytes)")
    args = ap.parse_args()
    _, templates = make_requests(4, 512)
    if args.stages:
        stages(templates, args.rounds)
        return
    if args.growth:
        growth(templates, args.growth, args.page_size)
        return
    if args.transport == "grpc" and args.encoding != ["protobuf"]:
        sys.exit("OTLP/gRPC is protobuf only")
    if args.transport == "both":
        compare(args, templates)
        return

    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    sides = ["before", "after"] if args.before else ["after"]
    cores = os.cpu_count() or 1
    print(
        f"lithify serve: 512 spans a request, {args.seconds:g} s a run, loopback, {cores} cores, "
        f"workers={args.workers if args.workers is not None else cores}, "
        f"max-inflight={args.max_inflight or 'default'}, {args.rounds} round(s), "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    runs: dict[tuple[str, int, str, str], list[dict[str, object]]] = {}
    for r in range(args.rounds):
        for backend in backends:
            for clients in args.clients:
                for encoding in args.encoding:
                    order = sides if r % 2 == 0 else sides[::-1]
                    for side in order:
                        with fresh_store(backend, args) as url:
                            row = run_backend(
                                backend, url, args, templates, args.transport,
                                clients=clients, encoding=encoding,
                                src=args.before if side == "before" else None,
                            )  # fmt: skip
                        row["load"] = os.getloadavg()[0]
                        runs.setdefault((backend, clients, encoding, side), []).append(row)
                        print(
                            f"round {r + 1} {backend} {clients:>2} exporters {encoding:<8} "
                            f"{side:<6}{float(row['rate']):>9,.0f} spans/s"  # type: ignore[arg-type]
                            f"{float(row['cpu_us']):>6.0f} cpu µs/span"  # type: ignore[arg-type]
                            f"  p50 {float(row['p50']) * 1000:.0f} ms"  # type: ignore[arg-type]
                            f"  rss {_mib(row['rss_total'])} MiB  lost {row['lost']}"
                            f"  load {float(row['load']):.1f}  {row['statuses']}",  # type: ignore[arg-type]
                            flush=True,
                        )
    report(runs, args)
    if not args.no_ceiling:
        one = ceiling(templates, 5.0, 1)
        many = ceiling(templates, 5.0, cores) if cores > 1 else one
        print(
            f"convert only (protobuf): 1 process {one:,.0f} spans/s, {_convert_cpu[0]:.0f} cpu "
            f"µs/span; {cores} processes {many:,.0f} spans/s"
        )
    print(
        "cpu µs/span: CPU time of the server's processes (receiver and workers) per stored span; "
        f"{cores} dedicated cores store at most {cores}e6 / it spans/s. rss: the largest sum of "
        "their resident memory while loaded; growth: that less their idle sum before the load."
    )
    if any(int(row["lost"]) for rows in runs.values() for row in rows):  # type: ignore[call-overload]
        sys.exit("LOSSES: acknowledged spans missing from the store")


def report(runs: dict[tuple[str, int, str, str], list[dict[str, object]]], args: Any) -> None:
    """Medians per configuration, and with --before the after/before ratios (the median of the
    rounds' ratios: each pair ran back to back, so a machine shared with other work weighs on
    both alike)."""

    def med(rows: list[dict[str, object]], key: str) -> float:
        return statistics.median(float(r[key]) for r in rows)  # type: ignore[arg-type]

    print(
        f"{'backend':<10}{'exporters':>10} {'encoding':<9}{'side':<7}{'spans/s':>9}"
        f"{'cpu µs/span':>12}{'p50 ms':>8}{'p99 ms':>8}{'rss MiB':>9}{'growth':>8}"
        f"{'req/commit':>11}{'lost':>6}  statuses (all rounds)"
    )
    for (backend, clients, encoding, side), rows in runs.items():
        statuses: dict[int, int] = {}
        for r in rows:
            for k, v in r["statuses"].items():  # type: ignore[attr-defined]
                statuses[k] = statuses.get(k, 0) + v
        print(
            f"{backend:<10}{clients:>10} {encoding:<9}{side:<7}{med(rows, 'rate'):>9,.0f}"
            f"{med(rows, 'cpu_us'):>12.0f}{med(rows, 'p50') * 1000:>8.0f}"
            f"{med(rows, 'p99') * 1000:>8.0f}{_mib(max(int(r['rss_total']) for r in rows)):>9}"  # type: ignore[call-overload]
            f"{_mib(max(int(r['growth']) for r in rows)):>8}"  # type: ignore[call-overload]
            f"{med(rows, 'per_commit'):>11.1f}{sum(int(r['lost']) for r in rows):>6}"  # type: ignore[call-overload]
            f"  {statuses}"
        )
        print(
            f"{'':<36}cpu µs/span: receiver {med(rows, 'cpu_receiver_us'):.0f} (HTTP, loop, "
            f"moving bytes), writer {med(rows, 'cpu_writer_us'):.0f} (SQL, commits), "
            f"workers {med(rows, 'cpu_workers_us'):.0f}"
        )
    if not args.before:
        return
    print("after / before (median of the per-round ratios):")
    for (backend, clients, encoding, side), after in runs.items():
        if side != "after":
            continue
        before = runs[backend, clients, encoding, "before"]
        rate = [float(a["rate"]) / float(b["rate"]) for a, b in zip(after, before, strict=True)]  # type: ignore[arg-type]
        cpu = [float(a["cpu_us"]) / float(b["cpu_us"]) for a, b in zip(after, before, strict=True)]  # type: ignore[arg-type]
        print(
            f"{backend:<10}{clients:>10} {encoding:<9} spans/s {statistics.median(rate):.2f} "
            f"({', '.join(f'{x:.2f}' for x in rate)}); cpu µs/span {statistics.median(cpu):.2f} "
            f"({', '.join(f'{x:.2f}' for x in cpu)})"
        )


def compare(args: argparse.Namespace, templates: list[bytes]) -> None:
    """HTTP and gRPC runs alternated on SQLite (fresh server and store each), then medians."""
    rates: dict[str, list[float]] = {"http": [], "grpc": []}
    cpus: dict[str, list[float]] = {"http": [], "grpc": []}
    lost = 0
    for r in range(args.rounds):
        order = ["http", "grpc"] if r % 2 == 0 else ["grpc", "http"]
        for transport in order:
            tmp = Path(tempfile.mkdtemp(prefix="lithify-bench-serve-"))
            try:
                row = run_backend(
                    "sqlite", f"sqlite://{tmp / 'facts.db'}", args, templates, transport
                )
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            stored = int(row["stored"])  # type: ignore[call-overload]
            rate = stored / float(row["elapsed"])  # type: ignore[arg-type]
            cpu = float(row["cpu_s"]) / max(1, stored) * 1e6  # type: ignore[arg-type]
            rates[transport].append(rate)
            cpus[transport].append(cpu)
            lost += int(row["lost"])  # type: ignore[call-overload]
            load1 = os.getloadavg()[0]
            print(
                f"round {r + 1} {transport:<5}{rate:>10,.0f} spans/s{cpu:>8.0f} cpu µs/span"
                f"  p50 {float(row['p50']) * 1000:.0f} ms  lost {row['lost']}"  # type: ignore[arg-type]
                f"  load {load1:.1f}  {row['statuses']}",
                flush=True,
            )
    h, g = statistics.median(rates["http"]), statistics.median(rates["grpc"])
    hc, gc = statistics.median(cpus["http"]), statistics.median(cpus["grpc"])
    pairs = [gr / hr for gr, hr in zip(rates["grpc"], rates["http"], strict=True)]
    print(
        f"median spans/s: http {h:,.0f}, grpc {g:,.0f}, ratio grpc/http {g / h:.2f} "
        f"(per round: {', '.join(f'{x:.2f}' for x in pairs)}); "
        f"median cpu µs/span: http {hc:.0f}, grpc {gc:.0f}, ratio {gc / hc:.2f}"
    )
    if lost:
        sys.exit("LOSSES: acknowledged spans missing from the store")


if __name__ == "__main__":
    main()
