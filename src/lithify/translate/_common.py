"""What every translator shares: degradation counting, argument parsing, ids, finishing a fact."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections import Counter
from functools import lru_cache
from typing import Any

import msgspec

from lithify.core.hashing import dumps_canonical, stable_hash
from lithify.core.text import fix_text, loads
from lithify.core.times import (
    as_float,
)
from lithify.model import (
    BlobPart,
    FilePart,
    InferenceCall,
    Message,
    Part,
    Source,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    UriPart,
)
from lithify.translate.redact import CLEAN, ESCAPED, SUSPECT, redact_value, screen
from lithify.translate.sse import scrub_pieces, scrub_strings

# The OTel finish-reason values, and every provider spelling that maps onto one of them.
_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_call": "tool_call",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "error": "error",
    "eos": "stop",  # Together: the model emitted its end-of-sequence token
    # Anthropic
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_call",
    "max_tokens": "length",
    "refusal": "content_filter",
    "pause_turn": "pause_turn",
    # Gemini (string enums; integer enums are mapped by the Gemini translator)
    "finish_reason_unspecified": "finish_reason_unspecified",
    "safety": "content_filter",
    "recitation": "content_filter",
    "blocklist": "content_filter",
    "prohibited_content": "content_filter",
    "spii": "content_filter",
    "image_safety": "content_filter",
    "malformed_function_call": "error",
    "unexpected_tool_call": "error",
}


def finish_reason(value: Any) -> str | None:
    """Map a source finish reason to the OTel vocabulary; unknown values are kept, lower-cased."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        value = str(value)
    key = value.strip().lower()
    return _FINISH_REASONS.get(key, key)


def finish_reasons(value: Any) -> list[Any]:
    """A span's ``gen_ai.response.finish_reasons`` as a list: an array, or the JSON text of one
    (what a string-only attribute API makes of it). Any other string is one reason, kept as
    stated rather than dropped: text that only looks like JSON included."""
    if isinstance(value, str):
        if value.lstrip()[:1] == "[":
            try:
                parsed, _ = loads(value)
            except (ValueError, RecursionError):
                return [value]
            return parsed if isinstance(parsed, list) else [value]
        return [value]
    return value if isinstance(value, list) else []


def transport_times(meta: dict[str, Any]) -> dict[str, Any]:
    """``observed_at`` and ``duration_ms`` as the transport measured them (the recording proxy
    passes both in ``meta``); bad values are None."""
    duration = as_float(meta.get("duration_ms"))
    return {
        "observed_at": as_str(meta.get("observed_at")),
        "duration_ms": duration if duration is not None and duration >= 0 else None,
    }


def error_detail(error: Any) -> str:
    """A provider error's message, for a skip's detail: its ``message``, else its ``type`` or
    ``status`` (Anthropic, Gemini), else the whole error; 200 characters at most."""
    if isinstance(error, dict):
        msg = error.get("message") or error.get("type") or error.get("status")
        return str(msg or error)[:200]
    return str(error)[:200]


def as_str(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    return None


class Degradations(Counter[str]):
    """Per-fact counts of what could not be carried into canonical parts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Counter's own __init__ costs as much as the rest of a span's counting; an empty
        # counter needs nothing from it.
        if args or kwargs:
            super().__init__(*args, **kwargs)

    def add(self, reason: str, n: int = 1) -> None:
        if n:
            self[reason] += n


def json_value(value: str | bytes, deg: Degradations) -> Any:
    """JSON held in a value (a message attribute, tool-call arguments, a tool's parameters). A
    lone surrogate escape (half of a character) becomes U+FFFD, counted ``invalid_text``. Raises
    ValueError (or RecursionError) for what is not JSON."""
    parsed, invalid = loads(value)
    if invalid:
        parsed, n = fix_text(parsed)
        deg.add("invalid_text", n)
    return parsed


def parse_arguments(value: Any, deg: Degradations) -> dict[str, Any]:
    """Tool-call arguments as a JSON object; anything else is ``{}`` and counts as malformed."""
    if isinstance(value, dict):
        return value
    if value is None or value == "":
        return {}
    if isinstance(value, str | bytes):
        try:
            parsed = json_value(value, deg)
        except (ValueError, RecursionError):
            deg.add("malformed_arguments")
            return {}
        if isinstance(parsed, dict):
            return parsed
    deg.add("malformed_arguments")
    return {}


SYNTHESIZED = "lithify_"  # how a synthesized tool-call id begins


def synthesized_id(seed: str, *position: Any) -> str:
    """A deterministic tool-call id from the call's identity and the part's position."""
    return SYNTHESIZED + stable_hash(seed, *position)[:24]


def synthesized_call_id(source: str, name: str, args: Any, *position: Any) -> str:
    """The id of a tool call that came without one, from what the call is (name, arguments,
    place in its own turn) and never from the request around it, so that a response's call and
    its replay in a later request's history get the same id."""
    if not (isinstance(args, str) or args is None):
        try:
            args = dumps_canonical(args).decode()
        except (TypeError, RecursionError):  # the encoders refuse a few values
            args = "unencodable"
    return synthesized_id(source, name, args, *position)


def text_parts(text: Any, deg: Degradations | None = None) -> list[Part]:
    """A text part unless the text is empty (empty strings are dropped); with ``deg``, text
    that is not a string (a number, an object) counts ``malformed_messages``."""
    if isinstance(text, str):
        return [TextPart(text)] if text else []
    if deg is not None and text is not None:
        deg.add("malformed_messages")
    return []


def tool_call(id_: str, name: str, arguments: dict[str, Any]) -> ToolCallPart:
    return ToolCallPart(id=id_, name=name, arguments=arguments)


def modality_of(mime_type: str | None, default: str = "document") -> str:
    """``image``, ``audio`` or ``video`` from a MIME type's major type, else ``default``."""
    if mime_type:
        major = mime_type.partition("/")[0].strip().lower()
        if major in ("image", "audio", "video"):
            return major
    return default


def blob_part(
    data: str | bytes, mime_type: str | None, deg: Degradations, modality: str | None = None
) -> BlobPart | None:
    """Inline media as a canonical ``blob`` part: ``data`` is base64 text (standard or URL-safe
    alphabet, with or without padding and line breaks) or the bytes themselves. Base64 that does not decode is counted
    (``malformed_media``) and gives no part; the original stays on raw."""
    if isinstance(data, str):
        text = "".join(data.split())
        text += "=" * (-len(text) % 4)  # some producers leave the padding out
        try:
            # Standard or URL-safe alphabet (Gemini's SDKs write either), never a mix of both.
            urlsafe = ("-" in text or "_" in text) and not ("+" in text or "/" in text)
            alt = b"-_" if urlsafe else None
            raw = base64.b64decode(text, altchars=alt, validate=True)
        except (binascii.Error, ValueError):
            deg.add("malformed_media")
            return None
    else:
        raw = bytes(data)
    mime = mime_type or None
    return BlobPart(
        modality=modality or modality_of(mime),
        mime_type=mime,
        size=len(raw),
        sha256=hashlib.sha256(raw).hexdigest(),
        content=base64.b64encode(raw).decode("ascii"),
    )


def parse_data_url(url: str) -> tuple[str | None, str] | None:
    """``(mime_type, base64 payload)`` of a ``data:…;base64,…`` URL, else ``None``."""
    if not url.startswith("data:"):
        return None
    head, sep, payload = url[5:].partition(",")
    if not sep:
        return None
    params = head.split(";")
    if "base64" not in (p.strip().lower() for p in params[1:]):
        return None
    return (params[0].strip() or None), payload


def url_part(
    url: str, mime_type: str | None, deg: Degradations, modality: str | None = None
) -> BlobPart | UriPart | None:
    """A media URL as a part: a base64 data URL is a ``blob``; any other URL is a ``uri`` part,
    counted as ``content_reference`` (the bytes were not recorded)."""
    data = parse_data_url(url)
    if data is not None:
        return blob_part(data[1], mime_type or data[0], deg, modality)
    deg.add("content_reference")
    return UriPart(modality=modality or modality_of(mime_type), mime_type=mime_type, uri=url)


def file_part(
    file_id: str, mime_type: str | None, deg: Degradations, modality: str | None = None
) -> FilePart:
    """Content uploaded to the provider, recorded by id only (``content_reference``)."""
    deg.add("content_reference")
    return FilePart(
        modality=modality or modality_of(mime_type), mime_type=mime_type, file_id=file_id
    )


# The names calls of a built-in tool carry, where the definition has no ``name`` of its own
# (OpenAI Responses names its built-ins by ``type``; the translators name their calls so).
_BUILTIN_NAMES = {
    "computer_use_preview": "computer",
    "computer_use": "computer",
    "computer": "computer",
    "web_search_preview": "web_search",
    "web_search": "web_search",
}


def builtin_tool(obj: dict[str, Any], name: str | None = None) -> ToolDefinition | None:
    """A provider's built-in tool (``ToolDefinition.builtin``): named by ``name``, else the
    definition's own ``name``, else its ``type`` (a dated type, ``web_search_2025_08_26``, by its
    undated stem), or ``server_label`` for an MCP server; None when it has none of them."""
    if name is None:
        own = obj.get("name")
        kind = obj.get("type")
        if isinstance(own, str) and own:
            name = own
        elif isinstance(kind, str) and kind:
            stem = kind.rstrip("0123456789_")
            name = _BUILTIN_NAMES.get(kind) or _BUILTIN_NAMES.get(stem) or stem or kind
            if kind == "mcp" and isinstance(obj.get("server_label"), str):
                name = obj["server_label"]
    if not name:
        return None
    return ToolDefinition(name=name, description=None, parameters={}, builtin=obj)


# The parameters of an OpenAI custom (free-form) tool: its calls carry their text as
# ``{"input": text}`` (openai_common.freeform_arguments), so the definition says so.
FREEFORM_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
}
_SCHEMA_KEYS = ("parameters", "input_schema", "parameters_json_schema", "parametersJsonSchema")


def tool_definition(obj: Any, deg: Degradations) -> ToolDefinition | None:
    """One tool definition from the common shapes (OpenAI nested/flat, OTel, Anthropic, Gemini);
    a built-in tool (any other ``type``) is kept whole as ``builtin``. An OpenAI custom tool
    (Chat nests it under ``custom``) takes ``FREEFORM_PARAMETERS``; its grammar ``format`` has no
    JSON Schema form and counts ``unsupported_tool`` (it stays on raw)."""
    if not isinstance(obj, dict):
        deg.add("unsupported_tool")
        return None
    nested = obj.get("function") if obj.get("type") != "custom" else obj.get("custom")
    fn = nested if isinstance(nested, dict) else obj
    kind = obj.get("type")
    name = fn.get("name")
    if kind not in (None, "function", "custom") and fn is obj:
        builtin = builtin_tool(obj)
        if builtin is None:
            deg.add("unsupported_tool")
        return builtin
    if not isinstance(name, str):
        deg.add("unsupported_tool")
        return None
    params: Any = None
    for key in _SCHEMA_KEYS:
        if key in fn and fn[key] is not None:
            params = fn[key]
            break
    # Anthropic's custom tools carry input_schema; OpenAI's carry free text and no schema.
    if kind == "custom" and params is None:
        params = FREEFORM_PARAMETERS
        if fn.get("format") not in (None, {"type": "text"}):
            deg.add("unsupported_tool")
    if isinstance(params, str):
        try:
            params = json_value(params, deg)
        except (ValueError, RecursionError):
            params = None
    if not isinstance(params, dict):
        params = {}
    desc = fn.get("description")
    return ToolDefinition(
        name=name, description=desc if isinstance(desc, str) else None, parameters=params
    )


def merge_assistant_messages(messages: list[Message]) -> list[Message]:
    """Consecutive assistant messages that share a finish reason become one message, parts in order."""
    out: list[Message] = []
    for m in messages:
        if (
            out
            and m.role == "assistant"
            and out[-1].role == "assistant"
            and (m.finish_reason == out[-1].finish_reason or m.finish_reason is None)
        ):
            prev = out[-1]
            out[-1] = Message(prev.role, [*prev.parts, *m.parts], prev.finish_reason)
        else:
            out.append(m)
    return out


_CONTENT_FIELDS = ("input_messages", "output_messages", "tools", "request", "raw")


def _suspect(raw: Any, fields: dict[str, Any], assembled: bool = False) -> bool:
    """Whether the fact may hold a credential, from a screen of its encoded raw payload.

    Everything in a fact is derived from raw, so screening raw is enough, except for text that
    was decoded from raw (JSON inside JSON) or ``assembled`` from a stream's pieces (a key
    streamed as ``s`` and ``k-proj-…`` is in no event whole): then the content is screened too.
    """
    verdict = screen(msgspec.json.encode(raw))
    if verdict == ESCAPED or (assembled and verdict == CLEAN):
        content = [fields.get(k) for k in _CONTENT_FIELDS if k != "raw"]
        verdict = screen(msgspec.json.encode(content))
    return verdict == SUSPECT


def _valid_text(
    deg: Degradations, identity: tuple[Any, ...] | None, raw: Any, fields: dict[str, Any]
) -> tuple[tuple[Any, ...] | None, Any, dict[str, Any]]:
    """The identity, raw and fields with their text made valid (``core.text.fix_text``: the
    halves of a character joined again, each lone one U+FFFD), counted ``invalid_text`` once per
    string of the content, or of raw when only raw held it."""
    content, n = fix_text(msgspec.to_builtins(fields))
    fixed_raw, n_raw = fix_text(raw)
    deg.add("invalid_text", n or (0 if deg.get("invalid_text") else n_raw))
    typed = msgspec.convert(
        {"inference_call_id": "", "source": {"name": ""}, **content}, InferenceCall
    )
    if identity is not None:
        identity = tuple(fix_text(list(identity))[0])
    return identity, fixed_raw, {k: getattr(typed, k) for k in fields}


def valid_text(fact: InferenceCall) -> InferenceCall:
    """A fact with its text made valid: a stream whose pieces held the two halves of a character
    escaped apart (each piece's JSON decoded alone keeps its half) has them joined again."""
    try:
        msgspec.json.encode(fact)
        return fact  # valid already: the halves were escaped together, as a pair
    except UnicodeEncodeError:
        pass
    deg = Degradations(fact.degradations)
    fields = {
        f: getattr(fact, f) for f in fact.__struct_fields__ if f not in ("raw", "degradations")
    }
    _, raw, fields = _valid_text(deg, None, fact.raw, fields)
    return InferenceCall(**fields, raw=raw, degradations=dict(sorted(deg.items())))


def finish(
    *,
    source: str,
    deg: Degradations,
    identity: tuple[Any, ...] | None,
    raw: Any,
    screened: bool = False,
    assembled: bool = False,
    **fields: Any,
) -> InferenceCall:
    """Redact, count and identify a fact. ``identity`` None means: a hash of the redacted raw.

    ``screened`` says the bytes ``raw`` was decoded from were screened already and are clean
    (redact.CLEAN): nothing derived from them can hold a credential. ``assembled`` says the
    content was put together from a stream's pieces, which a screen of ``raw`` cannot vouch for.
    Identity fields (ids, session) are never redacted: only content and ``raw`` are.
    """
    return finish_fields(source, deg, identity, raw, screened, fields, assembled)


def finish_fields(
    source: str,
    deg: Degradations,
    identity: tuple[Any, ...] | None,
    raw: Any,
    screened: bool,
    fields: dict[str, Any],
    assembled: bool = False,
) -> InferenceCall:
    """``finish`` with the fact's other fields in a dict of the caller's (taken over, not
    copied): the span path calls it once per span, where keyword packing cost a tenth of it."""
    # The structured walk over content and raw runs only when something may match.
    try:
        clean = screened or not _suspect(raw, fields, assembled)
    except UnicodeEncodeError:  # lone surrogates, which no encoding takes: made valid first
        identity, raw, fields = _valid_text(deg, identity, raw, fields)
        clean = not _suspect(raw, fields, assembled)
    if clean:
        ident = identity if identity is not None else ("raw", dumps_canonical(raw).decode())
        return InferenceCall(
            inference_call_id=stable_hash(*ident),
            source=_source(source),
            raw=raw,
            degradations=dict(sorted(deg.items())) if deg else {},
            **fields,
        )
    call = InferenceCall(inference_call_id="", source=_source(source), raw=raw, **fields)
    counts: Counter[str] = Counter()
    data = msgspec.to_builtins(call)
    # What the content's walk replaced, to be found in raw where its walk cannot see it: a
    # key a model streamed a few characters an event (in no event whole), a credential-named
    # field inside JSON text (a call's arguments as sent).
    found: list[tuple[str, str]] = []
    for key in _CONTENT_FIELDS:
        noted = found if key != "raw" else None
        data[key] = redact_value(data[key], counts, under=key, found=noted)
    if found:
        raw = data["raw"]
        if assembled and isinstance(raw, dict) and isinstance(raw.get("response"), str | list):
            raw = {**raw, "response": scrub_pieces(raw["response"], found)}
        data["raw"] = scrub_strings(raw, found)
    call = msgspec.convert(data, InferenceCall)
    for reason, n in counts.items():
        deg.add(reason, n)
    ident = identity if identity is not None else ("raw", dumps_canonical(call.raw).decode())
    return msgspec.structs.replace(
        call,
        inference_call_id=stable_hash(*ident),
        degradations=dict(sorted(deg.items())),
    )


@lru_cache(maxsize=64)
def _source(name: str) -> Source:
    return Source(name)
