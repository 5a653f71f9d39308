"""Ingest tokens: how they are made and hashed, and the cache a server checks bearer tokens
against (`lithify serve`, `lithify ui`)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable

TOKEN_PREFIX = "lith_"


def new_token() -> str:
    """A fresh ingest token: 256 random bits, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_prefix(token: str) -> str:
    return token[: len(TOKEN_PREFIX) + 6]


class TokenCache:
    """The store's token hashes, reloaded every few seconds (revocation takes effect then)."""

    def __init__(self, require: bool) -> None:
        self.require = require
        self.loaded = False
        self.configured = False  # any token ever created: auth stays on once it is
        self._live: list[tuple[bytes, str]] = []
        self.loaded_at = 0.0

    def load(self, rows: Iterable[tuple[str, str, bool]]) -> None:
        rows = list(rows)
        self._live = [(bytes.fromhex(h), name) for h, name, live in rows if live]
        self.configured = bool(rows)
        self.loaded = True
        self.loaded_at = time.monotonic()

    @property
    def required(self) -> bool:
        return self.require or self.configured

    def check(self, authorization: str | None) -> str | None:
        """The name of the token the header carries, if it is live; compared in constant time
        against every live token (no early exit)."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = hashlib.sha256(token.strip().encode("utf-8")).digest()
        found = None
        for h, name in self._live:
            if hmac.compare_digest(digest, h):
                found = name
        return found
