"""`lithify convert --engine ray` (docs/scale.md): the inputs (local files and folders, or URLs
that ``files.expand`` lists) become Ray tasks converted by the same pipeline as a local run
(``ingest.convert.run``: the same translators, the same fact-file lines), each into a fact file
of its own in the output folder, ``part-NNNNN.jsonl`` after the task's place in input order.

An input is one task, except a plain JSON lines file larger than ``split_bytes``: its bytes are
cut into ranges, and a task converts the lines that start in its range (``files.owned_lines``),
so one large file spreads over the workers. The driver adds the tasks' summaries up in that
order, a split file's as the one input it is (its line numbers counted on from the ranges
before), so the parts, concatenated in name order, and the summary are a local run's.

Ray is an optional extra: imported when this runs, on a Ray the caller connected to.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from lithify.ingest.convert import MAX_LISTED, JsonlSink, StrictError, Summary, open_output, run
from lithify.ingest.files import LineRange, expand, splittable
from lithify.ingest.remote import RemoteFile
from lithify.model import Skip

__all__ = [
    "SPLIT_BYTES", "Merger", "Task", "byte_ranges", "convert_ray", "convert_tasks", "emptier",
    "input_size", "merge",
]  # fmt: skip

# A JSON lines input larger than this is several tasks. Big enough that a task's start-up
# (a Ray task, opening the file, an object store's first byte) is small next to converting
# its share, small enough that a 10 GB file keeps 160 workers busy.
SPLIT_BYTES = 64 << 20


def byte_ranges(size: int, split_bytes: int) -> list[tuple[int, int]]:
    """``[0, size)`` cut into consecutive ranges of ``split_bytes`` (the last one shorter)."""
    if split_bytes < 1:
        raise ValueError("split_bytes must be at least 1")
    return [(start, min(start + split_bytes, size)) for start in range(0, size, split_bytes)]


def input_size(path: Path | RemoteFile) -> int | None:
    """An input's size in bytes, or None when it is not a file or cannot be read."""
    if isinstance(path, RemoteFile):
        return path.size
    try:
        return path.stat().st_size if path.is_file() else None
    except OSError:
        return None


def _ranges(path: Path | RemoteFile | LineRange, split_bytes: int) -> list[LineRange]:
    """The ranges of a plain JSON lines input larger than ``split_bytes``; none of another."""
    if isinstance(path, LineRange):
        return []
    size = input_size(path)
    if size is None or size <= split_bytes or not splittable(path):
        return []
    return [LineRange(path, start, end) for start, end in byte_ranges(size, split_bytes)]


class Task(NamedTuple):  # not a dataclass: a third of the time to define, paid by `convert`
    """One task: ``index`` names its part; ``file`` is its input's place in input order."""

    index: int
    file: int
    source: Path | RemoteFile | LineRange

    @property
    def size(self) -> int:
        """The bytes it reads, as far as known (0 for an input whose size is not)."""
        if isinstance(self.source, LineRange):
            return self.source.end - self.source.start
        return input_size(self.source) or 0


def convert_tasks(paths: Iterable[str | Path], split_bytes: int = SPLIT_BYTES) -> Iterator[Task]:
    """The tasks of converting ``paths``, in input order: a task per input, or per range of
    ``split_bytes`` of a plain JSON lines input larger than that."""
    index = 0
    for number, path in enumerate(expand(paths)):
        for source in _ranges(path, split_bytes) or [path]:
            yield Task(index, number, source)
            index += 1


def part_name(index: int, tasks: int) -> str:
    """The part of task ``index`` of ``tasks``: names sort as the tasks do, however many."""
    return f"part-{index:0{max(5, len(str(tasks - 1)))}d}.jsonl"


def convert_task(
    task: Task, out_dir: str | Path, tasks: int, *, fmt: str = "auto", strict: bool = False
) -> tuple[Summary | Skip, int]:
    """Run ``task`` into its part: its summary (or the strict error's ``Skip``), and for a
    range, how many lines it held."""
    target = Path(out_dir) / part_name(task.index, tasks)
    try:
        with open_output(str(target)) as out:
            result: Summary | Skip = run([task.source], JsonlSink(out), fmt=fmt, strict=strict)
    except StrictError as e:
        result = e.skip
    return result, task.source.lines if isinstance(task.source, LineRange) else 0


def _convert_one(item: dict[str, Any]) -> dict[str, Any]:
    """The Ray map: one task, its result pickled (the task too: a path or a range)."""
    import pickle

    task = pickle.loads(item["task"])
    result = convert_task(task, item["out"], item["tasks"], fmt=item["fmt"], strict=item["strict"])
    return {"index": task.index, "result": pickle.dumps(result)}


def emptier(out_dir: str | Path, tasks: int) -> Callable[[Task], None]:
    """``merge``'s ``drop`` for parts in ``out_dir``: a dropped task's part is emptied."""

    def empty(task: Task) -> None:
        with open_output(str(Path(out_dir) / part_name(task.index, tasks))):
            pass

    return empty


def _add(total: Summary, part: Summary) -> None:
    total.inputs += part.inputs
    total.units += part.units
    total.facts += part.facts
    total.feedback += part.feedback
    total.skipped.update(part.skipped)
    total.degradations.update(part.degradations)
    total.facts_with_degradations += part.facts_with_degradations
    total.unreadable += part.unreadable
    total.corrupt = (total.corrupt + part.corrupt)[:MAX_LISTED]
    total.no_fact_inputs.update(part.no_fact_inputs)


def renumber(entry: str, name: str, offset: int) -> str:
    """A corrupt unit's ``NAME:LINE: detail`` (and a detail's own ``line LINE: …``), read in
    a range, with its line counted from the file's start: ``offset`` lines on."""
    head = name + ":"
    if not offset or not entry.startswith(head):
        return entry
    number, sep, detail = entry[len(head) :].partition(": ")
    if not sep or not number.isdigit():
        return entry
    line = int(number)
    own = f"line {line}: "
    if detail.startswith(own):
        detail = f"line {line + offset}: " + detail[len(own) :]
    return f"{head}{line + offset}: {detail}"


class Merger:
    """The tasks' results, added one at a time in task order, into the summary a local run
    gives. A split input counts once; its line numbers go on from range to range; when a range
    could not be read, the ranges after it are left out, as a local run stops reading a file at
    its first error."""

    def __init__(self) -> None:
        self.total = Summary()
        self._file = -1  # the split input whose ranges are being added; -1: none
        self._name = ""
        self._offset = 0  # lines in its ranges so far
        self._ranges = 0  # its ranges so far
        self._facts = 0
        self._reasons: Counter[str] = Counter()
        self._unreadable = False

    def add(self, task: Task, result: Summary | Skip, lines: int) -> bool:
        """Add the next task's result (``lines``: how many a range held); whether its facts
        are written (not for a range after an unreadable one). Raises ``StrictError`` for a
        strict run's corrupt unit."""
        if task.file != self._file:
            self._end_file()
            if isinstance(task.source, LineRange):
                self._file, self._name = task.file, str(task.source)
        elif self._unreadable:
            return False
        if not isinstance(task.source, LineRange):
            if isinstance(result, Skip):
                raise StrictError(result)
            _add(self.total, result)
            return True
        if isinstance(result, Skip):
            detail = renumber(result.detail, self._name, self._offset)
            raise StrictError(Skip(result.reason, detail))
        # The input counts once, its empty-input reason once for all its ranges (_end_file).
        part = msgspec.structs.replace(
            result,
            inputs=int(self._ranges == 0),
            corrupt=[renumber(c, self._name, self._offset) for c in result.corrupt],
            no_fact_inputs={},
        )
        _add(self.total, part)
        self._facts += result.facts + result.feedback
        self._reasons.update(result.skipped)
        self._unreadable = bool(result.unreadable)
        self._offset += lines
        self._ranges += 1
        return True

    def summary(self) -> Summary:
        """The summary of every task added."""
        self._end_file()
        return self.total

    def _end_file(self) -> None:
        if self._file >= 0 and not self._facts and not self._unreadable:
            reasons = dict(sorted(self._reasons.items())) or {"empty": 1}
            self.total.no_fact_inputs[self._name] = reasons
        self._file, self._offset, self._ranges = -1, 0, 0
        self._facts, self._reasons, self._unreadable = 0, Counter(), False


def merge(
    tasks: list[Task],
    results: list[tuple[Summary | Skip, int]],
    drop: Callable[[Task], None],
) -> Summary:
    """The tasks' results (in task order) added up by a ``Merger``; the tasks whose facts must
    not be written are handed to ``drop``."""
    merger = Merger()
    for task, (result, lines) in zip(tasks, results, strict=True):
        if not merger.add(task, result, lines):
            drop(task)
    return merger.summary()


def convert_ray(
    paths: Iterable[str | Path],
    out_dir: str | Path,
    *,
    fmt: str = "auto",
    strict: bool = False,
    split_bytes: int = SPLIT_BYTES,
) -> Summary:
    """Convert ``paths`` (files, folders or URLs) into fact files in ``out_dir``, one Ray task
    per input file or per ``split_bytes`` of a large JSON lines file; the summary a local run
    over the same inputs gives. Raises ``StrictError`` under ``strict`` for the first corrupt
    unit in input order, ``remote.NoFilesystem`` for a URL no installed filesystem reads."""
    import pickle

    import ray

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = list(convert_tasks(paths, split_bytes))
    if not tasks:
        return Summary()
    items = [
        {
            "task": pickle.dumps(t),
            "out": os.fspath(out),
            "tasks": len(tasks),
            "fmt": fmt,
            "strict": strict,
        }
        for t in tasks
    ]
    done = ray.data.from_items(items, override_num_blocks=len(items)).map(_convert_one)
    results = {r["index"]: pickle.loads(r["result"]) for r in done.take_all()}
    return merge(tasks, [results[t.index] for t in tasks], emptier(out, len(tasks)))
