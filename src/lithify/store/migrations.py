"""Forward-only schema migrations, one list per dialect, applied in order when a store opens.

A migration is never edited once released: a change to the schema is a new version. Each open
applies the missing versions in one transaction and records them in ``schema_version``; a
database whose version is above the code's is refused (``SchemaTooNew``) rather than guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]
    # The statements leave fact_captures empty: the store indexes the captures again, from
    # facts and fact_variants, in the same transaction (the index is derived).
    rebuild_captures: bool = False
    # The statements leave the session summaries and the text index empty: the store fills
    # them from the calls, in the same transaction (both are derived).
    rebuild_sessions: bool = False

    def statements(self, dialect: str) -> tuple[str, ...]:
        return self.sqlite if dialect == "sqlite" else self.postgres


SCHEMA_VERSION_TABLE = {
    "sqlite": """CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER PRIMARY KEY,
        description TEXT NOT NULL,
        applied_at TEXT NOT NULL)""",
    "postgres": """CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER PRIMARY KEY,
        description TEXT NOT NULL,
        applied_at TEXT NOT NULL)""",
}

# Query columns hold the escaped column form of strings (codec.col); the body holds the whole
# fact (codec.encode) and is the only source of truth when reading facts back. `sort_at` is
# started_at, else observed_at, else '' — the session order of docs/export.md — NOT NULL so that
# both databases order facts without timestamps first. PostgreSQL columns use the "C"
# collation so that both backends order text by code point, as SQLite's BINARY does.
_V1_SQLITE = (
    """CREATE TABLE facts (
        inference_call_id TEXT PRIMARY KEY,
        model_call_id TEXT,
        session_id TEXT,
        trace_id TEXT,
        span_id TEXT,
        provider TEXT,
        model TEXT,
        source TEXT NOT NULL,
        started_at TEXT,
        observed_at TEXT,
        sort_at TEXT NOT NULL,
        input_tokens INTEGER,
        output_tokens INTEGER,
        degradations TEXT NOT NULL,
        ingested_at TEXT NOT NULL)""",
    # Bodies apart, keyed by the fact's rowid: scans and GROUP BYs over the query columns
    # then never read the multi-KB bodies (PostgreSQL's TOAST does the same by itself).
    """CREATE TABLE fact_bodies (
        id INTEGER PRIMARY KEY,
        body BLOB NOT NULL)""",
    "CREATE UNIQUE INDEX facts_model_call_id ON facts (model_call_id) "
    "WHERE model_call_id IS NOT NULL",
    "CREATE INDEX facts_order ON facts (sort_at, inference_call_id)",
    "CREATE INDEX facts_session ON facts (session_id, sort_at, inference_call_id)",
    "CREATE INDEX facts_trace ON facts (trace_id)",
    "CREATE INDEX facts_model ON facts (model)",
    """CREATE TABLE feedback (
        feedback_id TEXT PRIMARY KEY,
        target_kind TEXT NOT NULL,
        target_id TEXT NOT NULL,
        name TEXT NOT NULL,
        value_kind TEXT NOT NULL,
        value_number REAL,
        value_text TEXT,
        source TEXT NOT NULL,
        observed_at TEXT,
        sort_at TEXT NOT NULL,
        ingested_at TEXT NOT NULL,
        body BLOB NOT NULL)""",
    "CREATE INDEX feedback_target ON feedback (target_kind, target_id)",
    "CREATE INDEX feedback_order ON feedback (sort_at, feedback_id)",
)

_V1_POSTGRES = (
    """CREATE TABLE facts (
        inference_call_id TEXT COLLATE "C" PRIMARY KEY,
        model_call_id TEXT COLLATE "C",
        session_id TEXT COLLATE "C",
        trace_id TEXT COLLATE "C",
        span_id TEXT COLLATE "C",
        provider TEXT COLLATE "C",
        model TEXT COLLATE "C",
        source TEXT COLLATE "C" NOT NULL,
        started_at TEXT COLLATE "C",
        observed_at TEXT COLLATE "C",
        sort_at TEXT COLLATE "C" NOT NULL,
        input_tokens BIGINT,
        output_tokens BIGINT,
        degradations JSONB NOT NULL,
        ingested_at TEXT COLLATE "C" NOT NULL,
        body BYTEA NOT NULL)""",
    "CREATE UNIQUE INDEX facts_model_call_id ON facts (model_call_id) "
    "WHERE model_call_id IS NOT NULL",
    "CREATE INDEX facts_order ON facts (sort_at, inference_call_id)",
    "CREATE INDEX facts_session ON facts (session_id, sort_at, inference_call_id)",
    "CREATE INDEX facts_trace ON facts (trace_id)",
    "CREATE INDEX facts_model ON facts (model)",
    """CREATE TABLE feedback (
        feedback_id TEXT COLLATE "C" PRIMARY KEY,
        target_kind TEXT COLLATE "C" NOT NULL,
        target_id TEXT COLLATE "C" NOT NULL,
        name TEXT COLLATE "C" NOT NULL,
        value_kind TEXT COLLATE "C" NOT NULL,
        value_number DOUBLE PRECISION,
        value_text TEXT COLLATE "C",
        source TEXT COLLATE "C" NOT NULL,
        observed_at TEXT COLLATE "C",
        sort_at TEXT COLLATE "C" NOT NULL,
        ingested_at TEXT COLLATE "C" NOT NULL,
        body BYTEA NOT NULL)""",
    "CREATE INDEX feedback_target ON feedback (target_kind, target_id)",
    "CREATE INDEX feedback_order ON feedback (sort_at, feedback_id)",
)


def _lz4(*columns: str) -> str:
    """PostgreSQL: TOAST these ``table.column``s with lz4 rather than pglz from now on (values
    stored keep theirs); a server built without lz4 (or older than 14) keeps pglz."""
    alters = "".join(
        f"EXECUTE 'ALTER TABLE {t} ALTER COLUMN {c} SET COMPRESSION lz4'; "
        for t, c in (column.split(".") for column in columns)
    )
    return f"DO $$ BEGIN {alters}EXCEPTION WHEN OTHERS THEN NULL; END $$"


# Ingest tokens for `lithify serve`: only a SHA-256 of each token is kept (tokens are 256-bit
# random strings, so a plain hash is enough: nothing to brute-force). A name is unique among
# live tokens; a revoked token keeps its row, so `token list` shows it and auth stays required.
_V2_SQLITE = (
    """CREATE TABLE ingest_tokens (
        token_id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        created_at TEXT NOT NULL,
        revoked_at TEXT)""",
    "CREATE UNIQUE INDEX ingest_tokens_live_name ON ingest_tokens (name) WHERE revoked_at IS NULL",
)

_V2_POSTGRES = (
    """CREATE TABLE ingest_tokens (
        token_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        name TEXT COLLATE "C" NOT NULL,
        token_hash TEXT COLLATE "C" NOT NULL UNIQUE,
        prefix TEXT COLLATE "C" NOT NULL,
        created_at TEXT COLLATE "C" NOT NULL,
        revoked_at TEXT COLLATE "C")""",
    "CREATE UNIQUE INDEX ingest_tokens_live_name ON ingest_tokens (name) WHERE revoked_at IS NULL",
    # Bodies are TOASTed: lz4 instead of the default pglz inserted 2-3x faster at about the same
    # size (measured with 512-fact batches); readers see no difference.
    _lz4("facts.body", "feedback.body"),
)

# Captures of a stored call that differ from it (a log event of a span, the proxy's view of a
# response an instrumentation recorded): `fact_variants` keeps each one, immutably, with the
# query columns of `facts` and its lossless body; `digest` (BLAKE2b-128 of the codec bytes) is
# its identity, so a redelivered variant is stored once. `fact_captures` is an index over the
# captures of every contested call (its facts row and its variants, nothing else): their
# identities, rank (sort_at, inference_call_id, digest), query columns and whether the capture
# rule keeps each one (then store/captures.py, now core/identity.py). It is derived, rewritten inside the insert
# transaction, and could be rebuilt from `facts` and `fact_variants`.
_V3_SQLITE = (
    """CREATE TABLE fact_variants (
        digest BLOB NOT NULL UNIQUE,
        inference_call_id TEXT NOT NULL,
        model_call_id TEXT,
        session_id TEXT,
        trace_id TEXT,
        span_id TEXT,
        provider TEXT,
        model TEXT,
        source TEXT NOT NULL,
        started_at TEXT,
        observed_at TEXT,
        sort_at TEXT NOT NULL,
        input_tokens INTEGER,
        output_tokens INTEGER,
        degradations TEXT NOT NULL,
        ingested_at TEXT NOT NULL,
        body BLOB NOT NULL)""",
    """CREATE TABLE fact_captures (
        digest BLOB PRIMARY KEY,
        variant INTEGER NOT NULL,
        inference_call_id TEXT NOT NULL,
        model_call_id TEXT,
        session_id TEXT,
        trace_id TEXT,
        provider TEXT,
        model TEXT,
        source TEXT NOT NULL,
        sort_at TEXT NOT NULL,
        kept INTEGER NOT NULL)""",
    "CREATE INDEX fact_captures_id ON fact_captures (inference_call_id)",
    "CREATE INDEX fact_captures_model_call_id ON fact_captures (model_call_id) "
    "WHERE model_call_id IS NOT NULL",
)

_V3_POSTGRES = (
    """CREATE TABLE fact_variants (
        digest BYTEA NOT NULL UNIQUE,
        inference_call_id TEXT COLLATE "C" NOT NULL,
        model_call_id TEXT COLLATE "C",
        session_id TEXT COLLATE "C",
        trace_id TEXT COLLATE "C",
        span_id TEXT COLLATE "C",
        provider TEXT COLLATE "C",
        model TEXT COLLATE "C",
        source TEXT COLLATE "C" NOT NULL,
        started_at TEXT COLLATE "C",
        observed_at TEXT COLLATE "C",
        sort_at TEXT COLLATE "C" NOT NULL,
        input_tokens BIGINT,
        output_tokens BIGINT,
        degradations JSONB NOT NULL,
        ingested_at TEXT COLLATE "C" NOT NULL,
        body BYTEA NOT NULL)""",
    _lz4("fact_variants.body"),
    """CREATE TABLE fact_captures (
        digest BYTEA PRIMARY KEY,
        variant INTEGER NOT NULL,
        inference_call_id TEXT COLLATE "C" NOT NULL,
        model_call_id TEXT COLLATE "C",
        session_id TEXT COLLATE "C",
        trace_id TEXT COLLATE "C",
        provider TEXT COLLATE "C",
        model TEXT COLLATE "C",
        source TEXT COLLATE "C" NOT NULL,
        sort_at TEXT COLLATE "C" NOT NULL,
        kept INTEGER NOT NULL)""",
    "CREATE INDEX fact_captures_id ON fact_captures (inference_call_id)",
    "CREATE INDEX fact_captures_model_call_id ON fact_captures (model_call_id) "
    "WHERE model_call_id IS NOT NULL",
)

# The capture rule ranks a call's captures by what they lack first (then store/captures.py, now core/identity.py): the
# index gains the column, and is built again.
_V4_SQLITE = (
    "DROP TABLE fact_captures",
    """CREATE TABLE fact_captures (
        digest BLOB PRIMARY KEY,
        variant INTEGER NOT NULL,
        lack INTEGER NOT NULL,
        inference_call_id TEXT NOT NULL,
        model_call_id TEXT,
        session_id TEXT,
        trace_id TEXT,
        provider TEXT,
        model TEXT,
        source TEXT NOT NULL,
        sort_at TEXT NOT NULL,
        kept INTEGER NOT NULL)""",
    "CREATE INDEX fact_captures_id ON fact_captures (inference_call_id)",
    "CREATE INDEX fact_captures_model_call_id ON fact_captures (model_call_id) "
    "WHERE model_call_id IS NOT NULL",
)

_V4_POSTGRES = (
    "DROP TABLE fact_captures",
    """CREATE TABLE fact_captures (
        digest BYTEA PRIMARY KEY,
        variant INTEGER NOT NULL,
        lack BIGINT NOT NULL,
        inference_call_id TEXT COLLATE "C" NOT NULL,
        model_call_id TEXT COLLATE "C",
        session_id TEXT COLLATE "C",
        trace_id TEXT COLLATE "C",
        provider TEXT COLLATE "C",
        model TEXT COLLATE "C",
        source TEXT COLLATE "C" NOT NULL,
        sort_at TEXT COLLATE "C" NOT NULL,
        kept INTEGER NOT NULL)""",
    "CREATE INDEX fact_captures_id ON fact_captures (inference_call_id)",
    "CREATE INDEX fact_captures_model_call_id ON fact_captures (model_call_id) "
    "WHERE model_call_id IS NOT NULL",
)


# Ids only propose that captures are one call; content decides (core/identity.py). The index
# gains each capture's content keys and the call the rule puts it in, and is built again: calls
# that shared an id with a contradicting capture are told apart, and nothing stored changes.
def _v5(blob: str, bigint: str, text: str) -> tuple[str, ...]:
    return (
        "DROP TABLE fact_captures",
        f"""CREATE TABLE fact_captures (
        digest {blob} PRIMARY KEY,
        variant INTEGER NOT NULL,
        lack {bigint} NOT NULL,
        inference_call_id {text} NOT NULL,
        model_call_id {text},
        session_id {text},
        trace_id {text},
        provider {text},
        model {text},
        source {text} NOT NULL,
        sort_at {text} NOT NULL,
        in_key {blob},
        out_key {blob},
        call {blob} NOT NULL,
        call_id {text} NOT NULL,
        collided INTEGER NOT NULL,
        kept INTEGER NOT NULL)""",
        "CREATE INDEX fact_captures_id ON fact_captures (inference_call_id)",
        "CREATE INDEX fact_captures_model_call_id ON fact_captures (model_call_id) "
        "WHERE model_call_id IS NOT NULL",
        "CREATE INDEX fact_captures_call_id ON fact_captures (call_id)",
    )


# Each distinct blob once (docs/store.md, Blobs): fact bodies refer to the long base64 strings
# they held by the SHA-256 of the decoded bytes, kept here. Bodies written before stay whole.
# PostgreSQL keeps the bytes out of line and uncompressed (EXTERNAL): images and audio are
# compressed already, and compressing them again costs writer CPU for nothing.
_V6_SQLITE = ("CREATE TABLE blobs (sha256 BLOB PRIMARY KEY, data BLOB NOT NULL)",)
_V6_POSTGRES = (
    "CREATE TABLE blobs (sha256 BYTEA PRIMARY KEY, data BYTEA NOT NULL)",
    "ALTER TABLE blobs ALTER COLUMN data SET STORAGE EXTERNAL",
)


# The session list without aggregating calls (docs/store.md, Browsing sessions): one row per
# session, kept by every write in the transaction that stores its calls, with the columns the
# list sorts on (each with an index ending in session_id, for keyset pages); `texts` holds the
# 8-byte digests of the messages (their bytes) already in the text index, so that the calls'
# replays of their session's conversation are indexed once. The text index holds each
# session's message text, casefolded, in documents of pieces new to it: SQLite's FTS5 with
# trigrams over a table of the documents (a document's id is its session's id << 32 | its
# number); PostgreSQL a table under a pg_trgm GIN index where the extension can be had (without
# it a search reads the table).
SESSION_SORTS = ("last_at", "first_at", "calls", "tokens", "duration_ms")


def _v7(key: str, text: str, blob: str, bigint: str) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE sessions (
        id {key},
        session_id {text} NOT NULL UNIQUE,
        calls {bigint} NOT NULL,
        first_at {text} NOT NULL,
        last_at {text} NOT NULL,
        input_tokens {bigint} NOT NULL,
        output_tokens {bigint} NOT NULL,
        tokens {bigint} NOT NULL,
        duration_ms {bigint} NOT NULL,
        degraded_calls {bigint} NOT NULL,
        docs {bigint} NOT NULL,
        texts {blob} NOT NULL)""",
        *(f"CREATE INDEX sessions_{c} ON sessions ({c}, session_id)" for c in SESSION_SORTS),
    )


_V7_SQLITE = (
    *_v7("INTEGER PRIMARY KEY", "TEXT", "BLOB", "INTEGER"),
    # The documents (LZ4-compressed past a few hundred bytes: store/sqlite.py, pack_doc), and an
    # FTS5 index of their trigrams alone (no positions: a third of the cost to write): the
    # documents holding all of a needle's trigrams are the candidates, and the text of each
    # tells whether it holds the needle.
    "CREATE TABLE session_docs (id INTEGER PRIMARY KEY, doc BLOB NOT NULL)",
    "CREATE VIRTUAL TABLE session_text USING fts5(text, content='', detail=none, "
    "tokenize='trigram case_sensitive 1')",
)
_V7_POSTGRES = (
    *_v7(
        "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        'TEXT COLLATE "C"',
        "BYTEA",
        "BIGINT",
    ),
    'CREATE TABLE session_text (session BIGINT NOT NULL, text TEXT COLLATE "C" NOT NULL)',
    "CREATE INDEX session_text_session ON session_text (session)",
    # pg_trgm is a trusted extension (PostgreSQL 13+): a database owner may create it. It is
    # created once per database, in public unless it is elsewhere already; the index names its
    # operator class by that schema, so any search_path finds it.
    """DO $$ DECLARE s text; BEGIN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
        SELECT extnamespace::regnamespace::text INTO s FROM pg_extension WHERE extname = 'pg_trgm';
        IF s IS NOT NULL THEN
            EXECUTE 'CREATE INDEX session_text_trgm ON session_text USING gin (text '
                || s || '.gin_trgm_ops)';
        END IF;
    END $$""",
)


# The text index's documents (several KB: a request's new text of a session) and the summaries'
# digests are TOASTed: pglz was the database server's largest single cost on realistic traffic
# (docs/store.md, Durability and failures). lz4 as for the bodies (migration 2); values already
# stored keep theirs. SQLite compresses its documents itself (store/sqlite.py, pack_doc).
_V8_POSTGRES = (_lz4("session_text.text", "sessions.texts"),)


# A call is read as its first capture with the metadata it left empty taken from its other
# captures (core/identity.py, fill): a span holds the model, usage and session, its log events
# the messages. `call_fills` keeps, for each call whose read differs from its first capture,
# that read as a fact, under the first capture's digest, with the query columns of `facts`; it
# is derived from the captures, like the index, and rebuilt with it. The rank now puts a
# capture without message parts last: the index is built again.
def _v9(blob: str, text: str, bigint: str, json: str) -> tuple[str, ...]:
    return (
        "DELETE FROM fact_captures",
        f"""CREATE TABLE call_fills (
        digest {blob} PRIMARY KEY,
        inference_call_id {text} NOT NULL,
        model_call_id {text},
        session_id {text},
        trace_id {text},
        span_id {text},
        provider {text},
        model {text},
        source {text} NOT NULL,
        started_at {text},
        observed_at {text},
        sort_at {text} NOT NULL,
        input_tokens {bigint},
        output_tokens {bigint},
        degradations {json} NOT NULL,
        ingested_at {text} NOT NULL,
        body {blob} NOT NULL)""",
    )


# A call's read now also takes the finish reason of an output message its first capture left
# null from its other captures (a span's gen_ai.response.finish_reasons beside log events that
# state none): the fills are made again, with the index they are derived with.
_V10 = ("DELETE FROM fact_captures",)

# A call's read now also takes a whole input or output its first capture has none of from its
# other captures, when they recorded one alike and no capture of its ids is another call's
# (per-message log events sent in two requests: the input as the call starts, the choices when
# it ends): the fills are made again, and calls stored before are read whole.
_V11 = _V10

# Each fact's digest as an export's facts.sha256 names it (the SHA-256 of its JSON), computed
# once as it is written; facts stored before have none, and an export computes theirs.
_V12_SQLITE = tuple(
    f"ALTER TABLE {t} ADD COLUMN json_sha256 BLOB"
    for t in ("fact_bodies", "fact_variants", "call_fills")
)
_V12_POSTGRES = tuple(
    f"ALTER TABLE {t} ADD COLUMN json_sha256 BYTEA"
    for t in ("facts", "fact_variants", "call_fills")
)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "facts and feedback", _V1_SQLITE, _V1_POSTGRES),
    Migration(2, "ingest tokens; lz4 body compression", _V2_SQLITE, _V2_POSTGRES),
    Migration(3, "differing captures of stored calls", _V3_SQLITE, _V3_POSTGRES),
    Migration(
        4, "captures ranked by what they lack", _V4_SQLITE, _V4_POSTGRES, rebuild_captures=True
    ),
    Migration(
        5,
        "calls decided by content: captures that share an id and contradict are two calls",
        _v5("BLOB", "INTEGER", "TEXT"),
        _v5("BYTEA", "BIGINT", 'TEXT COLLATE "C"'),
        rebuild_captures=True,
    ),
    Migration(6, "each distinct blob once", _V6_SQLITE, _V6_POSTGRES),
    Migration(
        7,
        "session summaries and a text index for the session list",
        _V7_SQLITE,
        _V7_POSTGRES,
        rebuild_sessions=True,
    ),
    Migration(8, "lz4 for the text index's documents (PostgreSQL)", (), _V8_POSTGRES),
    Migration(
        9,
        "calls read with the metadata their other captures hold; captures without message "
        "parts ranked last",
        _v9("BLOB", "TEXT", "INTEGER", "TEXT"),
        (*_v9("BYTEA", 'TEXT COLLATE "C"', "BIGINT", "JSONB"), _lz4("call_fills.body")),
        rebuild_captures=True,
    ),
    Migration(
        10,
        "calls read with the finish reasons their other captures hold",
        _V10,
        _V10,
        rebuild_captures=True,
    ),
    Migration(
        11,
        "calls read with the half of their messages another capture holds",
        _V11,
        _V11,
        rebuild_captures=True,
    ),
    Migration(12, "each fact's digest kept for exports", _V12_SQLITE, _V12_POSTGRES),
)

SESSIONS_VERSION = 7  # the first version with the session summaries
FILLS_VERSION = 9  # the first version with call_fills
DIGESTS_VERSION = 12  # the first version with json_sha256

LATEST = MIGRATIONS[-1].version
