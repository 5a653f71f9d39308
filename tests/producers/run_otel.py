"""Producer: the official OTel GenAI OpenAI instrumentation (``opentelemetry-instrumentation-
openai-v2`` or its successor ``opentelemetry-instrumentation-genai-openai``), latest experimental
semconv, content captured on spans and on log events.

``--semconv default`` (openai-v2 only) runs openai-v2's own default path instead, without the
opt-in: semconv 1.30, a content-less chat span and one log event per message
(``gen_ai.user.message``, ``gen_ai.choice``, ...), content captured with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``. openai-v2 2.4b0 picks the path with
util-genai's ``is_experimental_mode()``, which util-genai 1.1b0 (pinned: 2.4b0 does not import
with 1.3b0) hard-wires to true; the script gives the instrumentation the rule its docstring states
(experimental only when the opt-in variable names ``gen_ai_latest_experimental``), so the code
that runs is the instrumentation's own legacy path, unchanged.

Usage (inside the producer venv): ``python run_otel.py OUT --instrumentation openai-v2
[--semconv default]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path


def _semconv_arg(argv: list[str]) -> str:
    """``--semconv``, read before argparse: the environment must be set before imports."""
    for i, arg in enumerate(argv):
        if arg == "--semconv" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--semconv="):
            return arg.split("=", 1)[1]
    return "latest"


# Read by the instrumentations when they load: set before importing them.
if _semconv_arg(sys.argv[1:]) == "default":
    os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
else:
    os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_and_event")

import harness  # noqa: E402  # aliases httpx to httpx2 before any instrumentation loads
from opentelemetry.trace import SpanKind  # noqa: E402

PACKAGES = {
    "openai-v2": ("opentelemetry-instrumentation-openai-v2", "opentelemetry-util-genai"),
    "genai-openai": ("opentelemetry-instrumentation-genai-openai", "opentelemetry-util-genai"),
}


def _opted_in() -> bool:
    """The mode rule openai-v2 documents: experimental only when opted in."""
    value = os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "")
    return "gen_ai_latest_experimental" in [v.strip() for v in value.split(",")]


def instrumentor(name: str, semconv: str = "latest") -> object:
    if name == "openai-v2":
        import opentelemetry.instrumentation.openai_v2 as openai_v2
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        if semconv == "default":
            openai_v2.is_experimental_mode = _opted_in  # type: ignore[attr-defined]
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
    p.add_argument("--semconv", choices=("latest", "default"), default="latest")
    args = p.parse_args()
    if args.semconv == "default" and args.instrumentation != "openai-v2":
        p.error("--semconv default: openai-v2 only")
    capture = harness.Capture(f"lithify-producer-{args.instrumentation}")
    inst = instrumentor(args.instrumentation, args.semconv)
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
