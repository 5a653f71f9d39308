"""Google ADK's telemetry and the google-genai OTel instrumentation, as they really write it
(tests/producers/README.md, Gemini side): ADK's legacy ``call_llm`` span, the ids the Google
writers make up for id-less Gemini calls, and streamed answers recorded one piece per chunk."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from lithify.derive.sessions import sort_facts
from lithify.model import (
    InferenceCall,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
)
from lithify.translate import adk
from lithify.translate._common import Degradations, synthesized_call_id
from lithify.translate._telemetry import google_call_ids
from lithify.translate.otlp import Span
from lithify.translate.provider import translate_exchange
from lithify.translate.telemetry import translate_span, translate_spans
from tests.helpers import assert_valid_messages
from tests.test_genai_events import _events
from tests.test_properties import json_like

TRACE = "0123456789abcdef0123456789abcdef"
SYSTEM = "You are a weather assistant."
USER = "Weather in Paris and Zürich?"
THOUGHT = "Two cities, one call each."
PARIS = {"city": "Paris", "unit": "celsius"}
ZURICH = {"city": "Zürich", "unit": "celsius"}
RESULTS = [{"result": '{"temperature": 18}'}, {"result": "12 °C, light rain"}]
# The ids the Gemini translator gives the two calls of a turn the API sent without ids.
P_ID = synthesized_call_id("gemini", "get_weather", PARIS, 0)
Z_ID = synthesized_call_id("gemini", "get_weather", ZURICH, 1)

# ADK 2.13's llm_request (snake_case SDK call) and llm_response (LlmResponse) for the second
# call of the weather loop, as its call_llm span records them.
LLM_REQUEST = {
    "model": "gemini-2.5-flash",
    "config": {
        "http_options": {},
        "system_instruction": SYSTEM,
        "temperature": 0.2,
        "max_output_tokens": 256,
        "seed": 7,
        "tools": [
            {
                "function_declarations": [
                    {
                        "name": "get_weather",
                        "description": "Current weather for one city.",
                        "parameters_json_schema": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                        },
                    }
                ]
            }
        ],
        "thinking_config": {"include_thoughts": True},
    },
    "contents": [
        {"parts": [{"text": USER}], "role": "user"},
        {
            "parts": [
                {"text": THOUGHT, "thought": True},
                {"function_call": {"args": PARIS, "name": "get_weather"}},
                {"function_call": {"args": ZURICH, "name": "get_weather"}},
            ],
            "role": "model",
        },
        {
            "parts": [
                {"function_response": {"name": "get_weather", "response": RESULTS[0]}},
                {"function_response": {"name": "get_weather", "response": RESULTS[1]}},
            ],
            "role": "user",
        },
    ],
}
LLM_RESPONSE = {
    "model_version": "gemini-2.5-flash",
    "content": {"parts": [{"text": "Paris 18 °C, Zürich 12 °C."}], "role": "model"},
    "finish_reason": "STOP",
    "usage_metadata": {"candidates_token_count": 23, "prompt_token_count": 203},
}


def _call_llm(request: Any = LLM_REQUEST, response: Any = LLM_RESPONSE, **extra: Any) -> Span:
    attrs = {
        "gen_ai.system": "gcp.vertex.agent",
        "gen_ai.request.model": "gemini-2.5-flash",
        "gcp.vertex.agent.invocation_id": "e-1",
        "gcp.vertex.agent.session_id": "weather-session",
        "gcp.vertex.agent.event_id": "ev-1",
        "gcp.vertex.agent.llm_request": json.dumps(request),
        "gen_ai.request.max_tokens": 256,
        "gcp.vertex.agent.llm_response": json.dumps(response),
        "gen_ai.usage.input_tokens": 203,
        "gen_ai.usage.output_tokens": 23,
        "gen_ai.response.finish_reasons": ["stop"],
        **extra,
    }
    return Span(TRACE, "00000000000000c1", "00000000000000a1", "call_llm", 1, 10, 20, attrs)


def _fact(result: object) -> InferenceCall:
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def test_call_llm_span_is_the_gemini_call_it_records() -> None:
    """Before: a metadata-only capture (content_not_captured), no messages, the trace as
    session. The JSON is read as the exchange it describes: the same messages as the wire."""
    f = _fact(translate_span(_call_llm()))
    wire = _fact(translate_exchange(LLM_REQUEST, {"candidates": []}))
    assert f.source.name == "adk"
    assert f.input_messages == wire.input_messages
    assert f.input_messages[2] == Message(
        "assistant",
        [
            ReasoningPart(THOUGHT),
            ToolCallPart(P_ID, "get_weather", PARIS),
            ToolCallPart(Z_ID, "get_weather", ZURICH),
        ],
    )
    assert f.input_messages[3:] == [
        Message("tool", [ToolCallResponsePart(P_ID, RESULTS[0])]),
        Message("tool", [ToolCallResponsePart(Z_ID, RESULTS[1])]),
    ]
    assert f.output_messages == [
        Message("assistant", [TextPart("Paris 18 °C, Zürich 12 °C.")], "stop")
    ]
    assert [t.name for t in f.tools] == ["get_weather"]
    assert f.session_id == "weather-session"
    assert f.request == {"max_tokens": 256, "seed": 7, "temperature": 0.2}
    assert (f.model, f.input_tokens, f.output_tokens) == ("gemini-2.5-flash", 203, 23)
    assert f.provider == "gcp.vertex.agent"
    assert f.degradations == {"synthesized_id": 2}


def test_call_llm_with_capture_off_is_metadata_only_with_its_session() -> None:
    """ADK writes ``"{}"`` with its content capture off: a metadata-only capture, whose session
    is ADK's (before: the trace id, under an agent span)."""
    f = _fact(translate_span(_call_llm({}, {})))
    assert f.input_messages == [] and [m.parts for m in f.output_messages] == [[]]
    assert f.output_messages[0].finish_reason == "stop"  # the span's finish reason, no part
    assert f.degradations == {"content_not_captured": 1}
    assert f.session_id == "weather-session"


def test_adk_ids_in_a_streamed_response_are_not_the_models() -> None:
    """Streamed, ADK's LlmResponse carries the ids ADK gives calls (``adk-<uuid4>``), which it
    strips before the next request: the call gets the id its replay gets."""
    response = {
        "content": {
            "parts": [
                {"function_call": {"id": f"adk-{'0' * 8}-0000-4000-8000-{'0' * 12}", **fc}}
                for fc in (
                    {"args": PARIS, "name": "get_weather"},
                    {"args": ZURICH, "name": "get_weather"},
                )
            ],
            "role": "model",
        },
        "finish_reason": "STOP",
    }
    f = _fact(
        translate_span(
            _call_llm({**LLM_REQUEST, "contents": LLM_REQUEST["contents"][:1]}, response)
        )
    )
    assert [p.id for p in f.output_messages[0].parts] == [P_ID, Z_ID]


def test_call_llm_and_its_generate_content_child_share_one_identity() -> None:
    """The generate_content span under call_llm (ADK's stable-semconv span, or the google-genai
    instrumentation's) is the same provider call: before, two calls with two ids."""
    child = Span(
        TRACE,
        "00000000000000d1",
        "00000000000000c1",
        "generate_content gemini-2.5-flash",
        1,
        11,
        19,
        {
            "gen_ai.system": "gemini",
            "gen_ai.operation.name": "generate_content",
            "gen_ai.request.model": "gemini-2.5-flash",
            "gen_ai.conversation.id": "weather-session",
            "gen_ai.usage.input_tokens": 203,
        },
    )
    parent, meta = (_fact(r) for r in translate_spans([child, _call_llm()]))
    assert meta.source.name == "adk" or parent.source.name == "adk"
    call_llm, child_fact = (parent, meta) if parent.source.name == "adk" else (meta, parent)
    assert call_llm.inference_call_id == child_fact.inference_call_id
    assert call_llm.span_id == "00000000000000c1"  # the fact is still its own span's
    (call,) = sort_facts([child_fact, call_llm])
    assert call.source.name == "adk" and call.input_messages == call_llm.input_messages


# ---------------------------------------------------------------------------------------------
# the ids Google's writers make up: `<name>_<index of the part in its Content>`


def _semconv_span(provider: str) -> Span:
    """The google-genai instrumentation's span of the second call (util-genai 1.3b0)."""
    call = {"type": "tool_call", "name": "get_weather"}
    inputs = [
        {"role": "user", "parts": [{"type": "text", "content": USER}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": THOUGHT},
                {**call, "id": "get_weather_1", "arguments": PARIS},
                {**call, "id": "get_weather_2", "arguments": ZURICH},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"type": "tool_call_response", "id": "get_weather_0", "response": RESULTS[0]},
                {"type": "tool_call_response", "id": "get_weather_1", "response": RESULTS[1]},
            ],
        },
    ]
    attrs = {
        "gen_ai.operation.name": "generate_content",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": "gemini-2.5-flash",
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}]
        ),
    }
    return Span(TRACE, "00000000000000e1", None, "generate_content", 1, 10, 20, attrs)


def test_made_up_ids_pair_each_result_with_its_own_call() -> None:
    """Before: the calls kept `get_weather_1` / `_2` and the results `get_weather_0` / `_1`: the
    Zürich result answered the Paris call, the Paris result no call. Now the ids are the Gemini
    translator's, each result answering its call, as on the wire."""
    f = _fact(translate_span(_semconv_span("gemini")))
    assert f.input_messages[1].parts[1:] == [
        ToolCallPart(P_ID, "get_weather", PARIS),
        ToolCallPart(Z_ID, "get_weather", ZURICH),
    ]
    assert f.input_messages[2:] == [
        Message("tool", [ToolCallResponsePart(P_ID, RESULTS[0])]),
        Message("tool", [ToolCallResponsePart(Z_ID, RESULTS[1])]),
    ]
    assert f.degradations == {"synthesized_id": 2}


def test_ids_of_other_providers_are_kept() -> None:
    f = _fact(translate_span(_semconv_span("openai")))
    assert [p.id for p in f.input_messages[1].parts[1:]] == ["get_weather_1", "get_weather_2"]
    assert f.degradations == {}


def test_an_id_that_cannot_be_the_parts_index_is_kept() -> None:
    """`<name>_<n>` with n below the part's own place is no index the writers made up."""
    msg = Message("assistant", [TextPart("a"), TextPart("b"), ToolCallPart("f_0", "f", {})])
    deg = Degradations()
    assert google_call_ids([msg], [], deg) == ([msg], [])
    assert not deg


def test_an_answer_streamed_in_pieces_has_its_made_up_ids_replaced() -> None:
    """An output message may be a streamed answer's pieces joined (google-genai 0.7b2's
    experimental mode writes one output message per chunk, each numbering its parts from 0):
    there ``n`` need only be at least the calls before it; each result answers its own call."""
    calls = [ToolCallPart("f_0", "f", {"x": 1}), ToolCallPart("f_1", "f", {"x": 2})]
    pieces = Message("assistant", [TextPart("a"), TextPart("b"), *calls], "stop")
    deg = Degradations()
    _, (out,) = google_call_ids([], [pieces], deg)
    ids = [synthesized_call_id("gemini", "f", {"x": k}, k - 1) for k in (1, 2)]
    assert [p.id for p in out.parts[2:]] == ids
    assert deg == {"synthesized_id": 2}


# ---------------------------------------------------------------------------------------------
# streamed answers recorded one piece per chunk


def test_choice_events_of_one_index_are_the_pieces_of_one_answer() -> None:
    """ADK's stable-semconv logs write one gen_ai.choice per streamed chunk, all index 0, the
    finish reason on the last. Before: one output message per piece."""
    pieces = [
        ({"parts": [{"text": "Two ", "thought": True}], "role": "model"}, None),
        ({"parts": [{"text": "cities.", "thought": True}], "role": "model"}, None),
        ({"parts": [{"text": "Paris "}], "role": "model"}, None),
        ({"parts": [{"text": "is cloudy."}], "role": "model"}, "STOP"),
    ]
    records = [("gen_ai.user.message", {"content": {"parts": [{"text": USER}], "role": "user"}})]
    for content, reason in pieces:
        body: dict[str, Any] = {"content": content, "index": 0}
        if reason:
            body["finish_reason"] = reason
        records.append(("gen_ai.choice", body))
    f = _events(records, {"gen_ai.system": "gemini"})
    assert f.output_messages == [
        Message("assistant", [ReasoningPart("Two cities."), TextPart("Paris is cloudy.")], "stop")
    ]


def test_an_empty_finish_reason_is_a_piece_not_yet_finished() -> None:
    """ADK's semconv spans write each streamed chunk as an output message with
    ``finish_reason: ""`` but the last. Before: the first piece took the span's reason for
    choice 0, and the answer became two choices."""
    out = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Paris: 18"}],
            "finish_reason": "",
        },
        {"role": "assistant", "parts": [{"type": "text", "content": " °C."}], "finish_reason": ""},
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": " Done."}],
            "finish_reason": "stop",
        },
    ]
    attrs = {
        "gen_ai.operation.name": "generate_content",
        "gen_ai.provider.name": "gcp.gemini",
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.output.messages": json.dumps(out),
    }
    for value in (json.dumps(out), out):  # the fast path (JSON text) and the general one
        f = _fact(
            translate_span(
                Span(
                    TRACE,
                    "00000000000000f1",
                    None,
                    "g",
                    1,
                    1,
                    2,
                    {**attrs, "gen_ai.output.messages": value},
                )
            )
        )
        assert [m.finish_reason for m in f.output_messages] == ["stop"]
        assert [p.content for p in f.output_messages[0].parts] == ["Paris: 18", " °C.", " Done."]  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# properties


@given(json_like, json_like, st.booleans())
def test_any_call_llm_attributes(request: Any, response: Any, as_text: bool) -> None:
    """Whatever the JSON attributes hold, the span gives a fact with valid messages or a skip,
    never an exception."""
    if as_text:
        request = json.dumps(request, default=str).encode()
        response = json.dumps(response, default=str)
    span = _call_llm()
    attrs = {**span.attributes, adk.REQUEST: request, adk.RESPONSE: response}
    result = translate_span(Span(TRACE, "00000000000000c1", None, "call_llm", 1, 1, 2, attrs))
    if isinstance(result, InferenceCall):
        assert_valid_messages(result)


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["user", "assistant", "tool"]),
                "parts": st.lists(
                    st.one_of(
                        st.builds(
                            ToolCallPart,
                            st.sampled_from(["f_0", "f_1", "f_9", "g_1", "f", "adk-x", "_1"])
                            | st.text(max_size=8),
                            st.sampled_from(["f", "g", ""]),
                            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                        ),
                        st.builds(
                            ToolCallResponsePart,
                            st.sampled_from(["f_0", "f_1", "g_2", "x"]) | st.text(max_size=8),
                            json_like,
                        ),
                        st.builds(TextPart, st.text(min_size=1, max_size=5)),
                    ),
                    max_size=5,
                ),
            }
        ),
        max_size=4,
    )
)
def test_google_call_ids_keep_every_message_and_part(raw: list[dict[str, Any]]) -> None:
    msgs = [Message(m["role"], m["parts"]) for m in raw]
    deg = Degradations()
    inputs, outputs = google_call_ids(msgs, msgs[:1], deg)
    for before, after in zip([*msgs, *msgs[:1]], [*inputs, *outputs], strict=True):
        assert after.role == before.role
        assert [type(p) for p in after.parts] == [type(p) for p in before.parts]
        for b, a in zip(before.parts, after.parts, strict=True):
            if isinstance(a, ToolCallPart):
                assert (a.name, a.arguments) == (b.name, b.arguments)  # type: ignore[union-attr]
            elif isinstance(a, ToolCallResponsePart):
                assert a.result == b.result  # type: ignore[union-attr]
            else:
                assert a == b
    assert set(deg) <= {"synthesized_id"}


def test_a_credential_in_the_request_is_replaced_and_counted_once() -> None:
    """The request JSON is read by the Gemini translator, whose own screen counts what it
    replaces in its copy of the request; the span's screen replaces the same key in the span's
    raw. Counted once, not once per screen (it was 3: the Gemini translator's raw and message,
    then the span's raw)."""
    key = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"
    request = {**LLM_REQUEST, "contents": [{"parts": [{"text": f"my key {key}"}], "role": "user"}]}
    fact = _fact(translate_span(_call_llm(request)))
    assert key not in json.dumps(msgspec.to_builtins(fact))
    assert fact.degradations == {"redacted_provider_key": 1}
