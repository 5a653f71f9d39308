"""`lithify convert` and `lithify import` on several cores of one machine (docs/convert.md,
Worker processes): the inputs cut into the tasks of a Ray run (``distributed.convert_tasks``: a
task per input, or per range of a large JSON lines file), the tasks grouped into jobs of about
``JOB_BYTES``, and the jobs converted by this process and ``workers`` worker processes, each job
into a scratch file of its own (convert) or into the rows a store writes (import). The summaries
are added up as a Ray run's are (``distributed.Merger``) and the jobs' facts appended to the
output, or their rows written, in task order as they come: the same bytes, the same store and
the same summary as one process gives, whatever the number of workers and whichever process
converted which job.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, NamedTuple

from lithify.ingest.convert import JsonlSink, Sink, StrictError, Summary, run
from lithify.ingest.distributed import Merger, Task, convert_tasks, input_size
from lithify.ingest.files import Input, LineRange, expand
from lithify.ingest.remote import RemoteFile
from lithify.model import Feedback, InferenceCall, Skip

if TYPE_CHECKING:
    import socket
    import subprocess

    from lithify.ingest.importer import StoreSink
    from lithify.store import Prepared

# What only runs with workers (sockets, processes, pickles) is imported there: a small
# conversion, which never starts one, does not pay for it.

__all__ = ["JOB_BYTES", "PARALLEL_BYTES", "auto_workers", "convert_parallel", "import_parallel"]

# Inputs smaller than this in all convert in this process alone: a worker costs its start-up
# (about 0.15 s of imports), about what converting 8 MB of spans costs.
PARALLEL_BYTES = 32 << 20
# A job's input: small enough that the last jobs of a run keep every process busy, big enough
# that a job's overhead (a hand-over, a scratch file, opening its input) is small next to it.
JOB_BYTES = 8 << 20
_AUTO_MAX = 3  # workers started by default at most, beside this process
BATCH = 500  # facts a store's rows are prepared for at once: what `lithify import` inserts at once

Progress = Callable[[Input], Callable[[int], None] | None]


# Named tuples, not dataclasses: a third of the time to define, which every `convert` pays.
class _Job(NamedTuple):
    """Tasks to convert in turn: into fact lines in ``scratch``, or with ``prepare`` (a store's
    ``FactStore.preparer``) into the rows a store writes."""

    tasks: list[Task]
    scratch: str
    fmt: str
    strict: bool
    prepare: Callable[..., Prepared] | None = None


class _Done(NamedTuple):
    """A task's result, how many lines it read (a range), and where its facts are in its
    job's scratch file, or their rows."""

    result: Summary | Skip
    lines: int
    start: int = 0
    end: int = 0
    rows: list[Prepared] | None = None


def auto_workers(total: int) -> int:
    """For inputs of ``total`` bytes: none under ``PARALLEL_BYTES``, else a worker per core
    beyond this process's, at most ``_AUTO_MAX``. A worker costs little beside the conversion
    it takes over (its start-up, and its facts copied once), so unlike an export's workers it
    does not wait for idle cores."""
    if total < PARALLEL_BYTES:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(0, min((cores or 1) - 1, _AUTO_MAX))


def _jobs(tasks: list[Task], job_bytes: int) -> list[list[Task]]:
    """Consecutive tasks grouped into jobs of at least ``job_bytes`` (the last one smaller)."""
    jobs: list[list[Task]] = []
    size = job_bytes
    for task in tasks:
        if size >= job_bytes:
            jobs.append([])
            size = 0
        jobs[-1].append(task)
        size += task.size
    return jobs


def run_job(job: _Job, progress: Progress | None = None) -> list[_Done]:
    """Convert a job's tasks, one after another. Under ``strict`` it stops at a task's corrupt
    unit: the tasks after it have no result (the run fails there)."""
    if job.prepare is not None:
        return _run_tasks(job, _Rows(job.prepare), None, progress)
    with open(job.scratch, "wb") as fh:
        return _run_tasks(job, JsonlSink(fh), fh, progress)


def _run_tasks(
    job: _Job, sink: JsonlSink | _Rows, fh: IO[bytes] | None, progress: Progress | None
) -> list[_Done]:
    done: list[_Done] = []
    for task in job.tasks:
        start = fh.tell() if fh is not None else 0
        try:
            result: Summary | Skip = run(
                [task.source], sink, fmt=job.fmt, strict=job.strict, progress=progress
            )
            lines = task.source.lines if isinstance(task.source, LineRange) else 0
        except StrictError as e:  # what came before the corrupt unit is kept, as by run()
            result, lines = e.skip, 0
        end = fh.tell() if fh is not None else 0
        rows = sink.take() if isinstance(sink, _Rows) else None
        done.append(_Done(result, lines, start, end, rows))
        if isinstance(result, Skip):
            break
    return done


class _Rows:
    """A sink of a store's rows, prepared in batches as ``importer.StoreSink`` inserts them."""

    def __init__(self, prepare: Callable[..., Prepared]) -> None:
        self.prepare = prepare
        self.facts: list[InferenceCall] = []
        self.feedback_items: list[Feedback] = []
        self.batches: list[Prepared] = []

    def fact(self, call: InferenceCall) -> None:
        self.facts.append(call)
        if len(self.facts) >= BATCH:
            self.flush()

    def feedback(self, item: Feedback) -> None:
        self.feedback_items.append(item)
        if len(self.feedback_items) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if self.facts or self.feedback_items:
            self.batches.append(self.prepare(self.facts, self.feedback_items))
            self.facts, self.feedback_items = [], []

    def take(self) -> list[Prepared]:
        batches, self.batches = self.batches, []
        return batches


def convert_parallel(
    paths: Iterable[str | Path],
    out: IO[bytes],
    workers: int | None = None,
    *,
    fmt: str = "auto",
    strict: bool = False,
    progress: Progress | None = None,
    scratch: str | Path | None = None,
    job_bytes: int | None = None,
) -> Summary:
    """What ``convert.convert(paths, out)`` writes and gives, converted by this process and
    ``workers`` worker processes (``auto_workers`` when None; 0: this process alone), in jobs
    of about ``job_bytes`` (``JOB_BYTES`` when None). A job's facts wait in a scratch file in
    ``scratch`` (the system's temporary folder when None) until the jobs before it are in the
    output. Raises ``StrictError`` under ``strict`` for the first corrupt unit in input order,
    and what a worker raised (``core.workers.WorkerDied`` for one that died)."""

    def write(job: _Job, kept: list[_Done]) -> None:
        for d in kept:
            _copy((job.scratch, d.start, d.end), out)
        os.unlink(job.scratch)

    return _parallel(
        paths, JsonlSink(out), write, None, scratch, workers, fmt, strict, progress, job_bytes
    )


def import_parallel(
    paths: Iterable[str | Path],
    sink: StoreSink,
    workers: int | None = None,
    *,
    fmt: str = "auto",
    strict: bool = False,
    progress: Progress | None = None,
    job_bytes: int | None = None,
) -> Summary:
    """What ``convert.run(paths, sink)`` stores and gives, with the rows built by this process
    and ``workers`` worker processes as ``convert_parallel`` builds facts; this process writes
    them, a job a transaction, in input order, and ``sink`` counts what they did."""

    def write(job: _Job, kept: list[_Done]) -> None:
        sink.insert_prepared([batch for d in kept for batch in d.rows or ()])

    prepare = sink.store.preparer()
    return _parallel(paths, sink, write, prepare, None, workers, fmt, strict, progress, job_bytes)


def _parallel(
    paths: Iterable[str | Path],
    sink: Sink,
    write: Callable[[_Job, list[_Done]], None],
    prepare: Callable[..., Prepared] | None,
    scratch: str | Path | None,
    workers: int | None,
    fmt: str,
    strict: bool,
    progress: Progress | None,
    job_bytes: int | None,
) -> Summary:
    inputs = list(expand(paths))
    if any(isinstance(i, RemoteFile) and i.url.startswith("memory:") for i in inputs):
        workers = 0  # fsspec's in-memory files: no other process sees them
    if workers is None:
        workers = auto_workers(
            sum(input_size(i) or 0 for i in inputs if not isinstance(i, LineRange))
        )
    job_bytes = job_bytes or JOB_BYTES
    tasks = list(convert_tasks(inputs, job_bytes)) if workers > 0 else []
    jobs = _jobs(tasks, job_bytes)
    if len(jobs) < 2:
        return run(inputs, sink, fmt=fmt, strict=strict, progress=progress)
    n = min(workers, len(jobs) - 1)
    if prepare is not None:  # rows come back in memory: no scratch files
        specs = [_Job(job, "", fmt, strict, prepare) for job in jobs]
        return _Pool(specs, n, progress, write).run()
    # Made only now: a conversion in this process alone leaves no folder behind it, even for
    # a moment.
    with tempfile.TemporaryDirectory(prefix=".lithify-convert-", dir=scratch) as tmp:
        specs = [
            _Job(job, os.path.join(tmp, f"{k}.jsonl"), fmt, strict) for k, job in enumerate(jobs)
        ]
        return _Pool(specs, n, progress, write).run()


def _copy(at: tuple[str, int, int], out: IO[bytes], piece: int = 1 << 20) -> None:
    """Bytes ``[start, end)`` of a scratch file appended to ``out``: by the kernel when ``out``
    is a file's or a pipe's own writer, else (gzip) through this process."""
    path, start, end = at
    with open(path, "rb", buffering=0) as fh:
        if isinstance(out, io.BufferedWriter):
            out.flush()
            try:
                while start < end:
                    sent = os.sendfile(out.fileno(), fh.fileno(), start, end - start)
                    if not sent:
                        break
                    start += sent
            except OSError:  # an output sendfile does not write to: copied below
                pass
        fh.seek(start)
        while start < end:
            data = fh.read(min(piece, end - start))
            if not data:
                raise OSError(f"{path}: ended {end - start} bytes early")
            out.write(data)
            start += len(data)


# The worker's program (``core.workers.start``).
_WORKER = "import sys; from lithify.ingest.parallel import _work; _work(int(sys.argv[1]))"


class _Pool:
    """The jobs, taken in order by this process and by a thread per worker process that hands
    the worker one job at a time. Between its own jobs this process hands the jobs done so far,
    in order, to ``write`` (into the output, or the store), so that only the jobs in flight or
    waiting for an earlier one are held (``ahead``)."""

    def __init__(
        self,
        specs: list[_Job],
        workers: int,
        progress: Progress | None,
        write: Callable[[_Job, list[_Done]], None],
    ) -> None:
        self.specs = specs
        self.workers = workers
        self.write = write
        self.done: dict[int, list[_Done]] = {}  # jobs done and not handed to write yet
        self.next = 0
        self.stop = False
        self.error: BaseException | None = None
        self.merger = Merger()
        self.appended = 0  # jobs whose facts are in the output
        self.changed = threading.Condition()  # guards the five above
        # Jobs taken but not in the output yet, at most: what waits for the output (scratch
        # files, or a store's rows in memory) stays bounded whatever the input's size.
        self.ahead = 2 * (workers + 1)
        self.progress = _Bars(progress) if progress is not None else None

    def claim(self, wait: bool) -> int | None:
        """The next job; None when none is left (or the run stops). No job is taken more than
        ``ahead`` jobs past the output: with ``wait`` until one can be, else -1."""
        with self.changed:
            while True:
                if self.stop or self.next >= len(self.specs):
                    return None
                if self.next - self.appended < self.ahead:
                    self.next += 1
                    return self.next - 1
                if not wait:
                    return -1
                self.changed.wait()

    def finish(self, k: int, got: list[_Done]) -> None:
        with self.changed:
            self.done[k] = got
            # Under --strict the run fails at its first corrupt unit: no job after it is needed.
            if any(isinstance(d.result, Skip) for d in got):
                self.stop = True
            self.changed.notify_all()

    def fail(self, error: BaseException) -> None:
        with self.changed:
            self.error = self.error or error
            self.stop = True
            self.changed.notify_all()

    def append(self, wait: bool, one: bool = False) -> None:
        """Append the done jobs that follow the appended ones; with ``wait``, every job (a
        strict run's corrupt unit raises first, and so does a worker's failure), or with
        ``one`` the next one."""
        while self.appended < len(self.specs):
            with self.changed:
                while (got := self.done.pop(self.appended, None)) is None:
                    if self.error is not None:
                        raise self.error
                    if not wait:
                        return
                    self.changed.wait()
            spec = self.specs[self.appended]
            kept: list[_Done] = []
            # A job cut short by a corrupt unit raises at it, before its missing tasks; what
            # came before it is written first, as one process writes it (into a store, where
            # it stays; a fact file is discarded).
            try:
                for task, d in zip(spec.tasks, got, strict=False):
                    if self.merger.add(task, d.result, d.lines):
                        kept.append(d)
            except StrictError:
                self.write(spec, [*kept, d])
                raise
            self.write(spec, kept)
            with self.changed:
                self.appended += 1
                self.changed.notify_all()
            if one:
                return

    def run(self) -> Summary:
        from lithify.core.workers import start

        procs: list[subprocess.Popen[bytes]] = []
        threads: list[threading.Thread] = []
        finished = False
        try:
            for _ in range(self.workers):
                sock, proc = start(_WORKER)
                procs.append(proc)
                threads.append(
                    threading.Thread(target=self._drive, args=(sock, procs), daemon=True)
                )
                threads[-1].start()
            own = self.progress.bar if self.progress is not None else None
            while (k := self.claim(wait=False)) is not None:
                if k < 0:  # the jobs taken are far enough ahead: output first
                    self.append(wait=True, one=True)
                    continue
                self.finish(k, run_job(self.specs[k], own))
                self.append(wait=False)
            self.append(wait=True)
            for thread in threads:
                thread.join()
            finished = True
            return self.merger.summary()
        finally:
            with self.changed:
                self.stop = True
            for proc in procs:
                if not finished and proc.poll() is None:  # the run failed: so did their work
                    proc.kill()
                proc.wait()

    def _drive(self, sock: socket.socket, procs: list[subprocess.Popen[bytes]]) -> None:
        """One worker's jobs, until none is left; then the worker is told to end."""
        import pickle

        from lithify.core.workers import Closed, WorkerDied, died, received, send

        try:
            with sock:
                while (k := self.claim(wait=True)) is not None:
                    send(sock, pickle.dumps(self.specs[k], protocol=5))
                    self.finish(k, received(sock))
                    if self.progress is not None:
                        self.progress.done(self.specs[k].tasks)
                send(sock, b"")
        except Closed as e:  # not a worker's own error (raised as it was), which may be one
            # Jobs that prepare a store's rows are an import's.
            importing = self.specs[0].prepare is not None
            who = "an import worker process" if importing else "a convert worker process"
            error = WorkerDied(died(procs, who))
            error.__cause__ = e
            self.fail(error)
        except BaseException as e:
            self.fail(e)


class _Bars:
    """One progress callback per input, whichever process reads it: this process's jobs tell
    theirs of bytes as they read, a worker's job of all its bytes once done."""

    def __init__(self, factory: Progress) -> None:
        self.factory = factory
        self.bars: dict[int, Callable[[int], None] | None] = {}
        self.lock = threading.Lock()

    def bar(self, source: Input) -> Callable[[int], None] | None:
        path = source.file if isinstance(source, LineRange) else source
        with self.lock:
            key = id(path)
            if key not in self.bars:
                self.bars[key] = self.factory(path)
            return self.bars[key]

    def done(self, tasks: list[Task]) -> None:
        for task in tasks:
            if (bar := self.bar(task.source)) is not None and task.size:
                bar(task.size)


def _work(fd: int) -> None:
    """A worker, on the socket ``fd``: jobs in, their results out, until an empty message."""
    import pickle
    import socket

    from lithify.core.workers import Closed, failure, recv, send

    with socket.socket(fileno=fd) as sock, contextlib.suppress(Closed):  # its starter is gone
        while message := recv(sock):
            job: _Job = pickle.loads(message)
            try:
                data = pickle.dumps(run_job(job), protocol=5)
            except BaseException as e:
                data = failure(e)
            send(sock, data)
