"""Release gates: per-stage checks with a stated family-wise false-alarm probability.

A gate is one of

- a **k-SE gate**: trips when the metric moves the bad way by more than ``k`` standard errors of
  the paired delta (``delta < −k·SE`` for a higher-is-better metric);
- a **floor** (or **ceiling**): trips when the candidate's value is below (above) an absolute bound.

Gates come from a TOML file or from `default_gates` (one k-SE gate per stage: retrieval, ranking,
generation, end-to-end). Every extra gate is another chance of a false alarm, so the set's
family-wise false-alarm probability under "no change" is computed and reported:

- k-SE gates: the joint paired-bootstrap replicates, each metric's deltas centred at its observed
  delta (so the simulated truth is "no change", while the correlation between metrics — recall and
  nDCG move together — is kept);
- floors/ceilings: under no change the candidate's estimate is distributed like the baseline's, so
  the baseline's replicates are tested against the bound (a floor the baseline already fails will
  trip under no change, and the probability says so).

The family-wise probability is the share of replicates in which at least one gate trips. The
independent-gates figure 1 − Π(1 − p_j), with p_j = Φ(−k) for k-SE gates, is reported alongside,
as the textbook number that ignores the correlation.

File format::

    k = 2.5                    # default k of the file's k-SE gates
    include_defaults = false   # true: keep the default gates too (a file gate on the same metric wins)

    [[gate]]
    metric = "recall_5"        # any metric or decomposition key of the comparison
    k = 2.0
    [[gate]]
    metric = "pass_rate"
    floor = 0.75
    [[gate]]
    metric = "below_threshold"
    ceiling = 0.3
    fail_on_undefined = true   # an undefined metric trips the gate (default: reported, not tripped)
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtr

from ragtrace_evaluator.compare.bootstrap import BootstrapRun
from ragtrace_evaluator.compare.metric_info import DECOMP_PREFIX, metric_info
from ragtrace_evaluator.compare.records import CompareError
from ragtrace_store import not_utf8

__all__ = ["DEFAULT_K", "GateError", "GateResult", "GateSet", "GateSpec", "default_gates", "evaluate_gates",
           "load_gates"]

DEFAULT_K = 2.5
_KINDS = ("se", "floor", "ceiling")
_GATE_KEYS = {"metric", "k", "floor", "ceiling", "direction", "boundary", "fail_on_undefined"}


class GateError(CompareError):
    """A gate file or gate specification is invalid."""


@dataclass(frozen=True)
class GateSpec:
    """One gate. ``kind`` "se" uses ``k``; "floor"/"ceiling" use ``bound``.

    ``direction`` ("higher" or "lower" is better) defaults to the metric's own; ``boundary`` to the
    metric's boundary (whose movers are printed when the gate trips).
    """

    metric: str
    kind: str = "se"
    k: float | None = DEFAULT_K
    bound: float | None = None
    direction: str | None = None
    boundary: str | None = None
    fail_on_undefined: bool = False
    #: default gates are skipped when the data lack their metric; file gates are errors then
    required: bool = True

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise GateError(f"gate {self.metric!r}: kind must be one of {_KINDS}, got {self.kind!r}")
        if self.kind == "se" and (self.k is None or not self.k > 0 or not math.isfinite(self.k)):
            raise GateError(f"gate {self.metric!r}: k must be a positive number of standard errors, got {self.k}")
        if self.kind != "se" and (self.bound is None or not math.isfinite(self.bound)):
            raise GateError(f"gate {self.metric!r}: a {self.kind} needs a finite bound")
        if self.direction not in (None, "higher", "lower"):
            raise GateError(f"gate {self.metric!r}: direction must be 'higher' or 'lower', got {self.direction!r}")


@dataclass(frozen=True)
class GateResult:
    """The outcome of one gate. ``threshold`` is the delta threshold (−k·SE, or +k·SE for a
    lower-is-better metric) of a k-SE gate and the bound of a floor/ceiling; ``observed`` is the
    delta, or the candidate's value, respectively. ``status`` is ok | tripped | undefined."""

    metric: str
    kind: str
    direction: str
    boundary: str | None
    threshold: float | None
    observed: float | None
    tripped: bool
    status: str
    k: float | None
    se: float | None
    baseline: float | None
    candidate: float | None
    #: probability that this gate alone trips under no change (simulated); None when undefined
    false_alarm: float | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "kind": self.kind, "direction": self.direction,
                "boundary": self.boundary, "threshold": self.threshold, "observed": self.observed,
                "tripped": self.tripped, "status": self.status, "k": self.k, "se": self.se,
                "baseline": self.baseline, "candidate": self.candidate, "false_alarm": self.false_alarm,
                "reason": self.reason}


@dataclass(frozen=True)
class GateSet:
    results: tuple[GateResult, ...]
    #: P(at least one gate trips | no change), from the joint bootstrap replicates; None without gates
    family_false_alarm: float | None
    #: the same if the gates were independent: 1 − Π(1 − p_j)
    independent_false_alarm: float | None
    n_replicates: int
    method: str

    @property
    def tripped(self) -> tuple[GateResult, ...]:
        return tuple(g for g in self.results if g.tripped)

    def summary_json(self) -> dict[str, Any]:
        return {"n_gates": len(self.results), "n_tripped": len(self.tripped),
                "family_false_alarm": self.family_false_alarm,
                "independent_false_alarm": self.independent_false_alarm,
                "n_replicates": self.n_replicates, "method": self.method}


def _pick(available: set[str], *candidates: str, prefix: str | None = None) -> str | None:
    for c in candidates:
        if c in available:
            return c
    if prefix:
        found = sorted(a for a in available if a.startswith(prefix))
        if found:
            return found[0]
    return None


def default_gates(available: Iterable[str], k: float = DEFAULT_K) -> tuple[GateSpec, ...]:
    """One k-SE gate per stage, on the first metric of each stage that the data carry:
    retrieval (recall@5 or the gold-in-context rate), ranking (nDCG@5, MRR or ranking ok),
    generation (groundedness and P(pass | gold in context)) and end-to-end (pass rate)."""
    av = set(available)
    picks = [
        _pick(av, "recall_5", prefix="recall_") or _pick(av, "gold_in_context"),
        _pick(av, "ndcg_cut_5", prefix="ndcg") or _pick(av, "recip_rank", "ranking_ok"),
        _pick(av, "groundedness"),
        _pick(av, DECOMP_PREFIX + "p_pass_given_gold"),
        _pick(av, "pass_rate"),
    ]
    return tuple(GateSpec(metric=m, kind="se", k=k, required=False) for m in picks if m)


def load_gates(path: str | Path, available: Iterable[str] | None = None) -> tuple[GateSpec, ...]:
    """Gates from a TOML file (format in the module docstring)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GateError(f"cannot read the gates file {p}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise GateError(not_utf8(p, exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise GateError(f"{p}: not valid TOML ({exc})") from exc
    unknown_top = set(data) - {"k", "include_defaults", "gate"}
    if unknown_top:
        raise GateError(f"{p}: unknown top-level keys {sorted(unknown_top)}; use k, include_defaults and [[gate]]")
    k_default = data.get("k", DEFAULT_K)
    if not isinstance(k_default, int | float) or isinstance(k_default, bool):
        raise GateError(f"{p}: k must be a number, got {k_default!r}")
    include_defaults = _flag(data, "include_defaults", p)
    raw = data.get("gate", [])
    if not isinstance(raw, list):
        raise GateError(f"{p}: gates are [[gate]] tables")
    specs: list[GateSpec] = []
    for i, g in enumerate(raw, start=1):
        where = f"{p}: gate #{i}"
        unknown = set(g) - _GATE_KEYS
        if unknown:
            raise GateError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(_GATE_KEYS)}")
        metric = g.get("metric")
        if not isinstance(metric, str) or not metric:
            raise GateError(f"{where}: needs metric = \"NAME\"")
        kinds = [key for key in ("k", "floor", "ceiling") if key in g]
        if len(kinds) > 1:
            raise GateError(f"{where} ({metric}): give one of k, floor or ceiling, not {kinds}")
        kind = {"k": "se", "floor": "floor", "ceiling": "ceiling"}[kinds[0]] if kinds else "se"
        value = g.get(kinds[0]) if kinds else k_default
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise GateError(f"{where} ({metric}): {kinds[0] if kinds else 'k'} must be a number, got {value!r}")
        boundary = g.get("boundary")
        if boundary is not None and not isinstance(boundary, str):
            raise GateError(f"{where} ({metric}): boundary must be a string, got {boundary!r}")
        direction = g.get("direction")
        if direction is None and kind != "se":
            direction = "higher" if kind == "floor" else "lower"
        specs.append(GateSpec(
            metric=metric, kind=kind, k=float(value) if kind == "se" else None,
            bound=float(value) if kind != "se" else None, direction=direction, boundary=boundary,
            fail_on_undefined=_flag(g, "fail_on_undefined", f"{where} ({metric})"), required=True,
        ))
    if include_defaults:
        have = {s.metric for s in specs}
        defaults = default_gates(available or (), float(k_default))
        specs.extend(d for d in defaults if d.metric not in have)
    return tuple(specs)


def _flag(table: dict[str, Any], key: str, where: object) -> bool:
    """A true/false key of the gate file (default false). A TOML string is refused: Python reads
    the string "false" as true, so it would turn on what it says to leave off."""
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise GateError(f"{where}: {key} must be true or false (unquoted), got {value!r}")
    return value


def _resolve(metric: str, run: BootstrapRun) -> str | None:
    if metric in run.results:
        return metric
    if DECOMP_PREFIX + metric in run.results:
        return DECOMP_PREFIX + metric
    return None


def _f(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def evaluate_gates(specs: Sequence[GateSpec], run: BootstrapRun) -> GateSet:
    """Evaluate every gate and the family-wise false-alarm probability of the set."""
    results: list[GateResult] = []
    alarms: list[np.ndarray] = []
    independent: list[float] = []
    n_rep = int(run.baseline_replicates.shape[0])
    for spec in specs:
        name = _resolve(spec.metric, run)
        if name is None:
            if spec.required:
                raise GateError(
                    f"gate on {spec.metric!r}: the comparison has no such metric. Available: "
                    f"{', '.join(sorted(m for m in run.results if not m.startswith('cell:')))}")
            continue
        res = run[name]
        own_boundary, own_direction = metric_info(name)
        if spec.kind != "se":
            own_direction = "higher" if spec.kind == "floor" else "lower"
        if spec.direction is None and own_direction is None:
            raise GateError(f"gate on {name!r}: this metric has no better direction of its own (a rate that "
                            "may rightly go either way); set direction = \"higher\" or \"lower\" in the gate")
        direction = spec.direction or own_direction or "higher"
        boundary = spec.boundary or own_boundary
        sign = 1.0 if direction == "higher" else -1.0
        col = run.column(name)
        common: dict[str, Any] = {"metric": name, "kind": spec.kind, "direction": direction, "boundary": boundary,
                  "k": spec.k, "se": _f(res.standard_error), "baseline": _f(res.baseline),
                  "candidate": _f(res.candidate)}
        if spec.kind == "se":
            se = res.standard_error
            # SE = 0 is a real answer (every replicate moved the same way): any bad move trips.
            if not (np.isfinite(res.delta) and np.isfinite(se)):
                results.append(_undefined(spec, common, "the delta or its standard error is undefined"
                                          + (f" ({res.warnings[0]})" if res.warnings else "")))
                continue
            assert spec.k is not None  # guaranteed by GateSpec validation
            threshold = -sign * spec.k * se
            tripped = bool(sign * res.delta < -spec.k * se)
            centred = run.delta_replicates[:, col] - res.delta
            alarm = sign * centred < -spec.k * se  # NaN replicates compare False: no alarm
            independent.append(float(ndtr(-spec.k)))
            observed = res.delta
            in_se = f"{res.delta / se:+.2f} SE" if se > 0 else "every replicate (SE 0)"
            reason = (f"{name} moved {res.delta:+.4g} = {in_se}; trips beyond "
                      f"{threshold:+.4g} ({spec.k:g} SE, {direction} is better)")
        else:
            assert spec.bound is not None
            if not np.isfinite(res.candidate):
                results.append(_undefined(spec, common, "the candidate's value is undefined"))
                continue
            threshold = spec.bound
            if spec.kind == "floor":
                tripped = bool(res.candidate < spec.bound)
                alarm = run.baseline_replicates[:, col] < spec.bound
            else:
                tripped = bool(res.candidate > spec.bound)
                alarm = run.baseline_replicates[:, col] > spec.bound
            independent.append(float(np.mean(alarm)))
            observed = res.candidate
            reason = f"candidate {name} = {res.candidate:.4g} ({spec.kind} {spec.bound:g})"
        alarms.append(alarm)
        results.append(GateResult(**common, threshold=float(threshold), observed=float(observed),
                                  tripped=tripped, status="tripped" if tripped else "ok",
                                  false_alarm=float(np.mean(alarm)), reason=reason))
    family: float | None = None
    indep: float | None = None
    if alarms:
        family = float(np.mean(np.logical_or.reduce(alarms)))
        indep = 1.0 - float(np.prod([1.0 - p for p in independent]))
    method = (f"share of {n_rep} joint paired-bootstrap replicates in which at least one gate trips, each "
              "delta centred at its observed value (no change), correlations between metrics kept; "
              "floors/ceilings tested on the baseline's replicates")
    return GateSet(results=tuple(results), family_false_alarm=family, independent_false_alarm=indep,
                   n_replicates=n_rep, method=method)


def _undefined(spec: GateSpec, common: dict[str, Any], why: str) -> GateResult:
    tripped = spec.fail_on_undefined
    return GateResult(**common, threshold=None, observed=None, tripped=tripped,
                      status="undefined", false_alarm=None,
                      reason=why + ("; fail_on_undefined trips it" if tripped else "; not tripped"))
