"""Runs inside .venv-consumers-trl: the length of every row of lithify exports as TRL's own
trainers tokenize them, for tests/export/test_tokens.py to hold against ``metadata.tokens``.

Usage: ``python trl_lengths.py SPEC.json OUT.json``; SPEC is ``[{"tokenizer": DIR, "path":
JSONL, "kind": "sft" | "dpo"}]``. SFT rows go through ``SFTTrainer``'s dataset preparation
(``max_length=None``: nothing cut), DPO rows through ``DPOTrainer``'s; a tiny random model is
built here and nothing is downloaded. OUT is the list of lengths per SPEC entry, in row order
(DPO: the prompt's tokens and the longer completion's).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import datasets
import torch
from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer


def model(vocab: int) -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=1 << 16,
    )
    return Qwen3ForCausalLM(config)


def lengths(spec: dict[str, Any], cache: str) -> list[int]:
    tok = AutoTokenizer.from_pretrained(spec["tokenizer"], local_files_only=True)
    ds = datasets.load_dataset("json", data_files=spec["path"], split="train", cache_dir=cache)
    ds = ds.remove_columns("metadata")
    with tempfile.TemporaryDirectory() as out:
        common: dict[str, Any] = {"output_dir": out, "report_to": [], "use_cpu": True}
        if spec["kind"] == "dpo":
            dpo = DPOTrainer(
                model=model(len(tok)),
                ref_model=model(len(tok)),  # else it is loaded by the model's (absent) path
                args=DPOConfig(max_length=None, **common),
                train_dataset=ds,
                processing_class=tok,
            )
            return [
                len(ex["prompt_ids"]) + max(len(ex["chosen_ids"]), len(ex["rejected_ids"]))
                for ex in dpo.train_dataset
            ]
        sft = SFTTrainer(
            model=model(len(tok)),
            args=SFTConfig(max_length=None, dataset_num_proc=None, **common),
            train_dataset=ds,
            processing_class=tok,
        )
        return [len(ex["input_ids"]) for ex in sft.train_dataset]


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        specs = json.load(f)
    with tempfile.TemporaryDirectory() as cache:
        report = [lengths(spec, cache) for spec in specs]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
