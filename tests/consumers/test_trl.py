"""TRL reads the ``--profile trl`` rows: its conversational checks, its chat-template entry point
(``maybe_apply_chat_template``, as the DPO and online trainers use it), and ``SFTTrainer``'s own
dataset preparation with assistant-only / completion-only loss (as ``datasets`` loads the
JSONL), on a tiny model built offline. The rendering uses TRL's Qwen3 templates, which read the
profile's default reasoning key, ``reasoning_content``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.consumers.pipeline import HERE, SFT_TRAINER, TRL_ROWS, Consumers

pytestmark = pytest.mark.consumers


def _think(message: dict[str, Any]) -> str:
    """How Qwen3's templates print an assistant message's reasoning and text."""
    reasoning = message.get("reasoning_content", "")
    return "<think>\n" + reasoning.strip("\n") + "\n</think>\n\n" + message.get("content", "")


def _call(call: dict[str, Any]) -> str:
    fn = call["function"]
    args = json.dumps(fn["arguments"], ensure_ascii=False)
    return '<tool_call>\n{"name": "' + fn["name"] + '", "arguments": ' + args + "}\n</tool_call>"


def _visible(message: dict[str, Any]) -> list[str]:
    """The pieces of an assistant message every Qwen3 rendering of it holds."""
    return [message.get("content", "")] + [_call(c) for c in message.get("tool_calls", ())]


def test_the_consumers_are_the_pinned_versions_on_cpu_torch(trl_report: dict) -> None:
    lock = {}
    for line in (HERE / "requirements-trl.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, pin = line.split("==")
            lock[name.lower()] = pin
    for package, installed in trl_report["versions"].items():
        assert installed.split("+")[0] == lock[package.lower()], package
    assert trl_report["versions"]["torch"] == "2.13.0+cpu"
    assert trl_report["torch_cuda"] is None
    assert trl_report["python"].startswith("3.11.")


@pytest.mark.parametrize("key", TRL_ROWS)
def test_trl_sees_every_row_as_conversational(
    consumers: Consumers, trl_report: dict, key: str
) -> None:
    checks = trl_report["trl"][key]
    assert len(checks) == len(consumers.rows(key)) > 0
    assert [c["is_conversational"] for c in checks] == [True] * len(checks)


@pytest.mark.parametrize("key", TRL_ROWS)
def test_maybe_apply_chat_template_renders_every_row(
    consumers: Consumers, trl_report: dict, key: str
) -> None:
    failures = [
        (n, c["error"], consumers.rows(key)[n]["metadata"]["source_call_ids"])
        for n, c in enumerate(trl_report["trl"][key])
        if "error" in c
    ]
    assert not failures, f"TRL refused {len(failures)} {key} rows: {failures}"


def test_messages_rows_render_with_their_target(consumers: Consumers, trl_report: dict) -> None:
    for row, check in zip(consumers.rows("sft-trl"), trl_report["trl"]["sft-trl"], strict=True):
        text = check["applied"]["text"]
        target = row["messages"][-1]
        if any(m["role"] == "user" for m in row["messages"]):
            # The target follows the last user turn: Qwen3 prints its reasoning (even empty).
            assert _think(target) in text, row["metadata"]
        for piece in _visible(target):
            assert piece in text


def test_prompt_completion_rows_split_where_the_target_starts(
    consumers: Consumers, trl_report: dict
) -> None:
    rows = consumers.rows("sft-trl-pc")
    messages = {json.dumps(r["metadata"]["source_call_ids"]): r for r in consumers.rows("sft-trl")}
    for row, check in zip(rows, trl_report["trl"]["sft-trl-pc"], strict=True):
        if "error" in check:
            continue  # reported by test_maybe_apply_chat_template_renders_every_row
        [target] = row["completion"]
        assert (
            row["prompt"] + row["completion"]
            == (messages[json.dumps(row["metadata"]["source_call_ids"])]["messages"])
        )
        applied = check["applied"]
        assert applied["prompt"].endswith("<|im_start|>assistant\n")
        assert applied["completion"].startswith(_think(target))
        for piece in _visible(target):
            assert piece in applied["completion"]
        last_prompt = row["prompt"][-1].get("content")
        if last_prompt:
            assert last_prompt in applied["prompt"]
            assert last_prompt not in applied["completion"]


def test_preference_rows_render_chosen_and_rejected(consumers: Consumers, trl_report: dict) -> None:
    [row] = consumers.rows("dpo-trl")
    [check] = trl_report["trl"]["dpo-trl"]
    applied = check["applied"]
    assert row["prompt"][-1]["content"] in applied["prompt"]
    assert _think(row["chosen"][-1]) in applied["chosen"]
    assert _think(row["rejected"][-1]) in applied["rejected"]
    assert applied["chosen"] != applied["rejected"]


def test_rl_rows_render_the_whole_trajectory_as_completion(
    consumers: Consumers, trl_report: dict
) -> None:
    for row, check in zip(consumers.rows("rl-trl"), trl_report["trl"]["rl-trl"], strict=True):
        completion = check["applied"]["completion"]
        for m in row["completion"]:
            if m["role"] == "assistant":
                for piece in _visible(m):
                    assert piece in completion
            elif m["role"] == "tool":
                assert "<tool_response>\n" + m["content"] + "\n</tool_response>" in completion


@pytest.mark.parametrize("key", list(SFT_TRAINER))
def test_sft_trainer_prepares_the_rows_and_trains_on_the_assistant_only(
    consumers: Consumers, trl_report: dict, key: str
) -> None:
    prepared = trl_report["sft_trainer"][key]
    assert "error" not in prepared, prepared.get("traceback")
    assert {"input_ids", "labels"} <= set(prepared["columns"])
    rows = consumers.rows(key)
    assert len(prepared["rows"]) == len(rows)
    for row, ex in zip(rows, prepared["rows"], strict=True):
        trained = ex["trained"]
        if "messages" in row:
            assistants = [m for m in row["messages"] if m["role"] == "assistant"]
            others = [m for m in row["messages"] if m["role"] != "assistant"]
        else:
            assistants = row["completion"]
            others = row["prompt"]
        # The training template prints every assistant turn's reasoning, text and calls, and
        # only those carry loss.
        for m in assistants:
            assert _think(m) in trained, (key, row["metadata"])
            for piece in _visible(m):
                assert piece in trained
        for m in others:
            if m.get("content") and m["content"] not in "".join(_think(a) for a in assistants):
                assert m["content"] not in trained, (key, m["role"], row["metadata"])
