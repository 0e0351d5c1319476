"""The deciding slice of a recall drop: did the answers of the queries that lost their evidence fall?

When recall (or any gold-in-context metric) drops, either the candidate really lost evidence — and
the answers of the queries that lost it fall with it — or the gold labels stopped matching the
build (a re-chunking renamed the chunks that gold ids point at), and the answers did not move.
The slice that decides it is the queries whose gold reached the context in the baseline and not
in the candidate (``lost``), beside those whose state held (``held``):

- both groups' mean end-to-end score in each release (the mean of ``pass`` when no record has a
  score) and the paired change, as statistics ``slice:lost`` / ``slice:held`` of the one paired
  bootstrap (a mean over a subset is a ratio of sums), so each change has its intervals;
- the lost queries split by their own paired change: those that *fell* (passed in the baseline and
  fail in the candidate, or lost at least ``QUERY_MOVE`` = 0.5 of their score), those that *rose*
  (the reverse) and those that *did not move* (the rest), each with its mean in both releases and
  its change (statistics ``slice:lost_fell`` / ``slice:lost_rose`` / ``slice:lost_unmoved``). A
  query moves when it crosses the pass line or moves by half the 0-1 scale: one query's score
  moves by ``min_change`` on noise alone, so a smaller margin would sort noise; 0.5 is also the
  default pass threshold, and a pass-only slice (no scores) moves exactly by crossing it;
- the verdict, from the lost queries' change Δ and its percentile interval, with
  ``min_change`` (0.05 on the 0-1 score, the comparison's ``--min-change``) as the smallest change
  that matters. The rules are tried in this order:

  1. ``labels`` — "answers did not move: check whether the gold labels still match this build's
     chunks" — the interval's lower end is above −min_change: any fall is smaller than matters;
  2. ``mixed`` — "<k> of the <n> queries that lost their gold in context fell with it (…); the
     other <m> did not move (…): check whether the gold labels still match this build's chunks" —
     the lost queries as a whole moved too much for ``labels``, at least one fell, the unmoved
     part is a majority of the lost queries (more than half of them, scored or not), and its
     change's percentile interval lies inside (−min_change, +min_change). A chunker change that
     renames the whole index reads this way under chunk-id gold: nearly every query "loses" its
     gold, those whose evidence really left (or whose answers another change broke) fell, and the
     renamed rest did not move;
  3. ``fell`` — "answers fell with the evidence" — Δ ≤ −min_change and the interval is below 0
     (and the unmoved part is no majority, or it moved);
  4. ``undetermined`` otherwise (a wide interval), when no query lost its gold, or too few did
     for an interval.

  ``labels`` comes before ``mixed``: when the lost queries' mean as a whole moved less than
  ``min_change``, the few of them that fell are not shown to be more than the answers a re-cut
  changes anyway (a benign re-cut of 119 documents turned two passes into fails while every
  evidence stayed in the context: benchmarks/stale_labels.py), so the verdict blames the labels
  and names those queries rather than calling them a fall. Under ``labels`` and ``undetermined``
  the lost queries that fell are named all the same (``fell_anyway``, largest fall first; under
  ``mixed`` they are its fallen part): a chunker that renames the whole index and really breaks
  two documents reads "labels" under chunk-id gold, and those two are the regression the stale
  labels hide (evidence-span gold shows them as the only losses).

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ragtrace_evaluator.compare.bootstrap import BootstrapRun, PairedBootstrapResult, RatioStatistic
from ragtrace_evaluator.compare.metric_info import SLICE_PREFIX
from ragtrace_store import LabelSummary

if TYPE_CHECKING:
    from ragtrace_evaluator.compare.comparison import Pairing
    from ragtrace_evaluator.compare.gates import GateResult

__all__ = ["FELL", "LABELS", "LABEL_CHECK", "QUERY_MOVE", "UNDETERMINED", "DecidingSlice", "deciding_slice",
           "slice_statistics"]

BOUNDARY = "gold_in_context"
FELL = "answers fell with the evidence"
LABEL_CHECK = "check whether the gold labels still match this build's chunks"
LABELS = f"answers did not move: {LABEL_CHECK}"
UNDETERMINED = "undetermined"
#: the change of one query's 0-1 score that counts as a move of its answer (besides crossing the pass line)
QUERY_MOVE = 0.5
#: the lost queries' parts, by their own paired change
PARTS = ("fell", "rose", "unmoved")


def _values(labels: Sequence[LabelSummary], use_score: bool) -> NDArray[np.float64]:
    if use_score:
        return np.array([np.nan if lab.score is None else float(lab.score) for lab in labels], dtype=np.float64)
    return np.array([float(lab.passed) for lab in labels], dtype=np.float64)


def _groups(p: Pairing) -> dict[str, NDArray[np.bool_]]:
    """``lost``, ``held``, and the lost split into ``lost_fell`` / ``lost_rose`` / ``lost_unmoved``."""
    a = [lab.gold_in_context for lab in p.baseline]
    b = [lab.gold_in_context for lab in p.candidate]
    lost = np.array([x is True and y is False for x, y in zip(a, b, strict=True)], dtype=bool)
    held = np.array([x is not None and x == y for x, y in zip(a, b, strict=True)], dtype=bool)
    pass_a = np.array([lab.passed for lab in p.baseline], dtype=bool)
    pass_b = np.array([lab.passed for lab in p.candidate], dtype=bool)
    use = _use_score(p)
    change = _values(p.candidate, use) - _values(p.baseline, use)  # NaN where a side has no value
    move = QUERY_MOVE - 1e-9  # a score of 1/3 → 5/6 is a move of 0.5, whatever the rounding
    with np.errstate(invalid="ignore"):
        fell = lost & ((pass_a & ~pass_b) | (change <= -move))
        rose = lost & ~fell & ((~pass_a & pass_b) | (change >= move))
    return {"lost": lost, "held": held, "lost_fell": fell, "lost_rose": rose, "lost_unmoved": lost & ~fell & ~rose}


def _use_score(p: Pairing) -> bool:
    return any(lab.score is not None for lab in (*p.baseline, *p.candidate))


def slice_statistics(p: Pairing) -> list[RatioStatistic]:
    """``slice:lost``, ``slice:held`` and the lost queries' parts ``slice:lost_fell`` /
    ``slice:lost_rose`` / ``slice:lost_unmoved``: each group's mean score (or pass) in each release,
    over the queries of the group whose value is defined on both sides (so the change is paired)."""
    use = _use_score(p)
    va, vb = _values(p.baseline, use), _values(p.candidate, use)
    defined = np.isfinite(va) & np.isfinite(vb)
    out = []
    for name, mask in _groups(p).items():
        den = (mask & defined).astype(np.float64)
        out.append(RatioStatistic(SLICE_PREFIX + name, np.where(den > 0, va, 0.0) * den, den,
                                  np.where(den > 0, vb, 0.0) * den, den))
    return out


@dataclass(frozen=True)
class DecidingSlice:
    value: str  # "score" | "pass"
    lost: PairedBootstrapResult
    held: PairedBootstrapResult
    verdict: str  # "fell" | "labels" | "mixed" | "undetermined"
    statement: str
    #: the gates on gold-in-context metrics that tripped (the verdict is printed when not empty)
    tripped_gates: tuple[str, ...]
    min_change: float = 0.05
    #: every query of each group, scored or not (``n`` of a group counts those with a value on both sides)
    n_lost: int = 0
    n_held: int = 0
    #: lost queries that fell (pass → fail, or a score fall of QUERY_MOVE; largest fall first), with their traces
    fell_anyway: tuple[tuple[str, str, str], ...] = ()
    #: the lost queries' parts ("fell", "rose", "unmoved"): their paired means, and how many queries each holds
    parts: dict[str, tuple[PairedBootstrapResult, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        def group(r: PairedBootstrapResult, n_queries: int) -> dict[str, Any]:
            body = r.to_json()
            return {"n": int(r.n_baseline), "n_queries": n_queries, "baseline_mean": body["baseline"],
                    "candidate_mean": body["candidate"], "delta": body["delta"], "ci": body["ci"], "se": body["se"],
                    "warnings": body["warnings"]}

        split: dict[str, Any] = {
            "query_move": QUERY_MOVE,
            "rule": f"fell: passed in the baseline and fail in the candidate, or the score fell by {QUERY_MOVE:g} or "
                    f"more; rose: the reverse; unmoved: the rest. mixed: at least one fell, the unmoved are more "
                    f"than half of the lost, and their change's percentile interval is inside "
                    f"(-min_change, +min_change)"}
        split |= {name: group(r, n) for name, (r, n) in self.parts.items()}
        return {"boundary": BOUNDARY, "value": self.value, "tripped_gates": list(self.tripped_gates),
                "min_change": self.min_change, "lost": group(self.lost, self.n_lost),
                "held": group(self.held, self.n_held), "lost_split": split,
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
    masks = _groups(p)
    n_lost, n_held = int(masks["lost"].sum()), int(masks["held"].sum())
    parts = {name: (run[SLICE_PREFIX + "lost_" + name], int(masks["lost_" + name].sum())) for name in PARTS}

    def mean(r: PairedBootstrapResult, side: str) -> str:
        x = getattr(r, side)
        return f"{x:.3f}" if np.isfinite(x) else "undefined"

    va, vb = _values(p.baseline, value == "score"), _values(p.candidate, value == "score")
    change = np.where(np.isfinite(vb - va), vb - va, 0.0)  # only orders them: no value, no known fall
    fallen = [int(i) for i in np.flatnonzero(masks["lost_fell"])]
    fallen.sort(key=lambda i: (float(change[i]), p.baseline[i].query_id))
    fell_anyway = tuple((p.baseline[i].query_id, p.baseline[i].trace_id, p.candidate[i].trace_id) for i in fallen)

    def valued(n_all: int, r: PairedBootstrapResult) -> str:
        # the queries of a group without a value on both sides (an abstention's undefined score) are
        # left out of its means; say so, so the count matches the movers table
        return "" if int(r.n_baseline) == n_all else f" ({int(r.n_baseline)} with a {value} in both releases)"

    def change_of(r: PairedBootstrapResult, iv: tuple[float, float] | None) -> str:
        if iv is None:
            return f"Δ {r.delta:+.3f}, too few for an interval" if np.isfinite(r.delta) else "no change measured"
        return (f"Δ {r.delta:+.3f}, {r.confidence_level:.0%} CI [{iv[0]:+.3f}, {iv[1]:+.3f}]"
                f"{', every replicate equal' if iv[0] == iv[1] else ''}")

    def part(name: str) -> str:
        r, n_all = parts[name]
        scored = "" if int(r.n_baseline) == n_all else f"{int(r.n_baseline)} with a {value} in both releases: "
        return f"{scored}mean {value} {mean(r, 'baseline')} → {mean(r, 'candidate')}, {change_of(r, _interval(r))}"

    held_numbers = (f"the {n_held} whose state held{valued(n_held, held)}: {mean(held, 'baseline')} → "
                    f"{mean(held, 'candidate')}")
    numbers = (f"the {n_lost} {'query that lost its' if n_lost == 1 else 'queries that lost their'} gold in "
               f"context{valued(n_lost, lost)}: mean {value} {mean(lost, 'baseline')} → {mean(lost, 'candidate')}")
    iv = _interval(lost)
    if iv is not None:
        numbers += f" ({change_of(lost, iv)})"
    numbers += f"; {held_numbers}"
    n_fell, n_rose, n_unmoved = (parts[name][1] for name in PARTS)
    moved = f"a pass turned fail{f' or the score fell by {QUERY_MOVE:g} or more' if value == 'score' else ''}"
    iv_unmoved = _interval(parts["unmoved"][0])
    mixed = (n_fell > 0 and 2 * n_unmoved > n_lost and iv_unmoved is not None
             and -min_change < iv_unmoved[0] and iv_unmoved[1] < min_change)
    if n_lost == 0:
        verdict, statement = UNDETERMINED, f"{UNDETERMINED}: no query lost its gold in context"
    elif lost.n_baseline == 0:
        verdict, statement = UNDETERMINED, (f"{UNDETERMINED}: none of the {n_lost} queries that lost their gold "
                                            f"has a {value} in both releases")
    elif iv is None:
        verdict, statement = UNDETERMINED, (f"{UNDETERMINED}: too few queries lost their gold for an interval "
                                            f"({numbers})")
    elif iv[0] > -min_change:
        verdict, statement = "labels", f"{LABELS}: {numbers}"
    elif mixed:
        rose = (f"; {n_rose} rose ({part('rose')})" if n_rose else "")
        verdict = "mixed"
        statement = (f"{n_fell} of the {n_lost} queries that lost their gold in context fell with it ({moved}; "
                     f"{part('fell')}){rose}; the other {n_unmoved} did not move ({part('unmoved')}): "
                     f"{LABEL_CHECK}; {held_numbers}")
    elif iv[1] < 0 and lost.delta <= -min_change:
        verdict, statement = "fell", f"{FELL}: {numbers}"
    else:
        verdict, statement = UNDETERMINED, (f"{UNDETERMINED}: the interval of the lost queries' change reaches "
                                            f"below −{min_change:g} but does not show a fall of that size "
                                            f"({numbers})")
    if fell_anyway and verdict != "fell":
        shown = ", ".join(q for q, _, _ in fell_anyway[:5]) + (" …" if len(fell_anyway) > 5 else "")
        if verdict == "mixed":
            statement += f"; the ones that fell: {shown}"
        else:
            statement += f"; yet {len(fell_anyway)} of them fell ({moved}): {shown}"
    return DecidingSlice(value=value, lost=lost, held=held, verdict=verdict, statement=statement,
                         tripped_gates=tripped, min_change=min_change, n_lost=n_lost, n_held=n_held,
                         fell_anyway=fell_anyway, parts=parts)
