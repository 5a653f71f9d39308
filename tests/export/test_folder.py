"""The output folder held by one export at a time (``writers.hold_folder``): a second export
into it fails at once, and what an export killed there left behind goes with the next one."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lithify.export import ExportOptions, FolderBusy, export, from_facts
from lithify.model import InferenceCall, Message, encode
from tests.export.helpers import (
    SIGKILL_SELF,
    assistant,
    at_fact,
    call,
    export_files,
    fact,
    hooked,
    system,
    text,
    tool,
    user,
)


def _sessions(n: int, size: int = 2000) -> list[InferenceCall]:
    out = []
    for s in range(n):
        history: list[Message] = [system("Be brief."), user(f"{s}: " + "q" * size)]
        for k in range(4):
            answer = assistant(text(f"{s}.{k} " + "a" * size), call(f"c{s}-{k}", city=f"{k}"))
            out.append(fact(f"c-{s:03d}-{k}", list(history), [answer], session=f"s-{s:03d}",
                            second=k))  # fmt: skip
            history += [Message("assistant", answer.parts), tool(f"c{s}-{k}", "r" * size)]
    return out


def _cli(
    facts: Path, out: Path, *more: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", "from lithify.cli import main; main()", "export", "sft"]
    argv += ["--facts", str(facts), "-o", str(out), "--no-progress", *more]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)


def test_a_second_export_into_a_busy_folder_fails_at_once_and_changes_nothing(
    tmp_path: Path,
) -> None:
    calls = _sessions(6)
    out = tmp_path / "out"
    export(from_facts(calls), out, ExportOptions("sft"))
    before = export_files(out)
    facts = tmp_path / "facts.jsonl"
    facts.write_bytes(b"".join(encode(f) + b"\n" for f in calls))
    fd = os.open(out, os.O_RDONLY)  # as an export running into it holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(FolderBusy, match="another export is writing into"):
            export(from_facts(calls[:4]), out, ExportOptions("sft", eval_fraction=0.5))
        done = _cli(facts, out, "--eval-fraction", "0.5")
        assert done.returncode == 1, done.stderr
        assert f"export failed: another export is writing into {out}" in done.stderr
        assert export_files(out) == before
        assert sorted(p.name for p in out.iterdir()) == sorted(before)  # no temporary file
    finally:
        os.close(fd)
    export(from_facts(calls[:4]), out, ExportOptions("sft"))  # free again
    assert export_files(out) != before


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_what_a_killed_export_left_goes_with_the_next_one(tmp_path: Path, fmt: str) -> None:
    calls = _sessions(30)
    bad = fact("bad", [user("x")], [assistant(text("y"))], session="s-029", second=9)
    facts = tmp_path / "facts.jsonl"
    facts.write_bytes(b"".join(encode(f) + b"\n" for f in [*calls, bad]))
    # The process exporting kills itself at the fact "bad".
    path = hooked(tmp_path / "hook", at_fact("bad", SIGKILL_SELF, workers_only=False))
    out = tmp_path / "out"
    out.mkdir()
    # What is not an export's own stays, hidden or not, .tmp or not.
    theirs = {
        ".notes.tmp": b"a",
        ".train.jsonl.bak": b"b",
        "notes.txt": b"c",
        ".x.abcdefgh.tmp": b"d",
    }
    for name, data in theirs.items():
        (out / name).write_bytes(data)
    env = {**os.environ, "PYTHONPATH": path, "LITHIFY_EXPORT_WORKERS": "0"}
    done = _cli(facts, out, "--format", fmt, env=env)
    assert done.returncode == -9, done.stderr
    left = {p.name for p in out.iterdir()} - theirs.keys()
    assert any(name.startswith(f".train.{fmt}.") for name in left), left
    assert all(name.startswith(".") and name.endswith(".tmp") for name in left), left
    # Others an export makes, as a killed one may leave them.
    made = [".eval.parquet.k3_9xa0q.tmp", ".manifest.json.abc12345.tmp", ".README.md.zz9_0aaa.tmp"]
    for name in made:
        (out / name).write_bytes(b"x")
    (out / ".images-q1w2e3r4.tmp").mkdir()
    (out / ".images-q1w2e3r4.tmp" / "a.png").write_bytes(b"png")
    done = _cli(facts, out, "--format", fmt, env={**os.environ, "LITHIFY_EXPORT_WORKERS": "0"})
    assert done.returncode == 0, done.stderr
    names = {p.name for p in out.iterdir()}
    assert names - theirs.keys() == {f"train.{fmt}", f"eval.{fmt}", "facts.sha256", "README.md",
                                     "manifest.json"}  # fmt: skip
    assert {name: (out / name).read_bytes() for name in theirs} == theirs
