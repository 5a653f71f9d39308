"""Anthropic media and server tools (issue 16): images and documents, what tools return, the
tools the API runs itself; in requests, responses and streams, and across a replay."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import msgspec
import orjson
from hypothesis import given
from hypothesis import strategies as st

from lithify.derive.segments import segment_session
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
from lithify.translate import anthropic, translate_document
from tests.conftest import CORPUS, RECORDED
from tests.helpers import assert_valid_messages
from tests.test_anthropic import fact, req, resp, stream_of, text, tool_use, user

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
PNG64 = base64.b64encode(PNG).decode()


def image(data: str = PNG64, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def blob(raw: bytes, mime: str | None, modality: str) -> BlobPart:
    return BlobPart(
        modality=modality,
        mime_type=mime,
        size=len(raw),
        sha256=hashlib.sha256(raw).hexdigest(),
        content=base64.b64encode(raw).decode(),
    )


# --- images and documents ---------------------------------------------------------------------


def test_image_sources_give_blob_uri_and_file_parts() -> None:
    url = {"type": "image", "source": {"type": "url", "url": "https://x.org/y.png"}}
    file = {"type": "image", "source": {"type": "file", "file_id": "file_011"}}
    # Base64 with line breaks is the same bytes, written back canonically.
    wrapped = image(PNG64[:8] + "\n" + PNG64[8:])
    f = fact(req(user(text("look"), image(), url, file, wrapped)))
    assert f.input_messages == [
        Message(
            "user",
            [
                TextPart("look"),
                blob(PNG, "image/png", "image"),
                UriPart(modality="image", mime_type=None, uri="https://x.org/y.png"),
                FilePart(modality="image", mime_type=None, file_id="file_011"),
                blob(PNG, "image/png", "image"),
            ],
        )
    ]
    assert f.degradations == {"content_reference": 2}


def test_document_sources() -> None:
    pdf = b"%PDF-1.4 tiny"
    docs = [
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(pdf).decode(),
            },
        },
        {"type": "document", "source": {"type": "url", "url": "https://x.org/a.pdf"}},
        {"type": "document", "source": {"type": "file", "file_id": "file_022"}},
        # A plain-text document is a document the model read, not words of the turn.
        {
            "type": "document",
            "title": "Notes",
            "context": "about grass",
            "source": {"type": "text", "media_type": "text/plain", "data": "Grass is green. ☘"},
        },
        # A document of content blocks gives their own parts.
        {
            "type": "document",
            "source": {"type": "content", "content": [text("chunk one"), image()]},
        },
    ]
    f = fact(req(user(*docs)))
    assert f.input_messages[0].parts == [
        blob(pdf, "application/pdf", "document"),
        UriPart(modality="document", mime_type=None, uri="https://x.org/a.pdf"),
        FilePart(modality="document", mime_type=None, file_id="file_022"),
        blob("Grass is green. ☘".encode(), "text/plain", "document"),
        TextPart("chunk one"),
        blob(PNG, "image/png", "image"),
    ]
    assert f.degradations == {"content_reference": 2}


def test_base64_that_does_not_decode_is_counted_and_kept_on_raw() -> None:
    bad = image("not base64!")
    f = fact(req(user(text("look"), bad, {"type": "image", "source": {"type": "base64"}})))
    assert f.input_messages[0].parts == [TextPart("look")]
    assert f.degradations == {"malformed_media": 2}
    assert f.raw["request"]["messages"][0]["content"][1] == bad


def test_unknown_source_and_missing_source_are_counted() -> None:
    odd = {"type": "image", "source": {"type": "hologram"}}
    f = fact(req(user(odd, {"type": "document"})))
    assert f.input_messages == [Message("user", [])]
    assert f.degradations == {"unsupported_content": 1, "malformed_messages": 1}


def test_corpus_pdf_and_image_url() -> None:
    doc = orjson.loads((CORPUS / "anthropic/pdf_document_base64.request.json").read_bytes())
    data = doc["messages"][0]["content"][1]["source"]["data"]
    f = fact(doc)
    part = f.input_messages[0].parts[1]
    assert isinstance(part, BlobPart)
    raw = base64.b64decode(data)
    assert raw.startswith(b"%PDF-")
    assert (part.modality, part.mime_type, part.size) == ("document", "application/pdf", len(raw))
    assert part.sha256 == hashlib.sha256(raw).hexdigest()
    assert f.degradations == {}
    img = fact(orjson.loads((CORPUS / "anthropic/image_url.request.json").read_bytes()))
    assert isinstance(img.input_messages[0].parts[1], UriPart)
    assert img.degradations == {"content_reference": 1}


# --- what a tool returned -----------------------------------------------------------------------


def screenshot_turn() -> list[dict[str, Any]]:
    call = tool_use("toolu_1", "computer", {"action": "screenshot"})
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [text("Took a screenshot."), image(), text("1024x768")],
    }
    return [
        user(text("Open the settings.")),
        {"role": "assistant", "content": [call]},
        user(result, text("Go on.")),
    ]


def test_a_screenshot_follows_its_tool_result() -> None:
    f = fact(req(*screenshot_turn()))
    assert f.input_messages[2:] == [
        Message(
            "tool",
            [
                # The result is the content without its media, which follow it in order.
                ToolCallResponsePart("toolu_1", [text("Took a screenshot."), text("1024x768")]),
                blob(PNG, "image/png", "image"),
            ],
        ),
        Message("user", [TextPart("Go on.")]),
    ]
    assert f.degradations == {}


def test_media_only_result_is_an_empty_list_and_a_string_stays_a_string() -> None:
    only = {"type": "tool_result", "tool_use_id": "t1", "content": [image(), image()]}
    string = {"type": "tool_result", "tool_use_id": "t2", "content": "plain"}
    pdf = {"type": "document", "source": {"type": "url", "url": "https://x.org/r.pdf"}}
    with_doc = {"type": "tool_result", "tool_use_id": "t3", "content": [pdf]}
    f = fact(req(user(only, string, with_doc)))
    png = blob(PNG, "image/png", "image")
    assert f.input_messages == [
        Message("tool", [ToolCallResponsePart("t1", []), png, png]),
        Message("tool", [ToolCallResponsePart("t2", "plain")]),
        Message(
            "tool",
            [
                ToolCallResponsePart("t3", []),
                UriPart(modality="document", mime_type=None, uri="https://x.org/r.pdf"),
            ],
        ),
    ]
    assert f.degradations == {"content_reference": 1}


def test_orphan_result_id_is_made_of_the_content_as_sent() -> None:
    first = fact(req(user({"type": "tool_result", "content": [text("a"), image()]})))
    other = fact(req(user({"type": "tool_result", "content": [text("a"), image("AAAA")]})))
    a, b = first.input_messages[0].parts[0], other.input_messages[0].parts[0]
    assert isinstance(a, ToolCallResponsePart) and isinstance(b, ToolCallResponsePart)
    assert a.result == b.result and a.id != b.id
    assert first.degradations == {"orphan_tool_response": 1}


# --- server tools -----------------------------------------------------------------------------

SEARCH_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_01",
    "name": "web_search",
    "input": {"query": "claude shannon birth date"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
            "title": "Claude Shannon - Wikipedia",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAw",
            "page_age": "April 30, 2025",
        }
    ],
}
CITED = {
    "type": "text",
    "text": "Claude Shannon was born on April 30, 1916.",
    "citations": [
        {
            "type": "web_search_result_location",
            "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
            "title": "Claude Shannon - Wikipedia",
            "encrypted_index": "Eo8BCioIAhgB",
            "cited_text": "Claude Elwood Shannon (April 30, 1916 – February 24, 2001)",
        }
    ],
}
FETCH_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_02",
    "name": "web_fetch",
    "input": {"url": "https://example.com/a"},
}
FETCH_RESULT = {
    "type": "web_fetch_tool_result",
    "tool_use_id": "srvtoolu_02",
    "content": {
        "type": "web_fetch_result",
        "url": "https://example.com/a",
        "content": {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Example."},
            "title": "Example",
        },
        "retrieved_at": "2025-08-25T10:30:00Z",
    },
}
CODE_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_03",
    "name": "code_execution",
    "input": {"code": "print(2 + 2)"},
}
CODE_RESULT = {
    "type": "code_execution_tool_result",
    "tool_use_id": "srvtoolu_03",
    "content": {
        "type": "code_execution_result",
        "stdout": "4\n",
        "stderr": "",
        "return_code": 0,
        "content": [],
    },
}
EDIT_RESULT = {
    "type": "text_editor_code_execution_tool_result",
    "tool_use_id": "srvtoolu_04",
    "content": {"type": "text_editor_code_execution_view_result", "content": "x = 1\n"},
}
MCP_CALL = {
    "type": "mcp_tool_use",
    "id": "mcptoolu_01",
    "name": "echo",
    "server_name": "example-mcp",
    "input": {"message": "hi"},
}
MCP_RESULT = {
    "type": "mcp_tool_result",
    "tool_use_id": "mcptoolu_01",
    "is_error": False,
    "content": [{"type": "text", "text": "hi"}],
}


def test_server_tools_are_parts_in_block_order() -> None:
    blocks = [
        text("Searching."),
        SEARCH_CALL,
        SEARCH_RESULT,
        CITED,
        FETCH_CALL,
        FETCH_RESULT,
        CODE_CALL,
        CODE_RESULT,
        EDIT_RESULT,
        MCP_CALL,
        MCP_RESULT,
    ]
    f = fact(req(user(text("When was Shannon born?"))), resp(*blocks))
    assert f.output_messages[0].parts == [
        TextPart("Searching."),
        ServerToolCallPart("srvtoolu_01", "web_search", SEARCH_CALL),
        ServerToolCallResponsePart("srvtoolu_01", SEARCH_RESULT),
        TextPart(CITED["text"]),
        ServerToolCallPart("srvtoolu_02", "web_fetch", FETCH_CALL),
        ServerToolCallResponsePart("srvtoolu_02", FETCH_RESULT),
        ServerToolCallPart("srvtoolu_03", "code_execution", CODE_CALL),
        ServerToolCallResponsePart("srvtoolu_03", CODE_RESULT),
        ServerToolCallResponsePart("srvtoolu_04", EDIT_RESULT),
        ServerToolCallPart("mcptoolu_01", "echo", MCP_CALL),
        ServerToolCallResponsePart("mcptoolu_01", MCP_RESULT),
    ]
    # Opaque search state stays inside the result, unaltered; the citation is counted.
    assert f.degradations == {"text_citation": 1}


def test_server_tool_without_id_keeps_a_null_id_and_bad_input_is_counted() -> None:
    call = {"type": "server_tool_use", "name": "web_search", "input": "{not json"}
    f = fact(None, resp(call))
    assert f.output_messages[0].parts == [
        ServerToolCallPart(None, "web_search", {**call, "input": {}})
    ]
    assert f.degradations == {"malformed_arguments": 1}
    assert f.raw["response"]["content"][0]["input"] == "{not json"


def test_container_upload_is_a_file() -> None:
    f = fact(req(user(text("Analyse this."), {"type": "container_upload", "file_id": "file_9"})))
    assert f.input_messages[0].parts[1] == FilePart(
        modality="document", mime_type=None, file_id="file_9"
    )
    assert f.degradations == {"content_reference": 1}


def test_streamed_web_search_equals_the_plain_message() -> None:
    # (stream_of streams a text's words, not its citations: those are tested in test_anthropic)
    answer = text(CITED["text"])
    message = resp(text("Searching."), SEARCH_CALL, SEARCH_RESULT, answer, CODE_CALL, CODE_RESULT)
    request = req(user(text("When was Shannon born?")))
    plain = fact(request, message)
    for seed in range(3):
        streamed = fact(request, stream_of(message, seed))
        assert msgspec.structs.replace(streamed, raw=None) == msgspec.structs.replace(
            plain, raw=None
        )
    assert plain.output_messages[0].parts[1] == ServerToolCallPart(
        "srvtoolu_01", "web_search", SEARCH_CALL
    )


# --- call N's output is its replay in call N+1's input --------------------------------------


def replay(first: InferenceCall, answer: dict[str, Any], *more: dict[str, Any]) -> InferenceCall:
    """The next call: the first call's messages, its answer as the client sends it back."""
    messages = first.raw["request"]["messages"]
    return fact(req(*messages, {"role": "assistant", "content": answer["content"]}, *more))


def test_server_tool_turn_and_screenshot_replay_exactly() -> None:
    answer = resp(text("Searching."), SEARCH_CALL, SEARCH_RESULT, CITED, MCP_CALL, MCP_RESULT)
    first = fact(req(*screenshot_turn()), answer)
    second = replay(first, answer, user(text("Thanks."), image()))
    n = len(first.input_messages)
    assert second.input_messages[:n] == first.input_messages
    out = first.output_messages[0]
    assert second.input_messages[n] == Message("assistant", out.parts)
    assert second.input_messages[n + 1].parts[1] == blob(PNG, "image/png", "image")


# A response's content blocks, drawn: text, client and server tool calls, their results, media.
_ids = st.sampled_from(["srvtoolu_a", "srvtoolu_b", "mcptoolu_c"])
_inputs = st.dictionaries(
    st.sampled_from(["query", "code", "url"]), st.text(max_size=6), max_size=2
)
_answer_blocks = st.one_of(
    st.text(min_size=1, max_size=8).map(text),
    st.builds(
        lambda i, n, a: tool_use(i, n, a),
        st.sampled_from(["toolu_1", "toolu_2"]),
        st.sampled_from(["f", "g"]),
        _inputs,
    ),
    st.builds(
        lambda i, n, a: {"type": "server_tool_use", "id": i, "name": n, "input": a},
        _ids,
        st.sampled_from(["web_search", "web_fetch", "code_execution"]),
        _inputs,
    ),
    st.builds(
        lambda i, a: {
            "type": "mcp_tool_use",
            "id": i,
            "name": "echo",
            "server_name": "s",
            "input": a,
        },
        _ids,
        _inputs,
    ),
    st.builds(
        lambda kind, i, out: {
            "type": kind,
            "tool_use_id": i,
            "content": {"type": "r", "stdout": out},
        },
        st.sampled_from(
            ["web_search_tool_result", "code_execution_tool_result", "web_fetch_tool_result"]
        ),
        _ids,
        st.text(max_size=6),
    ),
)
_media_blocks = st.one_of(
    st.binary(min_size=1, max_size=12).map(lambda b: image(base64.b64encode(b).decode())),
    st.sampled_from(["https://x.org/1.png", "https://x.org/2.png"]).map(
        lambda u: {"type": "image", "source": {"type": "url", "url": u}}
    ),
    st.sampled_from(["file_1", "file_2"]).map(
        lambda i: {"type": "document", "source": {"type": "file", "file_id": i}}
    ),
)


@given(
    st.lists(_answer_blocks, min_size=1, max_size=6),
    st.lists(_media_blocks, max_size=3),
    st.integers(0, 9),
)
def test_every_answer_replays_as_itself(
    blocks: list[dict[str, Any]], media: list[dict[str, Any]], seed: int
) -> None:
    """Whatever an answer holds, streamed or not, the next call's history holds it again."""
    request = req(user(text("q"), *media))
    answer = resp(*blocks)
    first = fact(request, answer)
    streamed = fact(request, stream_of(answer, seed))
    assert streamed.output_messages == first.output_messages
    calls = [b for b in blocks if b["type"] == "tool_use"]
    results = [{"type": "tool_result", "tool_use_id": b["id"], "content": [text("ok"), *media]} for b in calls]  # fmt: skip
    second = replay(first, answer, *([user(*results)] if results else []))
    n = len(first.input_messages)
    assert second.input_messages[:n] == first.input_messages
    assert second.input_messages[n] == Message("assistant", first.output_messages[0].parts)
    for m in second.input_messages[n + 1 :]:
        assert m.role == "tool"
        assert isinstance(m.parts[0], ToolCallResponsePart)
        assert m.parts[0].result == [text("ok")]
        assert len(m.parts) == 1 + len(media)
    kinds = {type(p) for p in first.output_messages[0].parts}
    assert kinds <= {TextPart, ToolCallPart, ServerToolCallPart, ServerToolCallResponsePart}
    assert "unsupported_content" not in first.degradations


def test_no_unsupported_content_left_for_documented_media_and_tools() -> None:
    blocks = [SEARCH_CALL, SEARCH_RESULT, FETCH_CALL, FETCH_RESULT, CODE_CALL, CODE_RESULT]
    blocks += [EDIT_RESULT, MCP_CALL, MCP_RESULT]
    f = fact(req(user(image(), {"type": "document", "source": {"type": "text", "data": "x"}})), resp(*blocks))  # fmt: skip
    assert "unsupported_content" not in f.degradations
    assert_valid_messages(f)
    # Every part survives a JSON round trip through the fact's own form.
    again = msgspec.json.decode(msgspec.json.encode(f), type=InferenceCall)
    assert again == f
    assert json.loads(msgspec.json.encode(f))["output_messages"][0]["parts"][0]["type"] == "server_tool_call"  # fmt: skip
    assert anthropic.translate(f.raw["request"], f.raw["response"]) == f


# --- recorded with the anthropic SDK (tests/recorded/anthropic_gemini_media.py) ---------------


def recorded(name: str) -> InferenceCall:
    doc = orjson.loads((RECORDED / "anthropic" / f"{name}.exchange.json").read_bytes())
    (result,) = translate_document(doc)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def test_recorded_image_input_plain_and_streamed() -> None:
    plain, streamed = recorded("image_input"), recorded("image_input_streaming")
    assert plain.input_messages == streamed.input_messages
    _, png, url = plain.input_messages[0].parts
    assert isinstance(png, BlobPart) and png.mime_type == "image/png" and png.size == 73
    assert isinstance(url, UriPart) and url.modality == "image"
    assert plain.degradations == streamed.degradations == {"content_reference": 1}


def test_recorded_computer_use_screenshot_follows_the_result_and_turn1_replays() -> None:
    turn1, turn2 = recorded("computer_use_turn1"), recorded("computer_use_turn2")
    assert turn2.input_messages[:2] == [
        *turn1.input_messages,
        Message("assistant", turn1.output_messages[0].parts),
    ]
    response, shot = turn2.input_messages[2].parts
    assert isinstance(response, ToolCallResponsePart) and response.result == [text("Screenshot taken.")]  # fmt: skip
    assert isinstance(shot, BlobPart) and shot.modality == "image"
    assert response.id == turn1.output_messages[0].parts[1].id  # type: ignore[union-attr]
    # The computer tool is Anthropic's own definition, not a function schema.
    assert turn2.degradations == {}
    assert [t.name for t in turn2.tools if t.builtin] == ["computer"]


def test_recorded_web_search_plain_streamed_and_replayed() -> None:
    plain, streamed = recorded("web_search"), recorded("web_search_streaming")
    assert msgspec.structs.replace(plain, raw=None) == msgspec.structs.replace(streamed, raw=None)
    kinds = [type(p).__name__ for p in plain.output_messages[0].parts]
    assert kinds == ["TextPart", "ServerToolCallPart", "ServerToolCallResponsePart", "TextPart"]
    replay = recorded("web_search_replay")
    assert replay.input_messages[1] == Message("assistant", plain.output_messages[0].parts)
    assert plain.degradations == {"text_citation": 1}
    assert [t.name for t in plain.tools if t.builtin] == ["web_search"]


def _in_session(name: str, second: int) -> InferenceCall:
    doc = orjson.loads((RECORDED / "anthropic" / f"{name}.exchange.json").read_bytes())
    at = f"2026-01-01T00:00:0{second}.000000000Z"
    result = anthropic.translate(doc["request"], doc["response"], meta={"session_id": "s", "observed_at": at})  # fmt: skip
    assert isinstance(result, InferenceCall)
    return result


def test_recorded_turns_continue_one_segment() -> None:
    """Derivation proves continuity by exact replay: screenshots and server tools do not break it."""
    for first, second in (("computer_use_turn1", "computer_use_turn2"), ("web_search", "web_search_replay")):  # fmt: skip
        (segment,) = segment_session("s", [_in_session(first, 1), _in_session(second, 2)])
        assert len(segment.turns) == 2 and segment.split_reason is None


# --- MCP tool listings and documents of content blocks in tool results (audit C) -------------

# `BetaMCPToolListingBlock` (beta): the tools the API fetched from an MCP server for this turn.
LISTING = {
    "type": "mcp_tool_listing",
    "mcp_server_name": "github",
    "tools": [
        {
            "name": "create_issue",
            "description": "Open an issue",
            "input_schema": {"type": "object", "properties": {"title": {"type": "string"}}},
        }
    ],
}


def test_an_mcp_tool_listing_is_a_server_tool_call_and_its_response() -> None:
    answer = resp(LISTING, MCP_CALL, MCP_RESULT, text("Opened."))
    request = req(user(text("File a bug.")))
    plain = fact(request, answer)
    # As the Responses translator gives an `mcp_list_tools` item: the call is the block less
    # its tools, the response the tools; the block has no id.
    call = {"type": "mcp_tool_listing", "mcp_server_name": "github"}
    assert plain.output_messages[0].parts == [
        ServerToolCallPart(None, "mcp_list_tools", call),
        ServerToolCallResponsePart(None, {"type": "mcp_tool_listing", "tools": LISTING["tools"]}),
        ServerToolCallPart("mcptoolu_01", "echo", MCP_CALL),
        ServerToolCallResponsePart("mcptoolu_01", MCP_RESULT),
        TextPart("Opened."),
    ]
    assert plain.degradations == {}
    # Streamed, the block comes whole in content_block_start.
    for seed in range(3):
        streamed = fact(request, stream_of(answer, seed))
        assert msgspec.structs.replace(streamed, raw=None) == msgspec.structs.replace(
            plain, raw=None
        )
    # The client sends the turn back unchanged, the listing included.
    second = replay(plain, answer, user(text("Thanks.")))
    assert second.input_messages[1] == Message("assistant", plain.output_messages[0].parts)
    assert second.degradations == {}
    # A listing without tools gives its call alone.
    bare = {"type": "mcp_tool_listing", "mcp_server_name": "github"}
    assert fact(None, resp(bare)).output_messages[0].parts == [
        ServerToolCallPart(None, "mcp_list_tools", bare)
    ]


def test_a_document_of_content_blocks_stays_in_its_tool_result() -> None:
    clause = {
        "type": "document",
        "title": "Contract",
        "source": {"type": "content", "content": [text("Clause 4: payment in 30 days."), image()]},
    }
    pdf = b"%PDF-1.4 tiny"
    pdf_doc = {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.b64encode(pdf).decode(),
        },
    }
    content = [text("Found:"), clause, pdf_doc, image()]
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": content}
    call = tool_use("toolu_1", "fetch", {})
    f = fact(req(user(text("q")), {"role": "assistant", "content": [call]}, user(result)))
    # What the tool returned as text (and the images inside it) is the result, as a search
    # result's is; only documents and images that are media follow it.
    assert f.input_messages[2] == Message(
        "tool",
        [
            ToolCallResponsePart("toolu_1", [text("Found:"), clause]),
            blob(pdf, "application/pdf", "document"),
            blob(PNG, "image/png", "image"),
        ],
    )
    assert f.degradations == {}
    only = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [clause]}
    g = fact(req(user(text("q")), {"role": "assistant", "content": [call]}, user(only)))
    assert g.input_messages[2] == Message("tool", [ToolCallResponsePart("toolu_1", [clause])])
    # Outside a tool result, the same document still gives its blocks' own parts.
    h = fact(req(user(clause)))
    assert h.input_messages == [
        Message(
            "user", [TextPart("Clause 4: payment in 30 days."), blob(PNG, "image/png", "image")]
        )
    ]
