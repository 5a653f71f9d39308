"""Gemini generateContent translator: mapping rules, streams, detection, and robustness."""

from __future__ import annotations

import json
import random
import re
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
    ToolDefinition,
)
from lithify.translate import gemini, provider
from lithify.translate._common import synthesized_call_id
from lithify.translate.redact import CREDENTIAL_KEYS
from lithify.translate.sse import SSEEvent, iter_events, sse_text
from tests.conftest import CORPUS
from tests.helpers import assert_valid_messages, in_pieces

SSE_FILES = sorted((CORPUS / "gemini").glob("*.sse"))


def fact(request: Any = None, response: Any = None, **meta: Any) -> InferenceCall:
    result = gemini.translate(request, response, meta=meta or None)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def turn(role: str, *parts: Any) -> dict[str, Any]:
    return {"role": role, "parts": list(parts)}


def req(*contents: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"contents": list(contents), **extra}


def call(name: str, args: Any, id_: str | None = None, **extra: Any) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": name, "args": args}
    if id_ is not None:
        fc["id"] = id_
    return {"functionCall": fc, **extra}


def answer(name: str, response: Any, id_: str | None = None) -> dict[str, Any]:
    fr: dict[str, Any] = {"name": name, "response": response}
    if id_ is not None:
        fr["id"] = id_
    return {"functionResponse": fr}


def resp(*parts: Any, finish: Any = "STOP", **extra: Any) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": list(parts)}, "finishReason": finish, "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 5,
            "thoughtsTokenCount": 20,
            "totalTokenCount": 35,
        },
        "modelVersion": "gemini-2.5-pro",
        "responseId": "resp-1",
        **extra,
    }


def user(t: str) -> dict[str, Any]:
    return turn("user", {"text": t})


# --- SDK dumps --------------------------------------------------------------------------------


def test_sdk_automatic_function_calling_history_is_the_input() -> None:
    """The google-genai SDK ran the function calls itself (automatic function calling) and puts
    them on the response it returns, after the contents it was given: the model read them, so
    they are the input (before: the calls and their results were in no part, and not counted)."""
    request = {
        "model": "gemini-2.5-flash",
        "contents": "weather in Paris?",
        "config": {"system_instruction": "Be brief."},
    }
    history = [
        {"role": "user", "parts": [{"text": "weather in Paris?"}]},
        {"role": "model", "parts": [{"function_call": {"name": "weather", "args": {"c": "P"}}}]},
        {
            "role": "user",
            "parts": [{"function_response": {"name": "weather", "response": {"t": 20}}}],
        },
    ]
    response = {**resp({"text": "20 C"}), "automatic_function_calling_history": history}
    f = fact(request, response)
    id_ = synthesized_call_id("gemini", "weather", {"c": "P"}, 0)
    assert f.input_messages == [
        Message("system", [TextPart("Be brief.")]),
        Message("user", [TextPart("weather in Paris?")]),
        Message("assistant", [ToolCallPart(id_, "weather", {"c": "P"})]),
        Message("tool", [ToolCallResponsePart(id_, {"t": 20})]),
    ]
    assert f.degradations == {"synthesized_id": 1}
    # Without the request too, and from a stream of the SDK's chunks (camelCase or not).
    assert fact(None, response).input_messages == f.input_messages[1:]
    chunks = [{**resp({"text": "20 C"}), "automaticFunctionCallingHistory": history}]
    assert fact(request, chunks).input_messages == f.input_messages
    # An empty history (no function was called) leaves the request's contents.
    plain = fact(request, {**resp({"text": "hi"}), "automatic_function_calling_history": []})
    assert plain.input_messages == f.input_messages[:2]


def test_cached_content_counts_a_content_reference() -> None:
    """Context the model read from a cache made beforehand (`cachedContent`, the SDK's
    `config.cached_content`) is only named: counted as a reference, as a file is."""
    for r in (
        req(user("q"), cachedContent="cachedContents/abc"),
        {"contents": [user("q")], "config": {"cached_content": "cachedContents/abc"}},
    ):
        f = fact(r, resp({"text": "a"}))
        assert f.degradations == {"content_reference": 1}
        assert f.input_messages == [Message("user", [TextPart("q")])]


def test_sdk_dump_with_every_field_spelled_out_counts_nothing() -> None:
    """A plain `model_dump()` writes every unset field as null: those fields hold nothing, and
    are not an unknown payload."""
    nulls = dict.fromkeys(("function_call", "inline_data", "tool_call", "media_processing"))
    f = fact(req(turn("user", {"text": "q", **nulls}, {"text": None, **nulls})))
    assert f.input_messages == [Message("user", [TextPart("q")])]
    assert f.degradations == {}


# --- requests ---------------------------------------------------------------------------------


def test_system_instruction_and_roles() -> None:
    r = req(
        user("q"),
        turn("model", {"text": "a"}),
        {"parts": [{"text": "no role"}]},
        systemInstruction={"parts": [{"text": "Be brief."}, {"text": "Be kind."}]},
    )
    f = fact(r)
    assert f.input_messages == [
        Message("system", [TextPart("Be brief."), TextPart("Be kind.")]),
        Message("user", [TextPart("q")]),
        Message("assistant", [TextPart("a")]),
        Message("user", [TextPart("no role")]),
    ]


def test_snake_case_sdk_shape() -> None:
    r = {
        "model": "models/gemini-2.0-flash",
        "contents": [
            {"role": "user", "parts": [{"text": "q"}]},
            {
                "role": "model",
                "parts": [
                    {"function_call": {"name": "f", "args": {"a": 1}, "id": "c1"}},
                    {"text": "t", "thought": True, "thought_signature": "c2ln"},
                ],
            },
            {"role": "user", "parts": [{"function_response": {"name": "f", "response": {"r": 1}}}]},
        ],
        "config": {
            "system_instruction": "sys",
            "temperature": 0.1,
            "max_output_tokens": 100,
            "thinking_config": {"thinking_budget": 512},
            "tools": [
                {
                    "function_declarations": [
                        {"name": "f", "parameters_json_schema": {"type": "object"}}
                    ]
                }
            ],
            "tool_config": {"function_calling_config": {"mode": "ANY"}},
        },
    }
    f = fact(r)
    assert f.model == "gemini-2.0-flash"
    assert f.input_messages == [
        Message("system", [TextPart("sys")]),
        Message("user", [TextPart("q")]),
        Message("assistant", [ToolCallPart("c1", "f", {"a": 1}), ReasoningPart("t")]),
        Message("tool", [ToolCallResponsePart("c1", {"r": 1})]),
    ]
    assert f.tools == [ToolDefinition("f", None, {"type": "object"})]
    assert f.request == {
        "max_tokens": 100,
        "reasoning_budget_tokens": 512,
        "temperature": 0.1,
        "tool_choice": {"mode": "ANY"},
    }
    assert f.degradations == {"opaque_reasoning": 1}


def test_thought_parts_and_signatures() -> None:
    f = fact(
        None,
        resp(
            {"text": "thinking...", "thought": True},
            {"text": "answer", "thoughtSignature": "c2ln"},
            {"thought": True, "thoughtSignature": "b3RoZXI="},
            {"text": ""},
        ),
    )
    assert f.output_messages == [
        Message("assistant", [ReasoningPart("thinking..."), TextPart("answer")], "stop")
    ]
    assert f.degradations == {"opaque_reasoning": 2}


def test_speech_metadata_is_counted_and_its_text_kept() -> None:
    """``Part.speechMetadata`` (google-genai ``SpeechMetadata{speaker, style}``): how a TTS
    model was told to voice the text. No part holds it: the text is kept, each part carrying it
    counts ``unsupported_content``, and it stays on raw. An empty one loses nothing."""
    r = req(
        turn(
            "user",
            {"text": "Welcome back!", "speechMetadata": {"speaker": "Joe", "style": "excited"}},
            {"text": "Thanks, Joe.", "speech_metadata": {"speaker": "Jane"}},
            {"text": "Plain.", "speechMetadata": {}},
        ),
        generationConfig={
            "responseModalities": ["AUDIO"],
            "speechConfig": {
                "multiSpeakerVoiceConfig": {
                    "speakerVoiceConfigs": [
                        {"speaker": "Joe", "voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Kore"}}},
                        {"speaker": "Jane", "voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Puck"}}},
                    ]
                }
            },
        },
    )  # fmt: skip
    f = fact(r)
    assert f.input_messages == [
        Message("user", [TextPart("Welcome back!"), TextPart("Thanks, Joe."), TextPart("Plain.")])
    ]
    assert f.degradations == {"unsupported_content": 2}
    assert f.raw["request"]["contents"][0]["parts"][0]["speechMetadata"]["style"] == "excited"


def test_unknown_parts_are_counted_and_turn_kept() -> None:
    r = req(
        turn("user", {"text": "look"}, {"hologram": {"x": 1}}), turn("model", {"futurePart": {}})
    )
    f = fact(r)
    assert f.input_messages == [Message("user", [TextPart("look")]), Message("assistant", [])]
    assert f.degradations == {"unsupported_content": 2}


def test_calls_without_ids_are_synthesized_and_responses_paired_by_name_and_order() -> None:
    r = req(
        user("weather?"),
        turn("model", call("w", {"city": "A"}), call("t", {}), call("w", {"city": "B"})),
        turn("user", answer("w", {"v": "a"}), answer("t", {"v": "t"}), answer("w", {"v": "b"})),
    )
    f = fact(r)
    calls = f.input_messages[1].parts
    assert all(isinstance(c, ToolCallPart) and c.id.startswith("lithify_") for c in calls)
    assert len({c.id for c in calls}) == 3
    results = [m.parts[0] for m in f.input_messages[2:]]
    assert [m.role for m in f.input_messages[2:]] == ["tool"] * 3
    assert [(r.id, r.result) for r in results] == [
        (calls[0].id, {"v": "a"}),
        (calls[1].id, {"v": "t"}),
        (calls[2].id, {"v": "b"}),
    ]
    assert f.degradations == {"synthesized_id": 3}


def test_given_ids_pair_by_id_whatever_the_order() -> None:
    r = req(
        user("q"),
        turn("model", call("f", {}, "id-1"), call("f", {}, "id-2")),
        turn("function", answer("f", "two", "id-2"), answer("f", "one")),
    )
    f = fact(r)
    assert [m.parts for m in f.input_messages[2:]] == [
        [ToolCallResponsePart("id-2", "two")],
        [ToolCallResponsePart("id-1", "one")],
    ]
    assert f.degradations == {}


def test_orphan_response_gets_an_id_and_is_counted() -> None:
    f = fact(req(user("q"), turn("user", answer("ghost", {"x": 1}))))
    part = f.input_messages[1].parts[0]
    assert isinstance(part, ToolCallResponsePart) and part.id.startswith("lithify_")
    assert f.degradations == {"orphan_tool_response": 1}


def test_mixed_turn_splits_responses_then_text() -> None:
    r = req(
        user("q"),
        turn("model", call("f", {}, "c")),
        turn("user", answer("f", {"ok": True}, "c"), {"text": "thanks, now summarise"}),
    )
    f = fact(r)
    assert [(m.role, m.parts) for m in f.input_messages[2:]] == [
        ("tool", [ToolCallResponsePart("c", {"ok": True})]),
        ("user", [TextPart("thanks, now summarise")]),
    ]


def test_synthesized_output_ids_match_their_replay_in_the_next_request() -> None:
    history = [user("weather in A and B?")]
    first = fact(req(*history), resp(call("w", {"c": "A"}), call("w", {"c": "B"})))
    out_ids = [p.id for p in first.output_messages[0].parts]
    replay = req(
        *history,
        turn(
            "model",
            {"text": "", "thoughtSignature": "x"},
            call("w", {"c": "A"}),
            call("w", {"c": "B"}),
        ),
        turn("user", answer("w", {"t": 1}), answer("w", {"t": 2})),
    )
    second = fact(replay, resp({"text": "A is 1, B is 2"}))
    assert [p.id for p in second.input_messages[1].parts] == out_ids
    assert [m.parts[0].id for m in second.input_messages[2:]] == out_ids
    # What is around the call does not matter (Google ADK rewrites its system instruction
    # between turns); what the call is does.
    rewritten = fact({**replay, "systemInstruction": {"parts": [{"text": "artifacts: a.txt"}]}})
    assert [p.id for p in rewritten.input_messages[2].parts] == out_ids
    other = fact(req(user("something else")), resp(call("w", {"c": "C"}), call("w", {"c": "A"})))
    assert out_ids[0] not in [p.id for p in other.output_messages[0].parts]


def test_args_malformed_and_missing() -> None:
    f = fact(
        None, resp(call("a", "not json"), {"functionCall": {"name": "b"}}, call("c", '{"k": 1}'))
    )
    assert [p.arguments for p in f.output_messages[0].parts] == [{}, {}, {"k": 1}]
    assert f.degradations == {"malformed_arguments": 1, "synthesized_id": 3}


def test_candidates_one_message_each_in_index_order() -> None:
    r = {
        "candidates": [
            {
                "index": 1,
                "content": {"role": "model", "parts": [{"text": "second"}]},
                "finishReason": "MAX_TOKENS",
            },
            {"content": {"role": "model", "parts": [{"text": "first"}]}, "finishReason": "STOP"},
            {"index": 2, "finishReason": "SAFETY"},
        ],
        "responseId": "r",
    }
    f = fact(None, r)
    assert f.output_messages == [
        Message("assistant", [TextPart("first")], "stop"),
        Message("assistant", [TextPart("second")], "length"),
        Message("assistant", [], "content_filter"),
    ]


def test_candidates_get_the_ids_of_their_own_calls() -> None:
    """Candidates are alternative answers: the same call gets the same id in each (so whichever
    the client replays keeps it), different calls different ids."""
    r = {
        "candidates": [
            {"index": i, "content": {"role": "model", "parts": parts}, "finishReason": 1}
            for i, parts in enumerate(
                [[call("f", {})], [call("f", {})], [call("f", {"x": 1})], [call("g", {})]]
            )
        ],
        "responseId": "r",
    }
    f = fact(req(user("q")), r)
    ids = [m.parts[0].id for m in f.output_messages]
    assert ids[0] == ids[1] and len(set(ids)) == 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("MODEL_ARMOR", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("OTHER", "other"),
        ("FINISH_REASON_UNSPECIFIED", None),
        (1, "stop"),
        (2, "length"),
        (3, "content_filter"),
        (4, "content_filter"),
        (5, "other"),
        (6, "content_filter"),
        (7, "content_filter"),
        (8, "content_filter"),
        (9, "error"),
        (15, "error"),
        (0, None),
        (99, "99"),
    ],
)
def test_finish_reasons_string_and_vertex_integer(value: Any, expected: str | None) -> None:
    assert (
        fact(None, resp({"text": "a"}, finish=value)).output_messages[0].finish_reason == expected
    )


def test_integer_finish_reasons_follow_the_gemini_api_numbering_when_meta_says_so() -> None:
    url = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent"
    got = [
        fact(None, resp({"text": "a"}, finish=n), url=url).output_messages[0].finish_reason
        for n in (6, 7, 10)
    ]
    assert got == ["language", "content_filter", "error"]


def test_tokens_add_thoughts_to_output() -> None:
    f = fact(None, resp({"text": "a"}))
    assert (f.input_tokens, f.output_tokens) == (10, 25)
    usage = {"prompt_token_count": 3, "candidates_token_count": 4}
    f = fact(None, resp({"text": "a"}, usageMetadata=usage))
    assert (f.input_tokens, f.output_tokens) == (3, 4)


def test_request_params() -> None:
    r = req(
        user("q"),
        generationConfig={
            "temperature": 0.3,
            "topP": 0.8,
            "topK": 20,
            "maxOutputTokens": 256,
            "stopSequences": ["X"],
            "seed": 7,
            "candidateCount": 2,
            "thinkingConfig": {"thinkingLevel": "HIGH", "includeThoughts": True},
        },
        toolConfig={"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}},
    )
    assert fact(r).request == {
        "max_tokens": 256,
        "n": 2,
        "reasoning_effort": "high",
        "seed": 7,
        "stop": ["X"],
        "temperature": 0.3,
        "tool_choice": {"mode": "ANY", "allowedFunctionNames": ["f"]},
        "top_k": 20,
        "top_p": 0.8,
    }


def test_gemini_schema_becomes_json_schema() -> None:
    params = {
        "type": 6,
        "properties": {
            "city": {"type": 1, "description": "d", "nullable": True},
            "days": {"type": "INTEGER", "format": "int32"},
            "tags": {"type": 5, "items": {"type": "STRING", "enum": ["a"]}, "max_items": "3"},
            "any": {"any_of": [{"type": 2}, {"type": 4}]},
            "free": {"type": 0},
            "max_items": {"type": 7},
        },
        "required": ["city"],
        "propertyOrdering": ["city", "days"],
    }
    tools = [
        {"functionDeclarations": [{"name": "f", "description": "x", "parameters": params}]},
        {"googleSearch": {}},
        {"codeExecution": {}},
    ]
    f = fact(req(user("q"), tools=tools))
    assert f.tools == [
        ToolDefinition(
            "f",
            "x",
            {
                "type": "object",
                "properties": {
                    "city": {"type": ["string", "null"], "description": "d"},
                    "days": {"type": "integer", "format": "int32"},
                    "tags": {
                        "type": "array",
                        "items": {"type": "string", "enum": ["a"]},
                        "maxItems": 3,
                    },
                    "any": {"anyOf": [{"type": "number"}, {"type": "boolean"}]},
                    "free": {},
                    "max_items": {"type": "null"},
                },
                "required": ["city"],
            },
        ),
        ToolDefinition("google_search", None, {}, builtin={"googleSearch": {}}),
        ToolDefinition("code_execution", None, {}, builtin={"codeExecution": {}}),
    ]
    assert f.degradations == {}
    assert f.raw["request"]["tools"][0]["functionDeclarations"][0]["parameters"]["type"] == 6


def test_json_schema_parameters_kept_as_is() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string"}}, "propertyOrdering": ["x"]}
    decl = {"name": "f", "parametersJsonSchema": schema, "parameters": {"type": 6}}
    f = fact(req(user("q"), tools=[{"functionDeclarations": [decl]}]))
    assert f.tools[0].parameters == schema


ANSWER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}  # fmt: skip
JSON_MODE = {"responseMimeType": "application/json"}


@pytest.mark.parametrize(
    ("extra", "counted"),
    [
        ({"generationConfig": {**JSON_MODE, "responseSchema": {"type": "OBJECT"}}}, True),
        ({"generationConfig": {**JSON_MODE, "responseJsonSchema": ANSWER_SCHEMA}}, True),
        (
            {
                "generation_config": {
                    "response_mime_type": "application/json",
                    "response_schema": {"type": 6},
                }
            },
            True,
        ),
        # The SDK's config, dumped with every unset field null.
        (
            {
                "config": {
                    "response_mime_type": "application/json",
                    "response_schema": None,
                    "response_json_schema": ANSWER_SCHEMA,
                }
            },
            True,
        ),
        (
            {
                "config": {
                    "responseMimeType": "text/x.enum",
                    "responseSchema": {"type": "STRING", "enum": ["a", "b"]},
                }
            },
            True,
        ),
        ({"generationConfig": JSON_MODE}, False),
        ({"config": {"response_mime_type": "application/json", "response_schema": None}}, False),
        ({"generationConfig": {"temperature": 0.2}}, False),
    ],
)
def test_a_response_schema_is_counted_once(extra: dict[str, Any], counted: bool) -> None:
    # The schema shaped the answer but is in no message: a row would teach its shape unprompted.
    # responseMimeType alone is JSON mode: the prompt asks for JSON itself.
    f = fact(req(user("Where is the Louvre?"), **extra), resp({"text": '{"city":"Paris"}'}))
    assert f.degradations == ({"output_schema": 1} if counted else {})
    assert {k: f.raw["request"][k] for k in extra} == extra


def test_model_provider_and_session() -> None:
    vertex = "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    f = fact(req(user("q")), url=vertex, session_id="s1")
    assert (f.model, f.provider, f.session_id) == ("gemini-2.5-flash", "gcp.vertex_ai", "s1")
    f = fact(req(user("q")), model="models/gemini-2.0-flash", provider="vertex")
    assert (f.model, f.provider, f.session_id) == ("gemini-2.0-flash", "gcp.vertex_ai", None)
    f = fact(req(user("q")), resp({"text": "a"}))
    assert (f.model, f.provider) == ("gemini-2.5-pro", "gcp.gemini")
    traffic = resp({"text": "a"}, usageMetadata={"promptTokenCount": 1, "trafficType": 1})
    assert fact(None, traffic).provider == "gcp.vertex_ai"


def test_identity_and_skips() -> None:
    a = fact(req(user("q")), resp({"text": "a"}))
    b = fact(req(user("other")), resp({"text": "a"}))
    assert a.inference_call_id == b.inference_call_id and a.model_call_id == "resp-1"
    assert fact(req(user("q"))).inference_call_id != fact(req(user("r"))).inference_call_id
    err = {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}
    skip = gemini.translate(req(user("q")), err)
    assert isinstance(skip, Skip) and skip.reason == "error_response"
    skip = gemini.translate(None, None)
    assert isinstance(skip, Skip) and skip.reason == "empty"


def test_blocked_prompt_has_no_output_message() -> None:
    blocked = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 4},
    }
    f = fact(req(user("q")), blocked)
    assert f.output_messages == [] and f.input_tokens == 4
    assert f.raw["response"]["promptFeedback"]["blockReason"] == "SAFETY"


def test_api_key_in_url_is_not_kept_but_redacted_in_content() -> None:
    key = "AIza" + "B" * 35
    f = fact(req(user(f"my key {key}")))
    assert key not in orjson.dumps(msgspec.to_builtins(f)).decode()


# --- streams ----------------------------------------------------------------------------------


def stream_of(
    response: dict[str, Any], seed: int = 0, streamed_args: bool = False
) -> list[SSEEvent]:
    """The SSE chunks streamGenerateContent would send for a one-candidate ``response``: text
    parts cut at random places, a part's signature on its first piece, the finish reason on
    the last chunk, the usage and ids on every chunk; with ``streamed_args``, function calls'
    arguments streamed as Vertex streams them (``streamed_call``)."""
    rng = random.Random(seed)
    (cand,) = response["candidates"]
    top = {k: v for k, v in response.items() if k != "candidates"}
    pieces: list[dict[str, Any]] = []
    for part in cand["content"]["parts"]:
        if streamed_args and "functionCall" in part:
            pieces += streamed_call(part, rng)
            continue
        if "text" not in part:
            pieces.append(part)
            continue
        for i, piece in enumerate(in_pieces(part["text"], rng, 9) or [""]):
            p: dict[str, Any] = {"text": piece}
            if part.get("thought"):
                p["thought"] = True
            if i == 0 and "thoughtSignature" in part:
                p["thoughtSignature"] = part["thoughtSignature"]
            pieces.append(p)
    events = []
    for i, p in enumerate(pieces):
        chunk: dict[str, Any] = {"content": {"role": "model", "parts": [p]}, "index": 0}
        if i == len(pieces) - 1:
            chunk["finishReason"] = cand["finishReason"]
            # Grounding (and anything else beside the content) comes with the last chunk.
            chunk.update({k: v for k, v in cand.items() if k not in ("content", "finishReason")})
        events.append(SSEEvent(None, json.dumps({"candidates": [chunk], **top})))
    return events


def same_fact(a: InferenceCall, b: InferenceCall) -> None:
    da, db = msgspec.to_builtins(a), msgspec.to_builtins(b)
    da.pop("raw"), db.pop("raw")
    assert da == db


RESPONSES = [
    resp({"text": "Hello, here is a fairly long answer to stream."}),
    resp(
        {"text": "**Plan**\nLook things up carefully.", "thought": True},
        {"text": "I will call the tools now.", "thoughtSignature": "c2lnbmF0dXJl"},
        call("get_weather", {"city": "Paris"}, thoughtSignature="b3RoZXI="),
        call("get_time", {"tz": "CET"}),
    ),
    resp({"text": "cut short"}, finish="MAX_TOKENS"),
    resp(
        {"text": "Let me compute."},
        {"executableCode": {"language": "PYTHON", "code": "print(2 + 2)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4\n"}},
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
        {"text": "It is 4."},
    ),
]
RESPONSES.append(
    {
        **RESPONSES[0],
        "candidates": [
            {
                **RESPONSES[0]["candidates"][0],
                "groundingMetadata": {
                    "webSearchQueries": ["q"],
                    "groundingChunks": [{"web": {"uri": "https://e.org", "title": "e.org"}}],
                },
            }
        ],
    }
)


@pytest.mark.parametrize("response", RESPONSES, ids=range(len(RESPONSES)))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streamed_equals_non_streamed(response: dict[str, Any], seed: int) -> None:
    request = req(user("q"), systemInstruction={"parts": [{"text": "sys"}]})
    plain = fact(request, response)
    streamed = fact(request, stream_of(response, seed))
    same_fact(plain, streamed)
    assert "truncated_stream" not in streamed.degradations


NESTED = {"path": "src/a.py", "edits": [{"line": 3, "text": "x = 'é'"}, {"line": 9, "ok": True}], "note": None, "odd key": {"it's": "q"}}  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vertex_streamed_call_arguments_fold_into_the_call(seed: int) -> None:
    response = resp(
        {"text": "Two edits."},
        call("edit", NESTED, "c1", thoughtSignature="c2ln"),
        call("get_time", {"tz": "CET"}),
    )
    plain = fact(None, response)
    streamed = fact(None, stream_of(response, seed, streamed_args=True))
    same_fact(plain, streamed)
    calls = [p for p in streamed.output_messages[0].parts if isinstance(p, ToolCallPart)]
    assert [(c.name, c.arguments) for c in calls] == [("edit", NESTED), ("get_time", {"tz": "CET"})]  # fmt: skip
    assert streamed.degradations == plain.degradations == {"opaque_reasoning": 1, "synthesized_id": 1}  # fmt: skip


def _no_empty(value: Any) -> bool:
    # partialArgs carry leaves only: an empty object or array cannot be streamed.
    if isinstance(value, dict):
        return bool(value) and all(_no_empty(v) for v in value.values())
    if isinstance(value, list):
        return bool(value) and all(_no_empty(v) for v in value)
    return True


_leaves = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=12)
# Not credential names: their values are redacted in the arguments and in a whole answer's raw,
# where a stream's raw names them only inside a path (tests/test_redact.py has those).
_names = st.text(min_size=1, max_size=6).filter(
    lambda k: k.rsplit(".", 1)[-1].lower().replace("-", "_") not in CREDENTIAL_KEYS
)
_args = st.dictionaries(
    _names,
    st.recursive(
        _leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=3),
        max_leaves=8,
    ),
    min_size=1,
    max_size=4,
).filter(_no_empty)


@given(_args, st.integers(0, 2**16))
def test_any_streamed_arguments_fold_back_whole(args: dict[str, Any], seed: int) -> None:
    response = resp(call("f", args, "c1"))
    same_fact(fact(None, response), fact(None, stream_of(response, seed, streamed_args=True)))


def test_a_cut_streamed_call_keeps_what_arrived_and_odd_paths_are_counted() -> None:
    response = resp(call("edit", NESTED, "c1"))
    events = stream_of(response, 0, streamed_args=True)
    cut = fact(None, events[:3])
    (part,) = cut.output_messages[0].parts
    assert isinstance(part, ToolCallPart) and part.name == "edit" and part.id == "c1"
    assert part.arguments and set(part.arguments) <= set(NESTED)
    assert cut.degradations == {"truncated_stream": 1}
    odd = [{"jsonPath": p, "stringValue": "v"} for p in ("location", "$.a[5]", "$..b", "$.c")]
    bad = [*odd, {"jsonPath": "$.c.d", "numberValue": 1}, {"jsonPath": "$.e", "stringValue": 3}]
    chunks = [
        {"functionCall": {"name": "f", "id": "c2", "willContinue": True}},
        {"functionCall": {"partialArgs": bad, "willContinue": True}},
        {"functionCall": {}},
    ]
    f = fact(None, [SSEEvent(None, json.dumps(resp(*chunks)))])
    (part,) = f.output_messages[0].parts
    assert isinstance(part, ToolCallPart) and part.arguments == {"c": "v"}
    assert f.degradations == {"malformed_arguments": 5}


def test_streamed_parts_that_are_not_a_list_are_counted_as_in_a_whole_response() -> None:
    """A chunk whose content's ``parts`` is an object (not the list Gemini sends) cannot be
    read: counted, as a whole response with such parts is."""
    odd = {"candidates": [{"content": {"role": "model", "parts": {"text": "lost"}}}]}
    good = resp({"text": "kept"})
    f = fact(None, [SSEEvent(None, json.dumps(odd)), SSEEvent(None, json.dumps(good))])
    assert [p.content for p in f.output_messages[0].parts] == ["kept"]  # type: ignore[union-attr]
    assert f.degradations == {"malformed_messages": 1}
    whole = fact(None, odd)
    assert whole.degradations["malformed_messages"] == 1


def test_corpus_thought_stream_joins_fragments_by_kind() -> None:
    body = (CORPUS / "gemini" / "thought_parts_streaming.response.sse").read_text()
    f = fact(None, list(iter_events(body)))
    parts = f.output_messages[0].parts
    assert [type(p) for p in parts] == [ReasoningPart, TextPart]
    assert parts[0].content.startswith("**Clarifying User Goals**")
    assert "**Crafting Safe Instructions**" in parts[0].content
    assert parts[1].content.startswith("This is a great question!")
    assert parts[1].content.endswith("might not see you.")
    assert f.degradations == {"opaque_reasoning": 1}
    assert (f.input_tokens, f.output_tokens) == (34, 469 + 787)


def test_streamed_raw_keeps_every_event() -> None:
    events = stream_of(RESPONSES[1])
    f = fact(None, events)
    assert f.raw["response"] == sse_text(events)
    assert list(iter_events(f.raw["response"])) == events


def test_truncated_stream_keeps_what_arrived() -> None:
    events = stream_of(RESPONSES[1])
    f = fact(None, events[:-1])
    parts = f.output_messages[0].parts
    assert isinstance(parts[0], ReasoningPart) and isinstance(parts[-1], ToolCallPart)
    assert parts[-1].name == "get_weather"
    assert f.output_messages[0].finish_reason is None
    assert f.degradations["truncated_stream"] == 1


def test_error_chunk_mid_stream_and_alone() -> None:
    err = SSEEvent(None, json.dumps({"error": {"code": 500, "message": "internal"}}))
    f = fact(None, [*stream_of(RESPONSES[0])[:2], err])
    assert f.output_messages[0].finish_reason == "error"
    assert f.degradations == {"truncated_stream": 1}
    skip = gemini.translate(req(user("q")), [err])
    assert isinstance(skip, Skip) and skip.reason == "error_response"


def test_json_array_stream_of_chunk_objects() -> None:
    chunks = [json.loads(e.data) for e in stream_of(RESPONSES[0])]
    same_fact(fact(None, RESPONSES[0]), fact(None, chunks))


_SHORTHAND = re.compile(r"[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*", re.ASCII)


def _arg_pieces(value: Any, path: str, rng: random.Random) -> list[dict[str, Any]]:
    """``partialArgs`` entries that stream ``value`` at ``path`` as Vertex does: a string cut in
    pieces, every other leaf whole (names as ``.name`` or quoted, array elements by index)."""
    if isinstance(value, dict):
        out: list[dict[str, Any]] = []
        for k, v in value.items():
            quoted = k.replace("\\", "\\\\").replace("'", "\\'")
            step = f".{k}" if _SHORTHAND.fullmatch(k) else f"['{quoted}']"
            out += _arg_pieces(v, path + step, rng)
        return out
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _arg_pieces(v, f"{path}[{i}]", rng)]
    if isinstance(value, str):
        return [{"jsonPath": path, "stringValue": s} for s in in_pieces(value, rng, 9) or [""]]
    if value is None:
        return [{"jsonPath": path, "nullValue": "NULL_VALUE"}]
    key = "boolValue" if isinstance(value, bool) else "numberValue"
    return [{"jsonPath": path, key: value}]


def streamed_call(part: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """A function-call part as Vertex streams it with ``streamFunctionCallArguments``: its name
    (and id, signature) first, its arguments' pieces a few at a time, then an empty call."""
    fc = part["functionCall"]
    head = {k: v for k, v in fc.items() if k != "args"}
    first = {**{k: v for k, v in part.items() if k != "functionCall"}, "functionCall": {**head, "willContinue": True}}  # fmt: skip
    pieces = _arg_pieces(fc["args"], "$", rng)
    out = [first]
    while pieces:
        n = rng.randint(1, 3)
        out.append({"functionCall": {"partialArgs": pieces[:n], "willContinue": True}})
        pieces = pieces[n:]
    return [*out, {"functionCall": {}}]


def _cut_points(body: str) -> list[int]:
    """Every line boundary, and every 11th character (cuts inside JSON and inside lines)."""
    lines = {i + 1 for i, ch in enumerate(body) if ch == "\n"}
    return sorted(lines | set(range(0, len(body), 11)) | {len(body)})


@pytest.mark.parametrize("path", SSE_FILES, ids=lambda p: p.name)
def test_corpus_streams_cut_anywhere_never_raise(path: Any) -> None:
    body = path.read_text()
    assert isinstance(provider.translate_exchange(None, body), InferenceCall)
    last_data = body.rstrip().rfind("data:")
    for cut in _cut_points(body):
        result = provider.translate_exchange(None, body[:cut], fmt="gemini")
        assert isinstance(result, InferenceCall | Skip)
        if isinstance(result, InferenceCall):
            assert_valid_messages(result)
            if cut < last_data:
                assert result.degradations.get("truncated_stream") == 1, cut


# --- detection --------------------------------------------------------------------------------


def test_detection() -> None:
    assert gemini.looks_like_request(req(user("q")))
    assert gemini.looks_like_request({"system_instruction": {"parts": [{"text": "s"}]}})
    assert not gemini.looks_like_request(
        {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    )
    assert not gemini.looks_like_request({"model": "m", "input": "q"})
    assert gemini.looks_like_response(resp({"text": "a"}))
    assert gemini.looks_like_response({"promptFeedback": {"blockReason": "SAFETY"}})
    assert not gemini.looks_like_response({"type": "message", "content": []})
    assert not gemini.looks_like_response({"choices": []})
    assert gemini.looks_like_stream(stream_of(RESPONSES[0]))
    anthropic_evt = SSEEvent("message_start", json.dumps({"type": "message_start", "message": {}}))
    assert not gemini.looks_like_stream([anthropic_evt])


def test_provider_dispatch_picks_gemini_for_corpus_files() -> None:
    for path in sorted((CORPUS / "gemini").iterdir()):
        body: Any = path.read_text()
        if path.suffix == ".json":
            body = orjson.loads(body)
            is_req = path.name.endswith(".request.json")
            result = provider.translate_exchange(body if is_req else None, None if is_req else body)
        else:
            result = provider.translate_exchange(None, body)
        assert isinstance(result, InferenceCall) and result.source.name == "gemini", path


def test_corpus_pair_ids_line_up_across_calls() -> None:
    """vertex_parallel_function_call's answer is replayed as the history of
    vertex_function_response_roundtrip: the synthesized ids must agree."""
    g = CORPUS / "gemini"
    first = fact(
        orjson.loads((g / "vertex_parallel_function_call.request.json").read_bytes()),
        orjson.loads((g / "vertex_parallel_function_call.response.json").read_bytes()),
    )
    second = fact(
        orjson.loads((g / "vertex_function_response_roundtrip.request.json").read_bytes()),
        orjson.loads((g / "vertex_function_response_roundtrip.response.json").read_bytes()),
    )
    out_ids = [p.id for p in first.output_messages[0].parts]
    assert [p.id for p in second.input_messages[1].parts] == out_ids
    assert [m.parts[0].id for m in second.input_messages[2:]] == out_ids
    # The documented formula: the source, the call's name, its arguments, its ordinal.
    calls = [p["functionCall"] for p in first.raw["response"]["candidates"][0]["content"]["parts"]]
    assert out_ids == [
        synthesized_call_id("gemini", c["name"], c["args"], i) for i, c in enumerate(calls)
    ]


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
parts = st.fixed_dictionaries(
    {},
    optional={
        "text": json_values,
        "thought": json_values,
        "thoughtSignature": json_values,
        "functionCall": st.fixed_dictionaries(
            {}, optional={"name": json_values, "args": json_values, "id": json_values}
        ),
        "functionResponse": st.fixed_dictionaries(
            {},
            optional={
                "name": json_values,
                "response": json_values,
                "id": json_values,
                "parts": json_values,
            },
        ),
        "inlineData": json_values
        | st.fixed_dictionaries(
            {"data": st.sampled_from(["iVBORw0KGgo=", "iVBO-_w", "not base64!"]) | json_values},
            optional={"mimeType": json_values},
        ),
        "fileData": json_values,
        "executableCode": json_values,
        "codeExecutionResult": json_values,
    },
)
contents = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "model", "function"]) | json_values,
        "parts": st.lists(parts, max_size=4) | json_values,
    }
)
requests = st.fixed_dictionaries(
    {"contents": st.lists(contents, max_size=4) | json_values},
    optional={
        "systemInstruction": json_values,
        "tools": json_values,
        "generationConfig": json_values,
    },
)
candidates = st.fixed_dictionaries(
    {
        "content": st.fixed_dictionaries({"parts": st.lists(parts, max_size=4) | json_values})
        | json_values
    },
    optional={
        "index": json_values,
        "finishReason": json_values,
        "groundingMetadata": json_values,
        "urlContextMetadata": json_values,
        "citationMetadata": json_values | st.fixed_dictionaries({"citations": json_values}),
    },
)
responses = st.fixed_dictionaries(
    {"candidates": st.lists(candidates, max_size=3) | json_values},
    optional={"usageMetadata": json_values, "responseId": json_values, "modelVersion": json_values},
)


def _check(result: Any) -> None:
    assert isinstance(result, InferenceCall | Skip)
    if isinstance(result, InferenceCall):
        assert_valid_messages(result)
        msgspec.json.encode(result)


@given(json_values, json_values)
def test_arbitrary_json_never_raises(request: Any, response: Any) -> None:
    _check(gemini.translate(request, response))


@given(requests, responses)
def test_shaped_json_never_raises(request: Any, response: Any) -> None:
    _check(gemini.translate(request, response))


@given(requests, st.lists(responses, max_size=4))
def test_shaped_chunks_never_raise(request: Any, chunks: list[Any]) -> None:
    _check(gemini.translate(request, [SSEEvent(None, json.dumps(c)) for c in chunks]))


@given(st.sampled_from(RESPONSES), st.randoms(use_true_random=False), st.data())
def test_shuffled_and_dropped_chunks_never_raise(
    response: Any, rng: random.Random, data: Any
) -> None:
    events = stream_of(response, rng.randint(0, 9))
    rng.shuffle(events)
    events = events[: data.draw(st.integers(0, len(events)))]
    _check(gemini.translate(None, events))


@given(json_values)
def test_schema_conversion_never_raises(schema: Any) -> None:
    gemini.json_schema(schema)


@given(st.sampled_from(SSE_FILES), st.floats(0, 1))
def test_corpus_streams_cut_at_any_character_never_raise(path: Any, where: float) -> None:
    body = path.read_text()
    _check(gemini.translate(None, list(iter_events(body[: int(len(body) * where)]))))


def test_no_other_corpus_file_looks_gemini() -> None:
    for path in sorted(CORPUS.rglob("*")):
        if not path.is_file() or path.name == "SOURCES.md" or path.parent.name == "gemini":
            continue
        if path.suffix == ".sse":
            assert not gemini.looks_like_stream(list(iter_events(path.read_text()))), path
            continue
        lines = path.read_bytes().splitlines() if path.suffix == ".jsonl" else [path.read_bytes()]
        for line in lines:
            doc = orjson.loads(line)
            for d in doc if isinstance(doc, list) else [doc]:
                if isinstance(d, dict):
                    assert not gemini.looks_like_request(d), path
                    assert not gemini.looks_like_response(d), path


# A conversation an agent loop replays: each model turn (calls without ids, text, thoughts) is a
# response, then part of every later request's history, under a system instruction that changes
# every turn (Google ADK appends the artifacts it holds).
call_args = st.dictionaries(
    st.sampled_from(["city", "q", "n"]), st.integers(0, 3) | st.text(max_size=3)
)
model_parts = st.lists(
    st.one_of(
        st.builds(call, st.sampled_from(["get_weather", "search", "noop"]), call_args),
        st.builds(lambda t: {"text": t}, st.text(min_size=1, max_size=5)),
        st.builds(lambda t: {"text": t, "thought": True}, st.text(min_size=1, max_size=5)),
    ),
    min_size=1,
    max_size=4,
)


def _model_calls(message: Message) -> list[ToolCallPart]:
    return [p for p in message.parts if isinstance(p, ToolCallPart)]


@given(st.lists(model_parts, min_size=1, max_size=4), st.integers(0, 9))
def test_synthesized_ids_survive_every_replay(rounds: list[list[Any]], seed: int) -> None:
    contents: list[dict[str, Any]] = [user("go")]
    ids_by_turn: list[list[str]] = []  # each model turn's call ids, as its response gave them
    for r, model in enumerate(rounds):
        request = req(*contents, systemInstruction={"parts": [{"text": f"artifacts: {r}"}]})
        plain = fact(request, resp(*model))
        ids = [c.id for c in _model_calls(plain.output_messages[0])]
        streamed = fact(request, stream_of(resp(*model), seed))
        assert [c.id for c in _model_calls(streamed.output_messages[0])] == ids
        ids_by_turn.append(ids)
        contents.append(turn("model", *model))
        results = [
            answer(p["functionCall"]["name"], {"r": r}) for p in model if "functionCall" in p
        ]
        contents.append(turn("user", *results) if results else user("next"))
    history = fact(req(*contents, systemInstruction="changed again"))
    assistant = [m for m in history.input_messages if m.role == "assistant"]
    assert [[c.id for c in _model_calls(m)] for m in assistant] == ids_by_turn
    # Every result links to the call of its own turn, in order.
    answered = [m.parts[0].id for m in history.input_messages if m.role == "tool"]
    assert answered == [i for ids in ids_by_turn for i in ids]
    assert "orphan_tool_response" not in history.degradations
