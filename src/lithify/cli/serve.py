"""`lithify serve` and `lithify token`: the OTLP/HTTP receiver and its ingest tokens."""

from __future__ import annotations

import os
import re
from typing import Annotated

import typer

from lithify.cli.exits import Exit
from lithify.cli.options import (
    StoreOpt,
    err,
    json_flag,
    opened_store,
    server_exits,
    store_or_none,
)

# The stages (store, ingest) and rich are imported inside the commands: `lithify --version` and
# every other command start without them.

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from ``20971520``, ``20MiB``, ``20M``, ``512KB``… (K/M/G are powers of 1024)."""
    m = _SIZE.match(text)
    if m is None:
        raise typer.BadParameter(f"{text!r} is not a size (e.g. 20MiB, 512KiB, 1048576)")
    n = float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " ")
    if n < 1:
        raise typer.BadParameter("the size must be at least 1 byte")
    return int(n)


def serve_cmd(
    store: StoreOpt = None,
    host: Annotated[
        str, typer.Option(help="Address to listen on.", envvar="LITHIFY_HOST")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Port (0 picks a free one).", envvar="LITHIFY_PORT")
    ] = 4318,
    grpc_port: Annotated[
        int,
        typer.Option(
            help="OTLP/gRPC port, beside HTTP (0 turns gRPC off).", envvar="LITHIFY_GRPC_PORT"
        ),
    ] = 4317,
    no_grpc: Annotated[
        bool, typer.Option("--no-grpc", help="Serve OTLP/HTTP only (as --grpc-port 0).")
    ] = False,
    max_body_size: Annotated[
        str,
        typer.Option(
            help="Largest request body, on the wire and after decompression.",
            envvar="LITHIFY_MAX_BODY_SIZE",
        ),
    ] = "20MiB",
    require_token: Annotated[
        bool,
        typer.Option(
            "--require-token",
            help="Refuse ingest without a valid token even before any token exists.",
            envvar="LITHIFY_REQUIRE_TOKEN",
        ),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            help="Translation worker processes (default: one per core; 0: threads in-process).",
            envvar="LITHIFY_WORKERS",
            show_default=False,
        ),
    ] = None,
    max_inflight: Annotated[
        int,
        typer.Option(
            help="Requests processed at once; more are answered 429.",
            envvar="LITHIFY_MAX_INFLIGHT",
        ),
    ] = 16,
    retry_after: Annotated[
        int,
        typer.Option(
            help="Retry-After seconds when the store is unavailable (503).",
            envvar="LITHIFY_RETRY_AFTER",
        ),
    ] = 2,
    shutdown_timeout: Annotated[
        int,
        typer.Option(
            help="Seconds to drain in-flight requests on SIGTERM/SIGINT.",
            envvar="LITHIFY_SHUTDOWN_TIMEOUT",
        ),
    ] = 30,
    log_level: Annotated[
        str, typer.Option(help="debug, info, warning or error.", envvar="LITHIFY_LOG_LEVEL")
    ] = "info",
) -> None:
    """Receive OTLP traces and logs over HTTP (protobuf or JSON, gzip) and gRPC; store their facts.

    Point an OpenTelemetry exporter at http://HOST:PORT (OTLP/HTTP) or http://HOST:GRPC-PORT
    (OTLP/gRPC, the Collector's default `otlp` exporter). HTTP ingest: POST /v1/traces, /v1/logs,
    /v1/feedback; GET /health and /health/ready. gRPC: TraceService/Export, LogsService/Export.
    Logs are JSON lines on stderr. A request is acknowledged only once its facts are committed.
    """
    from lithify.ingest.receiver import ServeConfig, serve

    if log_level.lower() not in ("debug", "info", "warning", "error"):
        raise typer.BadParameter(f"unknown log level {log_level!r}", param_hint="--log-level")
    for name, value in (("--max-inflight", max_inflight), ("--retry-after", retry_after)):
        if value < 1:
            raise typer.BadParameter("must be at least 1", param_hint=name)
    if not 0 <= grpc_port <= 65535:
        raise typer.BadParameter("a port is 0 to 65535", param_hint="--grpc-port")
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


token_app = typer.Typer(
    help="Ingest tokens for `lithify serve` (Authorization: Bearer <token>).",
    no_args_is_help=True,
)


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Argument(help="A name to tell the token apart (e.g. a service).")],
    store: StoreOpt = None,
) -> None:
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
            raise typer.Exit(Exit.FAILED) from None
        except ValueError as e:
            err.print(f"[red]invalid token name:[/] {e}")
            raise typer.Exit(Exit.USAGE) from None
        except StoreError as e:
            err.print(f"[red]cannot create the token:[/] {e}")
            raise typer.Exit(Exit.STORE) from None
    typer.echo(token)
    err.print(
        f"Token [bold]{name}[/] created. It is shown only now: keep it secret. Exporters send it "
        "as a header, e.g. OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer%20<token>'. "
        "A running `lithify serve` picks it up within seconds."
    )


@token_app.command("list")
def token_list(
    store: StoreOpt = None,
    as_json: Annotated[bool, json_flag("Print JSON.")] = False,
) -> None:
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
            raise typer.Exit(Exit.STORE) from None
    if as_json:
        typer.echo(
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
def token_revoke(
    name: Annotated[str, typer.Argument(help="The token's name.")],
    store: StoreOpt = None,
) -> None:
    """Revoke a token: a running `lithify serve` refuses it within seconds."""
    from lithify.store import StoreError

    with opened_store(store) as s:
        try:
            n = s.revoke_token(name)
        except StoreError as e:
            err.print(f"[red]cannot revoke the token:[/] {e}")
            raise typer.Exit(Exit.STORE) from None
    if not n:
        err.print(f"[red]no active token named {name!r}[/]")
        raise typer.Exit(Exit.NOT_FOUND)
    err.print(f"Token [bold]{name}[/] revoked.")
