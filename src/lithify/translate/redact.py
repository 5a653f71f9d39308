"""Credential redaction: applied to every fact before it leaves a translator."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from functools import lru_cache
from typing import Any

import ahocorasick_rs
import orjson

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
# A JSON Schema holds names, not secrets: a tool's parameters name its arguments, a response
# format's schema names the fields of the answer, and either may have a property called
# `password`. Inside one, key names are not credentials (strings are still screened for key and
# token shapes). A schema is known by the keys on the way to it: `parameters` or `schema`
# anywhere else follows the key rule. The walk's mode is where it stands on such a way.
_PLAIN, _TOOLS, _TEXT, _OUTPUT, _FORMAT, _SCHEMA = range(6)
_FROM_PLAIN = {
    # Lists of tools: `tools`, `functions` (Chat's legacy list), Gemini's declarations.
    **dict.fromkeys(
        ("tools", "functions", "functiondeclarations", "function_declarations"), _TOOLS
    ),
    "text": _TEXT,  # Responses: text.format.schema
    "output_config": _OUTPUT,  # Anthropic: output_config.format.schema
    "output_format": _FORMAT,  # Anthropic's beta spelling: output_format.schema
    "response_format": _FORMAT,  # Chat: response_format.json_schema.schema (or .schema)
}
_STEPS: dict[int, dict[str, int]] = {
    _PLAIN: _FROM_PLAIN,
    # Within a tool definition: its parameter schema (Gemini's `response` is its result's).
    _TOOLS: dict.fromkeys(
        (
            "parameters",
            "input_schema",
            "parametersjsonschema",
            "parameters_json_schema",
            "response",
        ),
        _SCHEMA,
    ),
    _TEXT: {**_FROM_PLAIN, "format": _FORMAT},
    _OUTPUT: {**_FROM_PLAIN, "format": _FORMAT},
    _FORMAT: {**_FROM_PLAIN, "json_schema": _FORMAT, "schema": _SCHEMA},
}
# Gemini's response schemas (generationConfig, a declaration's result), wherever they sit.
_SCHEMA_KEYS = frozenset(
    {"responseschema", "response_schema", "responsejsonschema", "response_json_schema"}
)
# Opaque provider state (thinking signatures, encrypted reasoning and compaction, a Responses
# program item's replay fingerprint) is replayed verbatim, so it is never altered; base64 may
# spell `sk-` followed by key characters.
_OPAQUE_KEYS = frozenset(
    {
        "signature",
        "thoughtsignature",
        "thought_signature",
        "encrypted_content",
        "encryptedcontent",
        "fingerprint",
    }
)
# `data` is opaque only on these block types (elsewhere it may be anything).
_OPAQUE_DATA_TYPES = frozenset({"redacted_thinking", "reasoning.encrypted"})

# The token must look like one (a digit, + or = anywhere, or mixed case: four upper-case letters
# after its first character), so prose ("the basic procedure", "basic JavaScript") is left alone.
_TOKEN = r"[A-Za-z0-9._~+/=-]"
_BEARER = (
    rf"(?i:bearer|basic)\s+(?={_TOKEN}*?[0-9+=]|{_TOKEN}(?:{_TOKEN}*?[A-Z]){{4}}){_TOKEN}{{8,}}"
)
# A key starts where base64 and base64url data cannot continue (no letter, digit, `_`, `-`, `+`
# or `/` before it): inside a signature or an image's base64, `…_sk-N2AM…` is data, not a key.
_PROVIDER_KEY = (
    r"(?<![A-Za-z0-9_+/-])(?:sk-ant-[A-Za-z0-9_-]{16,}"
    r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{35,})"
)
# Credentials in URLs: the password of `scheme://user:password@host`, and the value of a query
# parameter named like a credential — Gemini's `?key=`, `api_key`, tokens, and the signatures
# and session tokens of signed URLs (S3, GCS, Azure SAS `sig`, CloudFront `Signature`), which
# grant access to whoever holds the URL. Counted as credential fields: the name says what it is.
_URL_PASSWORD = r"(?<=://)[^\s/?#@:\"'<>\\]*:(?P<password>[^\s/?#@\"'<>\\]+)(?=@)"
_QUERY_NAMES = (
    r"(?i:key|api[_-]?key|apikey|access[_-]token|refresh[_-]token|id[_-]token"
    r"|auth[_-]token|session[_-]token|token|client[_-]secret|password|secret|sig|signature"
    r"|x-amz-signature|x-amz-security-token|x-amz-credential|x-goog-signature"
    r"|x-goog-credential)="
)
_QUERY_CREDENTIAL = rf"(?<=[?&;]){_QUERY_NAMES}(?P<query>[^\s&#\"'<>\\]+)"
# Whether a text may hold a URL credential: from each `://`, that URL only. The screen below
# finds `://` in its one pass and runs this search only then (needles as common as `key=` in
# that pass made it three times slower).
_URL_CREDENTIAL = (
    r"://(?:[^\s/?#@:\"'<>\\]*:[^\s/?#@\"'<>\\]+@|[^\s\"'<>\\]{0,2000}?[?&;]" + _QUERY_NAMES + ")"
)
_URL_CREDENTIAL_STR = re.compile(_URL_CREDENTIAL)
_URL_CREDENTIAL_BYTES = re.compile(_URL_CREDENTIAL.encode())
_PATTERN = re.compile(
    f"(?P<bearer>{_BEARER})|{_URL_PASSWORD}|(?:{_QUERY_CREDENTIAL})|(?P<key>{_PROVIDER_KEY})"
)
# Media travels as base64: a 200 KB image spells `AIza` and 35 key characters with a real
# chance (~0.4% an image). A credential is never a run of 256 or more base64 characters, so a
# key shape that starts such a run is data; so is a whole string of base64 (on one line, or in
# lines of one width, as MIME and PEM break it) and a base64 data URL's payload.
_DATA_RUN = 256
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")
_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/]*={0,2}|[A-Za-z0-9_-]*={0,2}")
_BASE64_LINE = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_DATA_URL = re.compile(r"data:[^,]{0,200};base64,", re.IGNORECASE)
# JSON text (a stream's SSE text, a message attribute) holding an opaque field's value: a key
# shape right after it is the first characters of the blob.
_OPAQUE_VALUE_START = re.compile(
    r'\\?"(?:signature|thoughtSignature|thought_signature|encrypted_content|encryptedContent'
    r"|fingerprint)"
    r'\\?"\s*:\s*\\?"$'
)
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
    [_fold(n) for n in (*_NEEDLES, *_ESCAPES, "://")],
    matchkind=ahocorasick_rs.MatchKind.LeftmostFirst,
    implementation=ahocorasick_rs.Implementation.DFA,
)
_N_NEEDLES = len(_NEEDLES)
_URL = len(_NEEDLES) + len(_ESCAPES)  # the index of `://`, which no needle nor escape overlaps
_SCREEN_STR = ahocorasick_rs.AhoCorasick(
    _NEEDLES,
    matchkind=ahocorasick_rs.MatchKind.LeftmostFirst,
    implementation=ahocorasick_rs.Implementation.DFA,
)


CLEAN, ESCAPED, SUSPECT = 0, 1, 2


# Folding by a byte table costs no import, and is as fast as numpy's element-wise OR below
# about 2 KB; above, numpy is faster, 2.5x at 6 KB and 20x from 60 KB, but its import costs
# 100-200 ms, which a command converting a small file would pay for nothing. So the table folds
# until this process has screened a few MB (a server or a large conversion: then numpy pays).
_FOLD = bytes(b | 0x20 for b in range(256))
_TABLE_BELOW = 2048  # bytes: the table is never slower on these
_TABLE_UNTIL = 4 << 20  # bytes screened by the table before numpy takes the larger bodies
_screened_by_table = 0  # an estimate shared by threads: a lost update only delays the switch


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
    through an escape. SUSPECT: a needle occurs, or a URL with a password or a credential
    query parameter: the structured walk must look.
    """
    global _screened_by_table
    n = len(data)
    if n < _TABLE_BELOW or _screened_by_table + n < _TABLE_UNTIL:
        _screened_by_table += n
        folded: Any = bytes(data).translate(_FOLD)
    else:
        np = _numpy()
        folded = np.bitwise_or(np.frombuffer(data, np.uint8), 0x20)
    matches = _SCREEN_BYTES.find_matches_as_indexes(folded)
    found = {i for i, _, _ in matches}
    if min(found, default=_URL) < _N_NEEDLES:
        return SUSPECT
    if _URL in found:
        if _URL_CREDENTIAL_BYTES.search(data) is not None:
            return SUSPECT
        found.discard(_URL)
    return ESCAPED if found else CLEAN


def may_hold_credentials(data: bytes) -> bool:
    """False means: certainly nothing to redact in these (JSON-encoded) bytes."""
    return screen(data) == SUSPECT


@lru_cache(maxsize=4096)
def _normalize_key(key: str) -> str:
    return key.rsplit(".", 1)[-1].lower().replace("-", "_")


def _base64(text: str) -> bool:
    """Whether ``text`` is base64 too long for a credential: on one line, or broken into lines
    of one width of at least 60 (MIME's 76, PEM's 64)."""
    if len(text) < _DATA_RUN:
        return False
    if _BASE64_TEXT.fullmatch(text):
        return True
    lines = text.replace("\r\n", "\n").rstrip("\n").split("\n")
    width = len(lines[0])
    return (
        width >= 60
        and all(len(line) == width for line in lines[:-1])
        and len(lines[-1]) <= width
        and all(_BASE64_LINE.fullmatch(line) for line in lines)
    )


def redact_string(
    text: str, counts: Counter[str], found: list[tuple[str, str]] | None = None
) -> str:
    """``text`` with credentials replaced; ``found`` (when given) gets each provider key and
    token replaced, as it was and as it reads now."""
    if (
        not _SCREEN_STR.find_matches_as_indexes(text.lower())
        and _URL_CREDENTIAL_STR.search(text) is None
    ):
        return text
    if _base64(text):
        return text  # media, never a credential: a key shape in it is chance
    head = _DATA_URL.match(text)
    if head is not None and _base64(text[head.end() :]):
        return redact_string(text[: head.end()], counts, found) + text[head.end() :]

    def repl(m: re.Match[str]) -> str:
        if m.group("bearer") is not None:
            counts["redacted_bearer_token"] += 1
            scheme = m.group("bearer").split(None, 1)[0]
            return _found(found, m.group(), f"{scheme} {MARKER}")
        for group in ("password", "query"):
            if m.group(group) is not None:
                if m.group(group) == MARKER:
                    return m.group()
                counts["redacted_credential_field"] += 1
                start, end = m.span(group)
                return text[m.start() : start] + MARKER + text[end : m.end()]
        if _OPAQUE_VALUE_START.search(text, max(0, m.start() - 48), m.start()):
            return m.group()
        if _BASE64_RUN.match(text, m.start()).end() - m.start() >= _DATA_RUN:  # type: ignore[union-attr]
            return m.group()  # the start of base64 data (an image in SSE text, in JSON)
        counts["redacted_provider_key"] += 1
        return _found(found, m.group(), MARKER)

    return _PATTERN.sub(repl, text)


def _field_text(key: str, value: Any) -> list[tuple[str, str]]:
    """How a credential-named field reads in JSON text (a call's arguments as sent, a JSON
    attribute: where no walk of the structure sees it), compact and spaced, with its value and
    with the marker."""
    try:
        k, v = orjson.dumps(key).decode(), orjson.dumps(value).decode()
    except TypeError:  # a lone surrogate, an integer past 64 bits
        return []
    escaped = json.dumps(value)  # the standard library's ASCII form, where it differs
    marker = f'"{MARKER}"'
    return [
        (f"{k}{sep}{text}", f"{k}{sep}{marker}")
        for text in dict.fromkeys((v, escaped))
        for sep in (":", ": ")
    ]


def _found(found: list[tuple[str, str]] | None, was: str, now: str) -> str:
    if found is not None:
        found.append((was, now))
    return now


def redact_value(
    value: Any,
    counts: Counter[str],
    *,
    under: str | None = None,
    found: list[tuple[str, str]] | None = None,
) -> Any:
    """Return ``value`` with credentials replaced; containers are copied only when changed.
    ``under`` is the key the value sits under (``tools`` starts the tool-schema rule);
    ``found`` as for ``redact_string``."""
    return _redact(value, counts, _mode(_PLAIN, _normalize_key(under)) if under else _PLAIN, found)


def _credential(key: str) -> bool:
    """A key whose value is a credential: the listed names, and any ``*_api_key`` (a
    service's own key, ``langfuse_api_key`` or ``my_vendor_api_key``)."""
    return key in CREDENTIAL_KEYS or key.endswith("_api_key")


def _mode(mode: int, key: str) -> int:
    """The walk's mode below a key: inside a schema key names are not credentials; below a
    tool list the tool rule holds; elsewhere a key that leads nowhere starts over."""
    if mode == _SCHEMA or key in _SCHEMA_KEYS:
        return _SCHEMA
    return _STEPS[mode].get(key, _TOOLS if mode == _TOOLS else _PLAIN)


def _opaque(key: str, value: Any, parent: dict[Any, Any]) -> bool:
    if not isinstance(value, str):
        return False
    kind = parent.get("type") if key == "data" else None
    return key in _OPAQUE_KEYS or (isinstance(kind, str) and kind in _OPAQUE_DATA_TYPES)


def _redact(
    value: Any, counts: Counter[str], mode: int, found: list[tuple[str, str]] | None = None
) -> Any:
    if isinstance(value, str):
        return redact_string(value, counts, found)
    if isinstance(value, dict):
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            key = _normalize_key(k) if isinstance(k, str) else ""
            if mode != _SCHEMA and v not in (None, "") and _credential(key):
                if v == MARKER:
                    continue
                nv: Any = MARKER
                if found is not None and isinstance(k, str):
                    found += _field_text(k, v)
                reason = (
                    "redacted_authorization"
                    if key in ("authorization", "proxy_authorization")
                    else "redacted_credential_field"
                )
                counts[reason] += 1
            elif _opaque(key, v, value):
                continue
            else:
                nv = _redact(v, counts, _mode(mode, key), found)
            if nv is not v:
                if out is None:
                    out = dict(value)
                out[k] = nv
        return value if out is None else out
    if isinstance(value, list):
        new: list[Any] | None = None
        for i, v in enumerate(value):
            nv = _redact(v, counts, mode, found)
            if nv is not v:
                if new is None:
                    new = list(value)
                new[i] = nv
        return value if new is None else new
    return value
