"""What the two OpenAI translators share: how an exchange starts and how it ends as a fact.

Chat Completions and Responses differ in their messages and streams (openai_chat.py,
openai_responses.py) but not in the rest: the request parameters kept, the session and timing
the transport knew, the raw form of a stream, the fields a fact takes from the response body.
Mistral's thinking chunks, a content form of Chat-compatible servers, are read here too, since
telling the Chat and Anthropic request shapes apart needs them (messages_format.py). So are the
media both APIs send the same way (Media below): inline data, file inputs, audio formats, the
media inside a tool's result.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes

import msgspec

from lithify.core.times import seconds_to_rfc3339
from lithify.core.values import as_float, as_int
from lithify.model import BlobPart, InferenceCall, Message, Part, Skip, ToolDefinition, UriPart
from lithify.translate._common import (
    Degradations,
    as_str,
    blob_part,
    file_part,
    finish,
    parse_data_url,
    text_parts,
    transport_times,
    url_part,
)
from lithify.translate.sse import SSEEvent, iter_events, raw_stream


class Api(msgspec.Struct, frozen=True):
    """Where one OpenAI API keeps the fields every exchange has."""

    name: str
    # Usage keys, the API's own spelling first (compatible servers send the other one).
    input_tokens: tuple[str, str]
    output_tokens: tuple[str, str]
    created: str
    # The body's end time: a duration when the transport measured none (None: the API has none).
    completed: str | None = None
    # The response echoes the request's metadata, where a session id may be.
    echoes_metadata: bool = False


# Later keys win: the newer spelling of the max-tokens parameter over the older one.
_PARAM_KEYS = (
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("max_tokens", "max_tokens"),
    ("max_completion_tokens", "max_tokens"),
    ("max_output_tokens", "max_tokens"),
    ("stop", "stop"),
    ("seed", "seed"),
    ("n", "n"),
    ("frequency_penalty", "frequency_penalty"),
    ("presence_penalty", "presence_penalty"),
    ("tool_choice", "tool_choice"),
    ("reasoning_effort", "reasoning_effort"),
)

_SESSION_HEADERS = ("lithify-session-id", "x-lithify-session-id")


def request_params(request: dict[str, Any] | None) -> dict[str, Any]:
    """The sampling parameters the request set (null means not set), keys sorted."""
    if request is None:
        return {}
    out: dict[str, Any] = {}
    for key, name in _PARAM_KEYS:
        if request.get(key) is not None:
            out[name] = request[key]
    reasoning = request.get("reasoning")
    if (
        "reasoning_effort" not in out
        and isinstance(reasoning, dict)
        and reasoning.get("effort") is not None
    ):
        out["reasoning_effort"] = reasoning["effort"]
    # The pre-tools API spelled tool_choice as function_call.
    if "tool_choice" not in out and request.get("function_call") is not None:
        out["tool_choice"] = request["function_call"]
    return dict(sorted(out.items()))


def _session_from_meta(meta: dict[str, Any]) -> str | None:
    sid = as_str(meta.get("session_id"))
    if sid:
        return sid
    headers = meta.get("headers")
    if isinstance(headers, dict):
        for k, v in headers.items():
            if isinstance(k, str) and k.lower() in _SESSION_HEADERS and as_str(v):
                return str(v)
    return None


def _metadata_session(body: dict[str, Any] | None) -> str | None:
    md = body.get("metadata") if body is not None else None
    return as_str(md.get("session_id")) if isinstance(md, dict) else None


def transport_fields(meta: dict[str, Any] | None, *bodies: dict[str, Any] | None) -> dict[str, Any]:
    """Provider, session and timing the transport knew, then what the bodies carry."""
    meta = meta if isinstance(meta, dict) else {}
    session = _session_from_meta(meta)
    for body in bodies:
        session = session or _metadata_session(body)
    return {
        "provider": as_str(meta.get("provider")) or "openai",
        "session_id": session,
        **transport_times(meta),
    }


def field(doc: Any, key: str = "type") -> str | None:
    """A string field of an object (a type or role tag), else None: tags of other types are
    unhashable or meaningless."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def content_parts(
    content: Any, deg: Degradations, part: Callable[[Any, Degradations], list[Part]]
) -> list[Part]:
    """A message's content as parts: a string is its text; an object, or each entry of a list,
    is read by ``part`` (each API has its own kinds); anything else is counted."""
    if content is None:
        return []
    if isinstance(content, str):
        return text_parts(content)
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        deg.add("unsupported_content")
        return []
    return [q for p in content for q in part(p, deg)]


def is_thinking_chunk(p: Any) -> bool:
    """Mistral's reasoning content chunk, ``{"type": "thinking", "thinking": [text chunks]}``
    (Anthropic's thinking block holds a string there, never a list)."""
    return field(p) == "thinking" and isinstance(p.get("thinking"), list)


def thinking_text(p: dict[str, Any]) -> str:
    return "".join(
        c["text"] for c in p["thinking"] if field(c) == "text" and isinstance(c.get("text"), str)
    )


# ---------------------------------------------------------------------------------------------
# Media
# ---------------------------------------------------------------------------------------------

# Audio formats as OpenAI names them (Chat ``input_audio.format`` and the request's
# ``audio.format``, Responses ``input_audio``) whose MIME type is not ``audio/<format>``.
_AUDIO_TYPES = {"mp3": "audio/mpeg"}
# File types by a file name's extension, for a file part's MIME type when nothing else gives one.
_FILE_TYPES = {
    "pdf": "application/pdf",
    "txt": "text/plain",
    "md": "text/markdown",
    "csv": "text/csv",
    "json": "application/json",
    "html": "text/html",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
}


def audio_mime(fmt: Any) -> str | None:
    """The MIME type of an audio format name: ``audio/<format>`` (``wav`` → ``audio/wav``,
    ``pcm16`` → ``audio/pcm16``), ``mp3`` → ``audio/mpeg``; None without a format."""
    name = fmt.strip().lower() if isinstance(fmt, str) else ""
    return (_AUDIO_TYPES.get(name) or f"audio/{name}") if name else None


def streamed_audio_part(pieces: list[str], mime: str | None, deg: Degradations) -> BlobPart | None:
    """A spoken answer streamed in base64 pieces (Chat's ``delta.audio.data``, Responses'
    ``response.audio.delta``) as one audio blob; none when the pieces hold no bytes. Pieces that
    do not decode give no part and count ``malformed_media``."""
    raw = _decode_pieces(pieces)
    if raw is None:
        deg.add("malformed_media")
        return None
    return blob_part(raw, mime, deg, "audio") if raw else None


def _decode_pieces(pieces: list[str]) -> bytes | None:
    """Streamed audio's bytes: each piece is base64 of its own (padded), as OpenAI sends them;
    failing that, the pieces are slices of one base64 text. None when neither decodes."""
    try:
        return b"".join(base64.b64decode("".join(p.split()), validate=True) for p in pieces)
    except (binascii.Error, ValueError):
        pass
    try:
        return base64.b64decode("".join("".join(pieces).split()), validate=True)
    except (binascii.Error, ValueError):
        return None


def filename_mime(name: Any) -> str | None:
    """The MIME type a file name's extension commonly means (``report.pdf``), else None."""
    if not isinstance(name, str) or "." not in name:
        return None
    return _FILE_TYPES.get(name.rpartition(".")[2].strip().lower())


def inline_part(
    data: str,
    deg: Degradations,
    *,
    modality: str | None = None,
    mime: str | None = None,
    default_mime: str | None = None,
) -> BlobPart | None:
    """Bytes sent inline, as a data URL or as bare base64, as a ``blob`` part. Its MIME type is
    ``mime`` when the caller knows it, else the data URL's, else ``default_mime``. A data URL
    that is not base64 (``data:text/plain,a%20b``) holds its bytes percent-encoded. Base64 that
    does not decode gives no part and counts ``malformed_media``."""
    if data.startswith("data:"):
        parsed = parse_data_url(data)
        if parsed is not None:
            return blob_part(parsed[1], mime or parsed[0] or default_mime, deg, modality)
        head, _, payload = data[5:].partition(",")
        declared = head.split(";")[0].strip() or None
        raw = unquote_to_bytes(payload)
        return blob_part(raw, mime or declared or default_mime, deg, modality)
    return blob_part(data, mime or default_mime, deg, modality)


def media_url_part(url: str, deg: Degradations, modality: str) -> BlobPart | UriPart | None:
    """A media URL (``image_url.url``, ``audio_url``, ``document_url``, a generated image): a
    data URL is a ``blob``, any other URL a ``uri`` part (``content_reference``)."""
    if url.startswith("data:"):
        return inline_part(url, deg, modality=modality)
    return url_part(url, None, deg, modality)


def file_input_part(f: Any, deg: Degradations) -> Part | None:
    """A file input (Chat ``{"type": "file", "file": {…}}``, Responses ``input_file``):
    ``file_data`` (a data URL, or bare base64) is a ``blob``, else ``file_url`` a ``uri`` part,
    else ``file_id`` a ``file`` part. The MIME type is the data URL's, else the one ``filename``
    implies; ``filename`` itself stays on raw. A PDF (or any type not image, audio or video) has
    modality ``document``. Without data, URL or id the entry counts ``malformed_messages``."""
    f = f if isinstance(f, dict) else {}
    guess = filename_mime(f.get("filename"))
    data, url, file_id = (as_str(f.get(k)) for k in ("file_data", "file_url", "file_id"))
    if data is not None:
        return inline_part(data, deg, default_mime=guess)
    if url is not None:
        if url.startswith("data:"):
            return inline_part(url, deg, default_mime=guess)
        return url_part(url, guess, deg)
    if file_id is not None:
        return file_part(file_id, guess, deg)
    deg.add("malformed_messages")
    return None


def tool_output(
    content: Any, deg: Degradations, media: Callable[[Any, Degradations], list[Part] | None]
) -> tuple[Any, list[Part]]:
    """A tool result and the media inside it. When the result is a list holding media entries
    (``media`` gives their parts; None for an entry that is not media), those entries become
    parts of their own, to follow the result's ``tool_call_response`` part, and the rest of the
    list, as given, is the result. Anything else is the result unchanged, with no media."""
    if not isinstance(content, list):
        return content, []
    rest: list[Any] = []
    parts: list[Part] = []
    found = False
    for entry in content:
        got = media(entry, deg)
        if got is None:
            rest.append(entry)
        else:
            found = True
            parts += got
    return (rest if found else content), parts


def freeform_arguments(value: Any, deg: Degradations) -> dict[str, Any]:
    """A custom (free-form) tool call's ``input`` as its arguments, ``{"input": text}``: the
    input is text (often in the tool's grammar), never parsed, even when it reads as JSON, so
    the call matches its definition's parameters (_common.FREEFORM_PARAMETERS). None is the
    empty input, as a stream that sent no input gives; input that is not text counts
    ``malformed_arguments``."""
    if value is None or isinstance(value, str):
        return {"input": value or ""}
    deg.add("malformed_arguments")
    return {}


class Exchange(msgspec.Struct):
    """One request and response as a translator starts from them."""

    request: Any  # as given, for raw
    req: dict[str, Any] | None
    events: list[SSEEvent] | None  # a streamed response's
    body: dict[str, Any] | None  # a plain response's
    raw_response: Any

    @classmethod
    def of(cls, request: Any, response: Any) -> Exchange:
        events = _as_events(response)
        body = response if isinstance(response, dict) else None
        return cls(
            request=request,
            req=request if isinstance(request, dict) else None,
            events=events,
            body=body,
            raw_response=body if events is None else raw_stream(events),
        )

    def fact(
        self,
        api: Api,
        body: dict[str, Any] | None,
        deg: Degradations,
        meta: dict[str, Any] | None,
        *,
        inputs: list[Message],
        outputs: list[Message],
        tools: list[ToolDefinition],
    ) -> InferenceCall | Skip:
        """The fact: the messages and tools the translator read, and what the response body
        (the plain one, or the one a stream was folded into) says about the call."""
        req = self.req
        body = body or {}
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        call_id = as_str(body.get("id"))
        model = as_str(body.get("model")) or (as_str(req.get("model")) if req is not None else None)
        bodies = (req, body) if api.echoes_metadata else (req,)
        transport = transport_fields(meta, *bodies)
        if api.completed is not None and transport["duration_ms"] is None:
            start, end = as_float(body.get(api.created)), as_float(body.get(api.completed))
            if start and end and end >= start:
                transport["duration_ms"] = (end - start) * 1000
        return _build(
            source=api.name,
            deg=deg,
            identity=(api.name, call_id) if call_id else None,
            raw={"request": self.request, "response": self.raw_response},
            assembled=self.events is not None,
            model=model,
            input_messages=inputs,
            output_messages=outputs,
            tools=tools,
            request=request_params(req),
            input_tokens=as_int(usage.get(api.input_tokens[0], usage.get(api.input_tokens[1]))),
            output_tokens=as_int(usage.get(api.output_tokens[0], usage.get(api.output_tokens[1]))),
            started_at=seconds_to_rfc3339(body.get(api.created)),
            model_call_id=call_id,
            **transport,
        )


def _as_events(response: Any) -> list[SSEEvent] | None:
    """The events of a streamed body (given as events or as SSE text), else None."""
    if isinstance(response, str):
        return list(iter_events(response))
    if isinstance(response, list):
        return [e for e in response if isinstance(e, SSEEvent)]
    return None


def _build(**fields: Any) -> InferenceCall | Skip:
    """``finish``, except that a payload too deeply nested for the encoders (orjson reads 1024
    levels; the encoders stop earlier) is a skip rather than an exception."""
    try:
        return finish(**fields)
    except (TypeError, RecursionError) as e:
        return Skip("undecodable", f"the payload cannot be encoded: {e}"[:200], fields["source"])
