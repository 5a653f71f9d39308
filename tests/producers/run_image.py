"""Producer: one chat completion whose user message holds text, a PNG as a base64 data URL and
a second image by https URL, through an instrumentation that records media.

- ``--instrumentation genai-openai`` (default; inside .venv-producers-genai-openai-live):
  ``opentelemetry-instrumentation-genai-openai`` (an ``image_url`` data URL becomes a ``blob``
  part) exporting LIVE over OTLP/HTTP protobuf with the SDK's real exporters and batch
  processors to ``--endpoint`` (a running ``lithify serve``).
- ``--instrumentation openinference`` (inside .venv-producers-openinference, which has no OTLP
  exporter): ``openinference-instrumentation-openai`` (``message_content.image.image.url``),
  captured in memory and written as the files only.

Usage: ``python run_image.py OUT [--instrumentation NAME] [--endpoint URL]``

Writes ``OUT/image.png`` (the exact bytes sent), ``OUT/exports.json`` (every export call and its
result), and the same telemetry as OTLP files in ``OUT/image/`` (``traces.pb`` …) with the fake
provider's ``exchanges.json``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

# Read by the instrumentation when it loads: set before importing it.
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_and_event")

import common
import harness  # aliases httpx to httpx2 before any instrumentation loads
from fake_openai import FakeOpenAI
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from run_export import Recorded, exporters
from run_otel import agent_span

REMOTE_IMAGE = "https://example.com/photos/boardwalk.jpg"


def png(width: int = 4, height: int = 3) -> bytes:
    """A small valid PNG (RGB gradient), made with the standard library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 60, y * 80, 200)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--instrumentation", choices=["genai-openai", "openinference"])
    p.add_argument("--endpoint")
    args = p.parse_args()
    name = args.instrumentation or "genai-openai"

    from openai import OpenAI

    image = png()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "image.png").write_bytes(image)

    capture = common.Capture(f"lithify-producer-{name}-image")
    calls: list[dict[str, Any]] = []
    if name == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=capture.tracer_provider)
        packages: tuple[str, ...] = ("openinference-instrumentation-openai",)
    else:
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

        if not args.endpoint:
            p.error("genai-openai exports live: --endpoint is required")
        span_exporter, log_exporter = exporters("protobuf", args.endpoint.rstrip("/"), {}, "none")
        # One export request per signal, at the flush below (as run_export.py does).
        capture.tracer_provider.add_span_processor(
            BatchSpanProcessor(
                Recorded(span_exporter, "traces", calls), schedule_delay_millis=60_000
            )
        )
        capture.logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(
                Recorded(log_exporter, "logs", calls), schedule_delay_millis=60_000
            )
        )
        OpenAIInstrumentor().instrument(
            tracer_provider=capture.tracer_provider, logger_provider=capture.logger_provider
        )
        packages = ("opentelemetry-instrumentation-genai-openai", "opentelemetry-util-genai")
    data_url = "data:image/png;base64," + base64.b64encode(image).decode()
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these pictures?"},
                {"type": "image_url", "image_url": {"url": data_url}},
                {"type": "image_url", "image_url": {"url": REMOTE_IMAGE, "detail": "low"}},
            ],
        }
    ]
    with FakeOpenAI(id_prefix="image") as fake:
        client = OpenAI(
            base_url=fake.base_url, api_key="sk-test-not-a-real-key-0000", max_retries=0
        )
        with agent_span(capture, "image"):
            client.chat.completions.create(
                model=harness.REQUEST_MODEL, messages=messages, **common.SAMPLING
            )
        client.close()
    counts = capture.write(args.out / "image")
    fake.dump(args.out / "image" / "exchanges.json")
    capture.tracer_provider.shutdown()
    capture.logger_provider.shutdown()
    (args.out / "exports.json").write_text(json.dumps(calls, indent=2) + "\n")
    manifest = {
        "producer": f"{name}-image",
        "versions": common.versions("openai", *packages),
        "counts": counts,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main()
