"""Review queues: which labelled traces reviewers see, in which order, and by how many reviewers.

`enqueue` fills a queue from per-trace label records (`ragtrace_store.LabelRecord`, the shared
contract; read from the `labels` table when not given). Three strata, each capped at ``per_mode``
items so that common modes cannot crowd out rare ones:

* ``disagreement`` — another labeller manifest gave the same trace a different failure mode;
* ``low_confidence`` — the labeller's confidence is below a threshold (least confident first);
* ``mode`` — up to ``per_mode`` traces of *each* failure mode, so a rare mode is always seen.

Within a stratum the order is a hash of the trace id, so reruns and shards agree, and rerunning
`enqueue` tops a queue up instead of duplicating it (existing items count against the caps).

Assignment: `next_item` gives a reviewer an item they have neither decided nor been given before,
and that fewer than K reviewers hold or decided. Holdings are leases, so an abandoned item goes to
someone else after ``LEASE``. ClickHouse has no transactions: within one collector process a lock
makes the K bound exact; across replicas it is best effort (an extra decision is kept, not lost).
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ragtrace_review.auth import Reviewer
from ragtrace_review.errors import ReviewError
from ragtrace_store import (
    CLAIM_VERDICTS,
    DEFAULT_TENANT,
    FAILURE_MODES,
    LabelError,
    LabelRecord,
    Store,
    read_labels,
    utc_now,
)
from ragtrace_store.manifest_usage import latest_manifest as _latest_manifest
from ragtrace_store.manifest_usage import other_manifest_modes
from ragtrace_store.review_decisions import Decision, queue_decisions, save_decision, trace_decisions
from ragtrace_store.review_queues import (
    QueueItem,
    add_queue_items,
    assign_item,
    assignable_item,
    decided_traces,
    held_item,
    holds_item,
    next_position,
    queue_counts,
    queue_item,
    queue_items,
    queue_settings,
    save_queue,
)
from ragtrace_store.review_queues import queue_names as _queue_names

__all__ = ["LEASE", "Decision", "EnqueueResult", "QueueItem", "QueueProgress", "ReviewerProgress", "add_trace",
           "check_enqueue_options", "decided_by", "decisions_for_trace", "enqueue", "get_item", "holds",
           "latest_manifest", "list_decisions", "list_items", "next_item", "progress", "queue_names",
           "record_decision", "reviewers_per_item", "trace_hash"]

LEASE = timedelta(minutes=30)
_ASSIGN_LOCK = threading.Lock()


def trace_hash(trace_id: str) -> int:
    """Deterministic order key: the same trace sorts the same way on every run and shard."""
    return int(hashlib.sha256(trace_id.encode("utf-8")).hexdigest()[:16], 16)


@dataclass(frozen=True)
class EnqueueResult:
    queue: str
    tenant: str
    reviewers_per_item: int
    added: dict[str, int]  # "disagreement" | "low_confidence" | "mode:<failure mode>" -> items added now
    already_queued: int
    candidates: int

    @property
    def total_added(self) -> int:
        return sum(self.added.values())


@dataclass(frozen=True)
class ReviewerProgress:
    reviewer_id: str
    name: str
    decided: int


@dataclass(frozen=True)
class QueueProgress:
    queue: str
    reviewers_per_item: int
    items: int
    #: items with at least K decisions
    complete: int
    decisions: int
    reviewers: tuple[ReviewerProgress, ...] = field(default_factory=tuple)

    @property
    def target(self) -> int:
        return self.items * self.reviewers_per_item

    @property
    def percent(self) -> float:
        return 100.0 * min(self.decisions, self.target) / self.target if self.target else 0.0


# --- filling a queue --------------------------------------------------------------------------
def _validate_queue_name(queue: str) -> None:
    if not queue or len(queue) > 100 or not all(c.isalnum() or c in "-_." for c in queue):
        raise ReviewError(f"invalid queue name {queue!r}: use 1-100 letters, digits, '-', '_' or '.'")


def latest_manifest(store: Store, tenant: str) -> str | None:
    """The manifest that labelled the tenant's traces most recently (None before any audit)."""
    return _latest_manifest(store, tenant)


def _as_record(label: LabelRecord | Mapping[str, Any], index: int) -> LabelRecord:
    if isinstance(label, LabelRecord):
        return label
    try:
        return LabelRecord.from_json(label, f"label record {index}")
    except LabelError as exc:
        raise ReviewError(str(exc)) from exc


def check_enqueue_options(queue: str, per_mode: int = 20, reviewers: int = 2, low_confidence: float = 0.6) -> None:
    """Raise `ReviewError` for options no `enqueue` accepts, whatever the store holds: what a caller
    checks before work that would only end in this refusal (`ragtrace audit --queue`)."""
    _validate_queue_name(queue)
    if per_mode < 1:
        raise ReviewError(f"per_mode must be >= 1, got {per_mode}")
    if not 1 <= reviewers <= 50:
        raise ReviewError(f"reviewers (K per item) must be between 1 and 50, got {reviewers}")
    if not 0 <= low_confidence <= 1:  # above 1 it would flag every label, below 0 none
        raise ReviewError(f"low_confidence is a labeller confidence in [0, 1], got {low_confidence}")


def enqueue(
    store: Store,
    queue: str,
    labels: Iterable[LabelRecord | Mapping[str, Any]] | None = None,
    per_mode: int = 20,
    reviewers: int = 2,
    *,
    tenant: str = DEFAULT_TENANT,
    manifest_id: str | None = None,
    low_confidence: float = 0.6,
    all_low_confidence: bool = False,
    release: str | None = None,
    service: str | None = None,
    description: str = "",
) -> EnqueueResult:
    """Put flagged traces into ``queue`` (created when missing) for ``reviewers`` distinct reviewers each.

    ``labels`` are per-trace label records (`LabelRecord`s, or their JSON objects). When None they
    are read from the `labels` table: ``manifest_id``'s labels, or the most recently written manifest's.
    ``per_mode`` caps each stratum (see the module docstring); ``low_confidence`` is the confidence
    below which a label is flagged; ``all_low_confidence`` queues every such label, uncapped (the
    audit's selective labelling: what the labeller is not sure of goes to a human, all of it).
    Returns what was added, per stratum.
    """
    check_enqueue_options(queue, per_mode, reviewers, low_confidence)
    existing_queue = queue_settings(store, tenant, queue)
    if existing_queue is not None and existing_queue.reviewers_per_item != reviewers:
        raise ReviewError(
            f"queue {queue!r} already exists with {existing_queue.reviewers_per_item} reviewers per item (asked for "
            f"{reviewers}); keep K, or use a new queue name"
        )
    if labels is None:
        manifest_id = manifest_id or latest_manifest(store, tenant)
        if manifest_id is None:
            raise ReviewError(f"tenant {tenant!r} has no labels yet: run `ragtrace audit` first")
        try:
            records = read_labels(store, tenant=tenant, manifest_id=manifest_id, release=release, service=service)
        except LabelError as exc:
            raise ReviewError(str(exc)) from exc
        if not records:  # a mistyped manifest, release or service matches nothing: say so, not "added 0"
            scope = "".join(f" {name} {value!r}" for name, value in (("release", release), ("service", service))
                            if value is not None)
            raise ReviewError(f"no labels under manifest {manifest_id!r}{' for' + scope if scope else ''} in "
                              f"tenant {tenant!r}: check --manifest, --release and --service (the audit's report "
                              "names its manifest id), or audit those traces first")
    else:
        records = [_as_record(r, i) for i, r in enumerate(labels)]
        if manifest_id is not None:
            records = [r for r in records if r.manifest_id == manifest_id]
    # an incomplete trace has no label to confirm or correct (its outcome is not a failure mode)
    by_trace = {r.trace_id: r for r in records if not r.is_incomplete}

    existing = {it.trace_id: it for it in list_items(store, tenant=tenant, queue=queue)}
    others = other_manifest_modes(store, tenant, list(by_trace), {r.manifest_id for r in records})

    def conf(r: LabelRecord) -> float:
        return r.confidence if r.confidence is not None else 1.0

    def key(t: str) -> tuple[float, int]:
        return (conf(by_trace[t]), trace_hash(t))

    taken = Counter(_stratum(it.reason, it.failure_mode) for it in existing.values())
    candidates = sorted((t for t in by_trace if t not in existing), key=trace_hash)
    strata: dict[str, list[str]] = {}
    chosen: set[str] = set()

    def fill(name: str, pool: list[str], cap: int = per_mode) -> None:
        room = cap - taken[name]
        picked = [t for t in pool if t not in chosen][: max(room, 0)]
        chosen.update(picked)
        strata[name] = picked

    # a caller may flag a record itself with a top-level "disagreement": true (kept in LabelRecord.extra)
    flagged = [t for t in candidates
               if by_trace[t].extra.get("disagreement") or (others.get(t, set()) - {by_trace[t].failure_mode.value})]
    fill("disagreement", sorted(flagged, key=key))
    unsure = sorted((t for t in candidates if conf(by_trace[t]) < low_confidence), key=key)
    fill("low_confidence", unsure, cap=taken["low_confidence"] + len(unsure) if all_low_confidence else per_mode)
    modes = sorted({by_trace[t].failure_mode.value for t in candidates}, key=FAILURE_MODES.index)
    for mode in modes:
        fill(f"mode:{mode}", [t for t in candidates if by_trace[t].failure_mode == mode])

    # Interleave the strata so the first items a reviewer sees already span every reason and mode.
    order: list[tuple[str, str]] = []
    lists = [(name, list(ts)) for name, ts in strata.items() if ts]
    while any(ts for _, ts in lists):
        for name, ts in lists:
            if ts:
                order.append((name, ts.pop(0)))

    now = utc_now()
    start = max((it.position for it in existing.values()), default=-1) + 1
    items = [_queue_item(tenant, queue, by_trace[t], name.split(":")[0], start + offset)
             for offset, (name, t) in enumerate(order)]
    if existing_queue is None or items:
        options = {"per_mode": per_mode, "low_confidence": low_confidence, "manifest_id": manifest_id}
        save_queue(store, tenant=tenant, queue=queue, reviewers_per_item=reviewers,
                   description=description or (existing_queue.description if existing_queue else ""),
                   options=options, at=now)
    add_queue_items(store, items, added_at=now)
    return EnqueueResult(queue=queue, tenant=tenant, reviewers_per_item=reviewers,
                         added={name: len(ts) for name, ts in strata.items() if ts},
                         already_queued=len(existing), candidates=len(by_trace))


def _stratum(reason: str, mode: str) -> str:
    return f"mode:{mode}" if reason == "mode" else reason


def _queue_item(tenant: str, queue: str, label: LabelRecord, reason: str, position: int) -> QueueItem:
    return QueueItem(tenant, queue, label.trace_id, label.query_id, label.manifest_id, reason, label.failure_mode.value,
                     label.confidence, label.to_json(), position)


# --- reading queues ---------------------------------------------------------------------------
def list_items(store: Store, *, tenant: str, queue: str) -> list[QueueItem]:
    return queue_items(store, tenant=tenant, queue=queue)


def get_item(store: Store, *, tenant: str, queue: str, trace_id: str) -> QueueItem | None:
    return queue_item(store, tenant=tenant, queue=queue, trace_id=trace_id)


def queue_names(store: Store, *, tenant: str) -> list[str]:
    return _queue_names(store, tenant=tenant)


def reviewers_per_item(store: Store, *, tenant: str, queue: str) -> int:
    settings = queue_settings(store, tenant, queue)
    if settings is None:
        raise ReviewError(f"no queue {queue!r} in tenant {tenant!r}; create it with `ragtrace review enqueue`")
    return settings.reviewers_per_item


def progress(store: Store, *, tenant: str, queue: str) -> QueueProgress:
    k = reviewers_per_item(store, tenant=tenant, queue=queue)
    counts = queue_counts(store, tenant=tenant, queue=queue)
    return QueueProgress(
        queue=queue, reviewers_per_item=k, items=counts.items,
        complete=sum(1 for c in counts.decisions_per_item.values() if c >= k),
        decisions=sum(counts.decisions_per_item.values()),
        reviewers=tuple(ReviewerProgress(r, n, c) for r, n, c in counts.reviewers),
    )


# --- assignment and decisions -----------------------------------------------------------------
def decided_by(store: Store, reviewer: Reviewer, queue: str) -> set[str]:
    return decided_traces(store, tenant=reviewer.tenant, queue=queue, reviewer_id=reviewer.reviewer_id)


def holds(store: Store, reviewer: Reviewer, queue: str, trace_id: str) -> bool:
    return holds_item(store, tenant=reviewer.tenant, queue=queue, trace_id=trace_id, reviewer_id=reviewer.reviewer_id)


def next_item(store: Store, reviewer: Reviewer, queue: str, *, lease: timedelta = LEASE) -> str | None:
    """The trace id this reviewer should label next in ``queue`` (assigning it), or None when done."""
    k = reviewers_per_item(store, tenant=reviewer.tenant, queue=queue)
    with _ASSIGN_LOCK:
        now = utc_now()
        # An item this reviewer holds but has not decided comes back first (a reload, a crash):
        # it was given to them, so it is not "shown twice" to anyone else.
        held = held_item(store, tenant=reviewer.tenant, queue=queue, reviewer_id=reviewer.reviewer_id)
        if held is not None:
            return held
        # Otherwise: an item never given to this reviewer, held or decided by fewer than K others.
        trace_id = assignable_item(store, tenant=reviewer.tenant, queue=queue, reviewer_id=reviewer.reviewer_id,
                                   reviewers_per_item=k, now=now)
        if trace_id is None:
            return None
        assign_item(store, tenant=reviewer.tenant, queue=queue, trace_id=trace_id, reviewer_id=reviewer.reviewer_id,
                    at=now, expires_at=now + lease)
        return trace_id


def record_decision(
    store: Store,
    reviewer: Reviewer,
    queue: str,
    trace_id: str,
    *,
    failure_mode: str,
    claims: Sequence[str] = (),
    relevance: Mapping[str, bool] | None = None,
    note: str = "",
) -> Decision:
    """Save a reviewer's judgement of the item they hold.

    ``claims`` are the reviewer's verdicts for the label's claims, in the label's order (one per
    claim). ``relevance`` maps shown document ids to the reviewer's relevant / not relevant.
    """
    item = get_item(store, tenant=reviewer.tenant, queue=queue, trace_id=trace_id)
    if item is None:
        raise ReviewError(f"no item {trace_id!r} in queue {queue!r}")
    if failure_mode not in FAILURE_MODES:
        raise ReviewError(f"failure mode {failure_mode!r} is not one of {', '.join(FAILURE_MODES)}")
    try:
        gen = item.record.generation
    except LabelError as exc:
        raise ReviewError(str(exc)) from exc
    label_claims = list(gen.claims) if gen is not None else []
    if len(claims) != len(label_claims):
        raise ReviewError(f"expected a verdict for each of the {len(label_claims)} claims, got {len(claims)}")
    for v in claims:
        if v not in CLAIM_VERDICTS:
            raise ReviewError(f"claim verdict {v!r} is not one of {', '.join(CLAIM_VERDICTS)}")
    if len(note) > 5000:
        raise ReviewError("the note is longer than 5000 characters; shorten it")
    with _ASSIGN_LOCK:
        if trace_id in decided_by(store, reviewer, queue):
            raise ReviewError("you already reviewed this item; each reviewer judges an item once")
        if not holds(store, reviewer, queue, trace_id):
            raise ReviewError("this item was not assigned to you; open the queue to get your next item")
        claim_rows = tuple(
            {"index": i, "claim": c.claim, "labeller_verdict": c.verdict.value, "verdict": v}
            for i, (c, v) in enumerate(zip(label_claims, claims, strict=True))
        )
        rel_rows = tuple({"doc_id": d, "relevant": bool(r)} for d, r in sorted((relevance or {}).items()))
        decision = Decision(queue, trace_id, reviewer.reviewer_id, reviewer.name, item.manifest_id,
                            item.failure_mode, failure_mode, claim_rows, rel_rows, note, utc_now())
        save_decision(store, reviewer.tenant, decision)
    return decision


def list_decisions(store: Store, *, tenant: str, queue: str) -> list[Decision]:
    return queue_decisions(store, tenant=tenant, queue=queue)


def add_trace(store: Store, queue: str, label: LabelRecord, *, tenant: str, reviewers: int = 2,
              description: str = "") -> bool:
    """Put one labelled trace into ``queue`` by hand (reason ``manual``), outside the strata caps:
    someone looked at it and wants it reviewed. The queue is created with ``reviewers`` K when
    missing; an existing queue keeps its K. Returns False when the trace is already queued there."""
    _validate_queue_name(queue)
    if not 1 <= reviewers <= 50:
        raise ReviewError(f"reviewers (K per item) must be between 1 and 50, got {reviewers}")
    if label.is_incomplete:
        raise ReviewError("this trace is incomplete: it has no failure mode to confirm or correct, so it is "
                          "not reviewed (as `enqueue` leaves such traces out)")
    existing_queue = queue_settings(store, tenant, queue)
    if get_item(store, tenant=tenant, queue=queue, trace_id=label.trace_id) is not None:
        return False
    now = utc_now()
    if existing_queue is None:
        save_queue(store, tenant=tenant, queue=queue, reviewers_per_item=reviewers, description=description,
                   options={"manual": True}, at=now)
    position = next_position(store, tenant=tenant, queue=queue)
    add_queue_items(store, [_queue_item(tenant, queue, label, "manual", position)], added_at=now)
    return True


def decisions_for_trace(store: Store, *, tenant: str, trace_id: str) -> list[Decision]:
    """Every review decision on one trace, in every queue of the tenant, oldest first."""
    return trace_decisions(store, tenant=tenant, trace_id=trace_id)
