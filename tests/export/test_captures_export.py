"""Calls captured several times (span and log event, instrumentation and proxy): `lithify export`
from a store gives the same bytes whatever order the captures were imported in, on both
backends, and the same bytes as exporting the same facts from a fact file."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from lithify.cli import app
from lithify.model import Feedback, InferenceCall, encode
from lithify.store import open_store
from tests.derive.helpers import EXAMPLES, facts_of
from tests.export.helpers import (
    captured_twice,
    export_files,
    feedback,
    lost_to_the_session,
    read_rows,
)

runner = CliRunner()

# sft rows of well-rated calls: feedback on a dropped capture's id must reach the kept capture.
KINDS = {
    "sft": ["sft", "--where", "score>=0.5", "--eval-fraction", "0.3"],
    "nemo-gym": ["nemo-gym", "--profile", "nemo-gym"],
    "sessions": ["sft", "--session", "s-log", "--session", "s-proxy"],  # filters: kept captures'
}
# What the summary says, beside where it wrote.
SUMMARY = ("facts_read", "derive", "rows", "skipped", "filtered", "feedback_dropped")


def _feedback() -> list[Feedback]:
    # proxy-pa is kept over the span s-proxy-a, s-proxy-b over the proxy's proxy-pb.
    return [
        feedback("s-proxy-a", 0.9),
        feedback("proxy-pb", 0.8),
        feedback("s-log-a", 0.7),
        feedback("s-three-b", 0.1),
        feedback("s-proxy", 0.6, kind="session"),
    ]


def _export(args: list[str], out: Path) -> dict[str, object]:
    res = runner.invoke(app, ["export", *args, "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_any_import_order_exports_what_the_fact_file_gives(
    new_store_url: Callable[[], str], tmp_path: Path, kind: str
) -> None:
    made = captured_twice()
    examples = sorted(EXAMPLES.glob("*.json"))  # real spans and log events of the same calls
    reference = tmp_path / "all.jsonl"
    lines = [encode(f) for p in examples for f in facts_of(p)]
    lines += [encode(x) for x in [*made, *_feedback()]]
    reference.write_bytes(b"".join(line + b"\n" for line in lines))
    summary = _export([*KINDS[kind], "--facts", str(reference)], tmp_path / "from-file")
    want = export_files(tmp_path / "from-file")
    rows = read_rows(tmp_path / "from-file" / "train.jsonl")
    assert rows  # not trivially equal
    if kind == "sft":  # feedback that joined through another capture's id let these in
        calls = {r["metadata"]["source_call_ids"][-1] for r in rows}
        assert {"proxy-pa", "s-proxy-b", "s-log-a"} <= calls and "s-three-b" not in calls
    for seed in range(3):
        rng = random.Random(seed)
        url = new_store_url()
        steps: list[Path | list[InferenceCall]] = [*examples]
        steps += [made[i : i + 3] for i in range(0, len(made), 3)]
        rng.shuffle(steps)
        for step in steps:
            if isinstance(step, Path):
                res = runner.invoke(app, ["import", str(step), "--store", url, "--json"])
                assert res.exit_code == 0, res.output
            else:
                with open_store(url) as store:
                    store.insert_facts(rng.sample(step, len(step)))
        with open_store(url) as store:
            store.insert_feedback(_feedback())
        out = tmp_path / f"from-store-{seed}"
        from_store = _export([*KINDS[kind], "--store", url], out)
        assert export_files(out) == want, seed
        assert {k: from_store[k] for k in SUMMARY} == {k: summary[k] for k in SUMMARY}


@pytest.mark.parametrize("richer", [True, False], ids=["proxy-kept-reasoning", "same-parts"])
def test_a_dropped_capture_holding_parts_the_read_one_lacks_is_counted(
    new_store_url: Callable[[], str], tmp_path: Path, richer: bool
) -> None:
    """The span (with the session) is read over the proxy's capture (without one) even when
    the proxy kept the reasoning the span lost: the summary, manifest, card and table count
    that capture, the same from fact files in any order and from a store in any import
    order; a dropped capture with no more parts counts nothing."""
    facts = lost_to_the_session(richer)
    want = {"duplicates": 1, "richer_dropped": int(richer)}
    reference = tmp_path / "facts.jsonl"
    reference.write_bytes(b"".join(encode(f) + b"\n" for f in facts))
    summary = _export(["sft", "--facts", str(reference)], tmp_path / "from-file")
    derive = summary["derive"]
    assert {k: derive[k] for k in want} == want  # type: ignore[index]
    files = export_files(tmp_path / "from-file")
    assert orjson.loads(files["manifest.json"])["derive"] == derive
    card = "| captures richer than the one read | 1 |"
    assert (card in files["README.md"].decode()) == richer
    for n, order in enumerate(itertools.permutations(facts)):
        shuffled = tmp_path / f"shuffled-{n}.jsonl"
        shuffled.write_bytes(b"".join(encode(f) + b"\n" for f in order))
        out = tmp_path / f"from-file-{n}"
        assert _export(["sft", "--facts", str(shuffled)], out)["derive"] == derive
        assert export_files(out) == files
    for seed in range(3):
        rng = random.Random(seed)
        url = new_store_url()
        with open_store(url) as store:
            for f in rng.sample(facts, len(facts)):  # one at a time: every arrival order
                store.insert_facts([f])
        out = tmp_path / f"from-store-{seed}"
        from_store = _export(["sft", "--store", url], out)
        assert {k: from_store[k] for k in SUMMARY} == {k: summary[k] for k in SUMMARY}
        assert export_files(out) == files, seed
    res = runner.invoke(app, ["export", "sft", "--store", url, "-o", str(tmp_path / "table")],
                        env={"COLUMNS": "200"})  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "1 duplicate captures dropped" in res.output
    assert ("1 of them with parts the one read lacks" in res.output) == richer
