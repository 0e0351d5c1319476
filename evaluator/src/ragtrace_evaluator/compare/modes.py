"""The failure-mode mix of two releases: each mode's rate, its paired difference, and the transitions.

Per paired query the audit's record names one primary failure mode (`ragtrace_store.FAILURE_MODES`,
in precedence order, ``ok`` last) or ``incomplete`` (a trace that lost attributes or a stage: its
own outcome, never a mode). For every mode the comparison bootstraps the share of queries with
that mode in each release, paired over query ids like every other statistic, so each row has n,
both rates, the delta and its percentile and BCa intervals. Two rows sit beside the partition:

- ``abstained``: the share of answered queries whose answer was an abstention (it overlaps the
  modes: an abstention with the gold in context is ``under_use``; one without is often ``ok``),
  shown when some record has a generation verdict;
- ``incomplete``: shown only when some record is incomplete (it is then also a level of the
  transition matrix).

A query whose mode is unknown on one side (a harness record without a mode) counts on the side
that has one and is left out of the transitions (``n_unknown``), never guessed.

The transition matrix counts the paired queries by (baseline mode, candidate mode); its diagonal
is the queries that kept their mode. Each off-diagonal cell keeps its query and trace ids, so a
report can link every changed query to its traces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ragtrace_evaluator.compare.bootstrap import BootstrapRun, RatioStatistic, mean_statistic
from ragtrace_evaluator.compare.metric_info import MODE_PREFIX, metric_info
from ragtrace_evaluator.compare.records import INCOMPLETE
from ragtrace_store import FAILURE_MODES, LabelSummary

if TYPE_CHECKING:
    from ragtrace_evaluator.compare.comparison import Pairing

__all__ = ["ABSTAINED", "MEANING", "Transition", "TransitionMatrix", "failure_mode_rows", "mode_levels",
           "mode_statistics", "transitions"]

ABSTAINED = "abstained"

#: each row's name in words, for people reading a report (DESIGN.md's definitions, shortened)
MEANING = {
    "retrieval_gap": "retrieval gap: no relevant passage among the candidates",
    "rank_inversion": "rank inversion: a relevant candidate ranked below distractors or out of the context",
    "under_use": "under-use: the evidence was in the context, yet the answer abstains, is generic or leans "
                 "on other passages",
    "fabrication": "fabrication: claims that no supplied passage supports",
    "ok": "ok: none of the above",
    "incomplete": "incomplete: the trace lost attributes or a stage, so no mode is read off it",
    ABSTAINED: "abstained: the answer declined (overlaps the modes)",
}


def mode_levels(p: Pairing) -> tuple[str, ...]:
    """The partition of this comparison: the failure modes and ``ok``, then ``incomplete`` if present.
    Empty when no record of either release carries a mode."""
    modes = {lab.failure_mode for lab in (*p.baseline, *p.candidate)}
    if modes <= {None}:
        return ()
    return (*FAILURE_MODES, *((INCOMPLETE,) if INCOMPLETE in modes else ()))


def _indicator(labels: Sequence[LabelSummary], mode: str) -> NDArray[np.float64]:
    """1 where the query has ``mode``, 0 where it has another, NaN where its mode is unknown."""
    return np.array([np.nan if lab.failure_mode is None else float(lab.failure_mode == mode) for lab in labels],
                    dtype=np.float64)


def _abstained(labels: Sequence[LabelSummary]) -> NDArray[np.float64]:
    """1 for an abstention, 0 for another answer, NaN when the answer was not judged (or incomplete)."""
    return np.array([np.nan if lab.verdict is None or lab.failure_mode == INCOMPLETE
                     else float(lab.verdict == ABSTAINED) for lab in labels], dtype=np.float64)


def mode_statistics(p: Pairing) -> list[RatioStatistic]:
    """One rate per mode level (``mode:<name>``), plus ``mode:abstained`` when verdicts exist."""
    stats = [mean_statistic(MODE_PREFIX + m, _indicator(p.baseline, m), _indicator(p.candidate, m))
             for m in mode_levels(p)]
    if any(lab.verdict is not None for lab in (*p.baseline, *p.candidate)):
        stats.append(mean_statistic(MODE_PREFIX + ABSTAINED, _abstained(p.baseline), _abstained(p.candidate)))
    return stats


def failure_mode_rows(run: BootstrapRun, names: Sequence[str]) -> list[dict[str, Any]]:
    """The ``failure_modes[]`` entries of the JSON report, in display order.

    ``ci95`` holds both intervals of the delta at the run's confidence level (0.95 unless
    ``--confidence`` says otherwise; ``ci95.level`` is the level used).
    """
    rows = []
    for name in names:
        res = run[name]
        boundary, direction = metric_info(name)
        body = res.to_json()
        rows.append({
            "mode": name.removeprefix(MODE_PREFIX),
            "baseline": body["baseline"], "candidate": body["candidate"], "delta": body["delta"],
            "ci95": body["ci"], "n": body["n"],
            "n_baseline": body["n_baseline"], "n_candidate": body["n_candidate"],
            "baseline_count": _count(res.baseline, res.n_baseline),
            "candidate_count": _count(res.candidate, res.n_candidate),
            "se": body["se"], "direction": direction, "boundary": boundary,
            "n_undefined_resamples": body["n_undefined_resamples"], "warnings": body["warnings"],
        })
    return rows


def _count(rate: float, n: float) -> int | None:
    return round(rate * n) if np.isfinite(rate) and n > 0 else None


@dataclass(frozen=True)
class Transition:
    """The paired queries whose mode went from ``baseline`` to ``candidate``."""

    baseline: str
    candidate: str
    query_ids: tuple[str, ...]
    baseline_trace_ids: tuple[str, ...]
    candidate_trace_ids: tuple[str, ...]

    @property
    def n(self) -> int:
        return len(self.query_ids)

    def to_json(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "candidate": self.candidate, "n": self.n,
                "query_ids": list(self.query_ids), "baseline_trace_ids": list(self.baseline_trace_ids),
                "candidate_trace_ids": list(self.candidate_trace_ids)}


@dataclass(frozen=True)
class TransitionMatrix:
    """Counts of (baseline mode × candidate mode) over the pairs whose mode is known on both sides."""

    modes: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]
    #: the off-diagonal cells that are not empty, largest first
    changed: tuple[Transition, ...]
    #: pairs whose mode is unknown on either side
    n_unknown: int

    @property
    def n(self) -> int:
        return sum(map(sum, self.counts))

    @property
    def n_changed(self) -> int:
        return sum(t.n for t in self.changed)

    def to_json(self) -> dict[str, Any]:
        return {"modes": list(self.modes), "n": self.n, "n_changed": self.n_changed, "n_unknown": self.n_unknown,
                "counts": [list(row) for row in self.counts], "changed": [t.to_json() for t in self.changed]}


def transitions(p: Pairing) -> TransitionMatrix:
    """The transition matrix of the pairing (empty when no record carries a mode)."""
    modes = mode_levels(p)
    at = {m: i for i, m in enumerate(modes)}
    counts = [[0] * len(modes) for _ in modes]
    cells: dict[tuple[str, str], list[int]] = {}
    unknown = 0
    for i, (a, b) in enumerate(zip(p.baseline, p.candidate, strict=True)):
        if a.failure_mode is None or b.failure_mode is None:
            unknown += 1
            continue
        counts[at[a.failure_mode]][at[b.failure_mode]] += 1
        if a.failure_mode != b.failure_mode:
            cells.setdefault((a.failure_mode, b.failure_mode), []).append(i)
    changed = sorted(
        (Transition(ma, mb, tuple(p.query_ids[i] for i in idx), tuple(p.baseline[i].trace_id for i in idx),
                    tuple(p.candidate[i].trace_id for i in idx)) for (ma, mb), idx in cells.items()),
        key=lambda t: (-t.n, at[t.baseline], at[t.candidate]))
    return TransitionMatrix(modes=modes, counts=tuple(tuple(r) for r in counts), changed=tuple(changed),
                            n_unknown=unknown)
