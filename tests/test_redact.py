"""Credential redaction: everywhere in a fact, counted by reason, identity untouched."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from lithify.model import Message, TextPart
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
