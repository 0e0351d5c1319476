"""How long the store keeps traffic: a TTL on each table that holds it, set or removed in one call.

Traffic ages out by its trace time; gold, reference answers and reviews are curated labels and are
kept. Passage text has no trace time: it goes when no document has used it for the retention
period plus `PASSAGE_MARGIN_DAYS`. On a cluster the TTL belongs to the replicated local tables, on
every node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragtrace_store.errors import StoreError

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["MAX_RETENTION_DAYS", "PASSAGE_MARGIN_DAYS", "RetentionError", "renew_passages", "set_retention"]

#: the tables whose rows age out, and the time each ages by
RETENTION_COLUMNS = {"spans": "start_time", "queries": "start_time", "documents": "start_time",
                     "feedback": "added_at", "labels": "trace_time",
                     # what `ragtrace_store.query_roots` keeps of the roots and spans, with them
                     "query_roots": "start_time", "other_roots": "start_time", "stage_traces": "start_time"}
#: Passage text outlives the last document using it by at most this many days. A document is kept
#: until its start time + DAYS; its passage's last_seen is renewed at most every 6 hours (so it is
#: at most 12 hours behind the document's arrival) and a start time may lie up to a day ahead of
#: its arrival (the collector clamps it): 2 days cover both.
PASSAGE_MARGIN_DAYS = 2
#: The TTL is DateTime arithmetic, which wraps past 2106: 30000 days from 2026 is 1972, and every
#: row would expire at the next merge. This many days (+ the margin) stays far below the end.
MAX_RETENTION_DAYS = 10_000
_PASSAGE_SCHEMA = 6  # migration 0006 added passages.last_seen


class RetentionError(StoreError):
    """A table's TTL could not be changed: ``table`` names it, the message is the engine's."""

    def __init__(self, table: str, message: str) -> None:
        super().__init__(message)
        self.table = table


def set_retention(store: Store, days: int) -> None:
    """Keep traffic for ``days`` days (0: forever, removing the TTLs). Raises `ValueError` for days
    outside 0..`MAX_RETENTION_DAYS`, `RetentionError` for the first table the engine refused (the
    tables before it keep their new TTL)."""
    if not 0 <= days <= MAX_RETENTION_DAYS:
        raise ValueError(f"days must be in 0..{MAX_RETENTION_DAYS} (0 keeps forever), got {days}")
    ttl: dict[str, str] = {table: f"toDateTime({column}) + INTERVAL {int(days)} DAY"
                           for table, column in RETENTION_COLUMNS.items()}
    if days:
        # Rows from before migration 0006 have no real last_seen; they count as seen when it was
        # applied (the first time: rows written since then carry a real last_seen), so the text of
        # traces that are still kept is never taken away by an upgrade.
        since = store.query_rows(f"SELECT min(applied_at) FROM {store.table('schema_migrations')} "
                                 "WHERE version = {v:UInt32}", {"v": _PASSAGE_SCHEMA})[0][0]
        since_ms = int(since.timestamp() * 1000)
        ttl["passages"] = (f"toDateTime(greatest(last_seen, fromUnixTimestamp64Milli(toInt64({since_ms}), 'UTC'))) "
                           f"+ INTERVAL {int(days) + PASSAGE_MARGIN_DAYS} DAY")
    else:
        ttl["passages"] = ""
    for table, expr in ttl.items():
        target = (f"{store.table(table + '_local')} ON CLUSTER '{store.cluster}'"
                  if store.variant == "cluster" else store.table(table))
        try:
            store.command(f"ALTER TABLE {target} " + (f"MODIFY TTL {expr}" if days else "REMOVE TTL"))
        except Exception as exc:
            if days == 0 and "TTL" in str(exc):
                continue  # no TTL to remove
            raise RetentionError(table, str(exc)) from exc


def renew_passages(store: Store, tenant: str, content_hashes: Sequence[str], *, now_ms: int, cutoff_ms: int) -> None:
    """Mark ``tenant``'s passages of these content hashes as used at ``now_ms`` (milliseconds since the
    epoch, UTC), so their text outlives the documents that use them (see the module doc). Copies the row
    a reader sees (FINAL) with the new ``last_seen``; a passage renewed or written since ``cutoff_ms`` is
    left alone, so a hash costs one row per renewal interval. Raises the engine's error."""
    passages = store.table("passages")
    store.command(
        f"INSERT INTO {passages} (tenant, content_hash, content, content_length, truncated, first_seen, last_seen) "
        "SELECT tenant, content_hash, content, content_length, truncated, first_seen, "
        "fromUnixTimestamp64Milli({now:Int64}, 'UTC') "
        f"FROM {passages} FINAL WHERE tenant = {{tenant:String}} AND content_hash IN {{hashes:Array(String)}} "
        "AND last_seen < fromUnixTimestamp64Milli({cutoff:Int64}, 'UTC')",
        {"tenant": tenant, "hashes": list(content_hashes), "now": now_ms, "cutoff": cutoff_ms})
