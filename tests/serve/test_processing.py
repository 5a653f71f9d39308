"""Request processing in a worker: rows built once, a fact that cannot be made a row costs
only itself, and large bodies reach worker processes in memory files."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import pytest

from lithify.ingest import receiver
from lithify.ingest.processing import SHARE_FROM, process, process_shared, share
from lithify.store import Prepared, open_store, prepare
from tests.serve.conftest import BASE
from tests.serve.helpers import genai_spans, live_server, post, traces_pb


def test_the_rows_of_a_request_are_built_once_and_a_bad_fact_is_rejected_alone() -> None:
    spans = genai_spans("prep", 4)
    bad = spans[2].call_id
    calls: list[int] = []

    def preparer(facts: Any, feedback: Any = ()) -> Prepared:
        facts = list(facts)
        calls.append(len(facts))
        if any(f.inference_call_id == bad for f in facts):
            raise ValueError("no row for this one")
        return prepare(facts, feedback)

    out = process("traces", "protobuf", traces_pb(spans), "", 1 << 20, preparer)
    assert out.rows is not None
    assert [r[0] for r in out.rows.facts] == [s.call_id for s in spans if s.call_id != bad]
    assert (out.facts, out.rejected) == (3, 1)
    assert out.errors == ["a fact could not be stored: no row for this one"]
    assert calls[0] == 4  # all at once first, then one by one to find the bad one

    calls.clear()
    good = process("traces", "protobuf", traces_pb(genai_spans("ok", 4)), "", 1 << 20, preparer)
    assert calls == [4] and good.facts == 4 and good.rejected == 0


def _facts(out: Any) -> list[tuple[Any, ...]]:
    assert out is not None and out.rows is not None
    return out.rows.facts


def test_a_body_in_a_memory_file_is_processed_as_the_bytes_are() -> None:
    body = traces_pb(genai_spans("shared", 160))  # over SHARE_FROM: the path large bodies take
    assert len(body) >= SHARE_FROM
    fd = share(body)
    if fd is None:
        pytest.skip("no memory files on this system")
    try:
        file_id = (os.fstat(fd).st_ino, len(body))
        shared = process_shared(os.getpid(), fd, file_id, "traces", "protobuf", "", 1 << 20)
        assert _facts(shared) == _facts(process("traces", "protobuf", body, "", 1 << 20))
        # A descriptor that no longer names that file (closed, its number reused) is not read.
        assert (
            process_shared(os.getpid(), fd, (file_id[0], 1), "traces", "protobuf", "", 1 << 20)
            is None
        )
    finally:
        os.close(fd)
    assert process_shared(os.getpid(), fd, file_id, "traces", "protobuf", "", 1 << 20) is None


def test_worker_processes_take_large_bodies_from_memory_files_or_else_as_bytes(
    sqlite_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real worker process (``workers=1``): a large body reaches it in a memory file; when a
    worker cannot read one, the request is sent as bytes and so is every one after it."""
    probe = share(b"probe")
    if probe is None:
        pytest.skip("no memory files on this system")
    os.close(probe)
    config = replace(BASE, store=sqlite_store_url, workers=1)
    with live_server(config, open_store(sqlite_store_url)) as srv:
        rx = srv.receiver
        first = post(srv.port, "/v1/traces", traces_pb(genai_spans("mem-a", 160)))
        assert first.status == 200 and rx.share_bodies

        def wrong_file(body: bytes) -> int | None:
            fd = share(b"x")  # a file the worker will find is not the body's
            assert fd is not None
            return fd

        monkeypatch.setattr(receiver, "share", wrong_file)
        second = post(srv.port, "/v1/traces", traces_pb(genai_spans("mem-b", 160)))
        assert second.status == 200 and not rx.share_bodies
        third = post(srv.port, "/v1/traces", traces_pb(genai_spans("mem-c", 160)))
        assert third.status == 200
    with open_store(sqlite_store_url) as store:
        assert store.count() == 480
