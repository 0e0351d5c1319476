"""The deciding slice of a recall drop: did the answers of the queries that lost their evidence fall?

When recall (or any gold-in-context metric) drops, either the candidate really lost evidence — and
the answers of the queries that lost it fall with it — or the gold labels stopped matching the
build (a re-chunking renamed the chunks that gold ids point at), and the answers did not move.
The slice that decides it is the queries whose gold reached the context in the baseline and not
in the candidate (``lost``), beside those whose state held (``held``):

- both groups' mean end-to-end score in each release (the mean of ``pass`` when no record has a
  score) and the paired change, as statistics ``slice:lost`` / ``slice:held`` of the one paired
  bootstrap (a mean over a subset is a ratio of sums), so each change has its intervals;
- the verdict, from the lost queries' change Δ and its percentile interval, with
  ``min_change`` (0.05 on the 0-1 score, the comparison's ``--min-change``) as the smallest fall
  that matters:

  - ``fell`` — "answers fell with the evidence" — Δ ≤ −min_change and the interval is below 0;
  - ``labels`` — "answers did not move: check whether the gold labels still match this build's
    chunks" — the interval's lower end is above −min_change: any fall is smaller than matters;
  - ``undetermined`` otherwise (a wide interval), when no query lost its gold, or too few did
    for an interval.

  Under a verdict other than ``fell``, the lost queries that passed in the baseline and fail in
  the candidate are named all the same (``fell_anyway``; largest score fall first): a chunker that
  renames the whole index and really breaks two documents reads "labels" under chunk-id gold, and
  those two are the regression the stale labels hide (evidence-span gold shows them as the only
  losses). Pass → fail rather than a score change of ``min_change``: one query's score moves by
  that much on noise alone.

  Significance alone would call a fall of 0.006 "fell" on a large enough slice; the floor keeps
  the verdict about answers that moved. The percentile interval decides rather than BCa: the
  slice is often a handful of queries with scores of 0 or 1, where BCa's jackknife acceleration
  swings its ends to the extremes (six queries falling 1 → 0 and one staying at 0 gave a BCa
  interval reaching +0.000). When every replicate is equal (every lost query kept its exact
  score) the change has no spread and the interval is the point itself.

The verdict is reported when a gate on a gold-in-context metric trips (recall@k, gold_in_context,
…); the numbers are in the JSON either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ragtrace_evaluator.compare.bootstrap import BootstrapRun, PairedBootstrapResult, RatioStatistic
from ragtrace_evaluator.compare.metric_info import SLICE_PREFIX
from ragtrace_evaluator.compare.records import TraceLabel

if TYPE_CHECKING:
    from ragtrace_evaluator.compare.comparison import Pairing
    from ragtrace_evaluator.compare.gates import GateResult

__all__ = ["FELL", "LABELS", "UNDETERMINED", "DecidingSlice", "deciding_slice", "slice_statistics"]

BOUNDARY = "gold_in_context"
FELL = "answers fell with the evidence"
LABELS = "answers did not move: check whether the gold labels still match this build's chunks"
UNDETERMINED = "undetermined"


def _values(labels: Sequence[TraceLabel], use_score: bool) -> NDArray[np.float64]:
    if use_score:
        return np.array([np.nan if lab.score is None else float(lab.score) for lab in labels], dtype=np.float64)
    return np.array([float(lab.passed) for lab in labels], dtype=np.float64)


def _groups(p: Pairing) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    a = [lab.gold_in_context for lab in p.baseline]
    b = [lab.gold_in_context for lab in p.candidate]
    lost = np.array([x is True and y is False for x, y in zip(a, b, strict=True)], dtype=bool)
    held = np.array([x is not None and x == y for x, y in zip(a, b, strict=True)], dtype=bool)
    return lost, held


def _use_score(p: Pairing) -> bool:
    return any(lab.score is not None for lab in (*p.baseline, *p.candidate))


def slice_statistics(p: Pairing) -> list[RatioStatistic]:
    """``slice:lost`` and ``slice:held``: each group's mean score (or pass) in each release, over the
    queries of the group whose value is defined on both sides (so the change is paired)."""
    use = _use_score(p)
    va, vb = _values(p.baseline, use), _values(p.candidate, use)
    defined = np.isfinite(va) & np.isfinite(vb)
    out = []
    for name, mask in zip(("lost", "held"), _groups(p), strict=True):
        den = (mask & defined).astype(np.float64)
        out.append(RatioStatistic(SLICE_PREFIX + name, np.where(den > 0, va, 0.0) * den, den,
                                  np.where(den > 0, vb, 0.0) * den, den))
    return out


@dataclass(frozen=True)
class DecidingSlice:
    value: str  # "score" | "pass"
    lost: PairedBootstrapResult
    held: PairedBootstrapResult
    verdict: str  # "fell" | "labels" | "undetermined"
    statement: str
    #: the gates on gold-in-context metrics that tripped (the verdict is printed when not empty)
    tripped_gates: tuple[str, ...]
    min_change: float = 0.05
    #: every query of each group, scored or not (``n`` of a group counts those with a value on both sides)
    n_lost: int = 0
    n_held: int = 0
    #: lost queries that passed in the baseline and fail in the candidate (largest fall first), with their traces
    fell_anyway: tuple[tuple[str, str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        def group(r: PairedBootstrapResult, n_queries: int) -> dict[str, Any]:
            body = r.to_json()
            return {"n": int(r.n_baseline), "n_queries": n_queries, "baseline_mean": body["baseline"],
                    "candidate_mean": body["candidate"], "delta": body["delta"], "ci": body["ci"], "se": body["se"],
                    "warnings": body["warnings"]}

        return {"boundary": BOUNDARY, "value": self.value, "tripped_gates": list(self.tripped_gates),
                "min_change": self.min_change, "lost": group(self.lost, self.n_lost),
                "held": group(self.held, self.n_held),
                "fell_anyway": {"n": len(self.fell_anyway), "query_ids": [q for q, _, _ in self.fell_anyway],
                                "baseline_trace_ids": [a for _, a, _ in self.fell_anyway],
                                "candidate_trace_ids": [b for _, _, b in self.fell_anyway]},
                "verdict": self.verdict,
                "statement": self.statement}


def _interval(r: PairedBootstrapResult) -> tuple[float, float] | None:
    if r.percentile.defined:
        return r.percentile.low, r.percentile.high
    if r.standard_error == 0.0 and np.isfinite(r.delta) and r.n_baseline >= 2:
        return r.delta, r.delta  # every replicate equal: no spread around the change
    return None


def deciding_slice(p: Pairing, run: BootstrapRun, gates: Sequence[GateResult], *,
                   min_change: float = 0.05) -> DecidingSlice:
    """The verdict on the lost queries (module docstring), with the numbers behind it."""
    value = "score" if _use_score(p) else "pass"
    lost, held = run[SLICE_PREFIX + "lost"], run[SLICE_PREFIX + "held"]
    tripped = tuple(g.metric for g in gates if g.tripped and g.boundary == BOUNDARY)

    def mean(r: PairedBootstrapResult, side: str) -> str:
        x = getattr(r, side)
        return f"{x:.3f}" if np.isfinite(x) else "undefined"

    lost_mask, held_mask = _groups(p)
    n_lost, n_held = int(lost_mask.sum()), int(held_mask.sum())
    va, vb = _values(p.baseline, value == "score"), _values(p.candidate, value == "score")
    change = np.where(np.isfinite(vb - va), vb - va, 0.0)  # only orders them: no value, no known fall
    fallen = [int(i) for i in np.flatnonzero(lost_mask) if p.baseline[i].passed and not p.candidate[i].passed]
    fallen.sort(key=lambda i: (float(change[i]), p.baseline[i].query_id))
    fell_anyway = tuple((p.baseline[i].query_id, p.baseline[i].trace_id, p.candidate[i].trace_id) for i in fallen)

    def valued(n_all: int, r: PairedBootstrapResult) -> str:
        # the queries of a group without a value on both sides (an abstention's undefined score) are
        # left out of its means; say so, so the count matches the movers table
        return "" if int(r.n_baseline) == n_all else f" ({int(r.n_baseline)} with a {value} in both releases)"

    numbers = (f"the {n_lost} {'query that lost its' if n_lost == 1 else 'queries that lost their'} gold in "
               f"context{valued(n_lost, lost)}: mean {value} {mean(lost, 'baseline')} → {mean(lost, 'candidate')}")
    iv = _interval(lost)
    if iv is not None:
        numbers += (f" (Δ {lost.delta:+.3f}, {lost.confidence_level:.0%} CI [{iv[0]:+.3f}, {iv[1]:+.3f}]"
                    f"{', every replicate equal' if iv[0] == iv[1] else ''})")
    numbers += (f"; the {n_held} whose state held{valued(n_held, held)}: {mean(held, 'baseline')} → "
                f"{mean(held, 'candidate')}")
    if n_lost == 0:
        verdict, statement = UNDETERMINED, f"{UNDETERMINED}: no query lost its gold in context"
    elif lost.n_baseline == 0:
        verdict, statement = UNDETERMINED, (f"{UNDETERMINED}: none of the {n_lost} queries that lost their gold "
                                            f"has a {value} in both releases")
    elif iv is None:
        verdict, statement = UNDETERMINED, (f"{UNDETERMINED}: too few queries lost their gold for an interval "
                                            f"({numbers})")
    elif iv[1] < 0 and lost.delta <= -min_change:
        verdict, statement = "fell", f"{FELL}: {numbers}"
    elif iv[0] > -min_change:
        verdict, statement = "labels", f"{LABELS}: {numbers}"
    else:
        verdict, statement = UNDETERMINED, (f"{UNDETERMINED}: the interval of the lost queries' change reaches "
                                            f"below −{min_change:g} but does not show a fall of that size "
                                            f"({numbers})")
    if fell_anyway and verdict != "fell":
        shown = ", ".join(q for q, _, _ in fell_anyway[:5]) + (" …" if len(fell_anyway) > 5 else "")
        statement += (f"; yet {len(fell_anyway)} of them passed in the baseline and "
                      f"{'fails' if len(fell_anyway) == 1 else 'fail'} now: {shown}")
    return DecidingSlice(value=value, lost=lost, held=held, verdict=verdict, statement=statement,
                         tripped_gates=tripped, min_change=min_change, n_lost=n_lost, n_held=n_held,
                         fell_anyway=fell_anyway)
