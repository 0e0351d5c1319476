"""Without ``--tokens`` no other site can drive the collector.

Requests as a hostile page (or DNS rebinding) makes a browser send them, against a real `ragtrace
serve` app on loopback: a foreign ``Host``, a foreign ``Origin`` / ``Sec-Fetch-Site``, JSON sent as
``text/plain``, and the reviewer administration API without a credential. The same attacks driven
from a real Chromium page on another origin are in test_browser.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from ragtrace_collector.settings import CollectorSettings
from ragtrace_review import auth
from tests import otlp_builders as T
from tests.collector._server import running

PB = {"content-type": "application/x-protobuf"}


def _trace(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    req = T.request(T.standard_trace(T.corpus(10, size=50), 0).spans(), service=f"s-{uuid.uuid4().hex[:8]}")
    return httpx.post(f"{url}/v1/traces", content=req.SerializeToString(), headers={**PB, **(headers or {})})


def test_the_default_listen_address_is_loopback() -> None:
    assert CollectorSettings().host == "127.0.0.1"
    assert CollectorSettings.from_env({}).host == "127.0.0.1"


def test_dns_rebinding_gets_nothing(chdb_store: Any, tmp_path: Path) -> None:
    with running(chdb_store, str(tmp_path / "spool")) as (url, app):
        assert _trace(url).status_code == 200
        assert app.state.writer.flush(30)
        rebound = {"host": "attacker.example"}
        listed = httpx.get(f"{url}/api/traces", headers=rebound)
        assert listed.status_code == 400 and "--allowed-hosts" in listed.json()["error"]
        assert b"trace_id" not in listed.content
        made = httpx.post(f"{url}/api/reviewers", json={"name": "rebound"}, headers=rebound)
        assert made.status_code == 400 and "token" not in made.json()
        assert httpx.post(f"{url}/v1/traces", content=b"", headers={**PB, **rebound}).status_code == 400
        assert httpx.get(f"{url}/review/login", headers=rebound).status_code == 400
        assert httpx.get(f"{url}/readyz", headers={"host": "attacker.example:4318"}).status_code == 400
        # the server's own names still work, with or without a port
        for host in ("localhost", "127.0.0.1", f"127.0.0.1:{url.rsplit(':', 1)[1]}", "[::1]:4318"):
            assert httpx.get(f"{url}/api/traces", headers={"host": host}).status_code == 200, host
    assert not [r for r in auth.list_reviewers(chdb_store) if r.name == "rebound"]


def test_allowed_hosts_are_configurable(chdb_store: Any, tmp_path: Path) -> None:
    with running(chdb_store, str(tmp_path / "spool"), allowed_hosts=("collector.internal",)) as (url, _):
        assert httpx.get(f"{url}/api/traces", headers={"host": "collector.internal:4318"}).status_code == 200
        assert httpx.get(f"{url}/api/traces", headers={"host": "localhost"}).status_code == 400
    with running(chdb_store, str(tmp_path / "spool2"), allowed_hosts=("*",)) as (url, _):
        assert httpx.get(f"{url}/api/traces", headers={"host": "anything.example"}).status_code == 200
    # with tenant tokens a foreign Host cannot read anything anyway; it is checked once configured
    with running(chdb_store, str(tmp_path / "spool3"), tokens={"k": "t"}) as (url, _):
        assert httpx.get(f"{url}/api/traces", headers={"host": "lb.example", "authorization": "Bearer k"}
                         ).status_code == 200


@pytest.mark.parametrize("headers", [
    {"origin": "http://attacker.example"},
    {"origin": "null"},
    {"origin": "http://127.0.0.1:1"},  # same host, other port: another origin
    {"sec-fetch-site": "cross-site"},
    {"sec-fetch-site": "same-site"},
])
def test_cross_origin_writes_are_refused(chdb_store: Any, tmp_path: Path, headers: dict[str, str]) -> None:
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        audit = httpx.post(f"{url}/api/audit", json={"stages": "retrieval"}, headers=headers)
        made = httpx.post(f"{url}/api/reviewers", json={"name": "crossed"}, headers=headers)
        otlp = _trace(url, headers)
        login = httpx.post(f"{url}/review/login", data={"token": "x", "csrf_token": "y"}, headers=headers)
        read = httpx.get(f"{url}/api/traces", headers=headers)  # reads need no Origin check
    for r in (audit, made, otlp, login):
        assert r.status_code == 403 and "cross-origin" in r.json()["error"], r.text
    assert read.status_code == 200
    assert not [r for r in auth.list_reviewers(chdb_store) if r.name == "crossed"]


def test_same_origin_and_scripts_are_served(chdb_store: Any, tmp_path: Path) -> None:
    with running(chdb_store, str(tmp_path / "spool"), admin_token="adm") as (url, _):
        assert _trace(url).status_code == 200  # an SDK: no Origin
        assert _trace(url, {"origin": url, "sec-fetch-site": "same-origin"}).status_code == 200
        name = f"same-{uuid.uuid4().hex[:6]}"
        r = httpx.post(f"{url}/api/reviewers", json={"name": name},
                       headers={"origin": url, "authorization": "Bearer adm"})
        assert r.status_code == 200 and r.json()["token"].startswith(auth.TOKEN_PREFIX)


def test_json_apis_take_only_json(chdb_store: Any, tmp_path: Path) -> None:
    name = f"plain-{uuid.uuid4().hex[:6]}"
    body = orjson.dumps({"name": name})
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""):
            made = httpx.post(f"{url}/api/reviewers", content=body, headers={"content-type": ctype})
            assert made.status_code == 415 and "application/json" in made.json()["error"], ctype
            audit = httpx.post(f"{url}/api/audit", content=b'{"stages": "retrieval"}', headers={"content-type": ctype})
            assert audit.status_code == 415, ctype
        enq = httpx.post(f"{url}/review/api/queues/q/enqueue", content=b"{}", headers={"content-type": "text/plain"})
        assert enq.status_code == 415
    with running(chdb_store, str(tmp_path / "spool2"), admin_token="adm") as (url, _):
        ok = httpx.post(f"{url}/api/reviewers", content=body,
                        headers={"content-type": "application/json; charset=utf-8", "authorization": "Bearer adm"})
        assert ok.status_code == 200
        # OTLP keeps its own two media types
        req = T.request(T.standard_trace(T.corpus(5, size=20), 0).spans())
        assert httpx.post(f"{url}/v1/traces", content=req.SerializeToString(), headers=PB).status_code == 200
        assert httpx.post(f"{url}/v1/traces", content=b"{}", headers={"content-type": "text/plain"}
                          ).status_code == 415
    assert [r.name for r in auth.list_reviewers(chdb_store) if r.name == name] == [name]  # the JSON one only


def test_the_admin_api_needs_a_credential_without_tenant_tokens(chdb_store: Any, tmp_path: Path) -> None:
    name = f"adm-{uuid.uuid4().hex[:6]}"
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        closed = httpx.post(f"{url}/api/reviewers", json={"name": name})
        listed = httpx.get(f"{url}/api/reviewers")
        disabled = httpx.post(f"{url}/api/reviewers/{name}/disable")
    for r in (closed, listed, disabled):
        assert r.status_code == 403 and "RAGTRACE_ADMIN_TOKEN" in r.json()["error"], r.text
    with running(chdb_store, str(tmp_path / "spool2"), admin_token="adm-secret") as (url, _):
        anonymous = httpx.post(f"{url}/api/reviewers", json={"name": name})
        wrong = httpx.post(f"{url}/api/reviewers", json={"name": name}, headers={"authorization": "Bearer adm"})
        made = httpx.post(f"{url}/api/reviewers", json={"name": name}, headers={"authorization": "Bearer adm-secret"})
    assert anonymous.status_code == 401 and wrong.status_code == 401
    assert made.status_code == 200 and made.json()["tenant"] == "default"
    assert [r.name for r in auth.list_reviewers(chdb_store) if r.name == name] == [name]
