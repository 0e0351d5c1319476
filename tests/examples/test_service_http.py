"""The example service under real HTTP, with the SDK exporting over OTLP to a real `ragtrace serve`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import ragtrace
from ragtrace_examples.components import MiniLMEncoder
from ragtrace_examples.corpus import generate_corpus
from ragtrace_examples.faults import Fault, candidate_release
from ragtrace_examples.pipeline import RagPipeline
from ragtrace_examples.rag_service import TRACE_ID_HEADER, create_app, serve_in_thread

SERVICE = "example-svc-http-test"


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    return MiniLMEncoder()


@pytest.fixture()
def traced(example_collector: str) -> Iterator[str]:
    ragtrace.configure(endpoint=example_collector, service=SERVICE, release="t1", schedule_delay_ms=100)
    try:
        yield example_collector
    finally:
        ragtrace.shutdown()


def _stored(collector: str, trace_id: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ragtrace.force_flush(5)
        resp = httpx.get(f"{collector}/api/traces/{trace_id}", timeout=30)
        if resp.status_code == 200:
            data: dict[str, Any] = resp.json()
            if data["context"] and data["answer"] is not None:
                return data
        time.sleep(0.3)
    raise AssertionError(f"trace {trace_id} did not reach the collector in {timeout}s")


def test_service_answers_and_its_traces_arrive_complete(traced: str, encoder: MiniLMEncoder) -> None:
    corpus = generate_corpus(40, seed=11)
    # one question of each injected fault, so the spans of the faulty stages are checked too
    release = candidate_release(corpus, "t1", rates={Fault.RERANK_DISTRACTOR: 0.05, Fault.ALTER_FACTS: 0.05},
                                seed=1)
    pipeline = RagPipeline(corpus, release, encoder=encoder)
    url, stop = serve_in_thread(create_app(pipeline))
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            assert client.get("/healthz").json() == {"status": "ok", "release": "t1"}
            assert client.post("/ask", json={"question": "x", "query_id": "nope"}).status_code == 404
            assert client.post("/ask", json={"question": ""}).status_code == 422
            asked = [q for q in corpus.questions if release.fault(q.id) is not None][:2] + list(corpus.questions[:2])
            responses = []
            for q in asked:
                resp = client.post("/ask", json={"question": q.question, "query_id": q.id})
                assert resp.status_code == 200, resp.text
                body = resp.json()
                assert body["trace_id"] and resp.headers[TRACE_ID_HEADER] == body["trace_id"]
                assert body["release"] == "t1" and body["query_id"] == q.id
                assert len(body["document_ids"]) == 3 and len(body["candidate_ids"]) >= 3
                responses.append((q, body))
            free = client.post("/ask", json={"question": asked[0].question}).json()
    finally:
        stop()

    for q, body in responses:
        stored = _stored(traced, body["trace_id"])
        assert stored["service"] == SERVICE and stored["release"] == "t1" and stored["query_id"] == q.id
        assert stored["query"] == q.question and stored["answer"] == body["answer"]
        assert [d["id"] for d in stored["retrieved"]] == body["candidate_ids"]
        assert [d["id"] for d in stored["context"]] == body["document_ids"]
        assert stored["context_derived"] is False
        assert stored["gold_ids"] == list(pipeline.gold[q.id])
        gold = pipeline.gold[q.id][0]
        if release.fault(q.id) is Fault.RERANK_DISTRACTOR:
            assert gold not in body["document_ids"] and gold in body["candidate_ids"]
        else:
            assert body["document_ids"][0] == gold
        if release.fault(q.id) is Fault.ALTER_FACTS:
            assert body["answer"] != q.reference
        elif release.fault(q.id) is None:
            assert body["answer"] == q.reference
        context_text = [d["content"] for d in stored["context"]]
        assert all(context_text)
    # a question without a query id is traced too, without gold
    free_stored = _stored(traced, free["trace_id"])
    assert free_stored["query_id"] == "" and free_stored["gold_ids"] == []
