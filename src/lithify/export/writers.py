"""Train/eval files: JSONL or Parquet, written atomically in constant memory.

Train rows stream straight into a temporary file in the output folder. Eval rows are spooled
to disk until the end, because an eval row whose exact prompt is also a train row's prompt is
left out (``eval_prompt_in_train``), and that is only known once every row has been seen. Then
both files are fsynced and renamed over ``train.EXT`` / ``eval.EXT``: a failed export leaves an
earlier one untouched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import re
import shutil
import tempfile
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate
from pathlib import Path
from typing import IO, Any, NamedTuple

import orjson

from lithify.export.media import IMAGES_DIR, blob_bytes, file_name
from lithify.export.rows import Row
from lithify.model import BlobPart

FORMATS = ("jsonl", "parquet")
ROW_GROUP = 4096  # rows per Parquet row group at most…
ROW_GROUP_BYTES = 32 << 20  # …and about this much JSON: memory stays bounded by one group
_BUFFER = 1 << 20
_CHUNKS = 8  # JSONL chunks of _BUFFER bytes that may wait for the disk
# JSONL bytes written between syncs: the disk takes the file as it is written, not all of it
# in the fsync at the end, which an export's wall time waited for (0.4 s a GB here).
_SYNC = 64 << 20


# The columns of each row shape: nested values are JSON strings (keys that differ between rows
# are then not null-filled), rewards are doubles.
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "messages": (("messages", "json"), ("tools", "json"), ("metadata", "json")),
    "prompt-completion": (
        ("prompt", "json"),
        ("completion", "json"),
        ("tools", "json"),
        ("reward", "float"),
        ("metadata", "json"),
    ),
    "preference": (
        ("prompt", "json"),
        ("chosen", "json"),
        ("rejected", "json"),
        ("tools", "json"),
        ("metadata", "json"),
    ),
    "openai-preference": (
        ("input", "json"),
        ("preferred_output", "json"),
        ("non_preferred_output", "json"),
        ("metadata", "json"),
    ),
    "segment": (
        ("responses_create_params", "json"),
        ("tools", "json"),
        ("turns", "json"),
        ("reward", "float"),
        ("metadata", "json"),
    ),
    "native": (
        ("responses_create_params", "json"),
        ("recorded_output", "json"),
        ("metadata", "json"),
    ),
}


def columns_for(kind: str, shape: str, images: bool = False) -> tuple[tuple[str, str], ...]:
    cols = COLUMNS[shape]
    if shape == "prompt-completion" and kind == "sft":
        cols = tuple(c for c in cols if c[0] != "reward")
    if images:
        # TRL vision rows: the images column, before metadata as rows hold it.
        cols = (*cols[:-1], ("images", "images"), cols[-1])
    return cols


def put_images(folder: Path, blobs: Iterable[BlobPart], written: set[str]) -> None:
    """Write each image not in ``written`` (names already there) into ``folder`` as
    ``<sha256>.<ext>``, whole or not at all. A name is its bytes: processes that write the same
    image into one folder (Ray workers on a shared filesystem) write the same file."""
    for blob in blobs:
        name = file_name(blob)
        if name in written:
            continue
        written.add(name)
        path = folder / name
        if path.exists():  # another process wrote it
            continue
        tmp = folder / f".{name}.{os.getpid()}.part"
        tmp.write_bytes(blob_bytes(blob))
        os.replace(tmp, path)


class _Blobs:
    """The images of TRL vision rows, each written once (by name: its SHA-256) into a scratch
    folder as rows arrive, so no image stays in memory. On ``commit`` the ones the written rows
    name become ``images/`` (JSONL rows refer to them); Parquet rows carry the bytes instead.

    Rows without their images' bytes (``Row.media`` None: rows read back from Ray's shards)
    take the files their ``images`` name from ``source``, where the workers wrote them."""

    def __init__(self, folder: Path, source: Path | None = None) -> None:
        self.folder = folder
        self.source = source
        self.scratch = Path(tempfile.mkdtemp(prefix=".images-", suffix=".tmp", dir=folder))
        self.named: set[str] = set()  # names the written rows refer to (names, not bytes)
        self.written: set[str] = set()  # names in the scratch folder (rows repeat their context)

    def put(self, row: Row) -> None:
        if row.media is not None or self.source is None:
            put_images(self.scratch, row.media or (), self.written)
            return
        for path in row.data.get("images", ()):
            name = path.rpartition("/")[2]
            if name not in self.written:
                self.written.add(name)
                _link(self.source / name, self.scratch / name)

    def read(self, path: str) -> bytes:
        """The bytes of the image a row names (``images/NAME``)."""
        return (self.scratch / path.rpartition("/")[2]).read_bytes()

    def commit(self, keep: bool) -> None:
        """Replace an earlier export's ``images/`` with the images rows name (``keep``: JSONL)
        or with nothing (Parquet: the bytes are in the rows)."""
        final = self.folder / IMAGES_DIR
        shutil.rmtree(final, ignore_errors=True)
        if not keep or not self.named:
            return
        for p in self.scratch.iterdir():
            if f"{IMAGES_DIR}/{p.name}" not in self.named:
                p.unlink()  # only in rows left out (eval rows whose prompt is a train prompt)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.scratch, 0o777 & ~umask)
        for p in self.scratch.iterdir():
            os.chmod(p, 0o666 & ~umask)
        os.replace(self.scratch, final)
        _fsync_dir(self.folder)

    def discard(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def _features(columns: tuple[tuple[str, str], ...]) -> bytes:
    """The ``datasets`` features of a Parquet file's columns, in the schema metadata where
    ``datasets`` reads them: JSON text columns are strings, and ``images`` a list of ``Image``
    (decoded from the bytes the file carries)."""
    types = {"json": {"dtype": "string", "_type": "Value"}}
    types["float"] = {"dtype": "float64", "_type": "Value"}
    types["images"] = {"feature": {"_type": "Image"}, "_type": "List"}
    return orjson.dumps({"info": {"features": {n: types[t] for n, t in columns}}})


def _link(source: Path, target: Path) -> None:
    """``target`` the file ``source`` is: a hard link, or a copy on another filesystem."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Lines(NamedTuple):
    """Train rows of a JSONL export already joined: each row's JSON and a newline, with the
    count of rows and their prompt digests (``Row.prompt``) joined in the same order."""

    data: bytes | bytearray
    rows: int
    prompts: bytes


class Background:
    """Calls ``work`` on each item given, in order, in a thread of its own.

    Compressing and writing to disk release the GIL: done here, they overlap with building the
    next rows. At most ``depth`` items wait (memory stays bounded). An error in ``work`` is
    raised in the caller at its next ``put`` or at ``close``; later items are dropped.
    """

    _STOP = object()

    def __init__(self, work: Callable[[Any], object], depth: int) -> None:
        self._work = work
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._abandoned = False
        self._thread = threading.Thread(target=self._run, name="lithify-export-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not self._STOP:
            if self._error is None and not self._abandoned:
                try:
                    self._work(item)
                except BaseException as e:
                    self._error = e

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def put(self, item: Any) -> None:
        self._raise()
        self._queue.put(item)

    def close(self) -> None:
        """Wait until every item is done; raise the error of one that failed."""
        if self._thread.is_alive():
            self._queue.put(self._STOP)
            self._thread.join()
        self._raise()

    def abandon(self) -> None:
        """Stop, dropping what waits, and ignore errors (the output is being discarded)."""
        self._abandoned = True
        if self._thread.is_alive():
            self._queue.put(self._STOP)
            self._thread.join()


class _Parquet:
    """Rows appended to a Parquet file one row group at a time (written in the background)."""

    def __init__(
        self,
        path: Path,
        columns: tuple[tuple[str, str], ...],
        blobs: _Blobs | None = None,
    ) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._pa = pa
        self.columns = columns
        self.blobs = blobs
        image = pa.struct([pa.field("bytes", pa.binary()), pa.field("path", pa.string())])
        types = {"json": pa.string(), "float": pa.float64(), "images": pa.list_(image)}
        fields = [pa.field(n, types[t]) for n, t in columns]
        metadata = {b"huggingface": _features(columns)} if blobs is not None else None
        self.schema = pa.schema(fields, metadata=metadata)
        # No statistics or page index that would vary with the library's defaults; the
        # bytes depend on the rows alone (and on the pyarrow version, named in the footer).
        self.writer = pq.ParquetWriter(
            str(path), self.schema, compression="zstd", write_statistics=False
        )
        self.buffer: list[list[Any]] = [[] for _ in columns]
        self.size = 0
        # One row group compresses while the next fills; one more may wait.
        self.background = Background(self.writer.write_table, depth=1)

    def add(
        self,
        data: dict[str, Any],
        encoded: bytes | None = None,
        spans: dict[str, tuple[int, int]] | None = None,
    ) -> None:
        """Append a row; ``spans`` (with ``encoded``) say where its values' JSON already is."""
        # Values found in ``encoded`` are views of it, joined into the column once at flush
        # (no copy per value); an ASCII row has as many characters as bytes in each of them.
        view = memoryview(encoded) if encoded is not None and spans else None
        ascii_row = view is not None and encoded.isascii()  # type: ignore[union-attr]
        for i, (name, kind) in enumerate(self.columns):
            value: Any = data.get(name)
            if kind == "images":
                assert self.blobs is not None
                # The bytes, named as the JSONL rows name them: the same file either way.
                value = [
                    {"bytes": self.blobs.read(p), "path": p.rpartition("/")[2]} for p in value or ()
                ]
                self.size += sum(len(v["bytes"]) for v in value)
            elif kind == "json" and value is not None:
                span = spans.get(name) if spans else None
                # Characters, not bytes: where row groups end must not change with the encoding.
                if view is not None and span is not None:
                    value = view[span[0] : span[1]]
                    self.size += len(value) if ascii_row else len(str(value, "utf-8"))
                else:
                    value = orjson.dumps(value)
                    self.size += len(value) if value.isascii() else len(value.decode())
            self.buffer[i].append(value)
        if len(self.buffer[0]) >= ROW_GROUP or self.size >= ROW_GROUP_BYTES:
            self.flush()

    def _array(self, values: list[Any], type_: Any) -> Any:
        if type_ != self._pa.string():
            # Images: one row group's bytes at most are in memory (ROW_GROUP_BYTES counts them).
            return self._pa.array(values, type=type_)
        if None in values:
            return self._pa.array(
                [None if v is None else str(v, "utf-8") for v in values], type=type_
            )
        # JSON text straight into the array's buffers: no str per value.
        offsets = array("i", accumulate(map(len, values), initial=0))
        data = b"".join(values)
        return self._pa.StringArray.from_buffers(
            len(values), self._pa.py_buffer(offsets), self._pa.py_buffer(data)
        )

    def flush(self) -> None:
        if not self.buffer[0]:
            return
        table = self._pa.Table.from_arrays(
            [self._array(col, f.type) for col, f in zip(self.buffer, self.schema, strict=True)],
            schema=self.schema,
        )
        self.background.put(table)
        self.buffer = [[] for _ in self.columns]
        self.size = 0

    def close(self) -> None:
        self.flush()
        self.background.close()
        self.writer.close()

    def discard(self) -> None:
        self.background.abandon()
        self.writer.close()


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` whole (``os.write`` may write less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Output:
    """One temporary output file that becomes ``final`` on ``commit``."""

    def __init__(
        self,
        folder: Path,
        final: Path,
        fmt: str,
        columns: tuple[tuple[str, str], ...],
        blobs: _Blobs | None = None,
    ):
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=folder)
        self.tmp = Path(tmp)
        self.final = final
        self.fmt = fmt
        self.rows = 0
        self.fd: int | None = None
        self.parquet: _Parquet | None = None
        if fmt == "jsonl":
            self.fd = fd
            # Lines gather here (row, newline, row, …); about _BUFFER bytes of them at a time
            # are hashed and written in the background (the manifest's entry, not read back).
            self.lines: list[bytes | bytearray] = []
            self.pending = 0
            self.hash = hashlib.sha256()
            self.size = 0
            self.synced = 0
            self.background = Background(self._write, depth=_CHUNKS)
        else:
            os.close(fd)
            self.parquet = _Parquet(self.tmp, columns, blobs)

    def _write(self, lines: list[bytes | bytearray]) -> None:
        # One buffer: hashed in one call that releases the GIL, where a call per line would
        # take it back for every row.
        data = lines[0] if len(lines) == 1 else b"".join(lines)
        self.hash.update(data)
        self.size += len(data)
        assert self.fd is not None
        _write_all(self.fd, data)
        if self.size - self.synced >= _SYNC:
            getattr(os, "fdatasync", os.fsync)(self.fd)  # macOS has no fdatasync
            self.synced = self.size

    def entry(self) -> tuple[str, int] | None:
        """The SHA-256 and size of a closed JSONL file, as written; None for Parquet."""
        return (self.hash.hexdigest(), self.size) if self.fmt == "jsonl" else None

    def add(
        self,
        encoded: bytes,
        data: dict[str, Any] | None,
        spans: dict[str, tuple[int, int]] | None = None,
    ) -> None:
        self.rows += 1
        if self.fd is not None:
            self.lines.append(encoded)
            self.lines.append(b"\n")
            self.pending += len(encoded) + 1
            if self.pending >= _BUFFER:
                self.background.put(self.lines)
                self.lines = []
                self.pending = 0
        else:
            assert self.parquet is not None
            if data is None:
                self.parquet.add(orjson.loads(encoded))
            else:
                self.parquet.add(data, encoded, spans)

    def add_lines(self, lines: Lines) -> None:
        """JSONL rows already joined, after those added before."""
        self.rows += lines.rows
        if self.lines:
            self.background.put(self.lines)
            self.lines = []
            self.pending = 0
        if lines.data:
            self.background.put([lines.data])

    def close(self) -> None:
        if self.fd is not None:
            if self.lines:
                self.background.put(self.lines)
                self.lines = []
            self.background.close()
            os.fsync(self.fd)
            os.close(self.fd)
            self.fd = None
        elif self.parquet is not None:
            self.parquet.close()
            self.parquet = None
            with open(self.tmp, "rb") as fh:
                os.fsync(fh.fileno())

    def commit(self) -> None:
        # mkstemp makes 0600 files; an export gets the usual mode for new files.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.tmp, 0o666 & ~umask)
        os.replace(self.tmp, self.final)

    def discard(self) -> None:
        try:
            if self.fd is not None:
                self.background.abandon()
                os.close(self.fd)
                self.fd = None
            elif self.parquet is not None:
                self.parquet.discard()
        except Exception:
            pass
        self.tmp.unlink(missing_ok=True)


class FolderBusy(RuntimeError):
    """Another export is writing into the output folder."""


# The temporary files an export makes in its folder (mkstemp's names: a prefix, 8 random
# characters, ".tmp"): the rows' files, the digests, card and manifest (``write_atomic``), the
# prompts and eval rows spooled, the images' scratch folder. An export killed (SIGKILL, a power
# cut) before it could remove them leaves them behind, a train file's worth of bytes.
_LEFTOVER = re.compile(
    r"\.(?:(?:train|eval)\.(?:jsonl|parquet)\.|(?:facts\.sha256|README\.md|manifest\.json)\."
    r"|train-prompts\.|eval-spool\.|images-)[a-z0-9_]{8}\.tmp"
)


@contextlib.contextmanager
def hold_folder(folder: Path) -> Iterator[None]:
    """``folder`` (made if missing) held by this export for the block: another export into it
    at the same time raises ``FolderBusy`` at once, rather than the two replacing each other's
    files one by one. Held, the temporary files an export killed there left are removed. On a
    file system without locks the block runs unguarded, and removes nothing."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            import fcntl  # POSIX only: elsewhere the block runs unguarded

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderBusy(f"another export is writing into {folder}") from None
        except (ImportError, OSError):
            pass
        else:
            for entry in os.scandir(folder):
                if _LEFTOVER.fullmatch(entry.name):
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        Path(entry.path).unlink(missing_ok=True)
        yield
    finally:
        os.close(fd)  # and with it the lock


class SplitWriter:
    """Writes rows to ``DIR/train.EXT`` and ``DIR/eval.EXT``; use as a context manager.

    Leaving the block normally commits both files; an exception discards everything written.
    """

    def __init__(
        self,
        folder: Path,
        fmt: str,
        columns: tuple[tuple[str, str], ...],
        before_commit: Callable[[], None] | None = None,
        images_from: Path | None = None,
    ) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}")
        self.folder = Path(folder)
        self.fmt = fmt
        self.columns = columns
        self.paths = {s: self.folder / f"{s}.{fmt}" for s in ("train", "eval")}
        self.written = {"train": 0, "eval": 0}
        # Split → (SHA-256, bytes) of the files hashed as they were written (JSONL).
        self.hashed: dict[str, tuple[str, int]] = {}
        self.eval_prompt_in_train = 0
        self.left_out: set[bytes] = set()  # the prompt digests of those eval rows
        self._temps: list[Path] = []
        # Called once the files are complete, right before they replace earlier ones.
        self.before_commit = before_commit
        self.blobs: _Blobs | None = None  # TRL vision rows' images
        self._images = any(t == "images" for _, t in columns)
        # Where the images of rows without their bytes are (_Blobs.source).
        self.images_from = images_from

    def __enter__(self) -> SplitWriter:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self._images:
            self.blobs = _Blobs(self.folder, self.images_from)
        self.train = _Output(self.folder, self.paths["train"], self.fmt, self.columns, self.blobs)
        self._train_prompts = self._temp(".train-prompts.")
        self._eval_spool = self._temp(".eval-spool.")
        self._eval_prompts: set[bytes] = set()
        return self

    def _temp(self, prefix: str) -> IO[bytes]:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=self.folder)
        self._temps.append(Path(tmp))
        return os.fdopen(fd, "w+b", buffering=_BUFFER)

    def write(self, row: Row) -> None:
        if self.blobs is not None:
            self.blobs.put(row)
        if row.split == "train":
            if self.blobs is not None:
                self.blobs.named.update(row.data.get("images", ()))
            self.train.add(row.encoded, row.data, row.spans)
            self._train_prompts.write(row.prompt)
        else:
            self._eval_prompts.add(row.prompt)
            self._eval_spool.write(row.prompt)
            self._eval_spool.write(len(row.encoded).to_bytes(8, "big"))
            self._eval_spool.write(row.encoded)

    def write_lines(self, lines: Lines) -> None:
        """Train rows as ``write`` writes them, one by one (JSONL, without images)."""
        self.train.add_lines(lines)
        self._train_prompts.write(lines.prompts)

    def _conflicts(self) -> set[bytes]:
        """Eval prompts that are also train prompts (the train digests are read back)."""
        found: set[bytes] = set()
        fh = self._train_prompts
        fh.flush()
        fh.seek(0)
        while chunk := fh.read(16 * 65536):
            for i in range(0, len(chunk), 16):
                d = chunk[i : i + 16]
                if d in self._eval_prompts:
                    found.add(d)
        return found

    def _spooled(self) -> Iterator[tuple[bytes, bytes]]:
        fh = self._eval_spool
        fh.flush()
        fh.seek(0)
        while head := fh.read(24):
            n = int.from_bytes(head[16:], "big")
            yield head[:16], fh.read(n)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        evals: _Output | None = None
        try:
            if exc_type is not None:
                return
            conflicts = self._conflicts()
            self.left_out = conflicts
            evals = _Output(self.folder, self.paths["eval"], self.fmt, self.columns, self.blobs)
            for prompt, encoded in self._spooled():
                if prompt in conflicts:
                    self.eval_prompt_in_train += 1
                    continue
                if self.blobs is not None:
                    self.blobs.named.update(orjson.loads(encoded).get("images", ()))
                evals.add(encoded, None)
            self.train.close()
            evals.close()
            if self.before_commit is not None:
                self.before_commit()
            self.train.commit()
            evals.commit()
            if self.blobs is not None:
                self.blobs.commit(keep=self.fmt == "jsonl")
            else:
                shutil.rmtree(self.folder / IMAGES_DIR, ignore_errors=True)
            _fsync_dir(self.folder)
            self.written = {"train": self.train.rows, "eval": evals.rows}
            for split, output in (("train", self.train), ("eval", evals)):
                if (entry := output.entry()) is not None:
                    self.hashed[split] = entry
        finally:
            self.train.discard()
            if evals is not None:
                evals.discard()
            for fh in (self._train_prompts, self._eval_spool):
                fh.close()
            if self.blobs is not None:
                self.blobs.discard()
            for p in self._temps:
                p.unlink(missing_ok=True)
