"""openllmetry span attributes to canonical content (see docs/canonical.md)."""

from __future__ import annotations

from typing import Any

from lithify.translate._common import Degradations
from lithify.translate._telemetry import Content


def span_content(
    attrs: dict[str, Any], events: list[dict[str, Any]], deg: Degradations, seed: str
) -> Content | None:
    """The call's messages and tools if the span carries this convention's content, else None."""
    return None
