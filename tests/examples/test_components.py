"""Model-free parts of the example pipeline: chunking, BM25 retrieval, answer typing, topic masking."""

from __future__ import annotations

from ragtrace_examples.components import (
    Bm25Retriever,
    answer_type,
    chunk_containing,
    chunk_corpus,
    mask_topic,
    split_sentences,
)
from ragtrace_examples.corpus import generate_corpus


def test_chunks_cover_each_document_exactly() -> None:
    corpus = generate_corpus(10, seed=2)
    doc = corpus.documents[3]
    cut = doc.sentence_starts[2]
    chunks = chunk_corpus(corpus, {doc.id: cut})
    assert len(chunks) == 11
    parts = [c for c in chunks if c.doc_id == doc.id]
    assert [c.id for c in parts] == [f"{doc.id}#0", f"{doc.id}#1"]
    assert parts[0].text + " " + parts[1].text == doc.text
    assert chunk_containing(chunks, doc.id, cut) == f"{doc.id}#1"
    assert chunk_containing(chunks, doc.id, cut - 1) == f"{doc.id}#0"
    other = corpus.documents[0]
    assert chunk_containing(chunks, other.id, 0) == other.id


def test_bm25_returns_only_matching_chunks_best_first() -> None:
    corpus = generate_corpus(30, seed=3)
    retriever = Bm25Retriever(chunk_corpus(corpus))
    target = corpus.documents[7]
    hits = retriever.search(f"Tell me about {target.title}", 10)
    assert hits[0].doc_id == target.id or hits[0].doc_id in {d.id for d in corpus.documents
                                                            if d.family == target.family}
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert retriever.search("zzzqqq unknownword", 10) == []
    assert retriever.search("the of and", 10) == []  # stop words only


def test_answer_type_and_topic_masking() -> None:
    assert answer_type("How many people work for Hepround Energy?") == "number"
    assert answer_type("In what year did Hepround Energy begin operating?") == "number"
    assert answer_type("Who heads Hepround Energy?") == "person"
    assert answer_type("Where is Hepround Energy based?") == "name"
    assert answer_type("Tell me something") is None
    assert mask_topic("How many people work for Hepround Energy?", "Hepround Energy") == "How many people work for"
    assert mask_topic("Hepround Energy", "Hepround Energy") == "Hepround Energy"  # never empty
    assert split_sentences("It was founded in 1990.  The firm employs 3,690 staff. 12 remain.") == [
        "It was founded in 1990.", "The firm employs 3,690 staff.", "12 remain."]
