"""A store of sample sessions (ordinary and hostile), the viewer serving it over real HTTP in a
thread, and a real Chromium (Debian's package) driven by Playwright."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from lithify.ingest.http import config
from lithify.model import InferenceCall, Message, ToolCallResponsePart
from lithify.store import FactStore, open_store
from lithify.ui import UiConfig, build_app
from lithify.ui.server import _refusal
from tests.export.helpers import assistant, call, fact, replay, system, text, think, tool, user
from tests.store.conftest import pg_store_url, pg_url, sqlite_store_url  # noqa: F401

CHROMIUM = Path("/usr/bin/chromium")
# Headless, and nothing of the browser's own reaching out (updates, sync, QUIC probes).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "ui"

# What a hostile agent, tool or user could put in a fact: every bit of it must stay text.
SCRIPT = "<script>window.__pwned = 1</script>"
IMG = '<img src=x onerror="window.__pwned = 2">'
JS_URL = "javascript:window.__pwned = 3"
HOSTILE_HTML = f'<a href="{JS_URL}">click</a><iframe src="{JS_URL}"></iframe><b>bold</b>'
HOSTILE_MODEL = '<svg onload="window.__pwned = 4">'
HOSTILE_SESSION = 'evil"><img src=x onerror="window.__pwned=5">'
GIANT = "A" * 2_000_000 + SCRIPT


def _at(second: int) -> str:
    return f"2025-06-01T10:{second // 60:02d}:{second % 60:02d}.000000000Z"


def _with(f: InferenceCall, **changes: Any) -> InferenceCall:
    return msgspec.structs.replace(f, **changes)


def sample_facts() -> list[InferenceCall]:
    """Three ordinary sessions and a hostile one.

    - ``agent-1`` (gpt-4o, openai): a tool call with reasoning, its answer after the tool
      result, then a call whose history was compacted (a second segment, input_history_changed).
    - ``chat-2`` (claude, anthropic): one call with opaque reasoning.
    - ``chat-3`` (gpt-4o): a plain question.
    - ``HOSTILE_SESSION``: script, HTML, javascript: URLs and a 2 MB message everywhere.
    """
    q = [system("You are a weather agent."), user("Weather in Paris?")]
    first_out = assistant(
        think("The user wants the weather; call the tool."),
        call("c1", city="Paris", units="metric"),
        finish="tool_call",
    )
    second_in = [*q, replay(first_out), tool("c1", {"temp": 21, "sky": "clear"})]
    second_out = assistant(text("It is 21 °C and clear in Paris."))
    compacted = [system("Summary: the user asked about Paris; it is sunny."), user("And Lyon?")]
    agent = [
        fact("agent-1-a", q, [first_out], session="agent-1", second=1, model="gpt-4o"),
        fact("agent-1-b", second_in, [second_out], session="agent-1", second=2, model="gpt-4o"),
        fact(
            "agent-1-c",
            compacted,
            [assistant(text("Lyon: 19 °C."))],
            session="agent-1",
            second=3,
            model="gpt-4o",
        ),
    ]
    chat2 = fact(
        "chat-2-a",
        [user("Say hi")],
        [assistant(text("Hi!"))],
        session="chat-2",
        second=10,
        model="claude-sonnet",
        degradations={"opaque_reasoning": 1},
    )
    chat3 = fact(
        "chat-3-a",
        [user("2+2?")],
        [assistant(text("4"))],
        session="chat-3",
        second=20,
        model="gpt-4o",
    )
    hostile_call = call("h1", url=JS_URL, html=HOSTILE_HTML, note=SCRIPT)
    hostile = [
        fact(
            "hostile-a",
            [user(SCRIPT + IMG), user(GIANT)],
            [assistant(think(SCRIPT), text(HOSTILE_HTML), hostile_call, finish="tool_call")],
            session=HOSTILE_SESSION,
            second=30,
            model=HOSTILE_MODEL,
        ),
    ]
    hostile_out = hostile[0].output_messages[0]
    hostile.append(
        fact(
            "hostile-b",
            [
                user(SCRIPT + IMG),
                user(GIANT),
                replay(hostile_out),
                Message("tool", [ToolCallResponsePart("h1", HOSTILE_HTML + SCRIPT)]),
            ],
            [assistant(text(IMG))],
            session=HOSTILE_SESSION,
            second=31,
            model=HOSTILE_MODEL,
        )
    )
    return [
        _with(
            f,
            provider="anthropic" if "claude" in (f.model or "") else "openai",
            raw={"html": HOSTILE_HTML} if f.session_id == HOSTILE_SESSION else {"span": 1},
            input_tokens=40 * len(f.input_messages),
            output_tokens=25,
            duration_ms=850.0,
        )
        for f in [*agent, chat2, chat3, *hostile]
    ]


@dataclass
class Running:
    """A viewer serving over loopback."""

    url: str
    port: int
    store: FactStore
    app: Any


@contextmanager
def running(store: FactStore, ui: UiConfig | None = None) -> Iterator[Running]:
    """The viewer on a free loopback port, in a thread (uvicorn leaves signals alone there),
    with the bounded protocol every lithify server has; ``ui.host`` only decides the rules."""
    import uvicorn

    app = build_app(store, ui or UiConfig())
    server = uvicorn.Server(
        config(
            app,
            host="127.0.0.1",
            port=0,
            refusal=_refusal,
            log_config=None,
            shutdown_timeout=1,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the viewer did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Running(f"http://127.0.0.1:{port}", port, store, app)
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def store(sqlite_store_url: str) -> Iterator[FactStore]:  # noqa: F811
    with open_store(sqlite_store_url) as s:
        s.insert_facts(sample_facts())
        yield s


@pytest.fixture
def viewer(store: FactStore) -> Iterator[Running]:
    with running(store) as r:
        yield r


_chromium: list[Any] = []  # [playwright, browser, fixtures using it]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium (scripts/test installs it), never a browser Playwright downloads.

    One at a time per process, however many test folders import this fixture: Playwright's sync
    API runs once per thread, so a second one beside it would fail. Stopped after each module:
    while it runs, the process's main thread has a running event loop, and a later test's
    ``asyncio.run`` in the same pytest-xdist process would fail."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "apt-get install chromium (scripts/test does it)"
    if not _chromium:
        p = sync_playwright().start()
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        _chromium.extend([p, b, 0])
    _chromium[2] += 1
    try:
        yield _chromium[1]
    finally:
        _chromium[2] -= 1
        if _chromium[2] == 0:
            p, b, _ = _chromium
            _chromium.clear()
            b.close()
            p.stop()


@dataclass
class Tab:
    """A page, the dialogs it opened and the requests it tried to send elsewhere."""

    page: Any
    dialogs: list[str]
    elsewhere: list[str]
    base: str

    def go(self, path: str) -> Any:
        response = self.page.goto(self.base + path)
        assert response is not None and response.status == 200, (path, response and response.status)
        return response

    def follow(self, locator: Any) -> None:
        """Click what loads another page, and wait for it."""
        with self.page.expect_navigation():
            locator.click()

    def press(self, key: str) -> None:
        """Press a key that loads another page, and wait for it."""
        with self.page.expect_navigation():
            self.page.keyboard.press(key)

    def shot(self, name: str) -> None:
        """A screenshot for docs/ui.md, when LITHIFY_UI_SCREENSHOTS=1."""
        if os.environ.get("LITHIFY_UI_SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


LAPTOP = {"width": 1280, "height": 860}


@pytest.fixture
def tab(browser: Any, viewer: Running) -> Iterator[Tab]:
    with open_tab(browser, viewer) as t:
        yield t


@contextmanager
def open_tab(browser: Any, viewer: Running, viewport: dict[str, int] = LAPTOP) -> Iterator[Tab]:
    """A browser tab on ``viewer`` that fails its test on any dialog or request elsewhere."""
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    t = Tab(page, [], [], viewer.url)
    page.on("dialog", lambda d: (t.dialogs.append(d.message), d.dismiss()))

    def only_here(route: Any) -> None:
        if route.request.url.startswith(viewer.url):
            route.continue_()
        else:
            t.elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", only_here)
    yield t
    context.close()
    assert t.dialogs == [] and t.elsewhere == []


DEGRADED_SESSION = "degraded-1"
OTLP_TOOL_CALL = "util_genai_openai_v2_chat_tool_call.otlp.json"


def degraded_facts(tmp: Path) -> list[InferenceCall]:
    """Two calls of session ``degraded-1`` whose degradations show on their parts, each made by
    a real translator: an OpenAI Chat exchange (an API key in a message, an uploaded file, a
    tool call without an id and its result, a result answering no call, arguments that are not
    JSON) and an OTLP/JSON line with a lone surrogate in a message; hostile markup in the text
    and a tool result, which must stay text beside the marks."""
    from lithify.ingest.files import read_file
    from lithify.translate import translate_document
    from tests.conftest import CORPUS

    exchange = {
        "request": {
            "model": "gpt-4o",
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": f"my key is sk-proj-abcdefghijklmnopqrstuvwxyz0123 {SCRIPT}"},
                    {"type": "file", "file": {"file_id": "file-abc"}},
                ]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
                ]},
                {"role": "tool", "content": f"sunny {IMG}"},
                {"role": "tool", "content": "a result for no call"},
            ],
        },
        "response": {
            "id": "chatcmpl-1",
            "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Checking.",
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": "get_weather", "arguments": "not json"}}],
            }}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 9},
        },
    }  # fmt: skip
    facts = [r for r in translate_document(exchange) if isinstance(r, InferenceCall)]
    line = (CORPUS / "otlp" / OTLP_TOOL_CALL).read_bytes()
    line = orjson.dumps(orjson.loads(line)).replace(
        b"Where is order A-1187?", b"Where is order A-1187? \\ud800", 1
    )
    path = tmp / "invalid-text.jsonl"
    path.write_bytes(line + b"\n")
    facts += [x.result for x in read_file(path) if isinstance(x.result, InferenceCall)]
    assert len(facts) == 2
    return [
        _with(f, session_id=DEGRADED_SESSION, started_at=_at(40 + i), observed_at=_at(40 + i))
        for i, f in enumerate(facts)
    ]


@pytest.fixture
def degraded_viewer(sqlite_store_url: str, tmp_path: Path) -> Iterator[Running]:  # noqa: F811
    """The viewer on the sample sessions and ``degraded-1``."""
    with open_store(sqlite_store_url) as s:
        s.insert_facts([*sample_facts(), *degraded_facts(tmp_path)])
        with running(s) as r:
            yield r
