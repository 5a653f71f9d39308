"""Fact sources: a store and facts in memory (fact files) select the same facts for the same
``FactFilter``, every field of it honoured, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.core.codec import encode
from lithify.core.factfile import encode_line, fact_sha256
from lithify.derive.sessions import resolve_facts
from lithify.export import (
    ExportOptions,
    Selection,
    export,
    from_facts,
    from_files,
    from_store,
    select,
)
from lithify.model import InferenceCall, Message, ReasoningPart, TextPart
from lithify.store import FactFilter, open_store
from tests.export.helpers import feedback
from tests.scale.facts import generated, write_files
from tests.store.helpers import make_fact

TIMES = [
    "2025-05-01T10:00:00.000000000Z",
    "2025-05-01T10:00:05.000000000Z",
    "2025-05-01T11:30:00.000000000Z",
]
SESSIONS = [None, "s1", "s2", "a\x00b", "é"]
MODELS = [None, "m1", "m2"]
SOURCES = ["otlp", "proxy"]
PROVIDERS = [None, "openai", "anthropic"]
TRACES = [None, "t1", "t2"]
BOUNDS = [
    "2025-05-01",
    "2025-05-01T10:00:05",
    "2025-05-01T10:00:05.000000000Z",
    "2025-05-02",
    datetime(2025, 5, 1, 10, 0, 5),  # naive: UTC
    datetime(2025, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=2))),  # 10:00 UTC
    datetime(2025, 5, 1, 11, 0, tzinfo=UTC),
]


@st.composite
def _captures(draw: st.DrawFn) -> list[InferenceCall]:
    """Captures of a few calls that share identities at random (so the identity rule keeps
    some and drops others), with every field a filter reads drawn from a small pool."""
    out = []
    for n in range(draw(st.integers(1, 9))):
        steps = [ReasoningPart("Think.")] * draw(st.integers(0, 1))
        text = TextPart("Sunny in Paris." if draw(st.booleans()) else "Sunny")
        t = draw(st.sampled_from([None, *TIMES]))
        out.append(
            make_fact(
                draw(st.sampled_from("abcd")),
                model_call_id=draw(st.sampled_from([None, "r1", "r2"])),
                session_id=draw(st.sampled_from(SESSIONS)),
                started_at=t if draw(st.booleans()) else None,
                observed_at=t,
                model=draw(st.sampled_from(MODELS)),
                source=draw(st.sampled_from(SOURCES)),
                provider=draw(st.sampled_from(PROVIDERS)),
                trace_id=draw(st.sampled_from(TRACES)),
                output_messages=[Message("assistant", [*steps, text], "stop")],
                raw={"capture": n},
            )
        )
    return out


def _match(pool: list[Any]) -> st.SearchStrategy[Any]:
    values = [v for v in pool if v is not None]
    return st.one_of(st.none(), st.sampled_from(values), st.lists(st.sampled_from(values)))


# One strategy per FactFilter field: a field added to FactFilter fails this test until it is
# given one here, and so until `select` is checked to honour it.
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "session_id": _match(SESSIONS),
    "model": _match(MODELS),
    "source": _match(SOURCES),
    "provider": _match(PROVIDERS),
    "trace_id": _match(TRACES),
    "since": st.none() | st.sampled_from(BOUNDS),
    "until": st.none() | st.sampled_from(BOUNDS),
    "limit": st.none() | st.integers(0, 10),
    "order": st.sampled_from(["time", "session"]),
    # A store's read split into parts, not a selection: read by every part below.
    "part": st.none(),
}


def test_every_filter_field_is_drawn() -> None:
    assert set(FIELDS) == {f.name for f in dataclasses.fields(FactFilter)}


def _ids(facts: Any) -> list[bytes]:
    return [encode(f) for f in facts]


def _calls(selection: Selection) -> list[InferenceCall]:
    """The facts of ``selection``, without the digests a store kept."""
    return [f for f, _ in selection.facts]


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(captures=_captures(), filters=st.fixed_dictionaries(FIELDS).map(lambda d: FactFilter(**d)))
def test_a_store_and_facts_in_memory_select_the_same_facts(
    new_store_url: Callable[[], str], captures: list[InferenceCall], filters: FactFilter
) -> None:
    kept, _, _ = resolve_facts(captures)
    targets = sorted({f.inference_call_id for f in captures})
    fb = [feedback(t, 1) for t in targets]
    with open_store(new_store_url()) as store:
        store.insert_facts(captures)
        store.insert_feedback(fb)
        # The filter itself, in either order.
        assert _ids(store.iter_facts(filters)) == _ids(select(kept, filters))
        # The sources export reads from: always grouped by session.
        stored, held = from_store(store, filters), from_facts(captures, fb, filters)
        assert _ids(_calls(stored)) == _ids(_calls(held))
        assert (stored.dropped, stored.total) == (held.dropped, held.total)
        # Of those left out, the captures richer than the one read: by SQL as in memory.
        assert stored.richer == held.richer <= held.dropped
        assert stored.aliases == {k: v for k, v in held.aliases.items() if k in targets}
        assert _ids(stored.feedback) == _ids(held.feedback)


def test_every_filter_narrows_fact_files_as_it_narrows_a_store(
    tmp_path: Path, store_url: str
) -> None:
    """Provider, trace and limit too (an earlier reader of fact files ignored them); time
    bounds at a fact's very time."""
    facts = [
        make_fact(
            f"c{i}",
            session_id=f"s{i % 3}",
            provider=PROVIDERS[1 + i % 2],
            trace_id=TRACES[1 + i % 2],
            started_at=TIMES[i % 3],
        )
        for i in range(12)
    ]
    path = tmp_path / "facts.jsonl"
    path.write_bytes(b"".join(encode_line(f) for f in reversed(facts)))
    with open_store(store_url) as store:
        store.insert_facts(facts)
        for filters in (
            FactFilter(provider="openai"),
            FactFilter(trace_id=["t2"]),
            FactFilter(limit=5),
            FactFilter(provider="anthropic", trace_id="t2", limit=2),
            FactFilter(since=TIMES[1]),  # inclusive
            FactFilter(until=datetime(2025, 5, 1, 10, 0, 5)),  # exclusive, naive: UTC
            FactFilter(session_id=[]),
        ):
            files = _calls(from_files([path], filters))
            assert _ids(files) == _ids(_calls(from_store(store, filters))), filters
            assert len(files) < len(facts)


def test_an_unknown_order_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fact order"):
        select([], FactFilter(order="random"))  # type: ignore[arg-type]


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    captures=_captures(),
    filters=st.fixed_dictionaries({**FIELDS, "limit": st.none()}).map(lambda d: FactFilter(**d)),
    size=st.integers(1, 4),
)
def test_a_store_read_by_session_parts_is_the_session_read_in_order(
    new_store_url: Callable[[], str], captures: list[InferenceCall], filters: FactFilter, size: int
) -> None:
    """The session ranges an export's workers read a store by (``FactStore.session_parts``),
    read one after the other, give the selection's calls once each in session order — sessions
    with NUL and non-ASCII ids, calls without a session, captures sharing ids — as the
    ``StoreQuery`` a selection hands its workers."""
    with open_store(new_store_url()) as store:
        store.insert_facts(captures)
        session = dataclasses.replace(filters, order="session")
        query = from_store(store, filters).query
        assert query is not None and query.filters == session
        parts = store.session_parts(session, size)
        assert parts[0][0] is None and parts[-1][1] is None
        assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
        digested = [pair for part in parts for pair in query.read(store, part)]
        read = [f for f, _ in digested]
        assert _ids(read) == _ids(store.iter_facts(session))
        # A kept digest is the one of the fact as read (a capture read under its call's id, its
        # JSON changed, has none).
        assert all(sha in (None, fact_sha256(f)) for f, sha in digested)
        counts = [store.count(dataclasses.replace(session, part=p)) for p in parts]
        assert sum(counts) == store.count(session)
        # Parts hold whole sessions, at least ``size`` calls each but the last.
        assert all(n >= size for n in counts[:-1])
    with pytest.raises(ValueError, match="part"):
        select(captures, FactFilter(part=(("session", "a"), None)))


def test_calls_without_a_session_are_cut_into_parts_by_time(store_url: str) -> None:
    """A store of calls without sessions (proxy traffic without a session header) is not one
    part: its calls are cut by time, those of one time kept together, and read in order."""
    times = [TIMES[i % 3] for i in range(9)]
    facts = [make_fact(f"c{i}", session_id=None, started_at=t) for i, t in enumerate(times)]
    facts.append(make_fact("s", session_id="s1", started_at=TIMES[0]))
    with open_store(store_url) as store:
        store.insert_facts(facts)
        session = FactFilter(order="session")
        parts = store.session_parts(session, 2)
        # The session's call, then the three calls of each time: a cut once two are held.
        assert parts == [
            (None, ("time", TIMES[1])),
            (("time", TIMES[1]), ("time", TIMES[2])),
            (("time", TIMES[2]), None),
        ]
        read = [f for p in parts for f in store.iter_facts(dataclasses.replace(session, part=p))]
        assert _ids(read) == _ids(store.iter_facts(session))


def test_a_store_query_never_shows_its_password() -> None:
    from lithify.export import Selection
    from lithify.export.source import StoreQuery

    query = StoreQuery("postgresql://lithify:s3cret@db.internal/facts", FactFilter())
    assert "s3cret" not in repr(query) and "s3cret" not in repr(Selection([], query=query))


def test_a_limited_selection_is_read_by_this_process_only(store_url: str) -> None:
    """A limit counts calls across the whole read, so no worker reads a part of it."""
    with open_store(store_url) as store:
        store.insert_facts([make_fact("c1", session_id="s1")])
        assert from_store(store, FactFilter(limit=1)).query is None
        assert from_store(store, FactFilter()).query is not None


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(captures=_captures(), filters=st.fixed_dictionaries(FIELDS).map(lambda d: FactFilter(**d)))
def test_fact_files_too_large_for_memory_select_what_memory_would(
    tmp_path_factory: pytest.TempPathFactory, captures: list[InferenceCall], filters: FactFilter
) -> None:
    """Past ``in_memory_bytes`` the files go through a scratch store, which is then removed;
    the selection is the in-memory one, field by field."""
    folder = tmp_path_factory.mktemp("facts")
    targets = sorted({f.inference_call_id for f in captures})
    fb = [feedback(t, 1) for t in targets]
    path = folder / "facts.jsonl"
    path.write_bytes(b"".join(encode_line(f) for f in [*captures, *fb, *fb[:1]]))
    held = from_files([path], filters)
    # A temporary folder of its own: other tests' exports run beside this one.
    tmp, tempfile.tempdir = tempfile.tempdir, str(tmp_path_factory.mktemp("tmp"))
    try:
        spilled = from_files([path], filters, in_memory_bytes=0)
        scratch = {p for p in Path(tempfile.gettempdir()).glob("lithify-export-*")}
        assert scratch, "the scratch store is where the facts are read from"
        assert _ids(_calls(spilled)) == _ids(_calls(held))
        assert not {p for p in Path(tempfile.gettempdir()).glob("lithify-export-*")}
    finally:
        tempfile.tempdir = tmp
    assert (spilled.dropped, spilled.richer, spilled.total) == (
        held.dropped,
        held.richer,
        held.total,
    )
    assert spilled.aliases == {k: v for k, v in held.aliases.items() if k in targets}
    # A redelivered feedback line is one fact in a store, as derivation counts it.
    assert _ids(spilled.feedback) == list(dict.fromkeys(_ids(held.feedback)))


@pytest.mark.parametrize(
    ("kind", "profile"), [("sft", "trl"), ("dpo", "canonical"), ("rl", "canonical")]
)
def test_an_export_through_the_scratch_store_writes_the_same_bytes(
    tmp_path: Path, kind: str, profile: str
) -> None:
    """Every file of the export folder (rows, manifest, card, fact digests), shuffled fact files
    with redeliveries, other captures and feedback."""
    facts, fb = generated(7, sessions=30)
    paths = write_files(tmp_path / "in", facts, fb, seed=7, files=4)
    options = ExportOptions(kind=kind, profile=profile, eval_fraction=0.3)
    held = export(from_files(paths, FactFilter()), tmp_path / "held", options)
    spilled = export(
        from_files(paths, FactFilter(), in_memory_bytes=0), tmp_path / "spilled", options
    )
    assert held.rows["train"] + held.rows["eval"] > 0
    counted = ("output", "files")  # where each wrote, not what

    def summary(s: Any) -> dict[str, Any]:
        return {k: v for k, v in msgspec.to_builtins(s).items() if k not in counted}

    assert summary(spilled) == summary(held)
    names = sorted(p.name for p in (tmp_path / "held").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "spilled").iterdir())
    for name in names:
        assert (tmp_path / "spilled" / name).read_bytes() == (
            tmp_path / "held" / name
        ).read_bytes(), name
