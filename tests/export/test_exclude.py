"""Feedback ``exclude`` = true (what `lithify ui`'s exclude writes) keeps a call out of every
export, by default, in every row kind: the rows holding it are skipped and counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from lithify.export.trainer import EXCLUDE_FEEDBACK, SKIP_REASONS
from tests.export.helpers import feedback, read_rows, run_export, tool_session


def _ids(out: Path) -> list[list[str]]:
    return [r["metadata"]["source_call_ids"] for r in read_rows(out / "train.jsonl")]


@pytest.mark.parametrize("kind", ["sft", "nemo-gym"])
def test_an_excluded_session_gives_no_rows(tmp_path: Path, kind: str) -> None:
    facts = tool_session("s-1") + tool_session("s-2")
    fb = [feedback("s-1", True, kind="session", name=EXCLUDE_FEEDBACK)]
    summary = run_export(facts, tmp_path, fb, kind=kind)
    assert all(ids[0].startswith("s-2") for ids in _ids(tmp_path)) and _ids(tmp_path)
    assert summary.skipped == {"excluded": 2 if kind == "sft" else 1}
    assert "excluded" in SKIP_REASONS


def test_an_excluded_call_skips_the_rows_that_hold_it(tmp_path: Path) -> None:
    a, b = tool_session("s-1")
    summary = run_export(
        [a, b], tmp_path, [feedback(b.inference_call_id, True, name="exclude")], kind="sft"
    )
    assert _ids(tmp_path) == [["s-1-a"]]  # the first turn's row does not hold the second call
    assert summary.skipped == {"excluded": 1}
    first = tmp_path / "first"
    summary = run_export(
        [a, b], first, [feedback(a.inference_call_id, True, name="exclude")], kind="sft"
    )
    assert _ids(first) == []  # the second turn's row holds the first call as context
    assert summary.skipped == {"excluded": 2}


def test_only_true_excludes(tmp_path: Path) -> None:
    facts = tool_session("s-1")
    for i, value in enumerate([False, "true", 1]):
        fb = [feedback("s-1", value, kind="session", name=EXCLUDE_FEEDBACK)]
        summary = run_export(facts, tmp_path / str(i), fb, kind="sft")
        assert summary.skipped == {} and len(_ids(tmp_path / str(i))) == 2


def test_excluded_beats_where_and_degraded_calls_are_counted_apart(tmp_path: Path) -> None:
    a, b = tool_session("s-1")
    fb = [
        feedback("s-1", True, kind="session", name=EXCLUDE_FEEDBACK),
        feedback("s-1", 1.0, kind="session"),
    ]
    summary = run_export([a, b], tmp_path, fb, kind="rl", where=("score>=0.5",))
    assert _ids(tmp_path) == [] and summary.skipped == {"excluded": 1}
    kept = run_export([a, b], tmp_path / "kept", fb[1:], kind="rl", where=("score>=0.5",))
    assert kept.skipped == {} and _ids(tmp_path / "kept") == [["s-1-a", "s-1-b"]]
