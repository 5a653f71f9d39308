"""Record the Anthropic and Gemini exchanges with media and server tools (issue 16): an image
input, a computer-use turn and the next call that answers it with a screenshot, a web search
turn and its replay (Anthropic); an inline image, a code execution turn and its replay, a
grounded answer (Gemini); plain and streamed.

Run ``.venv/bin/python -m tests.recorded.anthropic_gemini_media`` from the checkout to write them
again. The requests are the ``anthropic`` and ``google-genai`` SDKs'; a replay sends back the
SDK's own parsed answer, as an application does. The answers are the fake's own where it renders
them (text, tool calls), else a ``Reply`` written from the provider's API reference.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import anthropic.types
import orjson
from google.genai import types as gt

from tests.fakes import Call, FakeProvider, Reply, answer
from tests.recorded.record import (
    CLAUDE,
    GEMINI_MODEL,
    HERE,
    _anthropic,
    _drain,
    _gemini,
    anthropic_message,
    events,
    named,
    record,
)

# Small real PNGs (2×2 red, a 4×3 light-grey "screenshot"), so every blob decodes.
RED_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR42mO4o6EBRAwQCgAjrgSxd194GgAAAABJRU5ErkJggg=="
SCREENSHOT_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAADCAIAAAA7ljmRAAAADklEQVR42mP4gAQYcHIAkmUhwS7xK3AAAAAASUVORK5CYII="


def _body(name: str) -> Any:
    """The response body of an exchange recorded before (a replay sends it back)."""
    return orjson.loads((HERE / f"{name}.exchange.json").read_bytes())["response"]


# --- Anthropic: an image ------------------------------------------------------------------------

IMAGE_QUESTION = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What colour is this image?"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": RED_PNG},
            },
            {
                "type": "image",
                "source": {
                    "type": "url",
                    "url": "https://upload.wikimedia.org/wikipedia/commons/7/70/Example.png",
                },
            },
        ],
    }
]


def anthropic_create(stream: bool = False, beta: bool = False, **kw: Any) -> Callable[[FakeProvider], None]:  # fmt: skip
    def run(fake: FakeProvider) -> None:
        client = _anthropic(fake)
        messages = client.beta.messages if beta else client.messages
        result = messages.create(model=CLAUDE, max_tokens=1024, stream=stream, **kw)
        if stream:
            _drain(result)

    return run


# --- Anthropic: computer use, the client answers with a screenshot ------------------------------

COMPUTER_TOOL = {
    "type": "computer_20250124",
    "name": "computer",
    "display_width_px": 1024,
    "display_height_px": 768,
}
COMPUTER_BETA = {"betas": ["computer-use-2025-01-24"], "tools": [COMPUTER_TOOL]}
COMPUTER_TASK = [{"role": "user", "content": "Open the settings menu."}]
SCREENSHOT_CALL = Call.of("computer", {"action": "screenshot"})


def computer_turn2(fake: FakeProvider) -> None:
    """The next call: turn 1's answer as the SDK parsed it, then the screenshot it asked for."""
    turn1 = anthropic.types.beta.BetaMessage.model_validate(_body("anthropic/computer_use_turn1"))
    (call,) = [b for b in turn1.content if b.type == "tool_use"]
    result = {
        "type": "tool_result",
        "tool_use_id": call.id,
        "content": [
            {"type": "text", "text": "Screenshot taken."},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": SCREENSHOT_PNG},
            },
        ],
    }
    messages = [
        *COMPUTER_TASK,
        {"role": "assistant", "content": turn1.content},
        {"role": "user", "content": [result]},
    ]
    anthropic_create(beta=True, messages=messages, **COMPUTER_BETA)(fake)


# --- Anthropic: web search, a server tool ---------------------------------------------------------

SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
SEARCH_QUESTION = [{"role": "user", "content": "When was Claude Shannon born?"}]
SEARCH_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
    "name": "web_search",
    "input": {"query": "claude shannon birth date"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
            "title": "Claude Shannon - Wikipedia",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Yjg",
            "page_age": "April 30, 2025",
        }
    ],
}
SEARCH_CITATION = {
    "type": "web_search_result_location",
    "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
    "title": "Claude Shannon - Wikipedia",
    "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm",
    "cited_text": (
        "Claude Elwood Shannon (April 30, 1916 – February 24, 2001) was an American mathematician"
    ),
}
SEARCH_BODY = {
    **anthropic_message(
        "msg_01WebSearchShannonK4m",
        [
            {"type": "text", "text": "I'll search for that."},
            SEARCH_USE,
            SEARCH_RESULT,
            {
                "type": "text",
                "text": "Claude Shannon was born on April 30, 1916.",
                "citations": [SEARCH_CITATION],
            },
        ],
    ),
    "usage": {
        "input_tokens": 2095,
        "output_tokens": 503,
        "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
    },
}
SEARCH_STREAM = Reply(
    events=named(
        {
            "type": "message_start",
            "message": anthropic_message(SEARCH_BODY["id"], [], None, output_tokens=1),
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "I'll search for that."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {**SEARCH_USE, "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": "claude shannon '},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": 'birth date"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": SEARCH_RESULT},
        {"type": "content_block_stop", "index": 2},
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "text", "text": "", "citations": []},
        },
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "citations_delta", "citation": SEARCH_CITATION},
        },
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "text_delta", "text": "Claude Shannon was born on April 30, 1916."},
        },
        {"type": "content_block_stop", "index": 3},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {
                "output_tokens": 503,
                "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
            },
        },
        {"type": "message_stop"},
    )
)


def search_replay(fake: FakeProvider) -> None:
    """The next call: the search turn as the SDK parsed it, then a new question."""
    turn1 = anthropic.types.Message.model_validate(_body("anthropic/web_search"))
    messages = [
        *SEARCH_QUESTION,
        {"role": "assistant", "content": turn1.content},
        {"role": "user", "content": "And where?"},
    ]
    anthropic_create(messages=messages, tools=[SEARCH_TOOL])(fake)


# --- Gemini: an inline image, code execution, grounding ------------------------------------------


def gemini_generate(contents: Any, stream: bool = False, **config: Any) -> Callable[[FakeProvider], None]:  # fmt: skip
    def run(fake: FakeProvider) -> None:
        client = _gemini(fake)  # held: the client closes its connection when collected
        models = client.models
        kw = {
            "model": GEMINI_MODEL,
            "contents": contents,
            "config": gt.GenerateContentConfig(**config),
        }
        if stream:
            _drain(models.generate_content_stream(**kw))
        else:
            models.generate_content(**kw)

    return run


GEMINI_IMAGE = [
    gt.Content(
        role="user",
        parts=[
            gt.Part(text="What colour is this image?"),
            gt.Part.from_bytes(data=base64.b64decode(RED_PNG), mime_type="image/png"),
            gt.Part.from_uri(file_uri="gs://lithify-test/example.png", mime_type="image/png"),
        ],
    )
]
CODE_TOOL = [gt.Tool(code_execution=gt.ToolCodeExecution())]
CODE_QUESTION = "What is the sum of the first 50 prime numbers? Generate and run code for it."
CODE = "primes = [n for n in range(2, 300) if all(n % d for d in range(2, n))][:50]\nprint(sum(primes))\n"  # fmt: skip
CODE_PARTS = [
    {"text": "I'll compute it with code."},
    {"executableCode": {"language": "PYTHON", "code": CODE}},
    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "5117\n"}},
    {"text": "The sum of the first 50 prime numbers is 5117."},
]
CODE_USAGE = {"promptTokenCount": 25, "candidatesTokenCount": 140, "totalTokenCount": 165}
CODE_BODY = {
    "candidates": [
        {"content": {"role": "model", "parts": CODE_PARTS}, "finishReason": "STOP", "index": 0}
    ],
    "usageMetadata": CODE_USAGE,
    "modelVersion": GEMINI_MODEL,
    "responseId": "CodeExecSum50PrimesQ9a",
}
CODE_STREAM = Reply(
    events=events(
        *(
            {
                "candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
                "modelVersion": GEMINI_MODEL,
                "responseId": CODE_BODY["responseId"],
            }
            for part in CODE_PARTS[:-1]
        ),
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [CODE_PARTS[-1]]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": CODE_USAGE,
            "modelVersion": GEMINI_MODEL,
            "responseId": CODE_BODY["responseId"],
        },
    )
)


def code_replay(fake: FakeProvider) -> None:
    """The next call: the code execution turn as the SDK parsed it, then a new question."""
    turn1 = gt.GenerateContentResponse.model_validate(_body("gemini/code_execution"))
    content = turn1.candidates[0].content  # type: ignore[index]
    contents = [gt.Content(role="user", parts=[gt.Part(text=CODE_QUESTION)]), content, "And the first 10?"]  # fmt: skip
    gemini_generate(contents, tools=CODE_TOOL)(fake)


SEARCH_TOOL_GEMINI = [gt.Tool(google_search=gt.GoogleSearch())]
GROUNDED_BODY = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [{"text": "Spain won Euro 2024, beating England 2-1."}],
            },
            "finishReason": "STOP",
            "index": 0,
            "groundingMetadata": {
                "webSearchQueries": ["UEFA Euro 2024 winner"],
                "searchEntryPoint": {"renderedContent": '<div class="container">Euro 2024</div>'},
                "groundingChunks": [
                    {
                        "web": {
                            "uri": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC1",
                            "title": "uefa.com",
                        }
                    }
                ],
                "groundingSupports": [
                    {
                        "segment": {
                            "endIndex": 41,
                            "text": "Spain won Euro 2024, beating England 2-1.",
                        },
                        "groundingChunkIndices": [0],
                        "confidenceScores": [0.97],
                    }
                ],
            },
        }
    ],
    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 14, "totalTokenCount": 26},
    "modelVersion": GEMINI_MODEL,
    "responseId": "GroundedEuro2024Zx7",
}


def main() -> None:
    a, g = "anthropic", "gemini"
    record(f"{a}/image_input", answer("The image is red."), anthropic_create(messages=IMAGE_QUESTION))  # fmt: skip
    record(
        f"{a}/image_input_streaming",
        answer("The image is red."),
        anthropic_create(stream=True, messages=IMAGE_QUESTION),
    )
    record(
        f"{a}/computer_use_turn1",
        answer("I'll take a screenshot first.", calls=[SCREENSHOT_CALL]),
        anthropic_create(beta=True, messages=COMPUTER_TASK, **COMPUTER_BETA),
    )
    record(f"{a}/computer_use_turn2", answer("The settings menu is open."), computer_turn2)
    record(f"{a}/web_search", Reply(body=SEARCH_BODY), anthropic_create(messages=SEARCH_QUESTION, tools=[SEARCH_TOOL]))  # fmt: skip
    record(
        f"{a}/web_search_streaming",
        SEARCH_STREAM,
        anthropic_create(stream=True, messages=SEARCH_QUESTION, tools=[SEARCH_TOOL]),
    )
    record(f"{a}/web_search_replay", answer("In Petoskey, Michigan."), search_replay)

    record(f"{g}/image_input", answer("The image is red."), gemini_generate(GEMINI_IMAGE))
    record(f"{g}/image_input_streaming", answer("The image is red."), gemini_generate(GEMINI_IMAGE, stream=True))  # fmt: skip
    record(f"{g}/code_execution", Reply(body=CODE_BODY), gemini_generate(CODE_QUESTION, tools=CODE_TOOL))  # fmt: skip
    record(
        f"{g}/code_execution_streaming",
        CODE_STREAM,
        gemini_generate(CODE_QUESTION, stream=True, tools=CODE_TOOL),
    )
    record(f"{g}/code_execution_replay", answer("The sum of the first 10 primes is 129."), code_replay)  # fmt: skip
    record(
        f"{g}/google_search",
        Reply(body=GROUNDED_BODY),
        gemini_generate("Who won Euro 2024?", tools=SEARCH_TOOL_GEMINI),
    )


if __name__ == "__main__":
    main()
