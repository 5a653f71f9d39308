"""manifest.json and the dataset card: what they say is what the folder holds, they are written
last, and they say nothing about the run beyond its facts and options (docs/export.md)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.cli import app
from lithify.core.factfile import encode_line
from lithify.export import ExportOptions, cli_provenance, export, from_facts
from lithify.export.card import render
from lithify.export.manifest import decode_manifest
from lithify.model import encode
from tests.export.helpers import (
    assistant,
    cli_export,
    fact,
    feedback,
    run_export,
    text,
    tool_session,
    user,
)

runner = CliRunner()


def _facts_file(tmp_path: Path) -> Path:
    path = tmp_path / "facts.jsonl"
    calls = [*tool_session("s-1"), *tool_session("s-2", answer="Rain.")]
    # Sessions of their own questions: some are eval rows whatever the train prompts are.
    calls += [
        fact(f"q-{i}", [user(f"Question {i}?")], [assistant(text(f"{i}."))], session=f"s-q{i}")
        for i in range(6)
    ]
    fb = [feedback("s-1-b", 0.9), feedback("s-2-b", 0.2), feedback("nowhere", 1.0)]
    path.write_bytes(b"".join(encode(x) + b"\n" for x in [*calls, *fb]))
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_manifest_describes_every_file_of_the_folder(tmp_path: Path, fmt: str) -> None:
    facts = _facts_file(tmp_path)
    out = tmp_path / "out"
    summary = cli_export("sft", "--facts", str(facts), "-o", str(out), "--eval-fraction", "0.5",
                      "--format", fmt)  # fmt: skip
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([*manifest["files"], "manifest.json"])  # nothing else, no temp file
    for name, entry in manifest["files"].items():
        data = (out / name).read_bytes()
        assert entry["sha256"] == _sha(data) and entry["bytes"] == len(data), name
    for split in ("train", "eval"):
        assert manifest["files"][f"{split}.{fmt}"]["rows"] == summary["rows"][split]
    assert manifest["rows"] == summary["rows"] and summary["rows"]["eval"] > 0
    for key in ("kind", "profile", "shape", "format", "schema", "skipped", "filtered", "changes"):
        assert manifest[key] == summary[key], key
    lines = (out / "facts.sha256").read_bytes().splitlines(keepends=True)
    calls = [line for line in lines if b"  call:" in line]
    notes = [line for line in lines if b"  feedback:" in line]
    assert len(calls) == manifest["facts"]["count"] == 10
    assert manifest["facts"]["sha256"] == _sha(b"".join(calls))
    assert manifest["feedback"] == {
        "sha256": _sha(b"".join(notes)),
        "count": 3,
        "joined": 2,
        "dropped": {"unmatched": 1},
    }
    assert manifest["options"]["eval_fraction"] == 0.5 and manifest["options"]["fmt"] == fmt
    assert manifest["provenance"]["facts"] == [str(facts)]
    assert manifest["lithify"] == summary["exporter"]


def test_the_recorded_command_makes_the_samecli_export(tmp_path: Path) -> None:
    facts = _facts_file(tmp_path)
    first = tmp_path / "first"
    cli_export("dpo", "--facts", str(facts), "-o", str(first), "--profile", "trl",
            "--session", "s-1", "--session", "s-2", "--where", "score>=0")  # fmt: skip
    command = orjson.loads((first / "manifest.json").read_bytes())["provenance"]["command"]
    assert command[:3] == ["lithify", "export", "dpo"] and "-o" not in command
    again = tmp_path / "again"
    cli_export(*command[2:], "-o", str(again))
    files = {p.name: p.read_bytes() for p in sorted(first.iterdir())}
    assert files == {p.name: p.read_bytes() for p in sorted(again.iterdir())}
    assert orjson.loads(files["manifest.json"])["rows"]["train"] == 1  # not trivially equal


def test_a_store_password_is_never_written(store_url: str, tmp_path: Path) -> None:
    res = runner.invoke(app, ["import", str(_facts_file(tmp_path)), "--store", store_url])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    cli_export("sft", "--store", store_url, "-o", str(out))
    password = urlsplit(store_url).password
    for p in out.iterdir():
        assert not password or password.encode() not in p.read_bytes(), p.name
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["facts"]["count"] == 10 and manifest["rows"]["train"] == 10
    stored = manifest["provenance"]["store"]
    assert stored and "--store" in manifest["provenance"]["command"]
    masked = cli_provenance(
        ExportOptions(kind="sft"), store="postgresql://me:hunter2@db:5432/facts"
    )
    assert masked.store == "postgresql://me:***@db:5432/facts"
    assert "hunter2" not in encode(masked).decode()


def test_a_folder_holds_a_manifest_only_when_its_files_are_complete(tmp_path: Path) -> None:
    facts = _facts_file(tmp_path)
    out = tmp_path / "out"
    cli_export("sft", "--facts", str(facts), "-o", str(out))
    assert (out / "manifest.json").exists()
    # The card cannot be written (a folder holds its name): the new rows are in place, so
    # the earlier manifest, which describes other rows, must be gone.
    (out / "README.md").unlink()
    (out / "README.md").mkdir()
    res = runner.invoke(app, ["export", "sft", "--facts", str(facts), "-o", str(out),
                              "--session", "s-1"])  # fmt: skip
    assert res.exit_code == 1, res.output
    assert not (out / "manifest.json").exists()
    assert len((out / "train.jsonl").read_bytes().splitlines()) == 2  # the new rows
    (out / "README.md").rmdir()
    cli_export("sft", "--facts", str(facts), "-o", str(out), "--session", "s-1")
    assert orjson.loads((out / "manifest.json").read_bytes())["rows"]["train"] == 2


def _header(card: str) -> dict[str, object]:
    head = card.split("---\n")[1]
    loaded = yaml.safe_load(head)
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize("fraction", ["0", "0.5", "1"])
def test_the_card_names_the_splits_that_hold_rows(tmp_path: Path, fraction: str) -> None:
    out = tmp_path / "out"
    summary = cli_export("sft", "--facts", str(_facts_file(tmp_path)), "-o", str(out),
                      "--eval-fraction", fraction)  # fmt: skip
    card = (out / "README.md").read_text()
    header = _header(card)
    [config] = header["configs"]  # type: ignore[index]
    want = [{"split": s, "path": f"{s}.jsonl"} for s in ("train", "eval") if summary["rows"][s]]
    assert config == {"config_name": "default", "data_files": want}
    assert header["size_categories"] == ["n<1K"]
    manifest = decode_manifest((out / "manifest.json").read_bytes())
    assert card == render(manifest)  # made from the manifest alone
    declared = header["dataset_info"]["features"]  # type: ignore[index]
    assert declared == [{"name": n, "dtype": "json"} for n in ("messages", "tools", "metadata")]
    assert manifest.facts.sha256 in card and "`get_weather`" not in card


_NAMES = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)(?:\\\\)*\|", line))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(models=st.lists(_NAMES, min_size=1, max_size=3, unique=True))
def test_any_model_name_keeps_the_card_well_formed(
    tmp_path_factory: pytest.TempPathFactory, models: list[str]
) -> None:
    out = tmp_path_factory.mktemp("card")
    facts = [
        fact(f"c{i}", [user("hi")], [assistant(text("hello"))], model=m)
        for i, m in enumerate(models)
    ]
    run_export(facts, out, kind="sft")
    card = (out / "README.md").read_text()
    _header(card)
    table = card.split("Facts read, by model:\n\n")[1].split("\n\n")[0].splitlines()
    assert len(table) == 2 + len(models)
    for line in table:
        assert _unescaped_pipes(line) == 3, line


def test_library_exports_say_their_facts_came_from_memory(tmp_path: Path) -> None:
    run_export(tool_session(), tmp_path, kind="sft")
    manifest = decode_manifest((tmp_path / "manifest.json").read_bytes())
    assert manifest.provenance.command is None and manifest.provenance.facts is None
    assert "facts given in memory" in (tmp_path / "README.md").read_text()


def test_an_export_without_rows_does_not_promise_a_load(tmp_path: Path) -> None:
    """``datasets`` refuses empty split files whatever the card declares, so a card of no rows
    says there is nothing to load instead of showing how."""
    run_export([fact("c", [user("hi")], [])], tmp_path, kind="sft")  # no output: no row
    card = (tmp_path / "README.md").read_text()
    assert "holds no rows" in card and "load_dataset(" not in card
    run_export(tool_session(), tmp_path / "some", kind="sft")
    assert "load_dataset(" in (tmp_path / "some" / "README.md").read_text()


@pytest.mark.parametrize("workers", [0, 2])
def test_a_fact_holding_a_lone_surrogate_is_digested_as_its_escaped_line(
    tmp_path: Path, workers: int
) -> None:
    """JSON cannot hold a lone surrogate, which a store and a fact file keep (escaped): the
    fact's digest is of its fact-file line, and its row is skipped as unrepresentable. Before,
    the export stopped with a traceback."""
    odd = fact("odd\ud800", [user("half \ud83d")], [assistant(text("ok"))], session="s-odd")
    facts = [odd, *tool_session("s-1")]
    summary = export(from_facts(facts, []), tmp_path, ExportOptions(kind="sft"), workers=workers)
    assert summary.skipped.get("unrepresentable_value") == 1
    lines = (tmp_path / "facts.sha256").read_bytes().splitlines()
    line = encode_line(odd)[:-1]
    assert line.endswith(b',"lithify:escaped":true}')
    expected = f'{_sha(line)}  call:"odd\\ud800"'.encode()
    assert expected in lines
