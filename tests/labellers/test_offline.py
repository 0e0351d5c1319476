"""The offline labeller against the real MiniLM: contradictions cosine cannot see, paraphrases,
abstentions, the cache, and speed-relevant batching."""

from __future__ import annotations

import pytest

from ragtrace_evaluator.labellers.protocol import GroundingLabeller, Passage
from ragtrace_evaluator.labellers.registry import make_grounding_labeller

PASSAGES = [
    Passage("water", "Water boils at 100 degrees Celsius at sea level. It freezes at 0 degrees Celsius."),
    Passage("tower", "The Eiffel Tower was completed in March 1889 in Paris. It is 330 metres tall and was "
                     "designed by the engineering company of Gustave Eiffel."),
    Passage("drug", "The trial found that the drug reduced blood pressure in adults over 60."),
]


def verdict_of(offline, answer: str) -> str:  # type: ignore[no-untyped-def]
    return offline.judge(answer, PASSAGES).verdict  # type: ignore[no-any-return]


def test_protocol_and_manifest(offline) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(offline, GroundingLabeller)
    m = offline.manifest()
    assert m["kind"] == "offline" and len(m["file_hash"]) == 64
    # the thresholds are the artefact's, chosen on the training sets (benchmarks/grounding_fit.py)
    assert m["thresholds"] == {k: offline.model.thresholds[k] for k in ("support", "contradiction", "review")}
    assert m["formula_version"] == "offline-11"
    assert m["support_model"]["generic_answers"] == "whole_text"
    # offline-11: contradiction lowers the ranking score by the weight chosen by leave-one-set-out CV
    assert m["support_model"]["contradiction_weight"] == offline.model.contradiction_weight == 0.5
    assert m["training_data"]["fitted_on"].startswith("../shared/data/grounding-train")


@pytest.mark.parametrize("answer", [
    "Water boils at 100 degrees Celsius at sea level.",
    "At sea level, water boils at 100 degrees Celsius.",
    "The drug reduced blood pressure in adults over 60, the trial found.",
    "The Eiffel Tower, which is 330 metres tall, was completed in 1889.",
    "In adults over 60, the drug reduced blood pressure.",
])
def test_supported_and_paraphrased_claims_are_entailed(offline, answer: str) -> None:  # type: ignore[no-untyped-def]
    result = offline.judge(answer, PASSAGES)
    assert result.verdict == "entailed", result
    assert result.groundedness == 1.0


@pytest.mark.parametrize(("answer", "kind"), [
    ("Water boils at 50 degrees Celsius at sea level.", "number"),
    ("The Eiffel Tower is 450 metres tall.", "number"),
    ("The Eiffel Tower was completed in 1901 in Paris.", "date"),
    ("The Eiffel Tower was completed in June 1889 in Paris.", "date"),
    ("The Eiffel Tower was completed in March 1889 in Lyon.", "name"),
    ("The trial found that the drug did not reduce blood pressure in adults over 60.", "negation"),
])
def test_contradictions_are_caught(offline, answer: str, kind: str) -> None:  # type: ignore[no-untyped-def]
    result = offline.judge(answer, PASSAGES)
    assert result.verdict == "contradicted", (kind, result)
    assert result.groundedness == 0.0
    claim = result.claims[0]
    assert claim.contradiction >= 0.5 and claim.entailment < 0.5
    assert claim.passage_id in {"water", "tower", "drug"}


def test_cosine_alone_would_accept_the_contradicted_number(embedder) -> None:  # type: ignore[no-untyped-def]
    # Why the lexical checks exist: MiniLM rates the false claim as near-identical.
    a, b = embedder.embed(["Water boils at 50 degrees Celsius at sea level.",
                           "Water boils at 100 degrees Celsius at sea level."])
    assert float(a @ b) > 0.85


def test_unsupported_claim_is_neutral_and_counts_against_groundedness(offline) -> None:  # type: ignore[no-untyped-def]
    result = offline.judge("Water boils at 100 degrees Celsius at sea level. The tower was painted blue by "
                           "Pablo Picasso during the war.", PASSAGES)
    assert [c.verdict for c in result.claims] == ["entailed", "neutral"]
    assert result.verdict == "neutral" and result.groundedness == 0.5
    assert result.score is not None and result.score < 0.5


@pytest.mark.parametrize(("answer", "kind", "verdict"), [
    ("I cannot answer that from the provided context.", "abstention", "abstained"),
    ("The passages do not mention the boiling point of mercury.", "abstention", "abstained"),
    ("haha, I agree!", "generic", "neutral"),
])
def test_no_claim_answers_have_undefined_groundedness(offline, answer, kind, verdict) -> None:  # type: ignore[no-untyped-def]
    result = offline.judge(answer, PASSAGES)
    assert result.kind == kind and result.verdict == verdict
    assert result.groundedness is None and result.claims == ()
    assert result.abstained is (kind == "abstention")
    # an abstention has nothing to rank; a generic answer's whole text is judged to rank it
    assert (result.score is None) is (kind == "abstention")


# faithdial_audit (grounding-train), GPT2_gpt2_processed_wow_89, labelled faithful: a question the
# claim extractor finds claim-less, though its first half restates the knowledge snippet
ODETTE = "It was about Odette and her story , what about you ?"
SWAN_LAKE = Passage("k", "The scenario , initially in two acts , was fashioned from Russian folk tales and tells the "
                         "story of Odette , a princess turned into a swan by an evil sorcerer 's curse .")


def test_only_a_generic_answer_carries_a_text_score() -> None:
    from ragtrace_evaluator.labellers.protocol import no_claim_result

    assert no_claim_result("generic", 0.4).score == 0.4 and no_claim_result("generic").score is None
    with pytest.raises(ValueError, match="generic answers only"):
        no_claim_result("abstention", 0.4)


def test_a_generic_answer_is_ranked_by_its_whole_text_but_makes_no_claim(offline) -> None:  # type: ignore[no-untyped-def]
    own, elsewhere = offline.judge_many([(ODETTE, [SWAN_LAKE]), (ODETTE, PASSAGES)])
    for result in (own, elsewhere):
        assert result.kind == "generic" and result.verdict == "neutral"
        assert result.groundedness is None and result.claims == () and result.text_score is not None
    # what it says is in its own snippet and in none of the unrelated passages
    assert own.score is not None and elsewhere.score is not None and own.score > elsewhere.score + 0.2


def test_cache_hits_on_repeated_passages(offline, embedder) -> None:  # type: ignore[no-untyped-def]
    offline.judge("The Eiffel Tower is in Paris.", PASSAGES)
    misses = embedder.misses
    hits = embedder.hits
    results = offline.judge_many([("The Eiffel Tower is in Paris.", PASSAGES)] * 5)
    assert embedder.misses == misses  # nothing new embedded
    assert embedder.hits > hits
    assert len({r for r in results}) == 1


def test_judge_many_equals_judge(offline) -> None:  # type: ignore[no-untyped-def]
    answers = ["Water freezes at 0 degrees Celsius.", "I don't know.", "The tower is 330 metres tall."]
    assert offline.judge_many([(a, PASSAGES) for a in answers]) == [offline.judge(a, PASSAGES) for a in answers]


def test_no_passages_means_nothing_is_entailed(offline) -> None:  # type: ignore[no-untyped-def]
    result = offline.judge("Water boils at 100 degrees Celsius.", [])
    assert result.verdict == "neutral" and result.groundedness == 0.0


def test_factory_names() -> None:
    assert make_grounding_labeller("offline").manifest.__self__.kind == "offline"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="unknown grounding labeller"):
        make_grounding_labeller("magic")


def test_persistent_cache_round_trip(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    from ragtrace_evaluator.labellers.embedding import SentenceEmbedder

    first = SentenceEmbedder(cache_dir=tmp_path)
    first._model, first._tokenizer, first._torch = embedder._model, embedder._tokenizer, embedder._torch
    vec = first.embed(["a sentence to persist"])
    first.save()
    second = SentenceEmbedder(cache_dir=tmp_path)
    again = second.embed(["a sentence to persist"])  # from disk: the model never loads
    assert second._model is None and second.hits == 1
    assert (again == vec).all()


def test_onnx_backend_matches_torch(embedder) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    from ragtrace_evaluator.labellers.embedding import SentenceEmbedder
    from ragtrace_evaluator.labellers.onnx_backend import available

    if not available():
        pytest.skip("onnx/onnxruntime not installed: the embedder runs on torch (covered by the other tests)")
    texts = ["A padded short one.", "Water boils at 100 degrees Celsius at sea level, as every cook knows."]
    got = embedder.embed(texts)
    assert embedder.backend_note.startswith("onnx"), embedder.backend_note
    reference = SentenceEmbedder(backend="torch").embed(texts)
    assert np.abs(got - reference).max() < 1e-4


def test_cache_is_bounded_least_recently_used_first(embedder) -> None:  # type: ignore[no-untyped-def]
    from ragtrace_evaluator.labellers.embedding import SentenceEmbedder

    small = SentenceEmbedder(max_entries=2)
    small._model, small._tokenizer, small._torch = embedder._model, embedder._tokenizer, embedder._torch
    small._onnx = embedder._onnx
    assert small.embed(["one", "two", "three"]).shape == (3, 384)  # a call above the bound still returns all
    assert len(small._cache) == 2
    small.embed(["two"])  # "two" becomes most recent
    small.embed(["four"])
    assert small.misses == 4 and small.hits == 1
    small.embed(["two"])
    assert small.hits == 2  # kept: "three" was the least recently used


def test_a_name_stated_elsewhere_in_the_passage_is_no_substitution(offline) -> None:  # type: ignore[no-untyped-def]
    # The claim joins two sentences of one page: the aligned sentence lacks "Gustave" and names
    # "Paris", but the page states both, so nothing is contradicted.
    page = Passage("page", "The Eiffel Tower was completed in March 1889 in Paris. Tickets are sold online. "
                           "The lifts were renovated in 1983. Visitors climb to the second floor by stairs. "
                           "The engineering company of Gustave Eiffel designed it.")
    result = offline.judge("The Eiffel Tower, designed by the company of Gustave Eiffel, was completed in 1889.",
                           [page])
    assert result.verdict != "contradicted", result
    assert result.claims[0].contradiction == 0.0


def test_unseen_and_persona_features(offline) -> None:  # type: ignore[no-untyped-def]
    from ragtrace_evaluator.labellers.offline import FEATURES

    page = [Passage("p", "The Eiffel Tower was completed in March 1889 in Paris. It is 330 metres tall.")]

    def feats(claim: str):  # type: ignore[no-untyped-def]
        ((candidates,),) = offline.featurise_many([([claim], page, claim)])
        return candidates[0]

    exact = feats("The Eiffel Tower was completed in 1889.")
    assert exact.unseen == 0.0 and exact.persona == 0.0 and exact.missing_numbers == 0.0
    # one of five content stems (eiffel, tower, complet, 1889, napoleon) is in no passage
    napoleon = feats("The Eiffel Tower was completed in 1889 by Napoleon.")
    assert abs(napoleon.unseen - 1 / 5) < 1e-9 and napoleon.missing_count == 1.0 and napoleon.missing_run == 1.0
    assert napoleon.claim_overlap == 4 / 5  # the token-overlap baseline's own figure is a feature
    # every word is in the evidence, but the passage says nothing about the speaker
    assert feats("I have been to Paris.").persona == 1.0
    assert feats("I think the Eiffel Tower was completed in 1889.").persona == 0.0  # a hedge, not a persona
    assert len(exact.vector()) == len(FEATURES)


def test_a_one_word_sentence_beside_a_supported_claim_is_judged(offline) -> None:  # type: ignore[no-untyped-def]
    result = offline.judge("Water boils at 100 degrees Celsius at sea level. It is poisonous.", PASSAGES)
    assert [c.claim for c in result.claims] == ["Water boils at 100 degrees Celsius at sea level.", "It is poisonous."]
    assert [c.verdict for c in result.claims] == ["entailed", "neutral"]
    assert result.verdict == "neutral"


# --- offline-7 rules; passages quoted from ../shared/data/grounding-train (file, id) -------------------

# fib_dev, xsum_30531079 (the evidence of a summary; first lines and one later line of the article)
LETTER = Passage("letter", "The two-page note, addressed to Mrs Ellis and dated 19 August 1945, finds him dealing "
                 "with the subject of joy.\nIt was found by its owner in a copy of Lewis's book, A Problem of Pain, "
                 "bought years before.\nAuctioneer Chris Albury said \"keen interest worldwide\" had boosted the "
                 "guide price from £1,500.\nDominic Winter Auctioneers in South Cerney said the letter had been "
                 "bought by a private buyer from California.\n\"My private table is one second of joy is worth 12 "
                 "hours of pleasure.\"")


@pytest.mark.parametrize("claim", [
    # the page states 12 (hours) and 19 August 1945, but not in the sentences these claims align to
    "Auctioneer Chris Albury said keen interest worldwide had boosted the guide price from £12.",
    "The two-page note, addressed to Mrs Ellis, is dated 12 August 1945.",
])
def test_numbers_are_checked_against_the_aligned_sentences_not_the_whole_page(offline, claim: str) -> None:  # type: ignore[no-untyped-def]
    result = offline.judge(claim, [LETTER])
    assert result.verdict == "contradicted", result
    assert offline.judge(claim.replace("£12", "£1,500").replace("12 August", "19 August"),
                         [LETTER]).verdict == "entailed"


def test_a_date_in_another_format_is_the_same_date(offline) -> None:  # type: ignore[no-untyped-def]
    note = "The two-page note, addressed to Mrs Ellis, is dated"
    assert offline.judge(f"{note} 1945.08.19.", [LETTER]).verdict == "entailed"
    assert offline.judge(f"{note} 1945.08.18.", [LETTER]).verdict != "entailed"


def test_a_claim_fused_from_two_unrelated_passages_is_not_supported(offline) -> None:  # type: ignore[no-untyped-def]
    # faithdial_audit_dev, CTRL_ctrl_processed_wow_100 and factcheckgpt_dev, s3_935: two passages that
    # share no name. Each part of the fused claim is stated by one of them; the whole by neither.
    nintendo = Passage("nintendo", "Founded on 23 September 1889 by Fusajiro Yamauchi , it originally produced "
                                   "handmade hanafuda playing cards .")
    peeters = Passage("peeters", "Dr. Marloes Peeters is a lecturer in chemical biology at Manchester Metropolitan "
                                 "University. Her research focuses on developing new bio-sensing platforms for the "
                                 "detection of biomolecules.")
    fused = ("Fusajiro Yamauchi, a lecturer in chemical biology at Manchester Metropolitan University, founded it "
             "on 23 September 1889.")
    assert offline.judge(fused, [nintendo, peeters]).verdict != "entailed"
    parts = offline.judge("Founded on 23 September 1889 by Fusajiro Yamauchi, it originally produced handmade "
                          "hanafuda playing cards. Marloes Peeters is a lecturer in chemical biology at Manchester "
                          "Metropolitan University.", [nintendo, peeters])
    assert [c.verdict for c in parts.claims] == ["entailed", "entailed"]
    assert [c.passage_id for c in parts.claims] == ["nintendo", "peeters"]


def test_an_artefact_without_generic_answers_leaves_them_unscored(offline) -> None:  # type: ignore[no-untyped-def]
    import json
    from importlib import resources

    from ragtrace_evaluator.labellers.offline import OfflineGroundingLabeller
    from ragtrace_evaluator.labellers.support_model import DEFAULT_ARTEFACT, parse_artefact

    spec = json.loads(resources.files("ragtrace_evaluator.labellers").joinpath("models", DEFAULT_ARTEFACT).read_bytes())
    del spec["generic_answers"]
    older = OfflineGroundingLabeller(embedder=offline.embedder, model=parse_artefact(json.dumps(spec).encode()))
    result = older.judge(ODETTE, [SWAN_LAKE])
    assert result.kind == "generic" and result.score is None and result.text_score is None


@pytest.mark.parametrize("weight", [0.0, 0.5, 1.0])
def test_the_artefacts_contradiction_weight_sets_how_much_a_conflict_lowers_the_score(offline, weight) -> None:  # type: ignore[no-untyped-def]
    import json
    from importlib import resources

    from ragtrace_evaluator.labellers.offline import OfflineGroundingLabeller
    from ragtrace_evaluator.labellers.support_model import DEFAULT_ARTEFACT, parse_artefact

    spec = json.loads(resources.files("ragtrace_evaluator.labellers").joinpath("models", DEFAULT_ARTEFACT).read_bytes())
    model = parse_artefact(json.dumps(spec | {"contradiction_weight": weight}).encode())
    labeller = OfflineGroundingLabeller(embedder=offline.embedder, model=model)
    result = labeller.judge("The Eiffel Tower is 450 metres tall.", PASSAGES)
    claim = result.claims[0]
    # the verdict is the rule's whatever the weight; only the ranking score moves
    assert result.verdict == "contradicted" and claim.contradiction >= 0.5 and claim.contradiction_weight == weight
    assert result.score == pytest.approx(claim.support * (1 - weight * claim.contradiction))
    assert labeller.manifest()["support_model"]["contradiction_weight"] == weight
