"""Label counts over time: per release and per day (or hour), how many of one manifest's labels
say each failure mode, incomplete, abstained, gold in context, and the groundedness sum's moments.

The engine aggregates in one GROUP BY over the newest version of each trace's label (decided per
key without ``FINAL``: `ragtrace_store.label_table.newest_labels_sql`); release, service and time
filter that version. The counts carry their denominators, never rates: the dashboard
(`ragtrace_review.explorer.series`) turns them into rates with intervals.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ragtrace_store.clock import as_utc
from ragtrace_store.label_table import newest_labels_sql
from ragtrace_store.labels import FAILURE_MODES, FailureMode

if TYPE_CHECKING:
    from ragtrace_store.client import Store
    from ragtrace_store.filters import TraceFilter

__all__ = ["BUCKET_SIZES", "BucketCounts", "label_counts", "labelled_time_range"]

#: the sizes a bucket may have, and the engine's interval for each
BUCKET_SIZES = {"day": "INTERVAL 1 DAY", "hour": "INTERVAL 1 HOUR"}


@dataclass(frozen=True)
class BucketCounts:
    """One release's labels in one time bucket (``start``, in UTC)."""

    release: str
    start: datetime
    #: labelled traces, incomplete ones included
    labels: int
    #: per failure mode (`FAILURE_MODES`), over every label
    modes: dict[str, int]
    incomplete: int
    #: answers with a generation verdict, and those abstained
    judged: int
    abstained: int
    #: labels whose gold set is known, and those with a gold document in the context
    gold_known: int
    gold_in_context: int
    #: labels with a groundedness, its mean and sample standard deviation (None when undefined)
    grounded: int
    groundedness_mean: float | None
    groundedness_sd: float | None


def _where(flt: TraceFilter, manifest_id: str) -> tuple[list[str], dict[str, object]]:
    where, params = flt.conditions(time_column="trace_time")
    where.append("manifest_id = {manifest:String}")
    params["manifest"] = manifest_id
    return where, params


def labelled_time_range(store: Store, flt: TraceFilter,
                        manifest_id: str) -> tuple[datetime | None, datetime | None]:
    """The first and last trace time among the manifest's labels that ``flt`` selects (any
    version); None, or the engine's default time, when it selects none."""
    where, params = _where(flt, manifest_id)
    first, last = store.query_rows(f"SELECT min(trace_time), max(trace_time) FROM {store.table('labels')} "
                                   f"WHERE {' AND '.join(where)}", params)[0]
    return (None if first is None else as_utc(first)), (None if last is None else as_utc(last))


def label_counts(store: Store, flt: TraceFilter, manifest_id: str, bucket: str) -> list[BucketCounts]:
    """The manifest's newest labels that ``flt`` selects, counted per release and ``bucket`` ("day"
    or "hour"), by release then time."""
    if bucket not in BUCKET_SIZES:
        raise ValueError(f"bucket {bucket!r}: use one of {', '.join(BUCKET_SIZES)}")
    where, params = _where(flt, manifest_id)
    keys = ["tenant = {tenant:String}", "manifest_id = {manifest:String}"]
    newest = newest_labels_sql(store, keys, [c for c in where if c not in keys])
    # fixed names from the labels contract, not input
    modes = ", ".join(f"countIf(failure_mode = '{m}')" for m in (*FAILURE_MODES, FailureMode.INCOMPLETE.value))
    rows = store.query_rows(
        f"SELECT release, toStartOfInterval(trace_time, {BUCKET_SIZES[bucket]}, 'UTC') AS b, count(), {modes}, "
        "countIf(generation != ''), countIf(generation = 'abstained'), "
        "countIf(isNotNull(gold_in_context)), countIf(gold_in_context = true), "
        "count(groundedness), avg(groundedness), stddevSamp(groundedness) "
        f"FROM ({newest}) GROUP BY release, b ORDER BY release, b", params)
    out = []
    nm = len(FAILURE_MODES) + 1
    for row in rows:
        *counts, n_incomplete = (int(c) for c in row[3:3 + nm])
        judged, abstained, gic_n, gic_k, g_n, g_mean, g_sd = row[3 + nm:]
        out.append(BucketCounts(
            release=str(row[0]), start=as_utc(row[1]), labels=int(row[2]),
            modes=dict(zip(FAILURE_MODES, counts, strict=True)), incomplete=n_incomplete,
            judged=int(judged), abstained=int(abstained), gold_known=int(gic_n), gold_in_context=int(gic_k),
            grounded=int(g_n), groundedness_mean=None if g_mean is None else float(g_mean),
            groundedness_sd=None if g_sd is None else float(g_sd)))
    return out
