"""Every type the real ``openai`` SDK can put in an exchange has a stated fate in lithify.

The SDK's unions (items, content parts, annotations, stream events, Chat message fields) are
walked with ``typing.get_args``, and each type name must sit in one of the tables below, which
say what lithify makes of it (docs/sources/openai.md, "What each SDK type becomes"). A type a
future SDK adds fails here, instead of being lost silently. Each table entry is then checked
against the translator with a minimal payload: a mapped type gives its part, a counted one its
degradation, and nothing gives neither.
"""

from __future__ import annotations

import collections.abc
import json
import types
import typing
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec
import pytest

from lithify.model import (
    BlobPart,
    FilePart,
    InferenceCall,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    UriPart,
)
from lithify.translate import openai_chat, openai_responses
from lithify.translate.sse import iter_events
from tests.helpers import assert_valid_messages

openai = pytest.importorskip("openai")
R = pytest.importorskip("openai.types.responses")
C = pytest.importorskip("openai.types.chat")


# ---------------------------------------------------------------------------------------------
# Reading the SDK
# ---------------------------------------------------------------------------------------------


def _members(union: Any) -> list[Any]:
    """The classes a union (possibly Annotated, Optional, or a List of one) is made of."""
    origin = get_origin(union)
    if origin is Annotated:
        return _members(get_args(union)[0])
    if origin in (Union, types.UnionType, list, collections.abc.Iterable):
        return [m for a in get_args(union) for m in _members(a)]
    # None, and a plain string where the SDK takes text or a list of parts, are no types.
    return [] if union in (type(None), str) else [union]


def _literals(annotation: Any) -> list[str]:
    """The string literals an annotation allows (through Optional, Required and such)."""
    if get_origin(annotation) is Literal:
        return [a for a in get_args(annotation) if isinstance(a, str)]
    return [v for a in get_args(annotation) for v in _literals(a)]


def _hints(cls: Any) -> dict[str, Any]:
    if hasattr(cls, "model_fields"):  # a pydantic model
        return {k: f.annotation for k, f in cls.model_fields.items()}
    return typing.get_type_hints(cls)  # a TypedDict (a request param)


def _tags(union: Any, key: str = "type") -> set[str]:
    """The ``type`` (or ``role``) tags of a union's members."""
    out: set[str] = set()
    for cls in _members(union):
        tags = _literals(_hints(cls)[key])
        assert tags, (cls, key)
        out.update(tags)
    return out


def _fields(cls: Any) -> set[str]:
    return set(_hints(cls))


# ---------------------------------------------------------------------------------------------
# Responses: items
# ---------------------------------------------------------------------------------------------

# What each item becomes. Parts: the part it gives (in the assistant turn for calls and server
# tools; a ``tool`` message for results; a ``user`` message for an MCP approval). Counts: the
# degradation it gives instead of a part. The shell's items are the client's as sampled here (no
# environment, none offered); run in OpenAI's container they are a server tool's
# (SHELL_ENVIRONMENTS below).
RESPONSE_ITEMS: dict[str, str] = {
    "message": "text",
    "reasoning": "reasoning",
    "function_call": "tool_call",
    "function_call_output": "tool_call_response",
    "custom_tool_call": "tool_call",
    "custom_tool_call_output": "tool_call_response",
    "computer_call": "tool_call",
    "computer_call_output": "tool_call_response",
    "local_shell_call": "tool_call",
    "local_shell_call_output": "tool_call_response",
    "shell_call": "tool_call",  # hosted: server_tool_call
    "shell_call_output": "tool_call_response",  # hosted: server_tool_call_response
    "apply_patch_call": "tool_call",
    "apply_patch_call_output": "tool_call_response",
    "web_search_call": "server_tool_call",
    "file_search_call": "server_tool_call",
    "code_interpreter_call": "server_tool_call",
    "image_generation_call": "server_tool_call",
    "mcp_call": "server_tool_call",
    "mcp_list_tools": "server_tool_call",
    "mcp_approval_request": "server_tool_call",
    "mcp_approval_response": "server_tool_call_response",
    "tool_search_call": "server_tool_call",
    "tool_search_output": "server_tool_call_response",
    "program": "server_tool_call",
    "program_output": "server_tool_call_response",
    "compaction": "count:opaque_reasoning",
    "item_reference": "count:content_reference",
    "additional_tools": "count:unsupported_content",
    "configuration_update": "count:unsupported_content",
    "compaction_trigger": "count:unsupported_content",
}

# A minimal realistic item of each type, as the API reference shapes it.
ITEM_SAMPLES: dict[str, dict[str, Any]] = {
    "message": {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hi", "annotations": []}],
    },
    "reasoning": {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "t"}],
    },
    "function_call": {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_f",
        "name": "f",
        "arguments": "{}",
    },
    "function_call_output": {"type": "function_call_output", "call_id": "call_f", "output": "ok"},
    "custom_tool_call": {
        "type": "custom_tool_call",
        "id": "ct_1",
        "call_id": "call_x",
        "name": "g",
        "input": "abc",
    },
    "custom_tool_call_output": {
        "type": "custom_tool_call_output",
        "call_id": "call_x",
        "output": "ok",
    },
    "computer_call": {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": "call_c",
        "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
        "pending_safety_checks": [],
        "status": "completed",
    },
    "computer_call_output": {
        "type": "computer_call_output",
        "call_id": "call_c",
        "output": {"type": "computer_screenshot", "image_url": "https://example.com/s.png"},
    },
    "local_shell_call": {
        "type": "local_shell_call",
        "id": "ls_1",
        "call_id": "call_l",
        "status": "completed",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
    },
    "local_shell_call_output": {"type": "local_shell_call_output", "id": "ls_1", "output": "a b"},
    "shell_call": {
        "type": "shell_call",
        "id": "sh_1",
        "call_id": "call_s",
        "status": "completed",
        "action": {"commands": ["ls"], "timeout_ms": 1000, "max_output_length": 100},
    },
    "shell_call_output": {
        "type": "shell_call_output",
        "id": "sho_1",
        "call_id": "call_s",
        "output": [{"stdout": "a", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    },
    "apply_patch_call": {
        "type": "apply_patch_call",
        "id": "ap_1",
        "call_id": "call_a",
        "status": "completed",
        "operation": {"type": "create_file", "path": "a.txt", "diff": "+x"},
    },
    "apply_patch_call_output": {
        "type": "apply_patch_call_output",
        "id": "apo_1",
        "call_id": "call_a",
        "status": "completed",
        "output": "done",
    },
    "web_search_call": {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    },
    "file_search_call": {
        "type": "file_search_call",
        "id": "fs_1",
        "status": "completed",
        "queries": ["q"],
        "results": [{"file_id": "file_1", "text": "t"}],
    },
    "code_interpreter_call": {
        "type": "code_interpreter_call",
        "id": "ci_1",
        "status": "completed",
        "container_id": "cntr_1",
        "code": "print(1)",
        "outputs": [{"type": "logs", "logs": "1"}],
    },
    "image_generation_call": {
        "type": "image_generation_call",
        "id": "ig_1",
        "status": "completed",
        "result": "iVBORw0KGgo=",
        "output_format": "png",
    },
    "mcp_call": {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "srv",
        "name": "t",
        "arguments": "{}",
        "output": "r",
    },
    "mcp_list_tools": {
        "type": "mcp_list_tools",
        "id": "mcpl_1",
        "server_label": "srv",
        "tools": [{"name": "t", "input_schema": {}}],
    },
    "mcp_approval_request": {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "srv",
        "name": "t",
        "arguments": "{}",
    },
    "mcp_approval_response": {
        "type": "mcp_approval_response",
        "approval_request_id": "mcpr_1",
        "approve": True,
    },
    "tool_search_call": {
        "type": "tool_search_call",
        "id": "ts_1",
        "call_id": "call_t",
        "execution": "server",
        "arguments": {"query": "crm"},
        "status": "completed",
    },
    "tool_search_output": {
        "type": "tool_search_output",
        "id": "tso_1",
        "call_id": "call_t",
        "execution": "server",
        "tools": [{"type": "function", "name": "g", "parameters": {}}],
        "status": "completed",
    },
    "program": {
        "type": "program",
        "id": "pg_1",
        "call_id": "call_p",
        "code": "1 + 1",
        "fingerprint": "fp",
    },
    "program_output": {"type": "program_output", "id": "pgo_1", "call_id": "call_p", "result": "2"},
    "compaction": {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA"},
    "item_reference": {"type": "item_reference", "id": "msg_0"},
    "additional_tools": {
        "type": "additional_tools",
        "role": "developer",
        "tools": [{"type": "function", "name": "g", "parameters": {}}],
    },
    "configuration_update": {
        "type": "configuration_update",
        "reasoning": {"effort": "high"},
        "text": {"verbosity": "low"},
    },
    "compaction_trigger": {"type": "compaction_trigger"},
}

_PART_CLASSES = {
    "text": TextPart,
    "reasoning": ReasoningPart,
    "tool_call": ToolCallPart,
    "tool_call_response": ToolCallResponsePart,
    "server_tool_call": ServerToolCallPart,
    "server_tool_call_response": ServerToolCallResponsePart,
    "blob": BlobPart,
    "uri": UriPart,
    "file": FilePart,
}


def _response(*output: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": "gpt-x",
        "output": list(output),
    }


def _parts(f: InferenceCall) -> list[Any]:
    return [p for m in [*f.input_messages, *f.output_messages] for p in m.parts]


def _assert_handled(f: InferenceCall, handling: str) -> None:
    assert_valid_messages(f)
    if handling.startswith("count:"):
        assert f.degradations.get(handling[6:]), f.degradations
    else:
        assert any(isinstance(p, _PART_CLASSES[handling]) for p in _parts(f)), _parts(f)


def test_every_responses_item_type_has_a_stated_fate() -> None:
    sdk = set()
    for union in (
        "ResponseOutputItem",
        "ResponseInputItemParam",
        "ResponseInputItem",
        "ResponseItem",
    ):
        sdk |= _tags(getattr(R, union))
    assert not sdk - set(RESPONSE_ITEMS), (
        f"SDK item types lithify has no rule for: {sdk - set(RESPONSE_ITEMS)}"
    )
    assert set(ITEM_SAMPLES) == set(RESPONSE_ITEMS)


@pytest.mark.parametrize("kind", sorted(RESPONSE_ITEMS))
def test_each_item_type_as_output_and_as_input(kind: str) -> None:
    item = ITEM_SAMPLES[kind]
    out = openai_responses.translate(None, _response(item))
    inp = openai_responses.translate({"model": "gpt-x", "input": [item]}, None)
    for f in (out, inp):
        assert isinstance(f, InferenceCall), f
        _assert_handled(f, RESPONSE_ITEMS[kind])


# Where the shell runs, as the offered tool's ``environment`` or a call's says: a container of
# OpenAI's makes the call and its output a server tool's parts, the client's machine leaves them a
# tool call and a ``tool`` message.
SHELL_ENVIRONMENTS: dict[str, str] = {
    "container_auto": "server_tool_call",
    "container_reference": "server_tool_call",
    "local": "tool_call",
}


def test_every_shell_environment_has_a_stated_fate() -> None:
    from openai.types.responses import (
        function_shell_tool,
        function_shell_tool_param,
        response_function_shell_tool_call,
        response_input_item,
        response_input_item_param,
    )

    sdk = _tags(function_shell_tool.Environment) | _tags(function_shell_tool_param.Environment)
    sdk |= _tags(response_function_shell_tool_call.Environment)
    sdk |= _tags(response_input_item.ShellCallEnvironment)
    sdk |= _tags(response_input_item_param.ShellCallEnvironment)
    assert not sdk - set(SHELL_ENVIRONMENTS), sdk - set(SHELL_ENVIRONMENTS)


@pytest.mark.parametrize("kind", sorted(SHELL_ENVIRONMENTS))
def test_each_shell_environment_on_the_tool_and_on_the_call(kind: str) -> None:
    env = {"type": kind, **({"container_id": "cntr_1"} if kind == "container_reference" else {})}
    call, output = ITEM_SAMPLES["shell_call"], ITEM_SAMPLES["shell_call_output"]
    expected = (
        [ServerToolCallPart, ServerToolCallResponsePart]
        if SHELL_ENVIRONMENTS[kind] == "server_tool_call"
        else [ToolCallPart, ToolCallResponsePart]
    )
    offered = {"tools": [{"type": "shell", "environment": env}]}
    for extra, items in (({}, [{**call, "environment": env}, output]), (offered, [call, output])):
        out = openai_responses.translate(
            {"model": "gpt-x", "input": "ls", **extra}, _response(*items)
        )
        inp = openai_responses.translate({"model": "gpt-x", "input": items, **extra}, None)
        for f in (out, inp):
            assert isinstance(f, InferenceCall), f
            assert_valid_messages(f)
            assert [type(p) for p in _parts(f) if not isinstance(p, TextPart)] == expected
            assert f.degradations == {}


def test_an_item_reference_without_its_optional_type_is_a_reference() -> None:
    """The SDK's ItemReference makes ``type`` optional: ``{"id": …}`` alone is a reference to
    stored content (content_reference), not an item of an unknown type."""
    f = openai_responses.translate({"model": "gpt-x", "input": [{"id": "msg_0"}]}, None)
    assert isinstance(f, InferenceCall)
    assert f.degradations == {"content_reference": 1}
    f = openai_responses.translate(
        {"model": "gpt-x", "input": [{"id": "msg_0", "type": None}]}, None
    )
    assert isinstance(f, InferenceCall)
    assert f.degradations == {"content_reference": 1}


# ---------------------------------------------------------------------------------------------
# Responses: content parts, annotations, reasoning entries, tool outputs
# ---------------------------------------------------------------------------------------------

MESSAGE_CONTENT: dict[str, tuple[str, dict[str, Any]]] = {
    "input_text": ("text", {"type": "input_text", "text": "a"}),
    "input_image": ("uri", {"type": "input_image", "image_url": "https://example.com/a.png"}),
    "input_file": ("file", {"type": "input_file", "file_id": "file_1"}),
    "output_text": ("text", {"type": "output_text", "text": "a", "annotations": []}),
    "refusal": ("text", {"type": "refusal", "refusal": "no"}),
}
# Every annotation on output_text counts text_citation; the text stays whole.
ANNOTATIONS = {"file_citation", "url_citation", "container_file_citation", "file_path"}
REASONING_ENTRIES = {"summary_text", "reasoning_text"}
# code_interpreter_call outputs: logs stay in the response, an image follows it as a part.
CODE_OUTPUTS = {"logs": "server_tool_call_response", "image": "uri"}


def test_every_responses_content_type_has_a_stated_fate() -> None:
    from openai.types.responses import (
        response_code_interpreter_tool_call,
        response_input_item_param,
        response_output_message,
        response_output_text,
        response_reasoning_item,
    )

    sdk = _tags(R.ResponseInputContent)
    sdk |= _tags(_hints(response_output_message.ResponseOutputMessage)["content"])
    sdk |= _tags(_hints(response_input_item_param.FunctionCallOutput)["output"])
    assert not sdk - set(MESSAGE_CONTENT), sdk - set(MESSAGE_CONTENT)
    assert _tags(response_output_text.Annotation) <= ANNOTATIONS
    reasoning = _tags(response_reasoning_item.Summary) | _tags(response_reasoning_item.Content)
    assert reasoning <= REASONING_ENTRIES
    assert _tags(response_code_interpreter_tool_call.Output) <= set(CODE_OUTPUTS)


@pytest.mark.parametrize("kind", sorted(MESSAGE_CONTENT))
def test_each_content_type_in_a_message_and_a_tool_output(kind: str) -> None:
    handling, entry = MESSAGE_CONTENT[kind]
    role = "assistant" if kind in ("output_text", "refusal") else "user"
    msg = {"type": "message", "role": role, "content": [entry]}
    f = openai_responses.translate({"model": "gpt-x", "input": [msg]}, None)
    assert isinstance(f, InferenceCall)
    _assert_handled(f, handling)
    if kind.startswith("input_"):
        # A function's output may be a list of these too: text stays in the result, media
        # follow it as parts.
        call = ITEM_SAMPLES["function_call"]
        out = {"type": "function_call_output", "call_id": "call_f", "output": [entry]}
        f = openai_responses.translate({"model": "gpt-x", "input": [call, out]}, None)
        assert isinstance(f, InferenceCall)
        _assert_handled(f, "tool_call_response" if handling == "text" else handling)


@pytest.mark.parametrize("kind", sorted(ANNOTATIONS))
def test_each_annotation_counts_a_citation(kind: str) -> None:
    text = {"type": "output_text", "text": "a", "annotations": [{"type": kind}]}
    msg = {**ITEM_SAMPLES["message"], "content": [text]}
    f = openai_responses.translate(None, _response(msg))
    assert isinstance(f, InferenceCall)
    assert f.degradations == {"text_citation": 1}
    assert _parts(f) == [TextPart("a")]


def test_each_code_interpreter_output() -> None:
    outputs = [{"type": "logs", "logs": "1"}, {"type": "image", "url": "https://example.com/p.png"}]
    item = {**ITEM_SAMPLES["code_interpreter_call"], "outputs": outputs}
    f = openai_responses.translate(None, _response(item))
    assert isinstance(f, InferenceCall)
    kinds = [type(p) for p in _parts(f)]
    assert kinds == [ServerToolCallPart, ServerToolCallResponsePart, UriPart]


# ---------------------------------------------------------------------------------------------
# Responses: stream events
# ---------------------------------------------------------------------------------------------

# What each event gives. "final": the answer; "start": the response so far; "error": ends the
# stream; "item": a whole item (output_item.added / .done); "delta": content joined into its
# item, so a stream cut before the item was done still holds it; "progress": carries no content
# (checked below: only ids and indices); "preview": a partial image, superseded by the item.
RESPONSE_EVENTS: dict[str, str] = {
    "response.created": "start",
    "response.in_progress": "start",
    "response.queued": "start",
    "response.completed": "final",
    "response.incomplete": "final",
    "response.failed": "final",
    "error": "error",
    "response.output_item.added": "item",
    "response.output_item.done": "item",
    "response.content_part.added": "delta",
    "response.content_part.done": "delta",
    "response.output_text.delta": "delta",
    "response.output_text.done": "delta",
    "response.output_text.annotation.added": "delta",
    "response.refusal.delta": "delta",
    "response.refusal.done": "delta",
    "response.function_call_arguments.delta": "delta",
    "response.function_call_arguments.done": "delta",
    "response.custom_tool_call_input.delta": "delta",
    "response.custom_tool_call_input.done": "delta",
    "response.code_interpreter_call_code.delta": "delta",
    "response.code_interpreter_call_code.done": "delta",
    "response.mcp_call_arguments.delta": "delta",
    "response.mcp_call_arguments.done": "delta",
    "response.reasoning_summary_part.added": "delta",
    "response.reasoning_summary_part.done": "delta",
    "response.reasoning_summary_text.delta": "delta",
    "response.reasoning_summary_text.done": "delta",
    "response.reasoning_text.delta": "delta",
    "response.reasoning_text.done": "delta",
    "response.shell_call_command.added": "delta",
    "response.shell_call_command.delta": "delta",
    "response.shell_call_command.done": "delta",
    "response.shell_call_output_content.delta": "delta",
    "response.shell_call_output_content.done": "delta",
    "response.audio.delta": "delta",
    "response.audio.transcript.delta": "delta",
    "response.audio.done": "progress",
    "response.audio.transcript.done": "progress",
    "response.code_interpreter_call.in_progress": "progress",
    "response.code_interpreter_call.interpreting": "progress",
    "response.code_interpreter_call.completed": "progress",
    "response.compaction.compacting": "progress",
    "response.file_search_call.in_progress": "progress",
    "response.file_search_call.searching": "progress",
    "response.file_search_call.completed": "progress",
    "response.web_search_call.in_progress": "progress",
    "response.web_search_call.searching": "progress",
    "response.web_search_call.completed": "progress",
    "response.image_generation_call.in_progress": "progress",
    "response.image_generation_call.generating": "progress",
    "response.image_generation_call.completed": "progress",
    "response.image_generation_call.partial_image": "preview",
    "response.mcp_call.in_progress": "progress",
    "response.mcp_call.completed": "progress",
    "response.mcp_call.failed": "progress",
    "response.mcp_list_tools.in_progress": "progress",
    "response.mcp_list_tools.completed": "progress",
    "response.mcp_list_tools.failed": "progress",
}
_NO_CONTENT = {"type", "sequence_number", "item_id", "output_index"}


def test_every_stream_event_type_has_a_stated_fate() -> None:
    sdk = _tags(R.ResponseStreamEvent)
    assert not sdk - set(RESPONSE_EVENTS), sdk - set(RESPONSE_EVENTS)


def test_progress_events_carry_no_content() -> None:
    for cls in _members(R.ResponseStreamEvent):
        (kind,) = _literals(_hints(cls)["type"])
        if RESPONSE_EVENTS.get(kind) == "progress":
            assert _fields(cls) <= _NO_CONTENT, (kind, _fields(cls) - _NO_CONTENT)


_CREATED = {
    "type": "response.created",
    "response": {**_response(), "status": "in_progress"},
}


def _cut(*events: dict[str, Any]) -> InferenceCall:
    """A stream of these events, cut before its final event."""
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in [_CREATED, *events])
    f = openai_responses.translate(None, list(iter_events(text)))
    assert isinstance(f, InferenceCall), f
    assert_valid_messages(f)
    assert f.degradations.get("truncated_stream") == 1
    return f


def _added(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": 0, "item": item}


def _ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "output_index": 0, "item_id": "it_1", "sequence_number": 1, **fields}


# A cut stream of each "delta" event (after the item's output_item.added where the API sends
# one, its content still empty) and a string the fact must then hold.
DELTA_STREAMS: dict[str, tuple[list[dict[str, Any]], str]] = {}


def _delta(kind: str, events: list[dict[str, Any]], needle: str) -> None:
    DELTA_STREAMS[kind] = (events, needle)


_MSG = _added({"type": "message", "id": "it_1", "role": "assistant", "content": []})
_RS = _added({"type": "reasoning", "id": "it_1", "summary": []})
_delta(
    "response.output_text.delta",
    [_MSG, _ev("response.output_text.delta", content_index=0, delta="Hel")],
    "Hel",
)
_delta(
    "response.output_text.done",
    [_MSG, _ev("response.output_text.done", content_index=0, text="Hello")],
    "Hello",
)
_delta(
    "response.content_part.added",
    [
        _MSG,
        _ev(
            "response.content_part.added",
            content_index=0,
            part={"type": "output_text", "text": "Hi"},
        ),
    ],
    "Hi",
)
_delta(
    "response.content_part.done",
    [
        _MSG,
        _ev(
            "response.content_part.done", content_index=0, part={"type": "refusal", "refusal": "No"}
        ),
    ],
    "No",
)
_delta(
    "response.output_text.annotation.added",
    [
        _MSG,
        _ev("response.output_text.delta", content_index=0, delta="cited"),
        _ev(
            "response.output_text.annotation.added",
            content_index=0,
            annotation_index=0,
            annotation={"type": "url_citation", "url": "https://example.com"},
        ),
    ],
    "text_citation",
)
_delta(
    "response.refusal.delta",
    [_MSG, _ev("response.refusal.delta", content_index=0, delta="Sorr")],
    "Sorr",
)
_delta(
    "response.refusal.done",
    [_MSG, _ev("response.refusal.done", content_index=0, refusal="Sorry")],
    "Sorry",
)
_FC = _added(
    {"type": "function_call", "id": "it_1", "call_id": "call_1", "name": "f", "arguments": ""}
)
_delta(
    "response.function_call_arguments.delta",
    [_FC, _ev("response.function_call_arguments.delta", delta='{"city": "Par')],
    "malformed_arguments",  # cut mid-JSON: counted, the text is on raw
)
_delta(
    "response.function_call_arguments.done",
    [_FC, _ev("response.function_call_arguments.done", arguments='{"city": "Paris"}')],
    "Paris",
)
_CT = _added(
    {"type": "custom_tool_call", "id": "it_1", "call_id": "call_1", "name": "g", "input": ""}
)
_delta(
    "response.custom_tool_call_input.delta",
    [_CT, _ev("response.custom_tool_call_input.delta", delta="*** Begin")],
    "*** Begin",
)
_delta(
    "response.custom_tool_call_input.done",
    [_CT, _ev("response.custom_tool_call_input.done", input="*** Begin Patch")],
    "*** Begin Patch",
)
_CI = _added(
    {
        "type": "code_interpreter_call",
        "id": "it_1",
        "container_id": "c",
        "code": "",
        "outputs": None,
        "status": "in_progress",
    }
)
_delta(
    "response.code_interpreter_call_code.delta",
    [_CI, _ev("response.code_interpreter_call_code.delta", delta="print(")],
    "print(",
)
_delta(
    "response.code_interpreter_call_code.done",
    [_CI, _ev("response.code_interpreter_call_code.done", code="print(2)")],
    "print(2)",
)
_MC = _added({"type": "mcp_call", "id": "it_1", "server_label": "s", "name": "t", "arguments": ""})
_delta(
    "response.mcp_call_arguments.delta",
    [_MC, _ev("response.mcp_call_arguments.delta", delta='{"q": "mcp_')],
    "mcp_",
)
_delta(
    "response.mcp_call_arguments.done",
    [_MC, _ev("response.mcp_call_arguments.done", arguments='{"q": "mcp_whole"}')],
    "mcp_whole",
)
_delta(
    "response.reasoning_summary_part.added",
    [
        _RS,
        _ev(
            "response.reasoning_summary_part.added",
            summary_index=0,
            part={"type": "summary_text", "text": "Plan"},
        ),
    ],
    "Plan",
)
_delta(
    "response.reasoning_summary_part.done",
    [
        _RS,
        _ev(
            "response.reasoning_summary_part.done",
            summary_index=0,
            part={"type": "summary_text", "text": "Plan B"},
        ),
    ],
    "Plan B",
)
_delta(
    "response.reasoning_summary_text.delta",
    [_RS, _ev("response.reasoning_summary_text.delta", summary_index=0, delta="Thin")],
    "Thin",
)
_delta(
    "response.reasoning_summary_text.done",
    [_RS, _ev("response.reasoning_summary_text.done", summary_index=0, text="Think")],
    "Think",
)
_delta(
    "response.reasoning_text.delta",
    [_RS, _ev("response.reasoning_text.delta", content_index=0, delta="raw th")],
    "raw th",
)
_delta(
    "response.reasoning_text.done",
    [_RS, _ev("response.reasoning_text.done", content_index=0, text="raw thought")],
    "raw thought",
)
_SH = _added(
    {
        "type": "shell_call",
        "id": "it_1",
        "call_id": "call_s",
        "status": "in_progress",
        "action": {"commands": [], "timeout_ms": None, "max_output_length": None},
    }
)
_SH_EV = {"type": "", "output_index": 0, "sequence_number": 1, "command_index": 0}
_delta(
    "response.shell_call_command.added",
    [_SH, {**_SH_EV, "type": "response.shell_call_command.added", "command": "ls"}],
    '"ls"',
)
_delta(
    "response.shell_call_command.delta",
    [
        _SH,
        {**_SH_EV, "type": "response.shell_call_command.added", "command": ""},
        {**_SH_EV, "type": "response.shell_call_command.delta", "delta": "ls -"},
        {**_SH_EV, "type": "response.shell_call_command.delta", "delta": "la"},
    ],
    '"ls -la"',
)
_delta(
    "response.shell_call_command.done",
    [_SH, {**_SH_EV, "type": "response.shell_call_command.done", "command": "git status"}],
    '"git status"',
)
_SHO = _added(
    {
        "type": "shell_call_output",
        "id": "it_1",
        "call_id": "call_s",
        "status": "in_progress",
        "output": [],
    }
)
_delta(
    "response.shell_call_output_content.delta",
    [
        _SHO,
        _ev(
            "response.shell_call_output_content.delta", command_index=0, delta={"stdout": "a.txt\n"}
        ),
        _ev(
            "response.shell_call_output_content.delta",
            command_index=0,
            delta={"stdout": "b.txt", "stderr": "warn"},
        ),
    ],
    '"a.txt\\nb.txt"',
)
_delta(
    "response.shell_call_output_content.done",
    [
        _SHO,
        _ev(
            "response.shell_call_output_content.done",
            command_index=0,
            output=[{"stdout": "c.txt", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
        ),
    ],
    '"exit_code": 0',
)
_delta(
    "response.audio.transcript.delta",
    [_ev("response.audio.transcript.delta", delta="Hello there")],
    "Hello there",
)
_delta("response.audio.delta", [_ev("response.audio.delta", delta="UklGRg==")], "UklGRg==")


def test_every_delta_event_has_a_cut_stream_case() -> None:
    deltas = {k for k, v in RESPONSE_EVENTS.items() if v == "delta"}
    assert deltas == set(DELTA_STREAMS)


@pytest.mark.parametrize("kind", sorted(DELTA_STREAMS))
def test_a_stream_cut_after_each_delta_event_keeps_its_content(kind: str) -> None:
    events, needle = DELTA_STREAMS[kind]
    f = _cut(*events)
    if needle in f.degradations:
        return
    messages = json.dumps(msgspec.to_builtins(f.output_messages), ensure_ascii=False)
    assert needle in messages, (kind, messages)


def test_deltas_of_an_item_never_announced_land_in_the_model_turn() -> None:
    """A message known only from its deltas (no output_item.added) is the assistant's, and a
    reasoning_text part announced by content_part.added belongs to a reasoning item."""
    f = _cut(_ev("response.output_text.delta", content_index=0, delta="Hi"))
    assert [(m.role, m.parts) for m in f.output_messages] == [("assistant", [TextPart("Hi")])]
    f = _cut(
        _ev(
            "response.content_part.added",
            content_index=0,
            part={"type": "reasoning_text", "text": ""},
        ),
        _ev("response.reasoning_text.delta", content_index=0, delta="hmm"),
    )
    assert [(m.role, m.parts) for m in f.output_messages] == [("assistant", [ReasoningPart("hmm")])]
    assert "unsupported_content" not in f.degradations


# ---------------------------------------------------------------------------------------------
# Chat Completions
# ---------------------------------------------------------------------------------------------

CHAT_CONTENT: dict[str, tuple[str, dict[str, Any]]] = {
    "text": ("text", {"type": "text", "text": "a"}),
    "image_url": ("uri", {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}),
    "input_audio": (
        "blob",
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    ),
    "file": ("file", {"type": "file", "file": {"file_id": "file_1"}}),
    "refusal": ("text", {"type": "refusal", "refusal": "no"}),
}
CHAT_ROLES = {
    "developer": "developer",
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}
CHAT_TOOL_CALLS = {"function": "tool_call", "custom": "tool_call"}
CHAT_ANNOTATIONS = {"url_citation": "count:text_citation"}
# The fields of an answer (ChatCompletionMessage) and of a stream's delta (ChoiceDelta).
CHAT_MESSAGE_FIELDS = {
    "role": "the message's role",
    "content": "text",
    "refusal": "text",
    "annotations": "count:text_citation",
    "audio": "blob",
    "function_call": "tool_call",
    "tool_calls": "tool_call",
}


def test_every_chat_type_has_a_stated_fate() -> None:
    from openai.types.chat import chat_completion_assistant_message_param, chat_completion_message

    content = _tags(C.ChatCompletionContentPartParam)
    content |= _tags(chat_completion_assistant_message_param.ContentArrayOfContentPart)
    assert not content - set(CHAT_CONTENT), content - set(CHAT_CONTENT)
    roles = _tags(C.ChatCompletionMessageParam, "role")
    assert not roles - set(CHAT_ROLES), roles - set(CHAT_ROLES)
    calls = _tags(C.ChatCompletionMessageToolCallUnion) | _tags(
        C.ChatCompletionMessageToolCallUnionParam
    )
    assert not calls - set(CHAT_TOOL_CALLS), calls - set(CHAT_TOOL_CALLS)
    assert not _tags(chat_completion_message.Annotation) - set(CHAT_ANNOTATIONS)
    fields = _fields(C.ChatCompletionMessage) | _fields(C.chat_completion_chunk.ChoiceDelta)
    assert not fields - set(CHAT_MESSAGE_FIELDS), fields - set(CHAT_MESSAGE_FIELDS)


@pytest.mark.parametrize("kind", sorted(CHAT_CONTENT))
@pytest.mark.parametrize("role", ["system", "developer", "user", "assistant", "tool"])
def test_each_chat_content_type_in_each_role(kind: str, role: str) -> None:
    handling, entry = CHAT_CONTENT[kind]
    msg: dict[str, Any] = {"role": role, "content": [entry]}
    if role == "tool":
        msg["tool_call_id"] = "call_1"
        handling = "tool_call_response" if handling == "text" else handling
    f = openai_chat.translate({"model": "gpt-x", "messages": [msg]}, None)
    assert isinstance(f, InferenceCall)
    _assert_handled(f, handling)


_AUDIO = {"id": "audio_1", "data": "UklGRg==", "transcript": "said", "expires_at": 1}
CHAT_FIELD_SAMPLES: dict[str, Any] = {
    "content": "hello",
    "refusal": "no",
    "annotations": [{"type": "url_citation", "url_citation": {"url": "https://example.com"}}],
    "audio": _AUDIO,
    "function_call": {"name": "f", "arguments": "{}"},
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "call_2", "type": "custom", "custom": {"name": "g", "input": "x"}},
    ],
}


@pytest.mark.parametrize("key", sorted(CHAT_FIELD_SAMPLES))
def test_each_chat_message_field_in_an_answer_and_a_stream(key: str) -> None:
    value = CHAT_FIELD_SAMPLES[key]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-x",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", key: value}}
        ],
    }
    f = openai_chat.translate(None, body)
    assert isinstance(f, InferenceCall)
    _assert_handled(f, CHAT_MESSAGE_FIELDS[key])
    if key == "tool_calls":
        value = [{**c, "index": i} for i, c in enumerate(value)]
    chunk = {**body, "object": "chat.completion.chunk"}
    chunk["choices"] = [
        {"index": 0, "finish_reason": "stop", "delta": {"role": "assistant", key: value}}
    ]
    f = openai_chat.translate(
        None, list(iter_events(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"))
    )
    assert isinstance(f, InferenceCall)
    _assert_handled(f, CHAT_MESSAGE_FIELDS[key])


def test_a_chat_tool_call_of_an_unknown_type_is_counted() -> None:
    call = {"id": "call_1", "type": "computer", "computer": {"action": "click"}}
    msg = {"role": "assistant", "content": None, "tool_calls": [call]}
    f = openai_chat.translate({"model": "gpt-x", "messages": [msg]}, None)
    assert isinstance(f, InferenceCall)
    assert f.degradations == {"unsupported_content": 1}
