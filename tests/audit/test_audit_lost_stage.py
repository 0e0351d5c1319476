"""A trace whose recorded context names documents no retrieval or rerank span holds — the retrieval
span never reached the collector — over real OTLP/HTTP into the real engine, then `run_audit`: it is
incomplete with the reason, never labelled off a pool read from its context."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx

from ragtrace_evaluator.audit.run import run_audit
from tests import otlp_builders as T
from tests.collector._server import running

PB = {"content-type": "application/x-protobuf"}


def test_a_context_no_retrieval_span_holds_is_incomplete_not_a_guessed_mode(chdb_store: Any,
                                                                            tmp_path: Path) -> None:
    tenant = f"lost-stage-{uuid.uuid4().hex[:8]}"
    docs = T.corpus(10, size=80)
    # retrieve -> rerank -> generate; the retrieval and rerank spans were lost on the way (a failed
    # export): only the root and the generation span, whose context is the reranked top 3, arrived
    lost = T.TraceSpec(query="lost", retrieved=docs[:6], reranked=docs[:6][::-1], top_k=3, gold=[docs[0].id])
    lost_spans = [s for s in lost.spans() if s.name in ("pipeline", "generate")]
    # the context holds a document the retriever never returned (a second retriever's span was lost)
    partial = T.TraceSpec(query="partial", retrieved=docs[:5], context=[docs[0], docs[9]], with_reranker=False,
                          gold=[docs[9].id])
    # beside them, a whole trace whose gold was not retrieved: a retrieval gap, labelled as one
    whole = T.TraceSpec(query="whole", retrieved=docs[:5], reranked=docs[:5], top_k=3, gold=[docs[8].id])
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        body = T.request(lost_spans + partial.spans() + whole.spans()).SerializeToString()
        resp = httpx.post(f"{url}/v1/traces", content=body, headers={**PB, "authorization": "Bearer tok"})
        assert resp.status_code == 200
        assert app.state.writer.flush(30)
    out = tmp_path / "labels.jsonl"
    report = run_audit(chdb_store, tenant=tenant, stages="retrieval", relevance_labeller=None, per_trace=out)
    got = {json.loads(line)["trace_id"]: json.loads(line) for line in out.read_text().splitlines()}
    assert set(got) == {lost.trace_id, partial.trace_id, whole.trace_id}
    # before: 'lost' was a retrieval_gap and 'partial' had its gold "in the pool", both read off C
    for trace, unheld in ((lost, "3 of its 3 documents"), (partial, f"1 of its 2 documents ({docs[9].id!r})")):
        rec = got[trace.trace_id]
        assert rec["failure_mode"] == "incomplete" and rec["gold_in_pool"] is None
        (reason,) = rec["incomplete_reasons"]
        assert reason.startswith("missing_stage: the context of span 'generate' names " + unheld)
        assert "no retrieval or rerank span of this trace holds" in reason
    assert got[whole.trace_id]["failure_mode"] == "retrieval_gap"
    assert report["incomplete"]["count"] == 2
