"""Stable digests of values: the same values give the same 32 hex digits in any process, whatever
the key order of their objects (ids synthesized from content, segment ids)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson


def stable_hash(*parts: Any) -> str:
    """A 32-hex digest of values, stable across processes and key orders."""
    try:
        joined = "".join(parts)
    except TypeError:  # not all strings
        return _stable_hash(parts)
    if joined.isascii() and joined.isalnum():
        # Strings of letters and digits (ids, mostly), or empty: what dumps_canonical gives for
        # each is the string in quotes, written here without orjson.
        text = '"' + '"\x00"'.join(parts) + '"\x00'
        return hashlib.sha256(text.encode()).hexdigest()[:32]
    return _stable_hash(parts)


def _stable_hash(parts: tuple[Any, ...]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(dumps_canonical(p))
        h.update(b"\x00")
    return h.hexdigest()[:32]


def dumps_canonical(value: Any) -> bytes:
    """Sorted-key JSON for hashing. orjson refuses integers beyond 64 bits; the stdlib does not."""
    try:
        return orjson.dumps(
            value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str
        )
    except TypeError:
        text = json.dumps(
            value, sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":")
        )
        return text.encode("utf-8", "surrogatepass")
