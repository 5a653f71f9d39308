"""The fact codec and the column escaping, without a database."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lithify.core import codec
from lithify.model import Feedback, InferenceCall, Source
from tests.store.helpers import EDGE_VALUES, TEXT, VALUES, make_fact, same

_decoder = codec.Decoder(InferenceCall)


def _fact(raw: object) -> InferenceCall:
    return InferenceCall(inference_call_id="k", source=Source("t"), raw=raw)


def test_the_common_case_takes_the_plain_path() -> None:
    fact = make_fact("plain", raw={"body": "x" * 100, "n": 2**63, "f": float("nan")})
    data = codec.encode(fact)
    assert data[0] == 1
    assert same(_decoder.decode(data), fact)


@pytest.mark.parametrize("key", sorted(EDGE_VALUES))
def test_each_edge_value_round_trips(key: str) -> None:
    fact = _fact({key: EDGE_VALUES[key]})
    assert same(_decoder.decode(codec.encode(fact)), fact)


def test_what_msgpack_cannot_hold_takes_the_escaped_path() -> None:
    for raw in ["\ud800", 2**64, -(2**63) - 1, {"\udc00": 1}, [{"a": [{"\ud800": "\udfff"}]}]]:
        data = codec.encode(_fact(raw))
        assert data[0] == 2, raw
        assert same(_decoder.decode(data).raw, raw)


def test_bytes_in_raw_stay_bytes() -> None:
    fact = _fact({"b": b"\x00\xff", "s": "\ud800"})  # the escaped path must not base64 them
    assert same(_decoder.decode(codec.encode(fact)).raw, {"b": b"\x00\xff", "s": "\ud800"})


def test_feedback_round_trips() -> None:
    fb = Feedback(
        feedback_id="f", target_kind="trace", target_id="t", name="n", value=2**70, source="s"
    )
    assert same(codec.Decoder(Feedback).decode(codec.encode(fb)), fb)


@pytest.mark.parametrize("data", [b"", b"\x07abc", b"\x01\xc1", b"\x02\xc7\x01\x09x"])
def test_corrupt_bytes_raise_corrupt_fact(data: bytes) -> None:
    with pytest.raises(codec.CorruptFact):
        _decoder.decode(data)


@given(VALUES)
def test_arbitrary_values_round_trip(raw: object) -> None:
    fact = _fact(raw)
    assert same(_decoder.decode(codec.encode(fact)), fact)


@given(TEXT)
def test_column_escaping_is_injective_and_storable(s: str) -> None:
    c = codec.col(s)
    assert c is not None and codec.uncol(c) == s
    assert "\x00" not in c
    c.encode("utf-8")  # no lone surrogates left
    if c != s:
        assert c.startswith("lithify:esc:")


@given(st.lists(TEXT, min_size=2, max_size=2, unique=True))
def test_distinct_strings_keep_distinct_columns(pair: list[str]) -> None:
    a, b = pair
    assert codec.col(a) != codec.col(b)


def test_plain_msgspec_encoders_refuse_what_the_codec_keeps() -> None:
    # Why the codec exists: the usual encoders fail on these values.
    with pytest.raises(UnicodeEncodeError):
        msgspec.json.encode("\ud800")
    with pytest.raises(OverflowError):
        msgspec.msgpack.encode(2**64)
