"""OTLP decoding: ExportTraceServiceRequest / ExportLogsServiceRequest, protobuf or OTLP/JSON,
into plain spans and log records whose attribute values are ordinary Python values.

OTLP/JSON is decoded by hand: ids are hex there (protobuf's JSON mapping would say base64), enums
may be integers or names, and 64-bit integers may be strings. Both encodings give equal objects,
so a fact does not depend on the wire format it arrived in.

A request is decoded unit by unit (a span, a log record): one unit that cannot be taken (a JSON
entry that is not an object, protobuf bytes that do not parse, a value nested deeper than
``MAX_DEPTH``) is rejected on its own, named by where it was, and the rest are taken. Text that
is not valid Unicode (invalid UTF-8 in protobuf, a lone surrogate escape or a stray byte in
JSON) is kept with each bad character replaced by U+FFFD, and counted on the unit
(``repaired``). Only a body whose structure around the units is broken is refused whole.

One module past 500 lines: the protobuf and the JSON readings must give the same spans and log
records, unit by unit, under the same limits; they are kept side by side so that one cannot
change without the other in view.
"""

from __future__ import annotations

import base64
import binascii
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, Generic, NamedTuple, TypeVar

import msgspec
import orjson

from lithify.core.text import fix_text, loads
from lithify.translate.redact import CLEAN, screen

if TYPE_CHECKING:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import Message
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

_SPAN_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


MAX_NAMED = 100  # rejected units named one by one in a Decoded; the rest are counted
# Array and key-value list levels one attribute value (or log body) may nest. Protobuf's parser
# stops at 100 message levels (two per value level, and up to seven around the value), so a
# value this deep parses in either encoding and the limit is the same for both.
MAX_DEPTH = 32


class OTLPDecodeError(ValueError):
    """The bytes are not an OTLP request of the expected kind; the message says where."""


class _TooDeep(Exception):
    """A value nested deeper than MAX_DEPTH: its unit is rejected."""


class Span(msgspec.Struct):
    trace_id: str | None
    span_id: str | None
    parent_span_id: str | None
    name: str
    kind: int
    start_time_unix_nano: int | None
    end_time_unix_nano: int | None
    attributes: dict[str, Any]
    events: list[dict[str, Any]] = msgspec.field(default_factory=list)
    status: dict[str, Any] = msgspec.field(default_factory=dict)
    resource: dict[str, Any] = msgspec.field(default_factory=dict)
    scope: dict[str, Any] = msgspec.field(default_factory=dict)
    # The request bytes the span came from were screened clean (redact.CLEAN) and the span holds
    # nothing those bytes do not (no base64 of protobuf bytes): its fact needs no screen of its own.
    screened: bool = False
    # Strings whose invalid text (invalid UTF-8, lone surrogates) was replaced by U+FFFD.
    repaired: int = 0

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


class LogRecord(msgspec.Struct):
    trace_id: str | None
    span_id: str | None
    event_name: str | None
    time_unix_nano: int | None
    observed_time_unix_nano: int | None
    severity_number: int
    body: Any
    attributes: dict[str, Any]
    resource: dict[str, Any] = msgspec.field(default_factory=dict)
    scope: dict[str, Any] = msgspec.field(default_factory=dict)
    repaired: int = 0  # as on Span

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
            f = float(v)  # "NaN", "Infinity", "-Infinity" per the proto3 JSON mapping
        except ValueError:
            return v
        if f - f:  # NaN or ±Infinity (x - x is 0.0 for any other)
            _decoded.non_finite = True
        return f
    return v


# Per thread (the receiver decodes in several): whether a decode made a NaN or ±Infinity.
_decoded = threading.local()


def non_finite_decoded() -> bool:
    """Whether this thread's OTLP/JSON decoding made a NaN or ±Infinity double since the last
    call (which clears it). Only the string form of a doubleValue makes one: a JSON number
    cannot, and msgspec and orjson refuse one out of range. The fact-file writer skips its
    search for them in the facts of a request that made none (core/factfile.py)."""
    seen = getattr(_decoded, "non_finite", False)
    _decoded.non_finite = False
    return seen


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


def _leaf(v: Any, depth: int) -> Any:
    """A value kept as OTLP/JSON gave it (a leaf of another type than its key says, say a list
    under ``stringValue``): held to the same depth limit as any value."""
    if type(v) is list:
        if depth >= MAX_DEPTH:
            raise _TooDeep
        for x in v:
            _leaf(x, depth + 1)
    elif type(v) is dict:
        if depth >= MAX_DEPTH:
            raise _TooDeep
        for x in v.values():
            _leaf(x, depth + 1)
    return v


def json_any_value(v: Any, depth: int = 0) -> Any:
    """One OTLP/JSON AnyValue to a Python value; raises _TooDeep past MAX_DEPTH levels."""
    if not isinstance(v, dict):
        return _leaf(v, depth)
    if "stringValue" in v:
        return _leaf(v["stringValue"], depth)
    if "string_value" in v:
        return _leaf(v["string_value"], depth)
    for k in ("intValue", "int_value"):
        if k in v:
            n = _json_int(v[k])
            return _leaf(v[k], depth) if n is None else n
    for k in ("doubleValue", "double_value"):
        if k in v:
            return _leaf(_json_double(v[k]), depth)
    for k in ("boolValue", "bool_value"):
        if k in v:
            return _leaf(v[k], depth)
    for k in ("arrayValue", "array_value"):
        if k in v:
            if depth >= MAX_DEPTH:
                raise _TooDeep
            inner = v[k] if isinstance(v[k], dict) else {}
            vals = inner.get("values") or []
            if not isinstance(vals, list):
                return []
            return [json_any_value(x, depth + 1) for x in vals]
    for k in ("kvlistValue", "kvlist_value"):
        if k in v:
            if depth >= MAX_DEPTH:
                raise _TooDeep
            inner = v[k] if isinstance(v[k], dict) else {}
            return json_attributes(inner.get("values"), depth + 1)
    for k in ("bytesValue", "bytes_value"):
        if k in v:
            return _leaf(v[k], depth)  # already base64 text in JSON; kept as such
    return None  # an empty AnyValue


def json_attributes(kvs: Any, depth: int = 0) -> dict[str, Any]:
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
                    out[key] = json_any_value(v, depth)
    return out


def _text(v: Any) -> str:
    """A field protobuf holds as a string; anything else reads as its default, ""."""
    return v if isinstance(v, str) else ""


def _json_scope(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        obj = {}  # protobuf has no "absent" scope: it reads as an empty one
    scope: dict[str, Any] = {"name": _text(obj.get("name")), "version": _text(obj.get("version"))}
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
    if _text(status_in.get("message")):
        status["message"] = status_in["message"]
    events = []
    for e in _list(s.get("events")):
        if isinstance(e, dict):
            events.append(
                {
                    "name": _text(e.get("name")),
                    "time_unix_nano": _json_int(_get(e, "timeUnixNano", "time_unix_nano")),
                    "attributes": json_attributes(e.get("attributes")),
                }
            )
    return Span(
        trace_id=_json_id(_get(s, "traceId", "trace_id")),
        span_id=_json_id(_get(s, "spanId", "span_id")),
        parent_span_id=_json_id(_get(s, "parentSpanId", "parent_span_id")),
        name=_text(s.get("name")),
        kind=_json_enum(s.get("kind"), _SPAN_KINDS),
        start_time_unix_nano=_json_int(_get(s, "startTimeUnixNano", "start_time_unix_nano")),
        end_time_unix_nano=_json_int(_get(s, "endTimeUnixNano", "end_time_unix_nano")),
        attributes=json_attributes(s.get("attributes")),
        events=events,
        status=status,
        resource=resource,
        scope=scope,
    )


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


def is_bare_span(doc: dict[str, Any]) -> bool:
    """One OTLP/JSON Span object on its own (trace stores and test goldens keep them so)."""
    return isinstance(doc.get("attributes"), list) and (
        "spanId" in doc or "span_id" in doc or "name" in doc
    )


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


def _typed_value(v: _TAnyValue | None, depth: int = 0) -> Any:
    """json_any_value for a typed AnyValue: the same precedence, conversions and depth limit."""
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
        if depth >= MAX_DEPTH:
            raise _TooDeep
        return [_typed_value(x, depth + 1) for x in v.array_value.values]
    if v.kvlist_value is not _U:
        if depth >= MAX_DEPTH:
            raise _TooDeep
        return _typed_attributes(v.kvlist_value.values, depth + 1)
    if v.bytes_value is not _U:
        return v.bytes_value
    return None


def _typed_attributes(kvs: list[_TKeyValue], depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    unset = _U
    for kv in kvs:
        v = kv.value
        if v is not None and (s := v.string_value) is not unset:
            out[kv.key] = s
        else:
            out[kv.key] = _typed_value(v, depth)
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
    ``json_spans(orjson.loads(data))`` gives; None when ``data`` needs that path (it is in
    another form, or a unit must be rejected)."""
    try:
        req = _TRACE_REQUEST.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    # One screen of the whole request stands for a screen of each span's fact.
    screened = screen(data) == CLEAN
    spans = []
    try:
        for rs in req.resource_spans:
            resource = _typed_attributes(rs.resource.attributes) if rs.resource is not None else {}
            for ss in rs.scope_spans:
                scope = _typed_scope(ss.scope)
                for s in ss.spans:
                    spans.append(_typed_span(s, resource, scope, screened))
    except _TooDeep:
        return None
    return spans


# ---------------------------------------------------------------------------------------------
# protobuf


class _PbValues:
    """AnyValues to Python values, noting any a screen of the request's bytes cannot vouch for
    (``unscreened``): bytes, kept as base64 text the request does not hold; a backspace inside
    a structured value, which the flat conventions write back out as JSON text, where it becomes
    `\\b`, the start of `bearer` (OTLP/JSON holds that escape already; protobuf one raw byte).
    Raises _TooDeep past MAX_DEPTH levels, as the JSON reader does."""

    __slots__ = ("depth", "unscreened")

    def __init__(self) -> None:
        self.unscreened = False
        self.depth = 0  # array / kvlist levels around the value being read

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
            self._enter()
            out: list[Any] = []
            for x in v.array_value.values:
                s = x.string_value  # the common element, read without WhichOneof (see attrs)
                if s:
                    if "\x08" in s:
                        self.unscreened = True
                    out.append(s)
                else:
                    out.append(self._nested(x))
            self.depth -= 1
            return out
        if kind == "kvlist_value":
            self._enter()
            kvs: dict[str, Any] = {}
            for kv in v.kvlist_value.values:
                if "\x08" in kv.key:
                    self.unscreened = True
                kvs[kv.key] = self._nested(kv.value)
            self.depth -= 1
            return kvs
        if kind == "bytes_value":
            self.unscreened = True
            return base64.b64encode(v.bytes_value).decode("ascii")
        return None

    def _enter(self) -> None:
        if self.depth >= MAX_DEPTH:
            self.depth = 0  # the unit is rejected; the next one starts afresh
            raise _TooDeep
        self.depth += 1

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


def _pb_span(
    s: Any, resource: dict[str, Any], scope: dict[str, Any], values: _PbValues, clean: bool
) -> Span:
    """One protobuf Span; ``values.unscreened`` holds its resource's and scope's state."""
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
    # Positional, in Span's field order, and the ids inline (_pb_id): this runs per span, where
    # keyword matching and the calls were a tenth of the decode.
    return Span(
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


def _pb_log(
    r: Any, resource: dict[str, Any], scope: dict[str, Any], values: _PbValues, clean: bool
) -> LogRecord:
    attrs = values.attrs(r.attributes)
    name = r.event_name or attrs.get("event.name")
    return LogRecord(
        trace_id=_pb_id(r.trace_id),
        span_id=_pb_id(r.span_id),
        event_name=name if isinstance(name, str) and name else None,
        time_unix_nano=r.time_unix_nano or None,
        observed_time_unix_nano=r.observed_time_unix_nano or None,
        severity_number=int(r.severity_number),
        body=values.value(r.body) if r.HasField("body") else None,
        attributes=attrs,
        resource=resource,
        scope=scope,
    )


# ---------------------------------------------------------------------------------------------
# one request, unit by unit

U = TypeVar("U", Span, LogRecord)


class Decoded(msgspec.Struct, Generic[U]):
    """The units of one request that could be taken, and the ones that could not: the first
    ``MAX_NAMED`` named (where each was in the request, and why), the rest only counted."""

    units: list[U] = msgspec.field(default_factory=list)
    rejected: list[str] = msgspec.field(default_factory=list)
    unnamed: int = 0  # rejected units past the named ones

    @property
    def rejected_count(self) -> int:
        return len(self.rejected) + self.unnamed

    def reject(self, why: str) -> None:
        if len(self.rejected) < MAX_NAMED:
            self.rejected.append(why)
        else:
            self.unnamed += 1


class TooManyUnits(OTLPDecodeError):
    """A request with more spans or log records (and groups of them) than it may hold."""


def _over(n: int, most: int | None, layout: _Layout) -> None:
    if most is not None and n > most:
        raise TooManyUnits(
            f"the request holds more than {most} {layout.what} messages (resources, scopes and "
            f"{layout.unit}s): send smaller batches"
        )


class _Layout(NamedTuple):
    """How one signal's request nests its units, by field name in each encoding."""

    what: str  # "trace", "logs"
    unit: str  # "span", "log record"
    pb: tuple[str, str, str]  # the repeated fields, outermost first
    outer: tuple[str, ...]  # OTLP/JSON keys, each level's accepted spellings
    inner: tuple[str, ...]
    leaf: tuple[str, ...]
    json_unit: Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], Any]
    pb_unit: Callable[..., Any]


_TRACES = _Layout(
    "trace", "span",
    ("resource_spans", "scope_spans", "spans"),
    ("resourceSpans", "resource_spans"),
    ("scopeSpans", "scope_spans", "instrumentationLibrarySpans"),
    ("spans",),
    json_span, _pb_span,
)  # fmt: skip
_LOGS = _Layout(
    "logs", "log record",
    ("resource_logs", "scope_logs", "log_records"),
    ("resourceLogs", "resource_logs"),
    ("scopeLogs", "scope_logs"),
    ("logRecords", "log_records"),
    json_log, _pb_log,
)  # fmt: skip


# -- protobuf --------------------------------------------------------------------------------
#
# A request that parses whole is read as it is. One that does not (a string with invalid UTF-8,
# a span nested past the parser's depth, a damaged span) is read level by level with variants
# of the OTLP messages built from their own descriptors: "shallow" ones whose message fields
# are bytes (a length-delimited field is the same on the wire either way), so that each unit's
# bytes are parsed on their own; "lenient" ones whose strings are bytes, so that a unit with
# invalid UTF-8 can be read, its text repaired, and parsed again as itself.


class _Messages(NamedTuple):
    """One signal's protobuf message classes, outermost first."""

    request: type[Message]  # ExportTraceServiceRequest / ExportLogsServiceRequest
    group: type[Message]  # ResourceSpans / ResourceLogs
    scope_group: type[Message]  # ScopeSpans / ScopeLogs
    message: type[Message]  # Span / LogRecord


class _Protobuf:
    """protobuf, the OTLP messages and their variants, imported and built on the first protobuf
    request: a process that reads only OTLP/JSON (a small `lithify convert`) does not pay for
    them."""

    def __init__(self) -> None:
        from google.protobuf import descriptor_pb2
        from google.protobuf.descriptor import FieldDescriptor
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
        from opentelemetry.proto.logs.v1 import logs_pb2
        from opentelemetry.proto.resource.v1.resource_pb2 import Resource
        from opentelemetry.proto.trace.v1 import trace_pb2

        self.DecodeError = DecodeError
        self.TYPE_MESSAGE = FieldDescriptor.TYPE_MESSAGE
        self.Resource = Resource
        self.InstrumentationScope = InstrumentationScope
        self.messages = {
            "trace": _Messages(
                trace_service_pb2.ExportTraceServiceRequest,
                trace_pb2.ResourceSpans,
                trace_pb2.ScopeSpans,
                trace_pb2.Span,
            ),
            "logs": _Messages(
                logs_service_pb2.ExportLogsServiceRequest,
                logs_pb2.ResourceLogs,
                logs_pb2.ScopeLogs,
                logs_pb2.LogRecord,
            ),
        }
        kinds = descriptor_pb2.FieldDescriptorProto
        self.shallow, _ = self._variants(
            lambda f: f.type in (kinds.TYPE_STRING, kinds.TYPE_MESSAGE)
        )
        self.lenient, self.lenient_strings = self._variants(lambda f: f.type == kinds.TYPE_STRING)

    def _variants(self, retype: Callable[[descriptor_pb2.FieldDescriptorProto], bool]) -> Any:
        """A pool of the OTLP request messages whose fields ``retype`` selects are bytes;
        returns (the variant class of a message class, the full names of the fields retyped)."""
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()
        retyped: set[str] = set()

        def walk(prefix: str, types: Any) -> None:
            for m in types:
                name = f"{prefix}.{m.name}"
                for f in m.field:
                    if retype(f):
                        retyped.add(f"{name}.{f.name}")
                        f.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                        f.ClearField("type_name")
                walk(name, m.nested_type)

        def add(file: Any) -> None:
            if file.name in added:
                return
            for dep in file.dependencies:
                add(dep)
            proto = descriptor_pb2.FileDescriptorProto()
            file.CopyToProto(proto)
            walk(proto.package, proto.message_type)
            pool.Add(proto)
            added.add(file.name)

        for messages in self.messages.values():
            add(messages.request.DESCRIPTOR.file)

        def variant(cls: type[Message]) -> type[Message]:
            return message_factory.GetMessageClass(
                pool.FindMessageTypeByName(cls.DESCRIPTOR.full_name)
            )

        return variant, retyped


_PROTOBUF: list[_Protobuf] = []
_PROTOBUF_LOCK = threading.Lock()


def _protobuf() -> _Protobuf:
    if not _PROTOBUF:
        with _PROTOBUF_LOCK:  # one set of variant classes, whichever thread asks first
            if not _PROTOBUF:
                _PROTOBUF.append(_Protobuf())
    return _PROTOBUF[0]


def _valid_utf8(b: bytes) -> bytes | None:
    """``b`` with each invalid UTF-8 sequence replaced by U+FFFD; None when it was valid."""
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return b.decode("utf-8", "replace").encode("utf-8")
    return None


def _repair_pb(msg: Any) -> int:
    """Repair the text of a lenient message in place; the number of strings repaired."""
    pb = _protobuf()
    n = 0
    for fd, value in msg.ListFields():
        if fd.type == pb.TYPE_MESSAGE:
            for m in value if fd.is_repeated else (value,):
                n += _repair_pb(m)
        elif fd.full_name in pb.lenient_strings:
            if fd.is_repeated:
                for i, b in enumerate(value):
                    if (fixed := _valid_utf8(b)) is not None:
                        value[i] = fixed
                        n += 1
            elif (fixed := _valid_utf8(value)) is not None:
                setattr(msg, fd.name, fixed)
                n += 1
    return n


def _why(e: Exception, what: str) -> str:
    if "depth" in str(e).lower():
        return f"a value nested deeper than {MAX_DEPTH} levels"
    return f"not a valid {what} message"


def _salvage(cls: type[Message], data: bytes) -> tuple[Any, int] | str:
    """One unit (or resource, scope) parsed on its own: (the message, strings repaired), or
    why it cannot be read."""
    what = cls.DESCRIPTOR.name
    pb = _protobuf()
    try:
        return cls.FromString(data), 0
    except pb.DecodeError as e:
        if "UTF-8" not in str(e):
            return _why(e, what)
    try:
        lenient = pb.lenient(cls).FromString(data)
    except pb.DecodeError as e:
        return _why(e, what)
    n = _repair_pb(lenient)
    try:
        return cls.FromString(lenient.SerializeToString()), n
    except pb.DecodeError as e:  # nothing left to repair: the bytes are damaged otherwise
        return _why(e, what)


class _Group(NamedTuple):
    """The units under one resource and scope: each a message, or why it could not be read."""

    where: str  # e.g. "resource_spans[0].scope_spans[1]"
    resource: tuple[Any, int] | str  # (the message, strings repaired), or why not
    scope: tuple[Any, int] | str
    units: Any  # a sequence of messages and reasons
    repaired: list[int] | None  # strings repaired in each unit; None: none in any


def _whole_groups(req: Any, layout: _Layout) -> Iterator[_Group]:
    outer, inner, leaf = layout.pb
    for i, rs in enumerate(getattr(req, outer)):
        for j, ss in enumerate(getattr(rs, inner)):
            where = f"{outer}[{i}].{inner}[{j}]"
            yield _Group(where, (rs.resource, 0), (ss.scope, 0), getattr(ss, leaf), None)


def _partial_groups(data: bytes, layout: _Layout) -> Iterator[_Group]:
    outer, inner, leaf = layout.pb
    pb = _protobuf()
    messages = pb.messages[layout.what]

    def parse(cls: type[Message], b: bytes, where: str) -> Any:
        try:
            return pb.shallow(cls).FromString(b)
        except pb.DecodeError:
            raise OTLPDecodeError(
                f"not an OTLP protobuf {layout.what} request: {where} is truncated or not a "
                f"{cls.DESCRIPTOR.name} message"
            ) from None

    req = parse(messages.request, data, "the body")
    for i, rs_bytes in enumerate(getattr(req, outer)):
        where = f"{outer}[{i}]"
        rs = parse(messages.group, rs_bytes, where)
        resource = _salvage(pb.Resource, rs.resource)
        for j, ss_bytes in enumerate(getattr(rs, inner)):
            w = f"{where}.{inner}[{j}]"
            ss = parse(messages.scope_group, ss_bytes, w)
            read = [_salvage(messages.message, b) for b in getattr(ss, leaf)]
            units = [u if isinstance(u, str) else u[0] for u in read]
            repaired = [0 if isinstance(u, str) else u[1] for u in read]
            scope = _salvage(pb.InstrumentationScope, ss.scope)
            yield _Group(w, resource, scope, units, repaired)


def _varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7


def _frames(data: bytes, start: int, end: int, field: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each length-delimited ``field`` between ``start`` and ``end``; stops
    quietly where the bytes are not protobuf (the parser says why later)."""
    i = start
    try:
        while i < end:
            tag, i = _varint(data, i)
            wire = tag & 7
            if wire == 0:
                _, i = _varint(data, i)
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            elif wire == 2:
                size, i = _varint(data, i)
                if tag >> 3 == field:
                    yield i, min(i + size, end)
                i += size
            else:
                return
    except IndexError:
        return


def _pb_messages(data: bytes, layout: _Layout, most: int) -> int:
    """Resources, scopes and units in a protobuf request, counted on the wire (the parser
    would make an object of each) up to one past ``most``."""
    n = 0
    for rs in _frames(data, 0, len(data), 1):
        n += 1
        for ss in _frames(data, *rs, 2):
            n += 1
            for _ in _frames(data, *ss, 2):
                n += 1
                if n > most:
                    return n
        if n > most:
            return n
    return n


def _pb_decode(data: bytes, layout: _Layout, most: int | None = None) -> Decoded[Any]:
    # Each message takes two bytes at least: a body that small holds no more than allowed.
    if most is not None and len(data) > 2 * most:
        _over(_pb_messages(data, layout, most), most, layout)
    pb = _protobuf()
    req = pb.messages[layout.what].request()
    try:
        req.ParseFromString(data)
        groups = _whole_groups(req, layout)
    except pb.DecodeError:
        groups = _partial_groups(data, layout)
    # One screen of the whole request stands for a screen of each unit's fact.
    clean = screen(data) == CLEAN
    values = _PbValues()
    out: Decoded[Any] = Decoded()
    leaf = layout.pb[2]
    read_unit = layout.pb_unit
    for g in groups:
        resource = scope = None
        why = g.resource if isinstance(g.resource, str) else g.scope
        if not isinstance(why, str):
            values.unscreened = False
            try:
                resource = values.attrs(g.resource[0].attributes)
                scope = _pb_scope(g.scope[0], values)
            except _TooDeep:
                why = f"a value nested deeper than {MAX_DEPTH} levels"
            else:
                why = ""
        if why:
            for k in range(len(g.units)):
                out.reject(f"{g.where}.{leaf}[{k}]: its resource or scope: {why}")
            continue
        around = values.unscreened
        base = g.resource[1] + g.scope[1]  # type: ignore[index]
        repaired = g.repaired
        for k, u in enumerate(g.units):
            if type(u) is str:
                out.reject(f"{g.where}.{leaf}[{k}]: {u}")
                continue
            values.unscreened = around
            n = base if repaired is None else base + repaired[k]
            try:
                unit = read_unit(u, resource, scope, values, clean and not n)
            except _TooDeep:
                out.reject(f"{g.where}.{leaf}[{k}]: a value nested deeper than {MAX_DEPTH} levels")
                continue
            if n:
                unit.repaired = n
            out.units.append(unit)
    return out


def pb_spans(data: bytes, most: int | None = None) -> Decoded[Span]:
    """The spans of a protobuf ExportTraceServiceRequest; raises OTLPDecodeError when the body
    is not one, TooManyUnits when it holds more than ``most`` messages."""
    return _pb_decode(data, _TRACES, most)


def pb_logs(data: bytes, most: int | None = None) -> Decoded[LogRecord]:
    """The log records of a protobuf ExportLogsServiceRequest; as ``pb_spans``."""
    return _pb_decode(data, _LOGS, most)


# -- OTLP/JSON -------------------------------------------------------------------------------


def _repaired(unit: U) -> U:
    n = 0
    for name in unit.__struct_fields__:
        if name not in ("screened", "repaired"):
            fixed, k = fix_text(getattr(unit, name))
            if k:
                setattr(unit, name, fixed)
                n += k
    unit.repaired = n
    return unit


def _kind(v: Any) -> str:
    if v is None or isinstance(v, bool):
        return orjson.dumps(v).decode()
    if isinstance(v, int | float):
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(v), type(v).__name__)


def _first(obj: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, Any]:
    for k in keys:
        v = obj.get(k)
        if v is not None:
            return k, v
    return keys[0], None


def _json_messages(groups: Any, layout: _Layout) -> int:
    """Resources, scopes and units in a request's groups, counted before any is decoded."""
    n = 0
    for rs in groups if isinstance(groups, list) else ():
        n += 1
        inner = _first(rs, layout.inner)[1] if isinstance(rs, dict) else None
        for ss in inner if isinstance(inner, list) else ():
            units = _first(ss, layout.leaf)[1] if isinstance(ss, dict) else None
            n += 1 + (len(units) if isinstance(units, list) else 0)
    return n


def _json_decode(doc: Any, layout: _Layout, repair: bool, most: int | None) -> Decoded[Any]:
    what = f"not an OTLP/JSON {layout.what} request"

    def shaped(v: Any, want: type, where: str) -> Any:
        if v is None:  # proto3 JSON: null is the field's default
            return want()
        if not isinstance(v, want):
            name = "a list" if want is list else "an object"
            raise OTLPDecodeError(f"{what}: {where} is {_kind(v)}, not {name}")
        return v

    if not isinstance(doc, dict):
        raise OTLPDecodeError(f"{what}: the request is {_kind(doc)}, not a JSON object")
    out: Decoded[Any] = Decoded()

    def take(where: str, u: Any, resource: dict[str, Any], scope: dict[str, Any]) -> None:
        if not isinstance(u, dict):
            out.reject(f"{where}: {_kind(u)}, not a JSON object")
            return
        try:
            unit = layout.json_unit(u, resource, scope)
        except _TooDeep:
            out.reject(f"{where}: a value nested deeper than {MAX_DEPTH} levels")
            return
        out.units.append(_repaired(unit) if repair else unit)

    key, groups = _first(doc, layout.outer)
    if groups is None:
        if layout is _TRACES and is_bare_span(doc):  # one span, as trace stores keep it
            take("the span", doc, {}, {})
            return out
        if doc:
            raise OTLPDecodeError(f"{what}: no {layout.outer[0]} list")
    if most is not None:
        _over(_json_messages(groups, layout), most, layout)
    for i, rs in enumerate(shaped(groups, list, key)):
        w = f"{key}[{i}]"
        rs = shaped(rs, dict, w)
        res = shaped(rs.get("resource"), dict, f"{w}.resource")
        ikey, inner = _first(rs, layout.inner)
        for j, ss in enumerate(shaped(inner, list, f"{w}.{ikey}")):
            w2 = f"{w}.{ikey}[{j}]"
            ss = shaped(ss, dict, w2)
            skey, sc = _first(ss, ("scope", "instrumentationLibrary"))
            sc = shaped(sc, dict, f"{w2}.{skey}")
            lkey, units = _first(ss, layout.leaf)
            units = shaped(units, list, f"{w2}.{lkey}")
            try:
                resource = json_attributes(res.get("attributes"))
                scope = _json_scope(sc)
            except _TooDeep:
                for k in range(len(units)):
                    out.reject(
                        f"{w2}.{lkey}[{k}]: its resource or scope: a value nested deeper than "
                        f"{MAX_DEPTH} levels"
                    )
                continue
            for k, u in enumerate(units):
                take(f"{w2}.{lkey}[{k}]", u, resource, scope)
    return out


def json_spans(doc: Any, repair: bool = False, most: int | None = None) -> Decoded[Span]:
    """The spans of a decoded OTLP/JSON trace request (or of a bare Span object); raises
    OTLPDecodeError, saying where, when ``doc`` is not one, and TooManyUnits when it holds more
    than ``most`` messages. ``repair``: the document may hold lone surrogates (``load_json``
    said so)."""
    return _json_decode(doc, _TRACES, repair, most)


def json_logs(doc: Any, repair: bool = False, most: int | None = None) -> Decoded[LogRecord]:
    """The log records of a decoded OTLP/JSON logs request; as ``json_spans``."""
    return _json_decode(doc, _LOGS, repair, most)


def load_json(data: bytes) -> tuple[Any, bool]:
    """(the document, whether it may hold invalid text). A body that orjson refuses for its
    text alone (a lone surrogate escape, bytes that are not UTF-8) is read by the standard
    library's decoder, which keeps the bad characters as lone surrogates for the units to
    repair (``core.text``). Raises OTLPDecodeError for a body that is not JSON."""
    try:
        return loads(data)
    except RecursionError:
        raise OTLPDecodeError("the body is not valid JSON: nested too deeply") from None
    except ValueError as e:
        raise OTLPDecodeError(f"the body is not valid JSON: {e}") from None


def decode_spans(data: bytes, encoding: str, most: int | None = None) -> Decoded[Span]:
    """The spans of a trace request body, ``encoding`` "protobuf" or "json"; raises
    OTLPDecodeError, saying where, when the body is not one, and TooManyUnits when it holds
    more than ``most`` messages (checked before they are decoded: a body of empty spans takes
    a few bytes each on the wire and hundreds decoded)."""
    if encoding == "protobuf":
        return pb_spans(data, most)
    # The typed decoder makes an object of each message before they can be counted: only when
    # the body cannot hold more (each message opens with a brace).
    if most is None or data.count(b"{") <= most:
        spans = decode_json_spans(data)
        if spans is not None:
            return Decoded(spans)
    return json_spans(*load_json(data), most=most)


def decode_logs(data: bytes, encoding: str, most: int | None = None) -> Decoded[LogRecord]:
    """The log records of a logs request body; as ``decode_spans``."""
    if encoding == "protobuf":
        return pb_logs(data, most)
    return json_logs(*load_json(data), most=most)
