"""Facts to store, a strict equality for round trips, and direct SQL on a store's database."""

from __future__ import annotations

import math
import random
import sqlite3
import threading
from typing import Any

import msgspec
import psycopg
from hypothesis import strategies as st

from lithify.model import InferenceCall, Message, TextPart, ToolCallPart
from lithify.store import open_store, sqlite_path
from lithify.translate._common import Degradations, finish


def make_fact(key: str, **fields: Any) -> InferenceCall:
    """A realistic fact through the translators' own ``finish()``: identity from ``key``."""
    deg = Degradations(fields.pop("degradations", {}))
    fields.setdefault("input_messages", [Message("user", [TextPart(f"What is {key}?")])])
    fields.setdefault(
        "output_messages",
        [
            Message(
                "assistant",
                [TextPart("Let me look."), ToolCallPart("call_1", "lookup", {"q": key})],
                "tool_call",
            )
        ],
    )
    return finish(
        source=fields.pop("source", "otlp"),
        deg=deg,
        identity=("store-test", key),
        raw=fields.pop("raw", {"key": key}),
        **fields,
    )


def same(a: Any, b: Any) -> bool:
    """Equal in every leaf: type (bool is not int), NaN equals NaN, -0.0 is not 0.0, key order."""
    if isinstance(a, msgspec.Struct) or isinstance(b, msgspec.Struct):
        if type(a) is not type(b):
            return False
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__struct_fields__)
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def drop_digests(url: str) -> list[str]:
    """The statements that take a store back to before version 12 (the facts' kept digests)."""
    bodies = "facts" if url.startswith("postgres") else "fact_bodies"
    tables = (bodies, "fact_variants", "call_fills")
    return [f"ALTER TABLE {t} DROP COLUMN json_sha256" for t in tables]


def drop_summaries(url: str) -> list[str]:
    """The statements that take a store back to before version 7 (session summaries), and so
    before version 9 (call fills) and version 12."""
    docs = [] if url.startswith("postgres") else ["DROP TABLE session_docs"]
    return [
        *drop_digests(url),
        "DROP TABLE call_fills",
        "DROP TABLE session_text",
        *docs,
        "DROP TABLE sessions",
    ]


def raw_execute(url: str, *statements: str) -> list[Any]:
    """Run SQL straight on the store's database; return the last statement's rows."""
    rows: list[Any] = []
    if url.startswith("postgres"):
        with psycopg.connect(url, autocommit=True) as conn:
            for s in statements:
                cur = conn.execute(s)  # type: ignore[arg-type]
                rows = cur.fetchall() if cur.description else []
        return rows
    path = sqlite_path(url)
    assert path is not None
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for s in statements:
            rows = conn.execute(s).fetchall()
    finally:
        conn.close()
    return rows


EDGE_VALUES = {
    "nul": "a\x00b",
    "lone_high": "\ud800",
    "lone_low": "x\udfffy",
    "marker_lookalike": "lithify:esc:00",
    "huge": 2**200,
    "huge_negative": -(2**100),
    "u64_max": 2**64 - 1,
    "i64_min": -(2**63),
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "negative_zero": -0.0,
    "bool_not_int": [True, 1, False, 0],
    "\ud83d key": {"a\x00": [None, 1.5, "\udc00"]},
    "emoji": "🦜",
}

CHARS = st.one_of(
    st.characters(),
    st.characters(categories=["Cs"]),
    st.sampled_from(["\x00", "\ud800", "\udfff", "\uffff", "\U0010ffff"]),
)
TEXT = st.one_of(st.text(CHARS, max_size=8), st.sampled_from(["", "lithify:esc:", "0"]))
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**130), max_value=2**130),
    st.floats(),
    TEXT,
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=16,
)


def race_writers(url: str, captures: list[InferenceCall], batch: int, writers: int = 4) -> None:
    """Writers side by side, each on a connection of its own, inserting ``captures`` in an order
    of its own (seeded), ``batch`` at a time; any writer's error fails the caller."""
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        try:
            mine = captures[:]
            random.Random(seed).shuffle(mine)
            with open_store(url) as store:
                for i in range(0, len(mine), batch):
                    store.insert_facts(mine[i : i + batch])
        except BaseException as e:  # reported in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
