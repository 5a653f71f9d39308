"""OTLP decoding: protobuf and OTLP/JSON give equal spans and log records; bad bytes never crash."""

from __future__ import annotations

import base64
from pathlib import Path

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from lithify.ingest.files import translate_json
from lithify.model import InferenceCall, Skip
from lithify.translate import _guard, translate_document, translate_protobuf
from lithify.translate.otlp import (
    MAX_DEPTH,
    OTLPDecodeError,
    decode_logs,
    decode_spans,
    json_any_value,
    json_logs,
    json_spans,
    pb_any_value,
    pb_logs,
    pb_spans,
)
from lithify.translate.telemetry import translate_spans
from tests.otlp_values import json_value, pb_value

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"
PARENT = "eee19b7ec3c1b173"


ATTRS = {
    "gen_ai.operation.name": "chat",
    "gen_ai.usage.input_tokens": 412,
    "gen_ai.request.temperature": 0.5,
    "gen_ai.response.finish_reasons": ["stop", "length"],
    "flag": True,
    "structured": {"role": "user", "parts": [{"type": "text", "content": "hi"}], "n": 3},
}


def _requests() -> tuple[bytes, dict[str, object]]:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(KeyValue(key="service.name", value=pb_value("svc")))
    ss = rs.scope_spans.add()
    ss.scope.name = "opentelemetry.instrumentation.openai_v2"
    ss.scope.version = "2.4b0"
    s = ss.spans.add()
    s.trace_id = bytes.fromhex(TRACE)
    s.span_id = bytes.fromhex(SPAN)
    s.parent_span_id = bytes.fromhex(PARENT)
    s.name = "chat gpt-4o"
    s.kind = 3
    s.start_time_unix_nano = 1_700_000_000_000_000_000
    s.end_time_unix_nano = 1_700_000_001_500_000_000
    s.attributes.extend(KeyValue(key=k, value=pb_value(v)) for k, v in ATTRS.items())
    s.status.code = 2
    s.status.message = "boom"
    ev = s.events.add()
    ev.name = "gen_ai.user.message"
    ev.time_unix_nano = 1_700_000_000_100_000_000
    ev.attributes.append(KeyValue(key="content", value=pb_value("hi")))
    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {
                            "name": "opentelemetry.instrumentation.openai_v2",
                            "version": "2.4b0",
                        },
                        "spans": [
                            {
                                "traceId": TRACE,
                                "spanId": SPAN,
                                "parentSpanId": PARENT,
                                "name": "chat gpt-4o",
                                "kind": "SPAN_KIND_CLIENT",
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": 1_700_000_001_500_000_000,
                                "attributes": [
                                    {"key": k, "value": json_value(v)} for k, v in ATTRS.items()
                                ],
                                "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
                                "events": [
                                    {
                                        "name": "gen_ai.user.message",
                                        "timeUnixNano": "1700000000100000000",
                                        "attributes": [
                                            {"key": "content", "value": {"stringValue": "hi"}}
                                        ],
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    return req.SerializeToString(), doc


def test_protobuf_and_json_spans_are_equal() -> None:
    data, doc = _requests()
    (pb,) = pb_spans(data).units
    (js,) = json_spans(orjson.loads(orjson.dumps(doc))).units
    # Equal but for what the protobuf reader knows and a parsed document cannot tell: the
    # request's bytes were screened clean of credentials.
    assert pb.screened and not js.screened
    assert msgspec.structs.replace(pb, screened=False) == js
    assert pb.trace_id == TRACE and pb.parent_span_id == PARENT
    assert pb.kind == 3 and pb.status == {"code": 2, "message": "boom"}
    assert pb.attributes == ATTRS
    assert pb.events[0]["attributes"] == {"content": "hi"}
    assert pb.resource == {"service.name": "svc"}
    assert pb.to_raw()["attributes"]["structured"]["n"] == 3


def test_json_ids_in_base64_are_read_as_hex() -> None:
    _, doc = _requests()
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]  # type: ignore[index]
    span["traceId"] = base64.b64encode(bytes.fromhex(TRACE)).decode()
    span["spanId"] = base64.b64encode(bytes.fromhex(SPAN)).decode()
    (js,) = json_spans(doc).units
    assert (js.trace_id, js.span_id) == (TRACE, SPAN)


def test_all_zero_ids_mean_absent() -> None:
    (s,) = json_spans(
        {"traceId": "0" * 32, "spanId": SPAN, "parentSpanId": "", "attributes": []}
    ).units
    assert s.trace_id is None and s.parent_span_id is None


def test_any_value_forms() -> None:
    assert json_any_value({"intValue": "9007199254740993"}) == 9007199254740993
    assert json_any_value({"doubleValue": "NaN"}) != json_any_value({"doubleValue": "NaN"})
    assert json_any_value({"bytesValue": "AAE="}) == "AAE="
    v = AnyValue(bytes_value=b"\x00\x01")
    assert pb_any_value(v) == "AAE="
    assert json_any_value({}) is None and pb_any_value(AnyValue()) is None
    assert json_any_value({"string_value": "snake"}) == "snake"


def test_logs_protobuf_and_json_equal() -> None:
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    sl = rl.scope_logs.add()
    r = sl.log_records.add()
    r.time_unix_nano = 5
    r.trace_id = bytes.fromhex(TRACE)
    r.span_id = bytes.fromhex(SPAN)
    r.event_name = "gen_ai.client.inference.operation.details"
    r.body.CopyFrom(pb_value({"content": "hi"}))
    doc = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": "5",
                                "traceId": TRACE,
                                "spanId": SPAN,
                                "eventName": "gen_ai.client.inference.operation.details",
                                "body": json_value({"content": "hi"}),
                            }
                        ]
                    }
                ]
            }
        ]
    }
    (pb,) = pb_logs(req.SerializeToString()).units
    (js,) = json_logs(doc).units
    assert pb == js
    assert pb.body == {"content": "hi"} and pb.event_name.endswith("operation.details")


def test_event_name_falls_back_to_attribute() -> None:
    doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"attributes": [
        {"key": "event.name", "value": {"stringValue": "gen_ai.user.message"}}]}]}]}]}  # fmt: skip
    (r,) = json_logs(doc).units
    assert r.event_name == "gen_ai.user.message"


def test_logs_request_is_not_mistaken_for_traces() -> None:
    req = ExportLogsServiceRequest()
    r = req.resource_logs.add().scope_logs.add().log_records.add()
    r.time_unix_nano = 1_700_000_000_000_000_000
    r.body.string_value = "hello"
    results = list(translate_protobuf(req.SerializeToString()))
    assert [getattr(x, "reason", None) for x in results] == ["not_genai"]


def test_not_otlp_json_is_a_skip_not_an_exception() -> None:
    with pytest.raises(OTLPDecodeError):
        json_spans({"resourceSpans": "nope"})
    (r,) = translate_document({"resourceSpans": "nope"})
    assert r.reason == "undecodable"
    assert r.detail == "not an OTLP/JSON trace request: resourceSpans is a string, not a list"


_any_values = st.recursive(
    st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.sampled_from([0, 0.0, -0.0, "", False])
    | st.text(max_size=8)
    | st.binary(max_size=4),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)


@given(st.lists(st.tuples(st.text(max_size=6), _any_values), max_size=6))
def test_protobuf_attributes_read_as_the_json_mapping_does(pairs: list[tuple[str, object]]) -> None:
    """Protobuf attributes (read by the set field's non-zero value where it can) equal what the
    OTLP/JSON path reads from protobuf's own JSON mapping of the same message, zeros included."""
    from google.protobuf.json_format import MessageToDict

    from lithify.translate.otlp import _pb_attrs, json_attributes

    kvs = [KeyValue(key=k, value=pb_value(v)) for k, v in pairs]
    expected = json_attributes([MessageToDict(kv) for kv in kvs])
    got = _pb_attrs(kvs)
    assert orjson.dumps(got) == orjson.dumps(expected)
    for k, v in got.items():  # an int is not read as a float, nor a bool as an int
        assert type(v) is type(expected[k])


@given(st.binary(max_size=2048))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    for r in translate_protobuf(data):
        assert r is not None


@given(st.data())
def test_mutated_protobuf_never_raises(data: st.DataObject) -> None:
    raw, _ = _requests()
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 8))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        i = data.draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "flip" and buf:
            buf[i] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del buf[i:]
        else:
            buf[i:i] = data.draw(st.binary(min_size=1, max_size=16))
    for r in translate_protobuf(bytes(buf)):
        assert r is not None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=30,
)


@given(json_values)
def test_arbitrary_json_documents_never_raise(doc: object) -> None:
    for r in translate_document(doc):
        assert r is not None


@given(st.dictionaries(st.sampled_from(["resourceSpans", "resourceLogs", "scopeSpans", "spans",
                                        "attributes", "traceId", "spanId", "name"]), json_values))  # fmt: skip
def test_arbitrary_otlp_shaped_json_never_raises(doc: dict[str, object]) -> None:
    for r in translate_document(doc):
        assert r is not None


_TIMES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=10**300, max_value=10**400),
).map(str)


@given(start=_TIMES, end=_TIMES)
def test_any_span_times_still_give_the_fact(start: str, end: str) -> None:
    # Bad numbers become null (docs/canonical.md, Shape); they never cost the span its fact.
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "chat",
        "startTimeUnixNano": start,
        "endTimeUnixNano": end,
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {
                "key": "gen_ai.input.messages",
                "value": {
                    "stringValue": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]'
                },
            },
        ],
    }
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    for results in (translate_document(doc), translate_json(orjson.dumps(doc))):
        (fact,) = list(results)
        assert isinstance(fact, InferenceCall), fact
        assert fact.duration_ms is None or 0 <= fact.duration_ms < float("inf")
        if fact.duration_ms is not None:
            assert int(start) > 0 and int(end) >= int(start)


# -- one unit at a time: wrong shapes, bad text, depth (issue 13) -------------------------------


def _genai_request(n: int = 3) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add().scope_spans.add()
    for i in range(n):
        s = ss.spans.add()
        s.trace_id, s.span_id = bytes.fromhex(TRACE), bytes([i + 1]) * 8
        s.name = f"chat {i}"
        inputs = [{"role": "user", "parts": [{"type": "text", "content": f"question {i}"}]}]
        s.attributes.extend(
            KeyValue(key=k, value=pb_value(v))
            for k, v in {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.input.messages": orjson.dumps(inputs).decode(),
            }.items()
        )
    return req


def _json_of(req: ExportTraceServiceRequest | ExportLogsServiceRequest) -> bytes:
    """The request in OTLP/JSON (hex ids, as exporters write them)."""
    from google.protobuf.json_format import MessageToDict

    doc = MessageToDict(req)
    for rs in doc.get("resourceSpans", []):
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                s["traceId"] = base64.b64decode(s["traceId"]).hex()
                s["spanId"] = base64.b64decode(s["spanId"]).hex()
    return orjson.dumps(doc)


@pytest.mark.parametrize(
    ("encoding", "damage"),
    [
        ("protobuf", (b"question 1", b"question\xff1")),  # invalid UTF-8, same length
        ("json", (b"question 1", b"question \\ud800 1")),  # a lone surrogate escape
        ("json", (b"question 1", b"question \xed\xa0\x801")),  # UTF-8 of a surrogate
    ],
)
def test_a_bad_string_costs_its_span_only_its_text(
    encoding: str, damage: tuple[bytes, bytes]
) -> None:
    req = _genai_request()
    data = req.SerializeToString() if encoding == "protobuf" else _json_of(req)
    assert damage[0] in data
    data = data.replace(*damage)
    decoded = decode_spans(data, encoding)
    assert decoded.rejected == []
    assert [s.name for s in decoded.units] == ["chat 0", "chat 1", "chat 2"]
    assert [s.repaired for s in decoded.units] == [0, 1, 0]
    assert "\ufffd" in decoded.units[1].attributes["gen_ai.input.messages"]
    assert not decoded.units[1].screened
    facts = list(_guard(translate_spans(decoded.units)))
    assert all(isinstance(f, InferenceCall) for f in facts)
    assert [f.degradations.get("invalid_text") for f in facts] == [None, 1, None]  # type: ignore[union-attr]
    text = facts[1].input_messages[0].parts[0].content  # type: ignore[union-attr]
    assert "\ufffd" in text and text.startswith("question")
    if encoding == "protobuf":  # what convert and import read: the same
        results = list(translate_protobuf(data))
        assert [type(r) for r in results] == [InferenceCall] * 3
        assert results[1].degradations == {"invalid_text": 1}  # type: ignore[union-attr]


def test_a_bad_string_in_a_log_record_is_repaired_on_that_record() -> None:
    req = ExportLogsServiceRequest()
    sl = req.resource_logs.add().scope_logs.add()
    for text in ("fine", "bad one", "fine too"):
        r = sl.log_records.add()
        r.trace_id, r.span_id = bytes.fromhex(TRACE), bytes.fromhex(SPAN)
        r.event_name = "gen_ai.client.inference.operation.details"
        r.body.CopyFrom(pb_value({"gen_ai.input.messages": [{"role": "user", "parts": [
            {"type": "text", "content": text}]}]}))  # fmt: skip
    data = req.SerializeToString().replace(b"bad one", b"bad \xc3(e")
    decoded = decode_logs(data, "protobuf")
    assert [r.repaired for r in decoded.units] == [0, 1, 0] and decoded.rejected == []
    facts = [f for f in translate_protobuf(data, "otlp-logs") if isinstance(f, InferenceCall)]
    assert [f.degradations.get("invalid_text") for f in facts] == [None, 1, None]


def _framed(tag: int, payload: bytes) -> bytes:
    from google.protobuf.internal.encoder import _VarintBytes

    return bytes([tag]) + _VarintBytes(len(payload)) + payload


def _deep_value(levels: int) -> bytes:
    """An AnyValue whose string sits ``levels`` arrays deep, written field by field (the
    protobuf library will not build one past its own depth limit)."""
    v = _framed(0x0A, b"x")  # string_value
    for _ in range(levels):
        v = _framed(0x2A, _framed(0x0A, v))  # array_value { values: [v] }
    return v


def _deep_json(levels: int) -> dict[str, object]:
    v: dict[str, object] = {"stringValue": "x"}
    for _ in range(levels):
        v = {"arrayValue": {"values": [v]}}
    return v


@pytest.mark.parametrize("levels", [MAX_DEPTH, MAX_DEPTH + 1, 48, 300])
def test_a_deep_value_costs_its_span_alone_in_either_encoding(levels: int) -> None:
    """Protobuf used to refuse a whole request at 48 levels while OTLP/JSON took it: now both
    take a value up to MAX_DEPTH levels, and reject a deeper one's span, only that span."""
    attr = _framed(0x0A, b"deep") + _framed(0x12, _deep_value(levels))  # KeyValue
    spans = [
        _framed(0x0A, b"\x11" * 16) + _framed(0x12, bytes([i]) * 8) + _framed(0x2A, name) + extra
        for i, (name, extra) in enumerate(
            [(b"a", b""), (b"deep", _framed(0x4A, attr)), (b"b", b"")], 1
        )
    ]
    pb = _framed(0x0A, _framed(0x12, b"".join(_framed(0x12, s) for s in spans)))
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"name": "a"},
        {"name": "deep", "attributes": [{"key": "deep", "value": _deep_json(levels)}]},
        {"name": "b"}]}]}]}  # fmt: skip
    import json

    js = json.dumps(doc).encode()  # orjson refuses to write past 255 levels
    for encoding, data, where in (
        ("protobuf", pb, "resource_spans[0].scope_spans[0].spans[1]"),
        ("json", js, "resourceSpans[0].scopeSpans[0].spans[1]"),
    ):
        decoded = decode_spans(data, encoding)
        if levels <= MAX_DEPTH:
            assert [s.name for s in decoded.units] == ["a", "deep", "b"], encoding
            assert decoded.rejected == []
        else:
            assert [s.name for s in decoded.units] == ["a", "b"], encoding
            assert decoded.rejected == [
                f"{where}: a value nested deeper than {MAX_DEPTH} levels"
            ], encoding


def test_a_span_whose_bytes_do_not_parse_is_rejected_and_named() -> None:
    req = _genai_request()
    good = [s.SerializeToString() for s in req.resource_spans[0].scope_spans[0].spans]
    broken = good[1] + b"\x0a\x05ab"  # a field that runs past the span's end
    ss = b"".join(_framed(0x12, s) for s in (good[0], broken, good[2]))
    data = _framed(0x0A, _framed(0x12, ss))
    decoded = pb_spans(data)
    assert [s.name for s in decoded.units] == ["chat 0", "chat 2"]
    assert decoded.rejected == [
        "resource_spans[0].scope_spans[0].spans[1]: not a valid Span message"
    ]
    results = list(translate_protobuf(data))
    assert results[0] == Skip("undecodable", decoded.rejected[0])
    assert sum(isinstance(r, InferenceCall) for r in results) == 2
    # Broken framing around the spans: nothing can be counted, the request is refused whole.
    with pytest.raises(OTLPDecodeError, match=r"resource_spans\[0\] is truncated"):
        pb_spans(_framed(0x0A, _framed(0x12, ss)[:-3]))


@pytest.mark.parametrize(
    ("body", "decode", "where"),
    [
        (b'{"resourceSpans":[{"scopeSpans":1.5}]}', decode_spans,
         "resourceSpans[0].scopeSpans is a number, not a list"),
        (b'{"resourceSpans":[{"scopeSpans":true}]}', decode_spans,
         "resourceSpans[0].scopeSpans is true, not a list"),
        (b'{"resourceLogs":[{"scopeLogs":7}]}', decode_logs,
         "resourceLogs[0].scopeLogs is a number, not a list"),
        (b'{"resourceSpans":[{"scopeSpans":"ab"}]}', decode_spans,
         "resourceSpans[0].scopeSpans is a string, not a list"),
        (b'{"resourceSpans":[{"scopeSpans":[{"spans":3}]}]}', decode_spans,
         "resourceSpans[0].scopeSpans[0].spans is a number, not a list"),
        (b'{"resourceSpans":[7]}', decode_spans, "resourceSpans[0] is a number, not an object"),
        (b'{"resourceSpans":[{"resource":[]}]}', decode_spans,
         "resourceSpans[0].resource is a list, not an object"),
        (b'"ab"', decode_spans, "the request is a string, not a JSON object"),
    ],
)  # fmt: skip
def test_a_wrong_shape_around_the_units_says_where(body: bytes, decode: object, where: str) -> None:
    with pytest.raises(OTLPDecodeError) as e:
        decode(body, "json")  # type: ignore[operator]
    assert str(e.value).endswith(where)


def test_entries_that_are_not_objects_are_rejected_one_by_one() -> None:
    doc = orjson.loads(_json_of(_genai_request(2)))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1:1] = [3, "x", None]
    decoded = json_spans(doc)
    assert len(decoded.units) == 2
    assert decoded.rejected == [
        "resourceSpans[0].scopeSpans[0].spans[1]: a number, not a JSON object",
        "resourceSpans[0].scopeSpans[0].spans[2]: a string, not a JSON object",
        "resourceSpans[0].scopeSpans[0].spans[3]: null, not a JSON object",
    ]


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
        ["resourceSpans", "scopeSpans", "spans", "resource", "scope", "attributes", "key",
         "value", "stringValue", "arrayValue", "kvlistValue", "values", "name", "events",
         "status", "message", "traceId", "spanId"]), c, max_size=4),
    max_leaves=30))  # fmt: skip
def test_any_json_shape_decodes_or_says_why(doc: object) -> None:
    """Every level, every wrong type: a Decoded or an OTLPDecodeError, never another error."""
    for decode in (json_spans, json_logs):
        try:
            decoded = decode(doc)  # type: ignore[operator]
        except OTLPDecodeError as e:
            assert str(e).startswith("not an OTLP/JSON")
            continue
        for unit in decoded.units:
            orjson.dumps(unit.to_raw())
    results = list(translate_document(doc))
    assert all(r is not None for r in results)


def test_convert_names_each_rejected_unit_by_file_line_and_place(tmp_path: Path) -> None:
    """`lithify convert` and `import` read requests the same way: a unit that cannot be taken
    is counted and listed with its file and line; the rest of the request gives its facts."""
    import io

    from lithify.ingest.convert import convert

    doc = orjson.loads(_json_of(_genai_request(2)))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"].insert(1, 7)
    (tmp_path / "t.jsonl").write_bytes(b"\n" + orjson.dumps(doc) + b"\n")
    pb = _genai_request(3).SerializeToString().replace(b"question 1", b"question\xff1")
    (tmp_path / "t.pb").write_bytes(pb)
    out = io.BytesIO()
    summary = convert([tmp_path / "t.jsonl", tmp_path / "t.pb"], out)
    assert summary.facts == 5
    assert summary.skipped == {"undecodable": 1}
    assert summary.corrupt == [
        f"{tmp_path / 't.jsonl'}:2: resourceSpans[0].scopeSpans[0].spans[1]: a number, not a "
        "JSON object"
    ]
    assert summary.degradations == {"invalid_text": 1}


def test_rejected_units_past_the_first_hundred_are_counted_not_named() -> None:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [1] * 150}]}]}
    decoded = json_spans(doc)
    assert (len(decoded.rejected), decoded.unnamed, decoded.rejected_count) == (100, 50, 150)
    skips = list(translate_document(doc))
    assert len(skips) == 150 and all(s.reason == "undecodable" for s in skips)  # type: ignore[union-attr]
