"""Token counts of TRL vision rows (docs/export.md, Token budgets): with the model's processor
beside the tokenizer, every row's ``metadata.tokens`` is the length of the ``input_ids`` the
processor makes of its rendered messages and its images, as TRL's vision collator builds them
(each image its own number of image tokens, by its size); ``--max-tokens`` drops and cuts by that
count; without a processor, ``--max-tokens`` is a usage error and counts say they are
placeholders.

The processor is PaddleOCR-VL's (Qwen2-VL's family: ``<|image_pad|>`` repeated
grid_h * grid_w / merge_size² times), built here from a config written by hand and a small
tokenizer with the Qwen3-VL template: it loads without PyTorch (Qwen2-VL's own processor needs
torch and torchvision for its video part)."""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from transformers import AutoProcessor

from lithify.cli import app
from lithify.export.tokens import ImageTokens, TextCounter, TokenizerError, load_tokenizer
from lithify.model import Message, encode
from tests.export.helpers import assistant, blob, fact, png, read_rows, replay, run_export, system
from tests.export.helpers import text as text_part
from tests.export.test_tokens import build_tokenizer
from tests.export.test_tokens_kinds import VISION_ADDED

runner = CliRunner()
TRL: dict[str, Any] = {"kind": "sft", "profile": "trl", "images": True}
# Images of four sizes: the smallest scaled up to min_pixels, the largest down to max_pixels.
SIZES = [(40, 40), (200, 120), (90, 300), (600, 500)]


def build_processor(folder: Path, max_pixels: int = 28 * 28 * 64) -> Path:
    """A model folder with a tokenizer and a PaddleOCR-VL processor (AutoProcessor loads it)."""
    build_tokenizer("qwen3_vl", folder, VISION_ADDED)
    config = folder / "tokenizer_config.json"
    tok = orjson.loads(config.read_bytes())
    tok["extra_special_tokens"] = {"image_token": "<|image_pad|>"}
    config.write_bytes(orjson.dumps(tok))
    pre = {
        "image_processor_type": "PaddleOCRVLImageProcessor",
        "processor_class": "PaddleOCRVLProcessor",
        "min_pixels": 28 * 28 * 4,
        "max_pixels": max_pixels,
        "patch_size": 14,
        "temporal_patch_size": 1,
        "merge_size": 2,
    }
    (folder / "preprocessor_config.json").write_text(json.dumps(pre))
    return folder


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_processor(tmp_path_factory.mktemp("paddleocr_vl"))


@pytest.fixture(scope="module")
def tokenizer_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer("qwen3_vl", tmp_path_factory.mktemp("qwen3_vl"), VISION_ADDED)


def sized_session(sid: str, sizes: list[tuple[int, int]]) -> list[Any]:
    """A session showing one image of each size in turn, one per user turn."""
    inputs: list[Message] = [system("Describe images.")]
    out = []
    for r, (w, h) in enumerate(sizes):
        image = blob(png(w, h, (25 * r % 256, 0, 0)), "image/png")
        inputs.append(Message("user", [text_part(f"Picture {r}, what is it?"), image]))
        answer = assistant(text_part(" ".join(["red"] * (r + 2))))
        out.append(fact(f"{sid}-{r}", list(inputs), [answer], session=sid, second=r, tools=[]))
        inputs.append(replay(answer))
    return out


def processor_count(processor: Any, folder: Path, row: dict[str, Any]) -> int:
    """A row's length as the processor makes it of the row as written, its images read from
    the export's files."""
    prompt = processor.apply_chat_template(row["messages"], tokenize=False)
    images = [Image.open(folder / p) for p in row["images"]]
    found = processor(text=[prompt], images=[images] if images else None, add_special_tokens=False)
    return len(found["input_ids"][0])


def test_vision_rows_count_each_images_tokens(model: Path, tmp_path: Path) -> None:
    facts = sized_session("v", SIZES) + sized_session("w", SIZES[::-1][:2])
    summary = run_export(facts, tmp_path / "o", tokenizer=str(model), **TRL)
    rows = read_rows(tmp_path / "o" / "train.jsonl")
    processor = AutoProcessor.from_pretrained(str(model), local_files_only=True)
    tok = load_tokenizer(str(model))
    assert summary.tokens is not None and summary.tokens.images == "processor"
    pads = set()
    for row in rows:
        n = processor_count(processor, tmp_path / "o", row)
        assert row["metadata"]["tokens"] == n
        placeholders = tok.apply_chat_template(row["messages"], tokenize=True)["input_ids"]
        assert n > len(placeholders)  # every row shows an image: more than its placeholder
        pads.add(n - len(placeholders))
    # Each image adds its own number of tokens: rows with the same number of images differ.
    assert len(pads) >= len(SIZES)
    # Parquet rows carry the same images as bytes: the same counts.
    run_export(facts, tmp_path / "p", tokenizer=str(model), fmt="parquet", **TRL)
    table = pq.read_table(tmp_path / "p" / "train.parquet").to_pylist()
    assert [orjson.loads(r["metadata"])["tokens"] for r in table] == [
        r["metadata"]["tokens"] for r in rows
    ]


def test_budget_drops_rows_by_their_image_tokens(
    model: Path, tokenizer_only: Path, tmp_path: Path
) -> None:
    facts = sized_session("v", SIZES)
    full = run_export(facts, tmp_path / "full", tokenizer=str(model), **TRL)
    real = [r["metadata"]["tokens"] for r in read_rows(tmp_path / "full" / "train.jsonl")]
    run_export(facts, tmp_path / "ph", tokenizer=str(tokenizer_only), **TRL)
    placeholder = [r["metadata"]["tokens"] for r in read_rows(tmp_path / "ph" / "train.jsonl")]
    # A budget every row fits by its placeholders: the rows whose images do not fit are dropped.
    budget = max(placeholder)
    over = sum(n > budget for n in real)
    assert 0 < over < len(real) and full.rows["train"] == len(real)
    summary = run_export(facts, tmp_path / "b", tokenizer=str(model), max_tokens=budget, **TRL)
    kept = read_rows(tmp_path / "b" / "train.jsonl")
    assert summary.skipped == {"over_token_budget": over}
    assert [r["metadata"]["tokens"] for r in kept] == [n for n in real if n <= budget]


def test_rows_cut_to_fit_count_the_images_they_keep(model: Path, tmp_path: Path) -> None:
    facts = sized_session("v", SIZES * 2)
    run_export(facts, tmp_path / "full", tokenizer=str(model), **TRL)
    full = read_rows(tmp_path / "full" / "train.jsonl")
    budget = sorted(r["metadata"]["tokens"] for r in full)[3]
    out = tmp_path / "cut"
    summary = run_export(facts, out, tokenizer=str(model), max_tokens=budget, fit="split", **TRL)
    assert summary.tokens is not None and summary.tokens.cut > 0
    processor = AutoProcessor.from_pretrained(str(model), local_files_only=True)
    cut = read_rows(out / "train.jsonl")
    assert len(cut) == len(full)
    files = {p.name for p in (out / "images").iterdir()}
    for row, whole in zip(cut, full, strict=True):
        assert row["metadata"]["tokens"] == processor_count(processor, out, row) <= budget
        # A cut row keeps the system message, the latest turns and their images, in order.
        n = row["metadata"].get("context_cut", 0)
        assert row["messages"] == [whole["messages"][0], *whole["messages"][1 + n :]]
        shown = [c for m in row["messages"] for c in m["content"] if c == {"type": "image"}]
        assert len(shown) == len(row["images"])
        assert row["images"] == whole["images"][len(whole["images"]) - len(shown) :]
        assert {p.removeprefix("images/") for p in row["images"]} <= files


def test_no_processor_no_budget(tokenizer_only: Path, tmp_path: Path) -> None:
    facts = sized_session("v", SIZES[:2])
    with pytest.raises(TokenizerError, match="needs the model's processor"):
        run_export(facts, tmp_path / "b", tokenizer=str(tokenizer_only), max_tokens=10**6, **TRL)
    assert not (tmp_path / "b").exists()  # refused before anything is written
    # Without a budget the placeholders are counted, and the summary, the table and stderr say so.
    fact_file = tmp_path / "facts.jsonl"
    fact_file.write_bytes(b"".join(encode(f) + b"\n" for f in facts))
    args = ["export", "sft", "--profile", "trl", "--images", "--facts", str(fact_file)]
    args += ["--tokenizer", str(tokenizer_only), "-o", str(tmp_path / "o")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "placeholders" in result.output and "warning: no processor" in result.output
    manifest = orjson.loads((tmp_path / "o" / "manifest.json").read_bytes())
    assert manifest["tokens"]["images"] == "placeholders"
    card = " ".join((tmp_path / "o" / "README.md").read_text().split())
    assert "an image counts as the placeholder" in card
    result = runner.invoke(app, [*args, "--max-tokens", "100000"])
    assert result.exit_code == 2 and "needs the model's processor" in result.output


def test_the_cli_reports_the_processor_and_replays(model: Path, tmp_path: Path) -> None:
    fact_file = tmp_path / "facts.jsonl"
    fact_file.write_bytes(b"".join(encode(f) + b"\n" for f in sized_session("v", SIZES)))
    out = tmp_path / "o"
    args = ["export", "sft", "--profile", "trl", "--images", "--facts", str(fact_file)]
    args += ["--tokenizer", str(model), "--max-tokens", "250", "--fit", "split", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "processor" in result.output and "warning" not in result.output
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["tokens"]["images"] == "processor" and manifest["tokens"]["cut"] > 0
    card = " ".join((out / "README.md").read_text().split())
    assert "TRL's vision collator" in card and "placeholder" not in card
    again = runner.invoke(app, ["export", "--replay", str(out / "manifest.json"), "--json"])
    assert again.exit_code == 0, again.output
    assert orjson.loads(again.stdout)["identical"] is True


def test_text_rows_carry_no_images_field(model: Path, tmp_path: Path) -> None:
    # The processor is for images: text rows count as before, with the tokenizer alone.
    facts = sized_session("v", SIZES[:2])
    summary = run_export(facts, tmp_path / "t", tokenizer=str(model), kind="sft", profile="trl")
    assert summary.tokens is not None and summary.tokens.images is None
    manifest = orjson.loads((tmp_path / "t" / "manifest.json").read_bytes())
    assert "images" not in manifest["tokens"]


def test_the_processor_is_in_the_fingerprint(model: Path, tmp_path: Path) -> None:
    # Another max_pixels makes other image tokens: another SHA-256, which Ray workers and
    # replay compare.
    other = build_processor(tmp_path / "other", max_pixels=28 * 28 * 16)
    facts = sized_session("v", SIZES)
    a = run_export(facts, tmp_path / "a", tokenizer=str(model), **TRL)
    b = run_export(facts, tmp_path / "b", tokenizer=str(other), **TRL)
    assert a.tokens is not None and b.tokens is not None
    assert a.tokens.sha256 != b.tokens.sha256
    assert a.tokens.max is not None and b.tokens.max is not None and b.tokens.max < a.tokens.max


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 400), st.integers(1, 400)), max_size=4),
    words=st.lists(st.sampled_from(["red", "blue", "<|image_pad|>", "\n", " "]), max_size=8),
)
def test_each_image_adds_its_own_tokens(
    model: Path, sizes: list[tuple[int, int]], words: list[str]
) -> None:
    """The counter's sum (the text's tokens, plus what each image adds alone, remembered) is
    the processor's own count of the text and the images together, for any images and text;
    it never has to fall back to processing every row whole."""
    tok = load_tokenizer(str(model))
    processor = AutoProcessor.from_pretrained(str(model), local_files_only=True)
    counter = ImageTokens(processor, TextCounter(tok))
    blobs = [blob(png(w, h, (w % 256, h % 256, 0)), "image/png") for w, h in sizes]
    content = [{"type": "text", "text": "".join(words)}, *[{"type": "image"}] * len(blobs)]
    text = processor.apply_chat_template([{"role": "user", "content": content}], tokenize=False)
    images = [Image.open(io.BytesIO(png(w, h, (w % 256, h % 256, 0)))) for w, h in sizes]
    try:
        found = processor(
            text=[text], images=[images] if images else None, add_special_tokens=False
        )
    except ValueError as e:  # the text quotes the image token: the counter raises the same
        with pytest.raises(ValueError, match=re.escape(str(e))):
            counter.count(text, blobs)
        return
    # Checked whole the first time, by the sum of its parts the second.
    assert counter.count(text, blobs) == len(found["input_ids"][0])
    assert counter.count(text, blobs) == len(found["input_ids"][0])
    assert not counter.whole


# What TRL's vision SFT collator builds of the exported rows, in the TRL consumer venv: the
# dataset card's lines make ``images`` a list of datasets.Image, then one row per batch (no
# padding) through DataCollatorForVisionLanguageModeling (messages rows: the processor's
# apply_chat_template; prompt-completion rows: the prompt with its images, then the completion).
_TRL_SCRIPT = """
import json, sys
import datasets
from transformers import AutoProcessor
from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling
model, folders = sys.argv[1], sys.argv[2:]
collator = DataCollatorForVisionLanguageModeling(
    AutoProcessor.from_pretrained(model, local_files_only=True)
)
found = []
for folder in folders:
    ds = datasets.load_dataset("json", data_files=f"{folder}/train.jsonl", split="train")
    ds = ds.map(lambda r: {"images": [f"{folder}/{p}" for p in r["images"]]})
    ds = ds.cast_column("images", datasets.List(datasets.Image()))
    ds = ds.remove_columns(["tools", "metadata"])  # not the vision trainer's columns
    found.append([collator([row])["input_ids"].shape[1] for row in ds])
print(json.dumps(found))
"""


def test_counts_are_what_trls_vision_collator_builds(model: Path, tmp_path: Path) -> None:
    from tests.consumers.pipeline import _missing, consumer_python

    missing = _missing("trl")
    if missing is not None:  # scripts/test builds the venv: its absence is a failure
        pytest.fail(missing)
    facts = sized_session("v", SIZES) + sized_session("w", SIZES[::-1])
    folders, want = [], []
    for shape in ("messages", "prompt-completion"):
        run_export(facts, tmp_path / shape, tokenizer=str(model), shape=shape, **TRL)
        want.append([r["metadata"]["tokens"] for r in read_rows(tmp_path / shape / "train.jsonl")])
        folders.append(str(tmp_path / shape))
    done = subprocess.run(
        [str(consumer_python("trl")), "-c", _TRL_SCRIPT, str(model), *folders],
        check=True,
        capture_output=True,
        timeout=600,
        env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert json.loads(done.stdout.splitlines()[-1]) == want


def test_an_image_the_processor_cannot_read_leaves_the_row_out(model: Path, tmp_path: Path) -> None:
    facts = sized_session("v", SIZES[:1])
    bad = blob(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png")
    inputs = [system("Describe."), Message("user", [text_part("What?"), bad])]
    facts.append(fact("bad", inputs, [assistant(text_part("red"))], session="b", tools=[]))
    summary = run_export(facts, tmp_path / "o", tokenizer=str(model), **TRL)
    assert summary.skipped == {"chat_template_error": 1}
    assert summary.rows["train"] == 1


class _PerCall:
    """A real processor whose output also depends on how many images one call shows (one token
    more for several), as a processor with a per-request image header would."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.image_token = processor.image_token

    def apply_chat_template(self, *args: Any, **kw: Any) -> Any:
        return self.processor.apply_chat_template(*args, **kw)

    def __call__(self, *, text: list[str], images: Any, **kw: Any) -> dict[str, Any]:
        ids = list(self.processor(text=text, images=images, **kw)["input_ids"][0])
        return {"input_ids": [[*ids, 0] if images and len(images[0]) > 1 else ids]}


def test_a_processor_that_breaks_the_sum_is_called_on_every_row(model: Path) -> None:
    """Where the first row showing several images is not the sum of its parts, that row and
    every row after are counted by the processor itself."""
    processor = _PerCall(AutoProcessor.from_pretrained(str(model), local_files_only=True))
    counter = ImageTokens(processor, TextCounter(load_tokenizer(str(model))))
    sizes = [(40, 30), (90, 60), (200, 120)]
    blobs = [blob(png(w, h, (w % 256, h % 256, 0)), "image/png") for w, h in sizes]
    for n in (1, 1, 2, 3, 1, 2):
        content = [{"type": "text", "text": "look"}, *[{"type": "image"}] * n]
        chat = [{"role": "user", "content": content}]
        text = processor.apply_chat_template(chat, tokenize=False)
        images = [Image.open(io.BytesIO(png(w, h, (w % 256, h % 256, 0)))) for w, h in sizes[:n]]
        expected = len(
            processor(text=[text], images=[images], add_special_tokens=False)["input_ids"][0]
        )
        assert counter.count(text, blobs[:n]) == expected, n
    assert counter.whole
