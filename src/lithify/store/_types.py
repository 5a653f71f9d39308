"""The store's public types: errors, filters, insert results, statistics, and the protocol every
backend implements."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self

import msgspec

from lithify.model import Feedback, InferenceCall

if TYPE_CHECKING:
    from lithify.store._text import TextNote


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
    # The text index's note of each fact (``text_note``; None: a call without a session).
    # Rows that come without them (an empty list) have their text read from their bodies.
    texts: list[TextNote | None] = field(default_factory=list)


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
    # Of the other captures, those holding message parts the capture read lacks (a proxy's
    # reasoning beside a span that dropped it): parts no export carries.
    richer_dropped: int = 0


Match = str | Sequence[str] | None
TimeBound = str | datetime | None


# Where a part of the session read starts or ends: ("session", id), at that session; or
# ("time", sort_at), among the calls without a session (read after every session, in time
# order), at the first of that time.
PartBound = tuple[Literal["session", "time"], str]


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
    # A part of the session read: its calls from ``from`` (inclusive) to ``to`` (exclusive),
    # each a ``PartBound`` or None (open), in the database's text order. The parts
    # ``FactStore.session_parts`` gives cover every call once, in session order: an export's
    # worker processes and Ray tasks each read their own. Stores only.
    part: tuple[PartBound | None, PartBound | None] | None = None


FeedbackValue = bool | int | float | str


@dataclass(frozen=True)
class SessionFilter:
    """Which sessions to list, and which page (docs/store.md, Browsing sessions).

    A session is listed when one of its calls matches ``model``, ``provider``, ``source``,
    ``since`` and ``until`` together (as ``FactFilter`` does), when it has feedback as asked
    (``has_feedback``; ``feedback``: each name with that value), on the session or on one of
    its calls, and when ``text`` (case-insensitive) is in the text of one of its calls'
    messages, when one of its calls counts ``degradation``, and when it has a numeric
    ``score_name`` feedback within ``score_min``…``score_max``. Sessions come in the order of
    ``sort``: ``"last"`` (their last call's time, the default), ``"first"`` (their first call's
    time), ``"calls"``, ``"tokens"`` (input and output) or ``"duration"`` (first call to last),
    then id; descending unless ``descending`` is False. ``after`` is the ``next`` of the page
    before (keyset pagination), for the same sort.
    """

    model: Match = None
    provider: Match = None
    source: Match = None
    since: TimeBound = None
    until: TimeBound = None
    has_feedback: bool | None = None
    feedback: tuple[tuple[str, FeedbackValue], ...] = ()
    text: str | None = None
    limit: int = 50
    after: str | None = None
    degradation: str | None = None  # one of its calls counts this degradation reason
    # A numeric feedback value of this name (on the session or one of its calls) within
    # [score_min, score_max]; either bound may be open.
    score_name: str = "score"
    score_min: float | None = None
    score_max: float | None = None
    sort: str = "last"
    descending: bool = True


class SessionSummary(msgspec.Struct, frozen=True):
    """One session as a list shows it: its calls (one per call, not per capture) and their
    totals; ``feedback`` counts the feedback facts on the session and on its calls;
    ``labels`` holds the values of the feedback on the session itself, by name;
    ``duration_ms``: from the first call's time to the last's (None when either is not an
    RFC 3339 time)."""

    session_id: str
    calls: int
    first_at: str | None
    last_at: str | None
    input_tokens: int
    output_tokens: int
    degraded_calls: int
    models: list[str]
    providers: list[str]
    sources: list[str]
    feedback: int
    labels: dict[str, list[FeedbackValue]]
    duration_ms: int | None = None


class SessionPage(msgspec.Struct, frozen=True):
    """A page of sessions; ``next`` (None on the last page) gives the next one as
    ``SessionFilter.after``. A text search looks through a bounded number of sessions per page
    (docs/store.md, Browsing sessions): ``scanned`` says how many (those the text index named,
    or walked), and a page may hold fewer than ``limit`` sessions while ``next`` is not None."""

    sessions: list[SessionSummary]
    next: str | None
    scanned: int = 0


class Activity(msgspec.Struct, frozen=True):
    """Calls and their tokens in one UTC day (``day``: ``YYYY-MM-DD``), one per call."""

    day: str
    calls: int
    input_tokens: int
    output_tokens: int


class FeedbackCoverage(msgspec.Struct, frozen=True):
    """How much of the store has feedback: facts by name, and the calls and sessions that
    have any (on a session, on one of its calls)."""

    feedback: int
    by_name: list[tuple[str, int]]
    calls: int  # calls with feedback on themselves
    sessions: int  # sessions with feedback on themselves or on one of their calls


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
    # What another process opens this same store with (``open_store``): a PostgreSQL URL keeps
    # its password here, so it is never shown.
    connect_url: str

    def insert_facts(self, batch: Iterable[InferenceCall]) -> InsertResult: ...
    def insert_feedback(self, batch: Iterable[Feedback]) -> InsertResult: ...
    def iter_facts(
        self, filters: FactFilter | None = None, *, batch_size: int = 500
    ) -> Iterator[InferenceCall]: ...
    def iter_digested(
        self, filters: FactFilter | None = None, *, batch_size: int = 500
    ) -> Iterator[tuple[InferenceCall, bytes | None]]: ...
    def iter_feedback(
        self, filters: FeedbackFilter | None = None, *, batch_size: int = 500
    ) -> Iterator[Feedback]: ...
    def get_fact(self, inference_call_id: str) -> InferenceCall | None: ...
    def captures(self, inference_call_id: str) -> list[StoredCapture]: ...
    def call_aliases(self, ids: Iterable[str]) -> dict[str, str]: ...
    def count(self, filters: FactFilter | None = None) -> int: ...
    def count_dropped(self, filters: FactFilter | None = None) -> int: ...
    def count_richer_dropped(self, filters: FactFilter | None = None) -> int: ...
    def session_parts(
        self, filters: FactFilter | None, size: int
    ) -> list[tuple[PartBound | None, PartBound | None]]: ...
    def count_feedback(self, filters: FeedbackFilter | None = None) -> int: ...
    def stats(self, filters: FactFilter | None = None, *, session_limit: int = 20) -> Stats: ...
    def sessions(self, filters: SessionFilter | None = None) -> SessionPage: ...
    def feedback_coverage(self) -> FeedbackCoverage: ...
    def activity(self, filters: FactFilter | None = None) -> list[Activity]: ...
    def size(self) -> int: ...
    def schema_version(self) -> int: ...
    def preparer(self) -> Callable[..., Prepared]: ...
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
