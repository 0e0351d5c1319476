"""`POST /api/audit` runs only what the server's configuration enables.

Each known attack against a real `ragtrace serve` app on loopback: a ``py:MODULE:FUNCTION``
labeller (the server imported and called it), ``py:sys:exit`` (SystemExit in a worker), an
``llm:MODEL@URL`` labeller (the tenant's passages posted to a URL of the caller's choosing), and
options that are not documented. The cross-site form that delivered these without a credential is
in test_browser.py.
"""

from __future__ import annotations

import http.server
import os
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragtrace_evaluator.audit.run import AuditError, run_audit
from tests import otlp_builders as T
from tests.audit.fixtures import PASSAGES, QUERY
from tests.collector._server import running

CANARY = "tests.security.canary"
JSON = {"content-type": "application/json"}


def _tenant() -> str:
    return f"sec-{uuid.uuid4().hex[:10]}"


def _one_trace(url: str, token: str | None = None) -> str:
    """Send one trace with passages over OTLP; returns its trace id once the collector has it."""
    docs = [T.Doc(d, PASSAGES[d], 1.0 - i / 10) for i, d in enumerate(("gold", "freeze", "mercury"))]
    spec = T.TraceSpec(query=QUERY, answer="Water boils at 100 degrees.", retrieved=docs, reranked=docs,
                       top_k=2, gold=["gold"])
    headers = {"content-type": "application/x-protobuf", **({"authorization": f"Bearer {token}"} if token else {})}
    r = httpx.post(f"{url}/v1/traces", content=T.request(spec.spans()).SerializeToString(), headers=headers)
    assert r.status_code == 200, r.text
    return spec.trace_id


class _Listener:
    """A loopback HTTP server that records every request it gets (the 'judge' a caller points at)."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                owner.requests.append(self.rfile.read(n).decode("utf-8", "replace"))
                self.send_response(500)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    lst = _Listener()
    try:
        yield lst
    finally:
        lst.close()


def test_a_request_cannot_make_the_server_import_a_module(chdb_store: Any, tmp_path: Path) -> None:
    assert CANARY not in sys.modules
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        _one_trace(url)
        for option in ("labeller", "relevance_labeller"):
            r = httpx.post(f"{url}/api/audit", json={option: f"py:{CANARY}:make"}, timeout=120)
            assert r.status_code == 400, r.text
            assert "not enabled on this server" in r.json()["error"] and "offline" in r.json()["error"]
        # probes with visible effects if run: a directory made by tempfile, and SystemExit in a worker
        before = set(os.listdir(tmp_path))
        for name in ("py:tempfile:mkdtemp", "py:sys:exit", "py:os:system"):
            r = httpx.post(f"{url}/api/audit", json={"labeller": name, "stages": "all"}, timeout=60)
            assert r.status_code == 400 and "not enabled" in r.json()["error"], (name, r.text)
        assert httpx.get(f"{url}/healthz").status_code == 200  # the server is still there
    assert CANARY not in sys.modules, "the server imported the module a request named"
    assert set(os.listdir(tmp_path)) == before


def test_a_request_cannot_point_the_judge_at_a_url(chdb_store: Any, tmp_path: Path, listener: _Listener) -> None:
    tenant = _tenant()
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}) as (url, app):
        _one_trace(url, "k")
        assert app.state.writer.flush(30)
        r = httpx.post(f"{url}/api/audit", json={"labeller": f"llm:any-model@{listener.url}",
                                                 "relevance_labeller": "none"},
                       headers={"authorization": "Bearer k"}, timeout=120)
    assert r.status_code == 400 and "not enabled on this server" in r.json()["error"]
    assert listener.requests == [], "the server sent the tenant's passages to the caller's URL"


def test_only_the_configured_labellers_run(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()
    plugin = "py:tests.audit.fixtures:make_grounding_labeller"
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}, audit_labellers=(plugin,)) as (url, app):
        trace_id = _one_trace(url, "k")
        assert app.state.writer.flush(30)
        auth = {"authorization": "Bearer k"}
        # the operator enabled exactly this one: the default "offline" is now refused too
        refused = httpx.post(f"{url}/api/audit", json={"relevance_labeller": "none"}, headers=auth, timeout=60)
        assert refused.status_code == 400 and plugin in refused.json()["error"]
        ok = httpx.post(f"{url}/api/audit", json={"labeller": plugin, "relevance_labeller": "none",
                                                  "return_records": True}, headers=auth, timeout=120)
    assert ok.status_code == 200, ok.text
    assert [r["trace_id"] for r in ok.json()["records"]] == [trace_id]
    assert ok.json()["records"][0]["generation"] is not None


@pytest.mark.parametrize(("body", "named"), [
    ({"per_trace": "/tmp/owned.jsonl"}, "per_trace"),
    ({"tenant": "someone-else"}, "tenant"),
    ({"grounding": {"kind": "x"}}, "grounding"),
    ({"progress": True}, "progress"),
    ({"sample": "5"}, "sample"),
    ({"sample": 0}, "sample"),
    ({"rate": 1.5}, "rate"),
    ({"batch_size": 10**9}, "batch_size"),
    ({"resume": "no"}, "resume"),
    ({"stages": "everything"}, "stages"),
    ({"service": "x" * 5000}, "service"),
    ({"labeller": "offline:extra"}, "labeller"),
])
def test_only_documented_options_with_valid_values(chdb_store: Any, tmp_path: Path, body: dict[str, Any],
                                                    named: str) -> None:
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        r = httpx.post(f"{url}/api/audit", json=body, timeout=60)
    assert r.status_code == 400, r.text
    assert named in r.json()["error"]


def test_the_options_the_cli_sends_are_accepted(chdb_store: Any, tmp_path: Path) -> None:
    # what `ragtrace audit --server` sends (commands/audit.py), on a tenant with no traces
    body = {"service": f"none-{uuid.uuid4().hex[:6]}", "release": "r", "since": "-1h", "until": "2100-01-01",
            "sample": 5, "stratify": "release", "shard": "0/2", "stages": "all", "labeller": "offline",
            "relevance_labeller": "offline", "resume": True, "batch_size": 16, "return_records": True}
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        r = httpx.post(f"{url}/api/audit", json=body, timeout=120)
        rate = httpx.post(f"{url}/api/audit", json={"service": body["service"], "rate": 1, "stages": "retrieval",
                                                    "relevance_labeller": "none"}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["n"] == 0 and r.json()["records"] == []
    assert rate.status_code == 200, rate.text


def test_a_factory_that_returns_no_labeller_stops_the_audit(chdb_store: Any) -> None:
    # the local CLI may load plug-ins; what they return is checked before anything is labelled
    with pytest.raises(AuditError, match="not a GroundingLabeller"):
        run_audit(chdb_store, tenant=_tenant(), labeller="py:tests.security.plugins:not_a_labeller")
    with pytest.raises(AuditError, match="not a RelevanceLabeller"):
        run_audit(chdb_store, tenant=_tenant(), stages="retrieval",
                  relevance_labeller="py:tests.security.plugins:not_a_labeller")
