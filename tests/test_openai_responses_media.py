"""OpenAI Responses: media inputs, client-side tool items (computer use, shells, patches) and
server-side tool items (issue 16), in bodies, streams and replays."""

from __future__ import annotations

import base64
import hashlib
import itertools
from typing import Any

import msgspec
import orjson
import pytest
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
from lithify.translate import openai_responses, translate_document
from lithify.translate.sse import SSEEvent, iter_events
from tests.conftest import RECORDED
from tests.helpers import assert_valid_messages

PNG = b"\x89PNG\r\n\x1a\nnot really a png, but bytes all the same"
PNG64 = base64.b64encode(PNG).decode()
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"


def blob(data: bytes, mime: str | None, modality: str) -> BlobPart:
    return BlobPart(
        modality=modality,
        mime_type=mime,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        content=base64.b64encode(data).decode(),
    )


def fact(request: Any, response: Any = None) -> InferenceCall:
    result = openai_responses.translate(request, response)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def resp(*output: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_media",
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "model": "gpt-x",
        "output": list(output),
    }


def user(*content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": list(content)}


def sse(*events: dict[str, Any]) -> list[SSEEvent]:
    return [SSEEvent(e["type"], orjson.dumps(e).decode()) for e in events]


def stream_of(body: dict[str, Any], *, final: bool = True) -> list[SSEEvent]:
    """A body as the API streams it: created, each item added then done, completed."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**body, "status": "in_progress", "output": []}}
    ]
    for n, item in enumerate(body["output"]):
        events.append({"type": "response.output_item.added", "output_index": n, "item": item})
        events.append({"type": "response.output_item.done", "output_index": n, "item": item})
    if final:
        events.append({"type": "response.completed", "response": body})
    return sse(*events)


# --- media inputs ------------------------------------------------------------------------------


def test_input_image_data_url_http_url_and_file_id() -> None:
    f = fact(
        {
            "input": [
                user(
                    {"type": "input_text", "text": "compare"},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG64}"},
                    {
                        "type": "input_image",
                        "image_url": "https://example.com/b.jpg",
                        "detail": "high",
                    },
                    {"type": "input_image", "file_id": "file-img", "detail": "low"},
                )
            ]
        }
    )
    assert f.input_messages == [
        Message(
            "user",
            [
                TextPart("compare"),
                blob(PNG, "image/png", "image"),
                UriPart("image", None, "https://example.com/b.jpg"),
                FilePart("image", None, "file-img"),
            ],
        )
    ]
    # The uri and the file are references; the data URL carried its bytes.
    assert f.degradations == {"content_reference": 2}


def test_input_file_data_url_bare_base64_url_and_id() -> None:
    pdf64 = base64.b64encode(PDF).decode()
    f = fact(
        {
            "input": [
                user(
                    {"type": "input_file", "filename": "a.pdf", "file_data": f"data:application/pdf;base64,{pdf64}"},
                    {"type": "input_file", "filename": "Notes.PDF", "file_data": pdf64},
                    {"type": "input_file", "file_url": "https://example.com/report.pdf"},
                    {"type": "input_file", "filename": "b.csv", "file_id": "file-csv"},
                    {"type": "input_file", "filename": "noext", "file_data": pdf64},
                    # The data URL's own type wins over the name's.
                    {"type": "input_file", "filename": "x.txt", "file_data": f"data:application/pdf;base64,{pdf64}"},
                )
            ]
        }
    )  # fmt: skip
    assert f.input_messages[0].parts == [
        blob(PDF, "application/pdf", "document"),
        blob(PDF, "application/pdf", "document"),
        UriPart("document", None, "https://example.com/report.pdf"),
        FilePart("document", "text/csv", "file-csv"),
        blob(PDF, None, "document"),
        blob(PDF, "application/pdf", "document"),
    ]
    assert f.degradations == {"content_reference": 2}


def test_input_audio() -> None:
    data = base64.b64encode(WAV).decode()
    f = fact(
        {
            "input": [
                user(
                    {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}},
                    {"type": "input_audio", "input_audio": {"data": data, "format": "mp3"}},
                )
            ]
        }
    )
    assert f.input_messages[0].parts == [
        blob(WAV, "audio/wav", "audio"),
        blob(WAV, "audio/mpeg", "audio"),
    ]
    assert f.degradations == {}


def test_broken_media_is_counted_and_kept_on_raw() -> None:
    req = {
        "input": [
            user(
                {"type": "input_image", "image_url": "data:image/png;base64,@@not base64@@"},
                {"type": "input_image", "detail": "auto"},
                {"type": "input_file", "filename": "x.pdf"},
                {"type": "input_audio", "input_audio": {"format": "wav"}},
                {"type": "input_audio", "input_audio": {"data": "!!", "format": "wav"}},
            )
        ]
    }
    f = fact(req)
    assert f.input_messages == [Message("user", [])]
    assert f.degradations == {"malformed_media": 2, "malformed_messages": 3}
    assert f.raw["request"] == req


def test_function_output_with_media_is_a_result_then_its_media() -> None:
    """A tool message is one tool_call_response part and the media the tool returned: images
    and files in a function's output list follow the rest of the list, which is the result."""
    text = {"type": "input_text", "text": "the chart:"}
    image = {"type": "input_image", "image_url": f"data:image/png;base64,{PNG64}", "detail": "auto"}
    f = fact(
        {
            "input": [
                {"type": "function_call", "call_id": "c1", "name": "plot", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": [text, image, {"type": "input_file", "file_id": "file-9"}]},
                {"type": "function_call", "call_id": "c2", "name": "plot", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c2", "output": [image]},
            ]
        }
    )  # fmt: skip
    assert f.input_messages[1] == Message(
        "tool",
        [ToolCallResponsePart("c1", [text]), blob(PNG, "image/png", "image"), FilePart("document", None, "file-9")],
    )  # fmt: skip
    assert f.input_messages[3] == Message(
        "tool", [ToolCallResponsePart("c2", []), blob(PNG, "image/png", "image")]
    )
    assert f.degradations == {"content_reference": 1}


# --- client-side tools -------------------------------------------------------------------------

SAFETY = [{"id": "sc_1", "code": "malicious_instructions", "message": "careful"}]
COMPUTER_CALL = {
    "id": "cu_1",
    "type": "computer_call",
    "call_id": "call_cu",
    "action": {"type": "click", "button": "left", "x": 10, "y": 20},
    "pending_safety_checks": SAFETY,
    "status": "completed",
}


def screenshot(**output: Any) -> dict[str, Any]:
    return {
        "type": "computer_call_output",
        "call_id": "call_cu",
        "output": {"type": "computer_screenshot", **output},
        "acknowledged_safety_checks": SAFETY,
    }


def test_computer_call_is_a_tool_call_and_its_screenshot_a_tool_message() -> None:
    url = f"data:image/png;base64,{PNG64}"
    f = fact(
        {
            "input": [
                {"role": "user", "content": "click it"},
                COMPUTER_CALL,
                screenshot(image_url=url),
                {**COMPUTER_CALL, "call_id": "call_2"},
                {**screenshot(file_id="file-shot"), "call_id": "call_2"},
                {**COMPUTER_CALL, "call_id": "call_3"},
                {**screenshot(image_url="https://example.com/s.png"), "call_id": "call_3"},
            ]
        },
        resp(COMPUTER_CALL),
    )
    click = {"type": "click", "button": "left", "x": 10, "y": 20}
    shot = {"type": "computer_screenshot"}
    assert f.input_messages[1:] == [
        Message("assistant", [ToolCallPart("call_cu", "computer", click)]),
        Message("tool", [ToolCallResponsePart("call_cu", shot), blob(PNG, "image/png", "image")]),
        Message("assistant", [ToolCallPart("call_2", "computer", click)]),
        Message("tool", [ToolCallResponsePart("call_2", shot), FilePart("image", None, "file-shot")]),
        Message("assistant", [ToolCallPart("call_3", "computer", click)]),
        Message(
            "tool",
            [ToolCallResponsePart("call_3", shot), UriPart("image", None, "https://example.com/s.png")],
        ),
    ]  # fmt: skip
    # A computer call ends the model's turn like a function call; safety checks stay on raw.
    assert f.output_messages == [
        Message("assistant", [ToolCallPart("call_cu", "computer", click)], "tool_call")
    ]
    assert f.degradations == {"content_reference": 2}
    assert (
        "pending_safety_checks" not in orjson.dumps(msgspec.to_builtins(f.output_messages)).decode()
    )
    assert f.raw["response"]["output"][0]["pending_safety_checks"] == SAFETY


def test_computer_call_batched_actions_and_odd_outputs() -> None:
    actions = [{"type": "move", "x": 1, "y": 2}, {"type": "type", "text": "hi"}]
    f = fact(
        {
            "input": [
                {"type": "computer_call", "call_id": "c1", "actions": actions},
                # No image: the result is the output as sent.
                {"type": "computer_call_output", "call_id": "c1", "output": {"type": "computer_screenshot"}},
                {"type": "computer_call", "call_id": "c2", "action": "not an object"},
                {"type": "computer_call_output", "call_id": "c2", "output": "text"},
            ]
        }
    )  # fmt: skip
    assert f.input_messages == [
        Message("assistant", [ToolCallPart("c1", "computer", {"actions": actions})]),
        Message("tool", [ToolCallResponsePart("c1", {"type": "computer_screenshot"})]),
        Message("assistant", [ToolCallPart("c2", "computer", {})]),
        Message("tool", [ToolCallResponsePart("c2", "text")]),
    ]
    assert f.degradations == {"malformed_arguments": 1}


def test_shell_and_patch_calls() -> None:
    exec_ = {"type": "exec", "command": ["ls", "-la"], "env": {}, "working_directory": "/tmp"}
    shell = {"commands": ["pwd"], "timeout_ms": 1000}
    patch = {"type": "update_file", "path": "a.py", "diff": "@@\n-x\n+y\n"}
    shell_out = [{"stdout": "/tmp\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]
    f = fact(
        {
            "input": [
                {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_l", "action": exec_},
                # The reference names the answered call by `id` on this item.
                {"type": "local_shell_call_output", "id": "lsh_1", "output": '{"stdout": "x"}'},
                {"type": "local_shell_call", "id": "lsh_2", "call_id": "call_m", "action": exec_},
                {"type": "local_shell_call_output", "id": "call_m", "output": "y"},
                {"type": "shell_call", "id": "sh_1", "call_id": "call_s", "action": shell},
                {"type": "shell_call_output", "call_id": "call_s", "output": shell_out},
                {"type": "apply_patch_call", "id": "ap_1", "call_id": "call_p", "operation": patch},
                {"type": "apply_patch_call_output", "call_id": "call_p", "status": "completed", "output": "ok"},
            ]
        }
    )  # fmt: skip
    assert f.input_messages == [
        Message("assistant", [ToolCallPart("call_l", "local_shell", exec_)]),
        Message("tool", [ToolCallResponsePart("call_l", '{"stdout": "x"}')]),
        Message("assistant", [ToolCallPart("call_m", "local_shell", exec_)]),
        Message("tool", [ToolCallResponsePart("call_m", "y")]),
        Message("assistant", [ToolCallPart("call_s", "shell", shell)]),
        Message("tool", [ToolCallResponsePart("call_s", shell_out)]),
        Message("assistant", [ToolCallPart("call_p", "apply_patch", patch)]),
        Message("tool", [ToolCallResponsePart("call_p", "ok")]),
    ]
    assert f.degradations == {}


def test_local_shell_output_naming_no_open_call_answers_the_oldest() -> None:
    f = fact(
        {
            "input": [
                {"type": "local_shell_call", "call_id": "call_l", "action": {"type": "exec", "command": ["ls"]}},
                {"type": "local_shell_call_output", "id": "lsh_out_9", "output": "a"},
                {"type": "local_shell_call_output", "output": "b"},
            ]
        }
    )  # fmt: skip
    assert [m.parts[0] for m in f.input_messages[1:]] == [
        ToolCallResponsePart("call_l", "a"),
        ToolCallResponsePart(f.input_messages[2].parts[0].id, "b"),  # type: ignore[union-attr]
    ]
    assert f.degradations == {"orphan_tool_response": 1}


# --- server-side tools -------------------------------------------------------------------------

SEARCH = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "q", "sources": [{"type": "url", "url": "https://a"}]},
}
FILES = {
    "id": "fs_1",
    "type": "file_search_call",
    "status": "completed",
    "queries": ["refund policy"],
    "results": [{"file_id": "file-1", "filename": "p.pdf", "score": 0.9, "text": "30 days"}],
}
CODE = {
    "id": "ci_1",
    "type": "code_interpreter_call",
    "status": "completed",
    "code": "print(1)",
    "container_id": "cntr_1",
    "outputs": [
        {"type": "logs", "logs": "1\n"},
        {"type": "image", "url": "https://c/img.png"},
        {"type": "image", "url": f"data:image/png;base64,{PNG64}"},
    ],
}
IMAGE = {
    "id": "ig_1",
    "type": "image_generation_call",
    "status": "completed",
    "revised_prompt": "a red square",
    "output_format": "png",
    "result": PNG64,
}
MCP_LIST = {
    "id": "mcpl_1",
    "type": "mcp_list_tools",
    "server_label": "deepwiki",
    "tools": [{"name": "ask", "input_schema": {"type": "object"}}],
}
MCP_CALL = {
    "id": "mcp_1",
    "type": "mcp_call",
    "server_label": "deepwiki",
    "name": "ask",
    "arguments": '{"q": "x"}',
    "output": "answer",
    "error": None,
}
APPROVAL = {
    "id": "mcpr_1",
    "type": "mcp_approval_request",
    "server_label": "deepwiki",
    "name": "ask",
    "arguments": "{}",
}


def without(item: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in keys}


SERVER_PARTS = [
    ServerToolCallPart("ws_1", "web_search", SEARCH),
    ServerToolCallPart("fs_1", "file_search", without(FILES, "results")),
    ServerToolCallResponsePart(
        "fs_1", {"type": "file_search_call", "results": FILES["results"]}
    ),
    ServerToolCallPart("ci_1", "code_interpreter", without(CODE, "outputs")),
    ServerToolCallResponsePart(
        "ci_1",
        {"type": "code_interpreter_call", "outputs": [CODE["outputs"][0], {"type": "image"}, {"type": "image"}]},
    ),
    UriPart("image", None, "https://c/img.png"),
    blob(PNG, "image/png", "image"),
    ServerToolCallPart("ig_1", "image_generation", without(IMAGE, "result")),
    ServerToolCallResponsePart("ig_1", {"type": "image_generation_call"}),
    blob(PNG, "image/png", "image"),
    ServerToolCallPart("mcpl_1", "mcp_list_tools", without(MCP_LIST, "tools")),
    ServerToolCallResponsePart("mcpl_1", {"type": "mcp_list_tools", "tools": MCP_LIST["tools"]}),
    ServerToolCallPart("mcp_1", "ask", without(MCP_CALL, "output", "error")),
    ServerToolCallResponsePart("mcp_1", {"type": "mcp_call", "output": "answer"}),
    TextPart("Done."),
]  # fmt: skip
SERVER_ITEMS = [
    SEARCH,
    FILES,
    CODE,
    IMAGE,
    MCP_LIST,
    MCP_CALL,
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
]


def test_server_tools_stay_in_the_assistant_turn_in_item_order() -> None:
    f = fact(None, resp(*SERVER_ITEMS))
    assert f.output_messages == [Message("assistant", SERVER_PARTS, "stop")]
    assert f.degradations == {"content_reference": 1}  # the code's image at a URL
    # Nothing of the provider's items is lost: call and response together are the item again
    # (with the images' URLs and bytes from the parts after the response).
    whole = {}
    for p in SERVER_PARTS:
        if isinstance(p, ServerToolCallPart):
            whole[p.id] = dict(p.server_tool_call)
        elif isinstance(p, ServerToolCallResponsePart):
            whole[p.id].update(p.server_tool_call_response)
    whole["ig_1"]["result"] = PNG64
    whole["ci_1"]["outputs"] = CODE["outputs"]
    whole["mcp_1"]["error"] = None
    assert list(whole.values()) == SERVER_ITEMS[:-1]


def test_server_tools_without_results_give_only_the_call() -> None:
    pending = [
        {**CODE, "status": "in_progress", "outputs": None},
        {**IMAGE, "status": "generating", "result": None},
        {**MCP_CALL, "output": None},
        APPROVAL,
        {"id": "x", "type": "mcp_call"},  # no name: the item's type names it
    ]
    f = fact(None, resp(*pending))
    assert f.output_messages[0].parts == [
        ServerToolCallPart("ci_1", "code_interpreter", without(pending[0], "outputs")),
        ServerToolCallPart("ig_1", "image_generation", without(pending[1], "result")),
        ServerToolCallPart("mcp_1", "ask", without(MCP_CALL, "output", "error")),
        ServerToolCallPart("mcpr_1", "ask", APPROVAL),
        ServerToolCallPart("x", "mcp_call", {"id": "x", "type": "mcp_call"}),
    ]
    assert f.output_messages[0].finish_reason == "stop"


def test_failed_mcp_call_and_bad_image() -> None:
    failed = {**MCP_CALL, "output": None, "error": {"type": "http_error", "code": 500}}
    webp = {
        **IMAGE,
        "output_format": None,
        "result": base64.b64encode(b"RIFF0000WEBPVP8 ").decode(),
    }
    broken = {**IMAGE, "id": "ig_2", "result": "@@@"}
    f = fact(None, resp(failed, webp, broken))
    parts = f.output_messages[0].parts
    assert parts[1] == ServerToolCallResponsePart(
        "mcp_1", {"type": "mcp_call", "error": failed["error"]}
    )
    assert isinstance(parts[4], BlobPart) and parts[4].mime_type == "image/webp"
    # Undecodable image data: the call and its response stand, the bytes stay on raw.
    assert parts[5:] == [
        ServerToolCallPart("ig_2", "image_generation", without(broken, "result")),
        ServerToolCallResponsePart("ig_2", {"type": "image_generation_call"}),
    ]
    assert f.degradations == {"malformed_media": 1}


def test_mcp_tool_schemas_keep_credential_named_properties() -> None:
    """An MCP server's tools, listed in mcp_list_tools, are tool definitions: their
    input_schema names arguments (``password``), which are no credentials."""
    schema = {
        "type": "object",
        "properties": {"password": {"type": "string"}, "api_key": {"type": "string"}},
    }
    listing = {**MCP_LIST, "tools": [{"name": "login", "input_schema": schema}]}
    f = fact(None, resp(listing))
    assert f.output_messages[0].parts[1] == ServerToolCallResponsePart(
        "mcpl_1", {"type": "mcp_list_tools", "tools": [{"name": "login", "input_schema": schema}]}
    )
    assert f.degradations == {}
    assert f.raw["response"]["output"][0] == listing


def test_tool_search_run_by_the_provider_or_by_the_client() -> None:
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    server_call = {
        "id": "tsc_1",
        "type": "tool_search_call",
        "execution": "server",
        "arguments": {"q": "weather"},
        "status": "completed",
    }
    server_out = {
        "id": "tso_1",
        "type": "tool_search_output",
        "execution": "server",
        "tools": tools,
        "status": "completed",
    }
    client_call = {
        "id": "tsc_2",
        "type": "tool_search_call",
        "call_id": "call_ts",
        "execution": "client",
        "arguments": {"q": "files"},
    }
    client_out = {
        "type": "tool_search_output",
        "call_id": "call_ts",
        "execution": "client",
        "tools": tools,
    }
    f = fact(
        {
            "input": [
                {"role": "user", "content": "go"},
                server_call,
                server_out,
                client_call,
                client_out,
            ]
        },
        resp(client_call),
    )
    assert f.input_messages[1:] == [
        Message(
            "assistant",
            [
                ServerToolCallPart("tsc_1", "tool_search", server_call),
                ServerToolCallResponsePart("tso_1", server_out),
                ToolCallPart("call_ts", "tool_search", {"q": "files"}),
            ],
        ),
        Message("tool", [ToolCallResponsePart("call_ts", tools)]),
    ]
    # A search the client must run ends the model's turn as a function call does.
    assert f.output_messages[0].finish_reason == "tool_call"
    assert f.degradations == {}


def test_mcp_approval_response_is_the_users_turn() -> None:
    answer = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    f = fact({"input": [{"role": "user", "content": "ask"}, MCP_LIST, APPROVAL, answer]})
    assert f.input_messages[1:] == [
        Message(
            "assistant",
            [
                ServerToolCallPart("mcpl_1", "mcp_list_tools", without(MCP_LIST, "tools")),
                ServerToolCallResponsePart("mcpl_1", {"type": "mcp_list_tools", "tools": MCP_LIST["tools"]}),
                ServerToolCallPart("mcpr_1", "ask", APPROVAL),
            ],
        ),
        Message("user", [ServerToolCallResponsePart("mcpr_1", answer)]),
    ]  # fmt: skip


def test_streamed_server_tools_equal_the_body_even_when_cut() -> None:
    body = resp(*SERVER_ITEMS)
    plain = fact(None, body)
    streamed = fact(None, stream_of(body))
    assert streamed.output_messages == plain.output_messages
    cut = fact(None, stream_of(body, final=False))
    assert cut.output_messages[0].parts == plain.output_messages[0].parts
    assert cut.degradations == {"content_reference": 1, "truncated_stream": 1}


def test_cut_stream_rebuilds_code_and_mcp_arguments_from_deltas() -> None:
    events = sse(
        {"type": "response.created", "response": {**resp(), "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "ci_1", "type": "code_interpreter_call", "code": "", "container_id": "c"}},
        {"type": "response.code_interpreter_call_code.delta", "output_index": 0, "item_id": "ci_1", "delta": "print("},
        {"type": "response.code_interpreter_call_code.delta", "output_index": 0, "item_id": "ci_1", "delta": "2)"},
        {"type": "response.mcp_call_arguments.delta", "output_index": 1, "item_id": "mcp_1", "delta": '{"q":'},
        {"type": "response.mcp_call_arguments.done", "output_index": 1, "item_id": "mcp_1", "arguments": '{"q": 1}'},
    )  # fmt: skip
    f = fact(None, events)
    assert f.output_messages[0].parts == [
        ServerToolCallPart(
            "ci_1",
            "code_interpreter",
            {
                "id": "ci_1",
                "type": "code_interpreter_call",
                "code": "print(2)",
                "container_id": "c",
            },
        ),
        ServerToolCallPart(
            "mcp_1", "mcp_call", {"type": "mcp_call", "id": "mcp_1", "arguments": '{"q": 1}'}
        ),
    ]
    assert f.output_messages[0].finish_reason is None


# Programmatic tool calling (openai SDK response_output_item.Program / ProgramOutput): the
# JavaScript the model wrote, and what it returned, linked by call_id.
PROGRAM = {
    "type": "program",
    "id": "pg_1",
    "call_id": "call_p",
    "code": "const r = await tools.lookup({q: 'ACME'}); return r.total;",
    "fingerprint": "fp_opaque",
}
PROGRAM_OUTPUT = {
    "type": "program_output",
    "id": "po_1",
    "call_id": "call_p",
    "result": "42",
    "status": "completed",
}


def test_program_and_its_output_are_a_server_tool() -> None:
    """The program is a server_tool_call named ``program``, its output the response with the
    same id; both whole, in the assistant turn, in the answer and in its replay, whole or
    streamed (the items come whole in response.output_item.done: no delta event carries them)."""
    body = resp(PROGRAM, PROGRAM_OUTPUT, text_item("ACME owes 42."))
    parts = [
        ServerToolCallPart("call_p", "program", PROGRAM),
        ServerToolCallResponsePart("call_p", PROGRAM_OUTPUT),
        TextPart("ACME owes 42."),
    ]
    plain = fact(None, body)
    assert plain.output_messages == [Message("assistant", parts, "stop")]
    assert plain.degradations == {}
    streamed = fact(None, stream_of(body))
    assert streamed.output_messages == plain.output_messages
    assert streamed.degradations == {}
    cut = fact(None, stream_of(body, final=False))
    assert cut.output_messages == [Message("assistant", parts, None)]
    assert cut.degradations == {"truncated_stream": 1}
    replay = fact({"input": [{"role": "user", "content": "how much?"}, *body["output"]]})
    assert replay.input_messages[1:] == [Message("assistant", parts)]
    assert replay.degradations == {}


# --- streamed audio ----------------------------------------------------------------------------

PCM = bytes(range(256)) * 3


def spoken_stream(
    transcript: list[str], audio: list[str], *output: dict[str, Any], final: bool = True
) -> list[SSEEvent]:
    """A response streamed with audio (openai SDK ResponseAudioDeltaEvent,
    ResponseAudioTranscriptDeltaEvent, their done events): the events name no item, and the
    response object has no place for audio, so they are all there is of it."""
    body = resp(*output)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "sequence_number": 0, "response": {**body, "status": "in_progress", "output": []}}
    ]  # fmt: skip
    for n, item in enumerate(output):
        events.append({"type": "response.output_item.added", "output_index": n, "item": item})
    for i in range(max(len(transcript), len(audio))):
        if i < len(transcript):
            events.append({"type": "response.audio.transcript.delta", "delta": transcript[i]})
        if i < len(audio):
            events.append({"type": "response.audio.delta", "delta": audio[i]})
    events += [{"type": "response.audio.done"}, {"type": "response.audio.transcript.done"}]
    for n, item in enumerate(output):
        events.append({"type": "response.output_item.done", "output_index": n, "item": item})
    if final:
        events.append({"type": "response.completed", "response": body})
    return sse(*[{**e, "sequence_number": n} for n, e in enumerate(events)])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_streamed_audio_is_its_transcript_then_its_bytes() -> None:
    """As Chat's spoken answer: the transcript as text, then the audio as a blob (MIME type
    null: nothing in a Responses exchange names the format), after the turn's items."""
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": []}  # fmt: skip
    events = spoken_stream(["Hello ", "world"], [b64(PCM[:100]), b64(PCM[100:])], message)
    f = fact(None, events)
    spoken = [TextPart("Hello world"), blob(PCM, None, "audio")]
    assert f.output_messages == [Message("assistant", spoken, "stop")]
    assert f.degradations == {}
    # raw holds the stream's SSE text, and translates again to the same fact.
    again = openai_responses.translate(None, list(iter_events(f.raw["response"])))
    assert again == f
    # With text and a call in the turn, the audio follows them: no event says where it was.
    items = [text_item("Hi."), {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}]  # fmt: skip
    g = fact(None, spoken_stream(["Hello ", "world"], [b64(PCM)], *items))
    assert g.output_messages[0].parts == [TextPart("Hi."), ToolCallPart("c1", "f", {}), *spoken]
    # A stream cut before its final event keeps what it said.
    cut = fact(None, spoken_stream(["Hello ", "world"], [b64(PCM)], message, final=False))
    assert cut.output_messages == [Message("assistant", spoken, None)]
    assert cut.degradations == {"truncated_stream": 1}


def test_streamed_audio_that_does_not_decode_is_counted() -> None:
    f = fact(None, spoken_stream(["Hi"], ["@@@", "!!"]))
    assert f.output_messages == [Message("assistant", [TextPart("Hi")], "stop")]
    assert f.degradations == {"malformed_media": 1}
    bare = fact(None, spoken_stream([], [b64(PCM)]))
    assert bare.output_messages == [Message("assistant", [blob(PCM, None, "audio")], "stop")]


@given(
    st.binary(min_size=1, max_size=64),
    st.lists(st.integers(0, 64), max_size=4),
    st.text(min_size=1, max_size=12),
    st.integers(1, 5),
    st.booleans(),
)
def test_streamed_audio_pieces_join_however_they_are_cut(
    data: bytes, cuts: list[int], transcript: str, step: int, sliced: bool
) -> None:
    """Pieces each base64 of their own (as OpenAI pads them) or slices of one base64 text give
    the same bytes; transcript pieces join as they came."""
    if sliced:
        text = b64(data)
        audio = [text[i : i + step] for i in range(0, len(text), step)]
    else:
        bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
        audio = [b64(data[a:b]) for a, b in itertools.pairwise(bounds)]
    words = [transcript[i : i + step] for i in range(0, len(transcript), step)]
    f = fact(None, spoken_stream(words, audio))
    assert f.output_messages[0].parts == [TextPart(transcript), blob(data, None, "audio")]
    assert f.degradations == {}


# --- call N's output is its replay in call N+1 -------------------------------------------------


def text_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


ids = st.text("abc123", min_size=1, max_size=4)
turn_items = st.one_of(
    st.builds(text_item, st.text(min_size=1, max_size=5)),
    st.builds(
        lambda t: {"type": "reasoning", "summary": [{"type": "summary_text", "text": t}]},
        st.text(min_size=1, max_size=5),
    ),
    st.builds(
        lambda i, x: {"type": "function_call", "call_id": i, "name": "f", "arguments": f'{{"x": {x}}}'},
        ids,
        st.integers(0, 9),
    ),
    st.builds(lambda i, x: {**COMPUTER_CALL, "call_id": i, "action": {"type": "click", "x": x}}, ids, st.integers(0, 9)),
    st.builds(lambda i: {**COMPUTER_CALL, "call_id": None, "id": i}, ids),  # synthesized id
    st.builds(lambda i: {"type": "local_shell_call", "call_id": i, "action": {"type": "exec", "command": ["ls"]}}, ids),
    st.sampled_from([SEARCH, FILES, CODE, IMAGE, MCP_LIST, MCP_CALL, APPROVAL]),
    st.builds(lambda i: {**CODE, "id": i, "outputs": None}, ids),
    st.builds(lambda i: {"type": "tool_search_call", "id": i, "execution": "server", "arguments": {}}, ids),
    st.builds(lambda i: {"type": "tool_search_output", "call_id": i, "execution": "server", "tools": []}, ids),
    st.builds(lambda i: {"type": "tool_search_call", "call_id": i, "execution": "client", "arguments": {}}, ids),
    st.builds(lambda i: {**PROGRAM, "call_id": i}, ids),
    st.builds(lambda i: {**PROGRAM_OUTPUT, "call_id": i}, ids),
)  # fmt: skip


def result_for(item: dict[str, Any]) -> dict[str, Any] | None:
    kind = item["type"]
    if kind == "function_call":
        return {"type": "function_call_output", "call_id": item["call_id"], "output": "ok"}
    if kind == "computer_call":
        return screenshot(image_url=f"data:image/png;base64,{PNG64}") | {"call_id": item["call_id"]}
    if kind == "local_shell_call":
        return {"type": "local_shell_call_output", "call_id": item["call_id"], "output": "ok"}
    if kind == "tool_search_call" and item["execution"] == "client":
        return {
            "type": "tool_search_output",
            "call_id": item["call_id"],
            "execution": "client",
            "tools": [],
        }
    return None


@given(st.lists(turn_items, min_size=1, max_size=6), st.booleans())
def test_output_equals_its_replay_in_the_next_request(
    items: list[dict[str, Any]], streamed: bool
) -> None:
    """Whatever the model's turn holds, the next request that replays it (with the results of
    its client-side calls after it) gives the same assistant message, and the tool messages
    answer its calls by their ids."""
    first_req = {"instructions": "sys", "input": [{"role": "user", "content": "go"}]}
    body = resp(*items)
    first = fact(first_req, stream_of(body) if streamed else body)
    results = [r for r in map(result_for, items) if r is not None]
    second = fact({**first_req, "input": [*first_req["input"], *items, *results]})
    produced = first.output_messages[0]
    assert second.input_messages[:2] == first.input_messages
    assert second.input_messages[2] == Message("assistant", produced.parts)
    calls = [p.id for p in produced.parts if isinstance(p, ToolCallPart)]
    answers = [m.parts[0] for m in second.input_messages[3:]]
    assert [a.id for a in answers if isinstance(a, ToolCallResponsePart)] == calls
    assert produced.finish_reason == ("tool_call" if calls else "stop")
    assert "unsupported_content" not in first.degradations | second.degradations


# --- the SDK recordings ------------------------------------------------------------------------


def recorded(name: str) -> InferenceCall:
    doc = orjson.loads((RECORDED / "openai-responses" / f"{name}.exchange.json").read_bytes())
    (result,) = translate_document(doc)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def same_but_raw(a: InferenceCall, b: InferenceCall) -> None:
    """The same fact but for raw and, where the fake answered (its ids name the recording),
    the response id."""
    ids = dict.fromkeys(("raw", "inference_call_id", "model_call_id"))
    assert msgspec.structs.replace(a, **ids) == msgspec.structs.replace(b, **ids)


@pytest.mark.parametrize(
    "name", ["image_input", "computer_use_turn1", "server_tools", "image_generation"]
)
def test_recorded_stream_is_its_plain_twin(name: str) -> None:
    same_but_raw(recorded(name), recorded(f"{name}_streaming"))


def test_recorded_image_input() -> None:
    f = recorded("image_input")
    _, image, link = f.input_messages[0].parts
    assert isinstance(image, BlobPart)
    assert (image.modality, image.mime_type, image.size) == ("image", "image/png", 73)
    sent = f.raw["request"]["input"][0]["content"][1]["image_url"]
    assert sent == f"data:image/png;base64,{image.content}"
    assert base64.b64decode(image.content).startswith(b"\x89PNG")
    assert link == UriPart(
        "image", None, "https://upload.wikimedia.org/wikipedia/commons/7/70/Example.png"
    )
    assert f.degradations == {"content_reference": 1}


def test_recorded_computer_use_turn_is_replayed_with_its_screenshot() -> None:
    turn1, turn2 = recorded("computer_use_turn1"), recorded("computer_use_turn2")
    (produced,) = turn1.output_messages
    assert produced.finish_reason == "tool_call"
    call = produced.parts[-1]
    assert call == ToolCallPart(
        "call_68c2a1b2c3d4e5f6a7b8c9d0", "computer", {"type": "click", "button": "left", "x": 981, "y": 42}
    )  # fmt: skip
    assert turn2.input_messages[:2] == [*turn1.input_messages, Message("assistant", produced.parts)]
    response, shot = turn2.input_messages[2].parts
    assert turn2.input_messages[2].role == "tool"
    assert response == ToolCallResponsePart(call.id, {"type": "computer_screenshot"})
    assert isinstance(shot, BlobPart) and (shot.modality, shot.mime_type) == ("image", "image/png")
    assert turn2.degradations == {}
    assert [t.name for t in turn2.tools if t.builtin] == ["computer"]  # a built-in, kept


def test_recorded_server_tools() -> None:
    f = recorded("server_tools")
    kinds = [p.server_tool_call["type"] if isinstance(p, ServerToolCallPart) else type(p).__name__ for p in f.output_messages[0].parts]  # fmt: skip
    assert kinds == [
        "web_search_call",
        "code_interpreter_call",
        "ServerToolCallResponsePart",
        "TextPart",
    ]
    assert f.output_messages[0].finish_reason == "stop"
    assert f.degradations == {"text_citation": 1}
    assert [t.name for t in f.tools if t.builtin] == ["web_search", "code_interpreter"]


# --- the SDK live: a computer-use loop ---------------------------------------------------------


def test_sdk_computer_use_loop() -> None:
    """The openai SDK plays a computer-use loop against the fake provider, plain and streamed:
    the model clicks, the application sends the turn back (the SDK's own output objects) with a
    screenshot, the model answers. Call 1's output is its replay in call 2, followed by the
    screenshot's tool message; the streamed loop gives the plain loop's facts."""
    loops = {stream: _computer_loop(stream) for stream in (False, True)}
    for first, second in loops.values():
        (produced,) = first.output_messages
        call = produced.parts[-1]
        assert produced.finish_reason == "tool_call"
        assert isinstance(call, ToolCallPart) and call.name == "computer"
        assert second.input_messages[:2] == [
            *first.input_messages,
            Message("assistant", produced.parts),
        ]
        tool = second.input_messages[2]
        assert tool.role == "tool"
        assert tool.parts[0] == ToolCallResponsePart(call.id, {"type": "computer_screenshot"})
        assert isinstance(tool.parts[1], BlobPart)
        assert tool.parts[1].sha256 == hashlib.sha256(PNG).hexdigest()
        assert second.output_messages == [
            Message("assistant", [TextPart("The menu is open.")], "stop")
        ]
    for plain, streamed in zip(loops[False], loops[True], strict=True):
        assert msgspec.structs.replace(plain, raw=None) == msgspec.structs.replace(
            streamed, raw=None
        )


def _computer_loop(stream: bool) -> tuple[InferenceCall, InferenceCall]:
    # Imported here: the recorder module pulls in every provider's SDK.
    import openai

    from tests.fakes import FakeProvider, Reply, answer
    from tests.recorded.openai_responses_media import COMPUTER_BODY, COMPUTER_STREAM, COMPUTER_TOOL

    with FakeProvider() as fake:
        fake.script(
            COMPUTER_STREAM if stream else Reply(body=COMPUTER_BODY), answer("The menu is open.")
        )
        client = openai.OpenAI(
            api_key="sk-proj-not-a-real-key", base_url=fake.openai_base_url, max_retries=0
        )
        items: list[Any] = [{"role": "user", "content": "Open the settings menu."}]
        kw: dict[str, Any] = {
            "model": "computer-use-preview",
            "tools": [COMPUTER_TOOL],
            "truncation": "auto",
        }
        for turn in range(2):
            if stream:
                with client.responses.stream(input=items, **kw) as s:
                    for _ in s:
                        pass
                    r = s.get_final_response()
            else:
                r = client.responses.create(input=items, **kw)
            if turn == 0:
                (call,) = [i for i in r.output if i.type == "computer_call"]
                items = [
                    *items,
                    *r.output,
                    {
                        "type": "computer_call_output",
                        "call_id": call.call_id,
                        "output": {
                            "type": "computer_screenshot",
                            "image_url": f"data:image/png;base64,{PNG64}",
                        },
                        "acknowledged_safety_checks": [
                            c.model_dump() for c in call.pending_safety_checks
                        ],
                    },
                ]
        exchanges = fake.wait(2)
    first, second = (next(iter(translate_document(ex.document()))) for ex in exchanges)
    assert isinstance(first, InferenceCall) and isinstance(second, InferenceCall)
    assert_valid_messages(first)
    assert_valid_messages(second)
    return first, second


@pytest.mark.parametrize(
    "name", ["server_tools_streaming", "computer_use_turn1_streaming", "image_generation_streaming"]
)
def test_recorded_stream_cut_at_every_event(name: str) -> None:
    """A stream cut anywhere still gives a valid fact; once every item is done, the parts are
    the whole answer's, and only the final event (finish reason, usage) is missing."""
    whole = recorded(name)
    events = list(iter_events(whole.raw["response"]))
    last_item = max(i for i, e in enumerate(events) if e.event == "response.output_item.done")
    for cut in range(1, len(events)):
        f = openai_responses.translate(whole.raw["request"], events[:cut])
        assert isinstance(f, InferenceCall), (cut, f)
        assert_valid_messages(f)
        assert f.degradations.get("truncated_stream") == 1
        if cut > last_item:
            assert f.output_messages[0].parts == whole.output_messages[0].parts
            assert f.output_messages[0].finish_reason is None


def test_recorded_image_generation() -> None:
    """The generated image is a blob in the assistant message, after the tool's call and
    response and before the text; the partial image the stream sent is not the answer."""
    f = recorded("image_generation")
    call, response, image, text = f.output_messages[0].parts
    item = f.raw["response"]["output"][0]
    assert call == ServerToolCallPart(item["id"], "image_generation", without(item, "result"))
    assert response == ServerToolCallResponsePart(item["id"], {"type": "image_generation_call"})
    assert isinstance(image, BlobPart) and image.content == item["result"]
    assert (image.modality, image.mime_type) == ("image", "image/png")
    assert text == TextPart("Here is your blue square.")
    streamed = recorded("image_generation_streaming")
    partial = next(
        e for e in iter_events(streamed.raw["response"]) if e.event.endswith("partial_image")
    )
    assert partial.json()["partial_image_b64"] != image.content
    assert streamed.output_messages == f.output_messages
