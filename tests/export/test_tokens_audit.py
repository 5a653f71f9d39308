"""The four parts of a dataset an export makes, together, for every kind × profile × format
(docs/export.md): rows that fit the model (token counts on every row and in the summary),
the record of what the dataset is (manifest.json, and a card ``datasets.load_dataset(OUT_DIR)``
reads both splits by), quality flags (dropped by default, kept on request, counted), and a
replay that makes the same bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from lithify.cli import app
from lithify.model import encode
from tests.export.helpers import assistant, call, fact, feedback, text, user
from tests.export.test_tokens import build_tokenizer, read_rows
from tests.export.test_tokens_kinds import (
    EVERY,
    QWEN_ADDED,
    VISION_ADDED,
    every_facts,
    parquet_rows,
    vision_session,
)

runner = CliRunner()
FLAG = "undefined_tool_call"


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {
        "text": build_tokenizer("qwen3", tmp_path_factory.mktemp("qwen3"), QWEN_ADDED),
        "vision": build_tokenizer("qwen3_vl", tmp_path_factory.mktemp("vl"), VISION_ADDED),
    }


@pytest.fixture(scope="module")
def facts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every kind's rows, and one of each carrying a quality flag: an answer that calls a tool
    its call does not define, scored above another answer to the same prompt (a DPO pair), in a
    rewarded session."""
    facts, fb = every_facts()
    # Images in the train split too: datasets types a column by the first split it reads, and
    # a list empty in every train row would be typed null, which the eval rows' images are not.
    facts += vision_session("album", 2)
    fb.append(feedback("album", 1.0, kind="session"))
    prompt = [user("Weather in Rome?")]
    facts += [
        fact("u-good", prompt, [assistant(call("u1", "lookup", city="Rome"))], session="u1"),
        fact("u-bad", prompt, [assistant(text("No idea."))], session="u2"),
    ]
    fb += [feedback("u-good", 0.9), feedback("u-bad", 0.2)]
    fb += [feedback("u1", 1.0, kind="session"), feedback("u2", 0.0, kind="session")]
    path = tmp_path_factory.mktemp("facts") / "facts.jsonl"
    path.write_bytes(b"".join(encode(f) + b"\n" for f in [*facts, *fb]))
    return path


def _export(args: list[str]) -> dict[str, Any]:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = orjson.loads(res.stdout)
    return out


def _made(summary: dict[str, Any]) -> int:
    """Rows written, and eval rows left out for a train row's prompt."""
    return sum(summary["rows"].values()) + summary["skipped"].get("eval_prompt_in_train", 0)


def _rows(out: Path, fmt: str) -> dict[str, list[dict[str, Any]]]:
    read = read_rows if fmt == "jsonl" else parquet_rows
    return {s: read(out / f"{s}.{fmt}") for s in ("train", "eval")}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize(("kind", "profile", "shape", "images"), EVERY)
def test_every_export_fits_records_flags_and_replays(
    tokenizers: dict[str, Path],
    facts_file: Path,
    tmp_path: Path,
    kind: str,
    profile: str,
    shape: str | None,
    images: bool,
    fmt: str,
) -> None:
    import datasets

    tok = tokenizers["vision" if images else "text"]
    args = ["export", kind, "--profile", profile, "--facts", str(facts_file), "--format", fmt]
    args += ["--eval-fraction", "0.5", "--tokenizer", str(tok)]
    args += (["--shape", shape] if shape else []) + (["--images"] if images else [])
    dropped = _export([*args, "-o", str(tmp_path / "dropped")])
    kept = _export([*args, "-o", str(tmp_path / "kept"), "--keep-flag", FLAG])

    # Quality flags: the flagged row is left out by default and counted, written on request.
    for summary in (dropped, kept):
        assert summary["flags"].get(FLAG) == 1, summary["flags"]
    assert dropped["skipped"].get("flagged") == 1 and "flagged" not in kept["skipped"]
    # (An eval row whose prompt a kept train row has is left out then: counted.)
    assert _made(kept) == _made(dropped) + 1
    out = tmp_path / "kept"
    rows = _rows(out, fmt)
    every = [*rows["train"], *rows["eval"]]
    assert sum(FLAG in r["metadata"]["flags"] for r in every) == 1
    dropped_rows = _rows(tmp_path / "dropped", fmt)
    assert not any(r["metadata"]["flags"] for s in dropped_rows.values() for r in s)

    # Rows that fit: every row counted, the distribution in the summary and the manifest.
    counts = sorted(r["metadata"]["tokens"] for r in every)
    tokens = kept["tokens"]
    assert tokens["rows"] == len(every) and (tokens["min"], tokens["max"]) == (
        counts[0],
        counts[-1],
    )

    # The record: the manifest's files are these bytes; its summary parts are the summary's.
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["files"]
    for name, entry in manifest["files"].items():
        data = (out / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert len(data) == entry["bytes"]
    for key in ("flags", "tokens", "rows", "skipped"):
        assert manifest[key] == kept[key], key
    card = (out / "README.md").read_text()
    assert "## Quality flags" in card and f"| `{FLAG}` | 1 | kept |" in card
    assert "## Token budget" in card
    # The card alone tells datasets where the splits are.
    loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"))
    assert {s: loaded[s].num_rows for s in loaded} == {s: n for s, n in kept["rows"].items() if n}

    # Replay: the same bytes, file by file.
    again = runner.invoke(app, ["export", "--replay", str(out / "manifest.json"), "--json"])
    assert again.exit_code == 0, again.output
    assert orjson.loads(again.stdout)["identical"] is True
