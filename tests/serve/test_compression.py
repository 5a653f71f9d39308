"""OTLP/HTTP bodies compressed as the OpenTelemetry Collector's ``otlphttp`` exporter (and Grafana
Alloy's, the same confighttp) compresses them, for each of its ``compression`` settings: taken,
refused with 400 when corrupt, with 413 when they inflate past --max-body-size, and any other
coding 415 naming these.

How confighttp compresses (compressor.go) and what each body here imitates: the header is the
setting's name; ``zlib`` and ``deflate`` are Go's compress/zlib; ``zstd`` is klauspost/compress
(one block at most: EncodeAll, with the content size; more: a streamed frame without it, its
window 4 to 32 MiB by level; a checksum either way); ``lz4`` is pierrec/lz4 v4's frame writer;
``snappy`` is one block since Collector v0.125 (feature gate confighttp.framedSnappy, beta) and
the framing format before it; ``x-snappy-framed`` is the framing format."""

from __future__ import annotations

import io
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace

import cramjam
import lz4.frame
import pytest
import zstandard

from lithify.ingest.processing import BadBody, BodyTooLarge, inflate
from lithify.store import FactStore, open_store
from tests.serve.conftest import BASE
from tests.serve.helpers import (
    LiveServer,
    genai_spans,
    live_server,
    post,
    status_message,
    traces_pb,
)

LIMIT = 64 * 1024  # the small server's --max-body-size


def zstd_one_block(raw: bytes) -> bytes:
    """klauspost's EncodeAll: one frame stating its content size, with a checksum."""
    return zstandard.ZstdCompressor(level=3, write_checksum=True).compress(raw)


def zstd_streamed(raw: bytes, window_log: int = 25) -> bytes:
    """klauspost's streaming Encoder: no content size, the window of its level (32 MiB for the
    best), a checksum."""
    params = zstandard.ZstdCompressionParameters.from_level(
        19, window_log=window_log, write_checksum=1, write_content_size=0
    )
    out = io.BytesIO()
    with zstandard.ZstdCompressor(compression_params=params).stream_writer(out, closefd=False) as w:
        w.write(raw)
    return out.getvalue()


def lz4_frame(raw: bytes) -> bytes:
    """pierrec/lz4 v4's Writer: the LZ4 frame format, 4 MiB blocks, a content checksum."""
    return lz4.frame.compress(
        raw, block_size=lz4.frame.BLOCKSIZE_MAX4MB, content_checksum=True, store_size=False
    )


def snappy_block(raw: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(raw))  # golang/snappy's Encode


def snappy_framed(raw: bytes) -> bytes:
    return bytes(cramjam.snappy.compress(raw))  # golang/snappy's NewBufferedWriter


# setting name -> (Content-Encoding, how the body is compressed)
COLLECTOR: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "zstd (one block)": ("zstd", zstd_one_block),
    "zstd (streamed)": ("zstd", zstd_streamed),
    "zlib": ("zlib", zlib.compress),
    "deflate": ("deflate", zlib.compress),
    "lz4": ("lz4", lz4_frame),
    "snappy (v0.125+: block)": ("snappy", snappy_block),
    "snappy (before: framed)": ("snappy", snappy_framed),
    "x-snappy-framed": ("x-snappy-framed", snappy_framed),
}


@pytest.fixture
def small(sqlite_store_url: str) -> Iterator[LiveServer]:
    config = replace(BASE, store=sqlite_store_url, max_body_size=LIMIT)
    with live_server(config, open_store(sqlite_store_url)) as srv:
        yield srv


@pytest.mark.parametrize("setting", list(COLLECTOR))
def test_the_collectors_compressions_are_stored_and_acknowledged(
    server: LiveServer, store: FactStore, setting: str
) -> None:
    header, compress = COLLECTOR[setting]
    n = 300 if setting == "zstd (streamed)" else 3  # past one 128 KiB zstd block
    spans = genai_spans(f"collector-{setting}", n)
    raw = traces_pb(spans)
    assert (len(raw) > 128 * 1024) == (n == 300)
    body = compress(raw)
    assert inflate(body, header, len(raw)) == raw
    r = post(server.port, "/v1/traces", body, headers={"Content-Encoding": header})
    assert r.status == 200, status_message(r)
    assert r.body == b""  # full success: an empty ExportTraceServiceResponse
    assert {f.inference_call_id for f in store.iter_facts()} == {s.call_id for s in spans}


def test_corrupt_bodies_get_400_saying_what_is_wrong(server: LiveServer, store: FactStore) -> None:
    good = traces_pb(genai_spans("corrupt", 3))
    framed = snappy_framed(good)
    cases = [
        ("zstd", b"\x28\xb5\x2f\xfd" + b"\xff" * 40, "the body is not valid zstd data"),
        ("zstd", b"not zstd at all", "the body is not valid zstd data"),
        ("zstd", zstd_one_block(good)[:-9], "the zstd body is truncated"),
        ("zstd", zstd_one_block(good) + b"junk", "the body is not valid zstd data"),
        ("zlib", b"\x78\x9c" + b"\xff" * 40, "the body is not valid zlib data"),
        ("zlib", zlib.compress(good) + b"junk", "trailing bytes after the zlib"),
        ("lz4", b"\x04\x22\x4d\x18" + b"\xff" * 40, "the body is not valid lz4 data"),
        ("lz4", lz4_frame(good)[:-9], "the lz4 body is truncated"),
        ("snappy", b"\xff\xff\xff\xff\xff\x01junk", "the body is not valid snappy data"),
        ("snappy", snappy_block(good)[:-9], "the body is not valid snappy data"),
        ("snappy", framed[:-9], "the snappy body is truncated"),
        ("x-snappy-framed", framed[:15] + b"\x00" + framed[16:], "not valid x-snappy-framed data"),
        ("x-snappy-framed", framed[:10] + b"\x02\x00\x00\x00", "chunk type 0x02"),
        ("x-snappy-framed", snappy_block(good), "not framed snappy data"),
    ]
    for header, body, words in cases:
        r = post(server.port, "/v1/traces", body, headers={"Content-Encoding": header})
        assert r.status == 400, (header, body[:20], r.status)
        assert words in status_message(r), (header, words, status_message(r))
    assert store.count() == 0


@pytest.mark.parametrize(
    ("header", "bomb"),
    [
        ("zstd", zstd_streamed(b"\x00" * (64 << 20), window_log=27)),  # zstd's largest default
        ("zstd", zstd_one_block(b"\x00" * (64 << 20))),  # states 64 MiB up front
        ("lz4", lz4_frame(b"\x00" * (12 << 20))),
        ("snappy", snappy_block(b"\x00" * (1 << 20))),  # states 1 MiB up front
        ("snappy", snappy_framed(b"\x00" * (1 << 20))),
        ("x-snappy-framed", snappy_framed(b"\x00" * (1 << 20))),
    ],
    ids=["zstd-streamed", "zstd-sized", "lz4", "snappy-block", "snappy-framed", "x-snappy-framed"],
)
def test_a_bomb_gets_413_and_the_receiver_goes_on(
    small: LiveServer, sqlite_store_url: str, header: str, bomb: bytes
) -> None:
    assert len(bomb) < LIMIT  # taken on the wire, refused once inflating
    t0 = time.perf_counter()
    r = post(small.port, "/v1/traces", bomb, headers={"Content-Encoding": header})
    assert r.status == 413, status_message(r)
    assert "decompressed body is larger than the 65536-byte limit" in status_message(r)
    assert time.perf_counter() - t0 < 5  # cut off at the limit, not inflated whole
    body = zstd_one_block(traces_pb(genai_spans(f"after-{header}", 2)))
    assert post(small.port, "/v1/traces", body, headers={"Content-Encoding": "zstd"}).status == 200
    with open_store(sqlite_store_url) as s:
        assert s.count() == 2


def test_other_codings_get_415_naming_the_accepted_ones(server: LiveServer) -> None:
    for coding in ("br", "compress", "snappy-framed", "gzip, zstd"):
        r = post(server.port, "/v1/traces", b"", headers={"Content-Encoding": coding})
        assert r.status == 415, coding
        message = status_message(r)
        assert f"unsupported Content-Encoding {coding!r}" in message
        for name in ("gzip", "deflate", "zlib", "zstd", "lz4", "snappy", "x-snappy-framed"):
            assert name in message, (name, message)


def test_inflate_bounds_every_coding_exactly_at_the_limit() -> None:
    """The bound itself, without a server: a body inflating to the limit is taken, one byte more
    is not; a bomb is cut off near the limit, not inflated whole; an empty body (what
    klauspost's zstd and golang/snappy's framed writer make of an empty input) is empty."""
    raw = bytes(range(256)) * 40
    over = raw + b"x"
    for header, compress in COLLECTOR.values():
        assert inflate(compress(raw), header, len(raw)) == raw, header
        with pytest.raises(BodyTooLarge):
            inflate(compress(over), header, len(raw))
        assert inflate(b"", header, 10) == b""
    # Frames and members back to back, and zstd's skippable frames, as their formats allow.
    skippable = b"\x50\x2a\x4d\x18" + (3).to_bytes(4, "little") + b"pad"
    assert inflate(zstd_one_block(b"ab") + skippable + zstd_streamed(b"cd"), "zstd", 4) == b"abcd"
    assert inflate(lz4_frame(b"ab") + lz4_frame(b"cd"), "lz4", 4) == b"abcd"
    # Framed snappy keeps incompressible data in uncompressed chunks (0x01), checked alike.
    noise = bytes((i * 7919 + (i >> 3) * 104729) % 251 for i in range(200_000))
    assert inflate(snappy_framed(noise), "x-snappy-framed", len(noise)) == noise
    # A zstd bomb of 2 GiB in a few KiB is cut off within a MiB past the limit, at once.
    bomb_writer = zstandard.ZstdCompressor(level=3).compressobj()
    zeros = b"\x00" * (1 << 20)
    bomb = b"".join(bomb_writer.compress(zeros) for _ in range(2048)) + bomb_writer.flush()
    t0 = time.perf_counter()
    with pytest.raises(BodyTooLarge):
        inflate(bomb, "zstd", 8 << 20)
    assert time.perf_counter() - t0 < 2
    # A zstd frame that is cut off is said to be, never taken as what it held.
    with pytest.raises(BadBody, match="truncated"):
        inflate(zstd_streamed(raw)[:-6], "zstd", len(raw))
