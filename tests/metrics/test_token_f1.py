"""The evaluator's one token F1 (`ragtrace_evaluator.metrics.token_f1`): SQuAD's normalisation, F1
over multisets, undefined (None) against a reference without words, 0.0 for an answer without any."""

from __future__ import annotations

import re
import string
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragtrace_evaluator.metrics.token_f1 import normalise_answer, token_f1


@pytest.mark.parametrize(("answer", "reference", "expected"), [
    # precision 1/4, recall 1/1; "1,465" and "1465" are one token once punctuation is gone
    ("The firm employs 1,465 staff.", "1465", 2 * 0.25 * 1.0 / 1.25),
    ("Velmora Dynamics was founded in 1931.", "Velmora Dynamics was founded in 1931.", 1.0),
    ("founded 1931 Velmora", "Velmora Dynamics founded 1931", 2 * 1.0 * 0.75 / 1.75),
    ("It was founded in 1942.", "1931", 0.0),
    # repeated tokens count as often as they occur (multisets)
    ("river river river", "river bank", 2 * (1 / 3) * 0.5 / ((1 / 3) + 0.5)),
    # articles are not words of an answer; "of" is
    ("the Chief of Protocol", "Chief of Protocol", 1.0),
    ("Chief", "Chief of Protocol", 0.5),
    ("ambassador", "Chief of Protocol", 0.0),
])
def test_token_f1(answer: str, reference: str, expected: float) -> None:
    assert token_f1(answer, reference) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("reference", ["", "   ", "  ...  ", "The", "a, an; the!"])
def test_a_reference_without_words_is_undefined_not_zero(reference: str) -> None:
    assert token_f1("anything at all", reference) is None
    assert token_f1("", reference) is None


@pytest.mark.parametrize("answer", ["", "  ", "?!", "the a an"])
def test_an_answer_without_words_shares_none_of_the_reference(answer: str) -> None:
    assert token_f1(answer, "Chief of Protocol") == 0.0


def test_normalisation() -> None:
    assert normalise_answer("The  Chief-of-Protocol, (U.S.)!") == ["chiefofprotocol", "us"]
    assert normalise_answer("An apple a day: THE answer") == ["apple", "day", "answer"]
    # articles only as whole words: "theatre" and "ant" keep their letters
    assert normalise_answer("theatre ant anthem") == ["theatre", "ant", "anthem"]
    assert token_f1("CHIEF OF PROTOCOL.", "chief of protocol") == 1.0


def _squad_f1(prediction: str, truth: str) -> float:
    """The SQuAD v1.1 evaluation script's F1, written out plainly (its normalisation, then F1)."""
    def norm(s: str) -> list[str]:
        s = s.lower()
        s = "".join(ch for ch in s if ch not in set(string.punctuation))
        s = re.sub(r"\b(a|an|the)\b", " ", s)
        return " ".join(s.split()).split()

    p, t = norm(prediction), norm(truth)
    same = sum((Counter(p) & Counter(t)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


_WORDS = st.sampled_from(["the", "a", "an", "chief", "of", "protocol", "1,465", "1465", "River", "river.", "x"])


@given(st.lists(_WORDS, max_size=8), st.lists(_WORDS, max_size=8))
def test_agrees_with_the_squad_script_wherever_it_is_defined(answer: list[str], reference: list[str]) -> None:
    a, r = " ".join(answer), " ".join(reference)
    got = token_f1(a, r)
    if not normalise_answer(r):
        assert got is None
    else:
        assert got == pytest.approx(_squad_f1(a, r), abs=1e-12)
        assert 0.0 <= got <= 1.0
