"""`lithify convert` and `lithify import`: inputs to facts, into a fact file or the store."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from lithify.cli.engine import (
    RayMissing,
    check_engine,
    engine_option,
    ray_address_option,
    ray_session,
)
from lithify.cli.exits import Exit
from lithify.cli.options import (
    argument,
    err,
    json_flag,
    leave,
    opened_store,
    option,
    stderr,
    store_option,
)

if TYPE_CHECKING:
    from rich.progress import Progress

    from lithify.ingest.convert import Sink, StrictError, Summary

# The stages (and rich) are imported where they are used: `lithify convert` must not pay for what
# `import` or the Ray engine needs, and `lithify --help` for neither.

# lithify.translate.FORMATS, written out so that the help does not import every translator
# (tests/test_cli.py checks the two are the same).
FORMATS = (
    "auto", "otlp", "otlp-traces", "otlp-logs", "attributes", "exchange", "openai-responses",
    "anthropic", "gemini", "openai-chat", "feedback",
)  # fmt: skip


def _summary_rows(summary: Summary, output: str) -> list[tuple[str, str, str]]:
    """The summary table's rows: (what, count, meaning)."""
    from lithify.model import DEGRADATION_REASONS, NO_FACT_REASONS

    rows = [
        ("inputs read", str(summary.inputs), ""),
        ("units seen", str(summary.units), "documents, lines, requests, streams"),
        ("facts written", str(summary.facts), output),
    ]
    if summary.feedback:
        rows.append(("feedback", str(summary.feedback), "feedback facts written beside the facts"))
    for reason, n in sorted(summary.skipped.items()):
        rows.append((f"no fact: {reason}", str(n), NO_FACT_REASONS.get(reason, "")))
    for reason, n in sorted(summary.degradations.items()):
        rows.append((f"degraded: {reason}", str(n), DEGRADATION_REASONS.get(reason, "")))
    return rows


def _summary_notes(summary: Summary) -> list[tuple[str, str, str]]:
    """What follows the table: (style, label, text) per input without facts or bad line."""
    notes = []
    for path, reasons in summary.no_fact_inputs.items():
        why = ", ".join(f"{r} ×{n}" for r, n in reasons.items())
        notes.append(("yellow", "no fact from", f"{path}: {why}"))
    notes += [("red", "corrupt", line) for line in summary.corrupt]
    notes += [("red", "unreadable", line) for line in summary.unreadable]
    return notes


def _summary_table(summary: Summary, output: str) -> None:
    """The summary on stderr: rich's table on a terminal; elsewhere (a log, a pipe) the same
    rows as aligned plain text, which is what rich would print there less its box, and which
    spares a short `convert` rich's import (about a sixth of its start-up)."""
    rows, notes = _summary_rows(summary, output), _summary_notes(summary)
    if not sys.stderr.isatty():
        widths = [max(len(r[i]) for r in [("what", "count", ""), *rows]) for i in range(2)]
        lines = ["lithify convert", f"{'what':<{widths[0]}}  {'count':>{widths[1]}}  meaning"]
        for what, count, meaning in rows:
            lines.append(f"{what:<{widths[0]}}  {count:>{widths[1]}}  {meaning}".rstrip())
        lines += [f"{label} {text}" for _, label, text in notes]
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
        return
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="lithify convert", show_header=True, header_style="bold")
    t.add_column("what")
    t.add_column("count", justify="right")
    t.add_column("meaning", style="dim")
    for what, count, meaning in rows:
        label = f"[green]{what}[/]" if what == "facts written" else escape(what)
        t.add_row(label, count, escape(meaning))
    err.print(t)
    for style, label, text in notes:
        err.print(f"[{style}]{label}[/] {escape(text)}")


def _progress_factory(progress: Progress | None):  # type: ignore[no-untyped-def]
    if progress is None:
        return None

    def start(path: Any):  # type: ignore[no-untyped-def]  # a Path or a remote.RemoteFile
        try:
            size = path.stat().st_size if isinstance(path, Path) else path.size
        except OSError:
            size = None
        task = progress.add_task(path.name, total=size if path.suffix != ".gz" else None)
        return lambda n: progress.advance(task, n)

    return start


source_option = option(
    "--from",
    "-f",
    "source",
    default="auto",
    help=f"Source format: {', '.join(FORMATS)}. 'auto' recognises each document by shape.",
    envvar="LITHIFY_FROM",
)
# Text, not Path: a Path would make s3://bucket/key s3:/bucket/key (files.expand reads each
# as a URL or a local path).
paths_argument = argument(
    "paths",
    many=True,
    help="Files, folders or URLs (s3://bucket/prefix/, any pyarrow.fs or fsspec one): "
    "OTLP (.json, .jsonl, .pb), provider bodies, SSE.",
)
_PATH = click.Path(path_type=Path)
request_option = option(
    "--request", type=_PATH, help="A provider request body, paired with --response."
)
response_option = option(
    "--response", type=_PATH, help="A provider response body (JSON, or SSE for a stream)."
)
strict_option = option("--strict", is_flag=True, help="Stop at the first corrupt line or document.")
json_option = json_flag("Print the summary as JSON (for scripts).")
progress_option = option(
    "--progress/--no-progress", default=None, help="Progress bars (default: on a terminal)."
)
# Text: `_whole` says what a bad value is, in the words of the other checks.
workers_option = option(
    "--workers",
    metavar="N",
    envvar="LITHIFY_CONVERT_WORKERS",
    help="Worker processes converting beside this one (0: this one alone). "
    "Default: one per further core, at most 3, for 32 MB of input or more.",
    show_default=False,
)
split_option = option(
    "--split-bytes",
    hidden=True,
    help="JSON lines inputs larger than this are several tasks (--engine ray) or jobs (--workers).",
)


def _check_urls(paths: list[str] | None) -> None:
    """Exit ``Exit.USAGE``, naming what to install, for a URL that no installed filesystem
    reads: before anything is read or written. (One that cannot be reached is unreadable, as
    a missing file is.)"""
    from lithify.ingest.remote import NoFilesystem, filesystem, is_url

    for path in paths or []:
        if is_url(path):
            try:
                filesystem(path)
            except NoFilesystem as e:
                _no_filesystem(e)
            except OSError:
                pass


def _check_source(source: str) -> None:
    """Exit ``Exit.USAGE`` for a ``--from`` that names no format."""
    if source not in FORMATS:
        err.print(f"[red]unknown --from {source!r}[/]; choose one of: {', '.join(FORMATS)}")
        leave(Exit.USAGE)


def _corrupt(e: StrictError) -> NoReturn:
    err.print(f"[red]corrupt input (--strict):[/] {e.skip.detail}")
    leave(Exit.STRICT)


def _no_filesystem(e: Exception) -> NoReturn:
    from rich.markup import escape

    err.print(f"[red]{escape(str(e))}[/]")
    leave(Exit.USAGE)


def _pipeline(
    paths: list[str] | None,
    sink: Sink,
    *,
    source: str,
    strict: bool,
    request: Path | None,
    response: Path | None,
    progress: bool | None,
    parallel: Callable[..., Summary] | None = None,
    failed: tuple[str, str] = ("convert", ""),
) -> Summary:
    """Check the inputs, run the pipeline into ``sink`` with progress bars on a terminal: by
    ``parallel`` (``ingest.parallel``'s, taking the paths and the progress) unless a
    request/response pair is read. A worker process that dies fails the command (``failed``:
    its name, and what became of its output), said in one line (exit FAILED)."""
    from lithify.core.workers import WorkerDied
    from lithify.ingest.convert import StrictError, run

    _check_source(source)
    if not paths and request is None and response is None:
        err.print("[red]nothing to read:[/] give PATH… or --request/--response")
        leave(Exit.USAGE)
    _check_urls(paths)
    options = {"fmt": source, "strict": strict, "request": request, "response": response}

    def go(bars: Any = None) -> Summary:
        if parallel is None or request is not None or response is not None:
            return run(paths or [], sink, progress=bars, **options)
        return parallel(paths or [], fmt=source, strict=strict, progress=bars)

    show = sys.stderr.isatty() if progress is None else progress
    try:
        if not show:
            return go()
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=stderr(),
            transient=True,
        )
        with bars:
            return go(_progress_factory(bars))
    except StrictError as e:
        _corrupt(e)
    except WorkerDied as e:
        err.print(f"[red]{failed[0]} failed:[/] {e}; {failed[1]}")
        leave(Exit.FAILED)


@click.command("convert")
@paths_argument
@source_option
@option(
    "--output",
    "-o",
    default="-",
    help="Facts JSONL file ('-' for stdout).",
    envvar="LITHIFY_OUTPUT",
)
@request_option
@response_option
@strict_option
@json_option
@progress_option
@engine_option
@ray_address_option
@split_option
@workers_option
def convert_cmd(
    paths: list[str] | None,
    source: str,
    output: str,
    request: Path | None,
    response: Path | None,
    strict: bool,
    as_json: bool,
    progress: bool | None,
    engine: str,
    ray_address: str | None,
    split_bytes: str | None,
    workers: str | None,
) -> None:
    """Convert telemetry and provider payloads into canonical facts, one JSON object per line.

    Reads OTLP traces and logs (protobuf, OTLP/JSON, the Collector's JSONL), flat attribute maps, and provider request/response bodies; writes facts in input order. Units that give no fact (non-GenAI spans, error bodies, corrupt lines) are counted in the summary with their reason.
    """
    import orjson

    from lithify.ingest.convert import JsonlSink, open_output
    from lithify.ingest.remote import is_url

    if is_url(output):
        err.print("[red]-o takes a local file or folder:[/] writing to a URL is not done yet")
        leave(Exit.USAGE)
    split = _whole(split_bytes, "--split-bytes", 1)
    count = _whole(workers, "--workers", 0)
    if check_engine(engine):
        summary = _convert_ray(paths, output, source, strict, ray_address, request, response, split)
    else:
        # Workers' facts wait beside a fact file (its file system has room for them).
        target = Path(output)
        regular = output != "-" and (target.is_file() or not target.exists())
        scratch = str(target.resolve().parent) if regular else None
        with open_output(output) as out:
            from lithify.ingest.parallel import convert_parallel

            parallel = functools.partial(
                convert_parallel, out=out, workers=count, scratch=scratch, job_bytes=split
            )
            after = "nothing was written" if output != "-" else "the facts on stdout stop short"
            summary = _pipeline(
                paths, JsonlSink(out), source=source, strict=strict, request=request,
                response=response, progress=progress, parallel=parallel,
                failed=("convert", after),
            )  # fmt: skip
    to_stdout = output == "-"
    if as_json:
        data = orjson.dumps(summary.to_json(), option=orjson.OPT_INDENT_2).decode()
        (err.print if to_stdout else click.echo)(data)
    else:
        _summary_table(summary, "stdout" if to_stdout else output)
    if summary.unreadable:
        leave(Exit.UNREADABLE)


@click.command("import")
@paths_argument
@store_option
@source_option
@request_option
@response_option
@strict_option
@json_option
@progress_option
@workers_option
@split_option
def import_cmd(
    paths: list[str] | None,
    store: str | None,
    source: str,
    request: Path | None,
    response: Path | None,
    strict: bool,
    as_json: bool,
    progress: bool | None,
    workers: str | None,
    split_bytes: str | None,
) -> None:
    """Import whatever `lithify convert` reads (and feedback documents), or what it writes (fact files, plain or .gz), into the fact store.

    Idempotent: a fact already stored (same identity, or same provider response id) is counted as a duplicate and never changed, so importing a file twice stores nothing new. Another capture of a stored call with different content (a span's log event, the proxy's view of a response) is kept apart, as a variant; a call that shares an id with a stored call it contradicts is stored as a call of its own and counted as a collision.
    """
    import orjson

    from lithify.ingest.importer import StoreSink
    from lithify.ingest.parallel import import_parallel

    count = _whole(workers, "--workers", 0)
    split = _whole(split_bytes, "--split-bytes", 1)
    with opened_store(store) as opened:
        sink = StoreSink(opened)
        parallel = functools.partial(import_parallel, sink=sink, workers=count, job_bytes=split)
        summary = _pipeline(
            paths, sink, source=source, strict=strict, request=request, response=response,
            progress=progress, parallel=parallel,
            failed=("import", "what was stored before stays stored: import again for the rest"),
        )  # fmt: skip
        url = opened.url
    report = {"store": url, **summary.to_json(), **sink.counts()}
    if as_json:
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    else:
        _summary_table(summary, url)
        err.print(
            f"stored [green]{sink.stored}[/] new facts, {sink.duplicates} already stored"
            + (f", {sink.variants} other captures of stored calls" if sink.variants else "")
            + (
                f", {sink.collisions} calls sharing an id with another call (id_collision)"
                if sink.collisions
                else ""
            )
            + (
                f"; feedback: {sink.feedback_stored} new, {sink.feedback_duplicates} already stored"
                if summary.feedback
                else ""
            )
        )
        if summary.facts and not sink.stored and not sink.variants:
            err.print("nothing new: every fact was already in the store")
    if summary.unreadable:
        leave(Exit.UNREADABLE)


def _whole(text: str | None, flag: str, least: int) -> int | None:
    """An option's whole number, at least ``least``; exit ``Exit.USAGE`` for anything else."""
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) < least:
        err.print(f"[red]{flag} takes a whole number, at least {least}[/]")
        leave(Exit.USAGE)
    return int(text)


def _convert_ray(
    paths: list[str] | None,
    output: str,
    source: str,
    strict: bool,
    address: str | None,
    request: Path | None,
    response: Path | None,
    split_bytes: int | None,
) -> Summary:
    """``convert --engine ray``: a task per input file (or per range of a large JSON lines
    one), fact files in the folder ``output``."""
    from rich.markup import escape

    from lithify.ingest.convert import StrictError
    from lithify.ingest.distributed import SPLIT_BYTES, convert_ray
    from lithify.ingest.remote import NoFilesystem

    if output == "-" or request is not None or response is not None or not paths:
        err.print("[red]--engine ray converts PATH… into a folder: give -o DIR[/]")
        leave(Exit.USAGE)
    _check_source(source)
    split = SPLIT_BYTES if split_bytes is None else split_bytes
    _check_urls(paths)
    try:
        with ray_session(address):
            return convert_ray(paths, output, fmt=source, strict=strict, split_bytes=split)
    except NoFilesystem as e:
        _no_filesystem(e)
    except RayMissing as e:
        err.print(f"[red]{escape(str(e))}[/]")
        leave(Exit.USAGE)
    except StrictError as e:
        _corrupt(e)
