"""Media parts in rows: what each profile does with a blob, a URI or a file id, and where the
bytes go (docs/export.md, Media and server tools).

Rows never carry a blob larger than ``max_inline`` bytes inline; TRL vision rows carry none at
all: they name image files (``images/<sha256>.<ext>``) that the writer puts beside JSONL rows or
into the Parquet ``images`` column.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from lithify.core.imagetype import image_type_of_base64
from lithify.model import BlobPart, FilePart, UriPart

MediaPart = BlobPart | FilePart | UriPart
MEDIA_TYPES = (BlobPart, FilePart, UriPart)

# What a profile does with media: nothing (skip the row), TRL vision rows (``{"type": "image"}``
# entries and an ``images`` column), OpenAI chat content parts (data URLs), Responses input
# content (``input_image`` / ``input_file``), or canonical parts as they are (NeMo Gym canonical).
MEDIA_MODES = ("none", "images", "openai", "responses", "canonical")

# OpenAI fine-tuning takes images up to 10 MB each; a larger blob would make a row no trainer
# accepts, and a row or a summary should never swell with one.
DEFAULT_MAX_INLINE = 10 * 1024 * 1024

IMAGES_DIR = "images"

_EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/jpg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "image/bmp": "bmp",
    "image/tiff": "tiff",
    "application/pdf": "pdf",
}


@dataclass(frozen=True)
class Media:
    """How a row builder treats media parts: ``mode`` (``MEDIA_MODES``) and the largest blob it
    may inline in a row (base64 in a data URL or a canonical part)."""

    mode: str = "none"
    max_inline: int = DEFAULT_MAX_INLINE


def mime_of(blob: BlobPart) -> str | None:
    """The blob's MIME type, or the image type its first bytes show when none was recorded."""
    if blob.mime_type:
        return blob.mime_type.split(";")[0].strip().lower()
    return image_type_of_base64(blob.content)


def file_name(blob: BlobPart) -> str:
    """``<sha256>.<ext>``: the name a blob's file has, the same for the same bytes."""
    return f"{blob.sha256}.{_EXTENSIONS.get(mime_of(blob) or '', 'bin')}"


def image_path(blob: BlobPart) -> str:
    """Where a JSONL row finds an image: relative to the export folder."""
    return f"{IMAGES_DIR}/{file_name(blob)}"


def data_url(blob: BlobPart) -> str:
    return f"data:{mime_of(blob) or 'application/octet-stream'};base64,{blob.content}"


def blob_bytes(blob: BlobPart) -> bytes:
    return base64.b64decode(blob.content)
