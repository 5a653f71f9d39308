"""The `lithify` command: the face over every stage; flags, progress, summaries, exit codes.

One module per command group, each command registered below, explicitly, in the order
`lithify --help` lists them: convert.py (convert, import), facts.py (facts, stats), demo.py,
serve.py (serve, token), export.py, proxy.py, ui.py; options.py holds what they share and exits.py
what their exit codes mean.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lithify import __version__
from lithify.cli import convert, demo, export, facts, proxy, serve, ui

app = typer.Typer(
    name="lithify",
    help="Turn LLM agent telemetry and provider traffic into canonical facts and training data.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "LITHIFY"},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lithify {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            # Not LITHIFY_VERSION: a deployment may well set that, and every command would exit.
            allow_from_autoenv=False,
            help="Show the version.",
        ),
    ] = False,
) -> None:
    """lithify: capture model calls, keep them as canonical facts, export training rows."""


app.command("convert")(convert.convert_cmd)
app.command("import")(convert.import_cmd)
app.command("facts")(facts.facts_cmd)
app.command("stats")(facts.stats_cmd)
app.command("demo")(demo.demo_cmd)
app.command("serve")(serve.serve_cmd)
app.add_typer(serve.token_app, name="token")
app.command("export")(export.export_cmd)
app.command("proxy")(proxy.proxy_cmd)
app.command("ui")(ui.ui_cmd)


def main() -> None:  # the console entry point
    app()
