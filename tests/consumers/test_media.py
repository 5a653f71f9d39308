"""TRL vision rows (docs/export.md, Media and server tools) read by the real consumers: ``datasets``
decodes the images column into PIL images equal to the original bytes, from JSONL (image files
beside the rows, through the dataset card's own lines) and from Parquet (bytes in the rows, with
nothing but ``load_dataset(OUT_DIR)``); the vision chat templates that ship with TRL render one
``<image>`` per image."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from tests.consumers.pipeline import IMAGE_EXPORTS, PARQUET_TWINS, VISION_TEMPLATES, Consumers
from tests.export.helpers import BLUE, RED, SCREEN

pytestmark = pytest.mark.consumers

JSONL = IMAGE_EXPORTS[0]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _splits(consumers: Consumers, key: str) -> list[str]:
    return [s for s in ("train", "eval") if consumers.summaries[key]["rows"].get(s)]


def _decoded(trl_report: dict, key: str) -> dict[str, list[list[dict[str, Any]]]]:
    result = trl_report["images"][key]
    assert "error" not in result, f"{key}: {result.get('traceback')}"
    return result["splits"]


@pytest.mark.parametrize("key", IMAGE_EXPORTS)
def test_datasets_decodes_every_image_equal_to_the_original(
    consumers: Consumers, trl_report: dict, key: str
) -> None:
    decoded = _decoded(trl_report, key)
    features = trl_report["images"][key]["features"]
    twin = PARQUET_TWINS.get(key, key)
    assert sorted(decoded) == sorted(_splits(consumers, twin))
    seen: set[str] = set()
    for split, rows in decoded.items():
        assert "'images': List(Image(mode=None, decode=True))" in features[split]
        written = consumers.rows(twin, split)
        assert len(rows) == len(written)
        for row, got in zip(written, rows, strict=True):
            images = got["images"]
            # One image per path, in order, each the file (or the bytes) the row names.
            assert [f"images/{i['name']}" for i in images] == row["images"]
            # TRL's vision SFT step puts each image into its {"type": "image"} entry, in order.
            assert got["trl"] == {"filled": [i["pixels"] for i in images]}, got["trl"]
            for image in images:
                assert image["type"].startswith("PIL.")
                assert image["pixels"] == image["original_pixels"]
                assert image["name"].startswith(image["bytes"] + ".")
                seen.add(image["bytes"])
    # The images the media facts hold (tests/export/helpers.py), byte for byte.
    # The screenshot a tool returned is in the user message after the tool's result: TRL gives
    # no tool message an image.
    assert {_sha(RED), _sha(BLUE), _sha(SCREEN)} <= seen


def test_the_image_files_are_written_once_and_only_for_jsonl(consumers: Consumers) -> None:
    folder = consumers.folder(JSONL)
    named = {
        p for s in _splits(consumers, JSONL) for r in consumers.rows(JSONL, s) for p in r["images"]
    }
    files = {f"images/{p.name}" for p in (folder / "images").iterdir()}
    assert files == named
    for name in files:
        assert name.startswith(f"images/{_sha((folder / name).read_bytes())}.")
    assert not (consumers.folder(IMAGE_EXPORTS[1]) / "images").exists()


def test_media_rows_are_skipped_by_reason_where_the_profile_has_no_place(
    consumers: Consumers,
) -> None:
    for key in ("sft-trl", "sft-canonical", "sft-axolotl"):
        skipped = consumers.summaries[key]["skipped"]
        assert skipped.get("media_unsupported", 0) >= 1, key
        assert skipped.get("server_tool_unsupported", 0) >= 1, key
    vision = consumers.summaries[JSONL]["skipped"]
    assert vision.get("media_reference", 0) >= 1 and vision.get("server_tool_unsupported", 0) >= 1


def test_openai_rows_carry_images_as_data_urls(consumers: Consumers) -> None:
    urls = [
        c["image_url"]["url"]
        for r in consumers.rows("sft-openai")
        for m in r["messages"]
        if isinstance(m.get("content"), list)
        for c in m["content"]
        if c["type"] == "image_url"
    ]
    assert any(u.startswith("data:image/png;base64,") for u in urls)


def _images_shown(text: str) -> int:
    return text.count("<image>")


@pytest.mark.parametrize("template", list(VISION_TEMPLATES))
def test_vision_templates_render_one_image_token_per_image(
    consumers: Consumers, trl_report: dict, template: str
) -> None:
    assert trl_report["template_files"][template].endswith(
        f"/site-packages/trl/chat_templates/{template}.jinja"
    )
    rows = consumers.rows(VISION_TEMPLATES[template])
    renders = trl_report["templates"][template]
    assert len(renders) == len(rows) > 0
    rendered = 0
    for row, render in zip(rows, renders, strict=True):
        if template == "idefics3" and any(not m["content"] for m in row["messages"]):
            # Idefics3 reads message["content"][0] and has no tool calls: an assistant turn that
            # only calls a tool (content []) is one it cannot render.
            assert render["error"]["message"] == "list object has no element 0", render
            continue
        assert "error" not in render, (row["metadata"]["source_call_ids"], render)
        text = render["text"]
        assert _images_shown(text) == len(row["images"]), row["metadata"]["source_call_ids"]
        for m in row["messages"]:
            for c in m["content"]:
                if c["type"] == "text":
                    assert c["text"] in text
        rendered += 1
    assert rendered >= 3
