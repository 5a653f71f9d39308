"""OpenInference media contents (docs/sources/openllmetry-openinference.md, OpenInference):
``message_content.type`` image, audio, video and document with their nested ``…url`` /
``mime_type`` / ``id`` / ``content`` leaves. Hashes are computed here from the chosen bytes.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lithify.model import (
    BlobPart,
    FilePart,
    InferenceCall,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    UriPart,
)
from lithify.translate.telemetry import translate_attributes
from tests.helpers import assert_valid_messages

IN = "llm.input_messages"
OUT = "llm.output_messages"
PNG = bytes.fromhex("89504e470d0a1a0a") + bytes(range(50))
WAV = b"RIFF" + bytes(range(30))


def fact(attrs: dict[str, Any]) -> InferenceCall:
    result = translate_attributes({"openinference.span.kind": "LLM", **attrs})
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def blob(data: bytes, mime: str | None, modality: str) -> BlobPart:
    return BlobPart(
        modality=modality,
        mime_type=mime,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        content=base64.b64encode(data).decode(),
    )


def content(msg: str, j: int, **leaves: Any) -> dict[str, Any]:
    pre = f"{msg}.message.contents.{j}.message_content."
    return {pre + k.replace("__", "."): v for k, v in leaves.items()}


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def test_image_data_url_is_a_blob_and_https_url_a_uri() -> None:
    f = fact(
        {
            f"{IN}.0.message.role": "user",
            **content(f"{IN}.0", 0, type="text", text="Which is larger?"),
            **content(f"{IN}.0", 1, type="image", image__image__url=data_url("image/png", PNG)),
            **content(f"{IN}.0", 2, type="image", image__image__url="https://x.test/b.jpg"),
        }
    )
    assert f.input_messages == [
        Message(
            "user",
            [
                TextPart("Which is larger?"),
                blob(PNG, "image/png", "image"),
                UriPart("image", None, "https://x.test/b.jpg"),
            ],
            None,
        )
    ]
    assert f.degradations == {"content_reference": 1}


def test_audio_video_and_document_contents() -> None:
    f = fact(
        {
            f"{IN}.0.message.role": "user",
            **content(
                f"{IN}.0",
                0,
                type="audio",
                audio__audio__url=data_url("audio/wav", WAV),
                audio__audio__transcript="hello",
            ),
            **content(
                f"{IN}.0",
                1,
                type="audio",
                audio__audio__url="https://x.test/a.mp3",
                audio__audio__mime_type="audio/mpeg",
            ),
            **content(f"{IN}.0", 2, type="video", video__video__url="gs://b/clip.mp4"),
            **content(
                f"{IN}.0",
                3,
                type="document",
                document__document__url=data_url("application/pdf", b"%PDF-1.7"),
            ),
            **content(
                f"{IN}.0",
                4,
                type="document",
                document__document__id="file-42",
                document__document__mime_type="application/pdf",
            ),
            **content(f"{IN}.0", 5, type="document", document__document__content="Clause 1."),
        }
    )
    assert f.input_messages[0].parts == [
        blob(WAV, "audio/wav", "audio"),
        UriPart("audio", "audio/mpeg", "https://x.test/a.mp3"),
        UriPart("video", None, "gs://b/clip.mp4"),
        blob(b"%PDF-1.7", "application/pdf", "document"),
        FilePart("document", "application/pdf", "file-42"),
        blob(b"Clause 1.", "text/plain", "document"),
    ]
    assert f.degradations == {"content_reference": 3}


def test_file_contents_are_media_parts() -> None:
    # openinference-instrumentation-openai writes a chat `file` part as message_content.file
    # with file.url (a data URL of file_data), file.mime_type, file.name, or file.id.
    f = fact(
        {
            f"{IN}.0.message.role": "user",
            **content(f"{IN}.0", 0, type="text", text="Summarize the PDFs"),
            **content(
                f"{IN}.0",
                1,
                type="file",
                file__file__url=data_url("application/pdf", b"%PDF-1.4\n"),
                file__file__mime_type="application/pdf",
                file__file__name="a.pdf",
            ),
            **content(f"{IN}.0", 2, type="file", file__file__id="file-7", file__file__name="b.pdf"),
            **content(f"{IN}.0", 3, type="file", file__file__url="https://x.test/c.png"),
            **content(f"{IN}.0", 4, type="file", file__file__name="lost.pdf"),
            f"{OUT}.0.message.role": "assistant",
            f"{OUT}.0.message.content": "ok",
        }
    )
    assert f.input_messages[0].parts == [
        TextPart("Summarize the PDFs"),
        blob(b"%PDF-1.4\n", "application/pdf", "document"),
        FilePart("document", "application/pdf", "file-7"),  # the MIME type its name implies
        UriPart("document", None, "https://x.test/c.png"),
    ]
    assert f.degradations == {"content_reference": 2, "malformed_media": 1}


def test_an_untyped_content_item_is_known_by_its_keys() -> None:
    f = fact(
        {
            f"{IN}.0.message.role": "user",
            **content(f"{IN}.0", 0, image__image__url="https://x.test/y.png"),
            **content(f"{IN}.0", 1, text="and this"),
            **content(f"{IN}.0", 2, mystery__value="?"),
        }
    )
    assert f.input_messages == [
        Message("user", [UriPart("image", None, "https://x.test/y.png"), TextPart("and this")])
    ]
    assert f.degradations == {"content_reference": 1, "unsupported_content": 1}


def test_hidden_or_missing_media_is_counted() -> None:
    f = fact(
        {
            f"{IN}.0.message.role": "user",
            # OPENINFERENCE_HIDE_INPUT_IMAGES, or a base64 image over the length limit
            **content(f"{IN}.0", 0, type="image", image__image__url="__REDACTED__"),
            **content(f"{IN}.0", 1, type="audio"),
            **content(f"{IN}.0", 2, type="image", image__image__url="data:image/png;base64,%%%"),
            **content(f"{IN}.0", 3, type="tool_use", text="x"),
            **content(f"{IN}.0", 4, type="text", text="kept"),
        }
    )
    assert f.input_messages == [Message("user", [TextPart("kept")], None)]
    assert f.degradations == {"malformed_media": 3, "unsupported_content": 1}


def test_an_image_a_tool_returned_follows_its_result() -> None:
    f = fact(
        {
            f"{IN}.0.message.role": "assistant",
            f"{IN}.0.message.tool_calls.0.tool_call.id": "c1",
            f"{IN}.0.message.tool_calls.0.tool_call.function.name": "screenshot",
            f"{IN}.0.message.tool_calls.0.tool_call.function.arguments": "{}",
            f"{IN}.1.message.role": "tool",
            f"{IN}.1.message.tool_call_id": "c1",
            **content(f"{IN}.1", 0, type="text", text="captured"),
            **content(f"{IN}.1", 1, type="image", image__image__url=data_url("image/png", PNG)),
        }
    )
    assert [m.role for m in f.input_messages] == ["assistant", "tool"]
    tool = f.input_messages[1]
    assert tool.parts[0].id == "c1" and tool.parts[0].result == "captured"  # type: ignore[union-attr]
    assert tool.parts[1:] == [blob(PNG, "image/png", "image")]
    assert f.degradations == {}


def test_output_images_are_media_parts_too() -> None:
    f = fact(
        {
            f"{OUT}.0.message.role": "assistant",
            **content(f"{OUT}.0", 0, type="image", image__image__url=data_url("image/png", PNG)),
        }
    )
    assert f.output_messages[0].parts == [blob(PNG, "image/png", "image")]


@given(st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=4))
def test_random_image_data_urls_round_trip(images: list[bytes]) -> None:
    attrs: dict[str, Any] = {f"{IN}.0.message.role": "user"}
    for j, data in enumerate(images):
        attrs.update(
            content(f"{IN}.0", j, type="image", image__image__url=data_url("image/webp", data))
        )
    f = fact(attrs)
    parts = f.input_messages[0].parts
    assert parts == [blob(d, "image/webp", "image") for d in images]
    for got, data in zip(parts, images, strict=True):
        assert isinstance(got, BlobPart)
        assert got.size == len(data) and got.sha256 == hashlib.sha256(data).hexdigest()
    assert f.degradations == {}


def test_an_ordered_tool_use_part_is_the_tool_call_it_repeats() -> None:
    """The spec's ordered contents: reasoning, then the call as a tool_use part, the same call
    in message.tool_calls too. One call, not two, and nothing counted lost."""
    call = {"tool_call.id": "call_1", "tool_call.function.name": "get_weather",
            "tool_call.function.arguments": '{"city": "Oslo"}'}  # fmt: skip
    attrs = {
        **content(f"{IN}.0", 0, type="text", text="Weather in Oslo?"),
        f"{IN}.0.message.role": "user",
        f"{OUT}.0.message.role": "assistant",
        **content(f"{OUT}.0", 0, type="reasoning", text="I need the weather."),
        **content(f"{OUT}.0", 1, type="tool_use", **call),
        **{f"{OUT}.0.message.tool_calls.0.{k}": v for k, v in call.items()},
    }
    f = fact(attrs)
    assert f.output_messages[0].parts == [
        ReasoningPart("I need the weather."),
        ToolCallPart("call_1", "get_weather", {"city": "Oslo"}),
    ]
    assert f.degradations == {}
    # A producer that wrote the ordered part alone, without an id: still the one call.
    alone = {k: v for k, v in attrs.items() if ".tool_calls." not in k and "tool_call.id" not in k}
    (part,) = [p for p in fact(alone).output_messages[0].parts if isinstance(p, ToolCallPart)]
    assert (part.name, part.arguments) == ("get_weather", {"city": "Oslo"})
