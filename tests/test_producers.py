"""Real producers: the real OTel GenAI instrumentations and the real ``openai`` SDK, talking to a
local fake provider, captured with the OTel SDK's exporters and converted by lithify.

Each producer runs in its own venv (``bash scripts/producers-setup`` builds them) through a script
in ``tests/producers/``; it writes, per scenario (``plain``: non-streamed, ``stream``: SSE), the
capture as OTLP protobuf and OTLP/JSON plus the fake provider's record of every exchange. The tests
check that both encodings give the same facts, one per model call, and that the facts say what the
provider was sent and answered, in canonical terms (docs/canonical.md). The expected messages are
built here from the recorded HTTP bodies, independently of lithify's translators.

``LITHIFY_UPDATE_EXAMPLES=1`` also copies each producer's non-streamed capture into
``src/lithify/examples/`` (the example telemetry the package ships).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from lithify.core import identity
from lithify.derive.sessions import DeriveStats, sort_facts
from lithify.ingest.files import read_file
from lithify.model import InferenceCall, Skip
from tests.helpers import assert_valid_messages

pytestmark = pytest.mark.producers

ROOT = Path(__file__).resolve().parents[1]
PRODUCERS_DIR = ROOT / "tests" / "producers"
EXAMPLES = ROOT / "src" / "lithify" / "examples"
UPDATE_EXAMPLES = bool(os.environ.get("LITHIFY_UPDATE_EXAMPLES"))

MODEL = "gpt-4o-mini-2024-07-18"  # what the fake provider answers with (fake_openai.MODEL)
SAMPLING = {"max_tokens": 256, "seed": 7, "temperature": 0.2}  # harness.SAMPLING
SCENARIOS = ("plain", "stream")
CALLS = 2  # the tool loop: tool calls, then the final answer
HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class Producer:
    name: str
    script: str
    args: tuple[str, ...]
    source: str
    spans: int  # per scenario, model-call spans included
    logs: int  # log records per scenario
    records_tools: bool
    records_response_id: bool
    # "agent": the trace of the enclosing agent span; "conversation": the agent run span's
    # gen_ai.conversation.id, which the calls repeat; "none": the signal carries none; else an
    # explicit id prefix
    session: str
    venv: str = ""  # .venv-producers-<venv> and requirements-<venv>.txt; the name when empty
    # Where the calls' content is: "traces" (span attributes or span events), or "logs" (per-
    # message log events, the spans holding the metadata alone: each call is read from its log
    # events, filled with its span's metadata, as a store and fact files read it).
    content: str = "traces"
    # "python": the script runs in .venv-producers-<env>; "node": a Node.js project in
    # tests/producers/<env>/ (package-lock.json, node_modules from producers-setup), driven by a
    # stdlib-only script run with this interpreter.
    runtime: str = "python"
    # The provider API the producer talks to: "openai-chat" (fake_openai.py) or "gemini"
    # (fake_gemini.py: the Gemini API; its facts are checked by the Gemini tests below).
    wire: str = "openai-chat"
    # Log records of the streamed scenario, when they differ from the plain one's.
    stream_logs: int | None = None

    @property
    def env(self) -> str:
        return self.venv or self.name


PRODUCERS = {
    p.name: p
    for p in (
        # Content on spans and on gen_ai.client.inference.operation.details log events; the two
        # calls run under a hand-written invoke_agent span. 2.4b0 records no tool definitions.
        Producer(
            "openai-v2",
            "run_otel.py",
            ("--instrumentation", "openai-v2"),
            "otel-genai",
            spans=3,
            logs=2,
            records_tools=False,
            records_response_id=True,
            session="agent",
        ),
        # The same instrumentation in its default mode (no OTEL_SEMCONV_STABILITY_OPT_IN,
        # content capture `true`): semconv 1.30, a chat span with the metadata and no content,
        # and one log record per message (gen_ai.system.message … gen_ai.choice) carrying the
        # body and gen_ai.system only. Model, usage, sampling, response id and the agent trace
        # (the session) stay on the span, a metadata-only capture (content_not_captured); the
        # log events have the messages, the provider and the choices' finish reasons.
        Producer(
            "openai-v2-default",
            "run_otel.py",
            ("--instrumentation", "openai-v2", "--semconv", "default"),
            "otel-genai",
            spans=3,
            logs=9,
            records_tools=False,
            records_response_id=True,
            session="agent",
            venv="openai-v2",
            content="logs",
        ),
        Producer(
            "genai-openai",
            "run_otel.py",
            ("--instrumentation", "genai-openai"),
            "otel-genai",
            spans=3,
            logs=2,
            records_tools=True,
            records_response_id=True,
            session="agent",
        ),
        # OpenInference writes no logs and no response-id attribute (the id is only inside the
        # output.value JSON); its calls run inside using_session("weather-session-<scenario>").
        Producer(
            "openinference",
            "run_openinference.py",
            (),
            "openinference",
            spans=2,
            logs=0,
            records_tools=True,
            records_response_id=False,
            session="weather-session-",
        ),
        # Pydantic AI's own instrumentation (run_pydantic_ai.py): a real agent, one run per
        # scenario: the agent run span, two chat spans, two execute_tool spans. The fake provider
        # sends reasoning_content with the tool calls. The current release's default format
        # (version 5) and version 6 (tool results in `tool` messages) ...
        Producer(
            "pydantic-ai",
            "run_pydantic_ai.py",
            ("--mode", "default"),
            "otel-genai",
            spans=5,
            logs=0,
            records_tools=True,
            records_response_id=True,
            session="conversation",
        ),
        Producer(
            "pydantic-ai-v6",
            "run_pydantic_ai.py",
            ("--mode", "v6"),
            "otel-genai",
            spans=5,
            logs=0,
            records_tools=True,
            records_response_id=True,
            session="conversation",
            venv="pydantic-ai",
        ),
        # ... and 1.x (1.107.10): version 2, its default (gen_ai.input.messages as now), and
        # version 1, the messages as per-message events in a JSON `events` span attribute ...
        Producer(
            "pydantic-ai-v2",
            "run_pydantic_ai.py",
            ("--mode", "v2"),
            "otel-genai",
            spans=5,
            logs=0,
            records_tools=True,
            records_response_id=True,
            session="conversation",
            venv="pydantic-ai-v1",
        ),
        Producer(
            "pydantic-ai-v1-attributes",
            "run_pydantic_ai.py",
            ("--mode", "v1-attributes"),
            "otel-genai",
            spans=5,
            logs=0,
            records_tools=True,
            records_response_id=True,
            session="conversation",
            venv="pydantic-ai-v1",
        ),
        # ... or as OTel log events (event_mode='logs'): 3 + 6 records. The records carry the
        # messages and gen_ai.system only: model, usage, sampling, response id, tool definitions,
        # finish reasons and the conversation id stay on the span, which holds no content.
        Producer(
            "pydantic-ai-v1-logs",
            "run_pydantic_ai.py",
            ("--mode", "v1-logs"),
            "otel-genai",
            spans=5,
            logs=9,
            records_tools=True,
            records_response_id=True,
            session="conversation",
            venv="pydantic-ai-v1",
            content="logs",
        ),
        # The Vercel AI SDK (TypeScript, `ai` 6.x with @ai-sdk/openai's Chat Completions model)
        # and its own spans: per scenario the run span (ai.generateText / ai.streamText), two
        # call spans (….doGenerate / ….doStream) and two ai.toolCall spans, exported by the OTel
        # JS SDK's real OTLP/HTTP exporters. Session: `metadata: {sessionId}`.
        Producer(
            "vercel-ai",
            "run_vercel_ai.py",
            (),
            "vercel-ai",
            spans=5,
            logs=0,
            records_tools=True,
            records_response_id=True,
            session="weather-session-",
            runtime="node",
        ),
        # The Gemini side (run_gemini.py, fake_gemini.py: thinking answers, calls without ids).
        # opentelemetry-instrumentation-google-genai on the google-genai SDK, util-genai's
        # experimental semconv (its only mode): content on the span and on one operation.details
        # log record per call, under a hand-written invoke_agent span.
        Producer(
            "google-genai",
            "run_gemini.py",
            ("--producer", "google-genai"),
            "otel-genai",
            spans=3,
            logs=2,
            records_tools=True,
            records_response_id=True,
            session="agent",
            wire="gemini",
        ),
        # The same instrumentation's last 0.x release (0.7b2, util-genai 0.3b0) in its default
        # mode (semconv 1.30, content capture `true`): the span has the metadata and no content,
        # the messages are per-message log events (gen_ai.system.message, a gen_ai.user.message
        # per entry of contents, a gen_ai.choice per candidate: one per streamed chunk).
        Producer(
            "google-genai-legacy",
            "run_gemini.py",
            ("--producer", "google-genai", "--semconv", "default"),
            "otel-genai",
            spans=3,
            logs=8,
            records_tools=False,
            records_response_id=False,
            session="agent",
            wire="gemini",
            content="logs",
            stream_logs=22,
        ),
        # 0.7b2 opted in (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, capture
        # span_and_event): util-genai 0.3b0's semconv messages on the span and on one
        # operation.details record, ids made up, thoughts as text, and no provider name.
        Producer(
            "google-genai-legacy-experimental",
            "run_gemini.py",
            ("--producer", "google-genai"),
            "otel-genai",
            spans=3,
            logs=2,
            records_tools=True,
            records_response_id=False,
            session="agent",
            venv="google-genai-legacy",
            wire="gemini",
        ),
        # Google ADK's own telemetry, its default schema (2): invoke_workflow > invoke_agent >
        # generate_content spans (semconv content) and execute_tool spans, one operation.details
        # log record per call. No response id; the session is the ADK session id.
        Producer(
            "adk",
            "run_gemini.py",
            ("--producer", "adk"),
            "otel-genai",
            spans=7,
            logs=2,
            records_tools=True,
            records_response_id=False,
            session="weather-session-",
            wire="gemini",
        ),
        # ADK's legacy schema (ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1): invocation > invoke_agent
        # > call_llm (gcp.vertex.agent.llm_request / llm_response JSON) > generate_content (no
        # content: per-message log events, one gen_ai.choice per streamed chunk).
        Producer(
            "adk-v1",
            "run_gemini.py",
            ("--producer", "adk", "--schema", "1"),
            "adk",
            spans=9,
            logs=8,
            records_tools=True,
            records_response_id=False,
            session="weather-session-",
            venv="adk",
            wire="gemini",
            stream_logs=22,
        ),
    )
}
# The OpenAI-side producers; the Gemini side's cases are GEMINI_CASES.
CASES = [(p, s) for p in PRODUCERS if PRODUCERS[p].wire == "openai-chat" for s in SCENARIOS]


# ---------------------------------------------------------------------------------------------
# running the producers (once per test session, shared by the xdist workers)


def _clean_env() -> dict[str, str]:
    """The environment without settings that would change what a producer emits or where its
    client connects (OTel/OpenInference switches, OpenAI endpoints, proxies)."""
    drop = ("OTEL_", "OPENINFERENCE_", "OPENAI_")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(drop) and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(producer: Producer, out: Path) -> str | None:
    """Run one producer into ``out``; the reason it failed, if it did."""
    python = ROOT / f".venv-producers-{producer.env}" / "bin" / "python"
    if producer.runtime == "node":
        python = Path(sys.executable)
        if not (PRODUCERS_DIR / producer.env / "node_modules").is_dir():
            pytest.fail(
                f"tests/producers/{producer.env}/node_modules is missing: run"
                " `bash scripts/producers-setup` (scripts/test does it for you)",
                pytrace=False,
            )
    elif not python.exists():
        pytest.fail(
            f"producer venv {python.parent.parent.name} is missing: run `bash scripts/producers-setup`"
            " (scripts/test does it for you)",
            pytrace=False,
        )
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [str(python), str(PRODUCERS_DIR / producer.script), str(tmp), *producer.args]
    try:
        proc = subprocess.run(
            cmd,
            cwd=PRODUCERS_DIR,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{producer.name}: the producer script ran for over 120 s"
    if proc.returncode != 0:
        return f"{producer.name}: {' '.join(cmd)} exited {proc.returncode}\n{proc.stderr[-4000:]}"
    tmp.rename(out)
    return None


@pytest.fixture(scope="session")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The output folder of a producer, running it the first time any worker asks."""
    base = tmp_path_factory.getbasetemp()
    # Under xdist every worker has its own basetemp inside the session's: share that one.
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "producers"
    root.mkdir(parents=True, exist_ok=True)

    def get(name: str) -> Path:
        out = root / name
        failed = root / f"{name}.failed"
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # A failed run fails every test of that producer, without running it again.
            if not (out / "manifest.json").exists() and not failed.exists():
                error = _run(PRODUCERS[name], out)
                if error:
                    failed.write_text(error)
        if failed.exists():
            pytest.fail(failed.read_text(), pytrace=False)
        return out

    return get


def _results(path: Path) -> list[InferenceCall | Skip]:
    return [located.result for located in read_file(path)]


def _facts(results: list[InferenceCall | Skip]) -> list[InferenceCall]:
    return sorted(
        (r for r in results if isinstance(r, InferenceCall)), key=lambda f: f.started_at or ""
    )


def _exchanges(folder: Path) -> list[dict[str, Any]]:
    return orjson.loads((folder / "exchanges.json").read_bytes())


# ---------------------------------------------------------------------------------------------
# the expected facts, from the recorded HTTP bodies


def _text(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    if isinstance(content, list):
        return [
            {"type": "text", "content": p["text"]}
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and p.get("text")
        ]
    return []


def _reasoning(message: dict[str, Any]) -> list[dict[str, Any]]:
    """Chat-form thinking (``reasoning_content``), which comes before the content."""
    r = message.get("reasoning_content")
    return [{"type": "reasoning", "content": r}] if r else []


def _tool_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "tool_call",
            "id": c["id"],
            "name": c["name"],
            "arguments": orjson.loads(c["arguments"]),
        }
        for c in calls
    ]


def expected_input(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The canonical input messages of a Chat Completions request body."""
    out = []
    for m in request["messages"]:
        if m["role"] == "tool":
            # The result stays the string the model was sent, JSON-looking or not.
            parts = [
                {"type": "tool_call_response", "id": m["tool_call_id"], "result": m["content"]}
            ]
        else:
            calls = [
                {
                    "id": c["id"],
                    "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"],
                }
                for c in m.get("tool_calls") or []
            ]
            parts = [*_reasoning(m), *_text(m.get("content")), *_tool_calls(calls)]
        out.append({"role": m["role"], "parts": parts, "finish_reason": None})
    return out


def expected_output(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The canonical output message."""
    reason = {"tool_calls": "tool_call"}.get(answer["finish_reason"], answer["finish_reason"])
    parts = [*_reasoning(answer), *_text(answer["content"]), *_tool_calls(answer["tool_calls"])]
    return [{"role": "assistant", "parts": parts, "finish_reason": reason}]


def _stated_finishes(span: InferenceCall) -> list[str]:
    """The finish reasons a metadata-only span's fact states (its
    gen_ai.response.finish_reasons, OTel's names), which it holds as outputs without parts."""
    stated = span.raw["attributes"].get("gen_ai.response.finish_reasons", [])
    return [{"tool_calls": "tool_call"}.get(r, r) for r in stated]


def expected_tools(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": t["function"]["name"],
            "description": t["function"].get("description"),
            "parameters": t["function"].get("parameters") or {},
        }
        for t in request.get("tools") or []
    ]


def _b(obj: Any) -> Any:
    return msgspec.to_builtins(obj)


# ---------------------------------------------------------------------------------------------
# the tests


def _pins(req: Path) -> Iterator[tuple[str, str]]:
    for line in req.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            yield from _pins(req.parent / line[3:].strip())
        elif "==" in line:
            name, version = line.split("==", 1)
            name = name.split("[", 1)[0]  # `pkg[extra]==v` pins pkg
            yield name.strip().lower().replace("_", "-"), version.strip()


def _node_pins(lock: Path) -> dict[str, str]:
    """The packages a package-lock.json (v3) installs at the top of node_modules, by name."""
    packages = orjson.loads(lock.read_bytes())["packages"]
    return {
        path.removeprefix("node_modules/"): meta["version"]
        for path, meta in packages.items()
        if path.startswith("node_modules/") and path.count("node_modules/") == 1
    }


def _walk_spans(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            yield from ss.get("spans", [])


@pytest.mark.parametrize("name", PRODUCERS)
def test_producer_runs_and_writes_otlp(name: str, produced: Callable[[str], Path]) -> None:
    """The producer ran with the pinned versions and wrote both encodings of its capture."""
    p = PRODUCERS[name]
    out = produced(name)
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    if p.runtime == "node":
        pins = _node_pins(PRODUCERS_DIR / p.env / "package-lock.json")
    else:
        pins = dict(_pins(PRODUCERS_DIR / f"requirements-{p.env}.txt"))
    for package, version in manifest["versions"].items():
        assert pins.get(package.lower()) == version, (package, version, "venv differs from pins")
    for scenario in SCENARIOS:
        folder = out / scenario
        counts = manifest["scenarios"][scenario]
        assert counts["calls"] == CALLS
        logs = p.stream_logs if scenario == "stream" and p.stream_logs is not None else p.logs
        assert (counts["spans"], counts["logs"]) == (p.spans, logs)
        assert (folder / "traces.pb").stat().st_size > 0
        assert (folder / "logs.pb").exists() == (folder / "logs.json").exists() == (logs > 0)
        spans = list(_walk_spans(orjson.loads((folder / "traces.json").read_bytes())))
        assert len(spans) == p.spans
        for s in spans:
            # OTLP/JSON, not protobuf's JSON mapping: hex ids, integer enums.
            assert HEX32.match(s["traceId"]) and HEX16.match(s["spanId"]), s
            assert s.get("parentSpanId", "") == "" or HEX16.match(s["parentSpanId"]), s
            assert isinstance(s["kind"], int)
        for ex in _exchanges(folder):
            assert ex["stream"] == (scenario == "stream")
            if p.wire == "gemini":
                assert ex["path"].endswith(
                    ":streamGenerateContent?alt=sse" if ex["stream"] else ":generateContent"
                )
                assert (
                    ex["response"].startswith("data: ")
                    if ex["stream"]
                    else "candidates" in ex["response"]
                )
            elif ex["stream"]:
                assert ex["response"].endswith("data: [DONE]\n\n")
            else:
                assert ex["response"]["object"] == "chat.completion"
        if UPDATE_EXAMPLES and scenario == "plain" and p.content == "traces" and p.wire != "gemini":
            EXAMPLES.mkdir(exist_ok=True)
            for signal in ("traces", "logs"):
                if (folder / f"{signal}.json").exists():
                    shutil.copyfile(folder / f"{signal}.json", EXAMPLES / f"{name}.{signal}.json")


@pytest.mark.parametrize(("name", "scenario"), CASES)
def test_protobuf_and_json_give_the_same_facts(
    name: str, scenario: str, produced: Callable[[str], Path]
) -> None:
    p = PRODUCERS[name]
    folder = produced(name) / scenario
    for signal in ("traces", "logs") if p.logs else ("traces",):
        from_pb = _results(folder / f"{signal}.pb")
        from_json = _results(folder / f"{signal}.json")
        # Spans that hold no content (their calls' messages are log events) give metadata-only
        # facts: one per call either way.
        assert len(_facts(from_pb)) == CALLS, (signal, [_b(r) for r in from_pb])
        assert [_b(r) for r in from_pb] == [_b(r) for r in from_json], signal


def _conversation_id(folder: Path) -> str:
    """The gen_ai.conversation.id of the run's agent span (Pydantic AI writes one per run)."""
    for s in _walk_spans(orjson.loads((folder / "traces.json").read_bytes())):
        attrs = {a["key"]: a["value"] for a in s["attributes"]}
        if attrs.get("gen_ai.operation.name") == {"stringValue": "invoke_agent"}:
            return attrs["gen_ai.conversation.id"]["stringValue"]
    raise AssertionError("no agent span")


@pytest.mark.parametrize(("name", "scenario"), CASES)
def test_facts_match_the_provider_traffic(
    name: str, scenario: str, produced: Callable[[str], Path]
) -> None:
    """One fact per model call, saying what the fake provider was sent and answered."""
    p = PRODUCERS[name]
    folder = produced(name) / scenario
    results = _results(folder / "traces.json")
    facts = _facts(results)
    exchanges = _exchanges(folder)
    assert len(facts) == len(exchanges) == CALLS, [_b(r) for r in results]
    # Everything else in the batch is the agent span (and tool spans), no model call.
    skips = [r.reason for r in results if isinstance(r, Skip)]
    assert skips == ["not_genai"] * (p.spans - CALLS)
    if p.content == "logs":
        # The spans hold the calls' metadata and no message part (the finish reasons as
        # outputs without parts); the log events the messages. Each call is read from its log
        # events with its span's metadata (and finish reasons, where they state none) filled in.
        for span in facts:
            assert span.input_messages == [] and identity.part_count(span) == 0
            assert [m.finish_reason for m in span.output_messages] == _stated_finishes(span)
            assert span.degradations == {"content_not_captured": 1}
        events = _results(folder / "logs.json")
        assert not [r for r in events if isinstance(r, Skip)]
        facts = sort_facts([*facts, *_facts(events)])
        assert len(facts) == CALLS

    for fact, ex in zip(facts, exchanges, strict=True):
        request, answer = ex["request"], ex["answer"]
        assert_valid_messages(fact)
        assert fact.source.name == p.source
        assert _b(fact.input_messages) == expected_input(request)
        assert _b(fact.output_messages) == expected_output(answer)
        assert _b(fact.tools) == (expected_tools(request) if p.records_tools else [])
        assert fact.provider == "openai"
        assert fact.model == answer["model"] == MODEL
        assert fact.request == SAMPLING
        assert fact.input_tokens == answer["usage"]["prompt_tokens"]
        assert fact.output_tokens == answer["usage"]["completion_tokens"]
        if p.records_response_id:
            assert fact.model_call_id == answer["id"]
        else:
            assert fact.model_call_id in (None, answer["id"])
        assert fact.degradations == {}
        assert fact.trace_id and HEX32.match(fact.trace_id)
        assert fact.span_id and HEX16.match(fact.span_id)
        assert fact.duration_ms is not None and fact.duration_ms > 0
        assert fact.started_at is not None and fact.observed_at is not None
        if p.session == "agent":
            assert fact.session_id == fact.trace_id
            assert fact.parent_span_id is not None
        elif p.session == "conversation":
            assert fact.session_id == _conversation_id(folder)
            assert fact.parent_span_id is not None
        elif p.session == "none":
            assert fact.session_id is None
        else:
            assert fact.session_id == p.session + scenario
        assert b"sk-test" not in orjson.dumps(_b(fact))

    assert len({f.inference_call_id for f in facts}) == CALLS
    assert len({f.span_id for f in facts}) == CALLS
    # Call 1's answer is replayed in call 2's input: the same assistant turn, part for part.
    replay = facts[1].input_messages[len(facts[0].input_messages)]
    assert _b(replay.parts) == _b(facts[0].output_messages[0].parts)


@pytest.mark.parametrize(
    ("name", "scenario"),
    [(n, s) for n, s in CASES if PRODUCERS[n].logs and PRODUCERS[n].content == "traces"],
    ids=str,
)
def test_log_events_give_the_span_facts(
    name: str, scenario: str, produced: Callable[[str], Path]
) -> None:
    """The gen_ai.client.inference.operation.details events describe the same calls as the spans:
    same identity (so the two dedupe), same content and metadata."""
    folder = produced(name) / scenario
    spans = {f.inference_call_id: f for f in _facts(_results(folder / "traces.json"))}
    logs = _facts(_results(folder / "logs.json"))
    assert len(logs) == CALLS
    same = (
        "trace_id",
        "span_id",
        "input_messages",
        "output_messages",
        "tools",
        "provider",
        "model",
        "request",
        "input_tokens",
        "output_tokens",
        "model_call_id",
        "degradations",
    )
    for fact in logs:
        assert fact.inference_call_id in spans
        twin = spans[fact.inference_call_id]
        assert {k: _b(getattr(fact, k)) for k in same} == {k: _b(getattr(twin, k)) for k in same}


def _calls(folder: Path) -> list[InferenceCall]:
    """The calls of a run as a store or fact files read them: its spans' and log events' facts,
    one per call (the identity rule; a metadata-only span filled into its log events' call)."""
    logs = folder / "logs.json"
    facts = _facts(_results(folder / "traces.json"))
    if logs.exists():
        facts += _facts(_results(logs))
    return sort_facts(facts)


@pytest.mark.parametrize(("name", "scenario"), CASES)
def test_provider_traffic_gives_the_same_messages(
    name: str, scenario: str, produced: Callable[[str], Path]
) -> None:
    """The recorded HTTP exchanges, converted as provider traffic, give the telemetry's messages:
    the same call seen from the wire and from the instrumentation is the same fact content."""
    p = PRODUCERS[name]
    folder = produced(name) / scenario
    telemetry = _calls(folder)
    wire = [r for r in _results(folder / "exchanges.json") if isinstance(r, InferenceCall)]
    exchanges = _exchanges(folder)
    assert len(wire) == len(telemetry) == len(exchanges) == CALLS
    for w, t, ex in zip(wire, telemetry, exchanges, strict=True):
        assert _b(w.input_messages) == _b(t.input_messages)
        assert _b(w.output_messages) == _b(t.output_messages)
        assert (w.model, w.input_tokens, w.output_tokens) == (
            t.model,
            t.input_tokens,
            t.output_tokens,
        )
        if p.records_tools:
            assert _b(w.tools) == _b(t.tools)
        assert w.model_call_id == ex["answer"]["id"]


@pytest.mark.parametrize(
    ("name", "scenario"), [(n, s) for n, s in CASES if not PRODUCERS[n].records_tools], ids=str
)
def test_the_proxy_gives_the_calls_the_tools_the_instrumentation_leaves_out(
    name: str, scenario: str, produced: Callable[[str], Path]
) -> None:
    """openai-v2 records no tool definitions: its rows would be flagged undefined_tool_call.
    The same calls recorded by the proxy (their wire traffic, converted as the proxy's recorder
    converts it) share their response ids and content: one call each, read from the telemetry's
    capture with the session, its tools filled from the proxy's (docs/store.md, Call identity)."""
    folder = produced(name) / scenario
    wire = [r for r in _results(folder / "exchanges.json") if isinstance(r, InferenceCall)]
    stats = DeriveStats()
    calls = sort_facts([*_calls(folder), *wire], stats)
    assert len(calls) == CALLS and stats.duplicates == len(wire)
    for call, ex in zip(calls, _exchanges(folder), strict=True):
        assert _b(call.tools) == expected_tools(ex["request"]) != []
        assert call.session_id is not None and call.session_id == call.trace_id
        assert call.model_call_id == ex["answer"]["id"] and call.source.name == "otel-genai"


# The instrumentation format each Pydantic AI producer ran with (2.68.0 defaults to 5).
PYDANTIC_AI_FORMATS = {
    "pydantic-ai": 5,
    "pydantic-ai-v6": 6,
    "pydantic-ai-v2": 2,
    "pydantic-ai-v1-attributes": 1,
    "pydantic-ai-v1-logs": 1,
}


@pytest.mark.parametrize(("name", "scenario"), [c for c in CASES if c[0] in PYDANTIC_AI_FORMATS])
def test_pydantic_ai_agent_run_span_is_no_model_call(
    name: str, scenario: str, produced: Callable[[str], Path]
) -> None:
    """Pydantic AI's agent run span repeats the whole run: ``pydantic_ai.all_messages`` and
    ``gen_ai.system_instructions`` (format 2+), ``all_messages_events`` (format 1). It is a
    summary of the run, skipped as no model call, never a fact beside the calls'."""
    out = produced(name)
    version = PYDANTIC_AI_FORMATS[name]
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["instrumentation"]["version"] == version
    folder = out / scenario
    spans = list(_walk_spans(orjson.loads((folder / "traces.json").read_bytes())))
    agents = [
        s
        for s in spans
        if {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}
        in s["attributes"]
    ]
    assert len(agents) == 1
    keys = {a["key"] for a in agents[0]["attributes"]}
    if version == 1:
        assert "all_messages_events" in keys and "gen_ai.system_instructions" not in keys
    else:
        assert {"pydantic_ai.all_messages", "gen_ai.system_instructions"} <= keys
    results = _results(folder / "traces.json")
    agent = f"span {agents[0]['name']!r}"
    assert [r.reason for r in results if isinstance(r, Skip) and r.detail == agent] == ["not_genai"]
    assert len(_facts(results)) == CALLS  # metadata-only where the content is on log events


# ---------------------------------------------------------------------------------------------
# the Gemini side: google-genai under the OTel instrumentation, and Google ADK's own telemetry

GEMINI_CASES = [(p, s) for p in PRODUCERS if PRODUCERS[p].wire == "gemini" for s in SCENARIOS]
GEMINI_MODEL = "gemini-2.5-flash"  # fake_gemini.MODEL, requested and answered
GEMINI_RESULTS = {  # what the application returned for each city (run_gemini.RESULTS)
    "Paris": {"result": '{"temperature": 18, "unit": "celsius", "conditions": "cloudy"}'},
    "Zürich": {"result": "12 °C, light rain"},
}
# Spans that are no model call, per producer: agent, workflow and tool spans.
GEMINI_NOT_CALLS = {
    "google-genai": ["invoke_agent weather-agent"],
    "google-genai-legacy": ["invoke_agent weather-agent"],
    "google-genai-legacy-experimental": ["invoke_agent weather-agent"],
    "adk": [
        "execute_tool get_weather",
        "execute_tool get_weather",
        "execute_tool (merged)",
        "invoke_agent weather_agent",
        "invoke_workflow weather_agent",
    ],
    "adk-v1": [
        "execute_tool get_weather",
        "execute_tool get_weather",
        "execute_tool (merged)",
        "invoke_agent weather_agent",
        "invocation",
    ],
}


# Producers whose spans write a thought as a text part (no `thought` marker, no reasoning part),
# streamed a text part per chunk.
THOUGHTS_AS_TEXT = {"adk", "google-genai-legacy-experimental"}
# Producers whose output tokens are candidatesTokenCount alone (google-genai instrumentation 0.x):
# the thoughts' tokens (thoughtsTokenCount, part of the wire's output tokens) are not recorded.
CANDIDATE_TOKENS_ONLY = {"google-genai-legacy", "google-genai-legacy-experimental"}


def _gemini_usage(exchange: dict[str, Any]) -> dict[str, Any]:
    """The ``usageMetadata`` the fake Gemini API answered with (streamed: the last chunk's)."""
    response = exchange["response"]
    if isinstance(response, str):
        frames = [line[6:] for line in response.splitlines() if line.startswith("data: ")]
        response = orjson.loads(frames[-1])
    return response["usageMetadata"]


def _thoughts_as_text(messages: list[Any]) -> list[Any]:
    """Messages as ADK's schema-2 spans record them: a thought is a text part (ADK writes no
    ``thought`` marker), and the text (reasoning included) of a message is one string, as
    streamed pieces are recorded one part per chunk."""
    out = []
    for m in messages:
        text = "".join(p["content"] for p in m["parts"] if p["type"] in ("text", "reasoning"))
        rest = [p for p in m["parts"] if p["type"] not in ("text", "reasoning")]
        out.append({**m, "parts": ([{"type": "text", "content": text}] if text else []) + rest})
    return out


@pytest.mark.parametrize(("name", "scenario"), GEMINI_CASES)
def test_gemini_producers_give_the_provider_traffic(
    name: str, scenario: str, produced: Callable[[str], Path]
) -> None:
    """Every capture (span, log events; for ADK's legacy format the call_llm span, its
    generate_content child and that child's log events) read as a store reads them gives one call
    per model call, and that call says what the fake Gemini API was sent and answered: the
    messages, part for part, equal the recorded exchange converted by lithify's Gemini translator
    (tool-call ids included: the ids the writers make up are replaced by the ids the Gemini
    translator gives calls the API sent without one), plus the tool calls, results, text, model,
    usage, tools, sampling, finish reasons and session checked against the scripted answer."""
    p = PRODUCERS[name]
    folder = produced(name) / scenario
    for signal in ("traces", "logs"):  # both encodings give the same facts
        pb, js = _results(folder / f"{signal}.pb"), _results(folder / f"{signal}.json")
        assert [_b(r) for r in pb] == [_b(r) for r in js], signal
    spans = _results(folder / "traces.json")
    assert sorted(r.detail for r in spans if isinstance(r, Skip)) == sorted(
        f"span {n!r}" for n in GEMINI_NOT_CALLS[name]
    )
    assert {r.reason for r in spans if isinstance(r, Skip)} == {"not_genai"}
    captures = _facts(spans) + _facts(_results(folder / "logs.json"))
    stats = DeriveStats()
    calls = sort_facts(captures, stats)
    wire = [r for r in _results(folder / "exchanges.json") if isinstance(r, InferenceCall)]
    exchanges = _exchanges(folder)
    assert len(calls) == len(wire) == len(exchanges) == CALLS, [_b(c) for c in calls]
    assert stats.richer_dropped == 0 and stats.duplicates == len(captures) - CALLS
    for call, w, ex in zip(calls, wire, exchanges, strict=True):
        answer = ex["answer"]
        assert_valid_messages(call)
        assert call.source.name == p.source
        if name in THOUGHTS_AS_TEXT:
            assert _thoughts_as_text(_b(call.input_messages)) == _thoughts_as_text(
                _b(w.input_messages)
            )
            assert _thoughts_as_text(_b(call.output_messages)) == _thoughts_as_text(
                _b(w.output_messages)
            )
        else:
            assert _b(call.input_messages) == _b(w.input_messages)
            assert _b(call.output_messages) == _b(w.output_messages)
        if p.records_tools:
            assert _b(call.tools) == _b(w.tools) != []
        else:  # google-genai 0.x's default mode writes no tool definitions
            assert call.tools == [] != w.tools
        (out,) = _b(call.output_messages)
        calls_made = [x for x in out["parts"] if x["type"] == "tool_call"]
        assert [(c["name"], c["arguments"]) for c in calls_made] == [
            (c["name"], c["args"]) for c in answer["calls"]
        ]
        text = "".join(x["content"] for x in out["parts"] if x["type"] == "text")
        assert text.endswith(answer["text"])
        assert out["finish_reason"] == w.output_messages[0].finish_reason == "stop"
        inputs = _b(call.input_messages)
        results = [x for m in inputs for x in m["parts"] if x["type"] == "tool_call_response"]
        if results:  # the second call: each result answers its own call
            asked = {
                c["id"]: c["arguments"]["city"]
                for c in inputs[-3]["parts"]
                if c["type"] == "tool_call"
            }
            assert [(r["result"], asked[r["id"]]) for r in results] == [
                (GEMINI_RESULTS[city], city) for city in ("Paris", "Zürich")
            ]
        assert call.model == w.model == GEMINI_MODEL
        if name in CANDIDATE_TOKENS_ONLY:
            usage = _gemini_usage(ex)
            assert (call.input_tokens, call.output_tokens) == (
                usage["promptTokenCount"],
                usage["candidatesTokenCount"],
            )
            assert call.output_tokens == w.output_tokens - usage.get("thoughtsTokenCount", 0)
        else:
            assert (
                (call.input_tokens, call.output_tokens)
                == (
                    answer["usage"]["input_tokens"],
                    answer["usage"]["output_tokens"],
                )
                == (w.input_tokens, w.output_tokens)
            )
        if p.records_response_id:
            assert call.model_call_id == w.model_call_id == answer["id"]
        else:
            assert call.model_call_id is None  # the source records none
        # ADK's schema-2 spans record max_tokens alone of the sampling parameters.
        assert call.request == ({"max_tokens": 256} if name == "adk" else SAMPLING)
        if p.session == "agent":
            assert call.session_id == call.trace_id
        else:
            assert call.session_id == p.session + scenario
        if name == "google-genai-legacy":  # the SDK's Content, thought signatures included
            assert (
                call.degradations == w.degradations == {"synthesized_id": 2, "opaque_reasoning": 1}
            )
        else:
            assert call.degradations == {"synthesized_id": 2}  # thought signatures are not recorded
        assert b"x-goog-api-key" not in orjson.dumps(_b(call))
    replay = _b(calls[1].input_messages[len(calls[0].input_messages)])
    answered = _b(calls[0].output_messages[0])
    if name in THOUGHTS_AS_TEXT:  # streamed, the answer is recorded in pieces, the replay whole
        replay, answered = _thoughts_as_text([replay])[0], _thoughts_as_text([answered])[0]
    assert replay["parts"] == answered["parts"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_adk_call_llm_and_its_generate_content_span_are_one_call(
    scenario: str, produced: Callable[[str], Path]
) -> None:
    """ADK's legacy format describes each model call twice: its call_llm span (the request and
    response JSON, the session) and the generate_content span under it (metadata, and the
    content on that span's log events). The call_llm fact takes the child's identity, so the
    identity rule reads the three captures as one call, read from call_llm's, whose session
    ranks it first."""
    folder = produced("adk-v1") / scenario
    spans = _facts(_results(folder / "traces.json"))
    by_name = {f.source.name: f for f in spans if f.input_messages}
    assert set(by_name) == {"adk"}
    children = [f for f in spans if not f.input_messages]
    assert len(children) == CALLS and all(
        f.degradations == {"content_not_captured": 1} for f in children
    )
    adk_facts = [f for f in spans if f.source.name == "adk"]
    assert sorted(f.inference_call_id for f in adk_facts) == sorted(
        f.inference_call_id for f in children
    )
    for fact in adk_facts:
        (child,) = [c for c in children if c.inference_call_id == fact.inference_call_id]
        assert child.parent_span_id == fact.span_id  # the call_llm span is the child's parent
    calls = sort_facts([*spans, *_facts(_results(folder / "logs.json"))])
    assert [c.source.name for c in calls] == ["adk"] * CALLS


EXAMPLE_FILES = sorted(p.name for p in EXAMPLES.glob("*.json")) if EXAMPLES.is_dir() else []


@pytest.mark.parametrize(
    "name", [n for n in EXAMPLE_FILES if n.split(".")[0] in PRODUCERS] or ["<none>"]
)
def test_shipped_examples_convert(name: str) -> None:
    """The example telemetry shipped for ``lithify demo`` is producer output that converts
    cleanly: one valid fact per model call, nothing degraded."""
    assert name != "<none>", "src/lithify/examples/ holds no producer captures"
    facts = _facts(_results(EXAMPLES / name))
    assert len(facts) == CALLS, name
    for f in facts:
        assert_valid_messages(f)
        assert f.degradations == {}
    assert [f.output_messages[0].finish_reason for f in facts] == ["tool_call", "stop"]


# ---------------------------------------------------------------------------------------------
# media: an image through a real instrumentation, its real exporters and the real receiver


def _image_message(image: bytes) -> dict[str, Any]:
    """The user message run_image.py sent, in canonical terms, from the PNG it wrote."""
    assert image.startswith(b"\x89PNG\r\n\x1a\n")
    return {
        "role": "user",
        "parts": [
            {"type": "text", "content": "What is in these pictures?"},
            {
                "type": "blob",
                "modality": "image",
                "mime_type": "image/png",
                "size": len(image),
                "sha256": hashlib.sha256(image).hexdigest(),
                "content": base64.b64encode(image).decode(),
            },
            {
                "type": "uri",
                "modality": "image",
                "mime_type": None,
                "uri": "https://example.com/photos/boardwalk.jpg",
            },
        ],
        "finish_reason": None,
    }


def test_an_image_sent_through_a_real_instrumentation_is_a_blob_in_the_stored_fact(
    tmp_path: Path,
) -> None:
    """genai-openai records an ``image_url`` data URL as an OTel ``blob`` part; its OTLP/HTTP
    exporters send the span and the log event to `lithify serve` over loopback. The stored fact
    holds the PNG's exact bytes (size and SHA-256 computed here from the file the producer sent),
    the https image as a ``uri`` part, and `lithify convert` of the same telemetry agrees."""
    from lithify.store import open_store
    from tests.serve.conftest import BASE
    from tests.serve.helpers import live_server

    python = ROOT / ".venv-producers-genai-openai-live" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: run `bash scripts/producers-setup`", pytrace=False)
    url = f"sqlite://{tmp_path / 'facts.db'}"
    out = tmp_path / "out"
    with open_store(url) as store, live_server(replace(BASE, store=url), store) as srv:
        cmd = [str(python), str(PRODUCERS_DIR / "run_image.py"), str(out)]
        cmd += ["--endpoint", f"http://127.0.0.1:{srv.port}"]
        proc = subprocess.run(
            cmd, cwd=PRODUCERS_DIR, env=_clean_env(), capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        stored = list(store.iter_facts())
    exports = orjson.loads((out / "exports.json").read_bytes())
    assert {(e["signal"], e["result"]) for e in exports} == {
        ("traces", "SUCCESS"),
        ("logs", "SUCCESS"),
    }
    expected_user = _image_message((out / "image.png").read_bytes())
    assert len(stored) == 1  # the span and its log event are one call
    (fact,) = stored
    assert_valid_messages(fact)
    assert fact.source.name == "otel-genai"
    assert msgspec.to_builtins(fact.input_messages) == [expected_user]
    assert fact.degradations == {"content_reference": 1}
    # The same telemetry read from the files the producer also wrote: the same content.
    for path in ("traces.pb", "traces.json", "logs.pb"):
        facts = _facts(_results(out / "image" / path))
        assert len(facts) == 1, path
        assert msgspec.to_builtins(facts[0].input_messages) == [expected_user], path


def test_openinference_records_an_image_that_converts_to_a_blob(tmp_path: Path) -> None:
    """OpenInference's OpenAI instrumentation records the data URL under
    ``message_content.image.image.url``; both OTLP encodings of its span give the PNG's blob."""
    python = ROOT / ".venv-producers-openinference" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: run `bash scripts/producers-setup`", pytrace=False)
    out = tmp_path / "out"
    cmd = [str(python), str(PRODUCERS_DIR / "run_image.py"), str(out)]
    cmd += ["--instrumentation", "openinference"]
    proc = subprocess.run(
        cmd, cwd=PRODUCERS_DIR, env=_clean_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    expected_user = _image_message((out / "image.png").read_bytes())
    for path in ("traces.pb", "traces.json"):
        facts = _facts(_results(out / "image" / path))
        assert len(facts) == 1, path
        assert facts[0].source.name == "openinference"
        assert_valid_messages(facts[0])
        assert msgspec.to_builtins(facts[0].input_messages) == [expected_user], path
        assert facts[0].degradations == {"content_reference": 1}, path


# ---------------------------------------------------------------------------------------------
# openai-v2's default mode exported live: metadata on the span, content on the log events


def _span_attributes(folder: Path) -> dict[str, dict[str, Any]]:
    """The chat spans' attributes by span id, as plain values."""
    out = {}
    for s in _walk_spans(orjson.loads((folder / "traces.json").read_bytes())):
        attrs = {a["key"]: next(iter(a["value"].values())) for a in s["attributes"]}
        if attrs.get("gen_ai.operation.name") == "chat":
            out[s["spanId"]] = attrs
    return out


def test_openai_v2_default_mode_exported_live_reads_each_call_whole(
    tmp_path: Path,
) -> None:
    """openai-v2 without the semconv opt-in, its real OTLP/HTTP exporters sending each scenario's
    spans and log records to `lithify serve` as two requests. The chat span holds the call's
    metadata (model, usage, response id, under the agent span) and no content: a metadata-only
    capture. The log events hold the messages: the call is read from them (they have message
    parts) with the span's metadata filled in, so every read (``iter_facts(order="session")``,
    exports) has the messages, the model, usage, sampling, response id, parent span and the
    agent's trace as its session (docs/store.md, Call identity: filled metadata)."""
    from lithify.store import FactFilter, open_store
    from tests.serve.conftest import BASE
    from tests.serve.helpers import live_server

    python = ROOT / ".venv-producers-openai-v2" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: run `bash scripts/producers-setup`", pytrace=False)
    url = f"sqlite://{tmp_path / 'facts.db'}"
    out = tmp_path / "out"
    with open_store(url) as store, live_server(replace(BASE, store=url), store) as srv:
        cmd = [str(python), str(PRODUCERS_DIR / "run_export.py"), str(out)]
        cmd += ["--endpoint", f"http://127.0.0.1:{srv.port}", "--semconv", "default"]
        proc = subprocess.run(
            cmd, cwd=PRODUCERS_DIR, env=_clean_env(), capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        stored = list(store.iter_facts(FactFilter(order="session")))
        captures = [store.captures(f.inference_call_id) for f in stored]
        counts = [srv.receiver.counts[k] for k in ("facts", "variants", "duplicates")]
    exports = orjson.loads((out / "exports.json").read_bytes())
    assert sorted((e["signal"], e["result"]) for e in exports) == [
        ("logs", "SUCCESS"),
        ("logs", "SUCCESS"),
        ("traces", "SUCCESS"),
        ("traces", "SUCCESS"),
    ]
    # Two captures per call, whichever request came first: one new call, one variant.
    assert counts == [2 * CALLS, 2 * CALLS, 0]
    assert [len(c) for c in captures] == [2] * 2 * CALLS
    converted: dict[str, Any] = {}
    for scenario in SCENARIOS:
        folder = out / scenario
        spans = _results(folder / "traces.pb")
        assert [r.reason for r in spans if isinstance(r, Skip)] == ["not_genai"]
        read = sort_facts([*_facts(spans), *_facts(_results(folder / "logs.pb"))])
        for f in read:
            converted[f.inference_call_id] = (f, _span_attributes(folder)[f.span_id], scenario)
    assert sorted(converted) == sorted(f.inference_call_id for f in stored)
    for fact, listed in zip(stored, captures, strict=True):
        from_file, span, scenario = converted[fact.inference_call_id]
        assert _b(fact) == _b(from_file)  # serve reads what convert's files give
        assert_valid_messages(fact)
        assert fact.provider == "openai" and fact.degradations == {}
        assert fact.output_messages[0].finish_reason in ("tool_call", "stop")
        # The messages and raw are the log events', the metadata the span's.
        [events] = [c.fact for c in listed if c.first]
        [metadata] = [c.fact for c in listed if not c.first]
        assert (fact.input_messages, fact.raw) == (events.input_messages, events.raw)
        assert metadata.degradations == {"content_not_captured": 1}
        assert not metadata.input_messages and identity.part_count(metadata) == 0
        # The span's finish reasons (none when streamed), as outputs without parts.
        assert [m.finish_reason for m in metadata.output_messages] == _stated_finishes(metadata)
        assert fact.model == span["gen_ai.response.model"] == MODEL
        assert fact.model_call_id == span["gen_ai.response.id"]
        assert fact.model_call_id.startswith(f"chatcmpl-{scenario}-")
        assert fact.input_tokens == int(span["gen_ai.usage.input_tokens"]) > 0
        assert fact.output_tokens == int(span["gen_ai.usage.output_tokens"])
        assert fact.request == SAMPLING
        assert fact.session_id == fact.trace_id and fact.parent_span_id is not None
        assert fact.duration_ms is not None and fact.duration_ms > 0
