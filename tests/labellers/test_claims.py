"""Claim extraction: sentences, clauses, abstentions and claim-less chatter."""

from __future__ import annotations

import pytest

from ragtrace_evaluator.labellers.claims import extract_claims, is_abstention, split_sentences


def test_sentences_respect_abbreviations_initials_and_decimals() -> None:
    text = "Dr. Smith paid $3.5 million in the U.S. in Jan. 2020. J. R. R. Tolkien wrote it. Was it good? Yes!"
    assert split_sentences(text) == [
        "Dr. Smith paid $3.5 million in the U.S. in Jan. 2020.",
        "J. R. R. Tolkien wrote it.", "Was it good?", "Yes!",
    ]


def test_bullets_and_paragraphs_split() -> None:
    assert split_sentences("Facts:\n- Paris is in France\n- Lyon is in France") == [
        "Facts:", "Paris is in France", "Lyon is in France"]


def test_clauses_split_only_when_both_sides_assert_something() -> None:
    claims = extract_claims("The tower was completed in 1889; it was designed by Gustave Eiffel's company, "
                            "and it was the tallest structure in the world until 1930.").claims
    assert claims == ("The tower was completed in 1889", "it was designed by Gustave Eiffel's company",
                      "it was the tallest structure in the world until 1930.")
    # "salt and pepper" is a list, not two clauses
    assert extract_claims("She bought salt and pepper at the market.").claims == (
        "She bought salt and pepper at the market.",)


@pytest.mark.parametrize("answer", [
    "I cannot answer that from the provided context.",
    "I don't know.",
    "The context does not say when the bridge opened.",
    "There is no information about the author in the passages.",
    "Sorry, I'm unable to determine the answer.",
    "The release date is not mentioned in the documents.",
])
def test_abstentions(answer: str) -> None:
    result = extract_claims(answer)
    assert result.kind == "abstention" and result.claims == ()


def test_an_answer_that_mentions_missing_detail_after_answering_is_not_an_abstention() -> None:
    answer = "The bridge opened in 1932. The context does not say who designed it."
    assert not is_abstention(answer)
    assert extract_claims(answer).kind == "claims"


@pytest.mark.parametrize("answer", ["haha", "i agree.", "Hello!", "very true!", "Do you like jazz?",
                                    "It was fun talking to you."])
def test_generic_replies_make_no_claim(answer: str) -> None:
    assert extract_claims(answer).kind == "generic"


def test_empty() -> None:
    assert extract_claims("  ").kind == "empty"


def test_a_hedge_before_a_claim_is_an_answer_not_a_refusal() -> None:
    result = extract_claims("I'm not sure, but the bridge may have opened in 1932 after a long delay.")
    assert result.kind == "claims"
    assert result.claims == ("the bridge may have opened in 1932 after a long delay.",)
    assert extract_claims("Hmm, I don't know anything about her. Is she a good actress?").kind == "abstention"


def test_a_question_that_presupposes_a_fact_claims_it() -> None:
    assert extract_claims("Wow! Did you know that Google Chrome is a freeware web browser?").claims == (
        "Google Chrome is a freeware web browser.",)
    assert extract_claims("Do you know what the tallest tower is?").kind == "generic"


def test_a_list_closed_by_and_is_not_split_and_initials_do_not_end_a_sentence() -> None:
    listed = "The festival invited poets, songwriters, and novelists from over a dozen countries."
    assert extract_claims(listed).claims == (listed,)
    assert extract_claims('Annie Zaleski of "The A.V. Club" deemed it a standout on the album.').claims == (
        'Annie Zaleski of "The A.V. Club" deemed it a standout on the album.',)


def test_lower_cased_text_splits_into_sentences() -> None:
    # chat text without capitals: a closing question must not swallow the statement before it
    text = "he is a great player. did you know that iowa painted the visitors' locker room pink?"
    assert split_sentences(text) == ["he is a great player.",
                                     "did you know that iowa painted the visitors' locker room pink?"]
    assert extract_claims(text).claims == ("he is a great player.", "iowa painted the visitors' locker room pink.")
    # abbreviations and decimals still hold in lower case; text with capitals keeps the capital rule
    assert split_sentences("it cost 3.5 million in the u.s. in jan. 2020. it rained.") == [
        "it cost 3.5 million in the u.s. in jan. 2020.", "it rained."]
    assert split_sentences("See e.g. the Tower. it is tall.") == ["See e.g. the Tower. it is tall."]


@pytest.mark.parametrize("answer", ["Paris.", "In 1889.", "It is a comedy.", "he was a mathematician"])
def test_a_one_word_answer_is_a_claim(answer: str) -> None:
    # RAG answers are often this short: they assert the answer, so their groundedness is defined
    assert extract_claims(answer).claims == (answer,)


@pytest.mark.parametrize("answer", ["I like dogs.", "You're right.", "Absolutely!", "That's true!",
                                    "i believe it was.", "Yes! I am a geologist."])
def test_one_content_word_about_the_speakers_is_chit_chat(answer: str) -> None:
    assert extract_claims(answer).kind == "generic"


def test_filler_sentences_beside_a_claim_are_dropped() -> None:
    assert extract_claims("Yes, that's so cool! Granite forms from slowly cooling magma.").claims == (
        "Granite forms from slowly cooling magma.",)
