"""Text that is not valid Unicode, as JSON carries it: a lone surrogate escape (half of a
character: a stream cut between the two halves of an emoji, a string sliced in JavaScript) or,
in bytes, a sequence that is not UTF-8. orjson refuses both; the standard library keeps them as
lone surrogates, which ``fix_text`` then makes valid."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(data: bytes | str) -> tuple[Any, bool]:
    """(the JSON value, whether it may hold lone surrogates). What orjson refuses for its
    characters alone is read by the standard library (bytes that are not UTF-8 as lone
    surrogates too). Raises ValueError for what is not JSON, RecursionError for what is nested
    too deeply."""
    try:
        return orjson.loads(data), False
    except orjson.JSONDecodeError as e:
        if "surrogate" not in str(e) and "UTF-8" not in str(e):
            raise
    text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
    return json.loads(text, parse_constant=_no_constant), True


def fix_text(value: Any) -> tuple[Any, int]:
    """``value`` with its text made valid, and how many strings held a lone surrogate. Halves of
    a character that meet again (pieces of a stream joined) become the character; each one
    still alone becomes U+FFFD. Lists and dicts are copied only where something changed."""
    if type(value) is str:
        if _SURROGATE.search(value) is None:
            return value, 0
        fixed = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return fixed, int(fixed.count("\ufffd") > value.count("\ufffd"))
    if type(value) is list:
        items = [fix_text(x) for x in value]
        if any(x is not v for (x, _), v in zip(items, value, strict=True)):
            return [x for x, _ in items], sum(n for _, n in items)
    elif type(value) is dict:
        pairs = [(fix_text(k), fix_text(x)) for k, x in value.items()]
        if any(
            k is not k0 or x is not x0
            for ((k, _), (x, _)), (k0, x0) in zip(pairs, value.items(), strict=True)
        ):
            return {k: x for (k, _), (x, _) in pairs}, sum(a + b for (_, a), (_, b) in pairs)
    return value, 0
