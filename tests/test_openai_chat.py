"""OpenAI Chat Completions: shape detection, mapping rules, stream reassembly, robustness."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lithify.model import (
    DEGRADATION_REASONS,
    NO_FACT_REASONS,
    FilePart,
    InferenceCall,
    Message,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    Skip,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
    UriPart,
)
from lithify.translate import openai_chat, provider
from lithify.translate._common import FREEFORM_PARAMETERS, Degradations, blob_part
from lithify.translate.sse import SSEEvent, iter_events
from tests.conftest import CORPUS
from tests.helpers import assert_valid_messages

STREAM = CORPUS / "openai-chat" / "parallel_tool_calls_streaming.response.sse"


def load(rel: str) -> Any:
    return orjson.loads((CORPUS / rel).read_bytes())


def fact(request: Any, response: Any, **kw: Any) -> InferenceCall:
    result = openai_chat.translate(request, response, **kw)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def body(*choices: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-x",
        "choices": [{"index": i, "finish_reason": "stop", **c} for i, c in enumerate(choices)],
        **extra,
    }


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    doc: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-x",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    doc.update(extra)
    return orjson.dumps(doc).decode()


def events(*data: str) -> list[SSEEvent]:
    return [SSEEvent(None, d) for d in data]


def same_fact(a: InferenceCall, b: InferenceCall) -> None:
    """Equal in everything but the raw payload they were read from."""
    assert msgspec.structs.replace(a, raw=None) == msgspec.structs.replace(b, raw=None)


def cut_points(text: str) -> list[int]:
    """Every kind of place a stream can break: each line's start, middle and end, and after the
    blank line that closes an event."""
    points: set[int] = set()
    start = 0
    for line in text.splitlines(keepends=True):
        end = start + len(line.rstrip("\n"))
        points.update((start, (start + end) // 2, end, start + len(line)))
        start += len(line)
    return sorted(p for p in points if p < len(text))


# --- shape detection ---------------------------------------------------------------------------


def _corpus_json(folder: str, suffix: str) -> list[str]:
    return sorted(p.relative_to(CORPUS).as_posix() for p in (CORPUS / folder).glob(f"*{suffix}"))


@pytest.mark.parametrize("rel", _corpus_json("openai-chat", ".request.json"))
def test_claims_chat_requests(rel: str) -> None:
    assert openai_chat.looks_like_request(load(rel))


@pytest.mark.parametrize("rel", _corpus_json("openai-chat", ".response.json"))
def test_claims_chat_responses(rel: str) -> None:
    assert openai_chat.looks_like_response(load(rel))


@pytest.mark.parametrize(
    "rel",
    [
        *_corpus_json("anthropic", ".json"),
        *_corpus_json("gemini", ".json"),
        *_corpus_json("openai-responses", ".json"),
    ],
)
def test_leaves_other_bodies_alone(rel: str) -> None:
    doc = load(rel)
    assert not openai_chat.looks_like_request(doc)
    assert not openai_chat.looks_like_response(doc)


@pytest.mark.parametrize(
    "path",
    sorted(p for p in CORPUS.rglob("*.sse") if p.parent.name != "openai-chat"),
    ids=lambda p: p.name,
)
def test_leaves_other_streams_alone(path: Path) -> None:
    assert not openai_chat.looks_like_stream(list(iter_events(path.read_text())))


def test_claims_the_chat_stream() -> None:
    assert openai_chat.looks_like_stream(list(iter_events(STREAM.read_text())))


def test_anthropic_shaped_request_is_not_chat() -> None:
    doc = {
        "model": "claude-x",
        "max_tokens": 100,
        "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    assert not openai_chat.looks_like_request(doc)
    doc2 = {
        "model": "claude-x",
        "max_tokens": 100,
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
            }
        ],
    }
    assert not openai_chat.looks_like_request(doc2)


# --- requests ----------------------------------------------------------------------------------


def test_content_strings_and_parts() -> None:
    req = {
        "model": "gpt-x",
        "messages": [
            {"role": "developer", "content": "rules"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                    {"type": "file", "file": {"file_id": "file-1"}},
                    {"type": "text", "text": ""},
                    {"type": "video_embeds", "video_embeds": "…"},
                    {"type": "text", "text": "again"},
                ],
            },
        ],
    }
    f = fact(req, None)
    assert f.input_messages == [
        Message("developer", [TextPart("rules")]),
        Message(
            "user",
            [
                TextPart("look"),
                UriPart("image", None, "https://x/y.png"),
                blob_part(b"\0\0\0", "audio/wav", Degradations(), "audio"),
                FilePart("document", None, "file-1"),
                TextPart("again"),
            ],
        ),
    ]
    # Media are parts (tests/test_openai_chat_media.py); a type no source documents is counted.
    assert f.degradations == {"content_reference": 2, "unsupported_content": 1}
    assert f.output_messages == []
    assert f.model == "gpt-x"


def test_tool_call_arguments() -> None:
    req = {
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{"}},
                    {"id": "b", "type": "function", "function": {"name": "f", "arguments": ""}},
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}},
                    {
                        "id": "d",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"x":1}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": '{"not": "parsed"}'},
        ],
    }
    f = fact(req, None)
    calls = f.input_messages[0].parts
    assert [c.arguments for c in calls if isinstance(c, ToolCallPart)] == [{}, {}, {}, {"x": 1}]
    assert f.degradations == {"malformed_arguments": 2}
    # A tool result stays exactly the string the model received.
    assert f.input_messages[1] == Message("tool", [ToolCallResponsePart("a", '{"not": "parsed"}')])


def test_legacy_function_call_pairs_by_name_and_order() -> None:
    req = {
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            },
            {"role": "function", "name": "weather", "content": "cold"},
            {"role": "function", "name": "clock", "content": "noon"},
        ],
        "functions": [{"name": "weather", "parameters": {"type": "object"}}],
        "function_call": "auto",
    }
    f = fact(req, None)
    call = f.input_messages[1].parts[0]
    assert isinstance(call, ToolCallPart)
    assert call.id.startswith("lithify_") and call.arguments == {"city": "Oslo"}
    assert f.input_messages[2] == Message("tool", [ToolCallResponsePart(call.id, "cold")])
    orphan = f.input_messages[3].parts[0]
    assert isinstance(orphan, ToolCallResponsePart) and orphan.id != call.id
    assert f.degradations == {"synthesized_id": 1, "orphan_tool_response": 1}
    assert f.tools[0].name == "weather"
    assert f.request == {"tool_choice": "auto"}


def test_legacy_call_id_is_the_same_in_the_response_and_its_replay() -> None:
    req1 = load("openai-chat/legacy_function_call.request.json")
    resp1 = load("openai-chat/legacy_function_call.response.json")
    first = fact(req1, resp1)
    replay = {
        **req1,
        "messages": [
            *req1["messages"],
            resp1["choices"][0]["message"],
            {"role": "function", "name": "get_current_weather", "content": "sunny"},
        ],
    }
    second = fact(replay, None)
    out = first.output_messages[0]
    assert second.input_messages[1].parts == out.parts
    call = out.parts[0]
    assert isinstance(call, ToolCallPart)
    assert second.input_messages[2].parts == [ToolCallResponsePart(call.id, "sunny")]
    assert first.output_messages[0].finish_reason == "tool_call"


def test_tool_result_without_id_pairs_with_the_open_call() -> None:
    req = {
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [{"id": "x1", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "content": "ok"},
            {"role": "tool", "content": "again"},
        ]
    }
    f = fact(req, None)
    assert f.input_messages[1].parts == [ToolCallResponsePart("x1", "ok")]
    assert f.degradations == {"orphan_tool_response": 1}


def test_reasoning_comes_before_the_text() -> None:
    req = {
        "messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "add them"},
        ]
    }
    resp = body({"message": {"role": "assistant", "content": "yes", "reasoning": "check"}})
    f = fact(req, resp)
    assert f.input_messages[1].parts == [ReasoningPart("add them"), TextPart("4")]
    assert f.output_messages[0].parts == [ReasoningPart("check"), TextPart("yes")]
    assert f.degradations == {}


def test_same_reasoning_under_both_names_is_one_part() -> None:
    resp = body({"message": {"content": "a", "reasoning": "r", "reasoning_content": "r"}})
    assert fact(None, resp).output_messages[0].parts == [ReasoningPart("r"), TextPart("a")]


def test_refusal_is_the_visible_answer() -> None:
    resp = body({"message": {"role": "assistant", "content": None, "refusal": "I can't help."}})
    f = fact(None, resp)
    assert f.output_messages == [Message("assistant", [TextPart("I can't help.")], "stop")]
    assert f.degradations == {}


def test_choices_in_index_order() -> None:
    resp = body(
        {"index": 2, "message": {"content": "c"}, "finish_reason": "length"},
        {"index": 0, "message": {"content": "a"}, "finish_reason": "content_filter"},
        {"index": 1, "message": {"content": "b"}, "finish_reason": "Weird_Reason"},
    )
    f = fact(None, resp)
    assert [(m.parts, m.finish_reason) for m in f.output_messages] == [
        ([TextPart("a")], "content_filter"),
        ([TextPart("b")], "weird_reason"),
        ([TextPart("c")], "length"),
    ]


def test_metadata() -> None:
    req = {
        "model": "gpt-req",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2,
        "top_p": None,
        "max_tokens": 10,
        "max_completion_tokens": 20,
        "stop": ["\n"],
        "seed": 7,
        "n": 2,
        "reasoning_effort": "high",
        "user": "user-123",
        "metadata": {"session_id": "sess-1"},
        "stream": False,
    }
    resp = body({"message": {"content": "x"}}, usage={"prompt_tokens": 5, "completion_tokens": -1})
    f = fact(req, resp)
    assert f.request == {
        "max_tokens": 20,
        "n": 2,
        "reasoning_effort": "high",
        "seed": 7,
        "stop": ["\n"],
        "temperature": 0.2,
    }
    assert f.session_id == "sess-1"
    assert (f.input_tokens, f.output_tokens) == (5, None)
    assert f.model == "gpt-x" and f.provider == "openai"
    assert f.started_at == "2023-11-14T22:13:20.000000000Z"
    assert f.model_call_id == "chatcmpl-1"
    assert f.source.name == "openai-chat"
    assert f.raw == {"request": req, "response": resp}

    without_session = {k: v for k, v in req.items() if k != "metadata"}
    assert fact(without_session, resp).session_id is None  # `user` is not a session
    f2 = fact(req, resp, meta={"session_id": "from-header", "provider": "azure.ai.openai"})
    assert (f2.session_id, f2.provider) == ("from-header", "azure.ai.openai")
    f3 = fact(without_session, resp, meta={"headers": {"Lithify-Session-Id": "h1"}})
    assert f3.session_id == "h1"


def test_identity() -> None:
    resp = body({"message": {"content": "x"}})
    a = fact({"messages": [{"role": "user", "content": "one"}]}, resp)
    b = fact({"messages": [{"role": "user", "content": "two"}]}, resp)
    assert a.inference_call_id == b.inference_call_id  # the response id decides
    anon = {k: v for k, v in resp.items() if k != "id"}
    c = fact(None, anon)
    assert c.model_call_id is None
    assert c.inference_call_id == fact(None, dict(anon)).inference_call_id
    assert c.inference_call_id != fact(None, {**anon, "created": 1}).inference_call_id


def test_zero_valued_fields_are_absent() -> None:
    f = fact(None, load("openai-chat/snowflake_cortex_zero_value_fields.response.json"))
    assert f.degradations == {}
    assert f.model_call_id is None
    assert f.output_messages == [
        Message(
            "assistant",
            [
                ToolCallPart(
                    "toolu_bdrk_015BgHUFs4HS1TVWWwNRNxip", "get_weather", {"city": "Mexico City"}
                )
            ],
            None,
        )
    ]


def test_audio_answer_is_its_transcript_then_its_audio() -> None:
    resp = body(
        {
            "message": {
                "content": None,
                "audio": {"id": "audio_1", "data": "AAAA", "transcript": "hi"},
            }
        }
    )
    f = fact({"messages": [], "audio": {"format": "wav"}}, resp)
    audio = blob_part(b"\0\0\0", "audio/wav", Degradations(), "audio")
    assert f.output_messages[0].parts == [TextPart("hi"), audio]
    assert f.degradations == {}


def test_tools_and_builtins() -> None:
    req = {
        "messages": [{"role": "user", "content": "x"}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "description": "d", "parameters": {"type": "object"}},
            },
            {"type": "web_search"},
            7,
        ],
    }
    f = fact(req, None)
    # A built-in tool is kept as the request defined it; only an unreadable definition is lost.
    assert [(t.name, t.description, t.parameters, t.builtin) for t in f.tools] == [
        ("f", "d", {"type": "object"}, None),
        ("web_search", None, {}, {"type": "web_search"}),
    ]
    assert f.degradations == {"unsupported_tool": 1}


def test_web_search_options_are_the_web_search_tool_the_search_models_run() -> None:
    """``web_search_options`` (gpt-4o-search-preview and kin) gives the model a web search the
    provider runs: the built-in ``web_search`` tool, with the options as Responses takes them;
    the answer's URL citations are counted as any text's."""
    options = {"search_context_size": "low", "user_location": {"type": "approximate"}}
    req = {"messages": [{"role": "user", "content": "news?"}], "web_search_options": options}
    cite = {"type": "url_citation", "url_citation": {"url": "https://e.x", "title": "E"}}
    answer = {"role": "assistant", "content": "Calm.", "annotations": [cite]}
    f = fact(req, body({"message": answer}))
    assert [(t.name, t.parameters, t.builtin) for t in f.tools] == [
        ("web_search", {}, {**options, "type": "web_search"})
    ]
    assert f.degradations == {"text_citation": 1}
    assert fact({**req, "web_search_options": {}}, None).tools[0].builtin == {"type": "web_search"}


def test_credentials_are_redacted_in_raw() -> None:
    key = "sk-proj-" + "a" * 30
    req = {"messages": [{"role": "user", "content": f"my key is {key}"}], "api_key": "hunter2"}
    f = fact(req, None)
    assert key not in orjson.dumps(msgspec.to_builtins(f)).decode()
    assert "hunter2" not in orjson.dumps(f.raw).decode()


def test_dispatch_through_provider() -> None:
    req = load("openai-chat/parallel_tool_calls.turn1.request.json")
    resp = load("openai-chat/parallel_tool_calls.turn1.response.json")
    r = provider.translate_exchange(req, resp)
    assert isinstance(r, InferenceCall) and r.source.name == "openai-chat"
    r2 = provider.translate_exchange(None, STREAM.read_text())
    assert isinstance(r2, InferenceCall) and r2.source.name == "openai-chat"


def test_no_chat_content_is_a_skip() -> None:
    r = openai_chat.translate({"model": "x"}, None)
    assert isinstance(r, Skip) and r.reason == "unrecognized_format"


# --- streams -----------------------------------------------------------------------------------


def test_stream_equals_the_plain_response() -> None:
    plain = body(
        {
            "message": {
                "role": "assistant",
                "content": "Let me check.",
                "reasoning_content": "need tools",
                "refusal": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a": 1}'},
                    },
                    {"id": "c2", "type": "function", "function": {"name": "g", "arguments": ""}},
                ],
            },
            "finish_reason": "tool_calls",
        },
        usage={"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12},
    )
    stream = events(
        chunk({"role": "assistant", "content": None}, usage=None),
        chunk({"reasoning_content": "need "}),
        chunk({"reasoning_content": "tools"}),
        chunk({"content": "Let me"}),
        chunk({"content": " check."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]}),
        chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "c2", "type": "function", "function": {"name": "g"}}
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}),
        chunk({}, "tool_calls"),
        chunk(None, usage={"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}),
        "[DONE]",
    )
    req = {"model": "gpt-x", "messages": [{"role": "user", "content": "go"}]}
    a, b = fact(req, plain), fact(req, stream)
    same_fact(a, b)
    assert b.degradations == {}
    assert b.output_messages[0].parts[0] == ReasoningPart("need tools")
    assert b.output_messages[0].finish_reason == "tool_call"


def test_stream_with_several_choices_and_legacy_function_call() -> None:
    plain = body(
        {"index": 0, "message": {"role": "assistant", "content": "A"}},
        {
            "index": 1,
            "message": {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "f", "arguments": '{"q": 2}'},
            },
            "finish_reason": "function_call",
        },
    )

    def c(index: int, delta: dict[str, Any], finish: str | None = None) -> str:
        return orjson.dumps(
            {
                "id": "chatcmpl-1",
                "created": 1700000000,
                "model": "gpt-x",
                "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
            }
        ).decode()

    stream = events(
        c(1, {"role": "assistant", "function_call": {"name": "f", "arguments": ""}}),
        c(0, {"role": "assistant", "content": "A"}),
        c(1, {"function_call": {"arguments": '{"q"'}}),
        c(1, {"function_call": {"arguments": ": 2}"}}),
        c(0, {}, "stop"),
        c(1, {}, "function_call"),
        "[DONE]",
    )
    same_fact(fact(None, plain), fact(None, stream))


def test_corpus_stream() -> None:
    f = fact(None, list(iter_events(STREAM.read_text())))
    assert f.degradations == {}
    assert [p.arguments for p in f.output_messages[0].parts if isinstance(p, ToolCallPart)] == [
        {"location": "Seattle, WA"},
        {"location": "San Francisco, CA"},
    ]
    assert (f.input_tokens, f.output_tokens) == (75, 51)
    assert f.raw["response"] == STREAM.read_text().strip() + "\n\n"


def test_stream_raw_translates_again_to_the_same_fact() -> None:
    f = fact(None, list(iter_events(STREAM.read_text())))
    again = provider.translate_exchange(f.raw["request"], f.raw["response"])
    assert isinstance(again, InferenceCall)
    assert again == f


def test_truncated_at_every_event() -> None:
    evs = list(iter_events(STREAM.read_text()))
    for cut in range(1, len(evs)):
        r = openai_chat.translate(None, evs[:cut])
        assert isinstance(r, InferenceCall), cut
        assert_valid_messages(r)
        assert r.degradations.get("truncated_stream") == 1, cut
    assert "truncated_stream" not in fact(None, evs).degradations


def test_truncated_at_every_character() -> None:
    text = STREAM.read_text()
    done = text.index("data: [DONE]") + len("data: [DONE]")
    for cut in cut_points(text):
        r = provider.translate_exchange(None, text[:cut], fmt="openai-chat")
        if isinstance(r, Skip):
            assert r.reason in ("empty", "unrecognized_format"), cut
            continue
        assert_valid_messages(r)
        assert ("truncated_stream" in r.degradations) == (cut < done), cut
        assert set(r.degradations) <= {"truncated_stream", "malformed_arguments"}, cut


def test_truncated_stream_keeps_what_arrived() -> None:
    stream = events(chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"}))
    f = fact({"messages": [{"role": "user", "content": "hi"}]}, stream)
    assert f.output_messages == [Message("assistant", [TextPart("Hello")], None)]
    assert f.degradations == {"truncated_stream": 1}
    empty = openai_chat.translate({"messages": [{"role": "user", "content": "hi"}]}, [])
    assert isinstance(empty, InferenceCall) and empty.degradations == {"truncated_stream": 1}
    assert isinstance(openai_chat.translate(None, []), Skip)


def test_stream_errors() -> None:
    err = orjson.dumps({"error": {"message": "overloaded", "type": "server_error"}}).decode()
    first = openai_chat.translate(None, events(err))
    assert isinstance(first, Skip) and first.reason == "error_response"
    assert first.detail == "overloaded"
    # Every provider's error reads the same way: its message, else its type, else all of it.
    untold = openai_chat.translate(None, events('{"error": {"type": "server_error"}}'))
    assert isinstance(untold, Skip) and untold.detail == "server_error"
    bare = provider.translate_exchange(None, {"error": {"code": 529}})
    assert isinstance(bare, Skip) and bare.detail == "{'code': 529}"
    # Cut short by the error: what arrived is kept, ended with `error`, and the stream ended
    # before its final event, as an Anthropic or Gemini stream cut that way counts.
    mid = fact(None, events(chunk({"content": "par"}), err))
    assert mid.output_messages == [Message("assistant", [TextPart("par")], "error")]
    assert mid.degradations == {"truncated_stream": 1}


def test_payloads_the_encoders_refuse_are_skips() -> None:
    # orjson reads up to 1024 levels; the encoders behind `finish` give up before that.
    deep = orjson.loads("[" * 1000 + "]" * 1000)
    r = openai_chat.translate({"messages": [{"role": "user", "content": "x"}], "x": deep}, None)
    assert isinstance(r, Skip) and r.reason == "undecodable"
    nested_args = {
        "messages": [
            {"role": "assistant", "function_call": {"name": "f", "arguments": {"a": deep}}}
        ]
    }
    r = openai_chat.translate(nested_args, None)
    assert isinstance(r, Skip) and r.reason == "undecodable"


# --- robustness --------------------------------------------------------------------------------

CHAT_KEYS = [
    "messages", "role", "content", "type", "text", "tool_calls", "id", "function", "name",
    "arguments", "function_call", "tool_call_id", "reasoning_content", "reasoning", "refusal",
    "choices", "message", "delta", "index", "finish_reason", "usage", "prompt_tokens",
    "completion_tokens", "tools", "functions", "parameters", "model", "created", "audio",
    "custom", "input", "metadata", "session_id", "reasoning_details", "image_url", "object",
]  # fmt: skip

# Bodies come from orjson, which reads no integer beyond 64 bits.
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars
    | st.sampled_from(["user", "assistant", "tool", "function", "text", "function", "stop", "{}"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(CHAT_KEYS) | st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=30,
)


def _check(result: InferenceCall | Skip) -> None:
    if isinstance(result, Skip):
        assert result.reason in NO_FACT_REASONS
        assert result.reason != "undecodable"  # kept for payloads the encoders refuse
        return
    assert_valid_messages(result)
    assert set(result.degradations) <= set(DEGRADATION_REASONS)
    orjson.dumps(msgspec.to_builtins(result))


@given(json_values, json_values)
def test_arbitrary_json_never_raises(request: Any, response: Any) -> None:
    for doc in (request, response):
        if isinstance(doc, dict):
            openai_chat.looks_like_request(doc)
            openai_chat.looks_like_response(doc)
    _check(openai_chat.translate(request, response))
    _check(provider.translate_exchange(request, response, fmt="openai-chat"))


@given(st.lists(json_values, max_size=6))
def test_arbitrary_chunks_never_raise(datas: list[Any]) -> None:
    evs = [SSEEvent(None, d if isinstance(d, str) else orjson.dumps(d).decode()) for d in datas]
    openai_chat.looks_like_stream(evs)
    _check(openai_chat.translate(None, evs))


@given(st.integers(min_value=0), st.randoms(use_true_random=False))
def test_cut_and_shuffled_corpus_stream_never_raises(cut: int, rnd: random.Random) -> None:
    evs = list(iter_events(STREAM.read_text()))
    evs = evs[: cut % (len(evs) + 1)]
    rnd.shuffle(evs)
    _check(openai_chat.translate(None, evs))


def _mutate(doc: Any, rnd: random.Random, value: Any) -> Any:
    """``doc`` with one randomly chosen node (possibly the root) replaced by ``value``."""
    if rnd.random() < 0.25 or not isinstance(doc, dict | list) or not doc:
        return value
    if isinstance(doc, dict):
        key = rnd.choice(sorted(doc))
        return {**doc, key: _mutate(doc[key], rnd, value)}
    i = rnd.randrange(len(doc))
    return [*doc[:i], _mutate(doc[i], rnd, value), *doc[i + 1 :]]


CORPUS_BODIES = sorted((CORPUS / "openai-chat").glob("*.json"))


@given(
    st.sampled_from(CORPUS_BODIES),
    st.sampled_from(CORPUS_BODIES),
    st.randoms(use_true_random=False),
    json_values,
)
def test_mutated_corpus_bodies_never_raise(
    a: Path, b: Path, rnd: random.Random, value: Any
) -> None:
    req, resp = orjson.loads(a.read_bytes()), orjson.loads(b.read_bytes())
    _check(openai_chat.translate(_mutate(req, rnd, value), resp))
    _check(openai_chat.translate(req, _mutate(resp, rnd, value)))


@given(st.randoms(use_true_random=False), json_values)
def test_mutated_corpus_chunks_never_raise(rnd: random.Random, value: Any) -> None:
    evs = list(iter_events(STREAM.read_text()))
    i = rnd.randrange(len(evs))
    data = evs[i].json()
    if data is not None:
        evs[i] = SSEEvent(None, orjson.dumps(_mutate(data, rnd, value)).decode())
    _check(openai_chat.translate(None, evs))


def test_numbers_beyond_any_float_are_null_not_an_error() -> None:
    # A document decoded by another JSON library may hold integers orjson never gives.
    req = load("openai-chat/parallel_tool_calls.turn1.request.json")
    resp = load("openai-chat/parallel_tool_calls.turn1.response.json")
    resp["created"] = 10**400
    fact = provider.translate_exchange(req, resp, meta={"duration_ms": 10**400})
    assert isinstance(fact, InferenceCall)
    assert fact.duration_ms is None and fact.output_messages


# --- vendors' extensions (issue 12) ------------------------------------------------------------


def test_mistral_thinking_chunks_stream_into_one_reasoning_part() -> None:
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}  # fmt: skip
    plain = fact(None, body({"message": {"role": "assistant", "content": [thinking, {"type": "text", "text": "cd"}]}}))  # fmt: skip
    streamed = fact(
        None,
        events(
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "a"}]}]}),
            chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "b"}]}]}),
            chunk({"content": [{"type": "text", "text": "c"}]}),
            chunk({"content": "d"}, "stop"),
            "[DONE]",
        ),
    )
    assert plain.output_messages == [Message("assistant", [ReasoningPart("ab"), TextPart("cd")], "stop")]  # fmt: skip
    same_fact(plain, streamed)


def test_text_before_the_first_content_chunk_keeps_its_place() -> None:
    streamed = fact(
        None,
        events(
            chunk({"content": "x"}),
            chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "t"}]}]}),
            chunk({"content": "y"}, "stop"),
            "[DONE]",
        ),
    )
    assert streamed.output_messages[0].parts == [TextPart("x"), ReasoningPart("t"), TextPart("y")]


def test_bare_strings_in_a_streamed_list_of_chunks_are_text() -> None:
    streamed = fact(
        None,
        events(
            chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "t"}]}]}),
            chunk({"content": ["x", {"type": "text", "text": "y"}]}),
            chunk({"content": ["z"]}, "stop"),
            "[DONE]",
        ),
    )
    assert streamed.output_messages[0].parts == [ReasoningPart("t"), TextPart("xyz")]


def test_a_mistral_request_is_chat_not_anthropic() -> None:
    request = {
        "model": "magistral-small-2509",
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "t"}]}],
            },
        ],
    }
    result = provider.translate_exchange(request, None)
    assert isinstance(result, InferenceCall) and result.source.name == "openai-chat"
    assert result.input_messages[1].parts == [ReasoningPart("t")]


def test_stream_completeness_and_usage() -> None:
    text = chunk({"content": "hi"})
    usage = {"prompt_tokens": 3, "completion_tokens": 1}
    # [DONE] after a usage chunk: whole, finish reason unknown.
    whole = fact(None, events(text, chunk(None, usage=usage), "[DONE]"))
    assert whole.degradations == {} and whole.output_messages[0].finish_reason is None
    # Without the usage chunk, or without [DONE], a choice with no finish reason was cut.
    for evs in (events(text, "[DONE]"), events(text, chunk(None, usage=usage))):
        assert fact(None, evs).degradations == {"truncated_stream": 1}
    # Groq's usage rides in x_groq on the last chunk; a top-level usage wins over it.
    groq = {"usage": {"prompt_tokens": 9, "completion_tokens": 4}}
    f = fact(None, events(text, chunk({}, "stop", x_groq=groq), "[DONE]"))
    assert (f.input_tokens, f.output_tokens, f.degradations) == (9, 4, {})
    f = fact(None, events(text, chunk({}, "stop", x_groq=groq, usage=usage), "[DONE]"))
    assert (f.input_tokens, f.output_tokens) == (3, 1)


def test_together_eos_is_stop() -> None:
    f = fact(
        None, body({"message": {"role": "assistant", "content": "hi"}, "finish_reason": "eos"})
    )
    assert f.output_messages[0].finish_reason == "stop"


def test_citations_server_tools_and_signatures_in_streams() -> None:
    note = {"type": "url_citation", "url_citation": {"url": "https://x", "start_index": 0, "end_index": 1}}  # fmt: skip
    signed = {"google": {"thought_signature": "c2ln"}}
    fn = {"name": "f", "arguments": "{}"}
    msg = {
        "role": "assistant",
        "content": "hi",
        "annotations": [note, note],
        "executed_tools": [{"index": 0, "type": "search", "arguments": "{}", "output": "o"}],
        "tool_calls": [{"id": "c1", "type": "function", "function": fn, "extra_content": signed}],
    }
    plain = fact(None, body({"message": msg, "finish_reason": "tool_calls"}))
    expected = {"text_citation": 2, "opaque_reasoning": 1}
    assert plain.degradations == expected
    search = {"index": 0, "type": "search", "arguments": "{}"}
    assert plain.output_messages[0].parts[:2] == [
        ServerToolCallPart(None, "search", search),
        ServerToolCallResponsePart(None, {"type": "search", "output": "o"}),
    ]
    streamed = fact(
        None,
        events(
            chunk(
                {
                    "role": "assistant",
                    "executed_tools": [{"index": 0, "type": "search", "arguments": "{}"}],
                }
            ),
            chunk({"executed_tools": [msg["executed_tools"][0]]}),
            chunk({"content": "hi", "annotations": [note]}),
            chunk({"annotations": [note]}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": fn,
                            "extra_content": signed,
                        }
                    ]
                }
            ),
            chunk({}, "tool_calls"),
            "[DONE]",
        ),
    )
    same_fact(plain, streamed)


def test_openrouter_reasoning_details_stream_as_they_answer_whole() -> None:
    # OpenRouter streams each detail in fragments naming its type and index (the signature
    # last), beside the same reasoning as a plain string.
    signed = {"type": "reasoning.text", "text": "think hard", "signature": "c2ln", "format": "anthropic-claude-v1", "index": 0}  # fmt: skip
    msg = {"role": "assistant", "content": "ok", "reasoning": "think hard", "reasoning_details": [signed]}  # fmt: skip
    plain = fact(None, body({"message": msg, "finish_reason": "stop"}))
    assert plain.degradations == {"opaque_reasoning": 1}
    assert plain.output_messages[0].parts == [ReasoningPart("think hard"), TextPart("ok")]
    fragment = {"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0}
    streamed = fact(
        None,
        events(
            chunk(
                {
                    "role": "assistant",
                    "reasoning": "think",
                    "reasoning_details": [{**fragment, "text": "think"}],
                }
            ),
            chunk({"reasoning": " hard", "reasoning_details": [{**fragment, "text": " hard"}]}),
            chunk({"reasoning_details": [{**fragment, "text": "", "signature": "c2ln"}]}),
            chunk({"content": "ok"}, "stop"),
            "[DONE]",
        ),
    )
    same_fact(plain, streamed)


def test_streamed_reasoning_details_alone_keep_their_text_and_count_what_is_opaque() -> None:
    # Without a reasoning string the details' summary is the reasoning; an encrypted detail
    # (its data sent in pieces) is counted, not dropped unseen.
    summary = {"type": "reasoning.summary", "index": 0, "format": "openai-responses-v1"}
    secret = {"type": "reasoning.encrypted", "index": 1, "id": "rs_1"}
    whole = [{**summary, "summary": "Plan: ask."}, {**secret, "data": "gAAAAB"}]
    msg = {"role": "assistant", "content": "?", "reasoning_details": whole}
    plain = fact(None, body({"message": msg, "finish_reason": "stop"}))
    streamed = fact(
        None,
        events(
            chunk({"role": "assistant", "reasoning_details": [{**summary, "summary": "Plan:"}]}),
            chunk(
                {"reasoning_details": [{**summary, "summary": " ask."}, {**secret, "data": "gAA"}]}
            ),
            chunk({"reasoning_details": [{**secret, "data": "AAB"}]}),
            chunk({"content": "?"}, "stop"),
            "[DONE]",
        ),
    )
    assert streamed.output_messages[0].parts == [ReasoningPart("Plan: ask."), TextPart("?")]
    assert streamed.degradations == {"opaque_reasoning": 1}
    same_fact(plain, streamed)


def test_streamed_arguments_sent_as_an_object_are_kept() -> None:
    # OpenAI sends arguments as JSON text; a compatible server may send the object itself.
    fn = {"name": "f", "arguments": {"a": 1}}
    msg = {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function", "function": fn}]}  # fmt: skip
    plain = fact(None, body({"message": msg, "finish_reason": "tool_calls"}))
    assert plain.output_messages[0].parts == [ToolCallPart("t1", "f", {"a": 1})]
    head = {"index": 0, "id": "t1", "type": "function", "function": fn}
    streamed = fact(None, events(chunk({"role": "assistant", "tool_calls": [head]}), chunk({}, "tool_calls"), "[DONE]"))  # fmt: skip
    same_fact(plain, streamed)
    # Text and an object for one call cannot be put together: counted, not dropped unseen.
    more = {"index": 0, "function": {"arguments": '{"b": 2}'}}
    mixed = fact(None, events(chunk({"role": "assistant", "tool_calls": [head]}), chunk({"tool_calls": [more]}), chunk({}, "tool_calls"), "[DONE]"))  # fmt: skip
    assert mixed.output_messages[0].parts == [ToolCallPart("t1", "f", {})]
    assert mixed.degradations == {"malformed_arguments": 1}


def test_streamed_reasoning_details_with_their_own_ids_stay_apart() -> None:
    # Gemini 3 through OpenRouter: an encrypted detail per tool call, each with the call's id
    # and the same index.
    one, two = ({"type": "reasoning.encrypted", "index": 0, "id": i, "data": d} for i, d in (("t1", "QQ=="), ("t2", "Qg==")))  # fmt: skip
    msg = {"role": "assistant", "content": "ok", "reasoning_details": [one, two]}
    plain = fact(None, body({"message": msg, "finish_reason": "stop"}))
    assert plain.degradations == {"opaque_reasoning": 2}
    stream = [chunk({"role": "assistant", "reasoning_details": [one]}), chunk({"reasoning_details": [two]})]  # fmt: skip
    same_fact(plain, fact(None, events(*stream, chunk({"content": "ok"}, "stop"), "[DONE]")))


@given(st.lists(st.fixed_dictionaries({}, optional={
    "content": st.sampled_from(["x", None, 3, {}, {"type": "thinking", "thinking": [[]]}, [{"type": []}]]),
    "executed_tools": st.lists(st.fixed_dictionaries({}, optional={"index": st.sampled_from([0, [1], {}, "a", None])}), max_size=2),
    "annotations": st.sampled_from([[], [1], "x"]),
    "extra_content": st.sampled_from([None, {}, {"google": []}, {"google": {"thought_signature": "s"}}]),
    "reasoning_details": st.lists(st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["reasoning.text", "reasoning.encrypted", [], None]),
        "index": st.sampled_from([0, 1, True, "0", None]),
        "text": st.sampled_from(["a", 3, None]),
        "data": st.sampled_from(["b", {}, None]),
        "signature": st.sampled_from(["s", None]),
    }) | st.sampled_from([None, 1, "x"]), max_size=3) | st.sampled_from([None, {}, "x"]),
}), max_size=4))  # fmt: skip
def test_odd_vendor_fields_in_chunks_never_raise(deltas: list[dict[str, Any]]) -> None:
    evs = events(*(chunk(d) for d in deltas), chunk({}, "stop"), "[DONE]")
    _check(openai_chat.translate(None, evs))


# --- parallel calls streamed at one index (Ollama, LiteLLM's bridges) ---------------------------


def _read(call_id: str, path: str) -> dict[str, Any]:
    fn = {"name": "read", "arguments": orjson.dumps({"path": path}).decode()}
    return {"id": call_id, "type": "function", "function": fn}


def test_parallel_calls_streamed_at_one_index_stay_apart() -> None:
    # Ollama's OpenAI endpoint streams every call of a batch at index 0, each with its own id,
    # one call per chunk or all in one chunk's list; the whole answer gives both calls.
    calls = [_read("call_a", "a.rs"), _read("call_b", "b.rs")]
    msg = {"role": "assistant", "content": "", "tool_calls": calls}
    plain = fact(None, body({"message": msg, "finish_reason": "tool_calls"}))
    assert plain.output_messages[0].parts == [
        ToolCallPart("call_a", "read", {"path": "a.rs"}),
        ToolCallPart("call_b", "read", {"path": "b.rs"}),
    ]
    assert plain.degradations == {}
    frags = [{"index": 0, **c} for c in calls]
    head = chunk({"role": "assistant", "content": ""})
    end = (chunk({}, "tool_calls"), "[DONE]")
    apart = events(head, *(chunk({"tool_calls": [f]}) for f in frags), *end)
    together = events(head, chunk({"tool_calls": frags}), *end)
    same_fact(plain, fact(None, apart))
    same_fact(plain, fact(None, together))
    # Fragments without an id join the call started last at their index; a fragment naming an
    # earlier call's id continues that call.
    first, second = ({**f, "function": {"name": "read", "arguments": ""}} for f in frags)
    pieces = events(
        head,
        chunk({"tool_calls": [first]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path":'}}]}),
        chunk({"tool_calls": [second]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path":"b.rs"}'}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "function": {"arguments": '"a.rs"}'}}]}),
        *end,
    )  # fmt: skip
    same_fact(plain, fact(None, pieces))


_call_ids = st.lists(st.text("abcdef0123", min_size=1, max_size=6), min_size=1, max_size=4, unique=True)  # fmt: skip


@given(
    _call_ids.flatmap(
        lambda ids: st.tuples(
            st.just(ids),
            st.lists(
                st.dictionaries(st.sampled_from("xyz"), st.integers(0, 9), max_size=2),
                min_size=len(ids),
                max_size=len(ids),
            ),
            st.lists(st.integers(0, 12), min_size=len(ids), max_size=len(ids)),
        )
    ),
    st.booleans(),
    st.booleans(),
)
def test_calls_streamed_at_reused_or_own_indexes_fold_as_whole(
    batch: tuple[list[str], list[dict[str, int]], list[int]], reuse: bool, repeat_id: bool
) -> None:
    """Any batch of calls with ids, streamed at one index or at an index each, its arguments in
    two pieces (later fragments repeating the id or not), gives the calls its whole answer
    gives."""
    ids, args, cuts = batch
    calls = [
        {
            "id": i,
            "type": "function",
            "function": {"name": f"f{n}", "arguments": orjson.dumps(a).decode()},
        }
        for n, (i, a) in enumerate(zip(ids, args, strict=True))
    ]
    msg = {"role": "assistant", "content": None, "tool_calls": calls}
    plain = fact(None, body({"message": msg, "finish_reason": "tool_calls"}))
    assert plain.degradations == {}
    deltas = [chunk({"role": "assistant", "content": None})]
    for n, (call, cut) in enumerate(zip(calls, cuts, strict=True)):
        text, idx = call["function"]["arguments"], 0 if reuse else n
        first = {"index": idx, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": text[:cut]}}  # fmt: skip
        rest = {"index": idx, "function": {"arguments": text[cut:]}}
        deltas += [chunk({"tool_calls": [first]}), chunk({"tool_calls": [{**rest, **({"id": call["id"]} if repeat_id else {})}]})]  # fmt: skip
    same_fact(plain, fact(None, events(*deltas, chunk({}, "tool_calls"), "[DONE]")))


# --- reasoning details (OpenRouter) ----------------------------------------------------------


# OpenRouter's interleaved thinking (Anthropic models): a reasoning.text detail per thinking
# block, signed; `reasoning` is their text joined. Clients replay the details alone.
INTERLEAVED = [
    {
        "type": "reasoning.text",
        "text": "First I check the file.",
        "format": "anthropic-claude-v1",
        "index": 0,
    },
    {
        "type": "reasoning.text",
        "text": "Then I compare versions.",
        "signature": "EqQBCkgI",
        "format": "anthropic-claude-v1",
        "index": 1,
    },
]
INTERLEAVED_PARTS = [
    ReasoningPart("First I check the file."),
    ReasoningPart("Then I compare versions."),
    TextPart("Done."),
]


def test_every_reasoning_detail_is_kept_and_the_replay_reads_as_the_answer() -> None:
    answer = {"role": "assistant", "content": "Done.", "reasoning": "First I check the file.Then I compare versions.", "reasoning_details": INTERLEAVED}  # fmt: skip
    plain = fact(None, body({"message": answer}))
    assert plain.output_messages[0].parts == INTERLEAVED_PARTS
    assert plain.degradations == {"opaque_reasoning": 1}
    replayed = {"role": "assistant", "content": "Done.", "reasoning_details": INTERLEAVED}
    req = {"messages": [{"role": "user", "content": "go"}, replayed, {"role": "user", "content": "and?"}]}  # fmt: skip
    replay = fact(req, None)
    assert replay.input_messages[1] == Message("assistant", INTERLEAVED_PARTS)
    assert replay.degradations == {"opaque_reasoning": 1}
    # Streamed: each detail in fragments at its index, the reasoning string beside them.
    frag = [{k: v for k, v in d.items() if k not in ("text", "signature")} for d in INTERLEAVED]
    streamed = fact(
        None,
        events(
            chunk(
                {
                    "role": "assistant",
                    "reasoning": "First I check",
                    "reasoning_details": [{**frag[0], "text": "First I check"}],
                }
            ),
            chunk(
                {
                    "reasoning": " the file.",
                    "reasoning_details": [{**frag[0], "text": " the file."}],
                }
            ),
            chunk(
                {
                    "reasoning": "Then I compare versions.",
                    "reasoning_details": [{**frag[1], "text": "Then I compare versions."}],
                }
            ),
            chunk({"reasoning_details": [{**frag[1], "text": "", "signature": "EqQBCkgI"}]}),
            chunk({"content": "Done."}, "stop"),
            "[DONE]",
        ),
    )
    same_fact(plain, streamed)


def test_reasoning_summaries_alone_are_all_kept() -> None:
    # OpenAI models through OpenRouter: summary details, then the encrypted reasoning.
    details = [
        {
            "type": "reasoning.summary",
            "summary": "**Plan**\n\nAsk first.",
            "format": "openai-responses-v1",
            "index": 0,
        },
        {
            "type": "reasoning.summary",
            "summary": "**Check**\n\nThen answer.",
            "format": "openai-responses-v1",
            "index": 1,
        },
        {
            "type": "reasoning.encrypted",
            "data": "gAAAAB",
            "id": "rs_1",
            "format": "openai-responses-v1",
            "index": 2,
        },
    ]
    f = fact(None, body({"message": {"role": "assistant", "content": "?", "reasoning_details": details}}))  # fmt: skip
    assert f.output_messages[0].parts == [
        ReasoningPart("**Plan**\n\nAsk first."),
        ReasoningPart("**Check**\n\nThen answer."),
        TextPart("?"),
    ]
    assert f.degradations == {"opaque_reasoning": 1}
    # The string joined with line breaks repeats the details: no part of its own.
    joined = {"reasoning": "**Plan**\n\nAsk first.\n\n**Check**\n\nThen answer.", "reasoning_details": details}  # fmt: skip
    repeats = fact(None, body({"message": {"role": "assistant", "content": "?", **joined}}))
    assert repeats.output_messages == f.output_messages
    assert repeats.degradations == {"opaque_reasoning": 1}
    # A string the details do not repeat is reasoning of its own, kept before them.
    other = {"role": "assistant", "content": "?", "reasoning": "Hmm.", "reasoning_details": details}
    assert fact(None, body({"message": other})).output_messages[0].parts == [ReasoningPart("Hmm."), *f.output_messages[0].parts]  # fmt: skip


# --- custom (free-form) tools ----------------------------------------------------------------


SQL_TOOL = {
    "type": "custom",
    "custom": {
        "name": "sql",
        "description": "Run one SQL query",
        "format": {
            "type": "grammar",
            "grammar": {"syntax": "lark", "definition": 'start: "SELECT " /[^;]+/'},
        },
    },
}
PATCH = "*** Begin Patch\n*** Update File: a.py\n-x=1\n+x=2\n*** End Patch"


def test_custom_tool_calls_keep_their_text_input() -> None:
    # Custom.input is free text (here in the tool's grammar); text that reads as JSON stays text.
    calls = [
        {"id": "call_1", "type": "custom", "custom": {"name": "apply_patch", "input": PATCH}},
        {"id": "call_2", "type": "custom", "custom": {"name": "note", "input": '{"a": 1}'}},
    ]
    parts = [
        ToolCallPart("call_1", "apply_patch", {"input": PATCH}),
        ToolCallPart("call_2", "note", {"input": '{"a": 1}'}),
    ]
    msg = {"role": "assistant", "content": None, "tool_calls": calls}
    plain = fact(None, body({"message": msg, "finish_reason": "tool_calls"}))
    assert plain.output_messages == [Message("assistant", parts, "tool_call")]
    assert plain.degradations == {}
    # Streamed as OpenAI does: the call's head, then pieces of its input.
    deltas = [chunk({"role": "assistant", "content": None})]
    for n, c in enumerate(calls):
        text = c["custom"]["input"]
        head = {"index": n, "id": c["id"], "type": "custom", "custom": {"name": c["custom"]["name"], "input": ""}}  # fmt: skip
        deltas += [chunk({"tool_calls": [head]})]
        deltas += [chunk({"tool_calls": [{"index": n, "custom": {"input": text[i : i + 7]}}]}) for i in range(0, len(text), 7)]  # fmt: skip
    same_fact(plain, fact(None, events(*deltas, chunk({}, "tool_calls"), "[DONE]")))
    # Replayed in the next request, with the tool's result.
    req = {
        "messages": [
            {"role": "user", "content": "fix a.py"},
            msg,
            {"role": "tool", "tool_call_id": "call_1", "content": "Done!"},
            {"role": "tool", "tool_call_id": "call_2", "content": "ok"},
        ]
    }
    replay = fact(req, None)
    assert replay.input_messages[1] == Message("assistant", parts)
    assert replay.degradations == {}


def test_custom_tool_definitions_are_read() -> None:
    # The grammar has no JSON Schema form: the definition is kept, the grammar counted (raw).
    plain = {"type": "custom", "custom": {"name": "note", "format": {"type": "text"}}}
    bare = {"type": "custom", "custom": {"name": "shell", "description": "One command"}}
    req = {"messages": [{"role": "user", "content": "How many users?"}], "tools": [SQL_TOOL, plain, bare]}  # fmt: skip
    f = fact(req, None)
    assert f.tools == [
        ToolDefinition("sql", "Run one SQL query", FREEFORM_PARAMETERS),
        ToolDefinition("note", None, FREEFORM_PARAMETERS),
        ToolDefinition("shell", "One command", FREEFORM_PARAMETERS),
    ]
    assert FREEFORM_PARAMETERS == {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}  # fmt: skip
    assert f.degradations == {"unsupported_tool": 1}


# --- participant names -----------------------------------------------------------------------


def test_message_names_are_counted() -> None:
    # OpenAI's few-shot examples are system messages named example_user / example_assistant;
    # AutoGen names every agent's message. The messages are kept, each name counted.
    req = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Translate corporate jargon into plain English."},
            {
                "role": "system",
                "name": "example_user",
                "content": "New synergies will help drive top-line growth.",
            },
            {
                "role": "system",
                "name": "example_assistant",
                "content": "Things working well together will increase revenue.",
            },
            {"role": "developer", "name": "ops", "content": "Be brief."},
            {"role": "user", "name": "alice", "content": "Let's circle back."},
            {
                "role": "assistant",
                "name": "planner",
                "content": None,
                "tool_calls": [_read("call_a", "a.rs")],
            },
            {"role": "tool", "tool_call_id": "call_a", "name": "read", "content": "fn main() {}"},
            {"role": "user", "name": "", "content": "Thanks."},  # an empty name is no name
        ],
    }
    f = fact(req, None)
    assert [m.parts for m in f.input_messages] == [
        [TextPart("Translate corporate jargon into plain English.")],
        [TextPart("New synergies will help drive top-line growth.")],
        [TextPart("Things working well together will increase revenue.")],
        [TextPart("Be brief.")],
        [TextPart("Let's circle back.")],
        [ToolCallPart("call_a", "read", {"path": "a.rs"})],
        [ToolCallResponsePart("call_a", "fn main() {}")],
        [TextPart("Thanks.")],
    ]
    assert f.degradations == {"participant_name": 5}


# --- output schemas --------------------------------------------------------------------------

ANSWER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "counted"),
    [
        ({"guided_json": ANSWER_SCHEMA}, True),
        ({"guided_regex": "[A-Z][a-z]+"}, True),
        ({"guided_choice": ["Paris", "Rome"]}, True),
        ({"guided_grammar": 'root ::= "Paris"'}, True),
        ({"structured_outputs": {"json": ANSWER_SCHEMA}}, True),
        ({"structured_outputs": {"choice": ["Paris", "Rome"]}}, True),
        ({"structured_outputs": {"json_object": True}}, False),
        ({"guided_json": None, "structured_outputs": None}, False),
    ],
)
def test_vllm_constrained_decoding_is_counted_as_a_schema(
    extra: dict[str, Any], counted: bool
) -> None:
    # vLLM takes these as extra body fields: the answer's form is in no message either.
    req = {"model": "qwen", "messages": [{"role": "user", "content": "Where is the Louvre?"}]}
    f = fact({**req, **extra}, body({"message": {"role": "assistant", "content": "Paris"}}))
    assert f.degradations == ({"output_schema": 1} if counted else {})


@pytest.mark.parametrize(
    ("response_format", "counted"),
    [
        (
            {
                "type": "json_schema",
                "json_schema": {"name": "place", "strict": True, "schema": ANSWER_SCHEMA},
            },
            True,
        ),
        # Fireworks and Together take the schema beside JSON mode.
        ({"type": "json_object", "schema": ANSWER_SCHEMA}, True),
        ({"type": "json_object"}, False),
        ({"type": "text"}, False),
        (None, False),
    ],
)
def test_a_schema_in_response_format_is_counted_once(
    response_format: dict[str, Any] | None, counted: bool
) -> None:
    # The schema shaped the answer but is in no message: a row would teach its shape unprompted.
    # JSON mode alone has the prompt ask for JSON, so the row shows what shaped the answer.
    req = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Where is the Louvre?"}]}
    if response_format is not None:
        req["response_format"] = response_format
    f = fact(req, body({"message": {"role": "assistant", "content": '{"city":"Paris"}'}}))
    assert f.degradations == ({"output_schema": 1} if counted else {})
    assert f.raw["request"].get("response_format") == response_format
