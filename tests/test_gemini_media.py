"""Gemini media, code execution and grounding (issue 16): in requests, responses and streams, in
both spellings, and across a replay."""

from __future__ import annotations

import base64
import hashlib
from itertools import pairwise
from typing import Any

import msgspec
import orjson
from hypothesis import given
from hypothesis import strategies as st

from lithify.derive.segments import segment_session
from lithify.model import (
    BlobPart,
    InferenceCall,
    Message,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    TextPart,
    ToolCallResponsePart,
    UriPart,
)
from lithify.translate import gemini, translate_document
from lithify.translate.sse import SSEEvent
from tests.conftest import CORPUS, RECORDED
from tests.helpers import assert_valid_messages
from tests.test_gemini import answer, call, fact, req, resp, stream_of, turn, user

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xfb\xff"
PNG64 = base64.b64encode(PNG).decode()


def blob(raw: bytes, mime: str | None, modality: str) -> BlobPart:
    return BlobPart(
        modality=modality,
        mime_type=mime,
        size=len(raw),
        sha256=hashlib.sha256(raw).hexdigest(),
        content=base64.b64encode(raw).decode(),
    )


def inline(data: str = PNG64, mime: str = "image/png") -> dict[str, Any]:
    return {"inlineData": {"mimeType": mime, "data": data}}


# --- media ------------------------------------------------------------------------------------


def test_inline_data_is_a_blob_and_file_data_a_uri() -> None:
    pdf = b"%PDF-1.7 tiny"
    f = fact(
        req(
            turn(
                "user",
                {"text": "look"},
                inline(),
                inline(base64.b64encode(pdf).decode(), "application/pdf"),
                {"fileData": {"mimeType": "video/mp4", "fileUri": "gs://bucket/clip.mp4"}},
                {
                    "fileData": {
                        "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc"
                    }
                },
                {"inlineData": {"mimeType": "audio/wav", "data": "UklGRg=="}},
            )
        )
    )
    assert f.input_messages[0].parts == [
        TextPart("look"),
        blob(PNG, "image/png", "image"),
        blob(pdf, "application/pdf", "document"),
        UriPart(modality="video", mime_type="video/mp4", uri="gs://bucket/clip.mp4"),
        UriPart(
            modality="document",
            mime_type=None,
            uri="https://generativelanguage.googleapis.com/v1beta/files/abc",
        ),
        blob(b"RIFF", "audio/wav", "audio"),
    ]
    assert f.degradations == {"content_reference": 2}


def test_url_safe_base64_and_bad_base64() -> None:
    safe = base64.urlsafe_b64encode(PNG).decode().rstrip("=")
    assert "-" in safe or "_" in safe
    f = fact(req(turn("user", inline(safe), inline("not base64!"), {"inlineData": {"data": 7}})))
    assert f.input_messages[0].parts == [blob(PNG, "image/png", "image")]
    assert f.degradations == {"malformed_media": 2}


def test_snake_case_media_is_the_same_fact() -> None:
    camel = req(
        turn(
            "user",
            inline(),
            {"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://b/x.jpg"}},
            {"videoMetadata": {"startOffset": "1s"}, "fileData": {"fileUri": "gs://b/v.mp4"}},
        )
    )
    snake = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"inline_data": {"mime_type": "image/png", "data": PNG64}},
                    {"file_data": {"mime_type": "image/jpeg", "file_uri": "gs://b/x.jpg"}},
                    {"video_metadata": {"start_offset": "1s"}, "file_data": {"file_uri": "gs://b/v.mp4"}},
                ],
            }
        ]
    }  # fmt: skip
    a, b = fact(camel), fact(snake)
    assert a.input_messages == b.input_messages
    assert a.degradations == b.degradations == {"content_reference": 2}


def test_corpus_multimodal_request() -> None:
    doc = orjson.loads((CORPUS / "gemini/vertex_multimodal_filedata_inlinedata.request.json").read_bytes())  # fmt: skip
    f = fact(doc)
    _, uri, img = f.input_messages[0].parts
    assert isinstance(uri, UriPart) and uri.mime_type == "image/jpeg" and uri.modality == "image"
    assert isinstance(img, BlobPart) and img.modality == "image"
    raw = base64.b64decode(doc["contents"][0]["parts"][2]["inlineData"]["data"])
    assert raw.startswith(b"\x89PNG") and img.size == len(raw)
    assert img.sha256 == hashlib.sha256(raw).hexdigest()
    assert f.degradations == {"content_reference": 1}


def test_media_a_function_returned_follows_its_result() -> None:
    shot = {"inlineData": {"mimeType": "image/png", "data": PNG64, "displayName": "shot.png"}}
    r = req(
        user("Take a screenshot."),
        turn("model", call("screenshot", {}, "c1")),
        turn(
            "user",
            {
                "functionResponse": {
                    "id": "c1",
                    "name": "screenshot",
                    "response": {"ok": True},
                    "parts": [shot, {"fileData": {"mimeType": "image/png", "fileUri": "gs://b/s.png"}}],
                }
            },
            {"text": "Go on."},
        ),
    )  # fmt: skip
    f = fact(r)
    assert f.input_messages[2:] == [
        Message(
            "tool",
            [
                ToolCallResponsePart("c1", {"ok": True}),
                blob(PNG, "image/png", "image"),
                UriPart(modality="image", mime_type="image/png", uri="gs://b/s.png"),
            ],
        ),
        Message("user", [TextPart("Go on.")]),
    ]
    assert f.degradations == {"content_reference": 1}


def test_media_in_the_system_instruction_is_kept() -> None:
    f = fact(req(user("q"), systemInstruction={"parts": [{"text": "sys"}, inline()]}))
    assert f.input_messages[0] == Message("system", [TextPart("sys"), blob(PNG, "image/png", "image")])  # fmt: skip


# --- code execution ---------------------------------------------------------------------------

CODE = {"executableCode": {"language": "PYTHON", "code": "print(sum(range(1, 51)))"}}
RESULT = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1275\n"}}
CODE_CALL = ServerToolCallPart(
    None,
    "code_execution",
    {"type": "executable_code", "language": "PYTHON", "code": "print(sum(range(1, 51)))"},
)
CODE_RESULT = ServerToolCallResponsePart(
    None, {"type": "code_execution_result", "outcome": "OUTCOME_OK", "output": "1275\n"}
)


def test_code_execution_is_a_server_tool_in_part_order() -> None:
    f = fact(
        req(user("Sum 1..50"), tools=[{"codeExecution": {}}]),
        resp({"text": "I'll compute it."}, CODE, RESULT, {"text": "The sum is 1275."}),
    )
    assert f.output_messages == [
        Message(
            "assistant",
            [TextPart("I'll compute it."), CODE_CALL, CODE_RESULT, TextPart("The sum is 1275.")],
            "stop",
        )
    ]
    # The built-in tool in the request is still counted as a tool that is not a function.
    assert f.degradations == {}  # the built-in tool is kept (ToolDefinition.builtin)


def test_code_execution_ids_are_kept_and_snake_case_is_the_same() -> None:
    with_ids = resp(
        {"executableCode": {**CODE["executableCode"], "id": "x1"}},
        {"codeExecutionResult": {**RESULT["codeExecutionResult"], "id": "x1"}},
    )
    parts = fact(None, with_ids).output_messages[0].parts
    assert [p.id for p in parts] == ["x1", "x1"]  # type: ignore[union-attr]
    snake = resp({"executable_code": CODE["executableCode"]}, {"code_execution_result": RESULT["codeExecutionResult"]})  # fmt: skip
    assert fact(None, snake).output_messages[0].parts == [CODE_CALL, CODE_RESULT]


# --- grounding --------------------------------------------------------------------------------

GROUNDING = {
    "webSearchQueries": ["UEFA Euro 2024 winner"],
    "searchEntryPoint": {"renderedContent": "<div>Euro 2024</div>"},
    "groundingChunks": [
        {
            "web": {
                "uri": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC",
                "title": "uefa.com",
            }
        }
    ],
    "groundingSupports": [
        {
            "segment": {"startIndex": 0, "endIndex": 25, "text": "Spain won Euro 2024."},
            "groundingChunkIndices": [0],
            "confidenceScores": [0.97],
        }
    ],
}
GROUNDING_SNAKE = {
    "web_search_queries": ["UEFA Euro 2024 winner"],
    "search_entry_point": {"rendered_content": "<div>Euro 2024</div>"},
    "grounding_chunks": GROUNDING["groundingChunks"],
    "grounding_supports": [
        {
            "segment": {"start_index": 0, "end_index": 25, "text": "Spain won Euro 2024."},
            "grounding_chunk_indices": [0],
            "confidence_scores": [0.97],
        }
    ],
}


def grounded(metadata: dict[str, Any], key: str = "groundingMetadata") -> dict[str, Any]:
    r = resp({"text": "Spain won Euro 2024."})
    r["candidates"][0][key] = metadata
    return r


def test_grounding_is_a_search_before_the_answer() -> None:
    f = fact(req(user("Who won Euro 2024?"), tools=[{"googleSearch": {}}]), grounded(GROUNDING))
    assert f.output_messages[0].parts == [
        ServerToolCallPart(
            None,
            "google_search",
            {"type": "google_search", "webSearchQueries": ["UEFA Euro 2024 winner"]},
        ),
        ServerToolCallResponsePart(None, {"type": "grounding_metadata", **GROUNDING}),
        TextPart("Spain won Euro 2024."),
    ]
    assert f.degradations == {}  # the built-in tool is kept (ToolDefinition.builtin)


def test_grounding_in_snake_case_and_streamed_is_the_same() -> None:
    plain = fact(None, grounded(GROUNDING))
    snake = fact(None, grounded(GROUNDING_SNAKE, "grounding_metadata"))
    assert snake.output_messages == plain.output_messages
    for seed in range(3):
        streamed = fact(None, stream_of(grounded(GROUNDING), seed))
        assert streamed.output_messages == plain.output_messages


def test_empty_grounding_gives_nothing_and_retrieval_is_named() -> None:
    assert fact(None, grounded({})).output_messages[0].parts == [TextPart("Spain won Euro 2024.")]
    parts = fact(None, grounded({"retrievalQueries": ["q"]})).output_messages[0].parts
    assert parts[0] == ServerToolCallPart(None, "retrieval", {"type": "retrieval", "retrievalQueries": ["q"]})  # fmt: skip


# --- call N's output is its replay in call N+1's input --------------------------------------


def next_request(first: InferenceCall, *more: dict[str, Any]) -> dict[str, Any]:
    """The next call's request, as the SDK's chat builds it: the history, then the candidate's
    content, then what is new."""
    response = first.raw["response"]
    content = response["candidates"][0]["content"]
    return {"contents": [*first.raw["request"]["contents"], content, *more]}


def test_code_execution_and_media_replay_exactly() -> None:
    first = fact(
        req(turn("user", {"text": "Plot it."}, inline())),
        resp({"text": "Plotting."}, CODE, RESULT, inline(mime="image/png"), {"text": "Done."}),
    )
    second = fact(next_request(first, user("Thanks.")))
    n = len(first.input_messages)
    assert second.input_messages[:n] == first.input_messages
    assert second.input_messages[n] == Message("assistant", first.output_messages[0].parts)
    assert second.degradations == {}


def test_grounding_is_not_replayed_by_clients() -> None:
    """A client sends back the candidate's content, and grounding is not in it: the replayed
    turn is the answer without its search (docs/sources/anthropic-gemini.md, Grounding)."""
    first = fact(req(user("Who won Euro 2024?")), grounded(GROUNDING))
    second = fact(next_request(first, user("And 2020?")))
    replayed = second.input_messages[1]
    assert replayed.parts == [p for p in first.output_messages[0].parts if isinstance(p, TextPart)]


_parts = st.one_of(
    st.text(min_size=1, max_size=8).map(lambda t: {"text": t}),
    st.binary(min_size=1, max_size=12).map(lambda b: inline(base64.b64encode(b).decode())),
    st.sampled_from(["gs://b/1.png", "gs://b/2.pdf"]).map(lambda u: {"fileData": {"fileUri": u}}),
    st.text(max_size=12).map(lambda c: {"executableCode": {"language": "PYTHON", "code": c}}),
    st.text(max_size=12).map(
        lambda o: {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": o}}
    ),
    st.sampled_from(["f", "g"]).map(lambda n: call(n, {"a": 1})),
)


@given(st.lists(_parts, min_size=1, max_size=6), st.integers(0, 9))
def test_every_answer_replays_as_itself(parts: list[dict[str, Any]], seed: int) -> None:
    """Whatever a candidate holds, streamed or not, the next call's history holds it again."""
    request = req(turn("user", {"text": "q"}, inline()))
    response = resp(*parts)
    first = fact(request, response)
    streamed = fact(request, stream_of(response, seed))
    # A stream joins adjacent text fragments; the plain answer may hold two texts in a row.
    if not any("text" in a and "text" in b for a, b in pairwise(parts)):
        assert streamed.output_messages == first.output_messages
    names = [p["functionCall"]["name"] for p in parts if "functionCall" in p]
    results = [answer(n, {"ok": True}) for n in names]
    second = fact(next_request(first, *([turn("user", *results)] if results else [])))
    n = len(first.input_messages)
    assert second.input_messages[:n] == first.input_messages
    assert second.input_messages[n] == Message("assistant", first.output_messages[0].parts)
    assert "unsupported_content" not in first.degradations
    assert gemini.translate(first.raw["request"], first.raw["response"]) == first
    assert msgspec.json.decode(msgspec.json.encode(first), type=InferenceCall) == first


# --- recorded with the google-genai SDK (tests/recorded/anthropic_gemini_media.py) ------------


def recorded(name: str) -> InferenceCall:
    doc = orjson.loads((RECORDED / "gemini" / f"{name}.exchange.json").read_bytes())
    (result,) = translate_document(doc)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def test_recorded_inline_image_plain_and_streamed() -> None:
    plain, streamed = recorded("image_input"), recorded("image_input_streaming")
    # The SDK writes `inlineData` with a snake_case `mime_type` inside: both spellings are read.
    assert "mime_type" in plain.raw["request"]["contents"][0]["parts"][1]["inlineData"]
    assert plain.input_messages == streamed.input_messages
    _, png, uri = plain.input_messages[0].parts
    assert isinstance(png, BlobPart) and (png.mime_type, png.size) == ("image/png", 73)
    assert uri == UriPart(modality="image", mime_type="image/png", uri="gs://lithify-test/example.png")  # fmt: skip
    assert plain.degradations == {"content_reference": 1}


def test_recorded_code_execution_plain_streamed_and_replayed() -> None:
    plain, streamed = recorded("code_execution"), recorded("code_execution_streaming")
    assert msgspec.structs.replace(plain, raw=None) == msgspec.structs.replace(streamed, raw=None)
    kinds = [type(p).__name__ for p in plain.output_messages[0].parts]
    assert kinds == ["TextPart", "ServerToolCallPart", "ServerToolCallResponsePart", "TextPart"]
    replay = recorded("code_execution_replay")
    assert replay.input_messages[1] == Message("assistant", plain.output_messages[0].parts)
    # The code execution tool in the request is a built-in, not a function declaration.
    assert plain.degradations == replay.degradations == {}
    assert [(t.name, t.builtin) for t in plain.tools] == [("code_execution", {"codeExecution": {}})]


def test_recorded_grounded_answer() -> None:
    f = recorded("google_search")
    call_, response, answer_ = f.output_messages[0].parts
    assert isinstance(call_, ServerToolCallPart) and call_.name == "google_search"
    assert call_.server_tool_call["webSearchQueries"] == ["UEFA Euro 2024 winner"]
    assert isinstance(response, ServerToolCallResponsePart)
    assert response.server_tool_call_response["groundingChunks"][0]["web"]["title"] == "uefa.com"
    assert answer_ == TextPart("Spain won Euro 2024, beating England 2-1.")


def _in_session(request: Any, response: Any, second: int) -> InferenceCall:
    at = f"2026-01-01T00:00:0{second}.000000000Z"
    result = gemini.translate(request, response, meta={"session_id": "s", "observed_at": at})
    assert isinstance(result, InferenceCall)
    return result


def test_code_execution_continues_a_segment_and_grounding_starts_one() -> None:
    """What the docs say of replays, as derivation sees it."""
    docs = [orjson.loads((RECORDED / "gemini" / f"{n}.exchange.json").read_bytes()) for n in ("code_execution", "code_execution_replay")]  # fmt: skip
    calls = [_in_session(d["request"], d["response"], i) for i, d in enumerate(docs, 1)]
    (segment,) = segment_session("s", calls)
    assert len(segment.turns) == 2
    grounded_doc = orjson.loads((RECORDED / "gemini" / "google_search.exchange.json").read_bytes())
    first = _in_session(grounded_doc["request"], grounded_doc["response"], 1)
    second = _in_session(next_request(first, user("And 2020?")), resp({"text": "Italy."}), 2)
    segments = segment_session("s", [first, second])
    assert [s.split_reason for s in segments] == [None, "prior_output_not_replayed"]


def test_built_in_tool_calls_and_responses_are_server_tools() -> None:
    call_ = {"toolCall": {"id": "t1", "toolType": "GOOGLE_SEARCH_WEB", "args": {"query": "q"}}}
    done = {"tool_response": {"id": "t1", "tool_type": "GOOGLE_SEARCH_WEB", "response": {"r": 1}}}
    f = fact(None, resp(call_, done, {"text": "a"}))
    assert f.output_messages[0].parts == [
        ServerToolCallPart("t1", "google_search_web", {"type": "tool_call", **call_["toolCall"]}),
        ServerToolCallResponsePart(
            "t1",
            {
                "type": "tool_response",
                "id": "t1",
                "toolType": "GOOGLE_SEARCH_WEB",
                "response": {"r": 1},
            },
        ),
        TextPart("a"),
    ]
    assert f.degradations == {}


URL_CONTEXT = {
    "urlMetadata": [
        {"retrievedUrl": "https://ai.google.dev/", "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS"},
        {"retrievedUrl": "https://x.invalid/", "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_ERROR"},
    ]
}  # fmt: skip
CITATION = {"startIndex": 0, "endIndex": 9, "uri": "https://e.org/a", "license": "mit"}


def test_url_context_is_a_server_tool_and_citations_are_counted() -> None:
    r = grounded(URL_CONTEXT, "urlContextMetadata")
    r["candidates"][0]["citationMetadata"] = {"citations": [CITATION, CITATION]}
    f = fact(None, r)
    assert f.output_messages[0].parts == [
        ServerToolCallPart(
            None,
            "url_context",
            {"type": "url_context", "urls": ["https://ai.google.dev/", "https://x.invalid/"]},
        ),
        ServerToolCallResponsePart(None, {"type": "url_context_metadata", **URL_CONTEXT}),
        TextPart("Spain won Euro 2024."),
    ]
    assert f.degradations == {"text_citation": 2}
    # The Gemini API names them citationSources.
    r["candidates"][0]["citationMetadata"] = {"citationSources": [CITATION]}
    assert fact(None, r).degradations == {"text_citation": 1}


def test_streamed_citations_add_up_and_url_context_is_merged() -> None:
    plain = grounded(URL_CONTEXT, "url_context_metadata")
    plain["candidates"][0]["citationMetadata"] = {"citations": [CITATION, {**CITATION, "startIndex": 10}]}  # fmt: skip
    chunks = [
        {
            "candidates": [
                {
                    "index": 0,
                    "content": {"role": "model", "parts": [{"text": "Spain won "}]},
                    "citationMetadata": {"citations": [CITATION]},
                }
            ]
        },
        {
            "candidates": [
                {
                    "index": 0,
                    "content": {"role": "model", "parts": [{"text": "Euro 2024."}]},
                    "citationMetadata": {"citations": [{**CITATION, "startIndex": 10}]},
                    "urlContextMetadata": URL_CONTEXT,
                    "finishReason": "STOP",
                }
            ],
            **{k: v for k, v in plain.items() if k != "candidates"},
        },
    ]
    streamed = fact(None, [SSEEvent(None, orjson.dumps(c).decode()) for c in chunks])
    expected = fact(None, plain)
    assert streamed.output_messages == expected.output_messages
    assert streamed.degradations == expected.degradations == {"text_citation": 2}


# --- spoken answers, thought images -----------------------------------------------------------

# What Gemini's TTS and native-audio models return: raw 16-bit PCM at 24 kHz, no container.
PCM = "audio/L16;codec=pcm;rate=24000"
SPOKEN = b"\x00\x01\xfe\xff" * 24


def spoken(
    data: bytes, words: str | None = None, mime: str = PCM, **transcription: Any
) -> dict[str, Any]:
    part: dict[str, Any] = inline(base64.b64encode(data).decode(), mime)
    if words is not None:
        part["audioTranscription"] = {"text": words, **transcription}
    return part


def tts(*parts: Any, finish: str | None = "STOP") -> dict[str, Any]:
    """A response or stream chunk of a TTS model, as generateContent sends it."""
    cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        cand["finishReason"] = finish
    return {
        "candidates": [cand],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 40},
        "modelVersion": "gemini-2.5-flash-preview-tts",
        "responseId": "tts-1",
    }


def chunked(*chunks: list[dict[str, Any]]) -> list[SSEEvent]:
    """streamGenerateContent's SSE events, one chunk's parts each; the last one finishes."""
    last = len(chunks) - 1
    return [
        SSEEvent(None, orjson.dumps(tts(*c, finish="STOP" if i == last else None)).decode())
        for i, c in enumerate(chunks)
    ]


def test_audio_transcription_is_text_before_its_blob_also_alone() -> None:
    """``Part.audioTranscription`` (google-genai ``Transcription``, "the transcription of the
    audio part"): its words lead the audio, as Chat's ``message.audio.transcript`` does."""
    f = fact(
        None,
        tts(
            spoken(SPOKEN, "Sure, the meeting is at noon.", finished=True),
            {"audioTranscription": {"text": " See you there."}},
            {"audioTranscription": {"finished": True}},
        ),
    )
    assert f.output_messages == [
        Message(
            "assistant",
            [
                TextPart("Sure, the meeting is at noon."),
                blob(SPOKEN, PCM, "audio"),
                TextPart(" See you there."),
            ],
            "stop",
        )
    ]
    assert f.degradations == {}
    snake = {
        "inline_data": {"mime_type": PCM, "data": base64.b64encode(SPOKEN).decode()},
        "audio_transcription": {"text": "Sure, the meeting is at noon."},
    }
    assert fact(None, tts(snake)).output_messages[0].parts == f.output_messages[0].parts[:2]


@given(
    st.binary(max_size=64),
    st.text(max_size=24),
    st.lists(st.integers(0, 64), max_size=6),
    st.lists(st.integers(0, 24), max_size=6),
    st.sampled_from([PCM, "audio/pcm;rate=16000", "audio/L16; rate=24000; channels=1"]),
    st.booleans(),
)
def test_any_split_of_streamed_audio_folds_back_to_the_whole(
    sound: bytes,
    words: str,
    cuts: list[int],
    word_cuts: list[int],
    mime: str,
    urlsafe: bool,
) -> None:
    """However the bytes and the transcript are cut into chunks (a piece of each per chunk, or
    none), the stream gives the whole response's fact: one transcript, one blob."""
    at = sorted({min(c, len(sound)) for c in cuts} | {0, len(sound)})
    slices = [sound[a:b] for a, b in pairwise(at)] or [b""]
    wat = sorted({min(c, len(words)) for c in word_cuts} | {0, len(words)})
    said = [words[a:b] for a, b in pairwise(wat)]
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    chunks: list[list[dict[str, Any]]] = []
    for i in range(max(len(slices), len(said))):
        part: dict[str, Any] = {}
        if i < len(slices):
            part["inlineData"] = {"mimeType": mime, "data": encode(slices[i]).decode()}
        if i < len(said):
            part["audioTranscription"] = {"text": said[i]}
        chunks.append([part])
    whole_part: dict[str, Any] = inline(base64.b64encode(sound).decode(), mime)
    if said:
        whole_part["audioTranscription"] = {"text": words}
    whole, streamed = fact(None, tts(whole_part)), fact(None, chunked(*chunks))
    assert streamed.output_messages == whole.output_messages
    assert streamed.output_messages[0].parts == [
        *([TextPart(words)] if words else []),
        blob(sound, mime, "audio"),
    ]
    assert streamed.degradations == whole.degradations == {}


def test_streamed_audio_joins_only_slices_of_one_raw_sound() -> None:
    """Containers (WAV: a header per piece) and another rate are not one sound; a thought
    image between slices ends the run; a slice that does not decode is read alone, counted."""
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt "
    f = fact(
        None,
        chunked(
            [spoken(b"\x01\x02", "One")],
            [spoken(b"\x03\x04", " two")],
            [spoken(b"\x05\x06", mime="audio/L16;codec=pcm;rate=16000")],
            [spoken(wav, mime="audio/wav")],
            [spoken(wav, mime="audio/wav")],
            [inline(PNG64) | {"thought": True}],
            [spoken(b"\x07\x08")],
            [inline("not base64!", PCM)],
            [spoken(b"\x09\x0a")],
        ),
    )
    assert f.output_messages[0].parts == [
        TextPart("One two"),
        blob(b"\x01\x02\x03\x04", PCM, "audio"),
        blob(b"\x05\x06", "audio/L16;codec=pcm;rate=16000", "audio"),
        blob(wav, "audio/wav", "audio"),
        blob(wav, "audio/wav", "audio"),
        blob(b"\x07\x08", PCM, "audio"),
        blob(b"\x09\x0a", PCM, "audio"),
    ]
    assert f.degradations == {"malformed_media": 1, "opaque_reasoning": 1}


def test_streamed_audio_keeps_its_signature_and_two_signatures_keep_slices_apart() -> None:
    signed = spoken(b"\x01\x02", "Hi") | {"thoughtSignature": "c2ln"}
    whole = fact(None, tts(spoken(b"\x01\x02\x03\x04", "Hi there") | {"thoughtSignature": "c2ln"}))
    streamed = fact(None, chunked([signed], [spoken(b"\x03\x04", " there")]))
    assert streamed.output_messages == whole.output_messages
    assert streamed.degradations == whole.degradations == {"opaque_reasoning": 1}
    apart = fact(None, chunked([signed], [signed]))
    assert apart.output_messages[0].parts == [TextPart("Hi"), blob(b"\x01\x02", PCM, "audio")] * 2
    assert apart.degradations == {"opaque_reasoning": 2}


DRAFT = base64.b64encode(PNG + b"draft").decode()
THOUGHT_IMAGE_ANSWER = [
    {"text": "Sketching a layout first.", "thought": True},
    inline(DRAFT) | {"thought": True},
    inline() | {"thoughtSignature": "c2ln"},
    {"text": "Here is your poster."},
]


def test_thought_images_are_reasoning_left_out_of_the_answer() -> None:
    """``thought: true`` on ``inlineData`` (a Gemini 3 image model's draft): reasoning that is
    not text, so no part and ``opaque_reasoning``, as a signature is; the final image stays.
    Streamed, and replayed by the client in the next request, it reads the same."""
    request = req(user("Make a poster."))
    response = resp(*THOUGHT_IMAGE_ANSWER)
    f = fact(request, response)
    assert f.output_messages == [
        Message(
            "assistant",
            [
                ReasoningPart("Sketching a layout first."),
                blob(PNG, "image/png", "image"),
                TextPart("Here is your poster."),
            ],
            "stop",
        )
    ]
    assert f.degradations == {"opaque_reasoning": 2}
    streamed = fact(request, stream_of(response, 1))
    assert streamed.output_messages == f.output_messages
    assert streamed.degradations == f.degradations
    second = fact(next_request(f, user("Bigger title.")))
    assert second.input_messages[1] == Message("assistant", f.output_messages[0].parts)
    assert second.degradations == {"opaque_reasoning": 2}
