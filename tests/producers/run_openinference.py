"""Producer: OpenInference's OpenAI instrumentation (``openinference-instrumentation-openai``),
default trace config (content on, OpenInference attributes only), the conversation inside
``using_session`` so every span carries ``session.id``.

Usage (inside the producer venv): ``python run_openinference.py OUT``
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path

import common
import harness  # aliases httpx to httpx2 before any instrumentation loads
from openinference.instrumentation import using_session
from openinference.instrumentation.openai import OpenAIInstrumentor

PACKAGES = (
    "openinference-instrumentation-openai",
    "openinference-instrumentation",
    "openinference-semantic-conventions",
)


def session_id(scenario: str) -> str:
    return f"weather-session-{scenario}"


@contextlib.contextmanager
def session(capture: common.Capture, scenario: str) -> Iterator[None]:
    with using_session(session_id(scenario)):
        yield


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    args = p.parse_args()
    capture = common.Capture("lithify-producer-openinference")
    OpenAIInstrumentor().instrument(tracer_provider=capture.tracer_provider)
    harness.run(
        producer="openinference",
        out=args.out,
        packages=PACKAGES,
        wrap=session,
        capture=capture,
    )


if __name__ == "__main__":
    main()
