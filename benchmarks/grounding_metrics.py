"""Accuracy measures for a grounding labeller's scores, with seeded bootstrap CIs.

All take ``labels`` (1 = supported) and ``scores`` (higher = more supported) as arrays over the same
items. Undefined values (a set with one class has no AUROC; an empty bin has no calibration gap) are
``None`` in the result, never 0 and never a silent NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SEED = 20261130


def _weighted_auroc(labels: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """AUROC (ties count one half) for each row of ``weights`` (B × n item counts of a bootstrap)."""
    order = np.argsort(scores, kind="stable")
    s, y, w = scores[order], labels[order], weights[:, order]
    # Items with equal scores form one group; a positive beats the negatives of lower groups and ties
    # with those of its own.
    starts = np.r_[0, np.flatnonzero(np.diff(s)) + 1]
    neg = w * (y == 0)
    pos = w * (y == 1)
    neg_g = np.add.reduceat(neg, starts, axis=1)
    pos_g = np.add.reduceat(pos, starts, axis=1)
    below = np.cumsum(neg_g, axis=1) - neg_g
    wins = (pos_g * (below + 0.5 * neg_g)).sum(axis=1)
    n_pos, n_neg = pos.sum(axis=1), neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n_pos > 0) & (n_neg > 0), wins / (n_pos * n_neg), np.nan)


def auroc(labels: np.ndarray, scores: np.ndarray) -> float | None:
    value = float(_weighted_auroc(labels, scores, np.ones((1, len(labels))))[0]) if len(labels) else float("nan")
    return None if np.isnan(value) else value


def balanced_accuracy(labels: np.ndarray, predicted: np.ndarray) -> float | None:
    """Mean of the recall of each class present; None when a class is absent."""
    rec = [float((predicted[labels == c] == c).mean()) for c in (0, 1) if (labels == c).any()]
    return float(np.mean(rec)) if len(rec) == 2 else None


def ece(labels: np.ndarray, probs: np.ndarray, bins: int = 10) -> float | None:
    """Expected calibration error of ``probs`` as P(supported): equal-width bins, weighted by size."""
    if not len(labels):
        return None
    idx = np.minimum((np.clip(probs, 0.0, 1.0) * bins).astype(int), bins - 1)
    gap = 0.0
    for b in range(bins):
        sel = idx == b
        if sel.any():
            gap += sel.mean() * abs(float(probs[sel].mean()) - float(labels[sel].mean()))
    return gap


def _ci(samples: np.ndarray) -> list[float] | None:
    samples = samples[~np.isnan(samples)]
    if not len(samples):
        return None
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return [round(float(lo), 4), round(float(hi), 4)]


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def evaluate(labels: np.ndarray, scores: np.ndarray, predicted: np.ndarray, probs: np.ndarray | None = None,
             n_boot: int = 1000, seed: int = SEED) -> dict[str, Any]:
    """AUROC, balanced accuracy (of ``predicted``), ECE (of ``probs``, default ``scores``) with 95%
    percentile-bootstrap CIs, per-class precision/recall and n."""
    labels = np.asarray(labels, dtype=int)
    scores = np.asarray(scores, dtype=float)
    predicted = np.asarray(predicted, dtype=int)
    probs = scores if probs is None else np.asarray(probs, dtype=float)
    n = len(labels)
    rng = np.random.default_rng(seed)
    boot_idx = rng.integers(0, n, (n_boot, n)) if n else np.zeros((0, 0), dtype=int)
    weights = np.zeros((n_boot, n))
    for b in range(n_boot):
        weights[b] = np.bincount(boot_idx[b], minlength=n)
    out: dict[str, Any] = {"n": n, "n_supported": int(labels.sum()), "n_unsupported": int(n - labels.sum())}
    a = auroc(labels, scores)
    out["auroc"] = {"value": _r(a), "ci95": _ci(_weighted_auroc(labels, scores, weights)) if a is not None else None}
    ba = balanced_accuracy(labels, predicted)
    ba_s = np.array([v if (v := balanced_accuracy(labels[i], predicted[i])) is not None else np.nan
                     for i in boot_idx])
    out["balanced_accuracy"] = {"value": _r(ba), "ci95": _ci(ba_s) if ba is not None else None}
    e = ece(labels, probs)
    e_s = np.array([v if (v := ece(labels[i], probs[i])) is not None else np.nan for i in boot_idx])
    out["ece"] = {"value": _r(e), "ci95": _ci(e_s) if e is not None else None}
    for cls, name in ((1, "supported"), (0, "unsupported")):
        truth, pred = labels == cls, predicted == cls
        tp = int((truth & pred).sum())
        out[f"precision_{name}"] = _r(tp / pred.sum()) if pred.sum() else None
        out[f"recall_{name}"] = _r(tp / truth.sum()) if truth.sum() else None
    return out


def risk_coverage(labels: np.ndarray, predicted: np.ndarray, confidence: np.ndarray,
                  thresholds: tuple[float, ...] = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9)) -> list[dict[str, Any]]:
    """For each confidence threshold: the share of items labelled at or above it (coverage) and the
    accuracy of the verdicts there (1 − risk), with its n. Below-threshold items go to review."""
    labels = np.asarray(labels, dtype=int)
    predicted = np.asarray(predicted, dtype=int)
    confidence = np.asarray(confidence, dtype=float)
    out = []
    for t in thresholds:
        sel = confidence >= t
        k = int(sel.sum())
        out.append({"threshold": t, "coverage": _r(k / len(labels)) if len(labels) else None, "n": k,
                    "accuracy": _r(float((predicted[sel] == labels[sel]).mean())) if k else None,
                    "balanced_accuracy": _r(balanced_accuracy(labels[sel], predicted[sel])) if k else None})
    return out


def paired_auroc_difference(labels: np.ndarray, a: np.ndarray, b: np.ndarray, n_boot: int = 1000,
                            seed: int = SEED) -> dict[str, Any]:
    """AUROC(a) − AUROC(b) on the same items, with a 95% CI from paired resamples: each bootstrap
    replicate draws one set of items and scores both systems on it, so the interval is that of the
    difference, not of two independent AUROCs."""
    labels = np.asarray(labels, dtype=int)
    n = len(labels)
    ua, ub = auroc(labels, np.asarray(a, dtype=float)), auroc(labels, np.asarray(b, dtype=float))
    if ua is None or ub is None:
        return {"value": None, "ci95": None, "n": n}
    rng = np.random.default_rng(seed)
    weights = np.zeros((n_boot, n))
    for k in range(n_boot):
        weights[k] = np.bincount(rng.integers(0, n, n), minlength=n)
    diff = (_weighted_auroc(labels, np.asarray(a, dtype=float), weights)
            - _weighted_auroc(labels, np.asarray(b, dtype=float), weights))
    return {"value": _r(ua - ub), "ci95": _ci(diff), "n": n}
