"""`lithify serve` and `lithify token`: the OTLP/HTTP receiver and its ingest tokens."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the serve and token commands to the main app."""
