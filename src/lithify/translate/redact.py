"""Credential redaction: applied to every fact before it leaves a translator."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

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

_BEARER = r"(?i:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"
_PROVIDER_KEY = (
    r"(?<![A-Za-z0-9])(?:sk-ant-[A-Za-z0-9_-]{16,}|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}"
    r"|AIza[0-9A-Za-z_-]{35})"
)
_PATTERN = re.compile(f"(?P<bearer>{_BEARER})|(?P<key>{_PROVIDER_KEY})")
# A cheap screen over encoded bytes: most facts hold no credential at all and skip the walk.
SCREEN = re.compile(
    rb"(?i:bearer|basic)\s|sk-|AIza|(?i:api[_-]?key|authorization|(?:access|refresh|id|auth|session)[_-]token"
    rb"|secret|passw|private[_-]key)"
)


def _normalize_key(key: str) -> str:
    return key.rsplit(".", 1)[-1].lower().replace("-", "_")


def is_credential_key(key: str) -> bool:
    return _normalize_key(key) in CREDENTIAL_KEYS


def redact_string(text: str, counts: Counter[str]) -> str:
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
