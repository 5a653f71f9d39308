"""What every command shares: the stderr console, the store option and its opening, the store
filter options, --json."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lithify.cli.exits import Exit

if TYPE_CHECKING:
    from rich.console import Console

    from lithify.store import FactFilter, FactStore

# Stages and rich are imported inside the functions that use them: importing a command module
# (for `lithify --help`, say) must not cost what only running the command needs.


def stderr() -> Console:
    """The stderr console, made on first use (rich is imported by commands that print)."""
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console(stderr=True, soft_wrap=True)  # paths and locations stay on one line
    return _console


_console: Console | None = None


class _Stderr:
    """``err``: the stderr console's methods, without making it before one is called."""

    def __getattr__(self, name: str) -> Any:
        return getattr(stderr(), name)


err: Console = _Stderr()  # type: ignore[assignment]

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        "-s",
        help="Store URL: sqlite:///path.db, postgresql://… (default: the per-user SQLite file).",
        envvar="LITHIFY_STORE",
        show_default=False,
    ),
]

SessionOpt = Annotated[list[str] | None, typer.Option("--session", help="Session id (repeatable).")]
ModelOpt = Annotated[list[str] | None, typer.Option("--model", help="Model (repeatable).")]
FactSourceOpt = Annotated[
    list[str] | None,
    typer.Option("--source", help="Translator that made the fact, e.g. otel-genai (repeatable)."),
]
ProviderOpt = Annotated[list[str] | None, typer.Option("--provider", help="Provider (repeatable).")]
SinceOpt = Annotated[
    str | None,
    typer.Option(help="From this time on (RFC 3339, e.g. 2026-11-01 or 2026-11-01T12:00:00Z)."),
]
UntilOpt = Annotated[str | None, typer.Option(help="Before this time (RFC 3339).")]


def fact_filter(
    session: list[str] | None = None,
    model: list[str] | None = None,
    source: list[str] | None = None,
    provider: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int | None = None,
) -> FactFilter:
    """The store filter the options above give (a repeatable option not given: no filter)."""
    from lithify.store import FactFilter

    return FactFilter(
        session_id=session or None,
        model=model or None,
        source=source or None,
        provider=provider or None,
        since=since,
        until=until,
        limit=limit,
    )


def json_text(value: Any) -> str:
    """What ``--json`` prints for a typed result (a msgspec struct): its JSON, indented."""
    import msgspec

    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


def json_flag(help: str) -> Any:
    """``--json``, for scripts; ``LITHIFY_JSON=1`` turns it on for every command."""
    return typer.Option("--json", help=help, envvar="LITHIFY_JSON")


def store_or_none(url: str | None, meanwhile: str) -> FactStore | None:
    """The store for a server, None while it cannot be reached (saying what the server does
    ``meanwhile``), or ``Exit.STORE`` when it can never work (a bad URL, a schema too new)."""
    from lithify.store import StoreError, StoreUnavailable, open_store

    try:
        return open_store(url)
    except StoreUnavailable as e:
        err.print(f"[yellow]the store is unavailable{meanwhile}:[/] {e}")
        return None
    except StoreError as e:
        err.print(f"[red]cannot open the store:[/] {e}")
        raise typer.Exit(Exit.STORE) from None


@contextmanager
def opened_store(url: str | None, *, existing: bool = False) -> Iterator[FactStore]:
    """The store, or a readable error and ``Exit.STORE`` when it cannot be opened or reached.

    ``existing``: a command that only reads refuses a SQLite file that is not there, rather
    than create an empty store and report nothing (a mistyped ``--store`` looks like no data).
    """
    from lithify.store import StoreError, open_store

    if existing:
        _refuse_missing_sqlite(url)
    try:
        with open_store(url) as store:
            yield store
    except StoreError as e:
        err.print(f"[red]store error:[/] {e}")
        raise typer.Exit(Exit.STORE) from None


def _refuse_missing_sqlite(url: str | None) -> None:
    import os

    from lithify.store import StoreError, default_store_path, sqlite_path

    url = url or os.environ.get("LITHIFY_STORE") or None
    try:
        path = default_store_path() if url is None else sqlite_path(url.strip())
    except StoreError:
        return  # open_store says what is wrong with the URL
    if path is not None and not path.exists():
        err.print(
            f"[red]no store at {path}:[/] nothing has been stored there (check --store or "
            "LITHIFY_STORE; `lithify serve`, `import`, `proxy` and `demo` create a store)"
        )
        raise typer.Exit(Exit.STORE)


@contextmanager
def server_exits() -> Iterator[None]:
    """A server (serve, proxy, ui) that cannot start exits ``Exit.FAILED``: its log says why."""
    from lithify.ingest.http import ServerFailed  # the HTTP stack, only for the servers

    try:
        yield
    except ServerFailed:
        raise typer.Exit(Exit.FAILED) from None
