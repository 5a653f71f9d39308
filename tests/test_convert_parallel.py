"""`lithify convert` with worker processes (ingest/parallel.py): the same bytes and the same
summary as one process, whatever the workers and however the inputs are cut into jobs; a strict
run fails at the same line; a worker that dies fails the run with a clear error and leaves no
output; the scratch files go."""

from __future__ import annotations

import builtins
import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.core.workers import WorkerDied
from lithify.ingest import parallel
from lithify.ingest.convert import StrictError, convert, open_output
from lithify.ingest.importer import StoreSink
from lithify.ingest.parallel import auto_workers, convert_parallel, import_parallel
from lithify.store import FactStore, SessionFilter, open_store
from tests.scale.facts import EXAMPLES, jsonl_input

LITHIFY = Path(sys.executable).with_name("lithify")
RUN_JOB = parallel.run_job


def _inputs(folder: Path, seed: int) -> list[Path]:
    """Two large JSON lines inputs (corrupt lines, CRLF, blank lines), a gzipped one, an
    empty one, one without facts, an OTLP/JSON document."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a-big.jsonl").write_bytes(jsonl_input(seed))
    (folder / "b-small.jsonl.gz").write_bytes(gzip.compress(jsonl_input(seed + 1, 2), mtime=0))
    (folder / "c-empty.jsonl").write_bytes(b"\n\r\n")
    (folder / "d-none.ndjson").write_bytes(b"{not json\n\n" * 50 + b"[]\n")
    (folder / "e-doc.json").write_bytes((EXAMPLES / "openai-v2.traces.json").read_bytes())
    (folder / "f-big.jsonl").write_bytes(jsonl_input(seed + 2))
    return [folder]


def _both_convert(monkeypatch: pytest.MonkeyPatch, marker: Path) -> None:
    """Make sure a worker converts jobs too: this process waits with its first job until a
    worker has finished one (it leaves ``marker``), so small inputs are not all done here
    before the workers have started."""
    marker.unlink(missing_ok=True)
    worker = (
        "import sys, pathlib; from lithify.ingest import parallel as p\n"
        "real = p.run_job\n"
        "def run_job(job, progress=None):\n"
        "    got = real(job, progress)\n"
        f"    pathlib.Path({str(marker)!r}).touch()\n"
        "    return got\n"
        "p.run_job = run_job; p._work(int(sys.argv[1]))"
    )
    monkeypatch.setattr(parallel, "_WORKER", worker)
    real = RUN_JOB  # not parallel.run_job: an earlier example's patch may still be there

    def waiting(job: object, progress: object = None) -> object:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert time.monotonic() < deadline, "no worker converted a job"
            time.sleep(0.01)
        return real(job, progress)  # type: ignore[arg-type]

    monkeypatch.setattr(parallel, "run_job", waiting)


def _local(inputs: list[Path], target: Path) -> dict[str, object]:
    with open_output(str(target)) as out:
        return convert(inputs, out).to_json()


def _parallel(inputs: list[Path], target: Path, workers: int, **kw: object) -> dict[str, object]:
    with open_output(str(target)) as out:
        return convert_parallel(inputs, out, workers, scratch=target.parent, **kw).to_json()  # type: ignore[arg-type]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.integers(1, 40), st.integers(1, 2), st.integers(1, 3))
def test_workers_write_what_one_process_writes(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
    pieces: int, workers: int, seed: int,
) -> None:  # fmt: skip
    root = tmp_path_factory.mktemp("parallel")
    inputs = _inputs(root / "in", seed)
    local = _local(inputs, root / "local.jsonl")
    assert local["corrupt"] and local["no_fact_inputs"]  # renumbered lines, merged reasons
    # Jobs of a few KB: each large input in several ranges, jobs spanning inputs.
    job = max(1, (root / "in" / "a-big.jsonl").stat().st_size // pieces)
    monkeypatch.setattr(parallel, "JOB_BYTES", job)
    _both_convert(monkeypatch, root / "in" / ".worked")
    got = _parallel(inputs, root / "par.jsonl", workers)
    assert (root / "in" / ".worked").exists()
    (root / "in" / ".worked").unlink()
    assert (root / "par.jsonl").read_bytes() == (root / "local.jsonl").read_bytes()
    assert got == local
    assert sorted(p.name for p in root.iterdir()) == ["in", "local.jsonl", "par.jsonl"]


def test_gzipped_output_and_stdout_are_the_same_bytes(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path / "in", 7)
    local = _local(inputs, tmp_path / "local.jsonl.gz")
    env = {**os.environ, "LITHIFY_CONVERT_WORKERS": "2"}
    for target in ("par.jsonl.gz", "-"):
        argv = [str(LITHIFY), "convert", str(tmp_path / "in"), "-o", target, "--json"]
        argv += ["--split-bytes", "5000"]  # jobs of 5 KB: several for this small input
        p = subprocess.run(argv, env=env, capture_output=True, cwd=tmp_path, check=True)
        facts = p.stdout if target == "-" else gzip.decompress((tmp_path / target).read_bytes())
        assert facts == gzip.decompress((tmp_path / "local.jsonl.gz").read_bytes())
        summary = p.stderr if target == "-" else p.stdout
        assert orjson.loads(summary) == local


def test_the_cli_takes_workers_by_flag_and_says_so_in_its_help(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl_input(3, 30))
    outs = []
    # Progress bars too: this process's jobs and the workers' advance the input's one bar.
    for workers, bars in (("0", "--no-progress"), ("3", "--no-progress"), ("2", "--progress")):
        out = tmp_path / f"{workers}.jsonl"
        argv = [str(LITHIFY), "convert", str(tmp_path / "in.jsonl"), "-o", str(out)]
        argv += ["--workers", workers, bars, "--split-bytes", "3000"]
        subprocess.run(argv, capture_output=True, check=True, env={**os.environ, "COLUMNS": "200"})
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2] and outs[0].count(b"\n") > 100
    help_text = subprocess.run(
        [str(LITHIFY), "convert", "--help"], capture_output=True, text=True,
        env={**os.environ, "COLUMNS": "200"}, check=True,
    ).stdout  # fmt: skip
    assert "--workers" in help_text and "LITHIFY_CONVERT_WORKERS" in help_text
    bad = subprocess.run(
        [str(LITHIFY), "convert", str(tmp_path / "in.jsonl"), "--workers", "-1"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bad.returncode == 2 and "--workers" in bad.stderr


def test_strict_fails_at_the_first_corrupt_line_in_input_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    good = jsonl_input(4).replace(b"{not json", b"").replace(b'{"inference_call_id": 1}', b"")
    path = tmp_path / "in.jsonl"
    # Corrupt lines in the middle and at the end: jobs after the first one see the second.
    half = good.index(b"\n", len(good) // 2)
    path.write_bytes(good[:half] + b"\n{first bad\n" + good[half:] + b"\n\n{not json\nnor this\n")
    with pytest.raises(StrictError) as local, open_output(str(tmp_path / "l.jsonl")) as out:
        convert([path], out, strict=True)
    monkeypatch.setattr(parallel, "JOB_BYTES", len(good) // 9)
    with pytest.raises(StrictError) as split:
        _parallel([path], tmp_path / "p.jsonl", 2, strict=True)
    assert split.value.skip.detail == local.value.skip.detail
    assert "not JSON" in split.value.skip.detail
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # no output, no scratch


@pytest.fixture
def slow_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process takes half a second a job, so that every worker surely gets one."""
    real = parallel.run_job

    def slow(job: object, progress: object = None) -> object:
        time.sleep(0.5)
        return real(job, progress)  # type: ignore[arg-type]

    monkeypatch.setattr(parallel, "run_job", slow)


@pytest.mark.usefixtures("slow_here")
def test_a_worker_that_dies_fails_the_run_and_leaves_no_output(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl_input(5, 30))
    monkeypatch.setattr(parallel, "JOB_BYTES", path.stat().st_size // 4)
    monkeypatch.setattr(parallel, "_WORKER", "import sys; sys.exit(3)")
    with pytest.raises(WorkerDied, match=r"^a convert worker process exited with code 3$"):
        _parallel([path], tmp_path / "p.jsonl", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


# In a worker (``python -c``), every job kills the worker as the out-of-memory killer would; in
# the process that started it, every job takes 0.3 s, so that a worker surely gets one.
_KILLED = """
import os, signal, sys, time
from lithify.ingest import parallel

real = parallel.run_job

def run_job(job, progress=None):
    if sys.argv[:1] == ["-c"]:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.3)
    return real(job, progress)

parallel.run_job = run_job
"""


def test_a_killed_worker_fails_convert_and_import_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(_KILLED)
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl_input(11, 30))
    pythonpath = os.pathsep.join([str(tmp_path / "hook"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": pythonpath}
    split = ["--workers", "2", "--split-bytes", str(path.stat().st_size // 8), "--no-progress"]
    killed = "worker process was killed by SIGKILL (the system may have run out of memory)"

    out = tmp_path / "facts.jsonl"
    argv = [str(LITHIFY), "convert", str(path), "-o", str(out), *split]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert p.returncode == 1, p.stderr
    want = f"convert failed: a convert {killed}; nothing was written"
    assert want in " ".join(p.stderr.split()) and "Traceback" not in p.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == ["hook", "in.jsonl"]

    url = f"sqlite:///{tmp_path / 'store.db'}"
    argv = [str(LITHIFY), "import", str(path), "--store", url, *split]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert p.returncode == 1, p.stderr
    want = f"import failed: an import {killed}; what was stored before stays stored"
    assert want in " ".join(p.stderr.split()) and "Traceback" not in p.stderr
    # As it says: importing again, with nothing killed, stores the rest.
    subprocess.run([str(LITHIFY), "import", str(path), "--store", url, *split],
                   capture_output=True, check=True)  # fmt: skip
    alone = f"sqlite:///{tmp_path / 'alone.db'}"
    subprocess.run([str(LITHIFY), "import", str(path), "--store", alone], capture_output=True,
                   check=True)  # fmt: skip
    with open_store(url) as store, open_store(alone) as other:
        assert _store_view(store)[0] == _store_view(other)[0] and store.count() > 30


@pytest.mark.usefixtures("slow_here")
def test_an_error_in_a_worker_reaches_the_caller_as_it_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl_input(6, 30))
    monkeypatch.setattr(parallel, "JOB_BYTES", path.stat().st_size // 4)
    # An EOFError too (a truncated input raises one): only a socket closed under this process
    # is a worker that died.
    for error in ("ValueError", "EOFError"):
        failing = (
            "import sys; from lithify.ingest import parallel as p\n"
            f"def run_job(job, progress=None): raise {error}('bad in a worker')\n"
            "p.run_job = run_job; p._work(int(sys.argv[1]))"
        )
        monkeypatch.setattr(parallel, "_WORKER", failing)
        with pytest.raises(getattr(builtins, error), match="bad in a worker") as e:
            _parallel([path], tmp_path / "p.jsonl", 1)
        assert not isinstance(e.value, WorkerDied)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_small_inputs_take_no_worker() -> None:
    assert auto_workers(parallel.PARALLEL_BYTES - 1) == 0
    cores = len(os.sched_getaffinity(0))
    assert auto_workers(parallel.PARALLEL_BYTES) == min(cores - 1, 3)


def _store_view(store: FactStore) -> tuple[object, ...]:
    """What a store holds, as its readers see it (ingest times left out)."""
    facts = [msgspec.json.encode(f) for f in store.iter_facts()]
    feedback = [msgspec.json.encode(f) for f in store.iter_feedback()]
    page = store.sessions(SessionFilter(limit=1000))
    sessions = [msgspec.json.encode(s) for s in page.sessions]
    found = [
        [s.session_id for s in store.sessions(SessionFilter(text=word, limit=1000)).sessions]
        for word in ("Paris", "Rome", "weather", "Windy")
    ]
    return facts, feedback, sessions, found, store.count(), store.count_dropped()


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.integers(2, 30), st.integers(1, 2), st.integers(1, 3))
def test_an_import_with_workers_stores_what_one_process_stores(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
    pieces: int, workers: int, seed: int,
) -> None:  # fmt: skip
    """The same facts, captures, feedback, sessions, text index and counts, whichever process
    built which job's rows: the rows are written by this process, a job a transaction, in input
    order."""
    root = tmp_path_factory.mktemp("import")
    inputs = _inputs(root / "in", seed)
    views, counts, summaries = [], [], []
    job = max(1, (root / "in" / "a-big.jsonl").stat().st_size // pieces)
    for n in (0, workers):
        store = open_store(f"sqlite:///{root / f'{n}.db'}")
        try:
            sink = StoreSink(store)
            if n:
                _both_convert(monkeypatch, root / "in" / ".worked")
            summary = import_parallel(inputs, sink, n, job_bytes=job)
            if n:
                assert (root / "in" / ".worked").exists()
            views.append(_store_view(store))
            counts.append(sink.counts())
            summaries.append(summary.to_json())
        finally:
            store.close()
    assert views[0] == views[1]
    # How the captures of one call that arrive in one transaction split between a new call, a
    # variant and a collision follows the transaction's id order (the store's, as for any two
    # batch sizes of `insert_facts`): the calls and captures stored are the same (above).
    new, again = ({k: c.pop(k) for k in ("stored", "variants", "collisions")} for c in counts)
    assert new["stored"] + new["variants"] == again["stored"] + again["variants"]
    assert counts[0] == counts[1] and counts[0]["duplicates"] and counts[0]["feedback_stored"]
    assert summaries[0] == summaries[1]
    assert views[0][0] and views[0][2] and all(views[0][3])  # facts, sessions, text found


def test_the_import_command_takes_workers(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl_input(8, 30))
    reports = []
    for workers in ("0", "2"):
        url = f"sqlite:///{tmp_path / f'{workers}.db'}"
        argv = [str(LITHIFY), "import", str(tmp_path / "in.jsonl"), "--store", url, "--json"]
        argv += ["--workers", workers, "--split-bytes", "3000"]
        p = subprocess.run(argv, capture_output=True, check=True)
        reports.append({k: v for k, v in orjson.loads(p.stdout).items() if k != "store"})
    assert reports[0]["stored"] > 30
    # As above: the captures stored are the same, their split into new calls, variants and
    # collisions follows what each transaction held.
    for r in reports:
        r["captures"] = r.pop("stored") + r.pop("variants")
        del r["collisions"]
    assert reports[0] == reports[1]


def test_a_strict_import_stores_what_one_process_stores_before_the_corrupt_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    good = jsonl_input(9).replace(b"{not json", b"").replace(b'{"inference_call_id": 1}', b"")
    path = tmp_path / "in.jsonl"
    # Two jobs; the corrupt line deep in the second, after facts of its own.
    half = good.index(b"\n", len(good) * 4 // 5)
    path.write_bytes(good[:half] + b"\n{bad here\n" + good[half:])
    views, errors = [], []
    for n in (0, 2):
        store = open_store(f"sqlite:///{tmp_path / f'{n}.db'}")
        try:
            if n:
                _both_convert(monkeypatch, tmp_path / ".worked")
            with pytest.raises(StrictError) as e:
                import_parallel([path], StoreSink(store), n, strict=True, job_bytes=len(good) // 2)
            errors.append(e.value.skip.detail)
            views.append(_store_view(store))
        finally:
            store.close()
    assert errors[0] == errors[1] and "not JSON" in errors[0]
    assert views[0] == views[1] and views[0][0]  # the facts before the corrupt line, stored


def test_files_in_this_process_memory_are_read_here(tmp_path: Path) -> None:
    """fsspec's memory:// files exist in this process alone: no worker is asked to read them."""
    import fsspec

    memory = fsspec.filesystem("memory")
    data = jsonl_input(10, 30)
    try:
        memory.pipe("/lithify-parallel/in.jsonl", data)
        (tmp_path / "in.jsonl").write_bytes(data)
        local = _local([tmp_path / "in.jsonl"], tmp_path / "local.jsonl")
        got = _parallel(
            ["memory://lithify-parallel/in.jsonl"], tmp_path / "m.jsonl", 2, job_bytes=3000
        )  # type: ignore[list-item]
        assert (tmp_path / "m.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
        assert got["facts"] == local["facts"] and not got["unreadable"]
    finally:
        memory.rm("/lithify-parallel", recursive=True)
