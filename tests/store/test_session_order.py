"""``FactFilter(order="session")``: facts grouped by session for derivation, on both backends,
in the order ``lithify.derive.sessions.sort_facts`` gives fact files."""

from __future__ import annotations

import random

import pytest

from lithify.core.codec import encode
from lithify.derive.segments import iter_segments
from lithify.derive.sessions import session_order_key, sort_facts
from lithify.model import InferenceCall
from lithify.store import FactFilter, open_store
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
def test_session_order_with_filters_and_limits(store_url: str, limit: int) -> None:
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
