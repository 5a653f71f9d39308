"""What every Python producer script shares, whatever the provider it talks to: the weather-agent
conversation (its words, tool, results and sampling), the OTel SDK wired to in-memory exporters
(``Capture``), the capture written as OTLP, the hand-written agent span, and the loop that runs
both scenarios against a fresh fake provider each and writes the manifest.

Runs inside a producer venv (never in lithify's own). It imports only the standard library, the
OTel API and SDK and the two OTLP encoders, which every producer venv pins (through
``requirements-base.txt``, or ``requirements-adk.txt``, a lock of its own): no ``openai``, no
httpx alias. harness.py (the OpenAI side, which aliases httpx to httpx2) and run_gemini.py (the
google-genai SDK 2.x talks through httpx) both build on it. Importing it loads no
instrumentation, so a script may read ``early_option`` before it sets the ``OTEL_*`` variables
the instrumentations read when they load.

The capture of one scenario is written as ``traces.pb`` / ``logs.pb`` (the exact
ExportTraceServiceRequest / ExportLogsServiceRequest bytes the OTLP/protobuf exporters send, from
``opentelemetry-exporter-otlp-proto-common``) and ``traces.json`` / ``logs.json`` (OTLP/JSON from
``opentelemetry-exporter-otlp-json-common``: hex ids, integer enums, 64-bit integers as strings),
plus ``exchanges.json`` from the fake provider.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# The conversation (conversation.py, beside this file), re-exported for the scripts that speak it
# in each provider's terms.
from conversation import (  # noqa: F401
    PARAMETERS,
    RESULTS,
    SYSTEM,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    USER,
)
from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.json.common._log_encoder import (
    encode_logs as encode_logs_json,
)
from opentelemetry.exporter.otlp.json.common.trace_encoder import (
    encode_spans as encode_spans_json,
)
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

# OpenAI's names (run_gemini.py renames max_tokens to Gemini's max_output_tokens).
SAMPLING: dict[str, Any] = {"temperature": 0.2, "max_tokens": 256, "seed": 7}
# Each scenario and whether its model calls stream.
SCENARIOS = (("plain", False), ("stream", True))


def early_option(argv: list[str], name: str, default: str) -> str:
    """An option read before argparse: the environment must be set before imports."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


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
        write_json(out / "traces.json", encode_spans_json(spans).to_dict())
        # An exporter sends no request for an empty batch: no logs, no logs files.
        if logs:
            (out / "logs.pb").write_bytes(encode_logs(logs).SerializeToString())
            write_json(out / "logs.json", encode_logs_json(logs).to_dict())
        return {"spans": len(spans), "logs": len(logs)}


def write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", "utf-8")


@contextlib.contextmanager
def agent_span(capture: Capture, provider: str) -> Iterator[None]:
    """An agent span around the tool loop, as agent frameworks write it: the calls under it
    share its trace, which is their session when nothing more explicit names one."""
    tracer = capture.tracer_provider.get_tracer("lithify.producers.agent")
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "weather-agent",
        "gen_ai.provider.name": provider,
    }
    with tracer.start_as_current_span(
        "invoke_agent weather-agent", kind=SpanKind.INTERNAL, attributes=attrs
    ):
        yield


def versions(*names: str) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = "missing"
    return out


def run_scenarios(
    *,
    capture: Capture,
    out: Path,
    manifest: dict[str, Any],
    fake: Callable[..., Any],
    play: Callable[[Any, str, bool], dict[str, Any] | None],
) -> None:
    """Run each scenario against a fresh fake provider, ``fake(id_prefix=scenario)``; write its
    capture and the provider's exchanges to ``out/<scenario>``, then ``out/manifest.json``:
    ``manifest``'s fields and ``scenarios``, the counts of each.

    ``play(provider, scenario, stream)`` drives the producer; what it returns joins the
    scenario's counts.
    """
    scenarios: dict[str, Any] = {}
    for scenario, stream in SCENARIOS:
        capture.clear()
        started = time.perf_counter()
        with fake(id_prefix=scenario) as provider:
            extra = play(provider, scenario, stream) or {}
        folder = out / scenario
        counts = capture.write(folder)
        provider.dump(folder / "exchanges.json")
        scenarios[scenario] = {
            **counts,
            "calls": len(provider.exchanges),
            **extra,
            "seconds": round(time.perf_counter() - started, 3),
        }
    write_json(out / "manifest.json", {**manifest, "scenarios": scenarios})
