"""Runs inside .venv-consumers-trl (Python 3.11, CPU torch): ``datasets``, TRL and the chat
templates that ship inside TRL read lithify's exports. Reports what each consumer made of each
file and row; the tests in tests/consumers/ judge it. Nothing is downloaded: the tokenizer and the
model are built here, and the hub is switched off.

Usage: ``python run_trl.py MANIFEST.json OUT.json``. The manifest:

- ``datasets``: ``{id: {"builder": "json"|"parquet", "data_files": {split: path}}}`` →
  ``load_dataset`` each; the report holds every split's rows as ``datasets`` returns them.
- ``folders``: ``{id: export folder}`` → ``load_dataset(folder)`` with no other argument (the
  dataset card's ``configs`` name the files), reported the same way.
- ``trl``: ``{id: path}`` (JSONL of TRL-profile rows) → per row ``trl.data_utils
  .is_conversational`` and ``maybe_apply_chat_template`` (Qwen3's template, the row's tools).
- ``templates``: ``{template: path}`` → per row, the text TRL's ``apply_chat_template`` renders
  with ``trl/chat_templates/<template>.jinja`` on an offline tokenizer, or the template's error.
- ``images``: ``{id: {"folder", "originals"}}`` → the dataset card's own Python block run on the
  export folder (``load_dataset(OUT_DIR)``, and for JSONL the lines that make ``images`` a list of
  ``datasets.Image``); per row, each image as ``datasets`` decodes it (mode, size, SHA-256 of its
  pixels), the SHA-256 of its bytes (``Image(decode=False)``), and of the pixels PIL decodes from
  the original file (``originals/images/NAME``); and what TRL's ``prepare_multimodal_messages``
  (its vision SFT's own step) puts into each ``{"type": "image"}`` entry.
- ``sft_trainer``: ``{id: {"path", "template"}}`` → ``SFTTrainer`` prepares the dataset
  (``datasets`` loads the JSONL; assistant-only or completion-only loss) for a tiny random model;
  per row the text of the tokens that carry loss.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import traceback
from importlib import resources
from importlib.metadata import version
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import datasets
from tokenizers import Tokenizer, decoders, models
from tokenizers.pre_tokenizers import ByteLevel
from transformers import PreTrainedTokenizerFast
from trl.data_utils import (
    apply_chat_template,
    is_conversational,
    maybe_apply_chat_template,
    prepare_multimodal_messages,
)

TEMPLATES = resources.files("trl") / "chat_templates"
# Markers some templates print with bos_token / eos_token; any text does, they are not parsed.
BOS, EOS, PAD = "<|bos|>", "<|im_end|>", "<|pad|>"


def template_source(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


def tokenizer(template: str) -> PreTrainedTokenizerFast:
    """A lossless byte-level tokenizer (one token per byte, no merges) built here, so decoding
    any token span gives back its exact text, with ``template`` as its chat template."""
    vocab = {c: i for i, c in enumerate(sorted(ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD
    )
    fast.chat_template = template_source(template)
    return fast


def read_jsonl(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def error(e: BaseException) -> dict[str, str]:
    return {"type": type(e).__name__, "message": str(e)}


def _plain_images(ds: Any) -> Any:
    """``images`` decoded by ``datasets.Image`` as ``{path, sha256}`` of their bytes: PIL objects
    do not go into the JSON report, and their repr holds a memory address."""
    feature = ds.features.get("images")
    if feature is None or not isinstance(getattr(feature, "feature", None), datasets.Image):
        return ds
    ds = ds.cast_column("images", datasets.List(datasets.Image(decode=False)))
    names = ds.column_names
    ds = ds.map(
        lambda r: {
            "_images": [
                {"path": i["path"], "sha256": hashlib.sha256(i["bytes"]).hexdigest()}
                for i in r["images"]
            ]
        },
        remove_columns=["images"],
    )
    return ds.rename_column("_images", "images").select_columns(names)


def load(spec: dict[str, Any], cache: str) -> dict[str, Any]:
    try:
        if "folder" in spec:  # the export folder alone: its README.md names the split files
            ds = datasets.load_dataset(spec["folder"], cache_dir=cache)
        else:
            ds = datasets.load_dataset(
                spec["builder"], data_files=spec["data_files"], cache_dir=cache
            )
        return {
            "features": {s: str(ds[s].features) for s in ds},
            "splits": {s: _plain_images(ds[s]).to_list() for s in ds},
        }
    except Exception as e:
        return {"error": error(e), "traceback": traceback.format_exc(limit=6)}


def card_code(folder: str) -> str:
    """The Python block of the export's dataset card, pointed at ``folder``."""
    with open(os.path.join(folder, "README.md"), encoding="utf-8") as f:
        card = f.read()
    block = card.split("```python\n", 1)[1].split("```", 1)[0]
    return block.replace("path/to/this/folder", folder)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def images(spec: dict[str, Any]) -> dict[str, Any]:
    import PIL.Image

    try:
        scope: dict[str, Any] = {}
        exec(card_code(spec["folder"]), scope)  # the card's own lines, as a user runs them
        ds = scope["ds"]
        out: dict[str, Any] = {"features": {s: str(ds[s].features) for s in ds}, "splits": {}}
        for split in ds:
            raw = ds[split].cast_column("images", datasets.List(datasets.Image(decode=False)))
            rows = []
            for decoded, plain in zip(ds[split], raw, strict=True):
                shown = []
                for image, item in zip(decoded["images"], plain["images"], strict=True):
                    name = os.path.basename(item["path"])
                    data = item["bytes"]
                    if data is None:  # JSONL: datasets reads the file the path names
                        with open(item["path"], "rb") as f:
                            data = f.read()
                    original = PIL.Image.open(os.path.join(spec["originals"], "images", name))
                    shown.append(
                        {
                            "type": type(image).__module__ + "." + type(image).__name__,
                            "mode": image.mode,
                            "size": list(image.size),
                            "pixels": _sha(image.tobytes()),
                            "bytes": _sha(data),
                            "name": name,
                            "original_pixels": _sha(original.tobytes()),
                        }
                    )
                messages = decoded["messages"]
                if isinstance(messages, str):  # Parquet: JSON text
                    messages = json.loads(messages)
                try:
                    # What TRL's vision SFT does with a row: each {"type": "image"} gets its image.
                    prepared = prepare_multimodal_messages(messages, decoded["images"])
                    trl = {
                        "filled": [
                            _sha(block["image"].tobytes())
                            for m in prepared
                            for block in m["content"]
                            if block.get("type") == "image"
                        ]
                    }
                except Exception as e:
                    trl = {"error": error(e)}
                rows.append({"images": shown, "trl": trl})
            out["splits"][split] = rows
        return out
    except Exception as e:
        return {"error": error(e), "traceback": traceback.format_exc(limit=8)}


def trl_checks(path: str) -> list[dict[str, Any]]:
    tok = tokenizer("qwen3")
    out = []
    for row in read_jsonl(path):
        r: dict[str, Any] = {"is_conversational": is_conversational(row)}
        try:
            r["applied"] = maybe_apply_chat_template(row, tok, tools=row.get("tools"))
        except Exception as e:
            r["error"] = error(e)
        out.append(r)
    return out


def render(template: str, path: str) -> list[dict[str, Any]]:
    tok = tokenizer(template)
    out = []
    for row in read_jsonl(path):
        try:
            # TRL's own entry point, as SFTTrainer uses it for a `messages` row.
            text = apply_chat_template({"messages": row["messages"]}, tok, tools=row["tools"])
            out.append({"text": text["text"]})
        except Exception as e:
            out.append({"error": error(e)})
    return out


def sft_trainer(spec: dict[str, Any], cache: str) -> dict[str, Any]:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from trl import SFTConfig, SFTTrainer

    torch.manual_seed(0)
    tok = tokenizer(spec["template"])
    ds = datasets.load_dataset("json", data_files=spec["path"], split="train", cache_dir=cache)
    ds = ds.remove_columns("metadata")
    prompt_completion = "prompt" in ds.column_names
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=1 << 16,
    )
    with tempfile.TemporaryDirectory() as out_dir:
        args = SFTConfig(
            output_dir=out_dir,
            report_to=[],
            max_length=None,
            use_cpu=True,
            # Loss on the assistant turns only (messages) or on the completion only.
            assistant_only_loss=not prompt_completion,
            completion_only_loss=prompt_completion,
            dataset_num_proc=None,
        )
        trainer = SFTTrainer(
            model=Qwen3ForCausalLM(config),
            args=args,
            train_dataset=ds,
            processing_class=tok,
        )
        prepared = trainer.train_dataset
        rows = []
        for ex in prepared:
            ids = ex["input_ids"]
            if "labels" in ex:
                mask = [label != -100 for label in ex["labels"]]
            else:
                mask = [bool(m) for m in ex["completion_mask"]]
            rows.append(
                {
                    "text": tok.decode(ids),
                    "trained": tok.decode([i for i, m in zip(ids, mask, strict=True) if m]),
                }
            )
        return {"columns": prepared.column_names, "rows": rows}


def main() -> None:
    import torch

    with open(sys.argv[1], encoding="utf-8") as f:
        manifest = json.load(f)
    report: dict[str, Any] = {
        "versions": {
            p: version(p)
            for p in ("trl", "transformers", "datasets", "tokenizers", "torch", "jinja2")
        },
        "torch_cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "template_files": {},
        "datasets": {},
        "folders": {},
        "trl": {},
        "templates": {},
        "sft_trainer": {},
        "images": {},
    }
    with tempfile.TemporaryDirectory() as cache:
        for key, spec in manifest.get("datasets", {}).items():
            report["datasets"][key] = load(spec, cache)
        for key, folder in manifest.get("folders", {}).items():
            report["folders"][key] = load({"folder": folder}, cache)
        for key, path in manifest.get("trl", {}).items():
            report["trl"][key] = trl_checks(path)
        for name, path in manifest.get("templates", {}).items():
            report["template_files"][name] = str(TEMPLATES / f"{name}.jinja")
            report["templates"][name] = render(name, path)
        for key, spec in manifest.get("images", {}).items():
            report["images"][key] = images(spec)
        for key, spec in manifest.get("sft_trainer", {}).items():
            try:
                report["sft_trainer"][key] = sft_trainer(spec, cache)
            except Exception as e:
                report["sft_trainer"][key] = {
                    "error": error(e),
                    "traceback": traceback.format_exc(limit=8),
                }
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(report, f, ensure_ascii=False, default=repr)


if __name__ == "__main__":
    main()
