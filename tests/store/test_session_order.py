"""``FactFilter(order="session")``: facts grouped by session for derivation, on both backends,
in the order ``lithify.derive.sessions.sort_facts`` gives fact files."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lithify.core.codec import encode
from lithify.derive.segments import iter_segments
from lithify.derive.sessions import session_order_key, sort_facts
from lithify.model import InferenceCall
from lithify.store import FactFilter, _sql, open_store
from lithify.store._query import fact_where
from tests.derive.helpers import EXAMPLES, facts_of
from tests.store.helpers import make_fact

# Sessions whose column form differs from the text (NUL, lone surrogate, the escape marker)
# and non-ASCII ones: both databases must order them as Python orders their column forms.
SESSIONS = ["b", "a", "é", "Z", "a\x00b", "\ud800x", "lithify:esc:00", "a b", None]


def _facts() -> list[InferenceCall]:
    out = []
    for i in range(40):
        t = f"2025-03-01T00:{i % 7:02d}:00.000000000Z"
        out.append(
            make_fact(
                f"o{i}",
                session_id=SESSIONS[i % len(SESSIONS)],
                started_at=t if i % 3 == 0 else None,
                observed_at=t if i % 3 == 1 else None,
                model=["m1", "m2"][i % 2],
            )
        )
    return out


def _ids(facts: list[InferenceCall]) -> list[str]:
    return [f.inference_call_id for f in facts]


def test_session_order_groups_sessions_with_sessionless_facts_last(store_url: str) -> None:
    facts = _facts()
    shuffled = facts[:]
    random.Random(3).shuffle(shuffled)
    want = sorted(facts, key=session_order_key)
    assert _ids(sort_facts(shuffled)) == _ids(want)
    with open_store(store_url) as store:
        for i in range(0, len(shuffled), 9):
            store.insert_facts(shuffled[i : i + 9])
        got = list(store.iter_facts(FactFilter(order="session"), batch_size=4))
        assert _ids(got) == _ids(want)
        sessions = [f.session_id for f in got]
        runs = [sid for i, sid in enumerate(sessions) if i == 0 or sessions[i - 1] != sid]
        # One run per session, sessions by column form in code point order (escaped forms are
        # "lithify:esc:" + hex), sessionless facts last.
        assert runs == ["Z", "a", "a b", "b", "a\x00b", "lithify:esc:00", "\ud800x", "é", None]
        assert sessions.count(None) == 4
        # The default order is unchanged.
        assert _ids(list(store.iter_facts())) == _ids(
            list(store.iter_facts(FactFilter(order="time")))
        )


@pytest.mark.parametrize("limit", [0, 3, 35, 37, 100])
def test_session_order_with_filters_and_limits(
    store_url: str, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sql, "_UNPACKED", 3)  # bodies unpacked 3 at a time: limits cut chunks
    facts = _facts()
    flt = FactFilter(model="m1", since="2025-03-01T00:01", order="session", limit=limit)
    want = [
        f
        for f in sorted(facts, key=session_order_key)
        if f.model == "m1" and (f.started_at or f.observed_at or "") >= "2025-03-01T00:01"
    ]
    with open_store(store_url) as store:
        store.insert_facts(facts)
        assert _ids(list(store.iter_facts(flt, batch_size=2))) == _ids(want)[:limit]
        assert store.count(flt) == len(want)


def test_an_unknown_order_is_refused(store_url: str) -> None:
    with open_store(store_url) as store, pytest.raises(ValueError, match="unknown fact order"):
        list(store.iter_facts(FactFilter(order="random")))  # type: ignore[arg-type]


def test_segments_from_the_store_equal_segments_from_files(store_url: str) -> None:
    # The recorded examples: their log events capture the spans' calls again, without the
    # session; the store reads back the capture files keep, whatever arrived first.
    facts = [f for path in sorted(EXAMPLES.glob("*.json")) for f in facts_of(path)] + _facts()
    from_files = [encode(s) for s in iter_segments(sort_facts(facts))]
    random.Random(5).shuffle(facts)
    with open_store(store_url) as store:
        store.insert_facts(facts[:20])
        store.insert_facts(facts[20:])
        from_store = [
            encode(s) for s in iter_segments(store.iter_facts(FactFilter(order="session")))
        ]
    assert from_store == from_files
    assert len(from_files) > 10


@pytest.mark.parametrize("kind", ["session", "time"])
def test_a_part_of_the_session_read_walks_its_own_rows(tmp_path: Path, kind: str) -> None:
    """Export workers read a store in parts (``session_parts``). A part's query must walk the
    index over its own rows only: a bound under an OR is no bound to an index, which was then
    walked from its start (sessions) or to its end (calls without one), and reading a store in
    parts took time quadratic in its size. Counted in SQLite VM steps (its progress handler),
    not timed: a part near the end costs what one near the start does."""
    path = tmp_path / "facts.db"
    facts = [
        make_fact(
            f"c{i:05d}",
            session_id=f"s{i // 4:04d}" if kind == "session" else None,
            started_at=f"2025-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
            observed_at=f"2025-01-{1 + i // 3600:02d}T00:00:00Z",
        )
        for i in range(4000)
    ]
    with open_store(f"sqlite:///{path}") as store:
        store.insert_facts(facts)
        parts = store.session_parts(FactFilter(order="session"), 40)
    assert len(parts) > 50 and {b[0] for p in parts[1:-1] for b in p if b} == {kind}
    conn = sqlite3.connect(path)
    cond, order = {
        "session": ("session_id IS NOT NULL", "session_id, sort_at, inference_call_id"),
        "time": ("session_id IS NULL", "sort_at, inference_call_id"),
    }[kind]

    def steps(part: Any) -> tuple[int, int]:
        where, params = fact_where(FactFilter(order="session", part=part))
        ticks = 0

        def tick() -> int:
            nonlocal ticks
            ticks += 1
            return 0

        conn.set_progress_handler(tick, 100)
        sql = f"SELECT inference_call_id FROM facts{where} AND {cond} ORDER BY {order}"
        rows = conn.execute(sql, params).fetchall()
        conn.set_progress_handler(None, 0)
        return ticks, len(rows)

    # Steps per row read: the same near the start and near the end (bounded from one side
    # only, one of the two walks most of the index).
    (early, n_early), (late, n_late) = steps(parts[1]), steps(parts[-2])
    conn.close()
    assert n_early >= 40 and n_late >= 40
    per_row = sorted([early / n_early, late / n_late])
    assert per_row[1] <= 2 * per_row[0] + 0.25, (early, n_early, late, n_late)
