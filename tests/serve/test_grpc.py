"""OTLP/gRPC of `lithify serve`: the OTel SDK's real gRPC exporters (traces and logs, plain and
gzip) store what the HTTP path stores for the same telemetry; partial success with a span that
does not parse; the OTLP/gRPC codes (UNAUTHENTICATED, UNAVAILABLE and RESOURCE_EXHAUSTED with
RetryInfo); nothing acknowledged lost to kill -9."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import msgspec
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, set_span_in_context

from lithify.ingest.grpc import SERVICES
from lithify.ingest.tokens import new_token, token_hash, token_prefix
from lithify.store import open_store, sqlite_path
from tests.serve.conftest import BASE
from tests.serve.helpers import (
    LITHIFY,
    LiveServer,
    free_port,
    genai_attrs,
    genai_spans,
    get,
    live_server,
    post,
    start_server,
    traces_pb,
)
from tests.store.conftest import SCRIPT, start_postgres

GRPC = replace(BASE, grpc_port=0)  # a free port for gRPC beside HTTP's


@contextmanager
def grpc_server(url: str, **changes: Any) -> Iterator[LiveServer]:
    with live_server(replace(GRPC, store=url, **changes), open_store(url)) as srv:
        assert srv.receiver.grpc_port
        yield srv


def call(
    port: int,
    signal: str,
    body: bytes,
    metadata: tuple[tuple[str, str], ...] = (),
    compression: grpc.Compression = grpc.Compression.NoCompression,
) -> Any:
    """One raw Export call (the body as bytes, so it may be malformed): the response message."""
    response = ExportTraceServiceResponse if signal == "traces" else ExportLogsServiceResponse
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export = channel.unary_unary(
            f"/{SERVICES[signal]}/Export", response_deserializer=response.FromString
        )
        return export(body, metadata=metadata, timeout=30, compression=compression)


def refusal(port: int, body: bytes, **kw: Any) -> tuple[grpc.RpcError, Any]:
    """The error of a refused call and its google.rpc.Status (grpc-status-details-bin)."""
    with pytest.raises(grpc.RpcError) as info:
        call(port, "traces", body, **kw)
    error = info.value
    return error, rpc_status.from_call(error)  # type: ignore[arg-type]


def retry_delay(status: Any) -> int:
    [detail] = status.details
    retry = error_details_pb2.RetryInfo()
    assert detail.Unpack(retry)
    return int(retry.retry_delay.seconds)


# -- telemetry made by the real SDK ----------------------------------------------------------


def sdk_telemetry(tag: str, n: int = 3) -> tuple[list[Any], list[Any]]:
    """GenAI model-call spans, a tool span, and an evaluation event on each call, recorded by
    the SDK (in memory) as an instrumented application makes them."""
    resource = Resource.create({"service.name": f"grpc-test-{tag}"})
    spans_out, logs_out = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans_out))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs_out))
    tracer = tracer_provider.get_tracer("tests.serve.grpc")
    logger = logger_provider.get_logger("tests.serve.grpc")
    for i in range(n):
        with tracer.start_as_current_span("invoke_agent helper") as agent:
            agent.set_attribute("gen_ai.operation.name", "invoke_agent")
            span = tracer.start_span("chat gpt-4o-mini", kind=SpanKind.CLIENT)
            for k, v in genai_attrs(f"{tag}-{i}"):
                span.set_attribute(k, v)
            span.end()
            with tracer.start_as_current_span("execute_tool lookup") as tool:
                tool.set_attribute("gen_ai.operation.name", "execute_tool")
            logger.emit(
                context=set_span_in_context(span),
                event_name="gen_ai.evaluation.result",
                severity_number=SeverityNumber.INFO,
                attributes={"gen_ai.evaluation.name": "relevance", "gen_ai.evaluation.score.value": 0.5 + i / 10},
            )  # fmt: skip
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return list(spans_out.get_finished_spans()), list(logs_out.get_finished_logs())


def stored(url: str) -> tuple[list[Any], list[Any]]:
    with open_store(url) as s:
        facts = sorted((msgspec.to_builtins(f) for f in s.iter_facts()), key=str)
        feedback = sorted((msgspec.to_builtins(f) for f in s.iter_feedback()), key=str)
    return facts, feedback


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_sdk_grpc_exporters_store_what_the_http_path_stores(
    compression: str, tmp_path: Path
) -> None:
    spans, logs = sdk_telemetry("sdk")
    via_grpc, via_http = f"sqlite://{tmp_path / 'grpc.db'}", f"sqlite://{tmp_path / 'http.db'}"
    with grpc_server(via_grpc) as srv:
        endpoint = f"http://127.0.0.1:{srv.receiver.grpc_port}"
        comp = grpc.Compression.Gzip if compression == "gzip" else grpc.Compression.NoCompression
        span_exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, compression=comp)
        log_exporter = OTLPLogExporter(endpoint=endpoint, insecure=True, compression=comp)
        assert span_exporter.export(spans).name == "SUCCESS"
        assert log_exporter.export(logs).name == "SUCCESS"
        span_exporter.shutdown()
        log_exporter.shutdown()
        counts = dict(srv.receiver.counts)
    assert (counts["facts"], counts["feedback"], counts["rejected"]) == (3, 3, 0)
    # The same telemetry as the HTTP exporter encodes it (the SDK's one encoder), over HTTP.
    with live_server(replace(BASE, store=via_http), open_store(via_http)) as srv:
        assert post(srv.port, "/v1/traces", encode_spans(spans).SerializeToString()).status == 200
        assert post(srv.port, "/v1/logs", encode_logs(logs).SerializeToString()).status == 200
    grpc_facts, grpc_feedback = stored(via_grpc)
    assert len(grpc_facts) == 3 and len(grpc_feedback) == 3
    assert (grpc_facts, grpc_feedback) == stored(via_http)


def test_gzip_calls_are_logged_with_their_encoding(sqlite_store_url: str, tmp_path: Path) -> None:
    """A real `lithify serve` process (worker pool): a gzip call, its log line, /health."""
    port = free_port()
    srv = start_server(sqlite_store_url, tmp_path / "serve.log", "--workers", "1", grpc_port=port)
    try:
        assert srv.grpc_port == port
        [listening] = srv.events("listening")
        assert listening["grpc_port"] == port
        assert get(srv.port, "/health").json()["ports"] == {"http": srv.port, "grpc": port}
        body = traces_pb(genai_spans("gz", 4))
        r = call(port, "traces", body, compression=grpc.Compression.Gzip)
        assert not r.HasField("partial_success")
        srv.wait_event("request", lambda e: e.get("transport") == "grpc")  # logged after
        [line] = [e for e in srv.events("request") if e.get("transport") == "grpc"]
        assert line["path"] == "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
        assert (line["status"], line["grpc_status"], line["facts"], line["units"]) == (
            200, "OK", 4, 4,
        )  # fmt: skip
        assert line["bytes"] == len(body)  # as inflated by gRPC
    finally:
        assert srv.stop() == 0


# -- partial success -------------------------------------------------------------------------


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (number, wire type 2)."""
    n, size = len(payload), b""
    while True:
        size += bytes([(n & 0x7F) | (0x80 if n >> 7 else 0)])
        n >>= 7
        if not n:
            return bytes([number << 3 | 2]) + size + payload


def test_a_span_that_does_not_parse_is_rejected_alone(sqlite_store_url: str) -> None:
    """The call carries a span whose bytes are not a Span message: gRPC's own parse would
    refuse the whole call; lithify takes the others and says which one it could not."""
    good = [sp.SerializeToString() for sp in _pb_spans(genai_spans("partial", 2))]
    scope = _field(2, good[0]) + _field(2, b"\xff\xff\xff\xff") + _field(2, good[1])
    body = _field(1, _field(2, scope))  # ExportTraceServiceRequest.resource_spans.scope_spans
    with grpc_server(sqlite_store_url) as srv:
        r = call(srv.receiver.grpc_port, "traces", body)
        assert r.partial_success.rejected_spans == 1
        assert r.partial_success.error_message == (
            "1 spans could not be decoded: resource_spans[0].scope_spans[0].spans[1]: not a "
            "valid Span message"
        )
        assert srv.receiver.counts["facts"] == 2


def _pb_spans(specs: list[Any]) -> list[Any]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest.FromString(traces_pb(specs))
    return list(req.resource_spans[0].scope_spans[0].spans)


def test_a_body_that_is_not_otlp_is_invalid_argument(sqlite_store_url: str) -> None:
    with grpc_server(sqlite_store_url) as srv:
        error, status = refusal(srv.receiver.grpc_port, b"\x0a\x05abc")  # a truncated frame
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "truncated" in error.details() or "not" in error.details(), error.details()
        assert status is not None and not status.details  # not retryable: no RetryInfo


def test_a_message_over_the_size_limit_is_refused_inflated_or_not(sqlite_store_url: str) -> None:
    """gRPC bounds the message by --max-body-size on the wire and once inflated (a gzip bomb)."""
    with grpc_server(sqlite_store_url, max_body_size=1 << 20) as srv:
        port = srv.receiver.grpc_port
        for compression in (grpc.Compression.NoCompression, grpc.Compression.Gzip):
            error, _ = refusal(port, bytes(4 << 20), compression=compression)
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "larger than max" in error.details()
        # Under the limit, the same receiver takes a call.
        assert not call(port, "traces", traces_pb(genai_spans("fits", 2))).HasField(
            "partial_success"
        )


# -- status codes ----------------------------------------------------------------------------


def test_without_a_live_token_a_call_is_unauthenticated(sqlite_store_url: str) -> None:
    token = new_token()
    with open_store(sqlite_store_url) as s:
        s.create_token("ci", token_hash(token), token_prefix(token))
    with grpc_server(sqlite_store_url) as srv:
        port = srv.receiver.grpc_port
        body = traces_pb(genai_spans("auth", 2))
        for metadata in ((), (("authorization", "Bearer lith_wrong"),)):
            error, _ = refusal(port, body, metadata=metadata)
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "token is required" in error.details()
        assert srv.receiver.counts["facts"] == 0  # nothing read or stored
        # The SDK exporter with the token as a header (OTEL_EXPORTER_OTLP_HEADERS) gets in.
        spans, _ = sdk_telemetry("auth", 1)
        exporter = OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{port}", insecure=True,
            headers={"authorization": f"Bearer {token}"},
        )  # fmt: skip
        assert exporter.export(spans).name == "SUCCESS"
        exporter.shutdown()
        assert srv.receiver.counts["facts"] == 1


def test_an_unreachable_store_is_unavailable_with_retry_info(tmp_path: Path) -> None:
    port = free_port()  # nothing listens here: PostgreSQL is down
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres?connect_timeout=2"
    with live_server(replace(GRPC, store=url, retry_after=3)) as srv:
        error, status = refusal(srv.receiver.grpc_port, traces_pb(genai_spans("down", 1)))
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert "store is unavailable" in error.details()
        assert status.code == grpc.StatusCode.UNAVAILABLE.value[0]
        assert retry_delay(status) == 3
        # The Python SDK reads its delay from its own trailer; the same RetryInfo.
        trailers = dict(error.trailing_metadata())  # type: ignore[attr-defined]
        delay = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
        assert delay.retry_delay.seconds == 3


def test_the_sdk_exporter_retries_through_a_store_outage_after_its_retry_info(
    own_postgres: tuple[Path, str],
) -> None:
    """PostgreSQL stopped under a real gRPC exporter: UNAVAILABLE with RetryInfo; the exporter
    waits what it says, retries, and succeeds once PostgreSQL is back; nothing is stored twice."""
    folder, url = own_postgres
    with grpc_server(url, retry_after=3) as srv:
        spans, _ = sdk_telemetry("outage", 2)
        exporter = OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{srv.receiver.grpc_port}", insecure=True, timeout=120
        )
        subprocess.run(["bash", str(SCRIPT), "stop", "--dir", str(folder)], check=True)
        outcome: dict[str, Any] = {}

        def export() -> None:
            t0 = time.monotonic()
            outcome["result"] = exporter.export(spans).name
            outcome["seconds"] = time.monotonic() - t0

        sender = threading.Thread(target=export)
        sender.start()
        deadline = time.monotonic() + 30
        while srv.receiver.available and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not srv.receiver.available, "the outage was never met"
        assert start_postgres(folder) == url
        sender.join(120)
        exporter.shutdown()
        assert outcome["result"] == "SUCCESS"
        assert outcome["seconds"] >= 3  # it waited the RetryInfo delay at least once
        assert srv.receiver.counts["facts"] == 2
    with open_store(url) as s:
        assert s.count() == 2


def test_overload_is_resource_exhausted_with_retry_info(sqlite_store_url: str) -> None:
    """--max-inflight is one budget for both faces: an HTTP request whose body is half sent holds
    the one slot, and a gRPC call meanwhile is refused, retryably."""
    with grpc_server(sqlite_store_url, max_inflight=1, body_timeout=10) as srv:
        body = traces_pb(genai_spans("slow", 1))
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body[:10],
        )
        deadline = time.monotonic() + 5
        while srv.receiver.inflight < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        other = traces_pb(genai_spans("other", 1))
        error, status = refusal(srv.receiver.grpc_port, other)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "overloaded" in error.details()
        assert retry_delay(status) == 1
        s.sendall(body[10:])
        s.recv(4096)
        s.close()
        assert not call(srv.receiver.grpc_port, "traces", other).HasField("partial_success")
        assert srv.receiver.counts["facts"] == 2


def test_a_call_past_its_deadline_is_finished_and_the_writer_lives_on(
    sqlite_store_url: str,
) -> None:
    """A client's deadline cancels its call while the commit waits (another connection holds
    SQLite's write lock): the server still commits it, logs it, and takes the next call."""
    with grpc_server(sqlite_store_url) as srv:
        port = srv.receiver.grpc_port
        path = sqlite_path(sqlite_store_url)
        assert path is not None
        lock = sqlite3.connect(path, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        try:
            with (
                pytest.raises(grpc.RpcError) as info,
                grpc.insecure_channel(f"127.0.0.1:{port}") as channel,
            ):
                export = channel.unary_unary(f"/{SERVICES['traces']}/Export")
                export(traces_pb(genai_spans("late", 4)), timeout=1.5)
            assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        deadline = time.monotonic() + 30
        while srv.receiver.counts["facts"] < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.receiver.counts["facts"] == 4  # committed though nobody waited for it
        call(port, "traces", traces_pb(genai_spans("next", 4)))
        assert srv.receiver.counts["facts"] == 8


# -- nothing acknowledged is lost --------------------------------------------------------------


def _ids(tag: str, n: int) -> set[str]:
    return {sp.call_id for sp in genai_spans(tag, n)}


class Calls:
    """Clients making distinct Export calls until stopped: which were acknowledged."""

    def __init__(self, port: int, clients: int = 3) -> None:
        self.port = port
        self.acked: list[str] = []
        self.sent: list[str] = []
        self.lock, self.stopped = threading.Lock(), threading.Event()
        self.threads = [
            threading.Thread(target=self._client, args=(k,), daemon=True) for k in range(clients)
        ]
        for t in self.threads:
            t.start()

    def _client(self, k: int) -> None:
        i = 0
        while not self.stopped.is_set():
            tag = f"c{k}-{i}"
            i += 1
            with self.lock:
                self.sent.append(tag)
            try:
                call(self.port, "traces", traces_pb(genai_spans(tag, 16)))
            except grpc.RpcError:
                time.sleep(0.05)
                continue
            with self.lock:
                self.acked.append(tag)

    def wait(self, n: int) -> None:
        deadline = time.monotonic() + 60
        while len(self.acked) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.acked) >= n, f"{len(self.acked)} calls acknowledged"

    def stop(self) -> None:
        self.stopped.set()
        for t in self.threads:
            t.join(60)


def _stored_calls(url: str) -> set[str]:
    with open_store(url) as s:
        return {f.inference_call_id for f in s.iter_facts()}


def test_kill_9_loses_no_call_acknowledged_over_grpc(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'facts.db'}"
    log = tmp_path / "serve.log"
    port = free_port()
    srv = start_server(url, log, "--workers", "1", grpc_port=port)
    calls = Calls(port)
    calls.wait(8)
    srv.kill9()  # calls in flight
    calls.stop()
    path = sqlite_path(url)
    assert path is not None
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    srv = start_server(url, log, "--workers", "1", grpc_port=port)  # restarted, same store
    try:
        have = _stored_calls(url)
        for tag in calls.acked:
            assert _ids(tag, 16) <= have, f"acknowledged {tag} lost"
        for tag in calls.sent:  # each call all or nothing
            assert len(_ids(tag, 16) & have) in (0, 16), tag
    finally:
        assert srv.stop() == 0


def test_sigterm_finishes_the_calls_in_flight_and_exits_0(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'facts.db'}"
    port = free_port()
    srv = start_server(url, tmp_path / "serve.log", "--workers", "1", grpc_port=port)
    calls = Calls(port)
    calls.wait(6)
    assert srv.stop() == 0  # SIGTERM with calls in flight
    calls.stop()
    have = _stored_calls(url)
    for tag in calls.acked:
        assert _ids(tag, 16) <= have, f"acknowledged {tag} lost"
    [stopped] = srv.events("stopped")
    assert stopped["facts_stored"] == len(have)
    # What the server took it answered: nothing it stored was left unacknowledged but what a
    # client stopped waiting for (none here: the drain is well within the calls' deadline).
    assert have == set().union(*(_ids(t, 16) for t in calls.acked))


def test_grpc_can_be_turned_off(sqlite_store_url: str) -> None:
    with live_server(replace(BASE, store=sqlite_store_url), open_store(sqlite_store_url)) as srv:
        assert srv.receiver.grpc_port is None
        assert get(srv.port, "/health").json()["ports"]["grpc"] is None


def test_a_grpc_port_in_use_exits_1_and_says_why(tmp_path: Path) -> None:
    """gRPC's SO_REUSEPORT is off: a port another server holds (a Collector on 4317) is an
    error, never a port silently shared with it."""
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(LITHIFY), "serve", "--port", "0", "--grpc-port", str(port), "--workers", "0",
             "--store", f"sqlite://{tmp_path / 'f.db'}"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert '"event":"grpc_bind_failed"' in done.stderr
    assert "address already in use" in done.stderr
