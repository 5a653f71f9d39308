"""Faults against a real `lithify serve` process: kill -9 mid-stream (then a translation worker
killed), PostgreSQL stopped and restarted under load, and a graceful shutdown under load."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from lithify.store import open_store, sqlite_path
from tests.serve.helpers import (
    LITHIFY,
    PB,
    ServerProcess,
    genai_spans,
    get,
    post,
    start_server,
    traces_pb,
)
from tests.store.conftest import SCRIPT, start_postgres

SPANS = 32  # per request in the streams below


class Stream:
    """Clients sending distinct requests until stopped; what was acknowledged, what was not."""

    def __init__(self, port: int, clients: int = 2, spans: int = SPANS) -> None:
        self.port = port
        self.spans = spans
        self.acked: list[str] = []
        self.unacked: list[str] = []  # refused, failed or cut off: the sender must retry these
        self.statuses: list[tuple[float, int, str | None]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.next = 0
        self.threads = [threading.Thread(target=self._client, daemon=True) for _ in range(clients)]

    def _client(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                tag = f"req{self.next}"
                self.next += 1
            try:
                r = post(self.port, "/v1/traces", traces_pb(genai_spans(tag, self.spans)), PB)
            except OSError:
                with self.lock:
                    self.unacked.append(tag)
                time.sleep(0.05)
                continue
            with self.lock:
                self.statuses.append((time.monotonic(), r.status, r.headers.get("retry-after")))
                (self.acked if r.status == 200 else self.unacked).append(tag)
            if r.status != 200:
                time.sleep(0.1)

    def __enter__(self) -> Stream:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def wait(self, what: str, cond: object, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not cond():  # type: ignore[operator]
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}: {self.statuses[-5:]}")
            time.sleep(0.02)


def ids_of(tag: str, n: int = SPANS) -> set[str]:
    return {s.call_id for s in genai_spans(tag, n)}


def stored_ids(url: str) -> set[str]:
    with open_store(url) as store:
        return {f.inference_call_id for f in store.iter_facts()}


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too (its parent, the killed server, never reaped it).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_kill_9_mid_stream_loses_no_acknowledged_span(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'facts.db'}"
    log = tmp_path / "serve.log"
    srv = start_server(url, log, "--workers", "1")
    workers = _children(srv.proc.pid)
    assert workers, "the server runs its translation worker(s) as child processes"
    with Stream(srv.port, clients=3) as stream:
        stream.wait("acknowledged requests", lambda: len(stream.acked) >= 8)
        srv.kill9()  # with requests in flight
        stream.stop.set()
    # The workers die with their server (no orphan keeps translating or holds the port).
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in workers)

    path = sqlite_path(url)
    assert path is not None
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()

    srv = start_server(url, log, "--workers", "1")  # the same store, restarted
    try:
        stored = stored_ids(url)
        for tag in stream.acked:
            assert ids_of(tag) <= stored, f"acknowledged {tag} lost"
        sent = stream.acked + stream.unacked
        for tag in sent:  # each request is all or nothing
            assert len(ids_of(tag) & stored) in (0, SPANS), tag
        assert len(stored) % SPANS == 0
        # The sender retries what was not acknowledged: everything is there, once.
        for tag in stream.unacked:
            assert post(srv.port, "/v1/traces", traces_pb(genai_spans(tag, SPANS))).status == 200
        assert stored_ids(url) == set().union(*(ids_of(t) for t in sent))

        # A translation worker killed under the restarted server is replaced: the request that
        # meets the broken pool gets a retryable 503, the next one is taken.
        [worker] = [
            p
            for p in _children(srv.proc.pid)
            if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()
        ]
        os.kill(worker, signal.SIGKILL)
        time.sleep(0.3)
        r = post(srv.port, "/v1/traces", traces_pb(genai_spans("after-worker", 4)))
        assert r.status in (200, 503)
        if r.status == 503:
            assert r.headers["retry-after"]
            r = post(srv.port, "/v1/traces", traces_pb(genai_spans("after-worker", 4)))
        assert r.status == 200
        assert ids_of("after-worker", 4) <= stored_ids(url)
        assert srv.events("worker_pool_broken")
    finally:
        assert srv.stop() == 0


def test_postgres_stopped_and_restarted_under_load(
    own_postgres: tuple[Path, str], tmp_path: Path
) -> None:
    folder, url = own_postgres
    srv = start_server(url, tmp_path / "serve.log", "--workers", "1", "--retry-after", "1")
    try:
        with Stream(srv.port, clients=2, spans=8) as stream:
            stream.wait("acknowledged requests", lambda: len(stream.acked) >= 5)
            subprocess.run(["bash", str(SCRIPT), "stop", "--dir", str(folder)], check=True)
            stopped_at = time.monotonic()
            stream.wait("503 answers", lambda: any(s == 503 for _, s, _ in stream.statuses))
            assert get(srv.port, "/health/ready").status == 503
            assert get(srv.port, "/health").status == 200
            assert srv.proc.poll() is None  # up all along

            assert start_postgres(folder) == url
            restarted_at = time.monotonic()
            stream.wait(
                "a 200 after the restart",
                lambda: any(t > restarted_at and s == 200 for t, s, _ in stream.statuses),
            )
        unavailable = [(t, ra) for t, s, ra in stream.statuses if s == 503]
        assert all(ra == "1" for _, ra in unavailable)  # Retry-After on every 503
        assert all(stopped_at - 1 < t for t, _ in unavailable)
        assert get(srv.port, "/health/ready").status == 200
        for tag in stream.unacked:  # what the sender retries
            r = post(srv.port, "/v1/traces", traces_pb(genai_spans(tag, 8)))
            assert r.status == 200
        sent = stream.acked + stream.unacked
        assert stored_ids(url) == set().union(*(ids_of(t, 8) for t in sent))
        events = {e["event"] for e in srv.events()}
        assert {"store_unavailable", "store_available"} <= events
    finally:
        assert srv.stop() == 0


def test_sigterm_drains_requests_in_flight(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'facts.db'}"
    srv: ServerProcess = start_server(url, tmp_path / "serve.log", "--workers", "1")
    bodies = [traces_pb(genai_spans(f"drain{i}", 512)) for i in range(3)]
    results: list[int] = []

    def send(body: bytes) -> None:
        results.append(post(srv.port, "/v1/traces", body, timeout=60).status)

    threads = [threading.Thread(target=send, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while get(srv.port, "/health").json()["inflight"] < 3:
        assert time.monotonic() < deadline, "the requests never got in flight"
        time.sleep(0.005)
    srv.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(60)
    assert srv.proc.wait(60) == 0
    assert results == [200, 200, 200]
    assert len(stored_ids(url)) == 3 * 512
    stopped = srv.events("stopped")
    assert stopped and stopped[-1]["facts_stored"] == 3 * 512


def test_an_address_in_use_exits_1_and_says_why(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in (["serve", "--port", str(port), "--no-grpc"], ["proxy", "--listen", f"127.0.0.1:{port}",
                        "-u", "openai=http://127.0.0.1:9", "--spool", str(tmp_path / "spool")]):  # fmt: skip
            done = subprocess.run(
                [str(LITHIFY), *command, "--store", f"sqlite://{tmp_path / 'f.db'}"],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            assert done.returncode == 1, (command, done.stderr[-2000:])
            assert "address already in use" in done.stderr.lower(), done.stderr[-2000:]


def test_a_client_that_half_closes_gets_its_answers_and_logs_no_error(tmp_path: Path) -> None:
    """Two pipelined requests, then SHUT_WR: uvicorn told only the newest request that the
    connection was gone, and the older one's answer raised `RuntimeError … TCPTransport closed`
    at error level. Both are answered now; a half-close mid-request just closes."""
    url = f"sqlite://{tmp_path / 'facts.db'}"
    srv = start_server(url, tmp_path / "serve.log", "--workers", "1")
    try:
        reqs = []
        for tag in ("half-a", "half-b"):
            body = traces_pb(genai_spans(tag, 200))
            reqs.append(
                b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body
            )
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
            s.sendall(reqs[0] + reqs[1])
            s.shutdown(socket.SHUT_WR)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        assert data.count(b"HTTP/1.1 200 OK") == 2, data[:300]
        # Half-closed in the middle of the second request: the first is answered or not, the
        # second cannot be; the server closes, and logs no error.
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
            s.sendall(reqs[0] + reqs[1][:300])
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        assert len(stored_ids(url)) == 400
        assert get(srv.port, "/health").status == 200
    finally:
        assert srv.stop() == 0
    levels = {e["level"] for e in srv.events()}
    assert "error" not in levels, [e for e in srv.events() if e["level"] == "error"]
