"""OTel GenAI media and server-tool parts (docs/canonical.md, Parts beyond v1;
docs/sources/otel-genai.md, Parts): ``blob``, ``file``, ``uri``, ``server_tool_call`` and
``server_tool_call_response`` in every form the conventions carry them, and the OpenAI-style
content lists of the older forms. Expected hashes are computed here from the bytes the test
chose, never read back from the translator.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from lithify.model import (
    BlobPart,
    FilePart,
    InferenceCall,
    Message,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    UriPart,
)
from lithify.translate import genai, translate_protobuf
from lithify.translate._common import Degradations
from lithify.translate.otlp import LogRecord, Span
from lithify.translate.telemetry import translate_span
from tests.helpers import assert_valid_messages
from tests.otlp_values import pb_attrs, pb_value

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"
T0 = 1_760_000_000_000_000_000
BASE = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(range(40))
PNG_B64 = base64.b64encode(PNG).decode()
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(20)


def _dumps(v: Any) -> str:
    return orjson.dumps(v).decode()


def fact(attrs: dict[str, Any], events: list[dict[str, Any]] | None = None) -> InferenceCall:
    span = Span(TRACE, SPAN, None, "chat", 3, T0, T0 + 5_000_000, attrs, events or [])
    result = translate_span(span)
    assert isinstance(result, InferenceCall), result
    assert_valid_messages(result)
    return result


def spanned(input: Any = None, output: Any = None) -> InferenceCall:
    attrs = dict(BASE)
    if input is not None:
        attrs[genai.INPUT] = _dumps(input)
    if output is not None:
        attrs[genai.OUTPUT] = _dumps(output)
    return fact(attrs)


def blob(data: bytes, mime: str | None, modality: str) -> BlobPart:
    """The canonical blob of ``data``, computed independently of the translator."""
    return BlobPart(
        modality=modality,
        mime_type=mime,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        content=base64.b64encode(data).decode(),
    )


def both_paths(attrs: dict[str, Any]) -> tuple[Any, dict[str, int]]:
    """The content of the fast and the general path, which must agree."""
    fast, general = Degradations(), Degradations()
    a = genai._attribute_content(attrs, fast, "t:s", fast=True)
    b = genai._attribute_content(attrs, general, "t:s", fast=False)
    assert (a, dict(fast)) == (b, dict(general))
    return a, dict(fast)


# ---------------------------------------------------------------------------------------------
# the v1.37+ parts


def test_blob_part_becomes_a_canonical_blob() -> None:
    f = spanned(
        input=[
            {
                "role": "user",
                "parts": [
                    {"type": "text", "content": "What is this?"},
                    {
                        "type": "blob",
                        "modality": "image",
                        "mime_type": "image/png",
                        "content": PNG_B64,
                    },
                ],
            }
        ]
    )
    assert f.input_messages == [
        Message("user", [TextPart("What is this?"), blob(PNG, "image/png", "image")], None)
    ]
    assert f.degradations == {}


def test_blob_content_is_canonical_base64_whatever_the_spelling() -> None:
    wrapped = "\n".join(PNG_B64[i : i + 16] for i in range(0, len(PNG_B64), 16))
    f = spanned(
        input=[
            {"role": "user", "parts": [{"type": "blob", "modality": "image", "content": wrapped}]}
        ]
    )
    assert f.input_messages[0].parts == [blob(PNG, None, "image")]


def test_modality_is_normalised_and_mime_type_kept() -> None:
    parts = [
        {"type": "blob", "modality": "IMAGE", "mime_type": "image/png", "content": PNG_B64},
        # a modality outside the four: the MIME type's, else document
        {"type": "blob", "modality": "pdf", "mime_type": "application/pdf", "content": "JVBERg=="},
        {"type": "blob", "modality": "sound", "mime_type": "audio/wav", "content": "UklGRg=="},
        {"type": "blob", "modality": "video", "mime_type": "image/gif", "content": "R0lG"},
    ]
    content, deg = both_paths({genai.INPUT: _dumps([{"role": "user", "parts": parts}])})
    assert content.input_messages[0].parts == [
        blob(PNG, "image/png", "image"),
        blob(b"%PDF", "application/pdf", "document"),
        blob(b"RIFF", "audio/wav", "audio"),
        blob(b"GIF", "image/gif", "video"),  # the source said video: kept
    ]
    assert deg == {}


def test_file_and_uri_parts_are_references() -> None:
    parts = [
        {"type": "file", "modality": "image", "mime_type": "image/png", "file_id": "file-abc"},
        {"type": "uri", "modality": "video", "uri": "gs://bucket/clip.mp4"},
        {"type": "uri", "modality": "image", "mime_type": None, "uri": "https://x.test/y.png"},
    ]
    content, deg = both_paths({genai.INPUT: _dumps([{"role": "user", "parts": parts}])})
    assert content.input_messages[0].parts == [
        FilePart("image", "image/png", "file-abc"),
        UriPart("video", None, "gs://bucket/clip.mp4"),
        UriPart("image", None, "https://x.test/y.png"),
    ]
    assert deg == {"content_reference": 3}


def test_a_data_url_in_a_uri_part_is_a_blob() -> None:
    parts = [{"type": "uri", "modality": "image", "uri": f"data:image/png;base64,{PNG_B64}"}]
    content, deg = both_paths({genai.INPUT: _dumps([{"role": "user", "parts": parts}])})
    assert content.input_messages[0].parts == [blob(PNG, "image/png", "image")]
    assert deg == {}  # the bytes are here: no content_reference


def test_media_without_data_or_with_bad_base64_is_counted_not_kept() -> None:
    parts = [
        {"type": "blob", "modality": "image", "content": "not base64!"},
        {"type": "blob", "modality": "image", "content": ""},
        {"type": "file", "modality": "image", "file_id": ""},
        {"type": "uri", "modality": "image", "uri": ""},
        {"type": "blob", "modality": "image"},
        {"type": "text", "content": "kept"},
    ]
    content, deg = both_paths({genai.INPUT: _dumps([{"role": "user", "parts": parts}])})
    assert content.input_messages == [Message("user", [TextPart("kept")], None)]
    assert deg == {"malformed_media": 5}


def test_server_tool_parts_stay_in_the_assistant_message_in_order() -> None:
    call = {"type": "web_search", "query": "weather in Paris"}
    result = {"type": "web_search", "results": [{"url": "https://w.test", "title": "W"}]}
    output = [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Let me look."},
                {
                    "type": "server_tool_call",
                    "id": "ws_1",
                    "name": "web_search",
                    "server_tool_call": call,
                },
                {
                    "type": "server_tool_call_response",
                    "id": "ws_1",
                    "server_tool_call_response": result,
                },
                {"type": "text", "content": "It is sunny."},
            ],
            "finish_reason": "stop",
        }
    ]
    content, deg = both_paths({genai.OUTPUT: _dumps(output)})
    assert content.output_messages == [
        Message(
            "assistant",
            [
                TextPart("Let me look."),
                ServerToolCallPart("ws_1", "web_search", call),
                ServerToolCallResponsePart("ws_1", result),
                TextPart("It is sunny."),
            ],
            "stop",
        )
    ]
    assert deg == {}


def test_server_tool_parts_without_an_id_or_a_typed_body() -> None:
    parts = [
        {"type": "server_tool_call", "name": "code_execution", "server_tool_call": {"type": "x"}},
        {
            "type": "server_tool_call_response",
            "id": None,
            "server_tool_call_response": {"type": "x"},
        },
        {"type": "server_tool_call", "name": "n", "server_tool_call": {"no": "type"}},
        {"type": "server_tool_call_response", "server_tool_call_response": "text"},
    ]
    content, deg = both_paths({genai.OUTPUT: _dumps([{"role": "assistant", "parts": parts}])})
    assert content.output_messages[0].parts == [
        ServerToolCallPart(None, "code_execution", {"type": "x"}),
        ServerToolCallResponsePart(None, {"type": "x"}),
    ]
    assert deg == {"unsupported_content": 2}


def test_media_a_tool_returned_stays_in_its_tool_message() -> None:
    inputs = [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "screenshot", "arguments": {}}],
        },
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "c1", "response": "captured"},
                {"type": "blob", "modality": "image", "mime_type": "image/png", "content": PNG_B64},
            ],
        },
    ]
    content, deg = both_paths({genai.INPUT: _dumps(inputs)})
    assert content.input_messages == [
        Message("assistant", [ToolCallPart("c1", "screenshot", {})], None),
        Message(
            "tool",
            [ToolCallResponsePart("c1", "captured"), blob(PNG, "image/png", "image")],
            None,
        ),
    ]
    assert deg == {}


def test_media_in_a_user_turn_with_results_stays_with_the_user() -> None:
    inputs = [
        {
            "role": "user",
            "parts": [
                {"type": "tool_call_response", "id": "c1", "response": "ok"},
                {"type": "blob", "modality": "image", "content": PNG_B64},
            ],
        }
    ]
    content, _ = both_paths({genai.INPUT: _dumps(inputs)})
    assert content.input_messages == [
        Message("tool", [ToolCallResponsePart("c1", "ok")], None),
        Message("user", [blob(PNG, None, "image")], None),
    ]


def test_media_parts_take_the_fast_path() -> None:
    parts = [
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": PNG_B64},
        {"type": "uri", "modality": "image", "uri": "https://x.test/a.png"},
        {"type": "file", "modality": "audio", "file_id": "f"},
        {"type": "server_tool_call", "id": "s", "name": "n", "server_tool_call": {"type": "t"}},
    ]
    attrs = {genai.INPUT: _dumps([{"role": "user", "parts": parts}])}
    assert genai._fast_content(attrs, Degradations()) is not None


def test_a_fact_without_media_is_unchanged_by_the_media_parts() -> None:
    """Adding a media part adds that part and nothing else: the other parts and the id stay."""
    text_only = [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
    with_media = [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "hi"},
                {"type": "blob", "modality": "image", "content": PNG_B64},
            ],
        }
    ]
    a, b = spanned(input=text_only), spanned(input=with_media)
    assert a.inference_call_id == b.inference_call_id  # span identity
    assert b.input_messages[0].parts[:1] == a.input_messages[0].parts


# ---------------------------------------------------------------------------------------------
# structured AnyValues: the operation.details log event, bytes as bytes


def test_operation_details_log_event_with_bytes_content() -> None:
    """A structured ``gen_ai.input.messages`` whose blob content is an OTLP bytes value."""
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    sl = rl.scope_logs.add()
    rec = sl.log_records.add()
    rec.time_unix_nano = T0
    rec.event_name = genai.OPERATION_DETAILS
    rec.trace_id = bytes.fromhex(TRACE)
    rec.span_id = bytes.fromhex(SPAN)
    messages = [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "Transcribe."},
                {"type": "blob", "modality": "audio", "mime_type": "audio/wav", "content": WAV},
            ],
        }
    ]
    rec.attributes.extend(pb_attrs({**BASE, genai.INPUT: messages}))
    rec.body.CopyFrom(pb_value(None))
    results = list(translate_protobuf(req.SerializeToString(), "logs"))
    assert len(results) == 1 and isinstance(results[0], InferenceCall), results
    f = results[0]
    assert_valid_messages(f)
    assert f.input_messages == [
        Message("user", [TextPart("Transcribe."), blob(WAV, "audio/wav", "audio")], None)
    ]


# ---------------------------------------------------------------------------------------------
# the older forms: per-message events and gen_ai.prompt, with OpenAI-style content lists


def test_per_message_events_with_openai_media_content() -> None:
    content = [
        {"type": "text", "text": "Listen and look."},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        {
            "type": "input_audio",
            "input_audio": {"data": base64.b64encode(WAV).decode(), "format": "wav"},
        },
        {"type": "file", "file": {"file_id": "file-9"}},
    ]
    records = [
        LogRecord(
            time_unix_nano=T0,
            observed_time_unix_nano=None,
            severity_number=9,
            trace_id=TRACE,
            span_id=SPAN,
            event_name="gen_ai.user.message",
            attributes={"gen_ai.system": "openai"},
            body={"content": content},
        ),
        LogRecord(
            time_unix_nano=T0 + 1,
            observed_time_unix_nano=None,
            severity_number=9,
            trace_id=TRACE,
            span_id=SPAN,
            event_name="gen_ai.choice",
            attributes={"gen_ai.system": "openai"},
            body={"index": 0, "finish_reason": "stop", "message": {"content": "A cat purring."}},
        ),
    ]
    (f,) = genai.log_facts(records)
    assert isinstance(f, InferenceCall), f
    assert_valid_messages(f)
    assert f.input_messages == [
        Message(
            "user",
            [
                TextPart("Listen and look."),
                blob(PNG, "image/png", "image"),
                blob(WAV, "audio/wav", "audio"),
                FilePart("document", None, "file-9"),
            ],
            None,
        )
    ]
    assert f.degradations == {"content_reference": 1}


def test_prompt_span_event_with_anthropic_image_blocks() -> None:
    prompt = [
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                },
                {"type": "image", "source": {"type": "url", "url": "https://x.test/b.jpg"}},
                {
                    "type": "document",
                    "source": {
                        "type": "base64",
                        "media_type": "application/pdf",
                        "data": "JVBERg==",
                    },
                },
                {"type": "text", "text": "Compare."},
            ],
        }
    ]
    events = [
        {
            "name": "gen_ai.content.prompt",
            "time_unix_nano": T0,
            "attributes": {"gen_ai.prompt": _dumps(prompt)},
        }
    ]
    f = fact(dict(BASE), events)
    assert f.input_messages == [
        Message(
            "user",
            [
                blob(PNG, "image/png", "image"),
                UriPart("image", None, "https://x.test/b.jpg"),
                blob(b"%PDF", "application/pdf", "document"),
                TextPart("Compare."),
            ],
            None,
        )
    ]
    assert f.degradations == {"content_reference": 1}


# ---------------------------------------------------------------------------------------------
# property: random media round-trip with the right size and hash, on both paths

MIMES = st.sampled_from(
    [None, "image/png", "image/jpeg", "audio/wav", "audio/mpeg", "video/mp4", "application/pdf"]
)
MODALITIES = st.sampled_from(["image", "audio", "video", "document", "Image", "other"])


@st.composite
def media(draw: Any) -> tuple[dict[str, Any], bytes, str | None]:
    data = draw(st.binary(min_size=1, max_size=300))
    mime = draw(MIMES)
    b64 = base64.b64encode(data).decode()
    if draw(st.booleans()):
        part: dict[str, Any] = {"type": "blob", "modality": draw(MODALITIES), "content": b64}
        if mime is not None or draw(st.booleans()):
            part["mime_type"] = mime
        return part, data, mime
    # a data URL in a uri part: the URL's MIME type unless the part gives one
    url_mime = draw(MIMES)
    part = {
        "type": "uri",
        "modality": draw(MODALITIES),
        "uri": f"data:{url_mime or ''};base64,{b64}",
    }
    if mime is not None:
        part["mime_type"] = mime
    return part, data, mime or url_mime


def _expected_modality(stated: str, mime: str | None) -> str:
    if stated.lower() in ("image", "audio", "video", "document"):
        return stated.lower()
    major = (mime or "").split("/")[0]
    return major if major in ("image", "audio", "video") else "document"


@given(
    st.lists(media(), min_size=1, max_size=4),
    st.sampled_from(["user", "assistant", "system"]),
)
def test_random_media_round_trip_to_blobs(items: list[Any], role: str) -> None:
    parts = [p for p, _, _ in items]
    attrs = {**BASE, genai.INPUT: _dumps([{"role": role, "parts": parts}])}
    content, deg = both_paths(attrs)
    assert deg == {}
    (msg,) = content.input_messages
    assert len(msg.parts) == len(items)
    for got, (part, data, mime) in zip(msg.parts, items, strict=True):
        assert isinstance(got, BlobPart)
        assert got.size == len(data)
        assert got.sha256 == hashlib.sha256(data).hexdigest()
        assert base64.b64decode(got.content, validate=True) == data
        assert got.mime_type == mime
        assert got.modality == _expected_modality(part["modality"], mime)
    f = fact(attrs)
    assert f.input_messages == content.input_messages


ODD = st.sampled_from(["", "x", None, 3, {"type": "t"}, {"a": 1}, PNG_B64, "data:;base64,AA=="])


@st.composite
def odd_media_part(draw: Any) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(["blob", "file", "uri", "server_tool_call", "server_tool_call_response"])
    )
    p: dict[str, Any] = {"type": kind}
    for key in ("modality", "mime_type", "content", "file_id", "uri", "id", "name", kind, "extra"):
        if draw(st.booleans()):
            p[key] = draw(ODD | MODALITIES | MIMES)
    return p


@given(st.lists(odd_media_part(), max_size=5), st.sampled_from(["user", "tool", "assistant"]))
def test_any_media_part_gives_the_same_fact_on_both_paths(parts: list[Any], role: str) -> None:
    attrs = {**BASE, genai.INPUT: _dumps([{"role": role, "parts": parts}])}
    content, deg = both_paths(attrs)
    for m in content.input_messages:
        for got in m.parts:
            if isinstance(got, BlobPart):
                raw = base64.b64decode(got.content, validate=True)
                assert (got.size, got.sha256) == (len(raw), hashlib.sha256(raw).hexdigest())
    # an OpenAI file entry without data, URL or id counts as the OpenAI translators count it
    allowed = {"malformed_media", "content_reference", "unsupported_content", "malformed_messages"}
    assert set(deg) <= allowed
    assert_valid_messages(fact(attrs))


def test_a_tool_result_in_system_instructions_is_a_tool_message() -> None:
    """Found by the attribute property: a result among the system instructions was left in the
    system message; a result always lives in a tool message, on both paths."""
    system = [
        {"type": "text", "content": "Be brief."},
        {"type": "tool_call_response", "id": "c1", "response": "42"},
    ]
    content, deg = both_paths({genai.SYSTEM: _dumps(system)})
    assert content.input_messages == [
        Message("tool", [ToolCallResponsePart("c1", "42")], None),
        Message("system", [TextPart("Be brief.")], None),
    ]
    assert deg == {}


def test_a_non_base64_data_url_holds_its_bytes_percent_encoded() -> None:
    parts = [{"type": "uri", "modality": "document", "uri": "data:text/plain,a%20b"}]
    content, deg = both_paths({genai.INPUT: _dumps([{"role": "user", "parts": parts}])})
    assert content.input_messages[0].parts == [blob(b"a b", "text/plain", "document")]
    assert deg == {}


@given(st.binary(min_size=1, max_size=300), st.booleans(), st.booleans())
def test_blob_part_reads_either_alphabet_with_or_without_padding(
    data: bytes, urlsafe: bool, pad: bool
) -> None:
    import base64 as b64

    from lithify.translate._common import Degradations, blob_part

    text = (b64.urlsafe_b64encode if urlsafe else b64.b64encode)(data).decode()
    deg = Degradations()
    part = blob_part(text if pad else text.rstrip("="), "image/png", deg)
    assert part is not None and not deg
    assert b64.b64decode(part.content) == data and part.content == b64.b64encode(data).decode()
    mixed = Degradations()
    assert blob_part("ab+c-d__", None, mixed) is None and mixed == {"malformed_media": 1}
