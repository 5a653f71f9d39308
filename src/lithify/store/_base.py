"""What both backends share: errors, filters, results, row building and the SQL itself."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain, islice
from operator import itemgetter
from typing import Any, Literal, Protocol, Self, TypeVar

import msgspec
import orjson

from lithify.core import codec
from lithify.core.identity import (
    Assignment,
    Capture,
    aliases,
    assign,
    capture_digest,
    content_keys,
    lack,
)
from lithify.model import FEEDBACK_TARGETS, Feedback, InferenceCall
from lithify.store.migrations import SCHEMA_VERSION_TABLE, Migration

R = TypeVar("R")


class StoreError(Exception):
    """A store that cannot be used as asked (bad URL, foreign or corrupt database)."""


class StoreUnavailable(StoreError):
    """The database cannot be reached or cannot write right now; retrying later may succeed.

    The HTTP receiver answers 503 with ``Retry-After: retry_after``. The store object stays
    usable: its next call reconnects.
    """

    retry_after = 5


class SchemaTooNew(StoreError):
    """The database was migrated by a newer lithify than this one."""


class InsertResult(msgspec.Struct, frozen=True):
    """What a batch did: rows stored, and the ids of rows that collided with stored ones.

    A fact collides when its identity or its ``model_call_id`` was already stored (or came
    earlier in the same batch). It is a duplicate when its content equals a stored capture of
    that call (a redelivery), else a variant: another capture of the call, kept apart
    (docs/store.md). A fact that shares an id with a stored capture whose content contradicts
    it is a call of its own, counted in ``inserted`` and in ``collisions`` (reason
    ``id_collision``). The id lists follow the batch order; feedback has neither.
    """

    inserted: int
    duplicates: int
    duplicate_ids: list[str]
    variants: int = 0
    variant_ids: list[str] = msgspec.field(default_factory=list)
    collisions: int = 0
    collision_ids: list[str] = msgspec.field(default_factory=list)


class StoredCapture(msgspec.Struct, frozen=True):
    """One stored capture of a call: the fact as captured, whether it is the one reads give
    (``first``), and the id of its call."""

    fact: InferenceCall
    first: bool
    call_id: str


class _CapturesBusy(Exception):
    """Another writer holds the right to index captures: write the batch again, owning it."""


class TokenExists(StoreError, ValueError):
    """A live ingest token already has this name."""


class TokenInfo(msgspec.Struct, frozen=True):
    """An ingest token as listed: never the token, nor its hash."""

    name: str
    prefix: str  # the token's first characters, to tell tokens apart
    created_at: str
    revoked_at: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(slots=True)
class Prepared:
    """Rows built ahead of the write (``prepare``), e.g. in another process, so that the writer
    only runs SQL. ``insert_prepared`` stamps ``ingested_at`` when it commits them."""

    facts: list[tuple[Any, ...]]
    feedback: list[tuple[Any, ...]]


class Group(msgspec.Struct, frozen=True):
    """Facts and token sums of one value of a column (``key`` None: facts without one)."""

    key: str | None
    facts: int
    input_tokens: int
    output_tokens: int


class DegradationCount(msgspec.Struct, frozen=True):
    reason: str
    facts: int  # facts with at least one
    count: int  # occurrences, summed over facts


class Stats(msgspec.Struct, frozen=True):
    facts: int
    sessions: int
    input_tokens: int
    output_tokens: int
    feedback: int
    by_model: list[Group]
    by_provider: list[Group]
    by_source: list[Group]
    by_session: list[Group]  # the sessions with most facts, at most ``session_limit``
    degradations: list[DegradationCount]
    # Other captures of calls: kept apart and left out of derivations and exports (the two are
    # one count since calls are decided by content; ``variants`` is its older name).
    variants: int = 0
    dropped_captures: int = 0
    # Calls that share an id with an earlier-ranked capture whose content contradicts theirs.
    id_collisions: int = 0


Match = str | Sequence[str] | None
TimeBound = str | datetime | None


@dataclass(frozen=True)
class FactFilter:
    """Which facts to read. Several values for one field match any of them.

    ``since`` (inclusive) and ``until`` (exclusive) bound the fact's time: ``started_at``, else
    ``observed_at`` — the order facts are read in. A string bound is compared as RFC 3339 text
    (``"2025-06-01"`` works); a naive datetime is taken as UTC.

    ``order``: ``"time"`` reads facts in (sort_at, inference_call_id) order; ``"session"`` groups
    them by session for derivation: (session_id, sort_at, inference_call_id), then the facts
    without a session last, in time order. ``limit`` counts facts in that order.
    """

    session_id: Match = None
    model: Match = None
    source: Match = None
    provider: Match = None
    trace_id: Match = None
    since: TimeBound = None
    until: TimeBound = None
    limit: int | None = None
    order: Literal["time", "session"] = "time"


@dataclass(frozen=True)
class FeedbackFilter:
    target_kind: Match = None
    target_id: Match = None
    name: Match = None
    source: Match = None
    since: TimeBound = None  # on observed_at
    until: TimeBound = None
    limit: int | None = None


class FactStore(Protocol):
    """Immutable, deduplicated facts and feedback in a database (``open_store`` makes one)."""

    url: str  # for display: any password is masked

    def insert_facts(self, batch: Iterable[InferenceCall]) -> InsertResult: ...
    def insert_feedback(self, batch: Iterable[Feedback]) -> InsertResult: ...
    def iter_facts(
        self, filters: FactFilter | None = None, *, batch_size: int = 500
    ) -> Iterator[InferenceCall]: ...
    def iter_feedback(
        self, filters: FeedbackFilter | None = None, *, batch_size: int = 500
    ) -> Iterator[Feedback]: ...
    def get_fact(self, inference_call_id: str) -> InferenceCall | None: ...
    def captures(self, inference_call_id: str) -> list[StoredCapture]: ...
    def call_aliases(self, ids: Iterable[str]) -> dict[str, str]: ...
    def count(self, filters: FactFilter | None = None) -> int: ...
    def count_dropped(self, filters: FactFilter | None = None) -> int: ...
    def count_feedback(self, filters: FeedbackFilter | None = None) -> int: ...
    def stats(self, filters: FactFilter | None = None, *, session_limit: int = 20) -> Stats: ...
    def schema_version(self) -> int: ...
    def insert_prepared(
        self, batches: Sequence[Prepared]
    ) -> list[tuple[InsertResult, InsertResult]]: ...
    def create_token(self, name: str, token_hash: str, prefix: str) -> TokenInfo: ...
    def list_tokens(self) -> list[TokenInfo]: ...
    def revoke_token(self, name: str) -> int: ...
    def token_hashes(self) -> list[tuple[str, str, bool]]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...


FACT_COLUMNS = (
    "inference_call_id",
    "model_call_id",
    "session_id",
    "trace_id",
    "span_id",
    "provider",
    "model",
    "source",
    "started_at",
    "observed_at",
    "sort_at",
    "input_tokens",
    "output_tokens",
    "degradations",
    "ingested_at",
    "body",
)

# A capture of a stored call that differs from it: the fact's columns and its content digest.
VARIANT_COLUMNS = ("digest", *FACT_COLUMNS)

# fact_captures: every capture that shares an id with another, its rank (lack, sort_at,
# inference_call_id, digest), the columns reads filter and order on, its content keys, and the
# call the identity rule puts it in (core/identity.py).
_CAPTURED = (  # what a capture takes from its fact's columns
    "inference_call_id",
    "model_call_id",
    "session_id",
    "trace_id",
    "provider",
    "model",
    "source",
    "sort_at",
)
CAPTURE_COLUMNS = (
    "digest",
    "variant",  # 0: a facts row; 1: a fact_variants row
    "lack",  # identity.lack of the fact
    *_CAPTURED,
    "in_key",  # identity.content_keys: what agreement compares
    "out_key",
    "call",  # the digest of its call's first capture, the one reads give
    "call_id",  # its call's id: the first capture's id, or a derived one after a collision
    "collided",  # 1: its call shares an id with an earlier capture that contradicts it
    "kept",  # 1: the first capture of its call (call = digest)
)
_CAPTURED_AT = tuple(FACT_COLUMNS.index(c) for c in _CAPTURED)
_IS_VARIANT, _LACK, _ID, _MODEL_ID, _SESSION, _SORT_AT, _IN, _OUT, _CALL, _CALL_ID, _COLLIDED = (
    CAPTURE_COLUMNS.index(c)
    for c in (
        "variant",
        "lack",
        "inference_call_id",
        "model_call_id",
        "session_id",
        "sort_at",
        "in_key",
        "out_key",
        "call",
        "call_id",
        "collided",
    )
)
_KEPT = CAPTURE_COLUMNS.index("kept")
_DECISION = ("call", "call_id", "collided", "kept")
_RANK = "(lack, sort_at, inference_call_id, digest)"

FEEDBACK_COLUMNS = (
    "feedback_id",
    "target_kind",
    "target_id",
    "name",
    "value_kind",
    "value_number",
    "value_text",
    "source",
    "observed_at",
    "sort_at",
    "ingested_at",
    "body",
)

# Token columns feed SUM() in stats; SQLite's SUM raises on 64-bit overflow. Absurd counts stay
# on the stored fact but are left out of the column (and so of the sums).
_TOKEN_MAX = 2**48
_INT64_MAX = 2**63 - 1

_fact_decoder = codec.Decoder(InferenceCall)
_feedback_decoder = codec.Decoder(Feedback)


def now() -> str:
    """The current UTC time in the fact timestamp format (fixed width, sorts as text)."""
    t = datetime.now(UTC)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond:06d}000Z"


def time_bound(value: TimeBound) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    t = value.astimezone(UTC)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond:06d}000Z"


def _tokens(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _TOKEN_MAX:
        return value
    return None


def _text(value: Any) -> str | None:
    return codec.col(value) if isinstance(value, str) else None


def _degradations(value: Any) -> str:
    out: dict[str, int] = {}
    if isinstance(value, dict):
        for k, n in value.items():
            if isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool):
                out[codec.col(k) or ""] = max(-_INT64_MAX, min(n, _INT64_MAX))
    return orjson.dumps(out, option=orjson.OPT_SORT_KEYS).decode()


def _require_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    return value


def fact_row(fact: InferenceCall, ingested_at: str) -> tuple[Any, ...]:
    if not isinstance(fact, InferenceCall):
        raise TypeError(f"expected an InferenceCall, got {type(fact).__name__}")
    _require_id(fact.inference_call_id, "inference_call_id")
    source = fact.source.name if fact.source is not None else ""
    return (
        codec.col(fact.inference_call_id),
        _text(fact.model_call_id),
        _text(fact.session_id),
        _text(fact.trace_id),
        _text(fact.span_id),
        _text(fact.provider),
        _text(fact.model),
        codec.col(source) if isinstance(source, str) else "",
        _text(fact.started_at),
        _text(fact.observed_at),
        _text(fact.started_at) or _text(fact.observed_at) or "",
        _tokens(fact.input_tokens),
        _tokens(fact.output_tokens),
        _degradations(fact.degradations),
        ingested_at,
        codec.encode(fact),
    )


def feedback_row(fb: Feedback, ingested_at: str) -> tuple[Any, ...]:
    if not isinstance(fb, Feedback):
        raise TypeError(f"expected a Feedback, got {type(fb).__name__}")
    _require_id(fb.feedback_id, "feedback_id")
    _require_id(fb.target_id, "target_id")
    if fb.target_kind not in FEEDBACK_TARGETS:
        raise ValueError(f"target_kind must be one of {FEEDBACK_TARGETS}, got {fb.target_kind!r}")
    value = fb.value
    number: float | None = None
    text: str | None = None
    if isinstance(value, bool):
        kind, number = "bool", float(value)
    elif isinstance(value, int | float):
        kind = "number"
        try:
            number = float(value)
        except OverflowError:
            number = None
        if number is not None and not math.isfinite(number):
            number = None  # SQLite stores NaN as NULL; keep both backends alike
    elif isinstance(value, str):
        kind, text = "string", codec.col(value)
    else:
        raise ValueError(f"feedback value must be a number, bool or string, got {value!r}")
    return (
        codec.col(fb.feedback_id),
        fb.target_kind,
        codec.col(fb.target_id),
        codec.col(fb.name) if isinstance(fb.name, str) else "",
        kind,
        number,
        text,
        codec.col(fb.source) if isinstance(fb.source, str) else "",
        _text(fb.observed_at),
        _text(fb.observed_at) or "",
        ingested_at,
        codec.encode(fb),
    )


_FACT_INGESTED = FACT_COLUMNS.index("ingested_at")
_FEEDBACK_INGESTED = FEEDBACK_COLUMNS.index("ingested_at")


def prepare(facts: Iterable[InferenceCall], feedback: Iterable[Feedback] = ()) -> Prepared:
    """The rows ``insert_prepared`` writes; raises like ``insert_facts`` on an invalid item."""
    return Prepared([fact_row(f, "") for f in facts], [feedback_row(f, "") for f in feedback])


def _stamp(rows: list[tuple[Any, ...]], index: int, at: str) -> list[tuple[Any, ...]]:
    return [(*r[:index], at, *r[index + 1 :]) for r in rows]


# Whether any call has several captures: most stores have none, and read and write as before.
_ANY_CAPTURE = "SELECT 1 FROM fact_captures LIMIT 1"

# What became of each inserted row: a new call, a redelivery, another capture of a stored
# call, or a call of its own that shares an id with a capture that contradicts it.
_STORED, _DUPLICATE, _VARIANT, _COLLISION = range(4)


def _result(ids: Sequence[str], outcomes: Sequence[int]) -> InsertResult:
    def having(outcome: int) -> list[str]:
        return [i for i, o in zip(ids, outcomes, strict=True) if o == outcome]

    duplicate_ids, variant_ids, collision_ids = (
        having(_DUPLICATE),
        having(_VARIANT),
        having(_COLLISION),
    )
    inserted = len(ids) - len(duplicate_ids) - len(variant_ids)
    return InsertResult(
        inserted,
        len(duplicate_ids),
        duplicate_ids,
        len(variant_ids),
        variant_ids,
        len(collision_ids),
        collision_ids,
    )


def _capture(body: bytes, variant: int, columns: Iterable[Any]) -> tuple[Any, ...]:
    """The fact_captures row of the fact with these codec bytes (``columns``: its ``_CAPTURED``
    ones), a call of its own until decided."""
    fact = _fact_decoder.decode(body)
    digest = capture_digest(body)
    cols = tuple(columns)
    return (digest, variant, lack(fact), *cols, *content_keys(fact), digest, cols[0], 0, 1)


def _rank(capture: tuple[Any, ...]) -> tuple[int, str, str, bytes]:
    return capture[_LACK], capture[_SORT_AT], capture[_ID], bytes(capture[0])


def _classify(outcomes: list[int], new: dict[int, bytes], decided: dict[bytes, Assignment]) -> None:
    """What became of each row indexed as a capture (``new``: row index → digest): of a call
    that has captures from before, another capture (``_VARIANT``); of a call new in this
    write, the first such row is the call (``_STORED``, or ``_COLLISION`` when it shares an id
    with a capture that contradicts it) and the others are its other captures."""
    fresh = set(new.values())
    old_calls = {a.call for d, a in decided.items() if d not in fresh}
    counted: set[bytes] = set()
    for i in sorted(new):
        a = decided.get(new[i])
        if a is None:
            continue
        if a.call in old_calls or a.call in counted:
            outcomes[i] = _VARIANT
        else:
            counted.add(a.call)
            outcomes[i] = _COLLISION if a.collided else _STORED


def _view(capture: tuple[Any, ...]) -> Capture:
    """What the identity rule reads of a fact_captures row."""
    return Capture(
        bytes(capture[0]),
        capture[_LACK],
        capture[_SORT_AT],
        capture[_ID],
        capture[_MODEL_ID],
        capture[_SESSION],
        None if capture[_IN] is None else bytes(capture[_IN]),
        None if capture[_OUT] is None else bytes(capture[_OUT]),
    )


def _assignment(capture: tuple[Any, ...]) -> Assignment:
    return Assignment(bytes(capture[_CALL]), capture[_CALL_ID], bool(capture[_COLLIDED]))


def _token_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise ValueError("a token name is 1 to 100 characters")
    if not name.isprintable():
        raise ValueError("a token name holds printable characters only")
    return name


def _where(
    conds: list[tuple[str, Match]], since: TimeBound, until: TimeBound
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for column, match in conds:
        if match is None:
            continue
        values = [match] if isinstance(match, str) else list(match)
        if not values:
            clauses.append("1 = 0")
            continue
        clauses.append(f"{column} IN ({', '.join('?' * len(values))})")
        params.extend(codec.col(v) for v in values)
    lo, hi = time_bound(since), time_bound(until)
    if lo is not None:
        clauses.append("sort_at >= ?")
        params.append(lo)
    if hi is not None:
        clauses.append("sort_at < ?")
        params.append(hi)
    sql = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    return sql, params


def fact_where(f: FactFilter | None) -> tuple[str, list[Any]]:
    f = f or FactFilter()
    conds: list[tuple[str, Match]] = [
        ("session_id", f.session_id),
        ("model", f.model),
        ("source", f.source),
        ("provider", f.provider),
        ("trace_id", f.trace_id),
    ]
    return _where(conds, f.since, f.until)


def feedback_where(f: FeedbackFilter | None) -> tuple[str, list[Any]]:
    f = f or FeedbackFilter()
    conds: list[tuple[str, Match]] = [
        ("target_kind", f.target_kind),
        ("target_id", f.target_id),
        ("name", f.name),
        ("source", f.source),
    ]
    return _where(conds, f.since, f.until)


def _and(where: str, cond: str | None) -> str:
    """``where`` (empty, or `` WHERE …``) with one more condition."""
    if cond is None:
        return where
    return f"{where} AND {cond}" if where else f" WHERE {cond}"


def _limit(limit: int | None) -> str:
    if limit is None:
        return ""
    return f" LIMIT {max(0, int(limit))}"


class Cursor(Protocol):
    """The part of a DB-API cursor the shared SQL needs (placeholders are ``?``)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


Query = Callable[[str, list[Any]], Iterator[tuple[Any, ...]]]

_IN_CHUNK = 500  # values per IN (…) list: far below SQLite's bound on parameters


def _select_in(
    cur: Cursor, head: str, values: Iterable[Any], tail: str = "", params: Sequence[Any] = ()
) -> list[Any]:
    """Rows of ``head IN (values) tail`` (``params`` bind ``tail``), in as many statements as
    the list of values needs."""
    values = sorted(values)
    rows: list[Any] = []
    for i in range(0, len(values), _IN_CHUNK):
        chunk = values[i : i + _IN_CHUNK]
        cur.execute(f"{head} IN ({', '.join('?' * len(chunk))}){tail}", [*chunk, *params])
        rows.extend(cur.fetchall())
    return rows


def _captures_in(
    cur: Cursor, column: str, values: Iterable[Any], tail: str = "", params: Sequence[Any] = ()
) -> list[Any]:
    """The fact_captures rows whose ``column`` is one of ``values`` (and ``tail`` holds)."""
    head = f"SELECT {', '.join(CAPTURE_COLUMNS)} FROM fact_captures WHERE {column}"
    return _select_in(cur, head, values, tail, params)


def _linked_captures(
    cur: Cursor,
    ids: set[str],
    model_ids: set[str | None],
    tail: str = "",
    params: Sequence[Any] = (),
) -> tuple[dict[bytes, tuple[Any, ...]], set[str], set[str]]:
    """The fact_captures rows (where ``tail`` holds) that share an identity with these ids or
    model ids, or with one another, by digest; and every id and model id walked."""
    found: dict[bytes, tuple[Any, ...]] = {}
    seen_ids: set[str] = set()
    seen_model_ids: set[str] = set()
    todo_ids, todo_model_ids = set(ids), set(model_ids) - {None}
    while todo_ids or todo_model_ids:
        seen_ids |= todo_ids
        seen_model_ids |= todo_model_ids  # type: ignore[arg-type]
        rows = _captures_in(cur, "inference_call_id", todo_ids, tail, params)
        rows += _captures_in(cur, "model_call_id", todo_model_ids, tail, params)
        todo_ids, todo_model_ids = set(), set()
        for row in rows:
            if row[0] not in found:
                found[row[0]] = row
                todo_ids.add(row[_ID])
                todo_model_ids.add(row[_MODEL_ID])
        todo_ids -= seen_ids
        todo_model_ids -= seen_model_ids | {None}
    return found, seen_ids, seen_model_ids


def _resolved(
    main: Iterator[tuple[Any, ...]],
    dropped: Iterator[tuple[Any, ...]],
    kept: Iterator[tuple[Any, ...]],
    width: int,
) -> Iterator[tuple[bytes, str | None]]:
    """The bodies of ``main`` without the rows whose key is in ``dropped``, with ``kept``
    merged in; rows start with their key (``width`` columns, of ``kept`` the last is the call
    id it is read under), the three in one key order. Each body comes with that call id, or
    ``None`` (a ``main`` row, read under its own)."""
    skip = next(dropped, None)
    extra = next(kept, None)
    extra_key = None if extra is None else extra[:width]

    def horizon() -> Any:
        heads = [h[0] for h in (skip, extra_key) if h is not None]
        return min(heads) if heads else None

    edge = horizon()
    for row in main:
        # Contested calls are few: a row whose first key column is below the next one's
        # passes with one comparison.
        if edge is None or row[0] < edge:
            yield row[width], None
            continue
        key = row[:width]
        while extra_key is not None and extra_key < key:
            yield extra[width], extra[width - 1]  # type: ignore[index]
            extra = next(kept, None)
            extra_key = None if extra is None else extra[:width]
        while skip is not None and skip < key:
            skip = next(dropped, None)
        if skip == key:
            skip = next(dropped, None)
        else:
            yield row[width], None
        edge = horizon()
    while extra is not None:
        yield extra[width], extra[width - 1]
        extra = next(kept, None)


class SqlStore:
    """The shared half of both backends; subclasses supply connections and dialect hooks."""

    dialect: str
    url: str
    migrations: tuple[Migration, ...]

    # -- backend hooks ---------------------------------------------------------------------
    def _run(self, fn: Callable[[Cursor], R], *, write: bool) -> R:
        """Run ``fn`` in one transaction (the write lock held when ``write``); errors mapped."""
        raise NotImplementedError

    def _snapshot(self, batch_size: int) -> contextlib.AbstractContextManager[Query]:
        """A read-only connection of its own, on one snapshot of the database while the context
        lasts: it gives a function that streams a query's rows, ``batch_size`` at a time
        (several streams may be read side by side)."""
        raise NotImplementedError

    def _stream(self, sql: str, params: list[Any], batch_size: int) -> Iterator[tuple[Any, ...]]:
        """Rows of a query, read in batches on a connection of its own."""
        with self._snapshot(batch_size) as query:
            yield from query(sql, params)

    def _insert(
        self, cur: Cursor, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
    ) -> list[tuple[Any, Any]]:
        """Insert rows in this order, skipping any that collide; return the first two columns
        of those inserted (of facts: inference_call_id and model_call_id, which tell which of
        a batch's rows with one id was stored: the first with that pair)."""
        raise NotImplementedError

    def _lock_schema(self, cur: Cursor) -> None:
        """Serialize concurrent migrations (SQLite's write lock already does)."""

    def _share_captures(self, cur: Cursor, own: bool) -> None:
        """Taken before a transaction writes facts: the right to read the capture index
        (shared by writers), or to change it (``own``: one writer at a time). SQLite's write
        lock already makes every writer the only one."""

    def _own_captures(self, cur: Cursor) -> bool:
        """Change a shared right to read the capture index into the right to change it, when no
        other writer shares it; False when one does."""
        return True

    _degradations_sql: str
    # Where a fact's body is read from (SQLite keeps bodies in a table of their own).
    _fact_body = "body"
    _fact_from = "facts"
    _variant_body = "body"

    def _pack(self, body: bytes) -> bytes:
        """A body as this backend stores it (SQLite compresses)."""
        return body

    def _unpack(self, body: bytes) -> bytes:
        """The codec bytes of a body as stored, or as ``prepare`` left it."""
        return body

    def close(self) -> None:
        raise NotImplementedError

    # -- schema ----------------------------------------------------------------------------
    def _migrate(self) -> None:
        def step(cur: Cursor) -> None:
            self._lock_schema(cur)
            cur.execute(SCHEMA_VERSION_TABLE[self.dialect])
            cur.execute("SELECT MAX(version) FROM schema_version")
            current = cur.fetchone()[0] or 0
            latest = self.migrations[-1].version if self.migrations else 0
            if current > latest:
                raise SchemaTooNew(
                    f"{self.url} has schema version {current}, this lithify knows up to "
                    f"{latest}: upgrade lithify to use this store"
                )
            rebuild = False
            for m in self.migrations:
                if m.version <= current:
                    continue
                for stmt in m.statements(self.dialect):
                    cur.execute(stmt)
                rebuild |= m.rebuild_captures
                cur.execute(
                    "INSERT INTO schema_version (version, description, applied_at) "
                    "VALUES (?, ?, ?)",
                    (m.version, m.description, now()),
                )
            if rebuild:  # once, by this version's rule, into the index as the last one left it
                self._rebuild_captures(cur)

        self._run(step, write=True)

    def schema_version(self) -> int:
        def q(cur: Cursor) -> int:
            cur.execute("SELECT MAX(version) FROM schema_version")
            return int(cur.fetchone()[0] or 0)

        return self._run(q, write=False)

    # -- writing ---------------------------------------------------------------------------
    def _writing(self, fn: Callable[[Cursor, bool], R]) -> R:
        """``fn(cur, own)`` in a write transaction. A batch that must change the capture index
        while another writer reads it starts again, owning the index from the start (a writer
        never waits for it while holding a share: two such writers would deadlock)."""
        try:
            return self._run(lambda cur: fn(cur, False), write=True)
        except _CapturesBusy:
            return self._run(lambda cur: fn(cur, True), write=True)

    def _write(
        self,
        cur: Cursor,
        table: str,
        columns: tuple[str, ...],
        rows: list[tuple[Any, ...]],
        own: bool = False,
    ) -> list[int]:
        """Insert rows; what became of each (``_STORED``, ``_DUPLICATE``, ``_VARIANT``), in the
        order given. Facts need ``_share_captures`` first."""
        # A stable order by id: concurrent batches then take row locks in one order (no
        # deadlock), and within a batch the first of equal ids is tried first.
        order = sorted(range(len(rows)), key=lambda i: rows[i][0])
        ordered = [rows[i] for i in order]
        stored = set(self._insert(cur, table, columns, ordered))
        outcomes: list[int] = []
        for row in ordered:
            if (row[0], row[1]) in stored:
                stored.discard((row[0], row[1]))
                outcomes.append(_STORED)
            else:
                outcomes.append(_DUPLICATE)
        if table == "facts":
            self._keep_captures(cur, ordered, outcomes, own)
        out = [_STORED] * len(rows)
        for j, i in enumerate(order):
            out[i] = outcomes[j]
        return out

    def _contested(self, cur: Cursor) -> bool:
        """Whether any call has several captures."""
        cur.execute(_ANY_CAPTURE)
        return cur.fetchone() is not None

    def _keep_captures(
        self, cur: Cursor, rows: list[tuple[Any, ...]], outcomes: list[int], own: bool
    ) -> None:
        """Keep the colliding rows that differ from every stored capture of their call as
        variants (their outcome becomes ``_VARIANT``), and index every capture of the calls
        they contest in fact_captures."""
        collided = [i for i, o in enumerate(outcomes) if o == _DUPLICATE]
        contested = self._contested(cur)
        if not collided and not contested:
            return  # the common batch: nothing collided and no call is contested
        captures: dict[bytes, tuple[Any, ...]] = {}
        new: dict[int, bytes] = {}  # row index → digest, of the rows indexed as captures
        if contested:
            # A new facts row may share an id with a variant of a stored call: a candidate.
            fresh = [i for i, o in enumerate(outcomes) if o == _STORED]
            ids = {
                c[_ID] for c in _captures_in(cur, "inference_call_id", {rows[i][0] for i in fresh})
            }
            model_ids = {
                c[_MODEL_ID]
                for c in _captures_in(cur, "model_call_id", {rows[i][1] for i in fresh} - {None})
            }
            for i in fresh:
                row = rows[i]
                if row[0] in ids or row[1] in model_ids:
                    c = _capture(self._unpack(row[-1]), 0, (row[j] for j in _CAPTURED_AT))
                    captures[c[0]] = c
                    new[i] = c[0]
        stored = {
            f[0]: f
            for f in self._stored_facts(cur, "inference_call_id", {rows[i][0] for i in collided})
        }
        differing: list[tuple[int, bytes, bytes]] = []  # (row index, digest, codec bytes)
        seen: set[bytes] = set()
        for i in collided:
            body = self._unpack(rows[i][-1])
            same = stored.get(rows[i][0])
            if same is not None and bytes(same[-1]) == body:
                continue  # a redelivery of the stored fact: a duplicate
            digest = capture_digest(body)
            if digest not in seen:  # the same capture twice in a batch: the first is the variant
                seen.add(digest)
                differing.append((i, digest, body))
        if not differing and not captures:
            return  # only redeliveries: nothing to write
        if not own and not self._own_captures(cur):
            raise _CapturesBusy
        if differing:
            self._keep_variants(cur, rows, outcomes, differing, stored, captures, new)
        if captures:
            decided = self._index_captures(cur, list(captures.values()))
            _classify(outcomes, new, decided)

    def _stored_facts(self, cur: Cursor, column: str, values: Iterable[Any]) -> list[Any]:
        """The ``_CAPTURED`` columns and the codec bytes of the facts rows with these values."""
        head = f"SELECT {', '.join(_CAPTURED)}, {self._fact_body} FROM {self._fact_from} WHERE"
        return _select_in(cur, f"{head} {column}", values)

    def _keep_variants(
        self,
        cur: Cursor,
        rows: list[tuple[Any, ...]],
        outcomes: list[int],
        differing: list[tuple[int, bytes, bytes]],
        stored: dict[str, Any],
        captures: dict[bytes, tuple[Any, ...]],
        new: dict[int, bytes],
    ) -> None:
        variant_rows = sorted(
            ((d, *rows[i][:-1], self._pack(body)) for i, d, body in differing), key=itemgetter(0)
        )
        inserted = {r[0] for r in self._insert(cur, "fact_variants", VARIANT_COLUMNS, variant_rows)}
        linked: dict[str, Any] = {}  # the facts rows they share an inference_call_id with
        model_ids: set[str] = set()
        for i, digest, body in differing:
            if digest not in inserted:
                continue  # a variant stored before: a duplicate
            row = rows[i]
            outcomes[i] = _VARIANT
            captures[digest] = _capture(body, 1, (row[j] for j in _CAPTURED_AT))
            new[i] = digest
            if row[0] in stored:
                linked[row[0]] = stored[row[0]]
            if row[1] is not None:
                model_ids.add(row[1])
        # The facts rows the variants collide with are captures of the contested calls too.
        for f in [*linked.values(), *self._stored_facts(cur, "model_call_id", model_ids)]:
            c = _capture(bytes(f[-1]), 0, f[:-1])
            captures.setdefault(c[0], c)

    def _rebuild_captures(self, cur: Cursor) -> None:
        """Index the captures of every contested call afresh (fact_captures is empty): each
        variant, and the facts rows that share an identity with one."""
        cur.execute(f"SELECT {', '.join(_CAPTURED)}, {self._variant_body} FROM fact_variants")
        variants = cur.fetchall()
        if not variants:
            return
        captures: dict[bytes, tuple[Any, ...]] = {}
        for v in variants:
            c = _capture(bytes(v[-1]), 1, v[:-1])
            captures[c[0]] = c
        ids = {v[0] for v in variants}
        model_ids = {v[1] for v in variants} - {None}
        for f in [
            *self._stored_facts(cur, "inference_call_id", ids),
            *self._stored_facts(cur, "model_call_id", model_ids),
        ]:
            c = _capture(bytes(f[-1]), 0, f[:-1])
            captures.setdefault(c[0], c)
        self._index_captures(cur, list(captures.values()))

    def _index_captures(
        self, cur: Cursor, captures: list[tuple[Any, ...]]
    ) -> dict[bytes, Assignment]:
        """Add captures to fact_captures, then decide again which call each capture belongs
        to wherever the new ones may change it; the calls of the captures decided and of the
        earlier ones they were decided against, by digest."""
        new = {
            bytes(r[0])
            for r in self._insert(
                cur, "fact_captures", CAPTURE_COLUMNS, sorted(captures, key=_rank)
            )
        }
        seeds = [c for c in captures if c[0] in new]
        if not seeds:
            return {}
        # The rule goes in rank order, so decisions only change from the first new capture on,
        # and only through ids shared with a new one: walk those captures, then read the
        # earlier captures that share their ids (and their calls' first captures).
        first = _rank(min(seeds, key=_rank))
        after = f" AND {_RANK} >= (?, ?, ?, ?)"
        before = f" AND {_RANK} < (?, ?, ?, ?)"
        found, ids, model_ids = _linked_captures(
            cur, {c[_ID] for c in seeds}, {c[_MODEL_ID] for c in seeds}, after, first
        )
        prior = {
            bytes(r[0]): r
            for r in [
                *_captures_in(cur, "inference_call_id", ids, before, first),
                *_captures_in(cur, "model_call_id", model_ids, before, first),
            ]
        }
        earlier = sorted(prior.values(), key=_rank)
        heads = {bytes(r[_CALL]) for r in earlier} - prior.keys()
        reps = _captures_in(cur, "digest", heads) if heads else []
        ranked = sorted(found.values(), key=_rank)
        decided = {bytes(r[0]): _assignment(r) for r in earlier}
        for c, a in zip(
            ranked,
            assign(
                (_view(c) for c in ranked),
                ((_view(r), _assignment(r)) for r in earlier),
                (_view(r) for r in reps),
            ),
            strict=True,
        ):
            digest = bytes(c[0])
            decided[digest] = a
            kept = int(a.call == digest)
            if _assignment(c) != a or c[_KEPT] != kept:
                cur.execute(
                    f"UPDATE fact_captures SET {' = ?, '.join(_DECISION)} = ? WHERE digest = ?",
                    (a.call, a.call_id, int(a.collided), kept, digest),
                )
        return decided

    def insert_facts(self, batch: Iterable[InferenceCall]) -> InsertResult:
        """Store a batch in one transaction; colliding facts are reported, never changed (a
        differing capture of a stored call is kept apart, as a variant)."""
        facts = list(batch)
        at = now()
        rows = [fact_row(f, at) for f in facts]
        if not rows:
            return InsertResult(0, 0, [])

        def write(cur: Cursor, own: bool) -> list[int]:
            self._share_captures(cur, own)
            return self._write(cur, "facts", FACT_COLUMNS, rows, own)

        return _result([f.inference_call_id for f in facts], self._writing(write))

    def insert_feedback(self, batch: Iterable[Feedback]) -> InsertResult:
        items = list(batch)
        at = now()
        rows = [feedback_row(f, at) for f in items]
        if not rows:
            return InsertResult(0, 0, [])
        outcomes = self._run(
            lambda cur: self._write(cur, "feedback", FEEDBACK_COLUMNS, rows), write=True
        )
        return _result([f.feedback_id for f in items], outcomes)

    def insert_prepared(
        self, batches: Sequence[Prepared]
    ) -> list[tuple[InsertResult, InsertResult]]:
        """Write several prepared batches in ONE transaction (a group commit); return each
        batch's (facts, feedback) results as if it had been inserted alone, in this order."""
        if not batches:
            return []
        at = now()
        facts = [_stamp(b.facts, _FACT_INGESTED, at) for b in batches]
        feedback = _stamp([r for b in batches for r in b.feedback], _FEEDBACK_INGESTED, at)

        def write(cur: Cursor, own: bool) -> tuple[list[list[int]], list[int]]:
            # Facts batch after batch, each as if it were inserted alone after the ones before
            # (which capture of a call is stored depends on it). Row locks then follow id order
            # within a batch only: a deadlock with another group commit is retried.
            if any(facts):
                self._share_captures(cur, own)
            return (
                [
                    self._write(cur, "facts", FACT_COLUMNS, rows, own) if rows else []
                    for rows in facts
                ],
                self._write(cur, "feedback", FEEDBACK_COLUMNS, feedback) if feedback else [],
            )

        fact_outcomes, feedback_outcomes = (
            self._writing(write) if any(facts) or feedback else ([[] for _ in facts], [])
        )
        out: list[tuple[InsertResult, InsertResult]] = []
        g = 0
        for b, outcomes in zip(batches, fact_outcomes, strict=True):
            ids = [codec.uncol(r[0]) or "" for r in b.facts]
            fb_ids = [codec.uncol(r[0]) or "" for r in b.feedback]
            out.append(
                (_result(ids, outcomes), _result(fb_ids, feedback_outcomes[g : g + len(fb_ids)]))
            )
            g += len(fb_ids)
        return out

    # -- ingest tokens ---------------------------------------------------------------------
    def create_token(self, name: str, token_hash: str, prefix: str) -> TokenInfo:
        """Record a new token by its hash; ``TokenExists`` if a live token has the name."""
        name = _token_name(name)
        at = now()

        def q(cur: Cursor) -> None:
            cur.execute(
                "SELECT 1 FROM ingest_tokens WHERE name = ? AND revoked_at IS NULL", (name,)
            )
            if cur.fetchone() is not None:
                raise TokenExists(f"a live token is already named {name!r}: revoke it first")
            cur.execute(
                "INSERT INTO ingest_tokens (name, token_hash, prefix, created_at) "
                "VALUES (?, ?, ?, ?)",
                (name, token_hash, prefix, at),
            )

        self._run(q, write=True)
        return TokenInfo(name, prefix, at)

    def list_tokens(self) -> list[TokenInfo]:
        """Every token ever created, live and revoked, oldest first."""

        def q(cur: Cursor) -> list[Any]:
            cur.execute(
                "SELECT name, prefix, created_at, revoked_at FROM ingest_tokens "
                "ORDER BY created_at, token_id"
            )
            return cur.fetchall()

        return [TokenInfo(*row) for row in self._run(q, write=False)]

    def revoke_token(self, name: str) -> int:
        """Revoke the live token of that name; the number revoked (0 or 1)."""
        at = now()

        def q(cur: Cursor) -> int:
            cur.execute(
                "UPDATE ingest_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL "
                "RETURNING token_id",
                (at, name),
            )
            return len(cur.fetchall())

        return self._run(q, write=True)

    def token_hashes(self) -> list[tuple[str, str, bool]]:
        """(token_hash, name, live) of every token: what a receiver checks bearer tokens with."""

        def q(cur: Cursor) -> list[Any]:
            cur.execute("SELECT token_hash, name, revoked_at IS NULL FROM ingest_tokens")
            return cur.fetchall()

        return [(h, n, bool(live)) for h, n, live in self._run(q, write=False)]

    # -- reading ---------------------------------------------------------------------------
    def iter_facts(
        self, filters: FactFilter | None = None, *, batch_size: int = 500
    ) -> Iterator[InferenceCall]:
        """Facts in (started_at or observed_at, inference_call_id) order, in constant memory;
        grouped by session first with ``FactFilter(order="session")``."""
        where, params = fact_where(filters)
        limit = filters.limit if filters else None
        order = "time" if filters is None else filters.order
        if order == "time":
            parts: tuple[tuple[str | None, str], ...] = ((None, "sort_at, inference_call_id"),)
        elif order == "session":
            # Two queries rather than one ORDER BY with NULLS LAST: each follows an index
            # (facts_session, facts_order) on both backends, whose NULL orders differ.
            parts = (
                ("session_id IS NOT NULL", "session_id, sort_at, inference_call_id"),
                ("session_id IS NULL", "sort_at, inference_call_id"),
            )
        else:
            raise ValueError(f"unknown fact order {order!r}: use 'time' or 'session'")
        left = None if limit is None else max(0, int(limit))
        reader = codec.FactReader()  # per stream: it decodes each fact against the one before
        with self._snapshot(batch_size) as query:
            contested = any(True for _ in query(_ANY_CAPTURE, []))
            bodies = chain.from_iterable(
                self._call_bodies(query, _and(where, cond), params, keys, contested)
                for cond, keys in parts
            )
            for body, call_id in islice(bodies, left):
                fact = reader.decode(body)
                if call_id is not None and call_id != codec.col(fact.inference_call_id):
                    fact = msgspec.structs.replace(
                        fact, inference_call_id=codec.uncol(call_id) or ""
                    )
                yield fact

    def _call_bodies(
        self, query: Query, where: str, params: list[Any], order: str, contested: bool
    ) -> Iterator[tuple[bytes, str | None]]:
        """The bodies of the calls whose first capture matches ``where``, in ``order``
        (columns), each with its call id when it is not the capture's own (``None``): of the
        captures of a contested call, the first, at its own place, under its call's id."""
        if not contested:  # no capture shares an id: the facts rows are the calls
            sql = f"SELECT {self._fact_body} FROM {self._fact_from}{where} ORDER BY {order}"
            for (body,) in query(sql, params):
                yield body, None
            return
        main = query(
            f"SELECT {order}, {self._fact_body} FROM {self._fact_from}{where} ORDER BY {order}",
            params,
        )
        # facts rows that are not the first capture of their call, or are read under another id
        dropped = query(
            f"SELECT {order} FROM fact_captures{_and(where, 'variant = 0')} AND "
            f"(kept = 0 OR call_id <> inference_call_id) ORDER BY {order}",
            params,
        )
        # the first captures read in their place, ordered by their calls' ids: variants, and
        # facts rows read under another id
        keys = order.split(", ")[:-1]

        def firsts(call_id: str, body: str, table: str, cond: str) -> str:
            cols = ", ".join([*keys, f"({call_id}) AS call_id", f"{body} AS body"])
            return f"SELECT {cols} FROM {table}{_and(where, cond)}"

        variants = firsts(
            "SELECT call_id FROM fact_captures AS c WHERE c.digest = v.digest",
            self._variant_body,
            "fact_variants AS v",
            "digest IN (SELECT digest FROM fact_captures WHERE variant = 1 AND kept = 1)",
        )
        renamed = firsts(
            "SELECT call_id FROM fact_captures AS c "
            "WHERE c.variant = 0 AND c.inference_call_id = facts.inference_call_id",
            self._fact_body,
            self._fact_from,
            "inference_call_id IN (SELECT inference_call_id FROM fact_captures "
            "WHERE variant = 0 AND kept = 1 AND call_id <> inference_call_id)",
        )
        kept = query(
            f"SELECT * FROM ({variants} UNION ALL {renamed}) AS k "
            f"ORDER BY {', '.join([*keys, 'call_id'])}",
            params + params,
        )
        yield from _resolved(main, dropped, kept, order.count(",") + 1)

    def iter_feedback(
        self, filters: FeedbackFilter | None = None, *, batch_size: int = 500
    ) -> Iterator[Feedback]:
        """Feedback in (observed_at, feedback_id) order."""
        where, params = feedback_where(filters)
        sql = (
            f"SELECT body FROM feedback{where} ORDER BY sort_at, feedback_id"
            f"{_limit(filters.limit if filters else None)}"
        )
        for (body,) in self._stream(sql, params, batch_size):
            yield _feedback_decoder.decode(body)

    def get_fact(self, inference_call_id: str) -> InferenceCall | None:
        """The call with this id (under its call id, read from its first capture), else the
        stored capture with this id; ``None`` when neither exists."""
        key = codec.col(inference_call_id)

        def q(cur: Cursor) -> tuple[bytes, str] | None:
            if self._contested(cur):
                for c in _captures_in(cur, "call_id", {key}, " AND kept = 1"):
                    return self._capture_bodies(cur, [c])[bytes(c[0])], c[_CALL_ID]
            for f in self._stored_facts(cur, "inference_call_id", {key}):
                return bytes(f[-1]), key
            return None

        found = self._run(q, write=False)
        if found is None:
            return None
        fact = _fact_decoder.decode(found[0])
        if codec.col(fact.inference_call_id) != found[1]:
            fact = msgspec.structs.replace(fact, inference_call_id=codec.uncol(found[1]) or "")
        return fact

    def _capture_bodies(
        self, cur: Cursor, captures: Sequence[tuple[Any, ...]]
    ) -> dict[bytes, bytes]:
        """The codec bytes of these fact_captures rows, by digest."""
        facts = self._stored_facts(
            cur, "inference_call_id", {c[_ID] for c in captures if not c[_IS_VARIANT]}
        )
        bodies = {capture_digest(bytes(f[-1])): bytes(f[-1]) for f in facts}
        for digest, body in _select_in(
            cur,
            f"SELECT digest, {self._variant_body} FROM fact_variants WHERE digest",
            [bytes(c[0]) for c in captures if c[_IS_VARIANT]],
        ):
            bodies[bytes(digest)] = bytes(body)
        return bodies

    def captures(self, inference_call_id: str) -> list[StoredCapture]:
        """Every stored capture of the call this id names (a call id, or a capture's id), and
        of the captures linked to it through shared ids, in the identity rule's rank order,
        each with its call's id and whether it is the one read; ``[]`` when nothing has it."""
        key = codec.col(inference_call_id)

        def q(cur: Cursor) -> list[tuple[bytes, bool, str]]:
            found: dict[bytes, tuple[Any, ...]] = {}
            if self._contested(cur):
                ids = {key} | {c[_ID] for c in _captures_in(cur, "call_id", {key})}
                found = _linked_captures(cur, ids, set())[0]
            if not found:  # a capture that shares no id: its facts row alone
                return [
                    (bytes(f[-1]), True, key)
                    for f in self._stored_facts(cur, "inference_call_id", {key})
                ]
            ranked = sorted(found.values(), key=_rank)
            bodies = self._capture_bodies(cur, ranked)
            return [(bodies[bytes(c[0])], bool(c[_KEPT]), c[_CALL_ID]) for c in ranked]

        return [
            StoredCapture(_fact_decoder.decode(body), kept, codec.uncol(call_id) or "")
            for body, kept, call_id in self._run(q, write=False)
        ]

    def call_aliases(self, ids: Iterable[str]) -> dict[str, str]:
        """Which of ``ids`` name captures of one call only without being a call's id, each
        with that call's id (``identity.aliases``): feedback naming them joins that call. Only
        captures that share an id have such ids: at most one entry per id asked about."""
        wanted = {codec.col(i) for i in ids if isinstance(i, str)}

        def q(cur: Cursor) -> dict[str, str]:
            if not wanted or not self._contested(cur):
                return {}
            rows = [
                *_captures_in(cur, "inference_call_id", wanted),
                *_captures_in(cur, "call_id", wanted, " AND kept = 1"),
            ]
            found = aliases((c[_ID], c[_CALL_ID], bool(c[_KEPT])) for c in rows)
            return {k: v for k, v in found.items() if k in wanted}

        found = self._run(q, write=False)
        return {codec.uncol(k) or "": codec.uncol(v) or "" for k, v in found.items()}

    def _calls(self, cur: Cursor) -> str:
        """What to select calls from: the facts table, or (when captures share ids) the first
        capture of every call, on its own columns, as a table named ``facts``."""
        if not self._contested(cur):
            return "facts"
        cols = ", ".join(FACT_COLUMNS[:-1])
        return (
            f"(SELECT {cols} FROM facts WHERE inference_call_id NOT IN (SELECT "
            f"inference_call_id FROM fact_captures WHERE variant = 0 AND kept = 0) UNION ALL "
            f"SELECT {cols} FROM fact_variants WHERE digest IN (SELECT digest FROM "
            f"fact_captures WHERE variant = 1 AND kept = 1)) AS facts"
        )

    def count(self, filters: FactFilter | None = None) -> int:
        """The calls whose first capture ``filters`` match."""
        where, params = fact_where(filters)

        def q(cur: Cursor) -> int:
            cur.execute(f"SELECT COUNT(*) FROM {self._calls(cur)}{where}", params)
            return int(cur.fetchone()[0] or 0)

        return self._run(q, write=False)

    @staticmethod
    def _dropped_sql(where: str) -> str:
        and_ = " AND " if where else " WHERE "
        return f"SELECT COUNT(*) FROM fact_captures{where}{and_}kept = 0"

    def count_dropped(self, filters: FactFilter | None = None) -> int:
        """Captures the capture rule drops (other captures of stored calls) that ``filters``
        match, on their own columns: what ``order="session"`` reads leaves out."""
        where, params = fact_where(filters)
        return self._scalar(self._dropped_sql(where), params)

    def count_feedback(self, filters: FeedbackFilter | None = None) -> int:
        where, params = feedback_where(filters)
        return self._scalar(f"SELECT COUNT(*) FROM feedback{where}", params)

    def _scalar(self, sql: str, params: list[Any]) -> int:
        def q(cur: Cursor) -> int:
            cur.execute(sql, params)
            return int(cur.fetchone()[0] or 0)

        return self._run(q, write=False)

    def stats(self, filters: FactFilter | None = None, *, session_limit: int = 20) -> Stats:
        """Counts by model, provider, source, session and degradation reason, and token sums."""
        where, params = fact_where(filters)
        sums = "COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0)"
        and_ = " AND " if where else " WHERE "

        def groups(cur: Cursor, calls: str, column: str) -> list[Group]:
            cur.execute(f"SELECT {column}, {sums} FROM {calls}{where} GROUP BY {column}", params)
            rows = sorted(cur.fetchall(), key=lambda r: (-r[1], r[0] is None, r[0] or ""))
            return [Group(codec.uncol(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]

        def q(cur: Cursor) -> Stats:
            calls = self._calls(cur)
            cur.execute(f"SELECT {sums}, COUNT(DISTINCT session_id) FROM {calls}{where}", params)
            total, tin, tout, sessions = cur.fetchone()
            cur.execute("SELECT COUNT(*) FROM feedback")
            feedback = cur.fetchone()[0]
            cur.execute(
                f"SELECT session_id, {sums} FROM {calls}{where}{and_}session_id IS NOT NULL "
                f"GROUP BY session_id ORDER BY COUNT(*) DESC, session_id"
                f"{_limit(session_limit)}",
                params,
            )
            top = sorted(cur.fetchall(), key=lambda r: (-r[1], r[0]))
            cur.execute(self._degradations_sql.format(facts=calls, where=where), params)
            deg = sorted(cur.fetchall(), key=lambda r: (-r[2], r[0]))
            cur.execute(self._dropped_sql(where), params)
            dropped = cur.fetchone()[0]
            cur.execute(
                f"SELECT COUNT(*) FROM fact_captures{_and(where, 'kept = 1 AND collided = 1')}",
                params,
            )
            collisions = cur.fetchone()[0]
            return Stats(
                facts=int(total),
                sessions=int(sessions),
                input_tokens=int(tin),
                output_tokens=int(tout),
                feedback=int(feedback),
                by_model=groups(cur, calls, "model"),
                by_provider=groups(cur, calls, "provider"),
                by_source=groups(cur, calls, "source"),
                by_session=[Group(codec.uncol(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in top],
                degradations=[
                    DegradationCount(codec.uncol(r[0]) or "", int(r[1]), int(r[2])) for r in deg
                ],
                variants=int(dropped),
                dropped_captures=int(dropped),
                id_collisions=int(collisions),
            )

        return self._run(q, write=False)

    # -- lifetime --------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"
