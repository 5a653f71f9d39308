"""OpenLLMetry media and server-tool content (docs/sources/openllmetry-openinference.md,
OpenLLMetry): provider content lists serialized into ``gen_ai.prompt.N.content`` (OpenAI
``image_url`` / ``input_audio`` / ``file`` parts, Anthropic ``image`` / ``document`` blocks and
server tools), and whole ``gen_ai.prompt`` values in the semconv shape. Hashes are computed here.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson
from hypothesis import given
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
from lithify.translate import anthropic
from lithify.translate.telemetry import translate_attributes
from tests.helpers import assert_valid_messages

PNG = bytes.fromhex("89504e470d0a1a0a") + bytes(range(64))
MP3 = b"ID3\x04" + bytes(range(40))


def fact(attrs: dict[str, Any]) -> InferenceCall:
    result = translate_attributes(attrs)
    assert isinstance(result, InferenceCall), result
    assert result.source.name == "openllmetry"
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


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_openai_media_parts_in_serialized_content() -> None:
    content = [
        {"type": "text", "text": "Describe both."},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
        {"type": "input_audio", "input_audio": {"data": b64(MP3), "format": "mp3"}},
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{b64(b'%PDF')}"}},
        {"type": "file", "file": {"file_id": "file-7"}},
    ]
    f = fact(
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": orjson.dumps(content).decode(),
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "A chart and a song.",
        }
    )
    assert f.input_messages == [
        Message(
            "user",
            [
                TextPart("Describe both."),
                blob(PNG, "image/png", "image"),
                blob(MP3, "audio/mpeg", "audio"),
                blob(b"%PDF", "application/pdf", "document"),
                FilePart("document", None, "file-7"),
            ],
            None,
        )
    ]
    assert f.degradations == {"content_reference": 1}


def test_anthropic_blocks_media_and_server_tools() -> None:
    prompt = [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)},
        },
        {"type": "document", "source": {"type": "file", "file_id": "file_abc"}},
        {"type": "text", "text": "What changed?"},
    ]
    completion = [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "q"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://w.test", "title": "W"}],
        },
        {"type": "text", "text": "Nothing."},
    ]
    f = fact(
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": orjson.dumps(prompt).decode(),
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": orjson.dumps(completion).decode(),
            "gen_ai.completion.0.finish_reason": "end_turn",
        }
    )
    assert f.input_messages[0].parts == [
        blob(PNG, "image/png", "image"),
        FilePart("document", None, "file_abc"),
        TextPart("What changed?"),
    ]
    assert f.output_messages == [
        Message(
            "assistant",
            [
                ServerToolCallPart("srvtoolu_1", "web_search", completion[0]),
                ServerToolCallResponsePart("srvtoolu_1", completion[1]),
                TextPart("Nothing."),
            ],
            "stop",
        )
    ]
    assert f.degradations == {"content_reference": 1}


def test_whole_prompt_value_with_semconv_media_parts() -> None:
    prompt = [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "Look"},
                {
                    "type": "blob",
                    "modality": "image",
                    "mime_type": "image/png",
                    "content": b64(PNG),
                },
                {"type": "uri", "modality": "video", "uri": "gs://b/v.mp4"},
            ],
        }
    ]
    f = fact({"gen_ai.prompt": orjson.dumps(prompt).decode(), "gen_ai.completion": "ok"})
    assert f.input_messages[0].parts == [
        TextPart("Look"),
        blob(PNG, "image/png", "image"),
        UriPart("video", None, "gs://b/v.mp4"),
    ]
    assert f.degradations == {"content_reference": 1}


def test_bad_base64_is_malformed_media() -> None:
    content = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@@"}}]
    f = fact(
        {"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": orjson.dumps(content).decode()}
    )
    assert f.input_messages == [Message("user", [], None)]
    assert f.degradations == {"malformed_media": 1}


def test_anthropic_tool_result_images_follow_the_result() -> None:
    """A tool_result's image leaves the result and follows it in the tool message, as the
    Anthropic translator reads the same request: the span and the exchange are one call."""
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)},
    }
    result = [{"type": "text", "text": "shot"}, image]
    content = [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": result},
        {"type": "text", "text": "and now?"},
    ]
    f = fact(
        {
            "gen_ai.prompt.0.role": "assistant",
            "gen_ai.prompt.0.tool_calls.0.id": "toolu_1",
            "gen_ai.prompt.0.tool_calls.0.name": "screenshot",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": orjson.dumps(content).decode(),
        }
    )
    assert f.input_messages[1:] == [
        Message(
            "tool",
            [
                ToolCallResponsePart("toolu_1", [{"type": "text", "text": "shot"}]),
                blob(PNG, "image/png", "image"),
            ],
            None,
        ),
        Message("user", [TextPart("and now?")], None),
    ]
    assert f.degradations == {}


def test_anthropic_server_tool_input_container_upload_and_search_result() -> None:
    completion = [
        {
            "type": "server_tool_use",
            "id": "s1",
            "name": "code_execution",
            "input": '{"code": "1+1"}',
        },
        {
            "type": "bash_code_execution_tool_result",
            "tool_use_id": "s1",
            "content": {"stdout": "2"},
        },
    ]
    prompt = [
        {"type": "container_upload", "file_id": "file_c"},
        {
            "type": "search_result",
            "source": "https://kb.test/1",
            "title": "KB",
            "content": [{"type": "text", "text": "Result text."}],
        },
    ]
    f = fact(
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": orjson.dumps(prompt).decode(),
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": orjson.dumps(completion).decode(),
        }
    )
    assert f.input_messages[0].parts == [
        FilePart("document", None, "file_c"),
        TextPart("Result text."),
    ]
    assert f.output_messages[0].parts == [
        ServerToolCallPart("s1", "code_execution", {**completion[0], "input": {"code": "1+1"}}),
        ServerToolCallResponsePart("s1", completion[1]),
    ]
    assert f.degradations == {"content_reference": 1}


@given(st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=4))
def test_random_image_data_urls_round_trip(images: list[bytes]) -> None:
    content = [
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64(d)}"}}
        for d in images
    ]
    f = fact(
        {"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": orjson.dumps(content).decode()}
    )
    assert f.input_messages[0].parts == [blob(d, "image/jpeg", "image") for d in images]
    assert f.degradations == {}


def _anthropic_input(content: list[dict[str, Any]]) -> list[Message]:
    """The input messages the Anthropic translator gives for one user turn of ``content``."""
    request = {
        "model": "claude",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": content}],
    }
    result = anthropic.translate(request, None)
    assert isinstance(result, InferenceCall), result
    return result.input_messages


def test_anthropic_text_documents_give_the_anthropic_translators_parts() -> None:
    # OpenLLMetry's Anthropic instrumentation json.dumps a list-valued content; plain-text and
    # custom-content documents are read as the Anthropic translator reads the same request.
    text_doc = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "The grass is green."},
        "title": "facts",
        "citations": {"enabled": True},
    }
    content_doc = {
        "type": "document",
        "source": {
            "type": "content",
            "content": [{"type": "text", "text": "Chunk one."}, {"type": "text", "text": "Two."}],
        },
    }
    question = {"type": "text", "text": "What color is the grass?"}
    for doc, parts in (
        (text_doc, [blob(b"The grass is green.", "text/plain", "document")]),
        (content_doc, [TextPart("Chunk one."), TextPart("Two.")]),
    ):
        content = [doc, question]
        f = fact(
            {
                "gen_ai.system": "Anthropic",
                "gen_ai.prompt.0.role": "user",
                "gen_ai.prompt.0.content": orjson.dumps(content).decode(),
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "Green.",
            }
        )
        assert f.input_messages == [Message("user", [*parts, TextPart(question["text"])])]
        assert f.input_messages == _anthropic_input(content)
        assert f.degradations == {}


def test_a_tool_result_splits_as_the_anthropic_translator_splits_it() -> None:
    # Images and file documents follow the result; a document of content blocks stays in it.
    png = {"type": "base64", "media_type": "image/png", "data": b64(b"\x89PNG shot")}
    content_doc = {
        "type": "document",
        "source": {"type": "content", "content": [{"type": "text", "text": "Row 1."}]},
    }
    turns = [
        {"role": "user", "content": [{"type": "text", "text": "Read the sheet."}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [content_doc, {"type": "image", "source": png}],
                }
            ],
        },
    ]
    attrs: dict[str, Any] = {"gen_ai.system": "Anthropic"}
    for i, turn in enumerate(turns):
        attrs[f"gen_ai.prompt.{i}.role"] = turn["role"]
        attrs[f"gen_ai.prompt.{i}.content"] = orjson.dumps(turn["content"]).decode()
    attrs |= {"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Done."}
    request = {"model": "claude", "max_tokens": 8, "messages": turns}
    exchange = anthropic.translate(request, None)
    assert isinstance(exchange, InferenceCall), exchange
    f = fact(attrs)
    assert f.input_messages == exchange.input_messages
    [result, image] = f.input_messages[2].parts
    assert result == ToolCallResponsePart("toolu_1", [content_doc])
    assert image == blob(b"\x89PNG shot", "image/png", "image")


def test_responses_blocks_the_instrumentation_re_types_are_media() -> None:
    # traceloop's responses wrapper (process_content_block) writes input_image as
    # {"type": "image", "image_url", "detail", "file_id"} and input_file as
    # {"type": "file", "file_id", "filename", "file_data"}.
    content = [
        {"type": "text", "text": "What are these?"},
        {
            "type": "image",
            "image_url": "https://example.com/a.png",
            "detail": "auto",
            "file_id": None,
        },
        {"type": "image", "image_url": None, "detail": "auto", "file_id": "file-img"},
        {
            "type": "file",
            "file_id": None,
            "filename": "a.pdf",
            "file_data": "data:application/pdf;base64," + b64(b"%PDF-1.4\n"),
        },
        {"type": "file", "file_id": "file-doc", "filename": "b.pdf", "file_data": None},
    ]
    f = fact(
        {
            "gen_ai.system": "openai",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": orjson.dumps(content).decode(),
        }
    )
    assert f.input_messages == [
        Message(
            "user",
            [
                TextPart("What are these?"),
                UriPart(modality="image", mime_type=None, uri="https://example.com/a.png"),
                FilePart(modality="image", mime_type=None, file_id="file-img"),
                blob(b"%PDF-1.4\n", "application/pdf", "document"),
                FilePart(modality="document", mime_type="application/pdf", file_id="file-doc"),
            ],
        )
    ]
    assert f.degradations == {"content_reference": 3}


def test_a_replayed_computer_call_and_its_screenshot() -> None:
    # traceloop's responses wrapper writes a computer_call input item as an assistant message
    # holding json.dumps({id, call_id, action}), and its computer_call_output as role
    # "computer-call" holding only the screenshot as an image_url block.
    shot = f"data:image/png;base64,{b64(PNG)}"
    f = fact(
        {
            "gen_ai.system": "openai",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "Open the browser.",
            "gen_ai.prompt.1.role": "assistant",
            "gen_ai.prompt.1.content": orjson.dumps(
                {"id": "cu_1", "call_id": "call_1", "action": {"type": "screenshot"}}
            ).decode(),
            "gen_ai.prompt.2.role": "computer-call",
            "gen_ai.prompt.2.content": orjson.dumps(
                [{"type": "image_url", "image_url": {"url": shot}}]
            ).decode(),
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.id": "call_2",
            "gen_ai.completion.0.tool_calls.0.name": "computer_call",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"type": "click", "x": 1, "y": 2}',
        }
    )
    # As the Responses translator reads the same items: the computer tool called with its
    # action, and a tool message with the screenshot's result and the image after it.
    assert f.input_messages == [
        Message("user", [TextPart("Open the browser.")]),
        Message("assistant", [ToolCallPart("call_1", "computer", {"type": "screenshot"})]),
        Message(
            "tool",
            [
                ToolCallResponsePart("call_1", {"type": "computer_screenshot"}),
                blob(PNG, "image/png", "image"),
            ],
        ),
    ]
    assert f.output_messages == [
        Message(
            "assistant", [ToolCallPart("call_2", "computer", {"type": "click", "x": 1, "y": 2})]
        )
    ]
    assert f.degradations == {}


def test_computer_call_forms_from_a_trace_store_and_json_answers() -> None:
    shot = [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}}]
    f = fact(
        {
            "gen_ai.prompt.0.role": "assistant",
            "gen_ai.prompt.0.content": {"call_id": "call_1", "action": {"type": "screenshot"}},
            "gen_ai.prompt.1.role": "computer-call",
            "gen_ai.prompt.1.content": shot,  # handed back parsed
            "gen_ai.prompt.2.role": "assistant",
            "gen_ai.prompt.2.content": '{"action": "search"}',  # JSON text, not a computer call
        }
    )
    assert f.input_messages == [
        Message("assistant", [ToolCallPart("call_1", "computer", {"type": "screenshot"})]),
        Message(
            "tool",
            [
                ToolCallResponsePart("call_1", {"type": "computer_screenshot"}),
                blob(PNG, "image/png", "image"),
            ],
        ),
        Message("assistant", [TextPart('{"action": "search"}')]),
    ]
    assert f.degradations == {}


@given(st.text(min_size=1), st.text(min_size=1))
def test_random_text_documents_match_the_anthropic_translator(data: str, chunk: str) -> None:
    content = [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": data}},
        {
            "type": "document",
            "source": {"type": "content", "content": [{"type": "text", "text": chunk}]},
        },
    ]
    f = fact(
        {"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": orjson.dumps(content).decode()}
    )
    assert f.input_messages == _anthropic_input(content)
    assert f.degradations == {}
