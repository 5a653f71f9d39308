"""`lithify import`, `facts` and `stats` against real stores (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from lithify.cli import app
from lithify.derive.sessions import sort_facts
from lithify.ingest.convert import JsonlSink, run
from lithify.model import decode_fact
from tests.conftest import CORPUS

runner = CliRunner()
EXAMPLES = Path(__file__).parents[1] / "src" / "lithify" / "examples"
ANTHROPIC = CORPUS / "anthropic"


def _import(store_url: str, *paths: Path) -> dict[str, object]:
    res = runner.invoke(app, ["import", *map(str, paths), "--store", store_url, "--json"])
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def test_import_is_idempotent_and_equals_convert(store_url: str, tmp_path: Path) -> None:
    first = _import(store_url, EXAMPLES, ANTHROPIC)
    assert first["stored"] > 0
    # The examples hold calls captured twice (span and log event, two instrumentations): the
    # second capture of each differs, and is kept apart as a variant.
    assert first["variants"] > 0
    assert first["stored"] + first["duplicates"] + first["variants"] == first["facts"]
    again = _import(store_url, EXAMPLES, ANTHROPIC)
    assert again["stored"] == again["variants"] == 0 and again["duplicates"] == first["facts"]

    # What the store holds is exactly what convert gives, once per identity.
    out = tmp_path / "facts.jsonl"
    with out.open("wb") as fh:
        run([EXAMPLES, ANTHROPIC], JsonlSink(fh))
    # A call captured twice (as a span and as log events, which the examples hold) is one
    # call; two runs that share response ids but not content are two: the identity rule over
    # the file gives the calls the store reads.
    converted = {
        f.inference_call_id: f for f in sort_facts(map(decode_fact, out.read_bytes().splitlines()))
    }
    res = runner.invoke(app, ["facts", "--store", store_url, "--json", "--limit", "0"])
    assert res.exit_code == 0, res.output
    stored = [decode_fact(line) for line in res.stdout.encode().splitlines()]
    assert {f.inference_call_id: f for f in stored} == converted
    assert len(stored) == first["stored"]


def test_facts_filters_and_show_one(sqlite_store_url: str) -> None:
    _import(sqlite_store_url, ANTHROPIC, EXAMPLES)
    res = runner.invoke(
        app,
        ["facts", "--store", sqlite_store_url, "--json", "--source", "anthropic", "--limit", "0"],
    )
    facts = [decode_fact(line) for line in res.stdout.encode().splitlines()]
    assert facts and all(f.source.name == "anthropic" for f in facts)
    one = facts[0].inference_call_id
    shown = runner.invoke(app, ["facts", one, "--store", sqlite_store_url, "--json"])
    assert decode_fact(shown.stdout.encode().strip()) == facts[0]
    missing = runner.invoke(app, ["facts", "0" * 32, "--store", sqlite_store_url])
    assert missing.exit_code == 5
    table = runner.invoke(app, ["facts", "--store", sqlite_store_url, "--limit", "2"])
    assert table.exit_code == 0 and "2 of" in table.stderr


def test_stats_counts(sqlite_store_url: str) -> None:
    imported = _import(sqlite_store_url, ANTHROPIC)
    res = runner.invoke(app, ["stats", "--store", sqlite_store_url, "--json"])
    assert res.exit_code == 0, res.output
    stats = orjson.loads(res.stdout)
    assert stats["facts"] == imported["stored"]
    assert {g["key"]: g["facts"] for g in stats["by_source"]} == {"anthropic": imported["stored"]}
    assert any(d["reason"] == "opaque_reasoning" for d in stats["degradations"])
    human = runner.invoke(app, ["stats", "--store", sqlite_store_url])
    assert human.exit_code == 0 and "by model" in human.stdout


def test_stats_tell_of_calls_captured_twice(sqlite_store_url: str) -> None:
    from lithify.store import open_store
    from tests.export.helpers import captured_twice

    with open_store(sqlite_store_url) as store:
        store.insert_facts(captured_twice())
        expected = (store.stats().variants, store.count_dropped())
    stats = orjson.loads(runner.invoke(app, ["stats", "-s", sqlite_store_url, "--json"]).stdout)
    assert (stats["variants"], stats["dropped_captures"]) == expected and min(expected) > 0
    human = runner.invoke(app, ["stats", "--store", sqlite_store_url]).stdout
    assert f"{expected[1]} other captures of calls kept apart" in human


def test_facts_captures_lists_a_calls_captures(sqlite_store_url: str) -> None:
    from lithify.store import FactFilter, open_store
    from tests.export.helpers import captured_twice

    made = captured_twice()
    with open_store(sqlite_store_url) as store:
        store.insert_facts(made)
        derived = {f.inference_call_id for f in store.iter_facts(FactFilter(order="session"))}
    span = next(f for f in made if f.inference_call_id == "s-proxy-a")  # the proxy's is kept
    res = runner.invoke(app, ["facts", span.inference_call_id, "--captures", "--json",
                              "-s", sqlite_store_url])  # fmt: skip
    assert res.exit_code == 0, res.output
    lines = [orjson.loads(line) for line in res.stdout.splitlines()]
    listed = {(d["fact"]["inference_call_id"], d["kept"]) for d in lines}
    assert listed == {("proxy-pa", True), ("s-proxy-a", False)}
    assert {i for i, kept in listed if kept} <= derived
    table = runner.invoke(app, ["facts", "proxy-pa", "--captures", "-s", sqlite_store_url])
    assert table.exit_code == 0 and "proxy" in table.stdout and "yes" in table.stdout
    missing = runner.invoke(app, ["facts", "nope", "--captures", "-s", sqlite_store_url])
    assert missing.exit_code == 5


def test_feedback_documents_are_imported(sqlite_store_url: str, tmp_path: Path) -> None:
    fb = tmp_path / "feedback.jsonl"
    fb.write_bytes(
        orjson.dumps({"session_id": "s-1", "name": "thumbs", "value": True}) + b"\n"
        + orjson.dumps({"target": {"kind": "call", "id": "abc"}, "name": "score", "value": 0.9}) + b"\n"
    )  # fmt: skip
    first = _import(sqlite_store_url, fb)
    assert first["feedback_stored"] == 2 and first["feedback"] == 2
    assert _import(sqlite_store_url, fb)["feedback_duplicates"] == 2


def test_unreachable_store_is_a_clear_error() -> None:
    res = runner.invoke(app, ["stats", "--store", "postgresql://nobody@127.0.0.1:1/none"])
    assert res.exit_code == 4
    assert "store error" in res.stderr


def test_store_from_environment(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'env.db'}"
    res = runner.invoke(app, ["import", str(ANTHROPIC), "--json"], env={"LITHIFY_STORE": url})
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout)["store"] == url
