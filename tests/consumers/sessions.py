"""Agent sessions recorded from the real provider SDKs, as input for the consumer tests.

The corpus and the shipped examples hold tool calls, parallel calls and multi-turn sessions, but
no call whose output carries readable reasoning *and* whose request was captured with it: every
SFT target there is reasoning-free. These sessions fill that gap the way users produce data: the
real ``openai``, ``anthropic`` and ``google-genai`` SDKs play tool loops against the local fake
provider (tests/fakes), and the recorded exchanges are what ``lithify import`` reads. Each
session carries its id the way its provider does (a ``lithify-session-id`` header, Anthropic's
``metadata.user_id``, the transport's ``meta.session_id``), so derivation links its calls.

What they cover: reasoning before text and before tool calls, parallel tool calls, a message with
text and tool calls, tool results as strings and as structured values (Anthropic blocks, Gemini
objects), a second user query mid-session, nested and typed arguments, and two sessions that
share a prompt and differ in feedback (preference pairs, rewards).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
from google import genai
from google.genai import types as gt

from tests.fakes import Call, FakeProvider, answer

OPENAI_KEY = "sk-proj-ConsumersFakeKey0123456789abcdefABCDEF"
ANTHROPIC_KEY = "sk-ant-api03-ConsumersFakeKey0123456789abcdef-xyzAA"
GEMINI_KEY = "AIzaSyConsumersFakeKey0123456789abcdefA"

SYSTEM = "You are a weather assistant. Use the tools, then answer briefly."
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
}
FORECAST = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "description": "How many days ahead"},
        "options": {
            "type": "object",
            "properties": {
                "hourly": {"type": "boolean"},
                "fields": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
    "required": ["city", "days"],
}
FUNCTIONS = (
    ("get_weather", "Current weather for one city.", WEATHER),
    ("get_forecast", "Forecast for one city.", FORECAST),
)
# Nested, typed arguments: an integer, a boolean, a list, a non-ASCII string.
FORECAST_ARGS = {
    "city": "Zürich",
    "days": 2,
    "options": {"hourly": False, "fields": ["temp", "rain"]},
}

# Session ids; the tests look rows up by them.
CHAT = "consumers-chat-agent"
ANTHROPIC = "consumers-anthropic-agent"
RESPONSES = "consumers-responses-agent"
GEMINI = "consumers-gemini-agent"
PREF_GOOD = "consumers-pref-good"
PREF_BAD = "consumers-pref-bad"
SESSIONS = (CHAT, ANTHROPIC, RESPONSES, GEMINI, PREF_GOOD, PREF_BAD)
# Session feedback: the rewards of RL rows and the scores of the preference pair.
FEEDBACK = {CHAT: 1.0, ANTHROPIC: 0.5, GEMINI: 0.25, PREF_GOOD: 0.9, PREF_BAD: 0.1}


def _chat_tools() -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": n, "description": d, "parameters": p}}
        for n, d, p in FUNCTIONS
    ]


def _chat_message(m: Any) -> dict[str, Any]:
    """The SDK's message as an application replays it (reasoning_content kept, as vLLM wants)."""
    out: dict[str, Any] = {"role": "assistant", "content": m.content}
    extra = m.model_extra or {}
    if extra.get("reasoning_content"):
        out["reasoning_content"] = extra["reasoning_content"]
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in m.tool_calls
        ]
    return out


def chat_agent(fake: FakeProvider) -> None:
    """OpenAI Chat Completions: two parallel calls, a second user query, a nested-argument call."""
    fake.script(
        answer(
            reasoning=["Two cities, so two calls; they can run in parallel."],
            calls=[Call.of("get_weather", {"city": c, "unit": "celsius"}) for c in ("Paris", "Zürich")],
        ),
        answer(
            "Paris: 18 °C and cloudy. Zürich: 12 °C with light rain.",
            reasoning=["Both results are in; one line each."],
        ),
        answer(reasoning=["One forecast call, two days, no hourly data."], calls=[Call.of("get_forecast", FORECAST_ARGS)]),
        answer("Zürich: rain tomorrow, sun the day after.", reasoning=["Summarise the two days."]),
    )  # fmt: skip
    client = openai.OpenAI(
        api_key=OPENAI_KEY,
        base_url=fake.openai_base_url,
        max_retries=0,
        default_headers={"lithify-session-id": CHAT},
    )
    results = {
        "Paris": '{"temperature": 18, "conditions": "cloudy"}',  # JSON-looking: stays a string
        "Zürich": "12 °C, light rain",
    }
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What's the weather in Paris and in Zürich right now?"},
    ]
    for turn in range(4):
        r = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=_chat_tools(), temperature=0.2  # type: ignore[arg-type]
        )  # fmt: skip
        msg = _chat_message(r.choices[0].message)
        messages.append(msg)
        for c in msg.get("tool_calls", ()):
            args = json.loads(c["function"]["arguments"])
            content = (
                results[args["city"]] if turn == 0 else "Tomorrow rain, 9 °C; then sunny, 14 °C."
            )
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": content})
        if turn == 1:
            messages.append(
                {"role": "user", "content": "And the forecast for Zürich for the next 2 days?"}
            )


def anthropic_agent(fake: FakeProvider) -> None:
    """Anthropic Messages: thinking, text and parallel tool_use in one turn; results as blocks
    (structured) and as a string, then text in the same user turn."""
    fake.script(
        answer(
            "I'll look both up.",
            reasoning=["Oslo and Lima: one call each."],
            calls=[Call.of("get_weather", {"city": c}) for c in ("Oslo", "Lima")],
        ),
        answer("Oslo is snowy at -3 °C; Lima is sunny at 19 °C.", reasoning=["Contrast them."]),
    )
    client = anthropic.Anthropic(api_key=ANTHROPIC_KEY, base_url=fake.url, max_retries=0)
    tools = [{"name": n, "description": d, "input_schema": p} for n, d, p in FUNCTIONS]
    messages: list[Any] = [{"role": "user", "content": "Compare the weather in Oslo and Lima."}]
    for turn in range(2):
        m = client.messages.create(
            model="claude-sonnet-4-6",
            system=SYSTEM,
            messages=messages,
            tools=tools,  # type: ignore[arg-type]
            max_tokens=2048,
            thinking={"type": "enabled", "budget_tokens": 1024},
            metadata={"user_id": json.dumps({"session_id": ANTHROPIC})},
        )
        messages.append({"role": "assistant", "content": m.content})
        if turn == 0:
            calls = [b for b in m.content if b.type == "tool_use"]
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": calls[0].id,
                            "content": [{"type": "text", "text": "-3 °C, snow"}],
                        },
                        {
                            "type": "tool_result",
                            "tool_use_id": calls[1].id,
                            "content": "19 °C, sunny",
                        },
                        {"type": "text", "text": "Answer in one sentence."},
                    ],
                }
            )


def responses_agent(fake: FakeProvider) -> None:
    """OpenAI Responses, stateless: a two-paragraph reasoning summary, a function call, its
    output, the final answer; reasoning items are replayed."""
    fake.script(
        answer(
            reasoning=["The user wants Tokyo.", "One call is enough."],
            calls=[Call.of("get_weather", {"city": "Tokyo", "unit": "celsius"})],
        ),
        answer("Tokyo: 22 °C and clear.", reasoning=["Report it."]),
    )
    client = openai.OpenAI(
        api_key=OPENAI_KEY,
        base_url=fake.openai_base_url,
        max_retries=0,
        default_headers={"lithify-session-id": RESPONSES},
    )
    tools = [
        {"type": "function", "name": n, "description": d, "parameters": p, "strict": False}
        for n, d, p in FUNCTIONS
    ]
    items: list[Any] = [{"role": "user", "content": "Weather in Tokyo?"}]
    for turn in range(2):
        r = client.responses.create(
            model="gpt-5-mini",
            instructions=SYSTEM,
            input=items,
            tools=tools,  # type: ignore[arg-type]
            reasoning={"effort": "low", "summary": "auto"},
            store=False,
        )
        items += [i.model_dump(exclude_none=True) for i in r.output]
        if turn == 0:
            items += [
                {"type": "function_call_output", "call_id": i.call_id, "output": "22 °C, clear"}
                for i in r.output
                if i.type == "function_call"
            ]


def gemini_agent(fake: FakeProvider) -> None:
    """Gemini: thoughts, two parallel function calls without ids (lithify synthesises them),
    object results (structured), the final answer."""
    fake.script(
        answer(
            reasoning=["Two cities: call get_weather twice."],
            calls=[Call.of("get_weather", {"city": c}) for c in ("Rome", "Cairo")],
        ),
        answer("Rome: 20 °C. Cairo: 31 °C.", reasoning=["Both answered."]),
    )
    client = genai.Client(
        api_key=GEMINI_KEY,
        http_options=gt.HttpOptions(base_url=fake.url, api_version="v1beta"),
    )
    config = gt.GenerateContentConfig(
        system_instruction=SYSTEM,
        tools=[
            gt.Tool(
                function_declarations=[
                    gt.FunctionDeclaration(name=n, description=d, parameters_json_schema=p)
                    for n, d, p in FUNCTIONS
                ]
            )
        ],
        thinking_config=gt.ThinkingConfig(include_thoughts=True),
    )
    temps = {"Rome": 20, "Cairo": 31}
    contents: list[Any] = [gt.Content(role="user", parts=[gt.Part(text="Rome and Cairo?")])]
    for turn in range(2):
        r = client.models.generate_content(
            model="gemini-2.5-flash", contents=contents, config=config
        )
        content = r.candidates[0].content  # type: ignore[index]
        contents.append(content)
        if turn == 0:
            contents.append(
                gt.Content(
                    role="user",
                    parts=[
                        gt.Part(
                            function_response=gt.FunctionResponse(
                                name=p.function_call.name,
                                response={"temperature": temps[p.function_call.args["city"]], "ok": True},
                            )
                        )
                        for p in content.parts or []  # type: ignore[union-attr]
                        if p.function_call
                    ],
                )
            )  # fmt: skip


def preference_pair(fake: FakeProvider) -> None:
    """Two sessions asking the same thing, answered differently (a better and a worse answer)."""
    for session, text in (
        (PREF_GOOD, "Paris is at 18 °C and cloudy right now."),
        (PREF_BAD, "I cannot know the weather."),
    ):
        fake.script(answer(text, reasoning=["A direct answer."]))
        client = openai.OpenAI(
            api_key=OPENAI_KEY,
            base_url=fake.openai_base_url,
            max_retries=0,
            default_headers={"lithify-session-id": session},
        )
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "How warm is it in Paris?"},
            ],
            tools=_chat_tools(),  # type: ignore[arg-type]
        )


DRIVERS: tuple[tuple[Callable[[FakeProvider], None], int], ...] = (
    (chat_agent, 4),
    (anthropic_agent, 2),
    (responses_agent, 2),
    (gemini_agent, 2),
    (preference_pair, 2),
)


def record(out: Path) -> tuple[Path, Path]:
    """Play every session; write the exchanges and the session feedback as JSONL files."""
    docs: list[dict[str, Any]] = []
    with FakeProvider(id_prefix="cons") as fake:
        # One fake for all: its step counter keeps response and tool-call ids unique across
        # sessions (the store deduplicates calls by provider response id).
        seen = 0
        for drive, calls in DRIVERS:
            drive(fake)
            seen += calls
            exchanges = fake.wait(seen, timeout=30)
            assert len(exchanges) == seen, f"{drive.__name__}: the fake saw {len(exchanges)}"
        for ex in exchanges:
            assert ex.status == 200, (ex.path, ex.status, ex.response_text[:500])
            doc = ex.document()
            if ex.path.startswith("/v1beta/"):
                # The Gemini API carries no session: the transport (a proxy) knows it.
                doc["meta"]["session_id"] = GEMINI
            docs.append(doc)
    exchanges_file = out / "sessions.jsonl"
    exchanges_file.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))
    feedback_file = out / "feedback.jsonl"
    feedback_file.write_text(
        "".join(
            json.dumps({"session_id": s, "name": "score", "value": v, "id": f"fb-{s}"}) + "\n"
            for s, v in FEEDBACK.items()
        )
    )
    return exchanges_file, feedback_file
