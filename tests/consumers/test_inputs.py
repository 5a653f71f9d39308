"""The consumer tests' input is what they claim to cover: every row kind, reasoning, parallel tool
calls, string and structured tool results, multi-turn segments, from the corpus, the shipped
examples and the SDK sessions. Without this, a consumer that "accepts every row" could be
accepting rows that hold none of the hard parts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.consumers import sessions
from tests.consumers.pipeline import EXPORTS, Consumers, corpus_pairs

pytestmark = pytest.mark.consumers


def _assistants(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in row["messages"] if m["role"] == "assistant"]


def test_the_import_read_every_input(consumers: Consumers) -> None:
    summary = json.loads((consumers.root / "import.json").read_text())
    assert summary["unreadable"] == [] and summary["corrupt"] == [], summary
    assert summary["feedback"] == len(sessions.FEEDBACK)
    # 12 calls from the sessions, one per corpus exchange pair, and the corpus and examples.
    assert summary["facts"] >= 12 + len(corpus_pairs()) + 40, summary


def test_every_export_wrote_rows(consumers: Consumers) -> None:
    assert set(consumers.summaries) == set(EXPORTS)
    for key, summary in consumers.summaries.items():
        assert summary["rows"]["train"] > 0, (key, summary)
    # The exports that split have rows on both sides, so eval files are loaded too.
    for key in ("sft-canonical", "nemo-gym-native", "nemo-gym-native-parquet"):
        assert consumers.summaries[key]["rows"]["eval"] > 0, key


def test_sft_rows_hold_the_hard_parts(consumers: Consumers) -> None:
    rows = consumers.rows("sft-trl")
    targets = [r["messages"][-1] for r in rows]
    assert sum("reasoning_content" in t for t in targets) >= 8
    assert sum("reasoning_content" in t and "tool_calls" in t for t in targets) >= 3
    assert sum("content" in t and "tool_calls" in t for t in targets) >= 1
    parallel = [r for r in rows if any(len(m.get("tool_calls", ())) > 1 for m in _assistants(r))]
    assert len(parallel) >= 6
    results = {m["content"] for r in rows for m in r["messages"] if m["role"] == "tool"}
    # Strings verbatim (one JSON-looking), structured values as compact sorted-key JSON.
    assert {"12 °C, light rain", '{"temperature": 18, "conditions": "cloudy"}'} <= results
    assert '[{"text":"-3 °C, snow","type":"text"}]' in results  # Anthropic blocks
    assert '{"ok":true,"temperature":20}' in results  # a Gemini object
    # A session with a second user query after a tool loop, and its last turn as a target.
    multi = [r for r in rows if sum(m["role"] == "user" for m in r["messages"]) >= 2]
    assert any(len(_assistants(r)) >= 4 for r in multi)
    by_session = {r["metadata"]["session_id"] for r in rows}
    assert set(sessions.SESSIONS) <= by_session
    # Rows from the corpus and the shipped examples, not only from the SDK sessions.
    others = [r for r in rows if r["metadata"]["session_id"] not in sessions.SESSIONS]
    assert len(others) >= 10
    assert any(r in parallel for r in others)
    assert "weather-session-plain" in by_session  # src/lithify/examples (OpenInference)


def test_nemo_gym_rows_hold_the_hard_parts(consumers: Consumers) -> None:
    rows = consumers.rows("nemo-gym-native") + consumers.rows("nemo-gym-native", "eval")
    items = [i for r in rows for i in r["responses_create_params"]["input"] + r["recorded_output"]]
    kinds = {i["type"] for i in items}
    assert kinds == {"message", "reasoning", "function_call", "function_call_output"}
    assert any(len(i["summary"]) > 1 for i in items if i["type"] == "reasoning")
    assert any(r["responses_create_params"].get("tools") for r in rows)


def test_preference_and_reward_rows_come_from_the_feedback(consumers: Consumers) -> None:
    [pair] = consumers.rows("dpo-trl")
    assert pair["chosen"][-1]["content"] == "Paris is at 18 °C and cloudy right now."
    assert pair["rejected"][-1]["content"] == "I cannot know the weather."
    rewards = {r["metadata"]["session_id"]: r["reward"] for r in consumers.rows("rl-trl")}
    assert rewards == sessions.FEEDBACK
