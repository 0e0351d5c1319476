"""The /review routes over HTTP (FastAPI TestClient) on the real chDB store."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from ragtrace_review import auth
from ragtrace_review.queues import enqueue, list_decisions
from ragtrace_review.web import SESSION_COOKIE, mount
from ragtrace_store import Store

from .rows import HOSTILE

Seeder = Callable[..., list[dict[str, Any]]]
HTML = {"accept": "text/html"}


@pytest.fixture
def app(store: Store) -> FastAPI:
    app = FastAPI()
    app.state.review_router = mount(app, lambda: store, SimpleNamespace(review_secret="test-secret"))
    return app


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as c:
        yield c


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert m, "page has no CSRF field"
    return m.group(1)


def login(client: TestClient, token: str) -> str:
    """Log in through the form; returns the CSRF token of the session's pages."""
    page = client.get("/review/login")
    r = client.post("/review/login", data={"token": token, "csrf_token": _csrf(page.text), "next": "/review/"})
    assert r.status_code == 303 and r.headers["location"] == "/review/", r.text
    home = client.get("/review/", headers=HTML)
    assert home.status_code == 200
    return _csrf(home.text)


def _queue(store: Store, tenant: str, seeded: Seeder, name: str = "q1", *, hostile: bool = False) -> None:
    seeded(["fabrication", "ok", "under_use"], hostile=hostile)
    enqueue(store, name, None, per_mode=5, reviewers=2, tenant=tenant)


def test_anonymous_gets_401_or_login_redirect_on_every_route(app: FastAPI, client: TestClient) -> None:
    routes = [r for r in app.state.review_router.routes if isinstance(r, APIRoute)
              and r.path != "/review/login"]
    assert len(routes) >= 9
    for route in routes:
        path = route.path.replace("{queue}", "q1").replace("{trace_id}", "t1")
        for method in route.methods:
            r = client.request(method, path)
            assert r.status_code == 401, (method, path, r.status_code)
            assert r.headers["www-authenticate"].startswith("Bearer")
            if method == "GET":
                r = client.get(path, headers=HTML)
                if path.startswith("/review/api/"):
                    assert r.status_code == 401
                else:
                    assert r.status_code == 303, path
                    assert r.headers["location"].startswith("/review/login?next=")
    # a bad bearer token or a forged cookie is anonymous too
    assert client.get("/review/api/queues", headers={"authorization": "Bearer rtr_nope"}).status_code == 401
    client.cookies.set(SESSION_COOKIE, "abc.def", path="/review")
    assert client.get("/review/api/queues").status_code == 401


def test_login_sets_a_hardened_session_cookie_and_logout_ends_it(
        store: Store, tenant: str, client: TestClient) -> None:
    _, token = auth.add_reviewer(store, "ann", tenant=tenant)
    page = client.get("/review/login")
    assert "content-security-policy" in page.headers
    r = client.post("/review/login", data={"token": token, "csrf_token": _csrf(page.text), "next": "//evil.example"})
    assert r.status_code == 303 and r.headers["location"] == "/review/"  # no open redirect
    cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith(SESSION_COOKIE))
    # Path=/: the session also opens the web view (/traces, /dashboard); SameSite keeps it first-party
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/;" in cookie
    home = client.get("/review/", headers=HTML)
    assert home.status_code == 200 and "ann" in home.text
    stolen = client.cookies.get(SESSION_COOKIE)
    r = client.post("/review/logout", data={"csrf_token": _csrf(home.text)})
    assert r.status_code == 303 and r.headers["location"] == "/review/login"
    # the session is ended server-side: replaying the old cookie does not work
    client.cookies.set(SESSION_COOKIE, stolen or "", path="/review")
    assert client.get("/review/api/queues").status_code == 401


def test_wrong_token_and_login_csrf(store: Store, tenant: str, client: TestClient) -> None:
    _, token = auth.add_reviewer(store, "bo", tenant=tenant)
    page = client.get("/review/login")
    r = client.post("/review/login", data={"token": "rtr_wrong", "csrf_token": _csrf(page.text)})
    assert r.status_code == 303 and "error=1" in r.headers["location"]
    assert client.get(r.headers["location"]).status_code == 401
    # a login form posted without the double-submit token (e.g. from another site) is refused
    fresh = TestClient(client.app, follow_redirects=False)
    assert fresh.post("/review/login", data={"token": token, "csrf_token": "x"}).status_code == 403


def test_csrf_rejection_on_decisions_and_logout(store: Store, tenant: str, seeded: Seeder,
                                                client: TestClient) -> None:
    _queue(store, tenant, seeded)
    _, token = auth.add_reviewer(store, "cy", tenant=tenant)
    csrf = login(client, token)
    r = client.get("/review/queues/q1/next")
    assert r.status_code == 303
    item_url = r.headers["location"]
    assert client.get(item_url, headers=HTML).status_code == 200
    form = {"failure_mode": "ok", "claim_0": "entailed", "claim_1": "neutral"}
    assert client.post(item_url, data=form).status_code == 403
    assert client.post(item_url, data={**form, "csrf_token": "forged"}).status_code == 403
    assert client.post("/review/logout", data={}).status_code == 403
    assert list_decisions(store, tenant=tenant, queue="q1") == []
    r = client.post(item_url, data={**form, "csrf_token": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/review/queues/q1/next"
    assert len(list_decisions(store, tenant=tenant, queue="q1")) == 1
    # posting the same item again is refused (never judged twice by the same reviewer)
    again = client.post(item_url, data={**form, "csrf_token": csrf})
    assert again.status_code == 303 and again.headers["location"].endswith("/next")
    assert len(list_decisions(store, tenant=tenant, queue="q1")) == 1


def test_disabled_reviewer_is_locked_out(store: Store, tenant: str, seeded: Seeder, client: TestClient) -> None:
    _queue(store, tenant, seeded)
    reviewer, token = auth.add_reviewer(store, "dee", tenant=tenant)
    login(client, token)
    bearer = {"authorization": f"Bearer {token}"}
    assert client.get("/review/api/queues", headers=bearer).status_code == 200
    auth.set_disabled(store, reviewer)
    assert client.get("/review/", headers=HTML).status_code == 303  # the open session is gone
    assert client.get("/review/api/queues", headers=bearer).status_code == 401
    page = client.get("/review/login")
    r = client.post("/review/login", data={"token": token, "csrf_token": _csrf(page.text)})
    assert "error=1" in r.headers["location"]
    auth.set_disabled(store, reviewer, False)
    assert client.get("/review/api/queues", headers=bearer).status_code == 200


def test_tenants_never_see_each_others_items(store: Store, seeded: Seeder, client: TestClient,
                                              tenant: str) -> None:
    # tenant A (this test's tenant) and tenant B both have a queue named "shared"
    _queue(store, tenant, seeded, "shared")
    other = f"{tenant}-b"
    from .rows import label_record, sample_trace, write_labels, write_trace
    write_trace(store, other, sample_trace(f"{other}-secret"))
    write_labels(store, other, [label_record(f"{other}-secret", "fabrication")])
    enqueue(store, "shared", None, per_mode=5, reviewers=2, tenant=other)
    enqueue(store, "only-b", None, per_mode=5, reviewers=2, tenant=other)

    _, token_a = auth.add_reviewer(store, "eve", tenant=tenant)
    bearer = {"authorization": f"Bearer {token_a}"}
    queues = client.get("/review/api/queues", headers=bearer).json()
    assert queues["tenant"] == tenant and [q["queue"] for q in queues["queues"]] == ["shared"]
    assert queues["queues"][0]["items"] == 3
    assert client.get("/review/queues/only-b", headers={**bearer, **HTML}).status_code == 404
    seen = []
    while True:
        r = client.get("/review/queues/shared/next", headers={**bearer, **HTML})
        if r.status_code != 303:
            break
        url = r.headers["location"]
        seen.append(url.rsplit("/", 1)[1])
        assert client.post(url, data={"failure_mode": "ok", "claim_0": "entailed", "claim_1": "neutral"},
                           headers=bearer).status_code == 303  # bearer requests need no CSRF token
    assert len(seen) == 3 and all(t.startswith(tenant + "-tr") for t in seen)
    # guessing B's item URL gets nothing
    r = client.get(f"/review/queues/shared/items/{other}-secret", headers={**bearer, **HTML})
    assert r.status_code == 404 and "secret" not in r.text.replace(f"{other}-secret", "")


def test_item_page_escapes_untrusted_text_and_shows_movement(store: Store, tenant: str, seeded: Seeder,
                                                              client: TestClient) -> None:
    _queue(store, tenant, seeded, hostile=True)
    _, token = auth.add_reviewer(store, "fay", tenant=tenant)
    login(client, token)
    url = client.get("/review/queues/q1/next").headers["location"]
    page = client.get(url, headers=HTML)
    html = page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert HOSTILE not in html and "<b>bold?</b>" not in html
    assert "script-src 'self'" in page.headers["content-security-policy"]
    # the reranker moved d1 from retrieved rank 3 to 1 (up 2) and d4 out of the list
    assert "▲ 2" in html and "dropped" in html
    # claims link to their evidence passage in the context; d3 was not supplied
    assert 'href="#passage-1">evidence: d1' in html
    assert "evidence d3 (not in context)" in html
    assert 'name="failure_mode" value="' in html and "Confirm labeller" in html
