"""What every command shares: the stderr console, the store option and its opening, the store
filter options, --json."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

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

F = TypeVar("F", bound=Callable[..., Any])


def option(*decls: str, **attrs: Any) -> Callable[[F], F]:
    """``click.option`` as every lithify option is made: its environment variable shown in the
    help (the one given, else the command's ``LITHIFY_<COMMAND>_<NAME>``)."""
    attrs.setdefault("show_envvar", True)
    return click.option(*decls, **attrs)


def _list_or_none(ctx: Any, param: Any, value: Any) -> list[Any] | None:
    return list(value) or None


def repeatable(*decls: str, **attrs: Any) -> Callable[[F], F]:
    """A repeatable option: the values given as a list, None when there is none."""
    return option(*decls, multiple=True, callback=_list_or_none, **attrs)


def argument(name: str, *, help: str, many: bool = False, **attrs: Any) -> Callable[[F], F]:
    """``click.argument``; ``many``: any number of values, as a list (None when none)."""
    if many:
        attrs.update(nargs=-1, callback=_list_or_none)
    return click.argument(name, help=help, **attrs)


class Group(click.Group):
    """A command group whose list gives each command's whole first paragraph (click cuts it
    at the width)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, summary(self.commands[name].help)) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def summary(help_text: str | None) -> str:
    """The first paragraph of a command's help, on one line: what a command list shows."""
    import inspect

    return " ".join(inspect.cleandoc(help_text or "").split("\n\n")[0].split())


def leave(code: int) -> NoReturn:
    """End the command with exit code ``code`` (exits.py), what it had to say said."""
    raise click.exceptions.Exit(code)


store_option = option(
    "--store",
    "-s",
    "store",
    help="Store URL: sqlite:///path.db, postgresql://… (default: the per-user SQLite file).",
    envvar="LITHIFY_STORE",
    show_default=False,
)


# The store filter options, fact_filter's; export takes three of them as they are.
session_option = repeatable("--session", help="Session id (repeatable).")
model_option = repeatable("--model", help="Model (repeatable).")
until_option = option("--until", help="Before this time (RFC 3339).")
_FILTERS = (
    session_option,
    model_option,
    repeatable("--source", help="Translator that made the fact, e.g. otel-genai (repeatable)."),
    repeatable("--provider", help="Provider (repeatable)."),
    option(
        "--since", help="From this time on (RFC 3339, e.g. 2026-11-01 or 2026-11-01T12:00:00Z)."
    ),
    until_option,
)


def filter_options(f: F) -> F:
    """The store filter options (``fact_filter``'s): --session, --model, --source, --provider,
    --since, --until."""
    for decorate in reversed(_FILTERS):
        f = decorate(f)
    return f


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


def json_flag(help: str) -> Callable[[F], F]:
    """``--json``, for scripts (its value ``as_json``); ``LITHIFY_JSON=1`` turns it on for every
    command."""
    return option("--json", "as_json", is_flag=True, help=help, envvar="LITHIFY_JSON")


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
        leave(Exit.STORE)


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
        leave(Exit.STORE)


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
        leave(Exit.STORE)


@contextmanager
def server_exits() -> Iterator[None]:
    """A server (serve, proxy, ui) that cannot start exits ``Exit.FAILED``: its log says why."""
    from lithify.ingest.http import ServerFailed  # the HTTP stack, only for the servers

    try:
        yield
    except ServerFailed:
        leave(Exit.FAILED)
