"""`lithify export --replay OUT_DIR/manifest.json`: the same facts make the same bytes (exit 0);
otherwise it says which file and which facts differ (exit 7) (docs/export.md, Replay)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest
from click.testing import CliRunner

from lithify.cli import app
from lithify.model import InferenceCall, encode
from lithify.store import open_store
from tests.export.helpers import feedback, run_export, tool_session

runner = CliRunner()

EXPORTS = [
    ["sft", "--eval-fraction", "0.5", "--where", "score>=0.1"],
    ["sft", "--profile", "trl", "--format", "parquet", "--keep-flag", "undefined_tool_call"],
    ["nemo-gym", "--profile", "nemo-gym", "--session", "s-2"],
    ["dpo", "--profile", "openai"],
    ["rl", "--format", "parquet", "--drop-flag", "degraded_source"],
]


def _calls() -> list[InferenceCall]:
    return [*tool_session("s-1"), *tool_session("s-2", answer="Rain."), *tool_session("s-3")]


def _write(path: Path, calls: list[InferenceCall]) -> Path:
    fb = [feedback("s-1-b", 0.9), feedback("s-2-b", 0.2), feedback("s-3-b", 0.5)]
    path.write_bytes(b"".join(encode(x) + b"\n" for x in [*calls, *fb]))
    return path


def _export(*args: str) -> None:
    res = runner.invoke(app, ["export", *args])
    assert res.exit_code == 0, res.output


def _replay(manifest: Path, *args: str) -> tuple[int, dict]:
    res = runner.invoke(app, ["export", "--replay", str(manifest), "--json", *args])
    assert res.exit_code in (0, 7), res.output
    return res.exit_code, orjson.loads(res.stdout)


@pytest.mark.parametrize("args", EXPORTS, ids=lambda a: "-".join(a[:3]))
def test_a_replay_of_an_unchanged_input_is_byte_identical(tmp_path: Path, args: list[str]) -> None:
    facts = _write(tmp_path / "facts.jsonl", _calls())
    out = tmp_path / "out"
    _export(*args, "--facts", str(facts), "-o", str(out))
    code, result = _replay(out / "manifest.json")
    assert code == 0 and result["identical"]
    names = {c["name"] for c in result["files"]}
    assert names == {p.name for p in out.iterdir()}  # every file, the manifest too
    assert result["facts"] == {"added": [], "removed": [], "changed": []}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".replay-")]  # cleaned up


def test_a_replay_names_the_facts_that_changed_since(tmp_path: Path) -> None:
    calls = _calls()
    facts = _write(tmp_path / "facts.jsonl", calls)
    out = tmp_path / "out"
    _export("sft", "--facts", str(facts), "-o", str(out))
    before = (out / "train.jsonl").read_bytes()
    # s-3's answer edited, s-4 added: what changed in the file the manifest names.
    edited = [c for c in calls if c.session_id != "s-3"]
    edited += tool_session("s-3", answer="Snow.") + tool_session("s-4")
    _write(facts, edited)
    code, result = _replay(out / "manifest.json")
    assert code == 7 and not result["identical"]
    assert result["facts"] == {
        "added": ['call:"s-4-a"', 'call:"s-4-b"'],
        "removed": [],
        "changed": ['call:"s-3-b"'],
    }
    differs = {c["name"] for c in result["files"] if not c["same"]}
    assert {"train.jsonl", "facts.sha256", "manifest.json", "README.md"} <= differs
    assert (out / "train.jsonl").read_bytes() == before  # the folder is left as it was
    res = runner.invoke(app, ["export", "--replay", str(out / "manifest.json")])
    assert res.exit_code == 7
    assert "call s-4-a added since" in res.output and "call s-3-b changed since" in res.output


def test_a_replay_sees_a_file_changed_in_the_folder(tmp_path: Path) -> None:
    facts = _write(tmp_path / "facts.jsonl", _calls())
    out = tmp_path / "out"
    _export("sft", "--facts", str(facts), "-o", str(out))
    rows = (out / "train.jsonl").read_bytes().splitlines(keepends=True)
    (out / "train.jsonl").write_bytes(b"".join(rows[1:]))  # a row removed by hand
    code, result = _replay(out / "manifest.json")
    assert code == 7
    [bad] = [c for c in result["files"] if not c["same"]]
    assert bad["name"] == "train.jsonl" and bad["recorded"] == bad["replayed"] != bad["present"]
    res = runner.invoke(app, ["export", "--replay", str(out / "manifest.json")])
    assert "train.jsonl: changed since the export" in res.output


def test_a_store_export_replays_and_sees_facts_added_to_the_store(
    store_url: str, tmp_path: Path
) -> None:
    facts = _write(tmp_path / "facts.jsonl", _calls())
    res = runner.invoke(app, ["import", str(facts), "--store", store_url])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    _export("sft", "--store", store_url, "-o", str(out), "--session", "s-1", "--session", "s-9")
    manifest = out / "manifest.json"
    if urlsplit(store_url).password:  # recorded masked: the password must be given again
        res = runner.invoke(app, ["export", "--replay", str(manifest)])
        assert res.exit_code == 2 and "password" in res.output
    code, result = _replay(manifest, "--store", store_url)
    assert code == 0, result
    with open_store(store_url) as store:
        store.insert_facts(tool_session("s-9"))  # selected by the recorded filters
        store.insert_facts(tool_session("s-8"))  # not selected
    code, result = _replay(manifest, "--store", store_url)
    assert code == 7
    assert result["facts"]["added"] == ['call:"s-9-a"', 'call:"s-9-b"']
    assert result["facts"]["removed"] == result["facts"]["changed"] == []


def test_what_cannot_be_replayed_is_a_usage_error(tmp_path: Path) -> None:
    run_export(_calls(), tmp_path / "memory", kind="sft")
    res = runner.invoke(app, ["export", "--replay", str(tmp_path / "memory" / "manifest.json")])
    assert res.exit_code == 2 and "in memory" in res.output
    (tmp_path / "bad.json").write_text("{}")
    res = runner.invoke(app, ["export", "--replay", str(tmp_path / "bad.json")])
    assert res.exit_code == 2 and "not a readable export manifest" in res.output
    res = runner.invoke(app, ["export"])
    assert res.exit_code == 2 and "--replay" in res.output


def test_a_masked_store_password_must_be_given_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'facts.db'}"
    res = runner.invoke(app, ["import", str(_write(tmp_path / "f.jsonl", _calls())), "-s", url])
    assert res.exit_code == 0, res.output
    _export("sft", "--store", url, "-o", str(tmp_path / "out"))
    manifest = tmp_path / "out" / "manifest.json"
    doc = orjson.loads(manifest.read_bytes())
    doc["provenance"]["store"] = "postgresql://me:***@db.example:5432/facts"
    manifest.write_bytes(orjson.dumps(doc))
    res = runner.invoke(app, ["export", "--replay", str(manifest)])
    assert res.exit_code == 2 and "without its password" in res.output
    code, _ = _replay(manifest, "--store", url)  # the store given: it replays (the manifest
    assert code == 7  # file itself was edited here, so it is not the one the replay makes)
