"""Inputs of `lithify convert` beyond local files, and one large input split into tasks
(docs/scale.md): the range rule, the walk order of a listed URL, a split conversion's bytes and
summary against the local one (the tasks run here, one after another: what Ray runs, without
Ray; tests/scale/test_ray_export.py runs them on a cluster), fsspec's filesystems, and the
usage error for a URL no installed filesystem reads."""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.ingest.convert import StrictError, convert, open_output
from lithify.ingest.distributed import byte_ranges, convert_task, convert_tasks, emptier, merge
from lithify.ingest.files import LineRange, expand, owned_lines
from lithify.ingest.remote import RemoteFile, shown, walk_key
from tests.scale.facts import EXAMPLES, jsonl_input

LITHIFY = Path(sys.executable).with_name("lithify")

pieces = st.sampled_from([b"\n", b"\r\n", b"\r", b"a", b"{}", b" ", b"x" * 40])
contents = st.lists(pieces, max_size=80).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(contents, st.integers(1, 50), st.integers(1, 16), st.integers(1, 8))
def test_every_line_is_in_exactly_one_range(
    data: bytes, size: int, buffer: int, piece: int
) -> None:
    """Whatever the content (CRLF, lone CR, blank lines, no newline at the end, lines longer
    than a range) and the range size, the ranges' lines are the file's lines, each once, in
    order, and each in the range it starts in."""
    whole = list(io.BytesIO(data))
    starts = [sum(map(len, whole[:i])) for i in range(len(whole))]
    got: list[bytes] = []
    for start, end in byte_ranges(len(data), size):
        fh = io.BufferedReader(io.BytesIO(data), buffer)  # type: ignore[arg-type]
        mine = list(owned_lines(fh, start, end, piece=piece))
        for k, line in enumerate(mine, len(got)):
            assert start <= starts[k] < end
            assert line == whole[k]
        got += mine
    assert got == whole


def test_ranges_cover_the_bytes() -> None:
    assert byte_ranges(0, 4) == []
    assert byte_ranges(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert byte_ranges(8, 4) == [(0, 4), (4, 8)]
    with pytest.raises(ValueError):
        byte_ranges(8, 0)


names = st.sampled_from(["a", "b", "B", "a.jsonl", "a b", "_", ".h", "é", "a-", "z"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(names, min_size=1, max_size=3).map("/".join), max_size=12))
def test_a_listed_url_is_walked_as_a_local_folder(files: list[str]) -> None:
    """``walk_key`` sorts a tree's files as ``expand`` walks the local folder, and a file://
    URL of it lists the same files in the same order."""
    folders = {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}
    files = sorted({f for f in files if f not in folders})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for f in files:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_bytes(b"{}")
        local = [p.relative_to(root).as_posix() for p in expand([root])]
        assert local == sorted(
            (f for f in files if not f.rpartition("/")[2].startswith(".")), key=walk_key
        )
        listed = list(expand([f"file://{root}/"]))
        assert all(isinstance(f, RemoteFile) for f in listed)
        assert [str(f) for f in listed] == [f"file://{root}/{f}" for f in local]


def _inputs(folder: Path, seed: int) -> list[Path]:
    """A large JSON lines input, a gzipped one, an empty one, one without facts, a document."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "big.jsonl").write_bytes(jsonl_input(seed))
    with open_output(str(folder / "small.jsonl.gz")) as out:
        out.write(jsonl_input(seed + 1, sessions=2))
    (folder / "empty.jsonl").write_bytes(b"\n\r\n")
    (folder / "none.ndjson").write_bytes(b"{not json\n\n" * 50 + b"[]\n")
    (folder / "doc.json").write_bytes((EXAMPLES / "openai-v2.traces.json").read_bytes())
    return [folder]


def _split(paths: list[Path | str], out: Path, split: int, strict: bool = False) -> object:
    """A Ray run's tasks and merge, run here one after another."""
    out.mkdir(parents=True)
    tasks = list(convert_tasks(paths, split))
    results = [convert_task(t, out, len(tasks), strict=strict) for t in tasks]
    return tasks, merge(tasks, results, emptier(out, len(tasks)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 40), st.integers(0, 99), st.integers(1, 3))
def test_a_split_conversion_is_the_local_one(pieces: int, jitter: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs = _inputs(root / "in", seed)
        with open_output(str(root / "local.jsonl")) as out:
            local = convert(inputs, out)
        assert local.corrupt and local.no_fact_inputs  # renumbered lines, merged reasons
        size = (root / "in" / "big.jsonl").stat().st_size
        split = max(1, size // pieces + jitter)
        tasks, summary = _split(inputs, root / "parts", split)  # type: ignore[misc]
        ranges = sum(isinstance(t.source, LineRange) for t in tasks)
        assert ranges >= 2 if pieces > 1 else ranges == 0
        assert not any(
            isinstance(t.source, LineRange) and not str(t.source).endswith(("big.jsonl", ".ndjson"))
            for t in tasks
        )  # the gzipped input and the document are one task each
        parts = sorted((root / "parts").iterdir())
        assert [p.name for p in parts] == [f"part-{i:05d}.jsonl" for i in range(len(tasks))]
        assert b"".join(p.read_bytes() for p in parts) == (root / "local.jsonl").read_bytes()
        assert summary.to_json() == local.to_json()  # type: ignore[attr-defined]


def test_strict_stops_at_the_first_corrupt_line_of_a_split_file(tmp_path: Path) -> None:
    good = jsonl_input(4).replace(b"{not json", b"").replace(b'{"inference_call_id": 1}', b"")
    path = tmp_path / "in.jsonl"
    path.write_bytes(good + b"\n\n{not json\nnor this\n")
    with pytest.raises(StrictError) as local, open_output(str(tmp_path / "l.jsonl")) as out:
        convert([path], out, strict=True)
    with pytest.raises(StrictError) as split:
        _split([path], tmp_path / "parts", len(good) // 7, strict=True)
    assert split.value.skip.detail == local.value.skip.detail
    line = good.count(b"\n") + 3
    assert f"in.jsonl:{line}: line {line}: not JSON" in split.value.skip.detail


def test_a_file_gone_after_it_was_planned_is_unreadable_once(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl_input(5))
    tasks = list(convert_tasks([path], 10_000))
    assert len(tasks) > 3
    path.unlink()
    (tmp_path / "parts").mkdir()
    results = [convert_task(t, tmp_path / "parts", len(tasks)) for t in tasks]
    summary = merge(tasks, results, emptier(tmp_path / "parts", len(tasks)))
    with open_output(str(tmp_path / "local.jsonl")) as out:
        local = convert([path], out)
    assert summary.to_json() == local.to_json()
    assert summary.unreadable == [f"{path}: no such file"]


def test_fsspec_filesystems_read_as_local_files(tmp_path: Path) -> None:
    """A scheme pyarrow.fs does not read (fsspec's in-memory one here) goes through fsspec:
    the same facts as the folder on disk, the files named by URL."""
    import fsspec

    inputs = _inputs(tmp_path / "in", 6)
    memory = fsspec.filesystem("memory")
    try:
        for path in sorted(p for p in (tmp_path / "in").iterdir()):
            memory.pipe(f"/lithify-test/in/{path.name}", path.read_bytes())
        with open_output(str(tmp_path / "local.jsonl")) as out:
            local = convert(inputs, out)
        with open_output(str(tmp_path / "memory.jsonl")) as out:
            remote = convert(["memory://lithify-test/in/"], out)
        assert (tmp_path / "memory.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
        prefix = str(tmp_path / "in")
        assert remote.to_json() == _renamed(local.to_json(), prefix, "memory://lithify-test/in")
        # Split into ranges, read through fsspec by seeking.
        _, split = _split(["memory://lithify-test/in"], tmp_path / "parts", 5000)  # type: ignore[misc]
        assert split.to_json() == remote.to_json()  # type: ignore[attr-defined]
    finally:
        memory.rm("/lithify-test", recursive=True)


def _renamed(summary: object, old: str, new: str) -> object:
    """A summary with the inputs' names changed from under ``old`` to under ``new``."""
    import orjson

    return orjson.loads(orjson.dumps(summary).decode().replace(old, new))


def test_a_url_is_shown_without_its_secrets() -> None:
    url = "s3://AKIA:s3cr3t@bucket/pre/fix/?endpoint_override=http://127.0.0.1:9&secret_key=x"
    assert shown(url) == "s3://bucket/pre/fix/"
    assert shown("file:///tmp/a.jsonl") == "file:///tmp/a.jsonl"


@pytest.mark.parametrize(
    ("url", "says", "hide"),
    [
        ("foo://bucket/x", "no filesystem reads foo:// here", ""),
        ("oci://k:s3cr3t@bucket/x", "Install ocifs", "s3cr3t"),
    ],
)
@pytest.mark.parametrize("engine", ["local", "ray"])
def test_a_scheme_no_filesystem_reads_is_a_usage_error(
    tmp_path: Path, url: str, says: str, hide: str, engine: str
) -> None:
    done = subprocess.run(
        [LITHIFY, "convert", "--engine", engine, str(EXAMPLES), url, "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert not hide or hide not in done.stderr
    assert not (tmp_path / "o").exists()  # nothing read, nothing written


def test_without_fsspec_the_error_names_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['fsspec'] = None; from lithify.cli import main; "
        "sys.argv = ['lithify', 'convert', 'memory://x/y']; main()"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2
    assert "pip install fsspec" in done.stderr


def test_local_paths_stay_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths are text now (a URL keeps its //): a local path still reads as before."""
    monkeypatch.chdir(EXAMPLES.parent)
    done = subprocess.run(
        [LITHIFY, "convert", "examples//openai-v2.traces.json", "-o", str(tmp_path / "f.jsonl")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "f.jsonl").read_bytes().startswith(b'{"inference_call_id":')


def test_output_to_a_url_is_a_usage_error(tmp_path: Path) -> None:
    for engine in ("local", "ray"):
        done = subprocess.run(
            [LITHIFY, "convert", "--engine", engine, str(EXAMPLES), "-o", "s3://bucket/out/"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert done.returncode == 2
        assert "writing to a URL is not done yet" in done.stderr
        assert not list(tmp_path.iterdir())  # no folder named s3:
