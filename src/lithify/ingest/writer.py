"""The group-commit writer of `lithify serve`: batches from concurrent requests written in one
transaction, each answered once its facts are committed."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any

from lithify.store import (
    FactStore,
    InsertResult,
    Prepared,
    StoreUnavailable,
)


class GroupWriter:
    """One thread that commits prepared rows; batches waiting together share one transaction.

    A group that fails for a reason other than the store being unavailable is retried batch by
    batch, so one bad batch cannot fail the others.
    """

    def __init__(self, store: Callable[[], FactStore | None], max_rows: int) -> None:
        self._store = store
        self._max_rows = max_rows
        self._queue: queue.SimpleQueue[tuple[Prepared, concurrent.futures.Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._loop, name="lithify-writer", daemon=True)
        self._thread.start()
        self.groups = 0
        self.batches = 0

    def submit(
        self, rows: Prepared
    ) -> concurrent.futures.Future[tuple[InsertResult, InsertResult]]:
        fut: concurrent.futures.Future[tuple[InsertResult, InsertResult]] = (
            concurrent.futures.Future()
        )
        self._queue.put((rows, fut))
        return fut

    def close(self) -> None:
        """Commit what is queued, then stop."""
        self._queue.put(None)
        self._thread.join()

    def _loop(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            if item is None:
                return
            group = [item]
            size = len(item[0].facts) + len(item[0].feedback)
            while size < self._max_rows:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                group.append(nxt)
                size += len(nxt[0].facts) + len(nxt[0].feedback)
            self._write(group)

    def _write(self, group: list[tuple[Prepared, concurrent.futures.Future[Any]]]) -> None:
        store = self._store()
        try:
            if store is None:
                raise StoreUnavailable("the store is not open yet")
            results = store.insert_prepared([rows for rows, _ in group])
        except StoreUnavailable as e:
            for _, fut in group:
                fut.set_exception(e)
            return
        except BaseException as e:
            if len(group) > 1:
                for one in group:
                    self._write([one])
                return
            group[0][1].set_exception(e)
            return
        self.groups += 1
        self.batches += len(group)
        for (_, fut), result in zip(group, results, strict=True):
            fut.set_result(result)
