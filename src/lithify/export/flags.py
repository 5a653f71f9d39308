"""Quality flags: what a written row may teach wrong, from a closed list, in every row's
``metadata.flags`` (docs/export.md, Quality flags).

A flag is a property of the row's calls as the facts hold them, judged against the row: its
``source_call_ids`` name the calls, its ``tools`` the tools it defines. ``--drop-flag`` and
``--keep-flag`` decide per flag whether rows carrying it are written; the defaults drop every
flag that would teach the model something wrong and keep the rest.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from lithify.export.trainer import flat_tools, trainer_tools
from lithify.model import (
    BlobPart,
    FilePart,
    InferenceCall,
    Message,
    ServerToolCallPart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
    UriPart,
)

if TYPE_CHECKING:  # rows validate against FLAGS: this module is below them
    from lithify.export.rows import Row
    from lithify.export.summary import ExportSummary
    from lithify.export.validate import RowValidator

FLAGS: dict[str, str] = {
    "undefined_tool_call": "a tool call to a tool the row's tools do not define",
    "truncated_target": "a target output cut by the length limit (finish_reason length)",
    "empty_target": "a target output with neither text nor a tool call (a server tool call or "
    "a medium counts)",
    "content_filter": "a target output refused or stopped by a content filter "
    "(finish_reason content_filter)",
    "error_target": "a target output that ended in an error (finish_reason error: a stream or "
    "call that failed partway, a malformed function call)",
    "orphan_tool_result": "a tool result whose call is not earlier in the conversation",
    "degraded_source": "a call of the row lost or changed content at conversion "
    "(any degradation; lossy ones skip the row unless --keep-degraded)",
    "tools_recovered": "the row's tools lacked tools it calls; their definitions were added "
    "from another call of the same session",
}
# Dropped unless --keep-flag: each makes the row teach something wrong. degraded_source is kept:
# the lossy degradations already skip rows (degraded_fact), the others leave what the model saw.
DEFAULT_DROP = frozenset(
    {
        "undefined_tool_call",
        "truncated_target",
        "empty_target",
        "content_filter",
        "error_target",
        "orphan_tool_result",
    }
)


class FlagError(ValueError):  # a ValueError: make_builder reports it as a ProfileError
    """A --drop-flag/--keep-flag name not in FLAGS, or one given to both."""


def dropped_flags(drop: Iterable[str], keep: Iterable[str]) -> frozenset[str]:
    """The flags whose rows are left out: the defaults, plus ``drop``, minus ``keep``."""
    drop, keep = set(drop), set(keep)
    for name in sorted(drop | keep):
        if name not in FLAGS:
            raise FlagError(f"unknown flag {name!r}: one of {', '.join(FLAGS)}")
    if drop & keep:
        raise FlagError(f"flag given to both --drop-flag and --keep-flag: {sorted(drop & keep)}")
    return frozenset((DEFAULT_DROP | drop) - keep)


# A flag of a row judged from its calls: a bit each. Target flags come from the calls the row
# teaches (an SFT row's last), source flags from any of its calls.
_TRUNCATED, _CONTENT_FILTER, _ERROR, _EMPTY, _ORPHAN, _DEGRADED, _RECOVERED, _UNDEFINED = (
    1 << i for i in range(8)
)
_BIT_NAMES = {
    _TRUNCATED: "truncated_target",
    _CONTENT_FILTER: "content_filter",
    _ERROR: "error_target",
    _EMPTY: "empty_target",
    _ORPHAN: "orphan_tool_result",
    _DEGRADED: "degraded_source",
    _RECOVERED: "tools_recovered",
    _UNDEFINED: "undefined_tool_call",
}
_FINISHES = {"length": _TRUNCATED, "content_filter": _CONTENT_FILTER, "error": _ERROR}


@dataclass(frozen=True, slots=True)
class _Call:
    """What flags need of one call."""

    used: frozenset[str]  # tool names its input and outputs call
    target: int  # the target flags' bits of its outputs (finish reasons, an empty one)
    source: int  # the source flags' bits: an orphan tool result in its input, a degradation


# An input scanned: its messages, the tool names and call ids they call, whether one holds an
# orphan tool result.
_Scan = tuple[list[Message], frozenset[str], frozenset[str], bool]


def _scan(messages: list[Message], before: _Scan | None) -> _Scan:
    """Scan ``messages``, from where ``before`` ends when they begin with its messages (a call
    replays the one before it, and decoding shares the replayed messages: compared by identity,
    so only what is new is scanned)."""
    start, used, called, orphan = 0, frozenset[str](), frozenset[str](), False
    n = len(before[0]) if before is not None else 0
    if before is not None and n <= len(messages) and all(map(operator.is_, before[0], messages)):
        start, used, called, orphan = n, before[1], before[2], before[3]
    names: list[str] = []
    ids: set[str] = set()  # called in the new messages, so far
    for m in messages[start:]:
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                names.append(p.name)
                ids.add(p.id)
            elif isinstance(p, ToolCallResponsePart) and p.id not in ids and p.id not in called:
                orphan = True
    return messages, _grown(used, names), _grown(called, ids), orphan


def _grown(known: frozenset[str], more: Iterable[str]) -> frozenset[str]:
    """``known`` with ``more``; the same set when nothing is new (a call mostly calls the tools
    the calls before it did): a set is copied only when it grows."""
    return known if known.issuperset(more) else known.union(more)


def _call(f: InferenceCall, scan: _Scan) -> _Call:
    names = [p.name for m in f.output_messages for p in m.parts if isinstance(p, ToolCallPart)]
    used = _grown(scan[1], names)
    target = 0
    for m in f.output_messages:
        target |= _FINISHES.get(m.finish_reason or "", 0)
        if _empty(m):
            target |= _EMPTY
    source = (_ORPHAN if scan[3] else 0) | (_DEGRADED if f.degradations else 0)
    return _Call(used, target, source)


def _empty(m: Message) -> bool:
    # A server tool call, or a medium the model made (a generated image), is something said.
    return not any(
        isinstance(p, _SAID) or (isinstance(p, TextPart) and p.content.strip()) for p in m.parts
    )


_SAID = (ToolCallPart, ServerToolCallPart, BlobPart, FilePart, UriPart)


def _tools_holder(data: dict[str, Any]) -> tuple[dict[str, Any], bool] | None:
    """The dict holding a row's ``tools``, and whether they are flat (Responses) tools."""
    if "tools" in data:
        return data, False
    for key in ("input", "responses_create_params"):
        holder = data.get(key)
        if isinstance(holder, dict) and "tools" in holder:
            return holder, key == "responses_create_params"
    return None


def _tool_names(data: dict[str, Any]) -> set[str]:
    """The names of the tools a row defines, in any row shape."""
    found = _tools_holder(data)
    names: set[str] = set()
    for t in found[0]["tools"] if found else ():
        fn = t.get("function") if isinstance(t.get("function"), dict) else t
        if isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names


class Flagger:
    """Flags rows and leaves out those carrying a dropped flag; counts both.

    ``watch`` sees the facts as the export reads them (grouped by session); a row's calls are
    looked up there. Calls are kept for the session being read and the one before (rows of a
    session come once the next one starts), or all of them for DPO, whose rows come at the end.
    """

    def __init__(
        self, kind: str, drop: frozenset[str], validator: RowValidator | None = None
    ) -> None:
        self.kind = kind
        self.drop = drop
        self.validator = validator  # checks rows whose tools were recovered
        self.flagged: Counter[str] = Counter()  # rows built carrying each flag
        self.dropped = 0  # rows left out for a flag
        self._calls: dict[str, _Call] = {}
        self._older: dict[str, _Call] = {}
        self._session: object = object()
        self._scan: _Scan | None = None  # the last call's input
        self._names: tuple[object, set[str]] = (None, set())  # a row's tools → their names
        # Per session, the first definition of each tool name its calls offer (read order).
        self._defined: dict[str | None, dict[str, ToolDefinition]] = {}
        self._older_defined: dict[str | None, dict[str, ToolDefinition]] = {}

    def watch(self, facts: Iterable[InferenceCall]) -> Iterator[InferenceCall]:
        for f in facts:
            if f.session_id != self._session and self.kind != "dpo":
                self._older, self._calls = self._calls, {}
                self._older_defined, self._defined = self._defined, {}
                self._session = f.session_id
            self._scan = _scan(f.input_messages, self._scan if f.session_id is not None else None)
            self._calls[f.inference_call_id] = _call(f, self._scan)
            if f.session_id is not None:
                defined = self._defined.setdefault(f.session_id, {})
                for t in f.tools:
                    defined.setdefault(t.name, t)
            yield f

    def _lookup(self, call_id: str) -> _Call | None:
        return self._calls.get(call_id) or self._older.get(call_id)

    def _tool_names(self, data: dict[str, Any]) -> set[str]:
        # The rows of a call share one tools list: its names are found once.
        found = _tools_holder(data)
        tools = found[0]["tools"] if found else None
        if tools is not self._names[0]:
            self._names = (tools, _tool_names(data))
        return self._names[1]

    def _recover(self, row: Row, missing: set[str]) -> bool:
        """Add to ``row``'s tools the definitions of ``missing`` that another call of its
        session offers; True when every missing tool was found (else the row is unchanged)."""
        session = row.data["metadata"].get("session_id")
        defined = self._defined.get(session) or self._older_defined.get(session) or {}
        found = _tools_holder(row.data)
        if session is None or found is None or not missing <= defined.keys():
            return False
        holder, flat = found
        extra = [defined[name] for name in sorted(missing)]
        # A new list: a builder shares one tools list between the rows of a call.
        holder["tools"] = [*holder["tools"], *(flat_tools(extra) if flat else trainer_tools(extra))]
        if self.validator is not None:
            self.validator.check(row.data, row.source_ids)
        row.encoded, row.spans = b"", None  # set_metadata encodes it again, whole
        return True

    def flags(self, row: Row) -> list[str]:
        ids = row.source_ids
        calls = [c for i in ids if (c := self._lookup(i)) is not None]
        targets = calls[-1:] if self.kind == "sft" else calls
        missing = set().union(*(c.used for c in calls)) - self._tool_names(row.data)
        tools = 0
        if missing:
            tools = _RECOVERED if self._recover(row, missing) else _UNDEFINED
        return _judged(calls, targets, tools)

    def tally(self) -> tuple[Counter[str], int]:
        """What this flagger counted, for another to ``merge`` (a worker's, a Ray task's)."""
        return self.flagged, self.dropped

    def merge(self, tally: tuple[Counter[str], int]) -> None:
        flagged, dropped = tally
        self.flagged.update(flagged)
        self.dropped += dropped

    def apply(self, rows: Iterable[Row]) -> Iterator[Row]:
        """``rows`` with ``metadata.flags`` set (a list, empty when none), without the rows
        carrying a dropped flag."""
        for row in rows:
            found = self.flags(row)
            self.flagged.update(found)
            if self.drop.intersection(found):
                self.dropped += 1
                continue
            yield row.set_metadata(flags=found)


def note_flags(summary: ExportSummary, flagger: Flagger) -> ExportSummary:
    """``summary`` with the flags rows carried and the rows left out for one (``flagged``)."""
    summary.flags = dict(sorted(flagger.flagged.items()))
    if flagger.dropped:
        skipped = {**summary.skipped, "flagged": flagger.dropped}
        summary.skipped = dict(sorted(skipped.items()))
    return summary


def _judged(calls: list[_Call], targets: list[_Call], tools: int) -> list[str]:
    """The flags of a row made of ``calls`` whose targets are ``targets``; ``tools``: the bit
    its tool definitions earned (recovered, undefined), or 0."""
    bits = tools
    for c in targets:
        bits |= c.target
    for c in calls:
        bits |= c.source
    return list(_names(bits))


@cache
def _names(bits: int) -> tuple[str, ...]:
    return tuple(sorted(name for bit, name in _BIT_NAMES.items() if bits & bit))


def call_flags(facts: Iterable[InferenceCall]) -> Iterator[tuple[InferenceCall, list[str]]]:
    """Each call with the flags an SFT row targeting it would carry: judged against the call's
    own tools, with a missing one recovered (``tools_recovered``) where another call of its
    session defines it, as the export does. ``facts`` come grouped by session (the store's
    ``order="session"``); a session's calls are held until the next session begins."""
    session: object = object()
    held: list[tuple[InferenceCall, _Call]] = []
    defined: set[str] = set()
    scan: _Scan | None = None

    def judged() -> Iterator[tuple[InferenceCall, list[str]]]:
        for f, c in held:
            missing = c.used - {t.name for t in f.tools}
            tools = 0
            if missing:
                tools = _RECOVERED if missing <= defined else _UNDEFINED
            yield f, _judged([c], [c], tools)

    for f in facts:
        if f.session_id != session or f.session_id is None:
            yield from judged()
            held, defined, session = [], set(), f.session_id
        scan = _scan(f.input_messages, scan if f.session_id is not None else None)
        held.append((f, _call(f, scan)))
        defined.update(t.name for t in f.tools)
    yield from judged()
