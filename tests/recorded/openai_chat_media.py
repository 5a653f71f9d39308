"""Record the Chat Completions media exchanges in this folder (issue 16): the real ``openai`` SDK
sends images, audio and files and asks for spoken answers; the local fake provider answers.

Run ``.venv/bin/python -m tests.recorded.openai_chat_media`` from the checkout to write them
again (``tests.recorded.record`` writes the others). The media are made here, byte for byte the
same on every run: a 2×2 PNG, a short WAV tone, raw 16-bit PCM, a one-page PDF. What the fake
answers is its own rendering, except the OpenRouter image answer, written from OpenRouter's
image generation reference (SOURCES.md says which is which).
"""

from __future__ import annotations

import base64
import io
import math
import struct
import wave
import zlib
from collections.abc import Callable
from typing import Any

import orjson

from tests.fakes import FakeProvider, Reply, answer
from tests.recorded.record import CREATED, HERE, _openai, record

AUDIO_MODEL = "gpt-4o-audio-preview"
VISION_MODEL = "gpt-4o-mini"
REMOTE_IMAGE = (
    "https://upload.wikimedia.org/wikipedia/commons/thumb/d/dd/"
    "Gfp-wisconsin-madison-the-nature-boardwalk.jpg/2560px-Gfp-wisconsin-madison-the-nature-boardwalk.jpg"
)


# --- the media ---------------------------------------------------------------------------------


def png(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = (220, 40, 40)) -> bytes:
    """A small solid-colour PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def pcm16(seconds: float = 0.02, rate: int = 8000, hz: float = 440.0) -> bytes:
    """A sine tone as raw 16-bit little-endian mono PCM (the ``pcm16`` audio format)."""
    n = int(seconds * rate)
    return b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * hz * i / rate))) for i in range(n)
    )


def wav(seconds: float = 0.02, rate: int = 8000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16(seconds, rate))
    return buf.getvalue()


def pdf(text: str = "Invoice 2026-001: total 42.00 EUR") -> bytes:
    """A one-page PDF showing one line of text."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{b64(data)}"


# --- the calls ---------------------------------------------------------------------------------


def chat(stream: bool = False, **kw: Any) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        result = _openai(fake).chat.completions.create(stream=stream, **kw)
        if stream:
            for _ in result:
                pass

    return run


IMAGE_QUESTION = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Which of these two pictures is a boardwalk?"},
            {
                "type": "image_url",
                "image_url": {"url": data_url("image/png", png()), "detail": "low"},
            },
            {"type": "image_url", "image_url": {"url": REMOTE_IMAGE, "detail": "high"}},
        ],
    }
]
AUDIO_QUESTION = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What do you hear in this recording?"},
            {"type": "input_audio", "input_audio": {"data": b64(wav()), "format": "wav"}},
        ],
    }
]
PDF_QUESTION = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is the total of this invoice, and of the earlier one?"},
            {
                "type": "file",
                "file": {
                    "filename": "invoice-2026-001.pdf",
                    "file_data": data_url("application/pdf", pdf()),
                },
            },
            {"type": "file", "file": {"file_id": "file-6F2ksmvXxt4VdoqmHRw6kL"}},
        ],
    }
]
SPOKEN = {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "pcm16"}}
SPEAK_QUESTION = [{"role": "user", "content": "Say hello in one short sentence."}]
SPOKEN_ANSWER = "Hello! Nice to meet you."
SCREENSHOT_TOOL = {
    "type": "function",
    "function": {
        "name": "take_screenshot",
        "description": "A screenshot of the current page.",
        "parameters": {"type": "object", "properties": {}},
    },
}
SCREENSHOT_HISTORY = [
    {"role": "user", "content": "Is the login button visible?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_Q2xpY2tTY3JlZW5zaG90",
                "type": "function",
                "function": {"name": "take_screenshot", "arguments": "{}"},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_Q2xpY2tTY3JlZW5zaG90",
        "content": [
            {"type": "text", "text": "Screenshot of https://example.com/login (1280×800)"},
            {
                "type": "image_url",
                "image_url": {"url": data_url("image/png", png(4, 3, (30, 90, 200)))},
            },
        ],
    },
]
OPENROUTER_MODEL = "google/gemini-2.5-flash-image"
OPENROUTER_IMAGE = data_url("image/png", png(3, 3, (250, 200, 0)))
OPENROUTER_BODY = {
    "id": "gen-1767225600-Sx3nQ0oW1rZ2cY4d",
    "provider": "Google AI Studio",
    "model": OPENROUTER_MODEL,
    "object": "chat.completion",
    "created": CREATED,
    "choices": [
        {
            "logprobs": None,
            "finish_reason": "stop",
            "native_finish_reason": "STOP",
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Here is a small yellow square.",
                "refusal": None,
                "reasoning": None,
                "images": [
                    {"type": "image_url", "image_url": {"url": OPENROUTER_IMAGE}, "index": 0}
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 1299, "total_tokens": 1308},
}


def audio_id(rel: str) -> str:
    """The id of the spoken answer recorded in ``rel``, as a client replays it."""
    doc = orjson.loads((HERE / f"{rel}.exchange.json").read_bytes())
    return doc["response"]["choices"][0]["message"]["audio"]["id"]


def main() -> None:
    record(
        "openai-chat/image_input",
        answer("The second one: a wooden boardwalk through a marsh."),
        chat(model=VISION_MODEL, messages=IMAGE_QUESTION),
    )
    record(
        "openai-chat/audio_input",
        answer("A steady 440 Hz tone, about twenty milliseconds long."),
        chat(model=AUDIO_MODEL, messages=AUDIO_QUESTION, modalities=["text"]),
    )
    record(
        "openai-chat/pdf_file_input",
        answer("This invoice totals 42.00 EUR; the earlier one is not readable to me."),
        chat(model=VISION_MODEL, messages=PDF_QUESTION),
    )
    spoken = answer(SPOKEN_ANSWER, audio=pcm16())
    record(
        "openai-chat/audio_output",
        spoken,
        chat(model=AUDIO_MODEL, messages=SPEAK_QUESTION, **SPOKEN),
    )
    record(
        "openai-chat/audio_output_streaming",
        spoken,
        chat(
            True,
            model=AUDIO_MODEL,
            messages=SPEAK_QUESTION,
            stream_options={"include_usage": True},
            **SPOKEN,
        ),
    )
    replay = [
        *SPEAK_QUESTION,
        {"role": "assistant", "audio": {"id": audio_id("openai-chat/audio_output")}},
        {"role": "user", "content": "Now say goodbye."},
    ]
    record(
        "openai-chat/audio_replay",
        answer("Goodbye, and take care!", audio=pcm16(0.01, hz=330.0)),
        chat(model=AUDIO_MODEL, messages=replay, **SPOKEN),
    )
    record(
        "openai-chat/tool_result_image",
        answer("Yes: the blue login button is in the top right corner."),
        chat(model=VISION_MODEL, messages=SCREENSHOT_HISTORY, tools=[SCREENSHOT_TOOL]),
    )
    record(
        "openai-chat/openrouter_image_output",
        Reply(body=OPENROUTER_BODY),
        chat(
            model=OPENROUTER_MODEL,
            messages=[{"role": "user", "content": "Draw a small yellow square."}],
            extra_body={"modalities": ["image", "text"]},
        ),
    )


if __name__ == "__main__":
    main()
