"""Evidence windows: the premises an entailment model reads for one claim.

A cross-encoder trained on a sentence or three of evidence (FEVER, MultiNLI) reads a long passage
badly: past its window the text is cut, and the claim's evidence may sit in what was cut. So a claim
is checked against the few sentences aligned to it, not against whole passages: each of its best
sentences alone, the best one with its neighbours in the same passage (a claim often joins two
adjacent sentences, or needs the previous one to resolve "it"), and the whole passage when it is
short enough to read at once. A claim's support is its best window's P(entailment); its
contradiction is read from its *aligned* window (the best sentence in context), so a contradiction
is only called where the claim's evidence is, not in whatever other sentence happens to disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: a passage of at most this many words is also read whole
SHORT_PASSAGE_WORDS = 90


@dataclass(frozen=True)
class Windows:
    """The premises for one claim: ``texts`` (distinct, best first) and which one is the aligned window."""

    texts: tuple[str, ...]
    aligned: int


def claim_windows(sentences: Sequence[str], owners: Sequence[int], ranked: Sequence[int],
                  passages: Sequence[str], singles: int = 2) -> Windows | None:
    """Windows for a claim from the sentences of its passages, ``ranked`` best first.

    ``sentences[j]`` belongs to passage ``owners[j]`` (sentences of one passage are consecutive, in
    order); ``passages`` are the passages' texts. ``singles`` of the best sentences are read alone;
    the best one also with its neighbours, or with its whole passage when that is short. ``None``
    when there is no sentence to read.
    """
    if not ranked:
        return None
    best = ranked[0]
    owner = owners[best]
    passage = passages[owner]
    if len(passage.split()) <= SHORT_PASSAGE_WORDS:
        context = passage.strip()
    else:
        lo = best - 1 if best > 0 and owners[best - 1] == owner else best
        hi = best + 1 if best + 1 < len(sentences) and owners[best + 1] == owner else best
        context = " ".join(sentences[lo:hi + 1])
    texts = [context] + [sentences[j] for j in ranked[:singles]]
    unique = tuple(dict.fromkeys(t for t in texts if t.strip()))
    return Windows(unique, 0) if unique else None
