"""`/traces` and `/dashboard` with filters that cannot mean what they say: a 400 page saying what to
change, in the page's own words (since / until, not a command-line flag), as `ragtrace traces` refuses
them. Before, since=1d&until=2d (ages: the window ends before it starts) answered 200 with "No trace
matches these filters", which reads like an answer; and a manifest id with no labels in the tenant (a
typo, a manifest of another tenant) listed every trace as "not labelled", as if no audit had run. The
review mount on loopback over the shared chDB store."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ragtrace_review import auth
from ragtrace_review.web import mount
from ragtrace_store import Store
from tests.loopback import serving

Seeder = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def site(store: Store, tenant: str, seeded: Seeder) -> Iterator[tuple[str, dict[str, str]]]:
    seeded(["ok", "fabrication"], manifest_id="m-real")  # labelled, so no page is empty for want of data
    _, token = auth.add_reviewer(store, "wyn", tenant=tenant)
    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="filter-test"))
    with serving(app) as url:
        yield url, {"authorization": f"Bearer {token}", "accept": "text/html"}


def _error(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


@pytest.mark.parametrize("path", ["/traces", "/dashboard"])
def test_a_window_that_ends_before_it_starts_is_refused(site: tuple[str, dict[str, str]], path: str) -> None:
    url, headers = site
    r = httpx.get(f"{url}{path}", params={"since": "1d", "until": "2d"}, headers=headers, timeout=60)
    assert r.status_code == 400
    text = _error(r.text)
    assert "is not before until" in text and "swap them" in text


@pytest.mark.parametrize("path", ["/traces", "/dashboard"])
def test_a_bound_that_is_no_time_is_named_as_the_form_names_it(site: tuple[str, dict[str, str]], path: str) -> None:
    url, headers = site
    r = httpx.get(f"{url}{path}", params={"until": "yesterday"}, headers=headers, timeout=60)
    assert r.status_code == 400
    text = _error(r.text)
    assert "until 'yesterday': give an ISO time" in text and "--until" not in text


@pytest.mark.parametrize("path", ["/traces", "/dashboard"])
def test_a_window_in_order_is_served(site: tuple[str, dict[str, str]], path: str) -> None:
    url, headers = site
    r = httpx.get(f"{url}{path}", params={"since": "2d", "until": "0d"}, headers=headers, timeout=60)
    assert r.status_code == 200


@pytest.mark.parametrize("path", ["/traces", "/dashboard"])
def test_an_unknown_manifest_is_refused_with_the_known_ones(site: tuple[str, dict[str, str]], path: str) -> None:
    url, headers = site
    r = httpx.get(f"{url}{path}", params={"manifest": "m-typo"}, headers=headers, timeout=60)
    assert r.status_code == 400
    assert "manifest 'm-typo' has no labels in this tenant; the manifests with labels here: m-real" in _error(r.text)
    ok = httpx.get(f"{url}{path}", params={"manifest": "m-real"}, headers=headers, timeout=60)
    assert ok.status_code == 200 and "has no labels in this tenant" not in _error(ok.text)
