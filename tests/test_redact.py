"""Credential redaction: everywhere in a fact, counted by reason, identity untouched."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from lithify.model import Message, TextPart, ToolDefinition
from lithify.translate._common import Degradations, finish
from lithify.translate.redact import MARKER, redact_string, redact_value

OPENAI_KEY = "sk-proj-" + "A1b2C3d4" * 6
ANTHROPIC_KEY = "sk-ant-api03-" + "x9Y8z7W6" * 5
GOOGLE_KEY = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"


def test_provider_keys_and_bearer_tokens_in_text() -> None:
    counts: Counter[str] = Counter()
    text = f"keys {OPENAI_KEY} and {ANTHROPIC_KEY}, {GOOGLE_KEY}; header Bearer abcdefgh12345678"
    out = redact_string(text, counts)
    for secret in (OPENAI_KEY, ANTHROPIC_KEY, GOOGLE_KEY, "abcdefgh12345678"):
        assert secret not in out
    assert out.count(MARKER) == 4
    assert counts == {"redacted_provider_key": 3, "redacted_bearer_token": 1}


def test_ordinary_text_is_untouched() -> None:
    counts: Counter[str] = Counter()
    text = "the task-scheduler asks: is sk-8 a risk? Bearer of bad news. AIza"
    assert redact_string(text, counts) == text
    assert not counts


def test_credential_named_keys() -> None:
    counts: Counter[str] = Counter()
    doc = {
        "headers": {"Authorization": "Basic dXNlcjpwYXNz", "x-api-key": "abc"},
        "http.request.header.x-goog-api-key": ["k"],
        "api_key": None,
        "max_tokens": 5,
        "nested": [{"password": "hunter2"}],
    }
    out = redact_value(doc, counts)
    assert out["headers"] == {"Authorization": MARKER, "x-api-key": MARKER}
    assert out["http.request.header.x-goog-api-key"] == MARKER
    assert out["api_key"] is None and out["max_tokens"] == 5
    assert out["nested"] == [{"password": MARKER}]
    assert counts == {"redacted_authorization": 1, "redacted_credential_field": 3}
    assert doc["headers"]["x-api-key"] == "abc", "the input is not mutated"


def test_unchanged_values_are_not_copied() -> None:
    doc = {"a": [1, {"b": "c"}]}
    assert redact_value(doc, Counter()) is doc


def test_finish_redacts_content_and_raw_but_not_identity() -> None:
    deg = Degradations()
    call = finish(
        source="test",
        deg=deg,
        identity=("otlp", "t", OPENAI_KEY),
        raw={"attributes": {"gen_ai.input.messages": f"[my key is {OPENAI_KEY}]"}},
        span_id=OPENAI_KEY,
        input_messages=[Message("user", [TextPart(f"my key is {OPENAI_KEY}")])],
        request={"api_key": "secret-value"},
    )
    assert call.span_id == OPENAI_KEY  # identity fields are never changed
    assert call.input_messages[0].parts[0] == TextPart(f"my key is {MARKER}")
    assert OPENAI_KEY not in str(call.raw)
    assert call.request == {"api_key": MARKER}
    assert call.degradations == {"redacted_credential_field": 1, "redacted_provider_key": 2}


def test_identity_hashes_the_redacted_raw() -> None:
    a = finish(source="t", deg=Degradations(), identity=None, raw={"k": f"x {OPENAI_KEY}"})
    b = finish(source="t", deg=Degradations(), identity=None, raw={"k": f"x {ANTHROPIC_KEY}"})
    assert a.inference_call_id == b.inference_call_id  # same payload once credentials are gone


@given(st.text(max_size=200))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_string(text, Counter())
    counts: Counter[str] = Counter()
    assert redact_string(once, counts) == once
    assert not counts


# A JSON Schema property named like a credential is a name, not a secret.
LOGIN_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string"},
        "password": {"type": "string", "description": "The account password"},
        "api_key": {"type": "string", "default": OPENAI_KEY},
    },
    "required": ["username", "password"],
}
REDACTED_DEFAULT = {
    **LOGIN_SCHEMA,
    "properties": {**LOGIN_SCHEMA["properties"], "api_key": {"type": "string", "default": MARKER}},
}


def test_tool_schemas_keep_credential_named_properties() -> None:
    counts: Counter[str] = Counter()
    raw = {
        "request": {
            "tools": [
                {"type": "function", "function": {"name": "login", "parameters": LOGIN_SCHEMA}},
                {"name": "login", "input_schema": LOGIN_SCHEMA},
                {"functionDeclarations": [{"name": "a", "parametersJsonSchema": LOGIN_SCHEMA}]},
                {"function_declarations": [{"name": "b", "parameters": LOGIN_SCHEMA}]},
                # A remote tool's credentials are still credentials.
                {"type": "mcp", "headers": {"Authorization": "Bearer abcdefgh12345678"}},
            ],
            "functions": [{"name": "login", "parameters": LOGIN_SCHEMA}],
            "password": "hunter2",
            "parameters": {"password": "hunter2"},  # not a tool's schema
        }
    }
    out = redact_value(raw, counts)
    tools = out["request"]["tools"]
    assert tools[0]["function"]["parameters"] == REDACTED_DEFAULT
    assert tools[1]["input_schema"] == REDACTED_DEFAULT
    assert tools[2]["functionDeclarations"][0]["parametersJsonSchema"] == REDACTED_DEFAULT
    assert tools[3]["function_declarations"][0]["parameters"] == REDACTED_DEFAULT
    assert tools[4]["headers"] == {"Authorization": MARKER}
    assert out["request"]["functions"][0]["parameters"] == REDACTED_DEFAULT
    assert out["request"]["password"] == MARKER
    assert out["request"]["parameters"] == {"password": MARKER}
    assert counts == {
        "redacted_provider_key": 5,
        "redacted_authorization": 1,
        "redacted_credential_field": 2,
    }


def test_finish_keeps_the_tool_schema_in_tools_and_raw() -> None:
    tool = ToolDefinition("login", None, LOGIN_SCHEMA)
    raw = {"request": {"tools": [{"name": "login", "input_schema": LOGIN_SCHEMA}]}}
    call = finish(source="t", deg=Degradations(), identity=None, raw=raw, tools=[tool])
    assert call.tools[0].parameters == REDACTED_DEFAULT
    assert call.raw["request"]["tools"][0]["input_schema"] == REDACTED_DEFAULT
    assert call.degradations == {"redacted_provider_key": 2}


SIGNATURE = "EqQBCkgIARAB_sk-N2AMxYzq9rT1uVwXyZ0aB1cD2eF3gH4iJ5k" + "A" * 20 + "="


def test_opaque_state_is_never_altered() -> None:
    leading = "sk-" + "N2AMxYzq9rT1uVwXyZ0aB1cD2eF3"  # a blob may even start like a key
    doc = {
        "parts": [{"text": "hi", "thoughtSignature": SIGNATURE}, {"thought_signature": leading}],
        "content": [
            {"type": "thinking", "thinking": "…", "signature": leading},
            {"type": "redacted_thinking", "data": leading},
            {"type": "text", "text": leading, "data": leading},
        ],
        "output": [{"type": "reasoning", "encrypted_content": leading}],
    }
    counts: Counter[str] = Counter()
    out = redact_value(doc, counts)
    assert out["parts"] == doc["parts"]
    assert out["content"][:2] == doc["content"][:2]
    assert out["content"][2] == {"type": "text", "text": MARKER, "data": MARKER}
    assert out["output"] == doc["output"]
    assert counts == {"redacted_provider_key": 2}
    # The same fields inside JSON text (a stream's SSE text, JSON in a message attribute).
    sse = (
        f'data: {{"type":"signature_delta","signature":"{leading}"}}\n\n'
        f'data: {{"text":"{leading}"}}\n\n'
        f'"{{\\"encrypted_content\\": \\"{leading}\\"}}"'
    )
    counts.clear()
    assert redact_string(sse, counts) == sse.replace(f'"text":"{leading}', f'"text":"{MARKER}')
    assert counts == {"redacted_provider_key": 1}


BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/"
KEY_BODY = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
data_text = st.text(alphabet=BASE64, min_size=1, max_size=40)
key_shapes = st.builds(
    lambda prefix, body: prefix + body,
    st.sampled_from(["sk-", "sk-proj-", "sk-ant-api03-", "AIza"]),
    st.text(alphabet=KEY_BODY, min_size=35, max_size=60),
)


@given(data_text, key_shapes, st.text(alphabet=BASE64, max_size=40))
def test_key_shapes_inside_base64_data_are_data(head: str, key: str, tail: str) -> None:
    blob = head + key + tail
    counts: Counter[str] = Counter()
    assert redact_string(blob, counts) == blob
    assert not counts


@given(st.sampled_from([" ", '"', "=", ":", "(", "\n", ""]), key_shapes, data_text)
def test_key_shapes_after_a_boundary_are_redacted(before: str, key: str, after: str) -> None:
    text = f"{before}{key} {after}"
    counts: Counter[str] = Counter()
    assert redact_string(text, counts) == f"{before}{MARKER} {after}"
    assert counts == {"redacted_provider_key": 1}


def test_odd_block_types_do_not_break_the_walk() -> None:
    doc = {"type": ["redacted_thinking"], "data": f"x {OPENAI_KEY}", "signature": {"k": OPENAI_KEY}}
    counts: Counter[str] = Counter()
    assert redact_value(doc, counts) == {
        "type": ["redacted_thinking"],
        "data": f"x {MARKER}",
        "signature": {"k": MARKER},  # only a string is an opaque blob
    }
    assert counts == {"redacted_provider_key": 2}
