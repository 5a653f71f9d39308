"""Every writer stores the same rows: facts written through ``insert_facts`` (import, the proxy),
through ``insert_prepared`` with rows built elsewhere (the receiver's workers, which also read
each fact's text for the index), and through ``insert_prepared`` with rows that carry no text
(read from their bodies by the writer) give the same facts, variants, session summaries and
text index documents, on SQLite and PostgreSQL."""

from __future__ import annotations

import pickle
import random
import sqlite3
from collections.abc import Callable
from typing import Any

import msgspec
import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.core import codec
from lithify.model import InferenceCall, Message, TextPart, ToolCallPart
from lithify.store import FactStore, Prepared, open_store, sqlite_path
from lithify.store._text import SEP, Read, SessionText, text_note
from tests.store.helpers import make_fact

# Texts that casefold, that are empty, that hold what the index cannot (NUL, a lone surrogate:
# an escaped body) or its separator, and tool arguments past msgpack's integers (escaped too).
TEXTS = ["Hello", "STRASSE ß", "", "a\x00b", "x\ud800y", f"p{SEP}q", "€uro needle", "ok"]
ARGS = [{}, {"q": "Needle"}, {"n": 10**30}]


@st.composite
def _conversations(draw: st.DrawFn) -> list[InferenceCall]:
    """Agent loops: each call of a session replays the conversation so far (sometimes only
    part of it) and adds a message; a few calls have no session."""
    facts: list[InferenceCall] = []
    for s in range(draw(st.integers(1, 3))):
        sid = draw(st.sampled_from([f"s{s}", None])) if s == 2 else f"s{s}"
        said: list[Message] = []
        for k in range(draw(st.integers(1, 5))):
            text = draw(st.sampled_from(TEXTS))
            said.append(Message("user", [TextPart(text)]))
            start = draw(st.sampled_from([0, 0, 1]))
            args = draw(st.sampled_from(ARGS))
            facts.append(
                make_fact(
                    f"c{s}-{k}",
                    session_id=sid,
                    started_at=f"2025-06-01T10:00:{k:02d}Z",
                    input_tokens=k,
                    input_messages=list(said[start:]),
                    output_messages=[
                        Message("assistant", [TextPart(text.upper()), ToolCallPart("t", "f", args)])
                    ],
                )
            )
            said.append(facts[-1].output_messages[0])
    return facts


def _groups(facts: list[InferenceCall], rng: random.Random, grouped: bool) -> list[list[Any]]:
    """The facts, some twice (a redelivery) or captured again (a variant), shuffled, in batches;
    batches in groups of one, or of up to three (a group commit) when ``grouped``."""
    items = facts + facts[::3]
    items += [msgspec.structs.replace(f, raw={"again": i}) for i, f in enumerate(facts[1::4])]
    rng.shuffle(items)
    batches: list[list[InferenceCall]] = []
    while items:
        n = rng.randint(1, 4)
        batches.append(items[:n])
        items = items[n:]
    groups: list[list[Any]] = []
    while batches:
        n = rng.randint(1, 3) if grouped else 1
        groups.append(batches[:n])
        batches = batches[n:]
    return groups


def _from_workers(store: FactStore, group: list[list[InferenceCall]]) -> None:
    prep = pickle.loads(pickle.dumps(store.preparer()))
    store.insert_prepared([pickle.loads(pickle.dumps(prep(b))) for b in group])


def _read_before(store: FactStore, group: list[list[InferenceCall]]) -> None:
    """Rows of a process that has read these messages before (for another store): the notes
    leave their text out, and the writer reads it from the bodies."""
    prep = store.preparer()
    for b in group:
        prep(b)
    store.insert_prepared([prep(b) for b in group])


def _without_text(store: FactStore, group: list[list[InferenceCall]]) -> None:
    prep = store.preparer()
    store.insert_prepared([Prepared(prep(b).facts, []) for b in group])


def _direct(store: FactStore, group: list[list[InferenceCall]]) -> None:
    [batch] = group
    store.insert_facts(batch)


def _select(url: str, sql: str) -> list[dict[str, Any]]:
    if url.startswith("postgres"):
        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(sql)  # type: ignore[arg-type]
            names = [d.name for d in cur.description or []]
            rows = cur.fetchall()
    else:
        path = sqlite_path(url)
        assert path is not None
        conn = sqlite3.connect(path)
        try:
            cur = conn.execute(sql)
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        finally:
            conn.close()
    return [
        {k: bytes(v) if isinstance(v, memoryview) else v for k, v in zip(names, r, strict=True)}
        for r in rows
    ]


def _tables(url: str) -> dict[str, list[dict[str, Any]]]:
    """What a store holds, but the commit times and the summaries' own ids."""
    pg = url.startswith("postgres")
    order = "ORDER BY inference_call_id, model_call_id"
    facts = (
        f"SELECT * FROM facts {order}"
        if pg
        else f"SELECT facts.*, b.body FROM facts JOIN fact_bodies AS b ON b.id = facts.rowid {order}"
    )
    docs = (
        "SELECT s.session_id, t.text FROM session_text AS t JOIN sessions AS s "
        "ON s.id = t.session ORDER BY 1, 2"
        if pg
        else "SELECT s.session_id, d.id & 4294967295 AS n, d.doc FROM session_docs AS d "
        "JOIN sessions AS s ON s.id = d.id >> 32 ORDER BY 1, 2"
    )
    out = {
        "facts": _select(url, facts),
        "variants": _select(url, f"SELECT * FROM fact_variants {order}, digest"),
        "sessions": _select(url, "SELECT * FROM sessions ORDER BY session_id"),
        "docs": _select(url, docs),
    }
    for rows in out.values():
        for r in rows:
            for k in ("ingested_at", "id", "rowid"):
                r.pop(k, None)
    return out


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(facts=_conversations(), seed=st.integers(0, 2**16), grouped=st.booleans())
def test_every_writer_stores_the_same_rows_summaries_and_text_index(
    new_store_url: Callable[[], str], facts: list[InferenceCall], seed: int, grouped: bool
) -> None:
    groups = _groups(facts, random.Random(seed), grouped)
    paths = [_from_workers, _read_before, _without_text] + ([] if grouped else [_direct])
    tables = []
    for write in paths:
        url = new_store_url()
        with open_store(url) as store:
            for group in groups:
                write(store, group)
        tables.append(_tables(url))
    assert tables[0]["docs"] or not any(f.session_id for f in facts)
    for other in tables[1:]:
        assert other == tables[0]


@given(facts=_conversations(), read=st.booleans())
@settings(max_examples=50, deadline=None)
def test_a_note_reads_what_the_body_says(facts: list[InferenceCall], read: bool) -> None:
    """The text a worker reads from a fact (or leaves to the writer: a message it has read
    before) is the text the writer reads from its stored bytes, in a session's state as it
    grows."""
    by_note, by_body, mind = SessionText(b""), SessionText(b""), Read()
    for f in facts:
        body = codec.encode(f)
        if read:
            text_note(f, body, "s", mind)
        by_note.add(text_note(f, body, "s", mind), lambda body=body: body)
        by_body.add_body(body)
        assert by_note.state() == by_body.state()
    assert by_note.doc() == by_body.doc()
    assert by_note.pieces


def test_a_process_forgets_what_it_read_past_its_bound() -> None:
    """A process remembers at most ``most`` messages it read: past it they are forgotten, and
    read (and sent) again."""
    from lithify.store._text import Read, _raws

    fact = make_fact("m", session_id="s")
    body = codec.encode(fact)
    raws = _raws(body)
    assert raws is not None
    messages = (*fact.input_messages, *fact.output_messages)
    read = Read()
    first = read.note("s", raws, messages)
    assert first[1] is not None and None not in first[1]
    assert read.note("s", raws, messages) == (first[0], None)
    assert read.note("other", raws, messages) == first
    read.most = read.size - 1
    again = read.note("s", raws, messages)
    assert again == first and read.size == len(raws)
