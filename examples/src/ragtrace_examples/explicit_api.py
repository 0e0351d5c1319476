"""ragtrace's explicit API, for code that cannot be decorated (a framework owns the functions).

    python -m ragtrace_examples.explicit_api --endpoint http://127.0.0.1:4318 --questions 5

``ragtrace.trace_query(...)`` opens one trace; each stage is recorded as it finishes with
``q.retrieved(...)``, ``q.reranked(..., top_k=)`` and ``q.generated(answer, context=...)`` —
the context is exactly what the model was given, in order.
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
    chunk_corpus,
)
from ragtrace_examples.corpus import Corpus, generate_corpus


class ThirdPartyPipeline:
    """Stands in for a pipeline object from a library we cannot decorate."""

    def __init__(self, corpus: Corpus) -> None:
        encoder = MiniLMEncoder()
        self.retriever = Bm25Retriever(chunk_corpus(corpus))
        self.reranker = HybridReranker(encoder)
        self.generator = ExtractiveGenerator(encoder)


def answer(pipe: ThirdPartyPipeline, question: str, query_id: str | None = None,
           gold: list[str] | None = None, top_k: int = 3) -> tuple[str, str | None]:
    """The answer and its trace id."""
    with ragtrace.trace_query(question, query_id=query_id, gold_ids=gold) as q:
        hits = pipe.retriever.search(question, 10)
        q.retrieved(hits)
        ranked = pipe.reranker.rerank(question, hits)
        q.reranked(ranked, top_k=top_k)  # input documents default to the retrieved ones
        context = ranked[:top_k]
        text = pipe.generator.generate(question, context)
        q.generated(text, context=context)  # one LLM span; also the query's answer
        return text, q.trace_id


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ragtrace_examples.explicit_api")
    p.add_argument("--endpoint", help="collector URL; without it nothing is exported")
    p.add_argument("--release", default="explicit-v1")
    p.add_argument("--questions", type=int, default=5)
    a = p.parse_args(argv)
    if a.endpoint:
        ragtrace.configure(endpoint=a.endpoint, service="explicit-api", release=a.release)
    corpus = generate_corpus(60, seed=2)
    pipe = ThirdPartyPipeline(corpus)
    for item in corpus.questions[: a.questions]:
        text, trace_id = answer(pipe, item.question, query_id=item.id, gold=[item.doc_id])
        print(f"{item.id}  trace {trace_id}  {item.question}\n        -> {text}")
    ragtrace.shutdown()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
