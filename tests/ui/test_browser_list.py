"""The session list's sort control in a real browser: choosing an order reloads the list in it,
the control keeps the choice, the next page link goes on in the same order, and each line shows
its segment count."""

from __future__ import annotations

from tests.ui.conftest import HOSTILE_SESSION, Tab


def _sessions(tab: Tab) -> list[str]:
    return tab.page.locator("#session-list tbody td.id a").all_inner_texts()


def test_sort_control_orders_the_list_and_pages_in_that_order(tab: Tab) -> None:
    page = tab.page
    tab.go("/sessions")
    assert _sessions(tab)[0] == HOSTILE_SESSION  # last activity first, the default
    assert page.locator("#sort").input_value() == "last"
    page.select_option("#sort", "calls")
    tab.follow(page.get_by_role("button", name="Filter"))
    assert "sort=calls" in page.url
    assert _sessions(tab)[0] == "agent-1"  # three calls
    assert page.locator("#sort").input_value() == "calls"
    row = page.locator("#session-list tbody tr", has_text="agent-1")
    assert row.locator("td.n").nth(1).inner_text() in ("2", "…")  # segments, or not yet

    page.select_option("#dir", "asc")
    tab.follow(page.get_by_role("button", name="Filter"))
    assert _sessions(tab)[-1] == "agent-1"  # fewest calls first
    assert page.locator("#dir").input_value() == "asc"

    # one session a page: the next page link keeps the order
    tab.go("/sessions?sort=calls&dir=desc&limit=1")
    seen = _sessions(tab)
    for _ in range(5):
        more = page.locator("a.more")
        if more.count() == 0:
            break
        tab.follow(more)
        assert "sort=calls" in page.url
        seen += _sessions(tab)
    assert seen[0] == "agent-1" and len(seen) == 4 and len(set(seen)) == 4
    # a later view has every count
    tab.go("/sessions?sort=calls")
    for _ in range(100):
        if "…" not in page.locator("#session-list tbody").inner_text():
            break
        page.wait_for_timeout(100)
        tab.go("/sessions?sort=calls")
    row = page.locator("#session-list tbody tr", has_text="agent-1")
    assert row.locator("td.n").nth(1).inner_text() == "2"
