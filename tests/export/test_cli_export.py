"""`lithify export` end to end: from fact files and from real stores (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from lithify.cli import app
from lithify.model import encode
from tests.export.helpers import (
    assistant,
    cli_export,
    fact,
    feedback,
    read_rows,
    text,
    tool_session,
    user,
)

runner = CliRunner()
EXAMPLES = Path(__file__).parents[2] / "src" / "lithify" / "examples"


def _facts_file(tmp_path: Path) -> Path:
    path = tmp_path / "facts.jsonl"
    calls = tool_session("s-1") + tool_session("s-2", answer="Rain.")
    fb = [feedback("s-1-b", 0.9), feedback("s-2-b", 0.2)]
    path.write_bytes(b"".join(encode(x) + b"\n" for x in [*calls, *fb]))
    return path


def test_export_from_fact_files(tmp_path: Path) -> None:
    facts = _facts_file(tmp_path)
    out = tmp_path / "sft"
    summary = cli_export("sft", "--facts", str(facts), "-o", str(out), "--where", "score>=0.5")
    assert summary["rows"] == {"train": 1, "eval": 0}
    assert summary["filtered"] == 3
    assert summary["facts_read"] == 4
    [row] = read_rows(out / "train.jsonl")
    assert row["messages"][-1] == {"role": "assistant", "content": "Sunny."}

    dpo = cli_export("dpo", "--facts", str(facts), "-o", str(tmp_path / "dpo"), "--profile", "trl")
    assert dpo["rows"] == {"train": 1, "eval": 0}
    [pair] = read_rows(tmp_path / "dpo" / "train.jsonl")
    assert pair["chosen"][0]["content"] == "Sunny." and pair["rejected"][0]["content"] == "Rain."

    rl = cli_export("rl", "--facts", str(facts), "-o", str(tmp_path / "rl"), "--format", "parquet")
    assert rl["rows"] == {"train": 2, "eval": 0}
    assert (tmp_path / "rl" / "train.parquet").exists()

    only = cli_export("sft", "--facts", str(facts), "-o", str(tmp_path / "s2"), "--session", "s-2")
    assert only["facts_read"] == 2 and only["rows"] == {"train": 2, "eval": 0}


def test_export_from_a_store(store_url: str, tmp_path: Path) -> None:
    res = runner.invoke(app, ["import", str(EXAMPLES), "--store", store_url, "--json"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "gym"
    imported = orjson.loads(res.stdout)
    summary = cli_export("nemo-gym", "--store", store_url, "-o", str(out), "--profile", "nemo-gym")
    # Every capture is read: the calls, and the other captures of them (span and log event).
    assert summary["facts_read"] == imported["stored"] + imported["variants"]
    assert summary["derive"]["duplicates"] == imported["variants"] > 0
    assert summary["rows"]["train"] > 0
    rows = read_rows(out / "train.jsonl")
    assert all(r["responses_create_params"]["input"] for r in rows)
    # The same facts through a fact file give the same bytes.
    facts = tmp_path / "facts.jsonl"
    res = runner.invoke(app, ["convert", str(EXAMPLES), "-o", str(facts)])
    assert res.exit_code == 0, res.output
    cli_export(
        "nemo-gym", "--facts", str(facts), "-o", str(tmp_path / "f"), "--profile", "nemo-gym"
    )
    assert (tmp_path / "f" / "train.jsonl").read_bytes() == (out / "train.jsonl").read_bytes()


def test_the_json_summary_is_the_typed_summary(tmp_path: Path) -> None:
    facts = _facts_file(tmp_path)
    summary = cli_export("sft", "--facts", str(facts), "-o", str(tmp_path / "o"), "--progress")
    assert list(summary) == [
        "kind",
        "profile",
        "shape",
        "format",
        "schema",
        "exporter",
        "output",
        "files",
        "facts_read",
        "derive",
        "rows",
        "skipped",
        "filtered",
        "changes",
        "flags",
        "feedback_dropped",
    ]
    derive = summary["derive"]
    assert list(derive) == [  # type: ignore[call-overload]
        "calls",
        "duplicates",
        "richer_dropped",
        "sessions",
        "segments",
        "splits",
        "alternatives",
    ]
    assert summary["facts_read"] == derive["calls"] + derive["duplicates"] == 4  # type: ignore[index]


def test_the_table_summary(tmp_path: Path) -> None:
    facts = _facts_file(tmp_path)
    res = runner.invoke(app, ["export", "sft", "--facts", str(facts), "-o", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "rows: train" in res.output and "4" in res.output


def test_alternative_choices_are_counted_in_the_summary_table_and_card(tmp_path: Path) -> None:
    # n = 2: the second choice is in no row, and every report says so.
    two = fact("n2", [user("Pick a colour")], [assistant(text("red")), assistant(text("blue"))])
    path = tmp_path / "facts.jsonl"
    path.write_bytes(encode(two) + b"\n")
    out = tmp_path / "o"
    summary = cli_export("sft", "--facts", str(path), "-o", str(out))
    assert summary["derive"]["alternatives"] == 1  # type: ignore[index]
    assert [r["messages"][-1] for r in read_rows(out / "train.jsonl")] == [
        {"role": "assistant", "content": "red"}
    ]
    assert "| alternative choices | 1 |" in (out / "README.md").read_text()
    res = runner.invoke(app, ["export", "sft", "--facts", str(path), "-o", str(tmp_path / "t")])
    assert res.exit_code == 0 and "alternative choices" in res.output


def test_exit_codes(tmp_path: Path) -> None:
    facts = _facts_file(tmp_path)
    for args in (
        ["sft", "--profile", "nemo-gym"],
        ["sft", "--where", "score>>1"],
        ["chat"],
        ["sft", "--format", "csv"],
    ):
        res = runner.invoke(app, ["export", *args, "--facts", str(facts), "-o", str(tmp_path)])
        assert res.exit_code == 2, (args, res.output)
    res = runner.invoke(app, ["export", "sft", "--facts", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(facts.read_bytes() + b"{not json\n")
    res = runner.invoke(app, ["export", "sft", "--facts", str(bad), "-o", str(tmp_path / "x")])
    assert res.exit_code == 1 and "bad.jsonl:7" in res.output
    assert not (tmp_path / "x").exists()
    res = runner.invoke(app, ["export", "sft", "--store", "mysql://nope"])
    assert res.exit_code == 4


def test_demo_imports_derives_and_exports_on_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITHIFY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LITHIFY_STORE", raising=False)
    out = tmp_path / "demo"
    res = runner.invoke(app, ["demo", "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    result = orjson.loads(res.stdout)
    assert result["store"].endswith(str(tmp_path / "home" / "lithify.db"))
    assert result["stored"] > 0
    sft, gym = result["exports"]["sft"], result["exports"]["nemo-gym"]
    assert sft["rows"]["train"] > 0 and gym["rows"]["train"] > 0
    rows = read_rows(out / "nemo-gym" / "train.jsonl")
    # The example agent sessions: a tool call, its result, then the answer.
    kinds = [i["type"] for r in rows for i in r["recorded_output"]]
    assert {"function_call", "function_call_output", "message"} <= set(kinds)
    again = runner.invoke(app, ["demo", "-o", str(out), "--json"])
    assert orjson.loads(again.stdout)["stored"] == 0  # idempotent; the rows are the same
    assert read_rows(out / "nemo-gym" / "train.jsonl") == rows
    res = runner.invoke(app, ["demo", "-o", str(out)])
    assert res.exit_code == 0 and "NeMo Gym rows" in res.output
    assert f"0 new calls in {result['store']}, 0 other captures" in res.output.replace("\n", "")
    assert f"{result['facts']} already there" in res.output
