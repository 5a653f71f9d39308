"""OTLP decoding: protobuf and OTLP/JSON give equal spans and log records; bad bytes never crash."""

from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from lithify.ingest.files import translate_json
from lithify.model import InferenceCall
from lithify.translate import translate_document, translate_protobuf
from lithify.translate.otlp import (
    OTLPDecodeError,
    iter_json_logs,
    iter_json_spans,
    iter_pb_logs,
    iter_pb_spans,
    json_any_value,
    pb_any_value,
)
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
    (pb,) = iter_pb_spans(data)
    (js,) = iter_json_spans(orjson.loads(orjson.dumps(doc)))
    assert pb == js
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
    (js,) = iter_json_spans(doc)
    assert (js.trace_id, js.span_id) == (TRACE, SPAN)


def test_all_zero_ids_mean_absent() -> None:
    (s,) = iter_json_spans(
        {"traceId": "0" * 32, "spanId": SPAN, "parentSpanId": "", "attributes": []}
    )
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
    (pb,) = iter_pb_logs(req.SerializeToString())
    (js,) = iter_json_logs(doc)
    assert pb == js
    assert pb.body == {"content": "hi"} and pb.event_name.endswith("operation.details")


def test_event_name_falls_back_to_attribute() -> None:
    doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"attributes": [
        {"key": "event.name", "value": {"stringValue": "gen_ai.user.message"}}]}]}]}]}  # fmt: skip
    (r,) = iter_json_logs(doc)
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
        list(iter_json_spans({"resourceSpans": "nope"}))
    (r,) = translate_document({"resourceSpans": "nope"})
    assert r.reason == "unrecognized_format"


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
    # Bad numbers become null (CANONICAL.md); they never cost the span its fact.
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
