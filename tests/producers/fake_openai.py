"""A local fake OpenAI provider: Chat Completions on 127.0.0.1, canned answers, every exchange
recorded.

Stdlib only, so it runs inside any producer venv. It plays one weather-agent tool loop: a request
whose last message is not a tool result gets two parallel ``get_weather`` tool calls; a request
that ends with tool results gets the final text answer. Both answers exist non-streamed (one JSON
body) and streamed (SSE chunks as the real API sends them: a role chunk, tool-call deltas with the
arguments in fragments, a finish chunk, a usage chunk with ``choices: []`` when
``stream_options.include_usage`` is set, then ``[DONE]``).

Each exchange is recorded as ``{"request", "response", "answer", ...}``: ``response`` is the body
exactly as sent (a JSON object, or the SSE text), ``answer`` the logical reply the test compares
facts with (tool-call arguments as the JSON strings the model "wrote").
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "gpt-4o-mini-2024-07-18"
FINGERPRINT = "fp_lithify0"

# The canned conversation. Non-ASCII text on purpose: it must survive every encoding unchanged.
TOOL_CALLS = (
    ("get_weather", '{"city": "Paris", "unit": "celsius"}'),
    ("get_weather", '{"city": "Zürich", "unit": "celsius"}'),
)
FINAL_TEXT = "Paris: 18 °C and cloudy. Zürich: 12 °C with light rain — take an umbrella."
# With ``reasoning=True``, the tool-call answer also carries this as ``reasoning_content`` (the
# field DeepSeek, older vLLM and others use for thinking on Chat Completions), streamed in
# ``delta.reasoning_content`` fragments before the tool calls.
REASONING = "Two cities, one get_weather call each; both can run at once."


def _tokens(body: dict[str, Any]) -> int:
    """A deterministic prompt token count: the request's size, roughly."""
    return max(1, len(json.dumps(body.get("messages", []), ensure_ascii=False)) // 4)


class FakeOpenAI:
    """The fake provider; use as a context manager, then read ``exchanges`` or ``dump()``."""

    def __init__(
        self, id_prefix: str = "fake", *, reasoning: bool = False, latency: float = 0.0
    ) -> None:
        self.id_prefix = id_prefix
        self.reasoning = reasoning
        # Seconds each answer waits, as a model thinks: what a batch processor's timer sees.
        self.latency = latency
        self.exchanges: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(self.exchanges, indent=2, ensure_ascii=False) + "\n", "utf-8")

    # -- answering ------------------------------------------------------------------------------

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The logical reply to one request, with fresh ids."""
        with self._lock:
            n = len(self.exchanges) + 1
            # Reserve the slot so concurrent requests get distinct ids.
            self.exchanges.append({})
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        prompt = _tokens(body)
        base: dict[str, Any] = {
            "id": f"chatcmpl-{self.id_prefix}-{n:04d}",
            "created": 1767225600 + n,
            "model": MODEL,
        }
        if last.get("role") == "tool":
            return {
                **base,
                "content": FINAL_TEXT,
                "tool_calls": [],
                "finish_reason": "stop",
                "usage": {"prompt_tokens": prompt, "completion_tokens": 23},
                "slot": n - 1,
            }
        return {
            **base,
            "content": None,
            **({"reasoning_content": REASONING} if self.reasoning else {}),
            "tool_calls": [
                {"id": f"call_{self.id_prefix}_{n:04d}_{i}", "name": name, "arguments": args}
                for i, (name, args) in enumerate(TOOL_CALLS)
            ],
            "finish_reason": "tool_calls",
            "usage": {"prompt_tokens": prompt, "completion_tokens": 41},
            "slot": n - 1,
        }

    def record(self, slot: int, exchange: dict[str, Any]) -> None:
        with self._lock:
            self.exchanges[slot] = exchange

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep the producer's stderr for real errors

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "fake"}})
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._json(400, {"error": {"message": "not JSON", "type": "fake"}})
                    return
                ans = fake.answer(body)
                time.sleep(fake.latency)
                slot = ans.pop("slot")
                usage = _usage(ans["usage"])
                ans["usage"] = usage
                exchange: dict[str, Any] = {
                    "path": self.path,
                    "headers": {"user-agent": self.headers.get("User-Agent", "")},
                    "stream": bool(body.get("stream")),
                    "request": body,
                    "answer": ans,
                }
                if body.get("stream"):
                    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    sse = _sse(ans, include_usage)
                    exchange["response"] = sse
                    fake.record(slot, exchange)
                    self._sse(sse)
                else:
                    resp = _completion(ans)
                    exchange["response"] = resp
                    fake.record(slot, exchange)
                    self._json(200, resp)

            def _json(self, status: int, obj: Any) -> None:
                data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-request-id", f"req_{time.monotonic_ns()}")
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, text: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for event in text.split("\n\n"):
                    if not event:
                        continue
                    chunk = (event + "\n\n").encode("utf-8")
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closing its keep-alive connection is not an error worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _usage(u: dict[str, int]) -> dict[str, Any]:
    return {
        "prompt_tokens": u["prompt_tokens"],
        "completion_tokens": u["completion_tokens"],
        "total_tokens": u["prompt_tokens"] + u["completion_tokens"],
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _completion(ans: dict[str, Any]) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` body."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": ans["content"],
        "refusal": None,
        "annotations": [],
    }
    if ans.get("reasoning_content"):
        message["reasoning_content"] = ans["reasoning_content"]
    if ans["tool_calls"]:
        message["tool_calls"] = [
            {
                "id": tc["id"],
                "type": "function",
                "function": {"name": tc["name"], "arguments": tc["arguments"]},
            }
            for tc in ans["tool_calls"]
        ]
    return {
        "id": ans["id"],
        "object": "chat.completion",
        "created": ans["created"],
        "model": ans["model"],
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": ans["finish_reason"],
            }
        ],
        "usage": ans["usage"],
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }


def _fragments(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(ans: dict[str, Any], include_usage: bool) -> str:
    """The streamed body: ``chat.completion.chunk`` events as the real API orders them."""
    head = {
        "id": ans["id"],
        "object": "chat.completion.chunk",
        "created": ans["created"],
        "model": ans["model"],
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        c: dict[str, Any] = {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            c["usage"] = None
        return c

    chunks: list[dict[str, Any]] = []
    if ans["tool_calls"]:
        chunks.append(chunk({"role": "assistant", "content": None, "refusal": None}))
        for frag in _fragments(ans.get("reasoning_content") or "", 11):
            chunks.append(chunk({"reasoning_content": frag}))
        for i, tc in enumerate(ans["tool_calls"]):
            chunks.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": tc["id"],
                                "type": "function",
                                "function": {"name": tc["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            for frag in _fragments(tc["arguments"], 7):
                chunks.append(
                    chunk({"tool_calls": [{"index": i, "function": {"arguments": frag}}]})
                )
    else:
        chunks.append(chunk({"role": "assistant", "content": "", "refusal": None}))
        for frag in _fragments(ans["content"], 9):
            chunks.append(chunk({"content": frag}))
    chunks.append(chunk({}, ans["finish_reason"]))
    if include_usage:
        chunks.append({**head, "choices": [], "usage": ans["usage"]})
    lines = [f"data: {json.dumps(c, ensure_ascii=False, separators=(',', ':'))}" for c in chunks]
    lines.append("data: [DONE]")
    return "".join(f"{line}\n\n" for line in lines)
