"""One call captured several times with different content: every distinct capture is kept, and
the derivation read gives the capture the capture rule keeps (docs/store.md), whatever the
order the captures came in — what fact files give. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.core.codec import Decoder, encode
from lithify.core.identity import Capture, agree, content_keys, fill, lack, part_count
from lithify.derive.feedback import FeedbackIndex
from lithify.derive.sessions import call_order_key, resolve_facts, sort_facts
from lithify.export.source import from_facts
from lithify.model import Feedback, InferenceCall, Message, ReasoningPart, TextPart
from lithify.store import FactFilter, open_store, prepare
from lithify.store.migrations import LATEST, MIGRATIONS
from lithify.store.sqlite import pack_body, unpack_body
from tests.export.helpers import captured_twice
from tests.store.helpers import (
    drop_digests,
    drop_summaries,
    make_fact,
    race_writers,
    raw_execute,
    same,
)

SESSION = FactFilter(order="session")
T0, T1 = "2025-05-01T10:00:00.000000000Z", "2025-05-01T10:00:05.000000000Z"


def _encoded(facts: Iterable[InferenceCall]) -> list[bytes]:
    return [encode(f) for f in facts]


def _stored(url: str) -> int:
    """Rows of facts and fact_variants: every distinct capture is one of them."""
    return sum(
        raw_execute(url, f"SELECT COUNT(*) FROM {t}")[0][0] for t in ("facts", "fact_variants")
    )


def _variants(url: str) -> list[InferenceCall]:
    """The captures fact_variants holds, decoded from their stored bodies."""
    rows = raw_execute(url, "SELECT body FROM fact_variants ORDER BY digest")
    decoder = Decoder(InferenceCall)
    return [decoder.decode(unpack_body(bytes(body)) or b"") for (body,) in rows]


def _span_and_log() -> tuple[InferenceCall, InferenceCall]:
    """An OTel span and the log event of the same span: one identity; the log event lacks the
    span's conversation id and holds another raw."""
    span = make_fact(
        "span-1", session_id="conv-1", trace_id="t1", span_id="s1", started_at=T1, raw={"span": 1}
    )
    return span, msgspec.structs.replace(span, session_id=None, raw={"log": 1})


def _metadata_span_and_log() -> tuple[InferenceCall, InferenceCall]:
    """A span that recorded the call's metadata and no message (openai-v2's default mode), and
    the log events of the same span: the messages, without session, model, usage or response
    id. The call is read from the log events, filled with the span's metadata. The log events
    state no finish reason (Pydantic AI 1.x): the span's, an output without parts, says the
    answer was cut."""
    cut = [Message("assistant", [TextPart("Let me")], None)]
    log = make_fact(
        "span-2", trace_id="t2", span_id="s2", observed_at=T1, output_messages=cut, raw={"log": 2}
    )
    span = msgspec.structs.replace(
        log,
        input_messages=[],
        output_messages=[Message("assistant", [], "length")],
        session_id="conv-2",
        model="gpt-5",
        input_tokens=40,
        output_tokens=9,
        model_call_id="chatcmpl-2",
        started_at=T0,
        degradations={"content_not_captured": 1},
        raw={"span": 2},
    )
    return span, log


# Contested calls of every shape (span and log event, span and proxy, three captures, a chain),
# sessions whose column form is escaped, and an uncontested call.
CAPTURES = [
    *captured_twice(),
    *_span_and_log(),
    *_metadata_span_and_log(),
    make_fact("nul-span", session_id="a\x00b", started_at=T0, model_call_id="r-nul"),
    make_fact("nul-proxy", session_id=None, started_at=T0, model_call_id="r-nul", source="proxy"),
    make_fact("alone", session_id="conv-1", started_at=T0),
]


@pytest.mark.parametrize("log_first", [False, True])
def test_a_call_captured_twice_keeps_both_captures_and_reports_a_variant(
    store_url: str, log_first: bool
) -> None:
    span, log = _span_and_log()
    first, second = (log, span) if log_first else (span, log)
    with open_store(store_url) as store:
        assert store.insert_facts([first]).inserted == 1
        result = store.insert_facts([second])
        assert (result.inserted, result.duplicates, result.duplicate_ids) == (0, 0, [])
        assert (result.variants, result.variant_ids) == (1, [span.inference_call_id])
        # One call, read from the capture the rule puts first (the span: it has the session),
        # whichever came first.
        assert store.count() == 1
        assert same(store.get_fact(span.inference_call_id), span)
        assert _encoded(store.iter_facts()) == [encode(span)]
        assert _encoded(store.iter_facts(SESSION)) == _encoded(sort_facts([span, log]))
    [kept_apart] = _variants(store_url)
    assert same(kept_apart, second)  # lossless, raw included


def test_stats_count_the_variants_and_the_captures_exports_leave_out(store_url: str) -> None:
    with open_store(store_url) as store:
        assert (store.stats().variants, store.stats().dropped_captures) == (0, 0)
        store.insert_facts(CAPTURES)
        st = store.stats()
        stored = sum(
            raw_execute(store_url, f"SELECT COUNT(*) FROM {t}")[0][0]
            for t in ("facts", "fact_variants")
        )
        kept, dropped, _ = resolve_facts(CAPTURES)
        # Every capture is stored; the calls are what the rule reads, the rest are left out.
        assert st.facts == len(kept) == sum(1 for _ in store.iter_facts(SESSION))
        assert st.dropped_captures == st.variants == stored - len(kept) == len(dropped) > 0
        assert st.dropped_captures == store.count_dropped()
        # nul-span and nul-proxy share a response id and contradict: two calls. So do s-three's
        # chain capture (the second call's content, the first call's response id) and the
        # first call: the second call, read from the chain capture (as early, as full), counts.
        assert st.id_collisions == 2
        assert store.stats(FactFilter(session_id="no-such")).variants == 0


def _view(f: InferenceCall) -> Capture:
    return Capture(b"", lack(f), "", f.inference_call_id, f.model_call_id, f.session_id,
                   *content_keys(f))  # fmt: skip


def _answer(*parts: Any) -> list[Message]:
    return [Message("assistant", list(parts), "stop")]


def _rivals() -> dict[str, tuple[InferenceCall, InferenceCall]]:
    """Pairs of captures of one call: (the one the rule keeps, the earlier one it drops)."""
    base = make_fact("call", session_id="s", model_call_id="resp-1", started_at=T0)
    proxy = msgspec.structs.replace(base, inference_call_id="proxy-1", started_at=T1)
    said = TextPart("It is sunny in Paris today.")
    return {
        # The instrumentation lost the reasoning step the proxy recorded later.
        "parts": (
            msgspec.structs.replace(
                proxy, output_messages=_answer(ReasoningPart("Check the sky."), said)
            ),
            msgspec.structs.replace(base, output_messages=_answer(said)),
        ),
        # The span keeps the call in its session; its log event, earlier and fuller, does not.
        "session": (
            msgspec.structs.replace(base, started_at=T1, output_messages=_answer(said)),
            msgspec.structs.replace(
                base, session_id=None, output_messages=_answer(ReasoningPart("Sky."), said)
            ),
        ),
        # The response captured alone (no request): it lacks the input the proxy recorded.
        "input": (
            msgspec.structs.replace(proxy, output_messages=_answer(said)),
            msgspec.structs.replace(base, input_messages=[], output_messages=_answer(said)),
        ),
    }  # fmt: skip


@pytest.mark.parametrize("case", ["parts", "session", "input"])
def test_the_capture_that_lacks_least_is_kept(new_store_url: Callable[[], str], case: str) -> None:
    kept, dropped = _rivals()[case]
    assert lack(kept) < lack(dropped) and call_order_key(dropped) < call_order_key(kept)
    assert resolve_facts([dropped, kept])[:2] == resolve_facts([kept, dropped])[:2]
    assert resolve_facts([dropped, kept])[:2] == ([kept], [dropped])
    # Only the session ranks a capture with fewer parts first: then the one dropped is richer.
    richer = [dropped] if case == "session" else []
    for order in ([dropped, kept], [kept, dropped]):
        found: list[InferenceCall] = []
        resolve_facts(order, found)
        assert found == richer
    for first, second in ((kept, dropped), (dropped, kept)):
        with open_store(new_store_url()) as store:
            store.insert_facts([first])
            store.insert_facts([second])
            assert _encoded(store.iter_facts(SESSION)) == [encode(kept)]
            assert store.count_dropped() == 1
            assert store.count_richer_dropped() == len(richer)
            assert store.stats().richer_dropped == len(richer)  # what `lithify stats` shows
            assert store.count_richer_dropped(FactFilter(session_id="no-such")) == 0
            # On the call's columns: a capture without a session left out of a call in one
            # counts for that session (an export of the session reports it).
            only = FactFilter(session_id=kept.session_id)
            assert (store.count_dropped(only), store.count_richer_dropped(only)) == (1, len(richer))
            assert store.stats(only).richer_dropped == len(richer)
            picked = from_facts([first, second], filters=only)
            assert (picked.dropped, picked.richer) == (1, len(richer))


def test_every_capture_of_a_call_can_be_listed_with_the_one_kept(store_url: str) -> None:
    with open_store(store_url) as store:
        store.insert_facts(CAPTURES)
        for capture in CAPTURES:
            listed = store.captures(capture.inference_call_id)
            bodies = [encode(c.fact) for c in listed]
            assert encode(capture) in bodies  # a capture is listed with the others of its call
            calls: dict[str, list[Any]] = {}
            for c in listed:
                calls.setdefault(c.call_id, []).append(c)
            assert [c.first for c in listed] == [calls[c.call_id][0] is c for c in listed]
            # The call is read as its first capture, with what it left empty from the others.
            for call_id, group in calls.items():
                first, *others = (c.fact for c in group)
                read = fill(msgspec.structs.replace(first, inference_call_id=call_id), others)
                assert encode(store.get_fact(call_id)) == encode(read)
            # In the rule's rank order: what they lack, then time.
            assert [lack(c.fact) for c in listed] == sorted(lack(c.fact) for c in listed)
            # Each names its call: the id of the call's first capture.
            firsts = {c.call_id for c in listed if c.first}
            assert {c.call_id for c in listed} == firsts
        alone = next(c for c in CAPTURES if c.raw == {"key": "alone"})  # an uncontested call
        [only] = store.captures(alone.inference_call_id)
        assert same(only.fact, alone) and only.first
        assert only.call_id == alone.inference_call_id
        assert store.captures("no-such-call") == []


def test_a_byte_identical_redelivery_is_a_plain_duplicate(store_url: str) -> None:
    span, log = _span_and_log()
    with open_store(store_url) as store:
        store.insert_facts([span])
        again = store.insert_facts([span])
        assert (again.inserted, again.duplicates, again.variants) == (0, 1, 0)
        assert store.insert_facts([log]).variants == 1
        redelivered = store.insert_facts([log, span, log])
        assert (redelivered.inserted, redelivered.duplicates, redelivered.variants) == (0, 3, 0)
        assert redelivered.duplicate_ids == [span.inference_call_id] * 3
    assert len(_variants(store_url)) == 1
    assert raw_execute(store_url, "SELECT COUNT(*) FROM fact_captures") == [(2,)]


def _batches(facts: list[InferenceCall], cuts: list[int]) -> list[list[InferenceCall]]:
    edges = [0, *sorted(cuts), len(facts)]
    return [facts[a:b] for a, b in itertools.pairwise(edges) if b > a]


def _insert(url: str, batches: list[list[InferenceCall]], grouped: bool) -> list[object]:
    """Insert batch after batch, or all in one group commit (with bodies packed ahead, as the
    receiver does for SQLite)."""
    with open_store(url) as store:
        if not grouped:
            return [store.insert_facts(b) for b in batches]
        prepared = [prepare(b) for b in batches]
        if url.startswith("sqlite"):
            for p in prepared:
                p.facts = [(*r[:-1], pack_body(r[-1])) for r in p.facts]
        return [facts for facts, _ in store.insert_prepared(prepared)]


# Filters apply to the capture the rule keeps (its own columns), as for fact files.
FILTERS: list[tuple[FactFilter, Callable[[InferenceCall], bool]]] = [
    (FactFilter(order="session", session_id="conv-1"), lambda f: f.session_id == "conv-1"),
    (FactFilter(order="session", source="proxy"), lambda f: f.source.name == "proxy"),
    (FactFilter(order="session", since="2025-06-01T10:00:01"), lambda f: (f.started_at or f.observed_at or "") >= "2025-06-01T10:00:01"),
    (FactFilter(order="session", limit=5), lambda f: True),
]  # fmt: skip


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    order=st.permutations(CAPTURES),
    cuts=st.lists(st.integers(0, len(CAPTURES)), max_size=4),
    grouped=st.booleans(),
)
def test_any_import_order_reads_back_what_fact_files_give(
    new_store_url: Callable[[], str],
    order: list[InferenceCall],
    cuts: list[int],
    grouped: bool,
) -> None:
    url = new_store_url()
    results = _insert(url, _batches(order, cuts), grouped)
    want = sort_facts(CAPTURES)
    distinct = len(set(_encoded(CAPTURES)))
    with open_store(url) as store:
        assert _encoded(store.iter_facts(SESSION, batch_size=3)) == _encoded(want)
        for flt, keep in FILTERS:
            expected = [f for f in want if keep(f)][: flt.limit]
            assert _encoded(store.iter_facts(flt)) == _encoded(expected), flt
        # Every distinct capture is stored once: as a facts row, or as a variant.
        assert _stored(url) == distinct
        assert store.count() == len(want)
    assert sum(r.inserted + r.variants for r in results) == distinct  # type: ignore[attr-defined]


@st.composite
def _contested_captures(draw: st.DrawFn) -> list[InferenceCall]:
    """Captures of a few calls that share identities at random, each lacking something or
    not: a session, a reasoning step, the end of its text; at one of a few times."""
    out = []
    for n in range(draw(st.integers(2, 7))):
        steps = [ReasoningPart("Think.")] * draw(st.integers(0, 2))
        text = TextPart("Sunny in Paris." if draw(st.booleans()) else "Sunny")
        # Now and then a span that recorded the call's metadata alone (no message).
        bare = draw(st.integers(0, 3)) == 0
        out.append(
            make_fact(
                draw(st.sampled_from("abc")),
                model_call_id=draw(st.sampled_from([None, "m1", "m2"])),
                session_id=draw(st.sampled_from([None, "s1", "s2"])),
                started_at=draw(st.sampled_from([None, T0, T1])),
                model=draw(st.sampled_from([None, "gpt-5", "gpt-4o"])),
                input_tokens=draw(st.sampled_from([None, 0, 12])),
                input_messages=[] if bare else [Message("user", [TextPart("Weather?")])],
                output_messages=[] if bare else _answer(*steps, text),
                raw={"capture": n},
            )
        )
    return out


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(captures=_contested_captures(), data=st.data())
def test_any_captures_in_any_order_give_what_the_rule_gives(
    new_store_url: Callable[[], str], captures: list[InferenceCall], data: st.DataObject
) -> None:
    richer: list[InferenceCall] = []
    kept, dropped, _ = resolve_facts(captures, richer)
    # The rule's own promises: calls have distinct ids; two calls sharing an id contradict each
    # other (else they would be one); each other capture agrees with a call that lacks no more.
    assert len({f.inference_call_id for f in kept}) == len(kept)
    view = {encode(f): _view(f) for f in captures}
    # Each call's first capture (its raw is the call's: a fill takes metadata only).
    firsts = [next(c for c in captures if c.raw == k.raw) for k in kept]
    for x, y in itertools.combinations(firsts, 2):
        if x.model_call_id is not None and x.model_call_id == y.model_call_id:
            assert not agree(_view(x), _view(y))
    for d in dropped:
        assert any(agree(view[encode(d)], _view(k)) and lack(k) <= lack(d) for k in firsts)
    for k, first in zip(kept, firsts, strict=True):  # the fill adds, it never changes
        assert (k.input_messages, k.output_messages) == (
            first.input_messages,
            first.output_messages,
        )
        for name in ("session_id", "model", "input_tokens", "model_call_id", "started_at"):
            assert getattr(first, name) in (None, getattr(k, name))
    order = data.draw(st.permutations(captures))
    cuts = data.draw(st.lists(st.integers(0, len(order)), max_size=3))
    url = new_store_url()
    _insert(url, _batches(order, cuts), data.draw(st.booleans()))
    with open_store(url) as store:
        assert _encoded(store.iter_facts(SESSION)) == _encoded(sort_facts(captures))
        distinct = len(set(_encoded(captures)))
        assert store.count_dropped() == len(dropped) - (len(captures) - distinct)
        assert store.count() == len(kept)
        # The dropped captures holding more parts than their call's first, by part count: the
        # store counts them as fact files give them, a redelivered one once.
        listed = {encode(c.fact): c for k in kept for c in store.captures(k.inference_call_id)}
        read = {c.call_id: part_count(c.fact) for c in listed.values() if c.first}
        lacking = [
            c for c in listed.values() if not c.first and part_count(c.fact) > read[c.call_id]
        ]
        assert store.count_richer_dropped() == len(lacking) == len(richer)
        # Filtered, on the calls' columns: the store counts what fact files count.
        for only in (FactFilter(session_id=s) for s in ("s1", "s2")):
            picked = from_facts(captures, filters=only)
            got = (store.count_dropped(only), store.count_richer_dropped(only))
            assert got == (picked.dropped, picked.richer), only
    again: list[InferenceCall] = []
    resolve_facts([*captures, *captures], again)
    assert _encoded(again) == _encoded(richer)


def test_group_commits_report_each_batch_as_if_inserted_alone(
    new_store_url: Callable[[], str],
) -> None:
    facts = CAPTURES[:]
    random.Random(11).shuffle(facts)
    span, log = _span_and_log()
    batches = [facts[:6], [*facts[6:12], span, log], [*facts[12:], *facts[:3], log]]
    alone, grouped = new_store_url(), new_store_url()
    assert _insert(grouped, batches, grouped=True) == _insert(alone, batches, grouped=False)
    with open_store(alone) as a, open_store(grouped) as g:
        assert _encoded(a.iter_facts(SESSION)) == _encoded(g.iter_facts(SESSION))
        assert _encoded(a.iter_facts()) == _encoded(g.iter_facts())  # the same facts rows


def test_feedback_on_any_capture_of_a_call_joins_it(store_url: str) -> None:
    # proxy-pa (the proxy) is kept over s-proxy-a (the span); s-proxy-b over proxy-pb.
    kept, _, from_files = resolve_facts(CAPTURES)
    assert {"s-proxy-a": "proxy-pa", "proxy-pb": "s-proxy-b"}.items() <= from_files.items()
    assert resolve_facts([*CAPTURES, *CAPTURES])[2] == from_files  # redeliveries change nothing
    fb = [
        Feedback(feedback_id=f"fb-{t}", target_kind="call", target_id=t, name="score", value=v,
                 source="test")
        for t, v in (("s-proxy-a", 0.9), ("proxy-pb", 0.2), ("s-log-a", 0.5), ("gone", 1.0))
    ]  # fmt: skip
    with open_store(store_url) as store:
        store.insert_facts(list(reversed(CAPTURES)))
        asked = [f.target_id for f in fb] + [f.inference_call_id for f in CAPTURES]
        assert store.call_aliases(asked) == from_files
        assert store.call_aliases(["gone", "alone"]) == {}
        calls = {c.inference_call_id: c for c in store.iter_facts(SESSION)}
    index = FeedbackIndex(fb, from_files)
    assert index.for_call(calls["proxy-pa"])["score"].value == 0.9
    assert index.for_call(calls["s-proxy-b"])["score"].value == 0.2
    assert index.for_call(calls["s-log-a"])["score"].value == 0.5
    for call in kept:
        index.for_call(call)
    assert index.dropped() == {"unmatched": 1}  # only "gone"


def test_concurrent_writers_agree_on_the_kept_captures(new_store_url: Callable[[], str]) -> None:
    url = new_store_url()
    open_store(url).close()
    race_writers(url, CAPTURES, batch=3)
    with open_store(url) as store:
        assert _encoded(store.iter_facts(SESSION)) == _encoded(sort_facts(CAPTURES))
        assert _stored(url) == len(set(_encoded(CAPTURES)))


def test_a_version_2_store_opens_migrated_and_keeps_its_facts(store_url: str) -> None:
    span, log = _span_and_log()
    other = make_fact("other", session_id="conv-2", started_at=T0)
    with open_store(store_url) as store:
        assert store.insert_facts([span, other]).inserted == 2  # rows as version 2 wrote them
    raw_execute(
        store_url,
        *drop_summaries(store_url),
        "DROP TABLE fact_captures",
        "DROP TABLE fact_variants",
        "DROP TABLE blobs",
        "DELETE FROM schema_version WHERE version >= 3",
    )
    with open_store(store_url, migrations=MIGRATIONS[:2]) as old:
        assert old.schema_version() == 2
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST == 12
        assert store.count() == 2
        assert same(store.get_fact(span.inference_call_id), span)
        assert _encoded(store.iter_facts(SESSION)) == _encoded(sort_facts([span, other]))
        assert store.insert_facts([log]).variants == 1
        assert _encoded(store.iter_facts(SESSION)) == _encoded(sort_facts([span, log, other]))


@pytest.mark.parametrize("version", [3, 4])
def test_an_older_store_decides_its_calls_anew(store_url: str, version: int) -> None:
    """Version 3 ranked captures by time alone, version 4 linked every capture sharing an id;
    opened by this version, the capture index is built again from facts and variants (nothing
    stored changes), and reads give what the rule gives now: calls that only shared an id are
    two calls again."""
    with open_store(store_url) as store:
        store.insert_facts(CAPTURES)
    dialect = "postgres" if store_url.startswith("postgres") else "sqlite"
    index = [s for s in MIGRATIONS[version - 1].statements(dialect) if "fact_captures" in s]
    # The index as that version left it: its own layout, and decisions the new rule may undo.
    raw_execute(
        store_url,
        "DROP TABLE fact_captures",
        *[s for s in index if not s.startswith("DROP")],
        "DROP TABLE blobs",
        *drop_summaries(store_url),
        f"DELETE FROM schema_version WHERE version > {version}",
    )
    with open_store(store_url, migrations=MIGRATIONS[:version]) as old:
        assert old.schema_version() == version
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST
        assert _encoded(store.iter_facts(SESSION)) == _encoded(sort_facts(CAPTURES))
        assert store.count_dropped() == len(resolve_facts(CAPTURES)[1]) > 0
        assert store.stats().id_collisions == 2


def test_a_version_8_store_reads_its_calls_filled(store_url: str) -> None:
    """Version 8 ranked a capture without message parts by its session alone, and read a call
    as its first capture: opened by this version, the index is built again and each call is
    read with the metadata its other captures hold (the span's session, model and usage)."""
    span, log = _metadata_span_and_log()
    # As version 8 decided it: the span (it has the session) first, the log events dropped.
    span_id = span.inference_call_id
    with open_store(store_url) as store:
        store.insert_facts(CAPTURES)
    raw_execute(
        store_url,
        *drop_digests(store_url),
        "DROP TABLE call_fills",
        f"UPDATE fact_captures SET kept = 1 - kept WHERE inference_call_id = '{span_id}'",
        f"UPDATE fact_captures SET call = (SELECT digest FROM fact_captures AS c WHERE "
        f"c.inference_call_id = '{span_id}' AND c.kept = 1) WHERE inference_call_id = '{span_id}'",
        "DELETE FROM schema_version WHERE version > 8",
    )
    with open_store(store_url, migrations=MIGRATIONS[:8]) as old:
        assert old.schema_version() == 8
        assert same(old.get_fact(span.inference_call_id), span)  # the content-less span
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST
        assert _encoded(store.iter_facts(SESSION)) == _encoded(sort_facts(CAPTURES))
        read = store.get_fact(span.inference_call_id)
        assert read is not None and read.raw == log.raw
        assert (read.session_id, read.model, read.input_tokens, read.model_call_id) == (
            "conv-2",
            "gpt-5",
            40,
            "chatcmpl-2",
        )
        assert read.input_messages == log.input_messages and read.degradations == {}
        assert read.output_messages == [Message("assistant", [TextPart("Let me")], "length")]


def test_a_version_9_store_reads_its_calls_with_the_finish_reasons_filled(store_url: str) -> None:
    """Version 9 filled a call's metadata, not the finish reason its log events left null:
    opened by this version, the fills are made again and the cut answer reads as cut."""
    span, log = _metadata_span_and_log()
    with open_store(store_url) as store:
        store.insert_facts(CAPTURES)
    # A fill as version 9 left none for this call: dropped, and version 10 forgotten.
    raw_execute(
        store_url,
        *drop_digests(store_url),
        "DELETE FROM call_fills",
        "DELETE FROM schema_version WHERE version > 9",
    )
    with open_store(store_url, migrations=MIGRATIONS[:9]) as old:
        assert old.schema_version() == 9
        read = old.get_fact(span.inference_call_id)
        assert read is not None and read.output_messages == log.output_messages
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST == 12
        assert _encoded(store.iter_facts(SESSION)) == _encoded(sort_facts(CAPTURES))
        read = store.get_fact(span.inference_call_id)
        assert read is not None and read.output_messages[0].finish_reason == "length"
        assert read.session_id == "conv-2"


def test_a_new_call_sharing_an_id_with_a_variant_joins_its_call(store_url: str) -> None:
    # The proxy's capture is stored first; the span's capture of the same response collides
    # by response id and is a variant; then the span's log event comes, whose identity (the
    # span's) no facts row has: it is stored as a call, and must still join the contested one.
    proxy = make_fact("px", session_id="conv-9", started_at=T1, model_call_id="resp-9")
    span = msgspec.structs.replace(proxy, inference_call_id="sp", started_at=T0, raw={"s": 9})
    log = msgspec.structs.replace(
        span, session_id=None, model_call_id=None, started_at=None, observed_at=T1, raw={"l": 9}
    )
    with open_store(store_url) as store:
        store.insert_facts([proxy])
        assert store.insert_facts([span]).variants == 1
        assert store.insert_facts([log]).variants == 1  # a capture of the stored call
        assert _encoded(store.iter_facts(SESSION)) == _encoded(sort_facts([proxy, span, log]))
        assert [f.raw for f in store.iter_facts(SESSION)] == [span.raw]  # one call, not two
    assert raw_execute(store_url, "SELECT COUNT(*) FROM fact_captures") == [(3,)]


def test_large_batches_of_variants(store_url: str) -> None:
    calls = [make_fact(f"big{i}", session_id=f"s{i % 7}", started_at=T1) for i in range(1200)]
    logs = [msgspec.structs.replace(c, session_id=None, started_at=T0) for c in calls]
    proxies = [
        make_fact(f"px{i}", session_id=f"s{i % 7}", started_at=T0, model_call_id=f"r{i}")
        for i in range(1200)
    ]
    spans = [msgspec.structs.replace(p, inference_call_id=f"sp{i}") for i, p in enumerate(proxies)]
    with open_store(store_url) as store:
        assert store.insert_facts(calls + proxies).inserted == 2400
        result = store.insert_facts(logs + spans + calls)
        assert (result.inserted, result.variants, result.duplicates) == (0, 2400, 1200)
        want = sort_facts(calls + logs + proxies + spans)
        assert _encoded(store.iter_facts(SESSION, batch_size=100)) == _encoded(want)
        assert store.count() == 2400
