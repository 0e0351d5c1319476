"""Movers: the queries that changed state at each boundary between two releases.

Per boundary the state of a query is:

- ``gold_in_context``: a gold passage reached the supplied context;
- ``ranking``: the best gold passage ranked at or above the best distractor (``ranking.ok``);
- ``generation``: the answer was entailed by the supplied passages, or it abstained and the refusal
  was justified (no relevant passage was supplied) — both are correct generation behaviour.

``lost`` = true in the baseline and false in the candidate, ``gained`` = the reverse, ``held`` =
the same known state in both (lost ids are listed largest fall first, gained largest rise
first). Queries whose state is unknown on either side are counted apart
(``n_unknown`` on the held entry) rather than forced into a group. For every group the mean
end-to-end score in each release (over the queries that have one; the mean of ``pass`` when no
record carries a score) and the share of queries below the acceptability threshold (score below it,
or no score and not passed) tell what the movement cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ragtrace_store import LabelSummary

if TYPE_CHECKING:
    from ragtrace_evaluator.compare.comparison import Pairing

__all__ = ["BOUNDARIES", "Mover", "below_threshold", "boundary_state", "movers_for"]

BOUNDARIES = ("gold_in_context", "ranking", "generation")


def _generation_ok(lab: LabelSummary) -> bool | None:
    if lab.verdict is None:
        return None
    if lab.verdict == "abstained":
        return lab.refusal_justified  # None when nobody knows whether the refusal was justified
    return lab.verdict == "entailed"


_STATE: dict[str, Callable[[LabelSummary], bool | None]] = {
    "gold_in_context": lambda lab: lab.gold_in_context,
    "ranking": lambda lab: lab.ranking_ok,
    "generation": _generation_ok,
}


def boundary_state(boundary: str, lab: LabelSummary) -> bool | None:
    """The state of one query at one boundary (None = unknown)."""
    return _STATE[boundary](lab)


@dataclass(frozen=True)
class Mover:
    """One boundary × direction group of paired queries."""

    boundary: str
    direction: str  # lost | gained | held
    n: int
    #: mean end-to-end score (or pass rate, see ``value``) of the group in each release; NaN if n = 0
    baseline_mean: float
    candidate_mean: float
    #: share of the group below the acceptability threshold in each release
    baseline_below: float
    candidate_below: float
    value: str  # "score" | "pass"
    query_ids: tuple[str, ...]
    baseline_trace_ids: tuple[str, ...]
    candidate_trace_ids: tuple[str, ...]
    #: held entries only: pairs whose state is unknown on either side
    n_unknown: int = 0

    def to_json(self, *, max_ids: int | None = None) -> dict[str, Any]:
        ids = self.query_ids if max_ids is None else self.query_ids[:max_ids]
        out: dict[str, Any] = {
            "boundary": self.boundary, "direction": self.direction, "n": self.n,
            "baseline_mean": _num(self.baseline_mean), "candidate_mean": _num(self.candidate_mean),
            "baseline_below": _num(self.baseline_below), "candidate_below": _num(self.candidate_below),
            "value": self.value, "query_ids": list(ids),
            "baseline_trace_ids": list(self.baseline_trace_ids[: len(ids)]),
            "candidate_trace_ids": list(self.candidate_trace_ids[: len(ids)]),
        }
        if self.direction == "held":
            out["n_unknown"] = self.n_unknown
        return out


def _num(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


def _mean(xs: Sequence[float]) -> float:
    """Mean of the defined values; NaN (undefined) when there are none."""
    arr = np.asarray(xs, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    return float(arr.mean()) if arr.size else float("nan")


def _nan_last(x: float) -> float:
    return x if np.isfinite(x) else 0.0


def below_threshold(lab: LabelSummary, threshold: float) -> float:
    """1.0 when the query is below the acceptability threshold: its score is below it, or it has no
    score (an abstention, or a harness without scores) and did not pass."""
    if lab.score is not None:
        return float(lab.score < threshold)
    return float(not lab.passed)


def movers_for(p: Pairing, threshold: float) -> list[Mover]:
    """Lost, gained and held groups for every boundary some record has a state for."""
    # Audit records leave the score of an abstention undefined: such queries are left out of the
    # score means (never counted as 0) but still count as below the threshold when they did not pass.
    use_score = any(lab.score is not None for lab in (*p.baseline, *p.candidate))
    value = "score" if use_score else "pass"

    def val(lab: LabelSummary) -> float:
        if not use_score:
            return float(lab.passed)
        return float(lab.score) if lab.score is not None else float("nan")

    def below(lab: LabelSummary) -> float:
        return below_threshold(lab, threshold)

    out: list[Mover] = []
    for boundary in BOUNDARIES:
        states = [(boundary_state(boundary, a), boundary_state(boundary, b)) for a, b in zip(
            p.baseline, p.candidate, strict=True)]
        if all(sa is None and sb is None for sa, sb in states):
            continue
        groups: dict[str, list[int]] = {"lost": [], "gained": [], "held": []}
        unknown = 0
        for i, (sa, sb) in enumerate(states):
            if sa is None or sb is None:
                unknown += 1
            elif sa and not sb:
                groups["lost"].append(i)
            elif sb and not sa:
                groups["gained"].append(i)
            else:
                groups["held"].append(i)
        # Worst first: the lost queries that fell furthest head the list, the gained that rose most.
        change = {i: _nan_last(val(p.candidate[i]) - val(p.baseline[i])) for i in range(len(states))}
        groups["lost"].sort(key=lambda i: (change[i], p.query_ids[i]))
        groups["gained"].sort(key=lambda i: (-change[i], p.query_ids[i]))
        for direction, idx in groups.items():
            a = [p.baseline[i] for i in idx]
            b = [p.candidate[i] for i in idx]
            out.append(Mover(
                boundary=boundary, direction=direction, n=len(idx),
                baseline_mean=_mean([val(x) for x in a]), candidate_mean=_mean([val(x) for x in b]),
                baseline_below=_mean([below(x) for x in a]), candidate_below=_mean([below(x) for x in b]),
                value=value, query_ids=tuple(p.query_ids[i] for i in idx),
                baseline_trace_ids=tuple(x.trace_id for x in a),
                candidate_trace_ids=tuple(x.trace_id for x in b),
                n_unknown=unknown if direction == "held" else 0,
            ))
    return out
