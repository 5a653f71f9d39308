"""lithify's own fact files: written by `lithify convert`, read back by `import` and `export
--facts` exactly as written, and never confused with any other input."""

from __future__ import annotations

import gzip
import math
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lithify.core.factfile import (
    FactLineError,
    InputError,
    decode_line,
    encode_line,
    is_fact_line,
    read_facts,
)
from lithify.ingest.convert import JsonlSink, open_output, run
from lithify.ingest.files import Located, expand, read_file
from lithify.model import (
    Feedback,
    InferenceCall,
    Message,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    Source,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
    encode,
)
from tests.conftest import CORPUS
from tests.store.helpers import EDGE_VALUES, TEXT, VALUES, same

MAYBE_TEXT = st.none() | TEXT
parts = st.one_of(
    st.builds(TextPart, TEXT),
    st.builds(ReasoningPart, TEXT),
    st.builds(ToolCallPart, TEXT, TEXT, st.dictionaries(TEXT, VALUES, max_size=3)),
    st.builds(ToolCallResponsePart, TEXT, VALUES),
)
messages = st.lists(st.builds(Message, TEXT, st.lists(parts, max_size=3), MAYBE_TEXT), max_size=3)
facts = st.builds(
    InferenceCall,
    inference_call_id=TEXT,
    session_id=MAYBE_TEXT,
    trace_id=MAYBE_TEXT,
    span_id=MAYBE_TEXT,
    parent_span_id=MAYBE_TEXT,
    source=st.builds(Source, TEXT, st.integers()),
    provider=MAYBE_TEXT,
    model=MAYBE_TEXT,
    input_messages=messages,
    output_messages=messages,
    tools=st.lists(
        st.builds(ToolDefinition, TEXT, MAYBE_TEXT, st.dictionaries(TEXT, VALUES, max_size=3)),
        max_size=2,
    ),
    request=st.dictionaries(TEXT, VALUES, max_size=3),
    input_tokens=st.none() | st.integers(),
    output_tokens=st.none() | st.integers(min_value=-(2**130), max_value=2**130),
    duration_ms=st.none() | st.floats(),
    started_at=MAYBE_TEXT,
    observed_at=MAYBE_TEXT,
    model_call_id=MAYBE_TEXT,
    degradations=st.dictionaries(TEXT, st.integers(), max_size=2),
    raw=VALUES,
)
feedback = st.builds(
    Feedback,
    feedback_id=TEXT,
    target_kind=st.sampled_from(["call", "session", "trace"]),
    target_id=TEXT,
    name=TEXT,
    value=st.booleans() | st.integers() | st.floats() | TEXT,
    source=TEXT,
    observed_at=MAYBE_TEXT,
    raw=VALUES,
)


def _fact(**fields: Any) -> InferenceCall:
    return InferenceCall(inference_call_id="c1", source=Source("otel-genai"), **fields)


def _write(path: Path, items: list[InferenceCall | Feedback]) -> Path:
    data = b"".join(map(encode_line, items))
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


@given(facts)
def test_any_fact_reads_back_identical(fact: InferenceCall) -> None:
    line = encode_line(fact)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert same(decode_line(line), fact)


@given(feedback)
def test_any_feedback_fact_reads_back_identical(item: Feedback) -> None:
    assert same(decode_line(encode_line(item)), item)


@pytest.mark.parametrize("key", sorted(EDGE_VALUES))
def test_each_value_json_cannot_carry_reads_back_wherever_it_is(key: str) -> None:
    v = EDGE_VALUES[key]
    fact = _fact(
        session_id=key,
        request={key: v},
        output_messages=[Message("assistant", [ToolCallPart("t", "f", {key: v})])],
        input_messages=[Message("tool", [ToolCallResponsePart("t", v)])],
        tools=[ToolDefinition("f", None, {key: [v]})],
        raw=v,
    )
    assert same(decode_line(encode_line(fact)), fact)
    # The parts beyond v1 whose values are any JSON: a server tool's call and result, a
    # built-in tool's definition.
    server = _fact(
        output_messages=[
            Message(
                "assistant",
                [
                    ServerToolCallPart("s", "web_search", {"type": "web_search_call", key: v}),
                    ServerToolCallResponsePart("s", {"type": "web_search_result", key: [v]}),
                ],
            )
        ],
        tools=[ToolDefinition("web_search", None, {}, builtin={"type": "web_search", key: v})],
    )
    assert same(decode_line(encode_line(server)), server)


def test_plain_facts_are_plain_json_and_others_say_they_are_escaped() -> None:
    plain = _fact(raw={"t": 0.7, "big": 2**80, "nul": "a\x00", "z": -0.0}, duration_ms=1.5)
    assert encode_line(plain) == encode(plain) + b"\n"  # what convert always wrote
    # A string that looks like an escape, in a fact that needs none, stays as it is.
    lookalike = _fact(raw={"lithify:esc:NaN": "lithify:esc:4e614e"})
    assert encode_line(lookalike) == encode(lookalike) + b"\n"
    assert same(decode_line(encode_line(lookalike)), lookalike)
    for fact in (_fact(duration_ms=math.inf), _fact(raw=[math.nan]), _fact(model="\udc80")):
        line = encode_line(fact)
        assert line.endswith(b',"lithify:escaped":true}\n')
        orjson.loads(line)  # still JSON any tool reads
        assert same(decode_line(line), fact)


def test_an_otlp_nan_survives_convert(tmp_path: Path) -> None:
    # msgspec writes NaN as null; a double attribute of NaN is legal OTLP (proto3 JSON "NaN").
    span = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "name": "chat m",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.request.temperature", "value": {"doubleValue": "NaN"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "7"}},
            {
                "key": "gen_ai.input.messages",
                "value": {
                    "stringValue": '[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]'
                },
            },
        ],
    }
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    src = tmp_path / "nan.otlp.json"
    src.write_bytes(orjson.dumps(doc))
    [direct] = [loc.result for loc in read_file(src)]
    assert isinstance(direct, InferenceCall)
    assert math.isnan(direct.raw["attributes"]["gen_ai.request.temperature"])
    out = tmp_path / "facts.jsonl"
    with out.open("wb") as fh:
        run([src], JsonlSink(fh))
    [back] = [loc.result for loc in read_file(out)]
    assert same(back, direct)


def _corpus_facts() -> list[InferenceCall]:
    return [
        loc.result
        for path in expand([CORPUS])
        for loc in read_file(path)
        if isinstance(loc.result, InferenceCall)
    ]


@pytest.mark.parametrize("name", ["facts.jsonl", "facts.jsonl.gz", "facts.json", "facts.out"])
def test_the_corpus_converted_reads_back_identical(tmp_path: Path, name: str) -> None:
    direct = _corpus_facts()
    assert len(direct) > 40
    out = tmp_path / name
    with open_output(str(out)) as fh:
        summary = run([CORPUS], JsonlSink(fh))
    assert summary.facts == len(direct)
    if name.endswith(".gz"):
        assert out.read_bytes()[:2] == b"\x1f\x8b"  # `convert -o x.gz` writes gzip
    read = list(read_file(out))
    assert [loc.location for loc in read] == [f"{out}:{n}" for n in range(1, len(direct) + 1)]
    assert all(same(loc.result, f) for loc, f in zip(read, direct, strict=True))
    assert [same(f, g) for (_, f), g in zip(read_facts(out), direct, strict=True)] == [True] * len(
        direct
    )


def _units(path: Path) -> list[bytes]:
    """Every document and line of a file that could hold JSON."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return [data, *data.splitlines()]


@pytest.mark.parametrize("path", sorted(expand([CORPUS])), ids=lambda p: p.name)
def test_no_corpus_input_is_taken_for_a_fact_line(path: Path) -> None:
    for unit in _units(path):
        assert decode_line(unit) is None
        assert not is_fact_line(unit)


def test_a_feedback_document_naming_its_call_first_is_feedback_not_a_fact(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fb.jsonl"
    path.write_bytes(
        b'{"inference_call_id": "c1", "name": "score", "value": 0.9}\n'
        b'{"inference_call_id":"c1","source":"ui","name":"ok","value":true}\n'
    )
    results = [loc.result for loc in read_file(path)]
    assert [type(r) for r in results] == [Feedback, Feedback]
    assert [(r.target_kind, r.target_id) for r in results] == [("call", "c1")] * 2  # type: ignore[union-attr]


def test_feedback_lines_and_fact_lines_mix(tmp_path: Path) -> None:
    fb = Feedback(
        feedback_id="f1", target_kind="call", target_id="c1", name="score", value=0.5, source="x"
    )
    items: list[InferenceCall | Feedback] = [_fact(raw=math.nan), fb, _fact(model="m")]
    path = _write(tmp_path / "mixed.jsonl.gz", items)
    got = [loc.result for loc in read_file(path)]
    assert all(same(a, b) for a, b in zip(got, items, strict=True))
    assert all(same(a, b) for (_, a), b in zip(read_facts(path), items, strict=True))


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"inference_call_id":"c1","source":{"name":"x"},"model":3}', "Expected `str | null`"),
        (b'{"inference_call_id":"c1","source":{"na', "not JSON"),
        (b'{"inference_call_id":"c1"}', "missing required field `source`"),
        (b'{"feedback_id":"f","target_kind":"user"}', "not a feedback fact"),
        (
            b'{"inference_call_id":"c1","source":{"name":"x"},"raw":"lithify:esc:zz",'
            b'"lithify:escaped":true}',
            "malformed escaped value",
        ),
    ],
)
def test_a_corrupt_fact_line_is_undecodable_with_its_line(
    tmp_path: Path, line: bytes, why: str
) -> None:
    with pytest.raises(FactLineError, match=why):
        decode_line(line)
    path = tmp_path / "f.jsonl"
    path.write_bytes(encode_line(_fact()) + line + b"\n" + encode_line(_fact(model="m")))
    results = list(read_file(path))
    assert [type(loc.result).__name__ for loc in results] == [
        "InferenceCall",
        "Skip",
        "InferenceCall",
    ]
    skip: Located = results[1]
    assert skip.location == f"{path}:2"
    assert skip.result.reason == "undecodable" and why in skip.result.detail  # type: ignore[union-attr]
    with pytest.raises(InputError, match=f"{path}:2: "):
        list(read_facts(path))


def test_the_strict_reader_names_a_line_that_is_not_a_fact(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(encode_line(_fact()) + b"\n" + orjson.dumps({"request": {}, "response": {}}))
    with pytest.raises(InputError, match=r"f\.jsonl:3: not a fact line"):
        list(read_facts(path))
    with pytest.raises(InputError, match="no such file"):
        list(read_facts(tmp_path / "missing.jsonl"))
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(InputError, match=r"bad\.jsonl\.gz"):
        list(read_facts(bad))


def test_a_forced_format_reads_lines_as_that_format(tmp_path: Path) -> None:
    path = _write(tmp_path / "f.jsonl", [_fact()])
    [loc] = read_file(path, "otlp")
    assert not isinstance(loc.result, InferenceCall)


def test_msgspec_alone_reads_plain_lines_the_same() -> None:
    # Plain lines are the canonical JSON (docs/canonical.md): any JSON reader gets the fact.
    fact = _corpus_facts()[0]
    assert msgspec.json.decode(encode_line(fact), type=InferenceCall) == fact
