"""The review UI inside the real collector app: spans in over OTLP, reviewed through /review."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from ragtrace_cli.server import build_app
from ragtrace_collector.settings import CollectorSettings
from ragtrace_review import auth
from ragtrace_review.queues import enqueue
from ragtrace_store import Store
from tests.otlp_builders import Doc, TraceSpec, request

from .rows import HOSTILE, label_record, write_labels


def _wait_for(store: Store, tenant: str, trace_id: str) -> None:
    deadline = time.monotonic() + 20
    while not list(store.read_traces(tenant=tenant, trace_ids=[trace_id])):
        assert time.monotonic() < deadline, "the collector never wrote the trace"
        time.sleep(0.05)


def test_trace_ingested_by_the_collector_is_reviewable(store: Store, tenant: str, tmp_path: Path,
                                                        tmp_path_factory: Any) -> None:
    otlp_token = "otlp-" + tenant
    settings = CollectorSettings(store=store.location, spool_dir=str(tmp_path / "spool"), spool_fsync=False,
                                 batch_interval=0.05, tokens={otlp_token: tenant}, review_secret="s")
    docs = [Doc("a", "Water boils at 100 °C at sea level.", 0.9), Doc("b", HOSTILE, 0.8),
            Doc("c", "Ice melts at 0 °C.", 0.7)]
    trace = TraceSpec(query="when does water boil?", answer="At 100 °C.", query_id="q-boil", retrieved=docs,
                      reranked=[docs[2], docs[0], docs[1]], top_k=2)
    app = build_app(settings, store)
    with TestClient(app, follow_redirects=False) as client:
        body = request(trace.spans()).SerializeToString()
        r = client.post("/v1/traces", content=body, headers={"content-type": "application/x-protobuf",
                                                             "authorization": f"Bearer {otlp_token}"})
        assert r.status_code == 200, r.text
        _wait_for(store, tenant, trace.trace_id)
        write_labels(store, tenant, [label_record(trace.trace_id, "fabrication",
                                                  claims=[("Water boils at 100 °C.", "entailed", "a")])])
        enqueue(store, "ingested", None, per_mode=5, reviewers=1, tenant=tenant)
        _, token = auth.add_reviewer(store, "kim", tenant=tenant)
        bearer = {"authorization": f"Bearer {token}", "accept": "text/html"}
        # the OTLP token is not a reviewer token
        assert client.get("/review/api/queues", headers={"authorization": f"Bearer {otlp_token}"}).status_code == 401
        url = client.get("/review/queues/ingested/next", headers=bearer).headers["location"]
        page = client.get(url, headers=bearer)
        assert page.status_code == 200
        html = page.text
        assert "when does water boil?" in html and "Water boils at 100 °C at sea level." in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and HOSTILE not in html
        # reranker: c moved from rank 3 to 1, b from 2 to 3; context = the top 2 (c, a)
        assert "▲ 2" in html and "▼ 1" in html
        assert 'href="#passage-2">evidence: a' in html
