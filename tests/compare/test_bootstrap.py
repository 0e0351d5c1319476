"""The paired bootstrap against theory, against scipy.stats.bootstrap(paired=True), against a plain
recomputation, and on degenerate input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from ragtrace_evaluator.compare.bootstrap import (
    DegenerateDataWarning,
    RatioStatistic,
    _jackknife_deltas,
    bootstrap_mean_difference,
    mean_statistic,
    paired_bootstrap,
)


def _coverage(draw, true_delta: float, reps: int = 300, n: int = 100, resamples: int = 1000):
    """Share of `reps` nominal-95% intervals (percentile, BCa) that contain the true delta."""
    rng = np.random.default_rng(2024)
    hits = {"percentile": 0, "bca": 0}
    for _ in range(reps):
        a, b = draw(rng, n)
        r = bootstrap_mean_difference(a, b, n_resamples=resamples, seed=rng)
        hits["percentile"] += r.percentile.low <= true_delta <= r.percentile.high
        hits["bca"] += r.bca.low <= true_delta <= r.bca.high
    return {k: v / reps for k, v in hits.items()}


# Simulation error of a coverage estimate over 300 replications: sqrt(.95·.05/300) ≈ 0.0126. The
# bounds allow 3 of those plus the bootstrap's known small-sample undercoverage (~1 point at n = 100).
LOW, HIGH = 0.95 - 3 * 0.0126 - 0.01, 0.95 + 3 * 0.0126


def test_coverage_of_correlated_normal_pairs_matches_nominal() -> None:
    def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        a = rng.normal(0.0, 1.0, n)
        return a, 0.6 * a + rng.normal(0.3, 0.8, n)  # E[b − a] = 0.3 − 0.4·0 = 0.3

    cov = _coverage(draw, 0.3)
    assert LOW <= cov["percentile"] <= HIGH, cov
    assert LOW <= cov["bca"] <= HIGH, cov


def test_coverage_of_paired_pass_rates_matches_nominal() -> None:
    # Bernoulli pass/fail pairs: baseline p = 0.8; the candidate flips 10% of passes to fail and
    # 30% of fails to pass, so its rate is 0.8·0.9 + 0.2·0.3 = 0.78 and the true delta is −0.02.
    def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        a = (rng.random(n) < 0.8).astype(float)
        flip = rng.random(n)
        b = np.where(a == 1, flip >= 0.1, flip < 0.3).astype(float)
        return a, b

    cov = _coverage(draw, -0.02, n=200)
    assert LOW <= cov["percentile"] <= HIGH, cov
    assert LOW <= cov["bca"] <= HIGH, cov


def test_skewed_data_bca_corrects_where_it_should() -> None:
    # Exponential differences are skewed: BCa's interval must shift right of the percentile one.
    rng = np.random.default_rng(7)
    a = np.zeros(60)
    b = rng.exponential(1.0, 60)
    r = bootstrap_mean_difference(a, b, n_resamples=20_000, seed=1)
    assert r.bca.low > r.percentile.low
    assert r.bca.high > r.percentile.high


def _scipy_ci(x: np.ndarray, y: np.ndarray, statistic, method: str, seed: int):
    res = stats.bootstrap((x, y), statistic, paired=True, vectorized=True, n_resamples=40_000,
                          method=method, random_state=seed)
    return res.confidence_interval, res.standard_error


def test_matches_scipy_on_a_mean_difference() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0.7, 0.2, 400)
    y = np.clip(x + rng.normal(0.02, 0.15, 400), 0, 1)
    ours = bootstrap_mean_difference(x, y, n_resamples=40_000, seed=11)

    def diff(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return b.mean(axis=axis) - a.mean(axis=axis)

    for method, ci in (("percentile", ours.percentile), ("BCa", ours.bca)):
        ref, se = _scipy_ci(x, y, diff, method, 12)
        # Both are Monte Carlo estimates of the same interval: ends agree to a few % of the SE.
        assert ci.low == pytest.approx(ref.low, abs=0.05 * se)
        assert ci.high == pytest.approx(ref.high, abs=0.05 * se)
        assert ours.standard_error == pytest.approx(se, rel=0.03)
    assert ours.delta == pytest.approx(y.mean() - x.mean(), abs=1e-12)


def test_matches_scipy_on_a_conditional_pass_rate() -> None:
    # P(pass | gold in context) is a ratio of sums: our closed-form jackknife must give scipy's BCa.
    rng = np.random.default_rng(4)
    n = 300
    gold_a = rng.random(n) < 0.8
    gold_b = np.where(gold_a, rng.random(n) < 0.85, rng.random(n) < 0.2)
    pass_a = np.where(gold_a, rng.random(n) < 0.85, rng.random(n) < 0.4).astype(float)
    pass_b = np.where(gold_b, rng.random(n) < 0.92, rng.random(n) < 0.5).astype(float)
    ga, gb = gold_a.astype(float), gold_b.astype(float)
    stat = RatioStatistic("p_pass_given_gold", pass_a * ga, ga, pass_b * gb, gb)
    ours = paired_bootstrap([stat], n_resamples=40_000, seed=5)["p_pass_given_gold"]

    def cond(pa, g_a, pb, g_b, axis: int = -1):
        return (pb * g_b).sum(axis=axis) / g_b.sum(axis=axis) - (pa * g_a).sum(axis=axis) / g_a.sum(axis=axis)

    for method, ci in (("percentile", ours.percentile), ("BCa", ours.bca)):
        res = stats.bootstrap((pass_a, ga, pass_b, gb), cond, paired=True, vectorized=True,
                              n_resamples=40_000, method=method, random_state=6)
        se = res.standard_error
        assert ci.low == pytest.approx(res.confidence_interval.low, abs=0.06 * se)
        assert ci.high == pytest.approx(res.confidence_interval.high, abs=0.06 * se)


def test_closed_form_jackknife_equals_leave_one_out_recomputation() -> None:
    rng = np.random.default_rng(8)
    n = 25
    num_a, den_a = rng.random(n), (rng.random(n) < 0.7).astype(float)
    num_b, den_b = rng.random(n), (rng.random(n) < 0.6).astype(float)
    values = np.column_stack([num_a * den_a, den_a, num_b * den_b, den_b])
    jack = _jackknife_deltas(values, values.sum(axis=0), 1)[:, 0]
    for i in range(n):
        keep = np.arange(n) != i
        expected = ((num_b * den_b)[keep].sum() / den_b[keep].sum()
                    - (num_a * den_a)[keep].sum() / den_a[keep].sum())
        assert jack[i] == pytest.approx(expected, abs=1e-12)


def test_same_seed_same_result_different_seed_different_result() -> None:
    rng = np.random.default_rng(9)
    x, y = rng.random(150), rng.random(150)
    r1 = bootstrap_mean_difference(x, y, n_resamples=2000, seed=42)
    r2 = bootstrap_mean_difference(x, y, n_resamples=2000, seed=42)
    r3 = bootstrap_mean_difference(x, y, n_resamples=2000, seed=np.random.default_rng(42))
    r4 = bootstrap_mean_difference(x, y, n_resamples=2000, seed=43)
    assert r1 == r2 == r3
    assert r1.percentile != r4.percentile


def test_all_statistics_share_the_resamples() -> None:
    # Pairing across statistics: the joint replicates of two statistics on identical data are equal.
    rng = np.random.default_rng(10)
    x, y = rng.random(80), rng.random(80)
    run = paired_bootstrap([mean_statistic("a", x, y), mean_statistic("b", x, y)], n_resamples=500, seed=1)
    assert np.array_equal(run.delta_replicates[:, 0], run.delta_replicates[:, 1])


def _caught(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        result = fn()
    return result, [str(x.message) for x in w if issubclass(x.category, DegenerateDataWarning)]


def test_zero_pairs_is_undefined_with_a_warning() -> None:
    r, msgs = _caught(lambda: bootstrap_mean_difference([], [], n_resamples=100, seed=0))
    assert r.n == 0 and math.isnan(r.delta) and math.isnan(r.baseline)
    assert not r.percentile.defined and not r.bca.defined
    assert msgs and "no paired queries" in msgs[0]


def test_one_pair_has_an_estimate_but_no_interval() -> None:
    r, msgs = _caught(lambda: bootstrap_mean_difference([0.2], [0.9], n_resamples=100, seed=0))
    assert r.n == 1 and r.delta == pytest.approx(0.7)
    assert math.isnan(r.standard_error) and not r.percentile.defined and not r.bca.defined
    assert any("n = 1" in m for m in msgs)


def test_all_equal_values_give_an_undefined_interval_not_a_zero_width_one() -> None:
    r, msgs = _caught(lambda: bootstrap_mean_difference(np.ones(50), np.ones(50), n_resamples=200, seed=0))
    assert r.delta == 0.0 and r.standard_error == 0.0
    assert not r.percentile.defined and not r.bca.defined
    assert any("equal" in m for m in msgs)


def test_empty_conditioning_set_is_undefined_never_zero() -> None:
    # No gold in context at all on the candidate side: P(pass | gold) is undefined there.
    n = 40
    gold_a = np.r_[np.ones(20), np.zeros(20)]
    pass_ = np.ones(n)
    stat = RatioStatistic("p_pass_given_gold", pass_ * gold_a, gold_a, np.zeros(n), np.zeros(n))
    run, msgs = _caught(lambda: paired_bootstrap([stat], n_resamples=200, seed=0))
    r = run["p_pass_given_gold"]
    assert r.baseline == 1.0 and math.isnan(r.candidate) and math.isnan(r.delta)
    assert r.to_json()["delta"] is None and r.to_json()["candidate"] is None
    assert any("undefined in the candidate" in m for m in msgs)


def test_rarely_empty_conditioning_set_drops_those_replicates_and_says_so() -> None:
    # One query of 30 has gold: about e^-1 of the resamples draw no gold query at all.
    gold = np.zeros(30)
    gold[0] = 1
    stat = RatioStatistic("cond", gold, gold, gold, gold)
    r, msgs = _caught(lambda: paired_bootstrap([stat], n_resamples=1000, seed=0)["cond"])
    assert 250 < r.n_undefined_resamples < 480
    assert any("left out" in m for m in msgs)


def test_nan_entries_are_excluded_not_zero() -> None:
    r = bootstrap_mean_difference([1.0, np.nan, 1.0], [0.5, 0.5, np.nan], n_resamples=200, seed=0, warn=False)
    assert r.baseline == 1.0 and r.candidate == 0.5
    assert r.n == 3 and r.n_baseline == 2 and r.n_candidate == 2


def test_invalid_arguments_say_what_to_fix() -> None:
    with pytest.raises(ValueError, match="equal length"):
        mean_statistic("x", [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_mean_difference([1.0, 2.0], [1.0, 2.0], n_resamples=1)
    with pytest.raises(ValueError, match="confidence_level"):
        bootstrap_mean_difference([1.0, 2.0], [1.0, 2.0], confidence_level=95)
    with pytest.raises(TypeError, match="seed"):
        bootstrap_mean_difference([1.0, 2.0], [1.0, 2.0], seed="abc")  # type: ignore[arg-type]


def test_direct_sums_and_counted_sums_give_the_same_replicates() -> None:
    # One statistic alone takes the gather path; with many distinct columns the counts path. Same
    # seed, same draws: the replicates must agree to rounding.
    rng = np.random.default_rng(12)
    x, y = rng.random(300), rng.random(300)
    alone = paired_bootstrap([mean_statistic("s", x, y)], n_resamples=700, seed=4, warn=False)
    extra = [mean_statistic(f"e{i}", rng.random(300), rng.random(300)) for i in range(4)]
    crowd = paired_bootstrap([mean_statistic("s", x, y), *extra], n_resamples=700, seed=4, warn=False)
    np.testing.assert_allclose(alone.delta_replicates[:, 0], crowd.delta_replicates[:, 0], rtol=0, atol=1e-12)
    assert alone["s"].bca.low == pytest.approx(crowd["s"].bca.low, abs=1e-12)


def test_replicates_are_the_documented_draws_whatever_the_block_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # The resamples are `default_rng(seed).integers(0, n, (n_resamples, n))`, drawn block by block:
    # a plain recomputation from one big draw gives the same replicates on the gather path (one
    # statistic) and on the counts path (many), for a block of one resample, the default block and
    # a block of every resample.
    from ragtrace_evaluator.compare import bootstrap

    rng = np.random.default_rng(13)
    n, resamples = 230, 900
    x, y = rng.random(n), rng.random(n)
    gold = (rng.random(n) < 0.6).astype(float)
    idx = np.random.default_rng(21).integers(0, n, (resamples, n))
    expected_mean = y[idx].mean(axis=1) - x[idx].mean(axis=1)
    expected_cond = (y * gold)[idx].sum(axis=1) / gold[idx].sum(axis=1) - x[idx].mean(axis=1)
    extra = [mean_statistic(f"e{i}", rng.random(n), rng.random(n)) for i in range(4)]
    for cells in (1, bootstrap._DRAW_CELLS, resamples * n):
        monkeypatch.setattr(bootstrap, "_DRAW_CELLS", cells)
        alone = paired_bootstrap([mean_statistic("m", x, y)], n_resamples=resamples, seed=21, warn=False)
        cond = RatioStatistic("c", x, np.ones(n), y * gold, gold)
        crowd = paired_bootstrap([mean_statistic("m", x, y), cond, *extra], n_resamples=resamples, seed=21,
                                 warn=False)
        np.testing.assert_allclose(alone.delta_replicates[:, 0], expected_mean, rtol=0, atol=1e-12)
        np.testing.assert_allclose(crowd.delta_replicates[:, 0], expected_mean, rtol=0, atol=1e-12)
        np.testing.assert_allclose(crowd.delta_replicates[:, 1], expected_cond, rtol=0, atol=1e-12)
