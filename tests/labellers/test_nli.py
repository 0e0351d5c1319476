"""The NLI cross-encoder path, against a tiny BERT classifier the test builds and saves itself
(no NLI weights can be downloaded here). Its classifier bias is set so one class always wins,
which makes the label mapping observable."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ragtrace_evaluator.labellers.nli import NLIError, NLIGroundingLabeller, NLIModel, map_labels  # noqa: E402
from ragtrace_evaluator.labellers.protocol import GroundingLabeller, Passage  # noqa: E402


@pytest.fixture(scope="module")
def entail_dir(tmp_path_factory: pytest.TempPathFactory, build_tiny_nli) -> Path:  # type: ignore[no-untyped-def]
    # Unusual order on purpose: the mapping must come from the config, not from an assumed order.
    return build_tiny_nli(tmp_path_factory.mktemp("nli_entail"),
                          {0: "NEUTRAL", 1: "CONTRADICTION", 2: "ENTAILMENT"}, winner=2)


@pytest.fixture(scope="module")
def contra_dir(tmp_path_factory: pytest.TempPathFactory, build_tiny_nli) -> Path:  # type: ignore[no-untyped-def]
    return build_tiny_nli(tmp_path_factory.mktemp("nli_contra"),
                          {0: "entailment", 1: "neutral", 2: "contradiction"}, winner=2)


def test_label_mapping_reads_config(entail_dir: Path, contra_dir: Path) -> None:
    # Class 2 wins in both models; it means entailment in one and contradiction in the other.
    a = NLIModel(entail_dir).predict([("the water boils at 100 degrees .", "the water boils at 100 degrees .")])[0]
    b = NLIModel(contra_dir).predict([("the water boils at 100 degrees .", "the water boils at 100 degrees .")])[0]
    assert a["entailment"] > 0.9 and a["contradiction"] < 0.05
    assert b["contradiction"] > 0.9 and b["entailment"] < 0.05
    assert abs(sum(a.values()) - 1.0) < 1e-5
    assert NLIModel(entail_dir).labels == {"neutral": 0, "contradiction": 1, "entailment": 2}


def test_two_class_and_invalid_label_maps() -> None:
    assert map_labels({0: "entailment", 1: "not_entailment"}) == {"entailment": 0, "not_entailment": 1}
    with pytest.raises(NLIError, match="no entailment class"):
        map_labels({0: "LABEL_0", 1: "LABEL_1"})


def test_batching_matches_one_by_one_and_cache_skips_repeats(entail_dir: Path) -> None:
    pairs = [("the tower is in paris .", "the tower is in lyon ."),
             ("the water boils at 50 degrees .", "the water is not at 100 ."),
             ("a tower .", "the water boils ."),
             ("the tower is in paris .", "the tower is in paris .")]
    batched = NLIModel(entail_dir, batch_size=3)
    together = batched.predict(pairs)
    assert batched.batches_run == 2 and batched.pairs_scored == 4
    for pair, expected in zip(pairs, together, strict=True):
        alone = NLIModel(entail_dir, batch_size=1).predict([pair])[0]
        for name in expected:
            assert alone[name] == pytest.approx(expected[name], abs=1e-5)
    # Repeats (within a call and across calls) come from the cache, not the model.
    again = batched.predict(pairs + pairs[:2])
    assert batched.pairs_scored == 4 and batched.batches_run == 2
    assert again[:4] == together


def test_missing_model_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(NLIError, match="local directory"):
        NLIModel(tmp_path / "nowhere").predict([("a", "b")])


def test_grounding_labeller_over_tiny_models(entail_dir: Path, contra_dir: Path) -> None:
    passages = [Passage("d1", "the tower is in paris ."), Passage("d2", "")]
    entailing = NLIGroundingLabeller(entail_dir)
    assert isinstance(entailing, GroundingLabeller)
    result = entailing.judge("The tower is in Paris. The water boils at 100 degrees.", passages)
    assert result.verdict == "entailed" and result.groundedness == 1.0
    assert [c.passage_id for c in result.claims] == ["d1", "d1"]
    contradicting = NLIGroundingLabeller(contra_dir)
    result = contradicting.judge_many([("The tower is in Lyon.", passages),
                                       ("I cannot answer that from the context.", passages)])
    assert result[0].verdict == "contradicted" and result[0].groundedness == 0.0
    assert result[1].verdict == "abstained" and result[1].groundedness is None
    manifest = contradicting.manifest()
    assert manifest["kind"] == "nli" and manifest["file_hash"] and manifest["labels"]["contradiction"] == 2


def test_inputs_longer_than_the_model_are_truncated_not_fatal(entail_dir: Path) -> None:
    # the tiny model has 64 positions; a long passage and a long claim must still be scored
    model = NLIModel(entail_dir, batch_size=4)
    passage = " ".join(["the water boils at 100 degrees ."] * 40)
    claim = " ".join(["the tower is in paris ."] * 30)
    (probs,) = model.predict([(passage, claim)])
    assert probs["entailment"] > 0.9
