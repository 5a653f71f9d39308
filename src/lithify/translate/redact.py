"""Credential redaction: applied to every fact before it leaves a translator."""

from __future__ import annotations

import os
import re
from collections import Counter
from functools import lru_cache
from typing import Any

import ahocorasick_rs

MARKER = "[REDACTED]"

# Key names are compared after lower-casing, keeping the last dotted segment and mapping '-' to '_',
# so `http.request.header.x-api-key` and `X-Api-Key` both match `x_api_key`.
CREDENTIAL_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "x_api_key",
        "x_goog_api_key",
        "openai_api_key",
        "anthropic_api_key",
        "google_api_key",
        "gemini_api_key",
        "authorization",
        "proxy_authorization",
        "access_token",
        "refresh_token",
        "id_token",
        "auth_token",
        "session_token",
        "client_secret",
        "secret_key",
        "private_key",
        "password",
        "passwd",
    }
)

# The token must look like one (a digit, + or = anywhere, or mixed case: four upper-case letters
# after its first character), so prose ("the basic procedure", "basic JavaScript") is left alone.
_TOKEN = r"[A-Za-z0-9._~+/=-]"
_BEARER = (
    rf"(?i:bearer|basic)\s+(?={_TOKEN}*?[0-9+=]|{_TOKEN}(?:{_TOKEN}*?[A-Z]){{4}}){_TOKEN}{{8,}}"
)
_PROVIDER_KEY = (
    r"(?<![A-Za-z0-9])(?:sk-ant-[A-Za-z0-9_-]{16,}|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}"
    r"|AIza[0-9A-Za-z_-]{35})"
)
_PATTERN = re.compile(f"(?P<bearer>{_BEARER})|(?P<key>{_PROVIDER_KEY})")
# A screen in one pass (Aho-Corasick over case-folded bytes) for every needle a credential or a
# credential-named key must contain. Most facts hold none and skip the structured walk, whose
# regular expression costs far more per byte. A false positive only costs time.
_NEEDLES = [
    "sk-",
    "aiza",
    "bearer",
    "basic",
    "api_key",
    "api-key",
    "apikey",
    "authorization",
    "secret",
    "passw",
    "private_key",
    "private-key",
    *(f"{p}{sep}token" for p in ("access", "refresh", "id", "auth", "session") for sep in "_-"),
]
# The bytes screen also looks for JSON escapes: text decoded from these bytes (a message
# attribute holds JSON inside JSON) may spell a needle the bytes do not, `\u0073k-…`. Only the
# escapes of the characters needles are made of (letters, `-`, `_`, space: \u0020-\u007f) can,
# and encoders never write those, so matches stay rare (each costs a tuple) where the escapes of
# other characters (ensure_ascii text) are everywhere.
_ESCAPES = [f"\\u00{d}" for d in "24567"]


def _fold(text: str) -> bytes:
    """Bytes with the 0x20 bit set: ASCII letters fold to lower case in one vectorized OR, ten
    times cheaper than ``bytes.lower()``. Other bytes fold onto others too (`_` onto DEL, CR onto
    `-`, `\\` onto `|`): every spelling of a needle still matches, and a few other bytes match as
    well, which only costs a structured walk."""
    return bytes(b | 0x20 for b in text.encode())


# Only whether a needle occurs matters, and leftmost-first matching answers that as well as the
# standard kind does, with the prefilter the standard kind goes without (about 8x faster). The
# escapes share the automaton, and one pass costs what the needles alone do. A match of one
# never hides a match of the other: a folded escape begins with `|`, which no needle holds, and
# each of its tails begins with `u` or a digit, with which no needle begins.
_SCREEN_BYTES = ahocorasick_rs.BytesAhoCorasick(
    [_fold(n) for n in (*_NEEDLES, *_ESCAPES)],
    matchkind=ahocorasick_rs.MatchKind.LeftmostFirst,
    implementation=ahocorasick_rs.Implementation.DFA,
)
_N_NEEDLES = len(_NEEDLES)
_SCREEN_STR = ahocorasick_rs.AhoCorasick(
    _NEEDLES,
    matchkind=ahocorasick_rs.MatchKind.LeftmostFirst,
    implementation=ahocorasick_rs.Implementation.DFA,
)


CLEAN, ESCAPED, SUSPECT = 0, 1, 2


@lru_cache(maxsize=1)
def _numpy() -> Any:
    """numpy, imported on the first screen rather than with this module (every command imports
    this one, few screen). Its OpenBLAS pool would start a thread per core that spins between
    calls, taking CPU from the receiver's workers; one element-wise OR needs none of it."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy

    return numpy


def screen(data: bytes | bytearray | memoryview) -> int:
    """What a screen of JSON-encoded (or protobuf) bytes says.

    CLEAN: no needle and no escape, so neither the strings these bytes hold nor any text decoded
    from them can hold a credential. ESCAPED: no needle, but text decoded from them may spell one
    through an escape. SUSPECT: a needle occurs, the structured walk must look.
    """
    np = _numpy()
    folded = np.bitwise_or(np.frombuffer(data, np.uint8), 0x20)
    matches = _SCREEN_BYTES.find_matches_as_indexes(folded)
    if not matches:
        return CLEAN
    return SUSPECT if any(i < _N_NEEDLES for i, _, _ in matches) else ESCAPED


def may_hold_credentials(data: bytes) -> bool:
    """False means: certainly nothing to redact in these (JSON-encoded) bytes."""
    return screen(data) == SUSPECT


def _normalize_key(key: str) -> str:
    return key.rsplit(".", 1)[-1].lower().replace("-", "_")


def is_credential_key(key: str) -> bool:
    return _normalize_key(key) in CREDENTIAL_KEYS


def redact_string(text: str, counts: Counter[str]) -> str:
    if not _SCREEN_STR.find_matches_as_indexes(text.lower()):
        return text

    def repl(m: re.Match[str]) -> str:
        if m.group("bearer") is not None:
            counts["redacted_bearer_token"] += 1
            scheme = m.group("bearer").split(None, 1)[0]
            return f"{scheme} {MARKER}"
        counts["redacted_provider_key"] += 1
        return MARKER

    return _PATTERN.sub(repl, text)


def redact_value(value: Any, counts: Counter[str]) -> Any:
    """Return ``value`` with credentials replaced; containers are copied only when changed."""
    if isinstance(value, str):
        return redact_string(value, counts)
    if isinstance(value, dict):
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            if isinstance(k, str) and v not in (None, "") and is_credential_key(k):
                if v == MARKER:
                    continue
                nv: Any = MARKER
                reason = (
                    "redacted_authorization"
                    if _normalize_key(k) in ("authorization", "proxy_authorization")
                    else "redacted_credential_field"
                )
                counts[reason] += 1
            else:
                nv = redact_value(v, counts)
            if nv is not v:
                if out is None:
                    out = dict(value)
                out[k] = nv
        return value if out is None else out
    if isinstance(value, list):
        new: list[Any] | None = None
        for i, v in enumerate(value):
            nv = redact_value(v, counts)
            if nv is not v:
                if new is None:
                    new = list(value)
                new[i] = nv
        return value if new is None else new
    return value
