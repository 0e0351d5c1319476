"""The compiled walk (`native_walk`, ``collector/native/otlp_walk.cc``): the rows it makes, and that it is required.

It is the collector's only walk: every ``documents`` and ``passages`` row comes from it. These tests
give its rows for hand-written edge cases (odd value types, orders, repeated and invalid keys, ids
and hashes left out, truncation, GenAI lists beside OpenInference attributes, the store's passages)
and check hypothesis-generated requests, mixing valid and broken spans, against a plain
recomputation of what their attributes say. `make` builds the module; without it, or with a stale
one, the collector refuses to start and says how to build it.
"""

from __future__ import annotations

import hashlib
import math
import re
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ragtrace import semconv as sc
from ragtrace_collector import native_walk
from ragtrace_collector.assemble import assemble, assemble_body
from ragtrace_collector.documents import MAX_RANK
from ragtrace_collector.ingest import decode_and_assemble
from ragtrace_collector.otlp import PROTOBUF, OtlpError
from ragtrace_collector.rows import COLUMNS, Rows
from tests import otlp_builders as T

NOW = int(time.time() * 1000)
ROOT = Path(__file__).resolve().parents[2]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def table(rows: Rows, name: str) -> list[dict[str, Any]]:
    """The rows of one table as dicts (Arrow and list rows alike)."""
    cols = rows.columns(name)
    return [dict(zip(COLUMNS[name], values, strict=True)) for values in zip(*cols.values(), strict=True)]


def documents(rows: Rows) -> list[tuple[Any, ...]]:
    """(span_id, stage, rank, doc_id, score, content_hash, metadata, top_k) of every document row, in order."""
    return [(d["span_id"], d["stage"], d["rank"], d["doc_id"], d["score"], d["content_hash"], d["metadata"],
             d["top_k"]) for d in table(rows, "documents")]


def passages(rows: Rows) -> list[tuple[str, str, int, bool]]:
    return [(p["content_hash"], p["content"], p["content_length"], p["truncated"]) for p in table(rows, "passages")]


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


SPAN = "02" * 8


def test_the_native_walk_is_built_and_current() -> None:
    module = native_walk.require()
    assert module.INTERFACE == native_walk.INTERFACE


def test_standard_sdk_traces_give_their_documents_as_one_arrow_table() -> None:
    docs = T.corpus(40, size=300)
    specs = [T.standard_trace(docs, i, gold=["doc-0-1"]) for i in range(5)]
    rows = assemble(T.request([s for tr in specs for s in tr.spans()]), "t1", NOW)
    assert rows.arrow["documents"][0].num_rows == 5 * 65 and rows.count("documents") == 5 * 65
    assert not rows.cols["documents"]["trace_id"]
    expected = []
    for tr in specs:
        for stage, listed, top_k in (("retrieved", tr.retrieved, None), ("rerank_input", tr.retrieved, None),
                                     ("reranked", tr.reranked, 5), ("context", tr.reranked[:5], None)):
            expected += [(tr.trace_id, stage, rank, d.id, d.score, _sha(d.content), "", top_k)
                         for rank, d in enumerate(listed)]
    got = [(d["trace_id"], d["stage"], d["rank"], d["doc_id"], d["score"], d["content_hash"], d["metadata"],
            d["top_k"]) for d in table(rows, "documents")]
    assert sorted(got) == sorted(expected)
    assert all(d["tenant"] == "t1" and d["received_at"] == NOW for d in table(rows, "documents"))
    # each passage once per request, under the hash the SDK sent
    contents = {d.content for tr in specs for d in tr.retrieved}
    assert sorted(passages(rows)) == sorted((_sha(c), c, len(c), False) for c in contents)


def test_passages_the_store_has_are_not_read_again_and_truncated_copies_are_replaced() -> None:
    docs = T.corpus(12, size=200)
    req = T.request(T.standard_trace(docs, 1).spans())
    hashes = [_sha(d.content) for d in docs]
    first = assemble(req, "t1", NOW)
    assert {p[0] for p in passages(first)} == set(hashes)
    full = {("t1", h): 200 for h in hashes[:6]}
    for written in (full, OrderedDict(full), MappingProxyType(full)):  # any Mapping (asked through .get)
        got = assemble(req, "t1", NOW, written)
        assert {p[0] for p in passages(got)} == set(hashes[6:])
        assert documents(got) == documents(first)
    # truncated copies (negative lengths) and another tenant's passages do not count
    for written in ({("t1", h): -50 for h in hashes[:6]}, {("t2", h): 200 for h in hashes}):
        got = assemble(req, "t1", NOW, written)
        assert passages(got) == passages(first) and documents(got) == documents(first)


def test_openinference_documents_without_ids_or_hashes_are_hashed() -> None:
    text = "Paris is the capital of France. " * 3
    attrs = {sc.SPAN_KIND: "RETRIEVER", _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_CONTENT): text,
             _doc(sc.RETRIEVAL_DOCUMENTS, 1, sc.DOCUMENT_CONTENT): "élan vital ✓",
             _doc(sc.RETRIEVAL_DOCUMENTS, 1, sc.DOCUMENT_SCORE): "0.25",
             _doc(sc.RETRIEVAL_DOCUMENTS, 2, sc.DOCUMENT_ID): "only-an-id"}
    rows = assemble(_request(_span(attrs)), "t1", NOW)
    accent = "élan vital ✓"
    # in the order their fields first appear, ids first; a numeric string is a score
    assert documents(rows) == [
        (SPAN, "retrieved", 2, "only-an-id", None, "", "", None),
        (SPAN, "retrieved", 1, "sha256:" + _sha(accent)[:16], 0.25, _sha(accent), "", None),
        (SPAN, "retrieved", 0, "sha256:" + _sha(text)[:16], None, _sha(text), "", None)]
    # lengths in characters, not bytes
    assert passages(rows) == [(_sha(accent), accent, 12, False), (_sha(text), text, len(text), False)]


def test_truncated_passages_are_flagged_by_hash_mismatch() -> None:
    full = "x" * 500
    attrs = {sc.CONTENT_MODE: "truncate:100",
             _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_ID): "d0",
             _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_CONTENT): full[:100],
             _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_CONTENT_HASH): _sha(full),
             _doc(sc.RETRIEVAL_DOCUMENTS, 1, sc.DOCUMENT_ID): "d1",
             _doc(sc.RETRIEVAL_DOCUMENTS, 1, sc.DOCUMENT_CONTENT): "short",
             _doc(sc.RETRIEVAL_DOCUMENTS, 1, sc.DOCUMENT_CONTENT_HASH): _sha("short")}
    rows = assemble(_request(_span(attrs)), "t1", NOW)
    # the prefix is stored under its own hash, so it can never stand for the full text
    assert passages(rows) == [(_sha(full[:100]), full[:100], 100, True), (_sha("short"), "short", 5, False)]
    assert [(d[3], d[5]) for d in documents(rows)] == [("d0", _sha(full[:100])), ("d1", _sha("short"))]


def test_odd_values_orders_and_keys() -> None:
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
        "plain": float("inf"),
    }
    span = _span(attrs)
    span.attributes.add(key=_doc(sc.RERANKER_OUTPUT_DOCUMENTS, 1, sc.DOCUMENT_ID), value=AnyValue(string_value="b2"))
    span.attributes.add(key="empty", value=AnyValue())
    span.events.add(name="e", time_unix_nano=NOW * 1_000_000, attributes=T.kvs({"x": 1}))
    span.links.add(trace_id=b"\x03" * 16, span_id=b"\x04" * 8)
    rows = assemble(_request(span), "t1", NOW)
    # documents in the order their fields first appear (ids first); a document with no id, hash
    # or text has an empty id; bytes are hex, numbers and lists JSON; a NaN score is no score
    assert documents(rows) == [
        (SPAN, "reranked", 3, "42", None, _sha("00ff"), "", 2),
        (SPAN, "reranked", 1, "b2", None, "", "", 2),
        (SPAN, "rerank_input", MAX_RANK, "deep", None, "", "", None),
        (SPAN, "reranked", 0, "", 7.0, "", '["a",1,true]', 2)]
    assert passages(rows) == [(_sha("00ff"), "00ff", 4, False)]
    (s,) = table(rows, "spans")
    # what is not a document field stays in the raw span, as sent
    assert orjson.loads(s["attributes"]) == {
        sc.RERANKER_TOP_K: 2, sc.SPAN_KIND: "RERANKER",
        _doc(sc.RERANKER_INPUT_DOCUMENTS, MAX_RANK + 1, sc.DOCUMENT_ID): "too deep",
        "reranker.input_documents.x.document.id": "not a rank", "reranker.input_documents.1": "no field",
        "reranker.input_documents.1.document.other": "unknown field",
        "reranker.input_documentsX.1.document.id": "other prefix",
        "retrieval.documents.0123456789.document.id": "ten digits", "plain": "inf", "empty": None}
    assert orjson.loads(s["events"]) == {
        "events": [{"name": "e", "time_ms": NOW, "attributes": {"x": 1}}],
        "links": [{"trace_id": "03" * 16, "span_id": "04" * 8}]}


def test_rejected_spans_and_annotations_have_no_document_rows() -> None:
    doc_attrs = {_doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_ID): "d"}
    bad_ids = _span(doc_attrs, trace=b"\x00" * 16)
    short = _span(doc_attrs, span=b"\x01")
    annotation = _span({**doc_attrs, sc.ANNOTATES_TRACE_ID: "ab" * 16, sc.ANNOTATION_KIND: "gold",
                        sc.GOLD_DOCUMENT_IDS: ["d"]}, span=b"\x05" * 8)
    rows = assemble(_request(bad_ids, short, annotation, _span(doc_attrs, span=b"\x06" * 8)), "t1", NOW)
    assert rows.rejected == 2 and rows.spans == 2
    assert documents(rows) == [("06" * 8, "retrieved", 0, "d", None, "", "", None)]


def test_malformed_bodies_are_400_with_the_parsers_reason() -> None:
    good = T.request(T.standard_trace(T.corpus(5, size=50), 0).spans()).SerializeToString()
    for body in (b"\xff\xff\xff", good[: len(good) // 2], b"\x0a\x05\x12\x03\x0a\x01"):
        with pytest.raises(ValueError):
            assemble_body(body, "t1", NOW)
        with pytest.raises(OtlpError) as err:
            decode_and_assemble(body, PROTOBUF, None, "t1", NOW, 10_000_000)
        assert err.value.status == 400 and "protobuf" in err.value.reason.lower()


def test_the_collector_ingests_protobuf_through_the_native_walk() -> None:
    body = T.request(T.standard_trace(T.corpus(25, size=100), 0).spans()).SerializeToString()
    rows, spooled = decode_and_assemble(body, PROTOBUF, None, "t1", NOW, 10_000_000)
    assert rows.arrow["documents"][0].num_rows == 65 and not rows.cols["documents"]["trace_id"] and spooled


def test_gen_ai_documents_beside_openinference_ones() -> None:
    gen_ai = _span({sc.GEN_AI_OPERATION_NAME: "retrieval",
                    sc.GEN_AI_RETRIEVAL_DOCUMENTS: '[{"id": "g1", "score": 0.9, "content": "shared text"}, '
                                                   '{"score": 0.5, "content": "only here", "metadata": {"k": 1}}, '
                                                   '{"id": 7, "score": true}]'}, span=b"\x04" * 8)
    oi = _span({sc.SPAN_KIND: "RETRIEVER", _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_ID): "d1",
                _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_CONTENT): "shared text"})
    rows = assemble(_request(oi, gen_ai), "t1", NOW)
    # GenAI lists first (rank = index, stage retrieved), then OpenInference documents
    assert documents(rows) == [
        ("04" * 8, "retrieved", 0, "g1", 0.9, _sha("shared text"), "", None),
        ("04" * 8, "retrieved", 1, "sha256:" + _sha("only here")[:16], 0.5, _sha("only here"), '{"k":1}', None),
        ("04" * 8, "retrieved", 2, "7", None, "", "", None),
        (SPAN, "retrieved", 0, "d1", None, _sha("shared text"), "", None)]
    # a passage once per request, whichever convention listed it
    assert passages(rows) == [(_sha("shared text"), "shared text", 11, False),
                              (_sha("only here"), "only here", 9, False)]
    assert all(sc.GEN_AI_RETRIEVAL_DOCUMENTS not in orjson.loads(s["attributes"]) for s in table(rows, "spans"))


# --- required ----------------------------------------------------------------------------------
_WITHOUT_THE_MODULE = """
import sys, types
{setup}
from ragtrace_cli.main import main
sys.exit(main(["serve", "--store", {store!r}, "--port", "0"]))
"""


@pytest.mark.parametrize(("setup", "said"), [
    # not built: the import fails
    ("sys.modules['ragtrace_collector._otlp_native'] = None", "is not built"),
    # built from an older otlp_walk.cc (before INTERFACE existed)
    ("sys.modules['ragtrace_collector._otlp_native'] = types.ModuleType('_otlp_native')", "is stale"),
])
def test_serve_refuses_to_start_without_a_current_native_walk(tmp_path: Path, setup: str, said: str) -> None:
    store = tmp_path / "store"
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_THE_MODULE.format(setup=setup, store=str(store))],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and "make" in proc.stderr and "collector/native/build.py" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not store.exists(), "the store was opened before the check"


def test_anything_that_ingests_refuses_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragtrace_collector.app import create_app
    from ragtrace_collector.settings import CollectorSettings

    monkeypatch.setattr(native_walk, "_otlp_native", None)
    monkeypatch.setattr(native_walk, "_problem", "the collector's compiled walk is not built: build it with `make`")
    body = T.request(T.standard_trace(T.corpus(5, size=50), 0).spans()).SerializeToString()
    with pytest.raises(native_walk.NativeWalkMissing, match="build it with `make`"):
        assemble_body(body, "t1", NOW)
    with pytest.raises(native_walk.NativeWalkMissing, match="build it with `make`"):
        create_app(CollectorSettings.from_env(), store=None)  # type: ignore[arg-type]


# --- generated requests, against a plain recomputation -----------------------------------------
_PREFIXES = (sc.RETRIEVAL_DOCUMENTS, sc.RERANKER_INPUT_DOCUMENTS, sc.RERANKER_OUTPUT_DOCUMENTS, sc.CONTEXT_DOCUMENTS)
_STAGES = ("retrieved", "rerank_input", "reranked", "context")
_FIELDS = (sc.DOCUMENT_ID, sc.DOCUMENT_SCORE, sc.DOCUMENT_CONTENT, sc.DOCUMENT_METADATA, sc.DOCUMENT_CONTENT_HASH)
_DOC_KEY = re.compile(r"(?P<prefix>.+)\.(?P<rank>[0-9]{1,9})\.(?P<field>document\.[a-z_]+)\Z")
_TEXTS = ("alpha", "beta gamma", "", "δέλτα ✓", "x" * 40)
_scalars = st.one_of(st.sampled_from(_TEXTS), st.text(max_size=12), st.integers(-3, 3),
                     st.sampled_from([0.5, -1.0, float("nan"), float("inf")]), st.booleans(),
                     st.binary(max_size=4), st.none())
_values = st.one_of(_scalars, st.lists(_scalars, max_size=3), st.dictionaries(st.sampled_from("abc"), _scalars,
                                                                               max_size=2))


def _plain(v: AnyValue) -> Any:
    """An attribute value as the rows read it (bytes as hex, a non-finite double as its text)."""
    which = v.WhichOneof("value")
    if which == "double_value":
        return v.double_value if math.isfinite(v.double_value) else str(v.double_value)
    if which == "bytes_value":
        return v.bytes_value.hex()
    if which == "array_value":
        return [_plain(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _plain(kv.value) for kv in v.kvlist_value.values}
    return None if which is None else getattr(v, which)


def _json_text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else orjson.dumps(value).decode()


def _text(v: AnyValue | None) -> str:
    return _json_text(None if v is None else _plain(v))


def _score(v: AnyValue | None) -> float | None:
    """A score: a finite double, an integer, or a string Python reads as a finite float."""
    which = None if v is None else v.WhichOneof("value")
    if which not in ("double_value", "int_value", "string_value"):
        return None
    try:
        value = float(getattr(v, which))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def expected_documents(req: ExportTraceServiceRequest) -> tuple[int, list[tuple[Any, ...]], dict[str, set[Any]]]:
    """What the attributes of ``req`` say, recomputed plainly: (accepted spans, document rows as in
    `documents` with the trace id in front, passage candidates: hash -> {(text, truncated)})."""
    accepted, rows, candidates, seen = 0, [], {}, set()
    gen_ai_rows = []
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                fields: dict[tuple[int, int], dict[str, AnyValue]] = {}
                other: dict[str, AnyValue] = {}
                for kv in span.attributes:
                    m = _DOC_KEY.match(kv.key)
                    if m and m["prefix"] in _PREFIXES and m["field"] in _FIELDS and int(m["rank"]) <= MAX_RANK:
                        fields.setdefault((_PREFIXES.index(m["prefix"]), int(m["rank"])), {})[m["field"]] = kv.value
                    else:
                        other[kv.key] = kv.value
                ids_ok = len(span.trace_id) == 16 and any(span.trace_id) and len(span.span_id) == 8 and any(
                    span.span_id)
                if not ids_ok or (span.trace_id, span.span_id) in seen:
                    continue
                seen.add((span.trace_id, span.span_id))
                truncating = _text(other.get(sc.CONTENT_MODE)).startswith("truncate")
                claims = [(_text(f.get(sc.DOCUMENT_CONTENT)), _text(f.get(sc.DOCUMENT_CONTENT_HASH)))
                          for f in fields.values()]
                if not truncating and any(text and claimed and _sha(text) != claimed for text, claimed in claims):
                    continue  # HASH_MISMATCH
                accepted += 1
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                top_k = _plain(other[sc.RERANKER_TOP_K]) if sc.RERANKER_TOP_K in other else None
                if not (isinstance(top_k, int) and not isinstance(top_k, bool) and 0 <= top_k <= MAX_RANK):
                    top_k = None
                if not fields and sc.GEN_AI_RETRIEVAL_DOCUMENTS in other:
                    try:
                        listed = orjson.loads(_text(other[sc.GEN_AI_RETRIEVAL_DOCUMENTS]))
                    except orjson.JSONDecodeError:
                        listed = None
                    if isinstance(listed, list) and all(isinstance(d, dict) for d in listed):
                        for rank, d in enumerate(listed):
                            text = d.get("content") if isinstance(d.get("content"), str) else ""
                            chash = _sha(text) if text else ""
                            if text:
                                candidates.setdefault(chash, set()).add((text, False))
                            doc_id = "" if isinstance(d.get("id"), bool) else _json_text(d.get("id"))
                            score = d.get("score")
                            score = float(score) if isinstance(score, int | float) and not isinstance(
                                score, bool) and math.isfinite(score) else None
                            gen_ai_rows.append((trace_id, span_id, "retrieved", rank,
                                                doc_id or (f"sha256:{chash[:16]}" if chash else ""), score, chash,
                                                _json_text(d.get("metadata")), None))
                if sc.ANNOTATES_TRACE_ID in other or sc.ANNOTATION_KIND in other:
                    continue
                for (stage, rank), f in fields.items():
                    text, claimed = _text(f.get(sc.DOCUMENT_CONTENT)), _text(f.get(sc.DOCUMENT_CONTENT_HASH))
                    chash, truncated = claimed, False
                    if text and (truncating or not claimed):
                        chash, truncated = _sha(text), bool(claimed) and claimed != _sha(text)
                    if text and chash:
                        candidates.setdefault(chash, set()).add((text, truncated))
                    doc_id = _text(f.get(sc.DOCUMENT_ID)) or (f"sha256:{chash[:16]}" if chash else "")
                    rows.append((trace_id, span_id, _STAGES[stage], rank, doc_id, _score(f.get(sc.DOCUMENT_SCORE)),
                                 chash, _text(f.get(sc.DOCUMENT_METADATA)), top_k if stage == 2 else None))
    return accepted, gen_ai_rows + rows, candidates


@st.composite
def _doc_attr(draw: st.DrawFn) -> tuple[str, Any]:
    prefix = draw(st.sampled_from(_PREFIXES))
    rank = draw(st.sampled_from([0, 1, 2, 3, MAX_RANK, MAX_RANK + 1]))
    field = draw(st.sampled_from(_FIELDS))
    key = draw(st.sampled_from([_doc(prefix, rank, field), f"{prefix}.{rank}", f"{prefix}.-{rank}.{field}"]))
    if field == sc.DOCUMENT_CONTENT_HASH and draw(st.booleans()):
        return key, _sha(draw(st.sampled_from(_TEXTS)))
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
        '[{"id": 3, "metadata": {"k": 1}}, {}]', '[{"content": "alpha", "score": 1}]', "[1, 2]", "{not json",
        '{"id": "g"}'])})


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


def check_rows(req: ExportTraceServiceRequest, written: Mapping[tuple[str, str], int] | None) -> Rows:
    """The walk's rows of ``req`` are what its attributes say (`expected_documents`)."""
    rows = assemble(req, "t1", NOW, written)
    total = sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
    accepted, expected, candidates = expected_documents(req)
    assert (rows.spans, rows.rejected) == (accepted, total - accepted)
    got = [(d["trace_id"], d["span_id"], d["stage"], d["rank"], d["doc_id"], d["score"], d["content_hash"],
            d["metadata"], d["top_k"]) for d in table(rows, "documents")]
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    # the documents of a span together, spans in request order, GenAI lists' before the rest
    assert [g[:2] for g in got] == [e[:2] for e in expected]
    got_passages = passages(rows)
    assert len({p[0] for p in got_passages}) == len(got_passages), "a passage twice in one request"
    for chash, text, length, truncated in got_passages:
        assert chash == _sha(text) and length == len(text) and (text, truncated) in candidates[chash]
    known = {h for (tenant, h), n in (written or {}).items() if tenant == "t1" and n > 0}
    # every text is stored once, unless the store holds it in full already
    assert {p[0] for p in got_passages} >= set(candidates) - known
    return rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(req=_requests(), cached=st.booleans())
def test_generated_requests_give_the_rows_their_attributes_say(req: ExportTraceServiceRequest, cached: bool) -> None:
    written = {("t1", _sha(t)): n for t, n in zip(_TEXTS, (5, -3, 0, 9, 40), strict=True)}
    check_rows(req, written if cached else None)


def test_the_recomputation_sees_what_the_walk_skips() -> None:
    """The plain recomputation above is strict enough to fail: a document row too many or too few,
    a passage of another text, are caught."""
    req = _request(_span({_doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_ID): "d",
                          _doc(sc.RETRIEVAL_DOCUMENTS, 0, sc.DOCUMENT_CONTENT): "alpha"}))
    accepted, expected, candidates = expected_documents(req)
    assert accepted == 1 and expected == [("01" * 16, SPAN, "retrieved", 0, "d", None, _sha("alpha"), "", None)]
    assert candidates == {_sha("alpha"): {("alpha", False)}}
