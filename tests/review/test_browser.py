"""A real browser (Debian's chromium through Playwright) against a real uvicorn server and chDB store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ragtrace_review import auth
from ragtrace_review.queues import enqueue, list_decisions
from ragtrace_store import Store
from tests.browser import chromium

from .rows import HOSTILE

pytestmark = pytest.mark.browser


def test_login_label_three_by_keyboard_progress_logout(
        store: Store, tenant: str, seeded: Callable[..., list[dict[str, Any]]], live_url: str) -> None:
    seeded(["fabrication", "ok", "rank_inversion"], hostile=True)
    enqueue(store, "web", None, per_mode=5, reviewers=1, tenant=tenant)
    _, token = auth.add_reviewer(store, "gil", tenant=tenant)
    dialogs: list[str] = []

    with chromium() as browser:
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{live_url}/review/queues/web")
        assert "/review/login" in page.url  # anonymous: sent to the login page
        page.fill("#token", token)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_url}/review/queues/web")
        assert page.text_content("#mine") == "0"

        page.keyboard.press("Enter")  # start reviewing
        page.wait_for_selector("form#decision")
        # the hostile passage is text on the page, and ran nothing
        texts = page.locator(".passage-text").all_inner_texts()
        assert HOSTILE in texts
        assert page.evaluate("document.querySelectorAll('.passage-text script').length") == 0

        chosen = []
        # item 1: pick "under use" (key 3), mark the second claim contradicted (j, x), save (Enter)
        first = page.url
        page.keyboard.press("3")
        page.keyboard.press("j")
        page.keyboard.press("x")
        chosen.append("under_use")
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: url != first and "/items/" in url)
        assert page.text_content("#mine") == "1"
        # item 2: accept the labeller's proposal (c)
        second = page.url
        proposed = (page.text_content("#proposed-mode") or "").strip().replace(" ", "_")
        chosen.append(proposed)
        page.keyboard.press("c")
        page.wait_for_url(lambda url: url != second and "/items/" in url)
        assert page.text_content("#mine") == "2"
        # item 3: "ok" (key 5), write a note (/ ... Esc), save
        page.keyboard.press("5")
        page.keyboard.press("/")
        page.keyboard.type("looks fine")
        page.keyboard.press("Escape")
        chosen.append("ok")
        page.keyboard.press("Enter")
        page.wait_for_selector("text=Nothing left for you")
        assert page.text_content("#mine") == "3"
        assert page.text_content("#queue-decisions") == "3"

        page.click("#logout")
        page.wait_for_url(f"{live_url}/review/login")
        page.goto(f"{live_url}/review/")
        assert "/review/login" in page.url  # logged out for real

    assert dialogs == [], "a script from page content ran"
    decisions = list_decisions(store, tenant=tenant, queue="web")
    assert len(decisions) == 3
    by_time = sorted(decisions, key=lambda d: d.decided_at)
    assert [d.failure_mode for d in by_time] == chosen
    assert [c["verdict"] for c in by_time[0].claims] == ["entailed", "contradicted"]
    assert by_time[2].note == "looks fine"
    assert all(d.reviewer_name == "gil" for d in decisions)
