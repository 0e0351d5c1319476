"""The audit hands a query's reference answer, when it has one, to the relevance labeller that
stands in for gold: with it the offline labeller can tell the passage that holds the answer from a
look-alike on the same topic (measured per question in docs/relevance-correlation.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragtrace_evaluator.audit.run import evidence_for
from ragtrace_evaluator.labellers.relevance import LexicalEmbeddingRelevance
from ragtrace_store import DocumentRef, GoldSource

SONG = DocumentRef("song", 0, content="Wonderwall is a song by the English rock band Oasis, from their 1995 album "
                                      "(What's the Story) Morning Glory?.")
FILM = DocumentRef("film", 1, content="Wonderwall is a 1968 film directed by Joe Massot, with a soundtrack album "
                                      "by George Harrison.")


@dataclass
class _Trace:  # the fields of an assembled trace that evidence_for reads
    reference: str | None
    query: str = "Which band released the album that the song Wonderwall appears on?"
    answer: str = "It was released by Oasis."
    retrieved: tuple[DocumentRef, ...] = (SONG, FILM)
    reranked: tuple[DocumentRef, ...] = ()
    context: tuple[DocumentRef, ...] = (SONG,)
    gold_ids: tuple[str, ...] = field(default=())


def test_the_reference_answer_reaches_the_offline_relevance_labeller() -> None:
    labeller = LexicalEmbeddingRelevance()  # the real MiniLM + lexical labeller, the audit's default
    alone = evidence_for(_Trace(reference=None), None, labeller)
    given = evidence_for(_Trace(reference="Oasis"), None, labeller)
    assert alone.gold_source is given.gold_source is GoldSource.LABELLER
    # from the query alone both passages are "about Wonderwall"; the reference names the one that answers
    assert alone.gold == {"song", "film"}
    assert given.gold == {"song"}
    blank = evidence_for(_Trace(reference="  "), None, labeller)  # a blank reference is no reference
    assert blank.gold == alone.gold
