"""The group-commit writer: nothing that happens to a request's future stops it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from lithify.ingest.processing import process
from lithify.ingest.writer import GroupWriter
from lithify.store import FactStore, InsertResult, Prepared, open_store
from tests.serve.helpers import genai_spans, traces_pb


class GatedStore:
    """A store whose writes wait for a gate, recording the batches they were given."""

    def __init__(self, real: FactStore | None = None) -> None:
        self.real = real
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.written: list[Prepared] = []

    def insert_prepared(
        self, batches: Sequence[Prepared]
    ) -> list[tuple[InsertResult, InsertResult]]:
        self.entered.set()
        assert self.gate.wait(10)
        self.written.extend(batches)
        if self.real is not None:
            return self.real.insert_prepared(batches)
        return [(InsertResult(len(b.facts), 0, []), InsertResult(0, 0, [])) for b in batches]


def _rows(n: int) -> Prepared:
    return Prepared([("f", i) for i in range(n)], [])


def _writer(store: Any, max_rows: int) -> GroupWriter:
    return GroupWriter(lambda: store, max_rows)


def test_a_future_cancelled_while_queued_does_not_stop_the_writer() -> None:
    store = GatedStore()
    writer = _writer(store, max_rows=1)  # one batch a group
    try:
        first = writer.submit(_rows(1))
        assert store.entered.wait(5)  # the writer is inside the first write
        queued = writer.submit(_rows(2))
        assert queued.cancel()  # still queued, so cancellable
        later = writer.submit(_rows(3))
        store.gate.set()
        assert first.result(5)[0].inserted == 1
        assert later.result(5)[0].inserted == 3  # hung for ever when the writer died
        assert writer.alive
        # The cancelled request was written all the same: its work was done, a retry is a
        # duplicate.
        assert [len(b.facts) for b in store.written] == [1, 2, 3]
    finally:
        store.gate.set()
        writer.close()


def test_a_future_the_writer_took_is_answered_with_its_commit() -> None:
    store = GatedStore()
    writer = _writer(store, max_rows=10)
    try:
        fut = writer.submit(_rows(1))
        assert store.entered.wait(5)
        assert not fut.cancel()  # running: its answer is its commit
        store.gate.set()
        assert fut.result(5)[0].inserted == 1
    finally:
        store.gate.set()
        writer.close()


def test_a_request_cancelled_on_the_loop_leaves_the_next_ones_answered(
    sqlite_store_url: str,
) -> None:
    """The receiver's own path on a real store: the writer's future awaited through
    ``asyncio.wrap_future``, the awaiting task cancelled while its rows wait behind a group."""
    with open_store(sqlite_store_url) as real:
        store = GatedStore(real)
        writer = _writer(store, max_rows=1)
        prep = real.preparer()

        def rows(tag: str) -> Prepared:
            out = process("traces", "protobuf", traces_pb(genai_spans(tag, 3)), "", 1 << 20, prep)
            assert out.rows is not None
            return out.rows

        async def main() -> int:
            blocker = asyncio.wrap_future(writer.submit(rows("a")))
            assert await asyncio.to_thread(store.entered.wait, 5)
            task = asyncio.ensure_future(asyncio.wrap_future(writer.submit(rows("b"))))
            await asyncio.sleep(0)
            task.cancel()  # cancels the writer's future too: it is still queued
            await asyncio.sleep(0.05)
            store.gate.set()
            await blocker
            after = await asyncio.wait_for(asyncio.wrap_future(writer.submit(rows("c"))), 10)
            return after[0].inserted

        try:
            assert asyncio.run(main()) == 3
            assert writer.alive
            assert real.count() == 9  # "b" too: taken, written, never answered
        finally:
            store.gate.set()
            writer.close()


def test_a_defect_outside_the_store_fails_its_requests_not_the_thread() -> None:
    class Broken:
        def insert_prepared(self, batches: Sequence[Prepared]) -> list[Any]:
            return []  # the wrong length: the writer's zip(strict=True) raises

    writer = _writer(Broken(), max_rows=10)
    try:
        for _ in range(2):
            with pytest.raises(ValueError):
                writer.submit(_rows(1)).result(5)
        assert writer.alive
    finally:
        writer.close()
