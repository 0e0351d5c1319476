"""ragtrace on plain functions: no web framework, just decorated steps.

    python -m ragtrace_examples.plain_functions --endpoint http://127.0.0.1:4318 --questions 5

The four decorators are all it takes: ``@ragtrace.pipeline`` on the function that answers a
question (one trace per call), and ``@ragtrace.retriever`` / ``@ragtrace.reranker`` /
``@ragtrace.generator`` on its steps. They read the documents from what the functions take and
return (here `ScoredChunk` objects with ``id``/``text``/``score``); without ``configure()`` they do
nothing at all.
"""

from __future__ import annotations

import argparse
import sys

import ragtrace
from ragtrace_examples.components import (
    Bm25Retriever,
    ExtractiveGenerator,
    HybridReranker,
    MiniLMEncoder,
    ScoredChunk,
    chunk_corpus,
)
from ragtrace_examples.corpus import generate_corpus

CORPUS = generate_corpus(60, seed=1)
_state: dict[str, object] = {}


def _components() -> tuple[Bm25Retriever, HybridReranker, ExtractiveGenerator]:
    if not _state:  # built on first use, not at import time
        encoder = MiniLMEncoder()
        _state["retriever"] = Bm25Retriever(chunk_corpus(CORPUS))
        _state["reranker"] = HybridReranker(encoder)
        _state["generator"] = ExtractiveGenerator(encoder)
    return _state["retriever"], _state["reranker"], _state["generator"]  # type: ignore[return-value]


@ragtrace.retriever
def search(query: str, k: int = 10) -> list[ScoredChunk]:
    return _components()[0].search(query, k)


@ragtrace.reranker(model="all-MiniLM-L6-v2+bm25")
def rerank(query: str, documents: list[ScoredChunk], top_k: int = 3) -> list[ScoredChunk]:
    return _components()[1].rerank(query, documents)


@ragtrace.generator(model="extractive-minilm")
def generate(question: str, context: list[ScoredChunk]) -> str:
    return _components()[2].generate(question, context)


@ragtrace.pipeline
def answer(query: str, query_id: str | None = None, gold_ids: list[str] | None = None) -> str:
    candidates = search(query, k=10)
    ranked = rerank(query, candidates, top_k=3)
    return generate(query, context=ranked[:3])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ragtrace_examples.plain_functions")
    p.add_argument("--endpoint", help="collector URL; without it nothing is exported")
    p.add_argument("--release", default="plain-v1")
    p.add_argument("--questions", type=int, default=5)
    a = p.parse_args(argv)
    if a.endpoint:
        ragtrace.configure(endpoint=a.endpoint, service="plain-functions", release=a.release)
    for q in CORPUS.questions[: a.questions]:
        # gold_ids is the ground truth of the generated corpus: the evaluator joins on it
        print(f"{q.id}  {q.question}\n        -> {answer(q.question, query_id=q.id, gold_ids=[q.doc_id])}")
    ragtrace.shutdown()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
