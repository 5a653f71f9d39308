"""The SSE reader: the spec's line endings only, multi-line data, truncated last events."""

from __future__ import annotations

from lithify.translate.sse import SSEEvent, iter_events, looks_like_sse


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
