"""Reading inputs: each file shape becomes the units the translators expect."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from lithify.core.factfile import BOM, encode_line, read_facts
from lithify.ingest.files import InputError, read_file, read_pair
from lithify.model import InferenceCall
from lithify.translate.sse import iter_events
from tests.conftest import CORPUS

SSE = CORPUS / "gemini" / "thought_parts_streaming.response.sse"
OTLP_TOOL_CALL = "util_genai_openai_v2_chat_tool_call.otlp.json"


def _facts(path: Path) -> list[InferenceCall]:
    out = [loc.result for loc in read_file(path)]
    assert all(isinstance(r, InferenceCall) for r in out), out
    return out  # type: ignore[return-value]


def test_gemini_json_array_stream_is_one_response(tmp_path: Path) -> None:
    chunks = [ev.json() for ev in iter_events(SSE.read_text())]
    array = tmp_path / "stream.json"
    array.write_bytes(orjson.dumps(chunks))
    (from_array,) = _facts(array)
    (from_sse,) = _facts(SSE)
    assert from_array.output_messages == from_sse.output_messages
    assert from_array.output_messages, "the answer is there"


def test_json_list_of_documents_is_read_one_by_one(tmp_path: Path) -> None:
    doc = orjson.loads((CORPUS / "openai-chat" / "legacy_function_call.response.json").read_bytes())
    path = tmp_path / "two.json"
    path.write_bytes(orjson.dumps([doc, doc]))
    assert len(_facts(path)) == 2


def test_collector_style_json_file_with_one_request_per_line(tmp_path: Path) -> None:
    doc = orjson.loads(
        (CORPUS / "otlp" / "util_genai_openai_v2_chat_tool_call.otlp.json").read_bytes()
    )
    path = tmp_path / "traces.json"
    path.write_bytes(orjson.dumps(doc) + b"\n" + orjson.dumps(doc) + b"\n")
    assert len(_facts(path)) == 2


@pytest.mark.parametrize("name", ["traces.jsonl", "traces.json", "traces.jsonl.gz"])
def test_a_utf8_byte_order_mark_costs_nothing(tmp_path: Path, name: str) -> None:
    """Windows tools (PowerShell's Out-File, Notepad) start a UTF-8 file with a byte order
    mark, which JSON forbids: it used to make the file's first document undecodable."""
    import gzip

    line = (CORPUS / "otlp" / OTLP_TOOL_CALL).read_bytes().replace(b"\n", b"") + b"\n"
    data = BOM + line + line
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(line + line)
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    assert _facts(path) == _facts(plain) and len(_facts(path)) == 2


def test_a_fact_file_with_a_byte_order_mark_is_read_whole(tmp_path: Path) -> None:
    facts = _facts(CORPUS / "otlp" / OTLP_TOOL_CALL)
    path = tmp_path / "facts.jsonl"
    path.write_bytes(BOM + b"".join(encode_line(f) for f in facts))
    assert [f for _, f in read_facts(path)] == facts
    assert [loc.result for loc in read_file(path)] == facts  # lithify import's reader


def test_pair_with_missing_file_raises_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        read_pair(tmp_path / "nope.json", None)


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        list(read_file(tmp_path))


def test_a_lone_surrogate_costs_a_jsonl_line_nothing_but_its_repair(tmp_path: Path) -> None:
    """One bad string in an OTLP/JSON line (a lone surrogate escape) keeps the line's spans,
    repaired and counted ``invalid_text``, as the receiver does; before, the line was lost."""
    line = orjson.dumps(orjson.loads((CORPUS / "otlp" / OTLP_TOOL_CALL).read_bytes()))
    bad = line.replace(b'"stringValue":"gpt-4o-mini"', b'"stringValue":"gpt-4o-mini \\ud800"', 1)
    assert bad != line
    path = tmp_path / "spans.jsonl"
    path.write_bytes(line + b"\n" + bad + b"\n")
    results = [x.result for x in read_file(path)]
    assert all(isinstance(r, InferenceCall) for r in results) and len(results) == 2
    clean, repaired = results
    assert "invalid_text" not in clean.degradations
    assert repaired.degradations["invalid_text"] >= 1
    assert b"gpt-4o-mini \xef\xbf\xbd" in orjson.dumps(repaired.raw)  # U+FFFD in its place
