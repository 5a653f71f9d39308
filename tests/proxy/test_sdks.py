"""The real openai, anthropic and google-genai SDKs pointed at `lithify proxy`, which forwards to
the fake provider: the SDK gets what it gets from the fake directly, the fake gets what the SDK
sends, and the stored facts are what `lithify convert` makes of the same exchanges."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest
from click.testing import CliRunner

from lithify.cli import app
from lithify.model import InferenceCall, ReasoningPart, TextPart, decode_fact
from tests.fakes import FakeProvider, answer
from tests.fakes.provider import Exchange
from tests.helpers import assert_valid_messages
from tests.proxy.helpers import ProxyProcess, request, stored_facts
from tests.test_provider_sdks import (
    ANTHROPIC_KEY,
    DRIVERS,
    GEMINI_KEY,
    KEYS,
    OPENAI_KEY,
    PROVIDERS,
    TURN2,
    Run,
)

_GEMINI_MODEL = "gemini-2.5-flash"


def facts_for(store: str, ids: list[str | None], timeout: float = 20) -> list[InferenceCall]:
    """The stored facts of these response ids, in that order, once all are there."""
    deadline = time.monotonic() + timeout
    while True:
        by_id = {f.model_call_id: f for f in stored_facts(store)}
        if all(i in by_id for i in ids):
            return [by_id[i] for i in ids]
        if time.monotonic() > deadline:
            raise AssertionError(f"not stored: {[i for i in ids if i not in by_id]}")
        time.sleep(0.05)


def document(ex: Exchange, kind: str, fake: FakeProvider, fact: InferenceCall) -> dict[str, Any]:
    """The exchange document `lithify convert` reads, from the bytes the fake recorded. The time
    the proxy saw the call is the one thing the bytes do not hold: it comes from the fact."""
    meta: dict[str, Any] = {
        "url": fake.url + ex.path,
        "observed_at": fact.observed_at,
        "duration_ms": fact.duration_ms,
    }
    if kind == "gemini":
        meta["model"] = _GEMINI_MODEL
    return {"request": ex.request_json, "response": ex.response, "provider": kind, "meta": meta}


def converted(docs: list[dict[str, Any]], tmp_path: Path) -> list[InferenceCall]:
    src, out = tmp_path / "exchanges.jsonl", tmp_path / "facts.jsonl"
    src.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in docs))
    result = CliRunner().invoke(app, ["convert", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return [decode_fact(line) for line in out.read_bytes().splitlines()]


def _end_to_end_headers(ex: Exchange) -> dict[str, str]:
    """Headers a proxy passes on: not Host (the upstream's own) nor hop-by-hop Connection."""
    return {k: v for k, v in ex.headers.items() if k not in ("host", "connection")}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_sdk_gets_the_same_answers_and_the_store_gets_the_facts(
    fake: FakeProvider,
    proxy: ProxyProcess,
    via: FakeProvider,
    provider: str,
    stream: bool,
    tmp_path: Path,
) -> None:
    # Ids derive from the prefix: the direct run and the proxied run get the same ones, and no
    # other test's facts share them in the store.
    fake.id_prefix = f"sdk-{provider}-{'s' if stream else 'p'}-"
    direct: Run = DRIVERS[provider](fake, stream)
    proxied: Run = DRIVERS[provider](via, stream)

    assert proxied.seen == direct.seen  # what the SDK handed the application
    assert len(proxied.exchanges) == len(direct.exchanges) == 2
    for d, p in zip(direct.exchanges, proxied.exchanges, strict=True):
        assert p.path == d.path
        assert p.request_body == d.request_body  # forwarded byte for byte
        assert p.response_body == d.response_body
        assert (p.status, p.stream) == (d.status, d.stream) == (200, stream)
        assert p.credential == KEYS[provider]  # the client's own key went upstream
        assert _end_to_end_headers(p) == _end_to_end_headers(d)

    facts = facts_for(proxy.store, [s.id for s in proxied.seen])
    for f in facts:
        assert_valid_messages(f)
        assert f.source.name == provider
        assert f.observed_at is not None and f.duration_ms is not None and f.duration_ms > 0
        assert f.degradations.get("truncated_stream") is None
    docs = [document(ex, provider, fake, f) for ex, f in zip(proxied.exchanges, facts, strict=True)]
    assert converted(docs, tmp_path) == facts
    # The second call's input replays the first call's output, through the proxy as directly.
    assert facts[1].input_messages[: len(facts[0].input_messages)] == facts[0].input_messages


def test_the_client_gets_the_upstream_bytes(fake: FakeProvider, proxy: ProxyProcess) -> None:
    """Status, headers and body as the fake sent them, for every route, streamed and not
    (Gemini's streamGenerateContent without alt=sse answers one JSON array)."""
    question = [{"role": "user", "content": "Hi"}]
    calls = [
        ("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": question}),
        ("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": question, "stream": True}),
        ("/v1/responses", {"model": "gpt-5-mini", "input": "Hi", "stream": True}),
        ("/v1/messages", {"model": "claude-sonnet-4-6", "max_tokens": 9, "messages": question}),
        ("/v1/messages", {"model": "claude-sonnet-4-6", "max_tokens": 9, "messages": question, "stream": True}),
        (f"/v1beta/models/{_GEMINI_MODEL}:streamGenerateContent?alt=sse", {"contents": [{"parts": [{"text": "Hi"}]}]}),
        (f"/v1beta/models/{_GEMINI_MODEL}:streamGenerateContent", {"contents": [{"parts": [{"text": "Hi"}]}]}),
    ]  # fmt: skip
    for n, (path, doc) in enumerate(calls):
        fake.reset()
        fake.id_prefix = f"bytes{n}-"
        fake.script(
            answer("Hello, world — ünïcode ☂ and some more words to split.", reasoning=["Hmm."])
        )
        body = orjson.dumps(doc)
        r = request(
            proxy.port,
            "POST",
            path,
            body,
            {"Content-Type": "application/json", "Authorization": "Bearer sk-x"},
        )
        (ex,) = fake.wait(1)
        assert ex.request_body == body
        assert (r.status, r.body) == (ex.status, ex.response_body), path
        for k, v in ex.response_headers.items():
            assert r.headers.get(k) == v, (path, k)
    # The recorder read the JSON-array stream as the chunks it is.
    last = facts_for(proxy.store, ["bytes6-0001"])[0]
    assert last.source.name == "gemini"
    assert [type(p) for p in last.output_messages[0].parts] == [ReasoningPart, TextPart]
    text = "".join(p.content for p in last.output_messages[0].parts if isinstance(p, TextPart))
    assert text.startswith("Hello, world")


def test_streams_are_passed_on_as_they_arrive(fake: FakeProvider, proxy: ProxyProcess) -> None:
    fake.reset()
    fake.id_prefix = "paced-"
    fake.script(answer("Sunny and mild, with a light breeze.", event_delay=0.05))
    client = anthropic.Anthropic(api_key=ANTHROPIC_KEY, base_url=proxy.url, max_retries=0)
    t0 = time.monotonic()
    stream = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "Hi"}], stream=True
    )  # fmt: skip
    arrivals = [(event.type, time.monotonic() - t0) for event in stream]
    assert arrivals[0][0] == "message_start" and arrivals[-1][0] == "message_stop"
    n = len(arrivals)
    # Buffered, every event would arrive at the end; passed on, they arrive as paced.
    assert arrivals[0][1] < 0.05 * (n - 1) / 2, arrivals
    spread = arrivals[-1][1] - arrivals[0][1]
    assert spread >= 0.05 * (n - 1) * 0.8, (spread, n)


def test_session_from_the_header_or_from_provider_metadata(
    fake: FakeProvider, proxy: ProxyProcess
) -> None:
    fake.reset()
    fake.id_prefix = "session-"
    fake.script(answer("One."), answer("Two."), answer("Three."))
    tagged = openai.OpenAI(
        api_key=OPENAI_KEY,
        base_url=proxy.url + "/v1",
        max_retries=0,
        default_headers={"X-Lithify-Session": "agent-run-7"},
    )
    tagged.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "1"}])
    claude = anthropic.Anthropic(api_key=ANTHROPIC_KEY, base_url=proxy.url, max_retries=0)
    user_id = json.dumps({"device_id": "d", "account_uuid": "a", "session_id": "claude-code-42"})
    claude.messages.create(
        model="claude-sonnet-4-6", max_tokens=8, messages=[{"role": "user", "content": "2"}],
        metadata={"user_id": user_id},
    )  # fmt: skip
    plain = openai.OpenAI(api_key=OPENAI_KEY, base_url=proxy.url + "/v1", max_retries=0)
    plain.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "3"}])
    exchanges = fake.wait(3)
    assert not any(k.startswith(("x-lithify", "lithify")) for ex in exchanges for k in ex.headers)
    facts = facts_for(
        proxy.store, ["chatcmpl-session-0001", "msg_session-0002", "chatcmpl-session-0003"]
    )
    assert [f.session_id for f in facts] == ["agent-run-7", "claude-code-42", None]


def test_credentials_reach_the_upstream_and_never_the_store(
    fake: FakeProvider, proxy: ProxyProcess, via: FakeProvider
) -> None:
    fake.id_prefix = "keys-"
    for provider in PROVIDERS:
        for stream in (False, True):
            fake.id_prefix = f"keys-{provider}-{int(stream)}-"
            run = DRIVERS[provider](via, stream)
            assert all(ex.credential == KEYS[provider] for ex in run.exchanges)
    # Gemini also takes the key as a query parameter: forwarded, never recorded.
    fake.reset()
    fake.id_prefix = "keys-query-"
    fake.script(answer("Yes."))
    path = f"/v1beta/models/{_GEMINI_MODEL}:generateContent?key={GEMINI_KEY}"
    r = request(proxy.port, "POST", path, b'{"contents": [{"parts": [{"text": "Hi"}]}]}', {"Content-Type": "application/json"})  # fmt: skip
    assert r.status == 200
    assert GEMINI_KEY in fake.wait(1)[0].path
    facts_for(proxy.store, ["keys-query-0001"])
    proxy.wait_health("an idle recorder", lambda h: h["recorder"]["backlog_bytes"] == 0)
    db = Path(proxy.store.removeprefix("sqlite://"))
    files = [p for p in db.parent.glob(db.name + "*")] + list(proxy.spool.iterdir())
    assert db in files
    for key in (OPENAI_KEY, ANTHROPIC_KEY, GEMINI_KEY):
        for f in files:
            data = f.read_bytes()
            assert key.encode() not in data, (key, f)
            assert key[8:24].encode() not in data, (key, f)  # nor a long fragment of it


def test_an_error_answer_reaches_the_sdk_as_it_would_directly(
    fake: FakeProvider, proxy: ProxyProcess
) -> None:
    from tests.fakes import Fault

    fake.reset()
    fake.id_prefix = "err-"
    fake.script(Fault(429, "Rate limit reached. Slow down.", retry_after=0.01), TURN2)
    before = proxy.health()["recorder"]["skipped"].get("error_response", 0)
    client = openai.OpenAI(api_key=OPENAI_KEY, base_url=proxy.url + "/v1", max_retries=1)
    r = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
    )
    failed, ok = fake.wait(2)
    assert (failed.status, ok.status) == (429, 200)
    assert (
        failed.response_headers["retry-after"] == "0.01"
    )  # the SDK retried on the upstream's word
    assert r.id == "chatcmpl-err-0002"
    proxy.wait_health(
        "the error counted",
        lambda h: h["recorder"]["skipped"].get("error_response", 0) == before + 1,
    )
    facts_for(proxy.store, ["chatcmpl-err-0002"])
