"""Lexical checks of the offline labeller: no model needed."""

from __future__ import annotations

from ragtrace_evaluator.labellers.lexical import (
    bigram_coverage,
    features,
    negation_mismatch,
    stem,
)


def test_stems_meet_across_tense_plural_and_silent_e() -> None:
    assert stem("reduce") == stem("reduced")
    assert stem("base") == stem("based")
    assert stem("completed") == stem("complete")
    assert stem("boxes") == "box" and stem("metres") == stem("metre")


def test_negation_is_about_its_head_word() -> None:
    drug = features("The trial found that the drug reduced blood pressure.")
    assert negation_mismatch(features("The drug did not reduce blood pressure."), drug)
    # "no rule against them playing" is not contradicted by another sentence about playing
    games = features("Each team plays 16 games in the regular season.")
    assert not negation_mismatch(features("There is no rule against them playing."), games)


def test_not_only_is_not_a_negation() -> None:
    tour = features("It was not only the band's longest tour, but one of the longest in rock history.")
    assert not tour.negated
    assert not negation_mismatch(features("It was one of the longest tours in rock history."), tour)


def test_bigram_coverage_of_a_short_claim_is_shrunk_toward_word_coverage() -> None:
    evidence = features("The Patriots play their home games in Foxborough, Massachusetts.")
    claim = features("The Patriots are based in Foxborough.")
    # every claim word but "based" is there; its two pairs are both missing: not 0, not 1
    assert 0.0 < bigram_coverage(claim, evidence) < 0.5
    assert bigram_coverage(features("Home games in Foxborough."), evidence) == 1.0



def test_first_person_beyond_a_hedge() -> None:
    from ragtrace_evaluator.labellers.lexical import first_person

    assert first_person("I have been to Paris twice.") and first_person("My favourite album is Thriller.")
    assert first_person("i love crayola so much")
    assert not first_person("I think the tower is tall.") and not first_person("I heard that it opened in 1932.")
    assert not first_person("I found that the bridge opened in 1932.")  # a RAG answer reporting its sources
    assert not first_person("The IMF said so.")
