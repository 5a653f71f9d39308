"""What every command shares: the stderr console, the store option and its opening, --json."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import msgspec
import typer
from rich.console import Console

from lithify.exits import Exit
from lithify.store import FactStore, StoreError, StoreUnavailable, open_store

err = Console(stderr=True, soft_wrap=True)  # paths and locations stay on one line

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


def json_text(value: Any) -> str:
    """What ``--json`` prints for a typed result (a msgspec struct): its JSON, indented."""
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


def json_flag(help: str) -> Any:
    """``--json``, for scripts; ``LITHIFY_JSON=1`` turns it on for every command."""
    return typer.Option("--json", help=help, envvar="LITHIFY_JSON")


def store_or_none(url: str | None, meanwhile: str) -> FactStore | None:
    """The store for a server, None while it cannot be reached (saying what the server does
    ``meanwhile``), or ``Exit.STORE`` when it can never work (a bad URL, a schema too new)."""
    try:
        return open_store(url)
    except StoreUnavailable as e:
        err.print(f"[yellow]the store is unavailable{meanwhile}:[/] {e}")
        return None
    except StoreError as e:
        err.print(f"[red]cannot open the store:[/] {e}")
        raise typer.Exit(Exit.STORE) from None


@contextmanager
def opened_store(url: str | None) -> Iterator[FactStore]:
    """The store, or a readable error and ``Exit.STORE`` when it cannot be opened or reached."""
    try:
        with open_store(url) as store:
            yield store
    except StoreError as e:
        err.print(f"[red]store error:[/] {e}")
        raise typer.Exit(Exit.STORE) from None
