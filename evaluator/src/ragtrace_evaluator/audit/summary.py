"""The JSON summary of an audit, computed from per-trace label records only.

Working from the records (not from in-memory label objects) means a resumed audit summarises
traces labelled in earlier runs exactly like new ones. Every rate carries its ``n`` and a 95%
Wilson interval; every mean carries ``n`` and ``n_undefined`` (undefined values are never 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragtrace_evaluator.audit.failure_modes import contingency
from ragtrace_store import FAILURE_MODES, FailureMode

INCOMPLETE = FailureMode.INCOMPLETE.value

Z95 = 1.959963984540054


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for k successes in n trials; None when n = 0 (undefined)."""
    if n == 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(k: int, n: int) -> dict[str, Any]:
    ci = wilson_interval(k, n)
    return {"count": k, "n": n, "rate": k / n if n else None, "ci95": list(ci) if ci else None}


def mean_of(values: Sequence[float | None]) -> dict[str, Any]:
    defined = [v for v in values if v is not None]
    return {"mean": sum(defined) / len(defined) if defined else None, "n": len(defined),
            "n_undefined": len(values) - len(defined)}


def _bool_rate(records: Sequence[Mapping[str, Any]], get: Callable[[Mapping[str, Any]], Any]) -> dict[str, Any]:
    vals = [get(r) for r in records]
    defined = [bool(v) for v in vals if v is not None]
    out = rate(sum(defined), len(defined))
    out["n_undefined"] = len(vals) - len(defined)
    return out


def _incomplete(records: Sequence[Mapping[str, Any]], n: int) -> dict[str, Any]:
    """How many traces were too incomplete to label, by reason code, with some of their ids."""
    bad = [r for r in records if r["failure_mode"] == INCOMPLETE]
    reasons: dict[str, int] = {}
    for r in bad:
        for code in dict.fromkeys(str(x).split(":", 1)[0] for x in r.get("incomplete_reasons") or ()):
            reasons[code] = reasons.get(code, 0) + 1
    return {**rate(len(bad), n), "reasons": dict(sorted(reasons.items())),
            "trace_ids": [r["trace_id"] for r in bad[:20]]}


def review_threshold(manifest: Mapping[str, Any]) -> float | None:
    """The grounding labeller's review threshold (its manifest's ``thresholds.review``), if it has one."""
    labeller = manifest.get("grounding_labeller") or {}
    value = (labeller.get("thresholds") or {}).get("review") if isinstance(labeller, Mapping) else None
    return float(value) if isinstance(value, int | float) else None


def selective_labelling(records: Sequence[Mapping[str, Any]], threshold: float | None) -> dict[str, Any]:
    """Per failure mode, the share of traces labelled with confidence at or above the review
    threshold (labelled without a human), with a Wilson CI; the rest are for review. A record
    without a confidence counts as below (it has nothing to trust). Undefined without a threshold."""
    if threshold is None:
        return {"review_threshold": None, "by_mode": None, "all": None,
                "note": "the grounding labeller states no review threshold"}

    def share(rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        sure = sum(1 for r in rs if isinstance(r.get("confidence"), int | float) and r["confidence"] >= threshold)
        return {**rate(sure, len(rs)), "for_review": len(rs) - sure}

    return {"review_threshold": threshold,
            "by_mode": {m: share([r for r in records if r["failure_mode"] == m]) for m in FAILURE_MODES},
            "all": share(records)}


def summarise(records: Sequence[Mapping[str, Any]], *, manifest: dict[str, Any], manifest_id: str) -> dict[str, Any]:
    """The summary of per-trace records (JSON objects of `ragtrace_store.LabelRecord`). Incomplete
    traces are their own outcome (``incomplete``): counted over all records, left out of the
    failure modes (whose rates are over the complete traces) and of every other figure."""
    n = len(records)
    incomplete = _incomplete(records, n)
    records = [r for r in records if r["failure_mode"] != INCOMPLETE]
    modes = {m: rate(sum(1 for r in records if r["failure_mode"] == m), len(records)) for m in FAILURE_MODES}
    gens = [r["generation"] for r in records if r.get("generation")]
    abstained = [g for g in gens if g.get("abstained")]
    justified = sum(1 for g in abstained if g.get("refusal_justified") is True)
    unjustified = sum(1 for g in abstained if g.get("refusal_justified") is False)
    verdicts: dict[str, int] = {}
    for g in gens:
        verdicts[g["verdict"]] = verdicts.get(g["verdict"], 0) + 1
    labelled = [r for r in records if r.get("generation")]
    in_ctx = [r for r in labelled if r.get("gold_in_context") is True]
    out_ctx = [r for r in labelled if r.get("gold_in_context") is False]

    def pass_rate(rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return rate(sum(1 for r in rs if r["pass"]), len(rs))

    metrics = {
        "retrieval": {
            "gold_in_pool": _bool_rate(records, lambda r: r["gold_in_pool"]),
            "gold_in_context": _bool_rate(records, lambda r: r["gold_in_context"]),
            **{name: mean_of([r["metrics"][name] for r in records])
               for name in ("recall_5", "precision_5", "recip_rank", "ndcg_cut_5", "success_5")},
        },
        "ranking": {"ok": _bool_rate(records, lambda r: r["ranking"]["ok"])},
        "generation": {
            "n": len(gens),
            "verdicts": verdicts,
            "groundedness": mean_of([None if g.get("abstained") else g.get("groundedness") for g in gens]),
            "entailed": rate(verdicts.get("entailed", 0), len(gens) - len(abstained)),
        },
        "e2e": {
            "pass": pass_rate(labelled),
            "score": mean_of([r["score"] for r in labelled]),
            "pass_given_gold_in_context": pass_rate(in_ctx),
            "pass_given_no_gold_in_context": pass_rate(out_ctx),
        },
    }
    gold_sources: dict[str, int] = {}
    for r in records:
        src = r["retrieval"]["gold_source"]
        gold_sources[src] = gold_sources.get(src, 0) + 1
    return {
        "n": n,
        "manifest_id": manifest_id,
        "manifest": manifest,
        "failure_modes": modes,
        "incomplete": incomplete,
        "contingency": contingency(records),
        "metrics": metrics,
        "abstention": {
            **rate(len(abstained), len(gens)),
            "justified": justified,
            "unjustified": unjustified,
            "unknown": len(abstained) - justified - unjustified,
        },
        "gold_sources": gold_sources,
        "confidence": mean_of([r.get("confidence") for r in records]),
        "selective": selective_labelling(records, review_threshold(manifest)),
    }
