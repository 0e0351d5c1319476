"""Agreement statistics against hand-computed examples (the arithmetic is in the comments)."""

from __future__ import annotations

import math
import random

import pytest

from ragtrace_review.agreement import calibration, cohen_kappa, fleiss_kappa, majority, wilson


def test_cohen_kappa_hand_computed() -> None:
    # 10 items, table AA=4 AB=2 BA=1 BB=3: po = 0.7; rows A .6 B .4, columns A .5 B .5;
    # pe = .6*.5 + .4*.5 = .5; kappa = (.7 - .5) / (1 - .5) = 0.4.
    # Var (Fleiss, Cohen & Everitt 1969), 1 - kappa = .6:
    #   diag: .4*(1 - 1.1*.6)^2 + .3*(1 - .9*.6)^2 = .04624 + .06348 = .10972
    #   off:  .36 * (.2*(.5 + .4)^2 + .1*(.5 + .6)^2) = .36 * (.162 + .121) = .10188
    #   minus (.4 - .5*.6)^2 = .01;  var = (.10972 + .10188 - .01) / (10 * .25) = .08064
    a = ["A"] * 6 + ["B"] * 4
    b = ["A"] * 4 + ["B"] * 2 + ["A"] + ["B"] * 3
    r = cohen_kappa(a, b)
    assert r.kappa == pytest.approx(0.4)
    assert r.observed == pytest.approx(0.7) and r.expected == pytest.approx(0.5)
    assert r.se == pytest.approx(math.sqrt(0.08064))
    assert r.ci is not None
    assert r.ci.low == pytest.approx(0.4 - 1.959964 * math.sqrt(0.08064), abs=1e-5)
    assert r.ci.high == pytest.approx(min(1.0, 0.4 + 1.959964 * math.sqrt(0.08064)), abs=1e-5)
    assert r.n == 10


def test_cohen_se_matches_a_bootstrap_recomputation() -> None:
    # The asymptotic SE should agree with a plain bootstrap of the same data at n = 200.
    rng = random.Random(7)
    a, b = [], []
    for _ in range(200):
        x = rng.choice("ABC")
        a.append(x)
        b.append(x if rng.random() < 0.6 else rng.choice("ABC"))
    se = cohen_kappa(a, b).se
    boots = []
    for _ in range(1500):
        idx = [rng.randrange(200) for _ in range(200)]
        k = cohen_kappa([a[i] for i in idx], [b[i] for i in idx]).kappa
        assert k is not None
        boots.append(k)
    mean = sum(boots) / len(boots)
    boot_se = math.sqrt(sum((k - mean) ** 2 for k in boots) / (len(boots) - 1))
    assert se == pytest.approx(boot_se, rel=0.12)


def test_cohen_perfect_and_undefined() -> None:
    assert cohen_kappa(["x", "y"], ["x", "y"]).kappa == pytest.approx(1.0)
    undefined = cohen_kappa(["x", "x"], ["x", "x"])
    assert undefined.kappa is None and "single category" in undefined.reason
    assert cohen_kappa([], []).kappa is None
    with pytest.raises(ValueError, match="same items"):
        cohen_kappa(["x"], ["x", "y"])


def test_fleiss_kappa_hand_computed() -> None:
    # 4 items x 3 raters. Per-item agreement P_i = (sum n_ij^2 - m) / (m (m - 1)):
    # XXX -> 1, XXY -> (4 + 1 - 3)/6 = 1/3, YYY -> 1, XYY -> 1/3; Po = (8/3)/4 = 2/3.
    # p_X = 6/12 = p_Y, Pe = .5; kappa = (2/3 - 1/2) / (1/2) = 1/3.
    ratings = [["X", "X", "X"], ["X", "X", "Y"], ["Y", "Y", "Y"], ["X", "Y", "Y"]]
    r = fleiss_kappa(ratings, seed=1)
    assert r.kappa == pytest.approx(1 / 3)
    assert r.observed == pytest.approx(2 / 3) and r.expected == pytest.approx(0.5)
    assert r.raters_per_item == 3 and r.n == 4
    assert r.ci is not None and r.ci.low <= r.kappa <= r.ci.high
    # seeded: the same interval every run
    again = fleiss_kappa(ratings, seed=1)
    assert again.ci == r.ci


def test_fleiss_second_example_three_categories() -> None:
    # 3 items x 4 raters: [a,a,a,a] P=1; [a,a,b,c] (4+1+1-4)/12 = 1/6; [b,b,c,c] (4+4-4)/12 = 1/3.
    # Po = (1 + 1/6 + 1/3)/3 = .5; p_a = 6/12, p_b = 3/12, p_c = 3/12; Pe = .25 + .0625 + .0625 = .375
    # kappa = (.5 - .375)/(.625) = 0.2
    r = fleiss_kappa([list("aaaa"), list("aabc"), list("bbcc")])
    assert r.kappa == pytest.approx(0.2)


def test_fleiss_rejects_ragged_input() -> None:
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([["a", "b"], ["a", "b", "c"]])
    assert fleiss_kappa([]).kappa is None
    assert fleiss_kappa([["a", "a"], ["a", "a"]]).kappa is None


def test_wilson_interval_hand_computed() -> None:
    # 8/10, z = 1.96: centre = (.8 + .19208)/1.38416 = .716737; half = 1.96*sqrt(.016 + .009604)/1.38416
    p = wilson(8, 10)
    assert p.value == pytest.approx(0.8)
    assert p.ci is not None
    assert p.ci.low == pytest.approx(0.490156, abs=1e-4) and p.ci.high == pytest.approx(0.943318, abs=1e-4)
    zero = wilson(0, 0)
    assert zero.value is None and zero.ci is None and zero.n == 0
    assert wilson(0, 5).ci is not None and wilson(0, 5).ci.low == 0.0  # type: ignore[union-attr]


def test_majority_ties_are_none() -> None:
    assert majority(["a", "a", "b"]) == "a"
    assert majority(["a", "b"]) is None
    assert majority([]) is None


def test_calibration_confusion_and_per_mode() -> None:
    pairs = [
        ("fabrication", ["fabrication", "fabrication"]),
        ("fabrication", ["ok", "ok"]),
        ("ok", ["ok", "fabrication"]),  # tie: no majority, left out
        ("ok", ["ok", "ok"]),
        ("retrieval_gap", ["retrieval_gap", "retrieval_gap"]),
    ]
    c = calibration(pairs, ["retrieval_gap", "rank_inversion", "under_use", "fabrication", "ok"])
    assert c.n == 4 and c.no_majority == 1
    assert c.confusion["fabrication"]["fabrication"] == 1
    assert c.confusion["fabrication"]["ok"] == 1
    assert c.confusion["ok"]["ok"] == 1
    assert c.accuracy.k == 3 and c.accuracy.n == 4
    by = {s.mode: s for s in c.per_mode}
    assert (by["fabrication"].precision.k, by["fabrication"].precision.n) == (1, 2)
    assert (by["fabrication"].recall.k, by["fabrication"].recall.n) == (1, 1)
    assert (by["ok"].precision.k, by["ok"].precision.n) == (1, 1)
    assert (by["ok"].recall.k, by["ok"].recall.n) == (1, 2)
    # a mode nobody called and nobody chose is undefined, not 0
    assert by["under_use"].precision.value is None and by["under_use"].recall.n == 0
