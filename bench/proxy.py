"""Benchmark: the latency `lithify proxy` adds on loopback, against calling the upstream directly.

    .venv/bin/python bench/proxy.py                    # the table (≈2 minutes)
    .venv/bin/python bench/proxy.py --seconds 2 --rounds 1

Three processes: a fake upstream that answers every Chat Completions request in the exact bytes
of the tests' fake provider (tests/fakes/wire.py: one realistic answer, ≈1 KB of text, under
fresh ids so every exchange is a new fact), a real `lithify proxy` in front of it recording into
a fresh SQLite store with its default settings (spool fsync'd, the recorder process translating
and storing as the load runs), and this one, the clients: N keep-alive connections, each sending
requests (≈2 KB) back to back. Like a real model, the upstream takes its time before the first
byte: `--upstream-delay` on average, each request drawn uniformly from half to one and a half of
it (a fixed seed; `--spread`), so that 32 clients do not run in lockstep forever; then it streams
events `--event-delay` apart. `--spread 0` is the worst case: every request of a burst of 32
arrives in the same millisecond and waits for the ones before it.

What a request costs beyond the upstream's own time is measured per request: the upstream says
in a header how long it held the request (from its last byte in to the response's first byte
out), and the client subtracts that from the full response time of a non-streamed call, or from
the time to the first byte of the body (the first SSE event) of a streamed one. Direct, that is
the loopback and the upstream's own parsing; through the proxy, the proxy's work comes on top.
Direct and proxied runs alternate in rounds so that drift on a shared machine hits both; each
figure pools the rounds. The added latency is the proxied percentile minus the direct one.
Target: at most 2 ms added at p50 and 10 ms at p99.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
LITHIFY = Path(sys.executable).with_name("lithify")

WORDS = "the agent reads the order status and answers the user with the carrier and date".split()


def _text(n: int) -> str:
    out, size, i = [], 0, 0
    while size < n:
        w = WORDS[i % len(WORDS)]
        out.append(w)
        size += len(w) + 1
        i += 1
    return " ".join(out)


def request_body(stream: bool) -> bytes:
    doc: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": _text(900)},
            {"role": "user", "content": _text(900)},
        ],
        "temperature": 0.2,
    }
    if stream:
        doc["stream"] = True
        doc["stream_options"] = {"include_usage": True}
    return orjson.dumps(doc)


# -- the fake upstream, in a process of its own --------------------------------------------------

_KEY = b"bench000000000"  # the answer's key in the template bytes; each reply gets a fresh one


def _replies(delay: float, event_delay: float) -> tuple[bytes, list[bytes]]:
    """The OpenAI Chat Completions reply, non-streamed and as SSE frames, in the exact bytes the
    tests' fake provider sends (tests/fakes/wire.py), under the key ``_KEY``."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes import answer, wire

    reply = answer(_text(1000), output_tokens=220, delay=delay, event_delay=event_delay)
    req = orjson.loads(request_body(True))
    ctx = wire.Ctx(req, reply, _KEY.decode(), wire.SNAPSHOTS["gpt-4o-mini"], wire.CREATED)
    body = wire.dumps(wire.chat_body(ctx)).encode()
    return body, wire.sse_text(wire.CHAT, wire.chat_events(ctx))


def serve_fake(delay: float, event_delay: float, spread: float) -> None:
    """The upstream: the answer of a remote provider, in its exact wire format, after about
    ``delay`` (± ``spread`` of it) and streamed ``event_delay`` apart, with the time it held each request in
    ``x-upstream-hold-us``. It stands in for a provider on another machine, so it costs this one
    as little as it can: one uvloop thread and bytes made once (the tests' threaded fake, one GIL
    for 32 streams, added milliseconds of jitter of its own to every figure)."""
    import random

    import uvloop

    body, frames = _replies(delay, event_delay)
    count = 0
    rng = random.Random(7)
    common = b"x-request-id: req_%s\r\nopenai-processing-ms: 12\r\nx-upstream-hold-us: %d\r\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                low = head.lower()
                i = low.index(b"content-length:")
                data = await reader.readexactly(int(low[i + 15 : low.index(b"\r\n", i)]))
                got = time.perf_counter()
                count += 1
                key = b"bench%09d" % count  # fresh ids: every exchange is a new fact
                await asyncio.sleep(delay * rng.uniform(1 - spread, 1 + spread))
                ids = common % (key, (time.perf_counter() - got) * 1e6)
                if b'"stream":true' in data:
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                        b"cache-control: no-cache\r\n%stransfer-encoding: chunked\r\n\r\n" % ids
                    )
                    for n, frame in enumerate(frames):
                        if n:
                            await asyncio.sleep(event_delay)
                        frame = frame.replace(_KEY, key)
                        writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                    writer.write(b"0\r\n\r\n")
                else:
                    out = body.replace(_KEY, key)
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n%s"
                        b"content-length: %d\r\n\r\n%s" % (ids, len(out), out)
                    )
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client hung up, or we are stopping
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        port = server.sockets[0].getsockname()[1]
        print(f"http://127.0.0.1:{port}", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)  # until the benchmark closes our stdin
        server.close()

    uvloop.run(main())


# -- the clients ----------------------------------------------------------------------------------


def _header(low: bytes, name: bytes) -> int:
    i = low.index(b"\r\n" + name + b":") + len(name) + 3
    return int(low[i : low.index(b"\r\n", i)])


async def _one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> tuple[float, float]:
    """One request on a keep-alive connection, beyond the time the upstream held it: (seconds
    to the first body byte, to the end)."""
    t0 = time.perf_counter()
    writer.write(data)
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head[:200].decode(errors="replace"))
    low = head.lower()
    t0 += _header(low, b"x-upstream-hold-us") / 1e6
    first = 0.0
    if b"transfer-encoding: chunked" in low:
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            await reader.readexactly(size + 2)
            if not first:
                first = time.perf_counter()
    else:
        await reader.readexactly(_header(low, b"content-length"))
        first = time.perf_counter()
    return first - t0, time.perf_counter() - t0


async def load(port: int, stream: bool, clients: int, seconds: float, warmup: float) -> list[float]:
    body = request_body(stream)
    data = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
        b"Content-Type: application/json\r\nAuthorization: Bearer sk-bench-0123456789abcdefghij\r\n"
        b"Content-Length: %d\r\n\r\n" % (port, len(body))
    ) + body
    samples: list[float] = []
    start = time.perf_counter()
    measure_from, stop_at = start + warmup, start + warmup + seconds

    async def client() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while True:
                t = time.perf_counter()
                if t >= stop_at:
                    return
                ttfb, total = await _one(reader, writer, data)
                if t >= measure_from:
                    samples.append(ttfb if stream else total)
        finally:
            writer.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    return samples


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")  # a run too short for one call
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


# -- the run --------------------------------------------------------------------------------------


def start_fake(
    delay: float, event_delay: float, spread: float = 0.5
) -> tuple[subprocess.Popen[bytes], str]:
    cmd = [sys.executable, __file__, "--serve-fake", "--upstream-delay", str(delay),
           "--event-delay", str(event_delay), "--spread", str(spread)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().decode().strip()


def start_proxy(
    upstream: str, tmp: Path, log_level: str
) -> tuple[subprocess.Popen[bytes], int, Path]:
    log = tmp / "proxy.log"
    cmd = [
        str(LITHIFY), "proxy", "--listen", "127.0.0.1:0", "--upstream", f"openai={upstream}",
        "--store", f"sqlite://{tmp / 'facts.db'}", "--spool", str(tmp / "spool"),
        "--log-level", log_level,
    ]  # fmt: skip
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fh)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if '"event":"listening"' in line:
                return proc, int(orjson.loads(line)["port"]), log
        if proc.poll() is not None:
            raise SystemExit(f"lithify proxy exited: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    raise SystemExit("lithify proxy did not start")


def health(port: int) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/lithify/health", timeout=10) as r:
        return orjson.loads(r.read())  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each run")
    ap.add_argument("--rounds", type=int, default=3, help="direct/proxied alternations per cell")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    ap.add_argument(
        "--upstream-delay", type=float, default=0.2,
        help="seconds the fake model thinks before answering (0: a saturation test of the box)",
    )  # fmt: skip
    ap.add_argument(
        "--event-delay", type=float, default=0.005, help="seconds between streamed events"
    )
    ap.add_argument(
        "--spread", type=float, default=0.5,
        help="each request's delay is drawn from delay × (1 ± spread); 0: clients in lockstep, "
        "every request of a burst arriving in the same millisecond (the worst case)",
    )  # fmt: skip
    ap.add_argument("--log-level", default="info", help="the proxy's (info logs every exchange)")
    ap.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_fake:
        serve_fake(args.upstream_delay, args.event_delay, args.spread)
        return
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    fake, upstream = start_fake(args.upstream_delay, args.event_delay, args.spread)
    tmp = Path(tempfile.mkdtemp(prefix="lithify-bench-proxy-"))
    proxy, port, _ = start_proxy(upstream, tmp, args.log_level)
    fake_port = int(upstream.rsplit(":", 1)[1])
    rows = []
    sent = 0
    try:
        for stream in (False, True):
            for clients in args.clients:
                direct: list[float] = []
                proxied: list[float] = []
                for _ in range(args.rounds):
                    direct += asyncio.run(
                        load(fake_port, stream, clients, args.seconds, args.warmup)
                    )
                    got = asyncio.run(load(port, stream, clients, args.seconds, args.warmup))
                    proxied += got
                    sent += len(got)
                rows.append((stream, clients, direct, proxied))
                d50, d99, p50, p99 = (
                    pct(direct, 0.5),
                    pct(direct, 0.99),
                    pct(proxied, 0.5),
                    pct(proxied, 0.99),
                )
                print(
                    f"  {'stream TTFB' if stream else 'non-streamed'} ×{clients}: direct p50 {d50:.2f} p99 {d99:.2f}"
                    f" | proxy p50 {p50:.2f} p99 {p99:.2f} ms ({len(direct)}/{len(proxied)} requests)",
                    file=sys.stderr,
                )  # fmt: skip
        # Recording kept up (or says what it could not): the store caught up with the load.
        deadline = time.monotonic() + 120
        h = health(port)
        while h["recorder"].get("exchanges", 0) < h["spooled"] and time.monotonic() < deadline:
            time.sleep(0.5)
            h = health(port)
    finally:
        proxy.terminate()
        proxy.wait(60)
        assert fake.stdin is not None
        fake.stdin.close()
        fake.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    load1 = os.getloadavg()[0]
    print(
        f"lithify proxy: latency beyond the upstream's own time, ms, on loopback "
        f"({os.cpu_count()} cores, load average {load1:.1f} at the end; the upstream answers "
        f"after {args.upstream_delay * (1 - args.spread) * 1000:g}-"
        f"{args.upstream_delay * (1 + args.spread) * 1000:g} ms, streams "
        f"{args.event_delay * 1000:g} ms/event; {args.rounds}×{args.seconds:g} s per cell)"
    )
    print()
    print(
        "| call | clients | direct p50 | direct p99 | proxy p50 | proxy p99 | added p50 | added p99 | requests (direct / proxy) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst50 = worst99 = 0.0
    for stream, clients, direct, proxied in rows:
        d50, d99, p50, p99 = (
            pct(direct, 0.5),
            pct(direct, 0.99),
            pct(proxied, 0.5),
            pct(proxied, 0.99),
        )
        worst50, worst99 = max(worst50, p50 - d50), max(worst99, p99 - d99)
        what = "streamed, time to first byte" if stream else "non-streamed, full response"
        print(f"| {what} | {clients} | {d50:.2f} | {d99:.2f} | {p50:.2f} | {p99:.2f} | "
              f"{p50 - d50:+.2f} | {p99 - d99:+.2f} | {len(direct)} / {len(proxied)} |")  # fmt: skip
    print()
    rec = h["recorder"]
    print(
        f"recorded: {rec.get('facts_stored', 0)} facts of {h['spooled']} spooled exchanges "
        f"({sent} proxied requests measured, warm-ups besides); not recorded: "
        f"{sum(h['not_recorded'].values())}; backlog left: {rec.get('backlog_bytes', 0)} bytes"
    )
    ok = worst50 <= 2 and worst99 <= 10
    print(f"target ≤2 ms added at p50 and ≤10 ms at p99: {'met' if ok else 'NOT met'} "
          f"(worst added: p50 {worst50:+.2f} ms, p99 {worst99:+.2f} ms)")  # fmt: skip


if __name__ == "__main__":
    main()
