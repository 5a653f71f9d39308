"""SFT rows joined from per-message pieces and validated in parts: the same bytes and the same
verdicts as encoding and validating each whole row."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lithify.derive.feedback import FeedbackIndex
from lithify.derive.segments import iter_segments
from lithify.derive.sessions import sort_facts
from lithify.export import ExportOptions, RowInvalid, make_builder
from lithify.export.rows import Row, RowBuilder
from lithify.export.writers import Background, SplitWriter, columns_for
from lithify.model import InferenceCall
from tests.export.helpers import (
    WEATHER,
    assistant,
    call,
    text,
    think,
    tool,
    user,
)
from tests.export.test_corpus_export import corpus
from tests.export.test_rows import fact

SFT = [
    (profile, shape)
    for profile in ("canonical", "trl", "openai", "axolotl")
    for shape in ("messages", "prompt-completion")
    if not (profile == "openai" and shape == "prompt-completion")
]


def _rows(profile: str, shape: str, facts: list[InferenceCall], **kw: Any) -> list[Row]:
    b = make_builder(ExportOptions(kind="sft", profile=profile, shape=shape, **kw))
    return [r for seg in iter_segments(sort_facts(facts), FeedbackIndex([])) for r in b.rows(seg)]


def _builder(profile: str, shape: str) -> RowBuilder:
    return make_builder(ExportOptions(kind="sft", profile=profile, shape=shape))


@pytest.mark.parametrize(("profile", "shape"), SFT)
def test_rows_are_the_json_of_their_data(profile: str, shape: str) -> None:
    rows = _rows(profile, shape, corpus()[0])
    assert len(rows) > 20
    validator = _builder(profile, shape).validator
    for row in rows:
        assert row.encoded == orjson.dumps(row.data)
        assert row.spans is not None and set(row.spans) == set(row.data)
        for name, (a, b) in row.spans.items():
            assert row.encoded[a:b] == orjson.dumps(row.data[name])
        validator.check(row.data, row.source_ids)  # the whole-row check agrees


# Values a metadata field may be set to, with the ones Python finds equal but JSON does not.
_META_VALUES = st.one_of(
    st.sampled_from([[], ["degraded_source"], 0, 1, True, False, 1.0, None, "x", [1], [True]]),
    st.integers(-(2**63), 2**63 - 1),
    st.lists(st.sampled_from(["a", "b"]), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.dictionaries(st.sampled_from(["flags", "tokens", "context_cut"]), _META_VALUES),
        max_size=4,
    ),
    spans=st.booleans(),
    stale=st.booleans(),
)
def test_set_metadata_keeps_a_row_the_json_of_its_data(
    steps: list[dict[str, Any]], spans: bool, stale: bool
) -> None:
    # With spans the metadata is spliced in; without (rows other than SFT's) the row is
    # encoded whole; a stale row (b"": tools recovered, cut to a budget) is always encoded.
    rows = _rows("trl", "messages", _session())
    for row in rows:
        if not spans:
            row.spans = None
        if stale:
            row.encoded, row.spans = b"", None
        for fields in steps:
            row = row.set_metadata(**fields)
            assert row.encoded == orjson.dumps(row.data)
            meta = orjson.loads(row.encoded)["metadata"]
            assert all(orjson.dumps(meta[k]) == orjson.dumps(v) for k, v in fields.items())


def test_a_row_without_flags_is_not_encoded_again() -> None:
    # The builder writes "flags": [] where the flagger would put it: an unflagged row keeps its
    # JSON as built (before, every row's metadata was encoded again and spliced in).
    rows = _rows("trl", "messages", _session())
    assert rows and all(r.data["metadata"]["flags"] == [] for r in rows)
    for row in rows:
        encoded = row.encoded
        assert row.set_metadata(flags=[]).encoded is encoded
        flagged = row.set_metadata(flags=["degraded_source"])
        assert flagged.encoded == orjson.dumps(flagged.data)
        assert list(flagged.data["metadata"])[-1] == "flags"


def test_the_prompt_digest_tells_prompts_and_tools_apart() -> None:
    def loop(key: str, question: str, tools: bool = True) -> list[InferenceCall]:
        first = fact(
            f"{key}a", [user(question)], [assistant(call("c1", city="Paris"))], session=key
        )
        second = fact(
            f"{key}b",
            [user(question), assistant(call("c1", city="Paris")), tool("c1", "rain")],
            [assistant(text("Rain."))],
            session=key,
        )
        if not tools:
            for f in (first, second):
                f.tools.clear()
        return [first, second]

    same = _rows(
        "canonical", "messages", loop("s1", "Weather?") + loop("s2", "Weather?"), eval_fraction=0.5
    )
    assert [r.prompt for r in same[:2]] == [r.prompt for r in same[2:]]
    assert same[0].prompt != same[1].prompt  # a longer prompt
    other = _rows(
        "canonical",
        "messages",
        loop("s1", "Weather?") + loop("s3", "Weather!") + loop("s4", "Weather?", tools=False),
        eval_fraction=0.5,
    )
    assert len({r.prompt for r in other}) == 6
    assert {r.prompt for r in _rows("canonical", "messages", loop("s1", "Weather?"))} == {
        bytes(16)
    }  # one split only: prompts are never compared


# -- validation in parts --------------------------------------------------------------------------

_MUTATIONS = [
    "drop_key",
    "extra_key",
    "wrong_type",
    "bad_role",
    "empty",
    "truncate",
    "tool",
    "meta",
    "row_key",
]


def _mutate(data: dict[str, Any], how: str, pick: int) -> None:
    lists = [k for k in data if isinstance(data[k], list) and data[k]]
    name = lists[pick % len(lists)]
    items = data[name]
    item = items[pick % len(items)]
    if not isinstance(item, dict):
        return
    if how == "drop_key":
        item.pop(sorted(item)[pick % len(item)])
    elif how == "extra_key":
        item["surprise"] = 1
    elif how == "wrong_type":
        item[sorted(item)[pick % len(item)]] = 42
    elif how == "bad_role" and "role" in item:
        item["role"] = "narrator"
    elif how == "empty":
        items.clear()
    elif how == "truncate":
        del items[1:]
    elif how == "meta":
        data["metadata"]["turn"] = -1
    elif how == "row_key":
        data["extra"] = []
    elif how == "tool" and data.get("tools"):
        data["tools"][0] = {"type": "function", "function": {"name": "f", "parameters": 1}}


def _raises(fn: Any) -> bool:
    try:
        fn()
    except RowInvalid:
        return True
    return False


@settings(max_examples=150)
@given(
    st.sampled_from(SFT), st.integers(0, 10**6), st.lists(st.sampled_from(_MUTATIONS), max_size=2)
)
def test_checking_in_parts_agrees_with_the_whole_row(
    combo: tuple[str, str], pick: int, mutations: list[str]
) -> None:
    profile, shape = combo
    rows = _rows(profile, shape, _session())
    data = copy.deepcopy(rows[pick % len(rows)].data)
    for i, how in enumerate(mutations):
        _mutate(data, how, pick + i)
    v = _builder(profile, shape).validator
    lists = [k for k, val in data.items() if isinstance(val, list) and k != "metadata"]
    items_valid = all(v.item_valid(k, item) for k in lists for item in data[k])
    whole = _raises(lambda: v.check(data, ["x"]))
    assert _raises(lambda: v.check_rest(data, ["x"], items_valid)) == whole


@pytest.mark.parametrize(("profile", "shape"), SFT)
def test_a_bad_message_or_tool_fails_in_parts_as_whole(profile: str, shape: str) -> None:
    v = _builder(profile, shape).validator
    for how in ("wrong_type", "extra_key", "tool"):
        data = copy.deepcopy(_rows(profile, shape, _session())[-1].data)
        _mutate(data, how, 0)
        lists = [k for k, val in data.items() if isinstance(val, list)]
        items_valid = all(v.item_valid(k, item) for k in lists for item in data[k])
        assert not items_valid
        assert _raises(lambda d=data: v.check(d, ["x"]))
        assert _raises(lambda d=data, ok=items_valid: v.check_rest(d, ["x"], ok))


def _session() -> list[InferenceCall]:
    inputs = [user("Weather in Paris?")]
    out1 = assistant(think("Need the tool."), call("c1", city="Paris"), finish="tool_calls")
    inputs2 = [*inputs, assistant(think("Need the tool."), call("c1", city="Paris"), finish=None)]
    inputs2.append(tool("c1", {"sky": "clear"}))
    out2 = assistant(text("Sunny."))
    return [fact("a", inputs, [out1], session="s"), fact("b", inputs2, [out2], session="s")]


# -- writing --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_spans_write_what_encoding_the_values_writes(tmp_path: Path, fmt: str) -> None:
    rows = _rows("trl", "prompt-completion", corpus()[0])
    for name, strip in (("spans", False), ("values", True)):
        cols = columns_for("sft", "prompt-completion")
        with SplitWriter(tmp_path / name, fmt, cols) as w:
            for r in rows:
                w.write(
                    Row(
                        r.data,
                        r.encoded,
                        r.split,
                        r.prompt,
                        r.source_ids,
                        None if strip else r.spans,
                    )
                )
    a, b = (tmp_path / n / f"train.{fmt}" for n in ("spans", "values"))
    assert a.read_bytes() == b.read_bytes() and a.stat().st_size > 1000


def test_background_work_keeps_order_and_reports_errors() -> None:
    done: list[int] = []

    def work(n: int) -> None:
        if n == 3:
            raise OSError("disk full")
        done.append(n)

    bg = Background(work, depth=1)
    for n in range(3):
        bg.put(n)
    bg.close()
    assert done == [0, 1, 2]
    bg = Background(work, depth=1)
    with pytest.raises(OSError, match="disk full"):
        for n in range(3, 100):
            bg.put(n)
        bg.close()
    bg.abandon()  # after an error: stops without raising
    assert done == [0, 1, 2]  # nothing after the failed item
    assert WEATHER.name  # the helpers' tool is what the sessions offer
