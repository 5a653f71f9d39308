"""The `lithify` command: the face over every stage; flags, progress, summaries, exit codes.

One module per command group, each command registered by name in registry.py (``COMMANDS``),
explicitly, in the order `lithify --help` lists them: convert.py (convert, import), facts.py
(facts, stats), demo.py, serve.py (serve, token), export.py, proxy.py, ui.py; commands.py makes
the click group of them, options.py holds what they share and exits.py what their exit codes
mean. ``app`` is the group, imported on first use; the entry point answers a lone
``--version``, ``--help`` or ``-h`` without it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from lithify import __version__


def main() -> None:  # the console entry point
    if sys.argv[1:] == ["--version"]:
        # The one answer that needs nothing else (the group's own --version prints the same
        # line): without importing click and the group, half of what `lithify --version` cost.
        _write(f"lithify {__version__}\n")
        return
    if sys.argv[1:] in (["--help"], ["-h"]) and _help():
        return
    import atexit

    from lithify.cli.commands import app

    atexit.unregister(_settle)  # one, however often main runs in a process (tests)
    atexit.register(_settle)  # first, so it runs last of the exit handlers
    app()


def _settle() -> None:
    """At exit, before the interpreter tears its modules down: collect what the run left
    behind (so that every finalizer runs, as the teardown would run it), then freeze what is
    still alive. The teardown's own collections then skip the tens of thousands of objects the
    imported modules hold, a tenth of what a short command cost (docs/development.md,
    Start-up)."""
    import gc

    gc.collect()
    gc.freeze()


def _help() -> bool:
    """Print the group's help page as click would (registry.py), without click: importing it
    and making the group were half of what `lithify --help` cost. False, and nothing printed,
    when click would do something else: run as `python -m` (click then names the program
    otherwise) or asked for shell completion."""
    if getattr(sys.modules.get("__main__"), "__package__", None) not in (None, ""):
        return False
    prog = os.path.basename(sys.argv[0])
    if os.environ.get(f"_{prog}_COMPLETE".replace("-", "_").upper()):
        return False
    from lithify.cli.registry import help_page

    # click's width: the terminal's columns, at most 80, less 2, at least 50. The columns are
    # read as shutil.get_terminal_size reads them (COLUMNS, else stdout's terminal, else 80):
    # importing shutil would cost more than the page.
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
        except (AttributeError, ValueError, OSError):
            columns = 80
    _write(help_page(prog, max(min(columns, 80) - 2, 50)))
    return True


def _write(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # What click does when the reader has gone (`lithify --help | true`): exit 1, quietly,
        # and with stdout on /dev/null, so that the interpreter's last flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


def __getattr__(name: str) -> Any:
    if name == "app":
        from lithify.cli.commands import app

        return app
    raise AttributeError(f"module 'lithify.cli' has no attribute {name!r}")
