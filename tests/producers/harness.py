"""What every producer script shares: the OTel SDK with in-memory exporters, the weather-agent
conversation driven through the real ``openai`` SDK, and writing the capture as OTLP.

Runs inside a producer venv (never in lithify's own). The capture of one scenario is written as
``traces.pb`` / ``logs.pb`` (the exact ExportTraceServiceRequest / ExportLogsServiceRequest bytes
the OTLP/protobuf exporters send, from ``opentelemetry-exporter-otlp-proto-common``) and
``traces.json`` / ``logs.json`` (OTLP/JSON from ``opentelemetry-exporter-otlp-json-common``: hex
ids, integer enums, 64-bit integers as strings), plus ``exchanges.json`` from the fake provider.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# openai 3.x talks through httpx2; instrumentations that still `import httpx` must get httpx2's
# classes (an `isinstance(base_url, httpx.URL)` check, for one), so alias before they load.
import httpx2

httpx2.alias_httpx()

from fake_openai import FakeOpenAI  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry._logs import set_logger_provider  # noqa: E402
from opentelemetry.exporter.otlp.json.common._log_encoder import (  # noqa: E402
    encode_logs as encode_logs_json,
)
from opentelemetry.exporter.otlp.json.common.trace_encoder import (  # noqa: E402
    encode_spans as encode_spans_json,
)
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import (  # noqa: E402
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

SYSTEM = "You are a weather assistant. Call get_weather once per city, then answer briefly."
USER = "What's the weather in Paris and in Zürich right now?"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for one city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]
# One result a JSON string, one plain text: a tool result must stay the string the model saw.
RESULTS = {
    "Paris": '{"temperature": 18, "unit": "celsius", "conditions": "cloudy"}',
    "Zürich": "12 °C, light rain",
}
REQUEST_MODEL = "gpt-4o-mini"
SAMPLING: dict[str, Any] = {"temperature": 0.2, "max_tokens": 256, "seed": 7}


class Capture:
    """The SDK wired to in-memory exporters, installed as the global providers."""

    def __init__(self, service: str) -> None:
        resource = Resource.create({"service.name": service})
        self.spans = InMemorySpanExporter()
        self.logs = InMemoryLogRecordExporter()
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        trace.set_tracer_provider(self.tracer_provider)
        set_logger_provider(self.logger_provider)

    def clear(self) -> None:
        self.spans.clear()
        self.logs.clear()

    def write(self, out: Path) -> dict[str, int]:
        """Write the captured spans and logs in both OTLP encodings; return their counts."""
        self.tracer_provider.force_flush()
        self.logger_provider.force_flush()
        spans = list(self.spans.get_finished_spans())
        logs = list(self.logs.get_finished_logs())
        out.mkdir(parents=True, exist_ok=True)
        (out / "traces.pb").write_bytes(encode_spans(spans).SerializeToString())
        _write_json(out / "traces.json", encode_spans_json(spans).to_dict())
        # An exporter sends no request for an empty batch: no logs, no logs files.
        if logs:
            (out / "logs.pb").write_bytes(encode_logs(logs).SerializeToString())
            _write_json(out / "logs.json", encode_logs_json(logs).to_dict())
        return {"spans": len(spans), "logs": len(logs)}


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", "utf-8")


def _assistant_from_stream(stream: Any) -> dict[str, Any]:
    """Join a streamed answer into the assistant message an application replays."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                content.append(delta.content)
            for tc in delta.tool_calls or []:
                slot = calls.setdefault(
                    tc.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if tc.id:
                    slot["id"] = tc.id
                if tc.function and tc.function.name:
                    slot["function"]["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    slot["function"]["arguments"] += tc.function.arguments
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    return msg


def converse(client: Any, *, stream: bool) -> None:
    """The two-call tool loop: tool calls for both cities, their results, the final answer."""
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
    ]
    extra: dict[str, Any] = (
        {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    )
    for _turn in range(2):
        resp = client.chat.completions.create(
            model=REQUEST_MODEL, messages=messages, tools=TOOLS, **SAMPLING, **extra
        )
        if stream:
            assistant: Any = _assistant_from_stream(resp)
            calls = [(c["id"], c["function"]["arguments"]) for c in assistant.get("tool_calls", [])]
        else:
            # What most applications do: replay the SDK's message object as it came back.
            assistant = resp.choices[0].message
            calls = [(c.id, c.function.arguments) for c in assistant.tool_calls or []]
        messages.append(assistant)
        if not calls:
            return
        for call_id, arguments in calls:
            city = json.loads(arguments)["city"]
            messages.append({"role": "tool", "tool_call_id": call_id, "content": RESULTS[city]})
    raise RuntimeError("the fake provider never gave a final answer")


def versions(*names: str) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = "missing"
    return out


def run(
    *,
    producer: str,
    out: Path,
    packages: tuple[str, ...],
    wrap: Callable[[Capture, str], contextlib.AbstractContextManager[Any]],
    capture: Capture,
) -> None:
    """Run both scenarios against a fresh fake provider each; write outputs and a manifest.

    ``wrap`` opens whatever context the producer runs the conversation in (an agent span, a
    session); it gets the scenario name.
    """
    from openai import OpenAI

    manifest: dict[str, Any] = {
        "producer": producer,
        "python": sys.version.split()[0],
        "versions": versions("openai", "httpx2", "opentelemetry-sdk", *packages),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("OTEL_")},
        "scenarios": {},
    }
    for scenario, stream in (("plain", False), ("stream", True)):
        capture.clear()
        started = time.perf_counter()
        with FakeOpenAI(id_prefix=scenario) as fake:
            client = OpenAI(
                base_url=fake.base_url, api_key="sk-test-not-a-real-key-0000", max_retries=0
            )
            with wrap(capture, scenario):
                converse(client, stream=stream)
            client.close()
        folder = out / scenario
        counts = capture.write(folder)
        fake.dump(folder / "exchanges.json")
        manifest["scenarios"][scenario] = {
            **counts,
            "calls": len(fake.exchanges),
            "seconds": round(time.perf_counter() - started, 3),
        }
    _write_json(out / "manifest.json", manifest)
