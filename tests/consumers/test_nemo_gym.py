"""NeMo Gym (0.4.0, its own Python 3.12 venv) reads every native row (``--profile nemo-gym``,
NeMo Gym and RL rows, train and eval) with its own code, and holds exactly what lithify wrote.

The unchanged check: ``NeMoGymResponseCreateParamsNonStreaming.model_validate(params)
.model_dump(mode="json", exclude_unset=True)`` must equal ``params`` as canonical JSON
(pipeline.canon: key order ignored, types kept).

- ``exclude_unset``: only the fields the row set. NeMo Gym's defaults (``tool_choice: "auto"``,
  ``parallel_tool_calls: true``, ``tools: []``) are its own reading of an absent field, not a
  change of the row; NeMo Gym's data preparation dumps the same way. A field the row sets to its
  default value (``strict: false``) is still compared.
- ``mode="json"``: what NeMo Gym would write back to JSONL (enums as strings, models as dicts).
- Canonical JSON, not ``==``: in Python ``1 == 1.0 == True``; in the file they differ.

Pydantic reads item unions left to right and ignores unknown keys on most item models, so a row
can validate and still lose parts; only the round trip shows that (the chat-style control row
below validates and loses its tool calls). Beyond the model: the whole line as a resources
server receives it (``BaseRunRequest``), NeMo Gym's data preparation (``compute_sample_metrics``)
and the Chat Completions request its vLLM model server builds from the row.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from tests.consumers.pipeline import CHAT_STYLE_ROW, NEMO_GYM_FILES, NO_ITEM_ROWS, Consumers, canon

pytestmark = pytest.mark.consumers

NATIVE = [k for k in NEMO_GYM_FILES if not k.startswith("control/")]


def _rows(consumers: Consumers, key: str) -> list[dict[str, Any]]:
    export, split = key.split("/")
    return consumers.rows(export, split)


def _checked(consumers: Consumers, report: dict, key: str) -> list[tuple[dict, dict]]:
    rows, checks = _rows(consumers, key), report["files"][key]
    assert len(checks) == len(rows) > 0, key
    return list(zip(rows, checks, strict=True))


def test_it_is_nemo_gym_0_4_0_on_python_3_12(nemo_gym_report: dict) -> None:
    assert nemo_gym_report["versions"]["nemo-gym"] == "0.4.0"
    assert nemo_gym_report["python"].startswith("3.12.")


@pytest.mark.parametrize("key", NATIVE)
def test_nemo_gym_validates_every_native_row(
    consumers: Consumers, nemo_gym_report: dict, key: str
) -> None:
    for n, (row, check) in enumerate(_checked(consumers, nemo_gym_report, key)):
        where = (key, n, row["metadata"]["source_call_ids"])
        assert check["error"] is None, (*where, check["error"])
        assert check["run_request"] is None, (*where, check["run_request"])
        assert check["prepare_invalid"] is False, where


@pytest.mark.parametrize("key", NATIVE)
def test_nemo_gym_dumps_every_native_row_back_unchanged(
    consumers: Consumers, nemo_gym_report: dict, key: str
) -> None:
    for n, (row, check) in enumerate(_checked(consumers, nemo_gym_report, key)):
        assert canon(check["dump"]) == canon(row["responses_create_params"]), (
            key,
            n,
            row["metadata"]["source_call_ids"],
        )


@pytest.mark.parametrize("key", NATIVE)
def test_nemo_gym_reads_the_recorded_trajectory_unchanged(
    consumers: Consumers, nemo_gym_report: dict, key: str
) -> None:
    """``recorded_output`` is lithify's field, which NeMo Gym does not read; its items must still
    be items NeMo Gym holds unchanged, so the trajectory replays as ``input``."""
    for n, (row, check) in enumerate(_checked(consumers, nemo_gym_report, key)):
        params = row["responses_create_params"]
        trajectory = {**params, "input": params["input"] + row["recorded_output"]}
        assert check["trajectory_error"] is None, (key, n, check["trajectory_error"])
        assert canon(check["trajectory_dump"]) == canon(trajectory), (key, n)


def test_the_unchanged_check_catches_a_silently_corrupted_row(nemo_gym_report: dict) -> None:
    [check] = nemo_gym_report["files"]["control/chat-style"]
    assert check["error"] is None  # NeMo Gym accepts it...
    sent = CHAT_STYLE_ROW["responses_create_params"]["input"][1]
    held = check["dump"]["input"][1]
    assert "tool_calls" in sent and "tool_calls" not in held  # ...and drops the tool calls
    assert canon(check["dump"]) != canon(CHAT_STYLE_ROW["responses_create_params"])


def _has_input_file(row: dict[str, Any]) -> bool:
    items = row["responses_create_params"]["input"]
    return any(
        isinstance(i.get("content"), list) and any(c["type"] == "input_file" for c in i["content"])
        for i in items
    )


def _chat_content(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content)
    return content


@pytest.mark.parametrize("key", NATIVE)
def test_nemo_gyms_model_server_request_keeps_calls_results_and_reasoning(
    consumers: Consumers, nemo_gym_report: dict, key: str
) -> None:
    """What NeMo Gym's vLLM model server sends for the row's input holds every function call
    (id, name, arguments string), every output, every reasoning summary and every text."""
    for row, check in _checked(consumers, nemo_gym_report, key):
        if _has_input_file(row):
            # NeMo Gym's validator takes input_file, its vLLM model server does not convert it
            # (docs/consumers.md): a row with a document reaches other model servers only.
            assert "NotImplementedError: Unsupported part param type: input_file" in check.get(
                "chat_error", ""
            )
            continue
        assert "chat_error" not in check, check.get("chat_error")
        params, chat = row["responses_create_params"], check["chat"]
        items, messages = params["input"], chat["messages"]
        calls = [c for m in messages for c in m.get("tool_calls") or ()]
        assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
            (i["call_id"], i["name"], i["arguments"]) for i in items if i["type"] == "function_call"
        ]
        outputs = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
        assert outputs == [
            (i["call_id"], i["output"]) for i in items if i["type"] == "function_call_output"
        ]
        said = "".join(_chat_content(m) for m in messages if m["role"] == "assistant")
        for i in items:
            if i["type"] == "reasoning":
                for s in i["summary"]:
                    assert "<think>" + s["text"] + "</think>" in said
            elif i["type"] == "message" and isinstance(i["content"], list):
                # Text and images (input_text, input_image), in order, as chat content parts.
                want = [
                    {"type": "text", "text": c["text"]}
                    if c["type"] == "input_text"
                    else {
                        "type": "image_url",
                        "image_url": {"url": c["image_url"], "detail": "auto"},
                    }
                    for c in i["content"]
                ]
                assert any(m["role"] == i["role"] and m["content"] == want for m in messages)
            elif i["type"] == "message":
                assert any(
                    m["role"] == i["role"] and i["content"] in _chat_content(m) for m in messages
                )
        tools = [t["function"]["name"] for t in chat.get("tools") or ()]
        assert tools == [t["name"] for t in params.get("tools", ())]


def test_native_rows_cover_parallel_calls_and_reasoning(consumers: Consumers) -> None:
    inputs = [
        row["responses_create_params"]["input"] for k in NATIVE for row in _rows(consumers, k)
    ]
    outputs = [row["recorded_output"] for k in NATIVE for row in _rows(consumers, k)]
    for where in (inputs, outputs):
        items = [i for seq in where for i in seq]
        assert any(i["type"] == "reasoning" for i in items)
        assert any(i["type"] == "function_call_output" for i in items)
        # Parallel calls: two function calls in a row.
        assert any(
            a["type"] == b["type"] == "function_call"
            for seq in where
            for a, b in itertools.pairwise(seq)
        )
    calls = [i for seq in outputs for i in seq if i["type"] == "function_call"]
    assert any(json.loads(i["arguments"]).get("options") for i in calls)  # nested arguments


def test_native_rows_carry_images_and_documents_nemo_gym_accepts(consumers: Consumers) -> None:
    """The media rows (tests/export/helpers.py media_sessions) are in the native export, with
    input_image and input_file content; every test above checks them with NeMo Gym."""
    content = [
        c["type"]
        for row in consumers.rows("nemo-gym-native") + consumers.rows("nemo-gym-native", "eval")
        for i in row["responses_create_params"]["input"]
        if isinstance(i.get("content"), list)
        for c in i["content"]
    ]
    assert {"input_text", "input_image", "input_file"} <= set(content)
    skipped = consumers.summaries["nemo-gym-native"]["skipped"]
    assert skipped.get("server_tool_unsupported", 0) >= 1  # the web search session
    # The computer-use screenshot: a user message after the tool's output, NeMo Gym validates it.
    assert "media_unsupported" not in skipped
    assert consumers.summaries["nemo-gym-native"]["changes"].get("tool_media_as_user", 0) >= 1


def test_nemo_gym_has_no_item_for_server_tools_or_a_tools_media(nemo_gym_report: dict) -> None:
    """Why lithify skips rows with server tools, and moves a tool's media into a user message:
    NeMo Gym 0.4.0 refuses computer_call, computer_call_output, web_search_call and a
    function_call_output that is not a string."""
    checks = nemo_gym_report["files"]["control/no-item"]
    assert len(checks) == len(NO_ITEM_ROWS)
    for item, check in zip(NO_ITEM_ROWS, checks, strict=True):
        assert check["error"] is not None, item["type"]
