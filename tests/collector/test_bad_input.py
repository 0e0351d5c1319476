"""Bad input, property-based and by hand: a 4xx with a reason or stored safely; never a 500, never a
dead writer, never a corrupted store. Runs the real app (in-process ASGI) on the real engine."""

from __future__ import annotations

import gzip
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ragtrace import semconv as sc
from ragtrace_cli.server import build_app
from ragtrace_collector.settings import CollectorSettings
from tests import otlp_builders as T

TENANT = f"fuzz-{uuid.uuid4().hex[:8]}"
PB = {"content-type": "application/x-protobuf", "authorization": "Bearer fuzz"}
JS = {"content-type": "application/json", "authorization": "Bearer fuzz"}


@pytest.fixture(scope="module")
def client(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    spool = tmp_path_factory.mktemp("fuzz-spool")
    cfg = CollectorSettings(store=chdb_store.location, spool_dir=str(spool), spool_fsync=False,
                            tokens={"fuzz": TENANT}, batch_interval=0.05)
    with TestClient(build_app(cfg, chdb_store), raise_server_exceptions=False) as c:
        yield c
        # after everything below: the writer is alive and a normal request still lands
        writer = c.app.state.writer  # type: ignore[attr-defined]
        tr = T.standard_trace(T.corpus(25, size=50), 0)
        assert c.post("/v1/traces", content=T.request(tr.spans()).SerializeToString(), headers=PB).status_code == 200
        assert writer.flush(60) and writer._thread.is_alive()
        assert [r.trace_id for r in chdb_store.read_traces(tenant=TENANT, trace_ids=[tr.trace_id])] == [tr.trace_id]


def _ok_or_4xx(resp: Any) -> None:
    assert resp.status_code < 500, resp.content[:300]
    if resp.status_code >= 400:
        assert resp.content, "a refusal carries a reason"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=2000), json=st.booleans(), gz=st.booleans())
def test_random_bytes(client: TestClient, body: bytes, json: bool, gz: bool) -> None:
    headers = dict(JS if json else PB)
    if gz:
        headers["content-encoding"] = "gzip"
    _ok_or_4xx(client.post("/v1/traces", content=body, headers=headers))


def _any_values() -> st.SearchStrategy[AnyValue]:
    scalars = st.one_of(
        st.text(max_size=50).map(lambda s: AnyValue(string_value=s)),
        st.integers(min_value=-(2**63), max_value=2**63 - 1).map(lambda i: AnyValue(int_value=i)),
        st.floats(allow_nan=True, allow_infinity=True).map(lambda f: AnyValue(double_value=f)),
        st.booleans().map(lambda b: AnyValue(bool_value=b)),
        st.binary(max_size=20).map(lambda b: AnyValue(bytes_value=b)),
    )

    def arr(vals: list[AnyValue]) -> AnyValue:
        v = AnyValue()
        v.array_value.values.extend(vals)
        return v

    def kvl(items: dict[str, AnyValue]) -> AnyValue:
        v = AnyValue()
        v.kvlist_value.values.extend(KeyValue(key=k, value=x) for k, x in items.items())
        return v

    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3).map(arr),
                                                         st.dictionaries(st.text(max_size=5), inner,
                                                                         max_size=3).map(kvl)), max_leaves=6)


_keys = st.one_of(
    st.text(max_size=30),
    st.sampled_from([sc.SPAN_KIND, sc.INPUT_VALUE, sc.OUTPUT_VALUE, sc.QUERY_ID, sc.GOLD_DOCUMENT_IDS,
                     sc.RERANKER_TOP_K, sc.ANNOTATES_TRACE_ID, sc.ANNOTATION_KIND, sc.FEEDBACK_SCORE,
                     sc.CONTENT_MODE]),
    st.builds(lambda p, i, f: f"{p}.{i}.document.{f}", st.sampled_from(sc.DOCUMENT_PREFIXES),
              st.one_of(st.integers(min_value=0, max_value=50), st.integers(min_value=2**32 - 2, max_value=2**70),
                        st.just(-1)),
              st.sampled_from(["id", "score", "content", "metadata", "content_hash", "bogus"])),
)


@st.composite
def _requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    trace_ids = draw(st.lists(st.binary(min_size=16, max_size=16), min_size=1, max_size=3))
    for _ in range(draw(st.integers(1, 2))):
        rs = req.resource_spans.add()
        rs.resource.attributes.extend(
            KeyValue(key=k, value=v) for k, v in draw(st.dictionaries(
                st.sampled_from([sc.SERVICE_NAME, sc.SERVICE_VERSION, "x"]), _any_values(), max_size=3)).items())
        ss = rs.scope_spans.add()
        for _ in range(draw(st.integers(0, 4))):
            span = Span(
                trace_id=draw(st.sampled_from(trace_ids)),
                span_id=draw(st.one_of(st.binary(min_size=8, max_size=8), st.binary(max_size=9))),
                parent_span_id=draw(st.one_of(st.just(b""), st.binary(min_size=8, max_size=8))),
                name=draw(st.text(max_size=20)),
                start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                end_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
            )
            span.attributes.extend(KeyValue(key=k, value=v) for k, v in draw(
                st.dictionaries(_keys, _any_values(), max_size=12)).items())
            ss.spans.append(span)
    return req


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(req=_requests(), cut=st.one_of(st.none(), st.integers(0, 400)), gz=st.booleans())
def test_structured_and_truncated_requests(client: TestClient, req: ExportTraceServiceRequest, cut: int | None,
                                           gz: bool) -> None:
    body = req.SerializeToString()
    if cut is not None:
        body = body[:cut]
    headers = dict(PB)
    if gz:
        body = gzip.compress(body)
        headers["content-encoding"] = "gzip"
    resp = client.post("/v1/traces", content=body, headers=headers)
    _ok_or_4xx(resp)
    if cut is None:
        assert resp.status_code == 200


def test_the_store_is_consistent_after_fuzzing(client: TestClient, chdb_store: Any) -> None:
    assert client.app.state.writer.flush(60)  # type: ignore[attr-defined]
    rows = chdb_store.query_rows(
        f"SELECT count(), uniqExact(trace_id, span_id) FROM {chdb_store.table('spans')} FINAL "
        "WHERE tenant = {t:String}", {"t": TENANT})
    assert rows[0][0] == rows[0][1]
    # every stored document row has a sane rank and every query row reads back
    bad = chdb_store.query_rows(f"SELECT count() FROM {chdb_store.table('documents')} FINAL "
                                "WHERE tenant = {t:String} AND rank > 10000000", {"t": TENANT})
    assert bad == [(0,)]
    list(chdb_store.read_traces(tenant=TENANT, with_content=True, limit=1000))


def test_invalid_utf8_is_refused_with_a_reason(client: TestClient) -> None:
    # KeyValue{key: "k", value: AnyValue{string_value: b"\xff\xfe"}} inside a span, by hand, since
    # the protobuf library will not build an invalid string for us.
    value = b"\x0a\x02\xff\xfe"  # AnyValue.string_value (field 1) = 0xff 0xfe
    kv = b"\x0a\x01k" + b"\x12" + bytes([len(value)]) + value
    span = (b"\x0a\x10" + os.urandom(16) + b"\x12\x08" + os.urandom(8) + b"\x4a" + bytes([len(kv)]) + kv)
    scope = b"\x12" + bytes([len(span)]) + span
    rs = b"\x12" + bytes([len(scope)]) + scope
    body = b"\x0a" + bytes([len(rs)]) + rs
    resp = client.post("/v1/traces", content=body, headers=PB)
    assert resp.status_code == 400 and b"malformed" in resp.content
    resp = client.post("/v1/traces", content=b'{"resourceSpans": [{"x": "\xff"}]}', headers=JS)
    assert resp.status_code == 400 and "JSON" in resp.json()["message"]


def test_a_10mb_attribute_and_nul_bytes_are_stored(client: TestClient, chdb_store: Any) -> None:
    tid = os.urandom(16).hex()
    big = "x" * (10 * 1024 * 1024)
    nul = "a\x00b\x00"
    spans = [T.SpanSpec(tid, os.urandom(8).hex(), "root", {sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: nul,
                                                           sc.OUTPUT_VALUE: big}),
             T.SpanSpec(tid, os.urandom(8).hex(), "r", {sc.SPAN_KIND: "RETRIEVER",
                                                        "retrieval.documents.0.document.id": "d\x00",
                                                        "retrieval.documents.0.document.content": big})]
    resp = client.post("/v1/traces", content=T.request(spans).SerializeToString(), headers=PB)
    assert resp.status_code == 200
    assert client.app.state.writer.flush(60)  # type: ignore[attr-defined]
    (rec,) = chdb_store.read_traces(tenant=TENANT, trace_ids=[tid], with_content=True)
    assert rec.query == nul and rec.answer == big
    assert rec.retrieved[0].id == "d\x00" and rec.retrieved[0].content == big


def test_100k_documents_in_one_span(client: TestClient, chdb_store: Any) -> None:
    tid = os.urandom(16).hex()
    attrs: dict[str, Any] = {sc.SPAN_KIND: "RETRIEVER"}
    for i in range(100_000):
        attrs[f"retrieval.documents.{i}.document.id"] = f"d{i}"
    spans = [T.SpanSpec(tid, os.urandom(8).hex(), "root", {sc.SPAN_KIND: "CHAIN"}),
             T.SpanSpec(tid, os.urandom(8).hex(), "r", attrs)]
    spans[1].parent = spans[0].span_id
    resp = client.post("/v1/traces", content=T.request(spans).SerializeToString(), headers=PB)
    assert resp.status_code == 200
    assert client.app.state.writer.flush(60)  # type: ignore[attr-defined]
    (rec,) = chdb_store.read_traces(tenant=TENANT, trace_ids=[tid])
    assert len(rec.retrieved) == 100_000
    assert rec.retrieved[-1].id == "d99999" and rec.retrieved[-1].rank == 99_999


def test_nothing_was_dead_lettered(client: TestClient, tmp_path: Path) -> None:
    metrics = client.get("/metrics", headers={"authorization": "Bearer fuzz"}).text
    assert "ragtrace_deadletter_records_total 0" in metrics
    assert 'ragtrace_requests_total{code="500"}' not in metrics
