"""Benchmark: `lithify serve` under load, on loopback, into SQLite and PostgreSQL.

    .venv/bin/python bench/serve.py                      # both backends, ≈1 minute
    .venv/bin/python bench/serve.py --backend sqlite --seconds 20 --clients 8
    .venv/bin/python bench/serve.py --backend sqlite --transport both --rounds 5   # HTTP vs gRPC

Starts a real `lithify serve` process on a fresh store, then N concurrent OTLP/HTTP exporters
(threads with keep-alive connections, as the SDK's exporters use) each send batches of 512
realistic GenAI spans (bench/convert.py's generator, ≈5 KB of content a span; every batch gets
fresh trace/span/response ids so nothing deduplicates) for a fixed time. Prints spans/s stored,
p50/p99 request latency, and losses: spans acknowledged (HTTP 200) but not in the store — must be
0. The ceiling is the same spans converted without the server: one process, and one process per
core.

``--transport grpc`` sends the same bodies as OTLP/gRPC ``TraceService/Export`` calls (one
channel per exporter, as the SDK's exporter keeps); ``both`` alternates HTTP and gRPC runs, each
on a fresh server and store, ``--rounds`` times (the order swapped every round, so a machine
shared with other work weighs on both alike) and prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import orjson
import psycopg
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert import make_requests
from lithify.store import open_store
from lithify.translate import translate_protobuf

ROOT = Path(__file__).resolve().parents[1]
args_rate_cap = 9000  # spans/s the pre-built bodies are sized for
LITHIFY = Path(sys.executable).with_name("lithify")


class Batches:
    """Fresh copies of a few template requests: new ids per batch, so every span is a new fact."""

    def __init__(self, templates: list[bytes], encoding: str) -> None:
        self.templates = [ExportTraceServiceRequest.FromString(t) for t in templates]
        self.encoding = encoding
        self.counter = 0
        self.lock = threading.Lock()
        self.run = uuid.uuid4().bytes[:6]

    def next(self) -> tuple[bytes, int]:
        with self.lock:
            k = self.counter
            self.counter += 1
        req = ExportTraceServiceRequest()
        req.CopyFrom(self.templates[k % len(self.templates)])
        n = 0
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for s in ss.spans:
                    n += 1
                    s.trace_id = self.run + k.to_bytes(6, "big") + n.to_bytes(4, "big")
                    s.span_id = k.to_bytes(5, "big") + n.to_bytes(3, "big")
                    for kv in s.attributes:
                        if kv.key == "gen_ai.response.id":
                            kv.value.string_value = f"chatcmpl-{self.run.hex()}-{k}-{n}"
        if self.encoding == "protobuf":
            return req.SerializeToString(), n
        return _to_json(req), n


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
    store: str, workers: int | None, extra: list[str], grpc_on: bool = False
) -> tuple[subprocess.Popen[bytes], int, int | None, Path]:
    """The server, its HTTP port and its gRPC port (None: off)."""
    log = Path(tempfile.mkstemp(prefix="lithify-serve-", suffix=".log")[1])
    grpc_flag = ["--grpc-port", str(_free_port())] if grpc_on else ["--no-grpc"]
    cmd = [str(LITHIFY), "serve", "--store", store, "--port", "0", *grpc_flag, *extra]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
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
    """Send for ``seconds`` (or until the pre-built bodies run out): bodies are built before
    the clock starts, so the clients spend no CPU the server could use. Over gRPC when
    ``grpc_port`` is given."""
    expected = int(args_rate_cap * seconds / 512) + clients
    bodies = [batches.next() for _ in range(expected)]
    bodies.reverse()
    latencies: list[float] = []
    acked = 0
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    ctype = "application/x-protobuf" if batches.encoding == "protobuf" else "application/json"

    def client() -> None:
        nonlocal acked
        conn = _GrpcClient(grpc_port) if grpc_port else _HttpClient(port, ctype)
        while time.monotonic() < stop:
            with lock:
                if not bodies:
                    break
                body, n = bodies.pop()
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


def run_backend(
    name: str, store: str, args: argparse.Namespace, templates: list[bytes], transport: str = "http"
) -> dict[str, object]:
    extra = ["--max-inflight", str(max(16, args.clients * 2))]
    proc, port, grpc_port, log = start_server(store, args.workers, extra, transport == "grpc")
    try:
        batches = Batches(templates, args.encoding)
        # Warm-up: a few requests, not counted.
        load(port, batches, 2, 2.0, grpc_port)
        with open_store(store) as s:
            before = s.count()
        pids = [proc.pid, *_children(proc.pid)]
        cpu0, h0 = _cpu(pids), _health(port)
        result = load(port, batches, args.clients, args.seconds, grpc_port)
        cpu1, h1 = _cpu(pids), _health(port)
        with open_store(store) as s:
            after = s.count()
        result["cpu_s"] = cpu1 - cpu0
        commits = int(h1["commits"]) - int(h0["commits"])
        result["per_commit"] = (int(h1["batches_committed"]) - int(h0["batches_committed"])) / max(
            1, commits
        )
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


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--clients", type=int, default=4, help="concurrent exporters")
    ap.add_argument("--seconds", type=float, default=20.0, help="load time per backend")
    ap.add_argument("--workers", type=int, default=None, help="lithify serve --workers")
    ap.add_argument("--encoding", choices=["protobuf", "json"], default="protobuf")
    ap.add_argument("--postgres", help="a PostgreSQL URL (default: scripts/postgres)")
    ap.add_argument("--transport", choices=["http", "grpc", "both"], default="http")
    ap.add_argument("--rounds", type=int, default=1, help="with --transport both: HTTP/gRPC pairs")
    args = ap.parse_args()
    _, templates = make_requests(4, 512)
    if args.transport == "grpc" and args.encoding != "protobuf":
        sys.exit("OTLP/gRPC is protobuf only")
    if args.transport == "both":
        compare(args, templates)
        return

    rows = []
    tmp = Path(
        tempfile.mkdtemp(prefix="lithify-bench-serve-", dir=os.environ.get("LITHIFY_BENCH_TMP"))
    )
    if args.backend in ("sqlite", "both"):
        try:
            rows.append(
                run_backend(
                    "sqlite", f"sqlite://{tmp / 'facts.db'}", args, templates, args.transport
                )
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # the store (hundreds of MB) and its WAL
    if args.backend in ("postgres", "both"):
        url = (
            args.postgres
            or subprocess.run(
                ["bash", str(ROOT / "scripts" / "postgres"), "start"],
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        schema = "bench_" + uuid.uuid4().hex[:12]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")  # type: ignore[arg-type]
        try:
            sep = "&" if "?" in url else "?"
            rows.append(
                run_backend(
                    "postgres",
                    f"{url}{sep}options=-csearch_path%3D{schema}",
                    args,
                    templates,
                    args.transport,
                )
            )
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")  # type: ignore[arg-type]
    one = ceiling(templates, 5.0, 1)
    cores = os.cpu_count() or 1
    many = ceiling(templates, 5.0, cores) if cores > 1 else one

    print(
        f"lithify serve: {args.clients} concurrent exporters, 512 spans a request ({args.encoding}), "
        f"{args.seconds:g} s, loopback, {cores} cores, workers={args.workers if args.workers is not None else cores}"
    )
    print(
        f"{'backend':<28}{'spans/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'acked':>9}{'stored':>9}"
        f"{'lost':>6}{'cpu µs/span':>13}{'req/commit':>12}  statuses"
    )
    for r in rows:
        stored = int(r["stored"])  # type: ignore[call-overload]
        print(
            f"{r['backend']:<28}{stored / float(r['elapsed']):>10,.0f}"  # type: ignore[arg-type]
            f"{float(r['p50']) * 1000:>9.0f}{float(r['p99']) * 1000:>9.0f}"  # type: ignore[arg-type]
            f"{r['acked']:>9}{stored:>9}{r['lost']:>6}"
            f"{float(r['cpu_s']) / max(1, stored) * 1e6:>13.0f}{float(r['per_commit']):>12.1f}"  # type: ignore[arg-type]
            f"  {r['statuses']}"
        )
    print(f"{'convert only, 1 process':<28}{one:>10,.0f}{'':>53}{_convert_cpu[0]:>13.0f}")
    print(f"{f'convert only, {cores} processes':<28}{many:>10,.0f}")
    print(
        "cpu µs/span: CPU time of the server's processes (receiver and workers) per stored span, "
        f"and of conversion alone; {cores} dedicated cores store at most {cores}e6 / it spans/s."
    )
    if any(int(r["lost"]) for r in rows):  # type: ignore[call-overload]
        sys.exit("LOSSES: acknowledged spans missing from the store")


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
