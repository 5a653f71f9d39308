"""`lithify serve` and `lithify token`: the OTLP/HTTP receiver and its ingest tokens."""

from __future__ import annotations

import os
import re

import click

from lithify.cli.exits import Exit
from lithify.cli.options import (
    Group,
    argument,
    err,
    json_flag,
    leave,
    opened_store,
    option,
    server_exits,
    store_option,
    store_or_none,
)

# The stages (store, ingest) and rich are imported inside the commands: `lithify --version` and
# every other command start without them.

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from ``20971520``, ``20MiB``, ``20M``, ``512KB``… (K/M/G are powers of 1024)."""
    m = _SIZE.match(text)
    if m is None:
        raise click.BadParameter(f"{text!r} is not a size (e.g. 20MiB, 512KiB, 1048576)")
    n = float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " ")
    if n < 1:
        raise click.BadParameter("the size must be at least 1 byte")
    return int(n)


@click.command("serve")
@store_option
@option("--host", help="Address to listen on.", envvar="LITHIFY_HOST", default="127.0.0.1")
@option("--port", type=int, help="Port (0 picks a free one).", envvar="LITHIFY_PORT", default=4318)
@option(
    "--grpc-port",
    type=int,
    help="OTLP/gRPC port, beside HTTP (0 turns gRPC off).",
    envvar="LITHIFY_GRPC_PORT",
    default=4317,
)
@option("--no-grpc", is_flag=True, help="Serve OTLP/HTTP only (as --grpc-port 0).")
@option(
    "--max-body-size",
    help="Largest request body, on the wire and after decompression.",
    envvar="LITHIFY_MAX_BODY_SIZE",
    default="20MiB",
)
@option(
    "--require-token",
    is_flag=True,
    help="Refuse ingest without a valid token even before any token exists.",
    envvar="LITHIFY_REQUIRE_TOKEN",
)
@option(
    "--workers",
    type=int,
    help="Translation worker processes (default: one per core; 0: threads in-process).",
    envvar="LITHIFY_WORKERS",
    show_default=False,
    default=None,
)
@option(
    "--max-inflight",
    type=int,
    help="Requests processed at once; more are answered 429.",
    envvar="LITHIFY_MAX_INFLIGHT",
    default=16,
)
@option(
    "--retry-after",
    type=int,
    help="Retry-After seconds when the store is unavailable (503).",
    envvar="LITHIFY_RETRY_AFTER",
    default=2,
)
@option(
    "--shutdown-timeout",
    type=int,
    help="Seconds to drain in-flight requests on SIGTERM/SIGINT.",
    envvar="LITHIFY_SHUTDOWN_TIMEOUT",
    default=30,
)
@option(
    "--log-level", help="debug, info, warning or error.", envvar="LITHIFY_LOG_LEVEL", default="info"
)
def serve_cmd(
    store: str | None,
    host: str,
    port: int,
    grpc_port: int,
    no_grpc: bool,
    max_body_size: str,
    require_token: bool,
    workers: int | None,
    max_inflight: int,
    retry_after: int,
    shutdown_timeout: int,
    log_level: str,
) -> None:
    """Receive OTLP traces and logs over HTTP (protobuf or JSON, gzip) and gRPC; store their facts.

    Point an OpenTelemetry exporter at http://HOST:PORT (OTLP/HTTP) or http://HOST:GRPC-PORT
    (OTLP/gRPC, the Collector's default `otlp` exporter). HTTP ingest: POST /v1/traces, /v1/logs,
    /v1/feedback; GET /health and /health/ready. gRPC: TraceService/Export, LogsService/Export.
    Logs are JSON lines on stderr. A request is acknowledged only once its facts are committed.
    """
    from lithify.ingest.receiver import ServeConfig, serve

    if log_level.lower() not in ("debug", "info", "warning", "error"):
        raise click.BadParameter(f"unknown log level {log_level!r}", param_hint="--log-level")
    for name, value in (("--max-inflight", max_inflight), ("--retry-after", retry_after)):
        if value < 1:
            raise click.BadParameter("must be at least 1", param_hint=name)
    if not 0 <= grpc_port <= 65535:
        raise click.BadParameter("a port is 0 to 65535", param_hint="--grpc-port")
    config = ServeConfig(
        store=store,
        host=host,
        port=port,
        grpc_port=None if no_grpc or grpc_port == 0 else grpc_port,
        max_body_size=parse_size(max_body_size),
        require_token=require_token,
        workers=max(0, workers if workers is not None else (os.cpu_count() or 1)),
        max_inflight=max_inflight,
        retry_after=retry_after,
        shutdown_timeout=max(0, shutdown_timeout),
    )
    # Serve anyway while the store is down: ingest is answered 503 until it can be reached.
    opened = store_or_none(store, ", retrying in the background")
    with server_exits():
        serve(config, opened, log_level=log_level.lower())


@click.group(
    "token",
    cls=Group,
    help="Ingest tokens for `lithify serve` (Authorization: Bearer <token>).",
    no_args_is_help=True,
)
def token_app() -> None:
    pass


@token_app.command("create")
@argument("name", help="A name to tell the token apart (e.g. a service).")
@store_option
def token_create(name: str, store: str | None) -> None:
    """Create a token and print it ONCE on stdout; only its SHA-256 is stored.

    Once any token exists, `lithify serve` refuses ingest without a valid one.
    """
    from lithify.ingest.tokens import new_token, token_hash, token_prefix
    from lithify.store import StoreError, TokenExists

    token = new_token()
    with opened_store(store) as s:
        try:
            s.create_token(name, token_hash(token), token_prefix(token))
        except TokenExists as e:
            err.print(f"[red]{e}[/]")
            leave(Exit.FAILED)
        except ValueError as e:
            err.print(f"[red]invalid token name:[/] {e}")
            leave(Exit.USAGE)
        except StoreError as e:
            err.print(f"[red]cannot create the token:[/] {e}")
            leave(Exit.STORE)
    click.echo(token)
    err.print(
        f"Token [bold]{name}[/] created. It is shown only now: keep it secret. Exporters send it "
        "as a header, e.g. OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer%20<token>'. "
        "A running `lithify serve` picks it up within seconds."
    )


@token_app.command("list")
@store_option
@json_flag("Print JSON.")
def token_list(store: str | None, as_json: bool) -> None:
    """List tokens (names, prefixes, dates; never the tokens)."""
    import orjson
    from rich.console import Console
    from rich.table import Table

    from lithify.store import StoreError

    with opened_store(store, existing=True) as s:
        try:
            tokens = s.list_tokens()
        except StoreError as e:
            err.print(f"[red]cannot list tokens:[/] {e}")
            leave(Exit.STORE)
    if as_json:
        click.echo(
            orjson.dumps(
                [
                    {
                        "name": t.name,
                        "prefix": t.prefix,
                        "created_at": t.created_at,
                        "revoked_at": t.revoked_at,
                        "active": t.active,
                    }
                    for t in tokens
                ]
            ).decode()
        )
        return
    if not tokens:
        err.print("No tokens: `lithify serve` takes ingest without one (unless --require-token).")
        return
    table = Table(show_header=True, header_style="bold")
    for col in ("name", "prefix", "created", "status"):
        table.add_column(col)
    for t in tokens:
        status = "[green]active[/]" if t.active else f"[dim]revoked {t.revoked_at}[/]"
        table.add_row(t.name, t.prefix + "…", t.created_at, status)
    Console().print(table)


@token_app.command("revoke")
@argument("name", help="The token's name.")
@store_option
def token_revoke(name: str, store: str | None) -> None:
    """Revoke a token: a running `lithify serve` refuses it within seconds."""
    from lithify.store import StoreError

    with opened_store(store) as s:
        try:
            n = s.revoke_token(name)
        except StoreError as e:
            err.print(f"[red]cannot revoke the token:[/] {e}")
            leave(Exit.STORE)
    if not n:
        err.print(f"[red]no active token named {name!r}[/]")
        leave(Exit.NOT_FOUND)
    err.print(f"Token [bold]{name}[/] revoked.")
