"""Rank agreement (eRAG's meta-evaluation): τ-b and ρ against scipy on fixed data, and the
bootstrap over queries."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from ragtrace_evaluator.metrics.correlation import (
    kendall_tau_b,
    paired_query_level_difference,
    query_level_agreement,
    spearman_rho,
    system_level_agreement,
)

# Fixed data with ties on both sides (τ-b and average ranks matter only with ties).
X = [0.1, 0.4, 0.4, 0.2, 0.9, 0.5, 0.5, 0.0]
Y = [1.0, 3.0, 2.0, 2.0, 5.0, 4.0, 1.0, 0.0]


def test_kendall_tau_b_matches_scipy_with_ties() -> None:
    assert kendall_tau_b(X, Y) == pytest.approx(kendalltau(X, Y, variant="b").statistic, abs=1e-12)
    assert kendall_tau_b(X, X) == pytest.approx(1.0)
    assert kendall_tau_b(X, [-v for v in X]) == pytest.approx(-1.0)


def test_spearman_matches_scipy_with_ties() -> None:
    assert spearman_rho(X, Y) == pytest.approx(spearmanr(X, Y).statistic, abs=1e-12)


def test_rowwise_matches_scipy_row_by_row() -> None:
    rng = np.random.default_rng(7)
    xs = rng.integers(0, 4, size=(50, 6)).astype(float)  # small integers: many ties
    ys = rng.integers(0, 4, size=(50, 6)).astype(float)
    taus, rhos = kendall_tau_b(xs, ys), spearman_rho(xs, ys)
    for x, y, t, r in zip(xs, ys, taus, rhos, strict=True):
        ref_t, ref_r = kendalltau(x, y, variant="b").statistic, spearmanr(x, y).statistic
        if np.isnan(ref_t):
            assert np.isnan(t) and np.isnan(r)
        else:
            assert t == pytest.approx(ref_t, abs=1e-12) and r == pytest.approx(ref_r, abs=1e-12)


def test_constant_input_is_undefined_not_zero() -> None:
    assert np.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))
    assert np.isnan(spearman_rho([1, 2, 3], [2, 2, 2]))


def _queries(seed: int, n: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """n queries x 6 systems: the e2e score rises with the system's quality; the metric tracks it
    with per-query noise."""
    rng = np.random.default_rng(seed)
    quality = np.linspace(0.1, 0.6, 6)
    e2e = np.clip(quality + rng.normal(0, 0.2, (n, 6)), 0, 1)
    metric = np.clip(quality + rng.normal(0, noise, (n, 6)), 0, 1)
    return metric, e2e


def test_system_level_point_estimate_is_tau_of_the_means() -> None:
    metric, e2e = _queries(1, 40, 0.2)
    got = system_level_agreement(metric, e2e, n_resamples=500)
    assert got.tau == pytest.approx(kendalltau(metric.mean(0), e2e.mean(0)).statistic)
    assert got.rho == pytest.approx(spearmanr(metric.mean(0), e2e.mean(0)).statistic)
    assert got.n == 40 and got.tau_ci[0] <= got.tau_ci[1] and got.rho_ci[0] <= got.rho_ci[1]


def test_bootstrap_interval_narrows_with_more_queries_and_separates_signal_from_noise() -> None:
    few = system_level_agreement(*_queries(2, 10, 0.4), n_resamples=1000)
    many = system_level_agreement(*_queries(2, 400, 0.4), n_resamples=1000)
    assert many.tau_ci[1] - many.tau_ci[0] < few.tau_ci[1] - few.tau_ci[0]
    assert many.tau_ci[0] > 0.5
    rng = np.random.default_rng(3)
    unrelated = system_level_agreement(rng.random((400, 6)), _queries(3, 400, 0.4)[1], n_resamples=1000)
    assert unrelated.tau_ci[0] < 0 < unrelated.tau_ci[1]


def test_query_level_matches_scipy_on_pooled_cells() -> None:
    metric, e2e = _queries(4, 30, 0.3)
    got = query_level_agreement(metric, e2e, n_resamples=200)
    assert got.rho == pytest.approx(spearmanr(metric.ravel(), e2e.ravel()).statistic)
    assert got.tau == pytest.approx(kendalltau(metric.ravel(), e2e.ravel()).statistic)
    assert got.rho_ci[0] < got.rho < got.rho_ci[1]


def test_paired_difference_is_of_the_two_rhos_on_the_same_resamples() -> None:
    metric, e2e = _queries(5, 60, 0.2)  # tracks e2e closely
    noisy = np.clip(metric + np.random.default_rng(6).normal(0, 0.5, metric.shape), 0, 1)
    got = paired_query_level_difference(metric, noisy, e2e, n_resamples=400)
    assert got.difference == pytest.approx(spearmanr(metric.ravel(), e2e.ravel()).statistic
                                           - spearmanr(noisy.ravel(), e2e.ravel()).statistic)
    # every replicate resamples the same queries for both, as query_level_agreement does with the seed
    idx = np.random.default_rng(0).integers(0, 60, size=(400, 60))
    diffs = [spearmanr(metric[i].ravel(), e2e[i].ravel()).statistic
             - spearmanr(noisy[i].ravel(), e2e[i].ravel()).statistic for i in idx]
    assert got.ci == pytest.approx(tuple(np.quantile(diffs, [0.025, 0.975])), abs=1e-12)
    assert got.share_not_above == pytest.approx(np.mean(np.array(diffs) <= 0))
    assert got.ci[0] > 0 and got.share_not_above < 0.05  # the closer metric is clearly above
    same = paired_query_level_difference(metric, metric, e2e, n_resamples=100)
    assert same.difference == 0 and same.ci == (0.0, 0.0) and same.share_not_above == 1.0
    with pytest.raises(ValueError, match="one shape"):
        paired_query_level_difference(metric, noisy[:, :5], e2e)


def test_bad_input_says_what_to_fix() -> None:
    with pytest.raises(ValueError, match="one shape"):
        system_level_agreement(np.zeros((3, 4)), np.zeros((3, 5)))
    with pytest.raises(ValueError, match="undefined"):
        system_level_agreement(np.array([[np.nan, 1.0], [0.0, 1.0]]), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="at least 2 queries"):
        query_level_agreement(np.zeros((1, 4)), np.zeros((1, 4)))
