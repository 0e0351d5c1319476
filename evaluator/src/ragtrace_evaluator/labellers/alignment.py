"""Token-level alignment of a claim to its evidence, from MiniLM token states (BERTScore-like recall).

A pooled sentence cosine is high when a claim and a sentence are about the same thing, even when one
detail of the claim (a name, a number, an object) is nowhere in the evidence. Aligning token by
token sees that detail: each word piece of the claim is matched to its most similar word piece
among the evidence sentences (cosine of L2-normalised last hidden states of all-MiniLM-L6-v2), and
a claim word scores the mean of its pieces' best matches. The aggregates below summarise the claim's
*content* words (stop-words say nothing about support), weighted by IDF where a mean is taken:

- ``align_mean``: IDF-weighted mean score;
- ``align_min``: the weakest content word;
- ``align_q20``: the 20 % quantile (the weakest few, less noisy than the minimum);
- ``align_low``: IDF-weighted share of content words scoring below :data:`LOW`;
- ``align_name_min``, ``align_name_low``: the same minimum and share over the claim's names and
  numbers only (a digit, a capitalised word, or a word the lexical module takes for a name), where
  one unsupported token makes a claim false.

A claim with no content word (or no name/number) gets the neutral value (1 for a score, 0 for a
share); a claim with no evidence gets 0 scores and shares of 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ragtrace_evaluator.labellers.embedding import TokenStates
from ragtrace_evaluator.labellers.lexical import STOPWORDS, features, stem

#: a claim word whose best match scores below this is taken as unsupported (see docs/labellers.md)
LOW = 0.5
#: the aggregates, in the order the support model's feature columns list them
ALIGN_FEATURES: tuple[str, ...] = ("align_mean", "align_min", "align_q20", "align_low", "align_name_min",
                                   "align_name_low")


def _content(word: str) -> bool:
    low = word.lower()
    return any(ch.isalnum() for ch in low) and low not in STOPWORDS and (len(low) > 1 or low.isdigit())


def _name_or_number(word: str, names: frozenset[str]) -> bool:
    # Unlike the lexical name rule, a capitalised first word counts too: a headline-style summary
    # starts with its subject ("Kayahan wrote ..."), and a connective or frame ("Additionally,") was
    # cut off by claim extraction already; a capitalised word that is only capitalised because it
    # opens the sentence and is supported scores high anyway.
    return any(ch.isdigit() for ch in word) or word[:1].isupper() or word.lower() in names


def word_scores(claim: TokenStates, evidence: Sequence[TokenStates]) -> np.ndarray:
    """Per claim word, the mean over its pieces of the best cosine against any evidence piece."""
    n_words = len(claim.words)
    if not evidence or not len(claim.states):
        return np.zeros(n_words, dtype=np.float32)
    ev = np.concatenate([e.states for e in evidence if len(e.states)] or [np.zeros((0, claim.states.shape[1]))])
    if not len(ev):
        return np.zeros(n_words, dtype=np.float32)
    best = (claim.states.astype(np.float32) @ ev.astype(np.float32).T).max(axis=1)
    sums = np.bincount(claim.word_of, weights=best, minlength=n_words)
    counts = np.bincount(claim.word_of, minlength=n_words)
    return np.asarray(np.where(counts > 0, sums / np.maximum(counts, 1), 0.0), dtype=np.float32)


def alignment_features(claim_text: str, claim: TokenStates, evidence: Sequence[TokenStates],
                       idf_of: Callable[[str], float]) -> dict[str, float]:
    """The :data:`ALIGN_FEATURES` of a claim against its local evidence sentences."""
    scores = word_scores(claim, evidence)
    names = features(claim_text).entities
    content = [k for k, w in enumerate(claim.words) if _content(w)]
    special = [k for k in content if _name_or_number(claim.words[k], names)]
    out: dict[str, float] = {}
    if not evidence:
        # nothing to align to: every word unsupported
        return {"align_mean": 0.0, "align_min": 0.0, "align_q20": 0.0, "align_low": 1.0 if content else 0.0,
                "align_name_min": 0.0 if special else 1.0, "align_name_low": 1.0 if special else 0.0}
    if content:
        s = scores[content]
        w = np.array([idf_of(stem(claim.words[k])) for k in content], dtype=np.float64)
        out["align_mean"] = float(np.sum(w * s) / np.sum(w))
        out["align_min"] = float(s.min())
        out["align_q20"] = float(np.quantile(s, 0.2))
        out["align_low"] = float(np.sum(w * (s < LOW)) / np.sum(w))
    else:
        out.update(align_mean=1.0, align_min=1.0, align_q20=1.0, align_low=0.0)
    if special:
        s = scores[special]
        out["align_name_min"] = float(s.min())
        out["align_name_low"] = float(np.mean(s < LOW))
    else:
        out.update(align_name_min=1.0, align_name_low=0.0)
    return out
