"""The image type bytes begin with, for media recorded without a MIME type."""

from __future__ import annotations

import base64
import binascii

# Leading bytes of the image formats providers accept.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_type(head: bytes) -> str | None:
    """``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp`` by the first bytes."""
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_type_of_base64(text: str) -> str | None:
    """The image type of the bytes base64 ``text`` spells (its first 24 characters read)."""
    try:
        return image_type(base64.b64decode(text[:24]))
    except (binascii.Error, ValueError):
        return None
