"""`lithify ui`: the web viewer over the store (docs/ui.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from lithify.cli.exits import Exit
from lithify.cli.options import StoreOpt, err, opened_store, server_exits


def ui_cmd(
    store: StoreOpt = None,
    host: Annotated[
        str,
        typer.Option(
            help="Address to listen on; beyond loopback a store token is required "
            "(`lithify token create NAME`).",
            envvar="LITHIFY_UI_HOST",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Port (0 picks a free one).", envvar="LITHIFY_UI_PORT")
    ] = 8765,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the viewer in the default browser.")
    ] = False,
) -> None:
    """Read sessions and curate them before training: a web viewer over the store, with a JSON twin of every page."""
    from lithify.ui import UiConfig, serve
    from lithify.ui.server import NoToken

    with opened_store(store, existing=True) as opened, server_exits():
        try:
            serve(opened, UiConfig(host=host, port=port), open_browser=open_browser)
        except NoToken as e:
            err.print(f"[red]{e}[/]")
            raise typer.Exit(Exit.USAGE) from None
