"""Gold judgements as stored: which documents are relevant to a trace or to a query id, and where
each judgement came from (``span``: sent on the trace; ``qrels``: imported; ``review``: reviewers'
majority).

A judgement is keyed by (source, query id, trace id, document); the newest version of each key
decides. A trace's gold is its own (keyed by trace id) when it has any, else its query id's: the
rule `read_traces` applies too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragtrace_store.clock import utc_now

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["GoldDoc", "GoldJudgement", "add_gold_judgements", "trace_gold", "traces_with_own_gold"]

#: rows written in one insert (a large qrels file is written in parts)
_BATCH = 50_000


@dataclass(frozen=True)
class GoldJudgement:
    """One document judged for a query id or a trace id (exactly one of them non-empty)."""

    query_id: str
    trace_id: str
    doc_id: str
    relevance: int


@dataclass(frozen=True)
class GoldDoc:
    """A relevant document of a trace and the source of its judgement."""

    doc_id: str
    relevance: int
    source: str  # span | qrels | review


def add_gold_judgements(store: Store, judgements: Iterable[GoldJudgement], *, tenant: str, source: str) -> int:
    """Add these judgements from ``source`` ("qrels", "review"); a judgement of a key already stored
    replaces it. Returns how many were written."""
    now = utc_now()
    rows = [(tenant, j.query_id, j.trace_id, j.doc_id, j.relevance, source, now) for j in judgements]
    for i in range(0, len(rows), _BATCH):
        store.insert("gold", rows[i:i + _BATCH],
                     ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])
    return len(rows)


def trace_gold(store: Store, *, tenant: str, trace_id: str, query_id: str = "") -> list[GoldDoc]:
    """The relevant documents of one trace (``query_id``: its query id, '' for none), with their
    sources, by source then document."""
    rows = store.query_rows(
        # the newest judgement of each (source, query, trace, document) decides, as in read_traces
        "SELECT trace_id, doc_id, rel, source FROM (SELECT source, query_id, trace_id, doc_id, "
        f"argMax(relevance, added_at) AS rel FROM {store.table('gold')} WHERE tenant = {{tenant:String}} "
        "AND (trace_id = {t:String} OR (trace_id = '' AND query_id != '' AND query_id = {q:String})) "
        "GROUP BY source, query_id, trace_id, doc_id) WHERE rel > 0 ORDER BY source, doc_id",
        {"tenant": tenant, "t": trace_id, "q": query_id})
    # gold keyed by this trace wins over gold keyed by its query id
    by_trace = [r for r in rows if r[0]]
    return [GoldDoc(str(d), int(rel), str(src)) for _, d, rel, src in (by_trace or rows)]


def traces_with_own_gold(store: Store, *, tenant: str, trace_ids: Sequence[str]) -> set[str]:
    """Which of these traces have relevant gold keyed by their own trace id (the gold `read_traces`
    prefers to their query id's); the others' gold, if any, is their query id's."""
    if not trace_ids:
        return set()
    rows = store.query_rows(
        # the newest judgement of each key decides (as in read_traces), then only relevant ones
        "SELECT DISTINCT trace_id FROM (SELECT trace_id, argMax(relevance, added_at) AS rel "
        f"FROM {store.table('gold')} WHERE tenant = {{tenant:String}} AND trace_id IN {{ids:Array(String)}} "
        "GROUP BY source, query_id, trace_id, doc_id) WHERE rel > 0",
        {"tenant": tenant, "ids": list(trace_ids)})
    return {str(r[0]) for r in rows}
