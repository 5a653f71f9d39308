"""Servers and requests for the receiver tests: an in-process uvicorn on a free loopback port, a
real `lithify serve` process, OTLP bodies of GenAI spans, and a plain HTTP client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from lithify.ingest.receiver import ServeConfig, build_app, uvicorn_config
from lithify.store import FactStore
from lithify.translate.feedback import call_id_of_span
from tests.http_client import Reply, request
from tests.otlp_values import json_value, pb_attrs, pb_value
from tests.processes import LoggedProcess

ROOT = Path(__file__).resolve().parents[2]
LITHIFY = Path(sys.executable).with_name("lithify")
PB = "application/x-protobuf"
JSON = "application/json"


# -- HTTP ------------------------------------------------------------------------------------


def post(
    port: int,
    path: str,
    body: bytes,
    content_type: str | None = PB,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
) -> Reply:
    h = dict(headers or {})
    if content_type is not None:
        h["Content-Type"] = content_type
    return request(port, "POST", path, body, h, timeout)


def get(port: int, path: str) -> Reply:
    return request(port, "GET", path, timeout=10)


def status_message(reply: Reply) -> str:
    """The message of a google.rpc.Status body, protobuf or JSON."""
    if reply.headers.get("content-type", "").startswith(JSON):
        return str(reply.json()["message"])
    data = reply.body
    assert data[0] == 0x08, data[:20]  # field 1, varint: the code
    i = 2
    assert data[i] == 0x12, data[:20]  # field 2, length-delimited: the message
    i += 1
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return data[i : i + n].decode()


# -- OTLP bodies -----------------------------------------------------------------------------


def genai_attrs(key: str, *, content: bool = True) -> list[tuple[str, Any]]:
    attrs: list[tuple[str, Any]] = [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "gpt-4o-mini"),
        ("gen_ai.response.id", f"resp-{key}"),
        ("gen_ai.usage.input_tokens", 12),
        ("gen_ai.usage.output_tokens", 5),
    ]
    if content:
        inputs = [{"role": "user", "parts": [{"type": "text", "content": f"question {key}"}]}]
        outputs = [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": f"answer {key}"}],
                "finish_reason": "stop",
            }
        ]
        attrs += [
            ("gen_ai.input.messages", orjson.dumps(inputs).decode()),
            ("gen_ai.output.messages", orjson.dumps(outputs).decode()),
        ]
    return attrs


@dataclass
class SpanSpec:
    trace_id: str
    span_id: str
    attrs: list[tuple[str, Any]]
    name: str = "chat gpt-4o-mini"

    @property
    def call_id(self) -> str:
        return call_id_of_span(self.trace_id, self.span_id)


def genai_spans(tag: str, n: int, **kw: Any) -> list[SpanSpec]:
    """``n`` GenAI model-call spans whose ids and response ids derive from ``tag``."""
    import hashlib

    out = []
    for i in range(n):
        h = hashlib.sha256(f"{tag}:{i}".encode()).hexdigest()
        out.append(SpanSpec(h[:32], h[32:48], genai_attrs(f"{tag}-{i}", **kw)))
    return out


def other_span(tag: str) -> SpanSpec:
    import hashlib

    h = hashlib.sha256(f"http:{tag}".encode()).hexdigest()
    return SpanSpec(h[:32], h[32:48], [("http.request.method", "GET")], name="GET /")


def traces_pb(spans: list[SpanSpec]) -> bytes:
    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add().scope_spans.add()
    ss.scope.name = "tests.serve"
    for sp in spans:
        s = ss.spans.add()
        s.trace_id, s.span_id = bytes.fromhex(sp.trace_id), bytes.fromhex(sp.span_id)
        s.name, s.kind = sp.name, 3
        s.start_time_unix_nano = 1_760_000_000_000_000_000
        s.end_time_unix_nano = 1_760_000_000_500_000_000
        s.attributes.extend(KeyValue(key=k, value=pb_value(v)) for k, v in sp.attrs)
    return req.SerializeToString()


def traces_json_doc(spans: list[SpanSpec]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "scope": {"name": "tests.serve"},
                        "spans": [
                            {
                                "traceId": sp.trace_id,
                                "spanId": sp.span_id,
                                "name": sp.name,
                                "kind": 3,
                                "startTimeUnixNano": "1760000000000000000",
                                "endTimeUnixNano": "1760000000500000000",
                                "attributes": [
                                    {"key": k, "value": json_value(v)} for k, v in sp.attrs
                                ],
                            }
                            for sp in spans
                        ],
                    }
                ]
            }
        ]
    }


def evaluation_logs_pb(trace_id: str, span_id: str, name: str, score: float) -> bytes:
    """A gen_ai.evaluation.result log event on one span: a feedback fact."""
    req = ExportLogsServiceRequest()
    sl = req.resource_logs.add().scope_logs.add()
    r = sl.log_records.add()
    r.trace_id, r.span_id = bytes.fromhex(trace_id), bytes.fromhex(span_id)
    r.event_name = "gen_ai.evaluation.result"
    r.time_unix_nano = 1_760_000_001_000_000_000
    r.attributes.extend(
        pb_attrs({"gen_ai.evaluation.name": name, "gen_ai.evaluation.score.value": score})
    )
    return req.SerializeToString()


# -- servers ---------------------------------------------------------------------------------


@dataclass
class LiveServer:
    """The receiver's ASGI app under uvicorn, in a thread of the test process."""

    port: int
    server: uvicorn.Server
    thread: threading.Thread
    app: Any

    @property
    def receiver(self) -> Any:
        return self.app.state.receiver


@contextmanager
def live_server(config: ServeConfig, store: FactStore | None = None) -> Iterator[LiveServer]:
    app = build_app(config, store)
    server = uvicorn.Server(uvicorn_config(app, replace(config, port=0, shutdown_timeout=10), None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the in-process server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield LiveServer(port, server, thread, app)
    finally:
        server.should_exit = True
        thread.join(30)


@dataclass
class ServerProcess(LoggedProcess):
    """A real `lithify serve` process; ``events`` reads its JSON log lines."""

    args: list[str] = field(default_factory=list)
    grpc_port: int | None = None


def free_port() -> int:
    """A loopback port nothing listens on now (`--grpc-port 0` turns gRPC off, as the CLI has it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    store: str,
    log: Path,
    *args: str,
    env: dict[str, str] | None = None,
    grpc_port: int | None = None,
) -> ServerProcess:
    """A real `lithify serve` on a free HTTP port; gRPC off unless ``grpc_port`` is given (its
    default, 4317, would be shared by every server the tests start)."""
    grpc = ["--grpc-port", str(grpc_port)] if grpc_port else ["--no-grpc"]
    cmd = [str(LITHIFY), "serve", "--store", store, "--port", "0", *grpc, *args]
    fh = log.open("ab")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=fh, env={**os.environ, **(env or {})}
    )
    fh.close()
    deadline = time.monotonic() + 60
    seen = 0
    while time.monotonic() < deadline:
        lines = log.read_text().split("\n")
        for line in lines[seen:]:
            if '"event":"listening"' in line:
                ev = orjson.loads(line)
                if ev["pid"] == proc.pid:
                    return ServerProcess(proc, int(ev["port"]), log, cmd, ev["grpc_port"])
        if proc.poll() is not None:
            raise RuntimeError(f"lithify serve exited {proc.returncode}: {log.read_text()[-3000:]}")
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("lithify serve did not start within 60 s")
