"""Gates: TOML files, k-SE and absolute gates, and an honest family-wise false-alarm probability."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ndtr

from ragtrace_cli.commands.compare import compare_main
from ragtrace_evaluator.compare.bootstrap import mean_statistic, paired_bootstrap
from ragtrace_evaluator.compare.gates import GateError, GateSpec, default_gates, evaluate_gates, load_gates

from .story import story_records, write_jsonl


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("gates")
    base, cand = story_records()
    return write_jsonl(d / "v1.jsonl", base), write_jsonl(d / "v2.jsonl", cand)


def _run(files: tuple[Path, Path], tmp_path: Path, toml: str) -> tuple[int, dict]:
    gates = tmp_path / "gates.toml"
    gates.write_text(toml)
    out = tmp_path / "r.json"
    code = compare_main(["--baseline", str(files[0]), "--candidate", str(files[1]), "--gates", str(gates),
                         "--json", str(out), "--resamples", "1000"])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_floor_and_ceiling_gates_from_toml(files: tuple[Path, Path], tmp_path: Path) -> None:
    code, rep = _run(files, tmp_path, """
[[gate]]
metric = "pass_rate"
floor = 0.75
[[gate]]
metric = "below_threshold"
ceiling = 0.30
[[gate]]
metric = "p_pass_without_gold"   # a decomposition key, found without its prefix
k = 2
""")
    assert code == 0
    gates = {g["metric"]: g for g in rep["gates"]}
    assert set(gates) == {"pass_rate", "below_threshold", "decomposition.p_pass_without_gold"}
    assert gates["pass_rate"]["kind"] == "floor" and gates["pass_rate"]["observed"] == pytest.approx(0.7875)
    assert gates["below_threshold"]["direction"] == "lower" and not gates["below_threshold"]["tripped"]


def test_a_floor_the_candidate_misses_trips(files: tuple[Path, Path], tmp_path: Path) -> None:
    code, rep = _run(files, tmp_path, '[[gate]]\nmetric = "gold_in_context"\nfloor = 0.75\n')
    assert code == 1
    g = rep["gates"][0]
    assert g["tripped"] and g["threshold"] == 0.75 and g["observed"] == pytest.approx(0.66)
    # The baseline (0.81) clears the floor by ~3 SE: under no change a false alarm is rare (about
    # 0.1%, so a simulation of 1000 resamples may count none at all, which depends on the seed).
    assert g["false_alarm"] is not None and 0 <= g["false_alarm"] < 0.05


def test_include_defaults_keeps_the_stage_gates(files: tuple[Path, Path], tmp_path: Path) -> None:
    code, rep = _run(files, tmp_path, 'k = 3.0\ninclude_defaults = true\n[[gate]]\nmetric = "pass_rate"\nfloor = 0.5\n')
    metrics = [g["metric"] for g in rep["gates"]]
    assert metrics[0] == "pass_rate" and "recall_5" in metrics and code == 1
    assert all(g["k"] == 3.0 for g in rep["gates"] if g["kind"] == "se")


@pytest.mark.parametrize("toml, message", [
    ('[[gate]]\nmetric = "nope"\n', "no such metric"),
    ('[[gate]]\nmetric = "pass_rate"\nk = 2\nfloor = 0.5\n', "one of k, floor or ceiling"),
    ('[[gate]]\nmetric = "pass_rate"\nk = -1\n', "positive number"),
    ('[[gate]]\nmetric = "pass_rate"\nbogus = 1\n', "unknown keys"),
    ("[[gate]\n", "not valid TOML"),
    ("threshold = 3\n", "unknown top-level keys"),
    ('[[gate]]\nmetric = "abstention_rate"\nk = 2\n', "no better direction"),
    # a quoted "false" is a string, which Python reads as true: it must be refused, not obeyed backwards
    ('[[gate]]\nmetric = "pass_rate"\nfail_on_undefined = "false"\n',
     "gate #1 (pass_rate): fail_on_undefined must be true or false (unquoted), got 'false'"),
    ('include_defaults = "false"\n[[gate]]\nmetric = "pass_rate"\n',
     "include_defaults must be true or false (unquoted), got 'false'"),
    ('[[gate]]\nmetric = "pass_rate"\nboundary = 5\n', "gate #1 (pass_rate): boundary must be a string, got 5"),
])
def test_bad_gate_files_are_usage_errors(files: tuple[Path, Path], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str], toml: str, message: str) -> None:
    code, _ = _run(files, tmp_path, toml)
    assert code == 2
    assert message in capsys.readouterr().err


def test_default_gates_pick_one_metric_per_stage() -> None:
    specs = default_gates({"recall_10", "recall_5", "ndcg_cut_10", "groundedness", "pass_rate",
                           "decomposition.p_pass_given_gold", "gold_in_context"})
    assert [s.metric for s in specs] == ["recall_5", "ndcg_cut_10", "groundedness",
                                         "decomposition.p_pass_given_gold", "pass_rate"]
    assert [s.metric for s in default_gates({"gold_in_context", "pass_rate"})] == ["gold_in_context", "pass_rate"]
    with pytest.raises(GateError):
        GateSpec(metric="x", kind="floor")
    with pytest.raises(GateError):
        load_gates("/nonexistent/gates.toml")


def test_stated_family_wise_false_alarm_matches_the_observed_rate_under_no_change() -> None:
    """Under a true null (both releases drawn from one distribution), the share of datasets on which
    any gate trips must match the probability the gate set states, within simulation error."""
    rng = np.random.default_rng(99)
    n, datasets, k = 200, 300, 2.0
    tripped, stated, independent = 0, [], []
    for _ in range(datasets):
        # Three correlated per-query quantities (like recall, nDCG and pass), same law in A and B.
        z = rng.normal(size=(2, n))
        shared = rng.normal(size=n)
        a = [(shared + z[0] > 0.2).astype(float), np.clip(0.6 + 0.2 * shared + 0.1 * z[0], 0, 1),
             (rng.random(n) < 0.75).astype(float)]
        shared_b = rng.normal(size=n)
        b = [(shared_b + z[1] > 0.2).astype(float), np.clip(0.6 + 0.2 * shared_b + 0.1 * z[1], 0, 1),
             (rng.random(n) < 0.75).astype(float)]
        stats = [mean_statistic(f"m{j}", a[j], b[j]) for j in range(3)]
        run = paired_bootstrap(stats, n_resamples=600, seed=rng, warn=False)
        gs = evaluate_gates([GateSpec(metric=f"m{j}", k=k, direction="higher") for j in range(3)], run)
        tripped += any(g.tripped for g in gs.results)
        stated.append(gs.family_false_alarm)
        independent.append(gs.independent_false_alarm)
    observed = tripped / datasets
    mean_stated = float(np.mean(stated))
    # Binomial simulation error of `observed`: sqrt(p(1-p)/300) ≈ 0.013 at p ≈ 0.06 (3σ ≈ 0.04).
    assert abs(observed - mean_stated) < 0.04, (observed, mean_stated)
    assert independent[0] == pytest.approx(1 - (1 - ndtr(-k)) ** 3)
    # Correlated gates (m0 and m1 share a factor) alarm together: the family rate is below the
    # independent-gates figure.
    assert mean_stated < float(np.mean(independent))


def test_a_certain_drop_with_zero_standard_error_trips() -> None:
    # Every query passed before and fails now: SE is 0, and the drop is not "undefined", it is certain.
    run = paired_bootstrap([mean_statistic("pass_rate", np.ones(10), np.zeros(10)),
                            mean_statistic("same", np.ones(10), np.ones(10))], n_resamples=200, seed=0, warn=False)
    gs = evaluate_gates([GateSpec(metric="pass_rate"), GateSpec(metric="same", direction="higher")], run)
    drop, same = gs.results
    assert drop.status == "tripped" and drop.se == 0.0 and "SE 0" in drop.reason
    assert same.status == "ok" and not same.tripped
    assert gs.family_false_alarm == 0.0
