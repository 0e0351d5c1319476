"""The trace page's "put into a review queue" form (`POST /traces/{trace_id}/queue`) for a trace that is
not there: a 404 naming it, as the page itself answers. Before, it said the trace "has no label under
that manifest ... run `ragtrace audit` first", sending the reviewer to audit a trace that does not exist.
A trace id pasted in upper case is found, as on the page. The review mount on loopback over chDB."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ragtrace_review import auth
from ragtrace_review.queues import list_items
from ragtrace_review.web import mount
from ragtrace_store import Store
from tests.loopback import serving

Seeder = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def browser(store: Store, tenant: str, seeded: Seeder) -> Iterator[tuple[httpx.Client, str, str]]:
    trace_id = seeded(["fabrication"])[0]["trace_id"]
    _, token = auth.add_reviewer(store, "una", tenant=tenant)
    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="queue-button-test"))
    with serving(app) as url, httpx.Client(base_url=url, follow_redirects=False, timeout=60) as client:
        login = client.get("/review/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', login.text)
        assert csrf
        assert client.post("/review/login", data={"token": token, "csrf_token": csrf.group(1)}).status_code == 303
        page = client.get(f"/traces/{trace_id}")
        form = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert page.status_code == 200 and form
        yield client, form.group(1), trace_id


def test_queueing_a_trace_that_is_not_there_is_a_404(browser: tuple[httpx.Client, str, str]) -> None:
    client, csrf, _ = browser
    r = client.post("/traces/0123456789abcdef0123456789abcdef/queue", data={"csrf_token": csrf, "new_queue": "hand"})
    assert r.status_code == 404
    assert "No trace &#39;0123456789abcdef0123456789abcdef&#39;" in r.text and "ragtrace audit" not in r.text


def test_queueing_a_pasted_upper_case_id_finds_the_trace(browser: tuple[httpx.Client, str, str], store: Store,
                                                         tenant: str) -> None:
    client, csrf, trace_id = browser
    r = client.post(f"/traces/{trace_id.upper()}/queue", data={"csrf_token": csrf, "new_queue": "hand"})
    assert r.status_code == 303, r.text[-500:]
    assert [item.trace_id for item in list_items(store, tenant=tenant, queue="hand")] == [trace_id]
