"""Gold judgements (`ragtrace_store.gold_judgements`): the newest judgement of each key decides, and
every reader of the ``gold`` table (`read_traces`, `trace_gold`, `traces_with_own_gold`) decides it the
same way, through `relevant_judgements`."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from ragtrace_collector.assemble import assemble
from ragtrace_collector.rows import TIME_COLUMNS
from ragtrace_collector.writer import TABLE_ORDER
from ragtrace_store.gold_judgements import (
    GoldDoc,
    RelevantJudgement,
    relevant_judgements,
    trace_gold,
    traces_with_own_gold,
)
from tests import otlp_builders as T


def _judge(store: Any, tenant: str, rows: list[tuple[str, str, str, int, str]], at: datetime) -> None:
    """(query id, trace id, document, relevance, source) judged at ``at``."""
    store.insert("gold", [(tenant, q, t, d, rel, src, at) for q, t, d, rel, src in rows],
                 ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])


def test_the_newest_judgement_decides_for_every_reader(chdb_store: Any) -> None:
    tenant = f"gold-{uuid.uuid4().hex[:8]}"
    docs = [T.Doc("a", "alpha", 0.9), T.Doc("b", "beta", 0.8), T.Doc("c", "gamma", 0.7)]
    own, by_query, none = (T.TraceSpec(query_id=q, retrieved=docs, reranked=docs, top_k=2) for q in ("q1", "q1", ""))
    rows = assemble(T.request([s for t in (own, by_query, none) for s in t.spans()]), tenant,
                    int(time.time() * 1000))
    for table in TABLE_ORDER:
        if rows.count(table):
            chdb_store.insert_columns(table, rows.columns(table), TIME_COLUMNS)
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    _judge(chdb_store, tenant, [("", own.trace_id, "a", 1, "span"), ("", own.trace_id, "b", 2, "span"),
                                ("q1", "", "c", 1, "qrels"), ("q1", "", "b", 1, "qrels"),
                                ("", "", "a", 1, "qrels")], t0)  # keyed by nothing: never anyone's gold
    # later: the span's "a" withdrawn, the query's "b" withdrawn and then judged again, a review adds "c"
    _judge(chdb_store, tenant, [("", own.trace_id, "a", 0, "span"), ("q1", "", "b", 0, "qrels"),
                                ("", own.trace_id, "c", 1, "review")], t0 + timedelta(seconds=1))
    _judge(chdb_store, tenant, [("q1", "", "b", 3, "qrels")], t0 + timedelta(seconds=2))

    judged = relevant_judgements(chdb_store, tenant=tenant, trace_ids=[own.trace_id], query_ids=["q1", ""])
    assert sorted(judged) == [RelevantJudgement("qrels", "q1", "", "b", 3),
                              RelevantJudgement("qrels", "q1", "", "c", 1),
                              RelevantJudgement("review", "", own.trace_id, "c", 1),
                              RelevantJudgement("span", "", own.trace_id, "b", 2)]
    assert relevant_judgements(chdb_store, tenant=tenant) == []
    assert relevant_judgements(chdb_store, tenant=tenant + "-other", trace_ids=[own.trace_id]) == []

    # a trace's own gold wins over its query id's; the query id's stands for a trace without its own
    assert trace_gold(chdb_store, tenant=tenant, trace_id=own.trace_id, query_id="q1") == [
        GoldDoc("c", 1, "review"), GoldDoc("b", 2, "span")]
    assert trace_gold(chdb_store, tenant=tenant, trace_id=by_query.trace_id, query_id="q1") == [
        GoldDoc("b", 3, "qrels"), GoldDoc("c", 1, "qrels")]
    assert trace_gold(chdb_store, tenant=tenant, trace_id=none.trace_id) == []
    assert traces_with_own_gold(chdb_store, tenant=tenant,
                                trace_ids=[own.trace_id, by_query.trace_id, none.trace_id]) == {own.trace_id}
    read = {r.trace_id: r.gold_ids for r in chdb_store.read_traces(tenant=tenant)}
    assert read == {own.trace_id: ("b", "c"), by_query.trace_id: ("b", "c"), none.trace_id: ()}
