"""Row kinds: SFT, NeMo Gym, preference (DPO) and RL rows from segments (docs/export.md).

A ``RowBuilder`` turns segments into validated rows for one kind, shape and profile. Rows that
cannot be represented are counted by reason (``skipped``), rows the ``--where`` filter leaves
out are counted as ``filtered``; nothing is dropped without a count.

One module past 500 lines: the four kinds are built by one ``RowBuilder`` whose state they share
(profile, validator, counts, the tools of the last call, the DPO candidates), and SFT rows are
joined from per-message JSON pieces (``_Messages``, ``_assemble``) that only that builder feeds;
split by kind, each part would reach back into the others.
"""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import msgspec
import orjson

from lithify.derive import Segment, Turn
from lithify.export.media import DEFAULT_MAX_INLINE, MEDIA_TYPES, Media, image_path
from lithify.export.profiles import Profile
from lithify.export.trainer import (
    EXCLUDE_FEEDBACK,
    LOSSY_DEGRADATIONS,
    TOOL_MEDIA_AS_USER,
    RowSkip,
    check_id,
    check_value,
    flat_tools,
    response_items,
    tool_media_moved,
    trainer_messages,
    trainer_tools,
)
from lithify.export.validate import RowValidator, row_schema_id
from lithify.export.where import Condition, Value, numeric
from lithify.model import (
    BlobPart,
    Feedback,
    InferenceCall,
    Message,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
)

# In every row's metadata. The version the package states (tests/export/test_pipeline_workers.py
# holds it equal to the distribution's), read from the package, always imported before its
# stages, not imported here (a stage does not import the package's face), and not through
# importlib.metadata, whose import costs an export process (and each worker) more than this
# module does.
EXPORTER = f"lithify {sys.modules['lithify'].__version__}"

# The shapes each kind can take (the first is the default).
SHAPES: dict[str, tuple[str, ...]] = {
    "sft": ("messages", "prompt-completion"),
    "nemo-gym": ("segment",),
    "dpo": ("preference",),
    "rl": ("segment",),
}


def shape_for(kind: str, profile: Profile, requested: str | None) -> str:
    """The row shape for ``kind`` under ``profile`` (``requested``: the SFT ``--shape``)."""
    if profile.name == "nemo-gym":
        return "native"
    if kind == "dpo":
        return "openai-preference" if profile.name == "openai" else "preference"
    if kind == "rl":
        return "prompt-completion" if profile.name == "trl" else "segment"
    if kind == "sft":
        shape = requested or "messages"
        if shape not in SHAPES["sft"]:
            raise ValueError(f"--shape must be one of {', '.join(SHAPES['sft'])}")
        if shape != "messages" and profile.name == "openai":
            raise ValueError("the openai profile writes messages rows only")
        return shape
    return "segment"


def split_of(key: str, eval_fraction: float) -> str:
    """``train`` or ``eval`` from a hash of ``key`` (the session id): no seed, no state."""
    if eval_fraction <= 0:
        return "train"
    if eval_fraction >= 1:
        return "eval"
    h = int.from_bytes(hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:8], "big")
    return "eval" if h < eval_fraction * 2**64 else "train"


def digest(value: Any) -> bytes:
    """16 bytes identifying an exact prompt (its JSON as exported)."""
    return hashlib.blake2b(orjson.dumps(value), digest_size=16).digest()


@dataclass(slots=True)
class Row:
    data: dict[str, Any]
    # The row's JSON, one line without the newline; b"" while it is to be encoded again, whole,
    # by ``set_metadata`` (a row cut to a token budget, one whose tools were recovered).
    encoded: bytes
    split: str
    prompt: bytes  # digest of the row's exact prompt
    source_ids: list[str]
    # Where top-level values lie in ``encoded`` (name → start, end), when the builder knows:
    # a Parquet writer then takes their JSON from there rather than encoding them again.
    spans: dict[str, tuple[int, int]] | None = None
    # TRL vision rows: the images the row shows, in order (its ``images`` column names them);
    # the writer puts their bytes beside JSONL rows or into the Parquet column.
    media: list[BlobPart] | None = None

    def set_metadata(self, **fields: Any) -> Row:
        """This row with ``fields`` set in its ``metadata``, its JSON as encoding the whole
        row would give (only the metadata is encoded again, where its place is known; nothing
        when it holds ``fields`` already, as a row's ``"flags": []`` from the builder does)."""
        meta = self.data["metadata"]
        if self.encoded and all(_holds(meta, k, v) for k, v in fields.items()):
            return self
        meta.update(fields)
        span = self.spans.get("metadata") if self.spans else None
        if span is None:
            self.encoded = orjson.dumps(self.data)
            return self
        start, end = span
        encoded = orjson.dumps(meta)
        self.encoded = self.encoded[:start] + encoded + self.encoded[end:]
        assert self.spans is not None
        self.spans = {**self.spans, "metadata": (start, start + len(encoded))}
        return self


def _holds(meta: dict[str, Any], key: str, value: Any) -> bool:
    # Compared as JSON: 1 == True == 1.0 in Python, not in a row.
    return key in meta and orjson.dumps(meta[key]) == orjson.dumps(value)


_PIECE_HEAD = len(b'{"m":[')


def _piece(message: dict[str, Any]) -> bytes | None:
    """A message's JSON as a row holds it in a list (``{"messages": [...]}``), or None when
    JSON cannot carry it. Encoded at the depth it has in the row, so orjson's nesting limit
    judges it as it would the whole row."""
    try:
        return orjson.dumps({"m": [message]})[_PIECE_HEAD:-2]
    except orjson.JSONEncodeError:
        return None


def has_prompt(roles: Iterable[str]) -> bool:
    """A conversation a model can answer: some user or tool message, not only instructions."""
    return any(r in ("user", "tool") for r in roles)


class _Messages:
    """Messages of a row's list as the row holds them, each encoded and validated once.

    Rows of one segment repeat their context: row k's prompt is row k-1's prompt and a few
    messages more. Rows are joined from these pieces (byte for byte what encoding the whole
    row gives, see ``_assemble``), and, when prompts are compared (``hashing``), the prompt
    digest comes from a running hash of its JSON. The messages are never changed once here.
    """

    __slots__ = (
        "body",
        "hasher",
        "images",
        "list_name",
        "messages",
        "prompted",
        "unrepresentable",
        "valid",
    )

    def __init__(self, list_name: str, hashing: bool = False) -> None:
        self.list_name = list_name  # the row's list they are in (messages, prompt, completion)
        self.messages: list[dict[str, Any]] = []
        self.body = bytearray()  # their JSON, joined by commas
        self.unrepresentable = False  # one that JSON cannot carry: no row can hold them
        self.valid = True  # every one valid as an item of the row's list
        self.prompted = False  # has_prompt: some message a model answers
        self.hasher = hashlib.sha256() if hashing else None  # of ``body``, as it grows
        self.images: list[BlobPart] = []  # TRL vision rows: the images they show, in order

    def _append(self, data: bytes | bytearray) -> None:
        if self.body:
            self.body += b","
            if self.hasher is not None:
                self.hasher.update(b",")
        self.body += data
        if self.hasher is not None:
            self.hasher.update(data)

    def add(self, message: dict[str, Any], piece: bytes | None, valid: bool) -> None:
        self.messages.append(message)
        self.valid = self.valid and valid
        self.prompted = self.prompted or has_prompt((message["role"],))
        if piece is None:
            self.unrepresentable = True
        elif not self.unrepresentable:
            self._append(piece)

    def extend(
        self,
        messages: list[dict[str, Any]],
        validator: RowValidator,
        images: Sequence[BlobPart] = (),
    ) -> None:
        self.images.extend(images)
        for m in messages:
            self.add(m, _piece(m), self.valid and validator.item_valid(self.list_name, m))

    def join(self, other: _Messages) -> None:
        """Add ``other``'s messages, encoded and validated there for the same list."""
        self.messages.extend(other.messages)
        self.images.extend(other.images)
        self.valid = self.valid and other.valid
        self.prompted = self.prompted or other.prompted
        self.unrepresentable = self.unrepresentable or other.unrepresentable
        if other.body and not self.unrepresentable:
            self._append(other.body)

    def digest(self, tools: bytes) -> bytes:
        """16 bytes identifying the exact prompt (these messages' JSON) with the tools
        (``tools``: a digest of their JSON); equal only for equal prompts. Not written anywhere:
        the rows of one export compare them (eval prompts that are also train prompts)."""
        if self.hasher is None:
            return _NO_DIGEST
        return hashlib.sha256(self.hasher.digest() + tools).digest()[:16]


# Rows of an export without both splits are never compared by prompt.
_NO_DIGEST = bytes(16)


def prompt_digest(messages: Sequence[dict[str, Any]], tools: list[dict[str, Any]]) -> bytes:
    """What ``_Messages.digest`` gives for ``messages`` with ``tools``, from the lists alone
    (a row made again, e.g. cut to a token budget, is compared as the others are)."""
    body = b",".join(orjson.dumps(m) for m in messages)
    tools_digest = hashlib.sha256(orjson.dumps(tools)).digest()
    return hashlib.sha256(hashlib.sha256(body).digest() + tools_digest).digest()[:16]


@lru_cache(maxsize=64)
def _key(name: str, first: bool) -> bytes:
    """``{"name":`` or ``,"name":``: what precedes a value in a row's JSON."""
    return b'%s"%s":' % (b"{" if first else b",", name.encode())


def _assemble(
    columns: list[tuple[str, list[bytes | bytearray]]],
) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """A row's JSON from its values' JSON (each given in chunks), as ``orjson.dumps`` writes
    the dict (compact, keys in this order), and where each value lies in it."""
    out: list[bytes | bytearray] = []
    spans: dict[str, tuple[int, int]] = {}
    at = 0
    for i, (name, chunks) in enumerate(columns):
        head = _key(name, not i)
        out.append(head)
        at += len(head)
        start = at
        for c in chunks:
            out.append(c)
            at += len(c)
        spans[name] = (start, at)
    out.append(b"}")
    return b"".join(out), spans


@dataclass
class Counts:
    rows: Counter[str] = field(default_factory=Counter)  # built (before the eval prompt rule)
    skipped: Counter[str] = field(default_factory=Counter)
    filtered: int = 0
    changes: Counter[str] = field(default_factory=Counter)
    segments: int = 0


# Trainer tools, their JSON in a row (None: JSON cannot carry them), whether all are valid
# items of a row's tools, and a digest of their JSON.
_Tools = tuple[list[dict[str, Any]], bytes | None, bool, bytes]


def _lossy(call: InferenceCall) -> str | None:
    for reason in call.degradations:
        if reason in LOSSY_DEGRADATIONS:
            return reason
    refs = call.degradations.get("content_reference", 0)
    if refs and refs > _references(call):
        # A reference a source recorded without a part: the row would not show it.
        return "content_reference"
    return None


def _references(call: InferenceCall) -> int:
    """The file and uri parts of a call: each counted ``content_reference`` at conversion."""
    return sum(
        1
        for m in (*call.input_messages, *call.output_messages)
        for p in m.parts
        if isinstance(p, MEDIA_TYPES) and not isinstance(p, BlobPart)
    )


def _canonical_row(m: Message, *, omit_null_finish: bool) -> dict[str, Any]:
    doc = msgspec.to_builtins(m)
    if omit_null_finish and doc.get("finish_reason") is None:
        doc.pop("finish_reason", None)
    return doc


def _check_canonical(messages: Sequence[Message], max_inline: int) -> None:
    """What canonical NeMo Gym rows cannot carry: NUL/surrogate ids, non-finite numbers, blobs
    over ``max_inline`` bytes (canonical parts carry their bytes inline)."""
    for m in messages:
        for p in m.parts:
            if isinstance(p, BlobPart) and p.size > max_inline:
                raise RowSkip("media_too_large", f"a {p.size}-byte {p.modality}")
            if isinstance(p, ToolCallPart):
                check_id(p.id)
                check_value(p.arguments)
            elif isinstance(p, ToolCallResponsePart):
                check_id(p.id)
                check_value(p.result)
            elif isinstance(p, ServerToolCallPart | ServerToolCallResponsePart):
                if p.id is not None:
                    check_id(p.id)
                check_value(
                    p.server_tool_call
                    if isinstance(p, ServerToolCallPart)
                    else p.server_tool_call_response
                )


def _after_input(segment: Segment) -> list[Message]:
    """What followed a segment's first input: each turn's chosen output, and the new messages
    of every later turn (tool results, a new user turn), in order."""
    rest: list[Message] = []
    for k, t in enumerate(segment.turns):
        if k:
            rest.extend(t.new_messages)
        out = _output(t)
        if out is not None:
            rest.append(out)
    return rest


def _output(turn: Turn) -> Message | None:
    outs = turn.call.output_messages
    return outs[turn.chosen] if 0 <= turn.chosen < len(outs) else None


@dataclass
class _Candidate:
    score: float
    call_id: str
    output: list[dict[str, Any]]
    split_key: str
    session_id: str | None
    segment_id: str
    model: str | None
    source_ids: list[str]
    changes: frozenset[str]  # what the profile changed in its prompt and output


@dataclass
class Tally:
    """A builder's counts and DPO candidates (``RowBuilder.tally``), picklable."""

    counts: Counts
    prompts: dict[bytes, tuple[list[dict[str, Any]], list[dict[str, Any]]]]
    best: dict[bytes, _Candidate]
    worst: dict[bytes, _Candidate]


def _values(feedback: list[Feedback]) -> dict[str, Value]:
    """Feedback values by name, as derivation joined them to a turn or a segment."""
    return {f.name: f.value for f in feedback}


class RowBuilder:
    """Rows of one kind, shape and profile; validated, encoded and assigned a split."""

    def __init__(
        self,
        kind: str,
        profile: Profile,
        *,
        shape: str | None = None,
        eval_fraction: float = 0.0,
        where: Sequence[Condition] = (),
        reward: str = "score",
        keep_degraded: bool = False,
        max_inline: int = DEFAULT_MAX_INLINE,
    ) -> None:
        self.kind = kind
        self.profile = profile
        self.shape = shape_for(kind, profile, shape)
        self.eval_fraction = eval_fraction
        self.where = list(where)
        self.reward_name = reward
        self.keep_degraded = keep_degraded
        self.media = Media(profile.media_mode, max_inline)
        self.validator = RowValidator(kind, self.shape, profile)
        self.schema_id = row_schema_id(kind, self.shape, profile)
        self.counts = Counts()
        self._last_tools: tuple[list[ToolDefinition], _Tools] | None = None
        # Prompts are compared (eval_prompt_in_train) only when rows go to both splits.
        self._compares = 0 < eval_fraction < 1
        # DPO: per exact prompt, the best and the worst scored completion seen so far.
        self._prompts: dict[bytes, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
        self._best: dict[bytes, _Candidate] = {}
        self._worst: dict[bytes, _Candidate] = {}

    # -- shared ------------------------------------------------------------------------------
    def _messages(
        self,
        messages: Sequence[Message],
        names: dict[str, str],
        images: list[BlobPart] | None = None,
    ) -> tuple[list[dict[str, Any]], frozenset[str]]:
        """Profile-shaped trainer messages, and what the profile changed in them
        (``PROFILE_CHANGES``; TRL vision rows: the images they show are appended to
        ``images``)."""
        out = trainer_messages(messages, names, self.media, images)
        changes: set[str] = set()
        if self.profile.reasoning_key is None and any("thinking" in m for m in out):
            changes.add("reasoning_dropped")
        if tool_media_moved(messages, self.media):
            changes.add(TOOL_MEDIA_AS_USER)
        return self.profile.messages(out), frozenset(changes)

    def _target(
        self, output: Message, names: dict[str, str], images: list[BlobPart] | None = None
    ) -> tuple[list[dict[str, Any]], frozenset[str]]:
        """The trainer message of a turn's output, the row's target, as ``_messages`` makes it
        (none when the turn only reasoned and the profile drops reasoning: ``reasoning_only``).

        A row teaches the assistant's turn: an output in another role is no target (OpenAI's
        format refuses a weight or a preferred output on it; other formats would train on it).
        """
        if output.role != "assistant":
            raise RowSkip("non_assistant_output", output.role)
        return self._messages([output], names, images)

    def _changed(self, changes: Iterable[str]) -> None:
        """Count a written row's profile changes, each once."""
        for change in changes:
            self.counts.changes[change] += 1

    def _metadata(
        self,
        source_ids: list[str],
        session_id: str | None,
        segment_id: str,
        model: str | None,
        split: str,
        **extra: Any,
    ) -> dict[str, Any]:
        return {
            "source_call_ids": source_ids,
            "session_id": session_id,
            "segment_id": segment_id,
            "model": model,
            "split": split,
            "schema": self.schema_id,
            "exporter": EXPORTER,
            **extra,
            # Last, where the flagger sets it: a row without flags is then encoded once.
            "flags": [],
        }

    def _finish(self, data: dict[str, Any], prompt: Any, split: str, ids: list[str]) -> Row:
        try:
            encoded = orjson.dumps(data)
        except orjson.JSONEncodeError as e:  # lone surrogates, integers beyond 64 bits
            raise RowSkip("unrepresentable_value", str(e)) from None
        self.validator.check(data, ids)
        self.counts.rows[split] += 1
        return Row(data, encoded, split, digest(prompt), ids)

    def _skip(self, e: RowSkip) -> None:
        self.counts.skipped[e.reason] += 1

    def _degraded(self, turns: Sequence[Turn]) -> RowSkip | None:
        """Why rows holding these turns are left out: a call excluded by a person (always), or
        one that lost content at conversion (unless ``keep_degraded``)."""
        for t in turns:
            if any(f.name == EXCLUDE_FEEDBACK and f.value is True for f in t.feedback):
                return RowSkip("excluded", t.call.inference_call_id)
        if self.keep_degraded:
            return None
        for t in turns:
            reason = _lossy(t.call)
            if reason is not None:
                return RowSkip("degraded_fact", f"{t.call.inference_call_id}: {reason}")
        return None

    def _tools(self, call: InferenceCall) -> _Tools:
        """Trainer tools, their JSON in a row (None: JSON cannot carry them), whether each is
        valid as a row's tool, and a digest of their JSON; the calls of a session mostly offer
        the same tools, mapped, encoded and validated once."""
        last = self._last_tools
        if last is not None and (last[0] is call.tools or last[0] == call.tools):
            return last[1]
        tools = trainer_tools(call.tools)
        try:
            # At the depth tools have in a row ({"tools": [...]}), as _piece does for messages.
            encoded: bytes | None = orjson.dumps({"t": tools})[5:-1]
        except orjson.JSONEncodeError:
            encoded = None
        valid = all(self.validator.item_valid("tools", t) for t in tools)
        mapped = (tools, encoded, valid, hashlib.sha256(encoded or b"").digest())
        self._last_tools = (call.tools, mapped)
        return mapped

    def _wanted(self, values: dict[str, Value]) -> bool:
        """Whether feedback ``values`` satisfy every ``--where`` condition."""
        return all(c.matches(values) for c in self.where)

    # -- entry points ------------------------------------------------------------------------
    def rows(self, segment: Segment) -> Iterator[Row]:
        """The rows of one segment (DPO rows come from ``pairs()`` once all are seen)."""
        self.counts.segments += 1
        if self.kind == "sft":
            yield from self._sft(segment)
        elif self.kind == "dpo":
            self._observe(segment)
        elif self.shape == "native":
            row = self._guard(self._native, segment)
            if row is not None:
                yield row
        elif self.shape == "prompt-completion":
            row = self._guard(self._rl_trainer, segment)
            if row is not None:
                yield row
        else:
            row = self._guard(self._segment, segment)
            if row is not None:
                yield row

    def _guard(self, build: Any, segment: Segment) -> Row | None:
        values = _values(segment.feedback)
        if not self._wanted(values):
            self.counts.filtered += 1
            return None
        reward = numeric(values.get(self.reward_name))
        try:
            failure = self._degraded(segment.turns)
            if failure is not None:
                raise failure
            if not has_prompt(m.role for m in segment.turns[0].new_messages):
                raise RowSkip("no_prompt")
            if self.kind == "rl" and reward is None:
                raise RowSkip("no_reward", f"no numeric {self.reward_name!r} feedback")
            return build(segment, reward)
        except RowSkip as e:
            self._skip(e)
            return None

    # -- SFT ---------------------------------------------------------------------------------
    def _sft(self, segment: Segment) -> Iterator[Row]:
        names: dict[str, str] = {}
        # The context: what row k shows before turn k (earlier assistant turns: weight 0).
        context = _Messages(
            "messages" if self.shape == "messages" else "prompt", hashing=self._compares
        )
        changes: frozenset[str] = frozenset()
        failure: RowSkip | None = None
        ids: list[str] = []
        split_key = segment.session_id or segment.segment_id
        split = split_of(split_key, self.eval_fraction)
        for k, turn in enumerate(segment.turns):
            call = turn.call
            ids.append(call.inference_call_id)
            if failure is None:
                failure = self._degraded([turn])
            if failure is None:
                try:
                    shown: list[BlobPart] = []
                    msgs, d = self._messages(turn.new_messages, names, shown)
                    context.extend(self._weighted(msgs, 0), self.validator, shown)
                    changes |= d
                except RowSkip as e:
                    failure = e
            output = _output(turn)
            wanted = not self.where or self._wanted(_values(turn.feedback))
            target: list[dict[str, Any]] = []
            target_images: list[BlobPart] = []
            if failure is None and output is not None:
                try:
                    target, d = self._target(output, names, target_images)
                    changes |= d
                except RowSkip as e:
                    failure = e
            done: _Messages | None = None
            if not wanted:
                self.counts.filtered += 1
            elif output is None:
                self._skip(RowSkip("no_output"))
            elif failure is not None:
                self._skip(failure)
            elif not target:
                # Only this row: later rows show the turn as the profile does, left out.
                self._skip(RowSkip("reasoning_only"))
            elif not context.prompted:
                self._skip(RowSkip("no_prompt"))
            else:
                done = _Messages("messages" if self.shape == "messages" else "completion")
                done.extend(self._weighted(target, 1), self.validator, target_images)
                row = self._sft_row(segment, k, call, context, done, list(ids), split, changes)
                if row is not None:
                    yield row
            if (
                done is not None
                and done.list_name == context.list_name
                and not self.profile.weights
            ):
                context.join(done)  # the next rows hold the target as it is: encoded, validated
            else:
                context.extend(self._weighted(target, 0), self.validator, target_images)

    def _weighted(self, messages: list[dict[str, Any]], weight: int) -> list[dict[str, Any]]:
        """With weights, assistant turns carry ``weight`` (1: a training target; 0: context)."""
        if not self.profile.weights:
            return messages
        if weight:
            return [{**m, "weight": weight} for m in messages]
        return [{**m, "weight": 0} if m["role"] == "assistant" else m for m in messages]

    def _sft_row(
        self,
        segment: Segment,
        k: int,
        call: InferenceCall,
        context: _Messages,
        target: _Messages,
        ids: list[str],
        split: str,
        changes: frozenset[str],
    ) -> Row | None:
        try:
            tools, tools_json, tools_valid, tools_digest = self._tools(call)
        except RowSkip as e:
            self._skip(e)
            return None
        meta = self._metadata(
            ids, segment.session_id, segment.segment_id, call.model, split, turn=k
        )
        # Fresh lists: the context grows on after this row.
        completion = target.messages
        if self.shape == "messages":
            data = {"messages": context.messages + completion, "tools": tools}
        else:
            prompt = list(context.messages)
            data = {"prompt": prompt, "completion": completion, "tools": tools}
        shown = context.images + target.images if self.profile.images else None
        if shown is not None:
            data["images"] = [image_path(b) for b in shown]
        data["metadata"] = meta
        try:
            meta_json = orjson.dumps(meta)
        except orjson.JSONEncodeError:  # lone surrogates, e.g. in a session id
            meta_json = None
        if context.unrepresentable or target.unrepresentable or None in (tools_json, meta_json):
            # What orjson.dumps(data) refuses: the row cannot be written.
            self._skip(RowSkip("unrepresentable_value"))
            return None
        assert tools_json is not None and meta_json is not None
        if self.shape == "messages":
            comma = b"," if context.body and target.body else b""
            lists = [("messages", [b"[", context.body, comma, target.body, b"]"])]
        else:
            lists = [
                ("prompt", [b"[", context.body, b"]"]),
                ("completion", [b"[", target.body, b"]"]),
            ]
        images = [] if shown is None else [("images", [orjson.dumps(data["images"])])]
        encoded, spans = _assemble(
            [*lists, ("tools", [tools_json]), *images, ("metadata", [meta_json])]
        )
        # Every row is validated: its messages and tools item by item as they were made (each
        # once: rows repeat them), the rest of the row here.
        self.validator.check_rest(data, ids, context.valid and target.valid and tools_valid)
        self.counts.rows[split] += 1
        row = Row(data, encoded, split, context.digest(tools_digest), ids, spans, shown)
        self._changed(changes)
        return row

    # -- NeMo Gym / RL, canonical ------------------------------------------------------------
    def _segment(self, segment: Segment, reward: float | None) -> Row:
        first = segment.turns[0]
        every = [m for t in segment.turns for m in t.new_messages]
        outputs = [o for t in segment.turns if (o := _output(t)) is not None]
        _check_canonical(every + outputs, self.media.max_inline)
        tools = trainer_tools(first.call.tools)
        params = {"input": [_canonical_row(m, omit_null_finish=True) for m in first.new_messages]}
        turns = []
        for k, t in enumerate(segment.turns):
            out = _output(t)
            turns.append(
                {
                    "inference_call_id": t.call.inference_call_id,
                    "messages": []
                    if k == 0
                    else [_canonical_row(m, omit_null_finish=False) for m in t.new_messages],
                    "output": None if out is None else _canonical_row(out, omit_null_finish=False),
                }
            )
        ids = [t.call.inference_call_id for t in segment.turns]
        split = split_of(segment.session_id or segment.segment_id, self.eval_fraction)
        meta = self._metadata(ids, segment.session_id, segment.segment_id, first.call.model, split)
        data: dict[str, Any] = {"responses_create_params": params, "tools": tools, "turns": turns}
        if reward is not None:
            data["reward"] = reward
        data["metadata"] = meta
        return self._finish(data, [params, tools], split, ids)

    # -- NeMo Gym / RL, native Responses items -----------------------------------------------
    def _native(self, segment: Segment, reward: float | None) -> Row:
        first = segment.turns[0]
        names: dict[str, str] = {}
        seed = segment.segment_id
        items = response_items(first.new_messages, f"{seed}:input", names, self.media)
        rest = _after_input(segment)
        recorded = response_items(rest, f"{seed}:output", names, self.media)
        params = {"input": items, "tools": flat_tools(first.call.tools)}
        ids = [t.call.inference_call_id for t in segment.turns]
        split = split_of(segment.session_id or segment.segment_id, self.eval_fraction)
        extra = {} if reward is None else {"reward": reward}
        meta = self._metadata(
            ids, segment.session_id, segment.segment_id, first.call.model, split, **extra
        )
        data = {"responses_create_params": params, "recorded_output": recorded, "metadata": meta}
        row = self._finish(data, params, split, ids)
        if tool_media_moved([*first.new_messages, *rest], self.media):
            self._changed([TOOL_MEDIA_AS_USER])
        return row

    # -- RL, trainer messages ----------------------------------------------------------------
    def _rl_trainer(self, segment: Segment, reward: float | None) -> Row:
        first = segment.turns[0]
        names: dict[str, str] = {}
        prompt, changes = self._messages(first.new_messages, names)
        rest = _after_input(segment)
        if not any(m.role == "assistant" for m in rest):
            raise RowSkip("no_output")
        completion, d = self._messages(rest, names)
        tools = trainer_tools(first.call.tools)
        ids = [t.call.inference_call_id for t in segment.turns]
        split = split_of(segment.session_id or segment.segment_id, self.eval_fraction)
        meta = self._metadata(ids, segment.session_id, segment.segment_id, first.call.model, split)
        data = {
            "prompt": prompt,
            "completion": completion,
            "tools": tools,
            "reward": reward,
            "metadata": meta,
        }
        row = self._finish(data, [prompt, tools], split, ids)
        self._changed(changes | d)
        return row

    # -- DPO ---------------------------------------------------------------------------------
    def _observe(self, segment: Segment) -> None:
        """Remember, per exact prompt, the best and worst scored completion."""
        names: dict[str, str] = {}
        context: list[dict[str, Any]] = []
        ids: list[str] = []
        failure: RowSkip | None = None
        changes: frozenset[str] = frozenset()
        for turn in segment.turns:
            call = turn.call
            ids.append(call.inference_call_id)
            if failure is None:
                failure = self._degraded([turn])
            if failure is None:
                try:
                    msgs, d = self._messages(turn.new_messages, names)
                    context.extend(msgs)
                    changes |= d
                except RowSkip as e:
                    failure = e
            output = _output(turn)
            target: list[dict[str, Any]] = []
            target_changes: frozenset[str] = frozenset()
            if failure is None and output is not None:
                try:
                    target, target_changes = self._target(output, names)
                except RowSkip as e:
                    failure = e
            values = _values(turn.feedback)
            score = numeric(values.get(self.reward_name))
            if score is not None and output is not None:
                if not self._wanted(values):
                    self.counts.filtered += 1
                elif failure is not None:
                    self._skip(failure)
                elif not target:
                    self._skip(RowSkip("reasoning_only"))
                elif not has_prompt(m["role"] for m in context):
                    self._skip(RowSkip("no_prompt"))
                else:
                    cand_changes = changes | target_changes
                    self._candidate(segment, call, context, target, score, list(ids), cand_changes)
            context.extend(target)
            changes |= target_changes

    def _candidate(
        self,
        segment: Segment,
        call: InferenceCall,
        context: list[dict[str, Any]],
        target: list[dict[str, Any]],
        score: float,
        ids: list[str],
        changes: frozenset[str],
    ) -> None:
        try:
            tools = trainer_tools(call.tools)
            key = digest([context, tools])
        except (RowSkip, orjson.JSONEncodeError):
            self.counts.skipped["unrepresentable_value"] += 1
            return
        split_key = segment.session_id or segment.segment_id
        cand = _Candidate(
            score,
            call.inference_call_id,
            target,
            split_key,
            segment.session_id,
            segment.segment_id,
            call.model,
            ids,
            changes,
        )
        self._offer(key, (list(context), tools), cand)

    def _offer(
        self,
        key: bytes,
        prompt: tuple[list[dict[str, Any]], list[dict[str, Any]]],
        cand: _Candidate,
    ) -> None:
        """Keep ``cand`` if it is the best or the worst completion of its prompt so far."""
        if key not in self._prompts:
            self._prompts[key] = prompt
        # Ties go to the smallest call id, so the pair does not depend on the reading order.
        best = self._best.get(key)
        if best is None or (cand.score, best.call_id) > (best.score, cand.call_id):
            self._best[key] = cand
        worst = self._worst.get(key)
        if worst is None or (cand.score, cand.call_id) < (worst.score, worst.call_id):
            self._worst[key] = cand

    def tally(self) -> Tally:
        """What this builder counted and its DPO candidates, to ``merge`` into another."""
        return Tally(self.counts, self._prompts, self._best, self._worst)

    def merge(self, tally: Tally) -> None:
        """Add another builder's ``tally`` (one task of a distributed export, docs/scale.md):
        the counts add up and the pairs become those one builder seeing every segment makes."""
        c = self.counts
        c.rows.update(tally.counts.rows)
        c.skipped.update(tally.counts.skipped)
        c.changes.update(tally.counts.changes)
        c.filtered += tally.counts.filtered
        c.segments += tally.counts.segments
        for key, prompt in tally.prompts.items():
            self._offer(key, prompt, tally.best[key])
            self._offer(key, prompt, tally.worst[key])

    def pairs(self) -> Iterator[Row]:
        """DPO rows, one per prompt with a better and a worse completion, in prompt order."""
        for key in sorted(self._prompts):
            best, worst = self._best[key], self._worst[key]
            if best.score <= worst.score:
                continue  # no preference: every completion scored the same
            if orjson.dumps(best.output) == orjson.dumps(worst.output):
                self._skip(RowSkip("identical_pair", f"{best.call_id}, {worst.call_id}"))
                continue
            prompt, tools = self._prompts[key]
            split = split_of(best.split_key, self.eval_fraction)
            ids = [best.call_id, worst.call_id]
            meta = self._metadata(
                ids,
                best.session_id,
                best.segment_id,
                best.model,
                split,
                chosen_call_id=best.call_id,
                rejected_call_id=worst.call_id,
                chosen_score=best.score,
                rejected_score=worst.score,
            )
            if self.shape == "openai-preference":
                data = {
                    "input": {"messages": prompt, "tools": tools},
                    "preferred_output": best.output,
                    "non_preferred_output": worst.output,
                    "metadata": meta,
                }
            else:
                data = {
                    "prompt": prompt,
                    "chosen": best.output,
                    "rejected": worst.output,
                    "tools": tools,
                    "metadata": meta,
                }
            try:
                row = self._finish(data, [prompt, tools], split, ids)
            except RowSkip as e:
                self._skip(e)
                continue
            self._changed(best.changes | worst.changes)
            yield row
