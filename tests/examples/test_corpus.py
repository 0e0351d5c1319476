"""The corpus generator: deterministic, every label has provenance, distractors are hard by construction."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragtrace_examples.corpus import generate_corpus, load_corpus


def test_same_seed_same_corpus_other_seed_other_corpus() -> None:
    a, b, c = generate_corpus(40, seed=3), generate_corpus(40, seed=3), generate_corpus(40, seed=4)
    assert a == b
    assert a.documents != c.documents


def test_every_question_points_at_its_evidence_and_answer() -> None:
    corpus = generate_corpus(90, seed=5)
    assert len(corpus.documents) == 90 and len(corpus.questions) == 90
    for q in corpus.questions:
        doc = corpus.document(q.doc_id)
        assert doc.text[q.answer_start:q.answer_end] == q.answer
        assert doc.text[q.evidence_start:q.evidence_end] == q.reference
        assert q.evidence_start <= q.answer_start < q.answer_end <= q.evidence_end
        assert q.answer in q.reference
        # the question names the entity but paraphrases the fact: no content word of the
        # evidence sentence except the value's own words is repeated
        assert doc.title in q.question


def test_hard_distractors_share_the_name_root_and_disagree_on_the_fact() -> None:
    corpus = generate_corpus(120, seed=6)
    with_distractors = [q for q in corpus.questions if q.hard_distractors]
    assert len(with_distractors) > 100  # families of 2-3: almost every question has one
    for q in with_distractors:
        doc = corpus.document(q.doc_id)
        for did in q.hard_distractors:
            other = corpus.document(did)
            assert other.family == doc.family and other.kind == doc.kind
            assert doc.family in other.title
            fact = next(f for f in other.facts if f.relation == q.relation)
            assert fact.value != q.answer


def test_only_the_intro_names_the_entity() -> None:
    # the chunk_split fault relies on this: a chunk cut after the intro no longer names the entity
    corpus = generate_corpus(60, seed=7)
    for doc in corpus.documents:
        sentences = doc.sentences()
        assert sentences[0].startswith(doc.title)
        for s in sentences[1:]:
            assert doc.family not in s


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    corpus = generate_corpus(30, seed=8, n_questions=12)
    assert len(corpus.questions) == 12
    folder = corpus.save(tmp_path / "c")
    assert load_corpus(folder) == corpus
    qrels = (folder / "qrels.txt").read_text().splitlines()
    assert len(qrels) == 12 and all(re.fullmatch(r"q\d{6} 0 d\d{6} 1", line) for line in qrels)


def test_large_corpora_keep_names_unique() -> None:
    corpus = generate_corpus(12_000, seed=9)
    titles = [d.title for d in corpus.documents]
    assert len(set(titles)) == len(titles)
    assert len({d.id for d in corpus.documents}) == 12_000


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        generate_corpus(1)
    with pytest.raises(ValueError, match="family_size"):
        generate_corpus(10, family_size=(3, 2))
