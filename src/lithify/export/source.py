"""Where an export's facts come from: a store query, fact files, or facts in memory, all
selected by one ``FactFilter`` with one meaning (docs/export.md, Where rows come from).

A ``Selection`` is what the pipeline derives rows from: the calls the filter selects, each as
the capture the identity rule keeps (docs/store.md), grouped by session; the feedback, with the
other capture ids of those calls it may name; and how many other captures of the selected
calls the rule left out, and how many of those hold message parts the capture read lacks. A
store applies the filter in SQL; facts held in memory go through ``select``, which honours
every field of ``FactFilter`` as the store does, so a store and the fact files it was
imported from give the same facts.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import islice
from operator import attrgetter
from pathlib import Path
from typing import TypeVar

from lithify.core.factfile import read_facts
from lithify.core.times import datetime_to_rfc3339
from lithify.derive.sessions import call_order_key, resolve_facts, session_order_key
from lithify.model import Feedback, InferenceCall
from lithify.store import FactFilter, FactStore, PartBound, open_store

T = TypeVar("T")

__all__ = [
    "Selection",
    "StoreQuery",
    "from_facts",
    "from_files",
    "from_store",
    "matcher",
    "plain",
    "select",
]


@dataclass(frozen=True, slots=True)
class Selection:
    """Facts to export, and what derivation needs beside them."""

    # Grouped by session, in the store's session order (``FactFilter(order="session")``), one
    # capture per call (what ``derive.segments.iter_segments`` reads), each with the SHA-256 of
    # its JSON its store kept, for the manifest's facts.sha256 (``None``: none kept; ``plain``).
    facts: Iterable[tuple[InferenceCall, bytes | None]]
    feedback: Sequence[Feedback] = ()
    # Ids of other captures of the calls → the id of the call (``FeedbackIndex`` aliases).
    aliases: Mapping[str, str] = field(default_factory=dict)
    dropped: int = 0  # captures the identity rule left out that the filter matches
    total: int | None = None  # how many facts ``facts`` holds, for progress; None: unknown
    # The store query ``facts`` reads, for worker processes to read in parts themselves
    # (``export.pipeline``); None: only ``facts`` gives them.
    query: StoreQuery | None = None
    # What to release once the export is done, whether or not ``facts`` was read (a scratch
    # store); it may be called more than once.
    close: Callable[[], None] | None = None
    # Of ``dropped``, the captures holding more message parts than the one their call is read
    # from: rows lack those parts (``DeriveStats.richer_dropped``).
    richer: int = 0


def plain(facts: Iterable[InferenceCall]) -> Iterator[tuple[InferenceCall, None]]:
    """``facts`` as a ``Selection`` holds them when no store kept their digests."""
    return ((f, None) for f in facts)


@dataclass(frozen=True, slots=True)
class StoreQuery:
    """A store's selection as another process reads it again: the store's ``connect_url`` and
    the filter, read in parts of whole sessions (``FactStore.session_parts``)."""

    url: str = field(repr=False)  # a PostgreSQL URL holds its password: never shown
    filters: FactFilter = field(default_factory=FactFilter)

    def parts(self, size: int) -> list[tuple[PartBound | None, PartBound | None]]:
        """Session ranges of at least ``size`` calls each (but the last) that, read one after
        the other, are the selection's session read."""
        with open_store(self.url) as store:
            return store.session_parts(self.filters, size)

    def read(
        self, store: FactStore, part: tuple[PartBound | None, PartBound | None]
    ) -> Iterator[tuple[InferenceCall, bytes | None]]:
        """The selection's calls in ``part`` (one of ``parts``), in session order, each with
        its kept digest (``FactStore.iter_digested``)."""
        return store.iter_digested(replace(self.filters, part=part))


def from_store(store: FactStore, filters: FactFilter) -> Selection:
    """The facts ``filters`` select in an open store (grouped by session, whatever
    ``filters.order`` says), read as the export goes; all its feedback."""
    filters = replace(filters, order="session")
    total = store.count(filters)
    if filters.limit is not None:
        total = min(total, max(0, filters.limit))
    feedback = list(store.iter_feedback())
    aliases = store.call_aliases(f.target_id for f in feedback if f.target_kind == "call")
    dropped = store.count_dropped(filters)
    richer = store.count_richer_dropped(filters)
    # A limit counts calls across the whole read: ranges read apart cannot keep it.
    url = getattr(store, "connect_url", None)
    query = StoreQuery(url, filters) if url and filters.limit is None else None
    facts = store.iter_digested(filters)  # read lazily, as the export goes
    return Selection(facts, feedback, aliases, dropped, total, query, richer=richer)


# Fact files up to this size on disk are read into memory; larger inputs are first written into
# a scratch SQLite store in the temporary folder, which hands them back grouped by session, so the
# export's memory stays flat whatever the input's size (docs/export.md, Where rows come from).
IN_MEMORY_BYTES = 256 * 1024 * 1024
_SPILL_BATCH = 1000


def from_files(
    paths: Iterable[Path], filters: FactFilter, *, in_memory_bytes: int = IN_MEMORY_BYTES
) -> Selection:
    """The facts ``filters`` select in fact files (``lithify convert`` output, plain or gzipped,
    feedback lines among them), read as `lithify import` reads them. Files come in any order:
    up to ``in_memory_bytes`` of them are held in memory, more go through a scratch store.
    Raises ``InputError`` at a line that is not a fact."""
    paths = list(paths)
    if sum(p.stat().st_size for p in paths if p.is_file()) > in_memory_bytes:
        return _through_scratch_store(paths, filters)
    feedback: list[Feedback] = []
    facts = list(_read(paths, feedback))
    return from_facts(facts, feedback, filters)


def _read(paths: list[Path], feedback: list[Feedback]) -> Iterator[InferenceCall]:
    """The facts of ``paths``, in file and line order; their feedback goes into ``feedback``."""
    for path in paths:
        for _, item in read_facts(path):
            if isinstance(item, InferenceCall):
                yield item
            else:
                feedback.append(item)


def _through_scratch_store(paths: list[Path], filters: FactFilter) -> Selection:
    """``from_files`` for inputs too large for memory: the store applies the identity rule and
    the filter as it does for an import, so the selection is the in-memory one."""
    scratch = tempfile.TemporaryDirectory(prefix="lithify-export-")
    # Read by this export alone: no session summaries or text index (filling costs a quarter).
    store = open_store(f"sqlite:///{Path(scratch.name) / 'facts.db'}", summaries=False)

    def close() -> None:
        store.close()
        scratch.cleanup()

    try:
        feedback: list[Feedback] = []
        facts = _read(paths, feedback)
        while batch := list(islice(facts, _SPILL_BATCH)):
            store.insert_facts(batch)
        store.insert_feedback(feedback)
        selection = from_store(store, filters)
    except BaseException:
        close()
        raise

    def closing(items: Iterable[T]) -> Iterator[T]:
        try:
            yield from items
        finally:
            close()

    # Worker processes may read the scratch store in parts as they read any store.
    return replace(selection, facts=closing(selection.facts), close=close)


def from_facts(
    facts: Iterable[InferenceCall],
    feedback: Iterable[Feedback] = (),
    filters: FactFilter | None = None,
) -> Selection:
    """The facts ``filters`` select among ``facts`` (any order, other captures of a call
    included), after the identity rule chose each call's capture, as a store does."""
    filters = replace(filters or FactFilter(), order="session")
    per_call: dict[str, list[int]] = {}
    kept, _, aliases = resolve_facts(facts, left_out=per_call)
    selected = select(kept, filters)
    left_out, lacking = left_out_of(kept, per_call, filters)
    return Selection(
        plain(selected), list(feedback), aliases, left_out, len(selected), richer=lacking
    )


def left_out_of(
    calls: Iterable[InferenceCall], per_call: dict[str, list[int]], filters: FactFilter
) -> tuple[int, int]:
    """The captures the identity rule left out of the calls ``filters`` matches (on the calls'
    columns, as a store counts them: with no limit), and of those the richer ones
    (``resolve_facts``' ``left_out``)."""
    wanted = matcher(filters)
    dropped = richer = 0
    for f in calls:
        n = per_call.get(f.inference_call_id)
        if n is not None and wanted(f):
            dropped += n[0]
            richer += n[1]
    return dropped, richer


def select(kept: Iterable[InferenceCall], filters: FactFilter) -> list[InferenceCall]:
    """``filters`` over calls in memory (one capture each), as a store applies them: the facts
    ``matcher`` accepts, in ``filters.order``, at most ``filters.limit``."""
    if filters.order not in ("time", "session"):
        raise ValueError(f"unknown fact order {filters.order!r}: use 'time' or 'session'")
    key = call_order_key if filters.order == "time" else session_order_key
    wanted = matcher(filters)
    ordered = sorted((f for f in kept if wanted(f)), key=key)
    if filters.limit is None:
        return ordered
    return list(islice(ordered, max(0, int(filters.limit))))


def matcher(filters: FactFilter) -> Callable[[InferenceCall], bool]:
    """Whether a fact matches ``filters``' fields and time bounds (order and limit aside).

    As in SQL: a field matches one of its values (none when the list is empty; a fact without
    the field matches no value), and the time is ``started_at``, else ``observed_at``, else
    empty, compared as text in column form with ``since`` (inclusive) and ``until``.
    """
    fields: list[tuple[Callable[[InferenceCall], str | None], frozenset[str]]] = []
    for name, match in (
        ("session_id", filters.session_id),
        ("model", filters.model),
        ("source.name", filters.source),
        ("provider", filters.provider),
        ("trace_id", filters.trace_id),
    ):
        if match is not None:
            values = frozenset([match] if isinstance(match, str) else match)
            fields.append((attrgetter(name), values))
    since, until = _bound(filters.since), _bound(filters.until)
    if filters.part is not None:
        # A range in the database's text order: how an export splits a store's read into parts
        # (worker processes, Ray tasks), not a selection of calls.
        raise ValueError("part splits a store's read: facts in memory have no such order")

    def wanted(fact: InferenceCall) -> bool:
        for get, values in fields:
            if get(fact) not in values:
                return False
        if since is None and until is None:
            return True
        at = call_order_key(fact)[0]
        return (since is None or at >= since) and (until is None or at < until)

    return wanted


def _bound(value: str | datetime | None) -> str | None:
    return value if value is None or isinstance(value, str) else datetime_to_rfc3339(value)
