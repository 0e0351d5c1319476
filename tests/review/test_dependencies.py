"""The HTTP layer's dependencies (`ragtrace_review.deps`) are what a route gets, and a test can swap them
with ``app.dependency_overrides``, on the real chDB store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ragtrace_review import auth, deps
from ragtrace_review.handlers import VIEWER_MESSAGE
from ragtrace_review.queues import queue_names
from ragtrace_review.routes import queues as queue_routes
from ragtrace_review.web import mount
from ragtrace_store import Store

HTML = {"accept": "text/html"}
Seeder = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def app(store: Store) -> FastAPI:
    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="deps-test"))
    return app


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as c:
        yield c


def test_an_overridden_session_opens_review_and_explorer_pages(app: FastAPI, client: TestClient, store: Store,
                                                               tenant: str, seeded: Seeder) -> None:
    seeded(["fabrication"])
    reviewer, _token = auth.add_reviewer(store, "ovid", tenant=tenant)
    assert client.get("/review/api/queues").status_code == 401
    app.dependency_overrides[deps.get_session] = lambda: auth.Session(reviewer, "csrf-x", None)
    queues = client.get("/review/", headers=HTML)
    assert queues.status_code == 200 and "ovid" in queues.text
    api = client.get("/review/api/queues")
    assert api.status_code == 200 and api.json()["tenant"] == tenant
    listing = client.get("/traces", headers=HTML)
    assert listing.status_code == 200 and f"{tenant}-tr000" in listing.text
    # the CSRF check depends on the session: with the overridden one, a form must carry its token
    refused = client.post("/traces/x/queue", data={"csrf_token": "wrong", "queue": "q"})
    assert refused.status_code == 403 and "CSRF" in refused.text
    app.dependency_overrides.clear()
    assert client.get("/review/api/queues").status_code == 401
    assert client.get("/traces", headers=HTML).status_code == 303


def test_the_bearer_only_dependency_refuses_an_overridden_viewer(app: FastAPI, client: TestClient, store: Store,
                                                                 tenant: str) -> None:
    viewer, _token = auth.add_reviewer(store, "vic", tenant=tenant, role=auth.ROLE_VIEWER)
    app.dependency_overrides[deps.get_session] = lambda: auth.Session(viewer, None, None)
    r = client.post("/review/api/queues/q1/enqueue", json={"per_mode": 1})
    assert r.status_code == 403 and r.json() == {"error": VIEWER_MESSAGE}
    assert queue_names(store, tenant=tenant) == []


def test_an_overridden_admin_tenant_manages_that_tenants_reviewers(app: FastAPI, client: TestClient,
                                                                   tenant: str) -> None:
    # without a credential configured the administration API is closed...
    assert client.get("/api/reviewers").status_code == 403
    # ...and with the dependency replaced it answers for the tenant the override names
    app.dependency_overrides[deps.admin_tenant] = lambda: tenant
    added = client.post("/api/reviewers", json={"name": "ada"})
    assert added.status_code == 200 and added.json()["tenant"] == tenant
    assert [r["name"] for r in client.get("/api/reviewers").json()] == ["ada"]


def test_an_overridden_store_is_the_one_routes_read(app: FastAPI, client: TestClient, store: Store,
                                                    tenant: str) -> None:
    _reviewer, token = auth.add_reviewer(store, "sal", tenant=tenant)
    bearer = {"authorization": f"Bearer {token}"}
    assert client.get("/review/api/queues", headers=bearer).status_code == 200

    class Unreachable:
        def __getattr__(self, name: str) -> None:
            raise RuntimeError(f"the overriding store was asked for {name}")

    app.dependency_overrides[deps.get_store] = Unreachable
    with pytest.raises(RuntimeError, match="the overriding store was asked for"):
        client.get("/review/api/queues", headers=bearer)


def test_a_route_module_without_mount_says_how_to_add_it(store: Store) -> None:
    app = FastAPI()
    app.include_router(queue_routes.router)
    with TestClient(app) as client, pytest.raises(RuntimeError, match=r"ragtrace_review\.web\.mount"):
        client.get("/review/", headers={"authorization": "Bearer rtr_x"})
