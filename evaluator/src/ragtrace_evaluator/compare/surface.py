"""Surface × grounding: a score against the reference answer beside groundedness, as a pair.

A surface score (token F1 against the reference, ``metrics.token_f1``) and grounding (the share of
the answer's claims supported by the supplied passages, ``metrics.groundedness``) measure different
things. A reranker that promotes hard distractors can raise token F1 — the fabricated answer shares
the reference's vocabulary — while grounding falls. So the two are reported as a pair on the same
queries (those where both are defined in both releases), each with its paired bootstrap intervals
(statistics ``pair:<metric>``), and every such query is placed in a quadrant of
(Δsurface, Δgrounding):

- ``surface_up_grounding_down`` — the queries that expose a surface gain bought with grounding; they
  are the movers of this block, largest grounding fall first;
- ``surface_up_grounding_up``, ``surface_down_grounding_up``, ``surface_down_grounding_down``.

A change smaller than ``min_change`` (0.05 by default) on either axis counts as flat on it, so the
query sits in no quadrant (``n_flat``): rounding noise is not a mover. Without a reference answer
the surface score is undefined, and the block says "no reference" rather than reporting 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ragtrace_evaluator.compare.bootstrap import BootstrapRun, RatioStatistic, mean_statistic
from ragtrace_evaluator.compare.metric_info import PAIR_PREFIX
from ragtrace_store import LabelSummary

if TYPE_CHECKING:
    from ragtrace_evaluator.compare.comparison import Pairing

__all__ = ["DEFAULT_MIN_CHANGE", "GROUNDING_METRIC", "QUADRANTS", "SURFACE_METRICS", "Quadrant", "SurfaceGrounding",
           "surface_grounding", "surface_statistics"]

#: surface scores against the reference, in the order the pair prefers them
SURFACE_METRICS = ("token_f1",)
GROUNDING_METRIC = "groundedness"
DEFAULT_MIN_CHANGE = 0.05
QUADRANTS = ("surface_up_grounding_down", "surface_up_grounding_up", "surface_down_grounding_up",
             "surface_down_grounding_down")


def _metric(labels: Sequence[LabelSummary], name: str) -> NDArray[np.float64]:
    return np.array([np.nan if (v := lab.metrics.get(name)) is None else float(v) for lab in labels],
                    dtype=np.float64)


def _surface_metric(p: Pairing) -> str | None:
    """The first surface metric some record of each release defines (None: no reference anywhere)."""
    for name in SURFACE_METRICS:
        if np.isfinite(_metric(p.baseline, name)).any() and np.isfinite(_metric(p.candidate, name)).any():
            return name
    return None


def _axes(p: Pairing, surface: str) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                                             NDArray[np.float64], NDArray[np.bool_]]:
    """Both axes of both releases, and where all four are defined."""
    sa, sb = _metric(p.baseline, surface), _metric(p.candidate, surface)
    ga, gb = _metric(p.baseline, GROUNDING_METRIC), _metric(p.candidate, GROUNDING_METRIC)
    both: NDArray[np.bool_] = np.isfinite(sa) & np.isfinite(sb) & np.isfinite(ga) & np.isfinite(gb)
    return sa, sb, ga, gb, both


def surface_statistics(p: Pairing) -> list[RatioStatistic]:
    """``pair:<surface>`` and ``pair:groundedness``, both on the queries where both axes are defined
    in both releases (empty when there is no surface score or no grounding)."""
    surface = _surface_metric(p)
    if surface is None:
        return []
    sa, sb, ga, gb, both = _axes(p, surface)
    if not both.any():
        return []

    def only(x: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = np.where(both, x, np.nan)
        return out

    return [mean_statistic(PAIR_PREFIX + surface, only(sa), only(sb)),
            mean_statistic(PAIR_PREFIX + GROUNDING_METRIC, only(ga), only(gb))]


@dataclass(frozen=True)
class Quadrant:
    """The paired queries of one quadrant of (Δsurface, Δgrounding)."""

    quadrant: str
    query_ids: tuple[str, ...]
    baseline_trace_ids: tuple[str, ...]
    candidate_trace_ids: tuple[str, ...]
    delta_surface: tuple[float, ...]
    delta_grounding: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.query_ids)

    def to_json(self) -> dict[str, Any]:
        return {"quadrant": self.quadrant, "n": self.n, "query_ids": list(self.query_ids),
                "baseline_trace_ids": list(self.baseline_trace_ids),
                "candidate_trace_ids": list(self.candidate_trace_ids),
                "delta_surface": list(self.delta_surface), "delta_grounding": list(self.delta_grounding)}


@dataclass(frozen=True)
class SurfaceGrounding:
    """The pair and its quadrants; ``surface_metric`` None means no reference answer to score against."""

    surface_metric: str | None
    #: paired queries with both axes defined in both releases
    n: int
    #: paired queries whose surface score is undefined on a side (no reference, an abstention)
    n_no_surface: int
    #: paired queries with a surface score on both sides whose groundedness is undefined on a side
    n_no_grounding: int
    min_change: float
    quadrants: tuple[Quadrant, ...]
    #: queries of the pair that moved less than ``min_change`` on an axis (in no quadrant)
    n_flat: int
    reason: str | None = None
    #: every pair's (Δsurface, Δgrounding), for the plot
    deltas: tuple[tuple[float, float], ...] = ()

    @property
    def available(self) -> bool:
        return self.surface_metric is not None and self.n > 0

    def quadrant(self, name: str) -> Quadrant:
        return next(q for q in self.quadrants if q.quadrant == name)

    def to_json(self, run: BootstrapRun) -> dict[str, Any]:
        out: dict[str, Any] = {"available": self.available, "surface_metric": self.surface_metric,
                               "grounding_metric": GROUNDING_METRIC, "n": self.n, "n_no_surface": self.n_no_surface,
                               "n_no_grounding": self.n_no_grounding, "min_change": self.min_change,
                               "reason": self.reason}
        if not self.available:
            out.update(surface=None, grounding=None, quadrants=[], n_flat=0, movers=None)
            return out
        assert self.surface_metric is not None
        out["surface"] = {"metric": self.surface_metric, **run[PAIR_PREFIX + self.surface_metric].to_json()}
        out["grounding"] = {"metric": GROUNDING_METRIC, **run[PAIR_PREFIX + GROUNDING_METRIC].to_json()}
        out["quadrants"] = [q.to_json() for q in self.quadrants]
        out["n_flat"] = self.n_flat
        out["movers"] = self.quadrant(QUADRANTS[0]).to_json()
        return out


def surface_grounding(p: Pairing, *, min_change: float = DEFAULT_MIN_CHANGE) -> SurfaceGrounding:
    """Place every paired query with both axes in a quadrant (module docstring)."""
    if not 0.0 <= min_change < 1.0:
        raise ValueError(f"min_change is a change of a 0-1 score that counts as flat; give a value in [0, 1), "
                         f"got {min_change}")
    surface = _surface_metric(p)
    if surface is None:
        with_ref = [side for side, labs in (("baseline", p.baseline), ("candidate", p.candidate))
                    if any(np.isfinite(_metric(labs, m)).any() for m in SURFACE_METRICS)]
        why = ("no reference answer in either release: the surface score (token F1 against the reference) is "
               "undefined, so the pair is not reported (import references with `ragtrace labels import "
               "REFS.jsonl` and re-audit)" if not with_ref else
               f"no reference-based surface score in the {'candidate' if with_ref == ['baseline'] else 'baseline'}"
               f" (only the {with_ref[0]} has one): the pair needs both releases scored against the reference")
        return SurfaceGrounding(None, 0, len(p.query_ids), 0, min_change, (), 0, why)
    sa, sb, ga, gb, both = _axes(p, surface)
    has_surface = np.isfinite(sa) & np.isfinite(sb)
    n_no_surface = int((~has_surface).sum())
    n_no_grounding = int((has_surface & ~both).sum())
    ds, dg = sb - sa, gb - ga
    groups: dict[str, list[int]] = {q: [] for q in QUADRANTS}
    flat = 0
    for i in np.flatnonzero(both):
        s_move = 0 if abs(ds[i]) <= min_change else (1 if ds[i] > 0 else -1)
        g_move = 0 if abs(dg[i]) <= min_change else (1 if dg[i] > 0 else -1)
        if s_move == 0 or g_move == 0:
            flat += 1
            continue
        groups[f"surface_{'up' if s_move > 0 else 'down'}_grounding_{'up' if g_move > 0 else 'down'}"].append(int(i))
    quadrants = []
    for name, idx in groups.items():
        idx.sort(key=lambda i: (dg[i], p.query_ids[i]))  # largest grounding fall first
        quadrants.append(Quadrant(
            name, tuple(p.query_ids[i] for i in idx), tuple(p.baseline[i].trace_id for i in idx),
            tuple(p.candidate[i].trace_id for i in idx), tuple(float(ds[i]) for i in idx),
            tuple(float(dg[i]) for i in idx)))
    n = int(both.sum())
    reason = None if n else (f"no paired query has both {surface} and {GROUNDING_METRIC} in both releases "
                             "(abstentions and unjudged answers have neither)")
    return SurfaceGrounding(surface, n, n_no_surface, n_no_grounding, min_change, tuple(quadrants), flat, reason,
                            tuple((float(ds[i]), float(dg[i])) for i in np.flatnonzero(both)))
