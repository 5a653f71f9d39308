"""Server-Sent Events: the text of a streamed provider response into its events."""

from __future__ import annotations

import bisect
import copy
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import msgspec
import orjson

from lithify.core.text import loads

_LINE_END = re.compile(r"\r\n|\r|\n")


class SSEEvent(msgspec.Struct, frozen=True):
    event: str | None
    data: str

    def json(self) -> Any:
        """The data as JSON, or None when it is not JSON (``[DONE]``, a cut-off line). Half of a
        character escaped alone stays a lone surrogate: the next event may hold its other half,
        and the fact's text is made valid once the pieces are joined (``core.text``)."""
        try:
            return loads(self.data)[0]
        except (ValueError, RecursionError):
            return None


def iter_events(text: str) -> Iterator[SSEEvent]:
    """Events in order, per the SSE spec: blank-line separated, multi-line data joined by '\\n'.

    A last event without its terminating blank line is still yielded: a truncated stream keeps
    what it delivered.
    """
    event: str | None = None
    data: list[str] = []
    # Only CR, LF and CRLF end a line in SSE; str.splitlines would also split on U+2028 and
    # friends, which a model's answer may hold inside a JSON string.
    for line in _LINE_END.split(text):
        if not line.strip():
            if data:
                yield SSEEvent(event, "\n".join(data))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value.strip()
        elif name == "data":
            data.append(value)
    if data:
        yield SSEEvent(event, "\n".join(data))


def sse_text(events: list[SSEEvent]) -> str:
    """Events written back as SSE text, which re-parses to the same events (iter_events) and
    keeps event names and data as sent."""
    out: list[str] = []
    for e in events:
        lines = [] if e.event is None else [f"event: {e.event}"]
        lines.extend(f"data: {line}" for line in e.data.split("\n"))
        out.append("\n".join(lines) + "\n\n")
    return "".join(out)


def _carried(e: SSEEvent) -> bool:
    """SSE text reads back as this event (iter_events splits lines at CR too, strips names)."""
    name = e.event
    return "\r" not in e.data and (
        name is None or (name == name.strip() and "\n" not in name and "\r" not in name)
    )


def raw_stream(events: list[Any]) -> Any:
    """A streamed response as every provider's fact keeps it on ``raw``: SSE text, which a
    stored fact is translated again from. Events that text cannot carry as they are (a line
    break in a name, a CR in data: only events built by a caller can hold them) and a stream of
    parsed values (Gemini's JSON-array form) are kept as a list, events as name and data."""
    if all(type(e) is SSEEvent and _carried(e) for e in events):
        return sse_text(events)
    return [{"event": e.event, "data": e.data} if isinstance(e, SSEEvent) else e for e in events]


def events_of(items: list[Any]) -> list[Any]:
    """A stream given as a list, with the name-and-data form ``raw_stream`` keeps (and earlier
    versions kept for every Anthropic and Gemini stream) read back as events; parsed values stay."""
    return [
        SSEEvent(e["event"], e["data"])
        if type(e) is dict
        and e.keys() == {"event", "data"}
        and isinstance(e["data"], str)
        and (e["event"] is None or isinstance(e["event"], str))
        else e
        for e in items
    ]


def lost(events: list[Any], i: int) -> bool:
    """Whether event ``i``, which the stream could not read, lost content (counted
    ``malformed_messages``): any but the last (a cut-off end is the stream's truncation, counted
    apart), ``[DONE]`` and an empty keep-alive."""
    ev = events[i]
    return i != len(events) - 1 and not (
        isinstance(ev, SSEEvent) and ev.data.strip() in ("[DONE]", "")
    )


def event_json(ev: Any) -> Any:
    """An event's data as JSON (None when it is not JSON); a parsed value is itself if an object."""
    if isinstance(ev, SSEEvent):
        return ev.json()
    return ev if isinstance(ev, dict) else None


def looks_like_sse(text: str) -> bool:
    head = text.lstrip()[:200]
    return head.startswith(("data:", "event:", ":", "id:", "retry:"))


def scrub_pieces(response: Any, cut: list[tuple[str, str]]) -> Any:
    """A stream's ``raw`` response (SSE text, or the list form of ``raw_stream``) with the
    credentials its content was put together with — ``cut``: each as it was and as it reads
    now — replaced where the events carry them, whole or in pieces (``scrub_strings``, over the
    JSON of every event). Events it does not touch keep their text as received; the stream
    translates again to the same messages."""
    items = list(iter_events(response)) if isinstance(response, str) else events_of(response)
    docs = [event_json(e) if isinstance(e, SSEEvent) else copy.deepcopy(e) for e in items]
    changed = _scrub(docs, cut)
    if not changed:
        return response
    out: list[Any] = []
    for i, (item, doc) in enumerate(zip(items, docs, strict=True)):
        if i in changed and isinstance(item, SSEEvent):
            item = SSEEvent(item.event, _dumps(doc))
        elif i in changed:
            item = doc
        out.append(item)
    return sse_text(out) if isinstance(response, str) else raw_stream(out)


def scrub_strings(value: Any, cut: list[tuple[str, str]]) -> Any:
    """``value`` (a JSON value) with each of ``cut`` — text as it was and as it reads now —
    replaced in its strings, whole or across strings at one path (list positions aside),
    joined in order: the pieces a translator joins (the deltas of a text, of a call's
    arguments). Across pieces, an occurrence reads as it does now in the first and is cut out
    of the rest. A copy when anything changed."""
    doc = [copy.deepcopy(value)]
    return doc[0] if _scrub(doc, cut) else value


def _scrub(docs: list[Any], cut: list[tuple[str, str]]) -> set[int]:
    """Scrub ``docs`` in place; the positions of those changed."""
    runs: dict[tuple[Any, ...], list[tuple[int, Any, Any]]] = {}
    for i, doc in enumerate(docs):
        _strings(doc, (), i, runs)
    changed: set[int] = set()
    for leaves in runs.values():
        changed |= _cut_across(leaves, cut)
    return changed


def _strings(node: Any, path: tuple[Any, ...], i: int, runs: dict[Any, Any]) -> None:
    """Every string of a JSON value, in order, by its path (keys only), as (doc, holder, key)."""
    if isinstance(node, dict):
        pairs: Any = node.items()
    elif isinstance(node, list):
        pairs = enumerate(node)
    else:
        return
    for k, v in pairs:
        at = (*path, k) if isinstance(node, dict) else path
        if isinstance(v, str):
            runs.setdefault(at, []).append((i, node, k))
        elif isinstance(v, dict | list):
            _strings(v, at, i, runs)


def _cut_across(leaves: list[tuple[int, Any, Any]], cut: list[tuple[str, str]]) -> set[int]:
    """Edit one path's strings (in order) in place; the docs that changed."""
    values = [holder[k] for _, holder, k in leaves]
    starts = list(itertools.accumulate((len(v) for v in values), initial=0))
    text = "".join(values)
    edits: dict[int, list[tuple[int, int, str]]] = {}
    for was, now in cut:
        at = text.find(was) if was else -1
        while at >= 0:
            end = at + len(was)
            first = bisect.bisect_right(starts, at) - 1
            last = bisect.bisect_right(starts, end - 1) - 1
            for j in range(first, last + 1):
                lo, hi = max(at, starts[j]) - starts[j], min(end, starts[j + 1]) - starts[j]
                edits.setdefault(j, []).append((lo, hi, now if j == first else ""))
            at = text.find(was, end)
    for j, spans in edits.items():
        value = values[j]
        for lo, hi, now in sorted(spans, reverse=True):
            value = value[:lo] + now + value[hi:]
        _, holder, k = leaves[j]
        holder[k] = value
    return {leaves[j][0] for j in edits}


def _dumps(doc: Any) -> str:
    try:
        return orjson.dumps(doc).decode()
    except TypeError:  # a lone surrogate, an integer past 64 bits
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
