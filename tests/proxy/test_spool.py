"""The spool and the recorder in-process: framing, order, bounds, torn and corrupt records, the
cursor, and exchanges → facts exactly as `lithify convert` makes them."""

from __future__ import annotations

import gzip
import os
import time
import zlib
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lithify.ingest.proxy import (
    Route,
    match_route,
    narrow_accept_encoding,
    parse_upstream,
    request_headers,
)
from lithify.ingest.recorder import (
    INFLATED_LIMIT,
    Recorder,
    RecorderConfig,
    SpooledExchange,
    decode_body,
    encode_exchange,
    exchange_document,
    translate_spooled,
)
from lithify.ingest.spool import (
    HEADER,
    MAGIC,
    SpoolError,
    SpoolReader,
    SpoolWriter,
    frame,
    segments,
)
from lithify.model import InferenceCall, Skip, TextPart
from lithify.translate import translate_document


def _drain_writer(w: SpoolWriter, n: int) -> None:
    deadline = time.monotonic() + 5
    while w.stats.synced + w.stats.dropped_error < n and time.monotonic() < deadline:
        time.sleep(0.001)


def test_records_come_back_in_order_and_the_cursor_deletes_what_was_consumed(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "spool"
    with SpoolWriter(folder, 1 << 20, segment_bytes=200) as w:
        for i in range(10):
            assert w.put(b"record %d " % i + b"x" * 50)
        _drain_writer(w, 10)
        assert w.stats.synced == 10 and w.stats.fsyncs >= 1
    assert len(segments(folder)) > 3  # small segments: the writer rolled over
    assert (
        folder.stat().st_mode & 0o777,
        (folder / segments(folder)[0][1].name).stat().st_mode & 0o777,
    ) == (0o700, 0o600)
    r = SpoolReader(folder)
    got = r.read(max_records=4)
    assert [p.split()[1] for p, _ in got] == [b"0", b"1", b"2", b"3"]
    r.commit(got[-1][1])
    again = SpoolReader(folder)  # a new reader (a restarted recorder) starts at the cursor
    rest = again.read(max_records=100)
    assert [p.split()[1] for p, _ in rest] == [str(i).encode() for i in range(4, 10)]
    again.commit(again.position)
    # Every segment but the newest is gone once consumed.
    assert [s for s, _ in segments(folder)] == [segments(folder)[-1][0]]
    assert again.backlog() == (0, 1)


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    with (
        SpoolWriter(tmp_path, 1 << 20),
        pytest.raises(SpoolError, match="in use by another process"),
    ):
        SpoolWriter(tmp_path, 1 << 20).open()
    SpoolWriter(tmp_path, 1 << 20).open().close()  # released with the first


def test_the_bound_refuses_records_until_the_reader_frees_room(tmp_path: Path) -> None:
    w = SpoolWriter(tmp_path, 1000, segment_bytes=300).open()
    try:
        accepted = [w.put(b"y" * 188) for _ in range(8)]  # 200 bytes a record, framed
        assert accepted == [True] * 5 + [False] * 3
        assert w.stats.dropped_full == 3
        _drain_writer(w, 5)
        r = SpoolReader(tmp_path)
        r.commit(r.read(100)[-1][1])
        time.sleep(0.3)  # the writer looks at the folder again at most 4× a second
        assert w.put(b"y" * 188)
    finally:
        w.close()


def test_torn_and_corrupt_records_are_skipped_and_counted(tmp_path: Path) -> None:
    with SpoolWriter(tmp_path, 1 << 20) as w:
        for i in range(3):
            w.put(b"first %d" % i)
    old = segments(tmp_path)[-1][1]
    with open(old, "ab") as fh:  # a crash mid-write
        fh.write(HEADER.pack(MAGIC, 100, 0) + b"partial")
    with SpoolWriter(tmp_path, 1 << 20) as w:  # the next start writes a new segment
        w.put(b"second 0")
        w.put(b"second 1")
    second = segments(tmp_path)[-1][1]
    data = bytearray(second.read_bytes())
    data[HEADER.size + 2] ^= 0xFF  # bit rot in the first record of the second segment
    second.write_bytes(bytes(data))
    with SpoolWriter(tmp_path, 1 << 20) as w:
        w.put(b"third 0")
    r = SpoolReader(tmp_path)
    got = [p for p, _ in r.read(100)]
    assert got == [b"first 0", b"first 1", b"first 2", b"third 0"]
    assert (r.stats.torn, r.stats.corrupt) == (1, 1)


def test_a_record_being_written_is_waited_for(tmp_path: Path) -> None:
    """In the newest segment, a record not whole yet is not torn: it is read once complete."""
    w = SpoolWriter(tmp_path, 1 << 20).open()
    try:
        w.put(b"whole")
        _drain_writer(w, 1)
        seg = segments(tmp_path)[-1][1]
        framed = frame(b"arriving")
        with open(seg, "ab") as fh:
            fh.write(framed[:9])
        r = SpoolReader(tmp_path)
        assert [p for p, _ in r.read()] == [b"whole"]
        assert r.read() == [] and r.stats.torn == 0
        with open(seg, "ab") as fh:
            fh.write(framed[9:])
        assert [p for p, _ in r.read()] == [b"arriving"]
    finally:
        w.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=20), st.data())
def test_any_cut_of_a_crashed_segment_gives_a_prefix_of_its_records(
    tmp_path_factory: pytest.TempPathFactory, records: list[bytes], data: st.DataObject
) -> None:
    folder = tmp_path_factory.mktemp("spool")
    with SpoolWriter(folder, 1 << 24) as w:
        for rec in records:
            assert w.put(rec)
    seg = segments(folder)[-1][1]
    size = seg.stat().st_size
    cut = data.draw(st.integers(0, size))
    os.truncate(seg, cut)
    with SpoolWriter(folder, 1 << 24):  # a restart: the cut segment is an old one now
        pass
    got = [p for p, _ in SpoolReader(folder).read(10_000)]
    assert got == records[: len(got)]
    whole = 0
    offset = 0
    for rec in records:
        offset += HEADER.size + len(rec)
        whole += offset <= cut
    assert len(got) == whole


# -- routing and headers ----------------------------------------------------------------------


def test_routes_and_upstreams() -> None:
    assert match_route("/v1/chat/completions") == Route("openai", "openai-chat")
    assert match_route("/v1/responses") == Route("openai", "openai-responses")
    assert match_route("/v1/messages") == Route("anthropic", "anthropic")
    assert match_route("/v1beta/models/gemini-2.5-flash:streamGenerateContent") == Route(
        "gemini", "gemini", "gemini-2.5-flash"
    )
    vertex = "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent"
    assert match_route(vertex) == Route("gemini", "gemini", "gemini-2.5-pro")
    for path in (
        "/v1/chat/completions/",
        "/v1/embeddings",
        "/v1/messages/count_tokens",
        "/v1beta/models/x:countTokens",
        "/v1beta/models/a/b:generateContent",
        "/",
    ):
        assert match_route(path) is None, path  # fmt: skip
    assert parse_upstream("openai").base == "https://api.openai.com"
    u = parse_upstream("OpenAI=http://gw.local:8000/team/a/")
    assert (u.name, u.base, u.prefix) == ("openai", "http://gw.local:8000/team/a", "/team/a")
    for bad in (
        "mistral=http://x",
        "openai=ftp://x",
        "openai=http://u:p@x",
        "openai=http://x?k=1",
        "gemini=nohost",
    ):
        with pytest.raises(ValueError):
            parse_upstream(bad)


def test_request_headers_keep_credentials_and_drop_hop_by_hop_and_our_own() -> None:
    raw = [
        (b"host", b"proxy:8080"), (b"authorization", b"Bearer sk-1"), (b"connection", b"keep-alive, x-secret-hop"),
        (b"x-secret-hop", b"1"), (b"x-lithify-session", b" s-9 "), (b"lithify-session-id", b"other"),
        (b"x-lithify-anything", b"z"), (b"accept-encoding", b"br;q=1.0, gzip, compress, zstd, *;q=0.1"),
        (b"content-length", b"12"), (b"content-encoding", b"gzip"), (b"x-goog-api-key", b"AIza"),
        (b"transfer-encoding", b"chunked"), (b"te", b"trailers"), (b"upgrade", b"h2c"),
    ]  # fmt: skip
    fwd = request_headers(raw)
    assert fwd.headers == [
        ("authorization", "Bearer sk-1"),
        ("accept-encoding", "br;q=1.0, gzip, zstd, gzip"),
        ("content-encoding", "gzip"),
        ("x-goog-api-key", "AIza"),
    ]
    assert (fwd.session_id, fwd.content_encoding) == ("s-9", "gzip")
    assert narrow_accept_encoding("compress") == "identity"
    assert narrow_accept_encoding("br") == "br"
    assert narrow_accept_encoding("gzip;q=0.5, deflate") == "gzip;q=0.5, deflate"


# -- exchanges to facts -----------------------------------------------------------------------

CHAT_REQ = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}
CHAT_RESP = {
    "id": "chatcmpl-spool1",
    "object": "chat.completion",
    "created": 1767225600,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello."}, "finish_reason": "stop"}],
}  # fmt: skip


def exchange(**kw: object) -> SpooledExchange:
    base: dict[str, object] = {
        "kind": "openai-chat",
        "url": "http://up/v1/chat/completions",
        "observed_at": "2026-01-01T00:00:00.000000000Z",
        "duration_ms": 12.5,
        "outcome": "complete",
        "status": 200,
        "request": orjson.dumps(CHAT_REQ),
        "response": orjson.dumps(CHAT_RESP),
        "response_type": "application/json",
    }
    base.update(kw)
    return SpooledExchange(**base)  # type: ignore[arg-type]


def test_an_exchange_gives_what_convert_gives_for_its_document() -> None:
    x = exchange(session_id="s-1")
    doc = exchange_document(x)
    assert isinstance(doc, dict)
    (expected,) = translate_document(orjson.loads(orjson.dumps(doc)))
    fact = translate_spooled(x)
    assert isinstance(fact, InferenceCall) and fact == expected
    assert (fact.session_id, fact.observed_at, fact.duration_ms) == ("s-1", x.observed_at, 12.5)
    assert fact.output_messages[0].parts == [TextPart("Hello.")]


def test_compressed_bodies_are_read_and_cut_ones_as_far_as_they_go() -> None:
    body = orjson.dumps(CHAT_RESP)
    assert translate_spooled(
        exchange(response=gzip.compress(body), response_encoding="gzip")
    ) == translate_spooled(exchange())
    raw_deflate = zlib.compressobj(wbits=-15)
    assert decode_body(raw_deflate.compress(body) + raw_deflate.flush(), "deflate") == body
    sse = b"data: " + body + b"\n\n" * 50
    cut = gzip.compress(sse)[: len(gzip.compress(sse)) // 2]
    partial = decode_body(cut, "gzip")
    assert partial is not None and sse.startswith(partial) and 0 < len(partial) < len(sse)
    skip = translate_spooled(exchange(response=b"???", response_encoding="br"))
    assert isinstance(skip, Skip) and skip.reason == "undecodable"


def test_zstd_and_brotli_request_bodies_are_read() -> None:
    """Codex compresses its requests with zstd: the recorder reads them (and brotli) as gzip,
    several zstd frames back to back included; bytes that only claim either are unreadable."""
    import brotli
    import zstandard

    body = orjson.dumps(CHAT_REQ)
    whole = translate_spooled(exchange())
    z = zstandard.ZstdCompressor()
    frames = z.compress(body[:10]) + z.compress(body[10:])
    for data, enc in ((z.compress(body), "zstd"), (frames, "zstd"), (brotli.compress(body), "br")):
        assert decode_body(data, enc) == body
        assert translate_spooled(exchange(request=data, request_encoding=enc)) == whole
    for enc in ("zstd", "br"):
        assert decode_body(b"not compressed at all", enc) is None
        skip = translate_spooled(exchange(request=b"{}", request_encoding=enc))
        assert isinstance(skip, Skip) and skip.reason == "undecodable" and enc in skip.detail


def test_a_body_that_inflates_past_the_bound_is_not_inflated() -> None:
    """A few kilobytes may claim gigabytes: the recorder stops at INFLATED_LIMIT, whatever the
    encoding, and records nothing of it rather than holding it all."""
    import brotli
    import zstandard

    huge = b"\x00" * (INFLATED_LIMIT + (1 << 20))
    for data, enc in (
        (gzip.compress(huge), "gzip"),
        (zlib.compress(huge), "deflate"),
        (zstandard.ZstdCompressor().compress(huge), "zstd"),
        (brotli.compress(huge, quality=1), "br"),
    ):
        assert len(data) < len(huge) // 100
        assert decode_body(data, enc) is None
        skip = translate_spooled(exchange(request=data, request_encoding=enc))
        assert isinstance(skip, Skip) and skip.reason == "undecodable"


def test_errors_and_unreadable_answers_give_no_fact() -> None:
    err = {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}
    for x in (
        exchange(status=429, response=orjson.dumps(err)),
        exchange(status=502, response=b"<html>Bad gateway</html>", response_type="text/html"),
        exchange(
            status=500, response=orjson.dumps(CHAT_RESP)
        ),  # an error status, whatever the body
    ):
        r = translate_spooled(x)
        assert isinstance(r, Skip) and r.reason == "error_response", (x.status, r)
    cut = translate_spooled(exchange(outcome="upstream_cut", response=orjson.dumps(CHAT_RESP)[:40]))
    assert isinstance(cut, Skip) and cut.reason == "undecodable" and "cut off" in cut.detail
    notjson = translate_spooled(exchange(request=b"not json"))
    assert isinstance(notjson, Skip) and notjson.reason == "undecodable"


def test_the_recorder_stores_once_and_a_replay_is_a_duplicate(tmp_path: Path) -> None:
    spool, store = tmp_path / "spool", f"sqlite://{tmp_path / 'facts.db'}"
    with SpoolWriter(spool, 1 << 20) as w:
        for i in range(5):
            resp = {**CHAT_RESP, "id": f"chatcmpl-rec{i}"}
            w.put(encode_exchange(exchange(response=orjson.dumps(resp))))
        w.put(encode_exchange(exchange(status=503, response=b"{}")))
        w.put(b"not an exchange")
    rec = Recorder(RecorderConfig(spool=str(spool), store=store))
    rec.drain()
    assert (rec.status.facts_stored, rec.status.duplicates, rec.status.exchanges) == (5, 0, 7)
    assert dict(rec.skipped) == {"error_response": 1, "undecodable": 1}
    (spool / "cursor").unlink()  # as if the cursor had never been written: all is read again
    again = Recorder(RecorderConfig(spool=str(spool), store=store))
    again.drain()
    assert (again.status.facts_stored, again.status.duplicates) == (0, 5)
