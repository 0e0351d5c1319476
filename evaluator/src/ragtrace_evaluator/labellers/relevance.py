"""Relevance labellers: does a passage answer the query? Used when a trace has no gold ids and no
imported qrels (most production traffic).

``LexicalEmbeddingRelevance`` (the default, name ``offline``) runs here on MiniLM::

    topical   = ½·max cosine(query, passage sentence) + ½·coverage(query content words by the passage)
    specific  = share of the query's names (whole phrases: "Loutrem Dynamics") and numbers/dates
                that the passage states
    on_query  = topical · (½ + ½·specific)   when the query names something or states a number,
              = topical                      otherwise
    relevance = on_query                                       without a reference answer
              = ½·on_query + ½·coverage(reference by passage)  with one (the answer must be *in* it)

Why ``specific`` (since relevance-lexemb-2): sibling entities share a name root, a template and a
topic ("Loutrem Dynamics" vs "Loutrem Shipping": same sentences, other values), so cosine and word
coverage rate a look-alike about the sibling as relevant as the passage about the entity asked
about; a name matches only when all its words are there. Its weight (a passage naming nothing of
the query keeps half its topical score) is a priori, not fitted to any evaluation file.

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
from ragtrace_evaluator.labellers.lexical import (
    TextFeatures,
    coverage,
    features,
    missing_numbers,
    name_phrases,
    stem,
)
from ragtrace_evaluator.labellers.nli import DEFAULT_NLI_MODEL, NLIModel
from ragtrace_evaluator.labellers.offline import _passage_sentences
from ragtrace_evaluator.labellers.protocol import Passage

RELEVANCE_THRESHOLD = 0.5
FORMULA_VERSION = "relevance-lexemb-2"


def specificity(query: str, passage: TextFeatures) -> float | None:
    """Share of the query's names (each phrase whole) and numbers/dates that ``passage`` states;
    None when the query names nothing and states no number (then topic is all there is)."""
    phrases = name_phrases(query)
    qf = features(query)
    n_numbers = len(qf.plain_numbers) + len(qf.dates) + len(qf.bare_years)
    if not phrases and not n_numbers:
        return None
    words = passage.stem_set | passage.entities
    found = float(sum(1 for p in phrases if all(stem(w) in words or w in words for w in p)))
    if n_numbers:
        found += n_numbers * (1.0 - missing_numbers(qf, passage))
    return found / (len(phrases) + n_numbers)


class LexicalEmbeddingRelevance:
    """MiniLM + lexical coverage relevance (see the module docstring for the formula)."""

    kind = "lexical-embedding"

    def __init__(self, embedder: SentenceEmbedder | None = None, threshold: float = RELEVANCE_THRESHOLD,
                 match_names: bool = True) -> None:
        self.embedder = embedder if embedder is not None else default_embedder()
        self._threshold = threshold
        #: False gives relevance-lexemb-1 (topic only), kept so the benchmark can show what names add
        self.match_names = match_names

    @property
    def threshold(self) -> float:
        return self._threshold

    def manifest(self) -> dict[str, Any]:
        emb = self.embedder.manifest()
        return {"kind": self.kind, "model_id": emb["embedder"], "file_hash": emb["embedder_file_sha256"],
                "thresholds": {"relevance": self._threshold},
                "formula_version": FORMULA_VERSION if self.match_names else "relevance-lexemb-1"}

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
            specific = specificity(query, pf) if self.match_names else None
            on_query = topical if specific is None else topical * (0.5 + 0.5 * specific)
            score = on_query if rf is None else 0.5 * on_query + 0.5 * coverage(rf, pf)
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
