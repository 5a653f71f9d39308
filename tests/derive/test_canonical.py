"""The canonical form continuity is proven in: what it ignores and what it keeps apart."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lithify.derive.canonical import canonical_message, canonical_messages
from lithify.derive.segments import _extends
from lithify.model import Message, ReasoningPart, TextPart, ToolCallPart, ToolCallResponsePart
from tests.store.helpers import VALUES


def _call(arguments: dict[str, object]) -> Message:
    return Message("assistant", [ToolCallPart("c1", "f", arguments)], "tool_call")


def test_finish_reason_and_key_order_are_ignored() -> None:
    a = _call({"city": "Paris", "unit": {"x": 1, "y": [1, 2]}})
    b = Message(
        "assistant", [ToolCallPart("c1", "f", {"unit": {"y": [1, 2], "x": 1}, "city": "Paris"})]
    )
    assert a.finish_reason != b.finish_reason
    assert canonical_message(a) == canonical_message(b)


def test_true_is_not_one_and_one_is_not_one_point_zero() -> None:
    forms = {canonical_message(_call({"v": v})) for v in (True, 1, 1.0, "1", None, False, 0)}
    assert len(forms) == 7


def test_role_part_kind_and_order_matter() -> None:
    text, reasoning = TextPart("hi"), ReasoningPart("hi")
    forms = {
        canonical_message(Message("user", [text])),
        canonical_message(Message("assistant", [text])),
        canonical_message(Message("assistant", [reasoning])),
        canonical_message(Message("assistant", [reasoning, text])),
        canonical_message(Message("assistant", [text, reasoning])),
        canonical_message(Message("tool", [ToolCallResponsePart("c1", "hi")])),
        canonical_message(Message("tool", [ToolCallResponsePart("c1", ["hi"])])),
    }
    assert len(forms) == 7


def test_values_msgpack_refuses_take_the_typed_form_and_stay_distinct() -> None:
    surrogate = canonical_message(Message("user", [TextPart("a\ud800")]))
    other = canonical_message(Message("user", [TextPart("a\udc00")]))
    huge = canonical_message(_call({"n": 2**80}))
    assert surrogate != other
    assert huge != canonical_message(_call({"n": 2**80 + 1}))
    assert huge == canonical_message(_call({"n": 2**80}))
    # The typed form ignores key order too, and never equals a fast-path encoding.
    assert canonical_message(_call({"a": 2**80, "b": True})) == canonical_message(
        _call({"b": True, "a": 2**80})
    )
    assert canonical_message(_call({"a": 2**80, "b": True})) != canonical_message(
        _call({"a": 2**80, "b": 1})
    )


@given(VALUES, VALUES)
def test_equal_forms_mean_equal_values(a: object, b: object) -> None:
    """Two results share a form exactly when they are the same JSON-ish value, type-strict."""
    fa = canonical_message(Message("tool", [ToolCallResponsePart("c", a)]))
    fb = canonical_message(Message("tool", [ToolCallResponsePart("c", b)]))
    assert fa == canonical_message(Message("tool", [ToolCallResponsePart("c", a)]))
    if fa == fb:
        assert _typed_equal(a, b)


def _typed_equal(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(_typed_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(_typed_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b or repr(a) == repr(b)


# Tool results of any value (the typed fallback forms among them), as a history's messages.
_HISTORY = st.lists(
    st.builds(lambda v: Message("tool", [ToolCallResponsePart("c", v)]), VALUES), max_size=5
)


@given(_HISTORY, _HISTORY, _HISTORY)
def test_comparing_forms_as_lists_is_comparing_their_concatenations(
    head: list[Message], more: list[Message], other: list[Message]
) -> None:
    """Segments compare inputs form by form (``_extends``, the next form against an output's):
    the same verdicts as the concatenated bodies' ``startswith``, because every form is
    self-delimiting."""
    a = canonical_messages(head + more)
    for b in (canonical_messages(head), canonical_messages(other), canonical_messages(more)):
        body_a, body_b = b"".join(a), b"".join(b)
        assert _extends(a, b) == body_a.startswith(body_b)
        if _extends(a, b) and len(a) > len(b):
            for out in canonical_messages(other[:1] + head[:1]):
                assert (a[len(b)] == out) == body_a.startswith(out, len(body_b))
