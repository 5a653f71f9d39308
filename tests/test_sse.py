"""The SSE reader: the spec's line endings only, multi-line data, truncated last events; and a
stream as every provider's fact keeps it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lithify.model import InferenceCall
from lithify.translate import provider
from lithify.translate.sse import (
    SSEEvent,
    events_of,
    iter_events,
    looks_like_sse,
    raw_stream,
    sse_text,
)
from tests.conftest import CORPUS


def test_line_endings_and_fields() -> None:
    text = 'event: a\r\ndata: {"x":\r\ndata: 1}\r\n\r\n: comment\nid: 3\ndata:[DONE]\n\n'
    assert list(iter_events(text)) == [SSEEvent("a", '{"x":\n1}'), SSEEvent(None, "[DONE]")]


def test_unicode_line_separators_stay_inside_data() -> None:
    text = 'data: {"t":"a\u2028b\u0085c\u2029d"}\n\n'
    (ev,) = iter_events(text)
    assert ev.json() == {"t": "a\u2028b\u0085c\u2029d"}


def test_a_truncated_last_event_is_kept_and_bad_json_is_none() -> None:
    (ev,) = iter_events('data: {"partial": tr')
    assert ev.data == '{"partial": tr' and ev.json() is None


def test_recognition() -> None:
    assert looks_like_sse("\n\nevent: ping\ndata: {}\n")
    assert not looks_like_sse('{"data": 1}')


_names = st.none() | st.text(max_size=6)
_events = st.lists(st.builds(SSEEvent, _names, st.text(max_size=12)), max_size=5)


@given(_events)
def test_a_stream_on_raw_reads_back_as_its_events(events: list[SSEEvent]) -> None:
    kept = raw_stream(events)
    if isinstance(kept, str):
        assert list(iter_events(kept)) == events
    else:  # only what SSE text cannot carry as it is is kept as name and data
        assert list(iter_events(sse_text(events))) != events
        assert events_of(kept) == events


def test_only_the_name_and_data_form_reads_as_events() -> None:
    parsed = [{"candidates": []}, {"event": "x", "data": 1}, {"event": "x", "data": "{}", "id": 1}]
    assert events_of(parsed) == parsed
    assert events_of([{"event": None, "data": "{}"}]) == [SSEEvent(None, "{}")]


_STREAMS = sorted(CORPUS.glob("*/*.sse"))


@pytest.mark.parametrize("path", _STREAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_providers_stream_is_kept_as_sse_text_and_translates_again(path: Path) -> None:
    text = path.read_text()
    fact = provider.translate_exchange(None, text)
    assert isinstance(fact, InferenceCall)
    assert isinstance(fact.raw["response"], str)
    assert list(iter_events(fact.raw["response"])) == list(iter_events(text))
    assert provider.translate_exchange(fact.raw["request"], fact.raw["response"]) == fact
    # The list form earlier versions stored for Anthropic and Gemini streams reads the same.
    listed = [{"event": e.event, "data": e.data} for e in iter_events(text)]
    assert provider.translate_exchange(None, listed) == fact
