"""`lithify convert` on one machine, `lithify import` of its fact file on another: the same store
as importing the sources there, on SQLite and PostgreSQL; idempotent; the import summary."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

from lithify.cli import app
from lithify.core.factfile import encode_line
from lithify.model import Feedback, InferenceCall, Source, encode
from lithify.store import FactFilter, open_store
from tests.conftest import CORPUS
from tests.store.helpers import same

runner = CliRunner()
EXAMPLES = Path(__file__).parents[1] / "src" / "lithify" / "examples"
SOURCES = [EXAMPLES, CORPUS]  # spans and log events of the same calls, every provider


def _cli(*args: str, code: int = 0) -> Any:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == code, res.output
    return orjson.loads(res.stdout) if code == 0 else res


def _contents(url: str) -> dict[str, Any]:
    with open_store(url) as s:
        return {
            "calls": [encode(f) for f in s.iter_facts()],
            "session_order": [encode(f) for f in s.iter_facts(FactFilter(order="session"))],
            "feedback": [encode(f) for f in s.iter_feedback()],
            "stats": encode(s.stats()),
        }


def test_convert_here_import_there_is_the_same_store(
    new_store_url: Callable[[], str], tmp_path: Path
) -> None:
    facts = tmp_path / "facts.jsonl.gz"
    converted = _cli("convert", *map(str, SOURCES), "-o", str(facts))
    direct, via_file = new_store_url(), new_store_url()
    first = _cli("import", *map(str, SOURCES), "--store", direct)
    got = _cli("import", str(facts), "--store", via_file)
    assert got["facts"] == got["units"] == converted["facts"] == first["facts"] > 40
    assert got["skipped"] == {} and got["corrupt"] == [] and got["no_fact_inputs"] == {}
    for key in ("stored", "duplicates", "variants", "collisions", "degradations"):
        assert got[key] == first[key], key
    assert got["variants"] > 0
    assert _contents(via_file) == _contents(direct)

    # Idempotent, whichever way the facts came in first.
    for url in (via_file, direct):
        again = _cli("import", str(facts), "--store", url)
        assert (again["stored"], again["variants"], again["collisions"]) == (0, 0, 0)
        assert again["duplicates"] == got["facts"]
    assert _contents(via_file) == _contents(direct)


def test_values_json_cannot_carry_reach_the_store_exactly(store_url: str, tmp_path: Path) -> None:
    odd = [
        InferenceCall(inference_call_id="nan", source=Source("t"), raw={"t": math.nan}),
        InferenceCall(inference_call_id="sur\ud800", source=Source("t"), duration_ms=-math.inf),
        InferenceCall(inference_call_id="big", source=Source("t"), input_tokens=2**70),
    ]
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"".join(map(encode_line, odd)))
    assert _cli("import", str(path), "--store", store_url)["stored"] == 3
    with open_store(store_url) as s:
        for fact in odd:
            assert same(s.get_fact(fact.inference_call_id), fact)


def test_feedback_lines_are_stored_once(store_url: str, tmp_path: Path) -> None:
    fb = [
        Feedback(feedback_id=f"f{i}", target_kind="call", target_id="c1", name="score",
                 value=i / 4, source="ui")
        for i in range(3)
    ]  # fmt: skip
    path = tmp_path / "fb.jsonl"
    path.write_bytes(b"".join(map(encode_line, fb)))
    first = _cli("import", str(path), "--store", store_url)
    assert (first["feedback"], first["feedback_stored"], first["feedback_duplicates"]) == (3, 3, 0)
    again = _cli("import", str(path), "--store", store_url)
    assert (again["feedback_stored"], again["feedback_duplicates"]) == (0, 3)
    with open_store(store_url) as s:
        assert all(same(a, b) for a, b in zip(s.iter_feedback(), fb, strict=True))


def test_the_summary_and_exit_codes_are_those_of_any_import(
    sqlite_store_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "facts.jsonl"
    _cli("convert", str(EXAMPLES), "-o", str(path))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(
        b"".join([*lines[:2], b'{"inference_call_id":"x","source":{"na\n', *lines[2:]])
    )
    res = runner.invoke(app, ["import", str(path), "--store", sqlite_store_url])
    assert res.exit_code == 0, res.output
    assert f"corrupt {path}:3: line 3: not JSON" in res.stderr
    first = _cli("import", str(path), "--store", f"sqlite://{tmp_path / 'b.db'}")
    assert "stored" in res.stderr and "already stored" in res.stderr
    assert ("sharing an id with another call" in res.stderr) == (first["collisions"] > 0)
    report = _cli("import", str(path), "--store", sqlite_store_url)
    assert report["skipped"] == {"undecodable": 1} and report["duplicates"] == len(lines)
    assert report["collisions"] == 0
    strict = _cli("import", str(path), "--strict", "--store", sqlite_store_url, code=3)
    assert f"{path}:3" in strict.output
    missing = _cli("import", str(tmp_path / "nope.jsonl"), "--store", sqlite_store_url, code=1)
    assert "nope.jsonl: no such file" in missing.stdout


def test_export_reads_gzipped_fact_files_as_import_does(tmp_path: Path) -> None:
    plain, packed = tmp_path / "facts.jsonl", tmp_path / "facts.jsonl.gz"
    for path in (plain, packed):
        _cli("convert", str(EXAMPLES), "-o", str(path))
    outs = []
    for path in (plain, packed):
        out = tmp_path / f"rows-{path.suffix}"
        summary = _cli("export", "sft", "--facts", str(path), "-o", str(out))
        assert summary["rows"]["train"] > 0
        outs.append((out / "train.jsonl").read_bytes())
    assert outs[0] == outs[1]


def test_facts_json_is_a_fact_file_import_reads_back(store_url: str, tmp_path: Path) -> None:
    odd = InferenceCall(inference_call_id="n", source=Source("t"), raw={"t": math.nan})
    _cli("import", str(EXAMPLES), "--store", store_url)
    path = tmp_path / "odd.jsonl"
    path.write_bytes(encode_line(odd))
    _cli("import", str(path), "--store", store_url)
    res = runner.invoke(app, ["facts", "--store", store_url, "--json", "--limit", "0"])
    assert res.exit_code == 0, res.output
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(res.stdout_bytes)
    one = runner.invoke(app, ["facts", "n", "--store", store_url, "--json"])
    assert one.stdout_bytes == encode_line(odd)
    elsewhere = f"sqlite://{tmp_path / 'elsewhere.db'}"
    moved = _cli("import", str(dump), "--store", elsewhere)
    assert moved["stored"] == moved["facts"] and moved["skipped"] == {}
    with open_store(store_url) as a, open_store(elsewhere) as b:
        assert [encode_line(f) for f in a.iter_facts()] == [encode_line(f) for f in b.iter_facts()]
        assert same(b.get_fact("n"), odd)


def test_feedback_survives_convert_then_import(
    new_store_url: Callable[[], str], tmp_path: Path
) -> None:
    """Feedback documents and evaluation events that convert reads are written as feedback
    lines, so a store filled through a fact file holds the same feedback as a direct import."""
    docs = tmp_path / "feedback.jsonl"
    docs.write_bytes(
        b'{"target": {"kind": "call", "id": "c1"}, "name": "score", "value": 0.8}\n'
        b'{"session_id": "conv-42", "name": "resolved", "value": true, "source": "support-ui"}\n'
    )
    facts = tmp_path / "facts.jsonl"
    converted = _cli("convert", str(EXAMPLES), str(docs), "-o", str(facts))
    assert converted["feedback"] == 2
    assert (
        sum(1 for line in facts.read_bytes().splitlines() if line.startswith(b'{"feedback_id"'))
        == 2
    )
    direct, via_file = new_store_url(), new_store_url()
    _cli("import", str(EXAMPLES), str(docs), "--store", direct)
    got = _cli("import", str(facts), "--store", via_file)
    assert got["feedback_stored"] == 2
    assert _contents(via_file) == _contents(direct)
