"""/dashboard shows the periodic audits' drift verdicts and draws the anchor as a dashed reference line
on the failure-mode charts; a release name a sender chose is escaped wherever it appears."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ragtrace_evaluator.audit.periodic import judge_window
from ragtrace_review import auth
from ragtrace_review.web import mount
from ragtrace_store import Store
from ragtrace_store.anchors import set_anchor
from tests.browser import chromium
from tests.collector._server import running

from .rows import HOSTILE
from .test_web_view import HTML, MANIFEST, T0, login, put

ANCHOR_RELEASE = f"r0{HOSTILE}"


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="drift-test", admin_token=""))
    with TestClient(app, follow_redirects=False) as c:
        yield c


def test_drift_table_and_anchor_line(store: Store, tenant: str, client: TestClient) -> None:
    # the anchor: 100 traces a week before, 10 % fabrication; the window: 100 traces, 40 %
    for i in range(100):
        put(store, tenant, f"{tenant}-a{i}", when=T0 - timedelta(days=7, minutes=i), release=ANCHOR_RELEASE,
            mode="fabrication" if i < 10 else "ok", generation="contradicted" if i < 10 else "entailed")
        put(store, tenant, f"{tenant}-w{i}", when=T0 + timedelta(seconds=30 * i), release="r1",
            mode="fabrication" if i < 40 else "ok", generation="contradicted" if i < 40 else "entailed")
    set_anchor(store, tenant=tenant, service="svc", release=ANCHOR_RELEASE)
    judge_window(store, tenant=tenant, manifest_id=MANIFEST, start=T0, end=T0 + timedelta(hours=1))
    _, token = auth.add_reviewer(store, "dana-" + os.urandom(2).hex(), tenant=tenant)
    login(client, token, "/dashboard")

    page = client.get("/dashboard", params={"manifest": MANIFEST, "service": "svc"}, headers=HTML)
    assert page.status_code == 200, page.text[:500]
    html = page.text
    assert HOSTILE not in html and "&lt;script&gt;" in html  # escaped in the table, legend and line titles
    drift = html[html.index('id="drift"'):html.index("</section>", html.index('id="drift"'))]
    rows = re.findall(r"<tr class=\"([\w-]+)\">\s*<td>svc</td><td>fabrication</td><td>(\w+)</td>", drift)
    assert ("worse", "anchor") in rows, rows  # 40 % against the anchor's 10 %
    assert ("undefined", "previous") in rows  # the first window has no previous one
    assert "at most 5.0%" in drift and "Bonferroni" in drift
    panel = html[html.index('id="panel-mode-fabrication"'):]
    line = re.search(r'<g class="reference"><title>([^<]+)</title><line [^>]*y1="([\d.]+)"', panel)
    assert line is not None and "anchor of service svc: release r0&lt;script&gt;" in line.group(1)
    assert "10/100 = 10.0%" in line.group(1)

    # without a service filter the service's own anchor is still drawn; another tenant sees none of it
    other = client.get("/dashboard", params={"manifest": MANIFEST}, headers=HTML).text
    assert '<g class="reference">' in other


@pytest.mark.browser
def test_drift_and_anchor_in_a_real_browser(store: Store, tenant: str, tmp_path: Path) -> None:
    """Chromium under the page's Content-Security-Policy: the drift table and the dashed anchor line
    render, nothing is refused (a CSP violation is a console error), the hostile release runs nothing."""
    for i in range(60):
        put(store, tenant, f"{tenant}-a{i}", when=T0 - timedelta(days=7, minutes=i), release=ANCHOR_RELEASE,
            mode="fabrication" if i < 6 else "ok", generation="contradicted" if i < 6 else "entailed")
        put(store, tenant, f"{tenant}-w{i}", when=T0 + timedelta(seconds=30 * i), release="r1",
            mode="fabrication" if i < 30 else "ok", generation="contradicted" if i < 30 else "entailed")
    set_anchor(store, tenant=tenant, service="svc", release=ANCHOR_RELEASE)
    judge_window(store, tenant=tenant, manifest_id=MANIFEST, start=T0, end=T0 + timedelta(hours=1))
    _, token = auth.add_reviewer(store, "eve-" + os.urandom(2).hex(), tenant=tenant)
    problems: list[str] = []
    dialogs: list[str] = []
    with running(store, str(tmp_path / "spool"), review_secret="drift-browser") as (base, _app), \
            chromium() as browser:
        try:
            page = browser.new_page()
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(f"{base}/dashboard?manifest={MANIFEST}&service=svc")
            page.fill("#token", token)
            page.keyboard.press("Enter")
            page.wait_for_selector("#panel-mode-fabrication svg")
            worse = page.locator("#drift tbody tr.worse")
            assert worse.count() >= 1 and "fabrication" in worse.first.inner_text()
            line = page.locator("#panel-mode-fabrication g.reference line")
            assert line.count() == 1
            box = line.bounding_box()
            assert box is not None and box["width"] > 400  # drawn across the chart
            assert page.evaluate("getComputedStyle(document.querySelector("
                                 "'#panel-mode-fabrication g.reference line')).strokeDasharray") != "none"
            assert HOSTILE in page.inner_text("#anchors")  # shown as text
            assert page.evaluate("document.querySelectorAll('main script').length") == 0
        finally:
            browser.close()
    assert dialogs == [] and problems == []
