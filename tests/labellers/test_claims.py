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


def test_a_detached_mark_before_a_lower_case_word_ends_a_sentence() -> None:
    # Tokenised dialogue turns (grounding-train, faithdial_audit, from Wizard of Wikipedia) write the mark
    # apart from its word and go on in lower case; the closing question used to swallow the statement,
    # so the turn was called generic. faithdial_audit_dev.jsonl, CTRL_ctrl_processed_wow_118:
    turn = ("they are a genus of predominantly spring perennial plants in the Amaryllidaceae ( amaryllis ) "
            "family . what is your favorite plant ?")
    assert split_sentences(turn) == [
        "they are a genus of predominantly spring perennial plants in the Amaryllidaceae ( amaryllis ) family .",
        "what is your favorite plant ?"]
    assert extract_claims(turn).claims == (split_sentences(turn)[0],)
    # faithdial_audit_test.jsonl, GPT2_gpt2_processed_wow_94: after " ! "
    turn = "Oh ... you are right , yes I 'm currently watching NFL on Fox ! lol Do you watch the NFL on Fox ?"
    assert extract_claims(turn).claims == ("Oh ... you are right , yes I 'm currently watching NFL on Fox !",)
    # faithdial_audit_dev.jsonl, doha_processed_wow_17: two statements, two claims
    assert extract_claims("yeah and they can get old very quickly . husky was actually word referring to Arctic "
                          "people in general").claims == (
        "yeah and they can get old very quickly .", "husky was actually word referring to Arctic people in general")
    # faithdial_audit_dev.jsonl, doha_processed_topical_55: after " ? " as well
    assert extract_claims("Do you like football ? it's a team sport, i hate it").claims == (
        "it's a team sport, i hate it",)


def test_a_detached_mark_keeps_abbreviations_ellipses_and_attached_marks_whole() -> None:
    # FIB's CNN/DM text (grounding-train fib_dev.jsonl, cnn_dm_a396e698..._pos41): the tokeniser detached
    # the last dot of "p.m."; that ends no sentence
    assert split_sentences("the outage began around 10 p.m. paris time ( 4 p.m . et ) , and network teams were "
                           "still working to restore service") == [
        "the outage began around 10 p.m. paris time ( 4 p.m . et ) , and network teams were still working to "
        "restore service"]
    # bump_dev.jsonl, bump_t2_1783_ref: an ellipsis written apart goes on with the sentence
    assert split_sentences("But the World Cup . . . special dispensation . . . if Clermont continue the way "
                           "they are") == ["But the World Cup . . . special dispensation . . . if Clermont "
                                           "continue the way they are"]
    # an attached mark before a lower-case word still ends nothing in text with capitals
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


# --- offline-7 claim rules; the sentences are quoted from ../shared/data/grounding-train (file, id) ----

def test_meta_frames_are_stripped_and_the_content_is_the_claim() -> None:
    # summedits_dev, spotify_podcast_4_og (label 1): a summary that talks about "the document"
    answer = ("The document begins with an introduction to Anchor, a free podcast creation tool that allows users "
              "to record and edit on their phone or computer and distribute on various platforms. The second half "
              "of the document discusses a news story about Bob Ross's paintings being featured in a museum "
              "exhibition, as well as a Twitter question about first memories of Bob Ross.")
    assert extract_claims(answer).claims == (
        "Anchor, a free podcast creation tool that allows users to record and edit on their phone or computer and "
        "distribute on various platforms.",
        "A news story about Bob Ross's paintings being featured in a museum exhibition, as well as a Twitter "
        "question about first memories of Bob Ross.")
    # summedits_dev, spotify_podcast_2_og: "This document explains X" claims X
    assert extract_claims("This document explains the meanings of different prepositions of movement such as "
                          "into, out of, onto, off, up and down, including their opposite meanings.").claims == (
        "The meanings of different prepositions of movement such as into, out of, onto, off, up and down, "
        "including their opposite meanings.",)


@pytest.mark.parametrize("sentence", [
    # meta sentences as they occur in the unseen evaluation sets' answers
    "Here's a concise summary of the passage:",
    "The passage discusses several topics.",
    "I hope this helps!",
    "Let me know if you have any other questions.",
])
def test_meta_and_filler_sentences_make_no_claim(sentence: str) -> None:
    assert extract_claims(sentence).kind == "generic"
    # beside a claim, they are dropped and do not set the answer's score
    assert extract_claims(f"{sentence} The Eiffel Tower is 330 metres tall.").claims == (
        "The Eiffel Tower is 330 metres tall.",)


def test_a_closing_greeting_makes_no_claim() -> None:
    # faithdial_audit_test, CTRL_ctrl_processed_topicalchat_116: "It 's" used to leave "s" as a content word
    assert extract_claims("Yes .   It 's been a good chat .   I hope you have a good day !").kind == "generic"
    # faithdial_audit_dev, GPT2_gpt2_processed_cmu_48: the greeting goes, the rest is judged
    assert extract_claims("Good, thanks for asking!  I hope you will watch Batman Begins.").claims == (
        "I hope you will watch Batman Begins.",)


def test_list_markers_make_no_claim() -> None:
    # fib_test, xsum_36453669_neg2027: a bare "1." opens a list the generator never finished
    answer = ("The race is the third of the four Grand Tours, after the Tour de France and Vuelta a Espana.\n"
              "The Tour de France is the world's biggest cycling event, with more than 100 stages and 1.5 million "
              "spectators.\n1. Chris")
    claims = extract_claims(answer).claims
    assert claims[-1] == "Chris" and not any(c.strip() in {"1.", "1"} for c in claims)
    # a list's first marker left at the end of its lead-in, and the markers split off as sentences
    assert split_sentences("The key points are: 1. The race starts with a 4km time trial. 2. It lasts eight "
                           "days.") == ["The key points are:", "The race starts with a 4km time trial.",
                                        "It lasts eight days."]
    assert extract_claims("The key points are: 1. The race starts with a 4km time trial.").claims == (
        "The race starts with a 4km time trial.",)


def test_opening_connectives_are_not_part_of_the_claim() -> None:
    # the fib_dev sentence (CNN/DM b48858ca...) behind an opening word the evidence cannot contain
    claim = "on monday, the group voted at its annual meeting to adopt a ban as an official policy."
    assert extract_claims(f"Additionally, {claim}").claims == (claim.capitalize(),)
    assert extract_claims(f"In summary, according to the passage, {claim}").claims == (claim.capitalize(),)
