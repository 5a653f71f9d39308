"""What both backends share: errors, filters, results, row building and the SQL itself."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, Self, TypeVar

import msgspec
import orjson

from lithify.model import FEEDBACK_TARGETS, Feedback, InferenceCall
from lithify.store import codec
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

    ``duplicate_ids`` follow the batch order; a row counts as a duplicate when its identity or
    its ``model_call_id`` was already stored (or came earlier in the same batch).
    """

    inserted: int
    duplicates: int
    duplicate_ids: list[str]


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
    def count(self, filters: FactFilter | None = None) -> int: ...
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


def _attribute(keys: list[list[str]], stored: list[str]) -> list[InsertResult]:
    """Split one transaction's stored keys back over the batches it wrote, in batch order: of
    equal keys, the earliest is the one stored (``_insert`` keeps the first of equal ids)."""
    left = Counter(stored)
    out: list[InsertResult] = []
    for batch in keys:
        duplicate_ids: list[str] = []
        for key in batch:
            if left[key]:
                left[key] -= 1
            else:
                duplicate_ids.append(codec.uncol(key) or "")
        out.append(InsertResult(len(batch) - len(duplicate_ids), len(duplicate_ids), duplicate_ids))
    return out


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


def _limit(limit: int | None) -> str:
    if limit is None:
        return ""
    return f" LIMIT {max(0, int(limit))}"


class Cursor(Protocol):
    """The part of a DB-API cursor the shared SQL needs (placeholders are ``?``)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class SqlStore:
    """The shared half of both backends; subclasses supply connections and dialect hooks."""

    dialect: str
    url: str
    migrations: tuple[Migration, ...]

    # -- backend hooks ---------------------------------------------------------------------
    def _run(self, fn: Callable[[Cursor], R], *, write: bool) -> R:
        """Run ``fn`` in one transaction (the write lock held when ``write``); errors mapped."""
        raise NotImplementedError

    def _stream(self, sql: str, params: list[Any], batch_size: int) -> Iterator[tuple[Any, ...]]:
        """Rows of a query, read in batches on a connection of its own."""
        raise NotImplementedError

    def _insert(
        self, cur: Cursor, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
    ) -> list[str]:
        """Insert rows, skipping any that collide; return the first column of those inserted."""
        raise NotImplementedError

    def _lock_schema(self, cur: Cursor) -> None:
        """Serialize concurrent migrations (SQLite's write lock already does)."""

    _degradations_sql: str
    # Where a fact's body is read from (SQLite keeps bodies in a table of their own).
    _fact_body = "body"
    _fact_from = "facts"

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
            for m in self.migrations:
                if m.version <= current:
                    continue
                for stmt in m.statements(self.dialect):
                    cur.execute(stmt)
                cur.execute(
                    "INSERT INTO schema_version (version, description, applied_at) "
                    "VALUES (?, ?, ?)",
                    (m.version, m.description, now()),
                )

        self._run(step, write=True)

    def schema_version(self) -> int:
        def q(cur: Cursor) -> int:
            cur.execute("SELECT MAX(version) FROM schema_version")
            return int(cur.fetchone()[0] or 0)

        return self._run(q, write=False)

    # -- writing ---------------------------------------------------------------------------
    def _insert_batch(
        self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]], ids: list[str]
    ) -> InsertResult:
        if not rows:
            return InsertResult(0, 0, [])
        # A stable order by id: concurrent batches then take row locks in one order (no
        # deadlock), and within a batch the first of equal ids is the one kept.
        ordered = sorted(rows, key=lambda r: r[0])
        stored = self._run(lambda cur: self._insert(cur, table, columns, ordered), write=True)
        left = Counter(stored)
        duplicate_ids: list[str] = []
        for i in ids:
            key = codec.col(i)
            if left[key]:
                left[key] -= 1
            else:
                duplicate_ids.append(i)
        return InsertResult(len(rows) - len(duplicate_ids), len(duplicate_ids), duplicate_ids)

    def insert_facts(self, batch: Iterable[InferenceCall]) -> InsertResult:
        """Store a batch in one transaction; colliding facts are reported, never changed."""
        facts = list(batch)
        at = now()
        rows = [fact_row(f, at) for f in facts]
        return self._insert_batch("facts", FACT_COLUMNS, rows, [f.inference_call_id for f in facts])

    def insert_feedback(self, batch: Iterable[Feedback]) -> InsertResult:
        items = list(batch)
        at = now()
        rows = [feedback_row(f, at) for f in items]
        return self._insert_batch(
            "feedback", FEEDBACK_COLUMNS, rows, [f.feedback_id for f in items]
        )

    def insert_prepared(
        self, batches: Sequence[Prepared]
    ) -> list[tuple[InsertResult, InsertResult]]:
        """Write several prepared batches in ONE transaction (a group commit); return each
        batch's (facts, feedback) results as if it had been inserted alone, in this order."""
        if not batches:
            return []
        at = now()
        facts = [r for b in batches for r in b.facts]
        feedback = [r for b in batches for r in b.feedback]
        # Stable sort by id: the first of equal ids (in batch order) is the one stored.
        facts = sorted(_stamp(facts, _FACT_INGESTED, at), key=lambda r: r[0])
        feedback = sorted(_stamp(feedback, _FEEDBACK_INGESTED, at), key=lambda r: r[0])

        def write(cur: Cursor) -> tuple[list[str], list[str]]:
            stored_facts = self._insert(cur, "facts", FACT_COLUMNS, facts) if facts else []
            stored_feedback = (
                self._insert(cur, "feedback", FEEDBACK_COLUMNS, feedback) if feedback else []
            )
            return stored_facts, stored_feedback

        stored_facts, stored_feedback = (
            self._run(write, write=True) if facts or feedback else ([], [])
        )
        fact_results = _attribute([[r[0] for r in b.facts] for b in batches], stored_facts)
        feedback_results = _attribute(
            [[r[0] for r in b.feedback] for b in batches], stored_feedback
        )
        return list(zip(fact_results, feedback_results, strict=True))

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
        reader = codec.FactReader()  # per stream: it decodes each fact against the one before
        if filters is None or filters.order == "time":
            sql = (
                f"SELECT {self._fact_body} FROM {self._fact_from}{where} "
                f"ORDER BY sort_at, inference_call_id{_limit(limit)}"
            )
            for (body,) in self._stream(sql, params, batch_size):
                yield reader.decode(body)
            return
        if filters.order != "session":
            raise ValueError(f"unknown fact order {filters.order!r}: use 'time' or 'session'")
        # Two queries rather than one ORDER BY with NULLS LAST: each follows an index
        # (facts_session, facts_order) on both backends, whose NULL orders differ.
        and_ = " AND " if where else " WHERE "
        queries = (
            f"{where}{and_}session_id IS NOT NULL ORDER BY session_id, sort_at, inference_call_id",
            f"{where}{and_}session_id IS NULL ORDER BY sort_at, inference_call_id",
        )
        left = None if limit is None else max(0, int(limit))
        for tail in queries:
            if left == 0:
                return
            sql = f"SELECT {self._fact_body} FROM {self._fact_from}{tail}{_limit(left)}"
            for (body,) in self._stream(sql, params, batch_size):
                if left is not None:
                    left -= 1
                yield reader.decode(body)

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
        def q(cur: Cursor) -> Any:
            cur.execute(
                f"SELECT {self._fact_body} FROM {self._fact_from} WHERE inference_call_id = ?",
                (codec.col(inference_call_id),),
            )
            return cur.fetchone()

        row = self._run(q, write=False)
        return None if row is None else _fact_decoder.decode(row[0])

    def count(self, filters: FactFilter | None = None) -> int:
        where, params = fact_where(filters)
        return self._scalar(f"SELECT COUNT(*) FROM facts{where}", params)

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

        def groups(cur: Cursor, column: str) -> list[Group]:
            cur.execute(f"SELECT {column}, {sums} FROM facts{where} GROUP BY {column}", params)
            rows = sorted(cur.fetchall(), key=lambda r: (-r[1], r[0] is None, r[0] or ""))
            return [Group(codec.uncol(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]

        def q(cur: Cursor) -> Stats:
            cur.execute(f"SELECT {sums}, COUNT(DISTINCT session_id) FROM facts{where}", params)
            total, tin, tout, sessions = cur.fetchone()
            cur.execute("SELECT COUNT(*) FROM feedback")
            feedback = cur.fetchone()[0]
            cur.execute(
                f"SELECT session_id, {sums} FROM facts{where}{and_}session_id IS NOT NULL "
                f"GROUP BY session_id ORDER BY COUNT(*) DESC, session_id"
                f"{_limit(session_limit)}",
                params,
            )
            top = sorted(cur.fetchall(), key=lambda r: (-r[1], r[0]))
            cur.execute(self._degradations_sql.format(where=where), params)
            deg = sorted(cur.fetchall(), key=lambda r: (-r[2], r[0]))
            return Stats(
                facts=int(total),
                sessions=int(sessions),
                input_tokens=int(tin),
                output_tokens=int(tout),
                feedback=int(feedback),
                by_model=groups(cur, "model"),
                by_provider=groups(cur, "provider"),
                by_source=groups(cur, "source"),
                by_session=[Group(codec.uncol(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in top],
                degradations=[
                    DegradationCount(codec.uncol(r[0]) or "", int(r[1]), int(r[2])) for r in deg
                ],
            )

        return self._run(q, write=False)

    # -- lifetime --------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"
