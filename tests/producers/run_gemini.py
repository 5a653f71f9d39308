"""Producers on the Gemini side: the google-genai SDK under the official OTel instrumentation, and
Google ADK's own telemetry, both talking to ``fake_gemini.py``.

- ``--producer google-genai``: ``opentelemetry-instrumentation-google-genai`` (util-genai's
  experimental semconv, its only mode since 1.0), content on spans and on
  ``gen_ai.client.inference.operation.details`` log events (``…CAPTURE_MESSAGE_CONTENT=
  span_and_event``). The weather tool loop driven by hand with ``client.models.generate_content``
  (``generate_content_stream`` when streamed), under a hand-written ``invoke_agent`` span as in
  run_otel.py. ``--semconv default`` (a 0.x instrumentation, requirements-google-genai-legacy.txt):
  its semconv 1.30 path instead, no ``OTEL_SEMCONV_STABILITY_OPT_IN`` and content capture
  ``true``: the span holds the metadata, the messages are per-message log events
  (``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.choice``).
- ``--producer adk``: a Google ADK ``LlmAgent`` with one function tool, run by its ``Runner`` and
  ``InMemorySessionService``; ADK's own spans and log records (no other instrumentation
  installed). ``--schema 2`` (ADK's default: semconv-aligned, ``invoke_workflow``, a
  ``generate_content`` span per model call with the experimental semconv) or ``--schema 1``
  (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``, the legacy ``call_llm`` spans with
  ``gcp.vertex.agent.llm_request`` / ``llm_response`` JSON, and ADK's stable-semconv
  ``generate_content`` span and per-message log events).

Written per scenario by common.py, as run_otel.py's are (harness.py, the OpenAI side, is not
imported: it aliases httpx to httpx2, and the google-genai SDK 2.x talks through httpx):
``traces.pb`` / ``traces.json``, ``logs.pb`` / ``logs.json`` and ``exchanges.json``, and
``manifest.json``.

Usage (inside the producer venv): ``python run_gemini.py OUT --producer google-genai
[--semconv default]`` or
``python run_gemini.py OUT --producer adk [--schema 1]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import common  # imports no instrumentation: the environment below is still read when they load

PRODUCER = common.early_option(sys.argv[1:], "--producer", "google-genai")
SCHEMA = common.early_option(sys.argv[1:], "--schema", "2")
SEMCONV = common.early_option(sys.argv[1:], "--semconv", "experimental")
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
if PRODUCER == "google-genai" and SEMCONV == "default":
    # The instrumentation's semconv 1.30 path (0.x only; 1.x has no other): no opt-in, per-
    # message log events whose content needs the legacy `true`.
    os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
elif PRODUCER == "adk" and SCHEMA == "1":
    # The legacy format: call_llm spans with ADK's JSON (ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS
    # defaults on) and stable-semconv log events, whose content needs the legacy `true`.
    os.environ["ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN"] = "1"
    os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
else:
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_and_event")

from common import PARAMETERS, RESULTS, SYSTEM, TOOL_DESCRIPTION, TOOL_NAME, USER  # noqa: E402
from fake_gemini import MODEL, FakeGemini  # noqa: E402

# common.py's sampling under the Gemini API's names.
SAMPLING: dict[str, Any] = {
    ("max_output_tokens" if k == "max_tokens" else k): v for k, v in common.SAMPLING.items()
}
API_KEY = "test"

PACKAGES = {
    "google-genai": (
        "google-genai",
        "opentelemetry-instrumentation-google-genai",
        "opentelemetry-util-genai",
    ),
    "adk": ("google-genai", "google-adk"),
}


def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for one city.

    Args:
        city: City name
        unit: celsius or fahrenheit
    """
    return RESULTS[city]


# --- google-genai under opentelemetry-instrumentation-google-genai ----------------------------


def _joined(parts: list[Any]) -> list[Any]:
    """A streamed answer's parts as an application replays them: adjacent text pieces of one
    kind (thought or not) joined, everything else as it came."""
    from google.genai import types

    out: list[Any] = []
    for p in parts:
        prev = out[-1] if out else None
        if (
            p.text is not None
            and prev is not None
            and prev.text is not None
            and bool(prev.thought) == bool(p.thought)
            and not p.thought_signature
        ):
            out[-1] = prev.model_copy(update={"text": prev.text + p.text})
        else:
            out.append(types.Part.model_validate(p.model_dump(exclude_none=True)))
    return out


def converse_genai(base_url: str, *, stream: bool) -> None:
    from google import genai
    from google.genai import types

    client = genai.Client(
        api_key=API_KEY,
        http_options=types.HttpOptions(base_url=base_url, api_version="v1beta"),
    )
    config = types.GenerateContentConfig(
        system_instruction=SYSTEM,
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name=TOOL_NAME,
                        description=TOOL_DESCRIPTION,
                        parameters_json_schema=PARAMETERS,
                    )
                ]
            )
        ],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        thinking_config=types.ThinkingConfig(include_thoughts=True),
        **SAMPLING,
    )
    contents: list[Any] = [types.Content(role="user", parts=[types.Part(text=USER)])]
    for _turn in range(2):
        if stream:
            parts: list[Any] = []
            for chunk in client.models.generate_content_stream(
                model=MODEL, contents=contents, config=config
            ):
                for cand in chunk.candidates or []:
                    parts += (cand.content.parts or []) if cand.content else []
            content = types.Content(role="model", parts=_joined(parts))
        else:
            resp = client.models.generate_content(model=MODEL, contents=contents, config=config)
            content = resp.candidates[0].content  # replayed as it came back
        contents.append(content)
        calls = [p.function_call for p in content.parts or [] if p.function_call]
        if not calls:
            return
        contents.append(
            types.Content(
                role="user",
                parts=[
                    types.Part.from_function_response(
                        name=c.name, response={"result": RESULTS[c.args["city"]]}
                    )
                    for c in calls
                ],
            )
        )
    raise RuntimeError("the fake provider never gave a final answer")


def run_genai(capture: common.Capture, base_url: str, scenario: str, stream: bool) -> None:
    with common.agent_span(capture, "gcp.gemini"):
        converse_genai(base_url, stream=stream)


# --- Google ADK -------------------------------------------------------------------------------


def run_adk(capture: common.Capture, base_url: str, scenario: str, stream: bool) -> None:
    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.models.google_llm import Gemini
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    agent = LlmAgent(
        name="weather_agent",
        model=Gemini(model=MODEL, base_url=base_url),
        instruction=SYSTEM,
        tools=[get_weather],
        generate_content_config=types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(include_thoughts=True), **SAMPLING
        ),
    )

    async def go() -> None:
        sessions = InMemorySessionService()
        session = await sessions.create_session(
            app_name="weather", user_id="user-1", session_id=f"weather-session-{scenario}"
        )
        runner = Runner(agent=agent, app_name="weather", session_service=sessions)
        config = RunConfig(streaming_mode=StreamingMode.SSE if stream else StreamingMode.NONE)
        message = types.Content(role="user", parts=[types.Part(text=USER)])
        async for _event in runner.run_async(
            user_id="user-1", session_id=session.id, new_message=message, run_config=config
        ):
            pass
        await runner.close()

    asyncio.run(go())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--producer", choices=sorted(PACKAGES), required=True)
    p.add_argument("--schema", choices=("1", "2"), default="2")
    p.add_argument(
        "--semconv",
        choices=("experimental", "default"),
        default="experimental",
        help="google-genai: `default` runs a 0.x instrumentation's semconv 1.30 path",
    )
    args = p.parse_args()
    os.environ["GOOGLE_API_KEY"] = API_KEY
    for k in ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GEMINI_API_KEY"):
        os.environ.pop(k, None)
    capture = common.Capture(f"lithify-producer-{args.producer}")
    if args.producer == "google-genai":
        from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

        GoogleGenAiSdkInstrumentor().instrument(
            tracer_provider=capture.tracer_provider, logger_provider=capture.logger_provider
        )
        run = run_genai
    else:
        run = run_adk
    manifest: dict[str, Any] = {
        "producer": args.producer,
        "python": sys.version.split()[0],
        "versions": common.versions("opentelemetry-sdk", *PACKAGES[args.producer]),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("OTEL_", "ADK_"))},
    }
    common.run_scenarios(
        capture=capture,
        out=args.out,
        manifest=manifest,
        fake=FakeGemini,
        play=lambda fake, scenario, stream: run(capture, fake.base_url, scenario, stream),
    )


if __name__ == "__main__":
    main()
