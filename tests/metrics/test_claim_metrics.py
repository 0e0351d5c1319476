"""RAGChecker peer test: our claim-level metrics from its entailment matrices equal its expected values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrace_evaluator.metrics.claims import ClaimMatrixError, claim_metrics, mean_claim_metrics

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "ragchecker"
NAMES = ["precision", "recall", "f1", "claim_recall", "context_precision", "context_utilization",
         "noise_sensitivity_in_relevant", "noise_sensitivity_in_irrelevant", "hallucination",
         "self_knowledge", "faithfulness"]


def _load() -> dict[str, object]:
    if not DATA.is_dir():
        pytest.skip(f"reference data not present at {DATA} (only in the development checkout)")
    return json.loads((DATA / "checking_outputs.json").read_text())  # type: ignore[no-any-return]


def _compute(example: dict[str, object]):  # type: ignore[no-untyped-def]
    return claim_metrics(example["answer2response"], example["response2answer"],  # type: ignore[arg-type]
                         example["retrieved2response"], example["retrieved2answer"])  # type: ignore[arg-type]


@pytest.mark.shared_data
def test_each_example_equals_ragchecker() -> None:
    data = _load()
    results = data["results"]
    assert len(results) == 2  # type: ignore[arg-type]
    for example in results:  # type: ignore[attr-defined]
        got = _compute(example).as_dict()
        for name in NAMES:
            assert got[name] == pytest.approx(example["metrics"][name], abs=1e-12), (example["query_id"], name)


@pytest.mark.shared_data
def test_overall_equals_ragchecker() -> None:
    data = _load()
    means = mean_claim_metrics([_compute(e) for e in data["results"]])  # type: ignore[attr-defined]
    overall = data["metrics"]
    flat = {**overall["overall"], **overall["retriever"], **overall["generator"]}  # type: ignore[index]
    for name, expected in flat.items():
        value, n = means[name]
        assert n == 2
        assert round(value * 100, 1) == expected, name  # RAGChecker reports percent, 1 decimal


def test_undefined_not_zero() -> None:
    m = claim_metrics([], ["Entailment"], [], [["Neutral"]])
    assert m.precision is None and m.faithfulness is None and m.hallucination is None
    assert m.recall == 1.0 and m.f1 is None
    assert m.context_utilization is None  # no gold claim covered by the context


def test_inconsistent_matrices_raise() -> None:
    with pytest.raises(ClaimMatrixError, match="one row per response claim"):
        claim_metrics(["Entailment"], [], [], [])
    with pytest.raises(ClaimMatrixError, match="unknown verdict"):
        claim_metrics(["Yes"], [], [["Neutral"]], [])
