"""Query ids (``ragtrace.query.id`` on a root span): the key of what is imported before or without
its traces (qrels, reference answers, evidence spans), and applied to every trace that carries it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["traced_query_ids"]


def traced_query_ids(store: Store, *, tenant: str, query_ids: Sequence[str]) -> int:
    """How many of these query ids a stored trace of the tenant carries."""
    rows = store.query_rows(
        # any root row carrying the query id counts (a retried copy names the same one): no FINAL
        f"SELECT count(DISTINCT query_id) FROM {store.table('queries')} "
        "WHERE tenant = {tenant:String} AND query_id IN {qids:Array(String)}",
        {"tenant": tenant, "qids": list(query_ids)})
    return int(rows[0][0]) if rows else 0
