"""Token F1 of an answer against a reference answer: SQuAD's answer-overlap score, the one definition
the evaluator uses (the audit's ``metrics.token_f1``, eRAG's document relevance, the LLM judge's claim
matching, the relevance-correlation benchmark).

Both texts are normalised as SQuAD's evaluation script does (`normalise_answer`): lower-cased, ASCII
punctuation removed, the articles *a*, *an*, *the* dropped, split on whitespace. F1 is the harmonic
mean of precision (shared tokens / the answer's tokens) and recall (shared tokens / the reference's),
over multisets, so a repeated token counts as often as it occurs on both sides.

Edge cases:

- a reference with no tokens (blank, punctuation or articles only) decides nothing: `token_f1` is
  None (undefined), never 0, and a caller that needs a number must say what it does instead;
- an answer with no tokens against a reference that has some shares none of them: 0.0.
"""

from __future__ import annotations

import re
import string
from collections import Counter

__all__ = ["normalise_answer", "token_f1"]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalise_answer(text: str) -> list[str]:
    """SQuAD's answer normalisation as tokens: lower case, no ASCII punctuation (``1,465`` reads as
    ``1465``), no articles, split on whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return _ARTICLES.sub(" ", text).split()


def token_f1(answer: str, reference: str) -> float | None:
    """SQuAD token F1 of ``answer`` against ``reference``, in [0, 1]; None when the reference has no
    tokens (module docstring); 0.0 when the answer shares no token with it (an empty answer too)."""
    ref = Counter(normalise_answer(reference))
    if not ref:
        return None
    ans = Counter(normalise_answer(answer))
    common = sum((ans & ref).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(ans.values()), common / sum(ref.values())
    return 2 * precision * recall / (precision + recall)
