"""Times as facts hold them: RFC 3339 UTC with nine fractional digits, fixed width, so that text
order is time order."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from lithify.core.values import as_float, as_int

__all__ = [
    "as_float",
    "as_int",
    "datetime_to_rfc3339",
    "fixed_rfc3339",
    "ns_to_rfc3339",
    "seconds_to_rfc3339",
]


def ns_to_rfc3339(ns: Any) -> str | None:
    """Nanoseconds since the epoch to a fixed-width RFC 3339 UTC string (sorts as text)."""
    if type(ns) is int and ns > 0:
        n = ns
    else:
        n = as_int(ns)
        if not n:
            return None
    secs, frac = divmod(n, 1_000_000_000)
    base = _second(secs)
    return None if base is None else f"{base}.{frac:09d}Z"


@lru_cache(maxsize=4096)
def _second(secs: int) -> str | None:
    try:
        return datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return None


def seconds_to_rfc3339(secs: Any) -> str | None:
    f = as_float(secs)
    if f is None or f <= 0:
        return None
    return ns_to_rfc3339(round(f * 1_000_000_000))


_RFC3339 = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})"
)


def fixed_rfc3339(text: Any) -> str | None:
    """An RFC 3339 timestamp (a protobuf Timestamp in JSON: Vertex ``createTime``) in the
    fact's fixed-width UTC form; None when it is not one."""
    m = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        return None
    offset = "+00:00" if m[4] in "Zz" else m[4]
    try:
        secs = int(datetime.fromisoformat(f"{m[1]}T{m[2]}{offset}").timestamp())
    except ValueError:  # a day or an hour out of range
        return None
    return ns_to_rfc3339(secs * 1_000_000_000 + int((m[3] or "0").ljust(9, "0")))


def datetime_to_rfc3339(t: datetime) -> str:
    """A datetime in the facts' fixed-width UTC form (a naive one is taken as UTC): what a
    time bound is compared as."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    t = t.astimezone(UTC)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond:06d}000Z"
