"""The collector over real OTLP/HTTP on loopback, writing to the real engine (embedded chDB)."""

from __future__ import annotations

import gzip
import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from ragtrace import semconv as sc
from tests import otlp_builders as T

from ._server import running
from .test_otlp import _otlp_json

PB = {"content-type": "application/x-protobuf"}


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def _post(url: str, req: Any, token: str | None = None, *, json: bool = False, gz: bool = False) -> httpx.Response:
    headers = {"content-type": "application/json" if json else "application/x-protobuf"}
    body = _otlp_json(req) if json else req.SerializeToString()
    if gz:
        body = gzip.compress(body)
        headers["content-encoding"] = "gzip"
    if token:
        headers["authorization"] = f"Bearer {token}"
    return httpx.post(f"{url}/v1/traces", content=body, headers=headers, timeout=30)


def _count(store: Any, table: str, tenant: str) -> int:
    return int(store.query_rows(f"SELECT count() FROM {store.table(table)} FINAL WHERE tenant = {{t:String}}",
                                {"t": tenant})[0][0])


def test_protobuf_json_and_gzip_end_to_end(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()
    docs = T.corpus(40, size=300)
    traces = [T.standard_trace(docs, i, gold=[docs[i].id]) for i in range(3)]
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        assert _post(url, T.request(traces[0].spans(), release="r-e2e"), "tok").status_code == 200
        r = _post(url, T.request(traces[1].spans(), release="r-e2e"), "tok", json=True)
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        assert _post(url, T.request(traces[2].spans(), release="r-e2e"), "tok", gz=True).status_code == 200
        assert app.state.writer.flush(30)
        listed = httpx.get(f"{url}/api/traces", params={"release": "r-e2e"},
                           headers={"authorization": "Bearer tok"}).text.splitlines()
        shown = httpx.get(f"{url}/api/traces/{traces[1].trace_id}", headers={"authorization": "Bearer tok"}).json()
    got = {r.trace_id: r for r in chdb_store.read_traces(tenant=tenant, with_content=True)}
    assert set(got) == {t.trace_id for t in traces}
    for t in traces:
        rec = got[t.trace_id]
        assert (rec.query, rec.answer, rec.release, rec.service) == (t.query, t.answer, "r-e2e", "svc")
        assert [d.id for d in rec.retrieved] == [d.id for d in t.retrieved]
        assert [d.rank for d in rec.reranked] == list(range(20))
        assert [d.id for d in rec.context] == [d.id for d in t.reranked[:5]] and not rec.context_derived
        assert rec.gold_ids == tuple(t.gold)
        assert rec.context[0].content == t.reranked[0].content
    assert {orjson.loads(line)["trace_id"] for line in listed} == set(got)
    assert shown["context"][0]["content"] == traces[1].reranked[0].content
    assert _count(chdb_store, "spans", tenant) == 12 and _count(chdb_store, "documents", tenant) == 3 * 65


def test_split_out_of_order_and_late_spans(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()
    docs = T.corpus(25, size=100)
    tr = T.standard_trace(docs, 1)
    root, retr, rerank, gen = tr.spans()
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}) as (url, app):
        # children first, in two requests; the trace is not a query until its root arrives
        assert _post(url, T.request([gen]), "k").status_code == 200
        assert _post(url, T.request([retr]), "k").status_code == 200
        assert app.state.writer.flush(30)
        assert list(chdb_store.read_traces(tenant=tenant)) == []
        assert _post(url, T.request([root]), "k").status_code == 200
        assert app.state.writer.flush(30)
        (rec,) = chdb_store.read_traces(tenant=tenant)
        assert len(rec.retrieved) == 20 and rec.reranked == () and len(rec.context) == 5
        # a late span still lands
        assert _post(url, T.request([rerank]), "k").status_code == 200
        assert app.state.writer.flush(30)
    (rec,) = chdb_store.read_traces(tenant=tenant)
    assert [d.id for d in rec.reranked] == [d.id for d in tr.reranked]


def test_openinference_only_traces_derive_the_context(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()
    docs = T.corpus(25, size=100)
    with_rr = T.standard_trace(docs, 2, openinference_only=True, top_k=3)
    without_rr = T.standard_trace(docs, 3, openinference_only=True, with_reranker=False)
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}) as (url, app):
        assert _post(url, T.request(with_rr.spans() + without_rr.spans()), "k").status_code == 200
        assert app.state.writer.flush(30)
    got = {r.trace_id: r for r in chdb_store.read_traces(tenant=tenant)}
    a, b = got[with_rr.trace_id], got[without_rr.trace_id]
    assert a.context_derived and [d.id for d in a.context] == [d.id for d in with_rr.reranked[:3]]
    assert b.context_derived and [d.id for d in b.context] == [d.id for d in without_rr.retrieved]
    assert a.answer == with_rr.answer


def test_tenants_never_see_each_other(chdb_store: Any, tmp_path: Path) -> None:
    ta, tb = _tenant(), _tenant()
    docs = T.corpus(25, size=100)
    tra, trb = T.standard_trace(docs, 4), T.standard_trace(docs, 5)
    with running(chdb_store, str(tmp_path / "spool"), tokens={"A": ta, "B": tb}) as (url, app):
        assert _post(url, T.request(tra.spans()), "A").status_code == 200
        assert _post(url, T.request(trb.spans()), "B").status_code == 200
        assert _post(url, T.request(trb.spans())).status_code == 401
        r = _post(url, T.request(trb.spans()), "wrong")
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert app.state.writer.flush(30)

        def listed(token: str | None) -> httpx.Response:
            headers = {"authorization": f"Bearer {token}"} if token else {}
            return httpx.get(f"{url}/api/traces", headers=headers)

        assert [orjson.loads(x)["trace_id"] for x in listed("A").text.splitlines()] == [tra.trace_id]
        assert [orjson.loads(x)["trace_id"] for x in listed("B").text.splitlines()] == [trb.trace_id]
        assert listed(None).status_code == 401
        auth_a = {"authorization": "Bearer A"}
        assert httpx.get(f"{url}/api/traces/{trb.trace_id}", headers=auth_a).status_code == 404
        assert httpx.get(f"{url}/api/traces/{tra.trace_id}", headers=auth_a).status_code == 200
        assert httpx.post(f"{url}/api/audit", headers={"authorization": "Bearer nope"}, json={}).status_code == 401
    assert _count(chdb_store, "spans", ta) == 4 and _count(chdb_store, "spans", tb) == 4


def test_status_codes_health_and_metrics(chdb_store: Any, tmp_path: Path) -> None:
    with running(chdb_store, str(tmp_path / "spool"), max_body_bytes=4096) as (url, app):
        assert httpx.post(f"{url}/v1/traces", content=b"x", headers={"content-type": "text/plain"}).status_code == 415
        big = httpx.post(f"{url}/v1/traces", content=b"\0" * 5000, headers=PB)
        assert big.status_code == 413
        bad = httpx.post(f"{url}/v1/traces", content=b"\x0a\x05\x12\x03", headers={"content-type": "application/json"})
        assert bad.status_code == 400 and "JSON" in bad.json()["message"]
        req = T.request([T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "ok", {})])
        broken = req.resource_spans[0].scope_spans[0].spans.add()
        broken.trace_id = b"short"
        ok = _post(url, req)
        assert ok.status_code == 200
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        resp = ExportTraceServiceResponse.FromString(ok.content)
        assert resp.partial_success.rejected_spans == 1 and "trace_id" in resp.partial_success.error_message
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
        ready = httpx.get(f"{url}/readyz")
        assert ready.status_code == 200 and ready.json()["ready"] is True
        assert app.state.writer.flush(30)
        text = httpx.get(f"{url}/metrics").text
    assert 'ragtrace_requests_total{code="415"} 1' in text
    assert 'ragtrace_requests_total{code="413"} 1' in text
    assert "ragtrace_spans_rejected_total 1" in text
    assert 'ragtrace_rows_written_total{table="spans"}' in text
    assert "ragtrace_spool_bytes" in text and "ragtrace_store_insert_seconds_count" in text


def test_retries_and_duplicate_span_ids_never_double_count(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()
    docs = T.corpus(25, size=100)
    tr = T.standard_trace(docs, 6)
    req = T.request(tr.spans())
    doubled = T.request(tr.spans() + tr.spans())  # the same spans twice in one request
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}) as (url, app):
        for _ in range(3):
            assert _post(url, req, "k").status_code == 200
        assert _post(url, doubled, "k", gz=True).status_code == 200
        assert app.state.writer.flush(30)
    assert _count(chdb_store, "spans", tenant) == 4
    assert _count(chdb_store, "documents", tenant) == 65
    assert _count(chdb_store, "queries", tenant) == 1
    assert len(list(chdb_store.read_traces(tenant=tenant))) == 1


def test_two_different_copies_of_a_span_in_one_request_do_not_mix(chdb_store: Any, tmp_path: Path) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    tenant = _tenant()
    docs = T.corpus(12, size=60)
    tr = T.TraceSpec(query="dup", retrieved=docs[:6], reranked=docs[:6], top_k=3)
    spans = tr.spans()
    retriever = spans[1]
    # the retriever's span again, same ids, with two other documents (a sender that reuses a span id)
    other = T.SpanSpec(retriever.trace_id, retriever.span_id, "retrieve",
                       {sc.SPAN_KIND: "RETRIEVER", **T.doc_attrs(sc.RETRIEVAL_DOCUMENTS, docs[10:12])},
                       parent=retriever.parent)
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}) as (url, app):
        resp = _post(url, T.request([*spans, other]), "k")
        assert resp.status_code == 200
        assert app.state.writer.flush(30)
    partial = ExportTraceServiceResponse.FromString(resp.content).partial_success
    assert partial.rejected_spans == 1 and "the later copy is rejected" in partial.error_message
    (rec,) = chdb_store.read_traces(tenant=tenant)
    # before: a mix of both copies (four documents of one, two of the other) read as one complete list
    assert [d.id for d in rec.retrieved] == [d.id for d in docs[:6]]


def test_backpressure_answers_429_with_retry_after(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()
    docs = T.corpus(25, size=100)
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}, queue_max_bytes=1000) as (url, app):
        # Hold the store so the writer cannot drain: the first request fills the queue.
        with chdb_store.lock:
            assert _post(url, T.request(T.standard_trace(docs, 7).spans()), "k").status_code == 200
            r = _post(url, T.request(T.standard_trace(docs, 8).spans()), "k")
            assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
            assert b"RAGTRACE_QUEUE_MAX_BYTES" in r.content  # a google.rpc.Status in protobuf
        assert app.state.writer.flush(30)
        assert _post(url, T.request(T.standard_trace(docs, 8).spans()), "k").status_code == 200
        assert app.state.writer.flush(30)
    assert _count(chdb_store, "queries", tenant) == 2


def test_annotations_attach_gold_and_feedback(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()
    docs = T.corpus(25, size=100)
    tr = T.standard_trace(docs, 9)
    gold = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "gold",
                      {sc.ANNOTATES_TRACE_ID: tr.trace_id, sc.ANNOTATION_KIND: "gold",
                       sc.GOLD_DOCUMENT_IDS: [docs[3].id]})
    fb = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "fb",
                    {sc.ANNOTATES_TRACE_ID: tr.trace_id, sc.ANNOTATION_KIND: "feedback", sc.FEEDBACK_SCORE: 1.0})
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}) as (url, app):
        assert _post(url, T.request([*tr.spans(), gold, fb]), "k").status_code == 200
        assert app.state.writer.flush(30)
    (rec,) = chdb_store.read_traces(tenant=tenant)
    assert rec.gold_ids == (docs[3].id,)
    rows = chdb_store.query_rows(f"SELECT trace_id, score FROM {chdb_store.table('feedback')} FINAL "
                                 "WHERE tenant = {t:String}", {"t": tenant})
    assert rows == [(tr.trace_id, 1.0)]


def test_gold_ids_of_other_types_are_stored_or_told_to_the_sender(chdb_store: Any, tmp_path: Path) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    tenant = _tenant()
    docs = T.corpus(5, size=60)
    traces, spans = {}, []
    # an integer id alone (a numeric primary key), integers in an array, a boolean, a double
    for name, gold in (("int", 17), ("ints", [17, 42]), ("bool", True), ("double", 0.5)):
        tr = T.TraceSpec(query=name, retrieved=docs, reranked=docs, top_k=2)
        tr_spans = tr.spans()
        tr_spans[0].attrs[sc.GOLD_DOCUMENT_IDS] = gold
        traces[name] = tr
        spans += tr_spans
    late = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "gold",
                      {sc.ANNOTATES_TRACE_ID: traces["bool"].trace_id, sc.ANNOTATION_KIND: "gold",
                       sc.GOLD_DOCUMENT_IDS: 99})
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}) as (url, app):
        resp = _post(url, T.request([*spans, late]), "k")
        assert resp.status_code == 200
        assert app.state.writer.flush(30)
    partial = ExportTraceServiceResponse.FromString(resp.content).partial_success
    # nothing rejected (the spans are stored), but the sender hears which gold was not
    assert partial.rejected_spans == 0
    assert f"{sc.GOLD_DOCUMENT_IDS} must be an array of document ids" in partial.error_message
    assert "got a boolean" in partial.error_message and "got a double" in partial.error_message
    got = {r.query: r.gold_ids for r in chdb_store.read_traces(tenant=tenant)}
    # before: a single integer id was no gold at all, and nobody was told about any of them
    assert got == {"int": ("17",), "ints": ("17", "42"), "bool": ("99",), "double": ()}


def test_a_feedback_score_outside_its_range_is_told_to_the_sender(chdb_store: Any, tmp_path: Path) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    tenant = _tenant()
    tr = T.standard_trace(T.corpus(25, size=60), 3)
    feedback = [T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "fb",
                           {sc.ANNOTATES_TRACE_ID: tr.trace_id, sc.ANNOTATION_KIND: "feedback",
                            sc.FEEDBACK_SCORE: score, sc.FEEDBACK_COMMENT: comment})
                for score, comment in ((7.0, "seven stars"), ("0.5", "as text"), (0.25, "fine"))]
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}) as (url, app):
        resp = _post(url, T.request([*tr.spans(), *feedback]), "k")
        assert resp.status_code == 200
        assert app.state.writer.flush(30)
    partial = ExportTraceServiceResponse.FromString(resp.content).partial_success
    assert "ragtrace.feedback.score must be a number in [0, 1]" in partial.error_message
    assert "got '7.0'" in partial.error_message and "got '0.5'" in partial.error_message
    rows = chdb_store.query_rows(f"SELECT comment, score FROM {chdb_store.table('feedback')} FINAL "
                                 "WHERE tenant = {t:String} ORDER BY comment", {"t": tenant})
    # before: 7.0 was stored as a score the SDK's contract ([0, 1]) never allows, and neither was told
    assert rows == [("as text", None), ("fine", 0.25), ("seven stars", None)]


@pytest.mark.parametrize("options", [b"[1]", b"{bad"])
def test_audit_route_validates_its_body(chdb_store: Any, tmp_path: Path, options: bytes) -> None:
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        r = httpx.post(f"{url}/api/audit", content=options, headers={"content-type": "application/json"})
    assert r.status_code in (400, 501)
    assert "error" in r.json()


def test_audit_route_and_background_audit_run_per_tenant(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()  # no traces: the audit runs and labels nothing, so no model is loaded
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}, audit_every=0.2,
                 audit_sample=3) as (url, app):
        auth = {"authorization": "Bearer k"}
        ok = httpx.post(f"{url}/api/audit", json={"sample": 2}, headers=auth, timeout=120)
        assert ok.status_code == 200 and ok.json()["n"] == 0 and ok.json()["filters"]["tenant"] == tenant
        # the token decides the tenant: asking for another one is refused, not silently ignored
        other = httpx.post(f"{url}/api/audit", json={"sample": 2, "tenant": "someone-else"}, headers=auth, timeout=60)
        assert other.status_code == 400 and "tenant" in other.json()["error"]
        bad = httpx.post(f"{url}/api/audit", json={"no_such_option": 1}, headers=auth, timeout=60)
        assert bad.status_code == 400 and "no_such_option" in bad.json()["error"]
        metrics = app.state.metrics
        deadline = time.monotonic() + 60
        while metrics.get("ragtrace_audit_runs_total", outcome="ok") < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert metrics.get("ragtrace_audit_runs_total", outcome="ok") >= 1
    assert metrics.get("ragtrace_audit_runs_total", outcome="error") == 0


def test_a_full_spool_answers_503_and_acknowledges_nothing(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()
    docs = T.corpus(25, size=100)
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}, spool_max_bytes=2000) as (url, app):
        r = _post(url, T.request(T.standard_trace(docs, 1).spans()), "k", json=True)
        assert r.status_code == 503 and int(r.headers["retry-after"]) > 0
        assert "RAGTRACE_SPOOL_MAX_BYTES" in r.json()["message"]
        assert app.state.writer.flush(10)
    assert _count(chdb_store, "spans", tenant) == 0


def test_ingest_worker_processes_give_the_same_answers_and_rows(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()
    docs = T.corpus(25, size=100)
    trs = [T.standard_trace(docs, i, gold=[docs[i].id]) for i in range(3)]
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}, ingest_workers=1) as (url, app):
        assert _post(url, T.request(trs[0].spans()), "k").status_code == 200
        assert _post(url, T.request(trs[1].spans()), "k", json=True, gz=True).status_code == 200
        bad = httpx.post(f"{url}/v1/traces", content=b"\x0a\x05\x12\x03", headers={**PB, "authorization": "Bearer k"})
        assert bad.status_code == 400 and b"malformed" in bad.content  # the worker's refusal crosses over
        req = T.request(trs[2].spans())
        req.resource_spans[0].scope_spans[0].spans.add().trace_id = b"short"
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        ok = _post(url, req, "k")
        assert ExportTraceServiceResponse.FromString(ok.content).partial_success.rejected_spans == 1
        assert app.state.writer.flush(30)
    got = {r.trace_id: r for r in chdb_store.read_traces(tenant=tenant, with_content=True)}
    assert set(got) == {t.trace_id for t in trs}
    for t in trs:
        assert [d.id for d in got[t.trace_id].context] == [d.id for d in t.reranked[:5]]
        assert got[t.trace_id].gold_ids == tuple(t.gold)


def test_gold_attached_by_query_id_reaches_every_trace_of_that_query(chdb_store: Any, tmp_path: Path) -> None:
    tenant = _tenant()
    docs = T.corpus(25, size=100)
    tr = T.standard_trace(docs, 9)
    query_id = tr.query_id
    gold = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "gold",
                      {sc.ANNOTATION_KIND: "gold", sc.QUERY_ID: query_id, sc.GOLD_DOCUMENT_IDS: [docs[5].id]})
    with running(chdb_store, str(tmp_path / "spool"), tokens={"k": tenant}) as (url, app):
        assert _post(url, T.request([*tr.spans(), gold]), "k").status_code == 200
        assert app.state.writer.flush(30)
    (rec,) = chdb_store.read_traces(tenant=tenant)
    assert rec.query_id == query_id
    assert rec.gold_ids == (docs[5].id,)
