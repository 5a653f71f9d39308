"""Properties every translator keeps, whatever it is fed: it never raises, every message it emits
validates against the canonical schema, and its output does not depend on the input's wire form."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lithify.model import InferenceCall
from lithify.translate import translate_document
from lithify.translate.otlp import Span
from lithify.translate.provider import translate_exchange
from lithify.translate.telemetry import translate_span
from tests.helpers import assert_valid_messages

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=30)
)
json_like = st.recursive(
    scalars,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
    max_leaves=25,
)
PART_TYPES = [
    "text",
    "reasoning",
    "tool_call",
    "tool_call_response",
    "blob",
    "uri",
    "generic",
    None,
    3,
]
ROLES = ["system", "user", "assistant", "tool", "developer", "model", None, 7]
part = st.fixed_dictionaries(
    {"type": st.sampled_from(PART_TYPES)},
    optional={
        "content": json_like,
        "id": json_like,
        "name": json_like,
        "arguments": json_like | st.text(max_size=20),
        "response": json_like,
        "result": json_like,
    },
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(ROLES)},
    optional={"parts": st.lists(part, max_size=4) | json_like, "finish_reason": json_like},
)
messages = st.lists(message, max_size=4)

TELEMETRY_KEYS = [
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.prompt",
    "gen_ai.completion",
    "gen_ai.prompt.0.role",
    "gen_ai.prompt.0.content",
    "gen_ai.prompt.1.tool_calls.0.arguments",
    "gen_ai.completion.0.content",
    "gen_ai.completion.0.tool_calls.0.name",
    "gen_ai.completion.1.finish_reason",
    "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content",
    "llm.input_messages.1.message.contents.0.message_content.text",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.output_messages.0.message.role",
    "llm.tools.0.tool.json_schema",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.request.model",
    "gen_ai.operation.name",
    "gen_ai.conversation.id",
]


def _attr_value(draw: st.DrawFn) -> Any:
    """Attribute values as producers send them: JSON text of messages, structured values, junk."""
    kind = draw(st.sampled_from(["json_text", "structured", "junk"]))
    msgs = draw(messages)
    if kind == "json_text":
        return json.dumps(msgs, default=str)
    if kind == "structured":
        return msgs
    return draw(json_like)


@st.composite
def attribute_maps(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(TELEMETRY_KEYS), min_size=1, max_size=8, unique=True))
    return {k: _attr_value(draw) for k in keys}


def _check(result: object) -> None:
    if isinstance(result, InferenceCall):
        assert_valid_messages(result)
        assert len(result.inference_call_id) == 32


@given(attribute_maps())
def test_any_telemetry_attributes(attrs: dict[str, Any]) -> None:
    span = Span("ab" * 16, "cd" * 8, None, "chat", 3, 1, 2, attrs)
    _check(translate_span(span))


@given(json_like, json_like)
def test_any_exchange(request: Any, response: Any) -> None:
    _check(translate_exchange(request, response))


@given(st.dictionaries(st.sampled_from(["model", "messages", "input", "contents", "system", "choices",
       "output", "candidates", "content", "type", "object", "max_tokens", "tools", "instructions"]),
       json_like | messages, max_size=6))  # fmt: skip
def test_any_provider_shaped_body(doc: dict[str, Any]) -> None:
    for r in translate_document(doc):
        _check(r)
    _check(translate_exchange(doc, doc))
