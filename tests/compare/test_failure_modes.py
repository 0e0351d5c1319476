"""The failure-mode mix in `ragtrace compare`: 400 queries whose retrieval gaps rise while fabrications
fall by the same amount, so the end-to-end pass rate does not move at all. The mode table, its
intervals (against a plain recomputation on the same resamples) and the transition counts are exact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from ragtrace_cli.commands.compare import compare_main
from ragtrace_evaluator.compare.comparison import compare
from ragtrace_evaluator.compare.records import label_set, parse_record
from ragtrace_store import FAILURE_MODES

from .story import write_jsonl

# (baseline mode, candidate mode): number of queries. ok keeps 202 queries in both releases and only
# ok passes, so e2e is flat; 36 fabrications become retrieval gaps and 10 gaps become fabrications.
TRANSITIONS = {
    ("ok", "ok"): 190, ("ok", "fabrication"): 12, ("fabrication", "ok"): 12,
    ("fabrication", "retrieval_gap"): 36, ("fabrication", "fabrication"): 30,
    ("retrieval_gap", "retrieval_gap"): 30, ("retrieval_gap", "fabrication"): 10,
    ("rank_inversion", "rank_inversion"): 40, ("rank_inversion", "under_use"): 6,
    ("under_use", "under_use"): 28, ("under_use", "rank_inversion"): 6,
}
BASELINE_COUNTS = {"retrieval_gap": 40, "rank_inversion": 46, "under_use": 34, "fabrication": 78, "ok": 202}
CANDIDATE_COUNTS = {"retrieval_gap": 66, "rank_inversion": 46, "under_use": 34, "fabrication": 52, "ok": 202}
RESAMPLES = 2000
SEED = 11


def _record(qid: str, release: str, mode: str) -> dict[str, Any]:
    """A whole label record of the contract, consistent with its mode."""
    pool = mode != "retrieval_gap"
    ctx = mode in ("under_use", "fabrication", "ok")
    verdict = {"under_use": "abstained", "fabrication": "contradicted", "ok": "entailed"}.get(mode)
    passed = mode == "ok"
    return {
        "trace_id": f"{release}-{qid}", "query_id": qid, "release": release, "service": "modes-rag",
        "manifest_id": "modes-manifest", "failure_mode": mode, "gold_in_pool": pool, "gold_in_context": ctx,
        "retrieval": {"gold_in_pool": pool, "gold_in_context": ctx, "n_gold": 1, "gold_source": "qrels"},
        "ranking": {"ok": ctx if pool else None, "best_gold_rank": 0 if ctx else None, "best_distractor_rank": None},
        "generation": None if verdict is None else {
            "verdict": verdict, "groundedness": None if verdict == "abstained" else (1.0 if passed else 0.1),
            "abstained": verdict == "abstained", "refusal_justified": False if verdict == "abstained" else None,
            "claims": []},
        "metrics": {"recall_5": 1.0 if ctx else 0.0},
        "pass": passed, "score": 0.9 if passed else (None if mode == "under_use" else 0.2), "confidence": 0.9,
    }


def mode_story() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pairs = [pair for pair, n in TRANSITIONS.items() for _ in range(n)]
    order = np.random.default_rng(2).permutation(len(pairs))  # shuffled, so no test relies on file order
    base, cand = [], []
    for i, j in enumerate(order):
        qid = f"m{i:03d}"
        base.append(_record(qid, "r1", pairs[j][0]))
        cand.append(_record(qid, "r2", pairs[j][1]))
    return base, cand


@pytest.fixture(scope="module")
def story() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return mode_story()


@pytest.fixture(scope="module")
def report(story: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> dict[str, Any]:
    base, cand = story
    a = label_set("r1", "file", [parse_record(r) for r in base])
    b = label_set("r2", "file", [parse_record(r) for r in cand])
    return compare(a, b, n_resamples=RESAMPLES, seed=SEED, warn=False).to_json()


def _plain_intervals(a: np.ndarray, b: np.ndarray, *, seed: int, n_resamples: int,
                     level: float = 0.95) -> tuple[list[float], list[float]]:
    """Percentile and BCa intervals of mean(b) − mean(a), recomputed the long way: the same draws
    (one numpy stream of indices), an explicit leave-one-out jackknife, Efron's formulas."""
    n = len(a)
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    deltas = b[idx].mean(axis=1) - a[idx].mean(axis=1)
    est = b.mean() - a.mean()
    alpha = (1 - level) / 2
    pct = [float(x) for x in np.percentile(deltas, [100 * alpha, 100 * (1 - alpha)])]
    jack = np.array([np.delete(b, i).mean() - np.delete(a, i).mean() for i in range(n)])
    dev = jack.mean() - jack
    acc = (dev ** 3).sum() / (6.0 * ((dev ** 2).sum()) ** 1.5)
    z0 = ndtri(((deltas < est).sum() + (deltas <= est).sum()) / (2.0 * n_resamples))
    ends = [ndtr(z0 + (z0 + z) / (1 - acc * (z0 + z))) for z in (ndtri(alpha), ndtri(1 - alpha))]
    bca = [float(x) for x in np.percentile(deltas, [100 * ends[0], 100 * ends[1]])]
    return pct, bca


def test_mode_rates_and_deltas_are_exact_while_e2e_is_flat(report: dict[str, Any]) -> None:
    rows = {m["mode"]: m for m in report["failure_modes"]}
    assert [m["mode"] for m in report["failure_modes"]] == [*FAILURE_MODES, "abstained"]
    for mode in FAILURE_MODES:
        m = rows[mode]
        assert m["n"] == 400
        assert (m["baseline_count"], m["candidate_count"]) == (BASELINE_COUNTS[mode], CANDIDATE_COUNTS[mode])
        assert m["baseline"] == pytest.approx(BASELINE_COUNTS[mode] / 400, abs=1e-15)
        assert m["candidate"] == pytest.approx(CANDIDATE_COUNTS[mode] / 400, abs=1e-15)
        assert m["delta"] == pytest.approx((CANDIDATE_COUNTS[mode] - BASELINE_COUNTS[mode]) / 400, abs=1e-15)
    # opposite moves of 26 queries each; the ok rate and e2e do not move at all
    assert rows["retrieval_gap"]["delta"] == pytest.approx(0.065)
    assert rows["fabrication"]["delta"] == pytest.approx(-0.065)
    metrics = {m["metric"]: m for m in report["metrics"]}
    assert metrics["pass_rate"]["delta"] == 0.0 and rows["ok"]["delta"] == 0.0
    # both significant, in opposite directions, while the pass rate's interval straddles 0
    assert rows["retrieval_gap"]["ci95"]["bca"][0] > 0 and rows["fabrication"]["ci95"]["bca"][1] < 0
    lo, hi = metrics["pass_rate"]["ci"]["bca"]
    assert lo < 0 < hi
    # abstained sits beside the partition: the under_use abstentions, of the queries with an answer
    assert rows["abstained"]["baseline_count"] == 34 and rows["abstained"]["n_baseline"] == 400 - 40 - 46


def test_mode_intervals_match_a_plain_recomputation(story: tuple[list[dict[str, Any]], list[dict[str, Any]]],
                                                    report: dict[str, Any]) -> None:
    base, cand = story
    for m in report["failure_modes"]:
        if m["mode"] == "abstained":
            continue
        a = np.array([float(r["failure_mode"] == m["mode"]) for r in base])
        b = np.array([float(r["failure_mode"] == m["mode"]) for r in cand])
        pct, bca = _plain_intervals(a, b, seed=SEED, n_resamples=RESAMPLES)
        if m["mode"] == "ok":
            # 12 ok→fabrication swap with 12 fabrication→ok: the delta still varies by resample
            assert m["ci95"]["percentile"][0] < 0 < m["ci95"]["percentile"][1]
        assert m["ci95"]["percentile"] == pytest.approx(pct, abs=1e-12), m["mode"]
        assert m["ci95"]["bca"] == pytest.approx(bca, abs=1e-12), m["mode"]
        assert m["ci95"]["level"] == 0.95


def test_transition_matrix_counts_and_ids_are_exact(story: tuple[list[dict[str, Any]], list[dict[str, Any]]],
                                                    report: dict[str, Any]) -> None:
    tr = report["failure_mode_transitions"]
    assert tr["modes"] == list(FAILURE_MODES) and tr["n"] == 400 and tr["n_unknown"] == 0
    for i, a in enumerate(FAILURE_MODES):
        for j, b in enumerate(FAILURE_MODES):
            assert tr["counts"][i][j] == TRANSITIONS.get((a, b), 0), (a, b)
    changed = {(t["baseline"], t["candidate"]): t for t in tr["changed"]}
    assert set(changed) == {pair for pair in TRANSITIONS if pair[0] != pair[1]}
    assert tr["n_changed"] == sum(n for (a, b), n in TRANSITIONS.items() if a != b) == 82
    assert [t["n"] for t in tr["changed"]] == sorted((t["n"] for t in tr["changed"]), reverse=True)
    base, cand = story
    by_id = {r["query_id"]: (r["failure_mode"], c["failure_mode"]) for r, c in zip(base, cand, strict=True)}
    for pair, t in changed.items():
        assert sorted(t["query_ids"]) == sorted(q for q, modes in by_id.items() if modes == pair)
        assert t["candidate_trace_ids"] == [f"r2-{q}" for q in t["query_ids"]]
        assert t["baseline_trace_ids"] == [f"r1-{q}" for q in t["query_ids"]]


def test_the_mode_table_comes_first_in_the_terminal_and_in_the_json(
        story: tuple[list[dict[str, Any]], list[dict[str, Any]]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = story
    a, b = write_jsonl(tmp_path / "r1.jsonl", base), write_jsonl(tmp_path / "r2.jsonl", cand)
    out = tmp_path / "report.json"
    code = compare_main(["--baseline", str(a), "--candidate", str(b), "--json", str(out), "--resamples",
                         str(RESAMPLES), "--seed", str(SEED), "--gates", str(_no_gates(tmp_path))])
    assert code == 0
    text = capsys.readouterr().out
    assert text.index("Failure modes") < text.index("Stage metrics") < text.index("Decomposition")
    assert "retrieval_gap (40 → 66)" in text and "fabrication (78 → 52)" in text
    assert "Mode transitions" in text and "82 of 400 queries changed mode" in text
    assert "fabrication → retrieval_gap: 36" in text
    data = json.loads(out.read_text())
    assert {"mode", "baseline", "candidate", "delta", "ci95", "n"} <= set(data["failure_modes"][0])
    rows = {m["mode"]: m for m in data["failure_modes"]}
    assert rows["fabrication"]["direction"] == "lower" and rows["ok"]["direction"] == "higher"


def _no_gates(folder: Path) -> Path:
    path = folder / "gates.toml"
    path.write_text('[[gate]]\nmetric = "pass_rate"\nk = 2.5\n', encoding="utf-8")
    return path


def test_a_gate_on_a_mode_rate_trips_the_right_way(story: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    from ragtrace_evaluator.compare.gates import GateSpec

    base, cand = story
    a = label_set("r1", "file", [parse_record(r) for r in base])
    b = label_set("r2", "file", [parse_record(r) for r in cand])
    c = compare(a, b, n_resamples=RESAMPLES, seed=SEED, warn=False,
                gates=[GateSpec("mode:retrieval_gap"), GateSpec("mode:fabrication")])
    status = {g.metric: g.tripped for g in c.gates.results}
    assert status == {"mode:retrieval_gap": True, "mode:fabrication": False}


def test_records_without_modes_get_no_mode_table() -> None:
    recs = [{"query_id": f"h{i}", "gold_in_context": bool(i % 2), "pass": bool(i % 3)} for i in range(30)]
    a = label_set("h1", "file", [parse_record(r) for r in recs])
    b = label_set("h2", "file", [parse_record(r) for r in recs])
    rep = compare(a, b, n_resamples=200, seed=0, warn=False).to_json()
    assert rep["failure_modes"] == [] and rep["failure_mode_transitions"] is None
    assert any("no record carries a failure mode" in w for w in rep["warnings"])


def test_incomplete_traces_are_their_own_row_and_level() -> None:
    base, cand = mode_story()
    base, cand = base[:40], cand[:40]
    cand[0] = {**cand[0], "incomplete": True}
    a = label_set("r1", "file", [parse_record(r) for r in base])
    b = label_set("r2", "file", [parse_record(r) for r in cand])
    rep = compare(a, b, n_resamples=200, seed=0, warn=False).to_json()
    rows = {m["mode"]: m for m in rep["failure_modes"]}
    assert rows["incomplete"]["baseline_count"] == 0 and rows["incomplete"]["candidate_count"] == 1
    tr = rep["failure_mode_transitions"]
    assert tr["modes"][-1] == "incomplete" and sum(row[-1] for row in tr["counts"]) == 1
    assert tr["counts"][tr["modes"].index(base[0]["failure_mode"])][-1] == 1
