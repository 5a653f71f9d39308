"""Call identity: which captures are one model call (docs/store.md, "Call identity").

A capture is one fact as a translator made it. Ids only *propose* that two captures are one call:
captures that share an ``inference_call_id`` (a span and the log events of that span) or a
``model_call_id`` (an instrumentation and the proxy saw one response) are candidates. Content
*disposes*: two candidates are one call only when what both recorded agrees — the same session,
the same input and the same output wherever both have one (``agree``). Servers that hand out
ids from a tiny range, per second or from a cache therefore never merge calls that differ.

The rule is a pure function of the set of captures, whatever order they came in: captures are
ranked (``rank``: what they lack, then time, id and digest), and taken in that order; each joins
the call of the first earlier capture it shares an id with and agrees with (and whose call's
first capture it agrees with), or starts a call of its own. A call's first capture is the one
derivations read. A call takes its first capture's ``inference_call_id``, unless an earlier
call already has it (an id collision): then ``derived_call_id`` names it. Stores keep the
decisions in an index; fact files apply the same function in memory.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import msgspec

from lithify.model import (
    BlobPart,
    FilePart,
    InferenceCall,
    Message,
    ServerToolCallPart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    UriPart,
)

_content = msgspec.json.Encoder()
_PARTS = 2**20 - 1
_PARTS_AT = 40  # the bit of ``lack`` its parts field starts at
_SIZE = 2**40 - 1


def part_count(fact: InferenceCall) -> int:
    """The canonical parts of a fact's messages, input and output."""
    return sum(len(m.parts) for m in fact.input_messages) + sum(
        len(m.parts) for m in fact.output_messages
    )


def lack(fact: InferenceCall) -> int:
    """What a capture lacks, as one integer that ranks a call's captures (the least first):
    any message part (a span that recorded only the call's metadata, its content on log
    events), then a session (without one the call leaves its trajectory), then message parts (a
    capture that lost a reasoning step or a tool result has fewer), then content, as the bytes
    of its messages and tools in JSON (an instrumentation may cut text short)."""
    parts = part_count(fact)
    content = (fact.input_messages, fact.output_messages, fact.tools)
    try:
        size = len(_content.encode(content))
    except (UnicodeEncodeError, TypeError, ValueError):  # lone surrogates, 2⁶⁴ and beyond
        size = len(repr(content))
    return (
        ((parts == 0) << 61)
        | ((fact.session_id is None) << 60)
        | ((_PARTS - min(parts, _PARTS)) << _PARTS_AT)
        | (_SIZE - min(size, _SIZE))
    )


# What a call's first capture may leave empty and another capture of the call may hold: the
# call's metadata, not its messages (but for a finish reason left null, and a whole half of
# them in ``_halves``), degradations or raw (those stay the capture's own, or follow a half).
_FILLED = (
    "session_id",
    "trace_id",
    "span_id",
    "parent_span_id",
    "provider",
    "model",
    "tools",
    "request",
    "input_tokens",
    "output_tokens",
    "duration_ms",
    "started_at",
    "observed_at",
    "model_call_id",
)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, list | dict) and not value)


def _has_parts(messages: Sequence[Message]) -> bool:
    return any(m.parts for m in messages)


def _halves(first: InferenceCall, others: Sequence[InferenceCall]) -> InferenceCall:
    """``first`` with the input or the output it has no part of taken whole from the first
    other capture (in rank order) that has parts there, when every other capture with parts
    there recorded the same: the per-message log events of one call sent in two requests (its
    input as the call starts, its choices when it ends) are two captures that agree, one of
    each half. The capture taken gives its degradations (counted over records the first did
    not read) and, both being record lists, its records to ``raw``."""
    found: dict[str, Any] = {}
    for half in ("input_messages", "output_messages"):
        if _has_parts(getattr(first, half)):
            continue
        having = [o for o in others if _has_parts(getattr(o, half))]
        # Captures that recorded different halves (pieces of one input, each sent alone) agree
        # with a capture of the other half each, yet none of them is the call's whole half.
        if not having or len({_key(getattr(o, half)) for o in having}) > 1:
            continue
        taken = having[0]
        found[half] = getattr(taken, half)
        counts = dict(found.get("degradations", first.degradations))
        for reason, n in taken.degradations.items():
            counts[reason] = counts.get(reason, 0) + n
        found["degradations"] = counts
        raw = found.get("raw", first.raw)
        if isinstance(raw, list) and isinstance(taken.raw, list):
            found["raw"] = [*raw, *taken.raw]
    return msgspec.structs.replace(first, **found) if found else first


def split_ids(captures: Iterable[tuple[str, bytes]]) -> set[str]:
    """Of ``(inference_call_id, call)`` pairs, one per capture: the ids whose captures are in
    more than one call. A call with a capture of one of them takes no half (``fill``)."""
    call_of: dict[str, bytes] = {}
    split: set[str] = set()
    for ident, call in captures:
        if call_of.setdefault(ident, call) != call:
            split.add(ident)
    return split


def fill(
    first: InferenceCall, others: Iterable[InferenceCall], *, halves: bool = False
) -> InferenceCall:
    """The fact a call is read as: its first capture, each metadata field it left empty (None,
    or no tools or request parameters at all) taken from the first of the call's other captures
    (in rank order) that has it, and so is each output message's finish reason it left null
    (from a capture with as many output messages). A span may hold a call's model, usage,
    session, response id and finish reasons while its log events hold the messages
    (docs/store.md, Call identity). ``halves``: also a whole input or output the first capture
    has no part of (``_halves``); callers pass it when none of the call's ids is in
    ``split_ids`` (a capture set apart as another call: then the captures may be pieces of one
    input, and a half taken would make a conversation that never was)."""
    others = list(others)
    if halves:
        first = _halves(first, others)
    missing = [name for name in _FILLED if _empty(getattr(first, name))]
    outputs = first.output_messages
    unfinished = [i for i, m in enumerate(outputs) if m.finish_reason is None]
    if not missing and not unfinished:
        return first
    found: dict[str, Any] = {}
    reasons: dict[int, str] = {}
    for other in others:
        for name in missing:
            if name not in found and not _empty(value := getattr(other, name)):
                found[name] = value
        if len(other.output_messages) == len(outputs):
            for i in unfinished:
                if i not in reasons and (reason := other.output_messages[i].finish_reason):
                    reasons[i] = reason
        if len(found) == len(missing) and len(reasons) == len(unfinished):
            break
    if reasons:
        found["output_messages"] = [
            Message(m.role, m.parts, reasons[i]) if i in reasons else m
            for i, m in enumerate(outputs)
        ]
    return msgspec.structs.replace(first, **found) if found else first


def lacked_parts(value: int) -> int:
    """The parts field of a ``lack``: of two captures, the one with the lower holds more
    message parts (exports count the dropped captures richer than the one read)."""
    return (value >> _PARTS_AT) & _PARTS


def lacked_parts_sql(column: str) -> str:
    """``lacked_parts`` of an integer column, in SQL that SQLite and PostgreSQL both run, so a
    store compares captures as fact files do."""
    return f"(({column} >> {_PARTS_AT}) & {_PARTS})"


def capture_digest(body: bytes) -> bytes:
    """Tells captures apart and breaks ties between them: 128 bits of BLAKE2b over the fact's
    lossless bytes (``codec.encode``), so a rank can live in a database column."""
    return hashlib.blake2b(body, digest_size=16).digest()


def _canon(value: Any) -> Any:
    """A value with object keys sorted, so two recordings of one JSON value compare equal."""
    if isinstance(value, dict):
        return tuple(sorted(((str(k), _canon(v)) for k, v in value.items()), key=repr))
    if isinstance(value, list | tuple):
        return tuple(_canon(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # NaN != NaN: one recording of it must still equal another
    return value


def _result(value: Any) -> Any:
    """A tool result as comparable content: one source records the JSON text a tool returned,
    another the value it parsed from it."""
    if isinstance(value, str):
        try:
            value = msgspec.json.decode(value)
        except (msgspec.DecodeError, UnicodeEncodeError):
            return value
    return _canon(value)


def _atoms(messages: Sequence[Message]) -> tuple[Any, ...]:
    """What every faithful recording of these messages has in common: text, tool calls (name
    and arguments), tool results, media and server tools, by role. Reasoning is left out (instrumentations drop it,
    and opaque reasoning is recorded differently by each source), and so are tool-call ids
    (a source without ids synthesizes its own)."""
    out: list[Any] = []
    for m in messages:
        atoms: list[Any] = []
        for p in m.parts:
            if isinstance(p, TextPart):
                atoms.append(("t", p.content))
            elif isinstance(p, ToolCallPart):
                atoms.append(("c", p.name, _canon(p.arguments)))
            elif isinstance(p, ToolCallResponsePart):
                atoms.append(("r", _result(p.result)))
            # Media by what addresses it: a computer-use agent sends the same text every turn
            # and only its screenshot differs. Server tools by name only: their details are
            # recorded differently by spans and by provider bodies.
            elif isinstance(p, BlobPart):
                atoms.append(("b", p.sha256))
            elif isinstance(p, FilePart):
                atoms.append(("f", p.file_id))
            elif isinstance(p, UriPart):
                atoms.append(("u", p.uri))
            elif isinstance(p, ServerToolCallPart):
                atoms.append(("s", p.name))
        if atoms:
            out.append((m.role, tuple(atoms)))
    return tuple(out)


def _key(messages: Sequence[Message]) -> bytes | None:
    atoms = _atoms(messages)
    if not atoms:
        return None  # nothing recorded: no evidence either way
    text = repr(atoms).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=16).digest()


def content_keys(fact: InferenceCall) -> tuple[bytes | None, bytes | None]:
    """The digests of a capture's input and of its output as ``agree`` compares them; ``None``
    where the capture recorded none (a response captured alone has no input)."""
    return _key(fact.input_messages), _key(fact.output_messages)


class Capture(NamedTuple):
    """What the rule reads of one capture. Strings are as the caller compares them (a store
    passes its column forms, files the values: the rule only tests them for equality and
    order)."""

    digest: bytes
    lack: int
    sort_at: str
    inference_call_id: str
    model_call_id: str | None
    session_id: str | None
    in_key: bytes | None
    out_key: bytes | None

    @property
    def rank(self) -> tuple[int, str, str, bytes]:
        return self.lack, self.sort_at, self.inference_call_id, self.digest


class Assignment(NamedTuple):
    """The call a capture belongs to: the digest of the call's first capture (the one read),
    the call's id, and whether the call collided (it shares an id with an earlier capture whose
    content contradicts it: reason ``id_collision``)."""

    call: bytes
    call_id: str
    collided: bool


def agree(a: Capture, b: Capture) -> bool:
    """Nothing both captures recorded contradicts the other: the session, the input and the
    output are each missing on one side or equal."""
    return (
        (a.session_id is None or b.session_id is None or a.session_id == b.session_id)
        and (a.in_key is None or b.in_key is None or a.in_key == b.in_key)
        and (a.out_key is None or b.out_key is None or a.out_key == b.out_key)
    )


def derived_call_id(inference_call_id: str, digest: bytes) -> str:
    """The id of a call whose first capture's id an earlier call already has: 32 hex digits
    from that id and the capture's digest, so it is the same wherever the captures are read."""
    seed = inference_call_id.encode("utf-8", "surrogatepass") + b"\x00" + digest
    return hashlib.sha256(seed).hexdigest()[:32]


def assign(
    ranked: Iterable[Capture],
    prior: Iterable[tuple[Capture, Assignment]] = (),
    reps: Iterable[Capture] = (),
) -> list[Assignment]:
    """The call of each capture of ``ranked`` (in rank order). ``prior``: captures ranked before
    the first of them, with their calls as decided before, that share an id with any of them
    (a store deciding again from a new capture's rank on); ``reps``: the first captures of
    those prior calls."""
    by_id: dict[str, list[tuple[Capture, Assignment]]] = {}
    by_model_id: dict[str, list[tuple[Capture, Assignment]]] = {}
    first: dict[bytes, Capture] = {r.digest: r for r in reps}
    taken: set[str] = set()

    def note(c: Capture, a: Assignment) -> None:
        by_id.setdefault(c.inference_call_id, []).append((c, a))
        if c.model_call_id is not None:
            by_model_id.setdefault(c.model_call_id, []).append((c, a))
        if a.call == c.digest:
            first[c.digest] = c
            taken.add(a.call_id)

    for c, a in prior:
        note(c, a)
    out: list[Assignment] = []
    for c in ranked:
        candidates = list(by_id.get(c.inference_call_id, ()))
        if c.model_call_id is not None:
            candidates += by_model_id.get(c.model_call_id, ())
        candidates.sort(key=lambda ca: ca[0].rank)
        found: Assignment | None = None
        for other, a in candidates:
            rep = first.get(a.call)
            if agree(c, other) and (rep is None or agree(c, rep)):
                found = a
                break
        if found is not None:
            a = found
        else:
            cid = c.inference_call_id
            if cid in taken:
                cid = derived_call_id(cid, c.digest)
            a = Assignment(c.digest, cid, bool(candidates))
        note(c, a)
        out.append(a)
    return out


def aliases(captures: Iterable[tuple[str, str, bool]]) -> dict[str, str]:
    """Other names of calls, for feedback that names a capture the rule does not read:
    ``(inference_call_id, call_id, first)`` of captures → ``{id: call_id}`` for every id that is
    no call's id and names captures of one call only (a join that is ambiguous is dropped, not
    guessed)."""
    call_ids: set[str] = set()
    found: dict[str, set[str]] = {}
    for inference_call_id, call_id, first in captures:
        if first:
            call_ids.add(call_id)
        found.setdefault(inference_call_id, set()).add(call_id)
    return {
        alias: next(iter(to))
        for alias, to in found.items()
        if len(to) == 1 and alias not in call_ids and alias != next(iter(to))
    }
