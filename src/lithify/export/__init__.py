"""Export: facts → segments → rows → profile → validated files (docs/export.md).

``export(facts, feedback, out_dir, options)`` is the whole stage: ``facts`` come grouped by
session (``FactFilter(order="session")`` from a store, or ``derive.sessions.sort_facts``), and
the result is ``train``/``eval`` files in ``out_dir`` plus a summary of what was written,
skipped and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lithify.derive.feedback import FEEDBACK_DROP_REASONS, FeedbackIndex
from lithify.derive.segments import iter_segments
from lithify.derive.sessions import DeriveStats
from lithify.export.profiles import KINDS, PROFILE_CHANGES, PROFILES, ProfileError, resolve
from lithify.export.rows import EXPORTER, RowBuilder
from lithify.export.trainer import SKIP_REASONS
from lithify.export.validate import RowInvalid
from lithify.export.where import Condition, WhereError, parse
from lithify.export.writers import FORMATS, SplitWriter, columns_for
from lithify.model import Feedback, InferenceCall

__all__ = [
    "EXPORTER",
    "FEEDBACK_DROP_REASONS",
    "FORMATS",
    "KINDS",
    "PROFILES",
    "PROFILE_CHANGES",
    "SKIP_REASONS",
    "ExportOptions",
    "ExportSummary",
    "ProfileError",
    "RowInvalid",
    "WhereError",
    "export",
    "make_builder",
]


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


@dataclass
class ExportSummary:
    kind: str
    profile: str
    shape: str
    fmt: str
    schema: str
    output: str
    files: dict[str, str] = field(default_factory=dict)
    facts_read: int = 0
    derive: dict[str, Any] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=lambda: {"train": 0, "eval": 0})
    skipped: Counter[str] = field(default_factory=Counter)
    filtered: int = 0
    changes: Counter[str] = field(default_factory=Counter)
    feedback_dropped: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "profile": self.profile,
            "shape": self.shape,
            "format": self.fmt,
            "schema": self.schema,
            "exporter": EXPORTER,
            "output": self.output,
            "files": self.files,
            "facts_read": self.facts_read,
            "derive": self.derive,
            "rows": self.rows,
            "skipped": dict(sorted(self.skipped.items())),
            "filtered": self.filtered,
            "changes": dict(sorted(self.changes.items())),
            "feedback_dropped": self.feedback_dropped,
        }


def make_builder(options: ExportOptions, feedback: FeedbackIndex | None = None) -> RowBuilder:
    """The row builder for ``options``; raises ``ProfileError``/``WhereError``/``ValueError``
    for options that do not fit together."""
    if options.fmt not in FORMATS:
        raise ProfileError(f"--format must be one of {', '.join(FORMATS)}")
    if not 0.0 <= options.eval_fraction <= 1.0:
        raise ProfileError("--eval-fraction must be between 0 and 1")
    profile = resolve(
        options.kind,
        options.profile,
        reasoning_key=options.reasoning_key,
        arguments=options.arguments,
    )
    if options.shape is not None and options.kind != "sft":
        raise ProfileError("--shape applies to sft rows only")
    conditions: list[Condition] = [parse(w) for w in options.where]
    try:
        return RowBuilder(
            options.kind,
            profile,
            shape=options.shape,
            eval_fraction=options.eval_fraction,
            where=conditions,
            reward=options.reward,
            keep_degraded=options.keep_degraded,
            feedback=feedback,
        )
    except ValueError as e:
        raise ProfileError(str(e)) from None


def _counted(
    facts: Iterable[InferenceCall], summary: ExportSummary, tick: Callable[[], None] | None
) -> Iterator[InferenceCall]:
    for f in facts:
        summary.facts_read += 1
        if tick is not None:
            tick()
        yield f


def export(
    facts: Iterable[InferenceCall],
    feedback: Iterable[Feedback],
    out_dir: str | Path,
    options: ExportOptions,
    *,
    progress: Callable[[int], None] | None = None,
    stats: DeriveStats | None = None,
    aliases: Mapping[str, str] | None = None,
) -> ExportSummary:
    """Derive and write the rows of ``options.kind`` from ``facts`` (grouped by session).

    ``stats`` carries what derivation saw before (``sort_facts`` of fact files counts the
    duplicates it dropped there); ``aliases``: other capture ids of the calls, for feedback
    (``FeedbackIndex``). Raises ``RowInvalid`` when a row fails its schema (nothing is written
    then).
    """
    index = FeedbackIndex(feedback, aliases)
    builder = make_builder(options, index)
    out = Path(out_dir)
    summary = ExportSummary(
        kind=options.kind,
        profile=builder.profile.name,
        shape=builder.shape,
        fmt=options.fmt,
        schema=builder.schema_id,
        output=str(out),
    )
    stats = stats if stats is not None else DeriveStats()
    dropped_before = stats.duplicates  # by sort_facts, before these facts were counted
    writer = SplitWriter(out, options.fmt, columns_for(options.kind, builder.shape))
    with writer:
        for segment in iter_segments(_counted(facts, summary, progress), index, stats):
            for row in builder.rows(segment):
                writer.write(row)
        for row in builder.pairs():
            writer.write(row)
    counts = builder.counts
    summary.files = {k: str(v) for k, v in writer.paths.items()}
    summary.rows = dict(writer.written)
    summary.skipped = Counter(counts.skipped)
    if writer.eval_prompt_in_train:
        summary.skipped["eval_prompt_in_train"] += writer.eval_prompt_in_train
    summary.filtered = counts.filtered
    summary.changes = Counter(counts.changes)
    summary.derive = stats.as_dict()
    summary.facts_read += dropped_before
    summary.feedback_dropped = index.dropped()
    return summary
