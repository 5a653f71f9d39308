"""`lithify export --engine ray --tokenizer …` on a real two-node Ray cluster (tests/scale/
cluster.py): each task counts its sessions' rows with its node's copy of the tokenizer, and the
rows, their ``metadata.tokens``, the summary's token distribution, the manifest and the card
are the local export's byte for byte (docs/export.md, Token budgets)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from lithify.export import ExportOptions, export, from_files
from lithify.export.distributed import export_ray
from lithify.model import encode
from lithify.store import FactFilter
from tests.export.test_tokens import agent_session, build_tokenizer, facts_and_feedback

pytestmark = pytest.mark.xdist_group("ray")  # one cluster, in one test process
LITHIFY = Path(sys.executable).with_name("lithify")
ADDED = ("<|im_start|>", "<think>", "</think>")


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Sessions of every kind's rows over three fact files: long agent sessions (rows to cut),
    a preference pair, a rewarded trajectory, the same prompt in two sessions."""
    found, fb = facts_and_feedback()
    for k in range(6):
        found += agent_session(f"long{k}", 3 + 2 * k, users=frozenset({2}))
    folder = tmp_path_factory.mktemp("facts")
    files = [folder / f"part-{i}.jsonl" for i in range(3)]
    for i, path in enumerate(files):
        part = [*found[i::3], *(fb if i == 0 else [])]
        path.write_bytes(b"".join(encode(f) + b"\n" for f in part))
    return files


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer("qwen3", tmp_path_factory.mktemp("qwen3"), ADDED)


PUBLISHED = ("facts.sha256", "README.md", "manifest.json")


@pytest.mark.parametrize(
    "opts",
    [
        {"kind": "sft", "profile": "trl", "fit": "split"},
        {"kind": "sft", "profile": "openai", "fmt": "parquet"},
        {"kind": "dpo", "profile": "trl"},
        {"kind": "nemo-gym", "profile": "nemo-gym"},
        {"kind": "rl", "profile": "canonical"},
    ],
    ids=["sft-split", "sft-openai-parquet", "dpo", "nemo-gym", "rl"],
)
def test_ray_counts_as_the_local_export(
    ray_joined: object, facts: list[Path], qwen3: Path, tmp_path: Path, opts: dict[str, Any]
) -> None:
    options = ExportOptions(eval_fraction=0.5, tokenizer=str(qwen3), **opts)
    if options.kind != "dpo":  # a budget the median row is within (DPO: one pair, no budget)
        counted = dataclasses.replace(options, fit="drop")
        plain = export(from_files(facts, FactFilter()), tmp_path / "plain", counted)
        assert plain.tokens is not None
        options = dataclasses.replace(options, max_tokens=plain.tokens.median)
    local = export(from_files(facts, FactFilter()), tmp_path / "local", options)
    done = export_ray(facts, tmp_path / "ray", options, partitions=3)
    assert local.tokens is not None and local.tokens.rows > 0
    assert msgspec.structs.replace(done.summary, output="", files={}) == msgspec.structs.replace(
        local, output="", files={}
    )
    ext = "jsonl" if options.fmt == "jsonl" else "parquet"
    for name in (f"train.{ext}", f"eval.{ext}", *PUBLISHED):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    if options.max_tokens is not None:  # the budget did something to compare
        assert local.skipped.get("over_token_budget", 0) + local.tokens.cut > 0


def test_cli_counts_on_the_cluster_and_replays(
    ray_joined: tuple[str, dict[str, str]], facts: list[Path], qwen3: Path, tmp_path: Path
) -> None:
    address, auth = ray_joined
    base = ["export", "sft", "--profile", "trl", "--json", "--no-progress"]
    base += [a for p in facts for a in ("--facts", str(p))]
    common = [*base, "--tokenizer", str(qwen3), "--max-tokens", "700", "--fit", "split"]
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
    assert a["tokens"]["cut"] > 0 and a["tokens"] == b["tokens"]
    for name in ("train.jsonl", "eval.jsonl", *PUBLISHED):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    replay = subprocess.run(
        [LITHIFY, "export", "--replay", str(tmp_path / "ray" / "manifest.json"), "--json"],
        capture_output=True,
        check=True,
    )
    assert orjson.loads(replay.stdout)["identical"] is True
    # A tokenizer the driver cannot load is a usage error before anything is read.
    missing = subprocess.run(
        [LITHIFY, *base, "--tokenizer", "nobody/none", "--engine", "ray", "-o", "x"],
        capture_output=True,
        env=env,
        cwd=tmp_path,
    )
    assert missing.returncode == 2, missing.stderr.decode()[-2000:]
    assert b"never downloaded" in missing.stderr
    assert not (tmp_path / "x").exists()
