"""`lithify export --replay OUT_DIR/manifest.json`: the export made again from its manifest and
checked byte for byte (docs/export.md, Replay); exit 0 when identical, 7 when not."""

from __future__ import annotations

from pathlib import Path

import click

from lithify.cli.exits import Exit
from lithify.cli.failures import export_failures
from lithify.cli.options import err, json_text, leave
from lithify.export import from_files, from_store
from lithify.export.replay import ReplayError, ReplayResult, describe, filters_of, load, replay
from lithify.store import open_store

MASKED = ":***@"  # what display_url puts where a password was


def run_replay(path: Path, store_url: str | None, as_json: bool) -> None:
    """Replay, print what differs (or the result as JSON) and exit with its code."""
    try:
        with export_failures("replay", path):
            result = _replay(path, store_url)
    except ReplayError as e:
        err.print(f"[red]cannot replay:[/] {e}")
        leave(Exit.USAGE)
    if as_json:
        click.echo(json_text(result))
    elif result.identical:
        err.print(f"[green]identical:[/] {len(result.files)} files, byte for byte")
    else:
        for line in describe(result):
            err.print(line, markup=False, highlight=False)
    leave(Exit.OK if result.identical else Exit.DIFFERS)


def _replay(path: Path, store_url: str | None) -> ReplayResult:
    p = load(path).provenance
    if p.facts:
        files = [Path(f) for f in p.facts]
        return replay(path, lambda m: from_files(files, filters_of(m)))
    url = store_url or p.store
    if url is not None and MASKED in url and store_url is None:
        raise ReplayError(
            f"the store {p.store} was recorded without its password: give it with --store "
            "(or LITHIFY_STORE)"
        )
    with open_store(url) as store:
        return replay(path, lambda m: from_store(store, filters_of(m)))
