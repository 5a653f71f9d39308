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
from pathlib import Path
from typing import Any

import common  # imports no instrumentation: the environment below is still read when they load

# Read by the instrumentations when they load: set before importing them.
if common.early_option(sys.argv[1:], "--semconv", "latest") == "default":
    os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
else:
    os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_and_event")

import harness  # aliases httpx to httpx2 before any instrumentation loads

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


def agent_span(capture: common.Capture, scenario: str) -> contextlib.AbstractContextManager[Any]:
    """common.py's agent span, for an OpenAI agent (harness.run's ``wrap``)."""
    return common.agent_span(capture, "openai")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--instrumentation", choices=sorted(PACKAGES), required=True)
    p.add_argument("--semconv", choices=("latest", "default"), default="latest")
    args = p.parse_args()
    if args.semconv == "default" and args.instrumentation != "openai-v2":
        p.error("--semconv default: openai-v2 only")
    capture = common.Capture(f"lithify-producer-{args.instrumentation}")
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
