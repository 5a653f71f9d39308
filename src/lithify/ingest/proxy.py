"""`lithify proxy`: a recording gateway in front of the OpenAI, Anthropic and Gemini APIs
(docs/proxy.md).

A client pointed at the proxy gets exactly what the upstream answers: the request body goes up
unchanged, the status, headers (hop-by-hop ones aside) and body come back unchanged, and a
stream is passed on chunk by chunk as each chunk arrives. Recording is off the client's path:

- the event loop (uvicorn + httptools + uvloop; a plain ASGI app, no framework on the hot path)
  forwards with one pooled aiohttp client session and, once an exchange ends, hands its bytes
  to the spool — a queue put that never blocks and never fails the call;
- the spool's own thread appends each exchange to disk and fsyncs groups (spool.py);
- a recorder process reads the spool, translates and writes facts to the store (recorder.py).

Only the configured upstreams are ever called, and only on the model-call routes: any other
path is answered 404 here, with no upstream request.

One module past 500 lines: the routes, the header rules and the forwarding loop are one
request's path through the proxy, read top to bottom; the spool and the recorder live apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import queue
import re
import select
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

import aiohttp
import orjson
from yarl import URL

from lithify.core.times import ns_to_rfc3339
from lithify.ingest import _server
from lithify.ingest.recorder import (
    EXPECTED_SKIPS,
    RecorderConfig,
    RecorderProcess,
    SpooledExchange,
    encode_exchange,
)
from lithify.ingest.spool import SpoolError, SpoolWriter, default_spool, store_key

log = logging.getLogger("lithify.proxy")

DEFAULT_UPSTREAMS = {
    "openai": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}
KINDS = ("openai-chat", "openai-responses", "anthropic", "gemini")
# What an upstream's answer may carry in headers: each line, and how many (docs/proxy.md).
UPSTREAM_HEADER_BYTES = 64 * 1024
UPSTREAM_HEADERS = 512


# ---------------------------------------------------------------------------------------------
# configuration


@dataclass(frozen=True)
class Upstream:
    name: str
    base: str  # scheme://host[:port][/prefix], no trailing slash

    @property
    def prefix(self) -> str:
        return urlsplit(self.base).path


def parse_upstream(text: str) -> Upstream:
    """``openai=https://host/prefix``, or a bare ``openai`` for the provider's own API."""
    name, sep, url = text.partition("=")
    name = name.strip().lower()
    if name not in DEFAULT_UPSTREAMS:
        raise ValueError(
            f"unknown upstream {name!r}: use {', '.join(DEFAULT_UPSTREAMS)} (e.g. openai=URL)"
        )
    url = url.strip() if sep else DEFAULT_UPSTREAMS[name]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name}: {url!r} is not an http(s) URL")
    if parts.username or parts.password:
        raise ValueError(f"{name}: no credentials in the upstream URL; clients send their own")
    if parts.query or parts.fragment:
        raise ValueError(f"{name}: the upstream URL takes no query or fragment")
    return Upstream(name, f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}")


@dataclass(frozen=True)
class ProxyConfig:
    upstreams: dict[str, Upstream]
    host: str = "127.0.0.1"
    port: int = 8080
    store: str | None = None  # None: $LITHIFY_STORE, else the per-user default
    spool: str | None = None  # None: the store's own (spool.default_spool)
    spool_max_bytes: int = 1 << 30
    spool_sync: bool = True  # fdatasync each group of spooled exchanges
    max_body_size: int = 100 << 20  # largest request forwarded at all
    max_record_size: int = 32 << 20  # larger requests or responses pass but are not recorded
    connect_timeout: float = 10.0
    read_timeout: float = 600.0  # seconds without a byte from the upstream
    shutdown_timeout: int = 30
    drain_timeout: float = 5.0  # seconds the recorder keeps recording after a stop
    recorder: bool = True  # False: spool only (another process records)
    head: _server.HeadLimits = field(default_factory=_server.HeadLimits)  # 431 / 408 past it

    @property
    def spool_path(self) -> Path:
        return Path(self.spool).expanduser() if self.spool else default_spool(self.store)


# ---------------------------------------------------------------------------------------------
# routes


class Route(NamedTuple):
    upstream: str  # which --upstream serves it
    kind: str  # which translator reads it
    model: str | None = None  # the model the path names (Gemini)


_FIXED = {
    "/v1/chat/completions": Route("openai", "openai-chat"),
    "/v1/responses": Route("openai", "openai-responses"),
    "/v1/messages": Route("anthropic", "anthropic"),
}
# The Gemini API (v1, v1beta, v1alpha) and Vertex AI's publisher-model paths; a project or
# location that is a dot segment ("..") would name another path once the upstream resolves it.
_SEGMENT = r"(?!\.\.?/)[^/]+"
_GEMINI = re.compile(
    rf"^/(?:v1|v1beta|v1alpha|v1beta1)/(?:projects/{_SEGMENT}/locations/{_SEGMENT}/publishers/"
    r"google/)?models/([^/:]+):(?:generateContent|streamGenerateContent)$"
)


def match_route(raw_path: str) -> Route | None:
    """The route of a request path exactly as the client sent it, not percent-decoded: the path
    matched is the path forwarded (``/v1/chat%2Fcompletions`` is no route, where the decoded
    path would match one and the upstream be sent another)."""
    fixed = _FIXED.get(raw_path)
    if fixed is not None:
        return fixed
    m = _GEMINI.match(raw_path)
    return Route("gemini", "gemini", unquote(m.group(1))) if m else None


# Hop-by-hop headers (RFC 9110 §7.6.1) and what the HTTP client sets itself: never forwarded.
_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
_REQUEST_DROP = _HOP | {b"host", b"content-length", b"expect"}
_SESSION_HEADERS = (b"x-lithify-session", b"x-lithify-session-id", b"lithify-session-id")
# The proxy records what it can decode (the recorder's decode_body): a client that also accepts
# another coding is offered only these (it still gets an encoding it asked for).
_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "identity"})
_CREDENTIAL_PARAMS = frozenset({"key", "api_key", "api-key", "apikey", "access_token", "token"})
# aiohttp adds these unless told not to: the upstream sees only what the client sent.
_SKIP_AUTO = frozenset({"Accept", "Accept-Encoding", "User-Agent", "Content-Type"})


def narrow_accept_encoding(value: str) -> str:
    kept = []
    for item in value.split(","):
        coding = item.split(";", 1)[0].strip().lower()
        if coding in _CODINGS or coding == "*":
            kept.append(item.strip() if coding != "*" else "gzip")
    return ", ".join(kept) or "identity"


def _without_credentials(query: str) -> str:
    if not query:
        return ""
    kept = [p for p in query.split("&") if p.split("=", 1)[0].lower() not in _CREDENTIAL_PARAMS]
    return "&".join(kept)


class Forward(NamedTuple):
    headers: list[tuple[str, str]]
    session_id: str | None
    content_encoding: str


def request_headers(raw: list[tuple[bytes, bytes]]) -> Forward:
    """The client's headers as the upstream gets them: credentials included, hop-by-hop headers
    and the proxy's own (x-lithify-*, lithify-*) removed."""
    connection_tokens: set[bytes] = set()
    for name, value in raw:
        if name == b"connection":
            connection_tokens.update(t.strip().lower() for t in value.split(b","))
    out: list[tuple[str, str]] = []
    session = None
    encoding = ""
    for name, value in raw:
        if name in _REQUEST_DROP or name in connection_tokens:
            continue
        if name.startswith((b"x-lithify-", b"lithify-")):
            if name in _SESSION_HEADERS and value.strip() and session is None:
                session = value.decode("latin-1").strip()
            continue
        text = value.decode("latin-1")
        if name == b"accept-encoding":
            text = narrow_accept_encoding(text)
        elif name == b"content-encoding":
            encoding = text.strip().lower()
        out.append((name.decode("latin-1"), text))
    return Forward(out, session, encoding)


def response_headers(raw: Any) -> list[tuple[bytes, bytes]]:
    connection_tokens: set[bytes] = set()
    for name, value in raw:
        if name.lower() == b"connection":
            connection_tokens.update(t.strip().lower() for t in value.split(b","))
    out = []
    for name, value in raw:
        low = name.lower()
        if low not in _HOP and low not in connection_tokens:
            out.append((low, value))
    return out


# ---------------------------------------------------------------------------------------------
# errors the proxy answers itself, in the format of the provider the client speaks


_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    408: "DEADLINE_EXCEEDED",
    413: "INVALID_ARGUMENT",
    431: "INVALID_ARGUMENT",
    502: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_ERROR_TYPE = {400: "invalid_request_error", 404: "not_found_error", 405: "invalid_request_error",
               408: "timeout_error", 413: "request_too_large", 431: "request_too_large",
               502: "api_error", 504: "timeout_error"}  # fmt: skip


def error_body(upstream: str | None, status: int, message: str) -> bytes:
    message = f"lithify proxy: {message}"
    if upstream == "anthropic":
        doc: dict[str, Any] = {
            "type": "error",
            "error": {"type": _ERROR_TYPE.get(status, "api_error"), "message": message},
        }
    elif upstream == "gemini":
        doc = {
            "error": {
                "code": status,
                "message": message,
                "status": _GOOGLE_STATUS.get(status, "UNKNOWN"),
            }
        }
    else:
        doc = {
            "error": {
                "message": message,
                "type": _ERROR_TYPE.get(status, "api_error"),
                "param": None,
                "code": None,
            }
        }
    return orjson.dumps(doc)


class UpstreamAbort(Exception):
    """Raised after the response started, to cut the client's connection the way the upstream
    cut ours: a client must see a broken body, not a complete-looking one."""


class _AbortFilter(logging.Filter):
    """uvicorn logs every exception an app raises; a deliberate abort is not an error of ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, UpstreamAbort)


def _install_abort_filter() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _AbortFilter) for f in logger.filters):
        logger.addFilter(_AbortFilter())


def _event(level: int, event: str, **fields: Any) -> None:
    log.log(level, event, extra={"fields": fields})


# ---------------------------------------------------------------------------------------------
# the app


@dataclass
class _Exchange:
    """One call in flight: what the watcher and the forwarder share."""

    task: asyncio.Task[Any] | None
    done: bool = False
    gone: bool = False


@dataclass
class Counts:
    requests: Counter[str] = field(default_factory=Counter)  # by kind
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, outcome)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)  # (kind, upstream status)
    refused: Counter[str] = field(default_factory=Counter)  # answered here, never forwarded
    not_recorded: Counter[str] = field(default_factory=Counter)  # forwarded but not spooled
    spooled: int = 0


def _client(scope: dict[str, Any]) -> str | None:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None


def _hdr(headers: list[tuple[bytes, bytes]], name: bytes) -> str:
    for k, v in headers:
        if k == name:
            return v.decode("latin-1")
    return ""


class Proxy:
    """The ASGI app: routes, forwarding, spooling, health and metrics."""

    def __init__(self, config: ProxyConfig, logging_config: dict[str, Any] | None = None) -> None:
        self.config = config
        self.logging_config = logging_config
        self.counts = Counts()
        self.inflight = 0
        self.started = time.monotonic()
        self.session: aiohttp.ClientSession | None = None
        self.spool: SpoolWriter | None = None
        self.recorder: RecorderProcess | None = None
        self._monitor: asyncio.Task[None] | None = None
        self._full_logged_at = 0.0
        self._reported_errors = 0
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=config.connect_timeout, sock_read=config.read_timeout
        )
        _install_abort_filter()

    # -- lifetime --------------------------------------------------------------------------------
    async def startup(self) -> None:
        self.spool = SpoolWriter(
            self.config.spool_path,
            self.config.spool_max_bytes,
            store=store_key(self.config.store),  # a spool is drained into its own store only
            sync=self.config.spool_sync,
        ).open()
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=15),
            auto_decompress=False,  # the client gets the bytes the upstream sent
            cookie_jar=aiohttp.DummyCookieJar(),  # clients must never share upstream cookies
            timeout=self._timeout,
            trust_env=False,
            # aiohttp refuses a header line over 8 KiB or more than 128 headers: a gateway's
            # trace or cookie header would turn an answer into a 502 that records nothing.
            # Envoy's bound, 60 KiB, per line; bounded all the same (the upstream is trusted).
            max_line_size=UPSTREAM_HEADER_BYTES,
            max_field_size=UPSTREAM_HEADER_BYTES,
            max_headers=UPSTREAM_HEADERS,
        )
        if self.config.recorder:
            self.recorder = RecorderProcess(
                RecorderConfig(
                    spool=str(self.spool.folder),
                    store=self.config.store,
                    drain_timeout=self.config.drain_timeout,
                ),
                recorder_log_config(self.logging_config),
            )
            self.recorder.start()
        self._monitor = asyncio.create_task(self._watch_health())
        # What start-up made (modules, the app, the client) lives as long as the process: out of
        # the collector's sight, a full collection no longer walks it on a call's path. It was
        # the p99: 20-30 ms pauses at 32 clients.
        gc.collect()
        gc.freeze()

    async def shutdown(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
        if self.session is not None:
            await self.session.close()
        if self.spool is not None:
            await asyncio.to_thread(self.spool.close)
        if self.recorder is not None:
            await asyncio.to_thread(self.recorder.stop)
        self._report_spool_errors()
        _event(logging.INFO, "stopped", **self.totals())

    async def _watch_health(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            if self.recorder is not None:
                self.recorder.check()
            self._report_spool_errors()

    def _report_spool_errors(self) -> None:
        spool = self.spool
        if spool is None:
            return
        lost = spool.stats.dropped_error
        if lost > self._reported_errors:
            self.counts.not_recorded["spool_error"] += lost - self._reported_errors
            self._reported_errors = lost
            _event(
                logging.ERROR,
                "spool_write_failed",
                lost=lost,
                error=spool.last_error,
                spool=str(spool.folder),
            )

    # -- ASGI ------------------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except (SpoolError, OSError) as e:
                    await send({"type": "lifespan.startup.failed", "message": str(e)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope["raw_path"].decode("latin-1")
        route = match_route(path)
        if route is None:
            if path.startswith("/lithify/"):
                await self._admin(path, scope["method"], send)
                return
            msg = f"no route for {path}: the proxy forwards only model calls (see docs/proxy.md)"
            await self._refuse(scope, send, None, 404, "no_route", msg)
            return
        upstream = self.config.upstreams.get(route.upstream)
        if upstream is None:
            msg = f"no {route.upstream} upstream is configured (--upstream {route.upstream}=URL)"
            await self._refuse(scope, send, route.upstream, 404, "no_upstream", msg)
            return
        if scope["method"] != "POST":
            msg = f"{scope['method']} {path}: use POST"
            await self._refuse(
                scope, send, route.upstream, 405, "method", msg, [(b"allow", b"POST")]
            )
            return
        self.inflight += 1
        try:
            await self._proxy(scope, receive, send, route, upstream)
        finally:
            self.inflight -= 1

    async def _proxy(
        self, scope: dict[str, Any], receive: Any, send: Any, route: Route, upstream: Upstream
    ) -> None:
        started_ns = time.time_ns()
        t0 = time.perf_counter()
        config = self.config
        fwd = request_headers(scope["headers"])
        declared = _hdr(scope["headers"], b"content-length")
        if declared.isdigit() and int(declared) > config.max_body_size:
            msg = f"the request body ({declared} bytes) is larger than {config.max_body_size}"
            await self._refuse(scope, send, route.upstream, 413, "too_large", msg)
            return
        body = await _read_body(receive, config.max_body_size)
        if body is None:  # the client left before sending its body
            self.counts.outcomes[route.kind, "client_gone"] += 1
            _event(logging.WARNING, "exchange", kind=route.kind, outcome="client_gone",
                   client=_client(scope), detail="the client left before sending its body")  # fmt: skip
            return
        if isinstance(body, int):
            msg = f"the request body is larger than {config.max_body_size} bytes"
            await self._refuse(scope, send, route.upstream, 413, "too_large", msg)
            return
        self.counts.requests[route.kind] += 1
        query = scope["query_string"].decode("latin-1")
        target = upstream.base + scope["raw_path"].decode("latin-1")  # the path routed on
        url = URL(target + ("?" + query if query else ""), encoded=True)

        ex = _Exchange(asyncio.current_task())
        watcher = asyncio.ensure_future(_watch_disconnect(receive, ex))
        record = len(body) <= config.max_record_size
        chunks: list[bytes] = []
        size = 0
        status = 0
        started = False
        resp_type = resp_encoding = ""
        outcome = "complete"
        error: BaseException | None = None
        stopped: asyncio.CancelledError | None = None
        assert self.session is not None
        try:
            async with self.session.post(
                url,
                data=body,
                headers=fwd.headers,
                skip_auto_headers=_SKIP_AUTO,
                allow_redirects=False,
            ) as resp:
                status = resp.status
                headers = response_headers(resp.raw_headers)
                resp_type = _hdr(headers, b"content-type")
                resp_encoding = _hdr(headers, b"content-encoding")
                await send({"type": "http.response.start", "status": status, "headers": headers})
                started = True
                async for chunk in resp.content.iter_any():
                    size += len(chunk)
                    if record:
                        if size > config.max_record_size:
                            record = False
                            chunks.clear()
                        else:
                            chunks.append(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                ex.done = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError as e:
            # Not the client leaving: the server stopping, its --shutdown-timeout run out. What
            # the stream delivered is still spooled (the spool closes after this), then the
            # cancellation goes on.
            if not ex.gone:
                stopped = e
                outcome = "shutdown"
            else:
                if ex.task is not None:
                    ex.task.uncancel()
                outcome = "client_gone"
        except TimeoutError:  # aiohttp's ServerTimeoutError is one
            outcome = "timeout"
        except (aiohttp.ClientError, OSError) as e:
            outcome = "upstream_cut" if started else "unreachable"
            error = e
        finally:
            ex.done = True
            watcher.cancel()

        kind = route.kind
        self.counts.outcomes[kind, outcome] += 1
        if status:
            self.counts.statuses[kind, status] += 1
        duration_ms = round((time.perf_counter() - t0) * 1000, 3)
        if not started:
            if outcome == "timeout":
                msg = f"the {upstream.name} upstream sent no response within {config.read_timeout:g} s"
                await _reply(send, 504, error_body(route.upstream, 504, msg), "timeout")
            elif outcome == "unreachable":
                msg = f"the {upstream.name} upstream could not be reached: {type(error).__name__}: {error}"
                await _reply(send, 502, error_body(route.upstream, 502, msg), "unreachable")
            _event(logging.WARNING, "exchange", kind=kind, outcome=outcome,
                   duration_ms=duration_ms, upstream=upstream.name, client=_client(scope))  # fmt: skip
            if stopped is not None:
                raise stopped
            return
        if record:
            self._spool(
                SpooledExchange(
                    kind=kind,
                    url=target + ("?" + _without_credentials(query) if query else ""),
                    observed_at=ns_to_rfc3339(started_ns) or "",
                    duration_ms=duration_ms,
                    outcome=outcome,
                    status=status,
                    session_id=fwd.session_id,
                    model=route.model,
                    request=body,
                    request_encoding=fwd.content_encoding,
                    response=b"".join(chunks),
                    response_type=resp_type,
                    response_encoding=resp_encoding,
                )
            )
        else:
            # The health counter says how many; this line says which call, so a missing fact
            # can be told from one never made.
            self.counts.not_recorded["too_large"] += 1
            _event(logging.WARNING, "exchange_not_recorded", kind=kind, status=status,
                   outcome=outcome, reason="too_large", request_bytes=len(body),
                   response_bytes=size, session_id=fwd.session_id, client=_client(scope),
                   detail=f"the request or response is larger than --max-record-size "
                   f"({config.max_record_size} bytes)")  # fmt: skip
        level = logging.INFO if outcome == "complete" and status < 400 else logging.WARNING
        if log.isEnabledFor(level):
            _event(level, "exchange", kind=kind, status=status, outcome=outcome,
                   duration_ms=duration_ms, request_bytes=len(body), response_bytes=size,
                   session_id=fwd.session_id, client=_client(scope))  # fmt: skip
        if stopped is not None:
            raise stopped
        if outcome in ("upstream_cut", "timeout"):
            raise UpstreamAbort(outcome)

    def _spool(self, x: SpooledExchange) -> None:
        assert self.spool is not None
        if self.spool.put(encode_exchange(x)):
            self.counts.spooled += 1
            return
        self.counts.not_recorded["spool_full"] += 1
        now = time.monotonic()
        if now - self._full_logged_at > 10:
            self._full_logged_at = now
            _event(
                logging.WARNING,
                "spool_full",
                message="exchanges are forwarded but not recorded until the recorder catches up",
                not_recorded=self.counts.not_recorded["spool_full"],
                spool_bytes=self.spool.stats.used_bytes,
                spool_max_bytes=self.spool.max_bytes,
            )

    # -- health and metrics ----------------------------------------------------------------------
    def totals(self) -> dict[str, Any]:
        c = self.counts
        return {
            "requests": sum(c.requests.values()),
            "spooled": c.spooled,
            "not_recorded": sum(c.not_recorded.values()),
            "refused": sum(c.refused.values()),
            "facts_stored": (self.recorder.status.get("facts_stored", 0) if self.recorder else 0),
        }

    def health(self) -> dict[str, Any]:
        c = self.counts
        outcomes: dict[str, dict[str, int]] = {}
        for (kind, outcome), n in sorted(c.outcomes.items()):
            outcomes.setdefault(kind, {})[outcome] = n
        statuses: dict[str, dict[str, int]] = {}
        for (kind, status), n in sorted(c.statuses.items()):
            statuses.setdefault(kind, {})[str(status)] = n
        spool = self.spool
        rec = self.recorder
        recorder = dict(rec.status) if rec is not None else {}
        if rec is not None:
            recorder.update(alive=rec.alive, restarts=rec.restarts)
        # Spooled but no fact (unreadable, refused by the store) is unrecorded too; an error
        # answer giving none is by design.
        lost = recorder.get("rejected", 0) or any(
            n for reason, n in recorder.get("skipped", {}).items() if reason not in EXPECTED_SKIPS
        )
        recording_ok = (
            (rec is None or (rec.alive and bool(recorder.get("available"))))
            and not c.not_recorded
            and not lost
        )
        return {
            "status": "ok",
            "recording": "ok" if recording_ok else "degraded",
            "uptime_s": round(time.monotonic() - self.started, 1),
            "upstreams": {u.name: u.base for u in self.config.upstreams.values()},
            "inflight": self.inflight,
            "requests": dict(c.requests),
            "outcomes": outcomes,
            "statuses": statuses,
            "refused": dict(c.refused),
            "spooled": c.spooled,
            "not_recorded": dict(c.not_recorded),
            "spool": {
                "path": str(spool.folder) if spool else None,
                "used_bytes": spool.stats.used_bytes if spool else 0,
                "max_bytes": spool.max_bytes if spool else 0,
                "appended": spool.stats.appended if spool else 0,
                "synced": spool.stats.synced if spool else 0,
                "queued": spool.stats.queued if spool else 0,
                "error": spool.last_error if spool else None,
            },
            "recorder": recorder,
        }

    def metrics(self) -> bytes:
        """Prometheus text exposition of the same counts."""
        c = self.counts
        lines = []

        def metric(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {kind}")
            for labels, value in samples:
                lines.append(f"{name}{labels} {value:g}")

        metric("lithify_proxy_requests_total", "counter", "Model calls forwarded, by how they ended.",
               [(f'{{kind="{k}",outcome="{o}"}}', n) for (k, o), n in sorted(c.outcomes.items())])  # fmt: skip
        metric("lithify_proxy_upstream_responses_total", "counter", "Upstream responses by status.",
               [(f'{{kind="{k}",status="{s}"}}', n) for (k, s), n in sorted(c.statuses.items())])  # fmt: skip
        metric("lithify_proxy_refused_total", "counter", "Requests answered by the proxy itself.",
               [(f'{{reason="{r}"}}', n) for r, n in sorted(c.refused.items())])  # fmt: skip
        metric("lithify_proxy_spooled_total", "counter", "Exchanges appended to the spool.",
               [("", c.spooled)])  # fmt: skip
        metric("lithify_proxy_not_recorded_total", "counter", "Exchanges forwarded but not recorded.",
               [(f'{{reason="{r}"}}', n) for r, n in sorted(c.not_recorded.items())])  # fmt: skip
        spool = self.spool
        metric("lithify_proxy_spool_bytes", "gauge", "Bytes in the spool's segments.",
               [("", spool.stats.used_bytes if spool else 0)])  # fmt: skip
        rec = self.recorder.status if self.recorder else {}
        metric("lithify_proxy_facts_stored_total", "counter", "Facts the recorder stored.",
               [("", rec.get("facts_stored", 0))])  # fmt: skip
        metric("lithify_proxy_fact_duplicates_total", "counter", "Facts the store already held.",
               [("", rec.get("duplicates", 0))])  # fmt: skip
        metric("lithify_proxy_exchanges_skipped_total", "counter", "Recorded exchanges that gave no fact.",
               [(f'{{reason="{r}"}}', n) for r, n in sorted(rec.get("skipped", {}).items())])  # fmt: skip
        metric("lithify_proxy_store_available", "gauge", "1 when the recorder can write to the store.",
               [("", 1 if rec.get("available") else 0)])  # fmt: skip
        metric("lithify_proxy_backlog_bytes", "gauge", "Spooled bytes not yet recorded.",
               [("", rec.get("backlog_bytes", 0))])  # fmt: skip
        return ("\n".join(lines) + "\n").encode()

    async def _refuse(
        self,
        scope: dict[str, Any],
        send: Any,
        upstream: str | None,
        status: int,
        reason: str,
        message: str,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """Answer a request the proxy does not forward, in the provider's error format."""
        path = scope["raw_path"].decode("latin-1")
        info = {"method": scope["method"], "path": path, "client": _client(scope)}
        self._count_refusal(status, reason, message, info)
        await _reply(send, status, error_body(upstream, status, message), reason, extra)

    def refused(
        self, status: int, reason: str, message: str, info: dict[str, Any]
    ) -> tuple[list[tuple[bytes, bytes]], bytes]:
        """A request refused before the app saw it (``_server.Refusal``): counted and logged as
        the proxy's own refusals are, answered in OpenAI's error format (no route is known)."""
        self._count_refusal(status, reason, message, info)
        reason_header = (b"x-lithify-proxy-error", reason.encode())
        return [(b"content-type", b"application/json"), reason_header], error_body(
            None, status, message
        )

    def _count_refusal(self, status: int, reason: str, message: str, info: dict[str, Any]) -> None:
        self.counts.refused[reason] += 1
        _event(logging.INFO, "refused", status=status, reason=reason, error=message, **info)

    async def _admin(self, path: str, method: str, send: Any) -> None:
        if method != "GET":
            await _reply(send, 405, b'{"error":"use GET"}', "method", [(b"allow", b"GET")])
        elif path == "/lithify/health":
            await _reply(send, 200, orjson.dumps(self.health()))
        elif path == "/lithify/metrics":
            await _reply(send, 200, self.metrics(), None, ctype=b"text/plain; version=0.0.4")
        else:
            await _reply(send, 404, b'{"error":"unknown lithify endpoint"}', "no_route")


async def _watch_disconnect(receive: Any, ex: _Exchange) -> None:
    """Once the body is read, the next ASGI message is the client leaving (or the response
    being complete): cancel the forwarding, which closes the upstream connection in turn."""
    msg = await receive()
    if msg["type"] == "http.disconnect" and not ex.done and ex.task is not None:
        ex.gone = True
        ex.task.cancel()


async def _read_body(receive: Any, limit: int) -> bytes | int | None:
    """The request body; 413 past ``limit``; None when the client left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return None
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            return 413
        chunks.append(chunk)
        if not msg.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _reply(
    send: Any,
    status: int,
    body: bytes,
    reason: str | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
    ctype: bytes = b"application/json",
) -> None:
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]
    if reason is not None:
        headers.append((b"x-lithify-proxy-error", reason.encode()))
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


# ---------------------------------------------------------------------------------------------
# logging and running


class BackgroundStreamHandler(logging.Handler):
    """Log lines written by a thread of their own: a write to stderr is a system call the event
    loop should not wait for (nor block on, should nobody read the pipe). Past ``capacity``
    lines waiting, new lines are dropped and counted.

    The recorder process writes to the same stderr: lines go out whole, in writes of at most
    PIPE_BUF bytes (atomic on a pipe, and any write is on a file opened for appending). Through
    the text stream, a batch went out in buffer-sized writes, and the recorder's lines landed
    in the middle of ours."""

    def __init__(self, stream: Any = None, capacity: int = 10_000) -> None:
        super().__init__()
        self.stream = stream if stream is not None else sys.stderr
        self.dropped = 0
        self._queue: queue.Queue[str] = queue.Queue(capacity)
        self._thread = threading.Thread(target=self._write, name="lithify-log", daemon=True)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._queue.put_nowait(self.format(record) + "\n")
        except queue.Full:
            self.dropped += 1
        except Exception:
            self.handleError(record)

    def _write(self) -> None:
        while True:
            lines = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while len(lines) < 512:
                    lines.append(self._queue.get_nowait())
            with contextlib.suppress(Exception):
                self._write_whole(lines)
            for _ in lines:
                self._queue.task_done()

    def _write_whole(self, lines: list[str]) -> None:
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # not a file: no other writer to fear
            self.stream.write("".join(lines))
            self.stream.flush()
            return
        self.stream.flush()  # anything written to it another way goes first
        chunk = bytearray()
        for line in lines:
            data = line.encode("utf-8", "replace")
            if chunk and len(chunk) + len(data) > select.PIPE_BUF:
                _write_all(fd, chunk)
                chunk.clear()
            chunk += data
        _write_all(fd, chunk)

    def flush(self) -> None:
        """Wait (briefly) until the lines queued so far are written."""
        deadline = time.monotonic() + 2
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)
        with contextlib.suppress(Exception):
            self.stream.flush()


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def log_config(level: str = "info") -> dict[str, Any]:
    """logging.config for uvicorn and the proxy: JSON lines on stderr, from a thread."""
    handler = {"class": f"{__name__}.BackgroundStreamHandler", "formatter": "json"}
    lvl = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "lithify.ingest.logs.JsonFormatter"}},
        "filters": {"abort": {"()": f"{__name__}._AbortFilter"}},
        "handlers": {"stderr": {**handler, "filters": ["abort"]}},
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": lvl, "propagate": False},
            "uvicorn.error": {"level": lvl},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "lithify.proxy": {"handlers": ["stderr"], "level": lvl, "propagate": False},
        },
    }


def recorder_log_config(proxy_config: dict[str, Any] | None) -> dict[str, Any]:
    """The recorder process logs as the proxy does (JSON lines on stderr, same level)."""
    level = "INFO"
    if proxy_config is not None:
        level = proxy_config["loggers"]["lithify.proxy"]["level"]
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "lithify.ingest.logs.JsonFormatter"}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {"lithify.proxy": {"handlers": ["stderr"], "level": level, "propagate": False}},
    }


def uvicorn_config(app: Proxy, config: ProxyConfig, log_cfg: dict[str, Any] | None) -> Any:
    return _server.config(
        app,
        host=config.host,
        port=config.port,
        refusal=app.refused,
        log_config=log_cfg,
        shutdown_timeout=config.shutdown_timeout,
        limits=config.head,
        date_header=False,  # the client sees the upstream's headers, not ours
    )


def serve(config: ProxyConfig, *, log_level: str = "info") -> None:
    """Run the proxy until SIGINT/SIGTERM: finish the calls in flight, spool them, let the
    recorder record what it can within its drain timeout, then stop."""
    import uvicorn

    log_cfg = log_config(log_level)
    app = Proxy(config, log_cfg)
    server = uvicorn.Server(uvicorn_config(app, config, log_cfg))

    def listening(url: str, host: str, port: int) -> None:
        _event(
            logging.INFO,
            "listening",
            url=url,
            port=port,
            upstreams={u.name: u.base for u in config.upstreams.values()},
            spool=str(app.spool.folder) if app.spool else None,
            store=app.recorder.status.get("store") if app.recorder else None,
            pid=os.getpid(),
            recorder_pid=app.recorder.pid if app.recorder else None,
        )
        if host not in ("127.0.0.1", "::1", "localhost"):
            _event(
                logging.WARNING,
                "exposed",
                message=f"the proxy on {url} forwards for anyone who can reach it, with their "
                "own credentials; keep it on loopback or behind a firewall",
            )

    _server.run(server, listening)
