"""A command imports only what it uses (docs/development.md, Start-up): which modules a real
`lithify` run loaded, read from ``sys.modules`` in a fresh interpreter. No timings here: those
are bench/startup.py's."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import click
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    assert _top(loaded) & {"click", "rich", "msgspec", "pydantic", "numpy", "google"} == set()


def test_version_from_the_entry_point_is_the_groups_answer() -> None:
    """The entry point answers a lone --version itself: the same line the click group prints."""
    from click.testing import CliRunner

    from lithify.cli import app

    exe = Path(sys.executable).with_name("lithify")
    direct = subprocess.run([str(exe), "--version"], capture_output=True, check=True)
    assert direct.stdout == CliRunner().invoke(app, ["--version"]).stdout_bytes
    assert direct.stdout.startswith(b"lithify ") and direct.stderr == b""


# What rich's help and errors would bring.
RICH = {"rich", "markdown_it", "pygments"}


def test_help_imports_no_click_no_command_module_and_no_stage() -> None:
    """A lone --help or -h is answered by the entry point from registry.py, without click."""
    for args in (["--help"], ["-h"]):
        loaded = _loaded(*args)
        assert {m for m in loaded if m.startswith("lithify.cli.")} == {"lithify.cli.registry"}
        assert _stages(loaded) == set()
        assert _top(loaded) & {"click", *RICH, "msgspec", "numpy", "pydantic"} == set()


def test_help_without_arguments_imports_no_command_module_no_stage_and_no_rich() -> None:
    """`lithify` alone is click's (its help, exit code 2), still without a command module."""
    loaded = _loaded()
    assert {m for m in loaded if m.startswith("lithify.cli.")} == {
        "lithify.cli.commands",
        "lithify.cli.exits",
        "lithify.cli.options",
        "lithify.cli.registry",
    }
    assert _stages(loaded) == set()
    assert _top(loaded) & {*RICH, "typer", "msgspec", "numpy", "pydantic"} == set()


def test_a_commands_help_imports_its_module_and_no_stage() -> None:
    loaded = _loaded("convert", "--help")
    assert "lithify.cli.convert" in loaded and "lithify.cli.export" not in loaded
    assert _stages(loaded) == set()
    assert _top(loaded) & {*RICH, "typer", "msgspec", "numpy", "pydantic"} == set()


def test_help_lists_each_command_with_its_own_summary() -> None:
    """The top-level help lists the summaries written out in COMMANDS (so that it imports no
    command module): each is the first paragraph of its command's help, and each group's
    commands are listed whole too."""
    from click.testing import CliRunner

    from lithify.cli import app
    from lithify.cli.options import summary
    from lithify.cli.registry import COMMANDS

    for name, (_, _, written) in COMMANDS.items():
        command = app.get_command(click.Context(app), name)
        assert command is not None and written == summary(command.help), name
        subs = getattr(command, "commands", {})
        if subs:  # a group lists its commands' whole summaries too, not cut at the width
            page = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "60"}).stdout
            listed = " ".join(page.split("\nCommands:\n")[1].split())
            assert listed == " ".join(f"{n} {summary(c.help)}" for n, c in subs.items())
    top = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100"}).stdout
    listed = " ".join(top.split("\nCommands:\n")[1].split())
    assert listed == " ".join(f"{name} {entry[2]}" for name, entry in COMMANDS.items())
    assert "\nOptions:\n" in top and "╭" not in top  # click's plain sections


# The entry point, and the click group it hands the rest to, each run as the installed script
# runs them: the program is `lithify` either way.
_ENTRY = "import sys\nsys.argv[0] = 'lithify'\nfrom lithify.cli import main\nmain()\n"
_CLICK = "import sys\nsys.argv[0] = 'lithify'\nfrom lithify.cli.commands import app\napp()\n"


def _run(code: str, *args: str, **env: str) -> tuple[int, bytes, bytes]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", **env},
    )
    return done.returncode, done.stdout, done.stderr


def _same_help(columns: str | None, flag: str = "--help") -> bytes:
    """What the entry point printed for ``flag`` (COLUMNS ``columns``, stdout a pipe), checked
    to be what click prints, exit code and stderr included."""
    env = {} if columns is None else {"COLUMNS": columns}
    fast = _run(_ENTRY, flag, **env)
    assert fast == _run(_CLICK, flag, **env), (columns, flag)
    assert fast[0] == 0 and fast[1].startswith(b"Usage: lithify [OPTIONS] COMMAND")
    return fast[1]


_WIDTHS = ["40", "50", "51", "52", "60", "79", "80", "81", "100", "200", "0", "-3", "x", None]


@pytest.mark.parametrize(
    ("columns", "flag"), [(c, ("--help", "-h")[i % 2]) for i, c in enumerate(_WIDTHS)]
)
def test_help_from_the_entry_point_is_clicks_page(columns: str | None, flag: str) -> None:
    """The page registry.py writes is the one the click group prints, at every width click
    chooses from COLUMNS (the terminal's columns, at most 80, less 2, at least 50; 80 columns
    when COLUMNS is not a positive number and stdout no terminal)."""
    _same_help(columns, flag)


@settings(max_examples=5, deadline=None)
@given(st.integers(min_value=-2, max_value=400))
def test_help_from_the_entry_point_is_clicks_page_at_any_width(columns: int) -> None:
    _same_help(str(columns))


def _clicks_page(prog: str, width: int) -> str:
    group = _group()
    ctx = group.make_context(prog, ["--help"], resilient_parsing=True, terminal_width=width)
    return ctx.get_help() + "\n"  # click's echo adds the newline


def _group() -> click.Group:
    from lithify.cli import app

    return app  # type: ignore[no-any-return]


@given(
    st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), max_size=80),
    st.integers(min_value=1, max_value=300),
)
def test_help_page_is_clicks_for_any_program_name_and_width(prog: str, width: int) -> None:
    """Wrapping as click's formatter wraps, whatever the program is called (a long name moves
    the usage's arguments to a line of their own) and however wide the page."""
    from lithify.cli.registry import help_page

    assert help_page(prog, width) == _clicks_page(prog, width)


@pytest.mark.parametrize("columns", [64, 120])
def test_help_from_the_entry_point_at_the_terminals_width(columns: int) -> None:
    """Without COLUMNS, click reads the width of the terminal stdout is: so does the entry
    point."""

    def on_terminal(code: str) -> bytes:
        main, child = pty.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        proc = subprocess.Popen(
            [sys.executable, "-c", code, "--help"], stdout=child, env={"PATH": "/usr/bin:/bin"}
        )
        os.close(child)
        out = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO: the child is gone and the terminal closed
                break
            if not chunk:
                break
            out += chunk
        os.close(main)
        assert proc.wait() == 0
        return out

    from lithify.cli.registry import help_page

    page = on_terminal(_ENTRY)
    assert page == on_terminal(_CLICK)
    # The terminal's width, not the 80 columns of no terminal; the terminal writes \r\n.
    assert page.decode() == help_page("lithify", min(columns, 80) - 2).replace("\n", "\r\n")


def test_help_from_the_entry_point_to_a_closed_pipe_is_clicks_answer() -> None:
    """`lithify --help | true`: click exits 1, quietly; so does the entry point (and its
    --version)."""

    def closed(code: str, flag: str) -> tuple[int, bytes]:
        read, write = os.pipe()
        os.close(read)
        done = subprocess.run(
            [sys.executable, "-c", code, flag],
            stdout=write,
            stderr=subprocess.PIPE,
            check=False,
            env={"PATH": "/usr/bin:/bin"},  # stdout buffered: the exit's flush fails too
        )
        os.close(write)
        return done.returncode, done.stderr

    for flag in ("--help", "--version"):
        assert closed(_ENTRY, flag) == closed(_CLICK, flag) == (1, b""), flag


def test_help_from_the_installed_script_is_clicks_page() -> None:
    """The console script (its own `__main__`, the program named by its path) too."""
    exe = Path(sys.executable).with_name("lithify")
    done = subprocess.run(
        [str(exe), "-h"],
        capture_output=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "70"},
    )
    assert (done.returncode, done.stdout, done.stderr) == _run(_CLICK, "-h", COLUMNS="70")


def test_help_left_to_click_when_it_would_do_otherwise() -> None:
    """Asked for shell completion, `lithify --help` is click's business."""
    env = {"_LITHIFY_COMPLETE": "bash_source"}
    fast = _run(_ENTRY, "--help", **env)
    assert fast == _run(_CLICK, "--help", **env) and not fast[1].startswith(b"Usage:")


def test_the_help_texts_live_in_the_registry() -> None:
    """commands.py makes the group from registry.py's table and texts, not copies of them."""
    from lithify.cli import commands, registry

    assert commands.COMMANDS is registry.COMMANDS
    group = _group()
    assert group.help == registry.HELP
    (version,) = (p for p in group.params if p.name == "version")
    assert version.help == registry.VERSION_HELP


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
        "lithify.cli.registry",
    }
    for stage in ("lithify.store", "lithify.export", "lithify.derive", "lithify.ui"):
        assert {m for m in loaded if m == stage or m.startswith(stage + ".")} == set(), stage
    # --json prints no table: rich is not needed at all.
    assert _top(loaded) & {*RICH, "typer", "pydantic"} == set()
    # A small conversion starts no worker: neither sockets nor pickles.
    assert _top(loaded) & {"multiprocessing", "socket", "pickle"} == set()


def test_convert_compiles_no_pattern_it_does_not_use(tmp_path: Path) -> None:
    """The Gemini translator's JSON-path pattern (about 8 ms to compile: ranges up to U+10FFFF)
    waits for a stream of partial arguments; converting OTLP/JSON imports the module, not it."""
    src = CORPUS / "otlp" / "util_genai_openai_v2_chat_tool_call.otlp.json"
    probe = (
        "import sys\nsys.argv[0] = 'lithify'\nfrom lithify.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "gemini = sys.modules['lithify.translate.gemini']\n"
        "sys.stderr.write(str(gemini._path_step.cache_info().currsize))\n"
    )
    args = ["convert", str(src), "-o", str(tmp_path / "facts.jsonl"), "--json"]
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, check=True, env={}
    )
    assert done.stderr.splitlines()[-1] == b"0"  # tests/test_gemini.py streams paths through it


def test_convert_of_protobuf_imports_protobuf(tmp_path: Path) -> None:
    from tests.test_otlp import _requests

    pb = tmp_path / "traces.pb"
    pb.write_bytes(_requests()[0])
    loaded = _loaded("convert", str(pb), "-o", str(tmp_path / "facts.jsonl"), "--json")
    assert {"google.protobuf", "opentelemetry.proto"} <= loaded
    assert (tmp_path / "facts.jsonl").read_bytes().startswith(b'{"inference_call_id":')


def test_exit_finalizes_what_the_run_left_then_skips_the_rest(tmp_path: Path) -> None:
    """At exit the entry point collects what the run left behind, so a finalizer in a cycle
    still runs (a writer's last flush, say), and then freezes what is alive, so that the
    interpreter's teardown does not walk every module's objects again (cli/__init__._settle)."""
    src = CORPUS / "otlp" / "util_genai_openai_v2_chat_tool_call.otlp.json"
    probe = (
        "import atexit, gc, sys\n"
        "out = sys.argv[1]\n"
        "def frozen():\n"  # registered before main's handler: runs after it
        "    open(out + '.frozen', 'w').write(str(gc.get_freeze_count()))\n"
        "atexit.register(frozen)\n"
        "class Cycle:\n"
        "    def __init__(self):\n"
        "        self.me = self\n"
        "    def __del__(self):\n"
        "        open(out + '.finalized', 'w').write('yes')\n"
        "gc.disable()\n"  # no collection before exit but the entry point's own
        "Cycle()\n"
        "sys.argv = ['lithify', *sys.argv[2:]]\n"
        "from lithify.cli import main\n"
        "main()\n"
    )
    out = tmp_path / "probe"
    args = ["convert", str(src), "-o", str(tmp_path / "facts.jsonl")]
    done = subprocess.run(
        [sys.executable, "-c", probe, str(out), *args], capture_output=True, check=False, env={}
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "probe.finalized").read_text() == "yes"
    assert int((tmp_path / "probe.frozen").read_text()) > 10_000
    assert (tmp_path / "facts.jsonl").read_bytes().startswith(b'{"inference_call_id":')
