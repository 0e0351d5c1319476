"""The packaged support-model artefact: it loads offline in a fresh process, its hash is in the
labeller manifest, and the numpy evaluation of its trees is the model (checked against a plain
recomputation)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from importlib import resources

import numpy as np
import pytest

from ragtrace_evaluator.labellers.alignment import ALIGN_FEATURES
from ragtrace_evaluator.labellers.offline import FEATURES, FORMULA_VERSION, NLI_FEATURES
from ragtrace_evaluator.labellers.support_model import (
    DEFAULT_ARTEFACT,
    ArtefactError,
    load_artefact,
    parse_artefact,
)


def _packaged_bytes() -> bytes:
    return resources.files("ragtrace_evaluator.labellers").joinpath("models", DEFAULT_ARTEFACT).read_bytes()


def test_the_artefact_is_small_and_describes_its_training_data() -> None:
    data = _packaged_bytes()
    assert len(data) <= 25_000_000
    model = load_artefact()
    assert model.sha256 == hashlib.sha256(data).hexdigest()
    # offline-11 was fitted before the entailment model's features existed: it reads all the others
    assert model.features == tuple(f for f in FEATURES if f not in NLI_FEATURES)
    assert model.formula_version == FORMULA_VERSION
    # offline-9: the leave-one-set-out comparison chose the model with the token-alignment columns;
    # offline-10: the same model, judging a generic answer's whole text to rank it;
    assert "token alignment (all 6)" in model.cv["chosen"] and set(ALIGN_FEATURES) <= set(model.features)
    assert "generic answers judged as one claim" in model.cv["chosen"] and model.judge_generic
    # offline-11: the contradiction multiplier's strength, chosen by the same comparison
    assert model.cv["chosen"].endswith("contradiction weight 0.5") and model.contradiction_weight == 0.5
    assert "grounding-train" in model.training_data["fitted_on"]
    assert set(model.training_data["sets"]) >= {"factcheckgpt", "faithdial_audit", "summedits"}
    assert 0.0 < model.thresholds["support"] < 1.0 and 0.5 <= model.thresholds["review"] < 1.0


def test_the_manifest_carries_the_artefact_hash(offline) -> None:  # type: ignore[no-untyped-def]
    m = offline.manifest()
    assert m["file_hash"] == hashlib.sha256(_packaged_bytes()).hexdigest()
    assert m["support_model"]["file"] == DEFAULT_ARTEFACT and m["formula_version"] == FORMULA_VERSION
    assert m["training_data"]["rebuild"] == ".venv/bin/python benchmarks/grounding_fit.py"
    assert m["embedder_file_sha256"] and len(m["embedder_file_sha256"]) == 64


def test_the_shipped_artefact_loads_offline_in_a_fresh_process() -> None:
    # A new interpreter with the hub switched off: the artefact comes from the installed package and
    # the labeller judges a real sentence (faithdial_audit_dev, CTRL_ctrl_processed_wow_100) with it.
    code = (
        "import json\n"
        "from ragtrace_evaluator.labellers.offline import OfflineGroundingLabeller\n"
        "from ragtrace_evaluator.labellers.protocol import Passage\n"
        "p = Passage('n', 'Founded on 23 September 1889 by Fusajiro Yamauchi , it originally produced handmade "
        "hanafuda playing cards .')\n"
        "labeller = OfflineGroundingLabeller()\n"
        "ok = labeller.judge('It was founded by Fusajiro Yamauchi in 1889.', [p])\n"
        "bad = labeller.judge('It was founded by Fusajiro Yamauchi in 1901.', [p])\n"
        "print(json.dumps([labeller.manifest()['file_hash'], ok.verdict, bad.verdict]))\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240,
                         check=True)
    file_hash, ok, bad = json.loads(out.stdout.strip().splitlines()[-1])
    assert file_hash == hashlib.sha256(_packaged_bytes()).hexdigest()
    assert ok == "entailed" and bad != "entailed"


def test_trees_are_evaluated_as_written() -> None:
    # Two stumps on columns 0 and 1 and a base score: a plain recomputation of the sum.
    spec = {"format": 1, "formula_version": "x", "features": ["a", "b"],
            "model": {"kind": "trees", "base": -0.5, "learning_rate": 1.0, "trees": [
                {"feature": [0, 0, 0], "threshold": [0.3, 0.0, 0.0], "left": [1, -1, -1], "right": [2, -1, -1],
                 "value": [0.0, -1.0, 2.0]},
                {"feature": [1, 0, 0], "threshold": [5.0, 0.0, 0.0], "left": [1, -1, -1], "right": [2, -1, -1],
                 "value": [0.0, 0.25, -0.75]}]},
            "calibration": {"a": 2.0, "b": 0.1}, "thresholds": {"support": 0.5}, "idf": {"default": 3.0, "stems": {}}}
    model = parse_artefact(json.dumps(spec).encode())
    x = np.array([[0.1, 1.0], [0.3, 5.0], [0.9, 7.0], [0.5, 5.0001]])
    expected = np.array([-0.5 - 1.0 + 0.25, -0.5 - 1.0 + 0.25, -0.5 + 2.0 - 0.75, -0.5 + 2.0 - 0.75])
    assert np.allclose(model.raw(x), expected)
    assert np.allclose(model.predict(x), 1 / (1 + np.exp(-(2.0 * expected + 0.1))))
    assert model.idf_of("unknown") == 3.0


def test_a_bad_artefact_says_what_to_do(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ArtefactError, match="grounding_fit"):
        parse_artefact(json.dumps({"format": 99}).encode())
    with pytest.raises(ArtefactError, match="not JSON"):
        parse_artefact(b"{")
    with pytest.raises(ArtefactError, match="cannot read"):
        load_artefact(tmp_path / "missing.json")
    spec = json.loads(_packaged_bytes())
    with pytest.raises(ArtefactError, match="generic_answers 'always'"):
        parse_artefact(json.dumps(spec | {"generic_answers": "always"}).encode())
    # an artefact from before generic answers were judged (offline-9) still loads and leaves them unscored
    del spec["generic_answers"]
    assert parse_artefact(json.dumps(spec).encode()).judge_generic is False
    for bad in (1.5, -0.1, "half", True):
        with pytest.raises(ArtefactError, match=r"contradiction_weight .* expected a number in \[0, 1\]"):
            parse_artefact(json.dumps(spec | {"contradiction_weight": bad}).encode())
    # an artefact from before the weight was fitted (offline-10) multiplied by the full contradiction
    spec.pop("contradiction_weight", None)
    assert parse_artefact(json.dumps(spec).encode()).contradiction_weight == 1.0


def test_exported_trees_score_as_the_fitted_model() -> None:
    # The fitting code's export (benchmarks/grounding_fit.py) of a real scikit-learn boosted model,
    # read back by the labeller's numpy evaluator: the same raw scores, monotone constraints included.
    from benchmarks.grounding_fit import MONOTONE, Candidate, _fit_one, _raw, export_model

    rng = np.random.default_rng(0)
    x = rng.random((600, len(FEATURES)))
    cols = ("coverage", "cosine", "missing_names", "claim_length")
    signal = 2 * x[:, FEATURES.index("coverage")] - x[:, FEATURES.index("missing_names")]
    y = (signal + 0.3 * rng.standard_normal(600) > 0.5).astype(int)
    cand = Candidate("test", "trees", cols, (("max_iter", 20), ("max_depth", 3), ("min_samples_leaf", 10)))
    fitted = _fit_one(cand, x, y, np.ones(len(y)))
    spec = {"format": 1, "formula_version": FORMULA_VERSION, "features": list(FEATURES),
            "model": export_model(fitted, cand), "calibration": {"a": 1.0, "b": 0.0},
            "thresholds": {"support": 0.5}, "idf": {"default": 1.0, "stems": {}}}
    model = parse_artefact(json.dumps(spec).encode())
    probe = rng.random((200, len(FEATURES)))
    assert np.allclose(model.raw(probe), _raw(fitted, probe), atol=1e-6)
    assert MONOTONE["coverage"] == 1 and MONOTONE["missing_names"] == -1
    # more coverage never lowers the score (its constraint survives the export)
    up = probe.copy()
    up[:, FEATURES.index("coverage")] = np.minimum(1.0, up[:, FEATURES.index("coverage")] + 0.3)
    assert (model.raw(up) >= model.raw(probe) - 1e-9).all()


def test_the_packaged_dev_measurement_is_of_the_packaged_artefact() -> None:
    # `ragtrace audit` prints it as the precision at the review threshold; a refitted artefact must be
    # re-measured (benchmarks/grounding_accuracy.py --write-measured), or this fails
    from ragtrace_evaluator.labellers.support_model import measured_record

    model = load_artefact()
    record = measured_record(model, model.thresholds["review"])
    assert "sets" in record, record
    assert set(record["sets"]) == {"BEGIN dev, fully vs not fully attributable",
                                   "WiCE claim dev, supported vs partially/not", "WiCE claim dev, supported vs not"}
    for m in record["sets"].values():
        assert 0 < m["coverage"] <= 1 and 0 <= m["accuracy"] <= 1 and m["n"] <= m["n_items"]
    assert measured_record(model, 0.123) == {"note": "measured for another artefact or threshold: rerun "
                                                     "benchmarks/grounding_accuracy.py --write-measured"}
