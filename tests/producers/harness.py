"""What the OpenAI producer scripts share: httpx aliased to httpx2 before any instrumentation
loads, and the weather-agent conversation (common.py's) driven through the real ``openai`` SDK
against ``fake_openai.py``, both scenarios run and written by common.py.

Runs inside a producer venv (never in lithify's own).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# openai 3.x talks through httpx2; instrumentations that still `import httpx` must get httpx2's
# classes (an `isinstance(base_url, httpx.URL)` check, for one), so alias before they load.
import httpx2

httpx2.alias_httpx()

from common import (  # noqa: E402
    PARAMETERS,
    RESULTS,
    SAMPLING,
    SYSTEM,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    USER,
    Capture,
    run_scenarios,
    versions,
)
from fake_openai import FakeOpenAI  # noqa: E402

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": PARAMETERS},
    }
]
REQUEST_MODEL = "gpt-4o-mini"


def _assistant_from_stream(stream: Any) -> dict[str, Any]:
    """Join a streamed answer into the assistant message an application replays."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                content.append(delta.content)
            for tc in delta.tool_calls or []:
                slot = calls.setdefault(
                    tc.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if tc.id:
                    slot["id"] = tc.id
                if tc.function and tc.function.name:
                    slot["function"]["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    slot["function"]["arguments"] += tc.function.arguments
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    return msg


def converse(client: Any, *, stream: bool) -> None:
    """The two-call tool loop: tool calls for both cities, their results, the final answer."""
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
    ]
    extra: dict[str, Any] = (
        {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    )
    for _turn in range(2):
        resp = client.chat.completions.create(
            model=REQUEST_MODEL, messages=messages, tools=TOOLS, **SAMPLING, **extra
        )
        if stream:
            assistant: Any = _assistant_from_stream(resp)
            calls = [(c["id"], c["function"]["arguments"]) for c in assistant.get("tool_calls", [])]
        else:
            # What most applications do: replay the SDK's message object as it came back.
            assistant = resp.choices[0].message
            calls = [(c.id, c.function.arguments) for c in assistant.tool_calls or []]
        messages.append(assistant)
        if not calls:
            return
        for call_id, arguments in calls:
            city = json.loads(arguments)["city"]
            messages.append({"role": "tool", "tool_call_id": call_id, "content": RESULTS[city]})
    raise RuntimeError("the fake provider never gave a final answer")


def run(
    *,
    producer: str,
    out: Path,
    packages: tuple[str, ...],
    wrap: Callable[[Capture, str], contextlib.AbstractContextManager[Any]],
    capture: Capture,
    latency: float = 0.0,
) -> None:
    """Run both scenarios against a fresh fake provider each; write outputs and a manifest.

    ``wrap`` opens whatever context the producer runs the conversation in (an agent span, a
    session); it gets the scenario name. ``latency``: seconds the provider takes to answer.
    """
    from openai import OpenAI

    def play(fake: FakeOpenAI, scenario: str, stream: bool) -> None:
        client = OpenAI(
            base_url=fake.base_url, api_key="sk-test-not-a-real-key-0000", max_retries=0
        )
        with wrap(capture, scenario):
            converse(client, stream=stream)
        client.close()

    manifest: dict[str, Any] = {
        "producer": producer,
        "python": sys.version.split()[0],
        "versions": versions("openai", "httpx2", "opentelemetry-sdk", *packages),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("OTEL_")},
    }
    fake = functools.partial(FakeOpenAI, latency=latency)
    run_scenarios(capture=capture, out=out, manifest=manifest, fake=fake, play=play)
