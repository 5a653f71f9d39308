"""Record the exchanges in this folder: each real SDK call goes to the local fake provider, and the
bytes the SDK sent and got back are written as an exchange document.

Run ``.venv/bin/python -m tests.recorded.record`` from the checkout to write them again. What the
fake answers is either its own scripted answer or, for a shape only another vendor sends, a
``Reply`` written from that vendor's API reference (SOURCES.md says which is which).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
from google import genai
from google.genai import types as gt

from tests.fakes import Call, FakeProvider, Reply, Step, answer

HERE = Path(__file__).parent
KEY = "not-a-real-key"  # sent in a header, never part of a recorded body
CREATED = 1767225600  # 2026-01-01T00:00:00Z

# A login tool: its arguments are credentials, so its schema names properties like them.
LOGIN_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "The account name"},
        "password": {"type": "string", "description": "The account password"},
        "api_key": {"type": "string", "description": "An API key instead of a password"},
    },
    "required": ["username"],
}
LOGIN_DESC = "Sign in to the user's account."
# Opaque blobs with a key shape inside, as real base64 and base64url data sometimes spell one.
GEMINI_SIGNATURE = "CiQBcsjafDLnqVZpCBu0yLZhxI2pmhSH_sk-N2AMq8t3ALqGqUoSYgFyyNp8TRv2bX1cA8o="
OPENAI_ENCRYPTED = "gAAAAABpQ2dv1xZ-sk-proj-Q4TmZ3VhbGx5RW5jcnlwdGVk_sk-N2AMZGF0YQ3xYz=="
ANTHROPIC_SIGNATURE = "EqQBCkgIBhABGAIqQH1fZ9tq+sk-ant-api03-Wm9vQmFyQmF6UXV4/sk-N2AMc2lnbmF0dXJl"


def _openai(fake: FakeProvider) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=fake.openai_base_url, max_retries=0)


def _anthropic(fake: FakeProvider) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=fake.url, max_retries=0)


def _gemini(fake: FakeProvider) -> genai.Client:
    return genai.Client(
        api_key=KEY, http_options=gt.HttpOptions(base_url=fake.url, api_version="v1beta")
    )


def _drain(result: Any) -> None:
    """A streamed result read to its end, as an application reads it."""
    for _ in result:
        pass


def record(name: str, step: Step, call: Callable[[FakeProvider], Any]) -> None:
    # Ids the fake makes up start with the recording's name, so no two recordings share one.
    with FakeProvider(id_prefix=re.sub(r"[^a-z0-9]", "", name.rsplit("/", 1)[-1])) as fake:
        fake.script(step)
        call(fake)
        (ex,) = fake.wait(1)
    assert ex.status == 200, (name, ex.status, ex.response_body[:200])
    doc = {"request": ex.request_json, "response": ex.response, "meta": {"path": ex.path}}
    path = HERE / f"{name}.exchange.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")


def chunk(model: str, delta: dict[str, Any] | None, finish: str | None = None, **top: Any) -> Any:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": f"chatcmpl-{model.split('/')[-1]}-1",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": choices,
        **top,
    }


def events(*data: Any) -> tuple[tuple[str | None, Any], ...]:
    return tuple((None, d) for d in data)


def named(*pairs: dict[str, Any]) -> tuple[tuple[str | None, Any], ...]:
    return tuple((p["type"], p) for p in pairs)


# --- OpenAI Chat Completions and the vendors that speak it -------------------------------------


def chat_tool_schema(fake: FakeProvider) -> None:
    _openai(fake).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Log me in as ada."}],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "login",
                    "description": LOGIN_DESC,
                    "parameters": LOGIN_SCHEMA,
                },
            }
        ],
    )


MISTRAL_MODEL = "magistral-medium-2509"
MISTRAL_HISTORY = [
    {"role": "user", "content": "What is 12 × 12?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "12 times 12 is 144."}]},
            {"type": "text", "text": "12 × 12 = 144."},
        ],
    },
    {"role": "user", "content": "And 17 × 23?"},
]
MISTRAL_THOUGHT = "17 × 23 = 17 × 20 + 17 × 3 = 340 + 51 = 391."
MISTRAL_ANSWER = "17 × 23 = 391."
MISTRAL_USAGE = {"prompt_tokens": 61, "total_tokens": 118, "completion_tokens": 57}


def chat_mistral(stream: bool) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        result = _openai(fake).chat.completions.create(
            model=MISTRAL_MODEL, messages=MISTRAL_HISTORY, stream=stream
        )
        if stream:
            _drain(result)

    return run


MISTRAL_BODY = {
    "id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
    "object": "chat.completion",
    "created": CREATED,
    "model": MISTRAL_MODEL,
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "tool_calls": None,
                "content": [
                    {"type": "thinking", "thinking": [{"type": "text", "text": MISTRAL_THOUGHT}]},
                    {"type": "text", "text": MISTRAL_ANSWER},
                ],
            },
            "finish_reason": "stop",
        }
    ],
    "usage": MISTRAL_USAGE,
}
MISTRAL_STREAM = Reply(
    events=events(
        chunk(MISTRAL_MODEL, {"role": "assistant", "content": ""}, id="0f1e2d3c"),
        *(
            chunk(
                MISTRAL_MODEL,
                {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": t}]}]},
                id="0f1e2d3c",
            )
            for t in ("17 × 23 = 17 × 20 + 17 × 3", " = 340 + 51 = 391.")
        ),
        chunk(MISTRAL_MODEL, {"content": "17 × 23"}, id="0f1e2d3c"),
        chunk(MISTRAL_MODEL, {"content": " = 391."}, "stop", id="0f1e2d3c", usage=MISTRAL_USAGE),
        "[DONE]",
    )
)

GROQ_MODEL = "groq/compound"
GROQ_QUESTION = [{"role": "user", "content": "What is the latest stable Python release?"}]
GROQ_SEARCH = {
    "index": 0,
    "type": "search",
    "arguments": '{"query": "latest stable Python release"}',
}
GROQ_SEARCH_DONE = {
    **GROQ_SEARCH,
    "output": "Title: Python Release Python 3.14.0\nURL: https://www.python.org/downloads/release/python-3140/\nContent: Python 3.14.0 is the newest major release.\n",
    "search_results": {
        "results": [
            {
                "title": "Python Release Python 3.14.0",
                "url": "https://www.python.org/downloads/release/python-3140/",
                "content": "Python 3.14.0 is the newest major release.",
                "score": 0.92,
            }
        ]
    },
}
GROQ_ANSWER = "The latest stable Python release is Python 3.14.0."
GROQ_USAGE = {
    "queue_time": 0.051,
    "prompt_tokens": 1873,
    "prompt_time": 0.118,
    "completion_tokens": 64,
    "completion_time": 0.143,
    "total_tokens": 1937,
    "total_time": 0.261,
}


def chat_plain(model: str, messages: list[Any], **kw: Any) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        _openai(fake).chat.completions.create(model=model, messages=messages, **kw)

    return run


def chat_streamed(model: str, messages: list[Any], **kw: Any) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        _drain(
            _openai(fake).chat.completions.create(model=model, messages=messages, stream=True, **kw)
        )

    return run


GROQ_BODY = {
    "id": "chatcmpl-6f0c2a51-3c9e-4d4a-9c4e-0b1d2e3f4a5b",
    "object": "chat.completion",
    "created": CREATED,
    "model": GROQ_MODEL,
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": GROQ_ANSWER,
                "reasoning": "I should search for the current Python release.",
                "executed_tools": [GROQ_SEARCH_DONE],
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {k: v for k, v in GROQ_USAGE.items()},
    "system_fingerprint": None,
    "x_groq": {"id": "req_01k0groqcompoundplain"},
}
GROQ_STREAM = Reply(
    events=events(
        chunk(
            GROQ_MODEL, {"role": "assistant", "content": ""}, x_groq={"id": "req_01k0groqcompound"}
        ),
        chunk(GROQ_MODEL, {"executed_tools": [GROQ_SEARCH]}),
        chunk(GROQ_MODEL, {"executed_tools": [GROQ_SEARCH_DONE]}),
        chunk(GROQ_MODEL, {"content": "The latest stable Python release is "}),
        chunk(GROQ_MODEL, {"content": "Python 3.14.0."}),
        chunk(GROQ_MODEL, {}, "stop", x_groq={"id": "req_01k0groqcompound", "usage": GROQ_USAGE}),
        "[DONE]",
    )
)

SNOWFLAKE_MODEL = "claude-3-7-sonnet"
SNOWFLAKE_STREAM = Reply(
    events=events(
        *(
            {
                "id": "8a1f0c2e-snowflake",
                "model": SNOWFLAKE_MODEL,
                "choices": [{"delta": {"content": t}}],
            }
            for t in ("Snowflake Cortex ", "streams without ", "a finish reason.")
        ),
        {
            "id": "8a1f0c2e-snowflake",
            "model": SNOWFLAKE_MODEL,
            "choices": [],
            "usage": {"prompt_tokens": 21, "completion_tokens": 12, "total_tokens": 33},
        },
        "[DONE]",
    )
)

TOGETHER_MODEL = "meta-llama/Llama-3.3-70B-Instruct-Turbo"
TOGETHER_BODY = {
    "id": "o2xkYt3-4Yz5Ab-9a1b2c3d4e5f6a7b",
    "object": "chat.completion",
    "created": CREATED,
    "model": TOGETHER_MODEL,
    "prompt": [],
    "choices": [
        {
            "finish_reason": "eos",
            "seed": 1234567890,
            "logprobs": None,
            "index": 0,
            "message": {"role": "assistant", "content": "Hello! How can I help?", "tool_calls": []},
        }
    ],
    "usage": {"prompt_tokens": 38, "completion_tokens": 8, "total_tokens": 46, "cached_tokens": 0},
}

SEARCH_MODEL = "gpt-4o-search-preview-2025-03-11"
SEARCH_TEXT = (
    "The Python Software Foundation released Python 3.14.0 in October 2025 "
    "([python.org](https://www.python.org/downloads/release/python-3140/))."
)
SEARCH_BODY = {
    "id": "chatcmpl-search0001",
    "object": "chat.completion",
    "created": CREATED,
    "model": SEARCH_MODEL,
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": SEARCH_TEXT,
                "refusal": None,
                "annotations": [
                    {
                        "type": "url_citation",
                        "url_citation": {
                            "end_index": len(SEARCH_TEXT) - 1,
                            "start_index": SEARCH_TEXT.index("(["),
                            "title": "Python Release Python 3.14.0",
                            "url": "https://www.python.org/downloads/release/python-3140/",
                        },
                    }
                ],
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 41, "total_tokens": 50},
}

GEMINI_COMPAT_MODEL = "gemini-3-pro-preview"
GEMINI_COMPAT_HISTORY = [
    {"role": "user", "content": "Check the weather in Paris, then in Lyon."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "function-call-14262184094617034585",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                "extra_content": {"google": {"thought_signature": GEMINI_SIGNATURE}},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "function-call-14262184094617034585",
        "content": '{"temperature": 18}',
    },
]
GEMINI_COMPAT_BODY = {
    "id": "Yj9xaZ3eMqWkvdIPkYGw4Ak",
    "object": "chat.completion",
    "created": CREATED,
    "model": GEMINI_COMPAT_MODEL,
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "function-call-5012718423011296537",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Lyon"}'},
                        "extra_content": {
                            "google": {
                                "thought_signature": GEMINI_SIGNATURE.replace("CiQB", "CiQC")
                            }
                        },
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"completion_tokens": 18, "prompt_tokens": 97, "total_tokens": 186},
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


# --- OpenAI Responses ----------------------------------------------------------------------


def responses_compaction(fake: FakeProvider) -> None:
    _openai(fake).responses.create(
        model="gpt-5-mini",
        input=[
            {"type": "compaction", "id": "cmp_68c1f0a2b3d4", "encrypted_content": OPENAI_ENCRYPTED},
            {"role": "user", "content": "Now sign me in as ada."},
        ],
        tools=[
            {
                "type": "function",
                "name": "login",
                "description": LOGIN_DESC,
                "parameters": LOGIN_SCHEMA,
            }
        ],
    )


RESPONSE_TEXT = (
    "Python 3.14.0 came out in October 2025 ([python.org](https://www.python.org/downloads/))."
)


def responses_body(id_: str, output: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": id_,
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "completed_at": CREATED + 4,
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-mini-2025-08-07",
        "output": output,
        "usage": {
            "input_tokens": 312,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 96,
            "output_tokens_details": {"reasoning_tokens": 64},
            "total_tokens": 408,
        },
        **extra,
    }


CITED_MESSAGE = {
    "id": "msg_68c1f0a2b3d4e5f6",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [
        {
            "type": "output_text",
            "text": RESPONSE_TEXT,
            "logprobs": [],
            "annotations": [
                {
                    "type": "url_citation",
                    "start_index": RESPONSE_TEXT.index("(["),
                    "end_index": len(RESPONSE_TEXT) - 1,
                    "title": "Download Python",
                    "url": "https://www.python.org/downloads/",
                }
            ],
        }
    ],
}
CITATIONS_BODY = responses_body(
    "resp_68c1f0a2b3d4e5f60718293a4b5c6d7e",
    [
        {
            "id": "ws_68c1f0a2b3d4e5f6",
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": "latest Python release"},
        },
        CITED_MESSAGE,
    ],
)
REASONING_ITEM = {
    "id": "rs_68c1f0a2b3d4e5f6",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "**Answering directly**"}],
    "encrypted_content": OPENAI_ENCRYPTED,
}
PLAIN_MESSAGE = {
    "id": "msg_68c1f0a2b3d4e5f7",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hello!", "logprobs": [], "annotations": []}],
}
ENCRYPTED_FINAL = responses_body(
    "resp_68c1f0b9e8d7c6b5a4938271605f4e3d", [REASONING_ITEM, PLAIN_MESSAGE]
)
ENCRYPTED_STREAM = Reply(
    events=named(
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {
                **ENCRYPTED_FINAL,
                "status": "in_progress",
                "completed_at": None,
                "output": [],
                "usage": None,
            },
        },
        {
            "type": "response.output_item.done",
            "sequence_number": 1,
            "output_index": 0,
            "item": REASONING_ITEM,
        },
        {
            "type": "response.output_item.added",
            "sequence_number": 2,
            "output_index": 1,
            "item": {**PLAIN_MESSAGE, "status": "in_progress", "content": []},
        },
        {
            "type": "response.output_text.delta",
            "sequence_number": 3,
            "item_id": PLAIN_MESSAGE["id"],
            "output_index": 1,
            "content_index": 0,
            "delta": "Hello!",
            "logprobs": [],
        },
        {
            "type": "response.output_item.done",
            "sequence_number": 4,
            "output_index": 1,
            "item": PLAIN_MESSAGE,
        },
        {"type": "response.completed", "sequence_number": 5, "response": ENCRYPTED_FINAL},
    )
)


def responses_call(stream: bool, **kw: Any) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        result = _openai(fake).responses.create(model="gpt-5-mini", stream=stream, **kw)
        if stream:
            _drain(result)

    return run


# --- Anthropic -------------------------------------------------------------------------------

CLAUDE = "claude-sonnet-4-5-20250929"


def anthropic_tool_schema(fake: FakeProvider) -> None:
    _anthropic(fake).messages.create(
        model=CLAUDE,
        max_tokens=256,
        messages=[{"role": "user", "content": "Log me in as ada."}],
        tools=[{"name": "login", "description": LOGIN_DESC, "input_schema": LOGIN_SCHEMA}],
    )


def anthropic_message(
    id_: str, content: list[Any], stop: str | None = "end_turn", **usage: int
) -> dict[str, Any]:
    return {
        "id": id_,
        "type": "message",
        "role": "assistant",
        "model": CLAUDE,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.get("input_tokens", 2095),
            "output_tokens": usage.get("output_tokens", 503),
        },
    }


THINKING_BODY = anthropic_message(
    "msg_01ThinkingSignedXq7Rk3",
    [
        {
            "type": "thinking",
            "thinking": "The user greets me; answer briefly.",
            "signature": ANTHROPIC_SIGNATURE,
        },
        {"type": "text", "text": "Hello! How can I help?"},
    ],
)


def anthropic_call(
    stream: bool = False, beta: bool = False, **kw: Any
) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        client = _anthropic(fake)
        messages = client.beta.messages if beta else client.messages
        result = messages.create(model=CLAUDE, max_tokens=1024, stream=stream, **kw)
        if stream:
            _drain(result)

    return run


COMPACTION_SUMMARY = "Summary: user said hello."
COMPACTION_BETA = {
    "betas": ["compact-2026-01-12"],
    "context_management": {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50000}}]
    },
}
LONG_HISTORY = [
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hello! How can I help you today?"},
    {"role": "user", "content": "Where were we?"},
]
COMPACTION_BODY = anthropic_message(
    "msg_01CompactionSummaryWd2L",
    [
        {"type": "compaction", "content": COMPACTION_SUMMARY},
        {"type": "text", "text": "You had just said hello; we can start fresh."},
    ],
)
COMPACTION_STREAM = Reply(
    events=named(
        {
            "type": "message_start",
            "message": anthropic_message(COMPACTION_BODY["id"], [], None, output_tokens=1),
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "compaction", "content": None},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "compaction_delta", "content": COMPACTION_SUMMARY},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "You had just said hello; "},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "we can start fresh."},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 503},
        },
        {"type": "message_stop"},
    )
)
COMPACTED_HISTORY = [
    *LONG_HISTORY,
    {"role": "assistant", "content": COMPACTION_BODY["content"]},
    {"role": "user", "content": "Thanks. What did I say first?"},
]

DOCUMENT = {
    "type": "document",
    "source": {
        "type": "text",
        "media_type": "text/plain",
        "data": "The grass is green. The sky is blue.",
    },
    "title": "My Document",
    "citations": {"enabled": True},
}
CITATION = {
    "type": "char_location",
    "cited_text": "The grass is green. ",
    "document_index": 0,
    "document_title": "My Document",
    "start_char_index": 0,
    "end_char_index": 20,
}
CITED_QUESTION = [
    {"role": "user", "content": [DOCUMENT, {"type": "text", "text": "What color is the grass?"}]}
]
CITATIONS_BODY_ANTHROPIC = anthropic_message(
    "msg_01CitedAnswerTz8Hn4Pq",
    [
        {"type": "text", "text": "According to the document, "},
        {"type": "text", "text": "the grass is green", "citations": [CITATION]},
        {"type": "text", "text": "."},
    ],
)
CITATIONS_STREAM = Reply(
    events=named(
        {
            "type": "message_start",
            "message": anthropic_message(CITATIONS_BODY_ANTHROPIC["id"], [], None, output_tokens=1),
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "According to the document, "},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": "", "citations": []},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "citations_delta", "citation": CITATION},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "the grass is green"},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "."}},
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 503},
        },
        {"type": "message_stop"},
    )
)


# --- Gemini ----------------------------------------------------------------------------------

GEMINI_MODEL = "gemini-2.5-flash"


def gemini_call(contents: Any, **config: Any) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        client = _gemini(fake)
        client.models.generate_content(
            model=GEMINI_MODEL, contents=contents, config=gt.GenerateContentConfig(**config)
        )

    return run


LOGIN_DECLARATIONS = [
    gt.Tool(
        function_declarations=[
            gt.FunctionDeclaration(
                name="login", description=LOGIN_DESC, parameters_json_schema=LOGIN_SCHEMA
            ),
            gt.FunctionDeclaration(
                name="refresh_session",
                description="Renew a session from its refresh token.",
                parameters=gt.Schema(
                    type=gt.Type.OBJECT,
                    properties={
                        "refresh_token": gt.Schema(type=gt.Type.STRING),
                        "access_token": gt.Schema(type=gt.Type.STRING),
                    },
                    required=["refresh_token"],
                ),
            ),
        ]
    )
]
VERTEX_BODY = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                        "thoughtSignature": GEMINI_SIGNATURE,
                    }
                ],
            },
            "finishReason": "STOP",
            "avgLogprobs": -0.21,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 58,
        "candidatesTokenCount": 7,
        "totalTokenCount": 143,
        "trafficType": "ON_DEMAND",
        "thoughtsTokenCount": 78,
    },
    "modelVersion": GEMINI_MODEL,
    "createTime": "2026-01-01T00:00:01.123456Z",
    "responseId": "Qb9xaYrHCdWvgLUPk8qZgAs",
}
ADK_INSTRUCTION = "You are a file assistant. Use the tools to answer."
ADK_FILES_TOOL = [
    gt.Tool(
        function_declarations=[
            gt.FunctionDeclaration(
                name="list_files",
                description="List the files in a folder.",
                parameters_json_schema={
                    "type": "object",
                    "properties": {"folder": {"type": "string"}},
                },
            )
        ]
    )
]
ADK_QUESTION = gt.Content(role="user", parts=[gt.Part(text="Which files are in /reports?")])
ADK_CALL = gt.Content(
    role="model",
    parts=[gt.Part(function_call=gt.FunctionCall(name="list_files", args={"folder": "/reports"}))],
)
ADK_RESULT = gt.Content(
    role="user",
    parts=[
        gt.Part(
            function_response=gt.FunctionResponse(
                name="list_files", response={"result": ["q1.pdf", "q2.pdf"]}
            )
        )
    ],
)


def main() -> None:
    login = answer(calls=[Call.of("login", {"username": "ada"})])
    record("openai-chat/tool_schema_password", login, chat_tool_schema)
    record("openai-chat/mistral_thinking", Reply(body=MISTRAL_BODY), chat_mistral(False))
    record("openai-chat/mistral_thinking_streaming", MISTRAL_STREAM, chat_mistral(True))
    record(
        "openai-chat/groq_compound", Reply(body=GROQ_BODY), chat_plain(GROQ_MODEL, GROQ_QUESTION)
    )
    record(
        "openai-chat/groq_compound_streaming", GROQ_STREAM, chat_streamed(GROQ_MODEL, GROQ_QUESTION)
    )
    record(
        "openai-chat/snowflake_no_finish_reason_streaming",
        SNOWFLAKE_STREAM,
        chat_streamed(
            SNOWFLAKE_MODEL,
            [{"role": "user", "content": "How do you stream?"}],
            stream_options={"include_usage": True},
        ),
    )
    record(
        "openai-chat/together_eos",
        Reply(body=TOGETHER_BODY),
        chat_plain(TOGETHER_MODEL, [{"role": "user", "content": "Hi"}]),
    )
    record(
        "openai-chat/url_citations",
        Reply(body=SEARCH_BODY),
        chat_plain(
            "gpt-4o-search-preview",
            [{"role": "user", "content": "When was the latest Python released?"}],
            web_search_options={},
        ),
    )
    record(
        "openai-chat/gemini_compat_thought_signature",
        Reply(body=GEMINI_COMPAT_BODY),
        chat_plain(GEMINI_COMPAT_MODEL, GEMINI_COMPAT_HISTORY, tools=[WEATHER_TOOL]),
    )

    record("openai-responses/compaction_input", answer("Signing you in."), responses_compaction)
    record(
        "openai-responses/url_citations",
        Reply(body=CITATIONS_BODY),
        responses_call(
            False, input="When was the latest Python released?", tools=[{"type": "web_search"}]
        ),
    )
    record(
        "openai-responses/encrypted_reasoning_streaming",
        ENCRYPTED_STREAM,
        responses_call(True, input="Hi", include=["reasoning.encrypted_content"], store=False),
    )

    record("anthropic/tool_schema_password", login, anthropic_tool_schema)
    record(
        "anthropic/thinking_signature",
        Reply(body=THINKING_BODY),
        anthropic_call(
            messages=[{"role": "user", "content": "Hi"}],
            thinking={"type": "enabled", "budget_tokens": 512},
        ),
    )
    record(
        "anthropic/compaction",
        Reply(body=COMPACTION_BODY),
        anthropic_call(beta=True, messages=LONG_HISTORY, **COMPACTION_BETA),
    )
    record(
        "anthropic/compaction_streaming",
        COMPACTION_STREAM,
        anthropic_call(stream=True, beta=True, messages=LONG_HISTORY, **COMPACTION_BETA),
    )
    record(
        "anthropic/compaction_replay",
        answer("You said hello."),
        anthropic_call(beta=True, messages=COMPACTED_HISTORY, **COMPACTION_BETA),
    )
    record(
        "anthropic/citations",
        Reply(body=CITATIONS_BODY_ANTHROPIC),
        anthropic_call(messages=CITED_QUESTION),
    )
    record(
        "anthropic/citations_streaming",
        CITATIONS_STREAM,
        anthropic_call(stream=True, messages=CITED_QUESTION),
    )

    record(
        "gemini/tool_schema_password",
        login,
        gemini_call("Log me in as ada.", tools=LOGIN_DECLARATIONS),
    )
    record(
        "gemini/vertex_thought_signature",
        Reply(body=VERTEX_BODY),
        gemini_call(
            "What is the weather in Paris?",
            thinking_config=gt.ThinkingConfig(include_thoughts=False),
        ),
    )
    # Google ADK's loop: the system instruction lists the session's artifacts, so it changes
    # between the call that makes a function call and the one that replays it.
    record(
        "gemini/adk_turn1",
        answer(calls=[Call.of("list_files", {"folder": "/reports"})]),
        gemini_call([ADK_QUESTION], system_instruction=ADK_INSTRUCTION, tools=ADK_FILES_TOOL),
    )
    record(
        "gemini/adk_turn2",
        answer("There are two files: q1.pdf and q2.pdf."),
        gemini_call(
            [ADK_QUESTION, ADK_CALL, ADK_RESULT],
            system_instruction=ADK_INSTRUCTION + "\n\nArtifacts: q1.pdf, q2.pdf",
            tools=ADK_FILES_TOOL,
        ),
    )


if __name__ == "__main__":
    main()
