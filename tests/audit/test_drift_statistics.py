"""Drift's statistics: Newcombe's hybrid score interval (unpaired) against the worked examples of
Newcombe (1998, Table II, method 10), and the family-wise false-alarm rate the verdicts are held to,
checked by simulation under no change."""

from __future__ import annotations

import numpy as np
import pytest

from ragtrace_evaluator.audit.drift import BOUNDARIES, FAMILY_ALPHA, compare_modes, difference, newcombe_interval

# (k1, n1, k2, n2) -> the published interval of p1 - p2 (95 %), to 4 decimals
NEWCOMBE_TABLE_II = {
    (56, 70, 48, 80): (0.0524, 0.3339),
    (9, 10, 3, 10): (0.1705, 0.8090),
    (6, 7, 2, 7): (0.0582, 0.8062),
    (5, 56, 0, 29): (-0.0381, 0.1926),
    (0, 10, 0, 20): (-0.1611, 0.2775),
    (0, 10, 0, 10): (-0.2775, 0.2775),
    (10, 10, 0, 20): (0.6791, 1.0000),
    (10, 10, 0, 10): (0.6075, 1.0000),
}


@pytest.mark.parametrize(("counts", "published"), sorted(NEWCOMBE_TABLE_II.items()))
def test_newcombe_interval_matches_the_published_examples(counts: tuple[int, int, int, int],
                                                          published: tuple[float, float]) -> None:
    got = newcombe_interval(*counts)
    assert got is not None
    assert got == pytest.approx(published, abs=5e-5)


def test_undefined_sides_and_bad_input() -> None:
    assert newcombe_interval(0, 0, 3, 10) is None and newcombe_interval(3, 10, 0, 0) is None
    d = difference("fabrication", 0, 0, 3, 10, 0.95)
    assert d.verdict is None and d.delta is None  # undefined is None, never 0
    with pytest.raises(ValueError, match="k <= n"):
        newcombe_interval(11, 10, 1, 10)
    with pytest.raises(ValueError, match="level"):
        newcombe_interval(1, 10, 1, 10, level=1.0)
    with pytest.raises(ValueError, match="family_alpha"):
        compare_modes([(1, 10)] * 4, [(1, 10)] * 4, family_alpha=0)


def test_verdict_direction_follows_the_failure_mode() -> None:
    worse = difference("fabrication", 300, 1000, 100, 1000, 0.9875)
    better = difference("fabrication", 100, 1000, 300, 1000, 0.9875)
    flat = difference("fabrication", 105, 1000, 100, 1000, 0.9875)
    assert (worse.verdict, better.verdict, flat.verdict) == (1, -1, 0)
    assert worse.lower is not None and worse.lower > 0 and worse.delta == pytest.approx(0.2)


def test_family_wise_false_alarm_rate_under_no_change_is_within_its_bound() -> None:
    """Both windows drawn from the same mode mix: the share of comparisons in which any mode is called
    changed stays under alpha (Bonferroni), within the simulation's own error."""
    rng = np.random.default_rng(34)
    p = [0.08, 0.12, 0.05, 0.10, 0.65]  # the four modes and ok
    trials, alarms = 2000, 0
    for _ in range(trials):
        a, b = rng.multinomial(400, p), rng.multinomial(600, p)
        fam = compare_modes([(int(a[i]), 400) for i in range(4)], [(int(b[i]), 600) for i in range(4)])
        alarms += any(d.verdict != 0 for d in fam.differences)
    share = alarms / trials
    se = (FAMILY_ALPHA * (1 - FAMILY_ALPHA) / trials) ** 0.5
    assert share <= FAMILY_ALPHA + 3 * se, share
    fam = compare_modes([(1, 10)] * 4, None)
    assert all(d.verdict is None for d in fam.differences) and len(fam.differences) == len(BOUNDARIES) == 4
    summary = fam.summary_json()
    assert summary["family_false_alarm"] == FAMILY_ALPHA and summary["level"] == pytest.approx(1 - FAMILY_ALPHA / 4)
    assert summary["independent_false_alarm"] == pytest.approx(1 - (1 - FAMILY_ALPHA / 4) ** 4)
    assert "Bonferroni" in summary["method"]
