"""The web view in a real browser: Debian's chromium (Playwright) against the real `ragtrace serve`
app (`build_app`, uvicorn on loopback) over the shared chDB store.

Log in, filter /traces to fabrication in the candidate release, open a trace, see its claims and
follow one to its evidence passage, then follow a dashboard point to the traces behind it; no
console error on the way, and the hostile passage is shown as text and runs nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ragtrace_review import auth
from ragtrace_store import Store
from tests.browser import chromium
from tests.collector._server import running

from .rows import HOSTILE, SAMPLE_CLAIMS, label_record, sample_trace, write_labels, write_trace

pytestmark = pytest.mark.browser


def _seed(store: Store, tenant: str) -> dict[str, list[str]]:
    """A baseline r1 and a candidate r2; every trace's context holds the hostile passage."""
    plan = {"r1": ["ok", "ok", "fabrication"], "r2": ["fabrication", "fabrication", "under_use"]}
    by_release: dict[str, list[str]] = {}
    records = []
    for release, modes in plan.items():
        for i, mode in enumerate(modes):
            tid = f"{tenant}-{release}-{i}"
            write_trace(store, tenant, sample_trace(tid, hostile=True), release=release)
            rec = label_record(tid, mode, claims=SAMPLE_CLAIMS, query_id=f"q-{i}", manifest_id="m-browser")
            rec["release"] = release
            records.append(rec)
            if mode == "fabrication":
                by_release.setdefault(release, []).append(tid)
    write_labels(store, tenant, records)
    return by_release


def test_filter_open_a_trace_follow_its_evidence_and_a_dashboard_point(
        store: Store, tenant: str, tmp_path: Path) -> None:
    fabricated = _seed(store, tenant)
    _, token = auth.add_reviewer(store, "bea", tenant=tenant)
    problems: list[str] = []
    dialogs: list[str] = []

    with running(store, str(tmp_path / "spool"), review_secret="web-browser") as (base, _app), \
            chromium() as browser:
        try:
            page = browser.new_page()
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

            page.goto(f"{base}/traces")
            assert "/review/login" in page.url  # anonymous: sent to the login page, and back after it
            page.fill("#token", token)
            page.keyboard.press("Enter")
            page.wait_for_url(f"{base}/traces")

            # fabrication in the candidate release
            page.select_option("select[name=release]", "r2")
            page.select_option("#f-mode", "fabrication")
            page.click("#apply")
            page.wait_for_url(re.compile(r".*mode=fabrication.*"))
            rows = page.locator("#trace-list tbody tr")
            assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.trace)")) == sorted(fabricated["r2"])
            assert set(page.locator("#trace-list .mode").all_inner_texts()) == {"fabrication"}
            assert page.text_content("#total") == str(len(fabricated["r2"]))

            # open one: its claims, each marked by verdict, and the evidence passage one links to
            page.click("#trace-list a.trace-link >> nth=0")
            page.wait_for_selector("#trace-id")
            claims = page.locator("li.claim")
            assert claims.count() == 2
            assert "verdict-entailed" in (claims.nth(0).get_attribute("class") or "")
            assert "verdict-neutral" in (claims.nth(1).get_attribute("class") or "")
            page.click("li.claim >> nth=0 >> a.evidence")
            page.wait_for_url(re.compile(r".*#passage-1$"))
            assert page.evaluate("document.querySelector(':target').id") == "passage-1"
            assert page.inner_text("#passage-1 .passage-text") == "Paris is the capital of France."
            # the hostile passage is text on the page, and ran nothing
            assert HOSTILE in page.locator(".passage-text").all_inner_texts()
            assert page.evaluate("document.querySelectorAll('main script').length") == 0

            # the dashboard: the candidate's fabrication point leads to exactly its traces
            page.click("header nav >> text=Dashboard")
            page.wait_for_selector("#panel-mode-fabrication svg")
            points = page.locator("#panel-mode-fabrication a.point")
            titles: list[Any] = points.evaluate_all("ps => ps.map(p => p.querySelector('title').textContent)")
            assert len(titles) == 2 and any(t.startswith("r1 ") for t in titles)
            r2 = next(i for i, t in enumerate(titles) if t.startswith("r2 "))
            assert "fabrication 2/3" in titles[r2] and "95% CI" in titles[r2] and "n=3" in titles[r2]
            points.nth(r2).click()
            page.wait_for_url(re.compile(r".*/traces\?.*mode=fabrication.*"))
            assert sorted(page.locator("#trace-list tbody tr").evaluate_all(
                "rs => rs.map(r => r.dataset.trace)")) == sorted(fabricated["r2"])
        finally:
            browser.close()

    assert dialogs == [], "a script from page content ran"
    assert problems == []
