"""Text that is not valid Unicode on its way in — a lone surrogate escape, half of a character —
is never a lost fact, a lost event or a crash. A stream may split a character between two events
(each escapes its half, as JSON encoders that write ASCII do): the halves are joined again. A
half that stays alone becomes U+FFFD, counted ``invalid_text``. An event that cannot be read in
the middle of any provider's stream is counted ``malformed_messages``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lithify.ingest.files import load_body, read_file, read_pair
from lithify.ingest.recorder import SpooledExchange, translate_spooled
from lithify.model import InferenceCall, TextPart, ToolCallPart, encode
from lithify.translate import translate_document, translate_stream
from lithify.translate.otlp import load_json
from tests.fakes import wire
from tests.fakes.answers import answer

PROVIDERS = [wire.CHAT, wire.RESPONSES, wire.ANTHROPIC, wire.GEMINI]
MODEL = "gpt-4o-mini"
REQUESTS: dict[str, dict[str, Any]] = {
    wire.CHAT: {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True},
    wire.RESPONSES: {"model": MODEL, "input": "hi", "stream": True},
    wire.ANTHROPIC: {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    },
    wire.GEMINI: {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
}


def _units(text: str) -> str:
    """``text`` as its UTF-16 code units, one character each: a character beyond the BMP
    becomes its two halves, which the fake's fixed-size pieces may put in two events."""
    b = text.encode("utf-16-le")
    return "".join(chr(int.from_bytes(b[i : i + 2], "little")) for i in range(0, len(b), 2))


def _frames(provider: str, text: str) -> list[str]:
    """The answer's SSE frames, the JSON written in ASCII (so a half is escaped alone)."""
    ctx = wire.Ctx(REQUESTS[provider], answer(text, key="k"), "k", MODEL, wire.CREATED)
    end = "\r\n\r\n" if provider == wire.GEMINI else "\n\n"
    out = []
    for name, data in wire.events(provider, ctx):
        payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        head = "" if name is None or provider == wire.GEMINI else f"event: {name}\n"
        out.append(f"{head}data: {payload}{end}")
    return out


def _fact(provider: str, frames: list[str]) -> InferenceCall:
    fact = translate_stream("".join(frames), provider, REQUESTS[provider])
    assert isinstance(fact, InferenceCall), fact
    encode(fact)  # valid text: JSON takes it
    return fact


def _said(fact: InferenceCall) -> str:
    return "".join(
        p.content for m in fact.output_messages for p in m.parts if isinstance(p, TextPart)
    )


_CHARS = st.one_of(
    st.sampled_from(list('a é中😀𝄞🙂\n"\\')), st.characters(blacklist_categories=("Cs",))
)


@pytest.mark.parametrize("provider", PROVIDERS)
@settings(max_examples=40, deadline=None)
@given(text=st.text(_CHARS, min_size=1, max_size=30))
def test_a_character_split_between_events_reads_back_whole(provider: str, text: str) -> None:
    fact = _fact(provider, _frames(provider, _units(text)))
    assert _said(fact) == text
    assert "invalid_text" not in fact.degradations
    assert "malformed_messages" not in fact.degradations


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_half_character_alone_is_replaced_and_counted(provider: str) -> None:
    fact = _fact(provider, _frames(provider, "one \ud83d and two"))
    assert _said(fact) == "one \ufffd and two"
    assert fact.degradations["invalid_text"] == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_event_that_cannot_be_read_mid_stream_is_counted(provider: str) -> None:
    """Before, OpenAI's two translators dropped such an event without a word."""
    frames = _frames(provider, "a long enough answer to stream in pieces")
    end = "\r\n\r\n" if provider == wire.GEMINI else "\n\n"
    frames.insert(3, 'data: {"cut' + end)
    frames.insert(4, "data: " + end)  # an empty keep-alive loses nothing
    fact = _fact(provider, frames)
    assert fact.degradations["malformed_messages"] == 1
    assert "truncated_stream" not in fact.degradations


# --- bodies: files, the recording proxy, library callers -------------------------------------

_BODIES = {
    wire.CHAT: b'{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"x\\ud83d y"},"finish_reason":"stop"}]}',
    wire.ANTHROPIC: b'{"id":"msg_1","type":"message","role":"assistant","model":"m","content":'
    b'[{"type":"text","text":"x\\ud83d y"}],"stop_reason":"end_turn",'
    b'"usage":{"input_tokens":1,"output_tokens":1}}',
}


@pytest.mark.parametrize("provider", list(_BODIES))
def test_a_body_with_a_lone_surrogate_escape_gives_its_fact(provider: str, tmp_path: Path) -> None:
    """A response file, a request/response pair and a proxied exchange; before, the fact was a
    ``translator_error`` (or the pair's file was refused as not JSON)."""
    data = _BODIES[provider]
    doc, invalid = load_json(data)
    assert invalid
    results = [*translate_document(doc, repair=True)]
    path = tmp_path / "response.json"
    path.write_bytes(data)
    assert load_body(path) == doc
    results.append(read_pair(None, path).result)
    spooled = SpooledExchange(
        kind=provider, url="http://upstream/", observed_at="2026-01-01T00:00:00Z",
        duration_ms=1.0, outcome="complete", status=200, response=data,
        response_type="application/json",
    )  # fmt: skip
    results.append(translate_spooled(spooled))
    for fact in results:
        assert isinstance(fact, InferenceCall), fact
        assert _said(fact) == "x\ufffd y"
        assert fact.degradations["invalid_text"] == 1
        encode(fact)


_MESSAGES = '[{"role":"user","parts":[{"type":"text","content":"hi \\ud83d there"}]}]'
_OUTPUT = '[{"role":"assistant","parts":[{"type":"text","content":"ok"}]}]'


def test_a_message_attribute_with_a_lone_surrogate_escape_keeps_its_messages() -> None:
    """Before, the attribute was ``malformed_messages``: every message in it lost."""
    span = {
        "traceId": "0" * 31 + "1",
        "spanId": "0" * 15 + "2",
        "name": "chat m",
        "attributes": [
            {"key": k, "value": {"stringValue": v}}
            for k, v in [
                ("gen_ai.operation.name", "chat"),
                ("gen_ai.request.model", "m"),
                ("gen_ai.input.messages", _MESSAGES),
                ("gen_ai.output.messages", _OUTPUT),
            ]
        ],
    }
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    (fact,) = translate_document(doc)
    assert isinstance(fact, InferenceCall)
    assert fact.input_messages[0].parts == [TextPart("hi \ufffd there")]
    assert fact.degradations == {"invalid_text": 1}


@pytest.mark.parametrize(
    "doc",
    [
        # an attribute map (a library caller's dict, read by a decoder that keeps surrogates)
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m\ud800",
            "gen_ai.input.messages": _MESSAGES.replace("\\ud83d", "\ud83d"),
            "gen_ai.output.messages": _OUTPUT,
        },
        json.loads(_BODIES[wire.CHAT]),
        json.loads(_BODIES[wire.ANTHROPIC]),
    ],
    ids=["attributes", "openai-chat", "anthropic"],
)
def test_a_document_holding_lone_surrogates_gives_a_valid_fact(doc: dict[str, Any]) -> None:
    """Before, an attribute map raised out of ``translate_document`` and a body was a
    ``translator_error``."""
    (fact,) = translate_document(doc)
    assert isinstance(fact, InferenceCall), fact
    assert fact.degradations["invalid_text"] >= 1
    assert "\ufffd" in encode(fact).decode()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_with_a_byte_that_is_not_utf8_is_repaired_and_counted(
    provider: str, tmp_path: Path
) -> None:
    """A ``.sse`` file, a request/response pair and a proxied stream. Before, the byte became
    U+FFFD without a count: the text changed and nothing said so."""
    data = "".join(_frames(provider, "bad ~ here")).encode()
    assert b"~" in data  # once, or more where a stream repeats its text (Responses)
    data = data.replace(b"~", b"\xff")
    path = tmp_path / "response.sse"
    path.write_bytes(data)
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUESTS[provider]))
    spooled = SpooledExchange(
        kind=provider, url="http://upstream/", observed_at="2026-01-01T00:00:00Z",
        duration_ms=1.0, outcome="complete", status=200, request=request.read_bytes(),
        response=data, response_type="text/event-stream",
    )  # fmt: skip
    results = [
        *(r.result for r in read_file(path, provider)),
        read_pair(request, path, provider).result,
        translate_spooled(spooled),
    ]
    for fact in results:
        assert isinstance(fact, InferenceCall), fact
        assert _said(fact) == "bad \ufffd here"
        assert fact.degradations["invalid_text"] == 1
        encode(fact)


def test_tool_call_arguments_with_a_lone_surrogate_escape_are_kept() -> None:
    """Before, the arguments were ``malformed_arguments``, carried as ``{}``."""
    arguments = json.dumps({"q": "x\ud83d", "n": 1})  # the half escaped alone, as JSON writes it
    body = {
        "id": "c1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "find", "arguments": arguments}}],
        }}],
    }  # fmt: skip
    (fact,) = translate_document(orjson.loads(json.dumps(body)))
    assert isinstance(fact, InferenceCall), fact
    (call,) = fact.output_messages[0].parts
    assert isinstance(call, ToolCallPart)
    assert call.arguments == {"q": "x\ufffd", "n": 1}
    assert fact.degradations == {"invalid_text": 1}


def test_a_span_event_whose_json_holds_a_lone_surrogate_escape_is_read_as_json() -> None:
    """Before, the event's JSON text itself became the message's text."""
    events = [
        ("gen_ai.user.message", '{"content":"hi \\ud83d there"}'),
        ("gen_ai.choice", '{"index":0,"finish_reason":"stop","message":{"content":"ok"}}'),
    ]
    span = {
        "traceId": "0" * 31 + "1",
        "spanId": "0" * 15 + "2",
        "name": "chat m",
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
        "events": [
            {
                "name": name,
                "attributes": [{"key": "gen_ai.event.content", "value": {"stringValue": body}}],
            }
            for name, body in events
        ],
    }
    (fact,) = translate_document({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    assert isinstance(fact, InferenceCall), fact
    assert fact.input_messages[0].parts == [TextPart("hi \ufffd there")]
    assert _said(fact) == "ok"
    assert fact.degradations == {"invalid_text": 1}
