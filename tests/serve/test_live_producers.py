"""The real OTel SDK exporting live to `lithify serve`: ``opentelemetry-instrumentation-openai-v2``
against the local fake provider, the SDK's batch processors and its real OTLP/HTTP exporters
(protobuf with gzip, and JSON), on SQLite and on PostgreSQL. What the receiver stores equals what
`lithify convert` gives for the same telemetry; retried and replayed deliveries store each call
once.

The producer runs in its own venv (tests/producers/README.md): ``run_export.py`` sends to the
server and also writes the same spans and log records as OTLP files, the input of `convert`.
"""

from __future__ import annotations

import http.client
import io
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from lithify.derive.sessions import sort_facts
from lithify.ingest.convert import convert
from lithify.model import decode_fact
from lithify.store import FactStore, open_store
from tests.serve.conftest import BASE
from tests.serve.helpers import LiveServer, live_server, post
from tests.test_producers import PRODUCERS_DIR, ROOT, _clean_env

pytestmark = pytest.mark.producers

VENVS = {"protobuf": "openai-v2", "json": "openai-v2-json", "grpc": "openai-v2-grpc"}
CALLS = 4  # two scenarios (plain, stream) of two model calls each


def run_export(encoding: str, endpoint: str, out: Path, *extra: str) -> list[dict[str, Any]]:
    python = ROOT / f".venv-producers-{VENVS[encoding]}" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: run `bash scripts/producers-setup`", pytrace=False)
    cmd = [str(python), str(PRODUCERS_DIR / "run_export.py"), str(out)]
    cmd += ["--endpoint", endpoint, "--encoding", encoding, *extra]
    proc = subprocess.run(
        cmd, cwd=PRODUCERS_DIR, env=_clean_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    exports: list[dict[str, Any]] = orjson.loads((out / "exports.json").read_bytes())
    return exports


def converted(out: Path, encoding: str) -> list[Any]:
    """`lithify convert` of the files the producer wrote: the same telemetry it exported."""
    ext = "pb" if encoding == "protobuf" else "json"
    files = sorted(p for p in out.glob(f"*/*.{ext}") if p.stem in ("traces", "logs"))
    assert len(files) == 4, files
    buf = io.BytesIO()
    summary = convert(files, buf)
    assert not summary.unreadable and not summary.corrupt
    return [decode_fact(line) for line in buf.getvalue().splitlines()]


def assert_stored_as_converted(store: FactStore, facts: list[Any]) -> None:
    """Each call once; each stored fact is, field for field, one that convert gave for it (a
    call's span and its log event share an identity: whichever arrived first is kept)."""
    by_id: dict[str, list[Any]] = {}
    for f in facts:
        by_id.setdefault(f.inference_call_id, []).append(msgspec.to_builtins(f))
    stored = list(store.iter_facts())
    assert len(stored) == len(by_id) == CALLS
    for f in stored:
        assert msgspec.to_builtins(f) in by_id[f.inference_call_id]
    assert store.count_feedback() == 0


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_real_exporters_to_serve_store_what_convert_gives(
    backend: str, encoding: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = request.getfixturevalue("sqlite_store_url" if backend == "sqlite" else "pg_store_url")
    with live_server(replace(BASE, store=url), open_store(url)) as srv:
        compression = ["--compression", "gzip"] if encoding == "protobuf" else []
        exports = run_export(encoding, f"http://127.0.0.1:{srv.port}", tmp_path, *compression)
        assert [e["result"] for e in exports] == ["SUCCESS"] * 4, exports
        assert sorted(e["signal"] for e in exports) == ["logs", "logs", "traces", "traces"]
        with open_store(url) as store:
            assert_stored_as_converted(store, converted(tmp_path, encoding))
        totals = srv.receiver.counts
        # Each call came twice (span and log event): stored once, then kept apart as a variant
        # (the log event's content differs from the span's).
        counts = [totals[k] for k in ("facts", "variants", "duplicates", "rejected")]
        assert counts == [CALLS, CALLS, 0, 0]


def test_real_grpc_exporters_to_serve_store_what_convert_gives(
    sqlite_store_url: str, tmp_path: Path
) -> None:
    """The same instrumentation with the SDK's OTLP/gRPC exporters (gzip), as an application
    pointed at the Collector's default port would send: the same facts as convert gives."""
    url = sqlite_store_url
    with live_server(replace(BASE, store=url, grpc_port=0), open_store(url)) as srv:
        endpoint = f"http://127.0.0.1:{srv.receiver.grpc_port}"
        exports = run_export("grpc", endpoint, tmp_path, "--compression", "gzip")
        assert [e["result"] for e in exports] == ["SUCCESS"] * 4, exports
        with open_store(url) as store:
            assert_stored_as_converted(store, converted(tmp_path, "protobuf"))
        counts = [srv.receiver.counts[k] for k in ("facts", "variants", "duplicates", "rejected")]
        assert counts == [CALLS, CALLS, 0, 0]


class FaultProxy:
    """Between exporter and server: forwards each request, but answers the FIRST delivery of
    each body with 503 (traces) or 429 (logs) and Retry-After — as if the acknowledgement was
    lost after the server had stored it — so the exporter's own retry delivers it again."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.seen: set[bytes] = set()
        self.delivered: list[tuple[str, dict[str, str], bytes, int]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                keep = ("Content-Type", "Content-Encoding", "Authorization")
                headers = {k: self.headers[k] for k in keep if self.headers[k]}
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream, timeout=30)
                conn.request("POST", self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data, ctype = resp.read(), resp.getheader("Content-Type", "")
                conn.close()
                with proxy.lock:
                    first = body not in proxy.seen
                    proxy.seen.add(body)
                    proxy.delivered.append((self.path, headers, body, resp.status))
                status = (503 if self.path.endswith("traces") else 429) if first else resp.status
                self.send_response(status)
                if first:
                    self.send_header("Retry-After", "1")
                    data = b""
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]

    @contextmanager
    def running(self) -> Iterator[FaultProxy]:
        t = threading.Thread(target=self.server.serve_forever, daemon=True)
        t.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()


def test_retried_and_replayed_deliveries_store_each_call_once(
    server: LiveServer, store: FactStore, tmp_path: Path
) -> None:
    with FaultProxy(server.port).running() as proxy:
        exports = run_export("protobuf", f"http://127.0.0.1:{proxy.port}", tmp_path)
    # The exporter retried after each injected 503/429 and then succeeded.
    assert [e["result"] for e in exports] == ["SUCCESS"] * 4, exports
    paths = [d[0] for d in proxy.delivered]
    assert paths.count("/v1/traces") == 4 and paths.count("/v1/logs") == 4
    assert all(d[3] == 200 for d in proxy.delivered)  # the server took every delivery
    assert_stored_as_converted(store, converted(tmp_path, "protobuf"))

    # A replayed request (the same bytes, sent again later) changes nothing either.
    path, headers, body, _ = next(d for d in proxy.delivered if d[0] == "/v1/traces")
    before = dict(server.receiver.counts)
    r = post(server.port, path, body, headers["Content-Type"], headers)
    assert r.status == 200
    assert store.count() == CALLS
    assert server.receiver.counts["duplicates"] == before["duplicates"] + 2
    assert server.receiver.counts["facts"] == CALLS


def test_log_events_sent_as_each_call_starts_and_ends_read_whole(
    sqlite_store_url: str, tmp_path: Path
) -> None:
    """openai-v2's default mode (one log record per message) with the SDK's batch log processor
    on a 50 ms timer and a provider that answers in 150 ms: each call's input events leave in
    one request as it starts, its choice in a later one, as with any call longer than the
    processor's delay. Each call is read with its input and its answer, as `lithify convert`
    of the same telemetry, written whole, reads it."""
    url = sqlite_store_url
    with live_server(replace(BASE, store=url), open_store(url)) as srv:
        exports = run_export(
            "protobuf",
            f"http://127.0.0.1:{srv.port}",
            tmp_path,
            "--semconv",
            "default",
            "--log-delay-ms",
            "50",
        )
        assert {e["result"] for e in exports} == {"SUCCESS"}, exports
        # More log requests than scenarios: the calls' events were cut.
        assert sum(e["signal"] == "logs" for e in exports) > 2 * 2, exports
        with open_store(url) as store:
            stored = {f.inference_call_id: f for f in store.iter_facts()}
    whole = {f.inference_call_id: f for f in sort_facts(converted(tmp_path, "protobuf"))}
    assert len(stored) == len(whole) == CALLS
    for key, f in whole.items():
        assert any(m.parts for m in f.output_messages)
        assert (stored[key].input_messages, stored[key].output_messages) == (
            f.input_messages,
            f.output_messages,
        )
        assert (stored[key].model, stored[key].session_id) == (f.model, f.session_id)
