"""A review decision on a label without a generation part is saved.

`ragtrace audit --stages retrieval` writes labels whose generation is null; saving a decision on
such an item answered 500, so those queues could not be finished. The whole path through a real
`ragtrace serve` app on loopback: OTLP ingest → `POST /api/audit` with ``stages: retrieval`` → the
review JSON API fills a queue → a reviewer logs in, opens the item and saves a decision (the form
the page renders, with its CSRF token) → the decision is stored.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import httpx

from ragtrace_review import auth
from ragtrace_review.queues import list_decisions
from tests import otlp_builders as T
from tests.audit.fixtures import PASSAGES, QUERY
from tests.collector._server import running


def _field(html: str, name: str) -> list[str]:
    return re.findall(rf'name="{name}" value="([^"]*)"', html)


def test_a_decision_on_a_retrieval_only_label_is_saved(chdb_store: Any, tmp_path: Path) -> None:
    tenant = f"ro-{uuid.uuid4().hex[:8]}"
    docs = [T.Doc(d, PASSAGES[d], 1.0 - i / 10) for i, d in enumerate(("freeze", "mercury", "gold"))]
    spec = T.TraceSpec(query=QUERY, answer="It boils at 100 degrees.", retrieved=docs, reranked=docs, top_k=2,
                       gold=["gold"])  # the gold passage is retrieved but ranked out of the context
    _, reviewer_token = auth.add_reviewer(chdb_store, "rory", tenant=tenant)
    with running(chdb_store, str(tmp_path / "spool"), tokens={"otlp": tenant}, review_secret="s") as (url, app):
        r = httpx.post(f"{url}/v1/traces", content=T.request(spec.spans()).SerializeToString(),
                       headers={"content-type": "application/x-protobuf", "authorization": "Bearer otlp"})
        assert r.status_code == 200 and app.state.writer.flush(30)
        audit = httpx.post(f"{url}/api/audit", json={"stages": "retrieval", "relevance_labeller": "none",
                                                     "return_records": True},
                           headers={"authorization": "Bearer otlp"}, timeout=120)
        assert audit.status_code == 200, audit.text
        (record,) = audit.json()["records"]
        assert record["generation"] is None and record["failure_mode"] == "rank_inversion"
        queued = httpx.post(f"{url}/review/api/queues/ro/enqueue", json={"reviewers": 1},
                            headers={"authorization": f"Bearer {reviewer_token}"})
        assert queued.status_code == 200 and queued.json()["candidates"] == 1, queued.text

        with httpx.Client(base_url=url, follow_redirects=False) as browser:
            login_page = browser.get("/review/login", headers={"accept": "text/html"}).text
            (nonce,) = _field(login_page, "csrf_token")
            assert browser.post("/review/login", data={"csrf_token": nonce, "token": reviewer_token,
                                                       "next": "/review/"}).status_code == 303
            item_url = browser.get("/review/queues/ro/next", headers={"accept": "text/html"}).headers["location"]
            assert spec.trace_id in item_url
            page = browser.get(item_url, headers={"accept": "text/html"})
            assert page.status_code == 200
            csrf = _field(page.text, "csrf_token")[0]
            saved = browser.post(item_url, data={"csrf_token": csrf, "failure_mode": "rank_inversion",
                                                 "shown_doc": _field(page.text, "shown_doc"),
                                                 "relevant": ["gold"], "note": "gold ranked out"})
    assert saved.status_code == 303, saved.text[:2000]
    assert saved.headers["location"] == "/review/queues/ro/next"
    (decision,) = list_decisions(chdb_store, tenant=tenant, queue="ro")
    assert decision.trace_id == spec.trace_id and decision.failure_mode == "rank_inversion"
    assert decision.note == "gold ranked out"
