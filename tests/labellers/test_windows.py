"""Evidence windows (windows.py): the premises an entailment model reads for one claim."""

from __future__ import annotations

from ragtrace_evaluator.labellers.windows import SHORT_PASSAGE_WORDS, claim_windows


def test_windows_read_a_short_passage_whole_and_a_long_one_around_the_best_sentence() -> None:
    short = "Ada was born in 1815. She wrote the first program. She died in 1852."
    sents = ["Ada was born in 1815.", "She wrote the first program.", "She died in 1852."]
    w = claim_windows(sents, [0, 0, 0], [1, 0, 2], [short])
    assert w is not None and w.aligned == 0
    assert w.texts == (short, "She wrote the first program.", "Ada was born in 1815.")
    filler = [f"Filler sentence number {i} says nothing at all about the claim here." for i in range(12)]
    long_sents = [*filler[:6], "Ada wrote the first program in 1843.", *filler[6:]]
    passage = " ".join(long_sents)
    assert len(passage.split()) > SHORT_PASSAGE_WORDS
    w = claim_windows(long_sents, [0] * len(long_sents), [6, 3], [passage])
    assert w is not None
    assert w.texts[0] == " ".join(long_sents[5:8])  # the best sentence with its neighbours
    assert w.texts[1:] == ("Ada wrote the first program in 1843.", long_sents[3])
    # neighbours never cross into another passage
    w = claim_windows(["A one.", "B two.", "C three."], [0, 1, 2], [1], ["x " * 100, "B two. " * 50, "y " * 100])
    assert w is not None and w.texts[0] == "B two."
    assert claim_windows([], [], [], []) is None
