"""Producer: Pydantic AI's own instrumentation (``Agent(..., instrument=InstrumentationSettings(
...))``), a real agent with a real ``OpenAIChatModel`` on the real ``openai`` SDK, talking to the
fake provider.

The agent runs the same tool loop as the other producers: instructions + user prompt, two
parallel ``get_weather`` calls (Paris, Zürich), their two results, the final answer. The fake
provider also sends ``reasoning_content`` with the tool calls, which ``OpenAIChatModel`` reads
as a thinking part (and sends back on the next request). ``plain`` runs ``agent.run``;
``stream`` runs it with an ``event_stream_handler``, so every model request is streamed.

``--mode`` picks the instrumentation format (``InstrumentationSettings.version``, unrelated to
the package version): ``default`` (what the installed release defaults to), ``v1-attributes``
(version 1, the messages as a JSON ``events`` span attribute), ``v1-logs`` (version 1, one OTel
log event per message), ``v2`` … ``v6``. Version 1 and ``event_mode`` exist up to pydantic-ai
1.x only.

Usage (inside the producer venv): ``python run_pydantic_ai.py OUT --mode default``
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import warnings
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any, Literal

import common
import harness  # aliases httpx to httpx2 before pydantic-ai loads
from fake_openai import FakeOpenAI

PACKAGES = ("pydantic-ai-slim", "pydantic-graph", "genai-prices", "tiktoken")
MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "v1-attributes": {"version": 1, "event_mode": "attributes"},
    "v1-logs": {"version": 1, "event_mode": "logs"},
    **{f"v{n}": {"version": n} for n in range(2, 7)},
}


def settings(mode: str, capture: common.Capture) -> Any:
    from pydantic_ai.models.instrumented import InstrumentationSettings

    kwargs: dict[str, Any] = {"tracer_provider": capture.tracer_provider, **MODES[mode]}
    if kwargs.get("event_mode") == "logs":
        kwargs["logger_provider"] = capture.logger_provider
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the deprecated formats warn: they are what is tested
        return InstrumentationSettings(**kwargs)


def agent(base_url: str, instrument: Any) -> tuple[Any, Any]:
    """The weather agent on a fresh OpenAI client; returns (agent, client)."""
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(base_url=base_url, api_key="sk-test-not-a-real-key-0000", max_retries=0)
    model = OpenAIChatModel(harness.REQUEST_MODEL, provider=OpenAIProvider(openai_client=client))
    weather = Agent(
        model,
        name="weather-agent",
        instructions=common.SYSTEM,
        model_settings=dict(common.SAMPLING),
    )
    # A constructor argument up to 1.x, a property since: the property works in both.
    weather.instrument = instrument

    @weather.tool_plain
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
        """Current weather for one city.

        Args:
            city: City name
            unit: Temperature unit
        """
        return common.RESULTS[city]

    return weather, client


async def _drain(_ctx: Any, events: AsyncIterable[Any]) -> None:
    async for _event in events:
        pass


async def converse(base_url: str, instrument: Any, *, stream: bool) -> str:
    weather, client = agent(base_url, instrument)
    try:
        if stream:
            result = await weather.run(common.USER, event_stream_handler=_drain)
        else:
            result = await weather.run(common.USER)
    finally:
        await client.close()
    return str(result.output)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--mode", choices=sorted(MODES), required=True)
    args = p.parse_args()
    capture = common.Capture(f"lithify-producer-pydantic-ai-{args.mode}")
    instrument = settings(args.mode, capture)

    def play(fake: FakeOpenAI, scenario: str, stream: bool) -> dict[str, Any]:
        return {"output": asyncio.run(converse(fake.base_url, instrument, stream=stream))}

    manifest: dict[str, Any] = {
        "producer": f"pydantic-ai {args.mode}",
        "python": sys.version.split()[0],
        "versions": common.versions("openai", "httpx2", "opentelemetry-sdk", *PACKAGES),
        "instrumentation": {
            "version": instrument.version,
            "event_mode": getattr(instrument, "event_mode", None),
        },
    }
    common.run_scenarios(
        capture=capture,
        out=args.out,
        manifest=manifest,
        fake=functools.partial(FakeOpenAI, reasoning=True),
        play=play,
    )


if __name__ == "__main__":
    main()
