"""Producers on the Gemini side: the google-genai SDK under the official OTel instrumentation, and
Google ADK's own telemetry, both talking to ``fake_gemini.py``.

- ``--producer google-genai``: ``opentelemetry-instrumentation-google-genai`` (util-genai's
  experimental semconv, its only mode since 1.0), content on spans and on
  ``gen_ai.client.inference.operation.details`` log events (``…CAPTURE_MESSAGE_CONTENT=
  span_and_event``). The weather tool loop driven by hand with ``client.models.generate_content``
  (``generate_content_stream`` when streamed), under a hand-written ``invoke_agent`` span as in
  run_otel.py.
- ``--producer adk``: a Google ADK ``LlmAgent`` with one function tool, run by its ``Runner`` and
  ``InMemorySessionService``; ADK's own spans and log records (no other instrumentation
  installed). ``--schema 2`` (ADK's default: semconv-aligned, ``invoke_workflow``, a
  ``generate_content`` span per model call with the experimental semconv) or ``--schema 1``
  (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``, the legacy ``call_llm`` spans with
  ``gcp.vertex.agent.llm_request`` / ``llm_response`` JSON, and ADK's stable-semconv
  ``generate_content`` span and per-message log events).

Written per scenario as run_otel.py does (harness.py is not imported: it aliases httpx to httpx2,
and the google-genai SDK 2.x talks through httpx): ``traces.pb`` / ``traces.json``,
``logs.pb`` / ``logs.json`` and ``exchanges.json``, and ``manifest.json``.

Usage (inside the producer venv): ``python run_gemini.py OUT --producer google-genai`` or
``python run_gemini.py OUT --producer adk [--schema 1]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _arg(argv: list[str], name: str, default: str) -> str:
    """An option read before argparse: the environment must be set before imports."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


PRODUCER = _arg(sys.argv[1:], "--producer", "google-genai")
SCHEMA = _arg(sys.argv[1:], "--schema", "2")
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
if PRODUCER == "adk" and SCHEMA == "1":
    # The legacy format: call_llm spans with ADK's JSON (ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS
    # defaults on) and stable-semconv log events, whose content needs the legacy `true`.
    os.environ["ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN"] = "1"
    os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
else:
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_and_event")

from fake_gemini import MODEL, FakeGemini  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry._logs import set_logger_provider  # noqa: E402
from opentelemetry.exporter.otlp.json.common._log_encoder import (  # noqa: E402
    encode_logs as encode_logs_json,
)
from opentelemetry.exporter.otlp.json.common.trace_encoder import (  # noqa: E402
    encode_spans as encode_spans_json,
)
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import (  # noqa: E402
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind  # noqa: E402

# The conversation of harness.py, word for word.
SYSTEM = "You are a weather assistant. Call get_weather once per city, then answer briefly."
USER = "What's the weather in Paris and in Zürich right now?"
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
    "additionalProperties": False,
}
RESULTS = {
    "Paris": '{"temperature": 18, "unit": "celsius", "conditions": "cloudy"}',
    "Zürich": "12 °C, light rain",
}
SAMPLING: dict[str, Any] = {"temperature": 0.2, "max_output_tokens": 256, "seed": 7}
API_KEY = "test"

PACKAGES = {
    "google-genai": (
        "google-genai",
        "opentelemetry-instrumentation-google-genai",
        "opentelemetry-util-genai",
    ),
    "adk": ("google-genai", "google-adk"),
}


class Capture:
    """The SDK wired to in-memory exporters, installed as the global providers (harness.py's)."""

    def __init__(self, service: str) -> None:
        resource = Resource.create({"service.name": service})
        self.spans = InMemorySpanExporter()
        self.logs = InMemoryLogRecordExporter()
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        trace.set_tracer_provider(self.tracer_provider)
        set_logger_provider(self.logger_provider)

    def clear(self) -> None:
        self.spans.clear()
        self.logs.clear()

    def write(self, out: Path) -> dict[str, int]:
        self.tracer_provider.force_flush()
        self.logger_provider.force_flush()
        spans = list(self.spans.get_finished_spans())
        logs = list(self.logs.get_finished_logs())
        out.mkdir(parents=True, exist_ok=True)
        (out / "traces.pb").write_bytes(encode_spans(spans).SerializeToString())
        _write_json(out / "traces.json", encode_spans_json(spans).to_dict())
        if logs:
            (out / "logs.pb").write_bytes(encode_logs(logs).SerializeToString())
            _write_json(out / "logs.json", encode_logs_json(logs).to_dict())
        return {"spans": len(spans), "logs": len(logs)}


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", "utf-8")


def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for one city.

    Args:
        city: City name
        unit: celsius or fahrenheit
    """
    return RESULTS[city]


# --- google-genai under opentelemetry-instrumentation-google-genai ----------------------------


@contextlib.contextmanager
def _agent_span(capture: Capture) -> Iterator[None]:
    """An agent span around the tool loop, as run_otel.py writes it."""
    tracer = capture.tracer_provider.get_tracer("lithify.producers.agent")
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "weather-agent",
        "gen_ai.provider.name": "gcp.gemini",
    }
    with tracer.start_as_current_span(
        "invoke_agent weather-agent", kind=SpanKind.INTERNAL, attributes=attrs
    ):
        yield


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
                        name="get_weather",
                        description="Current weather for one city.",
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


def run_genai(capture: Capture, base_url: str, scenario: str, stream: bool) -> None:
    with _agent_span(capture):
        converse_genai(base_url, stream=stream)


# --- Google ADK -------------------------------------------------------------------------------


def run_adk(capture: Capture, base_url: str, scenario: str, stream: bool) -> None:
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


def versions(*names: str) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = "missing"
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--producer", choices=sorted(PACKAGES), required=True)
    p.add_argument("--schema", choices=("1", "2"), default="2")
    args = p.parse_args()
    os.environ["GOOGLE_API_KEY"] = API_KEY
    for k in ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GEMINI_API_KEY"):
        os.environ.pop(k, None)
    capture = Capture(f"lithify-producer-{args.producer}")
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
        "versions": versions("opentelemetry-sdk", *PACKAGES[args.producer]),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("OTEL_", "ADK_"))},
        "scenarios": {},
    }
    for scenario, stream in (("plain", False), ("stream", True)):
        capture.clear()
        started = time.perf_counter()
        with FakeGemini(id_prefix=scenario) as fake:
            run(capture, fake.base_url, scenario, stream)
        folder = args.out / scenario
        counts = capture.write(folder)
        fake.dump(folder / "exchanges.json")
        manifest["scenarios"][scenario] = {
            **counts,
            "calls": len(fake.exchanges),
            "seconds": round(time.perf_counter() - started, 3),
        }
    _write_json(args.out / "manifest.json", manifest)


if __name__ == "__main__":
    main()
