"""The chat templates that ship inside TRL (``trl/chat_templates/*.jinja``: Qwen3, gpt-oss, Llama
3.1, DeepSeek-V3 piece by piece; Qwen3.5, GLM-4.5, Nemotron-3 and LFM2.5 for the parts every
template shows) render the SFT rows through ``transformers``' ``apply_chat_template`` (via
TRL's ``apply_chat_template``), each from the export in the shape it reads (pipeline.TEMPLATES):
the reasoning under the template's key, tool calls with their names and arguments (objects, or
JSON strings for DeepSeek-V3), the tool results, the text.

A template may refuse what its model cannot express; those refusals are listed here, each with
the exact message of the template's own ``raise_exception``, and must be the only errors:

- Llama 3.1: one tool call per assistant message;
- gpt-oss: an assistant message with tool calls cannot carry both text and reasoning;
- Qwen3.5: a conversation without a user turn.

The expected strings are written from each template's source: what it prints around each piece.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.consumers.pipeline import TEMPLATES, Consumers

pytestmark = pytest.mark.consumers

Row = dict[str, Any]
LLAMA_PARALLEL = "This model only supports single tool-calls at once!"
QWEN3_5_NO_USER = "No user query found in messages."
GPTOSS_BOTH = (
    "Cannot pass both content and thinking in an assistant message with tool calls! Put the "
    "analysis message in one or the other, but not both."
)


def dumps(value: Any) -> str:
    """Jinja's ``tojson`` as transformers defines it (json.dumps, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def assistants(row: Row) -> list[dict[str, Any]]:
    return [m for m in row["messages"] if m["role"] == "assistant"]


def tool_messages(row: Row) -> list[dict[str, Any]]:
    return [m for m in row["messages"] if m["role"] == "tool"]


def reasoning_texts(row: Row, key: str) -> list[str]:
    return [m[key] for m in assistants(row) if m.get(key)]


# -- what each template refuses ----------------------------------------------------------------


def llama_refuses(row: Row) -> str | None:
    return (
        LLAMA_PARALLEL if any(len(m.get("tool_calls", ())) > 1 for m in assistants(row)) else None
    )


def gptoss_refuses(row: Row) -> str | None:
    both = any(
        m.get("tool_calls") and m.get("content") and m.get("thinking") for m in assistants(row)
    )
    return GPTOSS_BOTH if both else None


def qwen3_5_refuses(row: Row) -> str | None:
    return None if any(m["role"] == "user" for m in row["messages"]) else QWEN3_5_NO_USER


REFUSES: dict[str, Callable[[Row], str | None]] = {
    "qwen3": lambda row: None,
    "llama3_1": llama_refuses,
    "gptoss": gptoss_refuses,
    "deepseekv3": lambda row: None,
    "qwen3_5_think": qwen3_5_refuses,
    "glm4moe": lambda row: None,
    "nemotron_3_nano": lambda row: None,
    "lfm2_2_5": lambda row: None,
}

# -- what each template prints -------------------------------------------------------------------


def qwen3(row: Row) -> list[str]:
    messages = row["messages"]
    # Without a user turn Qwen3's last query index stays on the last message.
    last_query = max(
        (i for i, m in enumerate(messages) if m["role"] == "user"), default=len(messages) - 1
    )
    out = [dumps(t) for t in row["tools"]]
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            for c in m.get("tool_calls", ()):
                fn = c["function"]
                out.append(
                    '<tool_call>\n{"name": "' + fn["name"] + '", "arguments": '
                    + dumps(fn["arguments"]) + "}\n</tool_call>"
                )  # fmt: skip
            if i > last_query and (i == len(messages) - 1 or m.get("reasoning_content")):
                # Reasoning after the last user query (Qwen3 drops older reasoning).
                out.append("<think>\n" + m.get("reasoning_content", "").strip("\n") + "\n</think>")
            out.append(m.get("content", ""))
        elif m["role"] == "tool":
            out.append("<tool_response>\n" + m["content"] + "\n</tool_response>")
        else:
            out.append(m["content"])
    return out


def llama3_1(row: Row) -> list[str]:
    out = [json.dumps(t, indent=4, ensure_ascii=False) for t in row["tools"]]
    for m in row["messages"]:
        if m["role"] == "assistant" and "tool_calls" in m:
            fn = m["tool_calls"][0]["function"]
            out.append(
                '{"name": "' + fn["name"] + '", "parameters": ' + dumps(fn["arguments"]) + "}"
            )
        elif m["role"] == "tool":
            out.append("<|start_header_id|>ipython<|end_header_id|>\n\n" + dumps(m["content"]))
        else:
            out.append(m.get("content", "").strip())
    return out


def gptoss(row: Row) -> list[str]:
    messages = row["messages"]
    out = []
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and "tool_calls" in m:
            fn = m["tool_calls"][0]["function"]  # gpt-oss prints the first call of a message
            out.append(
                "<|start|>assistant to=functions." + fn["name"] + "<|channel|>commentary json"
                "<|message|>" + dumps(fn["arguments"]) + "<|call|>"
            )
            later_final = any(
                n["role"] == "assistant" and "tool_calls" not in n for n in messages[i + 1 :]
            )
            if m.get("thinking") and not later_final:
                out.append("<|channel|>analysis<|message|>" + m["thinking"] + "<|end|>")
        elif m["role"] == "assistant":
            last = i == len(messages) - 1
            if last and m.get("thinking"):
                out.append("<|channel|>analysis<|message|>" + m["thinking"] + "<|end|>")
            end = "<|return|>" if last else "<|end|>"
            out.append("<|channel|>final<|message|>" + m.get("content", "") + end)
        elif m["role"] == "tool":
            out.append("to=assistant<|channel|>commentary<|message|>" + dumps(m["content"]))
        else:
            out.append(m["content"])
    return out


def deepseekv3(row: Row) -> list[str]:
    out = []
    for m in row["messages"]:
        if m["role"] == "assistant" and "tool_calls" in m:
            for c in m["tool_calls"]:
                fn = c["function"]
                out.append(
                    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + fn["name"]
                    + "\n```json\n" + fn["arguments"] + "\n```<｜tool▁call▁end｜>"
                )  # fmt: skip
            if m.get("content"):
                out.append(m["content"])
        elif m["role"] == "tool":
            out.append("<｜tool▁output▁begin｜>" + m["content"] + "<｜tool▁output▁end｜>")
        else:
            out.append(m["content"])
    return out


EXPECTED: dict[str, Callable[[Row], list[str]]] = {
    "qwen3": qwen3,
    "llama3_1": llama3_1,
    "gptoss": gptoss,
    "deepseekv3": deepseekv3,
}
# The reasoning key each template reads; None: it renders no reasoning at all.
READS = {
    "qwen3": "reasoning_content",
    "gptoss": "thinking",
    "llama3_1": None,
    "deepseekv3": None,
    "qwen3_5_think": "reasoning_content",
    "glm4moe": "reasoning_content",
    "nemotron_3_nano": "reasoning_content",
    "lfm2_2_5": "thinking",
}
EXTRA = [t for t in TEMPLATES if t not in EXPECTED]


def shown_everywhere(row: Row) -> list[str]:
    """What any template that reads the row's reasoning key prints, whatever its markup: the
    target's reasoning and text, every call's name and string argument, every tool result."""
    target = row["messages"][-1]
    out = [
        target.get("thinking") or target.get("reasoning_content") or "",
        target.get("content", ""),
    ]
    for m in row["messages"]:
        for c in m.get("tool_calls", ()):
            out.append(c["function"]["name"])
            out += [v for v in c["function"]["arguments"].values() if isinstance(v, str)]
        if m["role"] == "tool":
            out.append(m["content"])
    return out


def _renders(consumers: Consumers, report: dict, template: str) -> list[tuple[Row, dict]]:
    rows = consumers.rows(TEMPLATES[template])
    renders = report["templates"][template]
    assert len(renders) == len(rows) > 0
    return list(zip(rows, renders, strict=True))


def test_the_templates_are_trls_own(trl_report: dict) -> None:
    for name in TEMPLATES:
        path = trl_report["template_files"][name]
        assert path.endswith(f"/site-packages/trl/chat_templates/{name}.jinja"), path


def test_template_exports_hold_the_same_conversations(consumers: Consumers) -> None:
    """The four shapes are one set of rows: only the reasoning key and arguments differ."""
    base = consumers.rows("sft-trl")
    for key in set(TEMPLATES.values()):
        rows = consumers.rows(key)
        assert [r["metadata"]["source_call_ids"] for r in rows] == [
            r["metadata"]["source_call_ids"] for r in base
        ]
        for row, b in zip(rows, base, strict=True):
            for m, n in zip(row["messages"], b["messages"], strict=True):
                assert m.get("thinking", m.get("reasoning_content")) == n.get("reasoning_content")
                for c, d in zip(m.get("tool_calls", ()), n.get("tool_calls", ()), strict=True):
                    args = c["function"]["arguments"]
                    if key == "sft-trl-string":
                        assert isinstance(args, str)
                        args = json.loads(args)
                    assert json.dumps(args) == json.dumps(d["function"]["arguments"])


@pytest.mark.parametrize("template", list(TEMPLATES))
def test_template_renders_every_row_it_can_express(
    consumers: Consumers, trl_report: dict, template: str
) -> None:
    unexpected = []
    for row, render in _renders(consumers, trl_report, template):
        refusal = REFUSES[template](row)
        got = render.get("error", {}).get("message")
        if got != refusal:
            unexpected.append(
                {"source_call_ids": row["metadata"]["source_call_ids"], "expected": refusal, "got": render.get("error")}
            )  # fmt: skip
    assert not unexpected, f"{template}: {len(unexpected)} rows: {unexpected}"


@pytest.mark.parametrize("template", EXTRA)
def test_more_templates_print_reasoning_calls_and_results(
    consumers: Consumers, trl_report: dict, template: str
) -> None:
    rendered = 0
    for row, render in _renders(consumers, trl_report, template):
        if "text" in render:
            rendered += 1
            for piece in shown_everywhere(row):
                assert piece in render["text"], (
                    template,
                    row["metadata"]["source_call_ids"],
                    piece,
                )
    assert rendered >= len(consumers.rows(TEMPLATES[template])) - 1


@pytest.mark.parametrize("template", list(EXPECTED))
def test_template_prints_reasoning_calls_arguments_and_results(
    consumers: Consumers, trl_report: dict, template: str
) -> None:
    rendered = 0
    for row, render in _renders(consumers, trl_report, template):
        if "text" not in render:
            continue  # refusals and failures: test_template_renders_every_row_it_can_express
        rendered += 1
        text = render["text"]
        for piece in EXPECTED[template](row):
            assert piece in text, (template, row["metadata"]["source_call_ids"], piece)
        if READS[template] is None:
            # A template without a reasoning field never shows reasoning as visible text.
            for reasoning in reasoning_texts(row, "thinking") + reasoning_texts(
                row, "reasoning_content"
            ):
                assert reasoning not in text, (template, reasoning)
    assert rendered > 0


@pytest.mark.parametrize("template", list(EXPECTED))
def test_template_coverage(consumers: Consumers, trl_report: dict, template: str) -> None:
    """The rendered rows include the hard cases for this template, so the checks above bite."""
    rendered = [
        row for row, render in _renders(consumers, trl_report, template) if "text" in render
    ]
    key = READS[template]
    calls = [len(m.get("tool_calls", ())) for row in rendered for m in assistants(row)]
    assert max(calls) >= (1 if template in ("llama3_1", "gptoss") else 2), template
    assert any(tool_messages(row) for row in rendered)
    assert any(len(assistants(row)) >= 3 for row in rendered)
    if template != "llama3_1":  # Llama's multi-query rows all hold parallel calls (refused)
        assert any(sum(m["role"] == "user" for m in row["messages"]) >= 2 for row in rendered)
    if key is not None:
        targets = [row["messages"][-1] for row in rendered]
        assert sum(bool(t.get(key)) for t in targets) >= 5, template
        assert any(t.get(key) and t.get("tool_calls") for t in targets), template
