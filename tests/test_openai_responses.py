"""OpenAI Responses API: shape detection, item mapping, status, stream reassembly, robustness."""

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
from lithify.translate import openai_responses, provider
from lithify.translate._common import FREEFORM_PARAMETERS
from lithify.translate.sse import SSEEvent, iter_events
from tests.conftest import CORPUS
from tests.helpers import assert_valid_messages

FOLDER = CORPUS / "openai-responses"
STREAMS = sorted(FOLDER.glob("*.sse"))


def load(rel: str) -> Any:
    return orjson.loads((CORPUS / rel).read_bytes())


def fact(request: Any, response: Any, **kw: Any) -> InferenceCall:
    result = openai_responses.translate(request, response, **kw)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def resp(*output: dict[str, Any], status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "model": "gpt-x",
        "output": list(output),
        "usage": {"input_tokens": 4, "output_tokens": 6},
        **extra,
    }


def message(*texts: str, role: str = "assistant") -> dict[str, Any]:
    return {
        "type": "message",
        "role": role,
        "content": [{"type": "output_text", "text": t, "annotations": []} for t in texts],
    }


def call(call_id: str | None, name: str, arguments: str) -> dict[str, Any]:
    item = {"type": "function_call", "name": name, "arguments": arguments}
    if call_id is not None:
        item["call_id"] = call_id
    return item


def sse(events: list[dict[str, Any]]) -> list[SSEEvent]:
    return [SSEEvent(e["type"], orjson.dumps(e).decode()) for e in events]


def events_of(path: Path) -> list[SSEEvent]:
    return list(iter_events(path.read_text()))


def final_response(evs: list[SSEEvent]) -> dict[str, Any]:
    for e in evs:
        data = e.json()
        if isinstance(data, dict) and data.get("type") == "response.completed":
            return data["response"]
    raise AssertionError("no response.completed event")


def without_raw(f: InferenceCall) -> InferenceCall:
    return msgspec.structs.replace(f, raw=None)


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


def _json(folder: str, suffix: str) -> list[str]:
    return sorted(p.relative_to(CORPUS).as_posix() for p in (CORPUS / folder).glob(f"*{suffix}"))


@pytest.mark.parametrize("rel", _json("openai-responses", ".request.json"))
def test_claims_requests(rel: str) -> None:
    assert openai_responses.looks_like_request(load(rel))


@pytest.mark.parametrize("rel", _json("openai-responses", ".response.json"))
def test_claims_responses(rel: str) -> None:
    assert openai_responses.looks_like_response(load(rel))


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.name)
def test_claims_streams(path: Path) -> None:
    assert openai_responses.looks_like_stream(events_of(path))


@pytest.mark.parametrize(
    "rel",
    [
        *_json("anthropic", ".json"),
        *_json("gemini", ".json"),
        *_json("openai-chat", ".json"),
        *_json("otlp", ".json"),
        *_json("openinference", ".json"),
        "openai-responses/reasoning_item_without_following_item.error.json",
    ],
)
def test_leaves_other_bodies_alone(rel: str) -> None:
    doc = load(rel)
    assert not openai_responses.looks_like_request(doc)
    assert not openai_responses.looks_like_response(doc)


@pytest.mark.parametrize(
    "path",
    sorted(p for p in CORPUS.rglob("*.sse") if p.parent.name != "openai-responses"),
    ids=lambda p: p.name,
)
def test_leaves_other_streams_alone(path: Path) -> None:
    assert not openai_responses.looks_like_stream(events_of(path))


def test_embeddings_request_is_not_a_response_request() -> None:
    assert not openai_responses.looks_like_request(
        {"input": "hello", "model": "text-embedding-3-small"}
    )
    assert not openai_responses.looks_like_request(
        {"input": ["a"], "model": "x", "encoding_format": "float"}
    )
    assert openai_responses.looks_like_request({"input": "hello", "model": "gpt-4o"})


# --- input ------------------------------------------------------------------------------------


def test_instructions_and_string_input() -> None:
    f = fact({"model": "gpt-x", "instructions": "Be brief.", "input": "Hi"}, None)
    assert f.input_messages == [
        Message("system", [TextPart("Be brief.")]),
        Message("user", [TextPart("Hi")]),
    ]
    assert f.output_messages == []
    assert f.model == "gpt-x"


def test_message_items_and_parts() -> None:
    req = {
        "input": [
            {"role": "developer", "content": "rules"},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is this"},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                    {"type": "input_file", "file_id": "file-1"},
                ],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "a cat"},
                    {"type": "refusal", "refusal": "no more"},
                ],
            },
        ]
    }
    f = fact(req, None)
    assert f.input_messages == [
        Message("developer", [TextPart("rules")]),
        Message(
            "user",
            [
                TextPart("what is this"),
                UriPart("image", None, "https://x/y.png"),
                FilePart("document", None, "file-1"),
            ],
        ),
        Message("assistant", [TextPart("a cat"), TextPart("no more")]),
    ]
    assert f.degradations == {"content_reference": 2}


def test_function_calls_and_outputs() -> None:
    req = {
        "input": [
            {"role": "user", "content": "go"},
            call("c1", "f", '{"a": 1}'),
            call("c2", "g", "not json"),
            {"type": "function_call_output", "call_id": "c1", "output": '{"kept": "as text"}'},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "structured"}],
            },
        ]
    }
    f = fact(req, None)
    assert f.input_messages[1] == Message(
        "assistant", [ToolCallPart("c1", "f", {"a": 1}), ToolCallPart("c2", "g", {})]
    )
    assert f.input_messages[2:] == [
        Message("tool", [ToolCallResponsePart("c1", '{"kept": "as text"}')]),
        Message(
            "tool", [ToolCallResponsePart("c2", [{"type": "input_text", "text": "structured"}])]
        ),
    ]
    assert f.degradations == {"malformed_arguments": 1}


def test_calls_without_ids() -> None:
    req = {
        "input": [
            call(None, "f", ""),
            {"type": "function_call_output", "output": "ok"},
            {"type": "function_call_output", "output": "who?"},
        ]
    }
    f = fact(req, None)
    tc = f.input_messages[0].parts[0]
    assert isinstance(tc, ToolCallPart) and tc.id.startswith("lithify_") and tc.arguments == {}
    assert f.input_messages[1].parts == [ToolCallResponsePart(tc.id, "ok")]
    assert f.degradations == {"synthesized_id": 1, "orphan_tool_response": 1}


def test_reasoning_items() -> None:
    req = {
        "input": [
            {"role": "user", "content": "q"},
            {
                "type": "reasoning",
                "summary": [
                    {"type": "summary_text", "text": "first"},
                    {"type": "summary_text", "text": "second"},
                ],
                "content": [{"type": "reasoning_text", "text": "raw thoughts"}],
            },
            {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"},
            {"role": "assistant", "content": "answer"},
        ]
    }
    f = fact(req, None)
    assert f.input_messages[1] == Message(
        "assistant",
        [
            ReasoningPart("first"),
            ReasoningPart("second"),
            ReasoningPart("raw thoughts"),
            TextPart("answer"),
        ],
    )
    assert f.degradations == {"opaque_reasoning": 1}


def test_other_items() -> None:
    """Items no source documents are counted; the model's own end nothing, others end its turn."""
    req = {
        "input": [
            {"role": "user", "content": "find it"},
            {"type": "message", "role": "assistant", "content": "found"},
            {"type": "additional_tools", "id": "at_1", "role": "assistant", "tools": []},
            {"type": "message", "role": "assistant", "content": "more"},
            {"type": "widget_output", "id": "wo_1", "call_id": "p", "result": "1"},
            {"type": "message", "role": "assistant", "content": "loaded"},
            {"type": "item_reference", "id": "msg_1"},
        ],
        "previous_response_id": "resp_0",
    }
    f = fact(req, None)
    assert f.input_messages == [
        Message("user", [TextPart("find it")]),
        Message("assistant", [TextPart("found"), TextPart("more")]),
        Message("assistant", [TextPart("loaded")]),
    ]
    assert f.degradations == {"unsupported_content": 2, "content_reference": 2}


def test_tools() -> None:
    req = load("openai-responses/function_call_forced.request.json")
    req = {**req, "tools": [*req["tools"], {"type": "web_search_preview"}, {"type": "mcp"}]}
    f = fact(req, None)
    assert [(t.name, t.builtin) for t in f.tools] == [
        ("get_current_weather", None),
        ("web_search", {"type": "web_search_preview"}),  # built-ins kept whole
        ("mcp", {"type": "mcp"}),
    ]
    assert f.tools[0].parameters["required"] == ["location"]
    assert f.degradations == {}


# A namespace tool (openai SDK NamespaceTool): function and custom tools grouped under a name
# the model calls them by; its calls carry that name in `namespace` beside their own `name`.
NAMESPACES = [
    {
        "type": "namespace",
        "name": "crm",
        "description": "Customer records",
        "tools": [
            {
                "type": "function",
                "name": "lookup",
                "description": "Find a customer",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                "strict": True,
            }
        ],
    },
    {
        "type": "namespace",
        "name": "billing",
        "description": "Invoices",
        "tools": [
            {"type": "function", "name": "lookup", "parameters": {"type": "object"}},
            {"type": "custom", "name": "note", "description": "Free text"},
        ],
    },
    {"type": "function", "name": "lookup", "parameters": {"type": "object"}},
]
NAMESPACED_CALLS = [
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "namespace": "crm",
        "name": "lookup",
        "arguments": '{"q": "ACME"}',
        "status": "completed",
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_2",
        "namespace": "billing",
        "name": "lookup",
        "arguments": "{}",
        "status": "completed",
    },
    {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": "call_3",
        "namespace": "billing",
        "name": "note",
        "input": "{}",
    },
    {
        "type": "function_call",
        "id": "fc_3",
        "call_id": "call_4",
        "name": "lookup",
        "arguments": "{}",
    },
]
NAMESPACED_PARTS = [
    ToolCallPart("call_1", "crm.lookup", {"q": "ACME"}),
    ToolCallPart("call_2", "billing.lookup", {}),
    ToolCallPart("call_3", "billing.note", {"input": "{}"}),  # free-form text, never parsed
    ToolCallPart("call_4", "lookup", {}),
]


def test_namespaced_calls_and_definitions_agree() -> None:
    """A namespace's tools are definitions named as their calls are, ``namespace.name``, so two
    namespaces' ``lookup`` stay apart and every call has its definition; the namespaces'
    descriptions, which a flat tool list cannot hold, are counted."""
    req = {"model": "gpt-5", "input": "find ACME", "tools": NAMESPACES}
    f = fact(req, resp(*NAMESPACED_CALLS))
    assert f.tools == [
        ToolDefinition(
            "crm.lookup",
            "Find a customer",
            {"type": "object", "properties": {"q": {"type": "string"}}},
        ),
        ToolDefinition("billing.lookup", None, {"type": "object"}),
        ToolDefinition("billing.note", "Free text", FREEFORM_PARAMETERS),
        ToolDefinition("lookup", None, {"type": "object"}),
    ]
    assert f.output_messages == [Message("assistant", NAMESPACED_PARTS, "tool_call")]
    called = {p.name for p in f.output_messages[0].parts if isinstance(p, ToolCallPart)}
    assert called == {t.name for t in f.tools}
    assert f.degradations == {"unsupported_tool": 2}
    # A response read alone takes the tools it echoes, the same way.
    assert fact(None, resp(*NAMESPACED_CALLS, tools=NAMESPACES)).tools == f.tools
    # Replayed in the next request, the calls keep their names.
    replay = fact({"input": [{"role": "user", "content": "find ACME"}, *NAMESPACED_CALLS]}, None)
    assert replay.input_messages[1] == Message("assistant", NAMESPACED_PARTS)


def test_namespaced_calls_streamed_whole_and_cut() -> None:
    base = resp(status="in_progress")
    events: list[dict[str, Any]] = [{"type": "response.created", "response": base}]
    for n, item in enumerate(NAMESPACED_CALLS):
        key = "input" if item["type"] == "custom_tool_call" else "arguments"
        kind = "custom_tool_call_input" if key == "input" else "function_call_arguments"
        events += [
            {"type": "response.output_item.added", "output_index": n, "item": {**item, key: ""}},
            {"type": f"response.{kind}.delta", "output_index": n, "item_id": item["id"], "delta": item[key]},
            {"type": "response.output_item.done", "output_index": n, "item": item},
        ]  # fmt: skip
    whole = fact(
        None, sse([*events, {"type": "response.completed", "response": resp(*NAMESPACED_CALLS)}])
    )
    assert whole.output_messages == [Message("assistant", NAMESPACED_PARTS, "tool_call")]
    assert whole.degradations == {}
    # Cut before each call was done: rebuilt from the added item and the argument deltas.
    cut = [e for e in events if e["type"] != "response.output_item.done"]
    rebuilt = fact(None, sse(cut))
    assert rebuilt.output_messages == [Message("assistant", NAMESPACED_PARTS, None)]
    assert rebuilt.degradations == {"truncated_stream": 1}


@given(
    st.lists(
        st.tuples(st.sampled_from(["crm", "billing", "a.b", None]), st.sampled_from(["f", "g"])),
        min_size=1,
        max_size=5,
    )
)
def test_every_namespaced_call_has_its_definition(calls: list[tuple[str | None, str]]) -> None:
    spaces: dict[str | None, list[dict[str, Any]]] = {}
    for ns, name in dict.fromkeys(calls):
        spaces.setdefault(ns, []).append({"type": "function", "name": name})
    tools = [
        *spaces.pop(None, []),
        *({"type": "namespace", "name": ns, "description": "", "tools": t} for ns, t in spaces.items()),
    ]  # fmt: skip
    items = [
        {"type": "function_call", "call_id": f"c{i}", "name": name, "arguments": "{}"}
        | ({} if ns is None else {"namespace": ns})
        for i, (ns, name) in enumerate(calls)
    ]
    f = fact({"input": "go", "tools": tools}, resp(*items))
    named = [p.name for p in f.output_messages[0].parts if isinstance(p, ToolCallPart)]
    assert named == [name if ns is None else f"{ns}.{name}" for ns, name in calls]
    assert set(named) == {t.name for t in f.tools}
    assert f.degradations == {}  # empty namespace descriptions lose nothing


# A call a program issued (programmatic tool calling): `caller` names the program item.
PROGRAM = {
    "type": "program",
    "id": "pg_1",
    "call_id": "call_p",
    "code": "const r = await tools.lookup({q: 'ACME'}); return r.total;",
    "fingerprint": "fp_opaque",
}
BY_PROGRAM = {"type": "program", "caller_id": "call_p"}


def test_calls_a_program_issued_are_counted() -> None:
    """The model wrote the program, not the calls it makes: each call (and its result, which goes
    back to the program) counts ``unsupported_content``; a direct call counts nothing."""
    issued = {**call("c1", "lookup", '{"q": "ACME"}'), "caller": BY_PROGRAM}
    direct = {**call("c2", "lookup", "{}"), "caller": {"type": "direct"}}
    first = fact({"input": "how much?"}, resp(PROGRAM, issued, direct))
    assert first.output_messages == [
        Message(
            "assistant",
            [
                ServerToolCallPart("call_p", "program", PROGRAM),
                ToolCallPart("c1", "lookup", {"q": "ACME"}),
                ToolCallPart("c2", "lookup", {}),
            ],
            "tool_call",
        )
    ]
    assert first.degradations == {"unsupported_content": 1}
    replay = {
        "input": [
            {"role": "user", "content": "how much?"},
            PROGRAM,
            issued,
            direct,
            {"type": "function_call_output", "call_id": "c1", "output": "42", "caller": BY_PROGRAM},
            {"type": "function_call_output", "call_id": "c2", "output": "7"},
        ]
    }
    second = fact(replay, None)
    assert second.input_messages[1] == Message("assistant", first.output_messages[0].parts)
    assert second.input_messages[2:] == [
        Message("tool", [ToolCallResponsePart("c1", "42")]),
        Message("tool", [ToolCallResponsePart("c2", "7")]),
    ]
    assert second.degradations == {"unsupported_content": 2}


# The shell tool run in OpenAI's own container (hosted shell): the call and what its commands
# printed both come back in the response's output, as the SDK's ResponseFunctionShellToolCall and
# ResponseFunctionShellToolCallOutput shape them. A call's environment is a `container_reference`
# (the container it ran in), `local`, or none.
CONTAINER = {"type": "container_reference", "container_id": "cntr_1"}
HOSTED_TOOL = {"type": "shell", "environment": {"type": "container_auto"}}
SHELL_CALL = {
    "type": "shell_call",
    "id": "sh_1",
    "call_id": "call_sh",
    "action": {"commands": ["ls /mnt/data"], "timeout_ms": 10000, "max_output_length": None},
    "environment": CONTAINER,
    "status": "completed",
    "created_by": "resp_1",
}
SHELL_OUTPUT = {
    "type": "shell_call_output",
    "id": "sho_1",
    "call_id": "call_sh",
    "output": [{"stdout": "a.csv\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    "max_output_length": None,
    "status": "completed",
    "created_by": "resp_1",
}
HOSTED_PARTS = [
    ServerToolCallPart("call_sh", "shell", SHELL_CALL),
    ServerToolCallResponsePart("call_sh", SHELL_OUTPUT),
    TextPart("One file: a.csv."),
]


def test_a_hosted_shell_is_a_server_tool_in_the_model_turn() -> None:
    """OpenAI ran the commands: the call and its output are server tool parts, in item order,
    linked by the call_id, together the items as sent; the turn is no client call and ends."""
    out = [SHELL_CALL, SHELL_OUTPUT, message("One file: a.csv.")]
    f = fact({"input": "what is in /mnt/data?", "tools": [HOSTED_TOOL]}, resp(*out))
    assert f.output_messages == [Message("assistant", HOSTED_PARTS, "stop")]
    assert f.degradations == {}
    # The container the call names says so alone (a response read without its request, no
    # tools echoed), and the output is read as its call was.
    assert fact(None, resp(*out)).output_messages == f.output_messages
    # A client's call beside it still makes the response wait for the client.
    with_call = fact(None, resp(SHELL_CALL, SHELL_OUTPUT, call("c1", "f", "{}")))
    assert [m.finish_reason for m in with_call.output_messages] == ["tool_call"]


def _shell_parts(tools: list[dict[str, Any]], environment: dict[str, Any] | None) -> list[Any]:
    called = {k: v for k, v in SHELL_CALL.items() if k != "environment"}
    if environment is not None:
        called["environment"] = environment
    f = fact({"input": "ls", "tools": tools}, resp(called, SHELL_OUTPUT))
    return [type(p) for m in f.output_messages for p in m.parts]


def test_where_a_shell_call_ran_decides_who_ran_it() -> None:
    """The call's own environment decides; a call naming none ran where the offered shell tool
    runs (a container of OpenAI's, else the client's machine)."""
    server = [ServerToolCallPart, ServerToolCallResponsePart]
    client = [ToolCallPart, ToolCallResponsePart]
    local_tool = {"type": "shell", "environment": {"type": "local"}}
    reference_tool = {"type": "shell", "environment": CONTAINER}
    assert _shell_parts([], CONTAINER) == server
    assert _shell_parts([local_tool], CONTAINER) == server
    assert _shell_parts([HOSTED_TOOL], None) == server
    assert _shell_parts([reference_tool], None) == server
    assert _shell_parts([HOSTED_TOOL], {"type": "local"}) == client
    assert _shell_parts([local_tool], None) == client
    assert _shell_parts([{"type": "shell"}], None) == client
    assert _shell_parts([], None) == client


def test_a_local_shell_call_stays_a_client_call_beside_a_hosted_one() -> None:
    """A local call (environment ``local``) is the client's: a tool call the turn waits on and
    a tool message for its output, as before; only the hosted one is the provider's."""
    local = {**SHELL_CALL, "id": "sh_2", "call_id": "call_l", "environment": {"type": "local"}}
    local_call = ToolCallPart("call_l", "shell", local["action"])
    f = fact({"input": "ls", "tools": [HOSTED_TOOL]}, resp(SHELL_CALL, SHELL_OUTPUT, local))
    assert f.output_messages == [Message("assistant", [*HOSTED_PARTS[:2], local_call], "tool_call")]
    # Its output, sent back by the client, answers it as a tool message.
    printed = {"type": "shell_call_output", "call_id": "call_l", "output": []}
    replay = fact(
        {"input": [SHELL_CALL, SHELL_OUTPUT, local, printed], "tools": [HOSTED_TOOL]}, None
    )
    assert replay.input_messages == [
        Message("assistant", [*HOSTED_PARTS[:2], local_call]),
        Message("tool", [ToolCallResponsePart("call_l", [])]),
    ]


def test_a_hosted_shell_streamed_equals_the_whole_response() -> None:
    """Streamed (the items added empty, the commands and what they printed as deltas), the
    hosted shell reads as the whole response does; cut before the items were done, it is still
    the provider's, rebuilt from the deltas."""
    whole = resp(SHELL_CALL, SHELL_OUTPUT, message("One file: a.csv."), tools=[HOSTED_TOOL])
    action = {**SHELL_CALL["action"], "commands": []}
    started = {**SHELL_CALL, "status": "in_progress", "action": action}
    printing = {**SHELL_OUTPUT, "status": "in_progress", "output": []}
    run = SHELL_OUTPUT["output"][0]
    shell = {"output_index": 0, "command_index": 0}
    out = {"output_index": 1, "item_id": "sho_1", "command_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**whole, "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": started},
        {"type": "response.shell_call_command.added", **shell, "command": ""},
        {"type": "response.shell_call_command.delta", **shell, "delta": "ls /mnt"},
        {"type": "response.shell_call_command.delta", **shell, "delta": "/data"},
        {"type": "response.shell_call_command.done", **shell, "command": "ls /mnt/data"},
        {"type": "response.output_item.done", "output_index": 0, "item": SHELL_CALL},
        {"type": "response.output_item.added", "output_index": 1, "item": printing},
        {"type": "response.shell_call_output_content.delta", **out, "delta": {"stdout": "a.csv\n"}},
        {"type": "response.shell_call_output_content.done", **out, "output": [run]},
        {"type": "response.output_item.done", "output_index": 1, "item": SHELL_OUTPUT},
        {"type": "response.output_item.done", "output_index": 2, "item": message("One file: a.csv.")},
    ]  # fmt: skip
    streamed = fact(None, sse([*events, {"type": "response.completed", "response": whole}]))
    assert without_raw(streamed) == without_raw(fact(None, whole))
    assert streamed.output_messages == [Message("assistant", HOSTED_PARTS, "stop")]
    cut = fact(None, sse([e for e in events if e["type"] != "response.output_item.done"]))
    assert cut.output_messages == [
        Message(
            "assistant",
            [
                ServerToolCallPart("call_sh", "shell", {**started, "action": SHELL_CALL["action"]}),
                ServerToolCallResponsePart("call_sh", {**printing, "output": [run]}),
            ],
            None,
        )
    ]
    assert cut.degradations == {"truncated_stream": 1}


def test_a_hosted_shell_replayed_in_the_next_request() -> None:
    """The next request's input carries the hosted pair back: the same server tool parts in the
    model's turn, whether the shell tool is offered again or only the call names its container."""
    out = [SHELL_CALL, SHELL_OUTPUT, message("One file: a.csv.")]
    first = fact({"input": "ls", "tools": [HOSTED_TOOL]}, resp(*out))
    for tools in ([HOSTED_TOOL], []):
        turns = [{"role": "user", "content": "ls"}, *out, {"role": "user", "content": "and?"}]
        replay = fact({"input": turns, "tools": tools}, None)
        assert replay.input_messages == [
            Message("user", [TextPart("ls")]),
            Message("assistant", first.output_messages[0].parts),
            Message("user", [TextPart("and?")]),
        ]
        assert replay.degradations == {}


def test_request_parameters_and_session() -> None:
    req = {
        "input": "x",
        "temperature": 0.3,
        "max_output_tokens": 50,
        "reasoning": {"effort": "minimal", "summary": "auto"},
        "tool_choice": "required",
        "top_p": None,
        "metadata": {"session_id": "s-1"},
    }
    f = fact(req, None)
    assert f.request == {
        "max_tokens": 50,
        "reasoning_effort": "minimal",
        "temperature": 0.3,
        "tool_choice": "required",
    }
    assert f.session_id == "s-1"
    # The response echoes the metadata it was created with.
    echoed = fact(None, resp(message("x"), metadata={"session_id": "s-2"}))
    assert echoed.session_id == "s-2"
    assert echoed.request == {}


# --- output -----------------------------------------------------------------------------------


def test_assistant_side_items_merge_into_one_turn() -> None:
    out = [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
        message("Checking."),
        call("c1", "f", '{"x": 1}'),
        call("c2", "f", '{"x": 2}'),
    ]
    f = fact(None, resp(*out))
    assert f.output_messages == [
        Message(
            "assistant",
            [
                ReasoningPart("think"),
                TextPart("Checking."),
                ToolCallPart("c1", "f", {"x": 1}),
                ToolCallPart("c2", "f", {"x": 2}),
            ],
            "tool_call",
        )
    ]


def test_output_equals_its_replay_in_the_next_request() -> None:
    req1 = {"instructions": "sys", "input": [{"role": "user", "content": "go"}]}
    out = [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
        message("Calling."),
        call(None, "f", '{"q": 1}'),
    ]
    first = fact(req1, resp(*out))
    replay = {
        "instructions": "sys",
        "input": [
            *req1["input"],
            *out,
            {"type": "function_call_output", "output": "done"},
        ],
    }
    second = fact(replay, None)
    produced = first.output_messages[0]
    assert second.input_messages[:2] == first.input_messages
    assert second.input_messages[2] == Message(produced.role, produced.parts)
    tc = produced.parts[-1]
    assert isinstance(tc, ToolCallPart)
    assert second.input_messages[3].parts == [ToolCallResponsePart(tc.id, "done")]


@pytest.mark.parametrize(
    ("status", "extra", "output", "expected"),
    [
        ("completed", {}, [message("a")], "stop"),
        ("completed", {}, [call("c", "f", "{}")], "tool_call"),
        (
            "incomplete",
            {"incomplete_details": {"reason": "max_output_tokens"}},
            [message("a")],
            "length",
        ),
        ("incomplete", {"incomplete_details": {"reason": "content_filter"}}, [], "content_filter"),
        ("failed", {"error": {"code": "server_error", "message": "boom"}}, [], "error"),
        ("in_progress", {}, [], None),
        ("cancelled", {}, [], "cancelled"),
    ],
)
def test_status_to_finish_reason(
    status: str, extra: dict[str, Any], output: list[Any], expected: str | None
) -> None:
    f = fact(None, resp(*output, status=status, **extra))
    assert [m.finish_reason for m in f.output_messages] == [expected]


def test_metadata_and_identity() -> None:
    body = resp(message("hi"))
    f = fact({"model": "gpt-req", "input": "x"}, body)
    assert f.model == "gpt-x" and f.provider == "openai" and f.source.name == "openai-responses"
    assert (f.input_tokens, f.output_tokens) == (4, 6)
    assert f.started_at == "2023-11-14T22:13:20.000000000Z"
    assert f.model_call_id == "resp_1"
    assert f.raw == {"request": {"model": "gpt-req", "input": "x"}, "response": body}
    assert f.inference_call_id == fact(None, body).inference_call_id
    anon = {k: v for k, v in body.items() if k != "id"}
    assert fact(None, anon).inference_call_id != f.inference_call_id
    assert fact(None, anon, meta={"provider": "azure.ai.openai"}).provider == "azure.ai.openai"


def test_response_alone_uses_its_echo() -> None:
    body = resp(message("hi"), instructions="Be nice.", tools=[{"type": "function", "name": "f"}])
    f = fact(None, body)
    assert f.input_messages == [Message("system", [TextPart("Be nice.")])]
    assert [t.name for t in f.tools] == ["f"]


def test_dispatch_through_provider() -> None:
    req = load("openai-responses/function_call_forced.request.json")
    body = load("openai-responses/function_call_forced.response.json")
    r = provider.translate_exchange(req, body)
    assert isinstance(r, InferenceCall) and r.source.name == "openai-responses"
    r2 = provider.translate_exchange(None, STREAMS[0].read_text())
    assert isinstance(r2, InferenceCall) and r2.source.name == "openai-responses"


# --- streams ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.name)
def test_stream_equals_its_final_response(path: Path) -> None:
    evs = events_of(path)
    streamed, plain = fact(None, evs), fact(None, final_response(evs))
    assert without_raw(streamed) == without_raw(plain)
    assert streamed.degradations == {}
    assert streamed.raw["response"] == path.read_text().strip() + "\n\n"
    again = provider.translate_exchange(streamed.raw["request"], streamed.raw["response"])
    assert again == streamed


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.name)
def test_stream_without_final_event_is_rebuilt(path: Path) -> None:
    evs = events_of(path)
    full = fact(None, evs)
    cut = [e for e in evs if e.event != "response.completed"]
    rebuilt = fact(None, cut)
    assert [m.parts for m in rebuilt.output_messages] == [m.parts for m in full.output_messages]
    assert [m.finish_reason for m in rebuilt.output_messages] == [None]
    assert rebuilt.degradations == {"truncated_stream": 1}
    assert rebuilt.model_call_id == full.model_call_id


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.name)
def test_truncated_at_every_event(path: Path) -> None:
    evs = events_of(path)
    for cut in range(1, len(evs)):
        r = openai_responses.translate(None, evs[:cut])
        assert isinstance(r, InferenceCall), cut
        assert_valid_messages(r)
        # Arguments cut mid-JSON are malformed as well.
        assert r.degradations.get("truncated_stream") == 1, cut
        assert set(r.degradations) <= {"truncated_stream", "malformed_arguments"}, cut


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.name)
def test_truncated_at_every_character(path: Path) -> None:
    text = path.read_text()
    final = text.rindex("event: response.completed")
    for cut in cut_points(text):
        r = provider.translate_exchange(None, text[:cut], fmt="openai-responses")
        if isinstance(r, Skip):
            assert r.reason == "empty", cut
            continue
        assert_valid_messages(r)
        if cut <= final:
            assert r.degradations.get("truncated_stream") == 1, cut
            assert set(r.degradations) <= {"truncated_stream", "malformed_arguments"}, cut


def test_rebuilt_reasoning_text_and_refusal() -> None:
    base = {
        "id": "resp_9",
        "object": "response",
        "status": "in_progress",
        "model": "m",
        "output": [],
    }
    evs = sse(
        [
            {"type": "response.created", "response": base},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "reasoning", "id": "rs", "summary": []},
            },
            {
                "type": "response.reasoning_summary_part.added",
                "output_index": 0,
                "item_id": "rs",
                "summary_index": 0,
                "part": {"type": "summary_text", "text": ""},
            },
            {"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs", "summary_index": 0, "delta": "Think"},
            {"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs", "summary_index": 0, "delta": "ing"},
            {"type": "response.reasoning_text.delta", "output_index": 0, "item_id": "rs", "content_index": 0, "delta": "raw"},
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {"type": "message", "id": "m1", "role": "assistant", "content": []},
            },
            {"type": "response.output_text.delta", "output_index": 1, "item_id": "m1", "content_index": 0, "delta": "Hel"},
            {"type": "response.output_text.delta", "output_index": 1, "item_id": "m1", "content_index": 0, "delta": "lo"},
            {"type": "response.refusal.delta", "output_index": 1, "item_id": "m1", "content_index": 1, "delta": "No."},
            {
                "type": "response.output_item.added",
                "output_index": 2,
                "item": {"type": "function_call", "id": "fc", "call_id": "c1", "name": "f", "arguments": ""},
            },
            {"type": "response.function_call_arguments.delta", "output_index": 2, "item_id": "fc", "delta": '{"a":'},
            {"type": "response.function_call_arguments.delta", "output_index": 2, "item_id": "fc", "delta": "1}"},
        ]
    )  # fmt: skip
    f = fact(None, evs)
    assert f.output_messages == [
        Message(
            "assistant",
            [
                ReasoningPart("Thinking"),
                ReasoningPart("raw"),
                TextPart("Hello"),
                TextPart("No."),
                ToolCallPart("c1", "f", {"a": 1}),
            ],
            None,
        )
    ]
    assert f.degradations == {"truncated_stream": 1}
    assert f.model_call_id == "resp_9"


def test_final_incomplete_and_failed_events() -> None:
    body = resp(
        message("partial"), status="incomplete", incomplete_details={"reason": "max_output_tokens"}
    )
    f = fact(None, sse([{"type": "response.incomplete", "response": body}]))
    assert f.output_messages[0].finish_reason == "length"
    assert f.degradations == {}
    failed = resp(status="failed", error={"code": "server_error", "message": "x"})
    g = fact(None, sse([{"type": "response.failed", "response": failed}]))
    assert g.output_messages == [Message("assistant", [], "error")]


def test_error_event() -> None:
    err = {"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": None}
    first = openai_responses.translate(None, sse([err]))
    assert isinstance(first, Skip) and first.reason == "error_response"
    assert first.detail == "slow down"
    started = sse(
        [
            {"type": "response.created", "response": resp(status="in_progress")},
            {"type": "response.output_item.added", "output_index": 0, "item": message("so far")},
            err,
        ]
    )
    f = fact(None, started)
    assert f.output_messages == [Message("assistant", [TextPart("so far")], "error")]
    assert f.degradations == {"truncated_stream": 1}  # no response.failed: cut short
    # response.failed is the stream's final event: nothing was cut, the response failed.
    failed = fact(
        None,
        sse(
            [
                {"type": "response.created", "response": resp(status="in_progress")},
                {"type": "response.failed", "response": resp(message("so far"), status="failed")},
            ]
        ),
    )
    assert failed.output_messages == [Message("assistant", [TextPart("so far")], "error")]
    assert failed.degradations == {}


def test_a_body_that_is_not_a_response() -> None:
    r = openai_responses.translate(None, {"foo": 1})
    assert isinstance(r, Skip) and r.reason == "unrecognized_format"
    f = fact({"input": "hi"}, {"foo": 1})
    assert f.output_messages == [] and f.raw["response"] == {"foo": 1}


def test_empty_stream() -> None:
    assert isinstance(openai_responses.translate(None, []), Skip)
    f = fact({"input": "hi"}, [])
    assert f.degradations == {"truncated_stream": 1} and f.output_messages == []


# --- robustness --------------------------------------------------------------------------------

KEYS = [
    "input", "instructions", "type", "role", "content", "text", "summary", "encrypted_content",
    "call_id", "name", "arguments", "output", "status", "incomplete_details", "reason", "error",
    "id", "model", "usage", "input_tokens", "output_tokens", "tools", "parameters", "metadata",
    "response", "item", "output_index", "content_index", "summary_index", "item_id", "delta",
    "part", "refusal", "input", "created_at",
    "image_url", "file_id", "file_data", "file_url", "filename", "input_audio", "data", "format",
    "action", "actions", "operation", "outputs", "result", "results", "output_format", "url",
    "approval_request_id", "code", "tools", "namespace", "caller", "caller_id",
]  # fmt: skip
TYPES = [
    "message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
    "output_text", "input_text", "summary_text", "reasoning_text", "refusal", "web_search_call",
    "item_reference", "completed", "incomplete", "failed", "assistant", "user", "function",
    "response.created", "response.completed", "response.output_item.added",
    "response.output_text.delta", "response.function_call_arguments.delta",
    "response.reasoning_summary_text.delta", "response.content_part.added", "error",
    "input_image", "input_file", "input_audio", "computer_call", "computer_call_output",
    "computer_screenshot", "local_shell_call", "local_shell_call_output", "shell_call_output",
    "apply_patch_call", "file_search_call", "code_interpreter_call", "image_generation_call",
    "mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response", "image", "logs",
    "response.code_interpreter_call_code.delta", "response.mcp_call_arguments.done",
    "data:image/png;base64,iVBORw0KGgo=", "https://x/y.png",
    "program", "program_output", "namespace", "direct", "response.audio.delta",
    "response.audio.transcript.delta",
]  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(TYPES)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=6)
    ),
    max_leaves=30,
)


def _check(result: InferenceCall | Skip) -> None:
    if isinstance(result, Skip):
        assert result.reason in NO_FACT_REASONS and result.reason != "undecodable"
        return
    assert_valid_messages(result)
    assert set(result.degradations) <= set(DEGRADATION_REASONS)
    orjson.dumps(msgspec.to_builtins(result))


@given(json_values, json_values)
def test_arbitrary_json_never_raises(request: Any, response: Any) -> None:
    for doc in (request, response):
        if isinstance(doc, dict):
            openai_responses.looks_like_request(doc)
            openai_responses.looks_like_response(doc)
    _check(openai_responses.translate(request, response))
    _check(provider.translate_exchange(request, response, fmt="openai-responses"))


@given(st.lists(st.tuples(st.sampled_from(TYPES) | st.none(), json_values), max_size=8))
def test_arbitrary_events_never_raise(raw: list[tuple[str | None, Any]]) -> None:
    evs = [SSEEvent(name, orjson.dumps(data).decode()) for name, data in raw]
    openai_responses.looks_like_stream(evs)
    _check(openai_responses.translate(None, evs))


@given(st.sampled_from(STREAMS), st.integers(min_value=0), st.randoms(use_true_random=False))
def test_cut_and_shuffled_corpus_streams_never_raise(
    path: Path, cut: int, rnd: random.Random
) -> None:
    evs = events_of(path)
    evs = evs[: cut % (len(evs) + 1)]
    rnd.shuffle(evs)
    _check(openai_responses.translate(None, evs))


def _mutate(doc: Any, rnd: random.Random, value: Any) -> Any:
    """``doc`` with one randomly chosen node (possibly the root) replaced by ``value``."""
    if rnd.random() < 0.25 or not isinstance(doc, dict | list) or not doc:
        return value
    if isinstance(doc, dict):
        key = rnd.choice(sorted(doc))
        return {**doc, key: _mutate(doc[key], rnd, value)}
    i = rnd.randrange(len(doc))
    return [*doc[:i], _mutate(doc[i], rnd, value), *doc[i + 1 :]]


BODIES = sorted(p for p in FOLDER.glob("*.json") if not p.name.endswith(".error.json"))


@given(st.sampled_from(BODIES), st.randoms(use_true_random=False), json_values)
def test_mutated_corpus_bodies_never_raise(path: Path, rnd: random.Random, value: Any) -> None:
    doc = orjson.loads(path.read_bytes())
    _check(openai_responses.translate(_mutate(doc, rnd, value), None))
    _check(openai_responses.translate(None, _mutate(doc, rnd, value)))


@given(st.sampled_from(STREAMS), st.randoms(use_true_random=False), json_values)
def test_mutated_corpus_events_never_raise(path: Path, rnd: random.Random, value: Any) -> None:
    evs = events_of(path)
    i = rnd.randrange(len(evs))
    data = evs[i].json()
    if data is not None:
        evs[i] = SSEEvent(evs[i].event, orjson.dumps(_mutate(data, rnd, value)).decode())
    _check(openai_responses.translate(None, evs))


# --- compaction, citations, duration (issue 12) ----------------------------------------------


def test_compaction_items_are_opaque_state() -> None:
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB"}
    request = {"model": "m", "input": [compaction, {"role": "user", "content": "go on"}]}
    f = fact(request, resp(message("ok")))
    assert f.input_messages == [Message("user", [TextPart("go on")])]
    assert f.degradations == {"opaque_reasoning": 1}
    # Produced in the output (server-side compaction), it stays inside the model's turn.
    f = fact(None, resp(compaction, message("ok")))
    assert f.output_messages == [Message("assistant", [TextPart("ok")], "stop")]
    assert f.degradations == {"opaque_reasoning": 1}


def test_annotations_are_counted_in_bodies_and_rebuilt_streams() -> None:
    note = {"type": "url_citation", "url": "https://x", "title": "x", "start_index": 0, "end_index": 2}  # fmt: skip
    cited = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi", "annotations": [note, note]}]}  # fmt: skip
    assert fact(None, resp(cited)).degradations == {"text_citation": 2}
    # A stream cut before its final event is rebuilt from its deltas, annotations included.
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    cut = sse(
        [
            {"type": "response.created", "response": {**resp(), "status": "in_progress"}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
            },
            {"type": "response.output_text.delta", **where, "delta": "hi"},
            {
                "type": "response.output_text.annotation.added",
                **where,
                "annotation_index": 0,
                "annotation": note,
            },
        ]
    )
    f = fact(None, cut)
    assert f.output_messages[0].parts == [TextPart("hi")]
    assert f.degradations == {"text_citation": 1, "truncated_stream": 1}


def test_duration_from_completed_at_unless_the_transport_measured_one() -> None:
    body = resp(message("ok"), completed_at=1700000003)
    assert fact(None, body).duration_ms == 3000.0
    assert fact(None, body, meta={"duration_ms": 812.5}).duration_ms == 812.5
    assert fact(None, resp(message("ok"), completed_at=None)).duration_ms is None
    assert fact(None, resp(message("ok"), completed_at=1600000000)).duration_ms is None


# A custom (free-form) tool (openai SDK CustomToolParam, ResponseCustomToolCall): its input is
# text, often in the tool's grammar, never JSON arguments.
PATCH = "*** Begin Patch\n*** Update File: a.py\n-x=1\n+x=2\n*** End Patch"
CUSTOM_TOOLS = [
    {
        "type": "custom",
        "name": "apply_patch",
        "description": "Edit files",
        "format": {
            "type": "grammar",
            "syntax": "lark",
            "definition": 'start: "*** Begin Patch" /.+/s',
        },
    },
    {"type": "custom", "name": "note", "format": {"type": "text"}},
]
CUSTOM_CALLS = [
    {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": "call_1",
        "name": "apply_patch",
        "input": PATCH,
        "status": "completed",
    },
    {
        "type": "custom_tool_call",
        "id": "ctc_2",
        "call_id": "call_2",
        "name": "note",
        "input": '{"a": 1}',
        "status": "completed",
    },
]
CUSTOM_PARTS = [
    ToolCallPart("call_1", "apply_patch", {"input": PATCH}),
    ToolCallPart("call_2", "note", {"input": '{"a": 1}'}),  # text that reads as JSON stays text
]


def test_custom_tool_calls_keep_their_text_input() -> None:
    req = {"model": "gpt-5", "input": "fix a.py", "tools": CUSTOM_TOOLS}
    f = fact(req, resp(*CUSTOM_CALLS))
    assert f.output_messages == [Message("assistant", CUSTOM_PARTS, "tool_call")]
    assert f.tools == [
        ToolDefinition("apply_patch", "Edit files", FREEFORM_PARAMETERS),
        ToolDefinition("note", None, FREEFORM_PARAMETERS),
    ]
    # The grammar has no JSON Schema form: counted, it stays on raw; a text format is no loss.
    assert f.degradations == {"unsupported_tool": 1}
    # Streamed: the input in pieces, whole or cut before the items were done.
    events: list[dict[str, Any]] = [{"type": "response.created", "response": resp(status="in_progress")}]  # fmt: skip
    for n, item in enumerate(CUSTOM_CALLS):
        events.append({"type": "response.output_item.added", "output_index": n, "item": {**item, "input": "", "status": "in_progress"}})  # fmt: skip
        text = item["input"]
        events += [
            {
                "type": "response.custom_tool_call_input.delta",
                "output_index": n,
                "item_id": item["id"],
                "delta": text[i : i + 9],
            }
            for i in range(0, len(text), 9)
        ]
        events.append({"type": "response.output_item.done", "output_index": n, "item": item})
    final = {"type": "response.completed", "response": resp(*CUSTOM_CALLS)}
    streamed = fact(req, sse([*events, final]))
    assert msgspec.structs.replace(streamed, raw=None) == msgspec.structs.replace(f, raw=None)
    cut = fact(None, sse([e for e in events if e["type"] != "response.output_item.done"]))
    assert cut.output_messages == [Message("assistant", CUSTOM_PARTS, None)]
    assert cut.degradations == {"truncated_stream": 1}
    # Replayed in the next request, with the results.
    outputs = [{"type": "custom_tool_call_output", "call_id": c["call_id"], "output": "ok"} for c in CUSTOM_CALLS]  # fmt: skip
    replay = fact({"input": [{"role": "user", "content": "fix a.py"}, *CUSTOM_CALLS, *outputs]}, None)  # fmt: skip
    assert replay.input_messages[1] == Message("assistant", CUSTOM_PARTS)
    assert replay.degradations == {}


# --- output schemas --------------------------------------------------------------------------

ANSWER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}  # fmt: skip
SCHEMA_FORMAT = {"type": "json_schema", "name": "place", "strict": True, "schema": ANSWER_SCHEMA}


@pytest.mark.parametrize(
    ("fmt", "counted"),
    [
        (SCHEMA_FORMAT, True),
        ({"type": "json_object"}, False),
        ({"type": "text"}, False),
        (None, False),
    ],
)
def test_a_schema_in_text_format_is_counted_once(fmt: dict[str, Any] | None, counted: bool) -> None:
    # The schema shaped the answer but is in no message: a row would teach its shape unprompted.
    req: dict[str, Any] = {"model": "gpt-4o", "input": "Where is the Louvre?"}
    if fmt is not None:
        req["text"] = {"format": fmt}
    echoed = {"format": fmt or {"type": "text"}}
    f = fact(req, resp(message('{"city":"Paris"}'), text=echoed))
    assert f.degradations == ({"output_schema": 1} if counted else {})


def test_the_echoed_text_format_counts_when_the_request_does_not_name_one() -> None:
    # A stored prompt sets the format without the request naming it (the prompt itself is a
    # reference); the response echoes the format.
    answer = resp(message('{"city":"Paris"}'), text={"format": SCHEMA_FORMAT})
    prompted = {"prompt": {"id": "pmpt_1"}, "input": "Where is the Louvre?"}
    assert fact(prompted, answer).degradations == {"content_reference": 1, "output_schema": 1}
    assert fact(None, answer).degradations == {"output_schema": 1}
    # The request's own format wins over the echo.
    plain = {"input": "Where is the Louvre?", "text": {"format": {"type": "text"}}}
    assert fact(plain, answer).degradations == {}
