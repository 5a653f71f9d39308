"""OTel GenAI: message shapes that real instrumentations write beside the conventions' own, in
per-message events and attributes (docs/sources/otel-genai.md). Each test builds its payload as
the named producer writes it, and checks the exact messages and degradations."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lithify.model import (
    BlobPart,
    InferenceCall,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    UriPart,
)
from lithify.translate import Skip, genai, translate_document, translate_protobuf
from lithify.translate._common import Degradations, synthesized_call_id
from lithify.translate.otlp import Span
from lithify.translate.telemetry import translate_span
from tests.test_genai import (
    BASE,
    SPAN,
    SPAN2,
    T0,
    TRACE,
    Rec,
    _dumps,
    _facts,
    fact,
    json_logs,
    pb_logs,
    spanned,
    text,
)
from tests.test_genai_media import blob as genai_media_blob


def _events(records: list[tuple[str, Any]], attrs: dict[str, Any]) -> InferenceCall:
    """The fact of one span's per-message log events, checked equal over OTLP/JSON and protobuf."""
    recs: list[Rec] = [(n, body, attrs, TRACE, SPAN, T0 + i) for i, (n, body) in enumerate(records)]
    (f,) = _facts(list(translate_document(json_logs(recs))))
    assert _facts(list(translate_protobuf(pb_logs(recs), "otlp-logs"))) == [f]
    return f


def _span_events(records: list[tuple[str, Any]]) -> InferenceCall:
    """The same events as span events, each body as JSON under ``gen_ai.event.content``."""
    events = [{"name": n, "attributes": {"gen_ai.event.content": _dumps(b)}} for n, b in records]
    return fact(dict(BASE), events)


# ---------------------------------------------------------------------------------------------
# OpenLLMetry event mode (event_emitter._emit_choice_event): tool calls beside the message


def test_choice_event_tool_calls_beside_the_message_are_kept() -> None:
    call = {
        "id": "call_1",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        "type": "function",
    }
    records = [
        ("gen_ai.user.message", {"content": "weather in Paris?"}),
        # The emitter pops an assistant role and writes the calls beside the message.
        (
            "gen_ai.choice",
            {
                "index": 0,
                "message": {"content": None},
                "finish_reason": "tool_calls",
                "tool_calls": [call],
            },
        ),
    ]
    expected = [
        Message(
            "assistant", [ToolCallPart("call_1", "get_weather", {"city": "Paris"})], "tool_call"
        )
    ]
    for f in (_events(records, {"gen_ai.system": "openai"}), _span_events(records)):
        assert f.input_messages == [Message("user", [TextPart("weather in Paris?")])]
        assert f.output_messages == expected
        assert f.degradations == {}


def test_calls_recorded_without_arguments_are_no_captured_content() -> None:
    # Content capture off: the openai-v2 and OpenLLMetry emitters keep a call's id, type and
    # name and drop its arguments (and every text).
    bare = {"id": "call_1", "type": "function", "function": {"name": "get_weather"}}
    records = [
        ("gen_ai.user.message", {}),
        (
            "gen_ai.choice",
            {"index": 0, "finish_reason": "tool_calls", "message": {}, "tool_calls": [bare]},
        ),
    ]
    recs: list[Rec] = [
        (n, b, {"gen_ai.system": "openai"}, TRACE, SPAN, T0 + i) for i, (n, b) in enumerate(records)
    ]
    [skip] = translate_document(json_logs(recs))
    assert isinstance(skip, Skip) and skip.reason == "content_not_captured"
    events = [{"name": n, "attributes": {"gen_ai.event.content": _dumps(b)}} for n, b in records]
    span = translate_span(Span(TRACE, SPAN, None, "chat gpt-4o", 3, T0, T0 + 5, dict(BASE), events))
    # The span keeps its metadata, no messages; the argument-less call it dropped is not counted.
    assert isinstance(span, InferenceCall) and span.model == "gpt-4o"
    assert (span.input_messages, span.output_messages) == ([], [])
    assert span.degradations == {"content_not_captured": 1}
    # Beside captured content, such a call is kept and counted: its arguments are not `{}`.
    records[0] = ("gen_ai.user.message", {"content": "weather in Paris?"})
    f = _events(records, {"gen_ai.system": "openai"})
    assert f.output_messages[0].parts == [ToolCallPart("call_1", "get_weather", {})]
    assert f.degradations == {"malformed_arguments": 1}


# ---------------------------------------------------------------------------------------------
# opentelemetry-instrumentation-google-genai, default mode (generate_content.py): bodies hold
# `Content.model_dump()`, every field of a part present, most of them None


def _gpart(**fields: Any) -> dict[str, Any]:
    part: dict[str, Any] = dict.fromkeys(
        (
            "video_metadata",
            "thought",
            "inline_data",
            "file_data",
            "thought_signature",
            "function_call",
            "code_execution_result",
            "executable_code",
            "function_response",
            "text",
        )
    )
    return {**part, **fields}


def _gcontent(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"parts": list(parts), "role": role}}


def test_google_genai_default_mode_events() -> None:
    png = b"\x89PNG\r\n\x1a\n"
    call = {"id": None, "args": {"city": "Paris"}, "name": "get_weather"}
    response = {
        "will_continue": None,
        "scheduling": None,
        "parts": None,
        "id": None,
        "name": "get_weather",
        "response": {"temp_c": 21},
    }
    records = [
        ("gen_ai.system.message", {"content": "You are terse."}),
        (
            "gen_ai.user.message",
            _gcontent(
                "user",
                _gpart(text="Weather here?"),
                _gpart(inline_data={"display_name": None, "data": png, "mime_type": "image/png"}),
            ),
        ),
        # Every entry of `contents` is logged as a user message, the model's turns too.
        (
            "gen_ai.user.message",
            _gcontent("model", _gpart(function_call=call, thought_signature=b"sig")),
        ),
        ("gen_ai.user.message", _gcontent("user", _gpart(function_response=response))),
        (
            "gen_ai.choice",
            {
                "index": 0,
                **_gcontent(
                    "model",
                    _gpart(text="Warm weather.", thought=True),
                    _gpart(text="It is 21C."),
                ),
                "finish_reason": "STOP",
            },
        ),
    ]
    f = _events(records, {"gen_ai.system": "gemini"})
    call_id = f.input_messages[2].parts[0].id  # type: ignore[union-attr]
    assert call_id.startswith("lithify_")
    assert f.input_messages == [
        Message("system", [TextPart("You are terse.")]),
        Message(
            "user",
            [
                TextPart("Weather here?"),
                BlobPart(
                    "image",
                    "image/png",
                    len(png),
                    f.input_messages[1].parts[1].sha256,  # type: ignore[union-attr]
                    base64.b64encode(png).decode(),
                ),
            ],
        ),
        Message("assistant", [ToolCallPart(call_id, "get_weather", {"city": "Paris"})]),
        Message("tool", [ToolCallResponsePart(call_id, {"temp_c": 21})]),
    ]
    assert f.output_messages == [
        Message("assistant", [ReasoningPart("Warm weather."), TextPart("It is 21C.")], "stop")
    ]
    assert f.degradations == {"opaque_reasoning": 1, "synthesized_id": 1}


def test_google_genai_default_mode_calls_get_the_gemini_ids_in_every_call() -> None:
    # 0.7b2 (semconv 1.30 events) writes the SDK's Content as the API gave it: the calls carry
    # no id, none made up. A call and its replay in the next request (another span) get the id
    # the Gemini translator gives an id-less call, so the two calls, and the exchange, agree.
    paris = {"id": None, "args": {"city": "Paris"}, "name": "get_weather"}
    zurich = {"id": None, "args": {"city": "Zürich"}, "name": "get_weather"}

    def result(text: str) -> dict[str, Any]:
        return _gpart(
            function_response={"id": None, "name": "get_weather", "response": {"r": text}}
        )

    turn = _gcontent(
        "model",
        _gpart(text="Two cities.", thought=True),
        _gpart(function_call=paris, thought_signature=b"sig"),
        _gpart(function_call=zurich),
    )
    ask = ("gen_ai.user.message", _gcontent("user", _gpart(text="Paris and Zürich?")))
    attrs = {"gen_ai.system": "gemini"}
    recs: list[Rec] = [
        (*ask, attrs, TRACE, SPAN, T0),
        (
            "gen_ai.choice",
            {"index": 0, **turn, "finish_reason": "STOP"},
            attrs,
            TRACE,
            SPAN,
            T0 + 1,
        ),
        (*ask, attrs, TRACE, SPAN2, T0 + 2),
        ("gen_ai.user.message", turn, attrs, TRACE, SPAN2, T0 + 3),
        (
            "gen_ai.user.message",
            _gcontent("user", result("18C"), result("12C")),
            attrs,
            TRACE,
            SPAN2,
            T0 + 4,
        ),
    ]
    first, second = _facts(list(translate_document(json_logs(recs))))
    ids = [
        synthesized_call_id("gemini", "get_weather", c["args"], k)
        for k, c in enumerate((paris, zurich))
    ]
    assert first.output_messages == [
        Message(
            "assistant",
            [
                ReasoningPart("Two cities."),
                ToolCallPart(ids[0], "get_weather", {"city": "Paris"}),
                ToolCallPart(ids[1], "get_weather", {"city": "Zürich"}),
            ],
            "stop",
        )
    ]
    assert second.input_messages[1] == Message("assistant", first.output_messages[0].parts)
    assert second.input_messages[2:] == [
        Message("tool", [ToolCallResponsePart(ids[0], {"r": "18C"})]),
        Message("tool", [ToolCallResponsePart(ids[1], {"r": "12C"})]),
    ]
    assert first.degradations == second.degradations == {"opaque_reasoning": 1, "synthesized_id": 2}


def test_google_genai_default_mode_streamed_chunks_are_one_choice() -> None:
    # Streamed, 0.7b2 writes a gen_ai.choice per chunk, its `index` counting candidates across
    # the chunks (0, 1, 2, ...); only the last chunk states a finish reason.
    chunks = [
        _gcontent("model", _gpart(text="Two ", thought=True)),
        _gcontent("model", _gpart(text="cities.", thought=True)),
        _gcontent("model", _gpart(text="It is ")),
        _gcontent("model", _gpart(text="21C."), _gpart(function_call={"name": "log", "args": {}})),
    ]
    records = [("gen_ai.user.message", _gcontent("user", _gpart(text="Weather?")))]
    for i, chunk in enumerate(chunks):
        reason = {"finish_reason": "STOP"} if i == len(chunks) - 1 else {}
        records.append(("gen_ai.choice", {"index": i, **chunk, **reason}))
    f = _events(records, {"gen_ai.system": "gemini"})
    log_id = synthesized_call_id("gemini", "log", {}, 0)
    assert f.output_messages == [
        Message(
            "assistant",
            [ReasoningPart("Two cities."), TextPart("It is 21C."), ToolCallPart(log_id, "log", {})],
            "stop",
        )
    ]
    # Two candidates streamed (candidate_count=2) end twice: their pieces cannot be told apart,
    # and they are left as written, never joined across candidates.
    two = [
        ("gen_ai.choice", {"index": 0, **_gcontent("model", _gpart(text="Bl"))}),
        ("gen_ai.choice", {"index": 1, **_gcontent("model", _gpart(text="Re"))}),
        (
            "gen_ai.choice",
            {"index": 2, **_gcontent("model", _gpart(text="ue.")), "finish_reason": "STOP"},
        ),
        (
            "gen_ai.choice",
            {"index": 3, **_gcontent("model", _gpart(text="d.")), "finish_reason": "STOP"},
        ),
    ]
    g = _events(records[:1] + two, {"gen_ai.system": "gemini"})
    assert [m.parts for m in g.output_messages] == [
        [TextPart("Bl")],
        [TextPart("Re")],
        [TextPart("ue.")],
        [TextPart("d.")],
    ]


def test_google_genai_0x_experimental_ids_are_replaced_without_a_provider() -> None:
    # 0.7b2 with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (util-genai 0.3b0):
    # semconv messages with made-up ids `<name>_<index>`, and neither gen_ai.system nor
    # gen_ai.provider.name on the span or its operation.details record. The instrumentation's
    # scope names the writer: the ids are replaced, and each result answers its own call.
    scope = {"name": "opentelemetry.instrumentation.google_genai", "version": "0.7b2"}

    def call(city: str, k: int) -> dict[str, Any]:
        args = {"city": city}
        return {
            "type": "tool_call",
            "id": f"get_weather_{k}",
            "name": "get_weather",
            "arguments": args,
        }

    def result(text: str, k: int) -> dict[str, Any]:
        return {"type": "tool_call_response", "id": f"get_weather_{k}", "response": {"r": text}}

    inputs = [
        text("user", "Paris and Zürich?"),
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Two."}, call("Paris", 1), call("Zürich", 2)],
        },
        {"role": "user", "parts": [result("18C", 0), result("12C", 1)]},
    ]
    attrs = {
        "gen_ai.operation.name": "generate_content",
        "gen_ai.request.model": "gemini-2.5-flash",
        "code.function.name": "google.genai.Models.generate_content",
        genai.INPUT: _dumps(inputs),
        genai.OUTPUT: _dumps([{**text("assistant", "Done."), "finish_reason": "stop"}]),
    }
    span = Span(TRACE, SPAN, None, "generate_content", 3, T0, T0 + 5, attrs, scope=scope)
    ids = [
        synthesized_call_id("gemini", "get_weather", {"city": c}, k)
        for k, c in enumerate(("Paris", "Zürich"))
    ]
    expected = [
        Message("user", [TextPart("Paris and Zürich?")]),
        Message(
            "assistant",
            [
                TextPart("Two."),
                ToolCallPart(ids[0], "get_weather", {"city": "Paris"}),
                ToolCallPart(ids[1], "get_weather", {"city": "Zürich"}),
            ],
        ),
        Message("tool", [ToolCallResponsePart(ids[0], {"r": "18C"})]),
        Message("tool", [ToolCallResponsePart(ids[1], {"r": "12C"})]),
    ]
    f = translate_span(span)
    assert isinstance(f, InferenceCall) and f.provider is None
    assert f.input_messages == expected
    assert f.degradations == {"synthesized_id": 2}
    # The operation.details record: no operation name or model either, only the scope.
    details = {k: v for k, v in attrs.items() if k.startswith("gen_ai.") and "messages" in k}
    doc = json_logs([(genai.OPERATION_DETAILS, None, details, TRACE, SPAN, T0)])
    doc["resourceLogs"][0]["scopeLogs"][0]["scope"] = scope
    (g,) = _facts(list(translate_document(doc)))
    assert g.input_messages == expected
    # Another writer's `<name>_<n>` ids without a Google provider stay as written.
    other = translate_span(Span(TRACE, SPAN, None, "generate_content", 3, T0, T0 + 5, attrs))
    assert isinstance(other, InferenceCall)
    assert other.input_messages[1].parts[1] == ToolCallPart(
        "get_weather_1", "get_weather", {"city": "Paris"}
    )


@pytest.mark.parametrize(
    "choice",
    [
        {"index": 0, "content": "<elided>", "finish_reason": "STOP"},  # google-genai 0.7b2
        {"content": "<elided>", "index": 0},  # Google ADK (schema 2), no finish reason stated
    ],
)
def test_google_genai_default_mode_with_capture_off_is_not_captured(
    choice: dict[str, Any],
) -> None:
    # 0.7b2's default mode without OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
    # (its default), and ADK's own log records likewise, write every event's content as the
    # placeholder "<elided>": no words of the conversation, so no fact (the span is the call's
    # metadata-only capture).
    records = [
        ("gen_ai.system.message", {"content": "<elided>"}),
        ("gen_ai.user.message", {"content": "<elided>"}),
        ("gen_ai.choice", choice),
    ]
    recs: list[Rec] = [
        (n, b, {"gen_ai.system": "gemini"}, TRACE, SPAN, T0 + i) for i, (n, b) in enumerate(records)
    ]
    results = list(translate_document(json_logs(recs)))
    assert results == [Skip("content_not_captured", f"events of span {SPAN} carry no content")]


def test_google_genai_spoken_answer_is_its_transcript_then_its_sound() -> None:
    # A native-audio answer: the words of `audio_transcription` lead the sound, as the Gemini
    # translator gives them; a part holding only a transcription is its text.
    sound = b"\x00\x01\xfe\xff" * 8
    pcm = "audio/L16;codec=pcm;rate=24000"
    said = _gpart(
        inline_data={"data": base64.b64encode(sound).decode(), "mime_type": pcm},
        audio_transcription={"text": "Hello.", "finished": True},
    )
    more = {**_gpart(), "audio_transcription": {"text": " Bye."}}
    records = [
        ("gen_ai.user.message", _gcontent("user", _gpart(text="Say hello."))),
        ("gen_ai.choice", {"index": 0, **_gcontent("model", said, more), "finish_reason": "STOP"}),
    ]
    f = _events(records, {"gen_ai.system": "gemini"})
    [out] = f.output_messages
    assert out.parts[0] == TextPart("Hello.")
    assert isinstance(out.parts[1], BlobPart) and out.parts[1].mime_type == pcm
    assert out.parts[2] == TextPart(" Bye.")
    assert f.degradations == {}


def test_google_genai_bare_parts_and_unknown_payload() -> None:
    # `contents` given as a list is logged entry by entry: a Part entry is the bare part, a
    # string the string. A field no Gemini version defined is counted, not dropped silently.
    records = [
        (
            "gen_ai.user.message",
            {"content": _gpart(inline_data={"data": b"%PDF", "mime_type": "application/pdf"})},
        ),
        ("gen_ai.user.message", {"content": "Summarise it."}),
        (
            "gen_ai.choice",
            {
                "index": 0,
                **_gcontent("model", _gpart(future_field={"x": 1})),
                "finish_reason": "STOP",
            },
        ),
    ]
    f = _events(records, {"gen_ai.system": "gemini"})
    (pdf,) = f.input_messages[0].parts
    assert isinstance(pdf, BlobPart)
    assert (pdf.modality, pdf.mime_type, pdf.content) == ("document", "application/pdf", "JVBERg==")
    assert f.input_messages[1:] == [Message("user", [TextPart("Summarise it.")])]
    assert f.output_messages == [Message("assistant", [], "stop")]
    assert f.degradations == {"unsupported_content": 1}


# ---------------------------------------------------------------------------------------------
# opentelemetry-instrumentation-vertexai, semconv 1.28 events (utils.request_to_events /
# response_to_events): parts are proto `to_dict` (snake_case); a choice's function calls are
# repeated as `tool_calls` beside the message, with ids `<name>_<index>`


def test_vertexai_events() -> None:
    records = [
        ("gen_ai.system.message", {"role": "", "content": [{"text": "Be brief."}]}),
        ("gen_ai.user.message", {"role": "user", "content": [{"text": "Weather in Paris?"}]}),
        (
            "gen_ai.assistant.message",
            {
                "role": "model",
                "content": [
                    {"thought": True, "text": "I should call the weather tool."},
                    {
                        "function_call": {"name": "get_weather", "args": {"city": "Paris"}},
                        "thought_signature": "c2lnbmF0dXJl",
                    },
                ],
            },
        ),
        # The tool event keeps the role of the Content that held the result.
        ("gen_ai.tool.message", {"role": "user", "id": "get_weather_0", "content": {"temp_c": 21}}),
        (
            "gen_ai.choice",
            {
                "finish_reason": "stop",
                "index": 0,
                "message": {
                    "role": "model",
                    "content": [
                        {"text": "It is 21C.", "thought_signature": "c2ln"},
                        {"function_call": {"name": "log", "args": {"x": 1}}},
                    ],
                },
                "tool_calls": [
                    {
                        "function": {"name": "log", "arguments": {"x": 1}},
                        "id": "log_1",
                        "type": "function",
                    }
                ],
            },
        ),
    ]
    f = _events(records, {"gen_ai.system": "vertex_ai"})
    call_id = f.input_messages[2].parts[1].id  # type: ignore[union-attr]
    assert f.input_messages == [
        Message("system", [TextPart("Be brief.")]),
        Message("user", [TextPart("Weather in Paris?")]),
        Message(
            "assistant",
            [
                ReasoningPart("I should call the weather tool."),
                ToolCallPart(call_id, "get_weather", {"city": "Paris"}),
            ],
        ),
        # Its made-up id names the call the model gave none: the result answers that call.
        Message("tool", [ToolCallResponsePart(call_id, {"temp_c": 21})]),
    ]
    # The call in the message takes the id of its repeat in `tool_calls`, and is there once;
    # that id (`log_1`) is one Vertex AI made up, `<name>_<index>`: the call gets the id the
    # Gemini translator gives a call the API sent without one (docs/sources/otel-genai.md).
    log_id = synthesized_call_id("gemini", "log", {"x": 1}, 0)
    assert f.output_messages == [
        Message(
            "assistant", [TextPart("It is 21C."), ToolCallPart(log_id, "log", {"x": 1})], "stop"
        )
    ]
    assert f.degradations == {"opaque_reasoning": 2, "synthesized_id": 2}


def test_vertexai_events_with_content_capture_off_are_not_captured() -> None:
    # `_parts_to_any_value` gives None, and the calls beside the choice keep only their names.
    call = {"function": {"name": "get_weather", "arguments": None}, "id": "get_weather_0"}
    records = [
        ("gen_ai.user.message", {"role": "user", "content": None}),
        ("gen_ai.tool.message", {"role": "user", "id": "get_weather_0", "content": None}),
        (
            "gen_ai.choice",
            {
                "finish_reason": "stop",
                "index": 0,
                "message": {"role": "model", "content": None},
                "tool_calls": [{**call, "type": "function"}],
            },
        ),
    ]
    recs: list[Rec] = [
        (n, b, {"gen_ai.system": "vertex_ai"}, TRACE, SPAN, T0 + i)
        for i, (n, b) in enumerate(records)
    ]
    [skip] = translate_document(json_logs(recs))
    assert isinstance(skip, Skip) and skip.reason == "content_not_captured"


def test_a_result_id_no_call_has_answers_the_id_less_call_it_names() -> None:
    calls = {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "name": "a", "arguments": {}},
            {"type": "tool_call", "name": "b", "arguments": {}},
        ],
    }
    results = {
        "role": "tool",
        "parts": [
            {"type": "tool_call_response", "id": "r-b", "name": "b", "response": 2},
            {"type": "tool_call_response", "id": "a_0", "response": 1},
            {"type": "tool_call_response", "id": "elsewhere", "response": 3},
        ],
    }
    f = spanned(
        input=[{"role": "user", "parts": [{"type": "text", "content": "go"}]}, calls, results]
    )
    a, b = (p.id for p in f.input_messages[1].parts)  # type: ignore[union-attr]
    assert [m.parts for m in f.input_messages[2:]] == [
        [ToolCallResponsePart(b, 2)],
        [ToolCallResponsePart(a, 1)],
        # No id-less call left to answer: the stated id stays (a result of an earlier call).
        [ToolCallResponsePart("elsewhere", 3)],
    ]


def test_choice_tool_calls_not_in_the_content_are_added() -> None:
    choice = {
        "finish_reason": "stop",
        "index": 0,
        "message": {"role": "model", "content": [{"function_call": {"name": "a", "args": {}}}]},
        "tool_calls": [
            {"function": {"name": "a", "arguments": {}}, "id": "a_0", "type": "function"},
            {"function": {"name": "b", "arguments": {"k": 2}}, "id": "b_1", "type": "function"},
        ],
    }
    f = _events([("gen_ai.choice", choice)], {})
    assert f.output_messages == [
        Message(
            "assistant", [ToolCallPart("a_0", "a", {}), ToolCallPart("b_1", "b", {"k": 2})], "stop"
        )
    ]
    assert f.degradations == {}


# ---------------------------------------------------------------------------------------------
# Fields that were dropped without a count


def test_reasoning_that_is_not_text_is_counted() -> None:
    f = spanned(
        output=[
            {
                "role": "assistant",
                "parts": [
                    {"type": "reasoning", "content": [{"type": "text", "text": "deep thought"}]},
                    {"type": "text", "content": "ans"},
                ],
                "finish_reason": "stop",
            }
        ]
    )
    assert f.output_messages == [Message("assistant", [TextPart("ans")], "stop")]
    assert f.degradations == {"unsupported_content": 1}


def test_chat_form_refusal_is_text() -> None:
    refused = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    completion = fact(
        dict(BASE),
        [
            {
                "name": genai.PROMPT_EVENT,
                "attributes": {"gen_ai.prompt": _dumps([{"role": "user", "content": "q"}])},
            },
            {
                "name": genai.COMPLETION_EVENT,
                "attributes": {"gen_ai.completion": _dumps([refused])},
            },
        ],
    )
    choice = _events(
        [
            ("gen_ai.user.message", {"content": "q"}),
            ("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": refused}),
        ],
        {},
    )
    answer = [TextPart("I can't help with that.")]
    assert completion.output_messages == [Message("assistant", answer)]
    assert choice.output_messages == [Message("assistant", answer, "stop")]
    assert completion.degradations == choice.degradations == {}


def test_parts_message_with_chat_form_siblings_keeps_them() -> None:
    f = spanned(
        output=[
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "calling"}],
                "reasoning_content": "thought",
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
            }
        ]
    )
    assert f.output_messages == [
        Message(
            "assistant",
            [ReasoningPart("thought"), TextPart("calling"), ToolCallPart("c1", "f", {})],
        )
    ]
    assert f.degradations == {}
    # Siblings that repeat the parts (the same call id, the same reasoning) add nothing.
    call = {"type": "tool_call", "id": "c2", "name": "g", "arguments": {}}
    g = spanned(
        output=[
            {
                "role": "assistant",
                "parts": [{"type": "reasoning", "content": "thought"}, call],
                "reasoning_content": "thought",
                "tool_calls": [{"id": "c2", "function": {"name": "g", "arguments": "{}"}}],
            }
        ]
    )
    assert g.output_messages == [
        Message("assistant", [ReasoningPart("thought"), ToolCallPart("c2", "g", {})])
    ]


def test_citations_on_text_are_counted() -> None:
    f = spanned(
        input=[
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": "See docs",
                        "annotations": [{"type": "url_citation", "url": "https://x"}],
                    },
                    {
                        "type": "text",
                        "text": "Paris",
                        "citations": [
                            {"type": "char_location", "cited_text": "Paris is"},
                            {"type": "char_location", "cited_text": "capital"},
                        ],
                    },
                ],
            },
            # Chat Completions puts a message's citations beside its content.
            {
                "role": "assistant",
                "content": "Sure.",
                "annotations": [{"type": "url_citation", "url_citation": {"url": "https://y"}}],
            },
        ]
    )
    assert f.input_messages == [
        Message("assistant", [TextPart("See docs"), TextPart("Paris")]),
        Message("assistant", [TextPart("Sure.")]),
    ]
    assert f.degradations == {"text_citation": 4}


# ---------------------------------------------------------------------------------------------
# util-genai's operation.details record leaves gen_ai.request.choice.count off


def _details(outputs: list[dict[str, Any]], **extra: Any) -> InferenceCall:
    attrs = {
        **BASE,
        "gen_ai.response.finish_reasons": ["stop"],
        genai.INPUT: [text("user", "Say a color")],
        genai.OUTPUT: outputs,
        **extra,
    }
    rec: Rec = (genai.OPERATION_DETAILS, None, attrs, TRACE, SPAN, T0)
    (f,) = _facts(list(translate_document(json_logs([rec]))))
    return f


def _answer(content: str, reason: str = "stop") -> dict[str, Any]:
    return {**text("assistant", content), "finish_reason": reason}


def test_two_whole_answers_without_a_choice_count_are_two_choices() -> None:
    f = _details([_answer("Blue."), _answer("Red.")])
    assert f.output_messages == [
        Message("assistant", [TextPart("Blue.")], "stop"),
        Message("assistant", [TextPart("Red.")], "stop"),
    ]
    # A request that stated one choice merges them, as before.
    g = _details([_answer("Blue."), _answer("Red.")], **{"gen_ai.request.choice.count": 1})
    assert g.output_messages == [
        Message("assistant", [TextPart("Blue."), TextPart("Red.")], "stop")
    ]


def test_pieces_of_one_answer_without_a_choice_count_are_merged() -> None:
    thinking = {
        "role": "assistant",
        "parts": [{"type": "reasoning", "content": "hmm"}],
        "finish_reason": "stop",
    }
    f = _details([thinking, _answer("Blue.")])
    assert f.output_messages == [
        Message("assistant", [ReasoningPart("hmm"), TextPart("Blue.")], "stop")
    ]


@given(st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=5))
def test_whole_answers_are_never_merged_without_a_choice_count(texts: list[str]) -> None:
    f = _details([_answer(t) for t in texts])
    assert f.output_messages == [Message("assistant", [TextPart(t)], "stop") for t in texts]


# ---------------------------------------------------------------------------------------------
# gen_ai.system_instructions as an array of JSON strings (SDKs that cannot nest attributes)


_parts = st.lists(
    st.fixed_dictionaries({"type": st.just("text"), "content": st.text(min_size=1, max_size=12)}),
    min_size=1,
    max_size=4,
)


@given(_parts)
def test_system_instructions_as_json_strings_equal_the_json_form(
    parts: list[dict[str, Any]],
) -> None:
    whole = spanned(system=parts)
    strings = fact({**BASE, genai.SYSTEM: [_dumps(p) for p in parts]})
    assert strings.input_messages == whole.input_messages
    assert strings.input_messages == [Message("system", [TextPart(p["content"]) for p in parts])]
    assert strings.degradations == whole.degradations == {}


def test_system_instruction_text_that_is_not_json_stays_text() -> None:
    f = fact(
        {
            **BASE,
            genai.SYSTEM: [
                "{name} is the user's name.",
                _dumps({"type": "text", "content": "Be brief."}),
            ],
        }
    )
    assert f.input_messages == [
        Message("system", [TextPart("{name} is the user's name."), TextPart("Be brief.")])
    ]
    assert f.degradations == {}


def test_vertexai_results_repeated_in_the_user_event_are_kept_once() -> None:
    # A Gemini turn holding function results and more (here text) gives a tool event per result
    # and a user event with every part, the results again (opentelemetry-python-contrib#3280).
    call = {"function_call": {"name": "get_weather", "args": {"city": "Paris"}}}
    records = [
        ("gen_ai.user.message", {"role": "user", "content": [{"text": "Weather in Paris?"}]}),
        ("gen_ai.assistant.message", {"role": "model", "content": [call]}),
        ("gen_ai.tool.message", {"role": "user", "id": "get_weather_0", "content": {"temp_c": 21}}),
        (
            "gen_ai.user.message",
            {
                "role": "user",
                "content": [
                    {"function_response": {"name": "get_weather", "response": {"temp_c": 21}}},
                    {"text": "And in Rome?"},
                ],
            },
        ),
        (
            "gen_ai.choice",
            {
                "finish_reason": "stop",
                "index": 0,
                "message": {"role": "model", "content": [{"text": "Checking."}]},
            },
        ),
    ]
    f = _events(records, {"gen_ai.system": "vertex_ai"})
    call_id = f.input_messages[1].parts[0].id  # type: ignore[union-attr]
    assert f.input_messages == [
        Message("user", [TextPart("Weather in Paris?")]),
        Message("assistant", [ToolCallPart(call_id, "get_weather", {"city": "Paris"})]),
        Message("tool", [ToolCallResponsePart(call_id, {"temp_c": 21})]),
        Message("user", [TextPart("And in Rome?")]),
    ]
    assert "orphan_tool_response" not in f.degradations


def test_a_user_event_result_without_its_tool_event_is_kept() -> None:
    # Only a result the tool events just gave is a repeat: one they did not give is the user's.
    call = {"function_call": {"name": "get_weather", "args": {"city": "Paris"}}}
    records = [
        ("gen_ai.assistant.message", {"role": "model", "content": [call]}),
        ("gen_ai.tool.message", {"role": "user", "id": "get_weather_0", "content": {"temp_c": 21}}),
        (
            "gen_ai.user.message",
            {
                "role": "user",
                "content": [
                    {"function_response": {"name": "get_weather", "response": {"temp_c": 22}}},
                    {"text": "Again?"},
                ],
            },
        ),
        (
            "gen_ai.choice",
            {
                "finish_reason": "stop",
                "index": 0,
                "message": {"role": "model", "content": [{"text": "ok"}]},
            },
        ),
    ]
    f = _events(records, {"gen_ai.system": "vertex_ai"})
    results = [p for m in f.input_messages for p in m.parts if isinstance(p, ToolCallResponsePart)]
    assert [r.result for r in results] == [{"temp_c": 21}, {"temp_c": 22}]


# ---------------------------------------------------------------------------------------------
# Pydantic AI (pydantic_ai/models/instrumented.py, messages.py), as 1.107.10 and 2.68.0 write it


def _pydantic_v1_events(*, with_reasons: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Format 1's events of the second call of the weather loop (instructions, prompt, the
    model's thinking and calls, two results, the answer), each body merged with its attributes
    as `event_to_dict` writes them; and the span's own attributes."""
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": f'{{"city": "{c}"}}'},
        }
        for i, c in enumerate(("Paris", "Zürich"))
    ]
    system = {"gen_ai.system": "openai"}
    events = [
        {"content": "Be brief.", "role": "system", **system, "event.name": "gen_ai.system.message"},
        {
            "content": "Weather in Paris and Zürich?",
            "role": "user",
            **system,
            "gen_ai.message.index": 0,
            "event.name": "gen_ai.user.message",
        },
        {
            "role": "assistant",
            "content": [{"kind": "thinking", "text": "One call per city."}],
            "tool_calls": calls,
            **system,
            "gen_ai.message.index": 1,
            "event.name": "gen_ai.assistant.message",
        },
        *(
            {
                "role": "tool",
                "id": f"call_{i}",
                "name": "get_weather",
                "content": r,
                **system,
                "gen_ai.message.index": 2,
                "event.name": "gen_ai.tool.message",
            }
            for i, r in enumerate(('{"temperature": 18}', "12 °C, light rain"))
        ),
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Paris 18 °C, Zürich 12 °C."},
            **system,
            "event.name": "gen_ai.choice",
        },
    ]
    attrs = {**BASE, "gen_ai.system": "openai"}
    if with_reasons:
        attrs["gen_ai.response.finish_reasons"] = ["stop"]
    return events, attrs


def _pydantic_v1_expected(finish: str | None) -> tuple[list[Message], list[Message]]:
    inputs = [
        Message("system", [TextPart("Be brief.")]),
        Message("user", [TextPart("Weather in Paris and Zürich?")]),
        Message(
            "assistant",
            [
                ReasoningPart("One call per city."),
                ToolCallPart("call_0", "get_weather", {"city": "Paris"}),
                ToolCallPart("call_1", "get_weather", {"city": "Zürich"}),
            ],
        ),
        Message("tool", [ToolCallResponsePart("call_0", '{"temperature": 18}')]),
        Message("tool", [ToolCallResponsePart("call_1", "12 °C, light rain")]),
    ]
    return inputs, [Message("assistant", [TextPart("Paris 18 °C, Zürich 12 °C.")], finish)]


def test_pydantic_ai_v1_events_attribute_is_read() -> None:
    """`event_mode='attributes'`: the events as one JSON array in the span attribute `events`
    (the span has no other content). Before, the span was skipped as content_not_captured. The
    choice event states no finish reason: the span's gen_ai.response.finish_reasons gives it."""
    events, attrs = _pydantic_v1_events(with_reasons=True)
    f = fact({**attrs, genai.EVENTS_ATTRIBUTE: _dumps(events)})
    assert (f.input_messages, f.output_messages) == _pydantic_v1_expected("stop")
    assert f.degradations == {}
    # Structured (an SDK that keeps the list as an AnyValue array) reads the same.
    assert fact({**attrs, genai.EVENTS_ATTRIBUTE: events}).input_messages == f.input_messages


def test_an_events_attribute_of_another_kind_claims_no_span() -> None:
    for value in ('["retry", "timeout"]', '[{"name": "x"}]', "3 events", ""):
        attrs = {**BASE, genai.EVENTS_ATTRIBUTE: value}
        assert genai.span_content(attrs, [], Degradations(), "s") is None, value
        bare = translate_span(Span(TRACE, SPAN, None, "chat", 3, T0, T0 + 1, attrs))
        assert isinstance(bare, InferenceCall), value  # the span's metadata only
        assert (bare.input_messages, bare.output_messages) == ([], [])
        assert bare.degradations == {"content_not_captured": 1}
    # JSON-looking but not JSON: counted, and nothing else is claimed.
    deg = Degradations()
    bad = {**BASE, genai.EVENTS_ATTRIBUTE: '[{"event.name": "gen_ai.user.message", '}
    assert genai.span_content(bad, [], deg, "s") is None
    assert dict(deg) == {"malformed_messages": 1}


def test_pydantic_ai_v1_log_events_read_kind_parts() -> None:
    """`event_mode='logs'`: the same events as log records. Pydantic AI names a content part's
    type `kind`: `thinking` is reasoning (it was read as text before), `binary` and `image-url`
    are media."""
    events, _ = _pydantic_v1_events(with_reasons=False)
    records = [
        (e["event.name"], {k: v for k, v in e.items() if k not in ("event.name", "gen_ai.system")})
        for e in events
    ]
    f = _events(records, {"gen_ai.system": "openai"})
    assert (f.input_messages, f.output_messages) == _pydantic_v1_expected(None)
    assert f.degradations == {}

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(8)).decode()
    user = {
        "role": "user",
        "content": [
            {"kind": "text", "content": "What is this?"},
            {"kind": "binary", "media_type": "image/png", "binary_content": png},
            {"kind": "image-url", "url": "https://x.test/a.jpg"},
        ],
    }
    f = _events([("gen_ai.user.message", user), ("gen_ai.choice", {"index": 0, "message": {}})], {})
    [msg] = f.input_messages
    assert [type(p).__name__ for p in msg.parts] == ["TextPart", "BlobPart", "UriPart"]
    assert msg.parts[1] == genai_media_blob(base64.b64decode(png), "image/png", "image")
    assert msg.parts[2] == UriPart("image", None, "https://x.test/a.jpg")
    assert f.degradations == {"content_reference": 1}
    # A `kind` of another shape names no type: an unknown part, as any other.
    odd = {"role": "user", "content": [{"kind": ["text"], "text": 1}, "hi"]}
    f = _events([("gen_ai.user.message", odd), ("gen_ai.choice", {"index": 0, "message": {}})], {})
    assert f.input_messages == [Message("user", [TextPart("hi")])]
    assert f.degradations == {"unsupported_content": 1}


def test_pydantic_ai_media_parts_before_format_4() -> None:
    """Formats 2 and 3 write `{type: binary, media_type, content}` and `{type: <kind>-url,
    url}` (`unsupported_content` before); a part without its data is malformed media."""
    pdf = b"%PDF-1.7\n" + bytes(12)
    f = spanned(
        input=[
            {
                "role": "user",
                "parts": [
                    {"type": "binary", "media_type": "application/pdf", "content": _b64(pdf)},
                    {"type": "audio-url", "url": "https://x.test/a.mp3"},
                    {"type": "video-url", "url": "https://x.test/v.mp4"},
                    {"type": "document-url", "url": "https://x.test/d.pdf"},
                    {"type": "image-url", "url": "data:image/png;base64," + _b64(b"\x89PNG")},
                    {"type": "binary", "media_type": "image/png"},  # include_binary_content off
                ],
            }
        ]
    )
    assert f.input_messages[0].parts == [
        genai_media_blob(pdf, "application/pdf", "document"),
        UriPart("audio", None, "https://x.test/a.mp3"),
        UriPart("video", None, "https://x.test/v.mp4"),
        UriPart("document", None, "https://x.test/d.pdf"),
        genai_media_blob(b"\x89PNG", "image/png", "image"),
    ]
    assert f.degradations == {"content_reference": 3, "malformed_media": 1}


def test_pydantic_ai_tool_results_with_names_and_tool_calls_with_extras() -> None:
    """From format 2: results carry the tool's `name` and `result`, calls may carry `builtin`
    (a provider-side tool) and Logfire's `code_arg_*` hints: read as any call and result."""
    f = spanned(
        input=[
            {
                "role": "assistant",
                "parts": [
                    {"type": "thinking", "content": "Look it up."},
                    {
                        "type": "tool_call",
                        "id": "c1",
                        "name": "run_code",
                        "arguments": {"code": "1+1"},
                        "code_arg_name": "code",
                        "code_arg_language": "python",
                    },
                ],
                "finish_reason": "tool_call",
            },
            {
                "role": "user",
                "parts": [
                    {"type": "tool_call_response", "id": "c1", "name": "run_code", "result": 2},
                    {"type": "text", "content": "and now?"},
                ],
            },
        ]
    )
    assert f.input_messages == [
        Message(
            "assistant",
            [ReasoningPart("Look it up."), ToolCallPart("c1", "run_code", {"code": "1+1"})],
        ),
        Message("tool", [ToolCallResponsePart("c1", 2)]),
        Message("user", [TextPart("and now?")]),
    ]
    assert f.degradations == {}


def test_pydantic_ai_system_prompts_the_model_no_longer_sees_are_left_out() -> None:
    """A request-scoped system prompt an earlier request was sent with is marked `visible:
    false` on later requests: it is not what this call's model saw (no part, no message)."""
    f = spanned(
        input=[
            {"role": "system", "parts": [{"type": "text", "content": "once", "visible": False}]},
            {
                "role": "system",
                "parts": [
                    {"type": "text", "content": "gone", "visible": False},
                    {"type": "text", "content": "always", "visible": True},
                ],
            },
            text("user", "hi"),
        ]
    )
    assert f.input_messages == [
        Message("system", [TextPart("always")]),
        Message("user", [TextPart("hi")]),
    ]
    assert f.degradations == {}


def test_span_event_choice_takes_the_span_finish_reason_when_it_states_none() -> None:
    records = [
        ("gen_ai.user.message", {"content": "hi"}),
        ("gen_ai.choice", {"index": 0, "message": {"role": "assistant", "content": "hello"}}),
    ]
    events = [{"name": n, "attributes": {"gen_ai.event.content": _dumps(b)}} for n, b in records]
    f = fact({**BASE, "gen_ai.response.finish_reasons": ["length"]}, events)
    assert f.output_messages == [Message("assistant", [TextPart("hello")], "length")]
    # A reason the choice states wins.
    records[1][1]["finish_reason"] = "stop"
    events = [{"name": n, "attributes": {"gen_ai.event.content": _dumps(b)}} for n, b in records]
    f = fact({**BASE, "gen_ai.response.finish_reasons": ["length"]}, events)
    assert f.output_messages[0].finish_reason == "stop"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
