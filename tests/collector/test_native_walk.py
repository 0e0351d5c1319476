"""The compiled walk (`native_walk`, C++) gives exactly the rows of the Python walk (`assemble`).

The document logic exists twice (assemble._documents and native/otlp_walk.cc), so these tests
compare every column of every table, the reject counts, the messages and the byte estimates on
hand-written edge cases and on hypothesis-generated requests mixing valid and broken spans.
`make` builds the module; without it these tests fail and say how to build it.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ragtrace import semconv as sc
from ragtrace_collector import native_walk
from ragtrace_collector.assemble import COLUMNS, MAX_RANK, TIME_COLUMNS, Rows, assemble
from ragtrace_collector.ingest import decode_and_assemble
from ragtrace_collector.otlp import PROTOBUF, OtlpError
from tests import otlp_builders as T

NOW = int(time.time() * 1000)



def test_the_native_walk_is_built() -> None:
    assert native_walk.available(), native_walk.UNAVAILABLE


def _lists(rows: Rows) -> dict[str, dict[str, list[Any]]]:
    out = {t: {c: list(v) for c, v in cols.items()} for t, cols in rows.cols.items()}
    for table, tables in rows.arrow.items():
        for tab in tables:
            for c in COLUMNS[table]:
                values = tab.column(c).to_pylist()
                if c in TIME_COLUMNS:
                    values = [int(v.timestamp() * 1000) for v in values]
                out[table][c] += values
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b and type(a) is type(b)) or (isinstance(a, bool) is isinstance(b, bool) and a == b
                                                    and isinstance(a, (int, float)) and isinstance(b, (int, float)))


def assert_same_rows(req: ExportTraceServiceRequest, written: Mapping[tuple[str, str], int] | None = None) -> Rows:
    body = req.SerializeToString()
    expected = assemble(req, "t1", NOW, written)
    got = native_walk.assemble_body(body, "t1", NOW, written)
    e, g = _lists(expected), _lists(got)
    for table in COLUMNS:
        for col in COLUMNS[table]:
            ev, gv = e[table][col], g[table][col]
            assert len(ev) == len(gv), (table, col, ev, gv)
            for i, (x, y) in enumerate(zip(ev, gv, strict=True)):
                assert _same(x, y), (table, col, i, x, y)
    assert (got.spans, got.rejected, got.messages, got.nbytes, got.dropped_attribute_spans) == (
        expected.spans, expected.rejected, expected.messages, expected.nbytes, expected.dropped_attribute_spans)
    return got


def _span(attrs: dict[str, Any], *, trace: bytes = b"\x01" * 16, span: bytes = b"\x02" * 8,
          parent: bytes = b"") -> Span:
    return Span(trace_id=trace, span_id=span, parent_span_id=parent, name="s", start_time_unix_nano=NOW * 1_000_000,
                end_time_unix_nano=NOW * 1_000_000 + 5_000_000, attributes=T.kvs(attrs))


def _request(*spans: Span) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(T.kvs({sc.SERVICE_NAME: "svc", sc.SERVICE_VERSION: "r1"}))
    rs.scope_spans.add().spans.extend(spans)
    return req


def _doc(prefix: str, rank: int, field: str) -> str:
    return sc.document_attribute(prefix, rank, field)


def test_standard_sdk_traces_give_the_same_rows_and_documents_come_as_arrow() -> None:
    docs = T.corpus(40, size=300)
    req = T.request([s for i in range(5) for s in T.standard_trace(docs, i, gold=["doc-0-1"]).spans()])
    got = assert_same_rows(req)
    assert got.arrow["documents"][0].num_rows == 5 * 65 and got.count("documents") == 5 * 65
    assert not got.cols["documents"]["trace_id"]


def test_passages_the_store_has_are_not_read_again_and_truncated_copies_are_replaced() -> None:
    docs = T.corpus(12, size=200)
    req = T.request(T.standard_trace(docs, 1).spans())
    hashes = [hashlib.sha256(d.content.encode()).hexdigest() for d in docs]
    full = {("t1", h): 200 for h in hashes[:6]}
    truncated = {("t1", h): -50 for h in hashes[:6]}
    other_tenant = {("t2", h): 200 for h in hashes}
    for written in (full, truncated, other_tenant, OrderedDict(full)):
        assert_same_rows(req, written)
    # any Mapping will do (the native walk asks it through .get when it is not a dict)
    assert_same_rows(req, MappingProxyType(full))  # type: ignore[arg-type]


def test_openinference_documents_without_ids_or_hashes_are_hashed_like_the_python_walk() -> None:
    text = "Paris is the capital of France. " * 3
    attrs = {sc.SPAN_KIND: "RETRIEVER", _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_CONTENT): text,
             _doc(sc.RETRIEVAL_DOCUMENTS, 1, sc.DOCUMENT_CONTENT): "élan vital ✓",
             _doc(sc.RETRIEVAL_DOCUMENTS, 1, sc.DOCUMENT_SCORE): "0.25",
             _doc(sc.RETRIEVAL_DOCUMENTS, 2, sc.DOCUMENT_ID): "only-an-id"}
    got = assert_same_rows(_request(_span(attrs)))
    table = got.arrow["documents"][0]
    ids = dict(zip(table.column("rank").to_pylist(), table.column("doc_id").to_pylist(), strict=True))
    assert ids[0] == "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16] and ids[2] == "only-an-id"


def test_truncated_passages_are_flagged_by_hash_mismatch() -> None:
    full = "x" * 500
    attrs = {sc.CONTENT_MODE: "truncate:100",
             _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_ID): "d0",
             _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_CONTENT): full[:100],
             _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_CONTENT_HASH): hashlib.sha256(full.encode()).hexdigest(),
             _doc(sc.RETRIEVAL_DOCUMENTS, 1, sc.DOCUMENT_ID): "d1",
             _doc(sc.RETRIEVAL_DOCUMENTS, 1, sc.DOCUMENT_CONTENT): "short",
             _doc(sc.RETRIEVAL_DOCUMENTS, 1, sc.DOCUMENT_CONTENT_HASH): hashlib.sha256(b"short").hexdigest()}
    got = assert_same_rows(_request(_span(attrs)))
    assert got.cols["passages"]["truncated"] == [True, False]


def test_odd_values_orders_and_keys_match() -> None:
    attrs: dict[str, Any] = {
        sc.RERANKER_TOP_K: 2, sc.SPAN_KIND: "RERANKER",
        # descending ranks, a repeated key (last wins), sparse fields, non-string values
        _doc(sc.RERANKER_OUTPUT_DOCUMENTS, 3, sc.DOCUMENT_ID): 42,
        _doc(sc.RERANKER_OUTPUT_DOCUMENTS, 1, sc.DOCUMENT_ID): "b",
        _doc(sc.RERANKER_OUTPUT_DOCUMENTS, 1, sc.DOCUMENT_SCORE): float("nan"),
        _doc(sc.RERANKER_OUTPUT_DOCUMENTS, 0, sc.DOCUMENT_SCORE): 7,
        _doc(sc.RERANKER_OUTPUT_DOCUMENTS, 0, sc.DOCUMENT_METADATA): ["a", 1, True],
        _doc(sc.RERANKER_OUTPUT_DOCUMENTS, 3, sc.DOCUMENT_CONTENT): b"\x00\xff",
        _doc(sc.RERANKER_INPUT_DOCUMENTS, MAX_RANK, sc.DOCUMENT_ID): "deep",
        _doc(sc.RERANKER_INPUT_DOCUMENTS, MAX_RANK + 1, sc.DOCUMENT_ID): "too deep",
        "reranker.input_documents.x.document.id": "not a rank",
        "reranker.input_documents.1": "no field",
        "reranker.input_documents.1.document.other": "unknown field",
        "reranker.input_documentsX.1.document.id": "other prefix",
        "retrieval.documents.0123456789.document.id": "ten digits",
        "plain": float("inf"), "nested": {"k": [1.5, None, b"\x01"]},
    }
    span = _span(attrs)
    span.attributes.add(key=_doc(sc.RERANKER_OUTPUT_DOCUMENTS, 1, sc.DOCUMENT_ID), value=AnyValue(string_value="b2"))
    span.attributes.add(key="empty", value=AnyValue())
    span.events.add(name="e", time_unix_nano=NOW * 1_000_000, attributes=T.kvs({"x": 1}))
    span.links.add(trace_id=b"\x03" * 16, span_id=b"\x04" * 8)
    assert_same_rows(_request(span))


def test_rejected_spans_and_annotations_have_no_document_rows_in_either_walk() -> None:
    doc_attrs = {_doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_ID): "d"}
    bad_ids = _span(doc_attrs, trace=b"\x00" * 16)
    short = _span(doc_attrs, span=b"\x01")
    annotation = _span({**doc_attrs, sc.ANNOTATES_TRACE_ID: "ab" * 16, sc.ANNOTATION_KIND: "gold",
                        sc.GOLD_DOCUMENT_IDS: ["d"]}, span=b"\x05" * 8)
    got = assert_same_rows(_request(bad_ids, short, annotation, _span(doc_attrs, span=b"\x06" * 8)))
    assert got.rejected == 2 and got.count("documents") == 1


def test_malformed_bodies_are_400_on_both_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    good = T.request(T.standard_trace(T.corpus(5, size=50), 0).spans()).SerializeToString()
    for body in (b"\xff\xff\xff", good[: len(good) // 2], b"\x0a\x05\x12\x03\x0a\x01"):
        reasons = []
        for native in ("1", "0"):
            monkeypatch.setenv("RAGTRACE_NATIVE_WALK", native)
            with pytest.raises(OtlpError) as err:
                decode_and_assemble(body, PROTOBUF, None, "t1", NOW, 10_000_000)
            assert err.value.status == 400
            reasons.append(err.value.reason)
        assert reasons[0] == reasons[1]  # the Python parser explains both


# --- generated requests ------------------------------------------------------------------------
_PREFIXES = (sc.RETRIEVAL_DOCUMENTS, sc.RERANKER_INPUT_DOCUMENTS, sc.RERANKER_OUTPUT_DOCUMENTS, sc.CONTEXT_DOCUMENTS)
_FIELDS = (sc.DOCUMENT_ID, sc.DOCUMENT_SCORE, sc.DOCUMENT_CONTENT, sc.DOCUMENT_METADATA, sc.DOCUMENT_CONTENT_HASH)
_TEXTS = ("alpha", "beta gamma", "", "δέλτα ✓", "x" * 40)
_scalars = st.one_of(st.sampled_from(_TEXTS), st.text(max_size=12), st.integers(-3, 3),
                     st.sampled_from([0.5, -1.0, float("nan"), float("inf")]), st.booleans(),
                     st.binary(max_size=4), st.none())
_values = st.one_of(_scalars, st.lists(_scalars, max_size=3), st.dictionaries(st.sampled_from("abc"), _scalars,
                                                                               max_size=2))


@st.composite
def _doc_attr(draw: st.DrawFn) -> tuple[str, Any]:
    prefix = draw(st.sampled_from(_PREFIXES))
    rank = draw(st.sampled_from([0, 1, 2, 3, MAX_RANK, MAX_RANK + 1]))
    field = draw(st.sampled_from(_FIELDS))
    key = draw(st.sampled_from([_doc(prefix, rank, field), f"{prefix}.{rank}", f"{prefix}.-{rank}.{field}"]))
    if field == sc.DOCUMENT_CONTENT_HASH and draw(st.booleans()):
        return key, hashlib.sha256(draw(st.sampled_from(_TEXTS)).encode()).hexdigest()
    if field == sc.DOCUMENT_CONTENT:
        return key, draw(st.one_of(st.sampled_from(_TEXTS), _values))
    return key, draw(_values)


_other = st.fixed_dictionaries({}, optional={
    sc.SPAN_KIND: st.sampled_from(["CHAIN", "RETRIEVER", "RERANKER", 3]),
    sc.SDK_VERSION: st.just("0.1.0"), sc.QUERY_ID: st.sampled_from(["q1", "q2"]),
    sc.RERANKER_TOP_K: st.one_of(st.integers(-1, 6), st.booleans(), st.just(MAX_RANK + 1), st.just("5")),
    sc.CONTENT_MODE: st.sampled_from(["truncate:10", "full", "hash"]),
    sc.ANNOTATES_TRACE_ID: st.sampled_from(["ab" * 16, "xyz"]), sc.ANNOTATION_KIND: st.sampled_from(["gold", "x"]),
    sc.GOLD_DOCUMENT_IDS: st.lists(st.sampled_from(["d1", "d2"]), max_size=2),
    sc.INPUT_VALUE: st.text(max_size=10), sc.OUTPUT_VALUE: _values,
    # what non-SDK clients send: query ids in metadata or a session, GenAI operation names
    sc.METADATA: st.sampled_from(['{"query_id": "q3"}', '{"query_id": 7}', "{bad", '["x"]']),
    sc.SESSION_ID: st.sampled_from(["s1", ""]), sc.GEN_AI_OPERATION_NAME: st.sampled_from(["retrieval", "chat", 5]),
    sc.GEN_AI_RETRIEVAL_DOCUMENTS: st.sampled_from([
        '[{"id": "g1", "score": 0.5, "content": "alpha beta"}, {"score": "x", "content": "alpha beta"}]',
        '[{"id": 3, "metadata": {"k": 1}}, {}]', "[1, 2]", "{not json", '{"id": "g"}'])})


@st.composite
def _requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(1, 2))):
        rs = req.resource_spans.add()
        rs.resource.attributes.extend(T.kvs(draw(st.dictionaries(st.sampled_from(
            [sc.SERVICE_NAME, sc.SERVICE_VERSION, "x"]), _values, max_size=3))))
        for _ in range(draw(st.integers(1, 2))):
            ss = rs.scope_spans.add()
            for _ in range(draw(st.integers(0, 3))):
                trace = draw(st.sampled_from([b"\x01" * 16, b"\x07" * 16, b"\x00" * 16, b"\x01" * 3]))
                span = draw(st.sampled_from([b"\x02" * 8, b"\x03" * 8, b""]))
                s = ss.spans.add(trace_id=trace, span_id=span, name="s",
                                 parent_span_id=draw(st.sampled_from([b"", b"\x09" * 8])),
                                 start_time_unix_nano=draw(st.sampled_from([0, NOW * 1_000_000])),
                                 end_time_unix_nano=NOW * 1_000_000 + 1,
                                 dropped_attributes_count=draw(st.sampled_from([0, 0, 3, 2**32 - 1])))
                attrs = list(draw(_other).items()) + draw(st.lists(_doc_attr(), max_size=14))
                attrs = draw(st.permutations(attrs))
                s.attributes.extend(kv for k, v in attrs for kv in T.kvs({k: v}))
    return req


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(req=_requests(), cached=st.booleans())
def test_generated_requests_give_the_same_rows(req: ExportTraceServiceRequest, cached: bool) -> None:
    written = {("t1", hashlib.sha256(t.encode()).hexdigest()): n for t, n in zip(_TEXTS, (5, -3, 0, 9, 40),
                                                                                    strict=True)}
    assert_same_rows(req, written if cached else None)


def test_the_collector_ingests_protobuf_through_the_native_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    body = T.request(T.standard_trace(T.corpus(25, size=100), 0).spans()).SerializeToString()
    rows, spooled = decode_and_assemble(body, PROTOBUF, None, "t1", NOW, 10_000_000)
    assert rows.arrow["documents"][0].num_rows == 65 and not rows.cols["documents"]["trace_id"] and spooled
    monkeypatch.setenv("RAGTRACE_NATIVE_WALK", "0")
    rows, _ = decode_and_assemble(body, PROTOBUF, None, "t1", NOW, 10_000_000)
    assert not rows.arrow and len(rows.cols["documents"]["trace_id"]) == 65


def test_gen_ai_documents_beside_openinference_ones_give_the_same_rows() -> None:
    gen_ai = _span({sc.GEN_AI_OPERATION_NAME: "retrieval",
                    sc.GEN_AI_RETRIEVAL_DOCUMENTS: '[{"id": "g1", "score": 0.9, "content": "shared text"}, '
                                                   '{"score": 0.5, "content": "only here"}]'}, span=b"\x04" * 8)
    oi = _span({sc.SPAN_KIND: "RETRIEVER", _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_ID): "d1",
                _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_CONTENT): "shared text"})
    rows = assert_same_rows(_request(oi, gen_ai))
    docs = _lists(rows)["documents"]
    assert docs["doc_id"] == ["g1", "sha256:" + hashlib.sha256(b"only here").hexdigest()[:16], "d1"]
    assert docs["score"][:2] == [0.9, 0.5] and set(docs["stage"]) == {"retrieved"}
    assert sc.GEN_AI_RETRIEVAL_DOCUMENTS not in rows.cols["spans"]["attributes"][1]
