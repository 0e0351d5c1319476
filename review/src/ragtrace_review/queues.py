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
import json
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
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
    as_utc,
    read_labels,
    utc_now,
)
from ragtrace_store.labels import newest_labels_sql

LEASE = timedelta(minutes=30)
_ASSIGN_LOCK = threading.Lock()


def trace_hash(trace_id: str) -> int:
    """Deterministic order key: the same trace sorts the same way on every run and shard."""
    return int(hashlib.sha256(trace_id.encode("utf-8")).hexdigest()[:16], 16)


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
        """The label snapshot under review, read by the contract."""
        try:
            return LabelRecord.from_json(self.label, f"queue {self.queue!r} item {self.trace_id!r}")
        except LabelError as exc:
            raise ReviewError(str(exc)) from exc


@dataclass(frozen=True)
class Decision:
    queue: str
    trace_id: str
    reviewer_id: str
    reviewer_name: str
    manifest_id: str
    labeller_failure_mode: str
    failure_mode: str
    claims: tuple[dict[str, Any], ...]
    relevance: tuple[dict[str, Any], ...]
    note: str
    decided_at: datetime


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
    rows = store.query_rows(
        f"SELECT manifest_id FROM {store.table('labels')} WHERE tenant = {{tenant:String}} "
        "GROUP BY manifest_id ORDER BY max(labelled_at) DESC LIMIT 1",
        {"tenant": tenant},
    )
    return str(rows[0][0]) if rows else None


def _as_record(label: LabelRecord | Mapping[str, Any], index: int) -> LabelRecord:
    if isinstance(label, LabelRecord):
        return label
    try:
        return LabelRecord.from_json(label, f"label record {index}")
    except LabelError as exc:
        raise ReviewError(str(exc)) from exc


def _other_manifest_modes(store: Store, tenant: str, trace_ids: Sequence[str],
                          manifest_ids: set[str]) -> dict[str, set[str]]:
    if not trace_ids:
        return {}
    # each other manifest's newest label of these traces, decided per key (no FINAL over labels)
    newest = newest_labels_sql(store, ["tenant = {tenant:String}", "trace_id IN {ids:Array(String)}",
                                       "manifest_id NOT IN {ms:Array(String)}"])
    rows = store.query_rows(
        f"SELECT trace_id, failure_mode FROM ({newest})",
        {"tenant": tenant, "ids": list(trace_ids), "ms": sorted(manifest_ids)},
    )
    modes: dict[str, set[str]] = {}
    for trace_id, mode in rows:
        modes.setdefault(str(trace_id), set()).add(str(mode))
    return modes


def _queue_row(store: Store, tenant: str, queue: str) -> tuple[int, str] | None:
    rows = store.query_rows(
        f"SELECT reviewers_per_item, description FROM {store.table('review_queues')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String}",
        {"tenant": tenant, "queue": queue},
    )
    return (int(rows[0][0]), str(rows[0][1])) if rows else None


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
    existing_queue = _queue_row(store, tenant, queue)
    if existing_queue is not None and existing_queue[0] != reviewers:
        raise ReviewError(
            f"queue {queue!r} already exists with {existing_queue[0]} reviewers per item (asked for "
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
    others = _other_manifest_modes(store, tenant, list(by_trace), {r.manifest_id for r in records})

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
    rows = []
    for offset, (name, t) in enumerate(order):
        r = by_trace[t]
        rows.append((
            tenant, queue, t, r.query_id, r.manifest_id, name.split(":")[0], r.failure_mode.value, r.confidence,
            json.dumps(r.to_json(), sort_keys=True, default=str), start + offset, now,
        ))
    if existing_queue is None or rows:
        options = {"per_mode": per_mode, "low_confidence": low_confidence, "manifest_id": manifest_id}
        store.insert("review_queues",
                     [(tenant, queue, reviewers, description or (existing_queue or (0, ""))[1],
                       json.dumps(options, sort_keys=True), now, now)],
                     ["tenant", "queue", "reviewers_per_item", "description", "options", "created_at", "updated_at"])
    store.insert("review_items", rows,
                 ["tenant", "queue", "trace_id", "query_id", "manifest_id", "reason", "failure_mode", "confidence",
                  "label_detail", "position", "added_at"])
    return EnqueueResult(queue=queue, tenant=tenant, reviewers_per_item=reviewers,
                         added={name: len(ts) for name, ts in strata.items() if ts},
                         already_queued=len(existing), candidates=len(by_trace))


def _stratum(reason: str, mode: str) -> str:
    return f"mode:{mode}" if reason == "mode" else reason


# --- reading queues ---------------------------------------------------------------------------
_ITEM_COLS = ("tenant, queue, trace_id, query_id, manifest_id, reason, failure_mode, confidence, label_detail, "
              "position")


def _item(row: tuple[Any, ...]) -> QueueItem:
    tenant, queue, trace_id, query_id, manifest_id, reason, mode, confidence, detail, position = row
    return QueueItem(str(tenant), str(queue), str(trace_id), str(query_id), str(manifest_id), str(reason),
                     str(mode), confidence, json.loads(detail) if detail else {}, int(position))


def list_items(store: Store, *, tenant: str, queue: str) -> list[QueueItem]:
    rows = store.query_rows(
        f"SELECT {_ITEM_COLS} FROM {store.table('review_items')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String} ORDER BY position",
        {"tenant": tenant, "queue": queue},
    )
    return [_item(r) for r in rows]


def get_item(store: Store, *, tenant: str, queue: str, trace_id: str) -> QueueItem | None:
    rows = store.query_rows(
        f"SELECT {_ITEM_COLS} FROM {store.table('review_items')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String} AND trace_id = {t:String}",
        {"tenant": tenant, "queue": queue, "t": trace_id},
    )
    return _item(rows[0]) if rows else None


def queue_names(store: Store, *, tenant: str) -> list[str]:
    rows = store.query_rows(
        f"SELECT queue FROM {store.table('review_queues')} FINAL WHERE tenant = {{tenant:String}} "
        "ORDER BY created_at, queue",
        {"tenant": tenant},
    )
    return [str(r[0]) for r in rows]


def reviewers_per_item(store: Store, *, tenant: str, queue: str) -> int:
    row = _queue_row(store, tenant, queue)
    if row is None:
        raise ReviewError(f"no queue {queue!r} in tenant {tenant!r}; create it with `ragtrace review enqueue`")
    return row[0]


def progress(store: Store, *, tenant: str, queue: str) -> QueueProgress:
    k = reviewers_per_item(store, tenant=tenant, queue=queue)
    params = {"tenant": tenant, "queue": queue}
    n_items = int(store.query_rows(
        f"SELECT count() FROM {store.table('review_items')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String}", params)[0][0])
    per_item = store.query_rows(
        f"SELECT trace_id, count() FROM {store.table('review_decisions')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String} GROUP BY trace_id", params)
    per_reviewer = store.query_rows(
        f"SELECT reviewer_id, any(reviewer_name), count() FROM {store.table('review_decisions')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String} GROUP BY reviewer_id ORDER BY 2, 1",
        params)
    return QueueProgress(
        queue=queue, reviewers_per_item=k, items=n_items,
        complete=sum(1 for _, c in per_item if c >= k), decisions=sum(int(c) for _, c in per_item),
        reviewers=tuple(ReviewerProgress(str(r), str(n), int(c)) for r, n, c in per_reviewer),
    )


# --- assignment and decisions -----------------------------------------------------------------
def decided_by(store: Store, reviewer: Reviewer, queue: str) -> set[str]:
    rows = store.query_rows(
        f"SELECT trace_id FROM {store.table('review_decisions')} FINAL WHERE tenant = {{tenant:String}} "
        "AND queue = {queue:String} AND reviewer_id = {rid:String}",
        {"tenant": reviewer.tenant, "queue": queue, "rid": reviewer.reviewer_id},
    )
    return {str(r[0]) for r in rows}


def holds(store: Store, reviewer: Reviewer, queue: str, trace_id: str) -> bool:
    rows = store.query_rows(
        f"SELECT count() FROM {store.table('review_assignments')} FINAL WHERE tenant = {{tenant:String}} "
        "AND queue = {queue:String} AND trace_id = {t:String} AND reviewer_id = {rid:String}",
        {"tenant": reviewer.tenant, "queue": queue, "t": trace_id, "rid": reviewer.reviewer_id},
    )
    return int(rows[0][0]) > 0


def next_item(store: Store, reviewer: Reviewer, queue: str, *, lease: timedelta = LEASE) -> str | None:
    """The trace id this reviewer should label next in ``queue`` (assigning it), or None when done."""
    k = reviewers_per_item(store, tenant=reviewer.tenant, queue=queue)
    with _ASSIGN_LOCK:
        now = utc_now()
        params = {"tenant": reviewer.tenant, "queue": queue, "rid": reviewer.reviewer_id, "now": now, "k": k}
        # An item this reviewer holds but has not decided comes back first (a reload, a crash):
        # it was given to them, so it is not "shown twice" to anyone else.
        rows = store.query_rows(
            f"SELECT a.trace_id FROM {store.table('review_assignments')} AS a FINAL "
            f"INNER JOIN {store.table('review_items')} AS i FINAL "
            "ON i.tenant = a.tenant AND i.queue = a.queue AND i.trace_id = a.trace_id "
            "WHERE a.tenant = {tenant:String} AND a.queue = {queue:String} AND a.reviewer_id = {rid:String} "
            f"AND a.trace_id NOT IN (SELECT trace_id FROM {store.table('review_decisions')} FINAL "
            "  WHERE tenant = {tenant:String} AND queue = {queue:String} AND reviewer_id = {rid:String}) "
            "ORDER BY i.position LIMIT 1",
            params,
        )
        if rows:
            return str(rows[0][0])
        # Otherwise: an item never given to this reviewer, held or decided by fewer than K others.
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
            params,
        )
        if not rows:
            return None
        trace_id = str(rows[0][0])
        store.insert("review_assignments", [(reviewer.tenant, queue, trace_id, reviewer.reviewer_id, now, now + lease)],
                     ["tenant", "queue", "trace_id", "reviewer_id", "assigned_at", "expires_at"])
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
    gen = item.record.generation
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
        store.insert("review_decisions", [(
            reviewer.tenant, queue, trace_id, reviewer.reviewer_id, reviewer.name, item.manifest_id,
            item.failure_mode, failure_mode, json.dumps(list(claim_rows)), json.dumps(list(rel_rows)), note,
            decision.decided_at,
        )], ["tenant", "queue", "trace_id", "reviewer_id", "reviewer_name", "manifest_id", "labeller_failure_mode",
             "failure_mode", "claims", "relevance", "note", "decided_at"])
    return decision


def _read_decisions(store: Store, where: str, order_by: str, params: dict[str, str]) -> list[Decision]:
    """Decisions matching ``where`` (a fixed SQL condition over ``params``, never user text)."""
    rows = store.query_rows(
        f"SELECT queue, trace_id, reviewer_id, reviewer_name, manifest_id, labeller_failure_mode, failure_mode, "
        f"claims, relevance, note, decided_at FROM {store.table('review_decisions')} FINAL "
        f"WHERE {where} ORDER BY {order_by}", params)
    return [Decision(str(q), str(t), str(rid), str(name), str(m), str(lm), str(fm),
                     tuple(json.loads(c or "[]")), tuple(json.loads(rel or "[]")), str(note), as_utc(at))
            for q, t, rid, name, m, lm, fm, c, rel, note, at in rows]


def list_decisions(store: Store, *, tenant: str, queue: str) -> list[Decision]:
    return _read_decisions(store, "tenant = {tenant:String} AND queue = {queue:String}",
                           "trace_id, decided_at, reviewer_id", {"tenant": tenant, "queue": queue})


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
    existing_queue = _queue_row(store, tenant, queue)
    if get_item(store, tenant=tenant, queue=queue, trace_id=label.trace_id) is not None:
        return False
    now = utc_now()
    if existing_queue is None:
        store.insert("review_queues",
                     [(tenant, queue, reviewers, description, json.dumps({"manual": True}), now, now)],
                     ["tenant", "queue", "reviewers_per_item", "description", "options", "created_at", "updated_at"])
    position = store.query_rows(
        f"SELECT max(position) + 1, count() FROM {store.table('review_items')} FINAL "
        "WHERE tenant = {tenant:String} AND queue = {queue:String}", {"tenant": tenant, "queue": queue})[0]
    store.insert("review_items", [(
        tenant, queue, label.trace_id, label.query_id, label.manifest_id, "manual", label.failure_mode.value,
        label.confidence, json.dumps(label.to_json(), sort_keys=True, default=str),
        int(position[0]) if position[1] else 0, now,
    )], ["tenant", "queue", "trace_id", "query_id", "manifest_id", "reason", "failure_mode", "confidence",
         "label_detail", "position", "added_at"])
    return True


def decisions_for_trace(store: Store, *, tenant: str, trace_id: str) -> list[Decision]:
    """Every review decision on one trace, in every queue of the tenant, oldest first."""
    return _read_decisions(store, "tenant = {tenant:String} AND trace_id = {t:String}",
                           "decided_at, queue, reviewer_id", {"tenant": tenant, "t": trace_id})
