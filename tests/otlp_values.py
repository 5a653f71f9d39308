"""Python values as OTLP attribute values, in OTLP/JSON and in protobuf, for building test
payloads: None is an empty AnyValue, bytes a bytes value, lists arrays, dicts kvlists."""

from __future__ import annotations

import base64
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def json_value(v: Any) -> dict[str, Any]:
    if v is None:
        return {}
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, bytes):
        return {"bytesValue": base64.b64encode(v).decode()}
    if isinstance(v, list):
        return {"arrayValue": {"values": [json_value(x) for x in v]}}
    assert isinstance(v, dict), v
    return {"kvlistValue": {"values": json_attrs(v)}}


def json_attrs(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": json_value(v)} for k, v in d.items()]


def pb_value(v: Any) -> AnyValue:
    out = AnyValue()
    if isinstance(v, bool):
        out.bool_value = v
    elif isinstance(v, int):
        out.int_value = v
    elif isinstance(v, float):
        out.double_value = v
    elif isinstance(v, str):
        out.string_value = v
    elif isinstance(v, bytes):
        out.bytes_value = v
    elif isinstance(v, list):
        out.array_value.values.extend(pb_value(x) for x in v)
    elif isinstance(v, dict):
        out.kvlist_value.values.extend(pb_attrs(v))
    return out


def pb_attrs(d: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=pb_value(v)) for k, v in d.items()]
