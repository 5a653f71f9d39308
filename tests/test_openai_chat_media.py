"""OpenAI Chat Completions media and server tools (issue 16): images, audio, files, spoken
answers, generated images, Groq's executed tools, from the request and the response, streamed and
not. The mapping is docs/sources/openai.md, Chat Completions; the exchanges in tests/recorded/
(``tests.recorded.openai_chat_media``) are the real ``openai`` SDK against the fake provider."""

from __future__ import annotations

import base64
import hashlib
import itertools
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lithify.model import (
    BlobPart,
    FilePart,
    InferenceCall,
    Message,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    UriPart,
)
from lithify.translate import openai_chat, translate_document
from lithify.translate._common import Degradations, blob_part
from lithify.translate.openai_common import audio_mime, filename_mime
from lithify.translate.sse import SSEEvent
from tests.conftest import CORPUS, RECORDED
from tests.helpers import assert_valid_messages
from tests.recorded.openai_chat_media import REMOTE_IMAGE, SPOKEN_ANSWER, pcm16, pdf, png, wav


def fact(request: Any, response: Any = None) -> InferenceCall:
    result = openai_chat.translate(request, response)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def recorded(rel: str) -> InferenceCall:
    doc = orjson.loads((RECORDED / f"openai-chat/{rel}.exchange.json").read_bytes())
    (result,) = translate_document(doc)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def blob(data: bytes, mime: str | None, modality: str) -> BlobPart | None:
    """The part ``data`` must give (the property below checks its bytes, hash and size)."""
    return blob_part(data, mime, Degradations(), modality)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def user(*content: Any) -> dict[str, Any]:
    return {"model": "gpt-x", "messages": [{"role": "user", "content": list(content)}]}


def parts_of(*content: Any) -> tuple[list[Any], dict[str, int]]:
    f = fact(user(*content))
    return f.input_messages[0].parts, f.degradations


def answer(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-x",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def chunks(*deltas: dict[str, Any], finish: str = "stop") -> list[SSEEvent]:
    def one(delta: dict[str, Any], reason: str | None = None) -> SSEEvent:
        doc = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "gpt-x",
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
        }
        return SSEEvent(None, orjson.dumps(doc).decode())

    return [*(one(d) for d in deltas), one({}, finish), SSEEvent(None, "[DONE]")]


def same_but_raw(a: InferenceCall, b: InferenceCall, *also: str) -> None:
    drop = dict.fromkeys(("raw", *also))
    assert msgspec.structs.replace(a, **drop) == msgspec.structs.replace(b, **drop)


PNG = png()
SPOKEN_REQUEST = {"model": "gpt-x", "messages": [], "audio": {"voice": "alloy", "format": "wav"}}


# --- the recorded exchanges: the openai SDK against the fake provider ----------------------------


def test_image_input_data_url_is_a_blob_and_a_remote_url_a_uri() -> None:
    f = recorded("image_input")
    _, image, remote = f.input_messages[0].parts
    assert image == blob(PNG, "image/png", "image")
    assert remote == UriPart("image", None, REMOTE_IMAGE)
    assert f.degradations == {"content_reference": 1}
    # detail is a resolution hint, not content: it stays on raw.
    content = f.raw["request"]["messages"][0]["content"]
    assert [c["image_url"]["detail"] for c in content[1:]] == ["low", "high"]


def test_audio_input_is_an_audio_blob_typed_by_its_format() -> None:
    f = recorded("audio_input")
    assert f.input_messages[0].parts[1] == blob(wav(), "audio/wav", "audio")
    assert f.degradations == {}


def test_pdf_file_data_is_a_document_blob_and_a_file_id_a_file_part() -> None:
    f = recorded("pdf_file_input")
    _, data, uploaded = f.input_messages[0].parts
    assert data == blob(pdf(), "application/pdf", "document")
    assert uploaded == FilePart("document", None, "file-6F2ksmvXxt4VdoqmHRw6kL")
    assert f.degradations == {"content_reference": 1}
    assert f.raw["request"]["messages"][0]["content"][1]["file"]["filename"] == (
        "invoice-2026-001.pdf"
    )


def test_spoken_answer_is_its_transcript_then_its_audio_streamed_or_not() -> None:
    plain, streamed = recorded("audio_output"), recorded("audio_output_streaming")
    # Recorded by two fakes: the response ids differ, nothing else does.
    same_but_raw(plain, streamed, "inference_call_id", "model_call_id")
    assert plain.output_messages == [
        Message(
            "assistant", [TextPart(SPOKEN_ANSWER), blob(pcm16(), "audio/pcm16", "audio")], "stop"
        )
    ]
    assert plain.degradations == streamed.degradations == {}


def test_streamed_audio_came_in_padded_pieces() -> None:
    stream = orjson.loads(
        (RECORDED / "openai-chat/audio_output_streaming.exchange.json").read_bytes()
    )
    pieces = [
        d["choices"][0]["delta"]["audio"]["data"]
        for line in stream["response"].splitlines()
        if line.startswith("data: {")
        and (d := orjson.loads(line[6:]))["choices"]
        and "data" in d["choices"][0]["delta"].get("audio", {})
    ]
    assert len(pieces) > 1 and any(p.endswith("=") for p in pieces[:-1])


def test_a_replayed_answer_by_id_is_a_file_part() -> None:
    earlier, replay = recorded("audio_output"), recorded("audio_replay")
    audio_id = earlier.raw["response"]["choices"][0]["message"]["audio"]["id"]
    assert replay.input_messages[1] == Message("assistant", [FilePart("audio", None, audio_id)])
    assert replay.degradations == {"content_reference": 1}
    # The replay holds a reference where the answer held text and audio: not the same message.
    assert replay.input_messages[1] != Message("assistant", earlier.output_messages[0].parts)


def test_an_image_in_a_tool_result_follows_the_result() -> None:
    f = recorded("tool_result_image")
    call = f.input_messages[1].parts[0]
    assert isinstance(call, ToolCallPart)
    assert f.input_messages[2] == Message(
        "tool",
        [
            ToolCallResponsePart(
                call.id,
                [{"type": "text", "text": "Screenshot of https://example.com/login (1280×800)"}],
            ),
            blob(png(4, 3, (30, 90, 200)), "image/png", "image"),
        ],
    )
    assert f.degradations == {}


def test_openrouter_generated_image_follows_the_text() -> None:
    f = recorded("openrouter_image_output")
    assert f.output_messages[0].parts == [
        TextPart("Here is a small yellow square."),
        blob(png(3, 3, (250, 200, 0)), "image/png", "image"),
    ]
    assert f.degradations == {}


# --- the corpus ----------------------------------------------------------------------------------


def test_envoy_multimodal_span_bodies_give_a_uri_part() -> None:
    """The OpenInference span envoy_chat_multimodal carries the Chat request and response as
    input.value / output.value; read as Chat, its image is a uri part."""
    span = orjson.loads((CORPUS / "openinference/envoy_chat_multimodal.span.json").read_bytes())
    attrs = {
        a["key"]: a["value"]["stringValue"]
        for a in span["attributes"]
        if "stringValue" in a["value"]
    }
    f = fact(orjson.loads(attrs["input.value"]), orjson.loads(attrs["output.value"]))
    assert f.input_messages[0].parts[1] == UriPart(
        "image",
        None,
        orjson.loads(attrs["input.value"])["messages"][0]["content"][1]["image_url"]["url"],
    )
    assert f.output_messages == [Message("assistant", [], "length")]
    assert f.degradations == {"content_reference": 1}


@pytest.mark.parametrize(
    ("name", "part"),
    [
        ("vision_image_url", UriPart("image", None, "https://source.unsplash.com/8xznAGy4HcY/800x400")),
        ("uploaded_file_id", FilePart("document", None, "file-2bkCwDLR2p8cDXfT9he8tV")),
    ],
)  # fmt: skip
def test_corpus_media_references(name: str, part: Any) -> None:
    req = orjson.loads((CORPUS / f"openai-chat/{name}.request.json").read_bytes())
    resp = orjson.loads((CORPUS / f"openai-chat/{name}.response.json").read_bytes())
    f = fact(req, resp)
    assert f.input_messages[0].parts[-1] == part
    assert f.degradations == {"content_reference": 1}


# --- content parts ---------------------------------------------------------------------------


def test_image_url_forms() -> None:
    url = f"data:image/png;base64,{b64(PNG)}"
    parts, deg = parts_of(
        {"type": "image_url", "image_url": {"url": url, "detail": "auto"}},
        {"type": "image_url", "image_url": url},  # Mistral: the URL as a plain string
        {"type": "image_url", "image_url": {"url": "data:image/svg+xml,%3Csvg%2F%3E"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAAA"}},  # bad base64
        {"type": "image_url", "image_url": {}},
    )
    assert parts == [
        blob(PNG, "image/png", "image"),
        blob(PNG, "image/png", "image"),
        blob(b"<svg/>", "image/svg+xml", "image"),
    ]
    assert deg == {"malformed_media": 1, "malformed_messages": 1}


def test_base64_spelling_does_not_change_the_blob() -> None:
    text = b64(PNG)
    wrapped = "\n".join(text[i : i + 16] for i in range(0, len(text), 16))
    parts, _ = parts_of(
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{text}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{wrapped}"}},
    )
    assert parts[0] == parts[1] == blob(PNG, "image/png", "image")


def test_input_audio_forms() -> None:
    data = wav()
    parts, deg = parts_of(
        {"type": "input_audio", "input_audio": {"data": b64(data), "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": b64(data), "format": "mp3"}},
        {"type": "input_audio", "input_audio": {"data": b64(data)}},
        {"type": "input_audio", "input_audio": b64(data)},  # Mistral: base64 as a string
        {"type": "input_audio", "input_audio": "https://example.com/a.mp3"},
        {"type": "input_audio", "input_audio": {"format": "wav"}},
    )
    assert parts == [
        blob(data, "audio/wav", "audio"),
        blob(data, "audio/mpeg", "audio"),
        blob(data, None, "audio"),
        blob(data, None, "audio"),
        UriPart("audio", None, "https://example.com/a.mp3"),
    ]
    assert deg == {"content_reference": 1, "malformed_messages": 1}


def test_file_forms() -> None:
    doc = pdf()
    parts, deg = parts_of(
        {"type": "file", "file": {"filename": "a.pdf", "file_data": f"data:application/pdf;base64,{b64(doc)}"}},
        {"type": "file", "file": {"filename": "a.pdf", "file_data": b64(doc)}},  # bare base64
        {"type": "file", "file": {"file_data": b64(doc)}},
        {"type": "file", "file": {"filename": "notes.txt", "file_id": "file-abc"}},
        {"type": "file", "file_id": "8f1a-mistral"},  # Mistral's file chunk
        {"type": "file", "file": {"filename": "x.pdf"}},
    )  # fmt: skip
    assert parts == [
        blob(doc, "application/pdf", "document"),
        blob(doc, "application/pdf", "document"),
        blob(doc, None, "document"),
        FilePart("document", "text/plain", "file-abc"),
        FilePart("document", None, "8f1a-mistral"),
    ]
    assert deg == {"content_reference": 2, "malformed_messages": 1}


def test_documented_url_entries_of_other_servers() -> None:
    parts, deg = parts_of(
        {"type": "audio_url", "audio_url": {"url": "https://example.com/a.wav"}},  # vLLM
        {"type": "video_url", "video_url": {"url": "https://example.com/v.mp4"}},  # vLLM
        {"type": "document_url", "document_url": "https://example.com/d.pdf"},  # Mistral
        {"type": "document_url", "document_url": f"data:application/pdf;base64,{b64(b'%PDF')}"},
    )
    assert parts == [
        UriPart("audio", None, "https://example.com/a.wav"),
        UriPart("video", None, "https://example.com/v.mp4"),
        UriPart("document", None, "https://example.com/d.pdf"),
        blob(b"%PDF", "application/pdf", "document"),
    ]
    assert deg == {"content_reference": 3}


def test_only_undocumented_types_count_unsupported_content() -> None:
    parts, deg = parts_of(
        {"type": "text", "text": "a"},
        {"type": "reference", "reference_ids": [0, 2]},  # Mistral: the sources cited
        {"type": "image_embeds", "image_embeds": "…"},
        {"type": "hologram"},
    )
    assert parts == [TextPart("a")]
    assert deg == {"text_citation": 2, "unsupported_content": 2}


def test_mime_helpers() -> None:
    assert [audio_mime(f) for f in ("wav", "MP3", "pcm16", "", None, 3)] == [
        "audio/wav", "audio/mpeg", "audio/pcm16", None, None, None,
    ]  # fmt: skip
    assert [filename_mime(n) for n in ("a.PDF", "b.tar.gz", "c", None, "d.wav")] == [
        "application/pdf", None, None, None, "audio/wav",
    ]  # fmt: skip


# --- tool results ------------------------------------------------------------------------------


def _tool_message(content: Any) -> Message:
    req = {
        "messages": [
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": content},
        ]
    }  # fmt: skip
    return fact(req).input_messages[1]


def test_tool_results_without_media_stay_as_they_were() -> None:
    text_list = [{"type": "text", "text": "ok"}]
    assert _tool_message("ok").parts == [ToolCallResponsePart("c1", "ok")]
    assert _tool_message(text_list).parts == [ToolCallResponsePart("c1", text_list)]


def test_tool_result_media_leave_the_list_in_order() -> None:
    other = png(1, 1, (0, 0, 0))
    content = [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
        {"type": "text", "text": "two screenshots"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(other)}"}},
    ]
    assert _tool_message(content).parts == [
        ToolCallResponsePart("c1", [{"type": "text", "text": "two screenshots"}]),
        blob(PNG, "image/png", "image"),
        blob(other, "image/png", "image"),
    ]
    only_image = [content[0]]
    assert _tool_message(only_image).parts == [
        ToolCallResponsePart("c1", []),
        blob(PNG, "image/png", "image"),
    ]


# --- spoken answers ------------------------------------------------------------------------------


def test_audio_answer_mime_comes_from_the_request() -> None:
    spoken = {"role": "assistant", "content": None, "audio": {"id": "audio_1", "data": b64(b"RIFF"), "transcript": "Hi.", "expires_at": 1}}  # fmt: skip
    with_format = fact(SPOKEN_REQUEST, answer(spoken))
    without_request = fact(None, answer(spoken))
    assert with_format.output_messages[0].parts == [
        TextPart("Hi."),
        blob(b"RIFF", "audio/wav", "audio"),
    ]
    assert without_request.output_messages[0].parts == [
        TextPart("Hi."),
        blob(b"RIFF", None, "audio"),
    ]


def test_audio_answer_streamed_equals_plain() -> None:
    data = pcm16(0.01)
    plain = fact(
        SPOKEN_REQUEST,
        answer({"role": "assistant", "content": None, "audio": {"id": "a1", "data": b64(data), "transcript": "Hello there.", "expires_at": 9}}),
    )  # fmt: skip
    pieces = [data[i : i + 7] for i in range(0, len(data), 7)]
    streamed = fact(
        SPOKEN_REQUEST,
        chunks(
            {"role": "assistant", "content": None},
            {"audio": {"id": "a1", "transcript": "Hello "}},
            {"audio": {"id": "a1", "transcript": "there."}},
            *({"audio": {"id": "a1", "data": b64(p)}} for p in pieces),
            {"audio": {"id": "a1", "expires_at": 9}},
        ),
    )
    same_but_raw(plain, streamed)


def test_streamed_audio_as_slices_of_one_base64_text() -> None:
    text = b64(b"0123456789")
    f = fact(
        SPOKEN_REQUEST,
        chunks(*({"audio": {"data": text[i : i + 3]}} for i in range(0, len(text), 3))),
    )
    assert f.output_messages[0].parts == [blob(b"0123456789", "audio/wav", "audio")]


def test_streamed_audio_that_does_not_decode() -> None:
    f = fact(SPOKEN_REQUEST, chunks({"audio": {"id": "a1", "transcript": "Hi", "data": "!!"}}))
    assert f.output_messages[0].parts == [TextPart("Hi")]
    assert f.degradations == {"malformed_media": 1}


def test_zero_valued_audio_is_no_audio() -> None:
    zero = {"id": "", "data": "", "transcript": "", "expires_at": 0}
    plain = fact(None, answer({"role": "assistant", "content": "hi", "audio": zero}))
    streamed = fact(None, chunks({"content": "hi", "audio": zero}))
    assert plain.output_messages[0].parts == streamed.output_messages[0].parts == [TextPart("hi")]
    assert plain.degradations == streamed.degradations == {}


def test_replayed_audio_forms() -> None:
    req = {
        "messages": [
            {"role": "assistant", "audio": {"id": "audio_1"}},
            {"role": "assistant", "audio": {"id": "audio_2", "transcript": "Bye."}},
            {"role": "assistant", "content": "text too", "audio": {"id": "audio_3"}},
        ]
    }
    f = fact(req)
    assert [m.parts for m in f.input_messages] == [
        [FilePart("audio", None, "audio_1")],
        [TextPart("Bye."), FilePart("audio", None, "audio_2")],
        [TextPart("text too"), FilePart("audio", None, "audio_3")],
    ]
    assert f.degradations == {"content_reference": 3}


# --- generated images and server tools ----------------------------------------------------------


def test_generated_images_streamed_equal_plain() -> None:
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}}
    plain = fact(None, answer({"role": "assistant", "content": "Done.", "images": [image]}))
    streamed = fact(None, chunks({"role": "assistant", "content": "Done."}, {"images": [image]}))
    same_but_raw(plain, streamed)
    assert plain.output_messages[0].parts == [TextPart("Done."), blob(PNG, "image/png", "image")]
    assert fact(None, answer({"role": "assistant", "images": [{"type": "x"}]})).degradations == {
        "unsupported_content": 1
    }


GROQ_CODE = {
    "index": 1,
    "type": "python",
    "arguments": '{"code": "plot()"}',
    "output": "done",
    "code_results": [{"text": "a chart", "png": b64(PNG)}, {"text": "no chart"}],
}


def test_groq_executed_tools_are_server_tool_parts() -> None:
    search = {"index": 0, "type": "search", "arguments": '{"query": "q"}', "search_results": {"results": []}}  # fmt: skip
    unfinished = {"index": 2, "type": "visit", "arguments": '{"url": "https://x"}'}
    msg = {"role": "assistant", "content": "Answer.", "executed_tools": [search, GROQ_CODE, unfinished, {"index": 3}]}  # fmt: skip
    f = fact(None, answer(msg))
    assert f.output_messages[0].parts == [
        ServerToolCallPart(None, "search", {"index": 0, "type": "search", "arguments": '{"query": "q"}'}),
        ServerToolCallResponsePart(None, {"type": "search", "search_results": {"results": []}}),
        ServerToolCallPart(None, "python", {"index": 1, "type": "python", "arguments": '{"code": "plot()"}'}),
        ServerToolCallResponsePart(
            None,
            {"type": "python", "output": "done", "code_results": [{"text": "a chart"}, {"text": "no chart"}]},
        ),
        blob(PNG, "image/png", "image"),
        ServerToolCallPart(None, "visit", unfinished),
        TextPart("Answer."),
    ]  # fmt: skip
    assert f.degradations == {"malformed_messages": 1}


def test_groq_executed_tools_streamed_equal_plain() -> None:
    call_only = {k: v for k, v in GROQ_CODE.items() if k in ("index", "type", "arguments")}
    plain = fact(
        None, answer({"role": "assistant", "content": "A.", "executed_tools": [GROQ_CODE]})
    )
    streamed = fact(
        None,
        chunks(
            {"role": "assistant", "executed_tools": [call_only]},
            {"executed_tools": [GROQ_CODE]},
            {"content": "A."},
        ),
    )
    same_but_raw(plain, streamed)


# --- properties --------------------------------------------------------------------------------

# Non-empty: an empty input_audio.data is a zero value (no part), an empty data URL a 0-byte blob.
_DATA = st.binary(min_size=1, max_size=96)
_MIME = st.sampled_from(["image/png", "image/jpeg", "audio/wav", "video/mp4", "application/pdf", "text/plain"])  # fmt: skip


def _carried(
    data: bytes, mime: str, carrier: str
) -> tuple[dict[str, Any] | None, Any, str, str | None]:
    """``data`` sent in one of Chat's carriers: (request, response, modality, MIME type)."""
    text = b64(data)
    if carrier == "image_url":
        return (
            user({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{text}"}}),
            None,
            "image",
            mime,
        )
    if carrier == "input_audio":
        return (
            user({"type": "input_audio", "input_audio": {"data": text, "format": "flac"}}),
            None,
            "audio",
            "audio/flac",
        )
    if carrier == "file_data":
        expected = {"image": "image", "audio": "audio", "video": "video"}.get(
            mime.split("/")[0], "document"
        )
        return (
            user({"type": "file", "file": {"file_data": f"data:{mime};base64,{text}"}}),
            None,
            expected,
            mime,
        )
    if carrier == "tool_result":
        req = {"messages": [{"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url", "image_url": {"url": f"data:{mime};base64,{text}"}}]}]}  # fmt: skip
        return req, None, "image", mime
    audio = {"id": "a", "data": text, "transcript": "t"}
    return SPOKEN_REQUEST, answer({"role": "assistant", "content": None, "audio": audio}), "audio", "audio/wav"  # fmt: skip


@settings(max_examples=150)
@given(data=_DATA, mime=_MIME, carrier=st.sampled_from(["image_url", "input_audio", "file_data", "tool_result", "audio_output"]))  # fmt: skip
def test_inline_media_become_one_blob_of_exactly_their_bytes(data: bytes, mime: str, carrier: str) -> None:  # fmt: skip
    request, response, modality, expected_mime = _carried(data, mime, carrier)
    f = fact(request, response)
    blobs = [
        p for m in f.input_messages + f.output_messages for p in m.parts if isinstance(p, BlobPart)
    ]
    assert blobs == [blob(data, expected_mime, modality)]
    (part,) = blobs
    assert base64.b64decode(part.content, validate=True) == data
    assert (part.size, part.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert f.degradations == {}


@settings(max_examples=100)
@given(data=_DATA, cuts=st.lists(st.integers(0, 96), max_size=6), padded=st.booleans())
def test_streamed_audio_pieces_give_the_plain_blob(
    data: bytes, cuts: list[int], padded: bool
) -> None:
    """However the audio is cut into pieces (each its own base64, or slices of one base64 text
    anywhere), the streamed answer's blob is the plain answer's."""
    bounds = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
    if padded:
        pieces = [b64(data[a:b]) for a, b in itertools.pairwise(bounds)]
    else:
        text = b64(data)
        marks = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
        pieces = [text[a:b] for a, b in itertools.pairwise(marks)]
    plain = fact(SPOKEN_REQUEST, answer({"role": "assistant", "audio": {"id": "a", "data": b64(data), "transcript": "t"}}))  # fmt: skip
    streamed = fact(SPOKEN_REQUEST, chunks({"audio": {"id": "a", "transcript": "t"}}, *({"audio": {"data": p}} for p in pieces)))  # fmt: skip
    same_but_raw(plain, streamed)


_HOST = st.from_regex(r"[a-z]{1,12}\.(com|org|net)", fullmatch=True)
_PATH = st.from_regex(r"(/[A-Za-z0-9_.~-]{1,10}){0,3}", fullmatch=True)


@given(host=_HOST, path=_PATH, kind=st.sampled_from(["image_url", "audio_url", "video_url", "document_url"]))  # fmt: skip
def test_remote_urls_are_uri_parts_kept_exactly(host: str, path: str, kind: str) -> None:
    url = f"https://{host}{path}"
    parts, deg = parts_of({"type": kind, kind: {"url": url}})
    modality = {"image_url": "image", "audio_url": "audio", "video_url": "video"}.get(
        kind, "document"
    )
    assert parts == [UriPart(modality, None, url)]
    assert deg == {"content_reference": 1}
