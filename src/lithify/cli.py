"""The `lithify` command: thin — parse flags, call the stages, show progress and a summary."""

from __future__ import annotations

import sys
from enum import IntEnum
from importlib.resources import files
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from lithify import __version__
from lithify.ingest.convert import StrictError, Summary, convert, open_output
from lithify.model import DEGRADATION_REASONS, NO_FACT_REASONS
from lithify.translate import FORMATS


class Exit(IntEnum):
    OK = 0
    UNREADABLE = 1  # an input could not be read at all
    USAGE = 2  # typer/click's own code for bad usage
    STRICT = 3  # a corrupt unit under --strict


app = typer.Typer(
    name="lithify",
    help="Turn LLM agent telemetry and provider traffic into canonical facts and training data.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "LITHIFY"},
)
err = Console(stderr=True, soft_wrap=True)  # paths and locations stay on one line


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lithify {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """lithify: capture model calls, keep them as canonical facts, export training rows."""


def _summary_table(summary: Summary, output: str) -> None:
    t = Table(title="lithify convert", show_header=True, header_style="bold")
    t.add_column("what")
    t.add_column("count", justify="right")
    t.add_column("meaning", style="dim")
    t.add_row("inputs read", str(summary.inputs), "")
    t.add_row("units seen", str(summary.units), "documents, lines, requests, streams")
    t.add_row("[green]facts written[/]", str(summary.facts), output)
    for reason, n in sorted(summary.skipped.items()):
        t.add_row(f"no fact: {reason}", str(n), NO_FACT_REASONS.get(reason, ""))
    for reason, n in sorted(summary.degradations.items()):
        t.add_row(f"degraded: {reason}", str(n), DEGRADATION_REASONS.get(reason, ""))
    err.print(t)
    for path, reasons in summary.no_fact_inputs.items():
        why = ", ".join(f"{r} ×{n}" for r, n in reasons.items())
        err.print(f"[yellow]no fact from[/] {path}: {why}")
    for line in summary.corrupt:
        err.print(f"[red]corrupt[/] {line}")
    for line in summary.unreadable:
        err.print(f"[red]unreadable[/] {line}")


def _progress_factory(progress: Progress | None):  # type: ignore[no-untyped-def]
    if progress is None:
        return None

    def start(path: Path):  # type: ignore[no-untyped-def]
        try:
            total = path.stat().st_size if path.suffix != ".gz" else None
        except OSError:
            total = None
        task = progress.add_task(path.name, total=total)
        return lambda n: progress.advance(task, n)

    return start


@app.command("convert")
def convert_cmd(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Files or folders: OTLP (.json, .jsonl, .pb), provider bodies, SSE."),
    ] = None,
    source: Annotated[
        str,
        typer.Option(
            "--from",
            "-f",
            help=f"Source format: {', '.join(FORMATS)}. 'auto' recognises each document by shape.",
            envvar="LITHIFY_FROM",
        ),
    ] = "auto",
    output: Annotated[
        str,
        typer.Option(
            "--output", "-o", help="Facts JSONL file ('-' for stdout).", envvar="LITHIFY_OUTPUT"
        ),
    ] = "-",
    request: Annotated[
        Path | None, typer.Option(help="A provider request body, paired with --response.")
    ] = None,
    response: Annotated[
        Path | None, typer.Option(help="A provider response body (JSON, or SSE for a stream).")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Stop at the first corrupt line or document.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON (for scripts).")
    ] = False,
    progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress", help="Progress bars (default: on a terminal)."),
    ] = None,
) -> None:
    """Convert telemetry and provider payloads into canonical facts, one JSON object per line.

    Reads OTLP traces and logs (protobuf, OTLP/JSON, the Collector's JSONL), flat attribute maps,
    and provider request/response bodies; writes facts in input order. Units that give no fact
    (non-GenAI spans, error bodies, corrupt lines) are counted in the summary with their reason.
    """
    if source not in FORMATS:
        err.print(f"[red]unknown --from {source!r}[/]; choose one of: {', '.join(FORMATS)}")
        raise typer.Exit(Exit.USAGE)
    if not paths and request is None and response is None:
        err.print("[red]nothing to convert:[/] give PATH… or --request/--response")
        raise typer.Exit(Exit.USAGE)
    show = sys.stderr.isatty() if progress is None else progress
    bars = (
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
        )
        if show
        else None
    )
    try:
        with open_output(output) as out:
            if bars is not None:
                with bars:
                    summary = convert(
                        paths or [], out, fmt=source, strict=strict, request=request,
                        response=response, progress=_progress_factory(bars),
                    )  # fmt: skip
            else:
                summary = convert(
                    paths or [], out, fmt=source, strict=strict, request=request, response=response
                )
    except StrictError as e:
        err.print(f"[red]corrupt input (--strict):[/] {e.skip.detail}")
        raise typer.Exit(Exit.STRICT) from None
    to_stdout = output == "-"
    if as_json:
        data = orjson.dumps(summary.to_json(), option=orjson.OPT_INDENT_2).decode()
        (err.print if to_stdout else typer.echo)(data)
    else:
        _summary_table(summary, "stdout" if to_stdout else output)
    if summary.unreadable:
        raise typer.Exit(Exit.UNREADABLE)


def example_files() -> list[Path]:
    """The example telemetry shipped with the package (recorded from real instrumentations)."""
    root = files("lithify") / "examples"
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith((".json", ".pb")))


@app.command("demo")
def demo_cmd(
    out_dir: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for the demo's output.")
    ] = Path("lithify-demo"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """The main job on the shipped example telemetry: convert it into canonical facts."""
    examples = example_files()
    target = out_dir / "facts.jsonl"
    with open_output(str(target)) as out:
        summary = convert(examples, out)
    if as_json:
        typer.echo(orjson.dumps({"facts_file": str(target), **summary.to_json()}).decode())
        return
    err.print(f"Converted {len(examples)} example files recorded from real instrumentations.")
    _summary_table(summary, str(target))
    err.print(f"Facts: [bold]{target}[/] ({summary.facts} facts). Inspect one with:")
    err.print(f"  head -n 1 {target} | python3 -m json.tool")


def main() -> None:
    app()
