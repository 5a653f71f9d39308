"""OTel GenAI semantic conventions to canonical content: span attributes and log events."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lithify.model import InferenceCall, Skip
from lithify.translate._common import Degradations
from lithify.translate._telemetry import Content
from lithify.translate.otlp import LogRecord


def span_content(
    attrs: dict[str, Any], events: list[dict[str, Any]], deg: Degradations, seed: str
) -> Content | None:
    """The call's messages and tools if the span carries GenAI semconv content, else None."""
    return None


def log_facts(records: list[LogRecord]) -> Iterator[InferenceCall | Skip]:
    """Facts from GenAI log events of one batch, grouped by the span they belong to."""
    for _ in records:
        yield Skip("not_genai", "log record")
