"""The real ``openai``, ``anthropic`` and ``google-genai`` SDKs against the local fake provider.

Each SDK plays a weather-agent tool loop (reasoning, two parallel tool calls, the tool results
sent back, a final answer), once non-streamed and once streamed. The fake records every exchange
byte for byte; lithify converts each one, and the tests check that:

- a streamed answer and its non-streamed twin give equal facts (everything but ``raw``: the fake
  gives twins the same ids, so even ``inference_call_id`` and ``model_call_id`` match);
- the facts hold what the SDK sent and got: messages, reasoning, tool calls with parsed
  arguments, tool results exactly as sent, finish reasons, usage, model;
- call N's output equals its replay in call N+1's input;
- the API key the SDK sent is in the recorded headers and nowhere in any fact.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import msgspec
import openai
import orjson
import pytest
from click.testing import CliRunner
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as gt

from lithify.cli import app
from lithify.model import (
    InferenceCall,
    Message,
    ReasoningPart,
    Skip,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    decode_fact,
)
from lithify.translate import translate_document
from lithify.translate.provider import translate_exchange
from tests.fakes import Answer, Call, Choice, Exchange, FakeProvider, Fault, answer
from tests.helpers import assert_valid_messages
from tests.producers.conversation import PARAMETERS, RESULTS, SYSTEM, TOOL_DESCRIPTION, USER

# Credentials shaped like the real ones, so a redactor that knows the shapes would catch them;
# each provider's must still never reach a fact.
OPENAI_KEY = "sk-proj-LithifyFakeKey0123456789abcdefABCDEF"
ANTHROPIC_KEY = "sk-ant-api03-LithifyFakeKey0123456789abcdefABCDEF-xyzAA"
GEMINI_KEY = "AIzaSyLithifyFakeKey0123456789abcdefAB"

CITIES = ("Paris", "Zürich")  # RESULTS (tests/producers/conversation.py) has one of each
FINAL = "Paris: 18 °C and cloudy. Zürich: 12 °C with light rain — take an umbrella ☂."

TURN1 = answer(
    reasoning=(
        "The user asks about two cities, so two calls. ",
        "Both can run in parallel; celsius for Europe.",
    ),
    calls=[Call.of("get_weather", {"city": c, "unit": "celsius"}) for c in CITIES],
    input_tokens=96,
    output_tokens=58,
    reasoning_tokens=21,
)
TURN2 = answer(
    FINAL,
    reasoning=("Both results are in; summarise them in one line.",),
    input_tokens=171,
    output_tokens=33,
    reasoning_tokens=9,
)
SCRIPT = (TURN1, TURN2)


@dataclass
class Seen:
    """What an SDK handed the application for one answer, normalised across SDKs."""

    id: str | None
    model: str | None
    text: str
    reasoning: list[str]
    calls: list[tuple[str | None, str, dict[str, Any]]]  # (id, name, parsed arguments)
    input_tokens: int | None
    output_tokens: int | None


@dataclass
class Run:
    exchanges: list[Exchange]
    seen: list[Seen]


@pytest.fixture(scope="module")
def fake() -> Any:
    with FakeProvider() as f:
        yield f


# --- the SDK drivers -------------------------------------------------------------------------


def _openai(fake: FakeProvider, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=OPENAI_KEY,
        base_url=fake.openai_base_url,
        max_retries=kw.pop("max_retries", 0),
        **kw,
    )


def _anthropic(fake: FakeProvider, **kw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=ANTHROPIC_KEY, base_url=fake.url, max_retries=kw.pop("max_retries", 0), **kw
    )


def _gemini(fake: FakeProvider, **opts: Any) -> genai.Client:
    return genai.Client(
        api_key=GEMINI_KEY,
        http_options=gt.HttpOptions(base_url=fake.url, api_version="v1beta", **opts),
    )


CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": TOOL_DESCRIPTION,
            "parameters": PARAMETERS,
        },
    }
]
CHAT_SAMPLING: dict[str, Any] = {"temperature": 0.2, "max_completion_tokens": 512, "seed": 7}


def _chat_stream(stream: Any) -> tuple[dict[str, Any], Seen]:
    """Accumulate a Chat Completions stream the way applications do; the replayable message."""
    text, reasoning = "", ""
    calls: dict[int, dict[str, Any]] = {}
    cid = model = None
    usage = None
    for chunk in stream:
        cid, model = chunk.id, chunk.model
        usage = chunk.usage or usage
        for ch in chunk.choices:
            d = ch.delta
            text += d.content or ""
            reasoning += (d.model_extra or {}).get("reasoning_content") or ""
            for tc in d.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = tc.id or slot["id"]
                if tc.function:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
    msg: dict[str, Any] = {"role": "assistant", "content": text or None}
    if reasoning:
        msg["reasoning_content"] = reasoning
    ordered = [calls[i] for i in sorted(calls)]
    if ordered:
        msg["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in ordered
        ]  # fmt: skip
    seen = Seen(
        cid,
        model,
        text,
        [reasoning] if reasoning else [],
        [(c["id"], c["name"], orjson.loads(c["arguments"])) for c in ordered],
        usage.prompt_tokens if usage else None,
        usage.completion_tokens if usage else None,
    )
    return msg, seen


def drive_chat(fake: FakeProvider, stream: bool) -> Run:
    fake.reset()
    fake.script(*SCRIPT)
    client = _openai(fake)
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    seen: list[Seen] = []
    for turn in range(2):
        kw = {"model": "gpt-4o-mini", "messages": messages, "tools": CHAT_TOOLS, **CHAT_SAMPLING}
        if stream:
            msg, s = _chat_stream(
                client.chat.completions.create(
                    **kw, stream=True, stream_options={"include_usage": True}
                )
            )
        else:
            r = client.chat.completions.create(**kw)
            m = r.choices[0].message
            # Applications replay the SDK's message object as is.
            msg = m
            s = Seen(
                r.id,
                r.model,
                m.content or "",
                [m.model_extra["reasoning_content"]] if m.model_extra.get("reasoning_content") else [],
                [(c.id, c.function.name, orjson.loads(c.function.arguments)) for c in m.tool_calls or []],
                r.usage.prompt_tokens if r.usage else None,
                r.usage.completion_tokens if r.usage else None,
            )  # fmt: skip
        seen.append(s)
        messages = [*messages, msg]
        if turn == 0:
            for cid, _, args in s.calls:
                messages.append(
                    {"role": "tool", "tool_call_id": cid, "content": RESULTS[args["city"]]}
                )
    return Run(fake.wait(2), seen)


RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": TOOL_DESCRIPTION,
        "parameters": PARAMETERS,
        "strict": True,
    }
]


def _responses_seen(r: Any) -> Seen:
    reasoning = [s.text for item in r.output if item.type == "reasoning" for s in item.summary]
    calls = [
        (i.call_id, i.name, orjson.loads(i.arguments))
        for i in r.output
        if i.type == "function_call"
    ]
    usage = r.usage
    return Seen(
        r.id,
        r.model,
        r.output_text,
        reasoning,
        calls,
        usage.input_tokens if usage else None,
        usage.output_tokens if usage else None,
    )


def drive_responses(fake: FakeProvider, stream: bool) -> Run:
    fake.reset()
    fake.script(*SCRIPT)
    client = _openai(fake)
    items: list[Any] = [{"role": "user", "content": USER}]
    seen: list[Seen] = []
    for turn in range(2):
        kw = {
            "model": "gpt-5-mini",
            "instructions": SYSTEM,
            "input": items,
            "tools": RESPONSES_TOOLS,
            "reasoning": {"effort": "low", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "store": False,
            "max_output_tokens": 1024,
        }
        if stream:
            with client.responses.stream(**kw) as s:
                kinds = [event.type for event in s]
                r = s.get_final_response()
            assert kinds[0] == "response.created"
            assert kinds[-1] == "response.completed"
        else:
            r = client.responses.create(**kw)
        seen.append(_responses_seen(r))
        # Stateless (store=False): the whole output goes back, reasoning items included.
        items = [*items, *r.output]
        if turn == 0:
            items += [
                {"type": "function_call_output", "call_id": cid, "output": RESULTS[a["city"]]}
                for cid, _, a in seen[-1].calls
            ]
    return Run(fake.wait(2), seen)


ANTHROPIC_TOOLS = [
    {"name": "get_weather", "description": TOOL_DESCRIPTION, "input_schema": PARAMETERS}
]
AFTER_RESULTS = "Answer in one sentence."


def _anthropic_seen(m: Any) -> Seen:
    return Seen(
        m.id,
        m.model,
        "".join(b.text for b in m.content if b.type == "text"),
        [b.thinking for b in m.content if b.type == "thinking"],
        [(b.id, b.name, b.input) for b in m.content if b.type == "tool_use"],
        m.usage.input_tokens,
        m.usage.output_tokens,
    )


def drive_anthropic(fake: FakeProvider, stream: bool) -> Run:
    fake.reset()
    fake.script(*SCRIPT)
    client = _anthropic(fake)
    messages: list[Any] = [{"role": "user", "content": USER}]
    seen: list[Seen] = []
    for turn in range(2):
        kw = {
            "model": "claude-sonnet-4-6",
            "system": SYSTEM,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
            "max_tokens": 2048,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
        }
        if stream:
            with client.messages.stream(**kw) as s:
                m = s.get_final_message()
        else:
            m = client.messages.create(**kw)
        seen.append(_anthropic_seen(m))
        # Thinking blocks go back with their signatures, as the API requires in a tool loop.
        messages = [*messages, {"role": "assistant", "content": m.content}]
        if turn == 0:
            blocks: list[Any] = [
                {"type": "tool_result", "tool_use_id": cid, "content": RESULTS[a["city"]]}
                for cid, _, a in seen[-1].calls
            ]
            blocks.append({"type": "text", "text": AFTER_RESULTS})
            messages.append({"role": "user", "content": blocks})
    return Run(fake.wait(2), seen)


GEMINI_CONFIG = gt.GenerateContentConfig(
    system_instruction=SYSTEM,
    tools=[
        gt.Tool(
            function_declarations=[
                gt.FunctionDeclaration(
                    name="get_weather",
                    description=TOOL_DESCRIPTION,
                    parameters_json_schema=PARAMETERS,
                )
            ]
        )
    ],
    thinking_config=gt.ThinkingConfig(include_thoughts=True),
    temperature=0.2,
    max_output_tokens=1024,
)


def _gemini_merge(chunks: list[Any]) -> Any:
    """The streamed chunks as one Content, adjacent text of one kind joined, as apps do."""
    parts: list[Any] = []
    for chunk in chunks:
        for p in chunk.candidates[0].content.parts or []:
            prev = parts[-1] if parts else None
            if (
                p.text is not None
                and prev is not None
                and prev.text is not None
                and bool(prev.thought) == bool(p.thought)
                and p.thought_signature is None
            ):
                parts[-1] = prev.model_copy(update={"text": prev.text + p.text})
            else:
                parts.append(p)
    return gt.Content(role="model", parts=parts)


def _gemini_seen(r: Any, content: Any) -> Seen:
    parts = content.parts or []
    u = r.usage_metadata
    return Seen(
        r.response_id,
        r.model_version,
        "".join(p.text for p in parts if p.text and not p.thought),
        [p.text for p in parts if p.text and p.thought],
        [(p.function_call.id, p.function_call.name, p.function_call.args) for p in parts if p.function_call],
        u.prompt_token_count,
        (u.candidates_token_count or 0) + (u.thoughts_token_count or 0),
    )  # fmt: skip


def drive_gemini(fake: FakeProvider, stream: bool, *, ids: bool = False) -> Run:
    fake.reset()
    fake.script(*(replace(a, gemini_call_ids=ids) for a in SCRIPT))
    client = _gemini(fake)
    contents: list[Any] = [gt.Content(role="user", parts=[gt.Part(text=USER)])]
    seen: list[Seen] = []
    for turn in range(2):
        kw = {"model": "gemini-2.5-flash", "contents": contents, "config": GEMINI_CONFIG}
        if stream:
            chunks = list(client.models.generate_content_stream(**kw))
            content, last = _gemini_merge(chunks), chunks[-1]
        else:
            last = client.models.generate_content(**kw)
            content = last.candidates[0].content
        seen.append(_gemini_seen(last, content))
        contents = [*contents, content]
        if turn == 0:
            responses = [
                gt.Part(
                    function_response=gt.FunctionResponse(
                        id=cid, name=name, response={"result": RESULTS[a["city"]]}
                    )
                )
                for cid, name, a in seen[-1].calls
            ]
            contents.append(gt.Content(role="user", parts=responses))
    return Run(fake.wait(2), seen)


DRIVERS: dict[str, Callable[[FakeProvider, bool], Run]] = {
    "openai-chat": drive_chat,
    "openai-responses": drive_responses,
    "anthropic": drive_anthropic,
    "gemini": drive_gemini,
}
KEYS = {
    "openai-chat": OPENAI_KEY,
    "openai-responses": OPENAI_KEY,
    "anthropic": ANTHROPIC_KEY,
    "gemini": GEMINI_KEY,
}
PROVIDERS = list(DRIVERS)
REQUEST_PARAMETERS: dict[str, dict[str, Any]] = {
    "openai-chat": {"max_tokens": 512, "seed": 7, "temperature": 0.2},
    "openai-responses": {"max_tokens": 1024, "reasoning_effort": "low"},
    "anthropic": {"max_tokens": 2048, "reasoning_budget_tokens": 1024},
    "gemini": {"max_tokens": 1024, "temperature": 0.2},
}
RESPONSE_MODELS = {
    "openai-chat": "gpt-4o-mini-2024-07-18",
    "openai-responses": "gpt-5-mini-2025-08-07",
    "anthropic": "claude-sonnet-4-6",
    "gemini": "gemini-2.5-flash",
}


# --- conversion and comparison helpers ------------------------------------------------------


def convert(ex: Exchange) -> InferenceCall:
    result = translate_exchange(ex.request_json, ex.response)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def content(fact: InferenceCall) -> dict[str, Any]:
    """A fact without ``raw``: what a streamed answer and its non-streamed twin share."""
    data = msgspec.to_builtins(fact)
    data.pop("raw")
    return data


def assert_no_credential(fact: InferenceCall | Skip, key: str) -> None:
    assert key.encode() not in msgspec.json.encode(fact)
    # Nor any long fragment of it (a partial redaction would leave one).
    assert key[8:24].encode() not in msgspec.json.encode(fact)


_RUNS: dict[tuple[str, bool], Run] = {}


def run(fake: FakeProvider, provider: str, stream: bool) -> Run:
    """Each provider's loop runs once per mode and module; the tests share the recordings."""
    if (provider, stream) not in _RUNS:
        _RUNS[provider, stream] = DRIVERS[provider](fake, stream)
    return _RUNS[provider, stream]


def _expected_tool_results(provider: str, calls: list[Any]) -> list[Message]:
    out = []
    for _, _, args in calls:
        result = RESULTS[args["city"]]
        out.append(
            Message("tool", [ToolCallResponsePart("?", {"result": result} if provider == "gemini" else result)])
        )  # fmt: skip
    return out


# --- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_streamed_and_non_streamed_twins_convert_to_equal_facts(
    fake: FakeProvider, provider: str
) -> None:
    plain, streamed = run(fake, provider, False), run(fake, provider, True)
    assert [ex.stream for ex in plain.exchanges] == [False, False]
    assert [ex.stream for ex in streamed.exchanges] == [True, True]
    for turn in range(2):
        a, b = plain.exchanges[turn], streamed.exchanges[turn]
        assert a.response_body != b.response_body  # really two wire forms
        fa, fb = convert(a), convert(b)
        assert content(fa) == content(fb), f"turn {turn + 1}"
    # What the SDKs handed the application is the same answer too.
    assert plain.seen == streamed.seen


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_facts_hold_what_the_sdk_sent_and_got(
    fake: FakeProvider, provider: str, stream: bool
) -> None:
    r = run(fake, provider, stream)
    f1, f2 = (convert(ex) for ex in r.exchanges)
    for fact, seen, script in zip((f1, f2), r.seen, SCRIPT, strict=True):
        assert fact.model == seen.model == RESPONSE_MODELS[provider]  # the response's model
        assert fact.model_call_id == seen.id
        assert fact.input_tokens == seen.input_tokens == script.input_tokens
        assert fact.output_tokens == seen.output_tokens == script.output_tokens
        assert len(fact.output_messages) == 1
        out = fact.output_messages[0]
        assert out.role == "assistant"
        # CANONICAL maps Gemini's STOP to stop, and Gemini says STOP for function calls too.
        finish = "stop" if provider == "gemini" else script.choice.finish
        assert out.finish_reason == finish
        reasoning = [p.content for p in out.parts if isinstance(p, ReasoningPart)]
        assert reasoning == seen.reasoning
        assert "".join(p.content for p in out.parts if isinstance(p, TextPart)) == seen.text
        calls = [p for p in out.parts if isinstance(p, ToolCallPart)]
        assert [(c.name, c.arguments) for c in calls] == [(n, a) for _, n, a in seen.calls]
        if provider != "gemini":  # the Gemini API gives no ids here: they are synthesized
            assert [c.id for c in calls] == [i for i, _, _ in seen.calls]
        # Reasoning comes first, then text, then tool calls, as the model produced them.
        kinds = [type(p).__name__ for p in out.parts]
        assert kinds == sorted(kinds, key=["ReasoningPart", "TextPart", "ToolCallPart"].index)
        assert fact.request == REQUEST_PARAMETERS[provider]  # the sampling the SDK call set
        assert [t.name for t in fact.tools] == ["get_weather"]
        assert fact.tools[0].description == TOOL_DESCRIPTION
        assert fact.tools[0].parameters == PARAMETERS
        assert fact.input_messages[0] == Message("system", [TextPart(SYSTEM)])
        assert fact.input_messages[1] == Message("user", [TextPart(USER)])
        assert all(m.finish_reason is None for m in fact.input_messages)
    assert seen_text(r) == FINAL
    # Turn 2 input: system, user, the replayed assistant turn, one tool message per result.
    tool_msgs = [m for m in f2.input_messages if m.role == "tool"]
    expected = _expected_tool_results(provider, r.seen[0].calls)
    assert [[type(p) for p in m.parts] for m in tool_msgs] == [[ToolCallResponsePart]] * 2
    assert [m.parts[0].result for m in tool_msgs] == [m.parts[0].result for m in expected]
    call_ids = [p.id for p in f1.output_messages[0].parts if isinstance(p, ToolCallPart)]
    assert [m.parts[0].id for m in tool_msgs] == call_ids
    roles = [m.role for m in f2.input_messages]
    tail = ["user"] if provider == "anthropic" else []  # the text after the tool results
    assert roles == ["system", "user", "assistant", "tool", "tool", *tail]
    if tail:
        assert f2.input_messages[-1] == Message("user", [TextPart(AFTER_RESULTS)])


def seen_text(r: Run) -> str:
    return r.seen[1].text


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_call_output_equals_its_replay_in_the_next_call(
    fake: FakeProvider, provider: str, stream: bool
) -> None:
    r = run(fake, provider, stream)
    f1, f2 = (convert(ex) for ex in r.exchanges)
    n = len(f1.input_messages)
    assert f2.input_messages[:n] == f1.input_messages
    replayed = f2.input_messages[n]
    output = f1.output_messages[0]
    assert replayed.role == output.role == "assistant"
    assert replayed.parts == output.parts
    assert replayed.finish_reason is None


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_credential_is_recorded_but_never_in_a_fact(
    fake: FakeProvider, provider: str, stream: bool
) -> None:
    r = run(fake, provider, stream)
    key = KEYS[provider]
    for ex in r.exchanges:
        assert ex.credential == key  # the fake saw it: it is in the headers and only there
        assert key.encode() not in ex.request_body + ex.response_body
        assert_no_credential(convert(ex), key)
        # An exchange document that carries the headers in meta must not leak them either.
        for result in translate_document(ex.document()):
            assert isinstance(result, InferenceCall), result
            assert_no_credential(result, key)


def test_sdk_requests_on_the_wire(fake: FakeProvider) -> None:
    """The paths, headers and body quirks each SDK really sends (see the module's report)."""
    chat = run(fake, "openai-chat", True).exchanges[0]
    assert chat.path == "/v1/chat/completions"
    assert chat.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert chat.headers["user-agent"].startswith("OpenAI/Python ")
    assert chat.request_json["stream_options"] == {"include_usage": True}
    resp = run(fake, "openai-responses", False).exchanges[1]
    assert resp.path == "/v1/responses"
    # The SDK's output objects replay as items with their ids, reasoning with encrypted_content.
    kinds = [i.get("type") for i in resp.request_json["input"]]
    assert kinds == [None, "reasoning", "function_call", "function_call", "function_call_output", "function_call_output"]  # fmt: skip
    claude = run(fake, "anthropic", True).exchanges[0]
    assert claude.path == "/v1/messages"
    assert claude.headers["anthropic-version"]
    # anthropic 2.x sends the API key as a bearer token, not x-api-key.
    assert ANTHROPIC_KEY in (
        claude.headers.get("x-api-key"),
        claude.headers.get("authorization", "")[7:],
    )
    assert claude.headers.get("x-stainless-helper-method") == "stream"
    gem = run(fake, "gemini", True).exchanges
    assert gem[0].path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert (
        run(fake, "gemini", False).exchanges[0].path
        == "/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert gem[0].headers["x-goog-api-key"] == GEMINI_KEY
    assert "model" not in gem[0].request_json  # the model is only in the path
    # The SDK re-encodes a replayed thoughtSignature as URL-safe base64.
    sent = gem[0].response_text
    replay = gem[1].request_json["contents"][1]["parts"]
    sig = next(p["thoughtSignature"] for p in replay if "thoughtSignature" in p)
    assert sig not in sent
    assert sig.replace("-", "+").replace("_", "/") in sent  # fmt: skip


def test_gemini_function_call_ids_round_trip(fake: FakeProvider) -> None:
    plain, streamed = drive_gemini(fake, False, ids=True), drive_gemini(fake, True, ids=True)
    for turn in range(2):
        assert content(convert(plain.exchanges[turn])) == content(convert(streamed.exchanges[turn]))
    f1, f2 = (convert(ex) for ex in plain.exchanges)
    ids = [p.id for p in f1.output_messages[0].parts if isinstance(p, ToolCallPart)]
    assert ids == [c[0] for c in plain.seen[0].calls] == ["fc_lith0001_0", "fc_lith0001_1"]
    assert [m.parts[0].id for m in f2.input_messages if m.role == "tool"] == ids
    assert "synthesized_id" not in f1.degradations


def test_chat_several_choices(fake: FakeProvider) -> None:
    two = Answer(
        choices=(Choice("Red.", reasoning=("Warm hue.",)), Choice("Blue.")), output_tokens=4
    )
    facts = []
    for stream in (False, True):
        fake.reset()
        fake.script(two)
        client = _openai(fake)
        kw: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "A colour?"}], "n": 2}  # fmt: skip
        if stream:
            chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))  # fmt: skip
            assert {c.choices[0].index for c in chunks if c.choices} == {0, 1}
        else:
            assert [c.message.content for c in client.chat.completions.create(**kw).choices] == ["Red.", "Blue."]  # fmt: skip
        facts.append(convert(fake.wait(1)[0]))
    assert content(facts[0]) == content(facts[1])
    assert facts[0].output_messages == [
        Message("assistant", [ReasoningPart("Warm hue."), TextPart("Red.")], "stop"),
        Message("assistant", [TextPart("Blue.")], "stop"),
    ]


TRUNCATED = answer("The weather in Paris is", truncated=True, output_tokens=6)


def _single_turn(fake: FakeProvider, provider: str, stream: bool) -> None:
    """One plain question through the provider's SDK."""
    q = "Weather in Paris?"
    if provider == "openai-chat":
        kw: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": q}], "max_completion_tokens": 6}  # fmt: skip
        if stream:
            list(_openai(fake).chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))  # fmt: skip
        else:
            _openai(fake).chat.completions.create(**kw)
    elif provider == "openai-responses":
        if stream:
            list(_openai(fake).responses.create(model="gpt-5-mini", input=q, max_output_tokens=6, stream=True))  # fmt: skip
        else:
            _openai(fake).responses.create(model="gpt-5-mini", input=q, max_output_tokens=6)
    elif provider == "anthropic":
        kw = {"model": "claude-sonnet-4-6", "max_tokens": 6, "messages": [{"role": "user", "content": q}]}  # fmt: skip
        if stream:
            list(_anthropic(fake).messages.create(**kw, stream=True))
        else:
            _anthropic(fake).messages.create(**kw)
    else:
        cfg = gt.GenerateContentConfig(max_output_tokens=6)
        # Keep the client referenced: a collected genai.Client closes its HTTP client mid-call.
        client = _gemini(fake)
        if stream:
            list(client.models.generate_content_stream(model="gemini-2.5-flash", contents=q, config=cfg))  # fmt: skip
        else:
            client.models.generate_content(model="gemini-2.5-flash", contents=q, config=cfg)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_truncated_answer_twins(fake: FakeProvider, provider: str) -> None:
    facts = []
    for stream in (False, True):
        fake.reset()
        fake.script(TRUNCATED)
        _single_turn(fake, provider, stream)
        facts.append(convert(fake.wait(1)[0]))
    assert content(facts[0]) == content(facts[1])
    assert facts[0].output_messages == [
        Message("assistant", [TextPart("The weather in Paris is")], "length")
    ]
    assert facts[0].output_tokens == 6


# --- errors, retries, cut streams, delays (the proxy's fault tests reuse these fakes) -------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rate_limit_is_retried_and_the_error_exchange_gives_no_fact(
    fake: FakeProvider, provider: str
) -> None:
    fake.reset()
    fake.script(Fault(429, "Rate limit reached. Slow down.", retry_after=0.01), answer("Sunny."))
    if provider == "gemini":
        retry = gt.HttpRetryOptions(attempts=2, initial_delay=0.01, max_delay=0.02, jitter=0)
        client = _gemini(fake, retry_options=retry)
        client.models.generate_content(model="gemini-2.5-flash", contents="Weather?")
    elif provider == "anthropic":
        _anthropic(fake, max_retries=1).messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "Weather?"}])  # fmt: skip
    elif provider == "openai-chat":
        _openai(fake, max_retries=1).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Weather?"}])  # fmt: skip
    else:
        _openai(fake, max_retries=1).responses.create(model="gpt-5-mini", input="Weather?")
    failed, ok = fake.wait(2)
    assert (failed.status, ok.status) == (429, 200)
    assert failed.request_body == ok.request_body  # a retry resends the same bytes
    if provider in ("openai-chat", "openai-responses", "anthropic"):
        assert (failed.headers["x-stainless-retry-count"], ok.headers["x-stainless-retry-count"]) == ("0", "1")  # fmt: skip
    skip = translate_exchange(failed.request_json, failed.response)
    assert isinstance(skip, Skip) and skip.reason == "error_response", skip
    assert "Rate limit reached" in skip.detail
    fact = convert(ok)
    assert fact.output_messages[0].parts == [TextPart("Sunny.")]


# How each SDK reports a stream that broke off: openai wraps it, the others let httpx2's through.
CUT_ERRORS: dict[str, type[Exception]] = {
    "openai-chat": openai.APIConnectionError,
    "openai-responses": openai.APIConnectionError,
    "anthropic": httpx2.RemoteProtocolError,
    "gemini": httpx2.RemoteProtocolError,
}

ERRORS: dict[str, tuple[type[Exception], ...]] = {
    "openai-chat": (openai.InternalServerError,),
    "openai-responses": (openai.InternalServerError,),
    "anthropic": (anthropic.InternalServerError,),
    "gemini": (genai_errors.ServerError,),
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_server_error_reaches_the_sdk_as_its_own_error(fake: FakeProvider, provider: str) -> None:
    fake.reset()
    fake.script(Fault(500, "The fake had an error while processing your request."))
    with pytest.raises(ERRORS[provider]) as e:
        _single_turn(fake, provider, False)
    assert "The fake had an error" in str(e.value)
    (ex,) = fake.wait(1)
    skip = translate_exchange(ex.request_json, ex.response)
    assert isinstance(skip, Skip) and skip.reason == "error_response", skip


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_cut_midway_converts_with_truncated_stream(
    fake: FakeProvider, provider: str
) -> None:
    fake.reset()
    fake.script(replace(TURN2, cut_after=4))
    with pytest.raises(CUT_ERRORS[provider]):
        _single_turn(fake, provider, True)
    (ex,) = fake.wait(1)
    assert ex.cut and ex.stream
    assert ex.response_body.count(b"data:") == 4
    fact = convert(ex)
    assert fact.degradations.get("truncated_stream") == 1, fact.degradations
    assert fact.model_call_id is not None  # what arrived before the cut is kept


def test_streams_are_flushed_event_by_event(fake: FakeProvider) -> None:
    fake.reset()
    fake.script(answer("Sunny and mild.", event_delay=0.02))
    client = _anthropic(fake)
    stream = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "Hi"}], stream=True
    )  # fmt: skip
    arrivals = [(event.type, time.monotonic()) for event in stream]
    assert arrivals[0][0] == "message_start"
    assert arrivals[-1][0] == "message_stop"
    # Buffered events would arrive together; flushed ones arrive as the fake paces them.
    spread = arrivals[-1][1] - arrivals[0][1]
    assert spread >= 0.02 * (len(arrivals) - 1) * 0.8, (spread, len(arrivals))


def test_delay_lets_a_client_time_out(fake: FakeProvider) -> None:
    fake.reset()
    fake.script(replace(TURN2, delay=0.5))
    with pytest.raises(openai.APITimeoutError):
        _openai(fake, timeout=0.1).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
        )


def test_an_exhausted_script_answers_500_in_the_provider_format(fake: FakeProvider) -> None:
    fake.reset()
    with pytest.raises(anthropic.InternalServerError) as e:
        _anthropic(fake).messages.create(
            model="claude-sonnet-4-6", max_tokens=8, messages=[{"role": "user", "content": "Hi"}]
        )
    assert e.value.body["error"]["type"] == "api_error"  # type: ignore[index]


# --- through the command line and exchange documents ----------------------------------------


def test_convert_cli_request_and_response_files(fake: FakeProvider, tmp_path: Path) -> None:
    ex = run(fake, "anthropic", True).exchanges[1]
    req, resp, out = tmp_path / "req.json", tmp_path / "resp.sse", tmp_path / "facts.jsonl"
    req.write_bytes(ex.request_body)
    resp.write_bytes(ex.response_body)
    result = CliRunner().invoke(
        app, ["convert", "--request", str(req), "--response", str(resp), "-o", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    lines = out.read_bytes().splitlines()
    assert len(lines) == 1
    assert decode_fact(lines[0]) == convert(ex)
    assert ANTHROPIC_KEY.encode() not in out.read_bytes()


def test_convert_cli_exchange_documents(fake: FakeProvider, tmp_path: Path) -> None:
    r = run(fake, "gemini", True)
    docs = tmp_path / "exchanges.jsonl"
    docs.write_bytes(b"".join(orjson.dumps(ex.document()) + b"\n" for ex in r.exchanges))
    assert GEMINI_KEY.encode() in docs.read_bytes()  # the headers went in with meta
    out = tmp_path / "facts.jsonl"
    result = CliRunner().invoke(app, ["convert", str(docs), "-o", str(out)])
    assert result.exit_code == 0, result.output
    facts = [decode_fact(line) for line in out.read_bytes().splitlines()]
    assert [content(f) for f in facts] == [content(convert(ex)) for ex in r.exchanges]
    assert GEMINI_KEY.encode() not in out.read_bytes()


# --- the fake itself, as a plain HTTP client (the recording proxy) sees it -------------------


def test_the_fake_over_plain_http(fake: FakeProvider) -> None:
    host, port = fake.url.removeprefix("http://").split(":")
    fake.reset()
    fake.script(answer("Hi there."), answer("Hi there."))
    # A chunked request body (a proxy may forward one) is read whole and recorded verbatim.
    body = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}], "stream": True})  # fmt: skip
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.request("POST", "/v1/chat/completions", body=iter([body[:10], body[10:]]), headers={"Content-Type": "application/json"})  # fmt: skip
    resp = conn.getresponse()
    assert resp.getheader("Transfer-Encoding") == "chunked"
    sse = resp.read()
    assert sse.endswith(b"data: [DONE]\n\n")
    # Gemini's streamGenerateContent without alt=sse answers one JSON array of chunks.
    conn.request("POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", body=b'{"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}')  # fmt: skip
    chunks = orjson.loads(conn.getresponse().read())
    assert "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks) == "Hi there."
    conn.request("POST", "/v2/unknown", body=b"{}")
    missing = conn.getresponse()
    assert missing.status == 404
    missing.read()
    conn.close()
    chat, gem, unknown = fake.wait(3)
    assert chat.request_body == body
    assert chat.response_body == sse
    assert chat.stream and not gem.stream and gem.provider == "gemini"
    assert (unknown.provider, unknown.status) == (None, 404)
