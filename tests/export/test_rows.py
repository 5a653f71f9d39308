"""Row kinds and profiles: what each row holds, how it is skipped, filtered and rewarded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lithify
from lithify.derive import Segment
from lithify.derive.feedback import FeedbackIndex
from lithify.export import ExportOptions, ProfileError, RowInvalid, make_builder
from lithify.export.profiles import SUPPORTED
from lithify.export.rows import EXPORTER, Row, RowBuilder, split_of
from lithify.export.validate import RowValidator
from lithify.export.where import parse
from lithify.model import InferenceCall, Message
from tests.export.helpers import (
    WEATHER,
    assistant,
    fact,
    feedback,
    read_rows,
    replay,
    run_export,
    segment,
    text,
    think,
    tool,
    tool_session,
    user,
)
from tests.export.test_trainer import messages as message_lists


class Joined:
    """A row builder fed segments with feedback joined to them, as derivation joins it."""

    def __init__(self, rows: RowBuilder, index: FeedbackIndex) -> None:
        self.builder, self.index = rows, index

    def rows(self, segment: Segment) -> Iterator[Row]:
        return self.builder.rows(self.index.attach(segment))

    def __getattr__(self, name: str) -> Any:  # counts, pairs, validator: the builder's
        return getattr(self.builder, name)


def builder(kind: str = "sft", profile: str = "canonical", fb: list[Any] = (), **kw: Any) -> Joined:  # type: ignore[assignment]
    return Joined(make_builder(ExportOptions(kind=kind, profile=profile, **kw)), FeedbackIndex(fb))


def rows_of(b: Joined, *segments: Any) -> list[dict[str, Any]]:
    out = [r.data for s in segments for r in b.rows(s)]
    out.extend(r.data for r in b.pairs())
    return out


def test_rows_name_the_version_lithify_reports() -> None:
    assert f"lithify {lithify.__version__}" == EXPORTER


# -- SFT --------------------------------------------------------------------------------------


def test_sft_every_assistant_turn_is_a_target_with_earlier_turns_as_context() -> None:
    a, b = tool_session()
    rows = rows_of(builder(), segment(a, b))
    assert len(rows) == 2
    first, second = rows
    assert first["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "thinking": "Need the tool.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
    ]
    assert second["messages"][:3] == first["messages"]
    assert second["messages"][3:] == [
        {
            "role": "tool",
            "name": "get_weather",
            "tool_call_id": "c1",
            "content": '{"sky":"clear","temp":21}',
        },
        {"role": "assistant", "content": "Sunny."},
    ]
    assert second["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    meta = second["metadata"]
    assert meta == {
        "source_call_ids": ["s-1-a", "s-1-b"],
        "session_id": "s-1",
        "segment_id": "seg-1",
        "model": "m-1",
        "split": "train",
        "schema": "urn:lithify:schemas:rows:sft.messages:v1:canonical.thinking.object",
        "exporter": EXPORTER,
        "turn": 1,
        "flags": [],  # the flagger's to fill (last: a row without flags is encoded once)
    }
    assert first["metadata"]["turn"] == 0 and first["metadata"]["source_call_ids"] == ["s-1-a"]


def test_sft_prompt_completion_shape() -> None:
    a, b = tool_session()
    rows = rows_of(builder(shape="prompt-completion"), segment(a, b))
    assert [len(r["prompt"]) for r in rows] == [2, 4]
    assert rows[1]["completion"] == [{"role": "assistant", "content": "Sunny."}]
    assert set(rows[1]) == {"prompt", "completion", "tools", "metadata"}


def test_profiles_reshape_messages() -> None:
    a, b = tool_session()
    trl = rows_of(builder(profile="trl"), segment(a, b))[1]["messages"]
    assert trl[2]["reasoning_content"] == "Need the tool." and "thinking" not in trl[2]
    assert trl[2]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}

    gpt_oss = rows_of(
        builder(profile="trl", reasoning_key="thinking", arguments="string"), segment(a, b)
    )
    m = gpt_oss[1]["messages"][2]
    assert m["thinking"] == "Need the tool."
    assert m["tool_calls"][0]["function"]["arguments"] == '{"city":"Paris"}'

    axolotl = rows_of(builder(profile="axolotl"), segment(a, b))[1]["messages"]
    assert "reasoning_content" in axolotl[2]

    b_openai = builder(profile="openai")
    openai = rows_of(b_openai, segment(a, b))[1]["messages"]
    assert openai[2] == {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            }
        ],
        "weight": 0,
    }
    assert openai[3] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '{"sky":"clear","temp":21}',
    }
    assert openai[4] == {"role": "assistant", "content": "Sunny.", "weight": 1}
    # The reasoning OpenAI cannot carry is counted, per row that lost it (both rows did).
    assert b_openai.counts.changes == {"reasoning_dropped": 2}


def test_openai_leaves_out_a_turn_that_only_reasoned_and_skips_such_a_target(
    tmp_path: Path,
) -> None:
    # A Responses reasoning item with no message after it: OpenAI's format has no field for it.
    hist = fact(
        "h",
        [user("Q1"), assistant(think("ONLY-REASONING")), user("Q2")],
        [assistant(text("Answer"))],
        session="s-h",
    )
    ok = fact("ok", [user("Hi")], [assistant(text("Hello"))], session="s-ok", second=1)
    target = fact("t", [user("Q")], [assistant(think("THINK-ONLY"))], session="s-t", second=2)
    summary = run_export([hist, ok, target], tmp_path, kind="sft", profile="openai")
    rows = read_rows(tmp_path / "train.jsonl")
    assert [r["metadata"]["source_call_ids"] for r in rows] == [["h"], ["ok"]]
    assert rows[0]["messages"] == [
        {"role": "user", "content": "Q1"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "Answer", "weight": 1},
    ]
    assert summary.changes == {"reasoning_dropped": 1}
    assert summary.skipped == {"reasoning_only": 1}
    # The same within a session: the turn that only reasoned skips its own row, not the next.
    then = fact(
        "t2",
        [user("Q"), replay(assistant(think("THINK-ONLY"))), user("Q2")],
        [assistant(text("A2"))],
        session="s-t",
        second=3,
    )
    summary = run_export([target, then], tmp_path / "s", kind="sft", profile="openai")
    [row] = read_rows(tmp_path / "s" / "train.jsonl")
    assert row["metadata"]["source_call_ids"] == ["t", "t2"]
    assert [m["role"] for m in row["messages"]] == ["user", "user", "assistant"]
    assert summary.skipped == {"reasoning_only": 1}
    assert summary.changes == {"reasoning_dropped": 1}
    # A profile with a reasoning field keeps the turn (the reasoning-only target is a quality
    # flag there, dropped by default).
    kept = run_export([hist, ok, target], tmp_path / "trl", kind="sft", profile="trl")
    assert not kept.changes and "reasoning_only" not in kept.skipped
    first = read_rows(tmp_path / "trl" / "train.jsonl")[0]
    assert first["messages"][1]["reasoning_content"] == "ONLY-REASONING"


@pytest.mark.parametrize(
    ("kind", "profile", "extra"),
    [
        ("sft", "nemo-gym", {}),
        ("nemo-gym", "trl", {}),
        ("dpo", "axolotl", {}),
        ("sft", "openai", {"reasoning_key": "thinking"}),
        ("sft", "openai", {"arguments": "object"}),
        ("nemo-gym", "nemo-gym", {"arguments": "string"}),
        ("sft", "trl", {"reasoning_key": "reasoning"}),
        ("sft", "canonical", {"shape": "chat"}),
        ("rl", "canonical", {"shape": "messages"}),
        ("sft", "openai", {"shape": "prompt-completion"}),
        ("rows", "canonical", {}),
        ("sft", "canonical", {"fmt": "csv"}),
        ("sft", "canonical", {"eval_fraction": 1.5}),
    ],
)
def test_options_that_do_not_fit_are_usage_errors(
    kind: str, profile: str, extra: dict[str, Any]
) -> None:
    with pytest.raises(ProfileError):
        make_builder(ExportOptions(kind=kind, profile=profile, **extra))


def test_profile_schemas_reject_what_the_profile_forbids() -> None:
    a, b = tool_session()
    bld = builder(profile="openai")
    row = next(iter(bld.rows(segment(a, b))))
    bad = msgspec.json.decode(row.encoded)
    bad["messages"][2]["thinking"] = "leaked"
    with pytest.raises(RowInvalid) as e:
        bld.validator.check(bad, row.source_ids)
    assert e.value.source_ids == ["s-1-a"] and "s-1-a" in str(e.value)
    canonical = builder()
    good = next(iter(canonical.rows(segment(a, b)))).data
    good["messages"][2]["tool_calls"][0]["function"]["arguments"] = '{"city":"Paris"}'
    with pytest.raises(RowInvalid):
        canonical.validator.check(good, ["x"])


def test_sft_skips_and_counts() -> None:
    no_output = fact("n", [user("q")], [])
    no_prompt = fact("p", [], [assistant(text("a"))])
    orphan = fact("o", [user("q"), tool("zz", "r")], [assistant(text("a"))])
    order = fact("r", [user("q")], [assistant(text("a"), think("b"))])
    degraded = fact(
        "d", [user("q")], [assistant(text("a"))], degradations={"unsupported_content": 1}
    )
    b = builder()
    segs = [
        segment(c, session=None, seg_id=c.inference_call_id)
        for c in (no_output, no_prompt, orphan, order, degraded)
    ]
    assert rows_of(b, *segs) == []
    assert b.counts.skipped == {
        "no_output": 1,
        "no_prompt": 1,
        "orphan_tool_response": 1,
        "part_order": 1,
        "degraded_fact": 1,
    }
    kept = builder(keep_degraded=True)
    assert len(rows_of(kept, segs[-1])) == 1


def test_an_answer_shaped_by_an_unseen_schema_is_held_back() -> None:
    """A schema given outside the messages (response_format, …) shaped the answer; a row holds
    the answer without it and would teach that shape unprompted: lossy, like an unread tool."""
    shaped = fact(
        "j", [user("q")], [assistant(text('{"city":"Paris"}'))], degradations={"output_schema": 1}
    )
    seg = segment(shaped, session=None, seg_id="j")
    b = builder()
    assert rows_of(b, seg) == []
    assert b.counts.skipped == {"degraded_fact": 1}
    kept = builder(keep_degraded=True)
    assert len(rows_of(kept, seg)) == 1
    assert kept.counts.skipped == {}


@pytest.mark.parametrize(("kind", "profile"), [(k, p) for k, ps in SUPPORTED.items() for p in ps])
def test_a_call_read_from_a_span_without_content_is_never_a_row(kind: str, profile: str) -> None:
    """A span that kept only the call's metadata (content_not_captured, lossy) has no messages:
    left out as degraded_fact, and with --keep-degraded still no row (nothing to learn from).
    An SFT turn is checked for an output first; a DPO candidate needs an output to be one."""
    bare = fact("m", [], [], tools=[], degradations={"content_not_captured": 1}, session="s")
    fb = [feedback("m", 0.5), feedback("s", 0.5, kind="session")]
    for keep, reason in ((False, "degraded_fact"), (True, "no_prompt")):
        b = builder(kind, profile, fb=fb, keep_degraded=keep)
        assert rows_of(b, segment(bare, session="s")) == []
        expected = {"sft": {"no_output": 1}, "dpo": {}}.get(kind, {reason: 1})
        assert b.counts.skipped == expected


@pytest.mark.parametrize("profile", ["canonical", "trl", "openai", "axolotl"])
def test_an_output_outside_the_assistant_role_is_no_target(profile: str) -> None:
    """An output recorded under another role teaches no assistant turn; OpenAI's weights and
    preferred outputs are refused on it. Such a call is skipped, counted, never a crash."""
    odd = fact("s", [user("q")], [Message("system", [text("a")], None)])
    b = builder(profile=profile)
    assert rows_of(b, segment(odd, session=None, seg_id="s")) == []
    assert b.counts.skipped == {"non_assistant_output": 1}


def test_a_preference_pair_needs_assistant_outputs(tmp_path: Path) -> None:
    good, fg = _scored("s-good", "Sunny, 21°C.", 0.9)
    bad, fbad = _scored("s-bad", "No idea.", 0.1)
    odd = msgspec.structs.replace(bad[1], output_messages=[Message("user", [text("x")], None)])
    summary = run_export([*good, bad[0], odd], tmp_path, [fg, fbad], kind="dpo", profile="openai")
    assert summary.rows == {"train": 0, "eval": 0}
    assert summary.skipped["non_assistant_output"] == 1


def test_citations_and_opaque_state_leave_the_row_in() -> None:
    """A citation dropped from whole text, like opaque reasoning, changes nothing the model saw
    or said (LOSSY_DEGRADATIONS leaves both out): the row is exported."""
    cited = fact(
        "c",
        [user("q")],
        [assistant(text("a"))],
        degradations={"text_citation": 3, "opaque_reasoning": 1},
    )
    b = builder()
    assert len(rows_of(b, segment(cited, session=None, seg_id="c"))) == 1
    assert b.counts.skipped == {}


def test_a_broken_turn_skips_the_rows_that_contain_it() -> None:
    a = fact("a", [user("q")], [assistant(text("x"), think("y"))], session="s")
    b_ = fact(
        "b",
        [user("q"), replay(a.output_messages[0]), user("more")],
        [assistant(text("z"))],
        session="s",
    )
    bld = builder()
    assert rows_of(bld, segment(a, b_)) == []
    assert bld.counts.skipped == {"part_order": 2}


def test_where_filters_on_the_target_calls_feedback() -> None:
    a, b = tool_session()
    fb = [feedback("s-1-a", 0.2), feedback("s-1-b", 0.9)]
    bld = builder(fb=fb, where=("score>=0.8",))
    rows = rows_of(bld, segment(a, b))
    assert [r["metadata"]["turn"] for r in rows] == [1]
    assert bld.counts.filtered == 1
    # Session feedback applies to calls without their own.
    bld = builder(fb=[feedback("s-1", 1, kind="session")], where=("score==1",))
    assert len(rows_of(bld, segment(a, b))) == 2


# -- NeMo Gym and RL ----------------------------------------------------------------------------


def test_nemo_gym_canonical_row() -> None:
    a, b = tool_session()
    bld = builder("nemo-gym", fb=[feedback("s-1", 0.5, kind="session")])
    [row] = rows_of(bld, segment(a, b))
    assert row["responses_create_params"] == {
        "input": [
            {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
            {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
        ]
    }
    assert [t["inference_call_id"] for t in row["turns"]] == ["s-1-a", "s-1-b"]
    assert row["turns"][0]["messages"] == []
    assert row["turns"][0]["output"]["finish_reason"] == "tool_call"
    assert row["turns"][1]["messages"] == [
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "c1", "result": {"temp": 21, "sky": "clear"}}
            ],
            "finish_reason": None,
        }
    ]
    assert row["reward"] == 0.5
    assert list(row) == ["responses_create_params", "tools", "turns", "reward", "metadata"]


def test_nemo_gym_native_row() -> None:
    a, b = tool_session()
    bld = builder("nemo-gym", "nemo-gym", fb=[feedback("s-1", True, kind="session")])
    [row] = rows_of(bld, segment(a, b))
    params = row["responses_create_params"]
    assert params["input"] == [
        {"type": "message", "role": "system", "content": "Be brief."},
        {"type": "message", "role": "user", "content": "Weather in Paris?"},
    ]
    assert params["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]
    kinds = [i["type"] for i in row["recorded_output"]]
    assert kinds == ["reasoning", "function_call", "function_call_output", "message"]
    assert row["recorded_output"][2] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": '{"sky":"clear","temp":21}',
    }
    # NeMo Gym's verify response carries `reward`: ours stays in metadata, never top level.
    assert "reward" not in row and row["metadata"]["reward"] == 1.0


@pytest.mark.parametrize("profile", ["canonical", "trl", "nemo-gym"])
def test_rl_rows_need_a_reward(profile: str) -> None:
    a, b = tool_session()
    bld = builder("rl", profile)
    assert rows_of(bld, segment(a, b)) == []
    assert bld.counts.skipped == {"no_reward": 1}
    # A label is not a reward; a number on the latest call is.
    bld = builder("rl", profile, fb=[feedback("s-1-b", "good", name="score")])
    assert rows_of(bld, segment(a, b)) == []
    bld = builder("rl", profile, fb=[feedback("s-1-b", 0.75)])
    [row] = rows_of(bld, segment(a, b))
    reward = row["metadata"]["reward"] if profile == "nemo-gym" else row["reward"]
    assert reward == 0.75


def test_rl_trl_row_is_prompt_and_trajectory() -> None:
    a, b = tool_session()
    [row] = rows_of(builder("rl", "trl", fb=[feedback("s-1-b", 1)]), segment(a, b))
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert [m["role"] for m in row["completion"]] == ["assistant", "tool", "assistant"]
    assert row["reward"] == 1.0


# -- DPO ------------------------------------------------------------------------------------------


def _scored(session: str, answer: str, score: Any) -> tuple[list[InferenceCall], Any]:
    calls = tool_session(session, answer=answer)
    return calls, feedback(calls[1].inference_call_id, score)


def test_dpo_pairs_completions_of_the_same_prompt(tmp_path: Path) -> None:
    good, fg = _scored("s-good", "Sunny, 21°C.", 0.9)
    bad, fbad = _scored("s-bad", "No idea.", 0.1)
    mid, fm = _scored("s-mid", "Clear.", 0.5)
    summary = run_export([*good, *bad, *mid], tmp_path, [fg, fbad, fm], kind="dpo")
    [row] = read_rows(tmp_path / "train.jsonl")
    assert row["chosen"] == [{"role": "assistant", "content": "Sunny, 21°C."}]
    assert row["rejected"] == [{"role": "assistant", "content": "No idea."}]
    assert [m["role"] for m in row["prompt"]] == ["system", "user", "assistant", "tool"]
    meta = row["metadata"]
    assert (meta["chosen_call_id"], meta["rejected_call_id"]) == ("s-good-b", "s-bad-b")
    assert (meta["chosen_score"], meta["rejected_score"]) == (0.9, 0.1)
    assert summary.rows == {"train": 1, "eval": 0}

    openai = tmp_path / "openai"
    run_export([*good, *bad], openai, [fg, fbad], kind="dpo", profile="openai")
    [row] = read_rows(openai / "train.jsonl")
    assert set(row) == {"input", "preferred_output", "non_preferred_output", "metadata"}
    assert row["preferred_output"] == [{"role": "assistant", "content": "Sunny, 21°C."}]
    assert all("thinking" not in m for m in row["input"]["messages"])


def test_dpo_openai_counts_what_the_profile_changed_and_skips_reasoning_only_outputs(
    tmp_path: Path,
) -> None:
    good, fg = _scored("s-good", "Sunny, 21°C.", 0.9)
    bad, fbad = _scored("s-bad", "No idea.", 0.1)
    # The prompt holds the first call's reasoning, which OpenAI's format cannot carry.
    summary = run_export([*good, *bad], tmp_path / "a", [fg, fbad], kind="dpo", profile="openai")
    assert summary.rows["train"] == 1
    assert summary.changes == {"reasoning_dropped": 1}
    prompt = [user("Q")]
    thought = fact("da", prompt, [assistant(think("THINK-A"))], session="s-a")
    said = fact("db", prompt, [assistant(text("B"))], session="s-b", second=1)
    marks = [feedback("da", 1.0), feedback("db", 0.0)]
    summary = run_export([thought, said], tmp_path / "b", marks, kind="dpo", profile="openai")
    assert summary.rows["train"] == 0
    assert summary.skipped == {"reasoning_only": 1}
    summary = run_export([thought, said], tmp_path / "c", marks, kind="dpo", profile="trl")
    assert "reasoning_only" not in summary.skipped and not summary.changes


def test_dpo_without_a_preference_gives_no_pair(tmp_path: Path) -> None:
    a, fa = _scored("s-a", "Sunny.", 0.5)
    b, fb_ = _scored("s-b", "Cloudy.", 0.5)
    c, fc = _scored("s-c", "Same.", 1)
    d, fd = _scored("s-d", "Same.", 0)
    summary = run_export([*a, *b], tmp_path / "tie", [fa, fb_], kind="dpo")
    assert summary.rows == {"train": 0, "eval": 0}
    summary = run_export([*c, *d], tmp_path / "same", [fc, fd], kind="dpo")
    assert summary.skipped == {"identical_pair": 1}


def test_split_is_by_session_hash_and_seedless() -> None:
    assert split_of("s", 0) == "train" and split_of("s", 1) == "eval"
    assert split_of("abc", 0.5) == split_of("abc", 0.5)
    share = sum(split_of(f"session-{i}", 0.2) == "eval" for i in range(5000)) / 5000
    assert 0.17 < share < 0.23
    # Growing the fraction only moves sessions into eval, never back.
    for i in range(500):
        if split_of(f"session-{i}", 0.1) == "eval":
            assert split_of(f"session-{i}", 0.3) == "eval"


def test_where_expressions() -> None:
    vals: dict[str, Any] = {"score": 0.9, "ok": True, "label": "good", "n": 3}
    assert parse("score>=0.8").matches(vals)
    assert not parse("score < 0.8").matches(vals)
    assert parse("ok==true").matches(vals) and not parse("ok==1").matches(vals)
    assert not parse("n==true").matches(vals)  # 3 is not true
    assert parse("label=='good'").matches(vals) and parse("label=good").matches(vals)
    assert parse("label!=bad").matches(vals)
    assert not parse("missing>0").matches(vals)
    assert not parse("label>0").matches(vals)
    for bad in [
        "score",
        "score>=",
        ">=1",
        "label>'a'",
        "ok<true",
        "x==__import__('os')",
        "a==1 or 1",
    ]:
        with pytest.raises(ValueError):
            parse(bad)


def test_row_validator_reports_source_ids() -> None:
    v = RowValidator("sft", "messages", make_builder(ExportOptions(kind="sft")).profile)
    with pytest.raises(RowInvalid) as e:
        v.check({"messages": []}, ["call-1", "call-2"])
    assert e.value.source_ids == ["call-1", "call-2"]
    assert "call-1, call-2" in str(e.value)
    assert Message  # the canonical type the rows come from


# -- properties -------------------------------------------------------------------------------


COMBOS = [(k, p) for k, ps in SUPPORTED.items() for p in ps]


@settings(max_examples=60)
@given(message_lists, message_lists, st.sampled_from(COMBOS), st.booleans())
def test_any_segment_gives_valid_rows_or_counted_skips(
    first: list[Message], second: list[Message], combo: tuple[str, str], keep: bool
) -> None:
    """Arbitrary canonical messages never make an invalid row (RowInvalid would raise here)."""
    kind, profile = combo
    a = fact("a", first[:-1], first[-1:], session="s")
    b = fact("b", [*first[:-1], *map(replay, first[-1:]), *second[:-1]], second[-1:], session="s")
    fb = [feedback("b", 0.5), feedback("a", 0.25)]
    bld = builder(kind, profile, fb=fb, keep_degraded=keep)
    segs = [segment(a, b), segment(b, session=None, seg_id="b-alone")]
    rows = rows_of(bld, *segs)
    c = bld.counts
    assert sum(c.rows.values()) == len(rows)
    if kind == "sft":
        # Every turn is a row, a skip or (without --where) nothing else.
        assert len(rows) + sum(c.skipped.values()) == 3
    elif kind != "dpo":
        assert len(rows) + sum(c.skipped.values()) == 2
