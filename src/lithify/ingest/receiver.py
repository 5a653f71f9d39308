"""`lithify serve`: an OTLP/HTTP receiver that turns exports into stored facts (docs/serve.md).

The work of a request is split three ways so that the event loop never waits on CPU or disk:

- the event loop (uvicorn + Starlette) checks auth, content type and size, reads the body under
  a byte limit, and answers;
- a pool of worker processes (threads with ``workers=0``) inflates, decodes and translates the
  body and builds the store rows (``processing.py``, with the store's own ``preparer``): the
  CPU-bound part, outside the GIL of the loop;
- one writer thread commits rows (``writer.py``): whatever requests are waiting when it becomes
  free go into one transaction (a group commit), and each request is answered once ITS rows are
  committed.

This module holds the configuration, the answers and the app; tokens are ``tokens.py``, the
JSON logs ``logs.py``. Past 500 lines because ``build_app`` is one request's path (auth, limits,
decode, commit, answer) over the receiver's shared state.

A request is acknowledged (200) only after its facts are committed; retries are safe because the
store deduplicates by fact identity.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import multiprocessing
import os
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import orjson
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from lithify.ingest import _server
from lithify.ingest.logs import _event, log_config
from lithify.ingest.processing import (
    _CONTENT_TYPES,
    _ENCODING_ALIASES,
    _ENCODINGS,
    _RPC_CODE,
    ACCEPTED_ENCODINGS,
    DEFAULT_MAX_BODY,
    JSON,
    PROTOBUF,
    SHARE_FROM,
    Processed,
    _warm,
    _worker_init,
    process,
    process_shared,
    share,
)
from lithify.ingest.tokens import TokenCache
from lithify.ingest.writer import GroupWriter
from lithify.store import (
    FactStore,
    InsertResult,
    StoreError,
    StoreUnavailable,
    open_store,
    prepare,
)

log = logging.getLogger("lithify.serve")


# ---------------------------------------------------------------------------------------------
# configuration


@dataclass(frozen=True)
class ServeConfig:
    store: str | None = None  # None: $LITHIFY_STORE, else the per-user default
    host: str = "127.0.0.1"
    port: int = 4318
    # OTLP/gRPC beside HTTP (ingest/grpc.py): None turns it off, 0 picks a free port (the CLI
    # turns it off with 0, as OTLP users expect of a port they did not ask for).
    grpc_port: int | None = None
    max_body_size: int = DEFAULT_MAX_BODY  # on the wire AND after decompression
    require_token: bool = False
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)  # 0: threads in-process
    max_inflight: int = 16  # requests admitted at once; more get 429
    retry_after: int = 2  # seconds, on 503 (store unavailable)
    overload_retry_after: int = 1  # seconds, on 429
    shutdown_timeout: int = 30  # seconds to drain in-flight requests on SIGTERM/SIGINT
    body_timeout: float = 60.0  # seconds to receive a body; slower clients get 408
    head: _server.HeadLimits = field(default_factory=_server.HeadLimits)  # 431 / 408 past it
    group_rows: int = 4096  # rows per group commit at most (one request is never split)
    token_refresh: float = 2.0  # seconds between reloads of the token list


# ---------------------------------------------------------------------------------------------
# responses


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def status_body(kind: str, code: int, message: str) -> bytes:
    """A google.rpc.Status (code, message), the body OTLP/HTTP gives every 4xx and 5xx."""
    rpc = _RPC_CODE.get(code, 2)
    if kind == "protobuf":
        msg = message.encode("utf-8", "replace")
        return b"\x08" + _varint(rpc) + b"\x12" + _varint(len(msg)) + msg
    return orjson.dumps({"code": rpc, "message": message})


def export_body(signal: str, kind: str, rejected: int, message: str) -> bytes:
    """Export{Trace,Logs}ServiceResponse; partial_success only when something is to be said."""
    if kind == "json":
        if not rejected and not message:
            return b"{}"
        partial: dict[str, Any] = {}
        if rejected:  # int64: a decimal string in proto3 JSON
            partial["rejectedSpans" if signal == "traces" else "rejectedLogRecords"] = str(rejected)
        if message:
            partial["errorMessage"] = message
        return orjson.dumps({"partialSuccess": partial})
    resp: Any = ExportTraceServiceResponse() if signal == "traces" else ExportLogsServiceResponse()
    if rejected or message:
        if signal == "traces":
            resp.partial_success.rejected_spans = rejected
        else:
            resp.partial_success.rejected_log_records = rejected
        resp.partial_success.error_message = message
    return resp.SerializeToString()


_MEDIA = {"protobuf": PROTOBUF, "json": JSON}


def _response(
    kind: str, status: int, body: bytes, headers: dict[str, str] | None = None
) -> Response:
    return Response(body, status_code=status, media_type=_MEDIA[kind], headers=headers)


@dataclass(frozen=True, slots=True)
class Refused:
    """A request not taken, whatever the transport: its HTTP status (each face maps it to its
    own: ingest/grpc.py), why, and the seconds after which a retry may succeed."""

    status: int
    message: str
    retry_after: int | None = None


@dataclass(slots=True)
class Taken:
    """A request whose facts are committed: what processing gave and what the store did."""

    out: Processed
    facts: InsertResult
    feedback: InsertResult

    @property
    def message(self) -> str:
        """The partial-success ``error_message``: why units were rejected, then warnings."""
        return "; ".join([*self.out.errors, *self.out.warnings])


# ---------------------------------------------------------------------------------------------
# the receiver


class Receiver:
    """State shared by the request handlers: store, pools, writer, tokens, counters."""

    def __init__(self, config: ServeConfig, store: FactStore | None = None) -> None:
        self.config = config
        self.store: FactStore | None = store
        self.store_url = store.url if store is not None else (config.store or "(default)")
        self.available = store is not None
        self.store_error: str | None = None if store is not None else "not opened yet"
        self.tokens = TokenCache(config.require_token)
        self.inflight = 0
        self.started = time.monotonic()
        self.counts: Counter[str] = Counter()
        self.pool: concurrent.futures.Executor | None = None
        self.writer: GroupWriter | None = None
        self._probe: asyncio.Task[None] | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._down_logged = False
        self._token_lock = asyncio.Lock()
        self._pool_lock = threading.Lock()
        self.grpc_port: int | None = None  # bound by ingest/grpc.py, when gRPC is on
        # Bodies go to worker processes in memory files until a worker cannot read one.
        self.share_bodies = config.workers > 0

    # -- lifetime --------------------------------------------------------------------------
    def _new_pool(self) -> concurrent.futures.Executor:
        if self.config.workers <= 0:
            return concurrent.futures.ThreadPoolExecutor(
                max_workers=2, thread_name_prefix="lithify-translate"
            )
        return concurrent.futures.ProcessPoolExecutor(
            max_workers=self.config.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_init,
        )

    async def startup(self) -> None:
        loop = asyncio.get_running_loop()
        self.pool = self._new_pool()
        if self.config.workers > 0:
            # Start every worker now (imports included), not on the first request.
            await asyncio.gather(
                *(loop.run_in_executor(self.pool, _warm) for _ in range(self.config.workers))
            )
        self.writer = GroupWriter(lambda: self.store, self.config.group_rows)
        if self.store is None:
            await self._open_store()
        if self.store is not None:
            await self._reload_tokens()
        if not self.available:
            self._start_probe()
        self._refresher = asyncio.create_task(self._refresh_tokens())

    async def shutdown(self) -> None:
        for task in (self._probe, self._refresher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.writer is not None:
            await asyncio.to_thread(self.writer.close)
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.store is not None:
            await asyncio.to_thread(self.store.close)
        _event(logging.INFO, "stopped", **self._totals())

    def log_request(self, info: dict[str, Any]) -> None:
        """The one ``request`` log line of a request, whoever answered it; warning for 5xx."""
        self.counts["requests"] += 1
        _event(logging.WARNING if info["status"] >= 500 else logging.INFO, "request", **info)

    def refused(
        self, status: int, reason: str, message: str, info: dict[str, Any]
    ) -> tuple[list[tuple[bytes, bytes]], bytes]:
        """A request refused before the app saw it (``_server.Refusal``): logged and counted
        as any request, answered with a google.rpc.Status in JSON (its type is not known)."""
        self.log_request({**info, "status": status, "error": message, "reason": reason})
        return [(b"content-type", JSON.encode())], status_body("json", status, message)

    def _totals(self) -> dict[str, Any]:
        return {
            "requests": self.counts["requests"],
            "facts_stored": self.counts["facts"],
            "duplicates": self.counts["duplicates"],
            "variants": self.counts["variants"],
            "id_collisions": self.counts["id_collisions"],
            "feedback_stored": self.counts["feedback"],
            "rejected": self.counts["rejected"],
        }

    async def _open_store(self) -> None:
        try:
            self.store = await asyncio.to_thread(open_store, self.config.store)
        except StoreUnavailable as e:
            self._mark_unavailable(e)
            return
        self.store_url = self.store.url
        self.available, self.store_error = True, None

    # -- store availability --------------------------------------------------------------
    def _mark_unavailable(self, e: BaseException) -> None:
        if self.available or not self._down_logged:
            _event(logging.WARNING, "store_unavailable", store=self.store_url, error=str(e))
            self._down_logged = True
        self.available = False
        self.store_error = str(e)
        self._start_probe()

    def _start_probe(self) -> None:
        if self._probe is None or self._probe.done():
            self._probe = asyncio.create_task(self._probe_store())

    async def _probe_store(self) -> None:
        """While the store is down, ingest is answered 503 at once; this brings it back."""
        while not self.available:
            await asyncio.sleep(min(1.0, self.config.retry_after))
            try:
                if self.store is None:
                    await self._open_store()
                    if self.store is None:
                        continue
                else:
                    await asyncio.to_thread(self.store.schema_version)
            except StoreUnavailable as e:
                self.store_error = str(e)
                continue
            except StoreError as e:
                self.store_error = str(e)
                continue
            self.available, self.store_error, self._down_logged = True, None, False
            await self._reload_tokens()
            _event(logging.INFO, "store_available", store=self.store_url)

    # -- tokens --------------------------------------------------------------------------
    async def _reload_tokens(self) -> None:
        store = self.store
        if store is None:
            return
        async with self._token_lock:
            try:
                rows = await asyncio.to_thread(store.token_hashes)
            except StoreError as e:
                if isinstance(e, StoreUnavailable):
                    self._mark_unavailable(e)
                return
            self.tokens.load(rows)

    async def _refresh_tokens(self) -> None:
        while True:
            await asyncio.sleep(self.config.token_refresh)
            if self.available:
                await self._reload_tokens()

    async def authorize(self, authorization: str | None) -> tuple[bool, str | None]:
        """(allowed, token name) for an ``Authorization`` value (HTTP header or gRPC metadata).
        Auth is on once any token exists or with --require-token."""
        if not self.tokens.required:
            return True, None
        name = self.tokens.check(authorization)
        if name is None and authorization and time.monotonic() - self.tokens.loaded_at > 1.0:
            # A token created since the last reload: look again, at most once a second.
            await self._reload_tokens()
            name = self.tokens.check(authorization)
        return name is not None, name

    # -- admission: the same for every transport -----------------------------------------
    def _unavailable(self, error: object) -> Refused:
        return Refused(503, f"the store is unavailable: {error}", self.config.retry_after)

    async def admit_token(self, authorization: str | None, info: dict[str, Any]) -> Refused | None:
        """Who may send is in the store: unknown (503) until it answers; then the token (401)."""
        if not self.tokens.loaded:
            return self._unavailable(self.store_error)
        allowed, token = await self.authorize(authorization)
        if token:
            info["token"] = token
        if not allowed:
            return Refused(401, "a valid ingest token is required: Authorization: Bearer <token>")
        return None

    def admit_capacity(self) -> Refused | None:
        """Checked before a body is read: the store down (503), or --max-inflight (429)."""
        if not self.available:
            return self._unavailable(self.store_error)
        if self.inflight >= self.config.max_inflight:
            return Refused(
                429, f"overloaded: {self.inflight} requests in progress, retry later",
                self.config.overload_retry_after,
            )  # fmt: skip
        return None

    async def ingest_body(
        self, signal: str, kind: str, body: bytes, encoding: str, info: dict[str, Any]
    ) -> Refused | Taken:
        """Process a body in the pool, commit its rows, count them: the answer may be sent only
        once this returns ``Taken`` (its facts are committed). The caller holds an inflight slot."""
        try:
            out = await self._process(signal, kind, body, encoding)
        except BrokenProcessPool:
            return Refused(
                503, "a translation worker died; retry", self.config.overload_retry_after
            )
        if out.status != 200:
            return Refused(out.status, out.message)
        info["units"] = out.units
        facts = feedback = InsertResult(0, 0, [])
        if out.rows is not None:
            if not self.available:
                return self._unavailable(self.store_error)
            assert self.writer is not None
            try:
                facts, feedback = await asyncio.wrap_future(self.writer.submit(out.rows))
            except StoreUnavailable as e:
                self._mark_unavailable(e)
                return self._unavailable(e)
            except Exception as e:
                _event(logging.ERROR, "store_error", error=f"{type(e).__name__}: {e}")
                return Refused(500, f"the store failed: {type(e).__name__}: {e}")
        self.counts["facts"] += facts.inserted
        self.counts["duplicates"] += facts.duplicates + feedback.duplicates
        self.counts["variants"] += facts.variants
        self.counts["id_collisions"] += facts.collisions
        self.counts["feedback"] += feedback.inserted
        self.counts["rejected"] += out.rejected
        info.update(
            status=200,
            facts=facts.inserted,
            duplicates=facts.duplicates,
            variants=facts.variants,
            id_collisions=facts.collisions,
            feedback=feedback.inserted,
            feedback_duplicates=feedback.duplicates,
            rejected=out.rejected,
        )
        if out.degraded:
            info["degraded"] = out.degraded
        if out.skipped:
            info["skipped"] = out.skipped
        if out.errors:
            info["errors"] = out.errors[:5]
        return Taken(out, facts, feedback)

    # -- request handling ----------------------------------------------------------------
    async def _process(self, signal: str, kind: str, body: bytes, encoding: str) -> Processed:
        """``process`` in the pool; a large body handed to a worker process in a memory file."""
        preparer = self.store.preparer() if self.store is not None else prepare
        limit = self.config.max_body_size
        fd = share(body) if self.share_bodies and len(body) >= SHARE_FROM else None
        if fd is not None:
            try:
                file_id = (os.fstat(fd).st_ino, len(body))
                out = await self.run(
                    process_shared, os.getpid(), fd, file_id, signal, kind, encoding, limit,
                    preparer,
                )  # fmt: skip
            finally:
                os.close(fd)
            if out is not None:
                return out
            self.share_bodies = False  # the workers cannot read it: bytes from now on
        return await self.run(process, signal, kind, body, encoding, limit, preparer)

    async def run(self, fn: Callable[..., Processed | None], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        pool = self.pool
        assert pool is not None
        try:
            return await loop.run_in_executor(pool, fn, *args)
        except BrokenProcessPool:
            # A worker died (killed, out of memory): replace the pool; the sender retries.
            with self._pool_lock:
                if self.pool is pool:
                    _event(logging.ERROR, "worker_pool_broken")
                    self.pool = self._new_pool()
                    pool.shutdown(wait=False, cancel_futures=True)
            raise


async def _read_body(request: Request, limit: int, timeout: float) -> bytes | int:
    """The body, or an HTTP status (413 past ``limit`` bytes, 408 past ``timeout``): the limit is
    checked as the bytes arrive, so nothing over it is ever buffered."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    return 413
                chunks.append(chunk)
    except TimeoutError:
        return 408
    return b"".join(chunks)


def build_app(config: ServeConfig, store: FactStore | None = None) -> Starlette:
    """The ASGI app: routes, and a lifespan that starts and drains the receiver."""
    rx = Receiver(config, store)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await rx.startup()
        face = None
        try:
            if config.grpc_port is not None:
                from lithify.ingest.grpc import GrpcFace  # grpcio only when it is on

                face = await GrpcFace.start(rx, config.host, config.grpc_port)
            yield
        finally:
            if face is not None:  # HTTP has drained; now gRPC: refuse new calls, finish the rest
                await face.stop(config.shutdown_timeout)
            await rx.shutdown()

    async def ingest(request: Request, signal: str) -> Response:
        t0 = time.perf_counter()
        info: dict[str, Any] = {"method": request.method, "path": request.url.path}
        if request.client is not None:
            info["client"] = f"{request.client.host}:{request.client.port}"
        try:
            response = await _ingest(request, signal, info)
        except ClientDisconnect:
            info["status"] = 499
            info["error"] = "the client went away before sending its body"
            response = Response(status_code=499)
        info["latency_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        info.setdefault("status", response.status_code)
        rx.log_request(info)
        return response

    def fail(
        kind: str, status: int, message: str, info: dict[str, Any], **headers: str
    ) -> Response:
        info["status"] = status
        info["error"] = message
        return _response(kind, status, status_body(kind, status, message), headers or None)

    def refuse(kind: str, r: Refused, info: dict[str, Any]) -> Response:
        headers = {"Retry-After": str(r.retry_after)} if r.retry_after is not None else {}
        if r.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="lithify"'
        return fail(kind, r.status, r.message, info, **headers)

    async def _ingest(request: Request, signal: str, info: dict[str, Any]) -> Response:
        raw_type = request.headers.get("content-type", "")
        media = raw_type.split(";", 1)[0].strip().lower()
        kind = _CONTENT_TYPES.get(media)
        reply = kind or "json"  # errors for an unknown type are answered in JSON
        info["signal"] = signal

        refused = await rx.admit_token(request.headers.get("authorization"), info)
        if refused is not None:
            return refuse(reply, refused, info)
        if kind is None or (signal == "feedback" and kind != "json"):
            want = "application/json" if signal == "feedback" else f"{PROTOBUF} or {JSON}"
            got = raw_type or "none"
            return fail(reply, 415, f"unsupported Content-Type {got!r}: send {want}", info)
        info["content_type"] = kind
        encoding = request.headers.get("content-encoding", "").strip().lower()
        encoding = _ENCODING_ALIASES.get(encoding, encoding)
        if encoding not in _ENCODINGS:
            return fail(
                kind, 415,
                f"unsupported Content-Encoding {encoding!r}: use {ACCEPTED_ENCODINGS}", info,
            )  # fmt: skip
        if encoding:
            info["content_encoding"] = encoding
        limit = config.max_body_size
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            # Unread bytes are discarded by the server; past a point, stop reading them at all.
            close = {"Connection": "close"} if int(declared) > 4 * limit else {}
            return fail(
                kind, 413, f"the body ({declared} bytes) is larger than the {limit}-byte limit",
                info, **close,
            )  # fmt: skip
        refused = rx.admit_capacity()
        if refused is not None:
            return refuse(kind, refused, info)

        rx.inflight += 1
        try:
            body = await _read_body(request, limit, config.body_timeout)
            if body == 413:
                return fail(
                    kind, 413, f"the body is larger than the {limit}-byte limit", info,
                    Connection="close",
                )  # fmt: skip
            if body == 408:
                return fail(
                    kind, 408, f"the body did not arrive within {config.body_timeout:g} s", info,
                    Connection="close",
                )  # fmt: skip
            assert isinstance(body, bytes)
            info["bytes"] = len(body)
            done = await rx.ingest_body(signal, kind, body, encoding, info)
        finally:
            rx.inflight -= 1
        if isinstance(done, Refused):
            return refuse(kind, done, info)
        out = done.out
        if signal == "feedback":
            body_out = orjson.dumps(
                {
                    "stored": done.feedback.inserted,
                    "duplicates": done.feedback.duplicates,
                    "rejected": out.rejected,
                    "errors": out.errors,
                }
            )
            return _response("json", 200, body_out)
        return _response(kind, 200, export_body(signal, kind, out.rejected, done.message))

    async def traces(request: Request) -> Response:
        return await ingest(request, "traces")

    async def logs(request: Request) -> Response:
        return await ingest(request, "logs")

    async def feedback(request: Request) -> Response:
        return await ingest(request, "feedback")

    def health_doc() -> dict[str, Any]:
        return {
            "store": {"url": rx.store_url, "available": rx.available, "error": rx.store_error},
            "auth": "token" if rx.tokens.required else "open",
            "inflight": rx.inflight,
            "workers": config.workers,
            "uptime_s": round(time.monotonic() - rx.started, 1),
            # Group commit at work: requests written per transaction = batches / commits.
            "commits": rx.writer.groups if rx.writer else 0,
            "batches_committed": rx.writer.batches if rx.writer else 0,
            **rx._totals(),
        }

    async def health(request: Request) -> Response:
        """Liveness: the process serves requests."""
        server = request.scope.get("server") or (None, None)
        ports = {"http": server[1], "grpc": rx.grpc_port}
        doc = {"status": "ok", "ports": ports, **health_doc()}
        return Response(orjson.dumps(doc), media_type=JSON)

    async def ready(request: Request) -> Response:
        """Readiness: ingest would be taken now (the store is reachable)."""
        ok = rx.available and rx.tokens.loaded
        doc = {"status": "ready" if ok else "unavailable", **health_doc()}
        return Response(orjson.dumps(doc), status_code=200 if ok else 503, media_type=JSON)

    async def not_routed(request: Request, exc: Exception) -> Response:
        """404 and 405, as a google.rpc.Status, logged as any request is."""
        status = getattr(exc, "status_code", 404)
        path = request.url.path
        if status == 405:
            message = f"{request.method} {path}: use {exc.headers['Allow']}"  # type: ignore[attr-defined]
        else:
            message = f"no endpoint {path}: POST /v1/traces, /v1/logs or /v1/feedback"
        info: dict[str, Any] = {"method": request.method, "path": path}
        if request.client is not None:
            info["client"] = f"{request.client.host}:{request.client.port}"
        rx.log_request({**info, "status": status, "error": message})
        body = status_body("json", status, message)
        return _response("json", status, body, getattr(exc, "headers", None))

    app = Starlette(
        routes=[
            Route("/v1/traces", traces, methods=["POST"]),
            Route("/v1/logs", logs, methods=["POST"]),
            Route("/v1/feedback", feedback, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/health/ready", ready, methods=["GET"]),
        ],
        lifespan=lifespan,
        exception_handlers={404: not_routed, 405: not_routed},
    )
    # No redirect from /v1/traces/ to /v1/traces: it would be built from the Host header the
    # client sent (docs/serve.md: other paths are 404).
    app.router.redirect_slashes = False
    app.state.receiver = rx
    return app


def uvicorn_config(app: Starlette, config: ServeConfig, log_cfg: dict[str, Any] | None) -> Any:
    """The receiver under uvicorn (_server.config), request heads bounded and answered, when
    refused, as ingest is."""
    rx: Receiver = app.state.receiver
    return _server.config(
        app,
        host=config.host,
        port=config.port,
        refusal=rx.refused,
        log_config=log_cfg,
        shutdown_timeout=config.shutdown_timeout,
        limits=config.head,
        # An exporter that half-closes after its request still wants the answer: its data is
        # stored either way, and an answer it never reads costs nothing.
        half_close=True,
    )


def serve(config: ServeConfig, store: FactStore | None = None, *, log_level: str = "info") -> None:
    """Run the receiver until SIGINT/SIGTERM, then drain in-flight requests and stop."""
    import uvicorn

    app = build_app(config, store)
    server = uvicorn.Server(uvicorn_config(app, config, log_config(log_level)))
    rx: Receiver = app.state.receiver

    def listening(url: str, host: str, port: int) -> None:
        _event(
            logging.INFO,
            "listening",
            url=url,
            port=port,
            grpc_port=rx.grpc_port,  # None: gRPC is off
            store=rx.store_url,
            store_available=rx.available,
            auth="token" if rx.tokens.required else "open",
            workers=config.workers,
            max_body_size=config.max_body_size,
            pid=os.getpid(),
        )
        if not rx.tokens.required and host not in ("127.0.0.1", "::1", "localhost"):
            _event(
                logging.WARNING,
                "open_ingest",
                message=f"ingest on {url} takes data from anyone who can reach it: create a "
                "token (`lithify token create NAME`) or pass --require-token",
            )

    _server.run(server, listening)
