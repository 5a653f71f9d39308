"""The session summaries and the text index a store keeps as it writes (docs/store.md, Browsing
sessions): equal to a computation from scratch over the calls reads give, whatever the writes
(redeliveries, other captures of a call, ids that collide, feedback, any order, prepared or
plain); every sort's keyset pages cover every session once, in order; a search finds what a
substring test over the calls' message text finds; and an older store gains them when opened."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.core import codec
from lithify.model import Feedback, InferenceCall, Message, TextPart, ToolCallPart
from lithify.store import FactFilter, FactStore, SessionFilter, open_store
from lithify.store._sessions import message_text
from lithify.store.migrations import LATEST, MIGRATIONS
from tests.store.helpers import drop_summaries, make_fact, race_writers, raw_execute

SORTS = ("last", "first", "calls", "tokens", "duration")
TIMES = [None, "2025-06-01T10:00:00Z", "2025-06-01T10:00:07.250Z", "2025-06-02T00:00:00.5Z"]
TIMES += ["2025-06-01T09:59:59.999999999Z", "not a time"]
# Words that share substrings, case pairs that casefold alike (ß and SS), the index's separator
# and a NUL, so that a needle may sit across pieces or need the reading search.
WORDS = ["ab", "abc", "BCD", "ß", "ss", "x\x1fy", "q\x00r", "needle", "Needles", "€uro", " "]
ALPHABET = "abcdSsßq\x1f\x00 €"
TEXTS = [" ".join(WORDS[i : i + 3]) for i in range(0, len(WORDS), 2)]


@st.composite
def _fact(draw: st.DrawFn) -> InferenceCall:
    key = draw(st.sampled_from(["k0", "k1", "k2", "k3", "k4", "k5", "k6"]))
    # Few texts, so that captures of one id often agree (another capture of the call: a
    # variant) and sometimes contradict (a call of its own: a collision).
    text = draw(st.sampled_from(TEXTS))
    args = [{}, {"q": "needle"}, {"n": 10**30}][int(key[1]) % 3]
    return make_fact(
        key,
        session_id=draw(st.sampled_from(["s1", "s2", "s\x00z", "s4", None])),
        started_at=draw(st.sampled_from(TIMES)),
        observed_at=draw(st.sampled_from(TIMES)),
        input_tokens=draw(st.sampled_from([None, 0, 5, 100])),
        output_tokens=draw(st.sampled_from([None, 1, 7])),
        degradations=draw(st.sampled_from([{}, {"opaque_reasoning": 1}])),
        input_messages=[Message("user", [TextPart(text)])],
        output_messages=[Message("assistant", [ToolCallPart("c1", "find", args)], "tool_call")],
        raw={"capture": draw(st.integers(0, 1))},  # another capture of the same call, or not
    )


def _feedback(i: int, target: str) -> Feedback:
    return Feedback(
        feedback_id=f"fb-{i}",
        target_kind="session",
        target_id=target,
        name="label",
        value="good",
        source="test",
        observed_at="2025-06-03T00:00:00Z",
    )


WRITES = st.lists(_fact(), min_size=1, max_size=14)


def _write(store: FactStore, facts: list[InferenceCall], rng: random.Random) -> None:
    """The facts (some twice: a redelivery; some captured again) in random batches, in random
    order, some through ``insert_prepared`` (the receiver's path, which decodes bodies),
    feedback between."""
    # a call split as openai-v2's default mode records it: a span with the metadata and no
    # message, and log events with the messages alone (read filled with the span's metadata)
    split = {i: facts[i] for i in range(2, len(facts), 5)}
    items = [f for i, f in enumerate(facts) if i not in split]
    for i, f in split.items():
        items.append(msgspec.structs.replace(f, input_messages=[], output_messages=[]))
        items.append(
            msgspec.structs.replace(
                f,
                session_id=None,
                model=None,
                input_tokens=None,
                output_tokens=None,
                started_at=None,
                raw={"events": i},
            )
        )
    items += [facts[i] for i in range(0, len(facts), 3)]
    # another capture of a call: all the same but its source payload
    items += [msgspec.structs.replace(facts[i], raw={"log": i}) for i in range(1, len(facts), 4)]
    rng.shuffle(items)
    i = 0
    while i < len(items):
        n = rng.randint(1, 4)
        batch = items[i : i + n]
        if rng.random() < 0.5:  # a group commit: one or two requests' batches
            prep = store.preparer()
            cut = rng.randint(0, len(batch))
            fb = [_feedback(i, "s1")]
            store.insert_prepared(
                [prep(batch[:cut], fb), prep(batch[cut:])] if cut else [prep(batch, fb)]
            )
        else:
            store.insert_facts(batch)
            store.insert_feedback([_feedback(i, batch[0].session_id or "none")])
        i += n


def _at(f: InferenceCall) -> str:
    return f.started_at or f.observed_at or ""


def _duration(first: str, last: str) -> int | None:
    try:
        a = datetime.fromisoformat(first[:26].replace("Z", "") + "+00:00")
        b = datetime.fromisoformat(last[:26].replace("Z", "") + "+00:00")
    except ValueError:
        return None
    return (b - a) // timedelta(milliseconds=1)


def _expected(store: FactStore) -> dict[str, dict[str, Any]]:
    """Each session's summary computed from scratch: from the calls reads give."""
    out: dict[str, dict[str, Any]] = {}
    for f in store.iter_facts(FactFilter(order="session")):
        if f.session_id is None:
            continue
        s = out.setdefault(
            f.session_id,
            {"calls": 0, "ats": [], "input_tokens": 0, "output_tokens": 0, "degraded": 0},
        )
        s["calls"] += 1
        s["ats"].append(_at(f))
        s["input_tokens"] += f.input_tokens or 0
        s["output_tokens"] += f.output_tokens or 0
        s["degraded"] += bool(f.degradations)
    for s in out.values():
        s["first_at"], s["last_at"] = min(s["ats"]), max(s["ats"])
        s["duration_ms"] = _duration(s["first_at"], s["last_at"])
        del s["ats"]
    return out


def _pages(store: FactStore, f: SessionFilter) -> list[Any]:
    out: list[Any] = []
    after = None
    for _ in range(100):
        page = store.sessions(replace(f, after=after))
        out += page.sessions
        after = page.next
        if after is None:
            return out
    raise AssertionError("pagination did not end")


def _sort_key(sort: str, s: dict[str, Any]) -> Any:
    if sort == "tokens":
        return s["input_tokens"] + s["output_tokens"]
    if sort == "duration":
        return -1 if s["duration_ms"] is None else s["duration_ms"]
    return s[{"last": "last_at", "first": "first_at", "calls": "calls"}[sort]]


def _texts(store: FactStore) -> dict[str, list[str]]:
    """Each session's message text pieces, from the calls reads give."""
    out: dict[str, list[str]] = {}
    for f in store.iter_facts(FactFilter(order="session")):
        if f.session_id is not None:
            pieces = message_text([*f.input_messages, *f.output_messages])
            out.setdefault(f.session_id, []).extend(pieces)
    return out


PROPERTY = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(facts=WRITES, seed=st.integers(0, 2**16))
def test_summaries_equal_a_computation_from_scratch(
    new_store_url: Callable[[], str], facts: list[InferenceCall], seed: int
) -> None:
    with open_store(new_store_url()) as store:
        _write(store, facts, random.Random(seed))
        expected = _expected(store)
        listed = {s.session_id: s for s in _pages(store, SessionFilter(limit=2))}
        assert set(listed) == set(expected)
        for sid, s in listed.items():
            e = expected[sid]
            got = (s.calls, s.first_at or "", s.last_at or "", s.input_tokens, s.output_tokens)
            assert got == (
                e["calls"],
                e["first_at"],
                e["last_at"],
                e["input_tokens"],
                e["output_tokens"],
            )
            assert (s.degraded_calls, s.duration_ms) == (e["degraded"], e["duration_ms"])


@PROPERTY
@given(
    facts=WRITES,
    seed=st.integers(0, 2**16),
    sort=st.sampled_from(SORTS),
    descending=st.booleans(),
    limit=st.integers(1, 3),
)
def test_every_sort_pages_every_session_once_in_order(
    new_store_url: Callable[[], str],
    facts: list[InferenceCall],
    seed: int,
    sort: str,
    descending: bool,
    limit: int,
) -> None:
    with open_store(new_store_url()) as store:
        _write(store, facts, random.Random(seed))
        expected = _expected(store)
        got = [
            s.session_id
            for s in _pages(store, SessionFilter(sort=sort, descending=descending, limit=limit))
        ]

        # Ties broken by session id in the database's order: that of the column form (a NUL
        # is escaped).
        def rank(sid: str) -> tuple[Any, str]:
            return _sort_key(sort, expected[sid]), codec.col(sid)

        assert got == sorted(expected, key=rank, reverse=descending)


@PROPERTY
@given(
    facts=WRITES,
    seed=st.integers(0, 2**16),
    needle=st.one_of(st.sampled_from(WORDS), st.text(ALPHABET, min_size=1, max_size=5)),
    walk=st.booleans(),
)
def test_a_search_finds_the_sessions_whose_text_holds_the_needle(
    new_store_url: Callable[[], str],
    facts: list[InferenceCall],
    seed: int,
    needle: str,
    walk: bool,
) -> None:
    with open_store(new_store_url()) as store:
        if walk:  # as for a common needle: the list walked, each session asked in turn
            store.search_candidates = 0  # type: ignore[attr-defined]
            store.search_walk = 2  # type: ignore[attr-defined]
        _write(store, facts, random.Random(seed))
        wanted = needle.strip().casefold()
        texts = _texts(store)
        order = [s.session_id for s in _pages(store, SessionFilter(limit=500))]
        expected = [
            sid for sid in order if wanted and any(wanted in t.casefold() for t in texts[sid])
        ]
        found = [s.session_id for s in _pages(store, SessionFilter(text=needle, limit=2))]
        assert found == (expected if wanted else order)


def test_an_older_store_gains_its_summaries_and_text_index(store_url: str) -> None:
    """A version 6 store (no summaries) opened by this version: the migration fills them from
    its calls, and writes after it keep them."""
    facts = [
        make_fact(
            "a1",
            session_id="s-a",
            started_at=TIMES[1],
            input_tokens=3,
            input_messages=[Message("user", [TextPart("Where is the Needle?")])],
        ),
        make_fact("a2", session_id="s-a", started_at=TIMES[2], output_tokens=4),
        make_fact("b1", session_id="s-b", started_at=TIMES[3]),
    ]
    variant = msgspec.structs.replace(facts[2], raw={"other": 1})
    with open_store(store_url) as store:
        store.insert_facts([*facts, variant])
    raw_execute(
        store_url, *drop_summaries(store_url), "DELETE FROM schema_version WHERE version >= 7"
    )
    with open_store(store_url, migrations=MIGRATIONS[:6]) as old:
        assert old.schema_version() == 6
        old.insert_facts([make_fact("c1", session_id="s-c", started_at=TIMES[1])])
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST == 12
        page = store.sessions()
        assert [(s.session_id, s.calls) for s in page.sessions] == [
            ("s-b", 1),
            ("s-a", 2),
            ("s-c", 1),
        ]
        a = page.sessions[1]
        assert (a.input_tokens, a.output_tokens, a.duration_ms) == (3, 4, 7250)
        assert [s.session_id for s in store.sessions(SessionFilter(text="NEEDLE")).sessions] == [
            "s-a"
        ]
        store.insert_facts(
            [
                make_fact(
                    "a3",
                    session_id="s-a",
                    started_at=TIMES[3],
                    input_messages=[Message("user", [TextPart("haystack")])],
                )
            ]
        )
        assert [s.session_id for s in store.sessions(SessionFilter(text="hayst")).sessions] == [
            "s-a"
        ]
        assert store.sessions(SessionFilter(sort="calls")).sessions[0].calls == 3


def test_writers_side_by_side_keep_the_summaries(store_url: str) -> None:
    """Four writers, each on a connection of its own, insert the same calls of three sessions in
    orders of their own (PostgreSQL runs them together): each call is counted once, and its
    text found."""
    facts = [
        make_fact(
            f"r{i}",
            session_id=f"s{i % 3}",
            started_at=TIMES[1 + i % 3],
            input_tokens=i,
            input_messages=[Message("user", [TextPart(f"message {i} holds word{i % 7}z")])],
        )
        for i in range(60)
    ]
    with open_store(store_url):
        pass  # migrated before the race
    race_writers(store_url, facts, batch=5)
    with open_store(store_url) as store:
        expected = _expected(store)
        listed = {s.session_id: s for s in _pages(store, SessionFilter(limit=2))}
        assert {sid: (s.calls, s.input_tokens) for sid, s in listed.items()} == {
            sid: (e["calls"], e["input_tokens"]) for sid, e in expected.items()
        }
        assert sum(s.calls for s in listed.values()) == 60
        found = _pages(store, SessionFilter(text="word4z"))
        assert sorted(s.session_id for s in found) == sorted({f"s{i % 3}" for i in range(4, 60, 7)})


def test_a_store_without_summaries_reads_the_same_and_lists_no_session(
    new_store_url: Callable[[], str],
) -> None:
    """``open_store(summaries=False)`` (the export's scratch store): the same facts, captures
    and session order as a store that keeps them, and no session summaries or text index."""
    rng = random.Random(7)
    facts = [
        make_fact(
            f"c{i}",
            session_id=rng.choice([None, "s1", "s2", "s3"]),
            started_at=rng.choice(TIMES[1:4]),
            output_messages=[Message("assistant", [TextPart(rng.choice(TEXTS))], "stop")],
        )
        for i in range(30)
    ]
    facts += [msgspec.structs.replace(facts[0], output_messages=[])]  # another capture
    with open_store(new_store_url()) as kept, open_store(new_store_url(), summaries=False) as bare:
        for store in (kept, bare):
            store.insert_facts(facts[:17])
            store.insert_facts(facts[17:])
        for order in ("time", "session"):
            f = FactFilter(order=order)  # type: ignore[arg-type]
            read = [codec.encode(x) for x in bare.iter_facts(f)]
            assert read == [codec.encode(x) for x in kept.iter_facts(f)]
        assert bare.count_dropped() == kept.count_dropped() == 1
        assert kept.sessions(SessionFilter()).sessions
        assert not bare.sessions(SessionFilter()).sessions
