"""Agreement statistics: how far reviewers agree with each other, and how well the labeller matches them.

Pure functions from ratings to result objects that carry ``n``; an undefined value is None with a
reason, never 0 and never a silent NaN. Formulas (written out here, no statistics package needed):

* Cohen's κ for two raters, with the large-sample standard error of Fleiss, Cohen & Everitt (1969)
  and a normal-approximation CI clipped to [-1, 1].
* Fleiss' κ for m ≥ 2 ratings per item (Fleiss 1971), with a percentile bootstrap CI over items
  (seeded, so a rerun prints the same interval). Its closed-form SE (Fleiss, Nee & Landis 1979)
  is valid only under κ = 0, so it would be wrong for an interval.
* Precision and recall of the labeller per failure mode against the reviewer majority, with Wilson
  score intervals (well-behaved at 0 and n, unlike the Wald interval).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    level: float


@dataclass(frozen=True)
class KappaResult:
    """κ over ``n`` items. ``kappa`` is None when undefined (``reason`` says why)."""

    method: str  # "cohen" | "fleiss"
    kappa: float | None
    ci: Interval | None
    n: int
    observed: float | None  # observed agreement
    expected: float | None  # chance agreement
    se: float | None = None
    raters_per_item: int = 2
    reason: str = ""


@dataclass(frozen=True)
class Proportion:
    """``k`` of ``n``; ``value`` and ``ci`` are None when n = 0."""

    k: int
    n: int
    value: float | None
    ci: Interval | None


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(k: int, n: int, level: float = 0.95) -> Proportion:
    """k successes in n trials with the Wilson score interval."""
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return Proportion(k, n, None, None)
    z = _z(level)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At k = 0 (k = n) the bound is exactly 0 (1); say so rather than leave a rounding residue.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return Proportion(k, n, p, Interval(low, high, level))


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable], *, level: float = 0.95) -> KappaResult:
    """Cohen's κ of two raters who rated the same items (``a[i]`` and ``b[i]`` rate item i)."""
    if len(a) != len(b):
        raise ValueError(f"the two raters must rate the same items: got {len(a)} and {len(b)} ratings")
    n = len(a)
    if n == 0:
        return KappaResult("cohen", None, None, 0, None, None, reason="no item rated by both raters")
    cats = sorted(set(a) | set(b), key=str)
    pij = {(i, j): 0.0 for i in cats for j in cats}
    for x, y in zip(a, b, strict=True):
        pij[(x, y)] += 1 / n
    row = {i: sum(pij[(i, j)] for j in cats) for i in cats}
    col = {j: sum(pij[(i, j)] for i in cats) for j in cats}
    po = sum(pij[(i, i)] for i in cats)
    pe = sum(row[i] * col[i] for i in cats)
    if math.isclose(pe, 1.0):
        # Both raters used one and the same category throughout: agreement is perfect but κ is 0/0.
        return KappaResult("cohen", None, None, n, po, pe,
                           reason="both raters used a single category for every item; kappa is undefined")
    kappa = (po - pe) / (1 - pe)
    # Fleiss, Cohen & Everitt (1969), variance of kappa-hat (not under the null).
    diag = sum(pij[(i, i)] * (1 - (row[i] + col[i]) * (1 - kappa)) ** 2 for i in cats)
    off = (1 - kappa) ** 2 * sum(pij[(i, j)] * (col[i] + row[j]) ** 2 for i in cats for j in cats if i != j)
    var = (diag + off - (kappa - pe * (1 - kappa)) ** 2) / (n * (1 - pe) ** 2)
    se = math.sqrt(max(var, 0.0))
    z = _z(level)
    ci = Interval(max(-1.0, kappa - z * se), min(1.0, kappa + z * se), level)
    return KappaResult("cohen", kappa, ci, n, po, pe, se=se)


def _fleiss_point(tables: Sequence[Counter[Hashable]], m: int) -> tuple[float | None, float, float]:
    n = len(tables)
    cats: Counter[Hashable] = Counter()
    for t in tables:
        cats.update(t)
    p_j = [c / (n * m) for c in cats.values()]
    pe = sum(p * p for p in p_j)
    p_i = [(sum(c * c for c in t.values()) - m) / (m * (m - 1)) for t in tables]
    po = sum(p_i) / n
    if math.isclose(pe, 1.0):
        return None, po, pe
    return (po - pe) / (1 - pe), po, pe


def fleiss_kappa(ratings: Sequence[Sequence[Hashable]], *, level: float = 0.95, n_boot: int = 2000,
                 seed: int = 0) -> KappaResult:
    """Fleiss' κ; ``ratings[i]`` is the list of category ratings of item i, the same count m ≥ 2 for all."""
    if not ratings:
        return KappaResult("fleiss", None, None, 0, None, None, reason="no item has enough ratings")
    m = len(ratings[0])
    if m < 2 or any(len(r) != m for r in ratings):
        raise ValueError("every item needs the same number m >= 2 of ratings; "
                         f"got counts {sorted({len(r) for r in ratings})}")
    tables = [Counter(r) for r in ratings]
    kappa, po, pe = _fleiss_point(tables, m)
    if kappa is None:
        return KappaResult("fleiss", None, None, len(tables), po, pe, raters_per_item=m,
                           reason="every rating is the same category; kappa is undefined")
    rng = random.Random(seed)
    boots = []
    for _ in range(n_boot):
        sample = [tables[rng.randrange(len(tables))] for _ in tables]
        k, _, _ = _fleiss_point(sample, m)
        if k is not None:
            boots.append(k)
    ci = None
    if len(boots) >= n_boot // 2:
        boots.sort()
        lo = boots[math.floor((1 - level) / 2 * (len(boots) - 1))]
        hi = boots[math.ceil((1 + level) / 2 * (len(boots) - 1))]
        ci = Interval(lo, hi, level)
    return KappaResult("fleiss", kappa, ci, len(tables), po, pe, raters_per_item=m)


def majority(votes: Sequence[Hashable]) -> Hashable | None:
    """The strict plurality of ``votes``, or None on a tie or no votes."""
    if not votes:
        return None
    ranked = Counter(votes).most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None
    return ranked[0][0]


@dataclass(frozen=True)
class ModeScore:
    mode: str
    precision: Proportion  # of the labeller's `mode` calls, how many the reviewers agreed with
    recall: Proportion     # of the reviewers' `mode` items, how many the labeller called `mode`


@dataclass(frozen=True)
class Calibration:
    """Labeller vs reviewer majority over the items with a majority."""

    categories: tuple[str, ...]
    #: confusion[labeller][reviewer majority] = count
    confusion: dict[str, dict[str, int]]
    per_mode: tuple[ModeScore, ...]
    accuracy: Proportion
    n: int
    #: items whose reviewers tied (no majority); left out of everything above
    no_majority: int


def calibration(pairs: Sequence[tuple[str, Sequence[str]]], categories: Sequence[str],
                *, level: float = 0.95) -> Calibration:
    """``pairs[i]`` = (labeller's category, the reviewers' categories) for item i."""
    cats = list(categories)
    for lab, votes in pairs:
        for c in (lab, *votes):
            if c not in cats:
                cats.append(c)
    confusion = {a: {b: 0 for b in cats} for a in cats}
    no_majority = 0
    for lab, votes in pairs:
        maj = majority(list(votes))
        if maj is None:
            no_majority += 1
            continue
        confusion[lab][str(maj)] += 1
    n = sum(sum(r.values()) for r in confusion.values())
    scores = []
    for c in cats:
        tp = confusion[c][c]
        called = sum(confusion[c].values())
        actual = sum(confusion[r][c] for r in cats)
        scores.append(ModeScore(c, wilson(tp, called, level), wilson(tp, actual, level)))
    correct = sum(confusion[c][c] for c in cats)
    return Calibration(tuple(cats), confusion, tuple(scores), wilson(correct, n, level), n, no_majority)
