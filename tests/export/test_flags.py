"""Quality flags: every row says what it may teach wrong, from a closed list; rows carrying a
dropped flag are left out and counted (docs/export.md, Quality flags)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.cli import app
from lithify.export import ExportOptions, ProfileError, make_builder
from lithify.export.flags import _BIT_NAMES, DEFAULT_DROP, FLAGS, _names, _scan, call_flags
from lithify.export.profiles import resolve
from lithify.export.rows import shape_for
from lithify.export.validate import RowValidator
from lithify.model import InferenceCall, Message, ToolCallResponsePart, encode
from lithify.store import open_store
from tests.export.helpers import (
    assistant,
    call,
    fact,
    feedback,
    read_rows,
    run_export,
    text,
    tool,
    tool_session,
    user,
)

runner = CliRunner()
KEEP_ALL = tuple(sorted(DEFAULT_DROP))


def _one(
    finish: str | None = "stop",
    *,
    answer: str = "Sunny.",
    degradations: dict[str, int] | None = None,
) -> list[InferenceCall]:
    return [
        fact(
            "c1",
            [user("Weather?")],
            [assistant(text(answer), finish=finish)],
            degradations=degradations,
        )
    ]


def _rows(tmp_path: Path, facts: list[InferenceCall], **options: object) -> list[dict]:
    summary = run_export(facts, tmp_path, **options)
    rows = read_rows(tmp_path / "train.jsonl")
    assert summary.rows["train"] == len(rows)
    return rows


def _valid(rows: list[dict], kind: str, profile: str = "canonical") -> None:
    p = resolve(kind, profile)
    validator = RowValidator(kind, shape_for(kind, p, None), p)
    for row in rows:
        validator.check(row, row["metadata"]["source_call_ids"])


@pytest.mark.parametrize(
    ("facts", "flag"),
    [
        (tool_session(), None),
        (
            [
                fact(
                    f.inference_call_id,
                    f.input_messages,
                    f.output_messages,
                    session="s-1",
                    second=i,
                    tools=[],
                )
                for i, f in enumerate(tool_session())
            ],
            "undefined_tool_call",
        ),
        (_one("length"), "truncated_target"),
        (_one("content_filter"), "content_filter"),
        (_one("error"), "error_target"),
        (_one(answer="  "), "empty_target"),
        (_one(degradations={"synthesized_id": 1}), "degraded_source"),
    ],
)
def test_each_flag_is_set_and_decides_whether_the_row_is_written(
    tmp_path: Path, facts: list[InferenceCall], flag: str | None
) -> None:
    kept = _rows(tmp_path / "kept", facts, kind="sft", keep_flags=KEEP_ALL)
    assert kept
    for row in kept[-1:]:  # the target of the last row is the flagged output
        assert row["metadata"]["flags"] == ([] if flag is None else [flag])
    _valid(kept, "sft")
    summary = run_export(facts, tmp_path / "default", kind="sft")
    written = read_rows(tmp_path / "default" / "train.jsonl")
    if flag in DEFAULT_DROP:
        assert len(written) < len(kept)
        assert summary.skipped["flagged"] == len(kept) - len(written)
    else:
        assert [r["metadata"] for r in written] == [r["metadata"] for r in kept]
    if flag is not None:
        assert summary.flags[flag] >= 1
        dropped = run_export(facts, tmp_path / "dropped", kind="sft", drop_flags=(flag,))
        assert dropped.rows["train"] < len(kept)


def test_an_answer_cut_short_that_only_its_span_says_is_cut_is_flagged(tmp_path: Path) -> None:
    """Pydantic AI 1.x in log-event mode: the gen_ai.choice states no finish reason, the span
    (a metadata-only capture of the same call) says `length`. The call is read from the log
    events with the span's finish reason, so the cut answer is flagged, not taught as whole."""
    (log,) = _one(None, answer="Sunny and")
    span = msgspec.structs.replace(
        log,
        input_messages=[],
        output_messages=[Message("assistant", [], "length")],
        degradations={"content_not_captured": 1},
        raw={"span": 1},
    )
    for i, facts in enumerate(([log, span], [span, log])):
        kept = _rows(tmp_path / f"k{i}", facts, kind="sft", keep_flags=KEEP_ALL)
        assert [r["metadata"]["flags"] for r in kept] == [["truncated_target"]]
        summary = run_export(facts, tmp_path / f"d{i}", kind="sft")
        assert summary.rows["train"] == 0 and summary.skipped["flagged"] == 1


def test_a_tool_result_without_its_call_is_flagged_in_canonical_rows(tmp_path: Path) -> None:
    orphan = Message("tool", [ToolCallResponsePart("nope", "42")])
    facts = [fact("c1", [user("Hi"), orphan], [assistant(text("Ok."))], session="s")]
    rows = _rows(tmp_path / "k", facts, kind="nemo-gym", keep_flags=KEEP_ALL)
    assert [r["metadata"]["flags"] for r in rows] == [["orphan_tool_result"]]
    _valid(rows, "nemo-gym")
    assert run_export(facts, tmp_path / "d", kind="nemo-gym").skipped == {"flagged": 1}


_FINISH = st.sampled_from(["stop", "length", "content_filter", "error"])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    undefined=st.booleans(), finish=_FINISH, empty=st.booleans(), degraded=st.booleans(),
    kind=st.sampled_from(["sft", "nemo-gym", "rl"]),
)  # fmt: skip
def test_a_row_carries_exactly_the_flags_of_its_calls(
    tmp_path_factory: pytest.TempPathFactory,
    undefined: bool,
    finish: str,
    empty: bool,
    degraded: bool,
    kind: str,
) -> None:
    first = assistant(call("t1", "get_weather" if not undefined else "launch", city="Oslo"),
                      finish="tool_call")  # fmt: skip
    inputs = [user("Weather in Oslo?"), Message("assistant", first.parts), tool("t1", "cold")]
    out = assistant(text("" if empty else "Cold."), finish=finish)
    deg = {"synthesized_id": 1} if degraded else None
    facts = [fact("c1", inputs, [out], session="s", degradations=deg)]
    want = sorted(
        name
        for name, on in (
            ("undefined_tool_call", undefined),
            ("truncated_target", finish == "length"),
            ("content_filter", finish == "content_filter"),
            ("error_target", finish == "error"),
            ("empty_target", empty),
            ("degraded_source", degraded),
        )
        if on
    )
    fb = [feedback("c1", 1.0)]
    folder = tmp_path_factory.mktemp("flags")
    kept = run_export(facts, folder / "k", fb, kind=kind, keep_flags=KEEP_ALL)
    rows = read_rows(folder / "k" / "train.jsonl")
    assert [r["metadata"]["flags"] for r in rows] == [want]
    assert kept.flags == dict.fromkeys(want, 1)
    assert [found for _, found in call_flags(facts)] == [want]  # what lithify stats --flags counts
    _valid(rows, kind)
    default = run_export(facts, folder / "d", fb, kind=kind)
    assert default.rows["train"] == (0 if set(want) & DEFAULT_DROP else 1)


def test_unknown_or_contradictory_flags_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="unknown flag"):
        make_builder(ExportOptions(kind="sft", drop_flags=("nonsense",)))
    with pytest.raises(ProfileError, match="both"):
        make_builder(ExportOptions(kind="sft", drop_flags=("empty_target",),
                                   keep_flags=("empty_target",)))  # fmt: skip
    facts = tmp_path / "f.jsonl"
    facts.write_bytes(b"".join(encode(f) + b"\n" for f in tool_session()))
    res = runner.invoke(app, ["export", "sft", "--facts", str(facts), "-o", str(tmp_path / "o"),
                              "--keep-flag", "nonsense"])  # fmt: skip
    assert res.exit_code == 2 and "unknown flag" in res.output
    res = runner.invoke(app, ["export", "sft", "--facts", str(facts), "-o", str(tmp_path / "o"),
                              "--drop-flag", "degraded_source", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout)["flags"] == {}
    assert set(FLAGS) >= DEFAULT_DROP


def test_the_documented_flags_are_the_closed_list_and_its_defaults() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "export.md").read_text()
    section = doc.split("\n## Quality flags\n")[1].split("\n## ")[0]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    documented = {line.split("`")[1]: line.rsplit("|", 2)[1].strip() for line in table}
    assert set(documented) == set(FLAGS)
    assert {k for k, v in documented.items() if v == "dropped"} == DEFAULT_DROP
    assert {v for v in documented.values()} == {"dropped", "kept"}


@pytest.mark.parametrize(
    ("kind", "profile"),
    [("sft", "canonical"), ("sft", "openai"), ("nemo-gym", "nemo-gym"), ("rl", "canonical")],
)
def test_tools_a_capture_lacks_are_recovered_from_its_session(
    tmp_path: Path, kind: str, profile: str
) -> None:
    """The first call was captured without its tool definitions (as the official OpenAI
    instrumentation does), the second with them: the first call's rows get them, and say so."""
    first, second = tool_session()
    bare = fact(first.inference_call_id, first.input_messages, first.output_messages,
                session="s-1", second=1, tools=[])  # fmt: skip
    fb = [feedback(first.inference_call_id, 1.0, kind="call")]
    summary = run_export([bare, second], tmp_path, fb, kind=kind, profile=profile)
    rows = read_rows(tmp_path / "train.jsonl")
    assert summary.flags == {"tools_recovered": 1} and "flagged" not in summary.skipped
    recovered = [r for r in rows if "tools_recovered" in r["metadata"]["flags"]]
    [row] = recovered
    assert row["metadata"]["source_call_ids"][0] == bare.inference_call_id
    holder = row.get("tools", row.get("responses_create_params", {}).get("tools"))
    assert [t.get("function", t)["name"] for t in holder] == ["get_weather"]
    _valid(rows, kind, profile)
    # Without a call that defines it, the tool stays undefined and the row is dropped.
    alone = run_export([bare], tmp_path / "alone", fb, kind=kind, profile=profile)
    assert alone.flags.get("undefined_tool_call") == 1 and alone.skipped.get("flagged") == 1
    # The calls alone, as lithify stats --flags counts them.
    assert [f for _, f in call_flags([bare, second])] == [["tools_recovered"], []]
    assert [f for _, f in call_flags([bare])] == [["undefined_tool_call"]]


def test_stats_counts_the_flags_of_stored_calls(sqlite_store_url: str) -> None:
    first, second = tool_session()
    bare = fact(first.inference_call_id, first.input_messages, first.output_messages,
                session="s-1", second=1, tools=[])  # fmt: skip
    alone = fact("c9", first.input_messages, first.output_messages, session="s-9", tools=[])
    with open_store(sqlite_store_url) as store:
        store.insert_facts([bare, second, alone, *_one("length")])
    res = runner.invoke(app, ["stats", "--store", sqlite_store_url, "--flags", "--json"])
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout)["flags"] == {
        "tools_recovered": 1, "truncated_target": 1, "undefined_tool_call": 1
    }  # fmt: skip
    shown = runner.invoke(app, ["stats", "--store", sqlite_store_url, "--flags"])
    assert shown.exit_code == 0 and "undefined_tool_call" in shown.output
    plain = runner.invoke(app, ["stats", "--store", sqlite_store_url, "--json"])
    assert "flags" not in orjson.loads(plain.stdout)  # read only when asked: it reads every call


_PARTS = st.lists(
    st.one_of(
        st.builds(lambda i, n: call(f"id{i}", n), st.integers(0, 3), st.sampled_from("ab")),
        st.builds(lambda i: ToolCallResponsePart(f"id{i}", "r"), st.integers(0, 3)),
        st.just(text("x")),
    ),
    max_size=3,
)
_MESSAGES = st.lists(_PARTS.map(lambda parts: Message("assistant", parts)), max_size=6)


@given(first=_MESSAGES, more=_MESSAGES, shared=st.booleans())
def test_scanning_from_the_call_before_finds_what_a_full_scan_finds(
    first: list[Message], more: list[Message], shared: bool
) -> None:
    """A call's input is scanned from where the call before it ends, when it begins with the
    very same messages; the result must not depend on that shortcut."""
    before = _scan(first, None)
    # The same messages (shared objects, as decoding gives) or equal copies (scanned whole).
    prefix = first if shared else [Message(m.role, list(m.parts)) for m in first]
    messages = [*prefix, *more]
    assert _scan(messages, before)[1:] == _scan(messages, None)[1:]


def test_every_flag_is_judged_by_a_bit_of_its_own() -> None:
    # Rows are judged by bits (one a flag): a flag in FLAGS without one could never be set.
    assert sorted(_BIT_NAMES.values()) == sorted(FLAGS)
    assert _names(sum(_BIT_NAMES)) == tuple(sorted(FLAGS))
    assert all(_names(bit) == (name,) for bit, name in _BIT_NAMES.items())
