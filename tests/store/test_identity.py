"""Call identity against servers that hand out ids badly (docs/store.md, "Call identity"): ids
only propose that two captures are one call, content decides. Every test runs on SQLite and
PostgreSQL, and compares the store with the same rule over fact files."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.core.codec import encode
from lithify.derive.sessions import sort_facts
from lithify.model import InferenceCall, Message, Source, TextPart
from lithify.store import FactFilter, open_store
from lithify.translate.provider import translate_exchange
from tests.store.helpers import make_fact, race_writers

SESSION = FactFilter(order="session")


def _exchange(i: int, response_id: str, *, question: str | None = None) -> InferenceCall:
    """One OpenAI-compatible chat call through the real translator, as a local server that
    names responses badly answers it."""
    request = {
        "model": "llama3.2",
        "messages": [{"role": "user", "content": question or f"Question number {i}?"}],
    }
    response = {
        "id": response_id,
        "object": "chat.completion",
        "created": 1_750_000_000 + i,
        "model": "llama3.2",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"Answer number {i}."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    fact = translate_exchange(request, response)
    assert isinstance(fact, InferenceCall)
    return fact


def _answers(facts: list[InferenceCall]) -> list[str]:
    return sorted(
        p.content
        for f in facts
        for m in f.output_messages
        for p in m.parts
        if isinstance(p, TextPart)
    )


@pytest.mark.parametrize(
    "name_of",
    [
        lambda i, rng: f"chatcmpl-{rng.randrange(3)}",  # Ollama: a random number in a tiny range
        lambda i, rng: f"chatcmpl-{1_750_000_000 + i // 8}",  # unix seconds: 8 calls a second
        lambda i, rng: "chatcmpl-0",  # a constant
    ],
    ids=["tiny-range", "per-second", "constant"],
)
def test_forty_different_calls_are_forty_calls_whatever_their_ids(
    store_url: str, name_of: Callable[[int, random.Random], str]
) -> None:
    rng = random.Random(40)
    calls = [_exchange(i, name_of(i, rng)) for i in range(40)]
    with open_store(store_url) as store:
        results = [store.insert_facts(calls[i : i + 7]) for i in range(0, 40, 7)]
        assert sum(r.inserted for r in results) == 40
        assert sum(r.duplicates + r.variants for r in results) == 0
        collisions = sum(r.collisions for r in results)
        assert collisions > 0
        read = list(store.iter_facts(SESSION))
        assert _answers(read) == _answers(calls)
        assert len({f.inference_call_id for f in read}) == 40
        # Of the calls sharing one id, all but the first-ranked collide; each batch counts the
        # calls it made collide (an earlier call counts when a later one outranks it).
        groups = len({f.model_call_id for f in calls})
        assert store.count() == 40 and store.stats().id_collisions == 40 - groups == collisions
        assert [encode(f) for f in read] == [encode(f) for f in sort_facts(calls)]
        # Every call can be looked up under the id it is read with.
        for f in read:
            got = store.get_fact(f.inference_call_id)
            assert got is not None and encode(got) == encode(f)
        # Importing them again is all redeliveries.
        again = store.insert_facts(calls)
        assert (again.inserted, again.duplicates, again.collisions) == (0, 40, 0)


def test_same_input_different_outputs_are_two_calls(store_url: str) -> None:
    # Sampling: one question asked twice, two answers, the same (constant) response id.
    a = _exchange(1, "chatcmpl-0", question="Tell me a joke.")
    b = _exchange(2, "chatcmpl-0", question="Tell me a joke.")
    with open_store(store_url) as store:
        assert store.insert_facts([a]).inserted == 1
        r = store.insert_facts([b])
        assert (r.inserted, r.collisions) == (1, 1)
        assert _answers(list(store.iter_facts(SESSION))) == _answers([a, b])


def test_a_cached_answer_to_another_question_is_another_call(store_url: str) -> None:
    # A caching gateway hands a later call the cached response's id and answer.
    first = _exchange(1, "chatcmpl-cached", question="What is 2 + 2?")
    cached = msgspec.structs.replace(
        _exchange(1, "chatcmpl-cached", question="What is two plus two?"),
        started_at="2025-06-01T10:00:00.000000000Z",
    )
    with open_store(store_url) as store:
        store.insert_facts([first, cached])
        assert store.count() == 2 and store.stats().id_collisions == 1


def _recorded(call: int, session: str | None, response_id: str | None) -> InferenceCall:
    return make_fact(
        f"call-{call}",
        session_id=session,
        model_call_id=response_id,
        started_at=f"2025-05-01T10:00:{call % 60:02d}.000000000Z",
        raw={"call": call},
    )


@st.composite
def _traffic(draw: st.DrawFn) -> tuple[list[InferenceCall], int]:
    """Captures of a few calls, with ids from the worst servers, and how many calls there are.

    Each call (distinct content) is captured by any of: its span (a session), the span's log
    event (the span's identity, no session), the proxy (another identity, the response id,
    no session), the response alone (no input); the same capture may come twice."""
    scheme = draw(st.sampled_from(["tiny", "constant", "per-second", "unique"]))
    n = draw(st.integers(1, 6))
    out: list[InferenceCall] = []
    for i in range(n):
        rid = {
            "tiny": f"r{draw(st.integers(0, 1))}",
            "constant": "r",
            "per-second": f"r{i // 3}",
            "unique": f"r-{i}",
        }[scheme]
        session = draw(st.sampled_from([None, "s1", "s2"]))
        span = _recorded(i, session, rid)
        kinds = draw(st.sets(st.sampled_from(["span", "log", "proxy", "alone"]), min_size=1))
        if "span" in kinds:
            out.append(span)
        if "log" in kinds:
            out.append(msgspec.structs.replace(span, session_id=None, raw={"log": i}))
        if "proxy" in kinds:
            out.append(
                msgspec.structs.replace(
                    span,
                    inference_call_id=f"proxy-{i}-{rid}",
                    session_id=None,
                    source=Source("openai-chat"),
                    raw={"proxy": i},
                )
            )
        if "alone" in kinds:
            out.append(
                msgspec.structs.replace(
                    span,
                    inference_call_id=f"alone-{i}-{rid}",
                    session_id=None,
                    input_messages=[],
                    raw={"alone": i},
                )
            )
        if draw(st.booleans()):
            out.append(out[-1])  # a redelivery
    return out, n


def _content(f: InferenceCall) -> str:
    """Which call of ``_traffic`` a fact is: its answer names the call."""
    [m] = f.output_messages
    return repr(m.parts)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(traffic=_traffic(), data=st.data())
def test_any_order_and_batching_gives_one_call_per_call(
    new_store_url: Callable[[], str], traffic: tuple[list[InferenceCall], int], data: st.DataObject
) -> None:
    captures, n = traffic
    want = sort_facts(captures)
    # Every call once, whatever ids its captures carry.
    assert sorted(_content(f) for f in want) == sorted({_content(f) for f in captures})
    assert len(want) == n
    order = data.draw(st.permutations(captures))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(order)), max_size=4)))
    with open_store(new_store_url()) as store:
        for a, b in itertools.pairwise([0, *cuts, len(order)]):
            if b > a:
                store.insert_facts(order[a:b])
        assert [encode(f) for f in store.iter_facts(SESSION)] == [encode(f) for f in want]
        assert store.count() == n


def test_concurrent_writers_agree_on_colliding_and_linking_captures(
    new_store_url: Callable[[], str],
) -> None:
    """Writers side by side (as several `lithify serve` and `lithify proxy` processes behind a
    load balancer), each with its own connection, racing on captures that collide and link."""
    rng = random.Random(5)
    captures: list[InferenceCall] = []
    for i in range(30):
        span = _recorded(i, f"s{i % 3}", f"chatcmpl-{rng.randrange(4)}")
        captures += [
            span,
            msgspec.structs.replace(span, session_id=None, raw={"log": i}),
            msgspec.structs.replace(
                span, inference_call_id=f"proxy-{i}", session_id=None, raw={"proxy": i}
            ),
        ]
    url = new_store_url()
    open_store(url).close()
    race_writers(url, captures, batch=4)
    with open_store(url) as store:
        read = list(store.iter_facts(SESSION))
        assert [encode(f) for f in read] == [encode(f) for f in sort_facts(captures)]
        assert len(read) == 30


def test_an_answer_with_another_text_is_another_call(store_url: str) -> None:
    """Agreement compares the text as recorded: an instrumentation that cut an answer short
    recorded another answer, and is kept as a call of its own (counted), not guessed to be
    the same call."""
    full = make_fact("x", model_call_id="r1")
    cut = msgspec.structs.replace(
        full,
        inference_call_id="cut",
        output_messages=[Message("assistant", [TextPart("Let me")], "stop")],
    )
    with open_store(store_url) as store:
        store.insert_facts([full, cut])
        assert store.count() == 2 and store.stats().id_collisions == 1


def test_an_n2_call_captured_twice_is_one_call_and_two_samplings_are_two(store_url: str) -> None:
    """A call with two choices (n = 2) recorded by its span and by the proxy is one call; the
    same question sampled again, answered otherwise, is another one, whatever its id."""
    choices = [
        Message("assistant", [TextPart("Heads.")], "stop"),
        Message("assistant", [TextPart("Tails.")], "stop"),
    ]
    span = make_fact("n2", session_id="s", model_call_id="r-n2", output_messages=choices)
    proxy = msgspec.structs.replace(
        span, inference_call_id="proxy-n2", session_id=None, raw={"proxy": 1}
    )
    again = msgspec.structs.replace(
        proxy, inference_call_id="proxy-n2b", output_messages=choices[::-1], raw={"proxy": 2}
    )
    with open_store(store_url) as store:
        store.insert_facts([proxy, span, again])
        read = list(store.iter_facts(SESSION))
        # The span is read for the first call (it has the session); the resampled call alone.
        assert sorted(repr(f.raw) for f in read) == sorted([repr(span.raw), repr(again.raw)])
        assert store.count() == 2 and store.stats().id_collisions == 1
