"""`lithify export KIND`: training rows from the store or from fact files (docs/export.md),
through the export library (``lithify.export``): this module adds flags, a progress bar, the
summary and exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

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
    fact_filter,
    json_flag,
    json_text,
    leave,
    model_option,
    option,
    repeatable,
    session_option,
    stderr,
    store_option,
    until_option,
)

if TYPE_CHECKING:
    from rich.table import Table

    from lithify.export import ExportOptions, ExportSummary, Provenance, Selection
    from lithify.store import FactFilter

# The stages (and rich) are imported inside the functions that use them: importing this module
# for `lithify --help` costs none of them.

# lithify.export's KINDS and PROFILES, written out so that the help does not import the export
# library (tests/test_cli.py checks they are the same).
KINDS = ("sft", "nemo-gym", "dpo", "rl")
PROFILES = ("canonical", "trl", "openai", "axolotl", "nemo-gym")


def summary_table(summary: ExportSummary) -> Table:
    import msgspec
    from rich.table import Table

    from lithify.derive import ALTERNATIVES, SPLIT_REASONS
    from lithify.derive.feedback import FEEDBACK_DROP_REASONS
    from lithify.export import PROFILE_CHANGES, SKIP_REASONS
    from lithify.export.flags import FLAGS

    t = Table(title=f"lithify export {summary.kind}", show_header=True, header_style="bold")
    t.add_column("what")
    t.add_column("count", justify="right")
    t.add_column("meaning", style="dim")
    t.add_row("facts read", str(summary.facts_read), "")
    d = summary.derive
    dropped = f"{d.duplicates} duplicate captures dropped"
    if d.richer_dropped:
        dropped += f", {d.richer_dropped} of them with parts the one read lacks"
    t.add_row("calls", str(d.calls), dropped)
    t.add_row("segments", str(d.segments), f"in {d.sessions} sessions")
    for reason, n in d.splits.items():
        t.add_row(f"segment start: {reason}", str(n), SPLIT_REASONS.get(reason, ""))
    if d.alternatives:
        t.add_row("alternative choices", str(d.alternatives), ALTERNATIVES)
    for split in ("train", "eval"):
        t.add_row(
            f"[green]rows: {split}[/]",
            str(summary.rows.get(split, 0)),
            summary.files.get(split, ""),
        )
    if summary.filtered:
        t.add_row("filtered out", str(summary.filtered), "rows --where left out")
    for reason, n in sorted(summary.skipped.items()):
        t.add_row(f"skipped: {reason}", str(n), SKIP_REASONS.get(reason, ""))
    for reason, n in sorted(summary.changes.items()):
        t.add_row(f"changed: {reason}", str(n), PROFILE_CHANGES.get(reason, ""))
    for flag, n in summary.flags.items():
        t.add_row(f"flag: {flag}", str(n), FLAGS.get(flag, ""))
    for reason, n in summary.feedback_dropped.items():
        t.add_row(f"feedback not joined: {reason}", str(n), FEEDBACK_DROP_REASONS.get(reason, ""))
    tokens = summary.tokens
    if not isinstance(tokens, msgspec.UnsetType):
        budget = f", at most {tokens.max_tokens}" if tokens.max_tokens is not None else ""
        t.add_row("tokens: rows counted", str(tokens.rows), f"{tokens.tokenizer}{budget}")
        for name in ("min", "median", "p95", "max"):
            value = getattr(tokens, name)
            t.add_row(f"tokens: {name}", "-" if value is None else str(value), "")
        if tokens.cut:
            t.add_row("tokens: rows cut to fit", str(tokens.cut), "--fit split")
        if tokens.images is not None:
            t.add_row("tokens: images counted as", tokens.images, _IMAGES_COUNTED[tokens.images])
    return t


_IMAGES_COUNTED = {
    "processor": "the image tokens the model's processor makes of each",
    "placeholders": "the template's placeholder only: the tokenizer has no processor",
}


def _warn_placeholders(summary: ExportSummary) -> None:
    """Say on stderr, beside the table or the JSON, that vision rows' counts leave out their
    image tokens (TokenStats.images)."""
    import msgspec

    tokens = summary.tokens
    if not isinstance(tokens, msgspec.UnsetType) and tokens.images == "placeholders":
        err.print(
            "[yellow]warning: no processor beside the tokenizer: each image is counted as its "
            "template placeholder, not its image tokens, so metadata.tokens is short of what "
            "the trainer sees (docs/export.md, Token budgets)[/]"
        )


@click.command("export")
@argument("kind", help=f"Row kind: {', '.join(KINDS)}.", required=False, default=None)
@option(
    "--output",
    "-o",
    "out_dir",
    type=click.Path(path_type=Path),
    help="Folder for train/eval files (default: ./export-KIND).",
    envvar="LITHIFY_EXPORT_OUTPUT",
)
@store_option
@repeatable(
    "--facts",
    "facts_files",
    type=click.Path(path_type=Path),
    help="Read facts (and feedback) from this JSONL file, not the store.",
    envvar="LITHIFY_EXPORT_FACTS",
)
@option("--profile", default="canonical", help=f"Target trainer: {', '.join(PROFILES)}.")
@option("--reasoning-key", help="Key of assistant reasoning: thinking or reasoning_content.")
@option("--arguments", help="Tool-call arguments as an object or a JSON string.")
@option("--shape", help="SFT rows: messages (default) or prompt-completion.")
@option(
    "--format", "fmt", default="jsonl", help="jsonl or parquet.", envvar="LITHIFY_EXPORT_FORMAT"
)
@option(
    "--eval-fraction",
    type=float,
    default=0.0,
    help="Share of sessions in the eval split (by a hash of the id).",
)
@repeatable("--where", help="Feedback filter, e.g. 'score>=0.8' (repeatable: all must hold).")
@option("--reward", default="score", help="Feedback name used as reward and preference score.")
@option(
    "--keep-degraded/--no-keep-degraded",
    default=False,
    help="Also export rows from calls that lost content at conversion.",
)
@option(
    "--images/--no-images",
    default=False,
    help="sft --profile trl: vision rows, an images column and image files "
    "(docs/export.md, Media and server tools).",
)
@option(
    "--max-inline-bytes",
    type=int,
    help="Largest blob a row may carry inline (data URLs); default 10 MiB.",
)
@repeatable(
    "--drop-flag", help="Leave out rows carrying this quality flag (repeatable; docs/export.md)."
)
@repeatable(
    "--keep-flag", help="Write rows carrying this quality flag, dropped by default (repeatable)."
)
@option(
    "--tokenizer",
    help="Count each row's tokens with this Hugging Face tokenizer: a folder, or a name "
    "in the local cache (never downloaded; needs lithify[tokens]; docs/export.md, Token "
    "budgets). With --images, the model's processor beside it counts each image's "
    "tokens.",
)
@option("--max-tokens", type=int, help="--tokenizer: the most tokens a row may have (see --fit).")
@option(
    "--fit",
    default="drop",
    help="A row over --max-tokens: drop (counted as over_token_budget) or split (SFT "
    "rows: cut at a turn boundary, keeping the system message and the latest turns).",
)
@session_option
@model_option
@repeatable("--source", help="Translator that made the fact (repeatable).")
@option("--since", help="From this time on (RFC 3339).")
@until_option
@engine_option
@ray_address_option
@option(
    "--partitions",
    type=int,
    help="--engine ray: partitions of the shuffles (sessions, shards).",
)
@option(
    "--merge/--no-merge",
    default=True,
    help="--engine ray: merge the shards into train/eval files (else shards only).",
)
@option(
    "--replay",
    "replay_path",
    type=click.Path(path_type=Path),
    help="Make the export OUT_DIR/manifest.json records again and check it byte for byte.",
)
@json_flag("Print the summary as JSON.")
@option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
def export_cmd(
    kind: str | None,
    out_dir: Path | None,
    store: str | None,
    facts_files: list[Path] | None,
    profile: str,
    reasoning_key: str | None,
    arguments: str | None,
    shape: str | None,
    fmt: str,
    eval_fraction: float,
    where: list[str] | None,
    reward: str,
    keep_degraded: bool,
    images: bool,
    max_inline_bytes: int | None,
    drop_flag: list[str] | None,
    keep_flag: list[str] | None,
    tokenizer: str | None,
    max_tokens: int | None,
    fit: str,
    session: list[str] | None,
    model: list[str] | None,
    source: list[str] | None,
    since: str | None,
    until: str | None,
    engine: str,
    ray_address: str | None,
    partitions: int | None,
    merge: bool,
    replay_path: Path | None,
    as_json: bool,
    progress: bool | None,
) -> None:
    """Export training rows: SFT conversations, NeMo Gym rows, preference pairs, RL rows.

    Reads facts from the store (or --facts files), rebuilds sessions and segments, maps them to the target trainer's format, validates every row against its schema and writes train/eval files atomically. Rows that cannot be represented are skipped and counted by reason.
    """
    from lithify.cli.failures import export_failures
    from lithify.cli.replay import run_replay
    from lithify.export import (
        ExportOptions,
        ProfileError,
        WhereError,
        cli_provenance,
        from_files,
        from_store,
        make_builder,
    )
    from lithify.store import default_store_path, open_store

    if replay_path is not None:
        run_replay(replay_path, store, as_json)
    if kind is None:
        err.print("[red]give a row kind, or --replay OUT_DIR/manifest.json[/]")
        leave(Exit.USAGE)
    options = ExportOptions(
        kind=kind,
        profile=profile,
        reasoning_key=reasoning_key,
        arguments=arguments,
        shape=shape,
        fmt=fmt,
        eval_fraction=eval_fraction,
        where=tuple(where or ()),
        reward=reward,
        keep_degraded=keep_degraded,
        drop_flags=tuple(drop_flag or ()),
        keep_flags=tuple(keep_flag or ()),
        images=images,
        **({} if max_inline_bytes is None else {"max_inline_bytes": max_inline_bytes}),
        tokenizer=_tokenizer_ref(tokenizer),
        max_tokens=max_tokens,
        fit=fit,
    )
    try:
        make_builder(options)  # reject bad options before reading anything
    except (ProfileError, WhereError) as e:
        err.print(f"[red]{e}[/]")
        leave(Exit.USAGE)
    target = out_dir if out_dir is not None else Path(f"export-{kind}")
    filters = fact_filter(session, model, source, since=since, until=until)
    show = sys.stderr.isatty() if progress is None else progress
    if facts_files:
        facts_files = fact_paths(facts_files)
    if check_engine(engine):
        url = None
        if facts_files:
            origin = cli_provenance(options, facts=facts_files, filters=filters)
        else:
            # The store, read by parts of whole sessions in Ray tasks that open it themselves:
            # a PostgreSQL URL on a cluster (a SQLite file only where every node sees it).
            url = store or os.environ.get("LITHIFY_STORE") or f"sqlite:///{default_store_path()}"
            with open_store(url) as opened:  # provenance names it as a local export does
                origin = cli_provenance(options, store=store or opened.url, filters=filters)
        summary = _run_ray(
            facts_files, target, options, filters, show, ray_address, partitions, merge, origin,
            url,
        )  # fmt: skip
        if as_json:
            click.echo(json_text(summary))
        else:
            err.print(summary_table(summary))
        _warn_placeholders(summary)
        return
    with export_failures("write", target):
        if facts_files:
            origin = cli_provenance(options, facts=facts_files, filters=filters)
            summary = _run(from_files(facts_files, filters), target, options, show, origin)
        else:
            with open_store(store) as opened:
                url = store or getattr(opened, "url", None)
                origin = cli_provenance(options, store=url, filters=filters)
                summary = _run(from_store(opened, filters), target, options, show, origin)
    if as_json:
        click.echo(json_text(summary))
    else:
        err.print(summary_table(summary))
    _warn_placeholders(summary)


def _run(
    selection: Selection, target: Path, options: ExportOptions, show: bool, origin: Provenance
) -> ExportSummary:
    from rich.markup import escape

    from lithify.export import export
    from lithify.export.tokens import TokenizerError

    try:
        with _bar(show, selection.total) as tick:
            return export(selection, target, options, progress=tick, provenance=origin)
    except TokenizerError as e:  # the extra missing, a tokenizer not in the local cache
        err.print(f"[red]{escape(str(e))}[/]")
        leave(Exit.USAGE)


def _tokenizer_ref(value: str | None) -> str | None:
    """A ``--tokenizer`` folder as an absolute path (the manifest's options replay from
    anywhere); a name of the local cache as given."""
    if value is None or not Path(value).exists():
        return value
    return str(Path(value).absolute())


def fact_paths(paths: list[Path]) -> list[Path]:
    """``--facts`` values, a folder standing for its fact files (``*.jsonl``, ``*.jsonl.gz``,
    in name order: what ``lithify convert --engine ray`` writes)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.iterdir() if f.name.endswith((".jsonl", ".jsonl.gz")))
        else:
            out.append(p)
    return out


def _run_ray(
    paths: list[Path],
    target: Path,
    options: ExportOptions,
    filters: FactFilter,
    show: bool,
    address: str | None,
    partitions: int | None,
    merge: bool,
    origin: Provenance,
    store: str | None = None,
) -> ExportSummary:
    """The export on Ray (``export.distributed``), with the local run's bar and exit codes."""
    from rich.markup import escape

    from lithify.cli.failures import export_failures
    from lithify.export.distributed import export_ray
    from lithify.export.tokens import TokenizerError

    try:
        with export_failures("write", target), ray_session(address) as _, _bar(show, None) as tick:
            done = export_ray(
                paths, target, options, filters, partitions=partitions, merge=merge,
                progress=tick, provenance=origin, store=store,
            )  # fmt: skip
            return done.summary
    except (RayMissing, TokenizerError) as e:  # no Ray; a tokenizer not here or on a node
        err.print(f"[red]{escape(str(e))}[/]")
        leave(Exit.USAGE)


@contextmanager
def _bar(show: bool, total: int | None) -> Iterator[Callable[[int], None] | None]:
    """The facts bar of an export (None when not shown)."""
    if not show:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    bars = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr(),
        transient=True,
    )
    with bars:
        task = bars.add_task("facts", total=total)
        yield lambda n: bars.advance(task, n)
