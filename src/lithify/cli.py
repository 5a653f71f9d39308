"""The `lithify` command: thin — parse flags, call the stages, show progress and a summary."""

from __future__ import annotations

import sys
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
from lithify.cli_options import StoreOpt, err, json_flag, json_text, opened_store
from lithify.core.factfile import encode_line
from lithify.core.identity import part_count
from lithify.exits import Exit
from lithify.ingest.convert import JsonlSink, Sink, StrictError, Summary, open_output, run
from lithify.ingest.importer import StoreSink
from lithify.model import (
    DEGRADATION_REASONS,
    NO_FACT_REASONS,
    InferenceCall,
    TextPart,
    ToolCallPart,
    encode,
    to_builtins,
)
from lithify.store import FactFilter, StoredCapture, StoreError
from lithify.translate import FORMATS

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


def _summary_table(summary: Summary, output: str) -> None:
    t = Table(title="lithify convert", show_header=True, header_style="bold")
    t.add_column("what")
    t.add_column("count", justify="right")
    t.add_column("meaning", style="dim")
    t.add_row("inputs read", str(summary.inputs), "")
    t.add_row("units seen", str(summary.units), "documents, lines, requests, streams")
    t.add_row("[green]facts written[/]", str(summary.facts), output)
    if summary.feedback:
        t.add_row("feedback read", str(summary.feedback), "not written: `lithify import` stores it")
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


SourceOpt = Annotated[
    str,
    typer.Option(
        "--from",
        "-f",
        help=f"Source format: {', '.join(FORMATS)}. 'auto' recognises each document by shape.",
        envvar="LITHIFY_FROM",
    ),
]
PathsArg = Annotated[
    list[Path] | None,
    typer.Argument(help="Files or folders: OTLP (.json, .jsonl, .pb), provider bodies, SSE."),
]
RequestOpt = Annotated[
    Path | None, typer.Option(help="A provider request body, paired with --response.")
]
ResponseOpt = Annotated[
    Path | None, typer.Option(help="A provider response body (JSON, or SSE for a stream).")
]
StrictOpt = Annotated[
    bool, typer.Option("--strict", help="Stop at the first corrupt line or document.")
]
JsonOpt = Annotated[bool, json_flag("Print the summary as JSON (for scripts).")]
ProgressOpt = Annotated[
    bool | None,
    typer.Option("--progress/--no-progress", help="Progress bars (default: on a terminal)."),
]


def _pipeline(
    paths: list[Path] | None,
    sink: Sink,
    *,
    source: str,
    strict: bool,
    request: Path | None,
    response: Path | None,
    progress: bool | None,
) -> Summary:
    """Check the inputs, run the pipeline into ``sink`` with progress bars on a terminal."""
    if source not in FORMATS:
        err.print(f"[red]unknown --from {source!r}[/]; choose one of: {', '.join(FORMATS)}")
        raise typer.Exit(Exit.USAGE)
    if not paths and request is None and response is None:
        err.print("[red]nothing to read:[/] give PATH… or --request/--response")
        raise typer.Exit(Exit.USAGE)
    options = {"fmt": source, "strict": strict, "request": request, "response": response}
    show = sys.stderr.isatty() if progress is None else progress
    try:
        if not show:
            return run(paths or [], sink, **options)
        bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
        )
        with bars:
            return run(paths or [], sink, progress=_progress_factory(bars), **options)
    except StrictError as e:
        err.print(f"[red]corrupt input (--strict):[/] {e.skip.detail}")
        raise typer.Exit(Exit.STRICT) from None


@app.command("convert")
def convert_cmd(
    paths: PathsArg = None,
    source: SourceOpt = "auto",
    output: Annotated[
        str,
        typer.Option(
            "--output", "-o", help="Facts JSONL file ('-' for stdout).", envvar="LITHIFY_OUTPUT"
        ),
    ] = "-",
    request: RequestOpt = None,
    response: ResponseOpt = None,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
    progress: ProgressOpt = None,
) -> None:
    """Convert telemetry and provider payloads into canonical facts, one JSON object per line.

    Reads OTLP traces and logs (protobuf, OTLP/JSON, the Collector's JSONL), flat attribute maps, and provider request/response bodies; writes facts in input order. Units that give no fact (non-GenAI spans, error bodies, corrupt lines) are counted in the summary with their reason.
    """
    with open_output(output) as out:
        summary = _pipeline(
            paths, JsonlSink(out), source=source, strict=strict, request=request,
            response=response, progress=progress,
        )  # fmt: skip
    to_stdout = output == "-"
    if as_json:
        data = orjson.dumps(summary.to_json(), option=orjson.OPT_INDENT_2).decode()
        (err.print if to_stdout else typer.echo)(data)
    else:
        _summary_table(summary, "stdout" if to_stdout else output)
    if summary.unreadable:
        raise typer.Exit(Exit.UNREADABLE)


@app.command("import")
def import_cmd(
    paths: PathsArg = None,
    store_url: StoreOpt = None,
    source: SourceOpt = "auto",
    request: RequestOpt = None,
    response: ResponseOpt = None,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
    progress: ProgressOpt = None,
) -> None:
    """Import whatever `lithify convert` reads (and feedback documents), or what it writes (fact files, plain or .gz), into the fact store.

    Idempotent: a fact already stored (same identity, or same provider response id) is counted as a duplicate and never changed, so importing a file twice stores nothing new. Another capture of a stored call with different content (a span's log event, the proxy's view of a response) is kept apart, as a variant; a call that shares an id with a stored call it contradicts is stored as a call of its own and counted as a collision.
    """
    with opened_store(store_url) as store:
        sink = StoreSink(store)
        summary = _pipeline(
            paths, sink, source=source, strict=strict, request=request, response=response,
            progress=progress,
        )  # fmt: skip
        url = store.url
    report = {"store": url, **summary.to_json(), **sink.counts()}
    if as_json:
        typer.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
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
        raise typer.Exit(Exit.UNREADABLE)


def _filters(
    session: list[str] | None,
    model: list[str] | None,
    source: list[str] | None,
    provider: list[str] | None,
    since: str | None,
    until: str | None,
    limit: int | None,
) -> FactFilter:
    return FactFilter(
        session_id=session or None,
        model=model or None,
        source=source or None,
        provider=provider or None,
        since=since,
        until=until,
        limit=limit,
    )


SessionOpt = Annotated[list[str] | None, typer.Option("--session", help="Session id (repeatable).")]
ModelOpt = Annotated[list[str] | None, typer.Option("--model", help="Model (repeatable).")]
FactSourceOpt = Annotated[
    list[str] | None,
    typer.Option("--source", help="Translator that made the fact, e.g. otel-genai (repeatable)."),
]
ProviderOpt = Annotated[list[str] | None, typer.Option("--provider", help="Provider (repeatable).")]
SinceOpt = Annotated[
    str | None,
    typer.Option(help="From this time on (RFC 3339, e.g. 2026-11-01 or 2026-11-01T12:00:00Z)."),
]
UntilOpt = Annotated[str | None, typer.Option(help="Before this time (RFC 3339).")]


def _preview(call: InferenceCall) -> str:
    for m in reversed(call.output_messages or call.input_messages):
        for p in m.parts:
            if isinstance(p, TextPart):
                return p.content.replace("\n", " ")[:60]
            if isinstance(p, ToolCallPart):
                return f"→ {p.name}(…)"
    return ""


@app.command("facts")
def facts_cmd(
    fact_id: Annotated[
        str | None, typer.Argument(help="Show this one fact (its inference_call_id) in full.")
    ] = None,
    store_url: StoreOpt = None,
    session: SessionOpt = None,
    model: ModelOpt = None,
    source: FactSourceOpt = None,
    provider: ProviderOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    limit: Annotated[int, typer.Option(help="At most this many facts (0: all).")] = 50,
    as_json: Annotated[
        bool, json_flag("Facts as JSON lines (the full facts): a fact file `lithify import` reads.")
    ] = False,
    captures: Annotated[
        bool,
        typer.Option(
            "--captures",
            help="With an id: every stored capture of that call, the one exports use marked.",
        ),
    ] = False,
) -> None:
    """List stored facts (newest last), or show one in full."""
    with opened_store(store_url) as store:
        if fact_id is not None and captures:
            _show_captures(store.captures(fact_id), fact_id, store.url, as_json)
            return
        if fact_id is not None:
            call = store.get_fact(fact_id)
            if call is None:
                err.print(f"[red]no fact[/] {fact_id} in {store.url}")
                raise typer.Exit(Exit.NOT_FOUND)
            if as_json:  # a line of a fact file: `lithify import` reads it back exactly
                sys.stdout.buffer.write(encode_line(call))
                sys.stdout.buffer.flush()
            else:
                typer.echo(orjson.dumps(orjson.loads(encode(call)), option=orjson.OPT_INDENT_2))
            return
        filters = _filters(session, model, source, provider, since, until, limit or None)
        if as_json:
            sink = JsonlSink(sys.stdout.buffer)  # a fact file, as `lithify convert` writes
            for call in store.iter_facts(filters):
                sink.fact(call)
            sink.flush()
            sys.stdout.buffer.flush()
            return
        t = Table(show_header=True, header_style="bold", title=f"facts in {store.url}")
        t.add_column("id", no_wrap=True)
        t.add_column("time (UTC)", no_wrap=True)
        t.add_column("model", overflow="fold")
        t.add_column("msgs", justify="right", no_wrap=True)
        t.add_column("tokens", justify="right", no_wrap=True)
        t.add_column("last part", overflow="ellipsis", no_wrap=True)
        shown = 0
        for call in store.iter_facts(filters):
            shown += 1
            tin = "-" if call.input_tokens is None else str(call.input_tokens)
            tout = "-" if call.output_tokens is None else str(call.output_tokens)
            t.add_row(
                call.inference_call_id[:12],
                (call.started_at or call.observed_at or "")[:16].replace("T", " "),
                call.model or "",
                f"{len(call.input_messages)}→{len(call.output_messages)}",
                f"{tin}/{tout}",
                _preview(call),
            )
        total = store.count(_filters(session, model, source, provider, since, until, None))
    Console().print(t)
    err.print(
        f"{shown} of {total} matching facts" + ("; --limit 0 shows all" if shown < total else "")
    )


def _show_captures(found: list[StoredCapture], fact_id: str, url: str, as_json: bool) -> None:
    if not found:
        err.print(f"[red]no fact[/] {fact_id} in {url}")
        raise typer.Exit(Exit.NOT_FOUND)
    if as_json:
        for c in found:
            typer.echo(
                b'{"call_id":%s,"kept":%s,"fact":%s}'
                % (encode(c.call_id), b"true" if c.first else b"false", encode(c.fact))
            )
        return
    t = Table(show_header=True, header_style="bold", title=f"captures of {fact_id}")
    for col in ("kept", "call", "id", "source", "session", "time (UTC)", "parts", "degradations"):
        t.add_column(col, no_wrap=col != "degradations")
    for c in found:
        call = c.fact
        t.add_row(
            "yes" if c.first else "",
            c.call_id[:12],
            call.inference_call_id[:12],
            call.source.name,
            call.session_id or "-",
            (call.started_at or call.observed_at or "")[:19].replace("T", " "),
            str(part_count(call)),
            ", ".join(f"{k} {v}" for k, v in call.degradations.items()),
        )
    Console().print(t)
    err.print(
        "Ranked by the identity rule (docs/store.md): what a capture lacks, then its time. "
        "Captures are one call only when their content agrees; exports use each call's kept one."
    )


@app.command("stats")
def stats_cmd(
    store_url: StoreOpt = None,
    session: SessionOpt = None,
    model: ModelOpt = None,
    source: FactSourceOpt = None,
    provider: ProviderOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    as_json: Annotated[bool, json_flag("Print the stats as JSON.")] = False,
) -> None:
    """Counts of stored facts by model, provider, source, session and degradation reason, with tokens."""
    with opened_store(store_url) as store:
        st = store.stats(_filters(session, model, source, provider, since, until, None))
        url = store.url
    if as_json:
        typer.echo(
            orjson.dumps({"store": url, **to_builtins(st)}, option=orjson.OPT_INDENT_2).decode()
        )
        return
    out = Console()
    out.print(
        f"[bold]{st.facts}[/] facts, {st.sessions} sessions, {st.feedback} feedback, "
        f"tokens in {st.input_tokens:,} / out {st.output_tokens:,} — {url}"
    )
    if st.dropped_captures or st.id_collisions:
        # Calls captured more than once, and ids that several calls share (docs/store.md).
        out.print(
            f"{st.dropped_captures} other captures of calls kept apart (left out of exports), "
            f"{st.id_collisions} calls sharing an id with another call (id_collision)"
        )
    for title, groups in (
        ("by model", st.by_model),
        ("by provider", st.by_provider),
        ("by source", st.by_source),
        ("by session (top)", st.by_session),
    ):
        t = Table(title=title, show_header=True, header_style="bold")
        for col in ("value", "facts", "tokens in", "tokens out"):
            t.add_column(col, justify="left" if col == "value" else "right")
        for g in groups:
            t.add_row(
                g.key if g.key is not None else "(none)",
                str(g.facts),
                f"{g.input_tokens:,}",
                f"{g.output_tokens:,}",
            )
        out.print(t)
    if st.degradations:
        t = Table(title="degradations", show_header=True, header_style="bold")
        for col in ("reason", "facts", "count", "meaning"):
            t.add_column(col)
        for d in st.degradations:
            t.add_row(d.reason, str(d.facts), str(d.count), DEGRADATION_REASONS.get(d.reason, ""))
        out.print(t)


def example_files() -> list[Path]:
    """The example telemetry shipped with the package (recorded from real instrumentations)."""
    root = files("lithify") / "examples"
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith((".json", ".pb")))


@app.command("demo")
def demo_cmd(
    out_dir: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for the demo's output.")
    ] = Path("lithify-demo"),
    store_url: StoreOpt = None,
    as_json: Annotated[bool, json_flag("Print the summary as JSON.")] = False,
) -> None:
    """The main job on the shipped example telemetry: import it into the store, derive the sessions, and export SFT and NeMo Gym rows into a folder."""
    from lithify.cli_export import print_demo, run_demo

    try:
        result = run_demo(example_files(), out_dir, store_url)
    except StoreError as e:
        err.print(f"[red]store error:[/] {e}")
        raise typer.Exit(Exit.STORE) from None
    if as_json:
        typer.echo(json_text(result))
        return
    print_demo(result)


def main() -> None:  # the console entry point
    app()


def _register_extensions() -> None:
    """Commands that live in their own modules register themselves here."""
    from lithify import cli_serve

    cli_serve.register(app)
    __import__("lithify.cli_export").cli_export.register(app)
    __import__("lithify.cli_proxy").cli_proxy.register(app)


_register_extensions()
