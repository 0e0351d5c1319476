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


# --- names (offline-7); sentences quoted from ../shared/data/grounding-train (file, id) ---------------

def test_sentence_initial_words_and_titles_are_not_names() -> None:
    # factcheckgpt_dev, s3_1585: a claim's (or a bullet's) first word is capitalised by grammar
    assert features("Sinking sand can cause a person or object to sink rapidly.").entities == frozenset()
    assert features("- Sinking sand can cause a person or object to sink rapidly.").entities == frozenset()
    assert features("Additionally, sinking sand can cause a person to sink.").entities == frozenset()
    # factcheckgpt_dev, s3_935: "Dr." is a title; the names are the person's
    assert features("Dr. Marloes Arts has published several papers and articles on topics related to social "
                    "and environmental sustainability.").entities == {"marloes", "arts"}
    # a sentence-initial word followed by another capitalised one starts a name; alone, it does not (bump)
    assert features("Dalian Wanda hope the deal will develop the club in Asia .").entities == {
        "dalian", "wanda", "asia"}
    assert features("Sterling has turned down a new £100,000-a-week contract at the club .").entities == frozenset()
    # all-capitals text carries no name signal (faithdial_audit_test)
    assert features("WELL , THE DOCUMENT THAT I AM LOOKING AT JUST BLANKED OUT ON ME").entities == frozenset()


def test_a_substituted_name_is_still_found_behind_a_title() -> None:
    from ragtrace_evaluator.labellers.lexical import entity_conflict, missing_entities

    # factcheckgpt_dev, s3_935: the evidence names Dr. Marloes Peeters; the claim, Dr. Marloes Arts
    evidence = features("Dr. Marloes Peeters is a lecturer in chemical biology at Manchester Metropolitan University.")
    claim = features("Dr. Marloes Arts is a lecturer in chemical biology at Manchester Metropolitan University.")
    assert missing_entities(claim, evidence) == 1 / 5  # arts; not "dr"
    assert entity_conflict(claim, evidence)


def test_numbers_and_dates_in_the_formats_people_write() -> None:
    from ragtrace_evaluator.labellers.lexical import missing_numbers, number_conflict

    # faithdial_audit_dev, CTRL_ctrl_processed_wow_100 (the evidence) against the same claim in other formats
    evidence = features("Founded on 23 September 1889 by Fusajiro Yamauchi , it originally produced handmade "
                        "hanafuda playing cards .")
    for same in ("1889.09.23", "1889-09-23", "23/09/1889", "September 23, 1889", "23rd of September 1889",
                 "September 1889", "1889"):
        claim = features(f"Founded on {same} by Fusajiro Yamauchi, it produced hanafuda playing cards.")
        assert missing_numbers(claim, evidence) == 0.0, same
        assert not number_conflict(claim, evidence), same
    for other in ("1889.09.24", "24 September 1889", "October 1889", "1890"):
        claim = features(f"Founded on {other} by Fusajiro Yamauchi, it produced hanafuda playing cards.")
        assert missing_numbers(claim, evidence) == 1.0, other
        assert number_conflict(claim, evidence), other
    # wice_nst_train_2 (partially supported; unsupported tokens "on 24 October 1996"): the page says 1996-97
    page = features("Hasan Raza, born this day, made his Test debut at the tender age of 14 years and 227 days "
                    "when he played against Zimbabwe in Faisalabad in 1996-97.")
    claim = features("Raza made his debut for Pakistan against Zimbabwe on 24 October 1996.")
    assert missing_numbers(claim, page) == 1.0
    # the same date's words meet across formats, so word coverage does not punish a reformatting
    assert features("It was founded on 1889.09.23.").stem_set == features(
        "It was founded on 23 September 1889.").stem_set
