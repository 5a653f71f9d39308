"""`lithify export --engine ray` on a real two-node Ray cluster started here (tests/scale/
cluster.py): byte for byte the local export, whatever the partitioning and the order facts
arrive in; a killed task is retried; a rerun writes the same output (docs/scale.md)."""

from __future__ import annotations

import fcntl
import gzip
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import orjson
import pytest

from lithify.core.factfile import InputError
from lithify.export import ExportOptions, ExportSummary, FolderBusy, export, from_files
from lithify.export.distributed import ShardedExport, export_ray
from lithify.ingest.convert import convert, open_output
from lithify.ingest.distributed import convert_ray
from lithify.store import FactFilter
from tests.conftest import CORPUS
from tests.export.helpers import lost_to_the_session
from tests.scale.facts import generated, jsonl_input, one_big_session, write_files
from tests.scale.s3 import FakeS3, fake_s3

pytestmark = pytest.mark.xdist_group("ray")  # one cluster, in one test process
EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "lithify" / "examples"
LITHIFY = Path(sys.executable).with_name("lithify")


@pytest.fixture
def cluster(ray_joined: tuple[str, dict[str, str]]) -> tuple[str, dict[str, str]]:
    return ray_joined


def _local(paths: list[Path], out: Path, options: ExportOptions) -> ExportSummary:
    return export(from_files(paths, FactFilter()), out, options)


def _same(local: ExportSummary, local_out: Path, done: ShardedExport, out: Path) -> None:
    """Same train/eval bytes, same summary (but where it was written), and the sorted shards
    hold the local rows (and the eval rows the eval prompt rule left out)."""
    for name in (Path(p).name for p in local.files.values()):
        assert (out / name).read_bytes() == (local_out / name).read_bytes(), name
    # Published as the local export is: the digests of the facts read, the card, the manifest.
    for name in ("facts.sha256", "README.md", "manifest.json"):
        assert (out / name).read_bytes() == (local_out / name).read_bytes(), name
    mine = msgspec.structs.replace(done.summary, output="", files={})
    assert mine == msgspec.structs.replace(local, output="", files={})
    shard_rows = sorted(
        line
        for f in done.manifest["files"]
        if f["file"].endswith(".jsonl")
        for line in (done.shards / f["file"]).read_bytes().splitlines()
    )
    merged = sorted(
        line
        for name in ("train.jsonl", "eval.jsonl")
        if (local_out / name).exists()
        for line in (local_out / name).read_bytes().splitlines()
    )
    if local.fmt == "jsonl":
        left_out = local.skipped.get("eval_prompt_in_train", 0)
        assert len(shard_rows) == len(merged) + left_out
        assert not set(merged) - set(shard_rows)
        if not left_out:
            assert shard_rows == merged


def test_examples_same_bytes(cluster: object, tmp_path: Path) -> None:
    facts = tmp_path / "facts.jsonl"
    subprocess.run([LITHIFY, "convert", str(EXAMPLES), "-o", str(facts)], check=True)
    for kind, extra in (
        ("sft", {}),
        ("sft", {"shape": "prompt-completion", "fmt": "parquet"}),
        ("nemo-gym", {"profile": "nemo-gym"}),
        ("dpo", {}),
    ):
        options = ExportOptions(kind=kind, **extra)  # type: ignore[arg-type]
        local = _local([facts], tmp_path / f"local-{kind}", options)
        for partitions in (1, 3):
            out = tmp_path / f"ray-{kind}-{partitions}"
            done = export_ray([facts], out, options, partitions=partitions)
            _same(local, tmp_path / f"local-{kind}", done, out)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_sessions_any_order_any_partitioning(
    cluster: object, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    facts, fb = generated(seed, sessions=30 + 10 * seed)
    facts += lost_to_the_session()  # counted on the driver, from captures in any file
    reference = write_files(tmp_path / "in", facts, fb, seed, files=1)
    shuffled = write_files(tmp_path / "shuffled", facts, fb, seed + 100, files=rng.randint(2, 6))
    for kind, extra in (
        ("sft", {"eval_fraction": 0.5}),
        ("dpo", {"eval_fraction": 0.3}),
        ("rl", {"where": ("score>=0.5",)}),
    ):
        options = ExportOptions(kind=kind, **extra)  # type: ignore[arg-type]
        local_out = tmp_path / f"local-{kind}"
        local = _local(reference, local_out, options)
        assert sum(local.rows.values()), kind  # the comparison compares rows
        assert local.derive.richer_dropped == 1
        out = tmp_path / f"ray-{kind}"
        partitions, shard_bytes = rng.choice([1, 2, 7]), rng.choice([1 << 10, 64 << 20])
        done = export_ray(shuffled, out, options, partitions=partitions, shard_bytes=shard_bytes)
        _same(local, local_out, done, out)


def _task_pids() -> list[int]:
    """Ray workers deriving sessions now (their process title names the operator)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            title = cmdline.read_bytes()
        except OSError:
            continue
        if title.startswith(b"ray::") and b"_derive_group" in title:
            found.append(int(cmdline.parent.name))
    return found


def test_killed_task_is_retried_and_rerun_writes_the_same(cluster: object, tmp_path: Path) -> None:
    facts, fb = generated(9, sessions=2000)
    paths = write_files(tmp_path / "in", facts, fb, 9, files=4)
    options = ExportOptions(kind="sft", eval_fraction=0.2)
    local = _local(paths, tmp_path / "local", options)
    out = tmp_path / "ray"
    result: list[ShardedExport] = []
    run = threading.Thread(
        target=lambda: result.append(
            export_ray(paths, out, options, partitions=4, shard_bytes=1 << 16)
        )
    )
    run.start()
    killed = 0
    while run.is_alive() and not killed:
        for pid in _task_pids():
            os.kill(pid, signal.SIGKILL)
            killed += 1
            break
        time.sleep(0.01)
    run.join()
    assert killed, "no session task was seen running: the input is too small to catch one"
    assert result, "the export failed"
    _same(local, tmp_path / "local", result[0], out)
    first = {p.name: p.read_bytes() for p in (out / "shards").iterdir()}
    again = export_ray(paths, out, options, partitions=4, shard_bytes=1 << 16)
    _same(local, tmp_path / "local", again, out)
    assert {p.name: p.read_bytes() for p in (out / "shards").iterdir()} == first


def test_cli_joins_the_cluster(cluster: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    address, auth = cluster
    facts, fb = generated(4)
    folder = tmp_path / "facts"
    write_files(folder, facts, fb, 4, files=3)
    common = ["export", "sft", "--facts", str(folder), "--json", "--no-progress"]
    local = subprocess.run(
        [LITHIFY, *common, "-o", str(tmp_path / "local")], capture_output=True, check=True
    )
    env = {**os.environ, **auth, "RAY_ADDRESS": address}
    ray = subprocess.run(
        [LITHIFY, *common, "--engine", "ray", "-o", str(tmp_path / "ray")],
        capture_output=True,
        env=env,
    )
    assert ray.returncode == 0, ray.stderr.decode()[-2000:]
    a, b = orjson.loads(local.stdout), orjson.loads(ray.stdout)
    for s in (a, b):
        s.pop("output"), s.pop("files")
    assert a == b
    for name in ("train.jsonl", "eval.jsonl"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    manifest = orjson.loads((tmp_path / "ray" / "shards" / "manifest.json").read_bytes())
    assert manifest["rows"]["train"] == b["rows"]["train"]
    # The export's own manifest, card and digests: the local run's, and a replay of the Ray
    # export's manifest (run locally) makes the same bytes.
    for name in ("manifest.json", "README.md", "facts.sha256"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    replay = subprocess.run(
        [LITHIFY, "export", "--replay", str(tmp_path / "ray" / "manifest.json"), "--json"],
        capture_output=True,
    )
    assert replay.returncode == 0, replay.stdout.decode()[-2000:] + replay.stderr.decode()[-2000:]


def test_without_ray_the_command_names_the_extra(tmp_path: Path) -> None:
    facts, fb = generated(5, sessions=2)
    (path,) = write_files(tmp_path, facts, fb, 5, files=1)
    code = (
        "import sys; sys.modules['ray'] = None; from lithify.cli import main; "
        f"sys.argv = ['lithify', 'export', 'sft', '--engine', 'ray', '--facts', {str(path)!r}]; "
        "main()"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2
    assert "pip install 'lithify[ray]'" in done.stderr


def test_convert_on_ray_writes_the_local_facts(cluster: object, tmp_path: Path) -> None:
    inputs = [EXAMPLES, CORPUS / "otlp"]
    local = tmp_path / "local.jsonl"
    with open_output(str(local)) as out:
        expected = convert(inputs, out)
    summary = convert_ray(inputs, tmp_path / "facts")
    assert summary.to_json() == expected.to_json()
    parts = sorted((tmp_path / "facts").iterdir())
    assert len(parts) == expected.inputs
    assert b"".join(p.read_bytes() for p in parts) == local.read_bytes()
    # What export --facts and import read from the folder: the same facts.
    options = ExportOptions(kind="sft")
    a = _local([local], tmp_path / "from-file", options)
    b = _local(parts, tmp_path / "from-folder", options)
    assert (tmp_path / "from-file" / "train.jsonl").read_bytes() == (
        tmp_path / "from-folder" / "train.jsonl"
    ).read_bytes()
    assert a.rows == b.rows
    store = f"sqlite:///{tmp_path / 'store.db'}"
    done = subprocess.run(
        [LITHIFY, "import", str(tmp_path / "facts"), "--store", store, "--json"],
        capture_output=True,
        check=True,
    )
    assert orjson.loads(done.stdout)["facts"] == expected.facts


def test_one_huge_session_streams_through_one_worker(cluster: object, tmp_path: Path) -> None:
    """Skew: one session far bigger than the rest is one group on one worker; its rows leave
    the task in batches, so the worker holds the session's facts and one batch of rows
    (docs/scale.md, Skew), and its rows are cut into several shards."""
    facts, fb = generated(11, sessions=20)
    facts += one_big_session(10_000)
    paths = write_files(tmp_path / "in", facts, fb, 11, files=3)
    options = ExportOptions(kind="sft")
    local = _local(paths, tmp_path / "local", options)
    done = export_ray(paths, tmp_path / "ray", options, partitions=2, shard_bytes=1 << 20)
    _same(local, tmp_path / "local", done, tmp_path / "ray")
    holding = [f for f in done.shards.glob("*.jsonl") if b'"big-' in f.read_bytes()]
    assert len(holding) > 2  # no one task held all its rows to write them
    assert done.peaks and max(done.peaks.values()) < 1 << 30, done.peaks


def test_an_unreadable_fact_file_stops_the_export_as_locally(
    cluster: object, tmp_path: Path
) -> None:
    facts, fb = generated(6, sessions=4)
    good, bad = write_files(tmp_path, facts, fb, 6, files=2)
    bad.write_bytes(b'{"inference_call_id": 1}\n')
    options = ExportOptions(kind="sft")
    with pytest.raises(InputError) as local:
        _local([good, bad], tmp_path / "local", options)
    with pytest.raises(InputError) as ray:
        export_ray([good, bad], tmp_path / "ray", options)
    assert str(ray.value) == str(local.value)
    assert not (tmp_path / "ray" / "train.jsonl").exists()


def test_a_folder_another_export_holds_is_left_alone(cluster: object, tmp_path: Path) -> None:
    # Its staging folder included, which a second export used to remove under the first.
    facts, fb = generated(6, sessions=4)
    paths = write_files(tmp_path, facts, fb, 6, files=2)
    out = tmp_path / "ray"
    (out / ".shards.staging").mkdir(parents=True)
    (out / ".shards.staging" / "part-00000.jsonl").write_bytes(b"theirs")
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(FolderBusy, match="another export is writing into"):
            export_ray(paths, out, ExportOptions(kind="sft"))
    finally:
        os.close(fd)
    assert [p.name for p in out.iterdir()] == [".shards.staging"]
    assert (out / ".shards.staging" / "part-00000.jsonl").read_bytes() == b"theirs"


def test_export_from_postgresql_by_session_parts(
    cluster: tuple[str, dict[str, str]],
    pg_store_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store read in parallel by parts of whole sessions, each read and derived in one task
    (no shuffle; parts of 7 calls here, so sessions fall on both sides of every cut and the
    calls without a session share the last): the local export's bytes, manifest and card
    included; other captures of a call stay left out by the store."""
    from lithify.export import distributed, from_store
    from lithify.store import open_store

    monkeypatch.setattr(distributed, "_PART_CALLS", 7)
    facts, fb = generated(6, sessions=60)
    # A second capture of a call (its span without the session): the store keeps one.
    facts.append(msgspec.structs.replace(facts[0], session_id=None, observed_at=None))
    facts += lost_to_the_session()  # and one that holds parts the capture read lacks
    with open_store(pg_store_url) as store:
        store.insert_facts(facts)
        store.insert_feedback(fb)
        dropped = store.count_dropped()
        assert dropped >= 2 and store.count_richer_dropped() == 1
        assert len(store.session_parts(FactFilter(order="session"), 7)) > 10
        for kind in ("sft", "dpo"):
            options = ExportOptions(kind=kind, eval_fraction=0.3)
            local = export(from_store(store, FactFilter()), tmp_path / f"local-{kind}", options)
            out = tmp_path / f"ray-{kind}"
            done = export_ray([], out, options, partitions=3, store=pg_store_url)
            _same(local, tmp_path / f"local-{kind}", done, out)
            assert done.summary.derive.duplicates == local.derive.duplicates == dropped
            assert done.summary.derive.richer_dropped == local.derive.richer_dropped == 1
        # Filters apply in the store, as locally.
        only = FactFilter(session_id=["g-0001", "g-0002"])
        local = export(from_store(store, only), tmp_path / "local-only", ExportOptions(kind="sft"))
        done = export_ray([], tmp_path / "ray-only", ExportOptions(kind="sft"), only,
                          store=pg_store_url)  # fmt: skip
        _same(local, tmp_path / "local-only", done, tmp_path / "ray-only")
    # The command: --engine ray with --store reads it so too.
    address, auth = cluster
    env = {**os.environ, **auth, "RAY_ADDRESS": address}
    common = ["export", "sft", "--store", pg_store_url, "--json", "--no-progress"]
    subprocess.run([LITHIFY, *common, "-o", str(tmp_path / "cli-local")], check=True,
                   capture_output=True)  # fmt: skip
    ray = subprocess.run([LITHIFY, *common, "--engine", "ray", "-o", str(tmp_path / "cli-ray")],
                         capture_output=True, env=env)  # fmt: skip
    assert ray.returncode == 0, ray.stderr.decode()[-2000:]
    for name in ("train.jsonl", "manifest.json"):
        assert (tmp_path / "cli-ray" / name).read_bytes() == (
            tmp_path / "cli-local" / name
        ).read_bytes()


@pytest.fixture(scope="module")
def s3() -> Iterator[FakeS3]:
    with fake_s3() as server:
        yield server


def _renamed(summary: object, old: str, new: str) -> object:
    """A summary with its inputs' names moved from under ``old`` to under ``new``."""
    return orjson.loads(orjson.dumps(summary).decode().replace(old, new))


def _parts(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()))


def test_convert_from_s3_is_the_local_convert(
    cluster: tuple[str, dict[str, str]], s3: FakeS3, tmp_path: Path
) -> None:
    """A bucket prefix holding folders of OTLP documents, a large JSON lines file (read in
    ranges) and a gzipped one, converted on the cluster, by the command on the cluster and by
    the local command: the facts of the same files converted from disk, the summary the same
    but for the names (URLs, without the credentials one of them holds)."""
    tree = tmp_path / "in"
    shutil.copytree(EXAMPLES, tree / "examples")
    shutil.copytree(CORPUS / "otlp", tree / "corpus" / "otlp")
    (tree / "lines").mkdir()
    (tree / "lines" / "big.jsonl").write_bytes(jsonl_input(7, sessions=30))
    (tree / "lines" / "small.jsonl.gz").write_bytes(gzip.compress(jsonl_input(8, 3), mtime=0))
    s3.upload(tree, "lithify-in", "telemetry")
    with open_output(str(tmp_path / "local.jsonl")) as out:
        local = convert([tree], out)
    expected = _renamed(local.to_json(), str(tree), "s3://lithify-in/telemetry")
    assert local.corrupt and local.facts
    big = (tree / "lines" / "big.jsonl").stat().st_size

    url = s3.url("lithify-in", "telemetry/")
    summary = convert_ray([url], tmp_path / "ray", split_bytes=big // 5)
    assert len(list((tmp_path / "ray").iterdir())) >= local.inputs + 4  # big.jsonl: 5 tasks
    assert _parts(tmp_path / "ray") == (tmp_path / "local.jsonl").read_bytes()
    assert summary.to_json() == expected

    address, auth = cluster
    env = {**os.environ, **auth, "RAY_ADDRESS": address}
    split = ["--split-bytes", str(big // 3)]
    ray = subprocess.run(
        [LITHIFY, "convert", "--engine", "ray", url, "-o", str(tmp_path / "cli"), "--json", *split],
        capture_output=True,
        env=env,
    )
    assert ray.returncode == 0, ray.stderr.decode()[-2000:]
    assert orjson.loads(ray.stdout) == expected
    assert _parts(tmp_path / "cli") == (tmp_path / "local.jsonl").read_bytes()

    secret = "not-shown-4921"
    with_key = s3.url("lithify-in", "telemetry", credentials=f"lithify-test:{secret}")
    plain = subprocess.run(
        [LITHIFY, "convert", with_key, "-o", str(tmp_path / "s3.jsonl"), "--json"],
        capture_output=True,
    )
    assert plain.returncode == 0, plain.stderr.decode()[-2000:]
    assert orjson.loads(plain.stdout) == expected
    assert secret.encode() not in plain.stdout + plain.stderr + ray.stdout + ray.stderr
    assert (tmp_path / "s3.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()


def test_convert_splits_one_large_file_into_tasks(cluster: object, tmp_path: Path) -> None:
    """One JSON lines file of many sessions, cut into 7 ranges (so 7 tasks over the two
    nodes): the local facts and summary, its corrupt lines counted from the file's start."""
    path = tmp_path / "big.jsonl"
    path.write_bytes(jsonl_input(9, sessions=200))
    with open_output(str(tmp_path / "local.jsonl")) as out:
        local = convert([path], out)
    summary = convert_ray([path], tmp_path / "ray", split_bytes=path.stat().st_size // 7 + 1)
    assert len(list((tmp_path / "ray").iterdir())) == 7
    assert _parts(tmp_path / "ray") == (tmp_path / "local.jsonl").read_bytes()
    assert summary.to_json() == local.to_json()
    assert local.inputs == 1 and len(local.corrupt) == 2


def test_trl_vision_rows_and_their_image_files(cluster: object, tmp_path: Path) -> None:
    """``--images`` on Ray: the tasks write the images into the shards' folder on the shared
    filesystem, the merge takes the ones its rows name; rows, ``images/``, card and manifest
    are the local export's, JSONL (image tokens counted by the processor, rows cut to fit) and
    Parquet (the images in the rows, no folder)."""
    from lithify.model import encode
    from tests.export.helpers import media_sessions
    from tests.export.test_vision_tokens import SIZES, build_processor, sized_session

    model = build_processor(tmp_path / "model")
    found = media_sessions()
    for k in range(6):  # sessions of 1 to 6 turns, the images in turn
        found += sized_session(f"v{k}", (SIZES * 2)[k : 2 * k + 1])
    paths = [tmp_path / f"part-{i}.jsonl" for i in range(3)]
    for i, path in enumerate(paths):  # a session's facts over several files
        path.write_bytes(b"".join(encode(f) + b"\n" for f in found[i::3]))
    tokens = {"tokenizer": str(model), "max_tokens": 250, "fit": "split"}
    for fmt, extra in (("jsonl", tokens), ("parquet", {})):
        options = ExportOptions(
            kind="sft", profile="trl", images=True, fmt=fmt, eval_fraction=0.5, **extra
        )  # type: ignore[arg-type]
        local = _local(paths, tmp_path / f"local-{fmt}", options)
        assert local.rows["train"] > 4 and local.rows["eval"] > 0
        out = tmp_path / f"ray-{fmt}"
        done = export_ray(paths, out, options, partitions=3, shard_bytes=1 << 12)
        _same(local, tmp_path / f"local-{fmt}", done, out)
        files = {p.name: p.read_bytes() for p in (tmp_path / f"local-{fmt}").glob("images/*")}
        assert {p.name: p.read_bytes() for p in out.glob("images/*")} == files
        assert bool(files) == (fmt == "jsonl")
