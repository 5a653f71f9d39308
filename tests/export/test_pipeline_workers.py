"""Rows built in worker processes (``export(..., workers=n)``): the same files, byte for byte,
as one process writes, whatever the kind, format, split and batches; errors come back."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from lithify.derive.sessions import sort_facts
from lithify.export import ExportOptions, Selection, export, from_facts
from lithify.model import InferenceCall, Message, TextPart, encode
from tests.export.helpers import assistant, call, fact, system, text, tool, user
from tests.export.test_corpus_export import corpus

KINDS = [
    {"kind": "sft"},
    {"kind": "sft", "profile": "openai"},
    {"kind": "sft", "profile": "trl", "shape": "prompt-completion"},
    {"kind": "nemo-gym", "profile": "nemo-gym"},
    {"kind": "rl"},
    {"kind": "dpo", "profile": "trl"},  # built in this process whatever is asked
]


def _files(folder: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir())}


def _both(tmp_path: Path, facts: list[InferenceCall], fb: list, workers: int, **options: object):
    """The files of the export in one process and with ``workers``."""
    out = []
    for n in (0, workers):
        folder = tmp_path / f"workers-{n}"
        summary = export(from_facts(facts, fb), folder, ExportOptions(**options), workers=n)
        out.append((_files(folder), summary))
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("opts", KINDS, ids=lambda o: "-".join(o.values()))
def test_workers_write_the_files_one_process_writes(
    tmp_path: Path, fmt: str, opts: dict[str, str]
) -> None:
    facts, fb = corpus()
    (serial, a), (parallel, b) = _both(tmp_path, facts, fb, 2, fmt=fmt, eval_fraction=0.5, **opts)
    assert serial == parallel
    assert a.rows == b.rows and sum(a.rows.values()) > 0
    assert (a.derive, a.flags, a.skipped, a.feedback_dropped) == (
        b.derive, b.flags, b.skipped, b.feedback_dropped,
    )  # fmt: skip


def _agent(s: int, calls: int, size: int) -> list[InferenceCall]:
    """A session of ``calls`` tool-loop calls, ``size`` characters of text each turn."""
    history: list[Message] = [system("Be brief."), user(f"{s}: " + "q" * size)]
    out = []
    for k in range(calls):
        answer = assistant(text(f"{s}.{k} " + "a" * size), call(f"c{s}-{k}", city=f"{k}"))
        out.append(fact(f"c-{s:03d}-{k}", list(history), [answer], session=f"s-{s:03d}",
                        second=k))  # fmt: skip
        history += [Message("assistant", answer.parts), tool(f"c{s}-{k}", "r" * size)]
    return out


def test_many_batches_over_one_two_and_three_workers(tmp_path: Path) -> None:
    # ≈ 40 sessions of 150 KB to 1.2 MB of facts: several 4 MB batches for every worker.
    facts = [f for s in range(40) for f in _agent(s, 8, 3000 + 200 * s)]
    facts.append(fact("lone", [user("No session.")], [assistant(text("Fine."))]))
    for n in (1, 2, 3):
        (serial, a), (parallel, b) = _both(tmp_path / str(n), facts, [], n, kind="sft",
                                           eval_fraction=0.3)  # fmt: skip
        assert serial == parallel, n
        assert a.rows == b.rows and a.rows["eval"] > 0 and a.derive == b.derive


def test_sessions_out_of_order_are_refused_as_one_process_refuses_them(tmp_path: Path) -> None:
    a = _agent(1, 2, 10)
    b = _agent(2, 2, 10)
    facts = sort_facts([*a, *b])
    back = [*facts, *a[:1]]  # session s-001 again after s-002
    for n in (0, 2):
        selection = Selection(back, total=len(back))
        with pytest.raises(ValueError, match="not grouped by session"):
            export(selection, tmp_path / str(n), ExportOptions("sft"), workers=n)
        assert not (tmp_path / str(n) / "train.jsonl").exists()


def test_a_workers_error_is_raised_here_and_nothing_is_written(tmp_path: Path) -> None:
    # A lone surrogate: the fact's JSON, which facts.sha256 hashes, cannot be written.
    # In the first batch, while this process still sends the next ones.
    bad = fact("bad", [user("x")], [assistant(TextPart("\udc00"))], session="s-000")
    facts = [bad, *(f for s in range(1, 30) for f in _agent(s, 8, 4000))]
    errors = []
    for n in (0, 2):
        with pytest.raises(UnicodeEncodeError) as e:
            export(from_facts(facts), tmp_path / str(n), ExportOptions("sft"), workers=n)
        errors.append(str(e.value))
        assert not (tmp_path / str(n) / "manifest.json").exists()
    assert errors[0] == errors[1]


def test_rows_name_the_distributions_version() -> None:
    from lithify.export.rows import EXPORTER

    assert f"lithify {version('lithify')}" == EXPORTER


def test_the_command_with_workers_writes_the_same_folder(tmp_path: Path) -> None:
    """`lithify export` as run, LITHIFY_EXPORT_WORKERS=2 against 0: every file the same."""
    facts = tmp_path / "facts.jsonl"
    calls = sort_facts([f for s in range(12) for f in _agent(s, 6, 20_000)])
    facts.write_bytes(b"".join(encode(f) + b"\n" for f in calls))
    folders = []
    for n in ("0", "2"):
        out = tmp_path / f"out-{n}"
        argv = [sys.executable, "-c", "from lithify.cli import main; main()", "export", "sft"]
        argv += ["--facts", str(facts), "-o", str(out), "--format", "parquet", "--no-progress"]
        env = {**os.environ, "LITHIFY_EXPORT_WORKERS": n}
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        assert done.returncode == 0, done.stderr
        folders.append(_files(out))
    assert folders[0] == folders[1] and "train.parquet" in folders[0]
