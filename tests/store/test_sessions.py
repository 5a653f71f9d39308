"""Browsing by session (``FactStore.sessions``), feedback coverage and size: the reads the web
viewer makes, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from dataclasses import replace

import msgspec
import pytest

from lithify.model import Feedback, Message, TextPart, ToolCallPart
from lithify.store import FactStore, SessionFilter, SessionPage, open_store
from tests.store.helpers import make_fact


def _t(second: int) -> str:
    return f"2025-06-01T10:00:{second:02d}.000000000Z"


def _fb(kind: str, target: str, name: str, value: object, n: str = "") -> Feedback:
    return Feedback(
        feedback_id=f"fb-{kind}-{target}-{name}-{value}{n}",
        target_kind=kind,  # type: ignore[arg-type]
        target_id=target,
        name=name,
        value=value,  # type: ignore[arg-type]
        source="test",
        observed_at=_t(59),
    )


FACTS = [
    make_fact(
        "a1",
        session_id="s-a",
        model="gpt",
        provider="openai",
        started_at=_t(1),
        input_tokens=10,
        output_tokens=1,
    ),
    make_fact(
        "a2",
        session_id="s-a",
        model="gpt",
        provider="openai",
        started_at=_t(5),
        input_tokens=20,
        output_tokens=2,
    ),
    make_fact(
        "b1",
        session_id="s-b",
        model="claude",
        provider="anthropic",
        started_at=_t(3),
        degradations={"opaque_reasoning": 1},
    ),
    make_fact(
        "c1",
        session_id="s-\x00c",
        model="gpt",
        provider="openai",
        started_at=_t(9),
        input_messages=[Message("user", [TextPart("Where is the NEEDLE hidden?")])],
    ),
    make_fact(
        "d1",
        session_id="s-d",
        model="gemini",
        source="proxy",
        started_at=_t(7),
        output_messages=[
            Message("assistant", [ToolCallPart("t1", "grep", {"pattern": "needle"})], "tool_call")
        ],
    ),
    make_fact("lone", model="gpt", started_at=_t(8)),  # no session: not listed
]


def _ids(page: SessionPage) -> list[str]:
    return [s.session_id for s in page.sessions]


def _all(store: FactStore, f: SessionFilter) -> list[str]:
    """Every page, following ``next``."""
    out: list[str] = []
    after = None
    for _ in range(50):
        page = store.sessions(replace(f, after=after))
        out += _ids(page)
        after = page.next
        if after is None:
            return out
    raise AssertionError("pagination did not end")


def test_sessions_newest_first_with_their_totals(store_url: str) -> None:
    with open_store(store_url) as store:
        store.insert_facts(FACTS)
        page = store.sessions()
        assert _ids(page) == ["s-\x00c", "s-d", "s-a", "s-b"]
        assert page.next is None
        a = page.sessions[2]
        assert (a.calls, a.first_at, a.last_at) == (2, _t(1), _t(5))
        assert (a.input_tokens, a.output_tokens, a.degraded_calls) == (30, 3, 0)
        assert (a.models, a.providers, a.sources) == (["gpt"], ["openai"], ["otlp"])
        assert page.sessions[3].degraded_calls == 1
        assert page.sessions[1].sources == ["proxy"]


def test_keyset_pages_cover_every_session_once(store_url: str) -> None:
    with open_store(store_url) as store:
        store.insert_facts(FACTS)
        first = store.sessions(SessionFilter(limit=3))
        assert len(first.sessions) == 3 and first.next is not None
        # a session written after the first page was read, older than its cursor, still comes
        store.insert_facts([make_fact("e1", session_id="s-e", started_at=_t(0))])
        rest = store.sessions(SessionFilter(limit=3, after=first.next))
        assert _ids(rest) == ["s-b", "s-e"] and rest.next is None
        assert _all(store, SessionFilter(limit=1)) == ["s-\x00c", "s-d", "s-a", "s-b", "s-e"]
        with pytest.raises(ValueError):
            store.sessions(SessionFilter(after="not a cursor"))


def test_a_call_captured_twice_is_counted_once(store_url: str) -> None:
    span = make_fact("span", session_id="s-x", trace_id="t", span_id="s", started_at=_t(2))
    log = msgspec.structs.replace(span, raw={"log": 1})  # another capture of the same call
    with open_store(store_url) as store:
        assert store.insert_facts([span, log]).variants == 1
        (x,) = store.sessions().sessions
        assert (x.session_id, x.calls) == ("s-x", 1)


def test_filters(store_url: str) -> None:
    with open_store(store_url) as store:
        store.insert_facts(FACTS)
        assert _ids(store.sessions(SessionFilter(model="claude"))) == ["s-b"]
        assert _ids(store.sessions(SessionFilter(provider=["openai"]))) == ["s-\x00c", "s-a"]
        assert _ids(store.sessions(SessionFilter(source="proxy"))) == ["s-d"]
        assert _ids(store.sessions(SessionFilter(since=_t(4), until=_t(8)))) == ["s-d", "s-a"]
        # a session is listed whole when one of its calls matches
        (a,) = store.sessions(SessionFilter(since=_t(5))).sessions[2:]
        assert (a.session_id, a.calls) == ("s-a", 2)


def test_feedback_filters_and_labels(store_url: str) -> None:
    a2 = FACTS[1].inference_call_id
    with open_store(store_url) as store:
        store.insert_facts(FACTS)
        store.insert_feedback(
            [
                _fb("session", "s-b", "label", "good"),
                _fb("session", "s-b", "score", 1),
                _fb("call", a2, "label", "bad"),
                _fb("session", "s-d", "exclude", True),
            ]
        )
        assert _ids(store.sessions(SessionFilter(has_feedback=True))) == ["s-d", "s-a", "s-b"]
        assert _ids(store.sessions(SessionFilter(has_feedback=False))) == ["s-\x00c"]
        labelled = SessionFilter(feedback=(("label", "good"),))
        assert _ids(store.sessions(labelled)) == ["s-b"]
        assert _ids(store.sessions(SessionFilter(feedback=(("label", "bad"),)))) == ["s-a"]
        assert _ids(store.sessions(SessionFilter(feedback=(("score", 1.0),)))) == ["s-b"]
        assert _ids(store.sessions(SessionFilter(feedback=(("exclude", True),)))) == ["s-d"]
        # types never mix: true is not 1
        assert _ids(store.sessions(SessionFilter(feedback=(("exclude", 1),)))) == []
        by_id = {s.session_id: s for s in store.sessions().sessions}
        assert by_id["s-b"].labels == {"label": ["good"], "score": [1]}
        assert (by_id["s-b"].feedback, by_id["s-a"].feedback, by_id["s-a"].labels) == (2, 1, {})
        cov = store.feedback_coverage()
        assert (cov.feedback, cov.calls, cov.sessions) == (4, 1, 3)
        assert cov.by_name == [("label", 2), ("exclude", 1), ("score", 1)]


def test_text_search_reads_message_text(store_url: str) -> None:
    with open_store(store_url) as store:
        store.insert_facts(FACTS)
        page = store.sessions(SessionFilter(text="needle"))
        assert _ids(page) == ["s-\x00c", "s-d"]  # case-insensitive; tool arguments too
        assert page.next is None and page.scanned == 2  # the sessions the index named
        assert _all(store, SessionFilter(text="NEEDLE", limit=1)) == ["s-\x00c", "s-d"]
        assert _ids(store.sessions(SessionFilter(text="needle", model="gemini"))) == ["s-d"]
        assert _ids(store.sessions(SessionFilter(text="What is a1?"))) == ["s-a"]
        assert _ids(store.sessions(SessionFilter(text="nowhere to be found"))) == []


def test_size_grows_with_the_facts(store_url: str) -> None:
    with open_store(store_url) as store:
        empty = store.size()
        assert empty > 0
        store.insert_facts(
            make_fact(f"big-{i}", session_id="s", raw={"pad": "x" * 20_000}) for i in range(40)
        )
        assert store.size() > empty
