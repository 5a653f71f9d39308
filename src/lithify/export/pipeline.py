"""The export pipeline: a ``Selection`` of facts → segments with feedback joined (derive) →
rows of one kind and profile, validated → train/eval files, and the ``ExportSummary``."""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import queue
import socket
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from lithify.core import codec
from lithify.core.workers import Closed, WorkerDied, died, failure, received, recv, send, send_each
from lithify.core.workers import start as start_worker
from lithify.derive.feedback import FeedbackIndex
from lithify.derive.segments import iter_segments
from lithify.derive.sessions import DeriveStats, next_session
from lithify.export.flags import Flagger, dropped_flags, note_flags
from lithify.export.manifest import (
    FactCounts,
    FactDigests,
    Provenance,
    call_line,
    publish,
    unpublish,
)
from lithify.export.media import DEFAULT_MAX_INLINE
from lithify.export.profiles import ProfileError, resolve
from lithify.export.rows import Row, RowBuilder
from lithify.export.source import Selection, StoreQuery
from lithify.export.summary import ExportSummary
from lithify.export.tokens import TextCounter, TokenBudget, check_options, load_tokenizer
from lithify.export.where import Condition, parse
from lithify.export.writers import (
    FORMATS,
    Background,
    Lines,
    SplitWriter,
    columns_for,
    hold_folder,
)
from lithify.model import Feedback, InferenceCall
from lithify.store import PartBound, open_store

T = TypeVar("T")


@dataclass(frozen=True)
class ExportOptions:
    kind: str
    profile: str = "canonical"
    reasoning_key: str | None = None
    arguments: str | None = None
    shape: str | None = None  # SFT: messages | prompt-completion
    fmt: str = "jsonl"
    eval_fraction: float = 0.0
    where: tuple[str, ...] = ()
    reward: str = "score"
    keep_degraded: bool = False
    drop_flags: tuple[str, ...] = ()  # quality flags whose rows are left out (export.flags)
    keep_flags: tuple[str, ...] = ()
    images: bool = False  # TRL vision SFT rows (export.media)
    max_inline_bytes: int = DEFAULT_MAX_INLINE  # the largest blob a row may carry inline
    tokenizer: str | None = None  # count rows' tokens with it (export.tokens): folder or name
    max_tokens: int | None = None  # the token budget of a row
    fit: str = "drop"  # a row over it: drop, or split (SFT: cut at a turn boundary)


def make_builder(options: ExportOptions) -> RowBuilder:
    """The row builder for ``options``; raises ``ProfileError``/``WhereError`` for options that
    do not fit together (call it first to reject them before reading anything)."""
    if options.fmt not in FORMATS:
        raise ProfileError(f"--format must be one of {', '.join(FORMATS)}")
    if not 0.0 <= options.eval_fraction <= 1.0:
        raise ProfileError("--eval-fraction must be between 0 and 1")
    profile = resolve(
        options.kind,
        options.profile,
        reasoning_key=options.reasoning_key,
        arguments=options.arguments,
        images=options.images,
    )
    if options.max_inline_bytes < 0:
        raise ProfileError("--max-inline-bytes must be 0 or more")
    if options.shape is not None and options.kind != "sft":
        raise ProfileError("--shape applies to sft rows only")
    conditions: list[Condition] = [parse(w) for w in options.where]
    try:
        dropped_flags(options.drop_flags, options.keep_flags)
        builder = RowBuilder(
            options.kind,
            profile,
            shape=options.shape,
            eval_fraction=options.eval_fraction,
            where=conditions,
            reward=options.reward,
            keep_degraded=options.keep_degraded,
            max_inline=options.max_inline_bytes,
        )
    except ValueError as e:
        raise ProfileError(str(e)) from None
    check_options(
        options.kind,
        tokenizer=options.tokenizer,
        max_tokens=options.max_tokens,
        fit=options.fit,
    )
    return builder


def token_budget(
    options: ExportOptions,
    builder: RowBuilder,
    tokenizer: Any = None,
    sha256: str | None = None,
    text: TextCounter | None = None,
) -> TokenBudget | None:
    """The token stage of an export with ``--tokenizer`` (its tokenizer loaded once, here,
    unless given with its ``sha256`` and ``text`` counter); raises ``TokenizerError`` when it
    cannot be had."""
    if options.tokenizer is None:
        return None
    return TokenBudget(
        load_tokenizer(options.tokenizer) if tokenizer is None else tokenizer,
        options.tokenizer,
        builder.shape,
        kind=options.kind,
        max_tokens=options.max_tokens,
        fit=options.fit,
        validator=builder.validator,
        compares=0 < options.eval_fraction < 1,
        sha256=sha256,
        text=text,
    )


_TICK = 256  # facts per progress report: a report per fact would cost more than the fact


def _ticking(items: Iterable[T], progress: Callable[[int], None]) -> Iterator[T]:
    n = 0
    for item in items:
        yield item
        n += 1
        if n == _TICK:
            progress(n)
            n = 0
    if n:
        progress(n)


def export(
    selection: Selection,
    out_dir: str | Path,
    options: ExportOptions,
    *,
    progress: Callable[[int], None] | None = None,
    provenance: Provenance | None = None,
    workers: int | None = None,
) -> ExportSummary:
    """Derive and write the rows of ``options.kind`` from ``selection`` (``export.source``),
    then their manifest and card (``export.manifest``; ``provenance``: where the facts came from).
    ``selection.close`` is called at the end, whatever happens.

    ``progress`` is told of facts read. ``workers``: processes that build the rows while this
    one reads and writes (``_in_workers``; None: ``_auto``, 0: none); the files are the same
    bytes either way. Raises ``RowInvalid`` when a row fails its schema (nothing is written
    then), and what reading the facts raises.
    """
    try:
        return _export(selection, Path(out_dir), options, progress, provenance, workers)
    finally:
        if selection.close is not None:
            selection.close()


def _export(
    selection: Selection,
    out: Path,
    options: ExportOptions,
    progress: Callable[[int], None] | None,
    provenance: Provenance | None,
    workers: int | None,
) -> ExportSummary:
    builder = make_builder(options)
    budget = token_budget(options, builder)  # before anything is read or written
    index = FeedbackIndex(selection.feedback, selection.aliases)
    # What the source's identity rule left out; derivation counts the rest.
    stats = DeriveStats(duplicates=selection.dropped, richer_dropped=selection.richer)
    digests = FactDigests()
    drop = dropped_flags(options.drop_flags, options.keep_flags)
    flagger = Flagger(options.kind, drop, builder.validator)
    facts = selection.facts  # each with the digest its store kept, or None
    if progress is not None:
        facts = _ticking(facts, progress)
    # Held from the first row to the manifest: another export into the folder fails at once.
    with hold_folder(out):
        columns = columns_for(options.kind, builder.shape, images=options.images)
        writer = SplitWriter(out, options.fmt, columns, before_commit=lambda: unpublish(out))
        n = _workers(options, selection, workers)
        with writer:
            if n:
                query = selection.query
                job = _Job(options, list(selection.feedback), dict(selection.aliases), query)
                told = None if query is None else progress  # else told as this process reads
                into = _Merge(builder, stats, index, digests, flagger, told)
                work = _batches(facts, digests) if query is None else _parts(query)
                rows = _in_workers(work, job, n, into)
            else:
                watched = flagger.watch(digests.watch(facts))
                rows = counted(flagger.apply(derive_rows(watched, index, builder, stats)), budget)
            for row in rows:
                if isinstance(row, Lines):
                    writer.write_lines(row)
                else:
                    writer.write(row)
            for row in counted(flagger.apply(builder.pairs()), budget):
                writer.write(row)
        summary = note_flags(summarize(options, builder, stats, writer, index.dropped()), flagger)
        if budget is not None:
            summary = note_tokens(summary, budget, writer.left_out)
        origin = provenance if provenance is not None else Provenance()
        publish(
            out,
            summary=summary,
            options=options,
            digests=digests,
            feedback=selection.feedback,
            origin=origin,
            hashed=writer.hashed,
        )
        return summary


# -- rows built in worker processes ------------------------------------------------------------
# An export holds one core with Python's work (decoding, derivation, rows, validation: none of
# it releases the GIL). With workers, each worker reads its own parts of a store's selection
# (parts of the session read, whole sessions each: ``StoreQuery``), or, for facts that only this
# process can read (files, memory), this process reads them and hands whole sessions over in
# batches of codec bytes. Part or batch k goes to worker k mod n, and each one's rows and fact
# lines come back in order: the order of a serial export, so the same bytes. A session's rows
# depend on it alone (the Ray export relies on it too); what spans sessions — counts, the
# flags' tally, the feedback targets met — comes back at the end and is added up here.

PARALLEL_FACTS = 4096  # fewer facts are exported in this process: starting workers costs more
_AUTO_MAX = 4  # workers at most unless asked: this process's reading and writing then bind
_BATCH = 4 << 20  # codec bytes of whole sessions per batch
_PART = 256  # calls per part a worker reads itself (whole sessions: a long one makes it longer)
_AHEAD = 2  # batches a worker may hold: memory stays at workers × _AHEAD batches and rows
_batch_encoder = msgspec.msgpack.Encoder()
_batch_decoder = msgspec.msgpack.Decoder(list[tuple[bytes, bytes | None]])
_part_encoder = msgspec.msgpack.Encoder()
_part_decoder = msgspec.msgpack.Decoder(tuple[PartBound | None, PartBound | None])


@dataclass(frozen=True)
class _Job:
    """What a worker builds rows with (pickled into it once)."""

    options: ExportOptions
    feedback: list[Feedback]
    aliases: dict[str, str]
    query: StoreQuery | None = None  # the workers read the facts themselves, in parts


@dataclass(frozen=True)
class _Merge:
    """What this process adds the workers' results into."""

    builder: RowBuilder
    stats: DeriveStats
    index: FeedbackIndex
    digests: FactDigests
    flagger: Flagger
    progress: Callable[[int], None] | None = None  # told of facts the workers read themselves


def _workers(options: ExportOptions, selection: Selection, asked: int | None) -> int:
    """How many worker processes build the rows; 0: this process does. DPO pairs, token
    budgets and TRL vision rows (each needs what the rows of every session leave behind, or
    image bytes) stay in this process."""
    if options.kind == "dpo" or options.tokenizer is not None or options.images:
        return 0
    return max(0, _auto(selection) if asked is None else asked)


def _auto(selection: Selection) -> int:
    """``LITHIFY_EXPORT_WORKERS`` when set; else, for an export of at least ``PARALLEL_FACTS``
    facts, a worker per idle core (by the load average), at most ``_AUTO_MAX``, when that is two
    or more; else none. Workers that read a store themselves cost about a quarter more CPU than
    one process (each starts, and rows cross back to this one), so they pay on idle cores only;
    workers fed by this process (fact files) cost twice the CPU (each fact is encoded here and
    decoded again there), so they start only with two idle cores beyond this process's."""
    env = os.environ.get("LITHIFY_EXPORT_WORKERS", "").strip()
    if env.isdigit():
        return int(env)
    if selection.total is None or selection.total < PARALLEL_FACTS:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    idle = round(cores - os.getloadavg()[0]) - (selection.query is None)
    return min(idle, _AUTO_MAX) if idle >= 2 else 0


def _batches(
    facts: Iterable[tuple[InferenceCall, bytes | None]], digests: FactDigests
) -> Iterator[bytes]:
    """``facts`` (grouped by session, as ``iter_sessions`` checks) as messages to a worker:
    batches of whole sessions' codec bytes, each with its kept digest (a store's read with a
    limit goes so; facts from files or memory have none); ``digests`` counts them."""
    blobs: list[tuple[bytes, bytes | None]] = []
    size = 0
    last: str | None = None  # the column form of the last session id
    prev: object = object()
    for f, sha256 in facts:
        sid = f.session_id
        if sid is not None and sid != prev:
            if size >= _BATCH:
                yield _batch_encoder.encode(blobs)
                blobs, size = [], 0
            last = next_session(last, sid)
        elif sid is None and size >= _BATCH:
            yield _batch_encoder.encode(blobs)
            blobs, size = [], 0
        prev = sid
        data = codec.encode(f)
        blobs.append((data, sha256))
        size += len(data)
        digests.note(f)
    if blobs:
        yield _batch_encoder.encode(blobs)


def _parts(query: StoreQuery) -> Iterator[bytes]:
    """The parts of a store's selection (whole sessions) as messages to a worker."""
    for part in query.parts(_PART):
        yield _part_encoder.encode(part)


# The worker's program (``core.workers.start``).
_WORKER = "import sys; from lithify.export.pipeline import _work; _work(int(sys.argv[1]))"


def _in_workers(work: Iterable[bytes], job: _Job, n: int, into: _Merge) -> Iterator[Row | Lines]:
    """The rows of ``work`` (``_batches`` or ``_parts``), built by ``n`` worker processes, in
    the order one process makes them (a JSONL export's train rows as ``Lines``); the fact lines
    and the workers' counts go ``into`` this process's. ``WorkerDied`` (nothing is written)
    when one ends before its rows are sent."""
    socks: list[socket.socket] = []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            sock, proc = start_worker(_WORKER)
            socks.append(sock)
            procs.append(proc)
            send(sock, pickle.dumps(job, protocol=5))
        sent = done = 0
        for message in work:
            while sent - done >= n * _AHEAD:
                yield from _rows_back(socks[done % n], into)
                done += 1
            send(socks[sent % n], message)
            sent += 1
        while done < sent:
            yield from _rows_back(socks[done % n], into)
            done += 1
        for sock in socks:
            send(sock, b"")
        for sock in socks:
            tally, stats, flags, met, counts = received(sock)
            into.digests.merge(counts)
            into.builder.merge(tally)
            into.stats.add(stats)
            into.flagger.merge(flags)
            into.index.meet(met)
        for proc in procs:
            proc.wait()
    except Closed as e:  # not a worker's own error (raised here as it was), which may be one
        cause = died(procs, "an export worker process")
        raise WorkerDied(f"{cause}; nothing was written") from e
    finally:
        for proc in procs:
            if proc.poll() is None:  # this export failed or was abandoned: so is their work
                proc.kill()
                proc.wait()
        for sock in socks:
            sock.close()


def _rows_back(sock: socket.socket, into: _Merge) -> Iterator[Row | Lines]:
    lines, rows, train = received(sock)
    for line in lines:
        into.digests.add(line)
    if into.progress is not None:
        into.progress(len(lines))
    if train is not None:  # JSONL: the part's train rows, as one message of lines
        count, prompts = train
        yield Lines(recv(sock), count, prompts)
    for encoded, split, prompt, spans, data in rows:
        # No source ids: the writer reads none (a worker's rows were validated and flagged there).
        yield Row(data, encoded, split, prompt, [], spans)


def _work(fd: int) -> None:
    """A worker, on the socket ``fd``: its job, then batches of sessions or parts to read in,
    their fact lines and rows out, then its tallies."""
    sock = socket.socket(fileno=fd)
    # Batches are taken in as they come, so the main process never waits on a worker that is
    # itself waiting to hand back rows.
    job: _Job = pickle.loads(recv(sock))
    inbox: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
    threading.Thread(target=_receive, args=(sock, inbox), daemon=True).start()
    # Rows go out from a thread of their own, so that this worker builds its next part while
    # the main process, taking the other workers' rows in, has not yet read this one's.
    outbox = Background(functools.partial(send_each, sock), depth=1)
    try:
        options = job.options
        builder = make_builder(options)
        index = FeedbackIndex(job.feedback, job.aliases)
        stats = DeriveStats()
        drop = dropped_flags(options.drop_flags, options.keep_flags)
        flagger = Flagger(options.kind, drop, builder.validator)
        reader = codec.FactReader()
        columns = columns_for(options.kind, builder.shape)
        counts = FactCounts()  # of the facts this worker read from the store itself
        with contextlib.ExitStack() as stack:
            query = job.query  # parts to read, else batches of facts
            store = None if query is None else stack.enter_context(open_store(query.url))
            while message := inbox.get():
                if query is not None and store is not None:
                    digested = query.read(store, _part_decoder.decode(message))
                else:
                    blobs = _batch_decoder.decode(message)
                    digested = ((reader.decode(b), sha256) for b, sha256 in blobs)
                lines: list[bytes] = []
                facts = _lined(digested, lines, None if query is None else counts)
                rows = flagger.apply(derive_rows(flagger.watch(facts), index, builder, stats))
                if options.fmt == "jsonl":
                    out, train, block = _split_lines(rows)
                    outbox.put([pickle.dumps((lines, out, train), protocol=5), block])
                else:
                    out = [_sent(row, columns) for row in rows]
                    outbox.put([pickle.dumps((lines, out, None), protocol=5)])
        tally = (builder.tally(), stats, flagger.tally(), index.take_met(), counts)
        outbox.put([pickle.dumps(tally, protocol=5)])
        outbox.close()
    except BaseException as e:  # handed to the main process, which raises it
        with contextlib.suppress(BaseException):  # after what was sent before it, in order
            outbox.put([failure(e)])
            outbox.close()
        while inbox.get():  # what is still sent is taken and dropped: the main process raises
            pass


def _lined(
    digested: Iterable[tuple[InferenceCall, bytes | None]],
    lines: list[bytes],
    counts: FactCounts | None,
) -> Iterator[InferenceCall]:
    """The facts of ``digested`` as they are read, their facts.sha256 lines added to
    ``lines`` (and the facts to ``counts``) on the way: a part streams through, as one
    process's read does, rather than being held whole (decoded and held whole, a part cost
    its worker about 15% more CPU: docs/export-speed.md)."""
    for f, sha256 in digested:
        lines.append(call_line(f, sha256))
        if counts is not None:
            counts.note(f)
        yield f


def _receive(sock: socket.socket, inbox: queue.SimpleQueue[bytearray]) -> None:
    try:
        while batch := recv(sock):
            inbox.put(batch)
    except (EOFError, OSError):
        pass
    inbox.put(bytearray())


_Sent = tuple[bytes, str, bytes, dict[str, tuple[int, int]] | None, dict[str, Any]]


def _split_lines(rows: Iterable[Row]) -> tuple[list[_Sent], tuple[int, bytes], bytes]:
    """A JSONL export's rows as a worker sends them: the train rows as lines (each row's JSON
    and a newline) with their count and prompt digests, the eval rows one by one (the writer
    holds them back to the end)."""
    out: list[_Sent] = []
    block: list[bytes] = []
    prompts: list[bytes] = []
    for row in rows:
        if row.split == "train":
            block += (row.encoded, b"\n")
            prompts.append(row.prompt)
        else:
            out.append((row.encoded, row.split, row.prompt, None, {}))
    return out, (len(prompts), b"".join(prompts)), b"".join(block)


def _sent(row: Row, columns: tuple[tuple[str, str], ...]) -> _Sent:
    """What the Parquet writer reads of a row (every object sent is pickled here and again made
    there): its ``data`` only where the row's JSON does not hold the value: a JSON column with
    its place known is a view of it (a mark stands for the value), a reward column is the
    value."""
    spans = row.spans
    if spans is None:
        data = row.data
    else:
        data = {}
        for name, kind in columns:
            value = row.data.get(name)
            data[name] = True if kind == "json" and name in spans and value is not None else value
    return (row.encoded, row.split, row.prompt, spans, data)


def counted(rows: Iterable[Row], budget: TokenBudget | None) -> Iterable[Row]:
    """``rows`` through the token stage, when there is one."""
    return rows if budget is None else budget.apply(rows)


def note_tokens(summary: ExportSummary, budget: TokenBudget, left_out: set[bytes]) -> ExportSummary:
    """``summary`` with the token counts of the rows written and the rows over the budget."""
    summary.tokens = budget.finish(left_out)
    skipped = Counter(summary.skipped)
    skipped.update(budget.left_out)
    summary.skipped = _by_reason(skipped)
    return summary


def derive_rows(
    facts: Iterable[InferenceCall], index: FeedbackIndex, builder: RowBuilder, stats: DeriveStats
) -> Iterator[Row]:
    """The rows of facts grouped by session: derivation with feedback joined, then the builder.
    The local export runs it over all its facts, a distributed one (``export.distributed``)
    over each session's, so both make the same rows."""
    for segment in iter_segments(facts, index, stats):
        yield from builder.rows(segment)


def summarize(
    options: ExportOptions,
    builder: RowBuilder,
    stats: DeriveStats,
    writer: SplitWriter,
    feedback_dropped: dict[str, int],
) -> ExportSummary:
    """The summary of an export whose rows ``builder`` built and ``writer`` wrote."""
    counts = builder.counts
    skipped = Counter(counts.skipped)
    skipped["eval_prompt_in_train"] += writer.eval_prompt_in_train
    return ExportSummary(
        kind=options.kind,
        profile=builder.profile.name,
        shape=builder.shape,
        fmt=options.fmt,
        schema=builder.schema_id,
        output=str(writer.folder),
        files={k: str(v) for k, v in writer.paths.items()},
        facts_read=stats.calls + stats.duplicates,
        derive=stats,
        rows=dict(writer.written),
        skipped=_by_reason(skipped),
        filtered=counts.filtered,
        changes=_by_reason(counts.changes),
        feedback_dropped=feedback_dropped,
    )


def _by_reason(counts: Counter[str]) -> dict[str, int]:
    return {k: n for k, n in sorted(counts.items()) if n}
