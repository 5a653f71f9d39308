"""Record the Responses exchanges with media and tool items (issue 16): an image input, a
computer-use turn and the next call that answers it with a screenshot, server tools (web
search, code interpreter) and a generated image, plain and streamed.

Run ``.venv/bin/python -m tests.recorded.openai_responses_media`` from the checkout to write them
again. The requests are the ``openai`` SDK's; the answers are the fake's own where it renders
them (text), else a ``Reply`` written from OpenAI's Responses reference and the SDK's types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.fakes import FakeProvider, Reply, answer
from tests.recorded.record import _drain, _openai, named, record, responses_body

# Small real PNGs (2×2 red, a 4×3 light-grey "screenshot", 2×2 blue), so every blob decodes.
RED_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR42mO4o6EBRAwQCgAjrgSxd194GgAAAABJRU5ErkJggg=="
SCREENSHOT_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAADCAIAAAA7ljmRAAAADklEQVR42mP4gAQYcHIAkmUhwS7xK3AAAAAASUVORK5CYII="
BLUE_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR42mOQizoBRAwQCgAgZgUBJVrRTwAAAABJRU5ErkJggg=="

IMAGE_QUESTION = [
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What colour is this image, and the one at the link?"},
            {
                "type": "input_image",
                "image_url": f"data:image/png;base64,{RED_PNG}",
                "detail": "low",
            },
            {
                "type": "input_image",
                "image_url": "https://upload.wikimedia.org/wikipedia/commons/7/70/Example.png",
                "detail": "auto",
            },
        ],
    }
]


def image_input(stream: bool) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        result = _openai(fake).responses.create(
            model="gpt-4.1-mini", input=IMAGE_QUESTION, stream=stream
        )
        if stream:
            _drain(result)

    return run


# --- Computer use: the model clicks, the client answers with a screenshot ----------------------

COMPUTER_TOOL = {
    "type": "computer_use_preview",
    "display_width": 1024,
    "display_height": 768,
    "environment": "browser",
}
COMPUTER_TASK = [{"role": "user", "content": "Open the settings menu."}]
COMPUTER_REASONING = {
    "id": "rs_68c2a1b2c3d4e5f6",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "The gear icon is at the top right."}],
}
SAFETY_CHECK = {
    "id": "cu_sc_68c2a1b2c3d4",
    "code": "malicious_instructions",
    "message": "The page may contain instructions that are not the user's.",
}
COMPUTER_CALL = {
    "id": "cu_68c2a1b2c3d4e5f6",
    "type": "computer_call",
    "call_id": "call_68c2a1b2c3d4e5f6a7b8c9d0",
    "action": {"type": "click", "button": "left", "x": 981, "y": 42},
    "pending_safety_checks": [SAFETY_CHECK],
    "status": "completed",
}
COMPUTER_BODY = responses_body(
    "resp_68c2a1b2c3d4e5f60718293a4b5c6d7e",
    [COMPUTER_REASONING, COMPUTER_CALL],
    model="computer-use-preview-2025-03-11",
    tools=[COMPUTER_TOOL],
    truncation="auto",
)
_STARTED = {**COMPUTER_BODY, "status": "in_progress", "completed_at": None, "output": []}
COMPUTER_STREAM = Reply(
    events=named(
        {"type": "response.created", "sequence_number": 0, "response": {**_STARTED, "usage": None}},
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {**COMPUTER_REASONING, "summary": []},
        },
        {
            "type": "response.output_item.done",
            "sequence_number": 2,
            "output_index": 0,
            "item": COMPUTER_REASONING,
        },
        {
            "type": "response.output_item.added",
            "sequence_number": 3,
            "output_index": 1,
            "item": {**COMPUTER_CALL, "status": "in_progress"},
        },
        {
            "type": "response.output_item.done",
            "sequence_number": 4,
            "output_index": 1,
            "item": COMPUTER_CALL,
        },
        {"type": "response.completed", "sequence_number": 5, "response": COMPUTER_BODY},
    )
)
# The next call replays the turn and answers the click with a screenshot, acknowledging the check.
SCREENSHOT_ANSWER = {
    "type": "computer_call_output",
    "call_id": COMPUTER_CALL["call_id"],
    "output": {
        "type": "computer_screenshot",
        "image_url": f"data:image/png;base64,{SCREENSHOT_PNG}",
    },
    "acknowledged_safety_checks": [SAFETY_CHECK],
}


def computer_use(input_: list[Any], stream: bool = False) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        result = _openai(fake).responses.create(
            model="computer-use-preview",
            input=input_,
            tools=[COMPUTER_TOOL],
            reasoning={"summary": "concise"},
            truncation="auto",
            stream=stream,
        )
        if stream:
            _drain(result)

    return run


# --- Server tools: web search and code interpreter ---------------------------------------------

SERVER_TOOLS = [{"type": "web_search"}, {"type": "code_interpreter", "container": {"type": "auto"}}]
SERVER_INCLUDE = ["web_search_call.action.sources", "code_interpreter_call.outputs"]
SERVER_QUESTION = "What is the latest Python release, and what is 2**100?"
SEARCH_CALL = {
    "id": "ws_68c3b2c3d4e5f607",
    "type": "web_search_call",
    "status": "completed",
    "action": {
        "type": "search",
        "query": "latest Python release",
        "sources": [{"type": "url", "url": "https://www.python.org/downloads/"}],
    },
}
CODE = "print(2**100)"
CODE_CALL = {
    "id": "ci_68c3b2c3d4e5f608",
    "type": "code_interpreter_call",
    "status": "completed",
    "code": CODE,
    "container_id": "cntr_68c3b2c3d4e5f609",
    "outputs": [{"type": "logs", "logs": "1267650600228229401496703205376\n"}],
}
ANSWER_TEXT = "Python 3.14.0 is the latest release; 2**100 is 1267650600228229401496703205376."
ANSWER_MESSAGE = {
    "id": "msg_68c3b2c3d4e5f60a",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [
        {
            "type": "output_text",
            "text": ANSWER_TEXT,
            "logprobs": [],
            "annotations": [
                {
                    "type": "url_citation",
                    "start_index": 0,
                    "end_index": 14,
                    "title": "Download Python",
                    "url": "https://www.python.org/downloads/",
                }
            ],
        }
    ],
}
SERVER_BODY = responses_body(
    "resp_68c3b2c3d4e5f60718293a4b5c6d7e8f",
    [SEARCH_CALL, CODE_CALL, ANSWER_MESSAGE],
    tools=SERVER_TOOLS,
)


def _server_events() -> list[dict[str, Any]]:
    evs: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "response": {
                **SERVER_BODY,
                "status": "in_progress",
                "completed_at": None,
                "output": [],
                "usage": None,
            },
        }
    ]
    ws, ci, msg = SEARCH_CALL["id"], CODE_CALL["id"], ANSWER_MESSAGE["id"]
    evs += [
        {"type": "response.output_item.added", "output_index": 0, "item": {**SEARCH_CALL, "status": "in_progress", "action": {"type": "search"}}},
        {"type": "response.web_search_call.in_progress", "output_index": 0, "item_id": ws},
        {"type": "response.web_search_call.searching", "output_index": 0, "item_id": ws},
        {"type": "response.web_search_call.completed", "output_index": 0, "item_id": ws},
        {"type": "response.output_item.done", "output_index": 0, "item": SEARCH_CALL},
        {"type": "response.output_item.added", "output_index": 1, "item": {**CODE_CALL, "status": "in_progress", "code": "", "outputs": None}},
        {"type": "response.code_interpreter_call.in_progress", "output_index": 1, "item_id": ci},
        {"type": "response.code_interpreter_call_code.delta", "output_index": 1, "item_id": ci, "delta": CODE[:7]},
        {"type": "response.code_interpreter_call_code.delta", "output_index": 1, "item_id": ci, "delta": CODE[7:]},
        {"type": "response.code_interpreter_call_code.done", "output_index": 1, "item_id": ci, "code": CODE},
        {"type": "response.code_interpreter_call.interpreting", "output_index": 1, "item_id": ci},
        {"type": "response.code_interpreter_call.completed", "output_index": 1, "item_id": ci},
        {"type": "response.output_item.done", "output_index": 1, "item": CODE_CALL},
        {"type": "response.output_item.added", "output_index": 2, "item": {**ANSWER_MESSAGE, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", "output_index": 2, "item_id": msg, "content_index": 0, "part": {"type": "output_text", "text": "", "logprobs": [], "annotations": []}},
        {"type": "response.output_text.delta", "output_index": 2, "item_id": msg, "content_index": 0, "delta": ANSWER_TEXT, "logprobs": []},
        {"type": "response.output_text.annotation.added", "output_index": 2, "item_id": msg, "content_index": 0, "annotation_index": 0, "annotation": ANSWER_MESSAGE["content"][0]["annotations"][0]},
        {"type": "response.output_text.done", "output_index": 2, "item_id": msg, "content_index": 0, "text": ANSWER_TEXT, "logprobs": []},
        {"type": "response.content_part.done", "output_index": 2, "item_id": msg, "content_index": 0, "part": ANSWER_MESSAGE["content"][0]},
        {"type": "response.output_item.done", "output_index": 2, "item": ANSWER_MESSAGE},
        {"type": "response.completed", "response": SERVER_BODY},
    ]  # fmt: skip
    return [{**e, "sequence_number": n} for n, e in enumerate(evs)]


SERVER_STREAM = Reply(events=named(*_server_events()))


def server_tools(stream: bool) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        result = _openai(fake).responses.create(
            model="gpt-5-mini",
            input=SERVER_QUESTION,
            tools=SERVER_TOOLS,
            include=SERVER_INCLUDE,
            stream=stream,
        )
        if stream:
            _drain(result)

    return run


# --- Image generation: the generated image is base64 in the item's result --------------------

IMAGE_CALL = {
    "id": "ig_68c4c3d4e5f60718",
    "type": "image_generation_call",
    "status": "completed",
    "background": "opaque",
    "output_format": "png",
    "quality": "low",
    "revised_prompt": "A tiny solid blue square.",
    "size": "1024x1024",
    "result": BLUE_PNG,
}
IMAGE_MESSAGE = {
    "id": "msg_68c4c3d4e5f60719",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [
        {
            "type": "output_text",
            "text": "Here is your blue square.",
            "logprobs": [],
            "annotations": [],
        }
    ],
}
IMAGE_BODY = responses_body(
    "resp_68c4c3d4e5f60718293a4b5c6d7e8f90",
    [IMAGE_CALL, IMAGE_MESSAGE],
    tools=[{"type": "image_generation", "quality": "low"}],
)


def _image_events() -> list[dict[str, Any]]:
    ig, msg = IMAGE_CALL["id"], IMAGE_MESSAGE["id"]
    started = {k: v for k, v in IMAGE_CALL.items() if k not in ("result", "revised_prompt")}
    evs: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**IMAGE_BODY, "status": "in_progress", "completed_at": None, "output": [], "usage": None}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**started, "status": "in_progress", "result": None}},
        {"type": "response.image_generation_call.in_progress", "output_index": 0, "item_id": ig},
        {"type": "response.image_generation_call.generating", "output_index": 0, "item_id": ig},
        {"type": "response.image_generation_call.partial_image", "output_index": 0, "item_id": ig, "partial_image_index": 0, "partial_image_b64": RED_PNG, "output_format": "png", "size": "1024x1024", "quality": "low", "background": "opaque"},
        {"type": "response.image_generation_call.completed", "output_index": 0, "item_id": ig},
        {"type": "response.output_item.done", "output_index": 0, "item": IMAGE_CALL},
        {"type": "response.output_item.added", "output_index": 1, "item": {**IMAGE_MESSAGE, "status": "in_progress", "content": []}},
        {"type": "response.output_text.delta", "output_index": 1, "item_id": msg, "content_index": 0, "delta": "Here is your blue square.", "logprobs": []},
        {"type": "response.output_item.done", "output_index": 1, "item": IMAGE_MESSAGE},
        {"type": "response.completed", "response": IMAGE_BODY},
    ]  # fmt: skip
    return [{**e, "sequence_number": n} for n, e in enumerate(evs)]


IMAGE_STREAM = Reply(events=named(*_image_events()))


def image_generation(stream: bool) -> Callable[[FakeProvider], None]:
    def run(fake: FakeProvider) -> None:
        result = _openai(fake).responses.create(
            model="gpt-5-mini",
            input="Draw a tiny blue square.",
            tools=[{"type": "image_generation", "quality": "low", "partial_images": 1}],
            stream=stream,
        )
        if stream:
            _drain(result)

    return run


def main() -> None:
    here = "openai-responses"
    record(f"{here}/image_input", answer("The image is red."), image_input(False))
    record(f"{here}/image_input_streaming", answer("The image is red."), image_input(True))
    record(f"{here}/computer_use_turn1", Reply(body=COMPUTER_BODY), computer_use(COMPUTER_TASK))
    record(
        f"{here}/computer_use_turn1_streaming",
        COMPUTER_STREAM,
        computer_use(COMPUTER_TASK, stream=True),
    )
    record(
        f"{here}/computer_use_turn2",
        answer("The settings menu is open."),
        computer_use([*COMPUTER_TASK, COMPUTER_REASONING, COMPUTER_CALL, SCREENSHOT_ANSWER]),
    )
    record(f"{here}/server_tools", Reply(body=SERVER_BODY), server_tools(False))
    record(f"{here}/server_tools_streaming", SERVER_STREAM, server_tools(True))
    record(f"{here}/image_generation", Reply(body=IMAGE_BODY), image_generation(False))
    record(f"{here}/image_generation_streaming", IMAGE_STREAM, image_generation(True))


if __name__ == "__main__":
    main()
