"""The fast paths of OTLP conversion give exactly what the general paths give.

The semconv message fast path and the OTLP/JSON decode from bytes (typed msgspec structs) must
build what the general walks build on every input, taking the general path whenever they cannot
tell; a screen of a whole request must never let a credential through.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import orjson
from hypothesis import given
from hypothesis import strategies as st

from lithify.ingest.files import translate_json
from lithify.model import InferenceCall, TextPart, encode
from lithify.translate import genai, redact, translate_document
from lithify.translate._common import Degradations
from lithify.translate.otlp import (
    OTLPDecodeError,
    Span,
    decode_json_spans,
    json_spans,
    pb_spans,
)
from lithify.translate.redact import CLEAN, ESCAPED, SUSPECT, screen
from lithify.translate.telemetry import translate_span
from tests.conftest import CORPUS

ROLES = (["system", "user", "assistant", "tool"], ["developer", "User", " model ", "", None, 3])
TEXTS = st.sampled_from(["", "hi", "sk-", "x" * 40, "é😀", "\\u0073", "\x00"]) | st.text(max_size=8)
# Values of free shape, including the ones msgspec and orjson read differently (big integers,
# out-of-range floats), spliced in as raw JSON through a placeholder string.
ODD_NUMBERS = ["1e400", "-1e400", "123456789012345678901234567890", "1.5e-400", "-0", "1E2"]
PLACEHOLDER = "\x01odd\x01"
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXTS
    | st.sampled_from([PLACEHOLDER, "x", 1]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=6,
)
IDS = (["call_1", "call_2", "x"], ["", None, 7])


RARELY = st.sampled_from([False] * 9 + [True])  # hypothesis favours 0 in integers()


def _rarely(draw: Any) -> bool:
    return bool(draw(RARELY))


def _pick(draw: Any, choices: tuple[list[Any], list[Any]]) -> Any:
    """One of the usual values, or rarely an odd one."""
    return draw(st.sampled_from(choices[1] if _rarely(draw) else choices[0]))


def _maybe(draw: Any, d: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` most of the time (absent sometimes)."""
    if not _rarely(draw):
        d[key] = value


@st.composite
def part(draw: Any) -> Any:
    kind = _pick(
        draw,
        (
            ["text", "reasoning", "tool_call", "tool_call_response"],
            ["uri", None, "x", "thinking", "input_text"],
        ),
    )
    p: dict[str, Any] = {} if kind is None else {"type": kind}
    if kind in ("text", "reasoning", None, "x", "uri"):
        _maybe(draw, p, "content", draw(JSON if _rarely(draw) else TEXTS))
    elif kind == "tool_call":
        _maybe(draw, p, "id", _pick(draw, IDS))
        _maybe(draw, p, "name", _pick(draw, (["f", "g"], ["", None, 1])))
        args = JSON | st.sampled_from(['{"a":1}', "no"])
        _maybe(draw, p, "arguments", draw(args if _rarely(draw) else st.dictionaries(TEXTS, JSON)))
    else:
        _maybe(draw, p, "id", _pick(draw, IDS))
        _maybe(draw, p, "response", draw(JSON))
        if _rarely(draw):
            p["result"] = draw(JSON)
    if _rarely(draw):
        p[draw(st.sampled_from(["signature", "name", "extra", "text", "thinking"]))] = draw(JSON)
    if _rarely(draw):
        return draw(TEXTS)  # a bare string part
    return p


@st.composite
def message(draw: Any) -> Any:
    m: dict[str, Any] = {}
    _maybe(draw, m, "role", _pick(draw, ROLES))
    if not _rarely(draw):
        m["parts"] = draw(st.lists(part(), max_size=4))
    else:
        m["content"] = draw(TEXTS)
    if draw(st.booleans()):
        m["finish_reason"] = _pick(draw, (["stop", "tool_calls", "END_TURN", None], ["", 2]))
    if _rarely(draw):
        m["name"] = draw(JSON)
    return m


def _text(draw: Any, value: Any) -> Any:
    """The JSON text of an attribute, with odd numbers spliced in; or, rarely, a raw value."""
    if _rarely(draw):
        return value  # a structured AnyValue, not a JSON string
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    odd = json.dumps(PLACEHOLDER)
    while odd in text:
        text = text.replace(odd, draw(st.sampled_from(ODD_NUMBERS)), 1)
    if _rarely(draw):
        text = text[: draw(st.integers(0, len(text)))]  # truncated
    return text


@st.composite
def attributes(draw: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    if draw(st.booleans()):
        attrs[genai.INPUT] = _text(draw, draw(st.lists(message(), max_size=4)))
    if draw(st.booleans()):
        attrs[genai.OUTPUT] = _text(draw, draw(st.lists(message(), max_size=3)))
    if draw(st.integers(0, 3)) == 0:
        system = draw(st.lists(part(), max_size=2) | TEXTS)
        attrs[genai.SYSTEM] = system if isinstance(system, str) else _text(draw, system)
    if draw(st.booleans()):
        reasons = draw(st.lists(st.sampled_from(["stop", "length", "tool_calls", 4]), max_size=3))
        attrs["gen_ai.response.finish_reasons"] = reasons
    if draw(st.integers(0, 3)) == 0:
        attrs["gen_ai.request.choice.count"] = draw(st.sampled_from([1, 2, "3"]))
    return attrs


def _both(attrs: dict[str, Any]) -> tuple[Any, Any]:
    fast, general = Degradations(), Degradations()
    a = genai._attribute_content(attrs, fast, "t:s", fast=True)
    b = genai._attribute_content(attrs, general, "t:s", fast=False)
    return (a, dict(fast)), (b, dict(general))


@given(attributes())
def test_fast_path_gives_what_the_general_path_gives(attrs: dict[str, Any]) -> None:
    fast, general = _both(attrs)
    assert fast == general


CANONICAL_PARTS = st.one_of(
    st.builds(lambda t: {"type": "text", "content": t}, TEXTS),
    st.builds(lambda t: {"type": "reasoning", "content": t}, TEXTS),
    st.builds(
        lambda i, a: {"type": "tool_call", "id": f"c{i}", "name": "f", "arguments": a},
        st.integers(0, 3),
        st.dictionaries(TEXTS, JSON.filter(lambda v: v != PLACEHOLDER), max_size=2),
    ),
    st.builds(
        lambda i, r: {"type": "tool_call_response", "id": f"c{i}", "response": r},
        st.integers(0, 3),
        JSON.filter(lambda v: v != PLACEHOLDER),
    ),
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["system", "user", "assistant", "tool"]),
                "parts": st.lists(CANONICAL_PARTS, max_size=4),
            }
        ),
        max_size=4,
    )
)
def test_messages_in_the_conventions_shape_take_the_fast_path(messages: list[Any]) -> None:
    attrs = {genai.INPUT: json.dumps(messages), genai.OUTPUT: "[]"}
    assert genai._fast_content(attrs, Degradations()) is not None
    fast, general = _both(attrs)
    assert fast == general


def test_odd_values_leave_the_fast_path() -> None:
    """Values orjson refuses (msgspec alone would take them) give the general path's answer."""
    for value in ("1e400", "[1e400]", '{"a": 1e400}'):
        args = '{"role":"assistant","parts":[{"type":"tool_call","id":"c","name":"f","arguments":'
        attrs = {genai.INPUT: f"[{args}{value}}}]}}]"}
        assert genai._fast_content(attrs, Degradations()) is None
        fast, general = _both(attrs)
        assert fast == general
        assert fast[1] == {"malformed_messages": 1}
    big = '[{"role":"tool","parts":[{"type":"tool_call_response","id":"c","response":%s}]}]'
    attrs = {genai.INPUT: big % "123456789012345678901234567890"}
    content = genai._fast_content(attrs, Degradations())
    assert content is not None
    assert content.input_messages[0].parts[0].result == 1.2345678901234568e29  # as orjson reads


def _call(args: str) -> str:
    return f'{{"type":"tool_call","id":"c1","name":"f"{args}}}'


def _messages(role: str, *parts: str, extra: str = "") -> str:
    return '[{{"role":"{}","parts":[{}]{}}}]'.format(role, ",".join(parts), extra)


RESPONSE = '{"type":"tool_call_response","id":"c1"%s}'
TEXT = '{"type":"text","content":"%s"}'
FAST_EDGES = [
    {genai.INPUT: _messages("User", TEXT % "a")},
    {genai.INPUT: _messages(" model ", TEXT % "a")},
    {
        genai.INPUT: _messages(
            "developer", TEXT % "a", TEXT % "", '{"type":"reasoning","content":""}'
        )
    },
    {genai.INPUT: _messages("Critic", TEXT % "a")},
    {genai.INPUT: _messages("tool", RESPONSE % ',"response":1,"result":2')},
    {genai.INPUT: _messages("tool", RESPONSE % ',"result":2,"response":1')},
    {genai.INPUT: _messages("tool", RESPONSE % ',"result":"r"')},
    {genai.INPUT: _messages("tool", RESPONSE % ',"response":null')},
    {genai.INPUT: _messages("tool", RESPONSE % "")},
    {genai.INPUT: _messages("user", RESPONSE % ',"response":1', TEXT % "a")},
    {genai.INPUT: _messages("assistant", TEXT % "a", _call(""), RESPONSE % ',"response":1')},
    {genai.INPUT: _messages("assistant", _call(',"arguments":null'), _call(',"arguments":""'))},
    {genai.INPUT: _messages("assistant", _call(',"arguments":"{\\"a\\":1}"'))},
    {genai.INPUT: _messages("assistant", _call(',"arguments":"no"'), _call(',"arguments":[1]'))},
    {genai.INPUT: _messages("assistant", _call(',"arguments":{"a":1},"arguments":{"b":2}'))},
    {
        genai.OUTPUT: _messages("assistant", TEXT % "a"),
        "gen_ai.response.finish_reasons": ["length", "stop"],
    },
    {
        genai.OUTPUT: '[{"role":"assistant","parts":[]},{"role":"assistant","parts":[]},'
        '{"role":"assistant","parts":[],"finish_reason":"END_TURN"}]',
        "gen_ai.response.finish_reasons": ["tool_calls", 4],
    },
    {
        genai.OUTPUT: '[{{"role":"assistant","parts":[{}]}},{{"role":"assistant","parts":[{}]}}]'.format(
            TEXT % "a", TEXT % "b"
        ),
        "gen_ai.request.choice.count": 2,
    },
    {
        genai.OUTPUT: '[{{"role":"assistant","parts":[{}]}},{{"role":"assistant","parts":[{}]}}]'.format(
            TEXT % "a", TEXT % "b"
        ),
        "gen_ai.response.finish_reasons": '["stop"]',
    },
    {genai.SYSTEM: "  plain text, kept as sent"},
    {genai.SYSTEM: "[%s]" % (TEXT % "s")},
]
GENERAL_EDGES = [
    {genai.INPUT: _messages("assistant", '{"type":"tool_call","name":"f"}')},
    {genai.INPUT: _messages("assistant", '{"type":"tool_call","id":"","name":"f"}')},
    {genai.INPUT: _messages("user", '{"type":"text","content":"a","x":1e400}')},
    {genai.INPUT: _messages("user", TEXT % "a", extra=',"name":"bob"')},
    {genai.INPUT: '{"role":"user","parts":[]}'},
    {genai.INPUT: _messages("", TEXT % "a")},
    {genai.SYSTEM: '{"parts":[%s]}' % (TEXT % "s")},
    {genai.SYSTEM: "[1e400]"},
]


def test_edge_shapes_give_what_the_general_path_gives() -> None:
    for attrs in FAST_EDGES:
        assert genai._fast_content(attrs, Degradations()) is not None, attrs
        fast, general = _both(attrs)
        assert fast == general, attrs
    for attrs in GENERAL_EDGES:
        assert genai._fast_content(attrs, Degradations()) is None, attrs
        fast, general = _both(attrs)
        assert fast == general, attrs


# ---------------------------------------------------------------------------------------------
# OTLP/JSON decoded from bytes (typed structs) vs orjson and the general walk

HEX = st.sampled_from(
    [
        "5b8efff798038103d269b633813fc60c",
        "eee19b7ec3c1b174",
        "",
        "0" * 32,
        "W4778JgDgQPSabYzgT/GDA==",
        "XYZ",
        "0x1234567890abcd",
    ]
)
INTS = st.sampled_from(
    [0, 1, 412, 2**63 - 1, 2**63, 2**64, -5, "1760000000000000000", "x", 1.0, 1.5]
)


@st.composite
def any_value(draw: Any, depth: int = 0) -> Any:
    kinds = ["stringValue", "intValue", "doubleValue", "boolValue", "bytesValue", "empty", "odd"]
    if depth < 2:
        kinds += ["arrayValue", "kvlistValue"]
    kind = draw(st.sampled_from(kinds))
    if kind == "stringValue":
        return {kind: draw(TEXTS | st.sampled_from(["sk-proj-abcdefghijklmnopqrst", "\\u0073k-"]))}
    if kind == "intValue":
        return {kind: draw(INTS | st.integers(-(2**70), 2**70) | st.integers().map(str))}
    if kind == "doubleValue":
        odd = st.sampled_from([0.5, 1, "NaN", "Infinity", "x", 1e300, True, 2**70])
        return {kind: draw(odd | st.floats(allow_nan=False, allow_infinity=False))}
    if kind == "boolValue":
        return {kind: draw(st.sampled_from([True, False, 1, None]))}
    if kind == "bytesValue":
        return {kind: "aGVsbG8="}
    if kind == "arrayValue":
        return {kind: {"values": draw(st.lists(any_value(depth + 1), max_size=2))}}
    if kind == "kvlistValue":
        return {kind: {"values": draw(st.lists(key_value(depth + 1), max_size=2))}}
    if kind == "empty":
        return {}
    # Odd ones: snake_case, null, not an object, several kinds at once (precedence decides).
    return draw(
        st.sampled_from(
            [
                None,
                {"string_value": "snake"},
                {"stringValue": None},
                3,
                {"intValue": "1", "doubleValue": 2.5},
                {"doubleValue": 2.5, "boolValue": True},
                {"boolValue": False, "stringValue": "s"},
                {"bytesValue": "aGk=", "arrayValue": {"values": []}},
                {"kvlistValue": {"values": []}, "arrayValue": {}},
            ]
        )
    )


@st.composite
def key_value(draw: Any, depth: int = 0) -> Any:
    kv: dict[str, Any] = {
        "key": draw(st.sampled_from(["a", "b", "gen_ai.operation.name", "api_key"]))
    }
    if not _rarely(draw):
        kv["value"] = draw(any_value(depth))
    if _rarely(draw):
        kv = draw(st.sampled_from([{"key": None}, {"value": {}}, {"key": "a", "extra": 1}]))
    return kv


@st.composite
def otlp_span(draw: Any) -> Any:
    s: dict[str, Any] = {}
    for key, values in [
        ("traceId", HEX),
        ("spanId", HEX),
        ("parentSpanId", HEX),
        ("name", st.sampled_from(["chat", ""])),
        ("kind", st.sampled_from([3, "SPAN_KIND_CLIENT", "2", "x", True])),
        ("startTimeUnixNano", INTS),
        ("endTimeUnixNano", INTS),
        ("flags", st.sampled_from([0, 256])),
        ("traceState", st.just("a=b")),
        ("droppedAttributesCount", st.just(0)),
        ("links", st.just([{"traceId": "ab", "spanId": "cd", "attributes": []}])),
    ]:
        if draw(st.booleans()):
            s[key] = draw(values)
    s["attributes"] = draw(st.lists(key_value(), max_size=4))
    if draw(st.booleans()):
        s["events"] = [
            {
                "name": "gen_ai.choice",
                "timeUnixNano": draw(INTS),
                "attributes": draw(st.lists(key_value(), max_size=2)),
            }
        ]
    if draw(st.booleans()):
        s["status"] = draw(
            st.sampled_from([{}, {"code": 2, "message": "boom"}, {"code": "STATUS_CODE_OK"}, None])
        )
    if _rarely(draw):
        s[draw(st.sampled_from(["trace_id", "extra", "start_time_unix_nano"]))] = "x"
    return s


@st.composite
def otlp_request(draw: Any) -> Any:
    scope: dict[str, Any] = {"spans": draw(st.lists(otlp_span(), max_size=3))}
    if draw(st.booleans()):
        scope["scope"] = draw(
            st.sampled_from(
                [{}, {"name": "x", "version": "1"}, {"name": "x", "attributes": [{"key": "k"}]}]
            )
        )
    group: dict[str, Any] = {"scopeSpans": [scope]}
    if draw(st.booleans()):
        group["resource"] = {"attributes": draw(st.lists(key_value(), max_size=2))}
    if draw(st.booleans()):
        group["schemaUrl"] = "https://opentelemetry.io/schemas/1.37.0"
    doc: dict[str, Any] = {"resourceSpans": [group]}
    if _rarely(draw):
        doc = draw(st.sampled_from([{"resource_spans": [group]}, {"resourceSpans": None}, [doc]]))
    return doc


@given(otlp_request(), st.booleans())
def test_json_spans_from_bytes_equal_the_general_decode(doc: Any, ascii_only: bool) -> None:
    data = json.dumps(doc, ensure_ascii=ascii_only).encode()
    spans = decode_json_spans(data)
    try:
        general = list(json_spans(orjson.loads(data)).units)
    except OTLPDecodeError:
        general = None
    if spans is not None:
        assert general is not None
        # repr, not ==: NaN (doubleValue "NaN") is not equal to itself.
        assert repr([s.to_raw() for s in spans]) == repr([s.to_raw() for s in general])
        assert all(s.screened == (screen(data) == CLEAN) for s in spans)
    assert list(map(_line, translate_json(data))) == list(
        map(_line, translate_document(orjson.loads(data)))
    )


def _unscreened(spans: list[Span]) -> list[Span]:
    """The spans as the generic reader gives them: it parses a document, and cannot tell
    whether its bytes were screened clean (the fast path's ``screened``)."""
    return [msgspec.structs.replace(s, screened=False) for s in spans]


def test_any_value_kinds_keep_their_precedence() -> None:
    kinds = [
        ("stringValue", "s"),
        ("intValue", "7"),
        ("doubleValue", 2.5),
        ("boolValue", True),
        ("arrayValue", {"values": [{"intValue": 1}]}),
        ("kvlistValue", {"values": [{"key": "k", "value": {"boolValue": False}}]}),
        ("bytesValue", "aGk="),
    ]
    attrs = [
        {"key": f"{a}+{b}", "value": {a: x, b: y}}
        for i, (a, x) in enumerate(kinds)
        for b, y in kinds[i + 1 :]
    ]
    data = _request({"traceId": "5b8efff798038103d269b633813fc60c", "attributes": attrs})
    spans = decode_json_spans(data)
    assert spans is not None
    assert _unscreened(spans) == list(json_spans(orjson.loads(data)).units)
    assert spans[0].attributes["intValue+doubleValue"] == 7


def test_the_exporters_form_takes_the_fast_path() -> None:
    for path in sorted((CORPUS / "otlp").glob("*.otlp.json")):
        data = path.read_bytes()
        spans = decode_json_spans(data)
        assert spans is not None, path
        assert _unscreened(spans) == list(json_spans(orjson.loads(data)).units)
    big = b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":%d}]}]}]}'
    assert decode_json_spans(big % (2**63 - 1)) is not None
    assert decode_json_spans(big % 2**63) is None  # orjson and msgspec may read it differently
    assert decode_json_spans(b'{"resourceSpans":[],"resourceLogs":[]}') is None


def _line(result: Any) -> Any:
    return orjson.loads(encode(result))


# ---------------------------------------------------------------------------------------------
# credential screens


def _genai_span(content: str, **extra: Any) -> dict[str, Any]:
    attrs = {
        "gen_ai.operation.name": "chat",
        genai.INPUT: json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": content}]}]
        ),
        **extra,
    }
    return {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "attributes": [
            {"key": k, "value": {"stringValue": v} if isinstance(v, str) else v}
            for k, v in attrs.items()
        ],
    }


def _request(*spans: Any) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}).encode()


KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0"


def test_a_credential_escaped_inside_nested_json_is_redacted() -> None:
    # The message attribute's JSON spells the key with an escape: the raw text does not hold it.
    text = "my key is " + "".join(f"\\u{ord(c):04x}" for c in KEY[:3]) + KEY[3:]
    attrs = {"gen_ai.operation.name": "chat", genai.INPUT: _messages("user", TEXT % text)}
    fact = translate_span(
        Span(
            "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", None, "c", 3, None, None, attrs
        )
    )
    assert isinstance(fact, InferenceCall)
    assert fact.input_messages[0].parts == [TextPart("my key is [REDACTED]")]
    assert fact.degradations == {"redacted_provider_key": 1}
    assert screen(b"\\u0073k-") == ESCAPED


def test_one_credential_anywhere_in_a_request_keeps_its_span_screened() -> None:
    clean, dirty = _genai_span("hello"), _genai_span(f"use {KEY}")
    dirty["spanId"] = "eee19b7ec3c1b175"
    data = _request(clean, dirty)
    spans = decode_json_spans(data)
    assert spans is not None and not any(s.screened for s in spans)
    facts = list(translate_json(data))
    assert facts[1].input_messages[0].parts == [TextPart("use [REDACTED]")]
    assert KEY not in encode(facts[1]).decode()
    assert all(s.screened for s in decode_json_spans(_request(clean)) or [])


def test_protobuf_spans_are_screened_unless_their_text_escapes_the_screen() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    def request(value: Any) -> bytes:
        req = ExportTraceServiceRequest()
        s = req.resource_spans.add().scope_spans.add().spans.add()
        s.trace_id, s.span_id = bytes.fromhex("5b8efff798038103d269b633813fc60c"), b"\x01" * 8
        kv = s.attributes.add()
        kv.key = "x"
        if isinstance(value, bytes):
            kv.value.bytes_value = value
        else:
            kv.value.array_value.values.add().string_value = value
        return req.SerializeToString()

    assert [s.screened for s in pb_spans(request("plain")).units] == [True]
    # Base64 text of bytes is not in the request's bytes; a backspace in a structured value
    # becomes `\b` when a flat convention writes the value back out as JSON text.
    assert [s.screened for s in pb_spans(request(b"AIza")).units] == [False]
    assert [s.screened for s in pb_spans(request("\x08earer abcdefgh12345")).units] == [False]
    assert [s.screened for s in pb_spans(request(f"key {KEY}")).units] == [False]


FRAGMENTS = ["s", "S", "k", "K", "-", "a", "I", "z", "b", "E", "r", " ", "_", "token", "passw"]
# Bytes that fold onto a needle's or an escape's characters: `_` (DEL), `-` (CR), `\\` (`|`).
FOLDING = ["\x7f", "\r", "|", "U", "|u0075", "\\U0073"]
ESCAPES = ["\\u0073", "\\u004B", "\\u002d", "\\u005f", "\\u00e9", "\\u4f60", "\\u0001", "\\"]


def _folded(data: bytes) -> bytes:
    return bytes(b | 0x20 for b in data)


@given(st.lists(st.sampled_from(FRAGMENTS + ESCAPES + FOLDING), max_size=12))
def test_the_bytes_screen_misses_nothing_a_lowercase_search_finds(fragments: list[str]) -> None:
    data = "".join(fragments).encode()
    needle = any(n.encode() in data.lower() for n in redact._NEEDLES)
    # The escapes that can spell a needle's character: \u0020-\u007f.
    escaped = any(f"\\u00{d}".encode() in data for d in "24567")
    verdict = screen(data)
    if needle:
        assert verdict == SUSPECT
    elif escaped:
        assert verdict >= ESCAPED
    # Exactly what a search of the folded bytes for the folded needles finds: nothing more.
    folded = _folded(data)
    expected = (
        SUSPECT
        if any(_folded(n.encode()) in folded for n in redact._NEEDLES)
        else ESCAPED
        if any(_folded(f"\\u00{d}".encode()) in folded for d in "24567")
        else CLEAN
    )
    assert verdict == expected


@given(st.lists(st.sampled_from(FRAGMENTS + ESCAPES), max_size=12))
def test_the_bytes_screen_finds_exactly_what_a_lowercase_search_finds(
    fragments: list[str],
) -> None:
    # Without the few bytes that fold onto needle characters, the screen is exact.
    data = "".join(fragments).encode()
    needle = any(n.encode() in data.lower() for n in redact._NEEDLES)
    escaped = any(f"\\u00{d}".encode() in data for d in "24567")
    assert screen(data) == (SUSPECT if needle else ESCAPED if escaped else CLEAN)


def test_bytes_that_fold_onto_needles_only_cost_a_walk() -> None:
    assert screen(b"api\x7fkey") == SUSPECT  # DEL folds onto `_`: a false positive
    assert screen(b"|u0073") == ESCAPED  # `|` folds onto a backslash
    assert screen(b"AUTHORIZATION: BASIC") == SUSPECT
    assert screen(memoryview(b"x SeSsIoN-ToKeN y")) == SUSPECT
    assert screen(bytearray(b"")) == CLEAN


def test_escapes_of_text_outside_the_needles_do_not_slow_the_screen() -> None:
    text = json.dumps("café 你好" * 2000).encode()  # ensure_ascii: 12000 escapes
    assert screen(text) == CLEAN
    assert screen(json.dumps("é \x00").encode()) == CLEAN  # \u00e9, \u0000: no needle
    assert screen(b'"\\u006b"') == ESCAPED


def test_a_screened_span_gives_the_fact_an_unscreened_one_gives() -> None:
    for data in [_request(_genai_span("hello")), _request(_genai_span(f"k {KEY}"))]:
        for span in decode_json_spans(data) or []:
            unscreened = msgspec.structs.replace(span, screened=False)
            assert translate_span(span) == translate_span(unscreened)


def test_output_to_a_device_writes_to_it_and_leaves_it_in_place() -> None:
    import os
    import stat

    from lithify.ingest.convert import open_output

    with open_output(os.devnull) as fh:
        fh.write(b"{}\n")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


_ID_LIKE = st.text(alphabet="abcXYZ019", max_size=6)


@given(
    st.lists(_ID_LIKE, max_size=4)
    | st.lists(
        _ID_LIKE | st.text(max_size=4) | st.none() | st.integers() | st.tuples(_ID_LIKE),
        max_size=4,
    )
)
def test_the_id_hash_shortcut_gives_the_canonical_json_hash(parts: list[Any]) -> None:
    from lithify.core.hashing import _stable_hash, stable_hash

    assert stable_hash(*parts) == _stable_hash(tuple(parts))
