"""The `lithify` command: the face over every stage; flags, progress, summaries, exit codes.

One module per command group, each command registered in commands.py (``COMMANDS``), explicitly,
in the order `lithify --help` lists them: convert.py (convert, import), facts.py (facts, stats),
demo.py, serve.py (serve, token), export.py, proxy.py, ui.py; options.py holds what they share
and exits.py what their exit codes mean. ``app`` is the typer application, made on first use.
"""

from __future__ import annotations

import sys
from typing import Any

from lithify import __version__


def main() -> None:  # the console entry point
    if sys.argv[1:] == ["--version"]:
        # The one answer that needs nothing else (typer's own --version prints the same line):
        # without importing typer, a third of what `lithify --version` cost.
        sys.stdout.write(f"lithify {__version__}\n")
        return
    from lithify.cli.commands import app

    app()


def __getattr__(name: str) -> Any:
    if name == "app":
        from lithify.cli.commands import app

        return app
    raise AttributeError(f"module 'lithify.cli' has no attribute {name!r}")
