"""`lithify proxy`: the recording gateway (docs/proxy.md)."""

from __future__ import annotations

from pathlib import Path

import click

from lithify.cli.exits import Exit
from lithify.cli.options import (
    err,
    leave,
    option,
    repeatable,
    server_exits,
    store_option,
    store_or_none,
)

# The stages are imported inside the functions: importing this module for `lithify --help`
# costs none of them.


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise click.BadParameter(
            f"{text!r}: use HOST:PORT, e.g. 127.0.0.1:8080", param_hint="--listen"
        )
    return host.strip("[]"), int(port)


@click.command("proxy")
@repeatable(
    "--upstream",
    "-u",
    "upstream",
    help="NAME=URL for openai, anthropic or gemini (repeatable); a bare NAME is the "
    "provider's own API. A path prefix in the URL is kept.",
    envvar="LITHIFY_PROXY_UPSTREAM",
    show_default=False,
    required=True,
)
@option(
    "--listen",
    help="HOST:PORT to listen on (port 0 picks one).",
    envvar="LITHIFY_PROXY_LISTEN",
    default="127.0.0.1:8080",
)
@store_option
@option(
    "--spool",
    help="Spool folder (default: the store's own: FILE.proxy-spool beside a SQLite "
    "store, proxy-spool-HASH in the per-user data folder for PostgreSQL). A spool is "
    "recorded into the store it was first used with, never another.",
    envvar="LITHIFY_PROXY_SPOOL",
    show_default=False,
    default=None,
)
@option(
    "--spool-max-size",
    help="Spool bound; past it, calls are forwarded but not recorded (and counted).",
    envvar="LITHIFY_PROXY_SPOOL_MAX_SIZE",
    default="1GiB",
)
@option(
    "--max-body-size",
    help="Largest request body forwarded.",
    envvar="LITHIFY_MAX_BODY_SIZE",
    default="100MiB",
)
@option(
    "--max-record-size",
    help="Larger requests or responses are forwarded but not recorded (and counted).",
    envvar="LITHIFY_PROXY_MAX_RECORD_SIZE",
    default="32MiB",
)
@option("--connect-timeout", type=float, help="Seconds to connect to an upstream.", default=10.0)
@option(
    "--read-timeout",
    type=float,
    help="Seconds an upstream may stay silent (before or during a response).",
    default=600.0,
)
@option(
    "--shutdown-timeout",
    type=int,
    help="Seconds to finish calls in flight on SIGTERM/SIGINT.",
    default=30,
)
@option(
    "--log-level", help="debug, info, warning or error.", envvar="LITHIFY_LOG_LEVEL", default="info"
)
def proxy_cmd(
    upstream: list[str],
    listen: str,
    store: str | None,
    spool: str | None,
    spool_max_size: str,
    max_body_size: str,
    max_record_size: str,
    connect_timeout: float,
    read_timeout: float,
    shutdown_timeout: int,
    log_level: str,
) -> None:
    """Forward model calls to the providers unchanged and record each one as a fact.

    Point a client's base URL at http://HOST:PORT (the OpenAI SDK's at http://HOST:PORT/v1). Forwarded, to the configured upstreams only: POST /v1/chat/completions and /v1/responses (openai), /v1/messages (anthropic), /v1beta/models/MODEL:generateContent and :streamGenerateContent (gemini). An x-lithify-session header sets the session (it is not forwarded).

    Exchanges go through a durable spool to the store, so a slow or stopped store never slows or fails a call. GET /lithify/health and /lithify/metrics say what was recorded and what was not (docs/proxy.md).
    """
    from lithify.cli.serve import parse_size
    from lithify.ingest.proxy import ProxyConfig, parse_upstream, serve
    from lithify.ingest.spool import SpoolOfAnotherStore, check_owner, default_spool, store_key

    if log_level.lower() not in ("debug", "info", "warning", "error"):
        raise click.BadParameter(f"unknown log level {log_level!r}", param_hint="--log-level")
    upstreams = {}
    for text in upstream:
        try:
            u = parse_upstream(text)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--upstream") from None
        if u.name in upstreams:
            raise click.BadParameter(f"{u.name} is given twice", param_hint="--upstream")
        upstreams[u.name] = u
        # The client's path already starts with the API version; a URL ending in it doubles it.
        if u.prefix.rstrip("/").endswith(("/v1", "/v1beta")):
            err.print(
                f"[yellow]--upstream {u.name}: the URL ends with {u.prefix.rsplit('/', 1)[-1]}, "
                "and client paths already start with it; give the URL without it[/]"
            )
    for name, value in (("--connect-timeout", connect_timeout), ("--read-timeout", read_timeout)):
        if value <= 0:
            raise click.BadParameter("must be positive", param_hint=name)
    host, port = _listen(listen)
    # A URL that can never work is an error now, not later; the recorder opens its own.
    probe = store_or_none(store, "; exchanges wait in the spool")
    if probe is not None:
        probe.close()
    folder = Path(spool).expanduser() if spool else default_spool(store)
    try:
        check_owner(folder.absolute(), store_key(store))
    except SpoolOfAnotherStore as e:
        err.print(f"[red]refused:[/] {e}")
        leave(Exit.USAGE)
    if spool is None:
        _warn_of_the_shared_spool()
    config = ProxyConfig(
        upstreams=upstreams,
        host=host,
        port=port,
        store=store,
        spool=str(folder),
        spool_max_bytes=parse_size(spool_max_size),
        max_body_size=parse_size(max_body_size),
        max_record_size=parse_size(max_record_size),
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        shutdown_timeout=max(0, shutdown_timeout),
    )
    with server_exits():
        serve(config, log_level=log_level.lower())


def _warn_of_the_shared_spool() -> None:
    """Before spools followed their store, every proxy without --spool used this one folder:
    what is left in it is recorded only when a proxy is pointed at it with its store."""
    from lithify.ingest.spool import SpoolReader, spool_owner
    from lithify.store import default_store_path

    shared = default_store_path().parent / "proxy-spool"
    if shared.is_dir() and spool_owner(shared) is None and SpoolReader(shared).backlog()[0]:
        err.print(
            f"[yellow]{shared} holds exchanges an earlier lithify proxy spooled but did not "
            "record, for a store it did not note; this proxy leaves them. To record them: "
            f"`lithify proxy --spool {shared} --store URL` with the store they were for.[/]"
        )
