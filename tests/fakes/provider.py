"""A local fake LLM provider that speaks OpenAI Chat Completions, OpenAI Responses, Anthropic
Messages and the Gemini API, streamed and not, and records every exchange byte for byte.

One stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (a free port) in a background thread; streamed
replies go out as HTTP/1.1 chunked bodies, one chunk per SSE event, flushed event by event.

Routes (the paths the real SDKs call when pointed at ``url``):

- ``POST /v1/chat/completions`` — OpenAI Chat Completions (``base_url=fake.openai_base_url``)
- ``POST /v1/responses`` — OpenAI Responses (same base URL)
- ``POST /v1/messages`` — Anthropic Messages (``base_url=fake.url``)
- ``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse`` —
  Gemini (``http_options={"base_url": fake.url, "api_version": "v1beta"}``)

What the fake answers is scripted: ``fake.script(step, step, …)`` queues ``Answer``, ``Fault`` and
``Reply`` steps (tests/fakes/answers.py); each request takes the next step and renders it in the
format it arrived in (a ``Reply`` is sent as written). A request with no step left gets a 500 in
that provider's error format. ``reset()`` clears the script, the records and the step counter,
so a re-run of a script (its streamed twin) gets the same ids.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes import wire
from tests.fakes.answers import Answer, Fault, Reply, Step

_GEMINI_PATH = re.compile(
    r"^/v1(?:beta|alpha)?/models/([^/:]+):(generateContent|streamGenerateContent)$"
)


@dataclass
class Exchange:
    """One HTTP exchange as it went over the wire."""

    provider: str | None
    method: str
    path: str  # with the query string
    headers: dict[str, str]  # lower-cased names
    request_body: bytes
    stream: bool = False
    key: str | None = None
    step: Step | None = None
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: bytes = b""
    cut: bool = False  # the stream stopped before its end, on purpose
    client_gone: bool = False  # the client hung up while we were sending
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def request_json(self) -> Any:
        return json.loads(self.request_body)

    @property
    def response_text(self) -> str:
        return self.response_body.decode("utf-8")

    @property
    def response(self) -> Any:
        """The response as a converter takes it: the JSON body, or the SSE text of a stream."""
        return self.response_text if self.stream else json.loads(self.response_body)

    @property
    def credential(self) -> str | None:
        """The API key the client sent, in whichever header its provider uses."""
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:]
        return self.headers.get("x-api-key") or self.headers.get("x-goog-api-key")

    def document(self, *, with_meta: bool = True) -> dict[str, Any]:
        """The exchange as lithify's exchange document: ``{"request", "response", "meta"?}``."""
        doc: dict[str, Any] = {"request": self.request_json, "response": self.response}
        if with_meta:
            doc["meta"] = {"path": self.path, "headers": dict(self.headers)}
        return doc


class FakeProvider:
    """The fake; a context manager that serves while open."""

    def __init__(self, id_prefix: str = "lith") -> None:
        self.id_prefix = id_prefix
        self.exchanges: list[Exchange] = []
        self._steps: deque[Step] = deque()
        self._count = 0
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- scripting -------------------------------------------------------------------------------

    def script(self, *steps: Step) -> FakeProvider:
        with self._lock:
            self._steps.extend(steps)
        return self

    def reset(self) -> None:
        with self._lock:
            self._steps.clear()
            self.exchanges.clear()
            self._count = 0

    def _next(self) -> tuple[Step | None, str]:
        with self._lock:
            self._count += 1
            key = f"{self.id_prefix}{self._count:04d}"
            return (self._steps.popleft() if self._steps else None), key

    def _record(self, ex: Exchange) -> None:
        with self._lock:
            self.exchanges.append(ex)

    def wait(self, n: int, timeout: float = 5.0) -> list[Exchange]:
        """The first ``n`` exchanges, once each has been answered in full."""
        deadline = time.monotonic() + timeout
        while len(self.exchanges) < n and time.monotonic() < deadline:
            time.sleep(0.005)
        out = self.exchanges[:n]
        for ex in out:
            ex.done.wait(max(0.0, deadline - time.monotonic()))
        return out

    # -- serving ---------------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self._read_body()
                route = _route(self.path)
                ex = Exchange(
                    provider=route[0] if route else None,
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    request_body=body,
                )
                fake._record(ex)
                try:
                    self._answer(ex, route)
                except (BrokenPipeError, ConnectionResetError):
                    ex.client_gone = True
                    self.close_connection = True
                finally:
                    ex.done.set()

            def _read_body(self) -> bytes:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _answer(
                self, ex: Exchange, route: tuple[str, str | None, str | None] | None
            ) -> None:
                if route is None:
                    err = {"error": {"message": f"no route {self.path}", "type": "not_found"}}
                    self._send_json(ex, 404, err, {})
                    return
                provider, path_model, path_mode = route
                try:
                    req = json.loads(ex.request_body)
                    if not isinstance(req, dict):
                        raise ValueError("not an object")
                except ValueError:
                    fault = Fault(400, "The request body is not valid JSON.")
                    self._send_json(ex, 400, wire.error(provider, fault, "bad"), {})
                    return
                ex.stream = path_mode == "sse" or (path_mode is None and req.get("stream") is True)
                step, key = fake._next()
                ex.step, ex.key = step, key
                if step is None:
                    step = Fault(500, "The fake provider's script has no step left.")
                time.sleep(step.delay)
                if isinstance(step, Fault):
                    ex.stream = False
                    headers = {}
                    if step.retry_after is not None:
                        headers["retry-after"] = f"{step.retry_after:g}"
                        headers["retry-after-ms"] = str(int(step.retry_after * 1000))
                    if step.body is not None:
                        self._send(ex, step.status, step.body, "application/json", headers)
                    else:
                        err = wire.error(provider, step, f"req_{key}")
                        self._send_json(ex, step.status, err, headers)
                    return
                if isinstance(step, Reply):
                    if path_mode == "json-array":
                        self._send_json(ex, 200, [data for _, data in step.events], {})
                    elif ex.stream:
                        self._send_stream(ex, provider, list(step.events), step, {})
                    else:
                        self._send_json(ex, 200, step.body, {})
                    return
                requested = path_model or str(req.get("model") or "fake-model")
                model = step.model or wire.SNAPSHOTS.get(requested, requested)
                ctx = wire.Ctx(req, step, key, model, wire.CREATED + fake._count)
                headers = {**_id_headers(provider, key), **step.headers}
                if path_mode == "json-array":
                    chunks = [data for _, data in wire.events(provider, ctx)]
                    self._send_json(ex, 200, chunks, headers)
                elif ex.stream:
                    self._send_stream(ex, provider, wire.events(provider, ctx), step, headers)
                else:
                    self._send_json(ex, 200, wire.body(provider, ctx), headers)

            def _send_json(
                self, ex: Exchange, status: int, obj: Any, headers: dict[str, str]
            ) -> None:
                data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
                self._send(ex, status, data, "application/json", headers)

            def _send(
                self,
                ex: Exchange,
                status: int,
                data: bytes,
                ctype: str,
                headers: dict[str, str],
            ) -> None:
                ex.status = status
                ex.response_headers = {"content-type": ctype, **headers}
                ex.response_body = data
                self.send_response(status)
                for k, v in ex.response_headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def _send_stream(
                self,
                ex: Exchange,
                provider: str,
                events: list[wire.Event],
                step: Answer | Reply,
                headers: dict[str, str],
            ) -> None:
                frames = wire.sse_text(provider, events)
                cut = step.cut_after is not None and step.cut_after < len(frames)
                if cut:
                    frames = frames[: step.cut_after]
                ex.status = 200
                ex.cut = cut
                ex.response_headers = {
                    "content-type": "text/event-stream; charset=utf-8",
                    "cache-control": "no-cache",
                    **headers,
                }
                ex.response_body = b"".join(frames)
                self.send_response(200)
                for k, v in ex.response_headers.items():
                    self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                for n, frame in enumerate(frames):
                    if n and step.event_delay:
                        time.sleep(step.event_delay)
                    self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
                    self.wfile.flush()
                if cut:
                    # Hang up without the terminating chunk: the client sees a broken body.
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        return Handler


def _route(target: str) -> tuple[str, str | None, str | None] | None:
    """(provider, model named by the path, how the path asks to stream) for a request target."""
    parts = urlsplit(target)
    path = parts.path.rstrip("/")
    if path == "/v1/chat/completions":
        return wire.CHAT, None, None
    if path == "/v1/responses":
        return wire.RESPONSES, None, None
    if path == "/v1/messages":
        return wire.ANTHROPIC, None, None
    m = _GEMINI_PATH.match(path)
    if m:
        if m.group(2) == "generateContent":
            return wire.GEMINI, m.group(1), None
        # Without alt=sse the real API streams one JSON array of chunks.
        sse = parse_qs(parts.query).get("alt") == ["sse"]
        return wire.GEMINI, m.group(1), "sse" if sse else "json-array"
    return None


def _id_headers(provider: str, key: str) -> dict[str, str]:
    if provider == wire.ANTHROPIC:
        return {"request-id": f"req_{key}"}
    if provider == wire.GEMINI:
        return {"x-gemini-service-tier": "standard"}
    return {"x-request-id": f"req_{key}", "openai-processing-ms": "12"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closing its keep-alive connection is not an error worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)
