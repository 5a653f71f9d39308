"""Segments by proven continuity, on real recordings and on constructed edge cases."""

from __future__ import annotations

import random

from lithify.core.codec import encode
from lithify.derive import SPLIT_REASONS
from lithify.derive.canonical import canonical_messages
from lithify.derive.segments import FAST_WINDOW, iter_segments, segment_id, segment_session
from lithify.derive.sessions import DeriveStats, sort_facts
from lithify.model import TextPart
from tests.derive.helpers import (
    EXAMPLES,
    assert_replays,
    assistant,
    at,
    call,
    corpus_file,
    corpus_pair,
    facts_of,
    replayed,
    shape,
    system,
    tool,
    tool_call,
    user,
    with_,
)

# -- real recordings ----------------------------------------------------------------------------


def _agent_session() -> list:
    """The openai-v2 example (a real two-call tool loop, recorded from the instrumentation),
    then a compacted context: the agent replaced the history by a summary and went on."""
    c1, c2 = facts_of(EXAMPLES / "openai-v2.traces.json")
    assert c1.session_id == c2.session_id and c1.started_at < c2.started_at
    summary = "Summary so far: Paris is 18 °C and cloudy; Zürich is 12 °C with light rain."
    c3_input = [c1.input_messages[0], user(summary), user("And in Berlin?")]
    c3_output = assistant(tool_call("call_b", "get_weather", city="Berlin"), finish="tool_call")
    c3 = call("compacted-1", c3_input, [c3_output], session=c1.session_id, second=0)
    c3 = with_(c3, started_at="2026-11-29T13:43:46.000000000Z")
    c4_input = [*c3_input, replayed(c3_output), tool("call_b", "9 °C, windy")]
    c4 = call(
        "compacted-2", c4_input, [assistant(TextPart("Berlin: 9 °C."))], session=c1.session_id
    )
    c4 = with_(c4, started_at="2026-11-29T13:43:47.000000000Z")
    return [c1, c2, c3, c4]


def test_a_recorded_tool_loop_then_a_compacted_context_splits_where_continuity_breaks() -> None:
    c1, c2, c3, c4 = facts = _agent_session()
    segments = segment_session(c1.session_id, facts)
    assert shape(segments) == [
        (0, None, [c1.inference_call_id, c2.inference_call_id]),
        (1, "input_history_changed", ["compacted-1", "compacted-2"]),
    ]
    loop, compacted = segments
    # The first turn carries the whole input; the next only the two tool results (the model's
    # tool calls are replayed: output finish_reason "tool_call", replay null, same canonically).
    assert loop.turns[0].new_messages == c1.input_messages
    assert [m.role for m in loop.turns[1].new_messages] == ["tool", "tool"]
    assert c1.output_messages[0].finish_reason == "tool_call"
    assert c2.input_messages[2].finish_reason is None
    assert compacted.turns[0].new_messages == c3.input_messages
    assert compacted.turns[1].new_messages == [c4.input_messages[-1]]
    assert [s.segment_id for s in segments] == [
        segment_id(c1.session_id, c1.inference_call_id),
        segment_id(c1.session_id, "compacted-1"),
    ]
    assert_replays(segments)


def test_the_agent_session_gives_identical_segments_in_any_order() -> None:
    facts = _agent_session()
    reference = [encode(s) for s in iter_segments(sort_facts(facts))]
    rng = random.Random(1)
    for _ in range(10):
        rng.shuffle(facts)
        assert [encode(s) for s in iter_segments(sort_facts(facts))] == reference


def _chat_session() -> list:
    """Chat Completions turn 1 (request + response) and turn 2 (request only), recorded by the
    openai-v2 instrumentation's tests; the capture kept no session or times, so both are set."""
    t1 = corpus_pair(
        "openai-chat/parallel_tool_calls.turn1.request.json",
        "openai-chat/parallel_tool_calls.turn1.response.json",
    )
    t2 = corpus_pair("openai-chat/parallel_tool_calls.turn2.request.json")
    return [
        with_(t1, session_id="chat", started_at=at(1)),
        with_(t2, session_id="chat", started_at=at(2)),
    ]


def test_a_recorded_chat_tool_round_trip_is_one_segment() -> None:
    t1, t2 = _chat_session()
    [seg] = segment_session("chat", [t2, t1])
    assert [t.call for t in seg.turns] == [t1, t2]
    assert [m.role for m in seg.turns[1].new_messages] == ["tool", "tool"]
    assert_replays([seg])


def test_a_call_after_one_without_output_splits_as_prior_output_absent() -> None:
    t1, t2 = _chat_session()
    assert t2.output_messages == []  # the recorded turn 2 has no response
    retry = call(
        "retry",
        t2.input_messages,
        [assistant(TextPart("Seattle 50 °F, SF 70 °F."))],
        session="chat",
        second=3,
    )
    segments = segment_session("chat", [t1, t2, retry])
    assert shape(segments) == [
        (0, None, [t1.inference_call_id, t2.inference_call_id]),
        (1, "prior_output_absent", ["retry"]),
    ]
    assert segments[1].turns[0].new_messages == t2.input_messages


def test_an_edited_replay_splits_as_prior_output_not_replayed() -> None:
    t1, _ = _chat_session()
    answer = t1.output_messages[0]
    # The agent replays the tool calls with one argument changed.
    edited = with_(answer, finish_reason=None, parts=[answer.parts[0]])
    follow = call(
        "follow", [*t1.input_messages, edited, user("go on")], [], session="chat", second=3
    )
    assert shape(segment_session("chat", [t1, follow])) == [
        (0, None, [t1.inference_call_id]),
        (1, "prior_output_not_replayed", ["follow"]),
    ]


def test_gemini_function_calls_without_ids_continue_through_synthesized_ids() -> None:
    first = corpus_pair(
        "gemini/vertex_parallel_function_call.request.json",
        "gemini/vertex_parallel_function_call.response.json",
    )
    second = corpus_pair(
        "gemini/vertex_function_response_roundtrip.request.json",
        "gemini/vertex_function_response_roundtrip.response.json",
    )
    assert first.degradations.get("synthesized_id") == 2
    facts = [
        with_(first, session_id="g", started_at=at(1)),
        with_(second, session_id="g", started_at=at(2)),
    ]
    [seg] = segment_session("g", facts)
    assert [t.call.model_call_id for t in seg.turns] == [first.model_call_id, second.model_call_id]
    assert [m.role for m in seg.turns[1].new_messages] == ["tool", "tool"]
    assert_replays([seg])


def test_a_call_carrying_history_captured_before_its_session_is_a_full_first_turn() -> None:
    fact = with_(
        corpus_file("openai-responses/function_call_output_roundtrip.request.json"), session_id="r"
    )
    [seg] = segment_session("r", [fact])
    assert seg.split_reason is None
    assert seg.turns[0].new_messages == fact.input_messages
    assert [m.role for m in fact.input_messages] == ["user", "assistant", "tool"]


def test_identical_choices_replay_as_the_first() -> None:
    n2 = corpus_file("openai-chat/multiple_choices_n2.response.json")
    a, b = n2.output_messages
    assert canonical_messages([a]) == canonical_messages([b])
    first = with_(n2, session_id="n", started_at=at(1), input_messages=[user("Say this is a test")])
    follow = call(
        "follow",
        [user("Say this is a test"), replayed(b), user("Thanks")],
        [],
        session="n",
        second=2,
    )
    [seg] = segment_session("n", [first, follow])
    assert (seg.turns[0].chosen, seg.turns[0].alternatives) == (0, [1])
    assert_replays([seg])


# -- several choices, interleaving, forks -------------------------------------------------------

Q = [system("be brief"), user("pick one")]
CHOICES = [assistant(TextPart("red")), assistant(TextPart("green")), assistant(TextPart("blue"))]


def test_the_replayed_choice_continues_and_the_others_are_alternatives() -> None:
    first = call("c1", Q, CHOICES, second=1)
    follow = call(
        "c2", [*Q, replayed(CHOICES[1]), user("why?")], [assistant(TextPart("calm"))], second=2
    )
    stats = DeriveStats()
    [seg] = segment_session("s", [first, follow], stats)
    assert [(t.chosen, t.alternatives) for t in seg.turns] == [(1, [0, 2]), (0, [])]
    assert stats.alternatives == 2  # counted: no row carries them
    assert seg.turns[1].new_messages == [user("why?")]
    assert_replays([seg])


def test_when_no_later_call_replays_a_choice_the_first_continues() -> None:
    for session in ("s", None):  # a call without a session is a segment of its own
        stats = DeriveStats()
        [seg] = segment_session(session, [call("c1", Q, CHOICES)], stats)
        assert (seg.turns[0].chosen, seg.turns[0].alternatives) == (0, [1, 2])
        assert stats.alternatives == 2


def test_interleaved_sub_agents_give_one_segment_each() -> None:
    a_in, b_in = [user("task A")], [user("task B")]
    a1 = call("a1", a_in, [assistant(tool_call("ta"), finish="tool_call")], second=1)
    b1 = call("b1", b_in, [assistant(tool_call("tb"), finish="tool_call")], second=2)
    a2_in = [*a_in, replayed(a1.output_messages[0]), tool("ta", "A result")]
    a2 = call("a2", a2_in, [assistant(tool_call("ta2"), finish="tool_call")], second=3)
    b2_in = [*b_in, replayed(b1.output_messages[0]), tool("tb", "B result")]
    b2 = call("b2", b2_in, [assistant(TextPart("B done"))], second=4)
    a3_in = [*a2_in, replayed(a2.output_messages[0]), tool("ta2", {"ok": True})]
    a3 = call("a3", a3_in, [assistant(TextPart("A done"))], second=5)
    segments = segment_session("s", [a3, b2, a2, b1, a1])
    assert shape(segments) == [
        (0, None, ["a1", "a2", "a3"]),
        (1, "input_history_changed", ["b1", "b2"]),
    ]
    assert_replays(segments)


def test_a_fork_from_a_call_already_continued_starts_a_segment() -> None:
    x = call("x", Q, [assistant(tool_call("t1"), finish="tool_call")], second=1)
    z = call(
        "z",
        [*Q, replayed(x.output_messages[0]), tool("t1", "first try")],
        [assistant(TextPart("a"))],
        second=2,
    )
    y = call(
        "y",
        [*Q, replayed(x.output_messages[0]), tool("t1", "second try")],
        [assistant(TextPart("b"))],
        second=3,
    )
    assert shape(segment_session("s", [x, z, y])) == [
        (0, None, ["x", "z"]),
        (1, "input_history_changed", ["y"]),
    ]


def test_a_call_extending_an_older_trajectory_is_explained_against_it() -> None:
    # x continues nothing; its input extends c1's but does not replay c1's output, while the
    # most recent call (d1, another task) shares nothing with it.
    c1 = call("c1", Q, [assistant(TextPart("red"))], second=1)
    d1 = call("d1", [user("other task")], [assistant(TextPart("ok"))], second=2)
    x = call("x", [*Q, replayed(assistant(TextPart("RED"))), user("why?")], [], second=3)
    assert shape(segment_session("s", [c1, d1, x]))[2] == (2, "prior_output_not_replayed", ["x"])


def test_the_most_recently_active_of_equal_trajectories_is_continued() -> None:
    out = assistant(TextPart("red"))
    c1 = call("c1", Q, [out], second=1)
    c1_again = call("c1-again", Q, [out], second=2)  # a retry that answered the same
    follow = call("follow", [*Q, replayed(out), user("why?")], [], second=3)
    assert shape(segment_session("s", [c1, c1_again, follow])) == [
        (0, None, ["c1"]),
        (1, "prior_output_not_replayed", ["c1-again", "follow"]),
    ]


def test_true_replayed_as_one_breaks_continuity() -> None:
    first = call("c1", Q, [assistant(tool_call("t", flag=True), finish="tool_call")], second=1)
    replay = assistant(tool_call("t", flag=1), finish=None)
    follow = call("c2", [*Q, replay, tool("t", "done")], [], second=2)
    assert shape(segment_session("s", [first, follow]))[1] == (
        1,
        "prior_output_not_replayed",
        ["c2"],
    )


def test_argument_key_order_does_not_break_continuity() -> None:
    first = call("c1", Q, [assistant(tool_call("t", a=1, b=2), finish="tool_call")], second=1)
    replay = assistant(tool_call("t", b=2, a=1), finish=None)
    follow = call("c2", [*Q, replay, tool("t", "done")], [], second=2)
    assert len(segment_session("s", [first, follow])) == 1


def test_a_call_without_new_messages_still_continues() -> None:
    first = call("c1", Q, [assistant(TextPart("red"))], second=1)
    prefill = call(
        "c2", [*Q, replayed(first.output_messages[0])], [assistant(TextPart(" and blue"))], second=2
    )
    [seg] = segment_session("s", [first, prefill])
    assert seg.turns[1].new_messages == []


# -- sessions, duplicates, ids ----------------------------------------------------------------


def test_calls_without_a_session_are_single_call_segments() -> None:
    first = call("c1", Q, CHOICES, session=None, second=1)
    follow = call("c2", [*Q, replayed(CHOICES[0]), user("why?")], [], session=None, second=2)
    stats = DeriveStats()
    segments = list(iter_segments([first, follow], stats=stats))
    assert shape(segments) == [(0, "no_session", ["c1"]), (0, "no_session", ["c2"])]
    assert (segments[0].turns[0].chosen, segments[0].turns[0].alternatives) == (0, [1, 2])
    assert segments[0].segment_id != segments[1].segment_id
    assert stats.splits == {"no_session": 2} and stats.segments == 2 and stats.sessions == 0


def test_the_same_call_captured_twice_is_one_turn() -> None:
    c1, c2, c3, c4 = _agent_session()
    proxy_copy = with_(c2, inference_call_id="proxy-capture", trace_id=None)  # same model_call_id
    stats = DeriveStats()
    segments = list(iter_segments(sort_facts([c1, c2, c2, proxy_copy, c3, c4], stats), stats=stats))
    assert [len(s.turns) for s in segments] == [2, 2]
    assert (stats.duplicates, stats.calls) == (2, 4)
    assert stats.splits == {"input_history_changed": 1}
    assert set(stats.splits) <= set(SPLIT_REASONS)


def test_segment_ids_depend_on_session_and_first_call_only() -> None:
    assert segment_id("s", "c1") == segment_id("s", "c1")
    assert (
        len(
            {
                segment_id("s", "c1"),
                segment_id("t", "c1"),
                segment_id("s", "c2"),
                segment_id(None, "c1"),
            }
        )
        == 4
    )


def test_many_interleaved_trajectories_beyond_the_fast_window() -> None:
    agents = FAST_WINDOW + 4
    histories = {a: [system("sub-agent"), user(f"task {a}")] for a in range(agents)}
    facts = []
    second = 0
    for turn in range(3):
        for a in range(agents):
            out = assistant(tool_call(f"t{a}-{turn}"), finish="tool_call")
            facts.append(call(f"a{a}-{turn}", list(histories[a]), [out], second=second))
            histories[a] += [replayed(out), tool(f"t{a}-{turn}", turn)]
            second += 1
    facts = [
        with_(f, started_at=f"2025-06-01T10:{i // 60:02d}:{i % 60:02d}.0Z")
        for i, f in enumerate(facts)
    ]
    segments = segment_session("s", facts)
    assert shape(segments) == [
        (a, None if a == 0 else "input_history_changed", [f"a{a}-{t}" for t in range(3)])
        for a in range(agents)
    ]
    assert_replays(segments)
    # Equal tails beyond the window: the most recently active one is continued.
    out = assistant(TextPart("same"))
    twins = [call(f"twin{i}", Q, [out]) for i in range(2)]
    late = call("late", [*Q, replayed(out), user("and?")], [])
    timed = [
        with_(f, started_at=f"2025-06-01T11:00:{i:02d}.0Z")
        for i, f in enumerate([twins[0], twins[1], *facts[: FAST_WINDOW + 1], late])
    ]
    got = {s.turns[0].call.inference_call_id: len(s.turns) for s in segment_session("s", timed)}
    assert (got["twin0"], got["twin1"]) == (1, 2)
