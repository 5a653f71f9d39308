"""How `lithify export` and `lithify export --replay` report what stops them, and exit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lithify.cli.exits import Exit
from lithify.cli.options import err, leave
from lithify.core.factfile import InputError
from lithify.export import FolderBusy, RowInvalid, WorkerDied
from lithify.store import StoreError


@contextmanager
def export_failures(doing: str, where: Path | str) -> Iterator[None]:
    """Unreadable input (exit UNREADABLE), the store (STORE), a row failing its schema (a bug,
    INVALID_ROW: nothing is written), a worker process that died or another export writing into
    the same folder (FAILED) and an output that cannot be written (``doing`` it to ``where``:
    UNREADABLE), each said in one line."""
    try:
        yield
    except InputError as e:
        err.print(f"[red]unreadable:[/] {e}")
        leave(Exit.UNREADABLE)
    except StoreError as e:
        err.print(f"[red]store error:[/] {e}")
        leave(Exit.STORE)
    except RowInvalid as e:
        err.print(f"[red]bug: a row fails its schema; nothing was written.[/] {e}")
        err.print("Please report it with the facts of the source call ids above.")
        leave(Exit.INVALID_ROW)
    except (WorkerDied, FolderBusy) as e:
        err.print(f"[red]export failed:[/] {e}")
        leave(Exit.FAILED)
    except OSError as e:
        err.print(f"[red]cannot {doing}[/] {where}: {e.strerror or e}")
        leave(Exit.UNREADABLE)
