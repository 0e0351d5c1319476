"""The team's web view (/traces, /traces/{trace_id}, /dashboard) over HTTP (FastAPI TestClient) on the
real chDB store: authentication on every route, tenants, the viewer role, filters, paging, the trace
page, the dashboard's numbers against a plain recomputation, and escaping."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from ragtrace_review import auth
from ragtrace_review.agreement import wilson
from ragtrace_review.errors import ReviewError
from ragtrace_review.explorer.series import dashboard_series
from ragtrace_review.explorer.trace_list import TraceListQuery, list_traces
from ragtrace_review.queues import enqueue, get_item, list_decisions, list_items, queue_names
from ragtrace_review.web import SESSION_COOKIE, mount
from ragtrace_store import FAILURE_MODES, LABEL_COLUMNS, LabelRecord, Store, label_row
from ragtrace_store.compare_reports import latest_compare_report, save_compare_report

from .rows import HOSTILE, SAMPLE_CLAIMS, label_record, sample_trace, write_trace

HTML = {"accept": "text/html"}
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
MANIFEST = "m-web"


@pytest.fixture
def app(store: Store) -> FastAPI:
    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="web-test", admin_token="adm-secret"))
    return app


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as c:
        yield c


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert m, "page has no CSRF field"
    return m.group(1)


def login(client: TestClient, token: str, target: str = "/traces") -> str:
    """Log in through the form, asking to come back to ``target``; returns the pages' CSRF token."""
    page = client.get("/review/login")
    r = client.post("/review/login", data={"token": token, "csrf_token": _csrf(page.text), "next": target})
    assert r.status_code == 303 and r.headers["location"] == target, r.text
    landing = client.get(target, headers=HTML)
    assert landing.status_code == 200, landing.text[:500]
    return _csrf(landing.text)


def put(store: Store, tenant: str, trace_id: str, *, when: datetime, release: str = "r1", service: str = "svc",
        route: str = "/ask", query: str = "What is it?", mode: str | None = "ok", confidence: float | None = 0.9,
        generation: str = "entailed", groundedness: float | None = 0.5, gold_in_context: bool | None = True,
        manifest: str = MANIFEST, root_priority: int = 0, span_id: str = "root", received: datetime | None = None,
        labelled_at: datetime | None = None, root: bool = True) -> None:
    """One trace's queries row (unless not ``root``: a re-label) and (when ``mode``) its label, at
    ``when``; ``received`` and ``labelled_at`` (default ``when``) version a retried row / a re-label."""
    if root:
        store.insert("queries", [(tenant, trace_id, span_id, f"q-{trace_id}", service, release, "test", route, query,
                                  "an answer", False, "OK", when, 5.0, root_priority, received or when)],
                     ["tenant", "trace_id", "span_id", "query_id", "service", "release", "environment", "route",
                      "query", "answer", "answer_streamed", "status_code", "start_time", "duration_ms",
                      "root_priority", "received_at"])
    if mode is None:
        return
    rec = label_record(trace_id, mode, confidence=confidence or 0.0, manifest_id=manifest, query_id=f"q-{trace_id}")
    rec.update(release=release, service=service, confidence=confidence, gold_in_context=gold_in_context)
    rec["retrieval"]["gold_in_context"] = gold_in_context
    rec["generation"].update(verdict=generation, groundedness=groundedness, abstained=generation == "abstained")
    store.insert("labels", [(tenant, manifest, trace_id, rec["query_id"], service, release, mode, rec["gold_in_pool"],
                             gold_in_context, True, generation, rec["pass"], rec["score"], confidence, json.dumps(rec),
                             when, labelled_at or when)],
                 ["tenant", "manifest_id", "trace_id", "query_id", "service", "release", "failure_mode", "gold_in_pool",
                  "gold_in_context", "ranking_ok", "generation", "passed", "score", "confidence", "detail",
                  "trace_time", "labelled_at"])


def _ids(html: str) -> list[str]:
    return re.findall(r'<tr data-trace="([^"]+)">', html)


# --- authentication, tenants, roles ---------------------------------------------------------------------
def _web_routes(app: FastAPI) -> list[APIRoute]:
    return [r for r in app.routes if isinstance(r, APIRoute) and r.path.startswith(("/traces", "/dashboard"))]


def test_every_web_route_wants_a_login(app: FastAPI, client: TestClient, store: Store, tenant: str) -> None:
    routes = _web_routes(app)
    assert {r.path for r in routes} == {"/traces", "/traces/{trace_id}", "/traces/{trace_id}/queue", "/dashboard"}
    for route in routes:
        path = route.path.replace("{trace_id}", "t1")
        for method in route.methods:
            r = client.request(method, path)
            assert r.status_code == 401, (method, path, r.status_code)
            assert r.headers["www-authenticate"].startswith("Bearer")
            if method == "GET":
                r = client.get(path + "?mode=ok", headers=HTML)
                assert r.status_code == 303, path
                assert r.headers["location"] == f"/review/login?next={path}%3Fmode%3Dok"
    # a forged cookie or an unknown bearer token is anonymous too
    assert client.get("/traces", headers={"authorization": "Bearer rtr_nope"}).status_code == 401
    client.cookies.set(SESSION_COOKIE, "abc.def", path="/")
    assert client.get("/dashboard").status_code == 401


def test_the_login_sends_you_back_and_its_cookie_opens_every_page(client: TestClient, store: Store,
                                                                   tenant: str) -> None:
    _, token = auth.add_reviewer(store, "wes", tenant=tenant)
    page = client.get("/review/login?next=/dashboard")
    assert 'name="next" value="/dashboard"' in page.text
    r = client.post("/review/login", data={"token": token, "csrf_token": _csrf(page.text),
                                           "next": "/traces?mode=fabrication"})
    assert r.status_code == 303 and r.headers["location"] == "/traces?mode=fabrication"
    cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith(SESSION_COOKIE))
    assert "Path=/;" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    for path in ("/traces", "/dashboard", "/review/"):
        assert client.get(path, headers=HTML).status_code == 200, path
    # only same-site pages are login targets (an open redirect would be a phishing aid)
    for evil in ("//evil.example/traces", "/tracesevil", "https://evil.example/", "/traces\\@evil"):
        page = client.get("/review/login")
        fresh = client.post("/review/login", data={"token": token, "csrf_token": _csrf(page.text), "next": evil})
        assert fresh.headers["location"] == "/review/", evil


def test_tenants_see_only_their_own_traces(client: TestClient, store: Store, tenant: str) -> None:
    other = f"{tenant}-b"
    put(store, tenant, f"{tenant}-mine", when=T0, release="r-mine", query="my question")
    put(store, other, f"{other}-secret", when=T0, release="r-secret", query="their secret question", mode="fabrication")
    save_compare_report(store, {"gates": [{"metric": "secret_metric"}], "tripped": True}, tenant=other,
                        baseline="x", candidate="y")
    _, token = auth.add_reviewer(store, "ivo", tenant=tenant)
    csrf = login(client, token)
    listing = client.get("/traces", headers=HTML).text
    assert _ids(listing) == [f"{tenant}-mine"] and "r-secret" not in listing and "secret" not in listing
    assert client.get(f"/traces/{other}-secret", headers=HTML).status_code == 404
    r = client.post(f"/traces/{other}-secret/queue", data={"csrf_token": csrf, "new_queue": "steal"})
    assert r.status_code == 404 and "steal" not in queue_names(store, tenant=tenant)
    assert "steal" not in queue_names(store, tenant=other)
    dash = client.get("/dashboard", headers=HTML).text
    assert "r-mine" in dash and "r-secret" not in dash and "secret_metric" not in dash


def test_a_viewer_reads_but_cannot_review_or_queue(client: TestClient, store: Store, tenant: str,
                                                    seeded: Callable[..., list[dict[str, Any]]]) -> None:
    records = seeded(["fabrication", "ok"])
    enqueue(store, "vq", None, per_mode=5, reviewers=1, tenant=tenant)
    viewer, token = auth.add_reviewer(store, "val", tenant=tenant, role=auth.ROLE_VIEWER)
    assert viewer.role == "viewer" and not viewer.can_review
    csrf = login(client, token)
    trace_id = records[0]["trace_id"]
    page = client.get(f"/traces/{trace_id}", headers=HTML)
    assert page.status_code == 200 and 'id="enqueue"' not in page.text and "You are a viewer" in page.text
    assert client.get("/dashboard", headers=HTML).status_code == 200
    assert client.get("/review/queues/vq", headers=HTML).status_code == 200  # progress is readable
    # no assignment, no decision, no queueing — whatever the viewer posts
    assert client.get("/review/queues/vq/next", headers=HTML).status_code == 403
    item = f"/review/queues/vq/items/{trace_id}"
    form = {"csrf_token": csrf, "failure_mode": "ok", "claim_0": "entailed", "claim_1": "neutral"}
    assert client.get(item, headers=HTML).status_code == 403
    assert client.post(item, data=form).status_code == 403
    assert list_decisions(store, tenant=tenant, queue="vq") == []
    before = len(list_items(store, tenant=tenant, queue="vq"))
    r = client.post(f"/traces/{trace_id}/queue", data={"csrf_token": csrf, "new_queue": "viewer-q"})
    assert r.status_code == 403 and "viewer-q" not in queue_names(store, tenant=tenant)
    bearer = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    assert client.post("/review/api/queues/vq/enqueue", content=b"{}", headers=bearer).status_code == 403
    assert client.post("/review/api/queues/vq/gold", headers=bearer).status_code == 403
    assert len(list_items(store, tenant=tenant, queue="vq")) == before
    # disabling and enabling a viewer keeps the role (the row is rewritten with it)
    auth.set_disabled(store, viewer)
    auth.set_disabled(store, auth.find_reviewer(store, "val", tenant=tenant), False)
    assert auth.find_reviewer(store, "val", tenant=tenant).role == "viewer"
    assert auth.reviewer_for_token(store, token).role == "viewer"  # type: ignore[union-attr]


def test_viewer_role_from_the_cli_and_the_admin_api(client: TestClient, store: Store, tenant: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from ragtrace_cli.commands.review import reviewers_main

    assert reviewers_main(["add", "cli-viewer", "--role", "viewer", "--tenant", tenant], store=store) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1]
    assert auth.reviewer_for_token(store, token).role == "viewer"  # type: ignore[union-attr]
    assert reviewers_main(["add", "cli-rev", "--tenant", tenant], store=store) == 0
    assert reviewers_main(["list", "--json", "--tenant", tenant], store=store) == 0
    listed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {r["name"]: r["role"] for r in listed} == {"cli-viewer": "viewer", "cli-rev": "reviewer"}
    with pytest.raises(SystemExit):
        reviewers_main(["add", "x", "--role", "admin", "--tenant", tenant], store=store)
    with pytest.raises(ReviewError, match="invalid role"):
        auth.add_reviewer(store, "y", tenant=tenant, role="admin")
    admin = {"authorization": "Bearer adm-secret", "content-type": "application/json"}
    r = client.post("/api/reviewers", content=json.dumps({"name": "api-viewer", "role": "viewer"}), headers=admin)
    assert r.status_code == 200 and r.json()["role"] == "viewer"
    r = client.post("/api/reviewers", content=json.dumps({"name": "api-bad", "role": "root"}), headers=admin)
    assert r.status_code == 400 and "invalid role" in r.json()["error"]


# --- /traces ------------------------------------------------------------------------------------------
@pytest.fixture
def listing(store: Store, tenant: str) -> list[dict[str, Any]]:
    """12 traces over 12 hours: releases r1/r2, modes cycling, confidences with ties and a NULL."""
    rows = []
    for i in range(12):
        row = dict(trace_id=f"{tenant}-{i:02d}", when=T0 + timedelta(hours=i), release="r1" if i % 2 else "r2",
                   query=f"Question {i} about {'Paris' if i % 3 == 0 else 'Lyon'}",
                   mode=FAILURE_MODES[i % len(FAILURE_MODES)],
                   confidence=None if i == 5 else round(0.1 * (i % 4), 1),
                   gold_in_context=None if i == 7 else i % 2 == 0,
                   generation="abstained" if i in (3, 8) else "entailed")
        put(store, tenant, **row, groundedness=None if row["generation"] == "abstained" else 0.25 * (i % 5))
        rows.append(row)
    put(store, tenant, f"{tenant}-unlabelled", when=T0 + timedelta(hours=20), mode=None, query="no label yet")
    return rows


def _page(store: Store, tenant: str, **kw: Any) -> list[str]:
    """Every trace id of every page, following the cursor."""
    out: list[str] = []
    totals: set[int] = set()
    cursor = None
    while True:
        page = list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, cursor=cursor, limit=5, **kw))
        out += [r.trace_id for r in page.rows]
        totals.add(page.total)
        if page.next_cursor is None:
            # every page states the same total, and it is what the pages held
            assert totals == {len(out)} and len(out) == len(set(out))
            return out
        assert len(page.rows) == 5
        cursor = page.next_cursor


def test_filters_match_a_plain_recomputation(store: Store, tenant: str, listing: list[dict[str, Any]]) -> None:
    def expect(pred: Callable[[dict[str, Any]], bool]) -> list[str]:
        return [r["trace_id"] for r in sorted(listing, key=lambda r: r["when"], reverse=True) if pred(r)]

    everything = _page(store, tenant)
    assert everything == [f"{tenant}-unlabelled", *expect(lambda r: True)]
    assert _page(store, tenant, release="r2", mode="fabrication") == expect(
        lambda r: r["release"] == "r2" and r["mode"] == "fabrication")
    assert _page(store, tenant, text="PARIS") == expect(lambda r: "Paris" in r["query"])
    assert _page(store, tenant, generation="abstained") == expect(lambda r: r["generation"] == "abstained")
    assert _page(store, tenant, gold_in_context="unknown") == expect(lambda r: r["gold_in_context"] is None)
    assert _page(store, tenant, gold_in_context="no") == expect(lambda r: r["gold_in_context"] is False)
    since, until = T0 + timedelta(hours=3), T0 + timedelta(hours=7)
    assert _page(store, tenant, since=since, until=until) == expect(lambda r: since <= r["when"] < until)
    assert _page(store, tenant, descending=False)[:3] == expect(lambda r: True)[::-1][:3]
    page = list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, mode="ok"))
    assert page.total == len(expect(lambda r: r["mode"] == "ok"))
    row = next(r for r in page.rows if r.trace_id == f"{tenant}-04")
    assert (row.failure_mode, row.confidence, row.gold_in_context, row.groundedness) == ("ok", 0.0, True, 1.0)
    abstained = list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, generation="abstained")).rows
    assert all(r.groundedness is None and r.generation == "abstained" for r in abstained)  # undefined, not 0


def test_sorting_by_confidence_pages_through_every_labelled_trace_once(
        store: Store, tenant: str, listing: list[dict[str, Any]]) -> None:
    labelled = list(listing)  # the unlabelled trace has no confidence to sort by: not listed
    asc = sorted(labelled, key=lambda r: (r["confidence"] is None, r["confidence"] or 0, r["trace_id"]))
    assert _page(store, tenant, sort="confidence", descending=False) == [r["trace_id"] for r in asc]
    desc = sorted((r for r in labelled if r["confidence"] is not None),
                  key=lambda r: (r["confidence"], r["trace_id"]), reverse=True)
    got = _page(store, tenant, sort="confidence", descending=True)
    assert got == [r["trace_id"] for r in desc] + [f"{tenant}-05"]  # no confidence: last either way
    # a cursor of one order is refused by another, and a forged one is refused
    first = list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, limit=2, sort="confidence",
                                              descending=False))
    with pytest.raises(ReviewError, match="another sort order"):
        list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, cursor=first.next_cursor))
    with pytest.raises(ReviewError, match="not valid"):
        list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, cursor="bm9wZQ"))


def test_a_trace_with_several_root_rows_is_listed_once_by_its_winning_row(store: Store, tenant: str) -> None:
    """Root rows that lose (an HTTP server span above the SDK's root, priority 1) must neither place
    nor filter a trace, however many of them sort first. Merges are held off so the losing rows stay
    (a merge would collapse them, and the listing must be right before it happens)."""
    store.command(f"SYSTEM STOP MERGES {store.table('queries')}")
    try:
        _several_root_rows(store, tenant)
    finally:
        store.command(f"SYSTEM START MERGES {store.table('queries')}")


def _several_root_rows(store: Store, tenant: str) -> None:
    for i in range(30):
        tid = f"{tenant}-w{i:02d}"
        # the SDK's root (wins): release r1 at T0 + i minutes; a losing HTTP root: r2, hours later
        put(store, tenant, tid, when=T0 + timedelta(minutes=i), release="r1", root_priority=3, span_id="sdk",
            query=f"sdk question {i}")
        put(store, tenant, tid, when=T0 + timedelta(hours=5, minutes=i), release="r2", root_priority=1,
            span_id="http", mode=None, query="GET /ask")
    # traces with one root only, newer than every winning row above and older than every losing one
    for j in range(10):
        put(store, tenant, f"{tenant}-x{j}", when=T0 + timedelta(hours=2, minutes=j), release="r1", root_priority=3)
    rows = store.query_rows(f"SELECT count() FROM {store.table('queries')} WHERE tenant = {{t:String}}", {"t": tenant})
    assert rows[0][0] == 70  # every losing row is still there
    want = [f"{tenant}-x{j}" for j in reversed(range(10))] + [f"{tenant}-w{i:02d}" for i in reversed(range(30))]
    assert _page(store, tenant) == want
    assert _page(store, tenant, release="r2") == []  # only losing rows say r2
    assert _page(store, tenant, text="GET /ask") == []
    assert _page(store, tenant, descending=False) == want[::-1]
    page = list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, limit=3, text="sdk question"))
    assert [(r.release, r.query) for r in page.rows] == [("r1", "sdk question 29"), ("r1", "sdk question 28"),
                                                         ("r1", "sdk question 27")]
    assert page.total == 30


def test_duplicates_in_unmerged_parts_list_and_chart_as_final_would(store: Store, tenant: str) -> None:
    """A retried root (the same row again, received later), a losing HTTP root and re-labelled traces
    (a newer label version) sit in parts of their own, unmerged: the /traces totals, the
    confidence-sorted page and the dashboard series count each trace once, by its winning root row
    and its newest label, and say what `FINAL` says (read here only as the oracle)."""
    tables = (store.table("queries"), store.table("labels"))
    for table in tables:
        store.command(f"SYSTEM STOP MERGES {table}")
    try:
        _duplicates(store, tenant)
    finally:
        for table in tables:
            store.command(f"SYSTEM START MERGES {table}")


def _duplicates(store: Store, tenant: str) -> None:
    tid = [f"{tenant}-{i}" for i in range(8)]
    for i in range(8):
        put(store, tenant, tid[i], when=T0 + timedelta(hours=i), release="r1" if i < 4 else "r2",
            mode="fabrication" if i == 5 else "ok", confidence=round(0.1 * (i + 1), 1), root_priority=3,
            span_id="sdk", query=f"question {i}")
    # trace 0's root again, received a minute later (a retried batch); an HTTP root above trace 1's,
    # in r2 and six hours later (it loses to the SDK's)
    put(store, tenant, tid[0], when=T0, root_priority=3, span_id="sdk", query="question 0",
        received=T0 + timedelta(minutes=1), mode=None)
    put(store, tenant, tid[1], when=T0 + timedelta(hours=6), release="r2", root_priority=1, span_id="http",
        query="GET /ask", mode=None)
    # re-labelled a day later: trace 2 ok -> fabrication, trace 5 fabrication -> ok
    relabelled = T0 + timedelta(days=1)
    put(store, tenant, tid[2], when=T0 + timedelta(hours=2), root=False, labelled_at=relabelled, mode="fabrication",
        confidence=0.05, gold_in_context=False, groundedness=0.0, generation="contradicted")
    put(store, tenant, tid[5], when=T0 + timedelta(hours=5), release="r2", root=False, labelled_at=relabelled,
        mode="ok", confidence=0.95)
    t = {"t": tenant, "m": MANIFEST}
    assert store.query_rows(f"SELECT count() FROM {store.table('queries')} WHERE tenant = {{t:String}}", t) == [(10,)]
    assert store.query_rows(f"SELECT count() FROM {store.table('labels')} WHERE tenant = {{t:String}}", t) == [(10,)]

    def total(**kw: Any) -> int:
        return list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, **kw)).total

    everything = list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST))
    assert [r.trace_id for r in everything.rows] == tid[::-1] and everything.total == 8
    assert store.query_rows(f"SELECT count() FROM {store.table('queries')} FINAL WHERE tenant = {{t:String}}",
                            t) == [(8,)]
    assert (total(release="r1"), total(release="r2"), total(text="question"), total(text="GET")) == (4, 4, 8, 0)
    assert total(since=T0 + timedelta(hours=5), until=T0 + timedelta(hours=7)) == 2  # not trace 1's HTTP root
    assert (total(mode="fabrication"), total(mode="ok"), total(release="r2", mode="ok")) == (1, 7, 4)
    assert [r.trace_id for r in list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST,
                                                                  mode="fabrication")).rows] == [tid[2]]

    by_confidence = [tid[i] for i in (2, 0, 1, 3, 4, 6, 7, 5)]
    assert _page(store, tenant, sort="confidence", descending=False) == by_confidence
    assert _page(store, tenant, sort="confidence", descending=True) == by_confidence[::-1]
    assert store.query_rows(f"SELECT trace_id FROM {store.table('labels')} FINAL WHERE tenant = {{t:String}} "
                            "AND manifest_id = {m:String} ORDER BY confidence", t) == [(i,) for i in by_confidence]
    page = list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, sort="confidence",
                                             descending=False, release="r2"))
    assert [r.trace_id for r in page.rows] == [tid[i] for i in (4, 6, 7, 5)] and page.total == 4
    assert page.rows[-1].confidence == 0.95 and page.rows[-1].failure_mode == "ok"
    fab = list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, sort="confidence", mode="fabrication"))
    assert [(r.trace_id, r.confidence) for r in fab.rows] == [(tid[2], 0.05)] and fab.total == 1

    series = dashboard_series(store, tenant=tenant, manifest_id=MANIFEST, bucket="day")
    got = [(b.release, b.n, b.modes["fabrication"].k, b.modes["ok"].k, b.gold_in_context.k, b.gold_in_context.n,
            b.groundedness.value) for b in series.buckets]
    assert got == [("r1", 4, 1, 3, 3, 4, pytest.approx(0.375)), ("r2", 4, 0, 4, 4, 4, pytest.approx(0.5))]
    oracle = store.query_rows(
        "SELECT release, count(), countIf(failure_mode = 'fabrication'), countIf(failure_mode = 'ok'), "
        f"countIf(gold_in_context), count(gold_in_context), avg(groundedness) FROM {store.table('labels')} FINAL "
        "WHERE tenant = {t:String} AND manifest_id = {m:String} GROUP BY release ORDER BY release", t)
    assert got == [tuple(r) for r in oracle]


def test_the_traces_page_over_http(client: TestClient, store: Store, tenant: str,
                                   listing: list[dict[str, Any]]) -> None:
    _, token = auth.add_reviewer(store, "tia", tenant=tenant)
    login(client, token)
    page = client.get("/traces?release=r2&mode=fabrication", headers=HTML)
    assert page.status_code == 200
    want = [r["trace_id"] for r in sorted(listing, key=lambda r: r["when"], reverse=True)
            if r["release"] == "r2" and r["mode"] == "fabrication"]
    assert _ids(page.text) == want and f'<strong id="total">{len(want)}</strong>' in page.text
    assert f'href="/traces/{want[0]}"' in page.text
    # paging through the links the page itself gives
    seen, url = [], "/traces?limit=5&sort=confidence&order=asc"
    while url:
        html = client.get(url, headers=HTML).text
        seen += _ids(html)
        m = re.search(r'<a href="([^"]+)" id="next-page">', html)
        url = m.group(1).replace("&amp;", "&") if m else ""
    assert sorted(seen) == sorted(r["trace_id"] for r in listing) and len(seen) == len(set(seen))
    # bad input is a 400 with the reason, never a 500
    for bad, reason in (("sort=size", "sort"), ("mode=boring", "failure mode"),
                        ("since=yesterday", "since &#39;yesterday&#39;: give an ISO time"),
                        ("limit=0", "limit"), ("cursor=%25%25", "cursor"), ("incomplete=maybe", "incomplete")):
        r = client.get(f"/traces?{bad}", headers=HTML)
        assert r.status_code == 400 and reason in r.text, bad


def put_incomplete(store: Store, tenant: str, trace_id: str, *, when: datetime, release: str = "r1") -> None:
    """A trace the audit found incomplete: its queries row and its label of outcome ``incomplete``."""
    put(store, tenant, trace_id, when=when, release=release, mode=None)
    rec = LabelRecord.incomplete(trace_id=trace_id, query_id=f"q-{trace_id}", release=release, service="svc",
                                 manifest_id=MANIFEST, reasons=["dropped_attributes: span rerank lost 12"])
    store.insert("labels", [label_row(rec, tenant=tenant, trace_time=when, labelled_at=when)], LABEL_COLUMNS)


def test_incomplete_traces_are_their_own_outcome_everywhere(client: TestClient, store: Store, tenant: str) -> None:
    for i in range(4):
        put(store, tenant, f"{tenant}-c{i}", when=T0 + timedelta(minutes=i), mode="fabrication" if i else "ok")
    put_incomplete(store, tenant, f"{tenant}-inc", when=T0 + timedelta(minutes=9))
    got = list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, incomplete=True))
    assert [r.trace_id for r in got.rows] == [f"{tenant}-inc"] and got.rows[0].failure_mode == "incomplete"
    complete = list_traces(store, TraceListQuery(tenant=tenant, manifest_id=MANIFEST, incomplete=False))
    assert [r.trace_id for r in complete.rows] == [f"{tenant}-c{i}" for i in (3, 2, 1, 0)]
    # the dashboard: modes are shares of the complete traces, the incomplete share is its own panel
    (b,) = dashboard_series(store, tenant=tenant, manifest_id=MANIFEST).buckets
    assert (b.n, b.modes["fabrication"].k, b.modes["fabrication"].n) == (5, 3, 4)
    assert (b.incomplete.k, b.incomplete.n) == (1, 5)
    _, token = auth.add_reviewer(store, "ina", tenant=tenant)
    csrf = login(client, token, "/dashboard")
    dash = client.get("/dashboard", headers=HTML).text
    (href,) = re.findall(r'id="panel-incomplete".*?<a class="point" href="([^"]+)"', dash, re.S)
    assert "incomplete=yes" in href and _ids(client.get(href.replace("&amp;", "&"), headers=HTML).text) == [
        f"{tenant}-inc"]
    page = client.get(f"/traces/{tenant}-inc", headers=HTML).text
    assert 'id="trace-mode">incomplete' in page and "dropped_attributes: span rerank lost 12" in page
    assert '<button type="submit" id="enqueue-button" disabled>' in page
    r = client.post(f"/traces/{tenant}-inc/queue", data={"csrf_token": csrf, "new_queue": "inc-q"})
    assert r.status_code == 400 and "incomplete" in r.text and "inc-q" not in queue_names(store, tenant=tenant)


# --- /traces/{trace_id} ---------------------------------------------------------------------------------
def test_the_trace_page_shows_the_whole_query_and_queues_it(client: TestClient, store: Store, tenant: str) -> None:
    tid = f"{tenant}-full"
    write_trace(store, tenant, sample_trace(tid, hostile=True))
    rec = label_record(tid, "fabrication", claims=SAMPLE_CLAIMS, query_id=f"q-{tid}", manifest_id=MANIFEST)
    older = label_record(tid, "ok", claims=(), query_id=f"q-{tid}", manifest_id="m-older")
    now = datetime.now(UTC)
    for r, at in ((older, now - timedelta(days=1)), (rec, now)):
        store.insert("labels", [(tenant, r["manifest_id"], tid, r["query_id"], "svc", "r1", r["failure_mode"], True,
                                 True, True, "neutral", False, 0.5, 0.9, json.dumps(r), now, at)],
                     ["tenant", "manifest_id", "trace_id", "query_id", "service", "release", "failure_mode",
                      "gold_in_pool", "gold_in_context", "ranking_ok", "generation", "passed", "score", "confidence",
                      "detail", "trace_time", "labelled_at"])
    store.insert("feedback", [(tenant, tid, "", "root", 0.0, "wrong <i>year</i>", now)],
                 ["tenant", "trace_id", "query_id", "span_id", "score", "comment", "added_at"])
    _, token = auth.add_reviewer(store, "pia", tenant=tenant)
    csrf = login(client, token)
    html = client.get(f"/traces/{tid}", headers=HTML).text
    # untrusted text is text: the hostile passage, the query's markup, the feedback comment
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and HOSTILE not in html
    assert "&lt;b&gt;bold?&lt;/b&gt;" in html and "wrong &lt;i&gt;year&lt;/i&gt;" in html
    # candidates per stage with the reranker's movement, claims linked to their evidence
    assert "▲ 2" in html and "dropped" in html
    assert 'href="#passage-1">evidence: d1' in html and "evidence d3 (not in context)" in html
    assert 'name="relevant"' not in html and 'type="radio"' not in html  # read-only rendering
    # the newest manifest's label in full, the other listed with a link; gold with its source
    assert f'<code id="manifest-id">{MANIFEST}</code>' in html and 'id="trace-mode">fabrication' in html
    assert f'href="/traces/{tid}?manifest=m-older">show</a>' in html
    shown = client.get(f"/traces/{tid}?manifest=m-older", headers=HTML).text
    assert 'id="trace-mode">ok' in shown
    assert "<code>d1</code> <span class=\"hint\">(span)</span>" in html
    assert "No reviewer has judged this trace." in html

    r = client.post(f"/traces/{tid}/queue", data={"csrf_token": csrf, "new_queue": "by-hand", "reviewers": "1",
                                                 "manifest": MANIFEST})
    assert r.status_code == 303 and r.headers["location"] == f"/traces/{tid}?manifest={MANIFEST}&queued=by-hand"
    item = get_item(store, tenant=tenant, queue="by-hand", trace_id=tid)
    assert item is not None and item.reason == "manual" and item.manifest_id == MANIFEST
    assert "Put into review queue <strong>by-hand</strong>" in client.get(r.headers["location"], headers=HTML).text
    again = client.post(f"/traces/{tid}/queue", data={"csrf_token": csrf, "queue": "by-hand"})
    assert "already=1" in again.headers["location"] and len(list_items(store, tenant=tenant, queue="by-hand")) == 1
    assert client.post(f"/traces/{tid}/queue", data={"new_queue": "x"}).status_code == 403  # no CSRF token

    # reviewing it in the queue: the item page renders the same trace (shared partial), editable
    nxt = client.get("/review/queues/by-hand/next")
    item_html = client.get(nxt.headers["location"], headers=HTML).text
    assert 'href="#passage-1">evidence: d1' in item_html and 'name="relevant"' in item_html
    assert client.post(nxt.headers["location"], data={"csrf_token": _csrf(item_html), "failure_mode": "under_use",
                                                      "claim_0": "entailed", "claim_1": "contradicted",
                                                      "note": "the <b>year</b> is wrong"}).status_code == 303
    html = client.get(f"/traces/{tid}", headers=HTML).text
    assert "<strong>under use</strong>" in html and "#2 neutral → contradicted" in html
    assert "the &lt;b&gt;year&lt;/b&gt; is wrong" in html
    assert client.get(f"/traces/{tenant}-nope", headers=HTML).status_code == 404


# --- /dashboard -----------------------------------------------------------------------------------------
@pytest.fixture
def days(store: Store, tenant: str) -> list[dict[str, Any]]:
    """Two releases over three days with known counts; day 1 of "base" has only abstentions, and
    day 2 of "cand" has an answer that was not judged (a retrieval-only audit)."""
    rows: list[dict[str, Any]] = []
    plan = {("base", 0): ["ok"] * 6 + ["fabrication"] * 2, ("base", 1): ["under_use"] * 3,
            ("cand", 1): ["ok"] * 3 + ["retrieval_gap"] * 4 + ["fabrication"] * 3, ("cand", 2): ["ok", "fabrication"]}
    n = 0
    for (release, day), modes in plan.items():
        for j, mode in enumerate(modes):
            abstain = release == "base" and day == 1
            unjudged = release == "cand" and day == 2 and j == 0
            row = dict(trace_id=f"{tenant}-d{n:03d}", when=T0 + timedelta(days=day, minutes=j), release=release,
                       mode=mode, generation="abstained" if abstain else "" if unjudged else "entailed",
                       groundedness=None if abstain or unjudged else round(0.1 * (j % 10), 1),
                       gold_in_context=None if j == 0 else mode != "retrieval_gap")
            put(store, tenant, **row)
            rows.append(row)
            n += 1
    return rows


def test_dashboard_numbers_match_a_plain_recomputation(store: Store, tenant: str, days: list[dict[str, Any]]) -> None:
    series = dashboard_series(store, tenant=tenant, manifest_id=MANIFEST)
    assert series.bucket == "day" and series.releases == ("base", "cand")  # 3 days: per day
    assert len(series.buckets) == 4
    for b in series.buckets:
        mine = [r for r in days if r["release"] == b.release and b.start <= r["when"] < b.end]
        assert b.n == len(mine) and b.end - b.start == timedelta(days=1)
        for mode in FAILURE_MODES:
            k = sum(r["mode"] == mode for r in mine)
            p = wilson(k, len(mine))
            assert (b.modes[mode].k, b.modes[mode].n) == (k, len(mine))
            assert b.modes[mode].value == pytest.approx(k / len(mine))
            assert (b.modes[mode].low, b.modes[mode].high) == pytest.approx((p.ci.low, p.ci.high))  # type: ignore[union-attr]
        known = [r for r in mine if r["gold_in_context"] is not None]
        assert (b.gold_in_context.k, b.gold_in_context.n) == (sum(r["gold_in_context"] for r in known), len(known))
        judged = [r for r in mine if r["generation"]]
        assert (b.abstention.k, b.abstention.n) == (sum(r["generation"] == "abstained" for r in mine), len(judged))
        g = [r["groundedness"] for r in mine if r["groundedness"] is not None]
        if not g:
            assert b.groundedness.value is None and b.groundedness.n == 0  # undefined, not 0
        elif len(g) == 1:
            assert b.groundedness.value == g[0] and b.groundedness.low is None  # no interval from one value
        else:
            assert b.groundedness.value == pytest.approx(statistics.fmean(g))
            half = 1.959963984540054 * statistics.stdev(g) / math.sqrt(len(g))
            assert b.groundedness.low == pytest.approx(max(0.0, statistics.fmean(g) - half))
    hourly = dashboard_series(store, tenant=tenant, manifest_id=MANIFEST, bucket="hour", release="cand",
                              since=T0 + timedelta(days=1), until=T0 + timedelta(days=1, hours=1))
    assert [(b.release, b.start, b.n) for b in hourly.buckets] == [("cand", T0 + timedelta(days=1), 10)]
    with pytest.raises(ReviewError, match="bucket"):
        dashboard_series(store, tenant=tenant, manifest_id=MANIFEST, bucket="week")


def test_each_dashboard_point_links_to_exactly_its_traces(client: TestClient, store: Store, tenant: str,
                                                          days: list[dict[str, Any]]) -> None:
    _, token = auth.add_reviewer(store, "dan", tenant=tenant)
    login(client, token, "/dashboard")
    html = client.get("/dashboard", headers=HTML).text
    panel = html[html.index('id="panel-mode-fabrication"'):html.index('id="panel-mode-ok"')]
    links = re.findall(r'<a class="point" href="([^"]+)"><title>([^<]+)</title>', panel)
    assert len(links) == 4  # base days 0 and 1 (0 of 3 is a rate of 0, defined), cand days 1 and 2
    for href, title in links:
        href = href.replace("&amp;", "&")
        q = {k: v[0] for k, v in parse_qs(urlsplit(href).query).items()}
        assert q["mode"] == "fabrication" and q["manifest"] == MANIFEST
        k = int(re.search(r"fabrication (\d+)/(\d+)", title).group(1))  # type: ignore[union-attr]
        listed = _ids(client.get(href, headers=HTML).text)
        since = datetime.fromisoformat(q["since"].replace("Z", "+00:00"))
        want = [r["trace_id"] for r in days if r["release"] == q["release"] and r["mode"] == "fabrication"
                and since <= r["when"] < since + timedelta(days=1)]
        assert sorted(listed) == sorted(want) and len(listed) == k
    # a bucket without judged answers has no abstention point rather than a point at 0
    abst = html[html.index('id="panel-abstention"'):html.index('id="panel-gold-in-context"')]
    assert abst.count('<a class="point"') == 4
    start = html.index('id="panel-groundedness"')
    grounded = html[start:html.index("</figure>", start)]
    assert grounded.count('<a class="point"') == 3  # base day 1 abstained throughout: undefined, left out
    assert "undefined (n=0)" in html  # ... and said so in the numbers table


def test_dashboard_escapes_release_names_and_shows_the_latest_gates(client: TestClient, store: Store,
                                                                    tenant: str) -> None:
    put(store, tenant, f"{tenant}-h", when=T0, release='<script>alert("r")</script>', mode="fabrication")
    older = {"gates": [{"metric": "old_metric", "tripped": False, "status": "ok"}], "tripped": False}
    newer = {"gates": [{"metric": "recall_5", "boundary": "gold_in_context", "baseline": 0.9, "candidate": 0.7,
                        "observed": -0.2, "threshold": -0.1, "tripped": True, "status": "tripped",
                        "reason": "moved <b>-0.2</b>"}],
             "gates_summary": {"family_false_alarm": 0.031}, "tripped": True}
    save_compare_report(store, older, tenant=tenant, baseline="v0", candidate="v1", created_at=T0)
    save_compare_report(store, newer, tenant=tenant, baseline="v1", candidate="<i>v2</i>",
                        created_at=T0 + timedelta(hours=1))
    saved = latest_compare_report(store, tenant=tenant)
    assert saved is not None and saved.candidate == "<i>v2</i>" and saved.tripped
    assert saved.gates[0]["metric"] == "recall_5" and saved.summary == {"family_false_alarm": 0.031}
    _, token = auth.add_reviewer(store, "eli", tenant=tenant)
    login(client, token, "/dashboard")
    html = client.get("/dashboard", headers=HTML).text
    assert "<script>alert" not in html and "&lt;script&gt;alert(&#34;r&#34;)&lt;/script&gt;" in html
    assert "<i>v2</i>" not in html and "&lt;i&gt;v2&lt;/i&gt;" in html and "old_metric" not in html
    assert 'title="moved &lt;b&gt;-0.2&lt;/b&gt;"' in html and "3.1%" in html
    assert "script-src 'self'" in client.get("/dashboard", headers=HTML).headers["content-security-policy"]


def test_an_empty_tenant_gets_pages_that_say_what_to_do(client: TestClient, store: Store, tenant: str) -> None:
    _, token = auth.add_reviewer(store, "new", tenant=tenant)
    login(client, token)
    assert "failure modes appear after <code>ragtrace audit</code>" in client.get("/traces", headers=HTML).text
    dash = client.get("/dashboard", headers=HTML).text
    assert "Nothing is labelled yet" in dash and "ragtrace compare --baseline A --candidate B --save" in dash
