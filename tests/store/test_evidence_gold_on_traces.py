"""Evidence-span gold on the read model: `read_traces` places a query's spans on the chunks each trace
saw (from their provenance), beside the ``gold`` table's ids, so every reader shows both."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from ragtrace import semconv as sc
from ragtrace_collector.assemble import assemble
from ragtrace_collector.rows import TIME_COLUMNS
from ragtrace_collector.writer import TABLE_ORDER
from ragtrace_store import GoldEvidence, GoldSpan, write_gold_spans
from ragtrace_store.gold_judgements import GoldJudgement, add_gold_judgements
from tests import otlp_builders as T


def _store_traces(store: Any, tenant: str, traces: list[T.TraceSpec],
                  provenance: dict[str, tuple[str, int, int]]) -> None:
    """Store the traces; every retrieved and reranked chunk named in ``provenance`` carries it in its
    ``document.metadata``, as the example service's chunks do."""
    spans = [s for t in traces for s in t.spans()]
    for span in spans:
        for prefix in (sc.RETRIEVAL_DOCUMENTS, sc.RERANKER_INPUT_DOCUMENTS, sc.RERANKER_OUTPUT_DOCUMENTS,
                       sc.CONTEXT_DOCUMENTS):
            for i in range(100):
                doc_id = span.attrs.get(sc.document_attribute(prefix, i, sc.DOCUMENT_ID))
                if doc_id is None:
                    break
                if doc_id in provenance:
                    source, start, end = provenance[doc_id]
                    span.attrs[sc.document_attribute(prefix, i, sc.DOCUMENT_METADATA)] = json.dumps(
                        {sc.PROVENANCE_SOURCE_ID: source, sc.PROVENANCE_START: start, sc.PROVENANCE_END: end})
    rows = assemble(T.request(spans), tenant, int(time.time() * 1000))
    for table in TABLE_ORDER:
        if rows.count(table):
            store.insert_columns(table, rows.columns(table), TIME_COLUMNS)


def test_evidence_spans_are_placed_on_each_traces_chunks_beside_the_gold_ids(chdb_store: Any) -> None:
    tenant = f"evgold-{uuid.uuid4().hex[:8]}"
    c0, c1, c2 = T.Doc("c0", "zero", 0.9), T.Doc("c1", "one", 0.8), T.Doc("c2", "two", 0.7)
    # the reranker pushes c1 (which holds the evidence) below the top 1: a rank inversion
    inverted = T.TraceSpec(query_id="q1", retrieved=[c0, c1, c2], reranked=[c2, c0, c1], top_k=1)
    plain = T.TraceSpec(query_id="q1", retrieved=[T.Doc("p0", "no provenance", 0.5)],
                        reranked=[T.Doc("p0", "no provenance", 0.5)], top_k=1)
    _store_traces(chdb_store, tenant, [inverted, plain],
                  {"c0": ("d1", 0, 100), "c1": ("d1", 100, 200), "c2": ("d2", 0, 50)})
    write_gold_spans(chdb_store, [GoldSpan("q1", "d1", 110, 150), GoldSpan("q1", "d3", 0, 10)], tenant=tenant)
    add_gold_judgements(chdb_store, [GoldJudgement("q1", "", "c2", 1)], tenant=tenant, source="qrels")

    got = {r.trace_id: r for r in chdb_store.read_traces(tenant=tenant)}
    rec = got[inverted.trace_id]
    # the span in d1 is held by c1; the one in d3 by no chunk of this trace (the evidence it missed)
    assert rec.gold_evidence == (GoldEvidence("c1", "d1", 110, 150), GoldEvidence("", "d3", 0, 10))
    assert rec.gold_ids == ("c2",)  # the gold table's ids, which the audit's precedence reads
    assert rec.all_gold_ids == ("c1", "c2")
    obj = rec.as_json()
    assert obj["gold_ids"] == ["c1", "c2"]
    assert obj["gold_evidence"] == [{"doc_id": "c1", "source_id": "d1", "start": 110, "end": 150},
                                    {"doc_id": None, "source_id": "d3", "start": 0, "end": 10}]
    # no chunk of the other trace carries provenance: its spans cannot be placed, only the ids show
    other = got[plain.trace_id]
    assert other.gold_evidence == () and other.all_gold_ids == ("c2",)
    assert other.as_json()["gold_evidence"] == []
