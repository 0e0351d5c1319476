"""Store reads on the real engine: paging through many traces, ties in time, limits, tenants."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ragtrace_collector.assemble import assemble
from ragtrace_collector.rows import TIME_COLUMNS
from tests import otlp_builders as T


def test_read_traces_pages_through_ties_without_gaps_or_repeats(chdb_store: Any) -> None:
    tenant = f"page-{uuid.uuid4().hex[:8]}"
    docs = T.corpus(30, size=50)
    specs = [T.standard_trace(docs, i, with_reranker=False) for i in range(1203)]
    base = int(time.time() * 1000)
    rows = assemble(T.request([s for t in specs for s in t.spans()]), tenant, base)
    # groups of 7 roots share a start time, so page boundaries fall inside ties
    rows.cols["queries"]["start_time"] = [base - i // 7 for i in range(len(specs))]
    for table in ("documents", "spans", "queries"):
        chdb_store.insert_columns(table, rows.columns(table), TIME_COLUMNS)
    got = [r.trace_id for r in chdb_store.read_traces(tenant=tenant)]
    assert len(got) == len(set(got)) == 1203 and set(got) == {t.trace_id for t in specs}
    assert [r.trace_id for r in chdb_store.read_traces(tenant=tenant, limit=777)] == got[:777]
    assert all(len(r.retrieved) == 20 for r in chdb_store.read_traces(tenant=tenant, limit=600))
    assert list(chdb_store.read_traces(tenant=tenant + "-other")) == []


def test_a_reference_on_the_root_span_is_stored_and_wins_over_an_imported_one(chdb_store: Any) -> None:
    import os
    from datetime import UTC, datetime

    from ragtrace import semconv as sc
    from ragtrace_collector.writer import TABLE_ORDER

    tenant = f"ref-{uuid.uuid4().hex[:8]}"

    def root(query_id: str, reference: str | None) -> T.SpanSpec:
        attrs = {sc.SPAN_KIND: "CHAIN", sc.SDK_VERSION: "0.1", sc.INPUT_VALUE: "How high?",
                 sc.OUTPUT_VALUE: "1,465 metres.", sc.QUERY_ID: query_id}
        if reference is not None:
            attrs[sc.REFERENCE_ANSWER] = reference
        return T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "pipeline", attrs)

    with_ref, imported_only, none, blank = root("q1", " 1,465 "), root("q1", None), root("q2", None), root("q3", "")
    rows = assemble(T.request([with_ref, imported_only, none, blank]), tenant, int(time.time() * 1000))
    assert rows.cols["reference_answers"]["reference"] == ["1,465"]  # stripped; a blank one is no reference
    for table in TABLE_ORDER:
        if rows.count(table):
            chdb_store.insert_columns(table, rows.columns(table), TIME_COLUMNS)
    chdb_store.insert("reference_answers", [(tenant, "q1", "", "imported 1465", "import", datetime.now(UTC))],
                      ["tenant", "query_id", "trace_id", "reference", "source", "added_at"])
    got = {r.trace_id: r.reference for r in chdb_store.read_traces(tenant=tenant)}
    assert got == {with_ref.trace_id: "1,465", imported_only.trace_id: "imported 1465", none.trace_id: None,
                   blank.trace_id: None}
    assert next(iter(chdb_store.read_traces(tenant=tenant, trace_ids=[with_ref.trace_id]))).as_json()[
        "reference"] == "1,465"


def test_pages_are_exact_when_most_root_rows_are_duplicates(chdb_store: Any) -> None:
    """Three root rows per trace (the SDK's, a retried copy, a gateway span 2 ms earlier): a page's
    newest rows name a third as many traces, so the reader must widen its look until the page is
    certain; no trace is missed, repeated, or read with the gateway's values."""
    from datetime import UTC, datetime, timedelta

    tenant = f"dupes-{uuid.uuid4().hex[:8]}"
    base = datetime(2026, 9, 30, 23, 0, tzinfo=UTC)  # the traces straddle a month's partitions
    cols = ["tenant", "trace_id", "span_id", "service", "release", "route", "query", "start_time", "root_priority",
            "received_at"]
    ids = [uuid.uuid4().hex for _ in range(1203)]
    starts = [base + timedelta(seconds=6 * (i // 3)) for i in range(len(ids))]  # ties of three
    sdk = [(tenant, t, "sdk", "qa", "r1", "/ask", "q", s, 3, base) for t, s in zip(ids, starts, strict=True)]
    chdb_store.insert("queries", sdk, cols)
    chdb_store.insert("queries", [(*r[:9], base + timedelta(hours=5)) for r in sdk], cols)
    chdb_store.insert("queries", [(tenant, t, "gw", "gateway", "gw-1", "/gw", "", s - timedelta(milliseconds=2), 1,
                                   base + timedelta(hours=6)) for t, s in zip(ids, starts, strict=True)], cols)
    expected = [t for _s, t in sorted(zip(starts, ids, strict=True), key=lambda x: (-x[0].timestamp(), x[1]))]
    got = list(chdb_store.read_traces(tenant=tenant))
    assert [r.trace_id for r in got] == expected
    assert {(r.release, r.service, r.route) for r in got} == {("r1", "qa", "/ask")}
    assert [r.trace_id for r in chdb_store.read_traces(tenant=tenant, limit=777)] == expected[:777]
    since = starts[600]
    assert [r.trace_id for r in chdb_store.read_traces(tenant=tenant, since=since)] == [
        t for t in expected if starts[ids.index(t)] >= since]
    assert list(chdb_store.read_traces(tenant=tenant, release="gw-1", include_all=True)) == []
