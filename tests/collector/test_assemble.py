"""Span → rows: stages and ranks, passages once per hash, roots, annotations, bad attributes."""

from __future__ import annotations

import hashlib
import os
import time

import orjson
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from ragtrace import semconv as sc
from ragtrace_collector.assemble import assemble
from ragtrace_collector.documents import MAX_RANK
from ragtrace_collector.rows import COLUMNS
from tests import otlp_builders as T

NOW = int(time.time() * 1000)


def _rows(spans, **kw):  # type: ignore[no-untyped-def]
    return assemble(T.request(spans, **kw), "t1", NOW)


def _table(rows, name):  # type: ignore[no-untyped-def]
    cols = rows.columns(name)
    return [dict(zip(COLUMNS[name], vals, strict=True)) for vals in zip(*(cols[c] for c in COLUMNS[name]),
                                                                        strict=True)]


def test_a_standard_trace_becomes_one_query_and_65_document_rows() -> None:
    docs = T.corpus(30, size=200)
    tr = T.standard_trace(docs, 3, gold=["doc-0-1", "doc-0-2"])
    rows = _rows(tr.spans(), service="qa", release="r7", environment="prod")
    assert rows.spans == 4 and rows.rejected == 0
    (q,) = _table(rows, "queries")
    assert (q["trace_id"], q["query"], q["answer"], q["query_id"]) == (tr.trace_id, "query 3", tr.answer, "q3")
    assert (q["service"], q["release"], q["environment"], q["tenant"]) == ("qa", "r7", "prod", "t1")
    assert q["root_priority"] == 3
    docs_rows = _table(rows, "documents")
    by_stage: dict[str, list[dict]] = {}
    for r in docs_rows:
        by_stage.setdefault(r["stage"], []).append(r)
    assert {k: len(v) for k, v in by_stage.items()} == {"retrieved": 20, "rerank_input": 20, "reranked": 20,
                                                       "context": 5}
    retrieved = sorted(by_stage["retrieved"], key=lambda r: r["rank"])
    assert [r["doc_id"] for r in retrieved] == [d.id for d in tr.retrieved]
    assert [r["score"] for r in retrieved] == [d.score for d in tr.retrieved]
    assert all(r["top_k"] == 5 for r in by_stage["reranked"])
    assert all(r["top_k"] is None for r in by_stage["retrieved"])
    # passage text once per hash, with the hash the SDK sent
    passages = _table(rows, "passages")
    assert len(passages) == len({d.content for d in tr.retrieved})
    for p in passages:
        assert p["content_hash"] == hashlib.sha256(p["content"].encode()).hexdigest()
        assert p["content_length"] == len(p["content"]) and p["truncated"] is False
    assert {(g["doc_id"], g["source"], g["trace_id"]) for g in _table(rows, "gold")} == {
        ("doc-0-1", "span", tr.trace_id), ("doc-0-2", "span", tr.trace_id)}
    # the raw span keeps what is not modelled, not the document lists
    attrs = [orjson.loads(s["attributes"]) for s in _table(rows, "spans")]
    assert not any(k.startswith(sc.RETRIEVAL_DOCUMENTS) for a in attrs for k in a)
    assert any(a.get(sc.RERANKER_TOP_K) == 5 for a in attrs)


def test_openinference_only_spans_get_a_root_and_hash_ids() -> None:
    tr = T.TraceSpec(openinference_only=True, retrieved=[T.Doc("", "no id here", 0.3)], reranked=[])
    rows = _rows(tr.spans())
    (q,) = _table(rows, "queries")
    assert q["root_priority"] == 2 and q["query_id"] == ""
    retrieved = [r for r in _table(rows, "documents") if r["stage"] == "retrieved"]
    digest = hashlib.sha256(b"no id here").hexdigest()
    assert retrieved[0]["doc_id"] == f"sha256:{digest[:16]}" and retrieved[0]["content_hash"] == digest
    assert not [r for r in _table(rows, "documents") if r["stage"] == "context"]


def test_a_pipeline_span_under_an_http_span_outranks_it() -> None:
    tid = os.urandom(16).hex()
    http, chain = os.urandom(8).hex(), os.urandom(8).hex()
    rows = _rows([T.SpanSpec(tid, http, "GET /ask", {sc.HTTP_ROUTE: "/ask"}),
                  T.SpanSpec(tid, chain, "pipeline", {sc.SPAN_KIND: "CHAIN", sc.SDK_VERSION: "0.1",
                                                      sc.INPUT_VALUE: "q"}, parent=http),
                  T.SpanSpec(tid, os.urandom(8).hex(), "inner chain", {sc.SPAN_KIND: "CHAIN"}, parent=chain)])
    assert sorted((q["span_id"], q["root_priority"]) for q in _table(rows, "queries")) == sorted(
        [(http, 1), (chain, 3)])


def test_annotation_spans_become_gold_and_feedback_rows() -> None:
    target = os.urandom(16).hex()
    gold = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "gold",
                      {sc.ANNOTATES_TRACE_ID: target, sc.ANNOTATION_KIND: "gold", sc.QUERY_ID: "q9",
                       sc.GOLD_DOCUMENT_IDS: ["d1", "d2"]})
    fb = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "feedback",
                    {sc.ANNOTATES_TRACE_ID: target.upper(), sc.ANNOTATION_KIND: "feedback",
                     sc.FEEDBACK_SCORE: 0.25, sc.FEEDBACK_COMMENT: "meh"})
    bad = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "bad",
                     {sc.ANNOTATES_TRACE_ID: "xyz", sc.ANNOTATION_KIND: "gold", sc.GOLD_DOCUMENT_IDS: ["d3"]})
    rows = _rows([gold, fb, bad])
    assert not _table(rows, "queries")  # annotations are not queries
    assert sorted((g["trace_id"], g["query_id"], g["doc_id"]) for g in _table(rows, "gold")) == [
        (target, "q9", "d1"), (target, "q9", "d2")]
    (f,) = _table(rows, "feedback")
    assert (f["trace_id"], f["score"], f["comment"], f["span_id"]) == (target, 0.25, "meh", fb.span_id)
    assert rows.spans == 3 and "32 hex" in rows.error_message()


def test_bad_ids_are_rejected_with_a_reason_and_others_kept() -> None:
    good = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "ok", {})
    req = T.request([good])
    span = req.resource_spans[0].scope_spans[0].spans.add()
    span.trace_id = b"\0" * 16
    span.span_id = b"12345678"
    short = req.resource_spans[0].scope_spans[0].spans.add()
    short.trace_id = os.urandom(16)
    short.span_id = b"123"
    rows = assemble(req, "t1", NOW)
    assert (rows.spans, rows.rejected) == (1, 2)
    assert "trace_id" in rows.error_message()


def test_wrong_types_huge_ranks_and_odd_values_are_stored_safely() -> None:
    tid = os.urandom(16).hex()
    attrs = {
        sc.SPAN_KIND: "RETRIEVER",
        "retrieval.documents.0.document.id": 12345,  # int id → "12345"
        "retrieval.documents.0.document.score": "0.75",  # numeric string → 0.75
        "retrieval.documents.0.document.content": ["a", "b"],  # array → JSON text
        "retrieval.documents.1.document.id": "x\x00y",  # NUL is just a character
        "retrieval.documents.1.document.score": "high",  # not a number → NULL
        "retrieval.documents.1.document.metadata": True,
        f"retrieval.documents.{MAX_RANK + 1}.document.id": "too deep",  # kept raw only
        "retrieval.documents.-1.document.id": "negative",
        "retrieval.documents.9999999999999999999.document.id": "huge",
        "retrieval.documents.1.document.unknown_field": "raw",
        sc.RERANKER_TOP_K: "five",
    }
    rows = _rows([T.SpanSpec(tid, os.urandom(8).hex(), "r", attrs, start_ns=1)])  # epoch start → clamped
    docs = sorted(_table(rows, "documents"), key=lambda r: r["rank"])
    assert [(d["rank"], d["doc_id"], d["score"]) for d in docs] == [(0, "12345", 0.75), (1, "x\x00y", None)]
    assert docs[1]["metadata"] == "true"
    (p,) = _table(rows, "passages")
    assert p["content"] == '["a","b"]'
    (s,) = _table(rows, "spans")
    raw = orjson.loads(s["attributes"])
    assert raw[f"retrieval.documents.{MAX_RANK + 1}.document.id"] == "too deep"
    assert raw["retrieval.documents.9999999999999999999.document.id"] == "huge"
    assert raw["retrieval.documents.1.document.unknown_field"] == "raw"
    assert s["start_time"] == NOW  # a start time decades away is replaced by the arrival time


def test_truncated_content_is_marked() -> None:
    tid = os.urandom(16).hex()
    attrs = {sc.SPAN_KIND: "RETRIEVER", sc.CONTENT_MODE: "truncate:10",
             "retrieval.documents.0.document.id": "a", "retrieval.documents.0.document.content": "0123456789",
             "retrieval.documents.0.document.content_hash": "f" * 64,
             "retrieval.documents.1.document.id": "b", "retrieval.documents.1.document.content": "short",
             "retrieval.documents.1.document.content_hash": hashlib.sha256(b"short").hexdigest(),
             "retrieval.documents.2.document.id": "c", "retrieval.documents.2.document.content_hash": "e" * 64}
    rows = _rows([T.SpanSpec(tid, os.urandom(8).hex(), "r", attrs)])
    passages = {p["content"]: p for p in _table(rows, "passages")}
    # a prefix cannot be checked against the full text's hash, so it is kept under its own hash
    # (no unverified content hash): it can never stand for, or replace, the full text of the hash it claimed
    prefix_hash = hashlib.sha256(b"0123456789").hexdigest()
    assert passages["0123456789"]["truncated"] is True and passages["0123456789"]["content_hash"] == prefix_hash
    assert {d["doc_id"]: d["content_hash"] for d in _table(rows, "documents")}["a"] == prefix_hash
    assert passages["short"]["truncated"] is False
    # a hash-only document has a row in documents but no passage text
    assert len(passages) == 2 and len(_table(rows, "documents")) == 3


def test_annotations_keyed_by_query_id_alone_are_not_queries() -> None:
    # `ragtrace.attach_gold(query_id=...)` names no trace: the gold applies to every trace of that query.
    gold = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "gold",
                      {sc.ANNOTATION_KIND: "gold", sc.QUERY_ID: "q7", sc.GOLD_DOCUMENT_IDS: ["d1"]})
    fb = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "feedback",
                    {sc.ANNOTATION_KIND: "feedback", sc.QUERY_ID: "q7", sc.FEEDBACK_SCORE: 1.0})
    orphan = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "orphan",
                        {sc.ANNOTATION_KIND: "gold", sc.GOLD_DOCUMENT_IDS: ["d9"]})
    rows = _rows([gold, fb, orphan])
    assert not _table(rows, "queries")
    assert [(g["trace_id"], g["query_id"], g["doc_id"]) for g in _table(rows, "gold")] == [("", "q7", "d1")]
    (f,) = _table(rows, "feedback")
    assert (f["trace_id"], f["query_id"], f["score"]) == ("", "q7", 1.0)
    assert "needs" in rows.error_message()


def test_document_fields_in_any_order_give_the_same_rows() -> None:
    # The walk has a fast path for the SDK's shape (every field of every document, in one order);
    # shuffled, partial and repeated fields must give what the general path gives.
    docs = T.corpus(6, size=40)
    attrs = T.doc_attrs(sc.RETRIEVAL_DOCUMENTS, [T.Doc(d.id, d.content, 0.5) for d in docs])
    attrs.update(T.doc_attrs(sc.RERANKER_OUTPUT_DOCUMENTS, [T.Doc(d.id, d.content, 0.1) for d in docs[:3]]))
    attrs[sc.RERANKER_TOP_K] = 2
    tid, sid = os.urandom(16).hex(), os.urandom(8).hex()

    def rows_of(items: list[tuple[str, object]]) -> dict[str, list[dict]]:
        span = T.SpanSpec(tid, sid, "r", {}, start_ns=NOW * 1_000_000)
        req = T.request([span])
        req.resource_spans[0].scope_spans[0].spans[0].attributes.extend(
            KeyValue(key=k, value=T.value(v)) for k, v in items)
        rows = assemble(req, "t1", NOW)
        return {t: sorted(_table(rows, t), key=repr) for t in ("documents", "passages")}

    items = list(attrs.items())
    expected = rows_of(items)
    assert len(expected["documents"]) == 9 and len(expected["passages"]) == 6
    assert rows_of(list(reversed(items))) == expected
    assert rows_of(items[::2] + items[1::2]) == expected
    assert rows_of([("retrieval.documents.0.document.id", "stale"), *items]) == expected
    without_hash = [(k, v) for k, v in items if k != "retrieval.documents.1.document.content_hash"]
    got = rows_of(without_hash)
    assert got["documents"] == expected["documents"]  # the hash is computed from the text instead


def test_passages_the_store_has_in_full_are_not_read_again() -> None:
    tr = T.standard_trace(T.corpus(6, size=100), 0, n_candidates=6, top_k=2)
    req = T.request(tr.spans())
    first = assemble(req, "t1", NOW)
    p = first.columns("passages")
    assert len(p["content_hash"]) == 6
    written = {("t1", h): n for h, n in zip(p["content_hash"], p["content_length"], strict=True)}
    again = assemble(req, "t1", NOW, written)
    assert not again.cols["passages"]["content_hash"]
    assert _table(again, "documents") == _table(first, "documents")
    # another tenant's passages, and truncated copies (negative lengths), do not count
    assert len(assemble(req, "t2", NOW, written).cols["passages"]["content_hash"]) == 6
    truncated = {k: -n for k, n in written.items()}
    assert len(assemble(req, "t1", NOW, truncated).cols["passages"]["content_hash"]) == 6
