"""The session list's face (ui/listing.py): its sort and direction parameters, each line's
segment count (derived by derivation's own function, within a time budget, then kept), and the
JSON twin paging a sorted list, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from urllib.parse import urlencode

import pytest

from lithify.derive.segments import segment_session
from lithify.store import FactFilter, FactStore, open_store
from lithify.ui import listing
from tests.http_client import request
from tests.ui.conftest import HOSTILE_SESSION, running, sample_facts


@pytest.fixture(params=["sqlite", "postgres"])
def both(request: pytest.FixtureRequest) -> FactStore:
    url = request.getfixturevalue(
        {"sqlite": "sqlite_store_url", "postgres": "pg_store_url"}[request.param]
    )
    store = open_store(url)
    store.insert_facts(sample_facts())
    request.addfinalizer(store.close)
    return store


def test_sort_parameters() -> None:
    f = listing.session_filter({"sort": "tokens", "dir": "asc"})
    assert (f.sort, f.descending) == ("tokens", False)
    f = listing.session_filter({})
    assert (f.sort, f.descending) == ("last", True)
    with pytest.raises(ValueError, match="sort is one of"):
        listing.session_filter({"sort": "size"})
    with pytest.raises(ValueError, match="dir is asc or desc"):
        listing.session_filter({"dir": "up"})


def _segments(store: FactStore, sid: str) -> int:
    calls = list(store.iter_facts(FactFilter(session_id=sid, order="session")))
    return len(segment_session(sid, calls))


def test_each_line_has_its_segment_count(both: FactStore) -> None:
    listing.forget_segment_counts()
    page = both.sessions().sessions
    expected = [_segments(both, s.session_id) for s in page]
    assert dict(zip([s.session_id for s in page], expected, strict=True))["agent-1"] == 2
    # no time to derive any in the request: none known yet, and the list still answers;
    # the server's thread derives them after it
    assert listing.segment_counts(both, page, budget=-1.0) == [None] * len(page)
    deadline = time.monotonic() + 60
    while (counts := listing.segment_counts(both, page, budget=-1.0)) != expected:
        assert None in counts and time.monotonic() < deadline, counts
        time.sleep(0.05)
    # time enough: every count derived in the request
    listing.forget_segment_counts()
    assert listing.segment_counts(both, page, budget=60.0) == expected
    data = listing.sessions(both, {"sort": "calls"})
    got = {s["session_id"]: s["segments"] for s in data["sessions"]}
    assert got == {s.session_id: n for s, n in zip(page, expected, strict=True)}


def test_the_json_twin_pages_a_sorted_list(both: FactStore) -> None:
    with running(both) as v:

        def get(params: dict[str, object]) -> dict[str, object]:
            reply = request(v.port, "GET", "/api/sessions?" + urlencode(params))
            assert reply.status == 200, reply.body
            return reply.json()  # type: ignore[no-any-return]

        first = get({"sort": "calls", "limit": 1})
        assert [s["session_id"] for s in first["sessions"]] == ["agent-1"]  # type: ignore[index]
        assert first["filter"] == {"sort": "calls", "limit": "1"}
        seen = [s["session_id"] for s in first["sessions"]]  # type: ignore[union-attr]
        after = first["next"]
        while after:
            page = get({"sort": "calls", "limit": 1, "after": after})
            seen += [s["session_id"] for s in page["sessions"]]  # type: ignore[union-attr]
            after = page["next"]
        assert sorted(seen) == sorted(["agent-1", "chat-2", "chat-3", HOSTILE_SESSION])
        assert len(seen) == 4
        oldest = get({"sort": "first", "dir": "asc"})
        assert oldest["sessions"][0]["session_id"] == "agent-1"  # type: ignore[index]
        # a cursor of one sort is refused by another
        refused = request(
            v.port, "GET", "/api/sessions?" + urlencode({"sort": "tokens", "after": first["next"]})
        )
        assert refused.status == 400
