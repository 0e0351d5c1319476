"""Gold judgements as stored: which documents are relevant to a trace or to a query id, and where
each judgement came from (``span``: sent on the trace; ``qrels``: imported; ``review``: reviewers'
majority).

A judgement is keyed by (source, query id, trace id, document); the newest version of each key
decides (`relevant_judgements`, the one reading of the table that `read_traces`, `trace_gold` and
`traces_with_own_gold` share). A trace's gold is its own (keyed by trace id) when it has any, else
its query id's: the rule `read_traces` applies too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ragtrace_store.clock import utc_now

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["GoldDoc", "GoldJudgement", "RelevantJudgement", "add_gold_judgements", "relevant_judgements", "trace_gold",
           "traces_with_own_gold"]

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


class RelevantJudgement(NamedTuple):
    """A judgement of a key whose newest version says relevant (``relevance`` > 0)."""

    source: str
    query_id: str
    trace_id: str
    doc_id: str
    relevance: int


def relevant_judgements(store: Store, *, tenant: str, trace_ids: Sequence[str] = (),
                        query_ids: Sequence[str] = ()) -> list[RelevantJudgement]:
    """The relevant judgements keyed by one of ``trace_ids``, or by one of ``query_ids`` and no
    trace: of each (source, query id, trace id, document) the newest version (``added_at``) decides,
    so a judgement a later one withdrew (relevance 0) is not among them. Unordered."""
    qids = [q for q in query_ids if q]  # '' is "no query id", never a key to match
    if not trace_ids and not qids:
        return []
    rows = store.query_rows(
        # the conditions are on the key, so they hold for every version of a key or for none
        "SELECT source, query_id, trace_id, doc_id, rel FROM (SELECT source, query_id, trace_id, doc_id, "
        f"argMax(relevance, added_at) AS rel FROM {store.table('gold')} WHERE tenant = {{tenant:String}} "
        "AND (trace_id IN {ids:Array(String)} OR (trace_id = '' AND query_id IN {qids:Array(String)})) "
        "GROUP BY source, query_id, trace_id, doc_id) WHERE rel > 0",
        {"tenant": tenant, "ids": list(trace_ids), "qids": qids})
    return [RelevantJudgement(str(s), str(q), str(t), str(d), int(r)) for s, q, t, d, r in rows]


def trace_gold(store: Store, *, tenant: str, trace_id: str, query_id: str = "") -> list[GoldDoc]:
    """The relevant documents of one trace (``query_id``: its query id, '' for none), with their
    sources, by source then document."""
    rows = relevant_judgements(store, tenant=tenant, trace_ids=[trace_id], query_ids=[query_id])
    # gold keyed by this trace wins over gold keyed by its query id
    mine = [r for r in rows if r.trace_id] or rows
    return [GoldDoc(r.doc_id, r.relevance, r.source) for r in sorted(mine, key=lambda r: (r.source, r.doc_id))]


def traces_with_own_gold(store: Store, *, tenant: str, trace_ids: Sequence[str]) -> set[str]:
    """Which of these traces have relevant gold keyed by their own trace id (the gold `read_traces`
    prefers to their query id's); the others' gold, if any, is their query id's."""
    return {r.trace_id for r in relevant_judgements(store, tenant=tenant, trace_ids=trace_ids)}
