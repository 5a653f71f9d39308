"""A bounded, durable, append-only queue of records on disk (the recording proxy's spool).

One process appends (``SpoolWriter``: the proxy, from a thread of its own so that a slow disk
never holds up a client's call); one process reads in order and marks what it has consumed
(``SpoolReader``: the recorder, which writes facts to the store). The folder holds:

- ``lock``: held (``flock``) by the appending process, so two proxies never share a spool;
- ``<seq>.seg``: segments of framed records, written in order; the appender only ever writes to
  the newest segment and starts a new one on each start, so a record torn by a crash is always
  at the end of an older segment;
- ``cursor``: ``<seq> <offset>`` of the first record not yet consumed, replaced atomically;
- ``store``: the store the spool belongs to (``store_key``: never a password), written once by
  the first writer or reader given one. A spool is drained into that store only: a writer or
  reader given another refuses it (``SpoolOfAnotherStore``). Without ``--spool``, each store
  has a spool of its own (``default_spool``).

A record is framed as ``LSP1`` + payload length (u32 LE) + CRC-32 of the payload (u32 LE) +
payload. Durability: each record is handed to the OS with one ``write`` (from then on a
``kill -9`` of the proxy cannot lose it), and every group of records written together is made
durable with one ``fdatasync`` (from then on a power loss cannot lose it either).

One module past 500 lines: the writer, the reader and the record format are one on-disk
contract, and a change to one must be read beside the others.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import queue
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lithify.store import default_store_path, sqlite_path

MAGIC = b"LSP1"
HEADER = struct.Struct("<4sII")
SEGMENT_SUFFIX = ".seg"
CURSOR = "cursor"
LOCK = "lock"
OWNER = "store"
MAX_RECORD = 0xFFFF_FFFF


class SpoolError(Exception):
    """A spool folder that cannot be used (locked by another process, not writable, another
    store's)."""


class SpoolOfAnotherStore(SpoolError):
    """A spool that belongs to another store than the one it would be drained into."""

    def __init__(self, folder: Path, owner: str, store: str) -> None:
        self.folder, self.owner, self.store = folder, owner, store
        backlog = SpoolReader(folder).backlog()[0]
        left = (
            f"it holds {backlog} bytes of exchanges not yet recorded: record them into their "
            f"store with `lithify proxy --spool {folder} --store {owner}` (with the password, "
            "which the spool does not keep)"
            if backlog
            else f"it holds nothing left to record: remove {folder} to use it for another store"
        )
        super().__init__(
            f"the spool {folder} belongs to the store {owner}, not to {store}; {left}, or give "
            "this proxy a spool of its own (leave out --spool: each store has its own)"
        )


# What names a PostgreSQL database (and schema: options may set search_path); other parameters
# (connect_timeout, sslmode, password, …) only say how to reach it.
_PG_NAMING = frozenset({"host", "hostaddr", "port", "dbname", "user", "service", "options"})


def store_key(url: str | None) -> str:
    """The store ``url`` names (None: ``$LITHIFY_STORE``, else the default), as a spool records
    it: ``sqlite://`` + the file's absolute path, symlinks resolved; for PostgreSQL, the URL
    without its password and connection settings (scheme ``postgresql``, hosts lower-cased,
    the parameters that name the database sorted)."""
    url = (url or os.environ.get("LITHIFY_STORE") or "").strip()
    path = sqlite_path(url) if url else default_store_path()
    if path is not None:
        return "sqlite://" + str(path.expanduser().resolve())
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("postgres", "postgresql"):
        return url  # open_store refuses it
    userinfo, at, hosts = parts.netloc.rpartition("@")
    netloc = f"{userinfo.split(':', 1)[0]}@{hosts.lower()}" if at else hosts.lower()
    query = sorted((k, v) for k, v in parse_qsl(parts.query, True) if k in _PG_NAMING)
    return urlunsplit(("postgresql", netloc, parts.path, urlencode(query), ""))


def default_spool(url: str | None) -> Path:
    """The spool of the store ``url`` names when none is given: ``<file>.proxy-spool`` beside a
    SQLite file; for PostgreSQL, ``proxy-spool-<hash of store_key>`` in the per-user data folder
    (where the default store lives)."""
    key = store_key(url)
    if key.startswith("sqlite://"):
        return Path(key.removeprefix("sqlite://") + ".proxy-spool")
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return default_store_path().parent / f"proxy-spool-{digest}"


def spool_owner(folder: Path) -> str | None:
    """The store a spool belongs to; None for a spool that records none (new, or written by a
    lithify that did not record it)."""
    try:
        return (folder / OWNER).read_text().strip() or None
    except (FileNotFoundError, NotADirectoryError):
        return None


def check_owner(folder: Path, store: str) -> None:
    """Raise ``SpoolOfAnotherStore`` when the spool belongs to a store other than ``store``."""
    owner = spool_owner(folder)
    if owner is not None and owner != store:
        raise SpoolOfAnotherStore(folder, owner, store)


def claim(folder: Path, store: str) -> None:
    """Record that the spool belongs to ``store``, if it records no store yet; then
    ``check_owner``. Atomic: of two claims at once, one is recorded and the other refused."""
    if spool_owner(folder) is None:
        fd, name = tempfile.mkstemp(prefix=f"{OWNER}.", suffix=".tmp", dir=folder)
        tmp = Path(name)
        try:
            os.write(fd, f"{store}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, folder / OWNER)  # fails when another claim was recorded first
            _fsync_dir(folder)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    check_owner(folder, store)


class Position(NamedTuple):
    seq: int
    offset: int


def frame(payload: bytes) -> bytes:
    return HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


def _segment_name(seq: int) -> str:
    return f"{seq:016d}{SEGMENT_SUFFIX}"


def segments(folder: Path) -> list[tuple[int, Path]]:
    """The segment files of a spool, oldest first."""
    out = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            name = entry.name
            if name.endswith(SEGMENT_SUFFIX) and name[: -len(SEGMENT_SUFFIX)].isdigit():
                out.append((int(name[: -len(SEGMENT_SUFFIX)]), Path(entry.path)))
    out.sort()
    return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# appending


@dataclass
class WriterStats:
    appended: int = 0  # records handed to the OS
    appended_bytes: int = 0
    synced: int = 0  # records made durable (fdatasync)
    fsyncs: int = 0
    dropped_full: int = 0  # records refused because the spool was at its bound
    dropped_error: int = 0  # records lost to a write error (disk full, I/O error)
    used_bytes: int = 0  # segment bytes on disk (consumed segments are deleted by the reader)
    queued: int = 0  # records accepted but not yet written


_STOP = object()


class SpoolWriter:
    """The appending side. ``put`` never blocks: it queues the record for the writer thread, or
    refuses it (``False``) when the spool is at ``max_bytes``."""

    def __init__(
        self,
        folder: str | Path,
        max_bytes: int,
        *,
        store: str | None = None,
        segment_bytes: int | None = None,
        sync: bool = True,
    ) -> None:
        self.folder = Path(folder).expanduser().absolute()
        self.store = store  # the store_key the spool must belong to; None: not checked
        self.max_bytes = max_bytes
        # At most a quarter of the bound: the segment being written is deleted only once the
        # next one starts, and a full spool starts none, so a segment near the bound stayed
        # full after the recorder had consumed it, refusing every exchange from then on.
        self.segment_bytes = segment_bytes or max(
            1, min(max(1 << 20, min(64 << 20, max_bytes // 16)), max_bytes // 4)
        )
        self.sync = sync
        self.stats = WriterStats()
        self.last_error: str | None = None
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._queued_bytes = 0
        self._rescanned = 0.0
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._seq = 0
        self._offset = 0
        self._thread: threading.Thread | None = None

    # -- lifetime ------------------------------------------------------------------------------
    def open(self) -> SpoolWriter:
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise SpoolError(f"cannot use the spool folder {self.folder}: {e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise SpoolError(
                f"the spool {self.folder} is in use by another process (pid {holder})"
            ) from None
        if self.store is not None:
            try:
                claim(self.folder, self.store)
            except SpoolError:
                os.close(fd)
                raise
            except OSError as e:
                os.close(fd)
                raise SpoolError(f"cannot write to the spool folder {self.folder}: {e}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd
        existing = segments(self.folder)
        self.stats.used_bytes = sum(_size(p) for _, p in existing)
        # Never append to an old segment: its tail may be a record torn by a crash.
        self._seq = (existing[-1][0] + 1) if existing else 1
        try:
            self._open_segment()
        except OSError as e:
            self.close()
            raise SpoolError(f"cannot write to the spool folder {self.folder}: {e}") from None
        self._thread = threading.Thread(target=self._loop, name="lithify-spool", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Write and sync what is queued, then release the folder."""
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join()
            self._thread = None
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.fdatasync(self._fd)
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def __enter__(self) -> SpoolWriter:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the caller's side -----------------------------------------------------------------------
    def put(self, payload: bytes) -> bool:
        """Queue one record; False (and counted) when the spool has no room for it."""
        n = len(payload) + HEADER.size
        with self._lock:
            full = self.stats.used_bytes + self._queued_bytes + n > self.max_bytes
            if full and not self._room_after_rescan(n):
                self.stats.dropped_full += 1
                return False
            self._queued_bytes += n
            self.stats.queued += 1
        self._queue.put(payload)
        return True

    def _room_after_rescan(self, n: int) -> bool:
        """The reader deletes consumed segments: look at the folder again (at most 4× a second)."""
        now = time.monotonic()
        if now - self._rescanned < 0.25:
            return False
        self._rescanned = now
        self.stats.used_bytes = sum(_size(p) for _, p in segments(self.folder))
        return self.stats.used_bytes + self._queued_bytes + n <= self.max_bytes

    @property
    def position(self) -> Position:
        return Position(self._seq, self._offset)

    # -- the writer thread -----------------------------------------------------------------------
    def _open_segment(self) -> None:
        if self._fd is not None:
            # What went into the segment being left is made durable before moving on: the
            # group's fdatasync will only cover the new one.
            if self.sync:
                with contextlib.suppress(OSError):
                    os.fdatasync(self._fd)
            os.close(self._fd)
            self._fd = None
        path = self.folder / _segment_name(self._seq)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._offset = os.fstat(self._fd).st_size
        if self.sync:
            _fsync_dir(self.folder)  # the new name survives a power loss too

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            group = [item]
            while True:
                try:
                    group.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(x is _STOP for x in group)
            records = [x for x in group if x is not _STOP]
            written = 0
            for payload in records:
                assert isinstance(payload, bytes)
                written += self._write(payload)
            if written and self.sync and self._fd is not None:
                try:
                    os.fdatasync(self._fd)
                    self.stats.fsyncs += 1
                    self.stats.synced += written
                except OSError as e:
                    self.last_error = f"fdatasync: {e}"
            if stop:
                return

    def _write(self, payload: bytes) -> int:
        n = len(payload) + HEADER.size
        ok = 0
        try:
            if len(payload) > MAX_RECORD:
                raise OSError(errno.EFBIG, "a record larger than 4 GiB")
            data = frame(payload)
            if self._fd is None or (self._offset and self._offset + n > self.segment_bytes):
                self._seq += 1
                self._open_segment()
            assert self._fd is not None
            done = os.write(self._fd, data)
            if done != n:
                raise OSError(errno.ENOSPC, f"short write ({done} of {n} bytes)")
            ok = 1
        except OSError as e:
            self.stats.dropped_error += 1
            self.last_error = f"write: {e}"
            self._recover()
        finally:
            # Queued bytes become used bytes in one step, so that the bound never misses a
            # record that is on its way to disk.
            with self._lock:
                self._queued_bytes -= n
                self.stats.queued -= 1
                self.stats.used_bytes += n * ok
        if ok:
            self._offset += n
            self.stats.appended += 1
            self.stats.appended_bytes += n
        return ok

    def _recover(self) -> None:
        """After a failed write: cut the segment back to its last whole record, or move on to a
        new segment, so that no later record follows a torn one."""
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, self._offset)
        except OSError:
            with contextlib.suppress(OSError):
                self._seq += 1
                self._open_segment()


# ---------------------------------------------------------------------------------------------
# reading


@dataclass
class ReaderStats:
    read: int = 0
    torn: int = 0  # records cut short by a crash (at the end of an old segment), skipped
    corrupt: int = 0  # records whose checksum or framing is wrong, skipped with their segment


class SpoolReader:
    """The consuming side: records in append order from the cursor; ``commit`` marks them
    consumed and deletes segments that hold nothing unconsumed."""

    def __init__(self, folder: str | Path, *, store: str | None = None) -> None:
        """``store``: the store_key of the store the records go to; a spool of another store is
        refused (``SpoolOfAnotherStore``), one that records none is claimed for it."""
        self.folder = Path(folder).expanduser().absolute()
        if store is not None:
            claim(self.folder, store)
        self.stats = ReaderStats()
        self.committed = self._load_cursor()
        self.position = self.committed

    def _load_cursor(self) -> Position:
        try:
            seq, offset = (self.folder / CURSOR).read_text().split()
            return Position(int(seq), int(offset))
        except (OSError, ValueError):
            # No cursor (or an unreadable one): start at the oldest segment. At worst some
            # records are read again; the store deduplicates them.
            return Position(0, 0)

    def read(
        self, max_records: int = 256, max_bytes: int = 16 << 20
    ) -> list[tuple[bytes, Position]]:
        """Whole records after ``position``, each with the position just after it."""
        out: list[tuple[bytes, Position]] = []
        size = 0
        segs = segments(self.folder)
        if not segs:
            return out
        newest = segs[-1][0]
        for seq, path in segs:
            if seq < self.position.seq:
                continue
            if seq > self.position.seq:
                self.position = Position(seq, 0)
            for payload, end in self._records(path, seq, newest):
                out.append((payload, end))
                size += len(payload)
                self.position = end
                if len(out) >= max_records or size >= max_bytes:
                    return out
            if seq == newest:
                break
        return out

    def _records(self, path: Path, seq: int, newest: int) -> Iterator[tuple[bytes, Position]]:
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed below, generator-held
        except FileNotFoundError:
            return
        with fh:
            offset = self.position.offset
            fh.seek(offset)
            while True:
                head = fh.read(HEADER.size)
                if len(head) < HEADER.size:
                    if head and seq != newest:
                        self.stats.torn += 1
                    return
                magic, length, crc = HEADER.unpack(head)
                if magic != MAGIC:
                    self.stats.corrupt += 1
                    self._skip_rest(seq, newest)
                    return
                payload = fh.read(length)
                if len(payload) < length:
                    # The newest segment may be mid-write: come back later. An older one was
                    # cut short by a crash.
                    if seq != newest:
                        self.stats.torn += 1
                    return
                if zlib.crc32(payload) != crc:
                    if seq == newest:
                        return  # perhaps still being written; a restart makes it old
                    self.stats.corrupt += 1
                    self._skip_rest(seq, newest)
                    return
                offset += HEADER.size + length
                self.stats.read += 1
                yield payload, Position(seq, offset)

    def _skip_rest(self, seq: int, newest: int) -> None:
        # Framing is lost: nothing after this point of the segment can be trusted.
        if seq != newest:
            self.position = Position(seq + 1, 0)

    def rewind(self) -> None:
        """Forget what was read but not committed (it is read again)."""
        self.position = self.committed

    def commit(self, pos: Position) -> None:
        """Mark everything before ``pos`` consumed; delete segments that are wholly consumed."""
        tmp = self.folder / (CURSOR + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, f"{pos.seq} {pos.offset}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.folder / CURSOR)
        self.committed = pos
        for seq, path in segments(self.folder):
            if seq >= pos.seq:
                break
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def backlog(self) -> tuple[int, int]:
        """(bytes not yet consumed, segments holding them), from the committed cursor."""
        total, n = 0, 0
        for seq, path in segments(self.folder):
            if seq < self.committed.seq:
                continue
            size = _size(path) - (self.committed.offset if seq == self.committed.seq else 0)
            total += max(0, size)
            n += 1
        return total, n
