"""One host per request, origins compared by scheme, host and port, and every review cookie SameSite=Strict.

Before: a request with two ``Host`` headers was judged by the first, a request line in absolute form
(``GET http://attacker.example/...``) by its ``Host`` header alone, an ``Origin`` of the wrong scheme was
accepted (``https://127.0.0.1:PORT`` for an http server) while ``http://localhost:PORT`` was refused on a
request to ``127.0.0.1:PORT``, and the login nonce's deletion said ``SameSite=lax``. Against a real server
on loopback: the app under uvicorn, and `ragtrace serve` where uvicorn's own protocol would drop the
absolute-form host.
"""

from __future__ import annotations

import re
import socket
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragtrace_review import auth
from tests import otlp_builders as T
from tests.collector._server import running
from tests.faults._serve import read_until_closed, serve

PB = {"content-type": "application/x-protobuf"}


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        answer, _closed = read_until_closed(s, 10)
    return answer


def _otlp(url: str, headers: dict[str, str]) -> httpx.Response:
    req = T.request(T.standard_trace(T.corpus(5, size=50), 0).spans(), service=f"s-{uuid.uuid4().hex[:8]}")
    return httpx.post(f"{url}/v1/traces", content=req.SerializeToString(), headers={**PB, **headers})


@pytest.mark.parametrize("hosts", [("127.0.0.1", "attacker.example"), ("attacker.example", "127.0.0.1"),
                                   ("127.0.0.1", "127.0.0.1")])
def test_two_host_headers_are_refused(chdb_store: Any, tmp_path: Path, hosts: tuple[str, str]) -> None:
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        lines = "".join(f"Host: {h}\r\n" for h in hosts)
        answer = _raw(port, f"GET /api/traces HTTP/1.1\r\n{lines}Connection: close\r\n\r\n".encode())
        single = _raw(port, b"GET /api/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"one Host header" in answer and b"trace_id" not in answer
    assert single.startswith(b"HTTP/1.1 200 ")


def test_an_absolute_form_request_line_is_judged_by_its_own_host(tmp_path: Path) -> None:
    with serve(tmp_path) as (_url, port, _log, _pid):
        # the campaign's request: a foreign name on the request line, this server's in Host
        foreign = _raw(port, b"GET http://attacker.example/api/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b"Connection: close\r\n\r\n")
        assert foreign.startswith(b"HTTP/1.1 400 ") and b"attacker.example" in foreign, foreign[:300]
        # both naming the foreign host: the allowed-hosts check refuses it as it refuses Host alone
        both = _raw(port, b"GET http://attacker.example/api/traces HTTP/1.1\r\nHost: attacker.example\r\n"
                          b"Connection: close\r\n\r\n")
        assert both.startswith(b"HTTP/1.1 400 ") and b"--allowed-hosts" in both
        # RFC 9112 lets a client send the absolute form to an origin server; this server's own name is served
        own = _raw(port, f"GET http://127.0.0.1:{port}/api/traces HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                         "Connection: close\r\n\r\n".encode())
        assert own.startswith(b"HTTP/1.1 200 ") and b"application/x-ndjson" in own


@pytest.mark.parametrize(("origin", "served"), [
    ("https://{host}:{port}", False),  # the campaign's: the right host and port, the wrong scheme
    ("http://{host}:{port}", True),
    ("http://localhost:{port}", True),  # the loopback names are one host
    ("http://[::1]:{port}", True),
    ("http://localhost:1", False),
    ("http://{host}", False),  # port 80
    ("http://attacker.example:{port}", False),
    ("ftp://{host}:{port}", False),
    ("http://{host}:notaport", False),
])
def test_origins_are_compared_by_scheme_host_and_port(chdb_store: Any, tmp_path: Path, origin: str,
                                                      served: bool) -> None:
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        port = url.rsplit(":", 1)[1]
        sent = origin.format(host="127.0.0.1", port=port)
        otlp = _otlp(url, {"origin": sent})
        audit = httpx.post(f"{url}/api/audit", json={"stages": "nope"}, headers={"origin": sent})
    if served:
        assert otlp.status_code == 200, otlp.text
        assert audit.status_code == 400 and "stages" in audit.json()["error"]  # checked, not refused
    else:
        for r in (otlp, audit):
            assert r.status_code == 403 and "cross-origin" in r.json()["error"], (sent, r.text)


def test_a_declared_name_is_this_servers_origin_behind_a_proxy(chdb_store: Any, tmp_path: Path) -> None:
    with running(chdb_store, str(tmp_path / "spool"), allowed_hosts=("collector.example",)) as (url, _):
        # the browser saw https://collector.example; the proxy forwards to this server over http
        proxied = _otlp(url, {"host": "collector.example", "origin": "https://collector.example"})
        foreign = _otlp(url, {"host": "collector.example", "origin": "https://attacker.example"})
    assert proxied.status_code == 200
    assert foreign.status_code == 403


def _set_cookies(response: httpx.Response) -> list[str]:
    return response.headers.get_list("set-cookie")


def test_every_review_cookie_is_samesite_strict(chdb_store: Any, tmp_path: Path) -> None:
    _, token = auth.add_reviewer(chdb_store, "sam", tenant=f"ss-{uuid.uuid4().hex[:6]}")
    with running(chdb_store, str(tmp_path / "spool")) as (url, _), httpx.Client(follow_redirects=False) as client:
        page = client.get(f"{url}/review/login")
        nonce = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert nonce
        login = client.post(f"{url}/review/login", data={"csrf_token": nonce.group(1), "token": token,
                                                           "next": "/review/"})
        assert login.status_code == 303
        home = client.get(f"{url}/review/", headers={"accept": "text/html"})
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', home.text)
        assert csrf
        logout = client.post(f"{url}/review/logout", data={"csrf_token": csrf.group(1)})
        assert logout.status_code == 303
    cookies = _set_cookies(page) + _set_cookies(login) + _set_cookies(logout)
    # the login nonce set and deleted, the session set, and the session deleted at both paths
    assert len(cookies) == 5, cookies
    deleted = [c for c in cookies if "max-age=0" in c.lower()]
    assert len(deleted) == 3 and any(c.startswith("ragtrace_review_login=") for c in deleted)
    for cookie in cookies:
        attributes = [a.strip().lower() for a in cookie.split(";")[1:]]
        assert "samesite=strict" in attributes and "httponly" in attributes, cookie
