"""Numbers as facts hold them: a token count is a non-negative integer, a measure a finite float;
anything else a source sends in their place is None."""

from __future__ import annotations

import math
from typing import Any


def as_int(value: Any) -> int | None:
    """A token count or similar: non-negative integers only, else None (strings of digits allowed)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and value >= 0:
            return int(value)
        return None
    if isinstance(value, str):
        try:
            n = int(value.strip())
        except ValueError:
            return None
        return n if n >= 0 else None
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            f = float(value)
        except OverflowError:  # an integer beyond any float (a document decoded elsewhere)
            return None
        return f if math.isfinite(f) else None
    if isinstance(value, str):
        try:
            f = float(value.strip())
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None
