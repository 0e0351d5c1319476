"""Review queues as stored: a queue's settings, its items (each a snapshot of the label under
review), how far its reviewers got, and who holds which item.

Which traces go into a queue, in which order, and to whom an item is given are
`ragtrace_review.queues`' decisions; this module answers and records them. Every table here is a
ReplacingMergeTree read with ``FINAL`` (a queue holds thousands of rows, not millions): an item is
keyed by (tenant, queue, trace), an assignment by (tenant, queue, trace, reviewer), a queue by
(tenant, queue).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ragtrace_store.labels import LabelRecord

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["QueueCounts", "QueueItem", "QueueSettings", "add_queue_items", "assign_item", "assignable_item",
           "decided_traces", "held_item", "holds_item", "next_position", "queue_counts", "queue_item", "queue_items",
           "queue_names", "queue_settings", "save_queue"]

_ITEM_COLUMNS = ("tenant", "queue", "trace_id", "query_id", "manifest_id", "reason", "failure_mode", "confidence",
                 "label_detail", "position")


@dataclass(frozen=True)
class QueueItem:
    tenant: str
    queue: str
    trace_id: str
    query_id: str
    manifest_id: str
    reason: str
    failure_mode: str
    confidence: float | None
    #: the snapshot of the label record under review, as its JSON object
    label: dict[str, Any]
    position: int

    @property
    def record(self) -> LabelRecord:
        """The label snapshot under review, read by the contract (`ragtrace_store.LabelError` if it breaks it)."""
        return LabelRecord.from_json(self.label, f"queue {self.queue!r} item {self.trace_id!r}")


@dataclass(frozen=True)
class QueueSettings:
    #: K: how many distinct reviewers judge each item
    reviewers_per_item: int
    description: str


@dataclass(frozen=True)
class QueueCounts:
    """A queue's items, its decisions per item, and each reviewer's (id, name, decisions), by name."""

    items: int
    decisions_per_item: dict[str, int] = field(default_factory=dict)
    reviewers: tuple[tuple[str, str, int], ...] = ()


# --- queues ----------------------------------------------------------------------------------------
def queue_settings(store: Store, tenant: str, queue: str) -> QueueSettings | None:
    """The queue's K and description, None when there is no such queue."""
    rows = store.query_rows(
        f"SELECT reviewers_per_item, description FROM {store.table('review_queues')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String}", {"tenant": tenant, "queue": queue})
    return QueueSettings(int(rows[0][0]), str(rows[0][1])) if rows else None


def save_queue(store: Store, *, tenant: str, queue: str, reviewers_per_item: int, description: str,
               options: Mapping[str, Any], at: datetime) -> None:
    """Create the queue, or write its settings' newest version (``options``: how it was filled)."""
    store.insert("review_queues", [(tenant, queue, reviewers_per_item, description,
                                    json.dumps(dict(options), sort_keys=True), at, at)],
                 ["tenant", "queue", "reviewers_per_item", "description", "options", "created_at", "updated_at"])


def queue_names(store: Store, *, tenant: str) -> list[str]:
    """The tenant's queues, oldest first."""
    rows = store.query_rows(
        f"SELECT queue FROM {store.table('review_queues')} FINAL WHERE tenant = {{tenant:String}} "
        "ORDER BY created_at, queue", {"tenant": tenant})
    return [str(r[0]) for r in rows]


# --- items -----------------------------------------------------------------------------------------
def _item(row: Sequence[Any]) -> QueueItem:
    tenant, queue, trace_id, query_id, manifest_id, reason, mode, confidence, detail, position = row
    return QueueItem(str(tenant), str(queue), str(trace_id), str(query_id), str(manifest_id), str(reason),
                     str(mode), confidence, json.loads(detail) if detail else {}, int(position))


def queue_items(store: Store, *, tenant: str, queue: str) -> list[QueueItem]:
    """The queue's items in queue order."""
    rows = store.query_rows(
        f"SELECT {', '.join(_ITEM_COLUMNS)} FROM {store.table('review_items')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String} ORDER BY position",
        {"tenant": tenant, "queue": queue})
    return [_item(r) for r in rows]


def queue_item(store: Store, *, tenant: str, queue: str, trace_id: str) -> QueueItem | None:
    rows = store.query_rows(
        f"SELECT {', '.join(_ITEM_COLUMNS)} FROM {store.table('review_items')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String} AND trace_id = {t:String}",
        {"tenant": tenant, "queue": queue, "t": trace_id})
    return _item(rows[0]) if rows else None


def next_position(store: Store, *, tenant: str, queue: str) -> int:
    """The position after the queue's last item (0 for an empty queue)."""
    last, n = store.query_rows(
        f"SELECT max(position) + 1, count() FROM {store.table('review_items')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String}", {"tenant": tenant, "queue": queue})[0]
    return int(last) if n else 0


def add_queue_items(store: Store, items: Sequence[QueueItem], *, added_at: datetime) -> None:
    """Write these items (each at its own position); an item already queued is replaced."""
    store.insert("review_items", [
        (it.tenant, it.queue, it.trace_id, it.query_id, it.manifest_id, it.reason, it.failure_mode, it.confidence,
         json.dumps(it.label, sort_keys=True, default=str), it.position, added_at) for it in items],
        [*_ITEM_COLUMNS, "added_at"])


def queue_counts(store: Store, *, tenant: str, queue: str) -> QueueCounts:
    """How many items the queue holds and how many decisions each item and each reviewer has."""
    params = {"tenant": tenant, "queue": queue}
    n_items = int(store.query_rows(
        f"SELECT count() FROM {store.table('review_items')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String}", params)[0][0])
    per_item = store.query_rows(
        f"SELECT trace_id, count() FROM {store.table('review_decisions')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String} GROUP BY trace_id", params)
    per_reviewer = store.query_rows(
        f"SELECT reviewer_id, any(reviewer_name), count() FROM {store.table('review_decisions')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String} GROUP BY reviewer_id ORDER BY 2, 1", params)
    return QueueCounts(n_items, {str(t): int(c) for t, c in per_item},
                       tuple((str(r), str(name), int(c)) for r, name, c in per_reviewer))


# --- who holds what --------------------------------------------------------------------------------
def decided_traces(store: Store, *, tenant: str, queue: str, reviewer_id: str) -> set[str]:
    """The items of the queue this reviewer has decided."""
    rows = store.query_rows(
        f"SELECT trace_id FROM {store.table('review_decisions')} FINAL WHERE tenant = {{tenant:String}} "
        "AND queue = {queue:String} AND reviewer_id = {rid:String}",
        {"tenant": tenant, "queue": queue, "rid": reviewer_id})
    return {str(r[0]) for r in rows}


def holds_item(store: Store, *, tenant: str, queue: str, trace_id: str, reviewer_id: str) -> bool:
    """Whether the item was ever given to this reviewer (an expired lease still counts: it was theirs)."""
    rows = store.query_rows(
        f"SELECT count() FROM {store.table('review_assignments')} FINAL WHERE tenant = {{tenant:String}} "
        "AND queue = {queue:String} AND trace_id = {t:String} AND reviewer_id = {rid:String}",
        {"tenant": tenant, "queue": queue, "t": trace_id, "rid": reviewer_id})
    return int(rows[0][0]) > 0


def held_item(store: Store, *, tenant: str, queue: str, reviewer_id: str) -> str | None:
    """The first item (in queue order) given to this reviewer that they have not decided, if any."""
    rows = store.query_rows(
        f"SELECT a.trace_id FROM {store.table('review_assignments')} AS a FINAL "
        f"INNER JOIN {store.table('review_items')} AS i FINAL "
        "ON i.tenant = a.tenant AND i.queue = a.queue AND i.trace_id = a.trace_id "
        "WHERE a.tenant = {tenant:String} AND a.queue = {queue:String} AND a.reviewer_id = {rid:String} "
        f"AND a.trace_id NOT IN (SELECT trace_id FROM {store.table('review_decisions')} FINAL "
        "  WHERE tenant = {tenant:String} AND queue = {queue:String} AND reviewer_id = {rid:String}) "
        "ORDER BY i.position LIMIT 1",
        {"tenant": tenant, "queue": queue, "rid": reviewer_id})
    return str(rows[0][0]) if rows else None


def assignable_item(store: Store, *, tenant: str, queue: str, reviewer_id: str, reviewers_per_item: int,
                    now: datetime) -> str | None:
    """The first item (in queue order) never given to this reviewer that fewer than
    ``reviewers_per_item`` others hold (a lease not expired at ``now``) or decided."""
    rows = store.query_rows(
        f"SELECT i.trace_id FROM {store.table('review_items')} AS i FINAL "
        "WHERE i.tenant = {tenant:String} AND i.queue = {queue:String} "
        f"AND i.trace_id NOT IN (SELECT trace_id FROM {store.table('review_assignments')} FINAL "
        "  WHERE tenant = {tenant:String} AND queue = {queue:String} AND reviewer_id = {rid:String}) "
        "AND i.trace_id NOT IN (SELECT trace_id FROM ("
        "  SELECT trace_id, reviewer_id FROM "
        f"  {store.table('review_decisions')} FINAL WHERE tenant = {{tenant:String}} AND queue = {{queue:String}} "
        "  UNION DISTINCT SELECT trace_id, reviewer_id FROM "
        f"  {store.table('review_assignments')} FINAL WHERE tenant = {{tenant:String}} "
        "  AND queue = {queue:String} AND expires_at > {now:DateTime64(3, 'UTC')}"
        ") GROUP BY trace_id HAVING count() >= {k:UInt32}) "
        "ORDER BY i.position LIMIT 1",
        {"tenant": tenant, "queue": queue, "rid": reviewer_id, "now": now, "k": reviewers_per_item})
    return str(rows[0][0]) if rows else None


def assign_item(store: Store, *, tenant: str, queue: str, trace_id: str, reviewer_id: str, at: datetime,
                expires_at: datetime) -> None:
    """Give the item to this reviewer until ``expires_at`` (a lease)."""
    store.insert("review_assignments", [(tenant, queue, trace_id, reviewer_id, at, expires_at)],
                 ["tenant", "queue", "trace_id", "reviewer_id", "assigned_at", "expires_at"])
