"""Review decisions as stored: what one reviewer said of one queued trace (its failure mode, a
verdict per claim, relevance per shown document, a note), keyed by (tenant, queue, trace,
reviewer), so a reviewer judges an item once.

Whether a decision may be taken (the item held, the verdicts valid) is `ragtrace_review.queues`'
to check; this module records and reads them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ragtrace_store.clock import as_utc

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["Decision", "queue_decisions", "save_decision", "trace_decisions"]


@dataclass(frozen=True)
class Decision:
    queue: str
    trace_id: str
    reviewer_id: str
    reviewer_name: str
    manifest_id: str
    labeller_failure_mode: str
    failure_mode: str
    #: per claim of the label, in its order: ``{index, claim, labeller_verdict, verdict}``
    claims: tuple[dict[str, Any], ...]
    #: per shown document: ``{doc_id, relevant}``
    relevance: tuple[dict[str, Any], ...]
    note: str
    decided_at: datetime


def save_decision(store: Store, tenant: str, decision: Decision) -> None:
    store.insert("review_decisions", [(
        tenant, decision.queue, decision.trace_id, decision.reviewer_id, decision.reviewer_name, decision.manifest_id,
        decision.labeller_failure_mode, decision.failure_mode, json.dumps(list(decision.claims)),
        json.dumps(list(decision.relevance)), decision.note, decision.decided_at,
    )], ["tenant", "queue", "trace_id", "reviewer_id", "reviewer_name", "manifest_id", "labeller_failure_mode",
         "failure_mode", "claims", "relevance", "note", "decided_at"])


def _read(store: Store, where: str, order_by: str, params: dict[str, str]) -> list[Decision]:
    """Decisions matching ``where`` (a fixed SQL condition over ``params``, never user text)."""
    rows = store.query_rows(
        f"SELECT queue, trace_id, reviewer_id, reviewer_name, manifest_id, labeller_failure_mode, failure_mode, "
        f"claims, relevance, note, decided_at FROM {store.table('review_decisions')} FINAL "
        f"WHERE {where} ORDER BY {order_by}", params)
    return [Decision(str(q), str(t), str(rid), str(name), str(m), str(lm), str(fm),
                     tuple(json.loads(c or "[]")), tuple(json.loads(rel or "[]")), str(note), as_utc(at))
            for q, t, rid, name, m, lm, fm, c, rel, note, at in rows]


def queue_decisions(store: Store, *, tenant: str, queue: str) -> list[Decision]:
    """Every decision in the queue, by trace, then oldest first."""
    return _read(store, "tenant = {tenant:String} AND queue = {queue:String}", "trace_id, decided_at, reviewer_id",
                 {"tenant": tenant, "queue": queue})


def trace_decisions(store: Store, *, tenant: str, trace_id: str) -> list[Decision]:
    """Every decision on one trace, in every queue of the tenant, oldest first."""
    return _read(store, "tenant = {tenant:String} AND trace_id = {t:String}", "decided_at, queue, reviewer_id",
                 {"tenant": tenant, "t": trace_id})
