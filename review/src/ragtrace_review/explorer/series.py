"""The numbers behind `/dashboard`: per release and per day (or hour), the failure-mode rates, the
abstention rate, gold-in-context and groundedness, each with its n and a 95% interval.

One labeller manifest at a time (labels of different manifests are never pooled). The store
counts (`ragtrace_store.label_series`: one GROUP BY over the newest version of each trace's
label); this module only turns counts into intervals:

* rates are k of n with Wilson score intervals (`ragtrace_review.agreement.wilson`), well-behaved
  at 0 and n. The denominators differ on purpose: failure modes count the labelled traces that
  are complete (an ``incomplete`` trace has no mode, as in the audit's own summary); the
  incomplete rate counts every labelled trace; abstention counts the answers that were judged
  (``generation`` set); gold-in-context counts the traces whose gold set is known
  (``gold_in_context`` not NULL). A rate with n = 0 is undefined (None), never 0.
* groundedness is a mean over the answers where it is defined (abstentions and claim-less
  answers have none), with a normal-approximation interval (mean ± 1.96 · sd/√n, clipped to
  [0, 1]); undefined for n = 0, and its interval for n < 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import NormalDist

from ragtrace_review.agreement import wilson
from ragtrace_review.errors import ReviewError
from ragtrace_store import FAILURE_MODES, Store, TraceFilter
from ragtrace_store.label_series import label_counts, labelled_time_range

__all__ = ["BUCKETS", "Bucket", "Mean", "Rate", "Series", "dashboard_series"]

BUCKETS = ("auto", "day", "hour")
LEVEL = 0.95
#: at most this many time buckets per release (a chart of more points is unreadable)
MAX_BUCKETS = 400
#: "auto" picks hours when the labelled traces span at most this long
AUTO_HOURLY = timedelta(hours=48)
_STEP = {"day": timedelta(days=1), "hour": timedelta(hours=1)}


@dataclass(frozen=True)
class Rate:
    """``k`` of ``n``; ``value``, ``low``, ``high`` are None when n = 0 (undefined)."""

    k: int
    n: int
    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Mean:
    """The mean of ``n`` defined values; None when n = 0, interval None when n < 2."""

    n: int
    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Bucket:
    release: str
    start: datetime
    end: datetime
    #: labelled traces in the bucket, incomplete ones included
    n: int
    #: failure modes over the complete labelled traces
    modes: dict[str, Rate]
    #: incomplete traces over every labelled trace
    incomplete: Rate
    abstention: Rate
    gold_in_context: Rate
    groundedness: Mean


@dataclass(frozen=True)
class Series:
    manifest_id: str | None
    bucket: str  # "day" | "hour"
    step: timedelta
    releases: tuple[str, ...]
    buckets: tuple[Bucket, ...]

    @property
    def starts(self) -> tuple[datetime, ...]:
        return tuple(sorted({b.start for b in self.buckets}))


def rate(k: int, n: int) -> Rate:
    p = wilson(k, n, LEVEL)
    if p.value is None or p.ci is None:
        return Rate(k, n, None, None, None)
    return Rate(k, n, p.value, p.ci.low, p.ci.high)


def mean(n: int, value: float | None, sd: float | None) -> Mean:
    if n == 0 or value is None or not math.isfinite(value):
        return Mean(n, None, None, None)
    if n < 2 or sd is None or not math.isfinite(sd):
        return Mean(n, value, None, None)
    half = NormalDist().inv_cdf(0.5 + LEVEL / 2) * sd / math.sqrt(n)
    return Mean(n, value, max(0.0, value - half), min(1.0, value + half))


def dashboard_series(store: Store, *, tenant: str, manifest_id: str | None, release: str | None = None,
                     service: str | None = None, since: datetime | None = None, until: datetime | None = None,
                     bucket: str = "auto") -> Series:
    """The dashboard's points for labels of ``manifest_id`` (None: nothing is labelled yet)."""
    if bucket not in BUCKETS:
        raise ReviewError(f"bucket {bucket!r}: use one of {', '.join(BUCKETS)}")
    if manifest_id is None:
        return Series(None, "day" if bucket == "auto" else bucket, _STEP.get(bucket, _STEP["day"]), (), ())
    flt = TraceFilter(tenant=tenant, release=release, service=service, since=since, until=until)
    first, last = labelled_time_range(store, flt, manifest_id)
    if bucket == "auto":
        span = (last - first) if first is not None and last is not None else timedelta(0)
        bucket = "hour" if span <= AUTO_HOURLY else "day"
    step = _STEP[bucket]
    if first is not None and last is not None and (last - first) / step > MAX_BUCKETS:
        raise ReviewError(f"the labelled traces span {(last - first).days} days: more than "
                          f"{MAX_BUCKETS} {bucket}s; choose bucket=day or a shorter window (since/until)")
    out = []
    for c in label_counts(store, flt, manifest_id, bucket):
        complete = c.labels - c.incomplete
        out.append(Bucket(
            release=c.release, start=c.start, end=c.start + step, n=c.labels,
            modes={m: rate(c.modes[m], complete) for m in FAILURE_MODES},
            incomplete=rate(c.incomplete, c.labels),
            abstention=rate(c.abstained, c.judged),
            gold_in_context=rate(c.gold_in_context, c.gold_known),
            groundedness=mean(c.grounded, c.groundedness_mean, c.groundedness_sd),
        ))
    # in order of first appearance (a baseline before its candidate), then by name
    releases = tuple(sorted({b.release for b in out},
                            key=lambda r: (min(b.start for b in out if b.release == r), r)))
    return Series(manifest_id, bucket, step, releases, tuple(out))
