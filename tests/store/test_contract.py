"""The FactStore contract: every test runs on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import itertools
import random
import threading
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.core.codec import encode
from lithify.derive.sessions import sort_facts
from lithify.ingest.files import read_file
from lithify.model import (
    Feedback,
    InferenceCall,
    Message,
    Source,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
)
from lithify.store import (
    FactFilter,
    FeedbackFilter,
    SchemaTooNew,
    StoreError,
    open_store,
)
from lithify.store.migrations import LATEST, MIGRATIONS, Migration
from tests.conftest import CORPUS
from tests.store.helpers import EDGE_VALUES, TEXT, VALUES, make_fact, raw_execute, same

# -- schema and migrations ---------------------------------------------------------------------


def test_open_creates_the_schema_on_an_empty_database(store_url: str) -> None:
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST
        assert store.count() == 0
        assert list(store.iter_facts()) == []
        stats = store.stats()
        assert (stats.facts, stats.sessions, stats.feedback, stats.by_model) == (0, 0, 0, [])
    versions = raw_execute(store_url, "SELECT version FROM schema_version ORDER BY version")
    assert [v for (v,) in versions] == [m.version for m in MIGRATIONS]


def test_reopening_an_up_to_date_database_changes_nothing(store_url: str) -> None:
    with open_store(store_url) as store:
        store.insert_facts([make_fact("a")])
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST
        assert store.count() == 1
    assert raw_execute(store_url, "SELECT COUNT(*) FROM schema_version")[0][0] == len(MIGRATIONS)


def test_a_database_newer_than_the_code_is_refused(store_url: str) -> None:
    open_store(store_url).close()
    raw_execute(
        store_url,
        "INSERT INTO schema_version (version, description, applied_at) "
        f"VALUES ({LATEST + 1}, 'from the future', 'x')",
    )
    with pytest.raises(SchemaTooNew, match=rf"schema version {LATEST + 1}.*up to {LATEST}"):
        open_store(store_url)


def test_forward_migrations_apply_in_order_and_keep_the_data(store_url: str) -> None:
    with open_store(store_url) as store:
        store.insert_facts([make_fact("kept")])
    v2 = Migration(
        LATEST + 1,
        "notes",
        ("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",),
        ("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",),
    )
    v3 = Migration(
        LATEST + 2,
        "a note",
        ("INSERT INTO notes (id, body) VALUES (1, 'v3 ran after v2')",),
        ("INSERT INTO notes (id, body) VALUES (1, 'v3 ran after v2')",),
    )
    with open_store(store_url, migrations=(*MIGRATIONS, v2, v3)) as store:
        assert store.schema_version() == LATEST + 2
        assert store.count() == 1
    assert raw_execute(store_url, "SELECT body FROM notes") == [("v3 ran after v2",)]
    # The older code now refuses the newer database rather than misreading it.
    with pytest.raises(SchemaTooNew):
        open_store(store_url)


def test_a_failing_migration_leaves_the_database_as_it_was(store_url: str) -> None:
    open_store(store_url).close()
    broken = Migration(
        LATEST + 1,
        "half done",
        ("CREATE TABLE half (id INTEGER)", "INSERT INTO no_such_table VALUES (1)"),
        ("CREATE TABLE half (id INTEGER)", "INSERT INTO no_such_table VALUES (1)"),
    )
    with pytest.raises(Exception, match="no_such_table"):
        open_store(store_url, migrations=(*MIGRATIONS, broken))
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST
    with pytest.raises(Exception, match="half"):
        raw_execute(store_url, "SELECT * FROM half")


# -- deduplication and immutability -----------------------------------------------------------


def test_the_same_fact_twice_is_stored_once(store_url: str) -> None:
    a, b = make_fact("a"), make_fact("b")
    with open_store(store_url) as store:
        first = store.insert_facts([a, b])
        assert (first.inserted, first.duplicates, first.duplicate_ids) == (2, 0, [])
        again = store.insert_facts([b, a])
        assert (again.inserted, again.duplicates) == (0, 2)
        assert again.duplicate_ids == [b.inference_call_id, a.inference_call_id]
        assert store.count() == 2


def test_a_colliding_fact_never_changes_the_stored_one(store_url: str) -> None:
    original = make_fact("x", model="gpt-4o", raw={"v": 1})
    # Less content (no output), so the stored capture stays the one read.
    impostor = msgspec.structs.replace(original, model="other", raw={"v": 2}, output_messages=[])
    with open_store(store_url) as store:
        store.insert_facts([original])
        result = store.insert_facts([impostor])
        # Another capture of the call: kept apart as a variant, the stored fact untouched.
        assert (result.inserted, result.duplicates) == (0, 0)
        assert result.variant_ids == [original.inference_call_id]
        stored = store.get_fact(original.inference_call_id)
        assert stored is not None and same(stored, original)
        # The query columns did not move either, and both captures are kept as they came.
        assert store.count(FactFilter(model="other")) == 0
        listed = store.captures(original.inference_call_id)
        assert [(same(c.fact, original), c.first) for c in listed] == [(True, True), (False, False)]
        assert same(listed[1].fact, impostor)


def test_model_call_id_deduplicates_two_captures_of_one_call(store_url: str) -> None:
    telemetry = make_fact("span", model_call_id="chatcmpl-1", provider="openai")
    proxy = msgspec.structs.replace(  # the same call as the proxy recorded it
        telemetry, inference_call_id="proxy", source=Source("openai_chat"), raw={"proxy": 1}
    )
    assert telemetry.inference_call_id != proxy.inference_call_id
    unrelated = [make_fact(f"n{i}") for i in range(3)]  # no model_call_id: never collide
    with open_store(store_url) as store:
        assert store.insert_facts([telemetry, *unrelated]).inserted == 4
        result = store.insert_facts([proxy])
        assert (result.inserted, result.variant_ids) == (0, [proxy.inference_call_id])
        again = store.insert_facts([proxy, telemetry])  # redeliveries of both captures
        assert (again.inserted, again.variants, again.duplicates) == (0, 0, 2)
        assert [
            f.inference_call_id for f in store.iter_facts(FactFilter(source="openai_chat"))
        ] == []
        assert store.count() == 4


def test_duplicates_inside_one_batch(store_url: str) -> None:
    a = make_fact("a", raw={"copy": 1})
    a2 = msgspec.structs.replace(a, raw={"copy": 2})
    b = make_fact("b", model_call_id="resp-9")
    b2 = msgspec.structs.replace(b, inference_call_id="b2", raw={"b2": 1})
    with open_store(store_url) as store:
        result = store.insert_facts([a, b, a2, b2, a, a2])
        assert (result.inserted, result.variants, result.duplicates) == (2, 2, 2)
        assert result.variant_ids == [a.inference_call_id, b2.inference_call_id]
        assert result.duplicate_ids == [a.inference_call_id] * 2
        # a and a2 agree: one call, read from the capture the rule ranks first, however stored.
        stored = store.get_fact(a.inference_call_id)
        assert stored is not None and same(stored, sort_facts([a2, a])[0])


def test_a_batch_is_one_transaction(store_url: str) -> None:
    if store_url.startswith("postgres"):
        poison = (
            "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.inference_call_id = 'zzzz-poison' THEN RAISE EXCEPTION 'poisoned row'; "
            "END IF; RETURN NEW; END $$",
            "CREATE TRIGGER poison BEFORE INSERT ON facts FOR EACH ROW EXECUTE FUNCTION poison()",
        )
    else:
        poison = (
            "CREATE TRIGGER poison BEFORE INSERT ON facts "
            "WHEN NEW.inference_call_id = 'zzzz-poison' "
            "BEGIN SELECT RAISE(ABORT, 'poisoned row'); END",
        )
    open_store(store_url).close()
    raw_execute(store_url, *poison)
    # Over a thousand rows: several statements on SQLite, the poisoned one sorts last.
    batch = [make_fact(f"f{i}") for i in range(1200)]
    bad = msgspec.structs.replace(batch[0], inference_call_id="zzzz-poison")
    with open_store(store_url) as store:
        with pytest.raises(Exception, match="poisoned row"):
            store.insert_facts([*batch, bad])
        assert store.count() == 0
        # The store stays usable and the same facts go in without the poisoned one.
        assert store.insert_facts(batch).inserted == 1200


def test_invalid_facts_are_refused_before_anything_is_written(store_url: str) -> None:
    with open_store(store_url) as store:
        with pytest.raises(ValueError, match="inference_call_id"):
            store.insert_facts(
                [make_fact("ok"), InferenceCall(inference_call_id="", source=Source("x"))]
            )
        with pytest.raises(TypeError):
            store.insert_facts([{"inference_call_id": "dict"}])  # type: ignore[list-item]
        assert store.count() == 0
        assert store.insert_facts([]).inserted == 0


def test_concurrent_writers_store_each_fact_once(store_url: str) -> None:
    facts = [make_fact(f"c{i}", model_call_id=f"resp-{i}") for i in range(400)]
    open_store(store_url).close()
    results = []
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        try:
            mine = facts[:]
            random.Random(seed).shuffle(mine)
            with open_store(store_url) as store:
                for i in range(0, len(mine), 50):
                    results.append(store.insert_facts(mine[i : i + 50]))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(r.inserted for r in results) == 400
    assert sum(r.duplicates for r in results) == 800
    with open_store(store_url) as store:
        assert store.count() == 400


# -- losslessness -------------------------------------------------------------------------------


def test_edge_values_survive_a_round_trip(store_url: str) -> None:
    fact = InferenceCall(
        inference_call_id="edge\x00\ud800",
        session_id="sess\x00ion",
        model_call_id="resp\udc00",
        source=Source("otlp"),
        model="m\x00",
        input_messages=[Message("user", [TextPart("nul \x00 and \ud800 in content")])],
        output_messages=[
            Message("assistant", [ToolCallPart("c\x00", "f", {"n": 2**70, "x": float("nan")})])
        ],
        request={"temperature": float("inf"), "seed": 2**80},
        duration_ms=float("nan"),
        raw=EDGE_VALUES,
    )
    with open_store(store_url) as store:
        assert store.insert_facts([fact]).inserted == 1
        got = store.get_fact("edge\x00\ud800")
        assert got is not None and same(got, fact)
        (streamed,) = store.iter_facts(FactFilter(session_id="sess\x00ion"))
        assert same(streamed, fact)
        assert store.count(FactFilter(model="m\x00")) == 1
        # Identity columns keep their meaning on escaped values.
        twin = msgspec.structs.replace(fact, inference_call_id="other")
        assert store.insert_facts([twin]).variant_ids == ["other"]  # same model_call_id
        assert store.insert_facts([twin]).duplicate_ids == ["other"]
        assert store.insert_facts([msgspec.structs.replace(twin, model_call_id=None)]).inserted == 1
    with open_store(store_url) as store:  # and after reopening
        got = store.get_fact("edge\x00\ud800")
        assert got is not None and same(got, fact)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(raw=VALUES, args=st.dictionaries(TEXT, VALUES, max_size=3), result=VALUES)
def test_arbitrary_values_survive_a_round_trip(store_url: str, raw, args, result) -> None:  # type: ignore[no-untyped-def]
    key = f"h{uuid.uuid4().hex}"  # not random: hypothesis seeds it the same for each example
    fact = InferenceCall(
        inference_call_id=key,
        source=Source("prop"),
        input_messages=[Message("tool", [ToolCallResponsePart("t", result)])],
        output_messages=[Message("assistant", [ToolCallPart("t", "f", args)])],
        raw=raw,
    )
    with open_store(store_url) as store:
        store.insert_facts([fact])
        got = store.get_fact(key)
    assert got is not None and same(got, fact)


def test_real_corpus_facts_round_trip_and_deduplicate(store_url: str) -> None:
    facts: list[InferenceCall] = []
    for path in sorted(CORPUS.rglob("*")):
        if path.is_file() and path.name != "SOURCES.md" and path.parent.name != "nemo-gym":
            facts.extend(r.result for r in read_file(path) if isinstance(r.result, InferenceCall))
    assert len(facts) > 20
    expected: dict[str, InferenceCall] = {}
    seen_model_calls: set[str] = set()
    for f in facts:
        if f.inference_call_id in expected or f.model_call_id in seen_model_calls:
            continue
        expected[f.inference_call_id] = f
        if f.model_call_id is not None:
            seen_model_calls.add(f.model_call_id)
    assert len(expected) < len(facts)  # the corpus holds one call captured by two instrumentations
    with open_store(store_url) as store:
        for f in facts:  # one batch per fact: the first capture wins, as in expected
            store.insert_facts([f])
        assert store.count() == len(expected)
        for f in store.iter_facts():
            assert same(f, expected[f.inference_call_id])


# -- reading: order, filters, streaming --------------------------------------------------------


def _timed_facts() -> list[InferenceCall]:
    base = datetime(2025, 3, 1, tzinfo=UTC)
    out = []
    for i in range(30):
        t = (base + timedelta(minutes=i % 10)).strftime("%Y-%m-%dT%H:%M:%S.000000000Z")
        kind = i % 3
        out.append(
            make_fact(
                f"t{i}",
                started_at=t if kind == 0 else None,
                observed_at=t if kind != 2 else None,
                session_id=f"s{i % 4}" if i % 5 else None,
                model=["gpt-4o", "claude", None][i % 3],
                provider=["openai", "anthropic"][i % 2],
                trace_id=f"trace{i % 2}",
                input_tokens=i,
                output_tokens=2 * i,
                degradations={"synthesized_id": 1} if i % 4 == 0 else {},
            )
        )
    return out


def _sort_key(f: InferenceCall) -> tuple[str, str]:
    return (f.started_at or f.observed_at or "", f.inference_call_id)


def test_facts_come_back_in_session_order_whatever_the_insert_order(store_url: str) -> None:
    facts = _timed_facts()
    shuffled = facts[:]
    random.Random(7).shuffle(shuffled)
    with open_store(store_url) as store:
        for i in range(0, 30, 7):
            store.insert_facts(shuffled[i : i + 7])
        got = [f.inference_call_id for f in store.iter_facts(batch_size=4)]
    assert got == [f.inference_call_id for f in sorted(facts, key=_sort_key)]
    # Facts without any timestamp come first (sort key '') on both backends.
    assert all(
        f.started_at is None and f.observed_at is None for f in sorted(facts, key=_sort_key)[:10]
    )


def test_filters(store_url: str) -> None:
    facts = _timed_facts()

    def expect(pred) -> list[str]:  # type: ignore[no-untyped-def]
        return [f.inference_call_id for f in sorted(facts, key=_sort_key) if pred(f)]

    cases = [
        (FactFilter(session_id="s1"), lambda f: f.session_id == "s1"),
        (FactFilter(session_id=["s1", "s2"]), lambda f: f.session_id in ("s1", "s2")),
        (FactFilter(model="gpt-4o"), lambda f: f.model == "gpt-4o"),
        (FactFilter(provider="anthropic"), lambda f: f.provider == "anthropic"),
        (FactFilter(source="otlp"), lambda f: True),
        (FactFilter(source="nope"), lambda f: False),
        (FactFilter(model=[]), lambda f: False),
        (
            FactFilter(trace_id="trace0", model="claude"),
            lambda f: f.trace_id == "trace0" and f.model == "claude",
        ),
        (
            FactFilter(since="2025-03-01T00:03", until="2025-03-01T00:06"),
            lambda f: "2025-03-01T00:03" <= _sort_key(f)[0] < "2025-03-01T00:06",
        ),
        (
            FactFilter(since=datetime(2025, 3, 1, 1, 5, tzinfo=timezone(timedelta(hours=1)))),
            lambda f: _sort_key(f)[0] >= "2025-03-01T00:05",
        ),
        (
            FactFilter(until=datetime(2025, 3, 1, 0, 1)),
            lambda f: _sort_key(f)[0] < "2025-03-01T00:01",
        ),
    ]
    with open_store(store_url) as store:
        store.insert_facts(facts)
        for flt, pred in cases:
            want = expect(pred)
            assert [f.inference_call_id for f in store.iter_facts(flt)] == want, flt
            assert store.count(flt) == len(want), flt
        limited = [
            f.inference_call_id for f in store.iter_facts(FactFilter(model="gpt-4o", limit=3))
        ]
        assert limited == expect(lambda f: f.model == "gpt-4o")[:3]


def test_streams_can_stop_early_and_run_beside_writes(store_url: str) -> None:
    facts = [
        make_fact(f"s{i}", started_at=f"2025-01-01T00:00:{i % 60:02d}.000000000Z")
        for i in range(300)
    ]
    with open_store(store_url) as store:
        store.insert_facts(facts)
        stream = store.iter_facts(batch_size=16)
        head = list(itertools.islice(stream, 20))
        # Writing while a stream is open neither blocks nor shows up in the running stream.
        store.insert_facts([make_fact("late", started_at="2030-01-01T00:00:00.000000000Z")])
        rest = list(stream)
        assert len(head) + len(rest) in (300, 301)
        for _ in range(5):  # abandoned streams release their connection
            next(store.iter_facts(batch_size=8))
        assert store.count() == 301
        assert store.get_fact("missing") is None
        got = store.get_fact(facts[5].inference_call_id)
        assert got is not None and same(got, facts[5])


def test_stats(store_url: str) -> None:
    facts = _timed_facts()
    with open_store(store_url) as store:
        store.insert_facts(facts)
        store.insert_feedback([_feedback("fb1", 0.5)])
        s = store.stats(session_limit=2)
        sf = store.stats(FactFilter(model="claude"))
    assert s.facts == 30 and s.feedback == 1
    assert s.input_tokens == sum(range(30)) and s.output_tokens == 2 * sum(range(30))
    assert s.sessions == 4
    by_model = {g.key: (g.facts, g.input_tokens, g.output_tokens) for g in s.by_model}
    for model in ("gpt-4o", "claude", None):
        mine = [f for f in facts if f.model == model]
        assert by_model[model] == (
            len(mine),
            sum(f.input_tokens or 0 for f in mine),
            sum(f.output_tokens or 0 for f in mine),
        )
    assert {g.key: g.facts for g in s.by_provider} == {"openai": 15, "anthropic": 15}
    assert [(g.key, g.facts) for g in s.by_source] == [("otlp", 30)]
    sessions = sorted(
        {f.session_id for f in facts if f.session_id},
        key=lambda k: (-sum(f.session_id == k for f in facts), k),
    )
    assert [g.key for g in s.by_session] == sessions[:2]
    (deg,) = s.degradations
    assert (deg.reason, deg.facts, deg.count) == ("synthesized_id", 8, 8)
    assert sf.facts == 10 and [g.key for g in sf.by_model] == ["claude"]
    assert sf.input_tokens == sum(i for i in range(30) if i % 3 == 1)


# -- feedback -----------------------------------------------------------------------------------


def _feedback(key: str, value, **kw) -> Feedback:  # type: ignore[no-untyped-def]
    kw.setdefault("target_kind", "call")
    kw.setdefault("target_id", "call-1")
    kw.setdefault("name", "score")
    kw.setdefault("source", "http")
    return Feedback(feedback_id=key, value=value, **kw)


def test_feedback_is_deduplicated_immutable_and_filterable(store_url: str) -> None:
    items = [
        _feedback("f1", 0.9, observed_at="2025-01-01T00:00:02.000000000Z"),
        _feedback("f2", True, name="thumbs", observed_at="2025-01-01T00:00:01.000000000Z"),
        _feedback("f3", "good", target_kind="session", target_id="s1", raw={"x": "\ud800"}),
        _feedback("f4", 2**70, target_kind="trace", target_id="t1", source="otel"),
        _feedback("f5", float("nan"), source="file"),
    ]
    with open_store(store_url) as store:
        assert store.insert_feedback(items).inserted == 5
        again = store.insert_feedback([_feedback("f1", 0.1), _feedback("f6", 1)])
        assert (again.inserted, again.duplicate_ids) == (1, ["f1"])
        got = list(store.iter_feedback())
        assert [f.feedback_id for f in got] == ["f3", "f4", "f5", "f6", "f2", "f1"]
        by_id = {f.feedback_id: f for f in got}
        for f in items:
            assert same(by_id[f.feedback_id], f)
        assert by_id["f1"].value == 0.9  # not replaced by the colliding 0.1
        assert type(by_id["f6"].value) is int and type(by_id["f2"].value) is bool
        calls = store.iter_feedback(FeedbackFilter(target_kind="call", target_id="call-1"))
        assert [f.feedback_id for f in calls] == ["f5", "f6", "f2", "f1"]
        assert [
            f.feedback_id for f in store.iter_feedback(FeedbackFilter(source=["otel", "file"]))
        ] == ["f4", "f5"]
        assert store.count_feedback(FeedbackFilter(name="thumbs")) == 1
        assert store.count_feedback(FeedbackFilter(since="2025-01-01T00:00:02")) == 1
        with pytest.raises(ValueError, match="target_kind"):
            store.insert_feedback([_feedback("bad", 1, target_kind="span")])
        with pytest.raises(ValueError, match="value"):
            store.insert_feedback([_feedback("bad", [1])])
        assert store.count_feedback() == 6


def test_a_closed_store_says_so(store_url: str) -> None:
    store = open_store(store_url)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.count()


def test_sqlite_url_in_a_new_folder(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'a' / 'b' / 'facts.db'}"
    with open_store(url) as store:
        store.insert_facts([make_fact("x")])
    assert (tmp_path / "a" / "b" / "facts.db").stat().st_mode & 0o777 == 0o600


def test_the_stores_preparer_goes_to_a_worker_and_its_rows_read_back(store_url: str) -> None:
    """``preparer()`` builds rows with bodies as the store keeps them (SQLite: compressed), in
    another process, and ``insert_prepared`` stores them as ``insert_facts`` would."""
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    facts = [make_fact(f"w{i}", raw={"text": "x " * 2000, "i": i}) for i in range(3)]
    with open_store(store_url) as store:
        preparer = pickle.loads(pickle.dumps(store.preparer()))
        with ProcessPoolExecutor(1) as pool:
            rows = pool.submit(preparer, facts).result()
        if store_url.startswith("sqlite"):
            assert all(r[-1][:1] == b"\x10" for r in rows.facts)  # LZ4-packed in the worker
        [(result, _)] = store.insert_prepared([rows])
        assert result.inserted == 3
        assert [encode(f) for f in store.iter_facts()] == [
            encode(f) for f in sorted(facts, key=lambda f: f.inference_call_id)
        ]
