"""Anthropic Messages translator: mapping rules, streams, detection, and robustness."""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lithify.model import (
    InferenceCall,
    Message,
    ReasoningPart,
    Skip,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
)
from lithify.translate import anthropic, provider
from lithify.translate.sse import SSEEvent, iter_events, sse_text
from tests.conftest import CORPUS
from tests.helpers import assert_valid_messages, in_pieces

SSE_FILES = sorted((CORPUS / "anthropic").glob("*.sse"))


def fact(request: Any = None, response: Any = None, **meta: Any) -> InferenceCall:
    result = anthropic.translate(request, response, meta=meta or None)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def req(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": list(messages), **extra}


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def resp(*content: dict[str, Any], stop: str | None = "end_turn", **extra: Any) -> dict[str, Any]:
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": list(content),
        "stop_reason": stop,
        "usage": {"input_tokens": 10, "output_tokens": 5},
        **extra,
    }


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(id_: str, name: str, inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": inp}


def thinking(t: str, sig: str = "c2ln") -> dict[str, Any]:
    return {"type": "thinking", "thinking": t, "signature": sig}


# --- requests -------------------------------------------------------------------------------


def test_system_string_is_a_leading_system_message() -> None:
    f = fact(req(user(text("hi")), system="Be brief."))
    assert f.input_messages[0] == Message("system", [TextPart("Be brief.")])
    assert f.input_messages[1] == Message("user", [TextPart("hi")])


def test_system_blocks_keep_text_and_drop_cache_control() -> None:
    system = [
        {"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "B"},
    ]
    f = fact(req(user(text("hi")), system=system))
    assert f.input_messages[0] == Message("system", [TextPart("A"), TextPart("B")])
    assert f.degradations == {}


def test_empty_system_gives_no_message() -> None:
    f = fact(req(user(text("hi")), system=""))
    assert [m.role for m in f.input_messages] == ["user"]


def test_string_content_and_empty_text_dropped() -> None:
    f = fact(req({"role": "user", "content": "hello"}, user(text(""), text("x"))))
    assert f.input_messages == [
        Message("user", [TextPart("hello")]),
        Message("user", [TextPart("x")]),
    ]


def test_text_that_is_not_a_string_is_counted_not_dropped_silently() -> None:
    """A text block whose ``text`` is a number or an object (the API sends strings) gives no
    part; it is counted, in the messages and in the system prompt, and stays on raw."""
    odd = {"type": "text", "text": {"value": "lost"}}
    f = fact(req(user(odd, text("x")), system=[{"type": "text", "text": 7}]), resp(text("ok")))
    assert f.input_messages == [Message("system", []), Message("user", [TextPart("x")])]
    assert f.degradations == {"malformed_messages": 2}
    empty = fact(req(user(text(""), {"type": "text", "text": None}, text("y"))))
    assert empty.degradations == {}  # empty and missing text: nothing was lost


def test_thinking_signature_counts_opaque_once_per_signed_block() -> None:
    history = {
        "role": "assistant",
        "content": [thinking("plan", "sig"), thinking("more", ""), text("ok")],
    }
    f = fact(req(user(text("q")), history))
    assert f.input_messages[1].parts == [
        ReasoningPart("plan"),
        ReasoningPart("more"),
        TextPart("ok"),
    ]
    assert f.degradations == {"opaque_reasoning": 1}


def test_redacted_thinking_is_opaque_and_kept_on_raw() -> None:
    block = {"type": "redacted_thinking", "data": "ENCRYPTED"}
    f = fact(req(user(text("q"))), resp(block, text("a")))
    assert f.output_messages[0].parts == [TextPart("a")]
    assert f.degradations == {"opaque_reasoning": 1}
    assert f.raw["response"]["content"][0]["data"] == "ENCRYPTED"


def test_tool_use_input_object_string_and_malformed() -> None:
    f = fact(
        None,
        resp(
            tool_use("t1", "a", {"x": 1}),
            tool_use("t2", "b", '{"y": 2}'),
            tool_use("t3", "c", "{not json"),
            tool_use("t4", "d", [1, 2]),
            stop="tool_use",
        ),
    )
    parts = f.output_messages[0].parts
    assert parts == [
        ToolCallPart("t1", "a", {"x": 1}),
        ToolCallPart("t2", "b", {"y": 2}),
        ToolCallPart("t3", "c", {}),
        ToolCallPart("t4", "d", {}),
    ]
    assert f.output_messages[0].finish_reason == "tool_call"
    assert f.degradations == {"malformed_arguments": 2}


def test_tool_result_string_stays_string_and_blocks_stay_blocks() -> None:
    blocks = [{"type": "text", "text": '{"a": 1}'}]
    f = fact(
        req(
            user(
                {"type": "tool_result", "tool_use_id": "t1", "content": '{"a": 1}'},
                {"type": "tool_result", "tool_use_id": "t2", "content": blocks},
                {"type": "tool_result", "tool_use_id": "t3"},
            )
        )
    )
    assert f.input_messages == [
        Message("tool", [ToolCallResponsePart("t1", '{"a": 1}')]),
        Message("tool", [ToolCallResponsePart("t2", blocks)]),
        Message("tool", [ToolCallResponsePart("t3", "")]),
    ]


def test_is_error_leaves_the_result_unchanged_and_stays_on_raw() -> None:
    block = {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True}
    f = fact(req(user(block)))
    assert f.input_messages == [Message("tool", [ToolCallResponsePart("t1", "boom")])]
    assert f.raw["request"]["messages"][0]["content"][0]["is_error"] is True


def test_mixed_user_turn_splits_in_source_order() -> None:
    r1 = {"type": "tool_result", "tool_use_id": "t1", "content": "one"}
    r2 = {"type": "tool_result", "tool_use_id": "t2", "content": "two"}
    f = fact(req(user(r1, r2, text("and now?")), user(text("first"), r1)))
    assert [(m.role, m.parts) for m in f.input_messages] == [
        ("tool", [ToolCallResponsePart("t1", "one")]),
        ("tool", [ToolCallResponsePart("t2", "two")]),
        ("user", [TextPart("and now?")]),
        ("user", [TextPart("first")]),
        ("tool", [ToolCallResponsePart("t1", "one")]),
    ]


def test_unknown_blocks_are_unsupported() -> None:
    f = fact(req(user(text("look"), {"type": "hologram"}, {"type": "image_generation"})))
    assert f.input_messages == [Message("user", [TextPart("look")])]
    assert f.degradations == {"unsupported_content": 2}


def test_search_result_text_is_what_the_model_read() -> None:
    search = {
        "type": "search_result",
        "source": "https://docs.example.com/api",
        "title": "API reference",
        "content": [text("Rate limit: 100/min."), text("Burst: 20.")],
        "citations": {"enabled": True},
    }
    f = fact(req(user(search, text("What is the rate limit?"))))
    assert f.input_messages[0].parts == [
        TextPart("Rate limit: 100/min."),
        TextPart("Burst: 20."),
        TextPart("What is the rate limit?"),
    ]
    assert f.degradations == {}


def test_message_with_only_unsupported_content_is_kept() -> None:
    f = fact(req(user({"type": "hologram"})))
    assert f.input_messages == [Message("user", [])]


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_call"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
        ("Something_New", "something_new"),
        (None, None),
    ],
)
def test_stop_reason_mapping(stop: str | None, expected: str | None) -> None:
    assert fact(None, resp(text("a"), stop=stop)).output_messages[0].finish_reason == expected


def test_tokens_include_cache_reads_and_writes() -> None:
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "output_tokens": 7,
    }
    f = fact(None, resp(text("a"), usage=usage))
    assert (f.input_tokens, f.output_tokens) == (1103, 7)
    f = fact(None, resp(text("a"), usage={"input_tokens": -1, "output_tokens": 1.5}))
    assert (f.input_tokens, f.output_tokens) == (None, None)


def test_request_params_that_were_set() -> None:
    r = req(
        user(text("q")),
        temperature=0.2,
        top_p=0.9,
        top_k=40,
        stop_sequences=["END"],
        tool_choice={"type": "tool", "name": "f"},
        thinking={"type": "enabled", "budget_tokens": 2048},
        output_config={"effort": "high"},
    )
    assert fact(r).request == {
        "max_tokens": 1024,
        "reasoning_budget_tokens": 2048,
        "reasoning_effort": "high",
        "stop": ["END"],
        "temperature": 0.2,
        "tool_choice": {"type": "tool", "name": "f"},
        "top_k": 40,
        "top_p": 0.9,
    }
    disabled = req(user(text("q")), thinking={"type": "disabled"})
    assert "reasoning_budget_tokens" not in fact(disabled).request


def test_tools_custom_kept_server_tools_counted() -> None:
    tools = [
        {"name": "f", "description": "d", "input_schema": {"type": "object"}},
        {"type": "custom", "name": "g", "input_schema": {"type": "object", "properties": {}}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ]
    f = fact(req(user(text("q")), tools=tools))
    assert [(t.name, t.parameters, t.builtin) for t in f.tools] == [
        ("f", {"type": "object"}, None),
        ("g", {"type": "object", "properties": {}}, None),
        ("web_search", {}, tools[2]),  # a built-in, kept whole, named as its calls are
    ]
    assert f.degradations == {}


ANSWER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "counted"),
    [
        ({"output_config": {"format": {"type": "json_schema", "schema": ANSWER_SCHEMA}}}, True),
        ({"output_format": {"type": "json_schema", "schema": ANSWER_SCHEMA}}, True),  # the beta
        (
            {
                "output_config": {
                    "effort": "high",
                    "format": {"type": "json_schema", "schema": ANSWER_SCHEMA},
                }
            },
            True,
        ),
        ({"output_config": {"effort": "high"}}, False),
        ({"output_config": {"format": None}}, False),
        ({}, False),
    ],
)
def test_a_structured_output_schema_is_counted_once(extra: dict[str, Any], counted: bool) -> None:
    # The schema shaped the answer but is in no message: a row would teach its shape unprompted.
    f = fact(req(user(text("Where is the Louvre?")), **extra), resp(text('{"city":"Paris"}')))
    assert f.degradations == ({"output_schema": 1} if counted else {})
    assert {k: f.raw["request"][k] for k in extra} == extra


# --- session, provider, model, identity -----------------------------------------------------

SID = "57a121ec-f78c-48c3-a745-e3036a3ecc33"


@pytest.mark.parametrize(
    ("user_id", "expected"),
    [
        (f"user_{'ab' * 32}_account__session_{SID}", SID),
        (f"user_{'ab' * 32}_account_{SID}_session_{SID.upper()}", SID.upper()),
        (json.dumps({"device_id": "d", "account_uuid": "", "session_id": "s-1"}), "s-1"),
        ("user-1234", None),
        ("user_abc_session_not-a-uuid", None),
        ("{broken json", None),
        (json.dumps({"device_id": "d"}), None),
    ],
)
def test_session_from_claude_code_user_id(user_id: str, expected: str | None) -> None:
    f = fact(req(user(text("q")), metadata={"user_id": user_id}))
    assert f.session_id == expected


def test_meta_session_wins_and_none_is_never_invented() -> None:
    r = req(user(text("q")), metadata={"user_id": f"user_x_account__session_{SID}"})
    assert fact(r, session_id="explicit").session_id == "explicit"
    assert fact(req(user(text("q")))).session_id is None


def test_provider_from_platform_and_meta() -> None:
    vertex = {"anthropic_version": "vertex-2023-10-16", "messages": [user(text("q"))]}
    bedrock = {"anthropic_version": "bedrock-2023-05-31", "messages": [user(text("q"))]}
    assert fact(vertex).provider == "gcp.vertex_ai"
    assert fact(bedrock).provider == "aws.bedrock"
    assert fact(req(user(text("q")))).provider == "anthropic"
    assert fact(req(user(text("q"))), provider="aws.bedrock").provider == "aws.bedrock"


def test_model_prefers_response_then_request_then_meta() -> None:
    assert fact(req(user(text("q"))), resp(text("a"))).model == "claude-sonnet-4-5-20250929"
    assert fact(req(user(text("q")))).model == "claude-sonnet-4-5"
    bare = {"messages": [user(text("q"))], "anthropic_version": "vertex-2023-10-16"}
    assert fact(bare, model="claude-opus-4").model == "claude-opus-4"


def test_identity_is_the_response_id_else_the_raw() -> None:
    a = fact(req(user(text("q"))), resp(text("a")))
    b = fact(req(user(text("other"))), resp(text("a")))
    assert a.inference_call_id == b.inference_call_id
    assert a.model_call_id == "msg_test"
    c = fact(req(user(text("q"))))
    d = fact(req(user(text("q"))))
    e = fact(req(user(text("q2"))))
    assert c.inference_call_id == d.inference_call_id != e.inference_call_id


def test_credentials_are_redacted_from_raw_and_content() -> None:
    key = "sk-ant-api03-" + "A" * 40
    f = fact(req(user(text(f"my key is {key}"))))
    assert key not in orjson.dumps(msgspec.to_builtins(f)).decode()
    assert f.degradations == {"redacted_provider_key": 2}


def test_error_body_and_empty_give_skips() -> None:
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    skip = anthropic.translate(None, err)
    assert isinstance(skip, Skip) and skip.reason == "error_response"
    assert "Overloaded" in skip.detail
    skip = anthropic.translate(None, None)
    assert isinstance(skip, Skip) and skip.reason == "empty"


# --- streams ----------------------------------------------------------------------------------


def stream_of(message: dict[str, Any], seed: int = 0) -> list[SSEEvent]:
    """The SSE events the API would send for ``message``, deltas cut at random places."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    start = {k: v for k, v in message.items() if k not in ("content", "stop_reason", "usage")}
    start.update(content=[], stop_reason=None, usage={**message["usage"], "output_tokens": 1})
    events.append({"type": "message_start", "message": start})
    for i, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            events.append({"type": "content_block_start", "index": i, "content_block": text("")})
            for c in in_pieces(block["text"], rng, 7):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "text_delta", "text": c},
                    }
                )
        elif kind == "thinking":
            empty = {"type": "thinking", "thinking": "", "signature": ""}
            events.append({"type": "content_block_start", "index": i, "content_block": empty})
            for c in in_pieces(block["thinking"], rng, 7):
                delta = {"type": "thinking_delta", "thinking": c}
                events.append({"type": "content_block_delta", "index": i, "delta": delta})
            delta = {"type": "signature_delta", "signature": block["signature"]}
            events.append({"type": "content_block_delta", "index": i, "delta": delta})
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            head = {**block, "input": {}}
            events.append({"type": "content_block_start", "index": i, "content_block": head})
            for c in ["", *in_pieces(json.dumps(block["input"]), rng, 7)]:
                delta = {"type": "input_json_delta", "partial_json": c}
                events.append({"type": "content_block_delta", "index": i, "delta": delta})
        else:
            events.append({"type": "content_block_start", "index": i, "content_block": block})
        events.append({"type": "content_block_stop", "index": i})
        if i == 0:
            events.append({"type": "ping"})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return [SSEEvent(e["type"], json.dumps(e)) for e in events]


def same_fact(a: InferenceCall, b: InferenceCall) -> None:
    da, db = msgspec.to_builtins(a), msgspec.to_builtins(b)
    da.pop("raw"), db.pop("raw")
    assert da == db


MESSAGES = [
    resp(text("Hello there, how can I help?")),
    resp(
        thinking("Let me think about this carefully.", "EqoBsig=="),
        text("Calling the tool."),
        tool_use("toolu_1", "get_weather", {"location": "Paris", "unit": "c"}),
        tool_use("toolu_2", "get_time", {}),
        stop="tool_use",
    ),
    resp(
        {"type": "redacted_thinking", "data": "opaque"},
        text("Short."),
        usage={"input_tokens": 5, "cache_read_input_tokens": 50, "output_tokens": 9},
    ),
    resp(text("cut"), stop="max_tokens"),
    # Server tools: the call streams its input as JSON fragments, the result arrives whole.
    resp(
        text("Let me search."),
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://e.org", "title": "E", "encrypted_content": "RW5j", "page_age": None}],
        },
        {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "echo", "server_name": "srv", "input": {"s": "hi"}},
        {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": False, "content": [text("hi")]},
        {"type": "server_tool_use", "id": "srvtoolu_2", "name": "bash_code_execution", "input": {"command": "ls"}},
        {
            "type": "bash_code_execution_tool_result",
            "tool_use_id": "srvtoolu_2",
            "content": {"type": "bash_code_execution_result", "stdout": "a", "stderr": "", "return_code": 0, "content": []},
        },
        text("Found it."),
    ),
]  # fmt: skip


@pytest.mark.parametrize("message", MESSAGES, ids=range(len(MESSAGES)))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streamed_equals_non_streamed(message: dict[str, Any], seed: int) -> None:
    request = req(user(text("q")), system="sys", temperature=0.5)
    plain = fact(request, message)
    streamed = fact(request, stream_of(message, seed))
    same_fact(plain, streamed)
    assert "truncated_stream" not in streamed.degradations


def test_streamed_raw_keeps_every_event() -> None:
    events = stream_of(MESSAGES[1])
    f = fact(None, events)
    assert f.raw["response"] == sse_text(events)
    assert list(iter_events(f.raw["response"])) == events


def test_corpus_tool_stream_joins_json_fragments() -> None:
    body = (CORPUS / "anthropic" / "tool_use_streaming.response.sse").read_text()
    f = fact(None, list(iter_events(body)))
    calls = [p for p in f.output_messages[0].parts if isinstance(p, ToolCallPart)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("get_weather", {"location": "San Francisco, CA", "unit": "celsius"}),
        ("get_time", {"timezone": "America/Los_Angeles"}),
    ]
    assert f.output_messages[0].finish_reason == "tool_call"
    assert (f.input_tokens, f.output_tokens) == (506, 153)


def test_truncated_stream_keeps_what_arrived() -> None:
    events = stream_of(MESSAGES[1])
    cut = next(i for i, e in enumerate(events) if "input_json_delta" in e.data) + 3
    f = fact(None, events[:cut])
    parts = f.output_messages[0].parts
    assert isinstance(parts[0], ReasoningPart) and isinstance(parts[1], TextPart)
    assert isinstance(parts[2], ToolCallPart) and parts[2].arguments == {}
    assert f.output_messages[0].finish_reason is None
    assert f.degradations == {
        "malformed_arguments": 1,
        "opaque_reasoning": 1,
        "truncated_stream": 1,
    }


def test_error_event_mid_stream_and_alone() -> None:
    err = SSEEvent(
        "error",
        json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
    )
    events = [*stream_of(MESSAGES[0])[:4], err]
    f = fact(None, events)
    assert f.output_messages[0].finish_reason == "error"
    assert f.degradations == {"truncated_stream": 1}
    skip = anthropic.translate(req(user(text("q"))), [err])
    assert isinstance(skip, Skip) and skip.reason == "error_response"


def test_undecodable_event_mid_stream_is_counted() -> None:
    events = stream_of(MESSAGES[0])
    events[3] = SSEEvent("content_block_delta", '{"type": "content_block_de')
    f = fact(None, events)
    assert f.degradations == {"malformed_messages": 1}


def test_a_delta_of_an_unknown_type_is_counted_once_per_block() -> None:
    """A newer delta type on a block this translator knows: what it said is on raw only, and
    counted (before: silently). An unknown block is counted once, as in a plain message."""
    events = stream_of(MESSAGES[0])
    at = next(i for i, e in enumerate(events) if "text_delta" in e.data)
    index = json.loads(events[at].data)["index"]
    newer = {"type": "content_block_delta", "index": index, "delta": {"type": "newer_delta"}}
    events[at:at] = [SSEEvent("content_block_delta", json.dumps(newer))] * 2
    f = fact(None, events)
    assert f.degradations == {"unsupported_content": 1}
    assert f.output_messages == fact(None, stream_of(MESSAGES[0])).output_messages


def test_a_streamed_piece_that_is_not_a_string_is_counted() -> None:
    """A text, thinking or signature delta whose piece is a number or an object (the API sends
    strings) is counted, as a whole body's text block would be; the rest reads as before."""
    events = stream_of(MESSAGES[0])
    at = next(i for i, e in enumerate(events) if "text_delta" in e.data)
    index = json.loads(events[at].data)["index"]
    odd = [{"type": "text_delta", "text": 5}, {"type": "thinking_delta", "thinking": {}}]
    events[at:at] = [
        SSEEvent("content_block_delta", json.dumps({"type": "content_block_delta", "index": index, "delta": d}))
        for d in odd
    ]  # fmt: skip
    f = fact(None, events)
    assert f.degradations == {"malformed_messages": 2}
    assert f.output_messages == fact(None, stream_of(MESSAGES[0])).output_messages


def test_a_delta_of_an_unknown_type_on_a_server_tool_block_is_counted() -> None:
    """Every block this translator reads counts a newer delta, not only text, thinking and
    tool use blocks: on a server tool call or result (before: dropped without a count), and at
    an index no block was opened at."""
    call = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    message = resp(call, result, text("done"))
    newer = {"type": "newer_delta", "what": "said"}
    for index in (0, 1, 7):
        events = stream_of(message)
        delta = {"type": "content_block_delta", "index": index, "delta": newer}
        events.insert(-2, SSEEvent("content_block_delta", json.dumps(delta)))
        f = fact(None, events)
        assert f.degradations == {"unsupported_content": 1}, index
        assert f.output_messages == fact(None, message).output_messages


def _cut_points(body: str) -> list[int]:
    """Every line boundary, and every 11th character (cuts inside JSON and inside lines)."""
    lines = {i + 1 for i, ch in enumerate(body) if ch == "\n"}
    return sorted(lines | set(range(0, len(body), 11)) | {len(body)})


@pytest.mark.parametrize("path", SSE_FILES, ids=lambda p: p.name)
def test_corpus_streams_cut_anywhere_never_raise(path: Any) -> None:
    body = path.read_text()
    full = provider.translate_exchange(None, body)
    assert isinstance(full, InferenceCall)
    for cut in _cut_points(body):
        result = provider.translate_exchange(None, body[:cut], fmt="anthropic")
        assert isinstance(result, InferenceCall | Skip)
        if isinstance(result, InferenceCall):
            assert_valid_messages(result)
            if cut < len(body.rstrip()) - 40:
                assert result.degradations.get("truncated_stream") == 1, cut


# --- detection --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        {
            "model": "gpt-4o",
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
        },
        {  # a `developer` turn is Chat's alone (a `system` one is no longer: the Messages API
            # takes it among `messages`, tests/test_messages_format.py)
            "model": "claude-3-5-sonnet",
            "max_tokens": 5,
            "messages": [{"role": "developer", "content": "s"}],
        },
        {"model": "gpt-4o", "max_tokens": 5, "messages": [{"role": "user", "content": "q"}]},
        {
            "model": "x",
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}
            ],
        },
        {
            "model": "claude-x",
            "max_tokens": 5,
            "n": 2,
            "messages": [{"role": "user", "content": "q"}],
        },
        {
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": "q"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        },
        {"model": "m", "input": "hello"},
        {"contents": [{"role": "user", "parts": [{"text": "q"}]}]},
    ],
)
def test_not_an_anthropic_request(doc: dict[str, Any]) -> None:
    assert not anthropic.looks_like_request(doc)


@pytest.mark.parametrize(
    "doc",
    [
        req(user(text("q")), system="s"),
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "q"}],
        },
        {"model": "m", "messages": [user(tool_use("t", "f", {}))]},
        {"model": "m", "messages": [user(text("q"))], "tools": [{"name": "f", "input_schema": {}}]},
        {"model": "m", "messages": [user(text("q"))], "stop_sequences": ["x"]},
    ],
)
def test_an_anthropic_request(doc: dict[str, Any]) -> None:
    assert anthropic.looks_like_request(doc)


def test_response_and_stream_detection() -> None:
    assert anthropic.looks_like_response(resp(text("a")))
    assert not anthropic.looks_like_response({"choices": [], "content": []})
    assert not anthropic.looks_like_response({"candidates": []})
    assert anthropic.looks_like_stream(stream_of(MESSAGES[0]))
    openai_chunk = SSEEvent(None, json.dumps({"object": "chat.completion.chunk", "choices": []}))
    assert not anthropic.looks_like_stream([openai_chunk])
    responses_evt = SSEEvent("response.created", json.dumps({"type": "response.created"}))
    assert not anthropic.looks_like_stream([responses_evt])


def test_provider_dispatch_picks_anthropic_for_corpus_files() -> None:
    for path in sorted((CORPUS / "anthropic").iterdir()):
        body: Any = path.read_text()
        if path.suffix == ".json":
            body = orjson.loads(body)
            is_req = path.name.endswith(".request.json")
            result = provider.translate_exchange(body if is_req else None, None if is_req else body)
        else:
            result = provider.translate_exchange(None, body)
        assert isinstance(result, InferenceCall) and result.source.name == "anthropic", path


# --- properties -------------------------------------------------------------------------------

# What a JSON decode can give: orjson turns integers beyond 64 bits into floats.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
block_types = st.sampled_from(
    [
        "text",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "tool_result",
        "image",
        "document",
        "server_tool_use",
        "mcp_tool_use",
        "web_search_tool_result",
        "container_upload",
        "search_result",
        "x",
    ]
)
sources = st.fixed_dictionaries(
    {"type": st.sampled_from(["base64", "url", "file", "text", "content", "x"]) | json_values},
    optional={
        "data": st.sampled_from(["iVBORw0KGgo=", "not base64!", ""]) | json_values,
        "media_type": st.sampled_from(["image/png", "application/pdf"]) | json_values,
        "url": json_values,
        "file_id": json_values,
        "content": json_values,
    },
)
blocks = st.fixed_dictionaries(
    {"type": block_types},
    optional={
        "text": json_values,
        "thinking": json_values,
        "signature": json_values,
        "id": json_values,
        "name": json_values,
        "input": json_values,
        "tool_use_id": json_values,
        "content": json_values,
        "source": sources | json_values,
        "file_id": json_values,
    },
)
messages = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]) | json_values,
        "content": st.lists(blocks, max_size=4) | json_values,
    }
)
requests = st.fixed_dictionaries(
    {"messages": st.lists(messages, max_size=4) | json_values},
    optional={
        "system": json_values,
        "metadata": json_values,
        "tools": json_values,
        "model": json_values,
    },
)
responses = st.fixed_dictionaries(
    {"content": st.lists(blocks, max_size=4) | json_values},
    optional={
        "id": json_values,
        "stop_reason": json_values,
        "usage": json_values,
        "model": json_values,
    },
)


def _check(result: Any) -> None:
    assert isinstance(result, InferenceCall | Skip)
    if isinstance(result, InferenceCall):
        assert_valid_messages(result)
        msgspec.json.encode(result)


@given(json_values, json_values)
def test_arbitrary_json_never_raises(request: Any, response: Any) -> None:
    _check(anthropic.translate(request, response))


@given(requests, responses)
def test_shaped_json_never_raises(request: Any, response: Any) -> None:
    _check(anthropic.translate(request, response))


@given(st.sampled_from(MESSAGES), st.randoms(use_true_random=False), st.data())
def test_shuffled_and_dropped_events_never_raise(
    message: Any, rng: random.Random, data: Any
) -> None:
    events = stream_of(message, rng.randint(0, 9))
    rng.shuffle(events)
    events = events[: data.draw(st.integers(0, len(events)))]
    _check(anthropic.translate(None, events))


@given(st.lists(json_values.map(lambda v: SSEEvent(None, json.dumps(v))), max_size=6))
def test_arbitrary_event_data_never_raises(events: list[SSEEvent]) -> None:
    _check(anthropic.translate(None, events))


@given(st.sampled_from(SSE_FILES), st.floats(0, 1))
def test_corpus_streams_cut_at_any_character_never_raise(path: Any, where: float) -> None:
    body = path.read_text()
    _check(anthropic.translate(None, list(iter_events(body[: int(len(body) * where)]))))


def test_no_other_corpus_file_looks_anthropic() -> None:
    for path in sorted(CORPUS.rglob("*")):
        if not path.is_file() or path.name == "SOURCES.md" or path.parent.name == "anthropic":
            continue
        if path.suffix == ".sse":
            assert not anthropic.looks_like_stream(list(iter_events(path.read_text()))), path
            continue
        lines = path.read_bytes().splitlines() if path.suffix == ".jsonl" else [path.read_bytes()]
        for line in lines:
            doc = orjson.loads(line)
            for d in doc if isinstance(doc, list) else [doc]:
                if isinstance(d, dict):
                    assert not anthropic.looks_like_request(d), path
                    assert not anthropic.looks_like_response(d), path


def test_metadata_session_id_is_used_when_given() -> None:
    assert fact(req(user(text("q")), metadata={"session_id": "conv-7"})).session_id == "conv-7"


# --- compaction, citations, synthesized ids (issue 12) ---------------------------------------


def test_compaction_summary_is_text_and_its_opaque_state_is_counted() -> None:
    summary = {"type": "compaction", "content": "Summary: user said hello."}
    signed = {**summary, "encrypted_content": "ZW5j", "signature": "c2ln"}
    failed = {"type": "compaction", "content": None}
    f = fact(req(user(text("hi"))), resp(summary, text("Hello again.")))
    assert f.output_messages[0].parts == [TextPart("Summary: user said hello."), TextPart("Hello again.")]  # fmt: skip
    assert f.degradations == {}
    assert fact(None, resp(signed)).degradations == {"opaque_reasoning": 1}
    failed_fact = fact(None, resp(failed, text("x")))
    assert failed_fact.output_messages[0].parts == [TextPart("x")]
    assert failed_fact.degradations == {}


def test_streamed_citations_and_compaction_equal_the_plain_message() -> None:
    cite = {"type": "char_location", "cited_text": "a", "document_index": 0, "start_char_index": 0, "end_char_index": 1}  # fmt: skip
    plain = resp(
        {"type": "compaction", "content": "S"},
        {"type": "text", "text": "cited", "citations": [cite, cite]},
    )
    evs = [
        {"type": "message_start", "message": {**plain, "content": [], "stop_reason": None}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "compaction", "content": None},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "compaction_delta", "content": "S"},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": "", "citations": []},
        },
        *(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "citations_delta", "citation": cite},
            }
            for _ in range(2)
        ),
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "cited"},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    streamed = fact(None, [SSEEvent(e["type"], json.dumps(e)) for e in evs])
    expected = fact(None, plain)
    assert expected.degradations == {"text_citation": 2}
    assert msgspec.structs.replace(streamed, raw=None) == msgspec.structs.replace(
        expected, raw=None
    )


def test_synthesized_tool_use_id_is_the_same_in_its_replay() -> None:
    call = {"type": "tool_use", "name": "f", "input": {"x": 1}}  # no id: invalid, never dropped
    first = fact(req(user(text("q"))), resp(thinking("t"), call, stop="tool_use"))
    (made,) = [p for p in first.output_messages[0].parts if isinstance(p, ToolCallPart)]
    # The client replays the turn without its thinking block and with another system prompt.
    second = fact(
        req(
            user(text("q")),
            {"role": "assistant", "content": [call]},
            user({"type": "tool_result", "tool_use_id": made.id, "content": "r"}),
            system="changed",
        )
    )
    assert second.input_messages[2].parts == [made]
    assert first.degradations == {"opaque_reasoning": 1, "synthesized_id": 1}


# --- beta blocks the canonical parts cannot hold (audit C) -----------------------------------

# `tool_changes` entries as `BetaCompactionBlock.tool_changes` sends them: an addition by
# reference and by value, a removal of an MCP toolset.
TOOL_CHANGES = [
    {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "deploy"}},
    {
        "type": "tool_addition",
        "tool": {
            "type": "tool_definition",
            "definition": {"name": "rollback", "input_schema": {"type": "object"}},
        },
    },
    {"type": "tool_removal", "tool": {"type": "mcp_toolset_reference", "server_name": "github"}},
]


def test_each_compaction_tool_change_is_counted_whole_streamed_and_replayed() -> None:
    compaction = {"type": "compaction", "content": "Summary so far.", "tool_changes": TOOL_CHANGES}
    request = req(user(text("go")), tools=[{"name": "deploy", "input_schema": {}}])
    plain = fact(request, resp(compaction, text("Continuing.")))
    assert plain.output_messages[0].parts == [TextPart("Summary so far."), TextPart("Continuing.")]
    assert plain.degradations == {"unsupported_content": 3}
    # The tools offered stay the request's: the changes apply from a point in the conversation.
    assert [t.name for t in plain.tools] == ["deploy"]
    # The stream sends the changes in content_block_start and the summary in a delta.
    evs = [
        {"type": "message_start", "message": {**resp(), "stop_reason": None}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "compaction", "content": None, "tool_changes": TOOL_CHANGES},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "compaction_delta", "content": "Summary so far."},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": text("")},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "Continuing."},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]  # fmt: skip
    streamed = fact(request, [SSEEvent(e["type"], json.dumps(e)) for e in evs])
    same_fact(plain, streamed)
    # Sent back unchanged, the block is counted in the history as each standalone entry is.
    history = [user(text("go")), {"role": "assistant", "content": [compaction]}]
    assert fact(req(*history)).degradations == {"unsupported_content": 3}
    assert fact(req(user(*TOOL_CHANGES))).degradations == {"unsupported_content": 3}
    assert fact(None, resp({**compaction, "tool_changes": []})).degradations == {}


# A fallback turn (`BetaFallbackBlock`): the requested model declined, a fallback model went on.
FALLBACK = {
    "type": "fallback",
    "from": {"model": "claude-opus-4-5"},
    "to": {"model": "claude-sonnet-4-5-20250929"},
    "trigger": {"type": "refusal", "category": None},
}


def test_a_fallback_turn_stays_one_message_and_is_counted() -> None:
    answer = resp(text("I started to answer but"), FALLBACK, text("Here is the full answer."))
    request = req(user(text("q")))
    plain = fact(request, answer)
    assert plain.output_messages == [
        Message(
            "assistant",
            [TextPart("I started to answer but"), TextPart("Here is the full answer.")],
            "stop",
        )
    ]
    assert plain.degradations == {"unsupported_content": 1}
    # Streamed, the block comes whole in content_block_start, with no delta.
    for seed in range(3):
        same_fact(plain, fact(request, stream_of(answer, seed)))
    replayed = fact(req(user(text("q")), {"role": "assistant", "content": answer["content"]}))
    assert replayed.input_messages[1] == Message("assistant", plain.output_messages[0].parts)
    assert replayed.degradations == {"unsupported_content": 1}


# `ToolUseBlock.caller` (anthropic 2.16.0 tool_use_block.py): who made a call. A toolset
# member's call (`toolset_name`) is the model's own, under the name the model wrote.
CODE_CALLER = {"type": "code_execution_20250825", "tool_id": "srvtoolu_1"}
CALLERS = [None, {"type": "direct"}, CODE_CALLER, {"type": "code_execution_20260120", "tool_id": "srvtoolu_1"}]  # fmt: skip


def test_calls_made_by_sandboxed_code_are_counted() -> None:
    code = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "code_execution", "input": {"code": "get_weather('a')"}}  # fmt: skip
    by_code = {**tool_use("toolu_1", "get_weather", {"city": "a"}), "caller": CODE_CALLER}
    direct = {**tool_use("toolu_2", "get_time", {}), "caller": {"type": "direct"}}
    toolset = {**tool_use("toolu_3", "left_click", {"ref": "e1"}), "toolset_name": "browser"}
    answer = resp(code, by_code, direct, toolset, stop="tool_use")
    plain = fact(req(user(text("q"))), answer)
    assert plain.output_messages[0].parts[1:] == [
        ToolCallPart("toolu_1", "get_weather", {"city": "a"}),
        ToolCallPart("toolu_2", "get_time", {}),
        ToolCallPart("toolu_3", "left_click", {"ref": "e1"}),
    ]
    assert plain.degradations == {"unsupported_content": 1}
    assert plain.raw["response"]["content"][1]["caller"] == CODE_CALLER
    for seed in range(3):
        same_fact(plain, fact(req(user(text("q"))), stream_of(answer, seed)))


@given(
    st.lists(
        st.tuples(st.sampled_from(CALLERS), st.sampled_from([None, "browser", "computer"])),
        min_size=1,
        max_size=5,
    ),
    st.integers(0, 9),
)
def test_each_call_not_made_directly_by_the_model_counts_once(
    calls: list[tuple[dict[str, Any] | None, str | None]], seed: int
) -> None:
    blocks = []
    for i, (caller, toolset) in enumerate(calls):
        block = tool_use(f"toolu_{i}", "left_click", {"i": i})
        if caller is not None:
            block["caller"] = caller
        if toolset is not None:
            block["toolset_name"] = toolset
        blocks.append(block)
    answer = resp(*blocks, stop="tool_use")
    plain = fact(None, answer)
    counted = sum(1 for c, _ in calls if c is not None and c["type"] != "direct")
    assert plain.degradations == ({"unsupported_content": counted} if counted else {})
    assert [p.id for p in plain.output_messages[0].parts] == [b["id"] for b in blocks]
    same_fact(plain, fact(None, stream_of(answer, seed)))
    # The history a client sends back counts them again, as every count of its content.
    history = fact(req(user(text("q")), {"role": "assistant", "content": blocks}))
    assert history.degradations == plain.degradations
