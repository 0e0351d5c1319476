"""What `ragtrace store status` reports beside the migrations (how many rows each table holds), and
whether the store answers at all."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["STATUS_TABLES", "ping", "table_rows"]

#: the tables a status lists, in its order
STATUS_TABLES = ("queries", "spans", "documents", "passages", "gold", "reference_answers", "feedback", "labels")


def table_rows(store: Store, tables: Sequence[str] = STATUS_TABLES) -> dict[str, int]:
    """Rows as stored per table (from the parts' metadata: instant at any size; a retried batch
    counts until its parts merge). A table that cannot be counted (not created yet) is left out."""
    out = {}
    for table in tables:
        try:
            out[table] = int(store.query_rows(f"SELECT count() FROM {store.table(table)}")[0][0])
        except Exception:
            continue
    return out


def ping(store: Store) -> None:
    """The cheapest statement the engine answers; raises its error when the store is unreachable or
    refuses (the collector's readiness and the writer's probe)."""
    store.command("SELECT 1")
