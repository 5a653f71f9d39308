"""`lithify convert` as a user runs it: files in, facts out, a summary, meaningful exit codes."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import orjson
from click.testing import CliRunner

from lithify.cli import app
from lithify.model import decode_fact
from lithify.store import open_store
from tests.conftest import CORPUS

runner = CliRunner()
TRACES = CORPUS / "otlp" / "util_genai_openai_v2_chat_tool_call.otlp.json"


def _span(i: int, content: str = "hi") -> dict[str, object]:
    msgs = orjson.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": content}]}]
    ).decode()
    return {
        "resourceSpans": [{"scopeSpans": [{"spans": [{
            "traceId": f"{i + 1:032x}", "spanId": f"{i + 1:016x}", "name": "chat m",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
                {"key": "gen_ai.input.messages", "value": {"stringValue": msgs}},
            ],
        }]}]}]
    }  # fmt: skip


def _jsonl(path: Path, docs: list[object], corrupt_at: int | None = None) -> Path:
    lines = [orjson.dumps(d) for d in docs]
    if corrupt_at is not None:
        lines.insert(corrupt_at, b'{"resourceSpans": [')
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_convert_jsonl_to_file_with_json_summary(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "traces.jsonl", [_span(i) for i in range(3)])
    out = tmp_path / "facts.jsonl"
    res = runner.invoke(app, ["convert", str(src), "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    summary = orjson.loads(res.stdout)
    assert summary["facts"] == 3 and summary["units"] == 3 and summary["inputs"] == 1
    facts = [decode_fact(line) for line in out.read_bytes().splitlines()]
    assert [f.span_id for f in facts] == [f"{i + 1:016x}" for i in range(3)]


def test_corrupt_line_is_named_and_does_not_stop_the_run(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "t.jsonl", [_span(0), _span(1)], corrupt_at=1)
    out = tmp_path / "facts.jsonl"
    res = runner.invoke(app, ["convert", str(src), "-o", str(out), "--json"])
    assert res.exit_code == 0
    summary = orjson.loads(res.stdout)
    assert summary["facts"] == 2
    assert summary["skipped"] == {"undecodable": 1}
    assert summary["corrupt"][0].startswith(f"{src}:2: line 2: not JSON")


def test_strict_stops_at_corruption_and_keeps_earlier_output(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "t.jsonl", [_span(0), _span(1)], corrupt_at=1)
    out = tmp_path / "facts.jsonl"
    out.write_bytes(b"earlier export\n")
    res = runner.invoke(app, ["convert", str(src), "-o", str(out), "--strict"])
    assert res.exit_code == 3
    assert f"{src}:2" in res.stderr
    assert out.read_bytes() == b"earlier export\n", "a failed run never truncates the output"
    assert not list(tmp_path.glob(".facts.jsonl.*")), "no temporary file is left behind"


def test_unreadable_input_exits_1_but_converts_the_rest(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "t.jsonl", [_span(0)])
    out = tmp_path / "facts.jsonl"
    res = runner.invoke(
        app, ["convert", str(tmp_path / "missing.json"), str(src), "-o", str(out), "--json"]
    )
    assert res.exit_code == 1
    summary = orjson.loads(res.stdout)
    assert summary["facts"] == 1
    assert summary["unreadable"] == [f"{tmp_path / 'missing.json'}: no such file"]


def test_inputs_without_facts_say_why(tmp_path: Path) -> None:
    agent = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "1" * 32, "spanId": "2" * 16,
             "name": "invoke_agent", "attributes": [
                 {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]}]}]}]}  # fmt: skip
    src = tmp_path / "agent.json"
    src.write_bytes(orjson.dumps(agent))
    res = runner.invoke(app, ["convert", str(src), "-o", str(tmp_path / "o.jsonl"), "--json"])
    assert res.exit_code == 0
    summary = orjson.loads(res.stdout)
    assert summary["no_fact_inputs"] == {str(src): {"not_genai": 1}}


def test_stdout_output_and_gzip_and_folders(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    with gzip.open(tmp_path / "in" / "b.jsonl.gz", "wb") as fh:
        fh.write(orjson.dumps(_span(1)) + b"\n")
    (tmp_path / "in" / "a.json").write_bytes(orjson.dumps(_span(0)))
    res = runner.invoke(app, ["convert", str(tmp_path / "in"), "--json"])
    assert res.exit_code == 0, res.output
    facts = [decode_fact(line) for line in res.stdout.splitlines()]
    assert [f.span_id for f in facts] == [f"{1:016x}", f"{2:016x}"], (
        "folders are read in sorted order"
    )
    assert orjson.loads(res.stderr)["facts"] == 2, (
        "the summary goes to stderr when facts go to stdout"
    )


def test_protobuf_file(tmp_path: Path) -> None:
    from tests.test_otlp import _requests

    data, _ = _requests()
    (tmp_path / "t.pb").write_bytes(data)
    res = runner.invoke(
        app, ["convert", str(tmp_path / "t.pb"), "--json", "-o", str(tmp_path / "o")]
    )
    assert res.exit_code == 0
    assert orjson.loads(res.stdout)["units"] == 1


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert runner.invoke(app, ["convert"]).exit_code == 2
    out = str(tmp_path / "o")
    for engine in ([], ["--engine", "ray"]):  # refused before Ray starts
        res = runner.invoke(app, ["convert", *engine, "--from", "nope", str(TRACES), "-o", out])
        assert res.exit_code == 2 and "unknown --from 'nope'" in res.stderr, engine


def test_environment_variable_sets_an_option(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "t.jsonl", [_span(0)], corrupt_at=0)
    res = runner.invoke(
        app, ["convert", str(src), "-o", str(tmp_path / "o")], env={"LITHIFY_CONVERT_STRICT": "1"}
    )
    assert res.exit_code == 3


def test_lithify_json_turns_on_json_output_for_every_command(tmp_path: Path) -> None:
    env = {"LITHIFY_JSON": "1"}
    res = runner.invoke(app, ["convert", str(TRACES), "-o", str(tmp_path / "o")], env=env)
    assert res.exit_code == 0 and orjson.loads(res.stdout)["facts"] >= 1
    store = f"sqlite://{tmp_path / 'f.db'}"
    open_store(store).close()
    assert orjson.loads(runner.invoke(app, ["stats", "-s", store], env=env).stdout)["facts"] == 0


def test_reading_commands_refuse_a_store_that_is_not_there(tmp_path: Path) -> None:
    # A mistyped --store must not read as an empty store, nor leave a new file behind.
    missing = tmp_path / "typo.db"
    for args in (["stats"], ["facts"], ["ui", "--port", "0"], ["token", "list"]):
        res = runner.invoke(app, [*args, "-s", f"sqlite://{missing}"])
        assert res.exit_code == 4, (args, res.output)
        assert f"no store at {missing}" in " ".join(res.stderr.split()), args
        assert not missing.exists()
    res = runner.invoke(app, ["stats"], env={"LITHIFY_STORE": str(missing)})
    assert res.exit_code == 4 and not missing.exists()
    open_store(f"sqlite://{missing}").close()
    assert runner.invoke(app, ["stats", "-s", f"sqlite://{missing}"]).exit_code == 0


def test_a_version_in_the_environment_does_not_stop_the_command(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["convert", str(TRACES), "-o", str(tmp_path / "o"), "--json"],
        env={"LITHIFY_VERSION": "1.4.2"},
    )  # fmt: skip
    assert res.exit_code == 0 and orjson.loads(res.stdout)["facts"] >= 1
    assert runner.invoke(app, ["--version"]).stdout.startswith("lithify ")


def test_installed_entry_point_runs() -> None:
    exe = Path(sys.executable).with_name("lithify")
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and "convert" in res.stdout


def test_option_choices_written_out_for_the_help_are_the_stages_own() -> None:
    """convert's --from and export's kinds and profiles are spelled in the CLI so that its help
    imports no stage (docs/development.md, Start-up): they must stay the stages' lists."""
    from lithify import export, translate
    from lithify.cli import convert as convert_cli
    from lithify.cli import export as export_cli

    assert convert_cli.FORMATS == translate.FORMATS
    assert export_cli.KINDS == export.KINDS
    assert export_cli.PROFILES == export.PROFILES


def test_help_lists_every_command_in_order_and_each_command_has_its_help() -> None:
    """Commands are registered lazily: the list and each command's own help are still whole."""
    from lithify.cli.registry import COMMANDS

    top = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert top.exit_code == 0
    commands = top.output.split("\nCommands:\n")[1].splitlines()
    listed = [ln.split()[0] for ln in commands if ln.startswith("  ") and ln[2] != " "]
    assert [n for n in listed if n in COMMANDS] == list(COMMANDS)
    for name in COMMANDS:
        sub = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
        assert sub.exit_code == 0, name
        assert f"Usage: lithify {name} [OPTIONS]" in sub.output
    typo = runner.invoke(app, ["conver"])
    assert typo.exit_code == 2 and "Did you mean 'convert'?" in typo.output


def _double_span(i: int, temperature: object) -> dict[str, object]:
    doc = _span(i)
    attrs = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]  # type: ignore[index]
    attrs.append({"key": "gen_ai.request.temperature", "value": {"doubleValue": temperature}})
    return doc


def test_non_finite_doubles_survive_convert_line_by_line(tmp_path: Path) -> None:
    """The writer searches only facts whose OTLP/JSON decode made a NaN or ±Infinity: each line
    is judged on its own, whatever the lines around it held."""
    import math

    from lithify.ingest.files import read_file

    temps = [0.5, "NaN", 0.25, "-Infinity", "Infinity", 1.0]
    src = _jsonl(tmp_path / "in.jsonl", [_double_span(i, t) for i, t in enumerate(temps)])
    located = list(read_file(src))
    assert [loc.finite for loc in located] == [isinstance(t, float) for t in temps]
    out = tmp_path / "facts.jsonl"
    res = runner.invoke(app, ["convert", str(src), "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    back = [loc.result.raw["attributes"]["gen_ai.request.temperature"] for loc in read_file(out)]
    assert [str(x) for x in back] == ["0.5", "nan", "0.25", "-inf", "inf", "1.0"]
    assert math.isnan(back[1])
    assert [
        line.endswith(b'"lithify:escaped":true}') for line in out.read_bytes().splitlines()
    ] == [not isinstance(t, float) for t in temps]
