"""`lithify convert`: input files to a facts JSONL stream, with a summary of what happened."""

from __future__ import annotations

import gzip
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Protocol

import msgspec

from lithify.core.factfile import InputError, write_line
from lithify.ingest.files import Located, expand, read_file, read_pair
from lithify.model import Feedback, InferenceCall, Skip


class StrictError(Exception):
    """A corrupt unit under ``--strict``."""

    def __init__(self, skip: Skip) -> None:
        super().__init__(skip.detail)
        self.skip = skip


class Summary(msgspec.Struct):
    inputs: int = 0
    units: int = 0
    facts: int = 0
    feedback: int = 0
    skipped: Counter[str] = msgspec.field(default_factory=Counter)
    degradations: Counter[str] = msgspec.field(default_factory=Counter)
    facts_with_degradations: int = 0
    unreadable: list[str] = msgspec.field(default_factory=list)
    corrupt: list[str] = msgspec.field(default_factory=list)
    # Why each input that gave no fact at all gave none: {path: {reason: count}}.
    no_fact_inputs: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs,
            "units": self.units,
            "facts": self.facts,
            "facts_with_degradations": self.facts_with_degradations,
            "feedback": self.feedback,
            "skipped": dict(sorted(self.skipped.items())),
            "degradations": dict(sorted(self.degradations.items())),
            "unreadable": self.unreadable,
            "corrupt": self.corrupt,
            "no_fact_inputs": self.no_fact_inputs,
        }


MAX_LISTED = 50  # corrupt locations listed in a summary; the count is always complete


@contextmanager
def open_output(path: str | None) -> Iterator[IO[bytes]]:
    """stdout, or a file written atomically: a failed run never truncates an earlier output.
    A ``.gz`` file is gzipped."""
    if path in (None, "-"):
        import sys

        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = Path(path)
    if target.exists() and not target.is_file():
        # A device or a pipe (/dev/null, a FIFO) has nothing to replace atomically: replacing
        # it would put a regular file where /dev/null was.
        with open(target, "wb", buffering=1 << 20) as fh:
            yield fh
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as fh:
            if target.suffix == ".gz":  # what every reader of lithify takes .gz to mean
                with gzip.GzipFile(target.name, "wb", 6, fh, mtime=0) as gz:
                    yield gz  # type: ignore[misc]
            else:
                yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _inputs(
    paths: Iterable[str | Path],
    fmt: str,
    summary: Summary,
    progress: Callable[[Path], Callable[[int], None] | None] | None,
) -> Iterator[tuple[str, Iterator[Located]]]:
    for path in expand(paths):
        summary.inputs += 1
        yield str(path), read_file(path, fmt, progress(path) if progress else None)


class Sink(Protocol):
    """Where the pipeline's facts and feedback go."""

    def fact(self, call: InferenceCall) -> None: ...
    def feedback(self, item: Feedback) -> None: ...
    def flush(self) -> None: ...


class JsonlSink:
    """Facts and feedback facts as the lines of a fact file (core/factfile.py), buffered, in the
    order they came: what `lithify import` and `lithify export --facts` read back."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.buf = bytearray()

    def fact(self, call: InferenceCall) -> None:
        write_line(call, self.buf)
        if len(self.buf) >= 1 << 20:
            self.flush()

    def finite_fact(self, call: InferenceCall) -> None:
        """``fact``, for a fact known to hold no NaN or ±Infinity (``Located.finite``)."""
        write_line(call, self.buf, finite=True)
        if len(self.buf) >= 1 << 20:
            self.flush()

    def feedback(self, item: Feedback) -> None:
        write_line(item, self.buf)
        if len(self.buf) >= 1 << 20:
            self.flush()

    def flush(self) -> None:
        self.out.write(self.buf)
        self.buf.clear()


def convert(
    paths: Iterable[str | Path],
    out: IO[bytes],
    **options: Any,
) -> Summary:
    """Write one fact per line to ``out``; never stops on a bad unit unless ``strict``."""
    return run(paths, JsonlSink(out), **options)


def run(
    paths: Iterable[str | Path],
    sink: Sink,
    *,
    fmt: str = "auto",
    strict: bool = False,
    request: Path | None = None,
    response: Path | None = None,
    progress: Callable[[Path], Callable[[int], None] | None] | None = None,
) -> Summary:
    """Read every input, translate, hand facts and feedback to ``sink``; summarise."""
    summary = Summary()
    # A fact file's sink skips its search for NaN and ±Infinity where the reader knows none is.
    finite_fact = sink.finite_fact if isinstance(sink, JsonlSink) else sink.fact

    def emit(name: str, located: Iterable[Located]) -> None:
        before = (summary.facts, summary.feedback)
        reasons: Counter[str] = Counter()
        for item in located:
            summary.units += 1
            r = item.result
            if isinstance(r, Feedback):
                summary.feedback += 1
                sink.feedback(r)
                continue
            if isinstance(r, InferenceCall):
                summary.facts += 1
                if r.degradations:
                    summary.facts_with_degradations += 1
                    summary.degradations.update(r.degradations)
                (finite_fact if item.finite else sink.fact)(r)
                continue
            summary.skipped[r.reason] += 1
            reasons[r.reason] += 1
            if r.reason == "undecodable":
                if len(summary.corrupt) < MAX_LISTED:
                    summary.corrupt.append(f"{item.location}: {r.detail}")
                if strict:
                    raise StrictError(Skip(r.reason, f"{item.location}: {r.detail}"))
        if (summary.facts, summary.feedback) == before:
            summary.no_fact_inputs[name] = dict(sorted(reasons.items())) or {"empty": 1}

    try:
        if request is not None or response is not None:
            summary.inputs += 1
            name = " + ".join(str(p) for p in (request, response) if p)
            try:
                emit(name, [read_pair(request, response, fmt)])
            except InputError as e:
                summary.unreadable.append(str(e))
        for name, located in _inputs(paths, fmt, summary, progress):
            try:
                emit(name, located)
            except InputError as e:
                summary.unreadable.append(str(e))
    finally:
        sink.flush()
    return summary
