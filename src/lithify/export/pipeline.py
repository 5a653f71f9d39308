"""The export pipeline: a ``Selection`` of facts → segments with feedback joined (derive) →
rows of one kind and profile, validated → train/eval files, and the ``ExportSummary``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lithify.derive.feedback import FeedbackIndex
from lithify.derive.segments import iter_segments
from lithify.derive.sessions import DeriveStats
from lithify.export.flags import Flagger, dropped_flags, note_flags
from lithify.export.manifest import FactDigests, Provenance, publish, unpublish
from lithify.export.media import DEFAULT_MAX_INLINE
from lithify.export.profiles import ProfileError, resolve
from lithify.export.rows import Row, RowBuilder
from lithify.export.source import Selection
from lithify.export.summary import ExportSummary
from lithify.export.tokens import TextCounter, TokenBudget, check_options, load_tokenizer
from lithify.export.where import Condition, parse
from lithify.export.writers import FORMATS, SplitWriter, columns_for
from lithify.model import InferenceCall


@dataclass(frozen=True)
class ExportOptions:
    kind: str
    profile: str = "canonical"
    reasoning_key: str | None = None
    arguments: str | None = None
    shape: str | None = None  # SFT: messages | prompt-completion
    fmt: str = "jsonl"
    eval_fraction: float = 0.0
    where: tuple[str, ...] = ()
    reward: str = "score"
    keep_degraded: bool = False
    drop_flags: tuple[str, ...] = ()  # quality flags whose rows are left out (export.flags)
    keep_flags: tuple[str, ...] = ()
    images: bool = False  # TRL vision SFT rows (export.media)
    max_inline_bytes: int = DEFAULT_MAX_INLINE  # the largest blob a row may carry inline
    tokenizer: str | None = None  # count rows' tokens with it (export.tokens): folder or name
    max_tokens: int | None = None  # the token budget of a row
    fit: str = "drop"  # a row over it: drop, or split (SFT: cut at a turn boundary)


def make_builder(options: ExportOptions) -> RowBuilder:
    """The row builder for ``options``; raises ``ProfileError``/``WhereError`` for options that
    do not fit together (call it first to reject them before reading anything)."""
    if options.fmt not in FORMATS:
        raise ProfileError(f"--format must be one of {', '.join(FORMATS)}")
    if not 0.0 <= options.eval_fraction <= 1.0:
        raise ProfileError("--eval-fraction must be between 0 and 1")
    profile = resolve(
        options.kind,
        options.profile,
        reasoning_key=options.reasoning_key,
        arguments=options.arguments,
        images=options.images,
    )
    if options.max_inline_bytes < 0:
        raise ProfileError("--max-inline-bytes must be 0 or more")
    if options.shape is not None and options.kind != "sft":
        raise ProfileError("--shape applies to sft rows only")
    conditions: list[Condition] = [parse(w) for w in options.where]
    try:
        dropped_flags(options.drop_flags, options.keep_flags)
        builder = RowBuilder(
            options.kind,
            profile,
            shape=options.shape,
            eval_fraction=options.eval_fraction,
            where=conditions,
            reward=options.reward,
            keep_degraded=options.keep_degraded,
            max_inline=options.max_inline_bytes,
        )
    except ValueError as e:
        raise ProfileError(str(e)) from None
    check_options(
        options.kind,
        tokenizer=options.tokenizer,
        max_tokens=options.max_tokens,
        fit=options.fit,
    )
    return builder


def token_budget(
    options: ExportOptions,
    builder: RowBuilder,
    tokenizer: Any = None,
    sha256: str | None = None,
    text: TextCounter | None = None,
) -> TokenBudget | None:
    """The token stage of an export with ``--tokenizer`` (its tokenizer loaded once, here,
    unless given with its ``sha256`` and ``text`` counter); raises ``TokenizerError`` when it
    cannot be had."""
    if options.tokenizer is None:
        return None
    return TokenBudget(
        load_tokenizer(options.tokenizer) if tokenizer is None else tokenizer,
        options.tokenizer,
        builder.shape,
        kind=options.kind,
        max_tokens=options.max_tokens,
        fit=options.fit,
        validator=builder.validator,
        compares=0 < options.eval_fraction < 1,
        sha256=sha256,
        text=text,
    )


_TICK = 256  # facts per progress report: a report per fact would cost more than the fact


def _ticking(
    facts: Iterable[InferenceCall], progress: Callable[[int], None]
) -> Iterator[InferenceCall]:
    n = 0
    for f in facts:
        yield f
        n += 1
        if n == _TICK:
            progress(n)
            n = 0
    if n:
        progress(n)


def export(
    selection: Selection,
    out_dir: str | Path,
    options: ExportOptions,
    *,
    progress: Callable[[int], None] | None = None,
    provenance: Provenance | None = None,
) -> ExportSummary:
    """Derive and write the rows of ``options.kind`` from ``selection`` (``export.source``),
    then their manifest and card (``export.manifest``; ``provenance``: where the facts came from).

    ``progress`` is told of facts read. Raises ``RowInvalid`` when a row fails its schema
    (nothing is written then), and what reading the facts raises.
    """
    builder = make_builder(options)
    budget = token_budget(options, builder)  # before anything is read or written
    index = FeedbackIndex(selection.feedback, selection.aliases)
    stats = DeriveStats(duplicates=selection.dropped)  # derivation counts the rest
    digests = FactDigests()
    drop = dropped_flags(options.drop_flags, options.keep_flags)
    flagger = Flagger(options.kind, drop, builder.validator)
    facts = flagger.watch(digests.watch(selection.facts))
    facts = facts if progress is None else _ticking(facts, progress)
    out = Path(out_dir)
    columns = columns_for(options.kind, builder.shape, images=options.images)
    writer = SplitWriter(out, options.fmt, columns, before_commit=lambda: unpublish(out))
    with writer:
        for row in counted(flagger.apply(derive_rows(facts, index, builder, stats)), budget):
            writer.write(row)
        for row in counted(flagger.apply(builder.pairs()), budget):
            writer.write(row)
    summary = note_flags(summarize(options, builder, stats, writer, index.dropped()), flagger)
    if budget is not None:
        summary = note_tokens(summary, budget, writer.left_out)
    origin = provenance if provenance is not None else Provenance()
    publish(
        out,
        summary=summary,
        options=options,
        digests=digests,
        feedback=selection.feedback,
        origin=origin,
        hashed=writer.hashed,
    )
    return summary


def counted(rows: Iterable[Row], budget: TokenBudget | None) -> Iterable[Row]:
    """``rows`` through the token stage, when there is one."""
    return rows if budget is None else budget.apply(rows)


def note_tokens(summary: ExportSummary, budget: TokenBudget, left_out: set[bytes]) -> ExportSummary:
    """``summary`` with the token counts of the rows written and the rows over the budget."""
    summary.tokens = budget.finish(left_out)
    skipped = Counter(summary.skipped)
    skipped.update(budget.left_out)
    summary.skipped = _by_reason(skipped)
    return summary


def derive_rows(
    facts: Iterable[InferenceCall], index: FeedbackIndex, builder: RowBuilder, stats: DeriveStats
) -> Iterator[Row]:
    """The rows of facts grouped by session: derivation with feedback joined, then the builder.
    The local export runs it over all its facts, a distributed one (``export.distributed``)
    over each session's, so both make the same rows."""
    for segment in iter_segments(facts, index, stats):
        yield from builder.rows(segment)


def summarize(
    options: ExportOptions,
    builder: RowBuilder,
    stats: DeriveStats,
    writer: SplitWriter,
    feedback_dropped: dict[str, int],
) -> ExportSummary:
    """The summary of an export whose rows ``builder`` built and ``writer`` wrote."""
    counts = builder.counts
    skipped = Counter(counts.skipped)
    skipped["eval_prompt_in_train"] += writer.eval_prompt_in_train
    return ExportSummary(
        kind=options.kind,
        profile=builder.profile.name,
        shape=builder.shape,
        fmt=options.fmt,
        schema=builder.schema_id,
        output=str(writer.folder),
        files={k: str(v) for k, v in writer.paths.items()},
        facts_read=stats.calls + stats.duplicates,
        derive=stats,
        rows=dict(writer.written),
        skipped=_by_reason(skipped),
        filtered=counts.filtered,
        changes=_by_reason(counts.changes),
        feedback_dropped=feedback_dropped,
    )


def _by_reason(counts: Counter[str]) -> dict[str, int]:
    return {k: n for k, n in sorted(counts.items()) if n}
