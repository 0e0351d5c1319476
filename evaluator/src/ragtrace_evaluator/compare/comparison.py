"""Paired release comparison: stage metrics, contingency cells, the decomposition and the movers.

`compare(baseline, candidate)` pairs two `LabelSet`s over query ids and bootstraps every statistic
in one paired run (see `ragtrace_evaluator.compare.bootstrap`):

- stage metrics: every key of the records' ``metrics`` dict (recall@k, precision@k, MRR, nDCG@k,
  groundedness, abstention …), the boundary rates (gold in pool, gold in context, ranking ok), the
  end-to-end pass rate, the mean score and the share below the acceptability threshold;
- contingency cells: gold in context × pass (the cells behind the decomposition) and gold in
  pool × gold in context × generation (entailed / not entailed / abstained), as shares of all pairs;
- the decomposition e2e = recall·P(pass | gold in C) + (1 − recall)·P(pass | no gold in C) on the
  queries whose relevance is known, with both terms, so a loss at one boundary cancelled by a gain
  at another is visible;
- the failure-mode mix: each mode's rate in both releases with its paired difference, and the
  transition matrix of the queries that changed mode (`ragtrace_evaluator.compare.modes`);
- surface × grounding: token F1 against the reference beside groundedness, paired on the same
  queries, and the quadrants of (Δsurface, Δgrounding) (`ragtrace_evaluator.compare.surface`);
- the deciding slice of a recall drop: did the answers of the queries that lost their gold fall?
  (`ragtrace_evaluator.compare.deciding_slice`);
- movers (`ragtrace_evaluator.compare.movers`) and gates (`ragtrace_evaluator.compare.gates`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ragtrace_evaluator.compare.bootstrap import (
    BootstrapRun,
    DegenerateDataWarning,
    PairedBootstrapResult,
    RatioStatistic,
    mean_statistic,
    paired_bootstrap,
)
from ragtrace_evaluator.compare.deciding_slice import DecidingSlice, deciding_slice, slice_statistics
from ragtrace_evaluator.compare.gates import GateSet, GateSpec, default_gates, evaluate_gates
from ragtrace_evaluator.compare.metric_info import CELL_PREFIX as _CELL_PREFIX
from ragtrace_evaluator.compare.metric_info import DECOMP_PREFIX as _DECOMP_PREFIX
from ragtrace_evaluator.compare.metric_info import DECOMPOSITION_KEYS, metric_info
from ragtrace_evaluator.compare.metric_info import MODE_PREFIX as _MODE_PREFIX
from ragtrace_evaluator.compare.metric_info import PAIR_PREFIX as _PAIR_PREFIX
from ragtrace_evaluator.compare.metric_info import SLICE_PREFIX as _SLICE_PREFIX
from ragtrace_evaluator.compare.modes import (
    TransitionMatrix,
    failure_mode_rows,
    mode_levels,
    mode_statistics,
    transitions,
)
from ragtrace_evaluator.compare.movers import Mover, below_threshold, movers_for
from ragtrace_evaluator.compare.records import CompareError, LabelSet
from ragtrace_evaluator.compare.surface import (
    DEFAULT_MIN_CHANGE,
    SurfaceGrounding,
    surface_grounding,
    surface_statistics,
)
from ragtrace_store import LabelSummary

__all__ = ["DECOMPOSITION_KEYS", "Comparison", "Pairing", "compare", "metric_info", "pair"]



@dataclass(frozen=True)
class Pairing:
    """Query ids present in both releases (sorted), and those present in only one."""

    query_ids: tuple[str, ...]
    baseline: tuple[LabelSummary, ...]
    candidate: tuple[LabelSummary, ...]
    only_baseline: tuple[str, ...]
    only_candidate: tuple[str, ...]

    def to_json(self, a: LabelSet, b: LabelSet) -> dict[str, Any]:
        return {
            "n_pairs": len(self.query_ids),
            "only_baseline": {"n": len(self.only_baseline), "query_ids": list(self.only_baseline)},
            "only_candidate": {"n": len(self.only_candidate), "query_ids": list(self.only_candidate)},
            "duplicates": {"baseline": a.n_duplicates, "candidate": b.n_duplicates},
            "no_query_id": {"baseline": len(a.no_query_id), "candidate": len(b.no_query_id)},
        }


def pair(baseline: LabelSet, candidate: LabelSet) -> Pairing:
    """Pair over query ids; ids present on one side only are returned, never silently dropped."""
    a = {lab.query_id: lab for lab in baseline.labels}
    b = {lab.query_id: lab for lab in candidate.labels}
    common = sorted(a.keys() & b.keys())
    return Pairing(
        query_ids=tuple(common),
        baseline=tuple(a[q] for q in common),
        candidate=tuple(b[q] for q in common),
        # with the query ids a side's read left out because the other side lacks them (`load_pair`)
        only_baseline=tuple(sorted((a.keys() - b.keys()) | set(baseline.unpaired))),
        only_candidate=tuple(sorted((b.keys() - a.keys()) | set(candidate.unpaired))),
    )


def _col(labels: Sequence[LabelSummary], get: Any) -> NDArray[np.float64]:
    """One float per label; None → NaN (undefined)."""
    return np.array([np.nan if (v := get(lab)) is None else float(v) for lab in labels], dtype=np.float64)


def _indicator(x: NDArray[np.float64], value: float) -> NDArray[np.float64]:
    out: NDArray[np.float64] = (x == value).astype(np.float64)
    return out


#: prefixes of the statistics that are not stage metrics (reported in their own blocks)
_PREFIXES = (_CELL_PREFIX, _DECOMP_PREFIX, _MODE_PREFIX, _PAIR_PREFIX, _SLICE_PREFIX)
#: statistic names the comparison defines itself (a metrics-dict key of the same name is renamed)
_RESERVED = ("gold_in_pool", "ranking_ok", "gold_in_context", "pass_rate", "mean_score", "below_threshold")


def _build_statistics(p: Pairing, threshold: float) -> tuple[list[RatioStatistic], list[str], list[str]]:
    """Every statistic as a ratio of sums; also the cell names (display order) and notes."""
    a, b = p.baseline, p.candidate
    stats: list[RatioStatistic] = []
    notes: list[str] = []
    keys = sorted({k for lab in (*a, *b) for k in lab.metrics})
    used = set(_RESERVED)
    for key in keys:
        name = "abstention_rate" if key == "abstained" else key
        if name in used or name.startswith(_PREFIXES):
            name = f"metrics.{key}"  # a harness's own key must not shadow one of ours
        used.add(name)
        stats.append(mean_statistic(name, _col(a, lambda r, k=key: r.metrics.get(k)),
                                    _col(b, lambda r, k=key: r.metrics.get(k))))
    gic_a, gic_b = _col(a, lambda r: r.gold_in_context), _col(b, lambda r: r.gold_in_context)
    pass_a, pass_b = _col(a, lambda r: r.passed), _col(b, lambda r: r.passed)
    for name, get in (("gold_in_pool", lambda r: r.gold_in_pool), ("ranking_ok", lambda r: r.ranking_ok)):
        ca, cb = _col(a, get), _col(b, get)
        if np.isfinite(ca).any() or np.isfinite(cb).any():
            stats.append(mean_statistic(name, ca, cb))
    stats.append(mean_statistic("gold_in_context", gic_a, gic_b))
    stats.append(mean_statistic("pass_rate", pass_a, pass_b))
    score_a, score_b = _col(a, lambda r: r.score), _col(b, lambda r: r.score)
    if np.isfinite(score_a).any() or np.isfinite(score_b).any():
        stats.append(mean_statistic("mean_score", score_a, score_b))
        below_a = np.array([below_threshold(lab, threshold) for lab in a])
        below_b = np.array([below_threshold(lab, threshold) for lab in b])
        stats.append(mean_statistic("below_threshold", below_a, below_b))
    else:
        notes.append("no record has a score: mean_score and the share below the threshold are not reported")

    # Decomposition on the queries whose relevance is known on that side.
    def decomp(gic: NDArray[np.float64], ok: NDArray[np.float64]) -> dict[str, tuple[Any, Any]]:
        known = np.isfinite(gic).astype(np.float64)
        gold = _indicator(gic, 1.0)
        miss = _indicator(gic, 0.0)
        return {
            "recall": (gold, known),
            "p_pass_given_gold": (gold * ok, gold),
            "p_pass_without_gold": (miss * ok, miss),
            "e2e": (known * ok, known),
            "term_gold": (gold * ok, known),
            "term_without_gold": (miss * ok, known),
        }

    stats.extend(mode_statistics(p))
    stats.extend(surface_statistics(p))
    stats.extend(slice_statistics(p))
    if not any(lab.failure_mode for lab in (*a, *b)):
        notes.append("no record carries a failure mode: the failure-mode table is not reported")

    da, db = decomp(gic_a, pass_a), decomp(gic_b, pass_b)
    for key in DECOMPOSITION_KEYS:
        stats.append(RatioStatistic(_DECOMP_PREFIX + key, da[key][0], da[key][1], db[key][0], db[key][1]))

    # Contingency cells, as shares of all pairs.
    cells: list[str] = []
    ones = np.ones(len(a))

    def add_cells(dims: list[tuple[str, list[tuple[str, Any]], Any, Any]]) -> None:
        combos: list[list[tuple[str, str, Any, Any]]] = [[]]
        for dim, values, get_a, get_b in dims:
            combos = [[*c, (dim, label, get_a == v, get_b == v)] for c in combos for label, v in values]
        for combo in combos:
            name = _CELL_PREFIX + " ".join(f"{dim}={label}" for dim, label, _, _ in combo)
            in_a = np.logical_and.reduce([x for _, _, x, _ in combo]).astype(np.float64)
            in_b = np.logical_and.reduce([y for _, _, _, y in combo]).astype(np.float64)
            has_unknown = any(label == "unknown" for _, label, _, _ in combo)
            if has_unknown and not (in_a.any() or in_b.any()):
                continue  # an "unknown" level that never occurs is not a cell of this data
            stats.append(RatioStatistic(name, in_a, ones, in_b, ones))
            cells.append(name)

    def tri(x: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = np.where(np.isfinite(x), x, -1.0)
        return out

    yes_no_unknown = [("yes", 1.0), ("no", 0.0), ("unknown", -1.0)]
    add_cells([("gold_in_context", yes_no_unknown, tri(gic_a), tri(gic_b)),
               ("pass", [("yes", 1.0), ("no", 0.0)], pass_a, pass_b)])
    pool_a, pool_b = _col(a, lambda r: r.gold_in_pool), _col(b, lambda r: r.gold_in_pool)
    have_three = (np.isfinite(pool_a).any() or np.isfinite(pool_b).any()) and any(
        lab.verdict is not None for lab in (*a, *b))
    if have_three:
        gen_a = np.array([_gen_level(lab) for lab in a], dtype=np.float64)
        gen_b = np.array([_gen_level(lab) for lab in b], dtype=np.float64)
        add_cells([("pool", yes_no_unknown, tri(pool_a), tri(pool_b)),
                   ("context", yes_no_unknown, tri(gic_a), tri(gic_b)),
                   ("generation", [("entailed", 0.0), ("not_entailed", 1.0), ("abstained", 2.0),
                                   ("unknown", -1.0)], gen_a, gen_b)])
    else:
        notes.append("records carry no gold_in_pool or generation verdict: the pool × context × generation "
                     "contingency is not reported")
    return stats, cells, notes


def _gen_level(lab: LabelSummary) -> float:
    return {"entailed": 0.0, "neutral": 1.0, "contradicted": 1.0, "abstained": 2.0}.get(lab.verdict or "", -1.0)


@dataclass(frozen=True)
class Comparison:
    """Everything `ragtrace compare` reports. `to_json` gives the documented JSON keys."""

    baseline: LabelSet
    candidate: LabelSet
    pairing: Pairing
    run: BootstrapRun
    metrics: tuple[str, ...]
    cells: tuple[str, ...]
    movers: tuple[Mover, ...]
    gates: GateSet
    threshold: float
    seed: int | None
    notes: tuple[str, ...]
    #: the ``mode:`` statistics in display order (modes, ok, incomplete, abstained)
    modes: tuple[str, ...] = ()
    transitions: TransitionMatrix | None = None
    surface: SurfaceGrounding | None = None
    deciding_slice: DecidingSlice | None = None

    @property
    def tripped(self) -> bool:
        return any(g.tripped for g in self.gates.results)

    def result(self, name: str) -> PairedBootstrapResult:
        return self.run[name]

    def decomposition(self, side: str) -> dict[str, float]:
        attr = {"baseline": "baseline", "candidate": "candidate", "delta": "delta"}[side]
        return {k: float(getattr(self.run[_DECOMP_PREFIX + k], attr)) for k in DECOMPOSITION_KEYS}

    def scores(self, side: str) -> NDArray[np.float64]:
        """End-to-end scores of one side (NaN where undefined); pass as 0/1 when no record has a score."""
        labs = self.pairing.baseline if side == "baseline" else self.pairing.candidate
        if any(r.score is not None for r in (*self.pairing.baseline, *self.pairing.candidate)):
            return _col(labs, lambda r: r.score)
        return _col(labs, lambda r: r.passed)

    def all_warnings(self) -> list[str]:
        out = list(self.notes)
        for r in self.run.results.values():
            out.extend(r.warnings)
        return out

    def to_json(self) -> dict[str, Any]:
        def side(ls: LabelSet) -> dict[str, Any]:
            return {"name": ls.name, "source": ls.source, "manifest_ids": list(ls.manifest_ids),
                    "n_queries": ls.n_queries}

        def entry(name: str) -> dict[str, Any]:
            boundary, direction = metric_info(name)
            return {"metric": name, "boundary": boundary, "direction": direction, **self.run[name].to_json()}

        decomp: dict[str, Any] = {"n": self.run[_DECOMP_PREFIX + "e2e"].n,
                  "n_known_baseline": _num(self.run[_DECOMP_PREFIX + "e2e"].n_baseline),
                  "n_known_candidate": _num(self.run[_DECOMP_PREFIX + "e2e"].n_candidate)}
        for s in ("baseline", "candidate", "delta"):
            decomp[s] = {k: _num(v) for k, v in self.decomposition(s).items()}
        decomp["ci"] = {k: self.run[_DECOMP_PREFIX + k].to_json()["ci"] for k in DECOMPOSITION_KEYS}
        decomp["se"] = {k: _num(self.run[_DECOMP_PREFIX + k].standard_error) for k in DECOMPOSITION_KEYS}
        below = self.run.results.get("below_threshold")
        return {
            "baseline": side(self.baseline),
            "candidate": side(self.candidate),
            "settings": {"seed": self.seed, "resamples": self.run[self.metrics[0]].n_resamples,
                         "confidence_level": self.run[self.metrics[0]].confidence_level,
                         "threshold": self.threshold},
            "pairing": self.pairing.to_json(self.baseline, self.candidate),
            "failure_modes": failure_mode_rows(self.run, self.modes),
            "failure_mode_transitions": None if self.transitions is None else self.transitions.to_json(),
            "surface_grounding": None if self.surface is None else self.surface.to_json(self.run),
            "deciding_slice": None if self.deciding_slice is None else self.deciding_slice.to_json(),
            "metrics": [entry(m) for m in self.metrics],
            "contingency": [
                {"cell": c.removeprefix(_CELL_PREFIX),
                 "baseline_count": round(self.run[c].baseline * self.run[c].n) if self.run[c].n else 0,
                 "candidate_count": round(self.run[c].candidate * self.run[c].n) if self.run[c].n else 0,
                 **self.run[c].to_json()}
                for c in self.cells
            ],
            "decomposition": decomp,
            "below_threshold": {"threshold": self.threshold,
                                **({k: v for k, v in below.to_json().items() if k != "warnings"}
                                   if below else {"baseline": None, "candidate": None, "delta": None})},
            "movers": [mv.to_json() for mv in self.movers],
            "gates": [g.to_json() for g in self.gates.results],
            "gates_summary": self.gates.summary_json(),
            "tripped": self.tripped,
            "warnings": self.all_warnings(),
        }


def _num(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


def compare(
    baseline: LabelSet,
    candidate: LabelSet,
    *,
    threshold: float = 0.5,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    seed: int | None = 0,
    gates: Sequence[GateSpec] | None = None,
    warn: bool = True,
    min_change: float = DEFAULT_MIN_CHANGE,
) -> Comparison:
    """Compare two releases paired over query ids. ``gates=None`` uses `default_gates()`;
    ``min_change`` is the change of a 0-1 score that still counts as flat: in the surface ×
    grounding quadrants, and as the smallest fall the deciding slice calls a fall.

    Raises `CompareError` when no query id is in both releases: a comparison of nothing is a
    usage error, not a result.
    """
    if not 0.0 <= threshold <= 1.0:
        raise CompareError(f"--threshold is an end-to-end score in [0, 1], got {threshold}")
    p = pair(baseline, candidate)
    if not p.query_ids:
        raise CompareError(
            f"no query id is in both releases ({baseline.n_queries} in {baseline.name!r}, "
            f"{candidate.n_queries} in {candidate.name!r}): a paired comparison needs the same questions "
            "in both (set ragtrace.query.id on the root span, or compare golden-question runs)")
    try:
        surface = surface_grounding(p, min_change=min_change)
    except ValueError as exc:
        raise CompareError(f"--min-change: {exc}") from exc
    stats, cells, notes = _build_statistics(p, threshold)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DegenerateDataWarning)
        run = paired_bootstrap(stats, n_resamples=n_resamples, confidence_level=confidence_level, seed=seed,
                               warn=warn)
    if warn and caught:
        # One summary warning instead of one per statistic; each message stays on its result.
        warnings.warn(f"{len(caught)} statistics are degenerate (undefined values or intervals); "
                      "see the report's warnings", DegenerateDataWarning, stacklevel=2)
    if p.only_baseline or p.only_candidate:
        notes.append(f"{len(p.only_baseline)} query ids only in the baseline and {len(p.only_candidate)} only "
                     "in the candidate are not in the paired statistics (listed under pairing)")
    metric_names = tuple(s.name for s in stats if not s.name.startswith(_PREFIXES))
    mode_names = tuple(s.name for s in stats if s.name.startswith(_MODE_PREFIX))
    movers = movers_for(p, threshold)
    specs = default_gates(set(metric_names) | {_DECOMP_PREFIX + k for k in DECOMPOSITION_KEYS}) \
        if gates is None else tuple(gates)
    gate_set = evaluate_gates(specs, run)
    return Comparison(baseline=baseline, candidate=candidate, pairing=p, run=run, metrics=metric_names,
                      cells=tuple(cells), movers=tuple(movers), gates=gate_set, threshold=threshold,
                      seed=seed, notes=tuple(notes), modes=mode_names,
                      transitions=transitions(p) if mode_levels(p) else None, surface=surface,
                      deciding_slice=deciding_slice(p, run, gate_set.results, min_change=min_change))
