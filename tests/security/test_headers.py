"""Security headers on every response, deployment routes behind a credential when
tokens are configured, a /readyz that does not name the store, and login attempts limited per client.

All against a real `ragtrace serve` app on loopback.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragtrace_review import auth
from ragtrace_review.limits import LoginLimiter
from tests import otlp_builders as T
from tests.collector._server import running

PB = {"content-type": "application/x-protobuf"}


def _every_kind_of_response(url: str, auth_header: dict[str, str]) -> dict[str, httpx.Response]:
    req = T.request(T.standard_trace(T.corpus(5, size=20), 0).spans())
    return {
        "otlp": httpx.post(f"{url}/v1/traces", content=req.SerializeToString(), headers={**PB, **auth_header}),
        "otlp-refused": httpx.post(f"{url}/v1/traces", content=b"x", headers={"content-type": "text/plain"}),
        "traces": httpx.get(f"{url}/api/traces", headers=auth_header),
        "trace-404": httpx.get(f"{url}/api/traces/{'0' * 32}", headers=auth_header),
        "healthz": httpx.get(f"{url}/healthz"),
        "readyz": httpx.get(f"{url}/readyz", headers=auth_header),
        "metrics": httpx.get(f"{url}/metrics", headers=auth_header),
        "openapi": httpx.get(f"{url}/openapi.json", headers=auth_header),
        "no-route": httpx.get(f"{url}/nothing-here"),
        "login-page": httpx.get(f"{url}/review/login", headers={"accept": "text/html"}),
        "review-api": httpx.get(f"{url}/review/api/queues"),
        "static": httpx.get(f"{url}/review/static/review.css"),
        "refused-host": httpx.get(f"{url}/api/traces", headers={"host": "elsewhere.example"}),
    }


def test_every_response_carries_the_security_headers(chdb_store: Any, tmp_path: Path) -> None:
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        responses = _every_kind_of_response(url, {})
    with running(chdb_store, str(tmp_path / "spool2"), tokens={"tok": f"h-{uuid.uuid4().hex[:6]}"}) as (url, _):
        responses["unauthorised"] = httpx.get(f"{url}/api/traces")
    assert responses["static"].status_code == 200 and responses["login-page"].status_code == 200
    for name, r in responses.items():
        assert r.headers.get("x-content-type-options") == "nosniff", name
        assert r.headers.get("x-frame-options") == "DENY", name
        assert "frame-ancestors 'none'" in r.headers.get("content-security-policy", ""), name
        if name != "static":
            assert "no-store" in r.headers.get("cache-control", ""), name
    page_csp = responses["login-page"].headers["content-security-policy"]
    assert "script-src 'self'" in page_csp and "default-src 'none'" in page_csp
    assert "unsafe-inline" not in page_csp


def test_deployment_routes_need_a_credential_when_tokens_are_configured(chdb_store: Any, tmp_path: Path) -> None:
    paths = ("/openapi.json", "/metrics", "/readyz")
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": "a", "tok2": "b"}) as (url, _):
        for path in paths:
            anonymous = httpx.get(f"{url}{path}")
            assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer", path
            assert "paths" not in anonymous.text and "ragtrace_" not in anonymous.text
            assert httpx.get(f"{url}{path}", headers={"authorization": "Bearer nope"}).status_code == 401
            for token in ("tok", "tok2"):
                assert httpx.get(f"{url}{path}", headers={"authorization": f"Bearer {token}"}).status_code == 200
        assert httpx.get(f"{url}/healthz").status_code == 200  # liveness says nothing about the deployment
    with running(chdb_store, str(tmp_path / "spool3"), tokens={"tok": "a"}, admin_token="adm") as (url, _):
        for path in paths:  # the operator's admin token opens them too
            assert httpx.get(f"{url}{path}", headers={"authorization": "Bearer adm"}).status_code == 200
    with running(chdb_store, str(tmp_path / "spool2")) as (url, _):  # no tokens: an open, loopback server
        assert httpx.get(f"{url}/metrics").status_code == 200


def test_readyz_does_not_disclose_the_store(chdb_store: Any, tmp_path: Path) -> None:
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        ready = httpx.get(f"{url}/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    location = chdb_store.location
    assert location not in ready.text and Path(location).name not in ready.text


def _login(client: httpx.Client, url: str, token: str) -> httpx.Response:
    page = client.get(f"{url}/review/login")
    match = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert match, page.text
    return client.post(f"{url}/review/login", data={"csrf_token": match.group(1), "token": token,
                                                    "next": "/review/"})


def test_failed_logins_are_limited_per_client(chdb_store: Any, tmp_path: Path) -> None:
    tenant = f"rl-{uuid.uuid4().hex[:6]}"
    _, token = auth.add_reviewer(chdb_store, "rita", tenant=tenant)
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        with httpx.Client(follow_redirects=False) as guesser:
            for _ in range(10):
                miss = _login(guesser, url, auth.TOKEN_PREFIX + "guess")
                assert miss.status_code == 303 and "error=1" in miss.headers["location"]
            limited = _login(guesser, url, auth.TOKEN_PREFIX + "guess")
            assert limited.status_code == 429
            assert 0 < int(limited.headers["retry-after"]) <= 300
            # while limited even the right token is not looked at, so a lucky guess tells nothing
            right = _login(guesser, url, token)
            assert right.status_code == 429 and "ragtrace_review" not in right.headers.get("set-cookie", "")
        # another client address (loopback has the whole 127/8) logs in as usual
        other = httpx.Client(follow_redirects=False, transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        with other:
            ok = _login(other, url, token)
            assert ok.status_code == 303 and ok.headers["location"] == "/review/"
            assert "ragtrace_review=" in ok.headers["set-cookie"]


def test_the_limit_is_a_sliding_window() -> None:
    now = [1000.0]
    limiter = LoginLimiter(max_failures=3, window=60, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.retry_after("a") == 0
        limiter.failed("a")
        now[0] += 10
    assert limiter.retry_after("a") == 30  # the first failure (t=1000) ages out at t=1060; now is 1030
    assert limiter.retry_after("b") == 0
    now[0] = 1060.0
    assert limiter.retry_after("a") == 0  # one failure aged out: one more attempt is allowed
    limiter.failed("a")
    assert limiter.retry_after("a") == 10


def test_the_limiter_forgets_the_oldest_clients_first() -> None:
    limiter = LoginLimiter(max_failures=1, window=60, max_clients=2, clock=lambda: 0.0)
    for client in ("a", "b", "c"):
        limiter.failed(client)
    assert limiter.retry_after("a") == 0 and limiter.retry_after("b") > 0 and limiter.retry_after("c") > 0
    with pytest.raises(ValueError):
        LoginLimiter(max_failures=0)
