"""Faults: upstream errors, silences and cuts, clients that hang up, a store that goes away and
comes back, a proxy killed with SIGKILL, and a full spool. In each, the client sees what it
would see without the proxy, and the recording says what happened."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anthropic
import openai
import pytest
from google.genai import errors as genai_errors

from lithify.ingest.spool import HEADER, MAGIC, SpoolReader, segments
from lithify.model import TextPart
from tests.fakes import FakeProvider, Fault, answer
from tests.proxy.conftest import through, upstreams_of
from tests.proxy.helpers import (
    DEAD_STORE,
    ProxyProcess,
    raw_stream,
    request,
    start_proxy,
    stored_facts,
    wait_facts,
)
from tests.proxy.test_sdks import converted, document, facts_for
from tests.store.conftest import SCRIPT, start_postgres
from tests.test_provider_sdks import (
    CUT_ERRORS,
    DRIVERS,
    TURN2,
    _anthropic,
    _gemini,
    _openai,
    _single_turn,
)

LONG = "The quick brown fox jumps over the lazy dog. " * 8


@pytest.fixture(scope="module")
def proxy(fake: FakeProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    """A proxy that waits at most half a second for an upstream byte."""
    tmp = tmp_path_factory.mktemp("faults")
    p = start_proxy(tmp, upstreams_of(fake), "--read-timeout", "0.5")
    yield p
    assert p.stop() == 0


def _outcome(p: ProxyProcess, kind: str, outcome: str) -> int:
    return int(p.health()["outcomes"].get(kind, {}).get(outcome, 0))


def test_an_upstream_500_reaches_the_sdk_and_is_counted(
    fake: FakeProvider, proxy: ProxyProcess, via: FakeProvider
) -> None:
    skipped = proxy.health()["recorder"]["skipped"].get("error_response", 0)
    for provider, error in (
        ("anthropic", anthropic.InternalServerError),
        ("gemini", genai_errors.ServerError),
    ):
        fake.reset()
        fake.script(Fault(500, "The fake had an error while processing your request."))
        with pytest.raises(error) as e:
            _single_turn(via, provider, False)
        assert "The fake had an error" in str(e.value)
        assert fake.wait(1)[0].status == 500
    h = proxy.wait_health(
        "two error answers counted",
        lambda h: h["recorder"]["skipped"].get("error_response", 0) == skipped + 2,
    )
    assert h["statuses"]["anthropic"]["500"] >= 1 and h["statuses"]["gemini"]["500"] >= 1


def test_an_upstream_that_does_not_answer_in_time(
    fake: FakeProvider, proxy: ProxyProcess, via: FakeProvider
) -> None:
    # Silent before the response: the proxy answers 504 in the provider's error format.
    fake.reset()
    fake.script(replace(TURN2, delay=1.5))
    before = _outcome(proxy, "openai-chat", "timeout")
    with pytest.raises(openai.InternalServerError) as e:
        _openai(via).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
        )
    assert e.value.status_code == 504
    assert e.value.response.headers["x-lithify-proxy-error"] == "timeout"
    assert "lithify proxy" in e.value.message
    assert _outcome(proxy, "openai-chat", "timeout") == before + 1

    # Silent in the middle of a stream: the client's stream breaks, as the upstream's would.
    fake.reset()
    fake.id_prefix = "silent-"
    fake.script(answer(LONG, event_delay=0.8))
    with pytest.raises(CUT_ERRORS["anthropic"]):
        _single_turn(via, "anthropic", True)
    (fact,) = facts_for(proxy.store, ["msg_silent-0001"])
    assert fact.degradations["truncated_stream"] == 1  # the call as far as it got
    assert _outcome(proxy, "anthropic", "timeout") >= 1


def test_a_client_that_gives_up_closes_the_upstream_call(
    fake: FakeProvider, proxy: ProxyProcess, via: FakeProvider
) -> None:
    fake.reset()
    fake.script(replace(TURN2, delay=0.4))
    before = _outcome(proxy, "openai-chat", "client_gone")
    with pytest.raises(openai.APITimeoutError):
        _openai(via, timeout=0.1).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
        )
    (ex,) = fake.wait(1, timeout=5)
    assert ex.client_gone  # the proxy hung up on the upstream when the client hung up on it
    proxy.wait_health(
        "client_gone", lambda h: h["outcomes"]["openai-chat"].get("client_gone", 0) == before + 1
    )


def test_a_client_disconnect_mid_stream_is_recorded_as_far_as_it_got(
    fake: FakeProvider, proxy: ProxyProcess
) -> None:
    fake.reset()
    fake.id_prefix = "gone-"
    fake.script(answer(LONG, event_delay=0.03))
    body = b'{"model": "claude-sonnet-4-6", "max_tokens": 99, "stream": true, "messages": [{"role": "user", "content": "Go"}]}'
    with raw_stream(
        proxy.port,
        "/v1/messages",
        body,
        {"Content-Type": "application/json", "x-api-key": "sk-ant-x"},
    ) as s:
        got = b""
        while got.count(b"event: content_block_delta") < 3:
            got += s.recv(65536)
        s.shutdown(socket.SHUT_RDWR)
    (fact,) = facts_for(proxy.store, ["msg_gone-0001"])
    assert fact.degradations["truncated_stream"] == 1
    text = "".join(p.content for p in fact.output_messages[0].parts if isinstance(p, TextPart))
    assert text and LONG.startswith(text) and len(text) < len(LONG)
    (ex,) = fake.wait(1, timeout=10)
    assert ex.client_gone  # the upstream stream was closed, not read to its end
    assert proxy.health()["outcomes"]["anthropic"]["client_gone"] >= 1


@pytest.mark.parametrize("provider", ["openai-chat", "gemini"])
def test_an_upstream_cut_reaches_the_client_as_a_cut(
    fake: FakeProvider, proxy: ProxyProcess, via: FakeProvider, provider: str, tmp_path: Path
) -> None:
    fake.reset()
    fake.id_prefix = f"cut-{provider}-"
    fake.script(replace(TURN2, cut_after=4))
    with pytest.raises(CUT_ERRORS[provider]):
        _single_turn(via, provider, True)
    (ex,) = fake.wait(1)
    assert ex.cut
    rid = f"chatcmpl-cut-{provider}-0001" if provider == "openai-chat" else f"cut-{provider}-0001"
    (fact,) = facts_for(proxy.store, [rid])
    assert fact.degradations.get("truncated_stream") == 1
    assert converted([document(ex, provider, fake, fact)], tmp_path) == [fact]
    assert _outcome(proxy, provider, "upstream_cut") >= 1


# -- the store and the spool ------------------------------------------------------------------


MIXES = {
    "up": (("openai-chat", False), ("anthropic", True)),
    "down": (("openai-responses", True), ("gemini", False)),
    "k9": (("openai-chat", True), ("anthropic", False), ("gemini", True)),
}


def _calls(via: FakeProvider, fake: FakeProvider, tag: str) -> list[str | None]:
    """A two-turn tool loop through each SDK of the mix; the response ids."""
    ids: list[str | None] = []
    for provider, stream in MIXES[tag]:
        fake.id_prefix = f"{tag}-{provider}-"
        ids += [s.id for s in DRIVERS[provider](via, stream).seen]
    return ids


def test_store_down_then_back(
    fake: FakeProvider, own_postgres: tuple[Path, str], tmp_path: Path
) -> None:
    folder, url = own_postgres
    p = start_proxy(tmp_path, upstreams_of(fake), store=url)
    try:
        via = through(fake, p.url)
        first = _calls(via, fake, "up")
        assert {f.model_call_id for f in wait_facts(url, len(first))} == set(first)

        subprocess.run(["bash", str(SCRIPT), "stop", "--dir", str(folder)], check=True)
        second = _calls(via, fake, "down")  # every call still answered
        total = len(first) + len(second)
        h = p.wait_health(
            "the outage noticed, every call spooled",
            lambda h: not h["recorder"]["available"] and h["spool"]["appended"] == total,
        )
        assert h["recording"] == "degraded"
        assert h["recorder"]["backlog_bytes"] > 0

        assert start_postgres(folder) == url
        facts = wait_facts(url, total)
        assert sorted(f.model_call_id for f in facts) == sorted(first + second)  # none twice
        h = p.wait_health("an idle recorder", lambda h: h["recorder"]["backlog_bytes"] == 0)
        assert h["recorder"]["facts_stored"] == total
        assert h["recorder"]["duplicates"] == 0
        assert h["recording"] == "ok"
        events = {e["event"] for e in p.events()}
        assert {"store_unavailable", "store_available"} <= events
    finally:
        assert p.stop() == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_kill_9_then_restart_loses_nothing_spooled(
    fake: FakeProvider, own_postgres: tuple[Path, str], tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    folder, store = own_postgres
    # Started with the store unreachable: calls are served all the same (the store is not on
    # their path), and wait in the spool.
    subprocess.run(["bash", str(SCRIPT), "stop", "--dir", str(folder)], check=True)
    a = start_proxy(tmp_path, upstreams_of(fake), store=store, spool=spool, log_name="a.log")
    ids = _calls(through(fake, a.url), fake, "k9")
    a.wait_health("everything spooled", lambda h: h["spool"]["appended"] == len(ids))
    recorder = a.recorder_pid()
    a.kill9()
    deadline = time.monotonic() + 10
    while _alive(recorder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(recorder)  # the recorder died with the proxy

    # What is on disk: every exchange, whole. A crash mid-write leaves a torn record at the end of
    # the newest segment: add one, the restarted proxy must step over it.
    assert len(SpoolReader(spool).read(max_records=1000)) == len(ids)
    newest = segments(spool)[-1][1]
    with open(newest, "ab") as fh:
        fh.write(HEADER.pack(MAGIC, 5000, 0) + b"half a record")

    # Restarted once the store is back (a spool is recorded into its own store only).
    assert start_postgres(folder) == store
    b = start_proxy(tmp_path, upstreams_of(fake), store=store, spool=spool, log_name="b.log")
    try:
        facts = wait_facts(store, len(ids))
        assert sorted(f.model_call_id for f in facts) == sorted(ids)
        h = b.wait_health("an idle recorder", lambda h: h["recorder"]["backlog_bytes"] == 0)
        assert (h["recorder"]["torn"], h["recorder"]["duplicates"]) == (1, 0)
        # Consumed segments are deleted: only the one being written is left.
        assert len(segments(spool)) == 1
    finally:
        assert b.stop() == 0
    assert len(stored_facts(store)) == len(ids)


@pytest.fixture(scope="module")
def dead_ends(
    fake: FakeProvider, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyProcess]:
    """A proxy whose store cannot be reached, whose spool is tiny, and whose Gemini upstream is
    a port where nothing listens."""
    tmp = tmp_path_factory.mktemp("dead-ends")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        upstreams = {**upstreams_of(fake), "gemini": dead}
        p = start_proxy(tmp, upstreams, "--spool-max-size", "6KiB", store=DEAD_STORE)
        yield p
        assert p.stop() == 0


def test_an_unreachable_upstream_is_a_502(dead_ends: ProxyProcess) -> None:
    client = _gemini(through(None, dead_ends.url))
    with pytest.raises(genai_errors.ServerError) as e:
        client.models.generate_content(model="gemini-2.5-flash", contents="Hi")
    assert (e.value.code, e.value.status) == (502, "UNAVAILABLE")
    assert "could not be reached" in str(e.value)
    assert dead_ends.health()["outcomes"]["gemini"] == {"unreachable": 1}


def test_a_full_spool_keeps_forwarding_and_counts_what_it_drops(
    fake: FakeProvider, dead_ends: ProxyProcess
) -> None:
    p = dead_ends
    fake.reset()
    fake.script(*[answer(LONG) for _ in range(8)])
    client = _anthropic(through(fake, p.url))
    for _ in range(8):
        m = client.messages.create(model="claude-sonnet-4-6", max_tokens=99, messages=[{"role": "user", "content": "Go"}])  # fmt: skip
        assert m.content[0].text == LONG  # every call answered
    h = p.wait_health("spool drops", lambda h: h["not_recorded"].get("spool_full", 0) > 0)
    assert h["spooled"] + h["not_recorded"]["spool_full"] == 8
    assert h["spooled"] >= 1 and h["recording"] == "degraded"
    assert p.events("spool_full")
    # The same counts on the Prometheus endpoint.
    text = request(p.port, "GET", "/lithify/metrics").body.decode()
    dropped = h["not_recorded"]["spool_full"]
    assert f'lithify_proxy_not_recorded_total{{reason="spool_full"}} {dropped}' in text
    assert "lithify_proxy_store_available 0" in text
