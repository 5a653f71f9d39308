"""What a recording may lose, and must not lose silently: streams cut by a stop, by a client or an
upstream, streams labelled as something else, bodies too large or unreadable, a spool that
filled up. Each call goes through a real SDK (or, for wire forms no SDK sends, a raw client) to
a real `lithify proxy`, in front of an upstream speaking the exact wire bytes."""

from __future__ import annotations

import gzip
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from lithify.ingest.spool import SpoolReader, SpoolWriter
from lithify.model import InferenceCall, ReasoningPart, TextPart, ToolCallPart
from tests.fakes import FakeProvider, answer, wire
from tests.fakes.answers import Call
from tests.proxy.conftest import through, upstreams_of
from tests.proxy.helpers import (
    ProxyProcess,
    Scripted,
    Seen,
    Upstream,
    raw_stream,
    request,
    start_proxy,
    stored_facts,
    wait_calls,
)
from tests.test_provider_sdks import CUT_ERRORS, _anthropic, _openai

LONG = "The quick brown fox jumps over the lazy dog. " * 8
GEMINI = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
WEATHER = Call.of("get_weather", {"city": "Paris"})


def wire_events(provider: str, request_doc: dict[str, Any], key: str) -> list[wire.Event]:
    a = answer(LONG, reasoning=["Paris first, then answer."], calls=[WEATHER])
    model = str(request_doc.get("model") or "gemini-2.5-flash")
    return wire.events(provider, wire.Ctx(request_doc, a, key, model, wire.CREATED))


def sse(provider: str, request_doc: dict[str, Any], key: str) -> bytes:
    return b"".join(wire.sse_text(provider, wire_events(provider, request_doc, key)))


def reply(seen: Seen) -> Scripted:
    """Answers chosen by the test's ``x-test-how`` header, keyed by ``x-test-key``."""
    how = seen.header("x-test-how") or ""
    key = seen.header("x-test-key") or "k"
    if seen.header("content-encoding") not in (None, "gzip"):
        return Scripted(chunks=[b"{}"])
    doc = orjson.loads(gzip.decompress(seen.body) if seen.header("content-encoding") else seen.body)
    if how.startswith("gemini-array"):
        chunks = [data for _, data in wire_events(wire.GEMINI, doc, key)]
        # Streamed as the Gemini API streams it: "[", then each element, ",\r\n" between them.
        pieces = [b"[" + orjson.dumps(chunks[0])] + [b",\r\n" + orjson.dumps(c) for c in chunks[1:]]
        if how == "gemini-array-slow":
            return Scripted(chunks=[*pieces, b"]"], chunked=True, delay=0.2)
        return Scripted(chunks=[*pieces[:6], pieces[6][:20]], chunked=True, cut=True)
    if how.startswith("sse-as:"):  # a stream labelled with another content type
        kind = wire.CHAT if "chat" in seen.path else wire.ANTHROPIC
        ctype = how.removeprefix("sse-as:")
        headers = [("Content-Type", ctype)] if ctype else []
        return Scripted(headers=headers, chunks=[sse(kind, doc, key)], chunked=True)
    if how == "anthropic-odd":
        # CRLF line ends, comments and pings between events, gzip, split at every 7th byte.
        body = sse(wire.ANTHROPIC, doc, key).replace(b"\n", b"\r\n")
        body = b": hello\r\n\r\n" + body.replace(
            b"\r\n\r\n",
            b'\r\n\r\n: keep-alive\r\n\r\nevent: ping\r\ndata: {"type": "ping"}\r\n\r\n',
        )
        packed = gzip.compress(body)
        return Scripted(
            headers=[("Content-Type", "text/event-stream"), ("Content-Encoding", "gzip")],
            chunks=[packed[i : i + 7] for i in range(0, len(packed), 7)],
            chunked=True,
        )
    if how == "big-headers":  # a gateway's trace header of 20 KB, and 150 more headers
        body = wire.body(wire.CHAT, wire.Ctx(doc, answer(LONG), key, "gpt-4o-mini", wire.CREATED))
        headers = [("X-Gateway-Trace", "t" * 20_000), ("Content-Type", "application/json")]
        headers += [(f"X-Debug-{i}", str(i)) for i in range(150)]
        return Scripted(headers=headers, chunks=[orjson.dumps(body)])
    if how == "big":
        big = answer("x" * 100_000)
        body = wire.body(wire.CHAT, wire.Ctx(doc, big, key, "gpt-4o-mini", wire.CREATED))
        return Scripted(chunks=[orjson.dumps(body)])
    return Scripted(chunks=[b"{}"])


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with Upstream(reply) as u:
        yield u


@pytest.fixture(scope="module")
def proxy(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    tmp: Path = tmp_path_factory.mktemp("losses")
    urls = {"openai": upstream.url, "anthropic": upstream.url, "gemini": upstream.url}
    p = start_proxy(tmp, urls, "--max-record-size", "64KiB")
    yield p
    assert p.stop() == 0


def _parts(fact: InferenceCall) -> list[type]:
    return [type(p) for p in fact.output_messages[0].parts]


def _text(fact: InferenceCall) -> str:
    return "".join(p.content for p in fact.output_messages[0].parts if isinstance(p, TextPart))


# -- streams cut short --------------------------------------------------------------------------


def test_a_stream_cut_by_the_shutdown_timeout_is_recorded_as_far_as_it_got(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """A stream still running when --shutdown-timeout runs out is cut; what it had delivered
    was neither spooled nor counted (the cancellation went straight through)."""
    p = start_proxy(tmp_path, upstreams_of(fake), "--shutdown-timeout", "1")
    fake.reset()
    fake.id_prefix = "stop-"
    fake.script(answer(LONG, reasoning=["Think first."], event_delay=0.15))
    client = _anthropic(through(fake, p.url))
    stream = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=999, stream=True,
        messages=[{"role": "user", "content": "Go"}],
    )  # fmt: skip
    events = iter(stream)
    for _ in range(6):
        next(events)
    p.proc.send_signal(signal.SIGTERM)
    with pytest.raises(CUT_ERRORS["anthropic"]):
        for _ in events:
            pass
    assert p.proc.wait(60) == 0
    (fact,) = [f for f in stored_facts(p.store) if f.model_call_id == "msg_stop-0001"]
    assert fact.degradations["truncated_stream"] == 1
    assert fact.output_messages[0].parts[0] == ReasoningPart("Think first.")
    assert LONG.startswith(_text(fact)) and len(_text(fact)) < len(LONG)
    (ex,) = p.events("exchange")
    assert ex["outcome"] == "shutdown"


def test_a_gemini_json_array_stream_cut_short_is_recorded_as_far_as_it_got(
    proxy: ProxyProcess,
) -> None:
    """streamGenerateContent without alt=sse streams one JSON array, element by element (no SDK
    of these asks for it; REST clients do). Cut short, it is not JSON: no fact was made of the
    chunks that had arrived whole."""
    body = orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}]})
    headers = {"Content-Type": "application/json", "x-goog-api-key": "AIza-test", "X-Test-How": "gemini-array-cut", "X-Test-Key": "array-cut"}  # fmt: skip
    with raw_stream(proxy.port, GEMINI, body, headers) as s:
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 200 ") and not got.endswith(b"0\r\n\r\n")  # cut
    (fact,) = wait_calls(proxy.store, {"array-cut"})
    assert fact.degradations["truncated_stream"] == 1
    assert _parts(fact) == [ReasoningPart, TextPart]
    assert LONG.startswith(_text(fact)) and 0 < len(_text(fact)) < len(LONG)


def test_a_client_gone_mid_json_array_stream_is_recorded_as_far_as_it_got(
    proxy: ProxyProcess,
) -> None:
    body = orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}]})
    headers = {"Content-Type": "application/json", "X-Test-How": "gemini-array-slow", "X-Test-Key": "array-gone"}  # fmt: skip
    with raw_stream(proxy.port, GEMINI, body, headers) as s:
        got = b""
        while got.count(b'"text"') < 6:
            got += s.recv(65536)
    (fact,) = wait_calls(proxy.store, {"array-gone"})
    assert fact.degradations["truncated_stream"] == 1
    assert LONG.startswith(_text(fact)) and 0 < len(_text(fact)) < len(LONG)


# -- streams as they come -----------------------------------------------------------------------


@pytest.mark.parametrize("ctype", ["application/json", "text/plain; charset=utf-8", ""])
def test_a_stream_labelled_otherwise_is_recorded_as_the_stream_it_is(
    proxy: ProxyProcess, ctype: str
) -> None:
    """The SDKs read a stream they asked for whatever its Content-Type (a gateway or a
    self-hosted server may label it application/json, text/plain or not at all); the recorder
    read it as JSON, failed, and made no fact."""
    tag = "".join(c for c in ctype if c.isalpha())[:9] or "none"
    hdrs = {"X-Test-How": f"sse-as:{ctype}", "X-Test-Key": f"as-{tag}"}
    client = _openai(through(None, proxy.url), default_headers=hdrs)
    chunks = list(client.chat.completions.create(
        model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "Weather?"}]
    ))  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == LONG
    claude = _anthropic(through(None, proxy.url), default_headers=hdrs)
    with claude.messages.stream(
        model="claude-sonnet-4-6", max_tokens=999, messages=[{"role": "user", "content": "Weather?"}]
    ) as s:  # fmt: skip
        final = s.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    facts = wait_calls(proxy.store, {f"chatcmpl-as-{tag}", f"msg_as-{tag}"})
    for fact in facts:
        assert _parts(fact) == [ReasoningPart, TextPart, ToolCallPart]
        assert _text(fact) == LONG
        assert "truncated_stream" not in fact.degradations


def test_an_anthropic_stream_split_anywhere_with_crlf_pings_and_gzip_is_recorded_whole(
    proxy: ProxyProcess,
) -> None:
    """Thinking, text and a tool call; CRLF line ends, comments and pings; gzip; the body in
    7-byte pieces, so every boundary (inside a line end, a UTF-8 character, a gzip block) is
    crossed. And a gzip-compressed request body, sent in chunks."""
    hdrs = {"X-Test-How": "anthropic-odd", "X-Test-Key": "odd", "Accept-Encoding": "gzip"}
    claude = _anthropic(through(None, proxy.url), default_headers=hdrs)
    with claude.messages.stream(
        model="claude-sonnet-4-6", max_tokens=999, messages=[{"role": "user", "content": "Weather?"}]
    ) as s:  # fmt: skip
        final = s.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    (fact,) = wait_calls(proxy.store, {"msg_odd"})
    assert _parts(fact) == [ReasoningPart, TextPart, ToolCallPart]
    assert _text(fact) == LONG and "truncated_stream" not in fact.degradations
    call = fact.output_messages[0].parts[2]
    assert isinstance(call, ToolCallPart) and call.arguments == {"city": "Paris"}

    doc = {"model": "claude-sonnet-4-6", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": "Zipped"}]}  # fmt: skip
    packed = gzip.compress(orjson.dumps(doc))
    head = (
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\nX-Test-How: anthropic-odd\r\n"
        b"X-Test-Key: odd-upload\r\nConnection: close\r\n\r\n"
    )
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(packed[i : i + 10]), packed[i : i + 10]) for i in range(0, len(packed), 10))  # fmt: skip
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(head + chunked + b"0\r\n\r\n")
        while sock.recv(65536):
            pass
    (fact,) = wait_calls(proxy.store, {"msg_odd-upload"})
    assert fact.input_messages[-1].parts == [TextPart("Zipped")]


# -- what is not recorded is said ---------------------------------------------------------------


def test_a_call_too_large_to_record_is_logged_not_only_counted(proxy: ProxyProcess) -> None:
    """Over --max-record-size, a call is forwarded and counted; no log line said which call
    went unrecorded, and its exchange line gave the response as 0 bytes."""
    client = _openai(
        through(None, proxy.url), default_headers={"X-Test-How": "big", "X-Test-Key": "big"}
    )
    r = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Much?"}]
    )
    assert r.choices[0].message.content == "x" * 100_000
    ev = proxy.wait_event("exchange_not_recorded", lambda e: e.get("reason") == "too_large")
    assert ev["level"] == "warning" and ev["kind"] == "openai-chat"
    assert ev["response_bytes"] > 100_000 and "--max-record-size" in ev["detail"]
    ex = proxy.wait_event("exchange", lambda e: e.get("response_bytes", 0) > 100_000)
    assert ex["kind"] == "openai-chat"


def test_a_request_the_recorder_cannot_read_degrades_recording(
    upstream: Upstream, tmp_path: Path
) -> None:
    """A request body lithify cannot decode (bytes that claim zstd and are not) is forwarded
    and gives no fact: counted, but health still said `ok` and the log line was at info level.
    A proxy of its own: nothing else has degraded its health."""
    p = start_proxy(tmp_path, {"openai": upstream.url})
    try:
        p.wait_health("the recorder up", lambda h: h["recording"] == "ok")
        r = request(
            p.port, "POST", "/v1/chat/completions", b"(\xb5/\xfd not really zstd",
            {"Content-Type": "application/json", "Content-Encoding": "zstd"},
        )  # fmt: skip
        assert r.status == 200
        ev = p.wait_event(
            "exchange_not_recorded", lambda e: e.get("reason") == "undecodable" and "zstd" in e.get("detail", "")
        )  # fmt: skip
        assert ev["level"] == "warning"
        h = p.wait_health("the skip counted", lambda h: h["recorder"]["skipped"].get("undecodable"))
        assert h["recording"] == "degraded"
    finally:
        assert p.stop() == 0


# -- the spool ----------------------------------------------------------------------------------


def test_a_small_spool_that_filled_takes_exchanges_again_once_drained(tmp_path: Path) -> None:
    """A spool bound under two segments (1 MiB each at least) never started a new segment:
    once full, the segment being written stayed full after the recorder had consumed it, and
    every later exchange was refused for the life of the process."""
    folder = tmp_path / "spool"
    with SpoolWriter(folder, 6 << 10) as w:
        taken = 0
        while w.put(b"x" * 500):
            taken += 1
        deadline = time.monotonic() + 5
        while w.stats.synced < taken and time.monotonic() < deadline:
            time.sleep(0.005)
        reader = SpoolReader(folder)
        assert len(reader.read(max_records=1000)) == taken
        reader.commit(reader.position)  # the store came back: everything recorded
        time.sleep(0.3)  # past the writer's rescan interval
        assert w.put(b"y" * 500), "the spool is drained, yet still refuses"


def test_an_answer_with_large_headers_is_forwarded_and_recorded(proxy: ProxyProcess) -> None:
    """aiohttp's client refuses a response header line over 8 KiB or more than 128 headers by
    default: the proxy answered 502 and recorded nothing, though the upstream answered."""
    hdrs = {"X-Test-How": "big-headers", "X-Test-Key": "bighead"}
    client = _openai(through(None, proxy.url), default_headers=hdrs)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Weather?"}]
    )
    assert raw.headers["x-gateway-trace"] == "t" * 20_000 and raw.headers["x-debug-149"] == "149"
    assert raw.parse().choices[0].message.content == LONG
    [fact] = wait_calls(proxy.store, {"chatcmpl-bighead"})
    assert _text(fact) == LONG
