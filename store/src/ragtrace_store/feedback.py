"""User feedback on a trace as stored: a score and a comment, attached to the trace itself or to
its query id (`ragtrace.attach_feedback`), the newest version of each key counting.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ragtrace_store.clock import as_utc

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["Feedback", "trace_feedback"]


@dataclass(frozen=True)
class Feedback:
    #: None when the feedback carried no score (a comment alone)
    score: float | None
    comment: str
    added_at: datetime | None


def trace_feedback(store: Store, *, tenant: str, trace_id: str, query_id: str = "") -> list[Feedback]:
    """The feedback on one trace: keyed by its id, or by its query id (``query_id``, '' for none)
    without a trace id; oldest first."""
    rows = store.query_rows(
        # the newest version of each feedback key (what FINAL keeps), by key; a tuple, so a NULL
        # score is kept as the newest version's, not skipped
        "SELECT w.1, w.2, at FROM (SELECT argMax(tuple(score, comment), added_at) AS w, "
        f"max(added_at) AS at FROM {store.table('feedback')} WHERE tenant = {{tenant:String}} "
        "AND (trace_id = {t:String} OR (trace_id = '' AND query_id != '' AND query_id = {q:String})) "
        "GROUP BY trace_id, query_id, span_id) ORDER BY at", {"tenant": tenant, "t": trace_id, "q": query_id})
    return [Feedback(None if s is None else float(s), str(c), as_utc(at) if at else None) for s, c, at in rows]
