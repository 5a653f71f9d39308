"""`lithify convert --engine ray` (docs/scale.md): every input file is a Ray task converted by
the same pipeline as a local run (``ingest.convert.run``: the same translators, the same
fact-file lines), into a fact file of its own in the output folder, ``part-NNNNN.jsonl`` after
the input's place in ``files.expand`` order; the summaries are added up in that order. The
folder is what ``lithify import DIR`` and ``lithify export --facts DIR`` read.

Ray is an optional extra: imported when this runs, on a Ray the caller connected to.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lithify.ingest.convert import MAX_LISTED, JsonlSink, StrictError, Summary, open_output, run
from lithify.ingest.files import expand

__all__ = ["convert_ray"]


def _convert_one(item: dict[str, Any]) -> dict[str, Any]:
    """One input to its fact file; the summary (or the strict error) travels back pickled."""
    index, path = int(item["index"]), Path(item["path"])
    target = Path(item["out"]) / f"part-{index:05d}.jsonl"
    try:
        with open_output(str(target)) as out:
            result: object = run([path], JsonlSink(out), fmt=item["fmt"], strict=item["strict"])
    except StrictError as e:
        result = e.skip
    return {"index": index, "result": pickle.dumps(result)}


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


def convert_ray(
    paths: Iterable[str | Path], out_dir: str | Path, *, fmt: str = "auto", strict: bool = False
) -> Summary:
    """Convert ``paths`` (files or folders) into fact files in ``out_dir``, one Ray task per
    input file; the summary a local run over the same inputs gives. Raises ``StrictError``
    under ``strict`` for the first corrupt unit in input order."""
    import ray

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = [str(p) for p in expand(paths)]
    items = [
        {"index": i, "path": p, "out": str(out), "fmt": fmt, "strict": strict}
        for i, p in enumerate(files)
    ]
    summary = Summary()
    if not items:
        return summary
    done = ray.data.from_items(items, override_num_blocks=len(items)).map(_convert_one)
    for r in sorted(done.take_all(), key=lambda r: r["index"]):
        result = pickle.loads(r["result"])
        if isinstance(result, Summary):
            _add(summary, result)
        else:
            raise StrictError(result)
    return summary
