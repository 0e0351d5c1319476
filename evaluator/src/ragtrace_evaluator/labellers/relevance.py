"""Relevance labellers: does a passage answer the query? Used when a trace has no gold ids and no
imported qrels (most production traffic).

``LexicalEmbeddingRelevance`` (the default, name ``offline``) runs here on MiniLM::

    topical   = ½·max cosine(query, passage sentence) + ½·coverage(query content words by the passage)
    relevance = topical                                       without a reference answer
              = ½·topical + ½·coverage(reference by passage)  with one (the answer must be *in* it)

Threshold 0.5 (RELEVANCE_THRESHOLD): a passage is relevant when, on average, half of the signals
say so — e.g. it covers the query's content words and at least half of the reference's. It is a
round a-priori value, not fitted to any evaluation file.

``NLIRelevance`` (name ``nli:<model>``): the entailment probability of the reference answer (or
the production answer) given the passage — relevant means "this passage alone supports the
answer". It needs a reference: a query alone is not a hypothesis an NLI model can judge.

eRAG lives in :mod:`ragtrace_evaluator.labellers.erag`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragtrace_evaluator.labellers.embedding import SentenceEmbedder, default_embedder
from ragtrace_evaluator.labellers.lexical import coverage, features
from ragtrace_evaluator.labellers.nli import DEFAULT_NLI_MODEL, NLIModel
from ragtrace_evaluator.labellers.offline import _passage_sentences
from ragtrace_evaluator.labellers.protocol import Passage

RELEVANCE_THRESHOLD = 0.5
FORMULA_VERSION = "relevance-lexemb-1"


class LexicalEmbeddingRelevance:
    """MiniLM + lexical coverage relevance (see the module docstring for the formula)."""

    kind = "lexical-embedding"

    def __init__(self, embedder: SentenceEmbedder | None = None, threshold: float = RELEVANCE_THRESHOLD) -> None:
        self.embedder = embedder if embedder is not None else default_embedder()
        self._threshold = threshold

    @property
    def threshold(self) -> float:
        return self._threshold

    def manifest(self) -> dict[str, Any]:
        emb = self.embedder.manifest()
        return {"kind": self.kind, "model_id": emb["embedder"], "file_hash": emb["embedder_file_sha256"],
                "thresholds": {"relevance": self._threshold}, "formula_version": FORMULA_VERSION}

    def relevance(self, query: str, passages: Sequence[Passage], reference: str | None = None) -> list[float]:
        if not passages:
            return []
        sentences = [_passage_sentences(p.text) or ("",) for p in passages]
        flat = [s for group in sentences for s in group]
        vecs = self.embedder.embed([query, *flat])
        qvec, svecs = vecs[0], vecs[1:]
        qf = features(query)
        rf = features(reference) if reference and reference.strip() else None
        out = []
        pos = 0
        for p, group in zip(passages, sentences, strict=True):
            sims = svecs[pos:pos + len(group)] @ qvec
            pos += len(group)
            pf = features(p.text)
            topical = 0.5 * max(0.0, float(np.max(sims))) + 0.5 * (coverage(qf, pf) if qf.stems else 0.0)
            score = topical if rf is None else 0.5 * topical + 0.5 * coverage(rf, pf)
            out.append(round(min(1.0, max(0.0, score)), 6) if p.text.strip() else 0.0)
        return out


class NLIRelevance:
    """Relevance = P(passage entails the reference answer), from an NLI cross-encoder."""

    kind = "nli"

    def __init__(self, model: NLIModel | str = DEFAULT_NLI_MODEL, threshold: float = 0.5) -> None:
        self.nli = model if isinstance(model, NLIModel) else NLIModel(model)
        self._threshold = threshold

    @property
    def threshold(self) -> float:
        return self._threshold

    def manifest(self) -> dict[str, Any]:
        return {"kind": "relevance-nli", **self.nli.manifest(), "thresholds": {"relevance": self._threshold},
                "formula_version": "relevance-nli-1"}

    def relevance(self, query: str, passages: Sequence[Passage], reference: str | None = None) -> list[float]:
        if not reference or not reference.strip():
            raise ValueError(
                "NLI relevance needs a reference answer (or the production answer) as the hypothesis; "
                "pass reference=..., or use the 'offline' relevance labeller for query-only judgements"
            )
        probs = self.nli.predict([(p.text, reference) for p in passages if p.text.strip()])
        it = iter(probs)
        return [round(next(it)["entailment"], 6) if p.text.strip() else 0.0 for p in passages]
