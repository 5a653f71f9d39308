"""Producer: ``opentelemetry-instrumentation-openai-v2`` exporting LIVE over OTLP/HTTP with the
SDK's real exporters and batch processors, as an application does, to ENDPOINT (a running
``lithify serve`` in tests/serve).

The same spans and log records also go to common.py's in-memory exporters and are written as
OTLP files (``traces.pb`` …), so a test can convert exactly the telemetry that was sent.

Usage (inside .venv-producers-openai-v2 for protobuf, .venv-producers-openai-v2-json for JSON,
.venv-producers-openai-v2-grpc for OTLP/gRPC with ``--endpoint http://127.0.0.1:4317``):
``python run_export.py OUT --endpoint http://127.0.0.1:4318 [--encoding protobuf|json|grpc]
[--compression gzip] [--header Authorization=Bearer%20…] [--semconv default]
[--log-delay-ms N]``

``--semconv default``: openai-v2's default path (semconv 1.30, per-message log events), as
``run_otel.py --semconv default`` runs it.

``OUT/exports.json`` lists every export call the exporters made and its result.
"""

from __future__ import annotations

import argparse
import json
import threading
import urllib.parse
from pathlib import Path
from typing import Any

# run_otel sets the instrumentation's OTEL_* variables (from --semconv) before it loads.
from run_otel import agent_span, instrumentor  # isort: skip

import common
import harness  # aliases httpx to httpx2 before any instrumentation loads
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor


class Recorded:
    """Wraps an exporter: every export call and its result, for the test to check."""

    def __init__(self, inner: Any, signal: str, calls: list[dict[str, Any]]) -> None:
        self.inner = inner
        self.signal = signal
        self.calls = calls
        self.lock = threading.Lock()

    def export(self, batch: Any) -> Any:
        result = self.inner.export(batch)
        with self.lock:
            self.calls.append({"signal": self.signal, "items": len(batch), "result": result.name})
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def exporters(encoding: str, endpoint: str, headers: dict[str, str], compression: str) -> Any:
    if encoding == "grpc":  # OTLP/gRPC (protobuf): ENDPOINT is the gRPC port, no path
        import grpc
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (  # type: ignore[no-redef]
            OTLPLogExporter,
        )
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[no-redef]
            OTLPSpanExporter,
        )

        gz = grpc.Compression.Gzip if compression == "gzip" else grpc.Compression.NoCompression
        meta = tuple((k.lower(), v) for k, v in headers.items())
        return (
            OTLPSpanExporter(
                endpoint=endpoint, insecure=True, headers=meta, compression=gz, timeout=20
            ),
            OTLPLogExporter(
                endpoint=endpoint, insecure=True, headers=meta, compression=gz, timeout=20
            ),
        )
    if encoding == "protobuf":
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        comp: Any = Compression.Gzip if compression == "gzip" else Compression.NoCompression
    else:
        from opentelemetry.exporter.otlp.common.http import Compression as JsonCompression
        from opentelemetry.exporter.otlp.json.http._log_exporter import (  # type: ignore[no-redef]
            OTLPLogExporter,
        )
        from opentelemetry.exporter.otlp.json.http.trace_exporter import (  # type: ignore[no-redef]
            OTLPSpanExporter,
        )

        comp = JsonCompression.GZIP if compression == "gzip" else JsonCompression.NONE
    spans = OTLPSpanExporter(
        endpoint=f"{endpoint}/v1/traces", headers=headers, compression=comp, timeout=20
    )
    logs = OTLPLogExporter(
        endpoint=f"{endpoint}/v1/logs", headers=headers, compression=comp, timeout=20
    )
    return spans, logs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--encoding", choices=["protobuf", "json", "grpc"], default="protobuf")
    p.add_argument("--compression", choices=["none", "gzip"], default="none")
    p.add_argument("--header", action="append", default=[], help="KEY=VALUE (URL-encoded)")
    p.add_argument("--semconv", choices=("latest", "default"), default="latest")
    p.add_argument(
        "--log-delay-ms",
        type=int,
        default=60_000,
        help="the log processor's schedule delay; below a minute, the provider answers after "
        "three of them, so a call's input events leave before its choices",
    )
    args = p.parse_args()
    headers = {}
    for h in args.header:
        k, _, v = h.partition("=")
        headers[k] = urllib.parse.unquote(v)

    capture = common.Capture("lithify-producer-openai-v2-live")
    calls: list[dict[str, Any]] = []
    span_exporter, log_exporter = exporters(
        args.encoding, args.endpoint.rstrip("/"), headers, args.compression
    )
    # A long schedule delay: a scenario's spans leave in ONE request at its force_flush, the
    # batch the in-memory capture writes to files (an agent span and its calls must share an
    # export for the calls to take the agent's trace as their session).
    capture.tracer_provider.add_span_processor(
        BatchSpanProcessor(Recorded(span_exporter, "traces", calls), schedule_delay_millis=60_000)
    )
    capture.logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(
            Recorded(log_exporter, "logs", calls), schedule_delay_millis=args.log_delay_ms
        )
    )
    instrumentor("openai-v2", args.semconv).instrument(  # type: ignore[attr-defined]
        tracer_provider=capture.tracer_provider, logger_provider=capture.logger_provider
    )
    harness.run(
        producer=f"openai-v2-live-{args.encoding}",
        out=args.out,
        packages=("opentelemetry-instrumentation-openai-v2", "opentelemetry-util-genai"),
        wrap=agent_span,
        capture=capture,
        latency=3 * args.log_delay_ms / 1000 if args.log_delay_ms < 60_000 else 0.0,
    )
    capture.tracer_provider.shutdown()
    capture.logger_provider.shutdown()
    (args.out / "exports.json").write_text(json.dumps(calls, indent=2) + "\n")


if __name__ == "__main__":
    main()
