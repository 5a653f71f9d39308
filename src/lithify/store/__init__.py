"""The fact store: immutable, deduplicated facts and feedback in SQLite or PostgreSQL.

``open_store(url)`` opens (creating and migrating as needed) the store a URL names:

- ``None``: ``$LITHIFY_STORE`` if set, else the per-user default SQLite file
  (``default_store_path()``);
- ``sqlite:///abs/path.db`` (absolute), ``sqlite:relative/path.db`` (relative to the working
  folder), ``sqlite:~/facts.db``, or a bare file path;
- ``postgresql://…`` / ``postgres://…``: any libpq URL (``?options=-csearch_path%3Dname``
  selects a schema).

See docs/store.md.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from lithify.store._rows import prepare
from lithify.store._types import (
    Activity,
    DegradationCount,
    FactFilter,
    FactStore,
    FeedbackCoverage,
    FeedbackFilter,
    FeedbackValue,
    Group,
    InsertResult,
    PartBound,
    Prepared,
    SchemaTooNew,
    SessionFilter,
    SessionPage,
    SessionSummary,
    Stats,
    StoredCapture,
    StoreError,
    StoreUnavailable,
    TokenExists,
    TokenInfo,
)
from lithify.store.migrations import MIGRATIONS, Migration

__all__ = [
    "Activity",
    "DegradationCount",
    "FactFilter",
    "FactStore",
    "FeedbackCoverage",
    "FeedbackFilter",
    "FeedbackValue",
    "Group",
    "InsertResult",
    "InvalidStoreURL",
    "PartBound",
    "Prepared",
    "SchemaTooNew",
    "SessionFilter",
    "SessionPage",
    "SessionSummary",
    "Stats",
    "StoreError",
    "StoreUnavailable",
    "StoredCapture",
    "TokenExists",
    "TokenInfo",
    "default_store_path",
    "display_url",
    "open_store",
    "prepare",
    "sqlite_path",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


class InvalidStoreURL(StoreError, ValueError):
    """A store URL lithify cannot read."""


def default_store_path() -> Path:
    """``$LITHIFY_HOME/lithify.db``, else ``$XDG_DATA_HOME/lithify/lithify.db``, else
    ``~/.local/share/lithify/lithify.db``."""
    home = os.environ.get("LITHIFY_HOME")
    if home:
        return Path(home).expanduser() / "lithify.db"
    xdg = os.environ.get("XDG_DATA_HOME")
    # The XDG spec says to ignore a relative XDG_DATA_HOME.
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / "lithify" / "lithify.db"


def display_url(url: str) -> str:
    """The URL with any password masked, for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL or bare path names; None when it is not a SQLite URL."""
    m = _SCHEME.match(url)
    if m is None or len(m.group(1)) == 1:  # no scheme (a one-letter one is a drive: C:\…)
        return Path(url).expanduser()
    if m.group(1).lower() != "sqlite":
        return None
    rest = url[m.end() :]
    if "?" in rest or "#" in rest:
        raise InvalidStoreURL(f"SQLite store URLs take no parameters: {url}")
    if rest.startswith("//"):
        rest = rest[2:]
        if not rest.startswith("/"):
            raise InvalidStoreURL(
                f"{url}: use sqlite:///absolute/path.db or sqlite:relative/path.db"
            )
    path = unquote(rest)
    if not path or path == ":memory:":
        raise InvalidStoreURL(f"{url}: a SQLite store needs a file path")
    return Path(path).expanduser()


def open_store(
    url: str | None = None,
    *,
    migrations: tuple[Migration, ...] = MIGRATIONS,
    summaries: bool = True,
) -> FactStore:
    """Open the store ``url`` names (None: ``$LITHIFY_STORE``, else the per-user default).

    ``migrations`` replaces the schema history (tests use it to exercise upgrades).
    ``summaries=False`` keeps no session summaries and no text index as facts are written (half
    the cost of a write): for a private scratch store only, never one the session list reads.
    Raises ``InvalidStoreURL`` for a URL it cannot read, ``SchemaTooNew`` for a database a newer
    lithify migrated, ``StoreUnavailable`` when the database cannot be reached.
    """
    if url is None:
        url = os.environ.get("LITHIFY_STORE") or None
    if url is None:
        from lithify.store.sqlite import SQLiteStore

        return SQLiteStore(default_store_path(), migrations=migrations, summaries=summaries)
    url = url.strip()
    if not url:
        raise InvalidStoreURL("empty store URL")
    m = _SCHEME.match(url)
    scheme = m.group(1).lower() if m else ""
    if scheme in ("postgresql", "postgres"):
        from lithify.store.postgres import PostgresStore

        return PostgresStore(
            url, display_url=display_url(url), migrations=migrations, summaries=summaries
        )
    path = sqlite_path(url)
    if path is None:
        raise InvalidStoreURL(
            f"unknown store URL scheme {scheme!r} in {display_url(url)}: "
            "use sqlite:///path.db, postgresql://… or a file path"
        )
    from lithify.store.sqlite import SQLiteStore

    return SQLiteStore(path, migrations=migrations, summaries=summaries)
