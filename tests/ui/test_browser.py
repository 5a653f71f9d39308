"""The viewer in a real browser: every page, filtering, a session read as a conversation,
curation that an export then honours, keyboard navigation, the dark theme, and hostile content
that stays text. With LITHIFY_UI_SCREENSHOTS=1 it writes the screenshots of docs/ui.md."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from lithify.export import ExportOptions, export, from_store
from lithify.export.profiles import SUPPORTED
from lithify.ingest.tokens import new_token, token_hash, token_prefix
from lithify.model import DEGRADATION_REASONS
from lithify.store import FactFilter, FactStore
from lithify.ui import UiConfig
from tests.export.helpers import read_rows
from tests.ui.conftest import (
    DEGRADED_SESSION,
    HOSTILE_MODEL,
    HOSTILE_SESSION,
    IMG,
    JS_URL,
    LAPTOP,
    SCRIPT,
    Running,
    Tab,
    open_tab,
    running,
)


def _sessions(tab: Tab) -> list[str]:
    return tab.page.locator("#session-list tbody td.id a").all_inner_texts()


def test_read_filter_open_and_unfold(tab: Tab) -> None:
    page = tab.page
    tab.go("/")
    assert page.locator(".card").first.inner_text().startswith("7")  # 7 calls
    assert "4" in page.locator(".card", has_text="sessions").inner_text()
    tab.shot("overview")

    tab.follow(page.get_by_role("link", name="Sessions", exact=True))
    assert _sessions(tab)[:3] == [HOSTILE_SESSION, "chat-3", "chat-2"]
    page.fill("input[name=model]", "claude-sonnet")
    tab.follow(page.get_by_role("button", name="Filter"))
    assert _sessions(tab) == ["chat-2"]
    tab.follow(page.get_by_role("link", name="clear"))
    page.fill("input[name=q]", "paris")
    tab.press("Enter")
    assert _sessions(tab) == ["agent-1"]
    assert "q=paris" in page.url
    tab.shot("sessions")

    tab.follow(page.get_by_role("link", name="agent-1"))
    assert page.locator("h1").inner_text() == "agent-1"
    segments = page.locator("section.segment")
    assert segments.count() == 2
    assert "input_history_changed" in segments.nth(1).locator(".split").inner_text()
    reasoning = page.locator("details.reasoning").first
    assert not reasoning.locator("pre").is_visible()  # folded
    reasoning.locator("summary").click()
    assert reasoning.locator("pre").inner_text() == "The user wants the weather; call the tool."
    call = page.locator(".toolcall").first
    assert call.locator(".args pre").inner_text() == '{\n  "city": "Paris",\n  "units": "metric"\n}'
    assert '"temp": 21' in call.locator(".result pre").inner_text()  # beside its call
    first = page.locator("article.call").first
    assert "gpt-4o" in first.locator(".callhead").inner_text()
    head = first.locator(".callhead").inner_text()
    assert "finish: tool_call" in head
    assert "80 in / 25 out tokens" in head and "850 ms" in head and "openai" in head
    tab.shot("session")

    tab.follow(page.get_by_role("link", name="rows this session exports"))
    assert (
        "lithify export sft --profile canonical --session agent-1"
        in page.locator("pre.command").inner_text()
    )
    tab.follow(page.locator("nav.kinds a", has_text="trl").first)
    assert page.locator("nav.kinds a.current").inner_text() == "trl"
    assert page.locator("article.row").count() >= 2
    assert '"reasoning_content"' in page.locator("article.row pre.json").first.inner_text()
    tab.shot("rows")
    tab.press("Escape")  # back to the session
    assert page.locator("h1").inner_text() == "agent-1"

    tab.follow(first.get_by_role("link", name="captures & raw"))
    assert page.locator(".tag-used").count() == 1
    page.locator("details.raw summary").first.click()
    assert '"span": 1' in page.locator("details.raw pre").first.inner_text()
    tab.shot("call")
    tab.press("Escape")  # back to the session
    assert page.locator("h1").inner_text() == "agent-1"


def test_label_and_exclude_then_export_honours_them(
    tab: Tab, viewer: Running, tmp_path: Path
) -> None:
    page = tab.page
    tab.go("/sessions/chat-2")
    assert "opaque reasoning" in page.locator(".opaque").inner_text()
    tab.follow(page.locator(".session-curate").get_by_role("button", name="good"))
    assert page.locator(".session-curate .tag-good").inner_text() == "label: good"
    tab.go("/sessions/agent-1")
    tab.follow(page.locator(".session-curate").get_by_role("button", name="exclude"))
    assert "exclude: True" in page.locator(".session-curate .feedback").inner_text()
    # a call's own score, typed in its compact form
    form = page.locator("article.call").first.locator("form.curate")
    form.locator("input[name=value]").fill("0.25")
    tab.follow(form.get_by_role("button", name="score"))
    assert "score: 0.25" in page.locator("article.call").first.locator(".feedback").inner_text()

    tab.go("/sessions?label=good")
    assert _sessions(tab) == ["chat-2"]
    tab.go("/sessions?exclude=yes")
    assert _sessions(tab) == ["agent-1"]

    def rows(where: tuple[str, ...] = ()) -> list[str]:
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        export(from_store(viewer.store, FactFilter()), out, ExportOptions(kind="sft", where=where))
        return sorted({r["metadata"]["session_id"] for r in read_rows(out / "train.jsonl")})

    everything = rows()
    assert "agent-1" not in everything and "chat-2" in everything and "chat-3" in everything
    assert rows(("label==good",)) == ["chat-2"]

    # every session a filter selects: labelled at once, then exported from the page
    tab.go("/sessions?model=gpt-4o")
    tab.follow(page.locator("#curate-selection").get_by_role("button", name="bad"))
    assert page.locator("h1").inner_text() == "Labelled 2 of 2 sessions"
    assert rows(("label==bad",)) == ["chat-3"]  # agent-1 is excluded, so it has no rows
    tab.go("/sessions?model=gpt-4o")
    tab.follow(page.locator("#export-selection"))
    assert page.locator("h1").inner_text() == "Export 2 sessions"
    page.select_option("select[name=profile]", "openai")
    tab.follow(page.get_by_role("button", name="Update"))
    assert (
        "lithify export sft --profile openai --session" in page.locator("pre.command").inner_text()
    )
    tab.shot("export")
    with page.expect_download() as download:
        page.locator("a.download").click()
    assert download.value.suggested_filename == "lithify-sft-openai.zip"
    # the archive the page gave: agent-1 is excluded, so only chat-3's rows are in it
    with zipfile.ZipFile(download.value.path()) as z:
        lines = z.read("train.jsonl").decode().splitlines()
    assert lines and {json.loads(x)["metadata"]["session_id"] for x in lines} == {"chat-3"}


def test_keyboard_and_dark_theme(tab: Tab) -> None:
    page = tab.page
    tab.go("/sessions")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    assert page.locator("tr.selected td.id a").inner_text() == HOSTILE_SESSION
    page.keyboard.press("j")
    tab.press("Enter")
    assert page.url.endswith("/sessions/chat-3")
    tab.press("Escape")
    assert page.url.endswith("/sessions")
    # a session: j/k move through its calls, Enter opens the selected call, Esc goes back
    tab.go("/sessions")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("j")
    tab.press("Enter")
    assert page.url.endswith("/sessions/agent-1")
    for key in "jjjk":
        page.keyboard.press(key)
    selected = page.locator("article.call.selected")
    assert selected.count() == 1 and selected.locator(".n").inner_text() == "#2"
    tab.press("Enter")
    assert page.locator("h1").inner_text() == "call agent-1-b"
    page.keyboard.press("j")
    assert page.locator("tr.selected .tag-used").count() == 1  # the captures' table
    tab.press("Escape")
    assert page.url.endswith("/sessions/agent-1")
    tab.press("Escape")
    assert page.url.endswith("/sessions")
    page.emulate_media(color_scheme="dark")
    tab.go("/sessions/agent-1")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 23, 26)"
    tab.shot("session-dark")


def _inert(tab: Tab) -> None:
    """Nothing hostile became markup or ran: the page's one script is the viewer's own."""
    page = tab.page
    assert page.evaluate("window.__pwned") is None
    assert page.locator("script").count() == 1
    assert page.locator("img, svg:not(.chart), iframe").count() == 0  # the chart is ours
    assert page.locator("b", has_text="bold").count() == 0  # the HTML in a tool result
    assert page.locator(f'a[href^="{JS_URL[:11]}"]').count() == 0
    assert page.locator("body > footer").is_visible()  # the page is whole


def test_hostile_content_stays_text_on_every_page(tab: Tab, viewer: Running) -> None:
    page = tab.page
    sid = quote(HOSTILE_SESSION, safe="")
    # a hostile label and comment, through the JSON API as a script would send them
    csrf = page.request.get(viewer.url + "/api/csrf").json()["csrf"]
    for name, value in [("label", SCRIPT), ("<b>name</b>", f"{JS_URL} {SCRIPT}")]:
        r = page.request.post(
            viewer.url + "/api/feedback",
            data={
                "target_kind": "session",
                "target_id": HOSTILE_SESSION,
                "name": name,
                "value": value,
            },
            headers={"x-csrf-token": csrf},
        )
        assert r.status == 201, r.text()
    model = quote(HOSTILE_MODEL, safe="")
    rows = [f"/rows?session={sid}&kind={k}&profile={p}" for k, ps in SUPPORTED.items() for p in ps]
    for path in ["/", "/sessions", f"/sessions?q={quote(SCRIPT)}", f"/sessions?model={model}",
                 *rows, f"/export?model={model}", f"/export?model={model}&kind=dpo&profile=trl",
                 f"/sessions/{sid}"]:  # fmt: skip
        tab.go(path)
        _inert(tab)
    # error pages repeat what was asked for: as text
    for path in [f"/sessions/{quote(SCRIPT, safe='')}", f"/calls/{quote(IMG, safe='')}",
                 f"/sessions?feedback={quote(SCRIPT)}", f"/rows?session={sid}&kind={quote(IMG)}"]:  # fmt: skip
        response = page.goto(tab.base + path)
        assert response is not None and response.status in (400, 404), path
        assert page.locator("p.error").inner_text()
        _inert(tab)
    # every session a filter selects, labelled: the page names the hostile session as text
    tab.go(f"/sessions?model={model}")
    _inert(tab)
    tab.follow(page.locator("#curate-selection").get_by_role("button", name="good"))
    assert page.locator("h1").inner_text() == "Labelled 0 of 1 sessions"
    assert page.locator("ul li a").inner_text() == HOSTILE_SESSION  # its label is the script
    _inert(tab)
    tab.go(f"/sessions/{sid}")
    assert SCRIPT in page.locator("article.call").first.inner_text()  # shown, as text
    assert "more characters in the JSON twin" in page.locator(".clipped").first.inner_text()
    assert "window.__pwned" in page.locator(".toolcall .result pre").first.inner_text()
    tab.follow(page.locator("article.call").first.get_by_role("link", name="captures & raw"))
    _inert(tab)
    assert HOSTILE_SESSION in page.locator("a[data-back]").inner_text()
    # the session's own link, followed, names the same session
    tab.follow(page.locator("a[data-back]"))
    assert page.locator("h1").inner_text() == HOSTILE_SESSION
    _inert(tab)


def test_degradations_marked_on_their_parts(browser: Any, degraded_viewer: Running) -> None:
    with open_tab(browser, degraded_viewer) as tab:
        page = tab.page
        tab.go(f"/sessions/{DEGRADED_SESSION}")
        first = page.locator("article.call").first
        first_call = str(first.get_attribute("id"))[len("call-") :]
        mark = first.locator(".msg .partdeg a.deg", has_text="content_reference")
        assert mark.get_attribute("title", timeout=5000).startswith(
            DEGRADATION_REASONS["content_reference"]
        )
        # the mark sits on the file part it concerns, in the user's message
        assert "file-abc" in first.locator(".msg.role-user").inner_text()
        arguments = first.locator(".msg.role-assistant .partdeg", has_text="malformed_arguments")
        assert arguments.count() == 1
        assert SCRIPT in first.locator(".msg.role-user").inner_text()
        _inert(tab)
        tab.shot("degradations")
        tab.follow(mark)
        assert page.url.endswith("/sessions?degradation=content_reference")
        assert _sessions(tab) == [DEGRADED_SESSION]
        # the call page marks the same parts
        tab.go(f"/sessions/{DEGRADED_SESSION}")
        tab.follow(page.locator("article.call").nth(1).get_by_role("link", name="captures & raw"))
        assert page.locator(".conversation .partdeg", has_text="invalid_text").count() == 1
        tab.go("/calls/" + first_call)  # the element's id holds it percent-encoded
        assert "sunny " + IMG in page.locator(".conversation .toolcall .result").first.inner_text()
        _inert(tab)


WIDE = {"width": 2560, "height": 1440}


def test_readable_on_a_laptop_and_a_wide_screen(browser: Any, viewer: Running) -> None:
    """No page scrolls sideways, hostile 2 MB message and long ids included; on a wide screen
    the text column stays a readable width, centred, in a larger font."""
    sid = quote(HOSTILE_SESSION, safe="")
    pages = ["/", "/sessions", "/sessions/agent-1", f"/sessions/{sid}", "/calls/agent-1-a",
             "/rows?session=agent-1&kind=sft&profile=trl", "/export?model=gpt-4o"]  # fmt: skip
    for viewport in (LAPTOP, WIDE):
        with open_tab(browser, viewer, viewport) as tab:
            page = tab.page
            for path in pages:
                tab.go(path)
                sideways = page.evaluate(
                    "document.documentElement.scrollWidth - document.documentElement.clientWidth"
                )
                assert sideways <= 0, (viewport, path, sideways)
                box = page.locator("main").bounding_box()
                assert box is not None
                if viewport is WIDE:
                    assert box["width"] <= 1800 and box["x"] >= (2560 - 1800) / 2 - 20, path
                    size = page.evaluate("getComputedStyle(document.body).fontSize")
                    assert size == "15px"
                else:
                    assert box["width"] >= 1200, path  # a laptop's width is all used
            if viewport is WIDE:
                tab.go("/sessions/agent-1")
                tab.shot("session-wide")


def test_sign_in_beyond_loopback(browser: Any, store: FactStore) -> None:
    """Beyond loopback a browser signs in with a store token; a wrong one is refused."""
    token = new_token()
    store.create_token("alice", token_hash(token), token_prefix(token))
    with running(store, UiConfig(host="0.0.0.0")) as v, open_tab(browser, v) as tab:
        page = tab.page
        tab.go("/sessions/chat-2")
        assert page.url.endswith("/login")
        page.fill("input[name=token]", "lith_wrong")
        with page.expect_navigation():
            page.get_by_role("button", name="Sign in").click()
        assert page.locator(".error").count() == 1
        page.fill("input[name=token]", token)
        with page.expect_navigation():
            page.get_by_role("button", name="Sign in").click()
        assert "signed in as alice" in page.locator("header.top").inner_text()
        tab.go("/sessions/chat-2")
        tab.follow(page.locator(".session-curate").get_by_role("button", name="good"))
        assert page.locator(".session-curate .tag-good").inner_text() == "label: good"
        assert "alice" in page.locator(".session-curate .feedback").inner_text()
