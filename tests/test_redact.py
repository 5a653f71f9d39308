"""Credential redaction: everywhere in a fact, counted by reason, identity untouched."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lithify.model import InferenceCall, Message, Skip, TextPart, ToolDefinition
from lithify.translate import anthropic, gemini, openai_chat, openai_responses
from lithify.translate._common import Degradations, finish
from lithify.translate.provider import translate_exchange
from lithify.translate.redact import CREDENTIAL_KEYS, MARKER, redact_string, redact_value
from lithify.translate.sse import SSEEvent
from tests.helpers import in_pieces
from tests.test_anthropic import stream_of as anthropic_stream
from tests.test_gemini import stream_of as gemini_stream

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


def test_any_service_api_key_is_a_credential() -> None:
    counts: Counter[str] = Counter()
    doc = {"metadata": {"Langfuse-Api-Key": "lf-123", "my_vendor_api_key": "v-9", "api_keys": 2}}
    out = redact_value(doc, counts)
    assert out["metadata"] == {
        "Langfuse-Api-Key": MARKER,
        "my_vendor_api_key": MARKER,
        "api_keys": 2,
    }
    assert counts == {"redacted_credential_field": 2}


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
        "output": [
            {"type": "reasoning", "encrypted_content": leading},
            {"type": "program", "id": "p1", "fingerprint": leading},  # Responses: round-tripped
        ],
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
        f'data: {{"type":"program","fingerprint":"{leading}"}}\n\n'
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


# Where a response format's JSON Schema sits in each provider's request (and in a Responses
# response, which echoes `text`): every property name in it is a field of the answer.
def _chat(s: object) -> dict[str, object]:
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": s}}}


OUTPUT_SCHEMA_PLACES = {
    "chat": _chat,
    "chat-compatible": lambda s: {"response_format": {"type": "json_schema", "schema": s}},
    "responses": lambda s: {"text": {"format": {"type": "json_schema", "name": "o", "schema": s}}},
    "gemini": lambda s: {"generationConfig": {"responseSchema": s, "responseJsonSchema": s}},
    "gemini-sdk": lambda s: {"config": {"response_schema": s, "response_json_schema": s}},
    "gemini-result": lambda s: {
        "tools": [{"functionDeclarations": [{"name": "f", "response": s, "responseJsonSchema": s}]}]
    },
    "anthropic": lambda s: {"output_config": {"format": {"type": "json_schema", "schema": s}}},
    "anthropic-beta": lambda s: {"output_format": {"type": "json_schema", "schema": s}},
}


@pytest.mark.parametrize("place", OUTPUT_SCHEMA_PLACES.values(), ids=OUTPUT_SCHEMA_PLACES)
def test_output_schemas_keep_credential_named_properties(place: Any) -> None:
    counts: Counter[str] = Counter()
    out = redact_value({"request": place(LOGIN_SCHEMA), "response": place(LOGIN_SCHEMA)}, counts)
    assert out == {"request": place(REDACTED_DEFAULT), "response": place(REDACTED_DEFAULT)}
    assert counts == {"redacted_provider_key": str(out).count(MARKER)}  # the `default` only


@pytest.mark.parametrize(
    "doc",
    [
        {"text": {"password": "hunter2"}},
        {"text": {"format": {"password": "hunter2"}}},
        {"response_format": {"password": "hunter2"}},
        {"response_format": {"json_schema": {"password": "hunter2"}}},
        {"output_config": {"password": "hunter2"}},
        {"schema": {"password": "hunter2"}},  # a `schema` nothing says is a response format's
        {"format": {"schema": {"password": "hunter2"}}},
        {"generationConfig": {"password": "hunter2"}},
    ],
)
def test_only_the_schema_itself_is_exempt(doc: dict[str, Any]) -> None:
    counts: Counter[str] = Counter()
    assert "hunter2" not in str(redact_value(doc, counts))
    assert counts == {"redacted_credential_field": 1}


TRANSLATED = {
    "openai-chat": lambda s: {
        "model": "m",
        "messages": [{"role": "user", "content": "q"}],
        **_chat(s),
    },
    "openai-responses": lambda s: {
        "model": "m",
        "input": "q",
        **OUTPUT_SCHEMA_PLACES["responses"](s),
    },
    "gemini": lambda s: {
        "contents": [{"role": "user", "parts": [{"text": "q"}]}],
        **OUTPUT_SCHEMA_PLACES["gemini"](s),
    },
}


@pytest.mark.parametrize("fmt", TRANSLATED)
def test_facts_keep_the_response_format_in_raw(fmt: str) -> None:
    call = translate_exchange(TRANSLATED[fmt](LOGIN_SCHEMA), None)
    assert isinstance(call, InferenceCall) and call.source.name == fmt
    assert call.raw["request"] == TRANSLATED[fmt](REDACTED_DEFAULT)
    # The schema held the answer to a form no message shows: counted, kept on raw.
    keys = str(call.raw).count(MARKER)
    assert call.degradations == {"output_schema": 1, "redacted_provider_key": keys}


# Property names, credential-named or not, in schemas nested to any depth; strings that hold no
# key or token shape (lower-case letters cannot make a bearer token), so only key names matter.
schema_names = st.sampled_from([*sorted(CREDENTIAL_KEYS), "Password", "X-Api-Key", "query"])
plain_text = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", max_size=20)
schemas = st.recursive(
    st.builds(lambda d: {"type": "string", "description": d}, plain_text),
    lambda inner: (
        st.builds(
            lambda props: {"type": "object", "properties": props, "required": sorted(props)},
            st.dictionaries(schema_names, inner, min_size=1, max_size=4),
        )
        | st.builds(lambda items: {"type": "array", "items": items}, inner)
    ),
    max_leaves=12,
)
schema_places = st.sampled_from(
    [
        *OUTPUT_SCHEMA_PLACES.values(),
        lambda s: {"tools": [{"type": "function", "function": {"name": "f", "parameters": s}}]},
        lambda s: {"tools": [{"name": "f", "input_schema": s}]},
    ]
)


def _has_credential_name(schema: Any) -> bool:
    if isinstance(schema, dict):
        props = schema.get("properties", {})
        return any(
            _normalize(k) in CREDENTIAL_KEYS or _has_credential_name(v) for k, v in props.items()
        ) or _has_credential_name(schema.get("items"))
    return False


def _normalize(key: str) -> str:
    return key.lower().replace("-", "_")


@given(schemas, schema_places)
def test_any_schema_in_a_schema_place_is_kept(schema: dict[str, Any], place: Any) -> None:
    doc = {"request": place(schema)}
    counts: Counter[str] = Counter()
    assert redact_value(doc, counts) is doc
    assert not counts


@given(schemas)
def test_the_same_schema_elsewhere_follows_the_key_rule(schema: dict[str, Any]) -> None:
    doc = {"request": {"metadata": schema}}
    counts: Counter[str] = Counter()
    out = redact_value(doc, counts)
    assert (MARKER in str(out)) == _has_credential_name(schema)
    assert set(counts) <= {"redacted_credential_field", "redacted_authorization"}


# -- media: base64 is data, never a credential --------------------------------------------------


def _image_with_key_shape(at: int) -> bytes:
    """~200 KB of PNG-like bytes whose base64 holds, at base64 offset ``at`` (a multiple of 4),
    `AIza` and 35 key characters: what a random screenshot holds with a real chance."""
    import base64
    import random

    data = bytearray(b"\x89PNG\r\n\x1a\n" + random.Random(at).randbytes(200_000))
    shape = base64.b64decode(GOOGLE_KEY + "x")  # 30 bytes that encode to the key and an `x`
    data[at // 4 * 3 : at // 4 * 3 + len(shape)] = shape
    return bytes(data)


@pytest.mark.parametrize("at", [0, 4, 76_000])  # 76_000: a MIME line start
def test_a_key_shape_inside_an_image_is_left_alone(at: int) -> None:
    import base64

    image = _image_with_key_shape(at)
    b64 = base64.b64encode(image).decode()
    assert b64[at : at + 40] == GOOGLE_KEY + "x"
    counts: Counter[str] = Counter()
    spellings = [
        b64,  # a bare base64 string (Anthropic source.data, Gemini inlineData.data)
        "data:image/png;base64," + b64,  # a data URL
        base64.encodebytes(image).decode(),  # MIME lines
        "data:image/png;base64," + base64.encodebytes(image).decode(),
        # base64 inside JSON text (a streamed generated image in an SSE event)
        'data: {"type":"response.image_generation_call.partial_image","partial_image_b64":"'
        + b64
        + '"}\n\n',
    ]
    for text in spellings:
        assert redact_string(text, counts) == text
    doc = {"messages": [{"content": [{"type": "image", "source": {"data": b64}}]}]}
    assert redact_value(doc, counts) is doc
    assert not counts


def test_a_key_beside_media_is_still_redacted() -> None:
    import base64

    b64 = base64.b64encode(_image_with_key_shape(8)).decode()
    counts: Counter[str] = Counter()
    out = redact_string(f'{{"key": "{GOOGLE_KEY}", "image": "{b64}"}}', counts)
    assert out == f'{{"key": "{MARKER}", "image": "{b64}"}}'
    # a short base64-looking string is no cover: keys are short runs
    assert redact_string(GOOGLE_KEY, counts) == MARKER
    assert redact_string("data:text/plain;base64," + OPENAI_KEY, counts).endswith(MARKER)
    # keys one per line are lines of another width than base64's
    keys = "\n".join([GOOGLE_KEY.replace("_", "x")] * 8)
    assert GOOGLE_KEY.replace("_", "x") not in redact_string(keys, counts)
    assert counts["redacted_provider_key"] == 11


# -- URLs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "secrets"),
    [
        ("https://user:pass@host/x.png", ["pass"]),
        ("postgresql://lithify:s3cr3t-pw@db.internal:5432/facts", ["s3cr3t-pw"]),
        (
            f"https://generativelanguage.googleapis.com/v1beta/x?alt=sse&key={GOOGLE_KEY}",
            [GOOGLE_KEY],
        ),
        ("https://api.example.com/img.png?api_key=plain123&size=2", ["plain123"]),
        ("https://h.example/x?access_token=ya29.a0Af&token=tok42", ["ya29.a0Af", "tok42"]),
        (
            "https://b.s3.amazonaws.com/shot.png?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=AKIAEXAMPLE%2F20250101&X-Amz-Security-Token=FwoGZX"
            "&X-Amz-Signature=0f1e2d3c4b5a",
            ["AKIAEXAMPLE", "FwoGZX", "0f1e2d3c4b5a"],
        ),
        ("https://a.blob.core.windows.net/c/b.png?sv=2022-11-02&sig=abc%2Bdef%3D", ["abc%2Bdef"]),
        (
            "https://d1.cloudfront.net/a.png?Expires=1&Signature=Zm9vYmFy~&Key-Pair-Id=K2",
            ["Zm9vYmFy"],
        ),
    ],
)
def test_credentials_in_urls_are_redacted(url: str, secrets: list[str]) -> None:
    counts: Counter[str] = Counter()
    doc = {"content": [{"type": "image_url", "image_url": {"url": url}}], "text": f"see {url} ."}
    out = redact_value(doc, counts)
    for text in (out["content"][0]["image_url"]["url"], out["text"]):
        assert MARKER in text
        for secret in secrets:
            assert secret not in text
    assert counts["redacted_credential_field"] + counts["redacted_provider_key"] >= 2 * len(secrets)
    assert redact_value(out, Counter()) == out  # redacting again changes nothing


def test_urls_without_credentials_are_untouched() -> None:
    counts: Counter[str] = Counter()
    for url in [
        "https://example.com/a.png?size=2&format=png",
        "https://user@example.com/x",  # a user name alone is no secret
        "mailto:someone@example.com",
        "https://example.com/monkey=1",  # not a query parameter
        "https://example.com/?tokens=5&max_key=3",
    ]:
        assert redact_string(url, counts) == url
    assert not counts


def test_a_password_in_a_url_makes_bytes_suspect_and_the_fact_redacted() -> None:
    from lithify.translate.redact import CLEAN, SUSPECT, screen

    url = "https://agent:hunter2-pw@files.example.com/shot.png"
    assert screen(orjson.dumps({"image": url})) == SUSPECT
    assert (
        screen(memoryview(orjson.dumps({"image": url.replace("agent:hunter2-pw@", "")}))) == CLEAN
    )
    fact = finish(
        source="t",
        deg=Degradations(),
        identity=("url",),
        raw={"messages": [{"content": [{"type": "image_url", "image_url": {"url": url}}]}]},
    )
    assert "hunter2" not in orjson.dumps(fact.raw).decode()
    assert fact.degradations == {"redacted_credential_field": 1}


@pytest.mark.parametrize(
    ("size", "numpy"),
    [(100, False), (100, True), (6000, False), (6000, True), ((1 << 20) + 1, True)],
)
def test_the_screen_finds_a_needle_in_any_case_at_any_size(
    monkeypatch: pytest.MonkeyPatch, size: int, numpy: bool
) -> None:
    from lithify.translate import redact
    from lithify.translate.redact import CLEAN, ESCAPED, SUSPECT, screen

    # Folded by the byte table, or (once the process has screened enough) by numpy, which
    # never takes the smallest bodies.
    monkeypatch.setattr(redact, "_screened_by_table", redact._TABLE_UNTIL if numpy else 0)

    filler = b'{"t": "' + b"x" * size + b'", "h": "'
    assert screen(filler + b'plain"}') == CLEAN
    assert screen(filler + b'BeArEr abcdefghij"}') == SUSPECT  # case folded
    assert screen(memoryview(filler + b'sK-proj-abc"}')) == SUSPECT
    assert screen(bytearray(filler + b'\\u0042earer x"}')) == ESCAPED  # an escape may spell one


# --- credentials cut across a stream's events ---------------------------------------------------
# A model streams a key a few characters an event: no event holds it whole, so a screen of the
# raw stream cannot vouch for what the pieces add up to.
KEY = "sk-proj-" + "a1B2c3D4e5" * 4
SAID = f"Your key is {KEY}, keep it safe."
LOGIN = {"user": "me", "password": "hunter2xyz"}


def _no_secret(fact: InferenceCall | Skip) -> InferenceCall:
    """The fact says neither secret; its raw holds no piece of the key (the password of a
    call's arguments stays in their JSON text there, as in a whole answer's raw), and
    translates again to the same messages."""
    assert isinstance(fact, InferenceCall)
    said = orjson.dumps(msgspec.to_builtins(fact.output_messages)).decode()
    assert KEY not in said and "hunter2xyz" not in said and MARKER in said
    raw = orjson.dumps(fact.raw).decode()
    assert not any(KEY[i : i + 8] in raw for i in range(len(KEY) - 8))
    again = translate_exchange(fact.raw["request"], fact.raw["response"])
    assert isinstance(again, InferenceCall) and again.output_messages == fact.output_messages
    return fact


def _chat_stream(rng: random.Random) -> list[SSEEvent]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> SSEEvent:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return SSEEvent(None, orjson.dumps({"id": "c", "model": "m", "choices": [choice]}).decode())

    fn = {"name": "login", "arguments": ""}
    head = {"role": "assistant", "tool_calls": [{"index": 0, "id": "t1", "type": "function", "function": fn}]}  # fmt: skip
    return [
        *(chunk({"content": c}) for c in in_pieces(SAID, rng, 4)),
        chunk(head),
        *(
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": c}}]})
            for c in in_pieces(orjson.dumps(LOGIN).decode(), rng, 4)
        ),
        chunk({}, "tool_calls"),
        SSEEvent(None, "[DONE]"),
    ]


def _responses_stream(rng: random.Random) -> list[SSEEvent]:
    msg = {"type": "message", "id": "m1", "role": "assistant", "content": []}
    call = {"type": "function_call", "id": "fc", "call_id": "t1", "name": "login", "arguments": ""}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": msg},
        *(
            {
                "type": "response.output_text.delta",
                "output_index": 0,
                "item_id": "m1",
                "content_index": 0,
                "delta": c,
            }
            for c in in_pieces(SAID, rng, 4)
        ),
        {"type": "response.output_item.added", "output_index": 1, "item": call},
        *(
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 1,
                "item_id": "fc",
                "delta": c,
            }
            for c in in_pieces(orjson.dumps(LOGIN).decode(), rng, 4)
        ),
    ]
    return [SSEEvent(e["type"], orjson.dumps(e).decode()) for e in events]


@pytest.mark.parametrize("seed", range(5))
def test_a_credential_cut_across_a_streams_events_is_redacted(seed: int) -> None:
    rng = random.Random(seed)
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "text", "text": SAID},
            {"type": "tool_use", "id": "t1", "name": "login", "input": LOGIN},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "output_tokens": 9},
    }
    whole = _no_secret(anthropic.translate(None, message))
    streamed = _no_secret(anthropic.translate(None, anthropic_stream(message, seed)))
    assert streamed.output_messages == whole.output_messages
    parts = [{"text": SAID}, {"functionCall": {"name": "login", "args": LOGIN, "id": "t1"}}]
    response = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}  # fmt: skip
    whole = _no_secret(gemini.translate(None, response))
    for streamed_args in (False, True):
        events = gemini_stream(response, seed, streamed_args)
        streamed = _no_secret(gemini.translate(None, events))
        assert streamed.output_messages == whole.output_messages
        # The JSON-array form: parsed chunks, which raw keeps as a list.
        parsed = _no_secret(gemini.translate(None, [orjson.loads(e.data) for e in events]))
        assert isinstance(parsed.raw["response"], list)
        assert parsed.output_messages == whole.output_messages
    chat = _no_secret(openai_chat.translate(None, _chat_stream(rng)))
    assert chat.degradations == {"redacted_provider_key": 1, "redacted_credential_field": 1}
    cut = _no_secret(openai_responses.translate(None, _responses_stream(rng)))
    assert cut.degradations == {"redacted_provider_key": 1, "redacted_credential_field": 1, "truncated_stream": 1}  # fmt: skip


@given(st.text(max_size=30), st.text(max_size=30), st.lists(st.integers(1, 6), min_size=1, max_size=40))  # fmt: skip
def test_any_cut_of_a_streamed_key_leaves_no_piece_of_it(before: str, after: str, sizes: list[int]) -> None:  # fmt: skip
    text, pieces, at = f"{before} {KEY} {after}", [], 0
    while at < len(text):
        n = sizes[len(pieces) % len(sizes)]
        pieces.append(text[at : at + n])
        at += n
    choice = [{"index": 0, "delta": {"content": p}, "finish_reason": None} for p in pieces]
    evs = [SSEEvent(None, orjson.dumps({"id": "c", "choices": [c]}).decode()) for c in choice]
    fact = openai_chat.translate(None, [*evs, SSEEvent(None, "[DONE]")])
    assert isinstance(fact, InferenceCall)
    assert not any(KEY[i : i + 8] in fact.raw["response"] for i in range(len(KEY) - 8))
    said = orjson.dumps(msgspec.to_builtins(fact.output_messages)).decode()
    assert KEY not in said and MARKER in said
    again = translate_exchange(None, fact.raw["response"])
    assert isinstance(again, InferenceCall) and again.output_messages == fact.output_messages


def test_a_credential_field_inside_json_text_goes_from_raw_too() -> None:
    # Arguments travel as JSON text (Chat Completions), and JSON attributes hold messages as
    # text: raw's walk sees a string there, the content's walk the field.
    spaced = '{"user": "alice", "password": "hunter2xyz"}'
    fn = {"name": "login", "arguments": spaced}
    msg = {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": fn}]}
    body = {"id": "x", "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}]}
    fact = translate_exchange(None, body)
    assert isinstance(fact, InferenceCall)
    assert fact.output_messages[0].parts[0].arguments == {"user": "alice", "password": MARKER}  # type: ignore[union-attr]
    assert "hunter2xyz" not in orjson.dumps(fact.raw).decode()
    again = translate_exchange(fact.raw["request"], fact.raw["response"])
    assert isinstance(again, InferenceCall) and again.output_messages == fact.output_messages
    # Compact, and with a value the standard library writes in ASCII escapes.
    said = (
        '[{"role":"assistant","parts":[{"type":"tool_call","arguments":{"api_key":"pässwort1"}}]}]'
    )
    call = finish(
        source="test",
        deg=Degradations(),
        identity=("otlp", "t", "s"),
        raw={
            "attributes": {
                "gen_ai.output.messages": said,
                "other": json.dumps({"api_key": "pässwort1"}),
            }
        },
        output_messages=[Message("assistant", [TextPart("ok")])],
        request={"tool": {"api_key": "pässwort1"}},
    )
    assert "pässwort1" not in orjson.dumps(call.raw).decode() and "p\\u00e4" not in str(call.raw)
    assert call.raw["attributes"]["gen_ai.output.messages"] == said.replace('"pässwort1"', f'"{MARKER}"')  # fmt: skip
