"""Store reads on the real engine: paging through many traces, ties in time, limits, tenants."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ragtrace_collector import testing as T
from ragtrace_collector.assemble import TIME_COLUMNS, assemble


def test_read_traces_pages_through_ties_without_gaps_or_repeats(chdb_store: Any) -> None:
    tenant = f"page-{uuid.uuid4().hex[:8]}"
    docs = T.corpus(30, size=50)
    specs = [T.standard_trace(docs, i, with_reranker=False) for i in range(1203)]
    base = int(time.time() * 1000)
    rows = assemble(T.request([s for t in specs for s in t.spans()]), tenant, base)
    # groups of 7 roots share a start time, so page boundaries fall inside ties
    rows.cols["queries"]["start_time"] = [base - i // 7 for i in range(len(specs))]
    for table in ("documents", "spans", "queries"):
        chdb_store.insert_columns(table, rows.cols[table], TIME_COLUMNS)
    got = [r.trace_id for r in chdb_store.read_traces(tenant=tenant)]
    assert len(got) == len(set(got)) == 1203 and set(got) == {t.trace_id for t in specs}
    assert [r.trace_id for r in chdb_store.read_traces(tenant=tenant, limit=777)] == got[:777]
    assert all(len(r.retrieved) == 20 for r in chdb_store.read_traces(tenant=tenant, limit=600))
    assert list(chdb_store.read_traces(tenant=tenant + "-other")) == []
