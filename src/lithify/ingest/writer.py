"""The group-commit writer of `lithify serve`: batches from concurrent requests written in one
transaction, each answered once its facts are committed."""

from __future__ import annotations

import concurrent.futures
import contextlib
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

_Item = tuple[Prepared, concurrent.futures.Future[Any]]


def _settle(
    fut: concurrent.futures.Future[Any], result: Any = None, error: BaseException | None = None
) -> None:
    """Answer one request's future, unless nobody can be answered any more: a future cancelled
    before the writer took it is done already, and setting it would raise InvalidStateError in
    the writer thread (which would then die, and every later request hang)."""
    if fut.done():
        return
    try:
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


def _name_thread(name: bytes) -> None:
    """Give this thread its name in the OS too (``top -H``, /proc/…/task/…/comm, which
    bench/serve.py reads to tell the writer's CPU apart); Linux only, best effort."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(15, name[:15])  # PR_SET_NAME


class GroupWriter:
    """One thread that commits prepared rows; batches waiting together share one transaction.

    A group that fails for a reason other than the store being unavailable is retried batch by
    batch, so one bad batch cannot fail the others. A request whose future was cancelled is
    still written when it was queued (its work is done, and a retry is a duplicate), but never
    answered; nothing that happens to a future stops the thread.
    """

    def __init__(self, store: Callable[[], FactStore | None], max_rows: int) -> None:
        self._store = store
        self._max_rows = max_rows
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
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

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _loop(self) -> None:
        _name_thread(b"lithify-writer")
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
            try:
                for _, fut in group:
                    # From here on cancel() fails: the request is answered with its commit. A
                    # future cancelled already is written all the same and left unanswered.
                    fut.set_running_or_notify_cancel()
                self._write(group)
            except BaseException as e:  # a defect here must fail its requests, not the thread
                for _, fut in group:
                    _settle(fut, error=e)

    def _write(self, group: list[_Item]) -> None:
        store = self._store()
        try:
            if store is None:
                raise StoreUnavailable("the store is not open yet")
            results = store.insert_prepared([rows for rows, _ in group])
        except StoreUnavailable as e:
            for _, fut in group:
                _settle(fut, error=e)
            return
        except BaseException as e:
            if len(group) > 1:
                for one in group:
                    self._write([one])
                return
            _settle(group[0][1], error=e)
            return
        self.groups += 1
        self.batches += len(group)
        for (_, fut), result in zip(group, results, strict=True):
            _settle(fut, result)
