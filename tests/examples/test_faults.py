"""Fault plans and the faulty components, without models."""

from __future__ import annotations

import re

import pytest

from ragtrace_examples.components import Bm25Retriever, chunk_containing, chunk_corpus
from ragtrace_examples.corpus import generate_corpus
from ragtrace_examples.faults import (
    ABSTENTION,
    Fault,
    alter_facts,
    baseline_release,
    candidate_release,
    check_labels,
    injected_faults,
    promote_distractors,
)


def test_plan_is_seeded_and_respects_rates() -> None:
    corpus = generate_corpus(200, seed=1)
    rates = {Fault.CHUNK_SPLIT: 0.1, Fault.RERANK_DISTRACTOR: 0.05, Fault.OVER_ABSTAIN: 0.0,
             Fault.ALTER_FACTS: 0.2}
    a = candidate_release(corpus, rates=rates, seed=2)
    assert a.plan == candidate_release(corpus, rates=rates, seed=2).plan
    assert a.plan != candidate_release(corpus, rates=rates, seed=3).plan
    counts = {f: sum(1 for v in a.plan.values() if v is f) for f in Fault}
    assert counts == {Fault.CHUNK_SPLIT: 20, Fault.RERANK_DISTRACTOR: 10, Fault.OVER_ABSTAIN: 0,
                      Fault.ALTER_FACTS: 40}
    assert baseline_release().plan == {}
    recorded = injected_faults(a)
    assert len(recorded) == 70
    assert {r.expected_mode for r in recorded} == {"retrieval_gap", "rank_inversion", "fabrication"}


def test_rates_are_validated() -> None:
    corpus = generate_corpus(20)
    with pytest.raises(ValueError, match="between 0 and 1"):
        candidate_release(corpus, rates={Fault.CHUNK_SPLIT: 1.5})
    with pytest.raises(ValueError, match="sum to"):
        candidate_release(corpus, rates={Fault.CHUNK_SPLIT: 0.6, Fault.ALTER_FACTS: 0.6})


def test_chunk_split_hides_the_evidence_from_bm25() -> None:
    corpus = generate_corpus(150, seed=4)
    release = candidate_release(corpus, rates={Fault.CHUNK_SPLIT: 0.2}, seed=4)
    split = release.split_documents(corpus)
    chunks = chunk_corpus(corpus, split)
    honest = Bm25Retriever(chunk_corpus(corpus))
    faulty = Bm25Retriever(chunks)
    affected = [q for q in corpus.questions if release.fault(q.id) is Fault.CHUNK_SPLIT]
    assert len(affected) == 30
    for q in affected:
        gold = chunk_containing(chunks, q.doc_id, q.evidence_start)
        assert gold == f"{q.doc_id}#1"
        text = next(c.text for c in chunks if c.id == gold)
        assert corpus.document(q.doc_id).family not in text and q.reference in text
        assert q.doc_id in [c.id for c in honest.search(q.question, 10)]
        assert gold not in [c.id for c in faulty.search(q.question, 10)]


def test_promote_distractors_pushes_gold_just_out_of_context() -> None:
    ranked = ["g", "d1", "x", "d2", "y"]
    order = promote_distractors(ranked, gold={"g"}, distractor_docs={"d1", "d2"}, top_k=3)
    assert order == ["d1", "d2", "x", "g", "y"]
    # chunk ids map to their documents
    order = promote_distractors(["a#1", "b"], gold={"a#1"}, distractor_docs={"b"}, top_k=1,
                                doc_of={"a#1": "a", "b": "b"})
    assert order == ["b", "a#1"]


@pytest.mark.parametrize("answer", [
    "The company employs 3,690 staff.",
    "It was incorporated in 1916.",
    "The firm was set up by the engineer Ilse Zouhom.",
    "She received the Okonkwo Prize.",
    "It holds a market every second Saturday.",
])
def test_alter_facts_asserts_something_no_passage_supports(answer: str) -> None:
    passages = [answer, "The company employs 1,476 staff. It was incorporated in 1920."]
    altered = alter_facts(answer, passages, seed="q1")
    assert altered != answer
    assert altered == alter_facts(answer, passages, seed="q1")  # reproducible
    new_tokens = set(re.findall(r"[\w,]+", altered)) - set(re.findall(r"[\w,]+", " ".join(passages)))
    assert new_tokens, altered


def test_check_labels_counts_hits_confusions_and_missing() -> None:
    corpus = generate_corpus(20, seed=1)
    cand = candidate_release(corpus, "v2", rates={Fault.OVER_ABSTAIN: 0.1}, seed=1)
    base = baseline_release("v1")
    abstained = sorted(cand.plan)
    records = [{"release": "v1", "query_id": q.id, "failure_mode": "ok"} for q in corpus.questions]
    records += [{"release": "v2", "query_id": q.id,
                 "failure_mode": "under_use" if q.id == abstained[0] else "ok"}
                for q in corpus.questions if q.id != corpus.questions[-1].id or q.id in abstained]
    out = check_labels(records, [base, cand], corpus)
    row = next(r for r in out["modes"] if r["fault"] == "over_abstain")
    assert (row["n"], row["hits"], row["confusions"]) == (2, 1, {"ok": 1})
    assert out["clean"]["n"] + out["clean"]["missing"] == 38
    assert ABSTENTION.startswith("I cannot answer")
