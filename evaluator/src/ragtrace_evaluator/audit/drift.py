"""Drift: whether a failure mode's rate in one audit window differs from a reference (the previous
window, or the anchor a team pinned), and which way.

The two sides are different traces (two windows, or a window and a release), so the comparison is
unpaired: the interval of the difference of two independent proportions is Newcombe's hybrid score
interval (Newcombe 1998, method 10), built from each side's Wilson score interval
(`ragtrace_evaluator.audit.summary.wilson_interval`). It keeps its coverage near the nominal level
for small n and rates near 0, where the Wald interval does not, and is defined whenever both sides
have n > 0.

One comparison tests every failure mode (`BOUNDARIES`: the `FAILURE_MODES` but ``ok``, m = 4). Like
`compare`'s gates, the set states its family-wise false-alarm probability: each mode's interval is taken at confidence
1 − α/m (Bonferroni), so under no change the probability that at least one mode is called changed
(better or worse) is at most α (``family_false_alarm``; α = 0.05 by default), and
1 − (1 − α/m)^m if the modes were independent (``independent_false_alarm``, the textbook figure).
The modes of one window are not independent (they partition the complete traces), and the bound
holds regardless. The previous-window and the anchor comparison are two families, each with its own
bound.

A verdict follows `ragtrace_evaluator.compare.significance` (a failure mode's rate is better lower):
1 significantly worse (the interval lies above 0), -1 significantly better, 0 no significant change,
None undefined (a side with n = 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from ragtrace_evaluator.audit.summary import wilson_interval
from ragtrace_evaluator.compare.metric_info import MODE_PREFIX, metric_info
from ragtrace_evaluator.compare.significance import significance
from ragtrace_store import FAILURE_MODES, FailureMode

__all__ = ["BOUNDARIES", "FAMILY_ALPHA", "Difference", "DriftFamily", "compare_modes", "difference",
           "newcombe_interval"]

#: the failure modes, each the failure of one boundary (``ok`` is what is left over, not a boundary)
BOUNDARIES: tuple[str, ...] = tuple(m for m in FAILURE_MODES if m != FailureMode.OK.value)
#: the family-wise false-alarm bound of one comparison (all modes of a window against one reference)
FAMILY_ALPHA = 0.05
_VERDICT = {"worse": 1, "better": -1, "flat": 0, "changed": 0, "undefined": None}


def newcombe_interval(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> tuple[float, float] | None:
    """Newcombe's hybrid score interval for p1 − p2 (k1 of n1 against k2 of n2, independent samples)
    at confidence ``level``; None when either n is 0 (undefined)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    for name, k, n in (("1", k1, n1), ("2", k2, n2)):
        if n < 0 or not 0 <= k <= max(n, 0):
            raise ValueError(f"side {name}: need 0 <= k <= n, got k={k}, n={n}")
    if n1 == 0 or n2 == 0:
        return None
    z = NormalDist().inv_cdf(0.5 + level / 2)
    ci1, ci2 = wilson_interval(k1, n1, z), wilson_interval(k2, n2, z)
    assert ci1 is not None and ci2 is not None
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = ci1, ci2
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


@dataclass(frozen=True)
class Difference:
    """One mode's rate in the window against the reference's."""

    mode: str
    count: int
    n: int
    reference_count: int
    reference_n: int
    #: window minus reference; None when undefined (a side with n = 0)
    delta: float | None
    lower: float | None
    upper: float | None
    #: 1 significantly worse, -1 significantly better, 0 no significant change, None undefined
    verdict: int | None


def difference(mode: str, count: int, n: int, reference_count: int, reference_n: int,
               level: float) -> Difference:
    ci = newcombe_interval(count, n, reference_count, reference_n, level)
    if ci is None:
        return Difference(mode, count, n, reference_count, reference_n, None, None, None, None)
    delta = count / n - reference_count / reference_n
    _, direction = metric_info(MODE_PREFIX + mode)
    return Difference(mode, count, n, reference_count, reference_n, delta, ci[0], ci[1],
                      _VERDICT[significance(delta, ci, direction)])


@dataclass(frozen=True)
class DriftFamily:
    """The verdicts of one comparison (every mode) and the false-alarm rate it was held to."""

    differences: tuple[Difference, ...]
    #: the family-wise false-alarm bound α and each interval's confidence 1 − α/m
    family_alpha: float
    level: float

    @property
    def family_false_alarm(self) -> float:
        """P(some mode is called changed | no change) is at most this (Bonferroni)."""
        return self.family_alpha

    @property
    def independent_false_alarm(self) -> float:
        """The same if the modes' tests were independent: 1 − (1 − α/m)^m."""
        return 1.0 - self.level ** len(self.differences)

    def summary_json(self) -> dict[str, Any]:
        m = len(self.differences)
        return {"n_modes": m, "n_worse": sum(d.verdict == 1 for d in self.differences),
                "n_better": sum(d.verdict == -1 for d in self.differences),
                "family_false_alarm": self.family_false_alarm, "independent_false_alarm": self.independent_false_alarm,
                "level": self.level,
                "method": (f"Newcombe hybrid score interval (unpaired) per mode at confidence 1 - {self.family_alpha:g}"
                           f"/{m} (Bonferroni): under no change, the probability that at least one of the {m} modes "
                           f"is called changed is at most {self.family_alpha:g}")}


def compare_modes(counts: Sequence[tuple[int, int]], reference: Sequence[tuple[int, int]] | None, *,
                  family_alpha: float = FAMILY_ALPHA, modes: Sequence[str] = BOUNDARIES) -> DriftFamily:
    """Every mode's (count, n) in the window against the reference's (None: no reference, every
    verdict undefined), each at confidence 1 − ``family_alpha`` / len(``modes``)."""
    if not 0.0 < family_alpha < 1.0:
        raise ValueError(f"family_alpha must be in (0, 1), got {family_alpha!r}")
    if len(counts) != len(modes) or (reference is not None and len(reference) != len(modes)):
        raise ValueError(f"need one (count, n) per mode of {list(modes)}")
    level = 1.0 - family_alpha / len(modes)
    ref = reference if reference is not None else [(0, 0)] * len(modes)
    return DriftFamily(tuple(difference(m, k, n, rk, rn, level) for m, (k, n), (rk, rn)
                             in zip(modes, counts, ref, strict=True)), family_alpha, level)
