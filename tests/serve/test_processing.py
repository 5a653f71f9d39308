"""Request processing in a worker: a fact that cannot be made a row costs only itself."""

from __future__ import annotations

from typing import Any

from lithify.ingest.processing import process
from lithify.store import Prepared, prepare
from tests.serve.helpers import genai_spans, traces_pb


def test_the_rows_of_a_request_are_built_once_and_a_bad_fact_is_rejected_alone() -> None:
    spans = genai_spans("prep", 4)
    bad = spans[2].call_id
    calls: list[int] = []

    def preparer(facts: Any, feedback: Any = ()) -> Prepared:
        facts = list(facts)
        calls.append(len(facts))
        if any(f.inference_call_id == bad for f in facts):
            raise ValueError("no row for this one")
        return prepare(facts, feedback)

    out = process("traces", "protobuf", traces_pb(spans), "", 1 << 20, preparer)
    assert out.rows is not None
    assert [r[0] for r in out.rows.facts] == [s.call_id for s in spans if s.call_id != bad]
    assert (out.facts, out.rejected) == (3, 1)
    assert out.errors == ["a fact could not be stored: no row for this one"]
    assert calls[0] == 4  # all at once first, then one by one to find the bad one

    calls.clear()
    good = process("traces", "protobuf", traces_pb(genai_spans("ok", 4)), "", 1 << 20, preparer)
    assert calls == [4] and good.facts == 4 and good.rejected == 0
