"""Running a uvicorn server the way `lithify serve` and `lithify proxy` (and any other ASGI app of
lithify) do: one HTTP protocol that bounds what a client can make the server hold before the app
sees a request, one configuration, one way to run it.

uvicorn's fast parser (httptools, llhttp) bounds nothing in a request head, and uvicorn arms no
timer until a first response. h11 has ``max_incomplete_event_size`` (uvicorn's
``h11_max_incomplete_event_size``), but answers 400 past it, bounds neither the number of fields
nor the time, and costs a pure-Python parse per request on the proxy's path. So the protocol here
is uvicorn's httptools one with h11's rules added: the head held while incomplete is bounded in
bytes (checked per read, as h11 does), its fields are counted as they arrive, the head must
arrive within a time limit, and a transfer coding other than ``chunked`` is refused, as is a
protocol upgrade: with 400, the answer OTLP/HTTP gives a request it cannot decode (h11 and
nginx answer 501 there; OTLP clients treat both as final, and a 5xx then says a fault of ours).
It can keep a half-closed connection open until its answers are written, and it tells every
request of a lost connection that it is lost (uvicorn told only the newest; an older one went on
writing to a closed transport, and uvicorn logged the RuntimeError at error level).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)


@dataclass(frozen=True)
class HeadLimits:
    """What one request head (request line and header fields) may cost before it is refused."""

    max_bytes: int = 64 * 1024  # 431 past it
    max_fields: int = 100  # 431 past it
    timeout: float = 10.0  # seconds from the connection, or a request's first byte; 408 past it


# The app's answer to a request refused before it reached the app, and its log line:
# (status, reason, message, what is known of the request) -> (headers, body).
Refusal = Callable[[int, str, str, dict[str, Any]], tuple[list[tuple[bytes, bytes]], bytes]]


class _Refused(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def _upgrade() -> _Refused:
    # llhttp stops reading at the end of the head of a request that asks to switch protocols
    # (h2c, websocket, CONNECT): its body would be taken as empty. There is no protocol to switch
    # to, and answering it as an ordinary request would answer one that was never read.
    return _Refused(
        400, "upgrade",
        "switching protocols (Connection: upgrade, CONNECT) is not supported: send the request "
        "without an Upgrade",
    )  # fmt: skip


@dataclass(slots=True)
class _Head:
    """The request head being received."""

    size: int = 0  # bytes of the request target and the complete header fields
    fields: int = 0
    fed: int = 0  # bytes read while the head was incomplete, after the read it began in


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with request heads bounded (HeadLimits), transfer codings
    other than chunked and protocol upgrades refused (400), half-closed connections answered,
    and the requests of a lost connection all told so. Subclassed per server by ``protocol()``."""

    limits: ClassVar[HeadLimits] = HeadLimits()
    refusal: ClassVar[Refusal]
    # A client's FIN after whole requests: a half-close whose answers are still wanted (True),
    # or a client giving up (False, uvicorn's reading: a proxy must then drop the upstream call).
    half_close: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head: _Head | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._running: RequestResponseCycle | None = None  # the request being answered
        self._in_message = False  # part of a request received, not all of it
        self._eof = False  # the client half-closed: close once its answers are written
        self._done = False  # refused: nothing more is read

    # -- reading -------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        if self._done:
            return
        self._unset_keepalive_if_required()
        before = self._head  # a head already incomplete before this read
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as e:
            refused = e.__context__
            if not isinstance(refused, _Refused):
                refused = _Refused(400, "bad_request", f"invalid HTTP request: {e}")
            self._refuse(refused)
            return
        except httptools.HttpParserUpgrade:  # refused in on_headers_complete already
            self._refuse(_upgrade())
            return
        except httptools.HttpParserError as e:
            self._refuse(_Refused(400, "bad_request", f"invalid HTTP request: {e}"))
            return
        head = self._head
        if head is not None:
            # The head is still incomplete: what the parser holds of it grows with each read.
            # The read it began in is not counted (some of it may belong to the request before
            # it), so the bound holds to within one read.
            if head is before:
                head.fed += len(data)
            if head.fed > self.limits.max_bytes:
                self._refuse(self._too_large())

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = True
        self._head = _Head()
        self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._count(len(url), 0)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4, 1)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head = None
        self._cancel_head_timer()
        if self.parser.should_upgrade():
            raise _upgrade()
        codings = [
            c.strip().lower()
            for name, value in self.headers
            if name == b"transfer-encoding"
            for c in value.split(b",")
        ]
        if codings and codings != [b"chunked"]:
            sent = b", ".join(codings).decode("latin-1")
            raise _Refused(
                400, "transfer_encoding",
                f"Transfer-Encoding {sent!r} is not supported: send the body as it is or "
                "chunked, and compress it with Content-Encoding",
            )  # fmt: skip
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_message = False

    def _count(self, size: int, fields: int) -> None:
        head = self._head
        if head is None:
            return
        head.size += size
        head.fields += fields
        if head.size > self.limits.max_bytes or head.fields > self.limits.max_fields:
            raise self._too_large()

    def _too_large(self) -> _Refused:
        limits = self.limits
        return _Refused(
            431, "headers_too_large",
            f"the request head is larger than {limits.max_bytes} bytes or has more than "
            f"{limits.max_fields} header fields",
        )  # fmt: skip

    # -- the head's time limit -----------------------------------------------------------------
    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.limits.timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._head is not None:
            message = f"the request head did not arrive within {self.limits.timeout:g} s"
            self._refuse(_Refused(408, "head_timeout", message))
        elif not self._in_message and self._idle():
            self.transport.close()  # a connection that never sent a request

    # -- answering and closing -----------------------------------------------------------------
    def _idle(self) -> bool:
        return (self._running is None or self._running.response_complete) and not self.pipeline

    def _refuse(self, refused: _Refused) -> None:
        """Answer a request the app never saw, log it (through ``refusal``), and close."""
        self._done = True
        self._head = None
        self._cancel_head_timer()
        info: dict[str, Any] = {}
        if self.client is not None:
            info["client"] = f"{self.client[0]}:{self.client[1]}"
        headers, body = type(self).refusal(refused.status, refused.reason, refused.message, info)
        if self._idle() and not self.transport.is_closing():
            # An earlier request still being answered on this connection keeps its answer's
            # place; this one is then closed unanswered.
            out = [STATUS_LINE[refused.status]]
            for name, value in [
                *headers,
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]:
                out += [name, b": ", value, b"\r\n"]
            out += [b"\r\n", body]
            self.transport.write(b"".join(out))
        self.transport.close()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        self._running = cycle
        super()._start_asgi_task(cycle, app)

    def eof_received(self) -> bool | None:
        """With ``half_close``, a client that half-closes after its requests still gets their
        answers; one that half-closes in the middle of a request cannot finish it, and the
        connection closes."""
        if not self.half_close or self._in_message or self._idle():
            return None
        self._eof = True
        return True

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._eof and self._idle() and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        # uvicorn tells only the newest request of the connection: a request still being
        # answered while a pipelined one had arrived went on writing to a closed transport.
        cycles = [self._running, *(cycle for cycle, _ in self.pipeline)]
        super().connection_lost(exc)
        self._cancel_head_timer()
        for cycle in cycles:
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()


def protocol(
    refusal: Refusal, limits: HeadLimits | None = None, half_close: bool = False
) -> type[BoundedHttpToolsProtocol]:
    """The HTTP protocol class for one server: its limits, how it answers a refusal, and how it
    reads a half-close (BoundedHttpToolsProtocol.half_close)."""
    attrs = {
        "limits": limits or HeadLimits(),
        "refusal": staticmethod(refusal),
        "half_close": half_close,
    }
    return type("BoundedHttp", (BoundedHttpToolsProtocol,), attrs)


def config(
    app: Any,
    *,
    host: str,
    port: int,
    refusal: Refusal,
    log_config: dict[str, Any] | None,
    shutdown_timeout: int,
    limits: HeadLimits | None = None,
    half_close: bool = False,
    **options: Any,
) -> Any:
    """The uvicorn configuration every lithify server uses (uvloop, the bounded protocol, no
    websockets, no headers of uvicorn's own in answers, keep-alive above the OTel SDK's 5 s
    batch delay); ``options`` add or override uvicorn settings."""
    import uvicorn

    settings: dict[str, Any] = {
        "host": host,
        "port": port,
        "loop": "uvloop" if sys.platform != "win32" else "asyncio",
        "http": protocol(refusal, limits, half_close),
        "ws": "none",
        "lifespan": "on",
        "access_log": False,
        "log_config": log_config,
        "proxy_headers": False,
        "server_header": False,
        "timeout_keep_alive": 65,
        "timeout_graceful_shutdown": shutdown_timeout,
        **options,
    }
    return uvicorn.Config(app, **settings)


class ServerFailed(Exception):
    """The server could not start (its address in use: uvicorn logged why) or stopped on an
    error; the command-line face turns it into its exit code (uvicorn's own 3 would read as
    ``--strict`` there)."""


def run(server: Any, on_listening: Callable[[str, str, int], None]) -> None:
    """Run ``server`` until SIGINT/SIGTERM have let it drain; ``on_listening(url, host, port)``
    once it is bound (``port`` 0 picks one). Raises ``ServerFailed`` when it cannot start."""
    startup = server.startup

    async def started(sockets: Any = None) -> None:
        await startup(sockets=sockets)
        if not server.started:
            return
        bound = [s.getsockname() for srv in server.servers for s in srv.sockets]
        host, port = bound[0][:2] if bound else (server.config.host, server.config.port)
        on_listening(f"http://{'[' + host + ']' if ':' in host else host}:{port}", host, port)

    server.startup = started
    # uvicorn re-raises the signal that stopped it once it has drained, under the handlers in
    # place before it ran: make those no-ops, so a graceful stop exits 0 (not -15, nor a
    # KeyboardInterrupt traceback).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    try:
        server.run()
    except SystemExit as e:
        if e.code not in (None, 0):
            raise ServerFailed(f"the server stopped with exit code {e.code}") from None
        raise
    if not server.started:
        raise ServerFailed("the server could not start (its log says why)")
