"""Producer: the official OTel GenAI OpenAI instrumentation (``opentelemetry-instrumentation-
openai-v2`` or its successor ``opentelemetry-instrumentation-genai-openai``), latest experimental
semconv, content captured on spans and on log events.

Usage (inside the producer venv): ``python run_otel.py OUT --instrumentation openai-v2``
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

# Read by the instrumentations when they load: set before importing them.
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_and_event")

import harness  # aliases httpx to httpx2 before any instrumentation loads
from opentelemetry.trace import SpanKind

PACKAGES = {
    "openai-v2": ("opentelemetry-instrumentation-openai-v2", "opentelemetry-util-genai"),
    "genai-openai": ("opentelemetry-instrumentation-genai-openai", "opentelemetry-util-genai"),
}


def instrumentor(name: str) -> object:
    if name == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    else:
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    return OpenAIInstrumentor()


@contextlib.contextmanager
def agent_span(capture: harness.Capture, scenario: str) -> Iterator[None]:
    """An agent span around the tool loop, as agent frameworks write it: the calls under it
    share its trace, which is their session when nothing more explicit names one."""
    tracer = capture.tracer_provider.get_tracer("lithify.producers.agent")
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "weather-agent",
        "gen_ai.provider.name": "openai",
    }
    with tracer.start_as_current_span(
        "invoke_agent weather-agent", kind=SpanKind.INTERNAL, attributes=attrs
    ):
        yield


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--instrumentation", choices=sorted(PACKAGES), required=True)
    args = p.parse_args()
    capture = harness.Capture(f"lithify-producer-{args.instrumentation}")
    inst = instrumentor(args.instrumentation)
    inst.instrument(  # type: ignore[attr-defined]
        tracer_provider=capture.tracer_provider, logger_provider=capture.logger_provider
    )
    harness.run(
        producer=args.instrumentation,
        out=args.out,
        packages=PACKAGES[args.instrumentation],
        wrap=agent_span,
        capture=capture,
    )


if __name__ == "__main__":
    main()
