"""The example RAG pipeline, instrumented with ragtrace decorators: BM25 → MiniLM rerank → generate.

One `RagPipeline` serves one `Release` of one corpus. Its stages are methods decorated with
``@ragtrace.retriever`` / ``@ragtrace.reranker`` / ``@ragtrace.generator`` under a
``@ragtrace.pipeline`` root, so every query becomes one trace: candidates with BM25 scores,
reranked order with ``top_k``, the exact context given to the generator, and the answer. Until
``ragtrace.configure()`` runs the decorators are pass-throughs.

Golden traffic carries a ``query_id``; the pipeline then records the known-relevant chunk ids
(``ragtrace.gold.document_ids``), which is how offline evaluation joins answers with ground truth.
The release's injected faults (see `ragtrace_examples.faults`) act inside the stages, exactly
where a real regression would.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import ragtrace
from ragtrace_examples.components import (
    Bm25Retriever,
    ExtractiveGenerator,
    HybridReranker,
    MiniLMEncoder,
    ScoredChunk,
    SmolLM2Generator,
    build_prompt,
    chunk_containing,
    chunk_corpus,
)
from ragtrace_examples.corpus import Corpus
from ragtrace_examples.faults import ABSTENTION, Fault, Release, alter_facts, promote_distractors

__all__ = ["Answer", "RagPipeline"]


class Generator(Protocol):
    name: str

    def generate(self, question: str, context: Sequence[ScoredChunk]) -> str: ...


@dataclass(frozen=True)
class Answer:
    answer: str
    query_id: str | None
    #: chunk ids supplied to the generator, in order
    context_ids: tuple[str, ...]
    #: chunk ids retrieved before reranking
    candidate_ids: tuple[str, ...]
    trace_id: str | None
    release: str


class RagPipeline:
    """retrieve (``pool_size`` BM25 candidates) → rerank → the first ``top_k`` go to the generator."""

    def __init__(self, corpus: Corpus, release: Release, *, encoder: MiniLMEncoder | None = None,
                 generator: str | Generator = "extractive", pool_size: int = 10, top_k: int = 3,
                 record_gold: bool = True) -> None:
        if pool_size < top_k or top_k < 1:
            raise ValueError(f"pool_size={pool_size}, top_k={top_k}: need 1 <= top_k <= pool_size")
        self.corpus = corpus
        self.release = release
        self.pool_size = pool_size
        self.top_k = top_k
        self.chunks = chunk_corpus(corpus, release.split_documents(corpus))
        self.doc_of = {c.id: c.doc_id for c in self.chunks}
        self.retriever = Bm25Retriever(self.chunks)
        self.encoder = encoder or MiniLMEncoder()
        self.reranker = HybridReranker(self.encoder)
        if isinstance(generator, str):
            if generator == "extractive":
                generator = ExtractiveGenerator(self.encoder)
            elif generator == "smollm2":
                generator = SmolLM2Generator()
            else:
                raise ValueError(f"generator {generator!r}: use 'extractive' or 'smollm2'")
        self.generator = generator
        if isinstance(generator, ExtractiveGenerator):
            generator.warm(self.chunks)
        self.encoder.encode([c.text for c in self.chunks])  # the reranker's passages, batched
        # The relevant chunk of each golden question under this release's chunking.
        self.gold: dict[str, tuple[str, ...]] = {
            q.id: (chunk_containing(self.chunks, q.doc_id, q.evidence_start),) for q in corpus.questions
        }
        self._questions = {q.id: q for q in corpus.questions}
        # False: the traces carry no gold ids, so the audit's gold comes from imported labels
        # (evidence spans or chunk-id qrels), as it does for a service that knows nothing of them
        self.record_gold = record_gold
        self._local = threading.local()

    # --- public ----------------------------------------------------------------------------
    def ask(self, question: str, query_id: str | None = None) -> Answer:
        """Answer one question; ``query_id`` names a golden question (its gold is then recorded)."""
        self._local.state = {}
        gold = list(self.gold[query_id]) if self.record_gold and query_id in self.gold else None
        text = self.answer(question, query_id=query_id, gold_ids=gold)
        state: dict[str, Any] = self._local.state
        return Answer(answer=text, query_id=query_id, context_ids=tuple(state.get("context", ())),
                      candidate_ids=tuple(state.get("candidates", ())), trace_id=state.get("trace_id"),
                      release=self.release.name)

    # --- instrumented stages ---------------------------------------------------------------
    @ragtrace.pipeline(name="rag.answer")
    def answer(self, query: str, *, query_id: str | None = None, gold_ids: list[str] | None = None) -> str:
        self._local.state["trace_id"] = ragtrace.current_trace_id()
        candidates = self.retrieve(query, k=self.pool_size)
        ranked = self.rerank(query, candidates, top_k=self.top_k, query_id=query_id)
        context = ranked[: self.top_k]
        self._local.state.update(candidates=[c.id for c in candidates], context=[c.id for c in context])
        return self.generate(self._prompt(query, query_id, context), context=context, question=query,
                             query_id=query_id)

    @ragtrace.retriever(name="bm25.search")
    def retrieve(self, query: str, k: int) -> list[ScoredChunk]:
        return self.retriever.search(query, k)

    @ragtrace.reranker(name="minilm.rerank", model="all-MiniLM-L6-v2+bm25")
    def rerank(self, query: str, documents: list[ScoredChunk], *, top_k: int,
               query_id: str | None = None) -> list[ScoredChunk]:
        ranked = self.reranker.rerank(query, documents)
        if self.release.fault(query_id) is Fault.RERANK_DISTRACTOR and query_id in self._questions:
            q = self._questions[query_id]
            by_id = {c.id: c for c in ranked}
            order = promote_distractors([c.id for c in ranked], gold=self.gold[query_id],
                                        distractor_docs=q.hard_distractors, top_k=top_k, doc_of=self.doc_of)
            # The faulty reranker's scores follow its order, as a real miscalibrated model's would.
            top = ranked[0].score if ranked else 1.0
            ranked = [ScoredChunk(cid, by_id[cid].text, round(top - 0.01 * i, 6), by_id[cid].doc_id,
                                  by_id[cid].metadata) for i, cid in enumerate(order)]
        return ranked

    @ragtrace.generator(name="generate")
    def generate(self, prompt: str, *, context: list[ScoredChunk], question: str,
                 query_id: str | None = None) -> str:
        fault = self.release.fault(query_id)
        if fault is Fault.OVER_ABSTAIN:
            return ABSTENTION
        if isinstance(self.generator, SmolLM2Generator):
            text = self.generator.complete(prompt)
        else:
            text = self.generator.generate(question, context)
        if fault is Fault.ALTER_FACTS and text != ABSTENTION:
            text = alter_facts(text, [c.text for c in context], seed=query_id or "")
        return text

    def _prompt(self, question: str, query_id: str | None, context: Sequence[ScoredChunk]) -> str:
        cautious = self.release.fault(query_id) is Fault.OVER_ABSTAIN
        return build_prompt(question, context, cautious=cautious)
