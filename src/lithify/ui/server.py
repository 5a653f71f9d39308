"""Running the viewer: uvicorn with the bounded request heads every lithify server has
(``ingest.http``), on loopback unless a store token guards it."""

from __future__ import annotations

import sys
import threading
import webbrowser
from typing import Any

from lithify.ingest.http import HeadLimits, config, run
from lithify.store import FactStore
from lithify.ui.app import UiConfig, build_app
from lithify.ui.security import HEADERS, is_loopback


class NoToken(Exception):
    """A viewer beyond loopback needs a live store token, and the store has none."""


def _refusal(
    status: int, reason: str, message: str, info: dict[str, Any]
) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """A request refused before the app saw it (a head too large or too slow): plain text."""
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    headers += [(k.encode(), v.encode()) for k, v in HEADERS.items()]
    return headers, message.encode()


def url_of(host: str, port: int) -> str:
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"


def make_server(store: FactStore, ui: UiConfig, limits: HeadLimits | None = None) -> Any:
    """The viewer under uvicorn, request heads bounded as every lithify server's (serve.md,
    Limits); not started. Beyond loopback, ``NoToken`` unless the store has a live token."""
    import uvicorn

    if not is_loopback(ui.host) and not any(live for _, _, live in store.token_hashes()):
        raise NoToken(
            f"lithify ui on {ui.host} would show the store to anyone who can reach it: "
            "create a token first (`lithify token create NAME`), then sign in with it"
        )
    cfg = config(
        build_app(store, ui),
        host=ui.host,
        port=ui.port,
        refusal=_refusal,
        log_config=None,
        shutdown_timeout=5,
        limits=limits,
        log_level="warning",
    )
    return uvicorn.Server(cfg)


def serve(
    store: FactStore,
    ui: UiConfig,
    *,
    open_browser: bool = False,
    limits: HeadLimits | None = None,
) -> None:
    """Serve the viewer until SIGINT/SIGTERM (``make_server``); print where it listens."""
    server = make_server(store, ui, limits)

    def listening(url: str, host: str, port: int) -> None:
        where = url_of(host, port)
        print(f"lithify ui on {where} (store {store.url}); Ctrl-C stops it", file=sys.stderr)
        if open_browser:
            threading.Thread(target=webbrowser.open, args=(where,), daemon=True).start()

    run(server, listening)  # ServerFailed when the address cannot be bound
