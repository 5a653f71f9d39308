"""A real `lithify proxy` process, a plain HTTP client, and a small upstream whose every byte a
test chooses (for what the fake provider does not do: gzip, path prefixes, odd headers)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

from lithify.model import InferenceCall
from lithify.store import open_store
from tests.http_client import Reply, request
from tests.processes import LoggedProcess

LITHIFY = Path(sys.executable).with_name("lithify")
# A store nobody can reach: PostgreSQL on a port where nothing listens (connecting fails at once).
DEAD_STORE = "postgresql://postgres@127.0.0.1:9/none?connect_timeout=1"


def post(port: int, path: str, doc: Any, headers: dict[str, str] | None = None) -> Reply:
    h = {"Content-Type": "application/json", **(headers or {})}
    return request(port, "POST", path, orjson.dumps(doc), h)


@dataclass
class ProxyProcess(LoggedProcess):
    """A `lithify proxy` process; ``events`` reads its JSON log lines."""

    spool: Path
    store: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def health(self) -> dict[str, Any]:
        r = request(self.port, "GET", "/lithify/health", timeout=10)
        assert r.status == 200, r
        return r.json()  # type: ignore[no-any-return]

    def wait_health(
        self, what: str, cond: Callable[[dict[str, Any]], bool], timeout: float = 20
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            h = self.health()
            if cond(h):
                return h
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {h}")
            time.sleep(0.02)

    def recorder_pid(self) -> int:
        return int(self.events("listening")[-1]["recorder_pid"])


def start_proxy(
    tmp: Path,
    upstreams: dict[str, str],
    *args: str,
    store: str | None = None,
    spool: Path | None = None,
    log_name: str = "proxy.log",
    store_spool: bool = False,
) -> ProxyProcess:
    """``store_spool``: no --spool, the store's own spool (its folder is then the one the
    proxy names in its ``listening`` line)."""
    store = store or f"sqlite://{tmp / 'facts.db'}"
    spool = spool or tmp / "spool"
    log = tmp / log_name
    cmd = [str(LITHIFY), "proxy", "--listen", "127.0.0.1:0", "--store", store]
    if not store_spool:
        cmd += ["--spool", str(spool)]
    for name, url in upstreams.items():
        cmd += ["--upstream", f"{name}={url}"]
    cmd += list(args)
    with log.open("ab") as fh:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fh)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().split("\n"):
            if '"event":"listening"' in line:
                ev = orjson.loads(line)
                if ev["pid"] == proc.pid:
                    return ProxyProcess(proc, int(ev["port"]), log, Path(ev["spool"]), store)
        if proc.poll() is not None:
            raise RuntimeError(f"lithify proxy exited {proc.returncode}: {log.read_text()[-3000:]}")
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("lithify proxy did not start within 60 s")


def stored_facts(store: str) -> list[InferenceCall]:
    with open_store(store) as s:
        return list(s.iter_facts())


def wait_calls(store: str, ids: set[str], timeout: float = 60) -> list[InferenceCall]:
    """The stored facts of these calls (by response id), once each is there: a module's proxy
    is shared by its tests, which pytest-xdist may run in either process, so a test waits
    for its own calls rather than for a count."""
    deadline = time.monotonic() + timeout
    while True:
        facts = [f for f in stored_facts(store) if f.model_call_id in ids]
        if {f.model_call_id for f in facts} == ids:
            return facts
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(facts)} of the {len(ids)} calls stored")
        time.sleep(0.05)


def wait_facts(store: str, n: int, timeout: float = 60) -> list[InferenceCall]:
    """The facts the proxy's recorder has stored once there are ``n``; it writes behind the
    answer, and a loaded machine (a Ray cluster starting in the next test process) slows it."""
    deadline = time.monotonic() + timeout
    while True:
        facts = stored_facts(store)
        if len(facts) >= n:
            return facts
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(facts)} facts stored, {n} expected")
        time.sleep(0.05)


# -- a scriptable upstream ---------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    headers: list[tuple[str, str]]  # as sent, in order
    body: bytes

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


@dataclass
class Scripted:
    """What the upstream answers: status, headers, and the body as chunks (chunked transfer
    encoding when ``chunked``, else one Content-Length body)."""

    status: int = 200
    headers: list[tuple[str, str]] = field(
        default_factory=lambda: [("Content-Type", "application/json")]
    )
    chunks: list[bytes] = field(default_factory=list)
    chunked: bool = False
    delay: float = 0.0  # between chunks
    cut: bool = False  # hang up after the chunks, without ending the body


class Upstream:
    """A tiny HTTP/1.1 server on loopback that records every request and answers ``reply``."""

    def __init__(self, reply: Callable[[Seen], Scripted] | None = None) -> None:
        self.seen: list[Seen] = []
        self.reply = reply or (lambda s: Scripted(chunks=[b"{}"]))
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # The head and the body are two writes: with Nagle's algorithm, the body waited
            # for the client's delayed ACK, 40 ms a call.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                seen = Seen(self.command, self.path, list(self.headers.items()), body)
                upstream.seen.append(seen)
                r = upstream.reply(seen)
                self.send_response(r.status)
                for k, v in r.headers:
                    self.send_header(k, v)
                if r.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(sum(map(len, r.chunks))))
                self.end_headers()
                for c in r.chunks:
                    if r.delay:
                        time.sleep(r.delay)
                    self.wfile.write(f"{len(c):x}\r\n".encode() + c + b"\r\n" if r.chunked else c)
                    self.wfile.flush()
                if r.cut:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if r.chunked:
                    self.wfile.write(b"0\r\n\r\n")

            do_POST = do_GET = do_PUT = do_DELETE = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Upstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def raw_stream(
    port: int, path: str, body: bytes, headers: dict[str, str]
) -> Iterator[socket.socket]:
    """A socket with a request sent and nothing read yet: the test reads and hangs up itself."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        s.sendall(head.encode() + body)
        yield s
    finally:
        s.close()
