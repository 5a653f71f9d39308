"""OTLP decoding: ExportTraceServiceRequest / ExportLogsServiceRequest, protobuf or OTLP/JSON,
into plain spans and log records whose attribute values are ordinary Python values.

OTLP/JSON is decoded by hand: ids are hex there (protobuf's JSON mapping would say base64), enums
may be integers or names, and 64-bit integers may be strings. Both encodings give equal objects,
so a fact does not depend on the wire format it arrived in.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from lithify.translate.redact import CLEAN, screen

_SPAN_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


class OTLPDecodeError(ValueError):
    """The bytes are not an OTLP request of the expected kind."""


@dataclass(slots=True)
class Span:
    trace_id: str | None
    span_id: str | None
    parent_span_id: str | None
    name: str
    kind: int
    start_time_unix_nano: int | None
    end_time_unix_nano: int | None
    attributes: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: dict[str, Any] = field(default_factory=dict)
    # The request bytes the span came from were screened clean (redact.CLEAN) and the span holds
    # nothing those bytes do not (no base64 of protobuf bytes): its fact needs no screen of its own.
    screened: bool = field(default=False, compare=False)

    def to_raw(self) -> dict[str, Any]:
        """The span as kept on a fact's ``raw``: snake_case keys, hex ids, plain values."""
        return {
            "kind": "otlp_span",
            "resource": self.resource,
            "scope": self.scope,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "name": self.name,
            "span_kind": self.kind,
            "start_time_unix_nano": self.start_time_unix_nano,
            "end_time_unix_nano": self.end_time_unix_nano,
            "attributes": self.attributes,
            "events": self.events,
            "status": self.status,
        }


@dataclass(slots=True)
class LogRecord:
    trace_id: str | None
    span_id: str | None
    event_name: str | None
    time_unix_nano: int | None
    observed_time_unix_nano: int | None
    severity_number: int
    body: Any
    attributes: dict[str, Any]
    resource: dict[str, Any] = field(default_factory=dict)
    scope: dict[str, Any] = field(default_factory=dict)

    def to_raw(self) -> dict[str, Any]:
        return {
            "kind": "otlp_log",
            "resource": self.resource,
            "scope": self.scope,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "event_name": self.event_name,
            "time_unix_nano": self.time_unix_nano,
            "observed_time_unix_nano": self.observed_time_unix_nano,
            "severity_number": self.severity_number,
            "body": self.body,
            "attributes": self.attributes,
        }


# ---------------------------------------------------------------------------------------------
# OTLP/JSON


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    v = obj.get(camel)
    return obj.get(snake) if v is None else v


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _json_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            return None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _json_double(v: Any) -> Any:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)  # "NaN", "Infinity", "-Infinity" per the proto3 JSON mapping
        except ValueError:
            return v
    return v


def _json_id(v: Any) -> str | None:
    """Trace/span ids: lowercase hex in OTLP/JSON; tolerate base64 from protobuf's own mapping."""
    if not isinstance(v, str) or not v:
        return None
    if len(v) in (16, 32):
        try:
            int(v, 16)
            low = v.lower()
            return None if low.strip("0") == "" else low
        except ValueError:
            pass
    try:
        raw = base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        return v
    if len(raw) in (8, 16):
        return None if not any(raw) else raw.hex()
    return v


def json_any_value(v: Any) -> Any:
    """One OTLP/JSON AnyValue to a Python value."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "string_value" in v:
        return v["string_value"]
    for k in ("intValue", "int_value"):
        if k in v:
            n = _json_int(v[k])
            return v[k] if n is None else n
    for k in ("doubleValue", "double_value"):
        if k in v:
            return _json_double(v[k])
    for k in ("boolValue", "bool_value"):
        if k in v:
            return v[k]
    for k in ("arrayValue", "array_value"):
        if k in v:
            inner = v[k] if isinstance(v[k], dict) else {}
            vals = inner.get("values") or []
            return [json_any_value(x) for x in vals] if isinstance(vals, list) else []
    for k in ("kvlistValue", "kvlist_value"):
        if k in v:
            inner = v[k] if isinstance(v[k], dict) else {}
            return json_attributes(inner.get("values"))
    for k in ("bytesValue", "bytes_value"):
        if k in v:
            return v[k]  # already base64 text in JSON; kept as such
    return None  # an empty AnyValue


def json_attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(kvs, list):
        return out
    for kv in kvs:
        if isinstance(kv, dict):
            key = kv.get("key", "")  # left out when "" (see _TKeyValue)
            if isinstance(key, str):
                v = kv.get("value")
                # Most values are strings: their case is json_any_value's first, taken inline.
                if type(v) is dict and "stringValue" in v:
                    out[key] = v["stringValue"]
                else:
                    out[key] = json_any_value(v)
    return out


def _json_scope(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        obj = {}  # protobuf has no "absent" scope: it reads as an empty one
    scope: dict[str, Any] = {"name": obj.get("name") or "", "version": obj.get("version") or ""}
    attrs = json_attributes(obj.get("attributes"))
    if attrs:
        scope["attributes"] = attrs
    return scope


def _json_enum(v: Any, names: dict[str, int]) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        return names.get(v, _json_int(v) or 0)
    return 0


def json_span(s: dict[str, Any], resource: dict[str, Any], scope: dict[str, Any]) -> Span:
    status_in = s.get("status") if isinstance(s.get("status"), dict) else {}
    status: dict[str, Any] = {"code": _json_enum(status_in.get("code"), _STATUS_CODES)}
    if status_in.get("message"):
        status["message"] = status_in["message"]
    events = []
    for e in _list(s.get("events")):
        if isinstance(e, dict):
            events.append(
                {
                    "name": e.get("name") or "",
                    "time_unix_nano": _json_int(_get(e, "timeUnixNano", "time_unix_nano")),
                    "attributes": json_attributes(e.get("attributes")),
                }
            )
    return Span(
        trace_id=_json_id(_get(s, "traceId", "trace_id")),
        span_id=_json_id(_get(s, "spanId", "span_id")),
        parent_span_id=_json_id(_get(s, "parentSpanId", "parent_span_id")),
        name=s.get("name") if isinstance(s.get("name"), str) else "",
        kind=_json_enum(s.get("kind"), _SPAN_KINDS),
        start_time_unix_nano=_json_int(_get(s, "startTimeUnixNano", "start_time_unix_nano")),
        end_time_unix_nano=_json_int(_get(s, "endTimeUnixNano", "end_time_unix_nano")),
        attributes=json_attributes(s.get("attributes")),
        events=events,
        status=status,
        resource=resource,
        scope=scope,
    )


def is_bare_span(doc: dict[str, Any]) -> bool:
    """One OTLP/JSON Span object on its own (trace stores and test goldens keep them so)."""
    return isinstance(doc.get("attributes"), list) and (
        "spanId" in doc or "span_id" in doc or "name" in doc
    )


def iter_json_spans(doc: Any) -> Iterator[Span]:
    """Spans of an OTLP/JSON ExportTraceServiceRequest (or a bare Span object)."""
    if not isinstance(doc, dict):
        raise OTLPDecodeError("an OTLP/JSON trace request is a JSON object")
    groups = _get(doc, "resourceSpans", "resource_spans")
    if groups is None and is_bare_span(doc):
        yield json_span(doc, {}, {})
        return
    if not isinstance(groups, list):
        raise OTLPDecodeError("no resourceSpans list")
    for rs in groups:
        if not isinstance(rs, dict):
            continue
        res = rs.get("resource")
        resource = json_attributes(res.get("attributes")) if isinstance(res, dict) else {}
        groups_of = _get(rs, "scopeSpans", "scope_spans") or rs.get("instrumentationLibrarySpans")
        for ss in _list(groups_of):
            if not isinstance(ss, dict):
                continue
            scope = _json_scope(ss.get("scope") or ss.get("instrumentationLibrary"))
            for s in _list(ss.get("spans")):
                if isinstance(s, dict):
                    yield json_span(s, resource, scope)


# ---------------------------------------------------------------------------------------------
# OTLP/JSON, the fast way: the exporters' exact form decoded by msgspec into typed structs
#
# The Collector and the SDK exporters write camelCase keys, string 64-bit integers and every
# field with its own type. A request in that form is decoded straight from its bytes, which is
# several times cheaper than orjson's dicts walked in Python, and gives the spans
# iter_json_spans gives for the same bytes. Anything else (snake_case keys, an unknown field,
# null, a value of another type, an integer orjson would read as a float) fails the decode and
# the request takes the general path. Unknown fields are refused, not skipped, because msgspec
# skips them without the checks orjson applies (it takes 1e400 there).

_U = msgspec.UNSET
# orjson reads integers beyond 64 bits as floats; msgspec would keep them exact (and it bounds
# only to int64).
_Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class _Typed(msgspec.Struct, rename="camel", forbid_unknown_fields=True, gc=False):
    pass


class _TArray(_Typed):
    values: list[_TAnyValue] = []


class _TKvList(_Typed):
    values: list[_TKeyValue] = []


class _TAnyValue(_Typed):
    string_value: str | msgspec.UnsetType = _U
    int_value: _Int | str | msgspec.UnsetType = _U
    double_value: float | str | msgspec.UnsetType = _U
    bool_value: bool | msgspec.UnsetType = _U
    array_value: _TArray | msgspec.UnsetType = _U
    kvlist_value: _TKvList | msgspec.UnsetType = _U
    bytes_value: str | msgspec.UnsetType = _U


class _TKeyValue(_Typed):
    key: str = ""  # protobuf's JSON mapping leaves out a key that is "", as it does any default
    value: _TAnyValue | None = None


class _TEvent(_Typed):
    time_unix_nano: _Int | str | None = None
    name: str = ""
    attributes: list[_TKeyValue] = []
    dropped_attributes_count: _Int = 0


class _TLink(_Typed):
    trace_id: str = ""
    span_id: str = ""
    trace_state: str = ""
    attributes: list[_TKeyValue] = []
    dropped_attributes_count: _Int = 0
    flags: _Int = 0


class _TStatus(_Typed):
    message: str = ""
    code: _Int | str | None = None


class _TSpan(_Typed):
    trace_id: str = ""
    span_id: str = ""
    trace_state: str = ""
    parent_span_id: str = ""
    flags: _Int = 0
    name: str = ""
    kind: _Int | str | None = None
    start_time_unix_nano: _Int | str | None = None
    end_time_unix_nano: _Int | str | None = None
    attributes: list[_TKeyValue] = []
    dropped_attributes_count: _Int = 0
    events: list[_TEvent] = []
    dropped_events_count: _Int = 0
    links: list[_TLink] = []
    dropped_links_count: _Int = 0
    status: _TStatus | None = None


class _TScope(_Typed):
    name: str = ""
    version: str = ""
    attributes: list[_TKeyValue] = []
    dropped_attributes_count: _Int = 0


class _TScopeSpans(_Typed):
    scope: _TScope | None = None
    spans: list[_TSpan] = []
    schema_url: str = ""


class _TResource(_Typed):
    attributes: list[_TKeyValue] = []
    dropped_attributes_count: _Int = 0


class _TResourceSpans(_Typed):
    resource: _TResource | None = None
    scope_spans: list[_TScopeSpans] = []
    schema_url: str = ""


class _TTraceRequest(_Typed):
    resource_spans: list[_TResourceSpans]


_TRACE_REQUEST = msgspec.json.Decoder(_TTraceRequest)


def _typed_value(v: _TAnyValue | None) -> Any:
    """json_any_value for a typed AnyValue: the same precedence, the same conversions."""
    if v is None:
        return None
    if v.string_value is not _U:
        return v.string_value
    if v.int_value is not _U:
        n = _json_int(v.int_value)
        return v.int_value if n is None else n
    if v.double_value is not _U:
        d = v.double_value
        return d if type(d) is float else _json_double(d)
    if v.bool_value is not _U:
        return v.bool_value
    if v.array_value is not _U:
        return [_typed_value(x) for x in v.array_value.values]
    if v.kvlist_value is not _U:
        return _typed_attributes(v.kvlist_value.values)
    if v.bytes_value is not _U:
        return v.bytes_value
    return None


def _typed_attributes(kvs: list[_TKeyValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    unset = _U
    for kv in kvs:
        v = kv.value
        if v is not None and (s := v.string_value) is not unset:
            out[kv.key] = s
        else:
            out[kv.key] = _typed_value(v)
    return out


def _typed_scope(scope: _TScope | None) -> dict[str, Any]:
    if scope is None:
        return {"name": "", "version": ""}
    out: dict[str, Any] = {"name": scope.name, "version": scope.version}
    attrs = _typed_attributes(scope.attributes)
    if attrs:
        out["attributes"] = attrs
    return out


def _typed_span(s: _TSpan, resource: dict[str, Any], scope: dict[str, Any], screened: bool) -> Span:
    st = s.status
    status: dict[str, Any] = {"code": 0 if st is None else _json_enum(st.code, _STATUS_CODES)}
    if st is not None and st.message:
        status["message"] = st.message
    return Span(
        trace_id=_json_id(s.trace_id),
        span_id=_json_id(s.span_id),
        parent_span_id=_json_id(s.parent_span_id),
        name=s.name,
        kind=_json_enum(s.kind, _SPAN_KINDS),
        start_time_unix_nano=_json_int(s.start_time_unix_nano),
        end_time_unix_nano=_json_int(s.end_time_unix_nano),
        attributes=_typed_attributes(s.attributes),
        events=[
            {
                "name": e.name,
                "time_unix_nano": _json_int(e.time_unix_nano),
                "attributes": _typed_attributes(e.attributes),
            }
            for e in s.events
        ]
        if s.events
        else [],
        status=status,
        resource=resource,
        scope=scope,
        screened=screened,
    )


def decode_json_spans(data: bytes) -> list[Span] | None:
    """The spans of an OTLP/JSON trace request in the exporters' form, equal to what
    ``iter_json_spans(orjson.loads(data))`` gives; None when ``data`` needs that path."""
    try:
        req = _TRACE_REQUEST.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    # One screen of the whole request stands for a screen of each span's fact.
    screened = screen(data) == CLEAN
    spans = []
    for rs in req.resource_spans:
        resource = _typed_attributes(rs.resource.attributes) if rs.resource is not None else {}
        for ss in rs.scope_spans:
            scope = _typed_scope(ss.scope)
            for s in ss.spans:
                spans.append(_typed_span(s, resource, scope, screened))
    return spans


def json_log(r: dict[str, Any], resource: dict[str, Any], scope: dict[str, Any]) -> LogRecord:
    attrs = json_attributes(r.get("attributes"))
    name = _get(r, "eventName", "event_name") or attrs.get("event.name")
    return LogRecord(
        trace_id=_json_id(_get(r, "traceId", "trace_id")),
        span_id=_json_id(_get(r, "spanId", "span_id")),
        event_name=name if isinstance(name, str) and name else None,
        time_unix_nano=_json_int(_get(r, "timeUnixNano", "time_unix_nano")),
        observed_time_unix_nano=_json_int(
            _get(r, "observedTimeUnixNano", "observed_time_unix_nano")
        ),
        severity_number=_json_enum(_get(r, "severityNumber", "severity_number"), {}),
        body=json_any_value(r.get("body")),
        attributes=attrs,
        resource=resource,
        scope=scope,
    )


def iter_json_logs(doc: Any) -> Iterator[LogRecord]:
    if not isinstance(doc, dict):
        raise OTLPDecodeError("an OTLP/JSON logs request is a JSON object")
    groups = _get(doc, "resourceLogs", "resource_logs")
    if not isinstance(groups, list):
        raise OTLPDecodeError("no resourceLogs list")
    for rl in groups:
        if not isinstance(rl, dict):
            continue
        res = rl.get("resource")
        resource = json_attributes(res.get("attributes")) if isinstance(res, dict) else {}
        for sl in _list(_get(rl, "scopeLogs", "scope_logs")):
            if not isinstance(sl, dict):
                continue
            scope = _json_scope(sl.get("scope"))
            for r in _list(_get(sl, "logRecords", "log_records")):
                if isinstance(r, dict):
                    yield json_log(r, resource, scope)


# ---------------------------------------------------------------------------------------------
# protobuf


class _PbValues:
    """AnyValues to Python values, noting any a screen of the request's bytes cannot vouch for
    (``unscreened``): bytes, kept as base64 text the request does not hold; a backspace inside
    a structured value, which the flat conventions write back out as JSON text, where it becomes
    `\\b`, the start of `bearer` (OTLP/JSON holds that escape already; protobuf one raw byte)."""

    __slots__ = ("unscreened",)

    def __init__(self) -> None:
        self.unscreened = False

    def value(self, v: AnyValue) -> Any:
        kind = v.WhichOneof("value")
        if kind == "string_value":
            return v.string_value
        if kind == "int_value":
            return v.int_value
        if kind == "double_value":
            return v.double_value
        if kind == "bool_value":
            return v.bool_value
        if kind == "array_value":
            out: list[Any] = []
            for x in v.array_value.values:
                s = x.string_value  # the common element, read without WhichOneof (see attrs)
                if s:
                    if "\x08" in s:
                        self.unscreened = True
                    out.append(s)
                else:
                    out.append(self._nested(x))
            return out
        if kind == "kvlist_value":
            kvs: dict[str, Any] = {}
            for kv in v.kvlist_value.values:
                if "\x08" in kv.key:
                    self.unscreened = True
                kvs[kv.key] = self._nested(kv.value)
            return kvs
        if kind == "bytes_value":
            self.unscreened = True
            return base64.b64encode(v.bytes_value).decode("ascii")
        return None

    def _nested(self, v: AnyValue) -> Any:
        value = self.value(v)
        if type(value) is str and "\x08" in value:
            self.unscreened = True
        return value

    def attrs(self, kvs: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        value = self.value
        for kv in kvs:
            v = kv.value
            # A field of the oneof that reads non-zero is the one set: a read or two instead of
            # WhichOneof and a read, for the common kinds. Zeros and the rest take value().
            s = v.string_value
            if s:
                out[kv.key] = s
                continue
            n = v.int_value
            if n:
                out[kv.key] = n
                continue
            d = v.double_value
            out[kv.key] = d if d else value(v)
        return out


def pb_any_value(v: AnyValue) -> Any:
    return _PbValues().value(v)


def _pb_attrs(kvs: Any) -> dict[str, Any]:
    return _PbValues().attrs(kvs)


def _pb_id(b: bytes) -> str | None:
    return b.hex() if b and any(b) else None


def _pb_scope(scope: Any, values: _PbValues | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": scope.name, "version": scope.version}
    attrs = (values or _PbValues()).attrs(scope.attributes)
    if attrs:
        out["attributes"] = attrs
    return out


def iter_pb_spans(data: bytes) -> Iterator[Span]:
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise OTLPDecodeError(f"not an OTLP protobuf trace request: {e}") from None
    # One screen of the whole request stands for a screen of each span's fact.
    clean = screen(data) == CLEAN
    values = _PbValues()
    for rs in req.resource_spans:
        values.unscreened = False
        resource = values.attrs(rs.resource.attributes)
        resource_unscreened = values.unscreened
        for ss in rs.scope_spans:
            values.unscreened = resource_unscreened
            scope = _pb_scope(ss.scope, values)
            scope_unscreened = values.unscreened
            for s in ss.spans:
                values.unscreened = scope_unscreened
                st = s.status
                msg = st.message
                status: dict[str, Any] = (
                    {"code": int(st.code), "message": msg} if msg else {"code": int(st.code)}
                )
                attributes = values.attrs(s.attributes)
                evs = s.events
                # Most spans have no events: the guard spares them a comprehension's frame.
                events = (
                    [
                        {
                            "name": e.name,
                            "time_unix_nano": e.time_unix_nano or None,
                            "attributes": values.attrs(e.attributes),
                        }
                        for e in evs
                    ]
                    if evs
                    else []
                )
                tid, sid, pid = s.trace_id, s.span_id, s.parent_span_id
                # Positional, in Span's field order, and the ids inline (_pb_id): this runs
                # per span, where keyword matching and the calls were a tenth of the decode.
                yield Span(
                    tid.hex() if tid and any(tid) else None,
                    sid.hex() if sid and any(sid) else None,
                    pid.hex() if pid and any(pid) else None,
                    s.name,
                    int(s.kind),
                    s.start_time_unix_nano or None,
                    s.end_time_unix_nano or None,
                    attributes,
                    events,
                    status,
                    resource,
                    scope,
                    clean and not values.unscreened,
                )


def iter_pb_logs(data: bytes) -> Iterator[LogRecord]:
    req = ExportLogsServiceRequest()
    try:
        req.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise OTLPDecodeError(f"not an OTLP protobuf logs request: {e}") from None
    for rl in req.resource_logs:
        resource = _pb_attrs(rl.resource.attributes)
        for sl in rl.scope_logs:
            scope = _pb_scope(sl.scope)
            for r in sl.log_records:
                attrs = _pb_attrs(r.attributes)
                name = r.event_name or attrs.get("event.name")
                yield LogRecord(
                    trace_id=_pb_id(r.trace_id),
                    span_id=_pb_id(r.span_id),
                    event_name=name if isinstance(name, str) and name else None,
                    time_unix_nano=r.time_unix_nano or None,
                    observed_time_unix_nano=r.observed_time_unix_nano or None,
                    severity_number=int(r.severity_number),
                    body=pb_any_value(r.body) if r.HasField("body") else None,
                    attributes=attrs,
                    resource=resource,
                    scope=scope,
                )
