"""The fast paths of OTLP conversion give exactly what the general paths give.

The semconv message fast path (typed msgspec structs) must build the same content and count the
same degradations as the general walk on every input, taking the general path whenever it cannot
tell; the source-level credential screen must never let a credential through.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lithify.translate import genai
from lithify.translate._common import Degradations

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
    return '{"type":"tool_call","id":"c1","name":"f"%s}' % args


def _messages(role: str, *parts: str, extra: str = "") -> str:
    return '[{"role":"%s","parts":[%s]%s}]' % (role, ",".join(parts), extra)


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
        genai.OUTPUT: '[{"role":"assistant","parts":[%s]},{"role":"assistant","parts":[%s]}]'
        % (TEXT % "a", TEXT % "b"),
        "gen_ai.request.choice.count": 2,
    },
    {
        genai.OUTPUT: '[{"role":"assistant","parts":[%s]},{"role":"assistant","parts":[%s]}]'
        % (TEXT % "a", TEXT % "b"),
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
