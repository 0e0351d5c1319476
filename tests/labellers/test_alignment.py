"""Token-level alignment features from the real MiniLM token states, and the token-state cache."""

from __future__ import annotations

import json

import numpy as np

from ragtrace_evaluator.labellers.alignment import ALIGN_FEATURES, LOW, alignment_features, word_scores
from ragtrace_evaluator.labellers.embedding import SentenceEmbedder
from ragtrace_evaluator.labellers.protocol import Passage

# BUMP (grounding-train, bump_t1_71): the reference summary sentence is supported by the article;
# the human edit that swaps the singer's name for another Turkish singer's is not.
ARTICLE = ("(CNN)Kayahan, one of Turkey's best-loved singers and songwriters, died of cancer Friday at the age of 66. "
           "He had performed most recently in Istanbul on Valentine's Day.")
SUPPORTED = "Kayahan wrote some of Turkey's best-loved pop songs ."
SWAPPED = "Tarkan wrote some of Turkey's best-loved pop songs ."
PARAPHRASE = "One of Turkey's best-loved songwriters, Kayahan, died of cancer at 66."


def _flat(word: str) -> float:
    return 1.0


def test_one_unsupported_name_scores_lower_than_the_supported_sentence(embedder) -> None:  # type: ignore[no-untyped-def]
    ev, sup, swap, para = embedder.token_states([ARTICLE, SUPPORTED, SWAPPED, PARAPHRASE])
    f_sup = alignment_features(SUPPORTED, sup, [ev], _flat)
    f_swap = alignment_features(SWAPPED, swap, [ev], _flat)
    f_para = alignment_features(PARAPHRASE, para, [ev], _flat)
    assert set(f_sup) == set(ALIGN_FEATURES)
    # the swapped name is the claim's weakest word and falls below the "unsupported" level
    scores = dict(zip(swap.words, word_scores(swap, [ev]), strict=True))
    assert min(scores, key=lambda w: scores[w]) == "Tarkan" and scores["Tarkan"] < LOW
    for supported in (f_sup, f_para):
        assert f_swap["align_name_min"] < supported["align_name_min"] - 0.2
        assert f_swap["align_name_low"] > supported["align_name_low"] == 0.0
        assert f_swap["align_min"] < supported["align_min"]


def test_no_evidence_means_nothing_is_supported(embedder) -> None:  # type: ignore[no-untyped-def]
    (claim,) = embedder.token_states([SUPPORTED])
    f = alignment_features(SUPPORTED, claim, [], _flat)
    assert f["align_mean"] == 0.0 and f["align_low"] == 1.0 and f["align_name_low"] == 1.0


def test_token_states_share_the_pooled_forward_pass_and_persist(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fresh = SentenceEmbedder(cache_dir=tmp_path, backend="torch")
    states = fresh.token_states([ARTICLE, SUPPORTED])
    # the same forward pass filled the pooled cache: embed() is a cache hit and equals a plain encoding
    misses = fresh.misses
    pooled = fresh.embed([ARTICLE, SUPPORTED])
    assert fresh.misses == misses
    plain = SentenceEmbedder(backend="torch").embed([ARTICLE, SUPPORTED])
    assert np.abs(pooled - plain).max() < 1e-5
    assert states[1].words[:3] == ("Kayahan", "wrote", "some")
    assert states[1].states.dtype == np.float16
    assert np.allclose(np.linalg.norm(states[1].states.astype(np.float32), axis=1), 1.0, atol=1e-2)
    fresh.save_tokens()
    reloaded = SentenceEmbedder(cache_dir=tmp_path, backend="torch")
    again = reloaded.token_states([SUPPORTED])[0]
    assert reloaded._model is None  # served from the file, no model loaded
    assert again.words == states[1].words and np.array_equal(again.states, states[1].states)
    assert np.array_equal(again.word_of, states[1].word_of)


def test_the_labeller_fills_alignment_from_the_claims_local_evidence(offline) -> None:  # type: ignore[no-untyped-def]
    # the packaged support model reads the alignment columns, so featurisation computes them against
    # the claim's own top sentences (ClaimFeatures.evidence)
    assert offline.uses_alignment
    page = [Passage("article", ARTICLE)]
    ((sup,), (swap,)) = offline.featurise_many([([SUPPORTED], page, SUPPORTED), ([SWAPPED], page, SWAPPED)])
    assert sup[0].evidence and swap[0].evidence == sup[0].evidence
    assert swap[0].align_name_min < sup[0].align_name_min - 0.2 and swap[0].align_name_low > 0.0
    assert offline.score_claims([SWAPPED], page)[0].support < offline.score_claims([SUPPORTED], page)[0].support


def test_a_model_without_alignment_columns_needs_no_token_states(embedder) -> None:  # type: ignore[no-untyped-def]
    # an artefact fitted on fewer columns (offline-8's 21) is read by name; nothing computes what it does not use
    from ragtrace_evaluator.labellers.offline import FEATURES, NLI_FEATURES, OfflineGroundingLabeller
    from ragtrace_evaluator.labellers.support_model import parse_artefact

    # neither the alignment columns nor the entailment ones: this test must not need a built-in model either
    base = [f for f in FEATURES if f not in ALIGN_FEATURES and f not in NLI_FEATURES]
    spec = {"format": 1, "formula_version": "test", "features": base,
            "model": {"kind": "logistic", "mean": [0.0] * len(base), "scale": [1.0] * len(base),
                      "coef": [1.0 if f == "coverage" else 0.0 for f in base], "intercept": 0.0},
            "calibration": {"a": 1.0, "b": 0.0}, "thresholds": {"support": 0.5}, "idf": {"default": 1.0, "stems": {}}}
    lab = OfflineGroundingLabeller(embedder=embedder, model=parse_artefact(json.dumps(spec).encode()))
    assert not lab.uses_alignment
    ((f,),) = lab.featurise_many([([SWAPPED], [Passage("a", ARTICLE)], SWAPPED)])
    assert (f[0].align_name_min, f[0].align_low) == (1.0, 0.0)  # left neutral
    assert lab.score_claims([SUPPORTED], [Passage("a", ARTICLE)])[0].support > 0.5
