"""Rows built in worker processes (``export(..., workers=n)``): the same files, byte for byte,
as one process writes, whatever the kind, format, split and batches; errors come back."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from lithify.core import factfile
from lithify.derive.sessions import sort_facts
from lithify.export import (
    ExportOptions,
    Selection,
    export,
    from_facts,
    from_store,
    pipeline,
    plain,
)
from lithify.export.manifest import MANIFEST, decode_manifest
from lithify.export.source import StoreQuery
from lithify.model import InferenceCall, Message, encode
from lithify.store import FactFilter, open_store
from tests.export.helpers import (
    SIGKILL_SELF,
    assistant,
    at_fact,
    call,
    fact,
    hooked,
    lost_to_the_session,
    system,
    text,
    tool,
    user,
)
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
    facts += lost_to_the_session()  # a capture dropped with parts the one read lacks
    for n in (1, 2, 3):
        (serial, a), (parallel, b) = _both(tmp_path / str(n), facts, [], n, kind="sft",
                                           eval_fraction=0.3)  # fmt: skip
        assert serial == parallel, n
        assert a.rows == b.rows and a.rows["eval"] > 0 and a.derive == b.derive
        assert (b.derive.duplicates, b.derive.richer_dropped) == (1, 1)


def test_sessions_out_of_order_are_refused_as_one_process_refuses_them(tmp_path: Path) -> None:
    a = _agent(1, 2, 10)
    b = _agent(2, 2, 10)
    facts = sort_facts([*a, *b])
    back = [*facts, *a[:1]]  # session s-001 again after s-002
    for n in (0, 2):
        selection = Selection(plain(back), total=len(back))
        with pytest.raises(ValueError, match="not grouped by session"):
            export(selection, tmp_path / str(n), ExportOptions("sft"), workers=n)
        assert not (tmp_path / str(n) / "train.jsonl").exists()


# A damaged fact, met where a worker hashes it for facts.sha256: injected into the worker
# processes (their interpreter imports it as ``sitecustomize``) and into this one alike.
_DAMAGED = """
def damaged(real):
    def fact_json(fact):
        if fact.inference_call_id == "bad":
            raise ValueError("a damaged fact: bad")
        return real(fact)

    return fact_json
"""


def _damage_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker processes started from now on make no JSON of the fact "bad" (``_DAMAGED``)."""
    hook = f"from lithify.core import factfile\n{_DAMAGED}\nfactfile.fact_json = damaged(factfile.fact_json)\n"
    monkeypatch.setenv("PYTHONPATH", hooked(tmp_path / "hook", hook))


def test_a_workers_error_is_raised_here_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In the first batch, while this process still sends the next ones.
    _damage_workers(tmp_path, monkeypatch)
    here: dict[str, Any] = {}
    exec(_DAMAGED, here)
    monkeypatch.setattr(factfile, "fact_json", here["damaged"](factfile.fact_json))
    bad = fact("bad", [user("x")], [assistant(text("y"))], session="s-000")
    facts = [bad, *(f for s in range(1, 30) for f in _agent(s, 8, 4000))]
    errors = []
    for n in (0, 2):
        with pytest.raises(ValueError, match="a damaged fact: bad") as e:
            export(from_facts(facts), tmp_path / str(n), ExportOptions("sft"), workers=n)
        errors.append(str(e.value))
        assert not (tmp_path / str(n) / "manifest.json").exists()
    assert errors[0] == errors[1]


def test_a_store_read_with_a_limit_sends_its_kept_digests_to_the_workers(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A limit keeps the read in this process, which hands the facts over in batches: with
    each fact goes the digest its store kept, so no worker encodes a fact to hash it (one
    whose JSON a worker cannot make passes), and the files are one process's."""
    _damage_workers(tmp_path, monkeypatch)
    bad = fact("bad", [user("x")], [assistant(text("y"))], session="s-000")
    facts = [bad, *(f for s in range(1, 6) for f in _agent(s, 4, 300))]
    with open_store(store_url) as store:
        store.insert_facts(facts)
        out = {}
        for n in (0, 2):
            selection = from_store(store, FactFilter(limit=len(facts)))
            assert selection.query is None  # read here, handed over in batches
            folder = tmp_path / f"workers-{n}"
            summary = export(selection, folder, ExportOptions("sft"), workers=n)
            out[n] = (_files(folder), summary.rows)
    assert out[0] == out[2] and sum(out[0][1].values()) == len(facts)
    assert decode_manifest(out[2][0][MANIFEST]).facts.count == len(facts)


def test_rows_name_the_distributions_version() -> None:
    from lithify.export.rows import EXPORTER

    assert f"lithify {version('lithify')}" == EXPORTER


@pytest.mark.parametrize("source", ["facts", "store"])
def test_the_command_with_workers_writes_the_same_folder(
    tmp_path: Path, source: str, store_url: str
) -> None:
    """`lithify export` as run, LITHIFY_EXPORT_WORKERS=2 against 0, from fact files (handed to
    the workers) and from a store (read by the workers): every file the same."""
    facts = tmp_path / "facts.jsonl"
    calls = sort_facts([f for s in range(12) for f in _agent(s, 6, 20_000)])
    facts.write_bytes(b"".join(encode(f) + b"\n" for f in calls))
    if source == "store":
        with open_store(store_url) as store:
            store.insert_facts(calls)
    given = ["--facts", str(facts)] if source == "facts" else ["--store", store_url]
    folders = []
    for n in ("0", "2"):
        out = tmp_path / f"out-{n}"
        argv = [sys.executable, "-c", "from lithify.cli import main; main()", "export", "sft"]
        argv += [*given, "-o", str(out), "--format", "parquet", "--no-progress"]
        env = {**os.environ, "LITHIFY_EXPORT_WORKERS": n}
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        assert done.returncode == 0, done.stderr
        folders.append(_files(out))
    assert folders[0] == folders[1] and "train.parquet" in folders[0]


@pytest.mark.parametrize("opts", KINDS[:5], ids=lambda o: "-".join(o.values()))
def test_workers_reading_the_store_themselves_write_the_files_one_process_writes(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch, opts: dict[str, str]
) -> None:
    """Workers that read their own parts of a store (of 7 calls here, so sessions of every
    size fall on both sides of a cut, and the calls without a session after them; feedback
    from this process): the same files and counts as one process, and the manifest's sources
    and models counted once."""
    monkeypatch.setattr(pipeline, "_PART", 7)
    corpus_facts, fb = corpus()
    agents = [f for s in range(9) for f in _agent(s, 1 + s % 4, 200)]
    lone = [fact(f"lone-{i}", [user("No session.")], [assistant(text("Fine."))]) for i in range(3)]
    with open_store(store_url) as store:
        store.insert_facts([*corpus_facts, *agents, *lone, *lost_to_the_session()])
        store.insert_feedback(fb)
        total = store.count()
        out = {}
        for n in (0, 1, 3):
            folder = tmp_path / f"workers-{n}"
            ticks: list[int] = []
            selection = from_store(store, FactFilter())
            assert selection.query is not None
            summary = export(selection, folder, ExportOptions(**opts, eval_fraction=0.5),
                             progress=ticks.append, workers=n)  # fmt: skip
            out[n] = (_files(folder), summary, sum(ticks))
    (serial, a, read), *others = out.values()
    manifest = decode_manifest(serial[MANIFEST])
    assert read == manifest.facts.count == total > 0
    assert sum(a.rows.values()) > 0 and sum(manifest.models.values()) == read
    assert manifest.derive.richer_dropped == a.derive.richer_dropped == 1
    for files, b, ticks in others:
        assert files == serial
        assert (a.rows, a.derive, a.flags, a.skipped, a.feedback_dropped) == (
            b.rows, b.derive, b.flags, b.skipped, b.feedback_dropped,
        )  # fmt: skip
        assert ticks == read


@pytest.mark.parametrize(
    ("cores", "load", "store", "expected"),
    [
        (2, 0.2, True, 2),  # an idle 2-core machine: workers that read the store themselves
        (2, 0.2, False, 0),  # fed from here, they need two idle cores beyond this one
        (2, 1.0, True, 0),
        (4, 0.4, False, 3),
        (16, 1.0, True, 4),  # at most four unless asked
    ],
)
def test_workers_start_on_idle_cores_by_default(
    monkeypatch: pytest.MonkeyPatch, cores: int, load: float, store: bool, expected: int
) -> None:
    monkeypatch.delenv("LITHIFY_EXPORT_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)))
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    query = StoreQuery("sqlite:///x.db", FactFilter(order="session")) if store else None
    selection = Selection([], total=pipeline.PARALLEL_FACTS, query=query)
    assert pipeline._workers(ExportOptions("sft"), selection, None) == expected
    assert pipeline._workers(ExportOptions("dpo"), selection, None) == 0
    assert pipeline._workers(ExportOptions("sft"), replace(selection, total=10), None) == 0
    monkeypatch.setenv("LITHIFY_EXPORT_WORKERS", "3")
    assert pipeline._workers(ExportOptions("sft"), selection, None) == 3


@pytest.mark.parametrize("workers", [0, 2])
def test_fact_files_through_a_scratch_store_with_workers_and_no_scratch_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """Fact files too large for memory go through a scratch store, which worker processes read
    in parts as any store: the bytes of the in-memory export; the scratch folder is gone after
    the export, and after one that fails too."""
    import tempfile

    from lithify.export import ProfileError, from_files

    monkeypatch.setattr(pipeline, "_PART", 7)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    calls = sort_facts([f for s in range(12) for f in _agent(s, 1 + s % 5, 300)])
    lone = [fact(f"lone-{i}", [user("No session.")], [assistant(text("Fine."))]) for i in range(3)]
    path = tmp_path / "facts.jsonl"
    path.write_bytes(b"".join(encode(f) + b"\n" for f in [*lone, *calls]))
    options = ExportOptions("sft", eval_fraction=0.4)
    export(from_files([path], FactFilter()), tmp_path / "memory", options, workers=0)
    big = from_files([path], FactFilter(), in_memory_bytes=0)
    assert big.query is not None and list(scratch.iterdir())
    export(big, tmp_path / "scratch", options, workers=workers)
    assert _files(tmp_path / "scratch") == _files(tmp_path / "memory")
    assert not list(scratch.iterdir())
    failing = from_files([path], FactFilter(), in_memory_bytes=0)
    with pytest.raises(ProfileError):
        export(failing, tmp_path / "failed", ExportOptions("sft", fmt="csv"), workers=workers)
    assert not list(scratch.iterdir())


def test_workers_open_a_sqlite_store_whatever_its_file_is_named(tmp_path: Path) -> None:
    """The workers reopen the store by its bare path: `?`, `#`, `%20` and spaces in a file
    name are not URL syntax to them."""
    folder = tmp_path / "odd %20 #name?"
    folder.mkdir()
    calls = sort_facts([f for s in range(6) for f in _agent(s, 3, 100)])
    from lithify.store.sqlite import SQLiteStore

    with SQLiteStore(folder / "facts?.db") as store:
        store.insert_facts(calls)
        out = {}
        for n in (0, 2):
            export(from_store(store, FactFilter()), tmp_path / f"w{n}", ExportOptions("sft"),
                   workers=n)  # fmt: skip
            out[n] = _files(tmp_path / f"w{n}")
    assert out[0] == out[2] and out[0]["train.jsonl"]


def test_a_worker_that_dies_stops_the_export_with_what_became_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker dies at the fact "bad".
    killed = at_fact("bad", SIGKILL_SELF, workers_only=True)
    monkeypatch.setenv("PYTHONPATH", hooked(tmp_path / "hook", killed))
    bad = fact("bad", [user("x")], [assistant(text("y"))], session="s-015")
    calls = sort_facts([bad, *(f for s in range(30) for f in _agent(s, 8, 4000))])
    want = "an export worker process was killed by SIGKILL"
    with pytest.raises(pipeline.WorkerDied, match=want):
        export(from_facts(calls), tmp_path / "lib", ExportOptions("sft"), workers=2)
    assert list((tmp_path / "lib").iterdir()) == []
    # The command says so in one line and exits 1 (not click's bare "Aborted!").
    facts = tmp_path / "facts.jsonl"
    facts.write_bytes(b"".join(encode(f) + b"\n" for f in calls))
    out = tmp_path / "cli"
    argv = [sys.executable, "-c", "from lithify.cli import main; main()", "export", "sft"]
    argv += ["--facts", str(facts), "-o", str(out), "--no-progress"]
    env = {**os.environ, "LITHIFY_EXPORT_WORKERS": "2"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert f"export failed: {want}" in done.stderr and "Aborted" not in done.stderr
    assert list(out.iterdir()) == []


def test_a_workers_own_eof_error_is_raised_as_it_is_not_as_a_dead_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An EOFError met by a worker (a truncated input is one) is its error, handed back and
    # raised here; only a socket closed under this process is a worker that died.
    cut = at_fact("bad", "raise EOFError('cut short: bad')", workers_only=True)
    monkeypatch.setenv("PYTHONPATH", hooked(tmp_path / "hook", cut))
    bad = fact("bad", [user("x")], [assistant(text("y"))], session="s-015")
    calls = sort_facts([bad, *(f for s in range(30) for f in _agent(s, 8, 4000))])
    with pytest.raises(EOFError, match="cut short: bad") as e:
        export(from_facts(calls), tmp_path / "out", ExportOptions("sft"), workers=2)
    assert not isinstance(e.value, pipeline.WorkerDied)
    assert list((tmp_path / "out").iterdir()) == []
