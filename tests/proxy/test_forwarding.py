"""What goes up and what comes back, byte for byte, against an upstream whose every byte the test
chooses: path prefixes, headers, compressed and chunked bodies, size limits, and no open relay."""

from __future__ import annotations

import gzip
import socket
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from lithify.model import TextPart
from tests.proxy.helpers import (
    ProxyProcess,
    Scripted,
    Seen,
    Upstream,
    request,
    start_proxy,
    wait_calls,
)

PREFIX = "/gateway/openai"


def chat_answer(n: int, text: str = "Forty-two.") -> bytes:
    return orjson.dumps(
        {
            "id": f"chatcmpl-fwd{n}",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
    )  # fmt: skip


def reply(seen: Seen) -> Scripted:
    """The scripted upstream's answers, chosen by a header of the test's request."""
    n = int(seen.header("x-test-n") or 0)
    how = seen.header("x-test-how") or "plain"
    if how == "gzip":
        return Scripted(
            headers=[("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
            chunks=[gzip.compress(chat_answer(n))],
        )
    if how == "chunked":
        body = chat_answer(n)
        return Scripted(chunks=[body[:17], body[17:40], body[40:]], chunked=True)
    if how == "big":
        return Scripted(chunks=[chat_answer(n, "x" * 100_000)])
    return Scripted(
        headers=[("Content-Type", "application/json"), ("X-Request-Id", f"req-{n}"), ("Connection", "keep-alive, x-hop"), ("X-Hop", "1")],
        chunks=[chat_answer(n)],
    )  # fmt: skip


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with Upstream(reply) as u:
        yield u


@pytest.fixture(scope="module")
def evil() -> Iterator[Upstream]:
    """A server the proxy must never call: it is not configured."""
    with Upstream() as u:
        yield u


@pytest.fixture(scope="module")
def proxy(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    tmp: Path = tmp_path_factory.mktemp("fwd")
    p = start_proxy(
        tmp, {"openai": upstream.url + PREFIX}, "--max-record-size", "64KiB", "--max-body-size", "256KiB"
    )  # fmt: skip
    yield p
    assert p.stop() == 0


def call(
    proxy: ProxyProcess, n: int, how: str = "plain", **headers: str
) -> tuple[bytes, dict[str, str], bytes, int]:
    body = orjson.dumps(
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"question {n}"}]}
    )
    h = {"Content-Type": "application/json", "Authorization": "Bearer sk-test-0123456789abcdef0123", "X-Test-N": str(n), "X-Test-How": how, **headers}  # fmt: skip
    r = request(proxy.port, "POST", "/v1/chat/completions?api-version=2024-10-21", body, h)
    return body, r.headers, r.body, r.status


def test_the_path_prefix_query_headers_and_body_go_up_unchanged(
    proxy: ProxyProcess, upstream: Upstream
) -> None:
    before = len(upstream.seen)
    body, headers, got, status = call(
        proxy, 1,
        **{"Accept-Encoding": "br, gzip;q=0.8, zstd, compress", "Connection": "keep-alive, X-Drop-Me",
           "X-Drop-Me": "1", "Keep-Alive": "timeout=5", "Proxy-Authorization": "Basic Zm9vOmJhcg==",
           "X-Lithify-Session": "s-1", "X-Custom": "kept", "anthropic-beta": "kept-too"},
    )  # fmt: skip
    assert status == 200
    seen = upstream.seen[before]
    assert seen.path == PREFIX + "/v1/chat/completions?api-version=2024-10-21"
    assert seen.body == body
    names = [k.lower() for k, _ in seen.headers]
    for dropped in (
        "x-drop-me",
        "keep-alive",
        "proxy-authorization",
        "x-lithify-session",
        "x-test-none",
    ):
        assert dropped not in names
    assert seen.header("authorization") == "Bearer sk-test-0123456789abcdef0123"
    assert (seen.header("x-custom"), seen.header("anthropic-beta")) == ("kept", "kept-too")
    # compress is not offered upstream: the proxy records only what it can decode.
    assert seen.header("accept-encoding") == "br, gzip;q=0.8, zstd"
    assert seen.header("content-length") == str(len(body))
    assert seen.header("host") == upstream.url.removeprefix("http://")
    # Back: the body as sent, end-to-end headers as sent, hop-by-hop ones not.
    assert got == chat_answer(1)
    assert headers["x-request-id"] == "req-1"
    assert "x-hop" not in headers
    assert headers["server"].startswith("BaseHTTP/")  # the upstream's, not the proxy's
    (fact,) = wait_calls(proxy.store, {"chatcmpl-fwd1"})
    assert fact.session_id == "s-1"


def test_compressed_and_chunked_answers_pass_as_they_are_and_are_recorded(
    proxy: ProxyProcess,
) -> None:
    _, headers, got, status = call(proxy, 2, "gzip", **{"Accept-Encoding": "gzip"})
    assert status == 200
    assert headers["content-encoding"] == "gzip"
    assert got[:2] == b"\x1f\x8b" and gzip.decompress(got) == chat_answer(2)  # still compressed
    _, headers, got, status = call(proxy, 3, "chunked")
    assert (status, headers.get("transfer-encoding"), got) == (200, "chunked", chat_answer(3))
    facts = wait_calls(proxy.store, {"chatcmpl-fwd2", "chatcmpl-fwd3"})
    for f in facts:
        assert f.output_messages[0].parts == [TextPart("Forty-two.")]


def test_size_limits(proxy: ProxyProcess, upstream: Upstream) -> None:
    before = proxy.health()["not_recorded"].get("too_large", 0)
    _, _, got, status = call(proxy, 4, "big")
    assert status == 200 and got == chat_answer(4, "x" * 100_000)  # passed, not recorded
    h = proxy.health()
    assert h["not_recorded"]["too_large"] == before + 1
    assert h["recording"] == "degraded"  # something went unrecorded: health says so
    n = len(upstream.seen)
    huge = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "y" * 300_000}]})
    r = request(
        proxy.port, "POST", "/v1/chat/completions", huge, {"Content-Type": "application/json"}
    )
    assert r.status == 413 and r.headers["x-lithify-proxy-error"] == "too_large"
    assert r.json()["error"]["message"].startswith("lithify proxy:")
    assert len(upstream.seen) == n  # never forwarded


def test_no_open_relay(proxy: ProxyProcess, upstream: Upstream, evil: Upstream) -> None:
    n = len(upstream.seen)
    evil_host = evil.url.removeprefix("http://")
    refused = [
        ("POST", "/v1/messages", 404),  # a route whose upstream is not configured
        ("POST", "/v1beta/models/gemini-2.5-flash:generateContent", 404),
        ("POST", "/v1/embeddings", 404),  # not a model call the proxy records
        ("POST", "/v2/chat/completions", 404),
        ("POST", "/v1/chat/completions/../../admin", 404),
        ("POST", "/", 404),
        ("GET", "/v1/chat/completions", 405),
        ("DELETE", "/v1/responses", 405),
    ]
    for method, path, code in refused:
        r = request(
            proxy.port, method, path, b"{}", {"Host": evil_host, "Content-Type": "application/json"}
        )
        assert r.status == code, (method, path, r)
        assert "x-lithify-proxy-error" in r.headers
    # An absolute-form target naming another host goes to the configured upstream, if anywhere.
    for line in (f"POST {evil.url}/v1/chat/completions HTTP/1.1", f"CONNECT {evil_host} HTTP/1.1"):
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
            s.sendall(
                f"{line}\r\nHost: {evil_host}\r\nContent-Length: 2\r\nX-Test-N: 9\r\n\r\n{{}}".encode()
            )
            status_line = s.recv(65536).split(b"\r\n", 1)[0]
        assert status_line.split()[1] in (b"200", b"400", b"404", b"405"), status_line
    assert evil.seen == []
    assert all(s.path.startswith(PREFIX + "/v1/chat/completions") for s in upstream.seen[n:])
    refused_counts = proxy.health()["refused"]
    assert refused_counts["no_upstream"] >= 2 and refused_counts["no_route"] >= 4


def test_the_path_routed_on_is_the_path_forwarded(proxy: ProxyProcess, upstream: Upstream) -> None:
    """Routes match the path as sent, not percent-decoded: `/v1/chat%2Fcompletions` would have
    matched the chat route and been forwarded as written. A dot segment where Vertex AI's path
    names a project or location is no route either."""
    n = len(upstream.seen)
    for path in (
        "/v1/chat%2Fcompletions",
        "/v1/%63hat/completions",
        "/v1beta/models/gemini-2.5-flash%3AgenerateContent",
        "/v1/projects/../locations/x/publishers/google/models/m:generateContent",
    ):
        r = request(proxy.port, "POST", path, b"{}", {"Content-Type": "application/json"})
        assert r.status == 404 and r.headers["x-lithify-proxy-error"] == "no_route", path
        assert path in r.json()["error"]["message"]
    assert len(upstream.seen) == n
    proxy.wait_event(
        "refused",
        lambda e: (e.get("reason"), e.get("path")) == ("no_route", "/v1/chat%2Fcompletions"),
    )


def test_request_heads_are_bounded(proxy: ProxyProcess, upstream: Upstream) -> None:
    n = len(upstream.seen)
    big = {"x-big": "v" * 70_000, "Content-Type": "application/json"}
    many = {f"x-h{i}": "1" for i in range(101)}
    for headers in (big, many):
        r = request(proxy.port, "POST", "/v1/chat/completions", b"{}", headers)
        assert r.status == 431 and r.headers["x-lithify-proxy-error"] == "headers_too_large"
        assert r.json()["error"]["message"].startswith("lithify proxy: the request head")
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
    assert s.recv(65536).startswith(b"HTTP/1.1 400 ")
    s.close()
    assert len(upstream.seen) == n
    assert proxy.health()["refused"]["headers_too_large"] >= 2


def test_a_client_gone_with_requests_pipelined_logs_no_error(
    proxy: ProxyProcess, upstream: Upstream
) -> None:
    body = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    one = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body
    )
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
            s.sendall(one + one)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
    assert request(proxy.port, "GET", "/lithify/health").status == 200
    errors = [e for e in proxy.events() if e["level"] == "error"]
    assert errors == []
