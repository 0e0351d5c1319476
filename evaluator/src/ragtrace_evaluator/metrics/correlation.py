"""How well an evaluation ranks systems the way their end-to-end quality does (eRAG's meta-evaluation).

Inputs are two matrices over the same queries (rows) and systems (columns): a list metric per query
and system (e.g. recall@5 under some relevance labels), and the end-to-end score per query and
system (e.g. token F1 of the answer). Two questions, two statistics:

- *system-level*: rank the systems by their mean metric and by their mean end-to-end score; how
  alike are the two rankings? Kendall's τ-b and Spearman's ρ over the systems, with a percentile
  bootstrap over queries (whole rows resampled, so the pairing of a query's systems is kept).
  With a handful of systems this is coarse: 6 systems give 15 pairs, so τ moves in steps of ~0.13.
- *query-level*: over every (query, system) cell, does a higher metric go with a higher end-to-end
  score? Spearman's ρ of the pooled cells, with the same bootstrap over queries.
- *paired*: is one relevance source's query-level ρ above another's? Both are computed on the same
  resampled queries in every replicate, so the interval is of the difference itself, not two
  intervals read side by side.

τ-b and ρ are vectorised over bootstrap replicates here (scipy computes one pair at a time); the
tests check them against ``scipy.stats.kendalltau`` and ``scipy.stats.spearmanr``. A constant input
has no ranking, so its correlation is NaN (as in scipy), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import rankdata

__all__ = ["PairedDifference", "RankAgreement", "kendall_tau_b", "paired_query_level_difference",
           "query_level_agreement", "spearman_rho", "system_level_agreement"]


def _rows(a: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(a, dtype=np.float64)
    return arr[None, :] if arr.ndim == 1 else arr


def kendall_tau_b(x: ArrayLike, y: ArrayLike) -> NDArray[np.float64] | float:
    """Kendall's τ-b of each row pair of ``x`` and ``y`` (1-d inputs give a float).

    τ-b = (concordant − discordant) / sqrt((n0 − ties_x)(n0 − ties_y)) over all pairs, which is what
    ``scipy.stats.kendalltau`` (variant "b") computes; NaN when either side is constant.
    """
    xr, yr = _rows(x), _rows(y)
    if xr.shape != yr.shape:
        raise ValueError(f"kendall_tau_b: x has shape {xr.shape}, y {yr.shape}; they must match")
    i, j = np.triu_indices(xr.shape[1], k=1)
    sx = np.sign(xr[:, j] - xr[:, i])
    sy = np.sign(yr[:, j] - yr[:, i])
    num = (sx * sy).sum(axis=1)
    den = np.sqrt(np.abs(sx).sum(axis=1) * np.abs(sy).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return float(tau[0]) if np.ndim(x) == 1 else tau


def spearman_rho(x: ArrayLike, y: ArrayLike) -> NDArray[np.float64] | float:
    """Spearman's ρ of each row pair (Pearson correlation of average ranks); NaN when constant."""
    xr, yr = _rows(x), _rows(y)
    if xr.shape != yr.shape:
        raise ValueError(f"spearman_rho: x has shape {xr.shape}, y {yr.shape}; they must match")
    rx = rankdata(xr, axis=1) - (xr.shape[1] + 1) / 2
    ry = rankdata(yr, axis=1) - (yr.shape[1] + 1) / 2
    rx = rx - rx.mean(axis=1, keepdims=True)
    ry = ry - ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(den > 0, (rx * ry).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)
    return float(rho[0]) if np.ndim(x) == 1 else rho


@dataclass(frozen=True)
class RankAgreement:
    """Point estimates and percentile bootstrap intervals (over queries) of τ-b and ρ."""

    tau: float
    tau_ci: tuple[float, float]
    rho: float
    rho_ci: tuple[float, float]
    #: queries the statistic was computed on
    n: int
    n_resamples: int

    def to_json(self) -> dict[str, Any]:
        def num(v: float) -> float | None:
            return round(v, 4) if np.isfinite(v) else None

        return {"tau": num(self.tau), "tau_ci": [num(v) for v in self.tau_ci], "rho": num(self.rho),
                "rho_ci": [num(v) for v in self.rho_ci], "n": self.n, "n_resamples": self.n_resamples}


def _check(metric: ArrayLike, e2e: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    m, e = np.asarray(metric, dtype=np.float64), np.asarray(e2e, dtype=np.float64)
    if m.ndim != 2 or m.shape != e.shape:
        raise ValueError(f"metric and e2e must be (queries, systems) matrices of one shape; got {m.shape} "
                         f"and {e.shape}")
    if not (np.isfinite(m).all() and np.isfinite(e).all()):
        raise ValueError("metric and e2e must be finite: drop the queries whose metric is undefined first")
    if m.shape[0] < 2:
        raise ValueError(f"need at least 2 queries to bootstrap, got {m.shape[0]}")
    return m, e


def _interval(reps: NDArray[np.float64], alpha: float) -> tuple[float, float]:
    finite = reps[np.isfinite(reps)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    lo, hi = np.quantile(finite, [alpha / 2, 1 - alpha / 2])
    return (float(lo), float(hi))


def _resamples(n: int, n_resamples: int, seed: int) -> NDArray[np.intp]:
    return np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))


def system_level_agreement(metric: ArrayLike, e2e: ArrayLike, *, n_resamples: int = 2000, seed: int = 0,
                           alpha: float = 0.05) -> RankAgreement:
    """τ-b and ρ between the systems' mean metric and their mean end-to-end score (columns = systems)."""
    m, e = _check(metric, e2e)
    idx = _resamples(m.shape[0], n_resamples, seed)
    # mean over the resampled queries of each replicate: (replicates, systems)
    mb, eb = m[idx].mean(axis=1), e[idx].mean(axis=1)
    taus, rhos = kendall_tau_b(mb, eb), spearman_rho(mb, eb)
    assert isinstance(taus, np.ndarray) and isinstance(rhos, np.ndarray)
    tau = kendall_tau_b(m.mean(axis=0), e.mean(axis=0))
    rho = spearman_rho(m.mean(axis=0), e.mean(axis=0))
    assert isinstance(tau, float) and isinstance(rho, float)
    return RankAgreement(tau, _interval(taus, alpha), rho, _interval(rhos, alpha), m.shape[0], n_resamples)


def query_level_agreement(metric: ArrayLike, e2e: ArrayLike, *, n_resamples: int = 1000, seed: int = 0,
                          alpha: float = 0.05) -> RankAgreement:
    """τ-b and ρ over all (query, system) cells pooled: does a better list go with a better answer?"""
    m, e = _check(metric, e2e)
    idx = _resamples(m.shape[0], n_resamples, seed)
    taus, rhos = np.empty(n_resamples), np.empty(n_resamples)
    # τ-b looks at every pair of cells: batches of replicates keep that pair matrix to ~50 MB
    cells = m.size
    step = max(1, int(6e6 // max(1, cells * (cells - 1) // 2)))
    for at in range(0, n_resamples, step):
        part = idx[at:at + step]
        mb, eb = m[part].reshape(len(part), -1), e[part].reshape(len(part), -1)
        taus[at:at + step] = kendall_tau_b(mb, eb)
        rhos[at:at + step] = spearman_rho(mb, eb)
    tau, rho = kendall_tau_b(m.ravel(), e.ravel()), spearman_rho(m.ravel(), e.ravel())
    assert isinstance(tau, float) and isinstance(rho, float)
    return RankAgreement(tau, _interval(taus, alpha), rho, _interval(rhos, alpha), m.shape[0], n_resamples)


@dataclass(frozen=True)
class PairedDifference:
    """ρ(a) − ρ(b) of two metrics' query-level agreement with one end-to-end score, on the same queries."""

    difference: float
    ci: tuple[float, float]
    #: share of replicates in which a's ρ is not above b's (a one-sided bootstrap p-value for a > b)
    share_not_above: float
    n: int
    n_resamples: int

    def to_json(self) -> dict[str, Any]:
        def num(v: float) -> float | None:
            return round(v, 4) if np.isfinite(v) else None

        return {"difference": num(self.difference), "difference_ci": [num(v) for v in self.ci],
                "share_not_above": num(self.share_not_above), "n": self.n, "n_resamples": self.n_resamples}


def paired_query_level_difference(metric_a: ArrayLike, metric_b: ArrayLike, e2e: ArrayLike, *,
                                  n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> PairedDifference:
    """Query-level Spearman ρ of ``metric_a`` minus that of ``metric_b``, both against ``e2e``, with a
    percentile bootstrap over queries that resamples the same queries for both in every replicate."""
    a, e = _check(metric_a, e2e)
    b, _ = _check(metric_b, e2e)
    idx = _resamples(a.shape[0], n_resamples, seed)
    ea = e[idx].reshape(n_resamples, -1)
    ra = spearman_rho(a[idx].reshape(n_resamples, -1), ea)
    rb = spearman_rho(b[idx].reshape(n_resamples, -1), ea)
    assert isinstance(ra, np.ndarray) and isinstance(rb, np.ndarray)
    diffs = ra - rb
    point_a, point_b = spearman_rho(a.ravel(), e.ravel()), spearman_rho(b.ravel(), e.ravel())
    assert isinstance(point_a, float) and isinstance(point_b, float)
    finite = diffs[np.isfinite(diffs)]
    share = float((finite <= 0).mean()) if finite.size else float("nan")
    return PairedDifference(point_a - point_b, _interval(diffs, alpha), share, a.shape[0], n_resamples)
