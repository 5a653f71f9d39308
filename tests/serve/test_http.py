"""The OTLP/HTTP contract of `lithify serve`: statuses, bodies, encodings, limits, feedback."""

from __future__ import annotations

import contextlib
import gzip
import logging
import socket
import time
import zlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import msgspec
import orjson
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from lithify.ingest._server import HeadLimits
from lithify.ingest.processing import REJECTED, _guarded, inflate
from lithify.ingest.receiver import ServeConfig
from lithify.model import InferenceCall, Skip
from lithify.store import FactStore, open_store
from lithify.translate import translate_document, translate_protobuf
from tests.http_client import request
from tests.serve.conftest import BASE
from tests.serve.helpers import (
    JSON,
    PB,
    LiveServer,
    evaluation_logs_pb,
    genai_spans,
    get,
    live_server,
    other_span,
    post,
    status_message,
    traces_json_doc,
    traces_pb,
)


def _b(x: object) -> object:
    return msgspec.to_builtins(x)


def _trace_response(body: bytes) -> ExportTraceServiceResponse:
    return ExportTraceServiceResponse.FromString(body)


# -- success -----------------------------------------------------------------------------------


def test_protobuf_traces_are_stored_as_convert_gives_them(
    server: LiveServer, store: FactStore
) -> None:
    body = traces_pb([*genai_spans("pb", 3), other_span("pb")])
    r = post(server.port, "/v1/traces", body)
    assert r.status == 200
    assert r.headers["content-type"] == PB
    assert not _trace_response(r.body).HasField("partial_success")  # full success: unset
    expected = [x for x in translate_protobuf(body, "otlp-traces") if isinstance(x, InferenceCall)]
    stored = sorted(store.iter_facts(), key=lambda f: f.inference_call_id)
    assert len(stored) == 3  # the HTTP span is accepted, and gives no fact
    assert [_b(f) for f in stored] == [
        _b(f) for f in sorted(expected, key=lambda f: f.inference_call_id)
    ]


def test_json_traces_give_the_same_facts_as_protobuf(server: LiveServer, store: FactStore) -> None:
    spans = genai_spans("same", 2)
    doc = traces_json_doc(spans)
    r = post(server.port, "/v1/traces", orjson.dumps(doc), JSON)
    assert (r.status, r.headers["content-type"], r.body) == (200, JSON, b"{}")
    expected = {f.inference_call_id: _b(f) for f in translate_document(doc, "otlp-traces")}  # type: ignore[union-attr]
    assert {f.inference_call_id: _b(f) for f in store.iter_facts()} == expected
    # The same spans in protobuf: the same identities, so nothing new is stored.
    r = post(server.port, "/v1/traces", traces_pb(spans))
    assert r.status == 200
    assert store.count() == 2
    assert set(expected) == {s.call_id for s in spans}


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate", "identity"])
def test_content_encodings(server: LiveServer, store: FactStore, encoding: str) -> None:
    spans = genai_spans(f"enc-{encoding}", 2)
    raw = traces_pb(spans)
    body, header = {
        "gzip": (gzip.compress(raw), "gzip"),
        "deflate": (zlib.compress(raw), "deflate"),
        "raw-deflate": (zlib.compress(raw, wbits=-15), "deflate"),
        "identity": (raw, "identity"),
    }[encoding]
    r = post(server.port, "/v1/traces", body, headers={"Content-Encoding": header})
    assert r.status == 200, r.body
    assert store.count() == 2


def test_gzip_json_and_several_gzip_members(server: LiveServer, store: FactStore) -> None:
    doc = orjson.dumps(traces_json_doc(genai_spans("gz-json", 2)))
    half = len(doc) // 2
    body = gzip.compress(doc[:half]) + gzip.compress(doc[half:])  # concatenated members
    r = post(server.port, "/v1/traces", body, JSON, headers={"Content-Encoding": "gzip"})
    assert r.status == 200, r.body
    assert store.count() == 2


def test_empty_requests_succeed_and_store_nothing(server: LiveServer, store: FactStore) -> None:
    for body, ctype in ((b"", PB), (b"{}", JSON), (b'{"resourceSpans": []}', JSON)):
        r = post(server.port, "/v1/traces", body, ctype)
        assert r.status == 200, (body, r.body)
    assert post(server.port, "/v1/logs", b"", PB).status == 200
    assert store.count() == 0


def test_logs_give_facts_and_evaluation_events_give_feedback(
    server: LiveServer, store: FactStore
) -> None:
    [span] = genai_spans("eval", 1)
    assert post(server.port, "/v1/traces", traces_pb([span])).status == 200
    r = post(server.port, "/v1/logs", evaluation_logs_pb(span.trace_id, span.span_id, "rel", 0.9))
    assert r.status == 200
    assert r.headers["content-type"] == PB
    assert not ExportLogsServiceResponse.FromString(r.body).HasField("partial_success")
    [fb] = list(store.iter_feedback())
    assert (fb.target_kind, fb.target_id, fb.name, fb.value) == ("call", span.call_id, "rel", 0.9)
    # A redelivery is the same feedback fact.
    post(server.port, "/v1/logs", evaluation_logs_pb(span.trace_id, span.span_id, "rel", 0.9))
    assert store.count_feedback() == 1


# -- partial success ---------------------------------------------------------------------------


def test_non_object_spans_are_rejected_and_the_rest_stored(
    server: LiveServer, store: FactStore
) -> None:
    doc = traces_json_doc(genai_spans("partial", 2))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"] += [17, "not a span"]
    r = post(server.port, "/v1/traces", orjson.dumps(doc), JSON)
    assert r.status == 200
    partial = r.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "2"  # int64 in proto3 JSON: a string
    assert partial["errorMessage"].startswith("2 spans could not be decoded: resourceSpans[0]")
    assert store.count() == 2


def test_spans_without_content_are_stored_with_their_metadata_and_a_warning(
    server: LiveServer, store: FactStore
) -> None:
    """Capture off, or the content on log events: each span is kept as a capture of its call
    holding the metadata only (content_not_captured), and the sender is told."""
    r = post(server.port, "/v1/traces", traces_pb(genai_spans("bare", 2, content=False)))
    assert r.status == 200
    resp = _trace_response(r.body)
    assert resp.HasField("partial_success")
    assert resp.partial_success.rejected_spans == 0  # a warning, not a rejection
    message = resp.partial_success.error_message
    assert "2 model-call spans carried no message content: stored with their metadata" in message
    assert "send the application's OTLP logs here too" in message  # what to do about it
    assert store.count() == 2


def test_a_translation_defect_becomes_a_counted_skip_not_a_crash() -> None:
    """What the receiver counts as rejected when a translator raises: the guard turns the
    exception into a translator_error skip after the results it had already given."""

    def failing() -> Iterator[object]:
        yield "first"
        raise KeyError("boom")

    out = list(_guarded(failing()))
    assert out[0] == "first"
    assert isinstance(out[1], Skip) and out[1].reason == "translator_error"
    assert "KeyError" in out[1].detail and out[1].reason in REJECTED


# -- failures ------------------------------------------------------------------------------------


def test_malformed_and_truncated_bodies_get_400_with_a_readable_status(
    server: LiveServer, store: FactStore
) -> None:
    good = traces_pb(genai_spans("trunc", 3))
    cases = [
        (b"\xff\xfe not protobuf", PB, {}, "not an OTLP protobuf trace request"),
        (good[: len(good) // 2], PB, {}, "not an OTLP protobuf trace request"),
        (b'{"resourceSpans": [', JSON, {}, "not valid JSON"),
        (b'{"hello": "world"}', JSON, {}, "no resourceSpans list"),
        (b"[1, 2]", JSON, {}, "a JSON object"),
        (b"\x1f\x8b garbage", PB, {"Content-Encoding": "gzip"}, "not valid gzip"),
        (gzip.compress(good)[:-12], PB, {"Content-Encoding": "gzip"}, "truncated"),
    ]
    for body, ctype, headers, words in cases:
        r = post(server.port, "/v1/traces", body, ctype, headers)
        assert r.status == 400, (body[:30], r.status, r.body)
        assert r.headers["content-type"] == ctype  # the Status in the request's encoding
        assert words in status_message(r), (words, status_message(r))
    assert store.count() == 0
    # A logs body sent to the traces path is not a trace request.
    r = post(server.port, "/v1/traces", b'{"resourceLogs": []}', JSON)
    assert r.status == 400


def test_unsupported_content_type_and_encoding_get_415(server: LiveServer) -> None:
    for ctype in ("text/plain", "application/xml", None):
        r = post(server.port, "/v1/traces", b"{}", ctype)
        assert r.status == 415
        assert "application/x-protobuf or application/json" in status_message(r)
    r = post(server.port, "/v1/traces", b"{}", JSON, headers={"Content-Encoding": "br"})
    assert r.status == 415
    assert "Content-Encoding 'br'" in status_message(r)
    # Parameters are fine.
    assert post(server.port, "/v1/traces", b"{}", "application/json; charset=utf-8").status == 200


def test_routes_and_methods(server: LiveServer) -> None:
    assert post(server.port, "/v1/metrics", b"", PB).status == 404
    assert get(server.port, "/v1/traces").status == 405
    health = get(server.port, "/health")
    assert health.status == 200 and health.json()["status"] == "ok"
    ready = get(server.port, "/health/ready")
    assert ready.status == 200
    doc = ready.json()
    assert doc["status"] == "ready" and doc["store"]["available"] is True
    assert doc["auth"] == "open"


# -- limits --------------------------------------------------------------------------------------


@pytest.fixture
def small(sqlite_store_url: str) -> LiveServer:
    config = replace(BASE, store=sqlite_store_url, max_body_size=64 * 1024)
    with live_server(config, open_store(sqlite_store_url)) as srv:
        yield srv  # type: ignore[misc]


def test_a_body_over_the_limit_gets_413(small: LiveServer, sqlite_store_url: str) -> None:
    body = traces_pb(genai_spans("big", 400))
    assert len(body) > 64 * 1024
    r = post(small.port, "/v1/traces", body)
    assert r.status == 413
    assert "larger than the 65536-byte limit" in status_message(r)
    # Exactly at the limit is taken.
    doc = orjson.dumps(traces_json_doc(genai_spans("fits", 1)))
    padded = doc[:-1] + b" " * (64 * 1024 - len(doc)) + b"}"
    assert len(padded) == 64 * 1024
    assert post(small.port, "/v1/traces", padded, JSON).status == 200
    with open_store(sqlite_store_url) as s:
        assert s.count() == 1


def test_a_gzip_bomb_gets_413_on_its_decompressed_size(small: LiveServer) -> None:
    bomb = gzip.compress(b"\x00" * (50 * 1024 * 1024))
    assert len(bomb) < 64 * 1024
    t0 = time.perf_counter()
    r = post(small.port, "/v1/traces", bomb, headers={"Content-Encoding": "gzip"})
    assert r.status == 413
    assert "decompressed body is larger than the 65536-byte limit" in status_message(r)
    assert time.perf_counter() - t0 < 5  # cut off at the limit, not inflated whole
    assert inflate(gzip.compress(b"x" * 100), "gzip", 100) == b"x" * 100


def _raw(port: int, head: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(head)
    return s


def _read_status(s: socket.socket) -> tuple[int, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1]), data


def test_a_chunked_body_is_cut_off_as_it_arrives(small: LiveServer) -> None:
    """No Content-Length: the limit is checked on the bytes received, and the 413 comes while
    the client is still sending (the body never ends here)."""
    s = _raw(
        small.port,
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n",
    )
    chunk = b"\x00" * 16384
    for _ in range(6):  # 96 KiB > 64 KiB, and no terminating chunk
        s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    status, data = _read_status(s)
    s.close()
    assert status == 413, data[:200]


def test_too_many_requests_in_flight_get_429_with_retry_after(sqlite_store_url: str) -> None:
    config = replace(BASE, store=sqlite_store_url, max_inflight=1, body_timeout=10)
    with live_server(config, open_store(sqlite_store_url)) as srv:
        body = traces_pb(genai_spans("slow", 1))
        # A request admitted, its body only half sent: it holds the one slot.
        s = _raw(
            srv.port,
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body[:10],
        )
        deadline = time.monotonic() + 5
        while srv.receiver.inflight < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        r = post(srv.port, "/v1/traces", traces_pb(genai_spans("other", 1)))
        assert r.status == 429
        assert r.headers["retry-after"] == "1"
        assert "overloaded" in status_message(r)
        s.sendall(body[10:])  # the first one completes and is stored
        status, _ = _read_status(s)
        s.close()
        assert status == 200
        assert post(srv.port, "/v1/traces", traces_pb(genai_spans("other", 1))).status == 200


def test_slow_bodies_time_out_with_408(sqlite_store_url: str) -> None:
    config = replace(BASE, store=sqlite_store_url, body_timeout=0.5)
    with live_server(config, open_store(sqlite_store_url)) as srv:
        s = _raw(
            srv.port,
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{",
        )
        status, _ = _read_status(s)
        s.close()
        assert status == 408


def test_an_unreachable_store_gives_503_and_not_ready(tmp_path: Path) -> None:
    """PostgreSQL that cannot be reached at startup: the receiver starts anyway, answers 503
    with Retry-After, and reports not ready."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once closed
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres?connect_timeout=2"
    with live_server(replace(BASE, store=url)) as srv:
        r = post(srv.port, "/v1/traces", traces_pb(genai_spans("down", 1)))
        assert r.status == 503
        assert r.headers["retry-after"] == "1"
        assert "store is unavailable" in status_message(r)
        ready = get(srv.port, "/health/ready")
        assert ready.status == 503
        assert ready.json()["store"]["available"] is False
        assert get(srv.port, "/health").status == 200  # alive all the same


# -- feedback ------------------------------------------------------------------------------------


def test_feedback_documents(server: LiveServer, store: FactStore) -> None:
    one = {"target": {"kind": "session", "id": "s-1"}, "name": "thumbs", "value": True}
    r = post(server.port, "/v1/feedback", orjson.dumps(one), JSON)
    assert r.status == 200
    assert r.json() == {"stored": 1, "duplicates": 0, "rejected": 0, "errors": []}
    r = post(server.port, "/v1/feedback", orjson.dumps(one), JSON)
    assert r.json()["duplicates"] == 1
    batch = [
        {"session_id": "s-2", "name": "score", "value": 0.5},
        {"session_id": "s-2", "name": "score"},  # no value
    ]
    r = post(server.port, "/v1/feedback", orjson.dumps(batch), JSON)
    assert r.status == 200
    doc = r.json()
    assert (doc["stored"], doc["rejected"]) == (1, 1)
    assert doc["errors"][0].startswith("item 1:")
    [fb] = [f for f in store.iter_feedback() if f.target_id == "s-2"]
    assert (fb.source, fb.value) == ("http", 0.5)
    assert store.count_feedback() == 2

    r = post(server.port, "/v1/feedback", orjson.dumps([{"name": "x"}]), JSON)
    assert r.status == 400 and "no valid feedback" in status_message(r)
    assert post(server.port, "/v1/feedback", b"{nope", JSON).status == 400
    assert post(server.port, "/v1/feedback", b"{}", PB).status == 415
    assert store.count_feedback() == 2


def test_each_request_is_logged_as_one_structured_event(
    server: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="lithify.serve"):
        post(server.port, "/v1/traces", traces_pb([*genai_spans("log", 2), other_span("log")]))
        post(server.port, "/v1/traces", traces_pb(genai_spans("log", 2)))
        post(server.port, "/v1/traces", b"junk", JSON)
    events = [r.fields for r in caplog.records if r.getMessage() == "request"]  # type: ignore[attr-defined]
    assert [e["status"] for e in events] == [200, 200, 400]
    first, second, bad = events
    assert (first["units"], first["facts"], first["duplicates"]) == (3, 2, 0)
    assert first["skipped"] == {"not_genai": 1}
    assert (second["facts"], second["duplicates"]) == (0, 2)
    assert bad["error"].startswith("the body is not valid JSON")
    assert all(isinstance(e["latency_ms"], float) for e in events)


def test_the_default_config_is_the_specifications() -> None:
    c = ServeConfig()
    assert (c.host, c.port, c.max_body_size) == ("127.0.0.1", 4318, 20 * 1024 * 1024)


# -- hostile and broken input (issue 13) ---------------------------------------------------------


def test_a_wrong_shaped_body_is_a_400_that_says_where(
    server: LiveServer, store: FactStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Never a 500, never a 200 that took nothing: each is logged and answered with a Status."""
    cases = [
        ("/v1/traces", b'{"resourceSpans":[{"scopeSpans":1.5}]}', "resourceSpans[0].scopeSpans is a number"),
        ("/v1/traces", b'{"resourceSpans":[{"scopeSpans":true}]}', "resourceSpans[0].scopeSpans is true"),
        ("/v1/logs", b'{"resourceLogs":[{"scopeLogs":7}]}', "resourceLogs[0].scopeLogs is a number"),
        ("/v1/traces", b'{"resourceSpans":[{"scopeSpans":"ab"}]}', "resourceSpans[0].scopeSpans is a string"),
        ("/v1/traces", b'{"resourceSpans":[{"scopeSpans":[{"spans":3}]}]}', "spans is a number, not a list"),
        ("/v1/traces", b'"ab"', "the request is a string, not a JSON object"),
    ]  # fmt: skip
    with caplog.at_level(logging.INFO, logger="lithify.serve"):
        for path, body, where in cases:
            r = post(server.port, path, body, JSON)
            assert r.status == 400, (body, r)
            assert status_message(r).startswith("not an OTLP/JSON"), r.body
            assert where in status_message(r), (where, r.body)
    logged = [r.fields["status"] for r in caplog.records if r.getMessage() == "request"]  # type: ignore[attr-defined]
    assert logged == [400] * len(cases)
    assert store.count() == 0


def test_one_bad_string_costs_no_span_of_its_batch(server: LiveServer, store: FactStore) -> None:
    spans = genai_spans("utf8", 5)
    pb = traces_pb(spans).replace(b"question utf8-2", b"question\xffutf8-2")
    r = post(server.port, "/v1/traces", pb)
    assert r.status == 200
    partial = _trace_response(r.body).partial_success
    assert partial.rejected_spans == 0  # all taken; the repair is a warning
    assert "1 spans held text that was not valid UTF-8" in partial.error_message
    js = orjson.dumps(traces_json_doc(genai_spans("surrogate", 5)))
    js = js.replace(b"question surrogate-2", b"question \\udc80 surrogate-2")
    r = post(server.port, "/v1/traces", js, JSON)
    assert r.status == 200 and "rejectedSpans" not in r.json()["partialSuccess"]
    assert store.count() == 10
    damaged = [f for f in store.iter_facts() if f.degradations.get("invalid_text")]
    assert len(damaged) == 2


def test_a_span_that_cannot_be_taken_is_rejected_alone(
    server: LiveServer, store: FactStore
) -> None:
    """Rejected spans are counted and named (partial success); the others are stored."""
    doc = traces_json_doc(genai_spans("deep", 3))
    deep: dict[str, object] = {"stringValue": "x"}
    for _ in range(40):
        deep = {"arrayValue": {"values": [deep]}}
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["attributes"].append(
        {"key": "deep", "value": deep}
    )
    r = post(server.port, "/v1/traces", orjson.dumps(doc), JSON)
    assert r.status == 200
    partial = r.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert partial["errorMessage"] == (
        "1 spans could not be decoded: resourceSpans[0].scopeSpans[0].spans[1]: a value "
        "nested deeper than 32 levels"
    )
    assert store.count() == 2


def test_paths_with_a_trailing_slash_are_404_never_a_redirect(server: LiveServer) -> None:
    r = request(
        server.port, "POST", "/v1/traces/", b"{}", {"Host": "evil.example", "Content-Type": JSON}
    )
    assert r.status == 404 and "location" not in r.headers
    assert "no endpoint /v1/traces/" in r.json()["message"]
    r = request(server.port, "PUT", "/v1/traces", b"{}", {"Content-Type": JSON})
    assert r.status == 405 and r.headers["allow"] == "POST"
    assert r.json() == {"code": 12, "message": "PUT /v1/traces: use POST"}


def test_x_gzip_is_gzip(server: LiveServer, store: FactStore) -> None:
    body = gzip.compress(traces_pb(genai_spans("xgzip", 2)))
    r = post(server.port, "/v1/traces", body, headers={"Content-Encoding": "x-gzip"})
    assert r.status == 200
    assert store.count() == 2


@pytest.mark.parametrize("coding", [b"gzip, chunked", b"deflate,chunked", b"x-gzip, chunked"])
def test_a_transfer_coding_other_than_chunked_is_400(server: LiveServer, coding: bytes) -> None:
    """llhttp reads `gzip, chunked` as plain chunked and would pass compressed bytes on as the
    body: refused before the app sees it (OTLP/HTTP: a request that cannot be decoded)."""
    body = gzip.compress(traces_pb(genai_spans("te", 1)))
    s = _raw(
        server.port,
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Transfer-Encoding: " + coding + b"\r\n\r\n%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n",
    )
    status, data = _read_status(s)
    s.close()
    assert status == 400, data
    assert b"is not supported" in data and b"connection: close" in data.lower()


def test_request_heads_are_bounded_in_size_fields_and_time(sqlite_store_url: str) -> None:
    limits = HeadLimits(max_bytes=8 * 1024, max_fields=20, timeout=0.5)
    config = replace(BASE, store=sqlite_store_url, head=limits)
    with live_server(config, open_store(sqlite_store_url)) as srv:
        body = traces_pb(genai_spans("head", 1))
        fits = {f"x-f{i}": "v" * 500 for i in range(15)}  # with http.client's, 19 fields, 7.6 KB
        assert post(srv.port, "/v1/traces", body, headers=fits).status == 200
        big = post(srv.port, "/v1/traces", body, headers={"x-big": "v" * 9000})
        many = post(srv.port, "/v1/traces", body, headers={f"x-{i}": "1" for i in range(25)})
        for r in (big, many):
            assert r.status == 431, r
            assert r.json()["message"].startswith("the request head is larger than 8192 bytes")
        # A head that never ends: refused once the bound is passed, while it is still arriving.
        s = _raw(srv.port, b"POST /v1/traces HTTP/1.1\r\nX-Long: ")
        sent = 0
        with contextlib.suppress(OSError):
            while sent < 10 * 1024 * 1024:
                s.sendall(b"a" * 65536)
                sent += 65536
        status, _ = _read_status(s)
        s.close()
        assert status == 431 and sent < 10 * 1024 * 1024
        # A head that arrives too slowly: 408; a connection that sends nothing is closed.
        t0 = time.monotonic()
        s = _raw(srv.port, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
        status, _ = _read_status(s)
        s.close()
        assert status == 408 and 0.4 < time.monotonic() - t0 < 5
        idle = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        assert idle.recv(100) == b""
        idle.close()
        assert get(srv.port, "/health").status == 200


def test_spans_that_share_a_response_id_but_not_content_are_two_calls(
    server: LiveServer, store: FactStore
) -> None:
    # A server that names every response alike (a constant id): two spans, two questions.
    a, b = genai_spans("collide", 2)
    b = replace(b, attrs=[(k, "resp-same" if k == "gen_ai.response.id" else v) for k, v in b.attrs])
    a = replace(a, attrs=[(k, "resp-same" if k == "gen_ai.response.id" else v) for k, v in a.attrs])
    assert post(server.port, "/v1/traces", traces_pb([a])).status == 200
    assert post(server.port, "/v1/traces", traces_pb([b])).status == 200
    assert store.count() == 2
    totals = orjson.loads(get(server.port, "/health").body)
    assert (totals["facts_stored"], totals["variants"], totals["id_collisions"]) == (2, 0, 1)
    assert store.stats().id_collisions == 1


def test_a_request_of_more_units_than_its_size_allows_is_413(small: LiveServer) -> None:
    """An empty span is two bytes on the wire and hundreds decoded: a request may hold one
    span (with its resources and scopes) per 256 bytes of --max-body-size, counted before any
    is decoded."""
    most = 64 * 1024 // 256
    for encoding in ("protobuf", "json"):
        for n, status in ((most - 2, 200), (most - 1, 413), (20_000, 413)):
            if encoding == "protobuf":
                req = ExportTraceServiceRequest()
                ss = req.resource_spans.add().scope_spans.add()
                for _ in range(n):
                    ss.spans.add()
                body, ctype = req.SerializeToString(), PB
            else:
                spans = b",".join([b"{}"] * n)
                body, ctype = (
                    b'{"resourceSpans":[{"scopeSpans":[{"spans":[' + spans + b"]}]}]}",
                    JSON,
                )
            r = post(small.port, "/v1/traces", body, ctype)
            assert r.status == status, (encoding, n, r)
            if status == 413:
                assert f"more than {most} trace messages" in status_message(r)
