"""Vectorised paired bootstrap for release comparisons.

Every statistic ragtrace compares is a *ratio of sums* over queries, computed on each side of a pair:

    value = sum_i(w_i * num_i) / sum_i(w_i * den_i)

with ``w_i`` the number of times query ``i`` is drawn. A mean of a metric that may be undefined
for some queries is ``num = value or 0``, ``den = 1 if defined``; P(pass | gold in context) is
``num = pass * gold``, ``den = gold``; a contingency-cell share is ``num = in_cell``, ``den = 1``.
Writing them all this way lets one matrix product per block of resamples evaluate every statistic
of both releases at once: the resample counts ``W`` (resamples × queries) times the stacked
columns ``V`` (queries × 4·statistics). The same ``W`` drives both sides, which is what makes the
bootstrap paired, and the jackknife needed by BCa is closed-form for a ratio of sums
(leave query ``i`` out: ``(S_num - num_i) / (S_den - den_i)``), so BCa costs O(n), not O(n²).

Undefined is never 0. A statistic whose denominator is zero (no gold in context at all, an empty
cell) has the value NaN and a `DegenerateDataWarning`; so has an interval that cannot be formed
(n = 1, every replicate equal, every replicate undefined). The result objects carry ``n``, the
number of undefined replicates and the warnings, so a report can say why a number is missing.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri

__all__ = [
    "BootstrapRun",
    "DegenerateDataWarning",
    "Interval",
    "PairedBootstrapResult",
    "RatioStatistic",
    "bootstrap_mean_difference",
    "mean_statistic",
    "paired_bootstrap",
]

METHODS = ("percentile", "bca")
#: Resample indices are drawn in blocks of about this many (resamples × queries): 1 MB of indices,
#: so the indices and the values gathered through them stay in the L2 cache. numpy draws bounded
#: integers below 2**32 from one continuous stream of 32-bit words, so the replicates do not depend
#: on the block size: a seed gives the same replicates as one big draw (and as earlier releases).
_DRAW_CELLS = 131_072
#: The counts path multiplies counts by columns in blocks of at most this many counts (~32 MB of
#: float64), so each column is read once per block rather than once per draw block.
_BLOCK_CELLS = 4_000_000
#: Up to this many distinct columns, resample sums are gathered directly instead of through counts.
_GATHER_MAX_COLUMNS = 4


class DegenerateDataWarning(RuntimeWarning):
    """A statistic or its interval is undefined for this input; the value is NaN, never 0."""


@dataclass(frozen=True)
class RatioStatistic:
    """One statistic on both sides of a paired sample: ``sum(num) / sum(den)`` per side.

    All four arrays have one entry per paired query. ``den`` entries are usually 0 or 1 (is the
    query counted in this statistic on this side?).
    """

    name: str
    num_baseline: NDArray[np.float64]
    den_baseline: NDArray[np.float64]
    num_candidate: NDArray[np.float64]
    den_candidate: NDArray[np.float64]

    def __post_init__(self) -> None:
        shapes = {a.shape for a in (self.num_baseline, self.den_baseline, self.num_candidate,
                                    self.den_candidate)}
        if len(shapes) != 1 or len(next(iter(shapes))) != 1:
            raise ValueError(f"statistic {self.name!r}: num/den arrays must be 1-D and of equal length, "
                             f"got shapes {sorted(shapes)}")


def mean_statistic(name: str, baseline: ArrayLike, candidate: ArrayLike) -> RatioStatistic:
    """The mean of each side, NaN entries meaning "undefined for this query" (excluded, not 0)."""
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"baseline and candidate must be 1-D arrays of equal length (paired by position); "
                         f"got shapes {a.shape} and {b.shape}")
    da = np.isfinite(a).astype(np.float64)
    db = np.isfinite(b).astype(np.float64)
    return RatioStatistic(name, np.where(da > 0, a, 0.0), da, np.where(db > 0, b, 0.0), db)


@dataclass(frozen=True)
class Interval:
    """A confidence interval; both ends NaN when it is undefined."""

    low: float
    high: float

    @property
    def defined(self) -> bool:
        return bool(np.isfinite(self.low) and np.isfinite(self.high))

    def as_list(self) -> list[float | None]:
        return [_num(self.low), _num(self.high)]


@dataclass(frozen=True)
class PairedBootstrapResult:
    """The paired comparison of one statistic.

    ``n`` is the number of pairs; ``n_baseline``/``n_candidate`` how many pairs count towards each
    side (the denominator total, e.g. queries with gold in context for P(pass | gold)). ``delta`` is
    candidate − baseline; ``standard_error`` is the standard deviation of the bootstrap deltas.
    ``n_undefined_resamples`` counts replicates whose delta was undefined (a resample that drew no
    query of a conditioning set); intervals use the defined ones and say so in ``warnings``.
    """

    name: str
    n: int
    n_baseline: float
    n_candidate: float
    baseline: float
    candidate: float
    delta: float
    standard_error: float
    percentile: Interval
    bca: Interval
    confidence_level: float
    n_resamples: int
    n_undefined_resamples: int
    warnings: tuple[str, ...] = ()

    @property
    def defined(self) -> bool:
        return bool(np.isfinite(self.delta))

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n, "n_baseline": _num(self.n_baseline), "n_candidate": _num(self.n_candidate),
            "baseline": _num(self.baseline), "candidate": _num(self.candidate), "delta": _num(self.delta),
            "se": _num(self.standard_error),
            "ci": {"percentile": self.percentile.as_list(), "bca": self.bca.as_list(),
                   "level": self.confidence_level},
            "n_resamples": self.n_resamples, "n_undefined_resamples": self.n_undefined_resamples,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class BootstrapRun:
    """All statistics of one paired bootstrap, plus the joint replicates (resample × statistic).

    The replicates are kept because the gates need their joint distribution: the family-wise
    false-alarm probability depends on how the gated deltas move together.
    """

    results: dict[str, PairedBootstrapResult]
    baseline_replicates: NDArray[np.float64] = field(repr=False)
    candidate_replicates: NDArray[np.float64] = field(repr=False)
    names: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> PairedBootstrapResult:
        return self.results[name]

    def column(self, name: str) -> int:
        return self.names.index(name)

    @property
    def delta_replicates(self) -> NDArray[np.float64]:
        out: NDArray[np.float64] = self.candidate_replicates - self.baseline_replicates
        return out


def _num(x: float) -> float | None:
    """JSON has no NaN: undefined becomes null."""
    return None if x is None or not np.isfinite(x) else float(x)


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, int | np.integer):
        return np.random.default_rng(seed)
    raise TypeError(f"seed must be an int, a numpy Generator or None, not {type(seed).__name__}")


def _ratio(num: NDArray[np.float64], den: NDArray[np.float64]) -> NDArray[np.float64]:
    with np.errstate(divide="ignore", invalid="ignore"):
        out: NDArray[np.float64] = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return out


def _distinct_columns(values: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """The distinct columns of ``values`` and, per column, the index of its distinct column."""
    seen: dict[bytes, int] = {}
    inverse = np.empty(values.shape[1], dtype=np.intp)
    by_column = np.ascontiguousarray(values.T)
    keep: list[int] = []
    for j, column in enumerate(by_column):
        key = column.tobytes()
        if key not in seen:
            seen[key] = len(keep)
            keep.append(j)
        inverse[j] = seen[key]
    return np.ascontiguousarray(by_column[keep].T), inverse


def _resample_sums(values: NDArray[np.float64], n_resamples: int,
                   rng: np.random.Generator) -> NDArray[np.float64]:
    """Column sums of ``values`` (n × k) over each of ``n_resamples`` resamples of its rows."""
    n = values.shape[0]
    # Many columns repeat (every plain mean has an all-ones denominator; a cell share equals a
    # decomposition term), so only distinct columns are summed, and an all-ones column needs no
    # work: every resample draws exactly n queries.
    distinct, inverse = _distinct_columns(values)
    ones = np.all(distinct == 1.0, axis=0)
    product_cols = distinct[:, ~ones]
    k = product_cols.shape[1]
    partial = np.empty((n_resamples, k))
    draw_rows = max(1, min(n_resamples, _DRAW_CELLS // n))
    if k <= _GATHER_MAX_COLUMNS:
        # Few columns (one statistic alone): summing the drawn values beats counting draws. One
        # take gathers each drawn query's whole row of values into a cache-sized buffer (mode="clip"
        # only because take's default mode buffers its output; every index is in range), and one
        # stacked vector-matrix product sums them per resample.
        rows = np.ascontiguousarray(product_cols)
        buf = np.empty((draw_rows, n, k))
        row_sum = np.ones(n)
        for start in range(0, n_resamples, draw_rows):
            b = min(draw_rows, n_resamples - start)
            idx = rng.integers(0, n, size=(b, n))
            np.take(rows, idx, axis=0, out=buf[:b], mode="clip")
            partial[start:start + b] = np.matmul(row_sum, buf[:b])
    else:
        # Counts of each query in each resample (the same draws, in the same order), then one
        # matrix product per large block for every column at once.
        block = max(draw_rows, (_BLOCK_CELLS // n) // draw_rows * draw_rows)
        counts = np.empty((min(block, n_resamples), n))
        for start in range(0, n_resamples, block):
            b = min(block, n_resamples - start)
            for sub in range(0, b, draw_rows):
                r = min(draw_rows, b - sub)
                idx = rng.integers(0, n, size=(r, n))
                # The offsets keep the rows apart in one bincount.
                idx += np.arange(r, dtype=np.intp)[:, None] * n
                counts[sub:sub + r] = np.bincount(idx.ravel(), minlength=r * n).reshape(r, n)
            partial[start:start + b] = counts[:b] @ product_cols
    sums_distinct = np.empty((n_resamples, distinct.shape[1]))
    sums_distinct[:, ~ones] = partial
    sums_distinct[:, ones] = float(n)
    out: NDArray[np.float64] = sums_distinct[:, inverse]
    return out


def paired_bootstrap(
    statistics: Sequence[RatioStatistic],
    *,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    seed: int | np.random.Generator | None = None,
    warn: bool = True,
) -> BootstrapRun:
    """Paired bootstrap of every statistic at once, with percentile and BCa intervals of the delta.

    ``seed`` (int or `numpy.random.Generator`) makes the run reproducible: the same seed, data and
    ``n_resamples`` give the same replicates. Degenerate statistics get NaN and, when ``warn``, a
    `DegenerateDataWarning` (the messages are also on each result).
    """
    if not statistics:
        raise ValueError("no statistics to bootstrap: pass at least one RatioStatistic")
    if int(n_resamples) < 2:
        raise ValueError(f"n_resamples must be at least 2, got {n_resamples}")
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
    names = tuple(s.name for s in statistics)
    if len(set(names)) != len(names):
        raise ValueError(f"statistic names must be unique, got {names}")
    n = int(statistics[0].num_baseline.shape[0])
    if any(s.num_baseline.shape[0] != n for s in statistics):
        raise ValueError("every statistic must have one entry per pair (same length)")
    n_resamples = int(n_resamples)
    rng = _rng(seed)
    m = len(statistics)
    # Columns: [num_a..., den_a..., num_b..., den_b...]
    values = np.empty((n, 4 * m), dtype=np.float64)
    for j, s in enumerate(statistics):
        values[:, j] = s.num_baseline
        values[:, m + j] = s.den_baseline
        values[:, 2 * m + j] = s.num_candidate
        values[:, 3 * m + j] = s.den_candidate
    totals = values.sum(axis=0)
    point_a = _ratio(totals[:m], totals[m:2 * m])
    point_b = _ratio(totals[2 * m:3 * m], totals[3 * m:])

    reps_a = np.full((n_resamples, m), np.nan)
    reps_b = np.full((n_resamples, m), np.nan)
    if n > 0:
        sums = _resample_sums(values, n_resamples, rng)
        reps_a = _ratio(sums[:, :m], sums[:, m:2 * m])
        reps_b = _ratio(sums[:, 2 * m:3 * m], sums[:, 3 * m:])
    deltas = reps_b - reps_a
    point_d = point_b - point_a
    jack = _jackknife_deltas(values, totals, m) if n > 1 else np.full((max(n, 0), m), np.nan)

    results: dict[str, PairedBootstrapResult] = {}
    alpha = (1.0 - confidence_level) / 2.0
    for j, s in enumerate(statistics):
        notes: list[str] = []
        res = _one(s.name, n, totals[m + j], totals[3 * m + j], point_a[j], point_b[j], point_d[j],
                   deltas[:, j], jack[:, j] if n > 1 else np.empty(0), alpha, notes)
        results[s.name] = PairedBootstrapResult(
            name=s.name, n=n, n_baseline=float(totals[m + j]), n_candidate=float(totals[3 * m + j]),
            baseline=float(point_a[j]), candidate=float(point_b[j]), delta=float(point_d[j]),
            standard_error=res[0], percentile=res[1], bca=res[2], confidence_level=confidence_level,
            n_resamples=n_resamples, n_undefined_resamples=res[3], warnings=tuple(notes),
        )
        if warn:
            for note in notes:
                warnings.warn(note, DegenerateDataWarning, stacklevel=2)
    return BootstrapRun(results=results, baseline_replicates=reps_a, candidate_replicates=reps_b,
                        names=names)


_NAN_INTERVAL = Interval(float("nan"), float("nan"))


def _one(name: str, n: int, den_a: float, den_b: float, a: float, b: float, d: float,
         reps: NDArray[np.float64], jack: NDArray[np.float64], alpha: float,
         notes: list[str]) -> tuple[float, Interval, Interval, int]:
    """Standard error, percentile and BCa intervals of one delta; appends why anything is undefined."""
    if n == 0:
        notes.append(f"{name}: no paired queries; every value is undefined")
        return float("nan"), _NAN_INTERVAL, _NAN_INTERVAL, len(reps)
    if not np.isfinite(a) or not np.isfinite(b):
        sides = [side for side, den in (("baseline", den_a), ("candidate", den_b)) if den <= 0]
        notes.append(f"{name}: undefined in the {' and '.join(sides)} (no query counts towards it, "
                     f"e.g. an empty conditioning set); the delta is undefined, not 0")
        return float("nan"), _NAN_INTERVAL, _NAN_INTERVAL, len(reps)
    finite = reps[np.isfinite(reps)]
    n_undef = int(len(reps) - len(finite))
    if n == 1:
        notes.append(f"{name}: n = 1 pair; a bootstrap of one pair has no spread, so the interval is "
                     "undefined")
        return float("nan"), _NAN_INTERVAL, _NAN_INTERVAL, n_undef
    if len(finite) < 2:
        notes.append(f"{name}: every bootstrap replicate was undefined; the interval is undefined")
        return float("nan"), _NAN_INTERVAL, _NAN_INTERVAL, n_undef
    if n_undef:
        notes.append(f"{name}: {n_undef} of {len(reps)} replicates drew no query of the conditioning set "
                     "and were left out; the interval is conditional on the set being non-empty")
    se = float(np.std(finite, ddof=1))
    if not se > 0.0 or np.ptp(finite) == 0.0:
        notes.append(f"{name}: every bootstrap replicate is equal (all values equal or an empty cell); "
                     "the interval is undefined")
        return 0.0, _NAN_INTERVAL, _NAN_INTERVAL, n_undef
    lo, hi = np.percentile(finite, [100 * alpha, 100 * (1 - alpha)])
    pct = Interval(float(lo), float(hi))
    return se, pct, _bca(name, finite, d, jack, alpha, notes), n_undef


def _bca(name: str, reps: NDArray[np.float64], d: float, jack: NDArray[np.float64], alpha: float,
         notes: list[str]) -> Interval:
    """Efron's bias-corrected and accelerated interval (as in scipy.stats.bootstrap)."""
    # Mid-rank share of replicates below the estimate, so ties at the estimate do not bias z0.
    share = (np.count_nonzero(reps < d) + np.count_nonzero(reps <= d)) / (2.0 * len(reps))
    if share <= 0.0 or share >= 1.0:
        notes.append(f"{name}: every replicate lies on one side of the estimate; the BCa interval is "
                     "undefined (use the percentile interval)")
        return _NAN_INTERVAL
    z0 = float(ndtri(share))
    jack = jack[np.isfinite(jack)]
    dev = jack.mean() - jack if len(jack) else jack
    denom = 6.0 * float(np.sum(dev ** 2)) ** 1.5
    if len(jack) < 2 or denom == 0.0:
        notes.append(f"{name}: the jackknife has no spread, so the BCa acceleration is undefined; "
                     "the BCa interval is undefined (use the percentile interval)")
        return _NAN_INTERVAL
    acc = float(np.sum(dev ** 3)) / denom
    ends = []
    for z_alpha in (ndtri(alpha), ndtri(1 - alpha)):
        z = z0 + z_alpha
        ends.append(float(ndtr(z0 + z / (1 - acc * z))))
    lo, hi = np.percentile(reps, [100 * ends[0], 100 * ends[1]])
    return Interval(float(lo), float(hi))


def _jackknife_deltas(values: NDArray[np.float64], totals: NDArray[np.float64], m: int) -> NDArray[np.float64]:
    """Leave-one-out deltas of every ratio statistic, (n × m), in closed form."""
    loo = totals[None, :] - values
    a = _ratio(loo[:, :m], loo[:, m:2 * m])
    b = _ratio(loo[:, 2 * m:3 * m], loo[:, 3 * m:])
    out: NDArray[np.float64] = b - a
    return out


def bootstrap_mean_difference(
    baseline: ArrayLike,
    candidate: ArrayLike,
    *,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    seed: int | np.random.Generator | None = None,
    warn: bool = True,
) -> PairedBootstrapResult:
    """Paired bootstrap of mean(candidate) − mean(baseline); NaN entries are undefined, not 0."""
    stat = mean_statistic("mean", baseline, candidate)
    run = paired_bootstrap([stat], n_resamples=n_resamples, confidence_level=confidence_level,
                           seed=seed, warn=warn)
    return run["mean"]
