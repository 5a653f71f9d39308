"""`lithify ui`: the web viewer over the store (docs/ui.md)."""

from __future__ import annotations

import click

from lithify.cli.exits import Exit
from lithify.cli.options import (
    err,
    leave,
    opened_store,
    option,
    server_exits,
    store_option,
)


@click.command("ui")
@store_option
@option(
    "--host",
    help="Address to listen on; beyond loopback a store token is required "
    "(`lithify token create NAME`).",
    envvar="LITHIFY_UI_HOST",
    default="127.0.0.1",
)
@option(
    "--port", type=int, help="Port (0 picks a free one).", envvar="LITHIFY_UI_PORT", default=8765
)
@option("--open", "open_browser", is_flag=True, help="Open the viewer in the default browser.")
def ui_cmd(store: str | None, host: str, port: int, open_browser: bool) -> None:
    """Read sessions and curate them before training: a web viewer over the store, with a JSON twin of every page."""
    from lithify.ui import UiConfig, serve
    from lithify.ui.server import NoToken

    with opened_store(store, existing=True) as opened, server_exits():
        try:
            serve(opened, UiConfig(host=host, port=port), open_browser=open_browser)
        except NoToken as e:
            err.print(f"[red]{e}[/]")
            leave(Exit.USAGE)
