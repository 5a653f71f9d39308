"""Token budgets on the consumer exports (docs/export.md, Token budgets): every kind counted,
JSONL and Parquet, with a tokenizer trained here on Qwen3's chat template (Qwen3-VL's for
vision rows); NeMo Gym rows count what NeMo Gym's own model server sends the policy model.

Each counted export is also loaded by ``datasets`` from its folder alone and replayed byte for
byte (test_datasets.py, test_replay.py: they take every export of pipeline.EXPORTS)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lithify.export.tokens import load_tokenizer
from tests.consumers.pipeline import NEMO_GYM_FILES, PARQUET_TWINS, TOKEN_EXPORTS, Consumers

pytestmark = pytest.mark.consumers


def _rows(consumers: Consumers, key: str) -> list[dict[str, Any]]:
    key = PARQUET_TWINS.get(key, key)  # a Parquet export's rows are its JSONL twin's
    return [*consumers.rows(key, "train"), *consumers.rows(key, "eval")]


@pytest.mark.parametrize("key", TOKEN_EXPORTS)
def test_every_counted_export_reports_its_rows_tokens(consumers: Consumers, key: str) -> None:
    summary = consumers.summaries[key]
    tokens = summary["tokens"]
    rows = _rows(consumers, key)
    counts = sorted(r["metadata"]["tokens"] for r in rows)
    assert tokens["rows"] == len(rows) == sum(summary["rows"].values()) > 0
    assert (tokens["min"], tokens["max"]) == (counts[0], counts[-1])
    assert tokens["median"] == counts[(len(counts) + 1) // 2 - 1]
    if tokens["max_tokens"] is not None:
        assert counts[-1] <= tokens["max_tokens"]
    folder = consumers.folder(key)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["tokens"] == tokens
    card = (folder / "README.md").read_text()
    assert "## Token budget" in card and f"| max | {tokens['max']} |" in card


def test_the_budgets_left_out_and_cut_rows(consumers: Consumers) -> None:
    # The budgets are set so that the corpus has rows over them: dropped, or cut to fit.
    cut = consumers.summaries["sft-trl-tokens"]
    assert cut["tokens"]["cut"] > 0
    assert any("context_cut" in r["metadata"] for r in _rows(consumers, "sft-trl-tokens"))
    assert consumers.summaries["nemo-gym-native-tokens"]["skipped"]["over_token_budget"] > 0


def _as_vllm(message: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions message as vLLM hands it to the chat template: tool-call arguments
    parsed from their JSON; without the empty ``tool_calls`` NeMo Gym writes on a message that
    calls no tool (docs/export.md: lithify leaves it out, Llama 3.1's template fails on it)."""
    calls = message.get("tool_calls")
    if calls == []:
        return {k: v for k, v in message.items() if k != "tool_calls"}
    if not calls:
        return message
    parsed = []
    for c in calls:
        arguments = c["function"]["arguments"]
        arguments = json.loads(arguments) if arguments else {}
        parsed.append({**c, "function": {**c["function"], "arguments": arguments}})
    return {**message, "tool_calls": parsed}


NATIVE_COUNTED = [k for k in NEMO_GYM_FILES if k.split("/")[0] in TOKEN_EXPORTS]


@pytest.mark.parametrize("key", NATIVE_COUNTED)
def test_nemo_gym_rows_count_the_chat_its_model_server_makes(
    consumers: Consumers, nemo_gym_report: dict, key: str
) -> None:
    # NeMo Gym's VLLMConverter turns each row (NeMo Gym rows: the input, the prompt; RL rows:
    # the input and the recorded output, the trajectory) into the Chat Completions request its
    # model server sends; the chat template on those messages is the count.
    export, split = key.split("/")
    prompt = export.startswith("nemo-gym")
    tok = load_tokenizer(str(consumers.root / "tokenizers" / "qwen3"))
    rows = consumers.rows(export, split)
    checks = nemo_gym_report["files"][key]
    assert len(rows) == len(checks) > 0
    for row, check in zip(rows, checks, strict=True):
        chat = check["chat"] if prompt else check["trajectory_chat"]
        found = tok.apply_chat_template(
            [_as_vllm(m) for m in chat["messages"]],
            tools=chat.get("tools"),
            add_generation_prompt=prompt,
            tokenize=True,
            return_dict=True,
        )
        assert row["metadata"]["tokens"] == len(found["input_ids"]), row["metadata"]
