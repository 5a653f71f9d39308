"""The viewer in a real browser: every page, filtering, a session read as a conversation,
curation that an export then honours, keyboard navigation, the dark theme, and hostile content
that stays text. With LITHIFY_UI_SCREENSHOTS=1 it writes the screenshots of docs/ui.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from lithify.export import ExportOptions, export, from_store
from lithify.model import DEGRADATION_REASONS
from lithify.store import FactFilter
from tests.export.helpers import read_rows
from tests.ui.conftest import (
    DEGRADED_SESSION,
    HOSTILE_SESSION,
    JS_URL,
    SCRIPT,
    Running,
    Tab,
    open_tab,
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
    assert "finish: tool_call" in first.locator(".callhead").inner_text()
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
    for path in ["/", "/sessions", f"/sessions?q={quote(SCRIPT)}", f"/rows?session={sid}",
                 f"/rows?session={sid}&kind=nemo-gym", f"/sessions/{sid}"]:  # fmt: skip
        tab.go(path)
        _inert(tab)
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
        mark = first.locator(".msg .partdeg a.deg", has_text="content_reference")
        assert mark.get_attribute("title", timeout=5000).startswith(
            DEGRADATION_REASONS["content_reference"]
        )
        # the mark sits on the file part it concerns, in the user's message
        assert "file-abc" in first.locator(".msg.role-user").inner_text()
        arguments = first.locator(".msg.role-assistant .partdeg", has_text="malformed_arguments")
        assert arguments.count() == 1
        tab.shot("degradations")
        tab.follow(mark)
        assert page.url.endswith("/sessions?degradation=content_reference")
        assert _sessions(tab) == [DEGRADED_SESSION]
        # the call page marks the same parts
        tab.go(f"/sessions/{DEGRADED_SESSION}")
        tab.follow(page.locator("article.call").nth(1).get_by_role("link", name="captures & raw"))
        assert page.locator(".conversation .partdeg", has_text="invalid_text").count() == 1
