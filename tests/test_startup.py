"""A command imports only what it uses (docs/development.md, Start-up): which modules a real
`lithify` run loaded, read from ``sys.modules`` in a fresh interpreter. No timings here: those
are bench/startup.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer

from tests.conftest import CORPUS

# Run the console entry point as the installed script does, then list the modules it loaded.
_PROBE = """
import sys
import orjson  # the probe's own output; removed from the list below
sys.argv = ["lithify", *sys.argv[1:]]
before = set(sys.modules) - {"orjson", "orjson.orjson"}
from lithify.cli import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write(orjson.dumps(sorted(set(sys.modules) - before)).decode())
"""

STAGES = ("model", "core", "translate", "store", "derive", "export", "ingest", "ui")


def _loaded(*args: str) -> set[str]:
    """The modules ``lithify ARGS…`` imported (stdout discarded, the exit code not checked:
    `--help` and `--version` exit through SystemExit)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        check=True,
        env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"},
    )
    return set(orjson.loads(done.stderr.splitlines()[-1]))


def _stages(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[:2][-1] in STAGES and m.startswith("lithify.")}


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_version_imports_no_stage_and_no_library() -> None:
    loaded = _loaded("--version")
    assert _stages(loaded) == set()
    assert {m for m in loaded if m.startswith("lithify.cli.")} == set()
    assert _top(loaded) & {"typer", "rich", "msgspec", "pydantic", "numpy", "google"} == set()


def test_version_from_the_entry_point_is_typers_answer() -> None:
    """The entry point answers a lone --version itself: the same line the typer app prints."""
    from typer.testing import CliRunner

    from lithify.cli import app

    exe = Path(sys.executable).with_name("lithify")
    direct = subprocess.run([str(exe), "--version"], capture_output=True, check=True)
    assert direct.stdout == CliRunner().invoke(app, ["--version"]).stdout_bytes
    assert direct.stdout.startswith(b"lithify ") and direct.stderr == b""


# What rich's help and errors would bring (markdown_it for typer's markdown mode).
RICH = {"rich", "markdown_it", "pygments"}


def test_help_imports_no_command_module_no_stage_and_no_rich() -> None:
    for args in (["--help"], ["-h"], []):
        loaded = _loaded(*args)
        assert {m for m in loaded if m.startswith("lithify.cli.")} == {
            "lithify.cli.commands",
            "lithify.cli.values",
        }, args
        assert _stages(loaded) == set()
        assert _top(loaded) & {*RICH, "msgspec", "numpy", "pydantic"} == set()


def test_a_commands_help_imports_its_module_and_no_stage() -> None:
    loaded = _loaded("convert", "--help")
    assert "lithify.cli.convert" in loaded and "lithify.cli.export" not in loaded
    assert _stages(loaded) == set()
    assert _top(loaded) & {*RICH, "msgspec", "numpy", "pydantic"} == set()


def test_help_lists_each_command_with_its_own_summary() -> None:
    """The top-level help lists the summaries written out in COMMANDS (so that it imports no
    command module): each is the first paragraph of its command's help, and each group's
    commands are listed whole too."""
    from typer.testing import CliRunner

    from lithify.cli import app
    from lithify.cli.commands import COMMANDS, summary

    group = typer.main.get_command(app)
    for name, (_, _, written) in COMMANDS.items():
        command = group.commands[name]  # type: ignore[attr-defined]
        assert written == summary(command.help), name
        for sub in getattr(command, "commands", {}).values():
            assert sub.get_short_help_str(10) == summary(sub.help)
    top = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100"}).stdout
    listed = " ".join(top.split("\nCommands:\n")[1].split())
    assert listed == " ".join(f"{name} {entry[2]}" for name, entry in COMMANDS.items())
    assert "\nOptions:\n" in top and "╭" not in top  # click's plain sections


def test_convert_imports_only_what_converting_needs(tmp_path: Path) -> None:
    src = CORPUS / "otlp" / "util_genai_openai_v2_chat_tool_call.otlp.json"
    loaded = _loaded("convert", str(src), "-o", str(tmp_path / "facts.jsonl"), "--json")
    assert "lithify.ingest.convert" in loaded and "lithify.translate.otlp" in loaded
    # OTLP/JSON: the protobuf reader's libraries are not needed.
    assert _top(loaded) & {"google", "opentelemetry"} == set()
    assert (tmp_path / "facts.jsonl").read_bytes().startswith(b'{"inference_call_id":')
    # Neither the other commands nor the stages only they use.
    assert {m for m in loaded if m.startswith("lithify.cli.")} == {
        "lithify.cli.commands",
        "lithify.cli.convert",
        "lithify.cli.engine",
        "lithify.cli.exits",
        "lithify.cli.options",
        "lithify.cli.values",
    }
    for stage in ("lithify.store", "lithify.export", "lithify.derive", "lithify.ui"):
        assert {m for m in loaded if m == stage or m.startswith(stage + ".")} == set(), stage
    # --json prints no table: rich is not needed at all; and its text and path values are read
    # without typer's pydantic coercion (cli/values.py).
    assert _top(loaded) & {*RICH, "pydantic"} == set()


def test_convert_of_protobuf_imports_protobuf(tmp_path: Path) -> None:
    from tests.test_otlp import _requests

    pb = tmp_path / "traces.pb"
    pb.write_bytes(_requests()[0])
    loaded = _loaded("convert", str(pb), "-o", str(tmp_path / "facts.jsonl"), "--json")
    assert {"google.protobuf", "opentelemetry.proto"} <= loaded
    assert (tmp_path / "facts.jsonl").read_bytes().startswith(b'{"inference_call_id":')


def test_plain_values_read_as_typer_reads_them(tmp_path: Path) -> None:
    """Text, flag and path values read without pydantic give what typer's own coercion gives,
    its path checks included; other values still go through typer."""
    from lithify.cli.values import plain_values

    seen: dict[str, object] = {}

    def cmd(
        name: str = "x",
        paths: list[Path] | None = None,
        flag: bool = False,
        count: int = 1,
        must: Annotated[Path | None, typer.Option(exists=True, dir_okay=False)] = None,
    ) -> None:
        seen.update(name=name, paths=paths, flag=flag, count=count, must=must)

    def run(command: object, args: list[str]) -> object:
        seen.clear()
        try:
            command.main(args, standalone_mode=False)  # type: ignore[attr-defined]
        except typer.BadParameter as e:
            return e.format_message()
        return dict(seen)

    ok = ["--name", "n", "--paths", "a", "--paths", str(tmp_path), "--flag", "--count", "3"]
    runs = [ok, ["--must", str(tmp_path / "nope")], ["--must", str(tmp_path)], ["--count", "many"]]
    results = []
    for plain in (False, True):
        app = typer.Typer()
        app.command()(cmd)
        command = typer.main.get_command(app)
        if plain:
            plain_values(command)
        results.append([run(command, args) for args in runs])
    assert results[0] == results[1]
    assert results[1][0] == {
        "name": "n", "paths": [Path("a"), tmp_path], "flag": True, "count": 3, "must": None,
    }  # fmt: skip
    assert "does not exist" in str(results[1][1]) and "is a directory" in str(results[1][2])
    assert "valid integer" in str(results[1][3])  # still typer's (pydantic's) own check
