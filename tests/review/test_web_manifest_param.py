"""`/traces?manifest=ID` and `/dashboard?manifest=ID` with an id that has no labels in the tenant (a
typo, a manifest of another tenant): a 400 naming the manifests that do. Before, /traces listed every
trace as "not labelled" (as if no audit had run) and the dashboard said no labelled trace matches.
The review mount on loopback over the shared chDB store."""

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
    seeded(["ok", "fabrication"], manifest_id="m-real")
    _, token = auth.add_reviewer(store, "mia", tenant=tenant)
    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="manifest-test"))
    with serving(app) as url:
        yield url, {"authorization": f"Bearer {token}", "accept": "text/html"}


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


@pytest.mark.parametrize("path", ["/traces", "/dashboard"])
def test_an_unknown_manifest_is_refused_with_the_known_ones(site: tuple[str, dict[str, str]], path: str) -> None:
    url, headers = site
    r = httpx.get(f"{url}{path}", params={"manifest": "m-typo"}, headers=headers, timeout=60)
    assert r.status_code == 400
    assert "manifest 'm-typo' has no labels in this tenant; the manifests with labels here: m-real" in _text(r.text)
    ok = httpx.get(f"{url}{path}", params={"manifest": "m-real"}, headers=headers, timeout=60)
    assert ok.status_code == 200 and "has no labels in this tenant" not in _text(ok.text)
