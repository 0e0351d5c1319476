"""Per-query labels at each boundary and the primary failure mode.

Notation, per query: P = candidate pool (every document the retriever or reranker saw), R = the
final order (reranked, else retrieved), C = the supplied context (what the generator was given),
G = the gold (relevant) set, or unknown.

Labels
- retrieval: ``gold_in_pool`` = G ∩ P ≠ ∅, ``gold_in_context`` = G ∩ C ≠ ∅ (None when G is unknown).
- ranking: ``ok`` = the best gold document in R is ranked above every irrelevant document in R
  (equivalently: no distractor outranks the best gold); False too when gold is in P but missed C;
  None when no gold is in P (nothing to rank) or G is unknown.
- generation: the grounding labeller's verdict (entailed / neutral / contradicted / abstained).

Primary failure mode, the first that applies (precedence):
1. ``retrieval_gap``  — G is known and G ∩ P = ∅.
2. ``rank_inversion`` — gold is in P but not in C; or gold is in C, a distractor outranks it, and
   the answer is grounded in distractors (its supported claims cite only non-gold passages): the
   distractor won. An answer that fabricates or abstains with the gold in C is a generation
   failure (3, 4), whatever the order inside C.
3. ``under_use``      — gold is in C but the answer abstains, makes no claim (generic), or is
   grounded only in non-gold passages.
4. ``fabrication``    — some claim is contradicted by, or supported by none of, the supplied passages.
5. ``ok``.
When G is unknown only ``fabrication`` and ``ok`` can be decided.

End-to-end quality (``pass``/``score``) does not look at G. Its basis (``score_basis``) is:
- ``reference`` when the query's reference answer is known (imported by query id, or sent on the
  root span): ``score`` = answer correctness = the share of the reference's content tokens found in
  the answer (reference recall, `reference_recall`), ``pass`` = score >= ``REFERENCE_PASS_THRESHOLD``
  and every number of the reference is in the answer.
  An answer grounded in the wrong passage states the wrong value and falls, however well grounded.
- ``grounding`` otherwise: ``score`` is the mean support of the answer's claims against C (a
  contradicted claim counts 0), ``pass`` = every claim entailed and none contradicted.
Either way abstentions (and, on the grounding basis, claim-less answers) have ``score`` None
(undefined) and do not pass; they are reported apart (abstention rate, justified refusals).

A surface score rides along when the reference is known: ``metrics.token_f1``
(`ragtrace_evaluator.metrics.token_f1`, SQuAD's answer F1), the axis `ragtrace compare` pairs with
groundedness. It is None without a reference, for a reference without words, for an abstention and
for an answer that was not judged — never 0.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragtrace_evaluator.labellers.protocol import GroundingResult
from ragtrace_evaluator.metrics.token_f1 import token_f1
from ragtrace_evaluator.metrics.trec import query_measures
from ragtrace_store import (
    ClaimRecord,
    ClaimVerdict,
    FailureMode,
    GenerationRecord,
    GenerationVerdict,
    GoldSource,
    LabelRecord,
    RankingRecord,
    RetrievalRecord,
    ScoreBasis,
)

#: generation outcome classes of the 2 × 2 × 3 contingency
GENERATION_CLASSES = ("entailed", "not_entailed", "abstained")
#: per-trace list metrics, computed on R at cutoff 5 with binary gains
LIST_MEASURES = ("recall_5", "P_5", "recip_rank", "ndcg_cut_5", "success_5")
#: a reference-scored answer passes when it contains at least this share of the reference's content tokens
REFERENCE_PASS_THRESHOLD = 0.5
#: version of the formulas in this module; part of the labeller manifest. /2: ``score``/``pass``
#: against the reference answer when one is known (``score_basis``), groundedness otherwise.
#: /3: ``metrics.token_f1`` against the reference answer. /4: that token F1 is SQuAD's
#: (`ragtrace_evaluator.metrics.token_f1`, the evaluator's one definition), no longer over the content
#: tokens of `reference_recall`: labels of /3 and /4 differ there, so they do not share a manifest.
FORMULA_VERSION = "failure-modes/4;reference-recall>=0.5+numbers;token-f1-squad"


@dataclass(frozen=True)
class Evidence:
    """What one query's pipeline did, as document ids (ranks are positions, from 0)."""

    pool: tuple[str, ...]
    ranked: tuple[str, ...]
    context: tuple[str, ...]
    #: None = relevance unknown (no gold and no relevance labeller)
    gold: frozenset[str] | None
    gold_source: GoldSource = GoldSource.NONE
    #: confidence in G when it came from a labeller (1.0 for span/qrels gold)
    gold_confidence: float = 1.0


@dataclass(frozen=True)
class TraceLabel:
    """Every label of one query and its primary failure mode."""

    retrieval: RetrievalRecord
    ranking: RankingRecord
    #: None when the audit ran with ``stages="retrieval"``
    generation: GroundingResult | None
    failure_mode: FailureMode
    passed: bool
    score: float | None
    confidence: float
    refusal_justified: bool | None
    metrics: dict[str, float | None]
    #: the answer's supported claims cite gold passages only through non-gold ones (see module doc)
    grounded_elsewhere: bool
    #: what ``score``/``pass`` measure (None when the answer was not judged)
    score_basis: ScoreBasis | None = None

    def to_record(self, *, trace_id: str, query_id: str, release: str, service: str,
                  manifest_id: str) -> LabelRecord:
        """The per-trace label record of the shared contract (`ragtrace_store.LabelRecord`)."""
        gen = self.generation
        generation = None
        if gen is not None:
            generation = GenerationRecord(
                verdict=GenerationVerdict(gen.verdict), groundedness=gen.groundedness, abstained=gen.abstained,
                refusal_justified=self.refusal_justified, grounded_elsewhere=self.grounded_elsewhere,
                confidence=gen.confidence,
                claims=tuple(ClaimRecord(c.claim, ClaimVerdict(c.verdict), c.support, c.contradiction, c.passage_id)
                             for c in gen.claims),
            )
        return LabelRecord(
            trace_id=trace_id, query_id=query_id, release=release, service=service, manifest_id=manifest_id,
            failure_mode=self.failure_mode, retrieval=self.retrieval, ranking=self.ranking, generation=generation,
            passed=self.passed, score=self.score, confidence=self.confidence, score_basis=self.score_basis,
            metrics={
                "recall_5": self.metrics.get("recall_5"),
                "precision_5": self.metrics.get("P_5"),
                "recip_rank": self.metrics.get("recip_rank"),
                "ndcg_cut_5": self.metrics.get("ndcg_cut_5"),
                "success_5": self.metrics.get("success_5"),
                "groundedness": gen.groundedness if gen is not None else None,
                "abstained": gen.abstained if gen is not None else False,
                "token_f1": self.metrics.get("token_f1"),
            },
        )

    def record(self, *, trace_id: str, query_id: str, release: str, service: str,
               manifest_id: str) -> dict[str, Any]:
        """`to_record` as its JSON object (what ``--per-trace`` writes)."""
        return self.to_record(trace_id=trace_id, query_id=query_id, release=release, service=service,
                              manifest_id=manifest_id).to_json()


def retrieval_label(ev: Evidence) -> RetrievalRecord:
    if ev.gold is None:
        return RetrievalRecord(None, None, 0, ev.gold_source)
    return RetrievalRecord(
        gold_in_pool=bool(ev.gold.intersection(ev.pool)),
        gold_in_context=bool(ev.gold.intersection(ev.context)),
        n_gold=len(ev.gold),
        gold_source=ev.gold_source,
    )


def ranking_label(ev: Evidence, retrieval: RetrievalRecord) -> RankingRecord:
    if ev.gold is None or not retrieval.gold_in_pool:
        return RankingRecord(None, None, None)
    gold_ranks = [i for i, d in enumerate(ev.ranked) if d in ev.gold]
    distractor_ranks = [i for i, d in enumerate(ev.ranked) if d not in ev.gold]
    best_gold = gold_ranks[0] if gold_ranks else None
    best_distractor = distractor_ranks[0] if distractor_ranks else None
    if not retrieval.gold_in_context:
        return RankingRecord(False, best_gold, best_distractor)
    if best_gold is None:
        # gold reached C without appearing in R (context assembled from elsewhere): rank within C
        gold_ranks = [i for i, d in enumerate(ev.context) if d in ev.gold]
        distractor_ranks = [i for i, d in enumerate(ev.context) if d not in ev.gold]
        best_gold = gold_ranks[0]
        best_distractor = distractor_ranks[0] if distractor_ranks else None
    ok = best_distractor is None or best_gold < best_distractor
    return RankingRecord(ok, best_gold, best_distractor)


def answer_quality(gen: GroundingResult | None) -> tuple[bool, float | None]:
    """``(pass, score)``: mean claim support against C (contradicted = 0); undefined without claims."""
    if gen is None or gen.abstained or not gen.claims:
        return False, None
    supports = [0.0 if c.verdict == "contradicted" else min(max(c.support, 0.0), 1.0) for c in gen.claims]
    score = sum(supports) / len(supports)
    passed = all(c.verdict == "entailed" for c in gen.claims)
    return passed, score


# Function words that say nothing about correctness; a reference made only of them keeps them all.
_FUNCTION_WORDS = (
    "a an the of in on at to for from by with and or but is are was were be been being it its this that these "
    "those as into than then there their they he she his her him we our you your i me my do does did has have "
    "had not no so such which who whom whose what when where why how about over under after before"
)
_STOPWORDS = frozenset(_FUNCTION_WORDS.split())
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+")


def _content_tokens(text: str) -> list[str]:
    """Lower-cased word and number tokens without function words (``1,465`` and ``1465`` are one
    number; accents are folded, punctuation dropped)."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    tokens = []
    for tok in _TOKEN.findall(folded):
        if tok[0].isdigit():
            tok = re.sub(r"(?<=\d),(?=\d{3}\b)", "", tok)  # thousands separators
        tokens.append(tok)
    content = [t for t in tokens if t not in _STOPWORDS]
    return content or tokens


def reference_recall(answer: str, reference: str) -> float | None:
    """Answer correctness against a reference answer: the share of the reference's distinct content
    tokens (words, numbers, names; function words dropped) that occur in the answer. Recall rather
    than F1 so a full-sentence answer to a short reference ("1,465") is not penalised for its length.
    None when the reference has no tokens (it cannot decide anything)."""
    ref = set(_content_tokens(reference))
    if not ref:
        return None
    ans = set(_content_tokens(answer))
    return len(ref & ans) / len(ref)


def answer_correctness(gen: GroundingResult | None, answer: str | None,
                       reference: str | None) -> tuple[bool, float | None, ScoreBasis | None]:
    """``(pass, score, basis)``: against ``reference`` when it is known and usable, else `answer_quality`.

    Abstentions stay undefined (score None, not passed) on either basis; ``gen`` None (the answer
    was not judged: ``stages="retrieval"`` or no answer) gives ``(False, None, None)``.
    """
    if gen is None:
        return False, None, None
    if reference is not None and reference.strip():
        if gen.abstained or not answer:
            return False, None, ScoreBasis.REFERENCE
        score = reference_recall(answer, reference)
        if score is not None:
            # numbers are the facts most often wrong with the wording right ("0 degrees" for "100
            # degrees"): an answer missing one of the reference's numbers does not pass
            ref_numbers = {t for t in _content_tokens(reference) if t[0].isdigit()}
            numbers_ok = ref_numbers <= set(_content_tokens(answer))
            return score >= REFERENCE_PASS_THRESHOLD and numbers_ok, score, ScoreBasis.REFERENCE
    passed, grounded = answer_quality(gen)
    return passed, grounded, ScoreBasis.GROUNDING


def _grounded_elsewhere(gen: GroundingResult, gold: frozenset[str]) -> bool:
    """Supported claims exist and none of them cites a gold passage."""
    supported = [c for c in gen.claims if c.verdict == "entailed"]
    return bool(supported) and not any(c.passage_id in gold for c in supported if c.passage_id is not None)


def primary_mode(retrieval: RetrievalRecord, ranking: RankingRecord, gen: GroundingResult | None,
                 gold: frozenset[str] | None) -> tuple[FailureMode, bool]:
    """The first failure mode that applies, by the precedence of the module docstring.

    Returns ``(mode, grounded_elsewhere)``.
    """
    elsewhere = gen is not None and gold is not None and _grounded_elsewhere(gen, gold)
    if retrieval.gold_in_pool is False:
        return FailureMode.RETRIEVAL_GAP, elsewhere
    if retrieval.gold_in_pool and not retrieval.gold_in_context:
        return FailureMode.RANK_INVERSION, elsewhere
    if retrieval.gold_in_context and ranking.ok is False and elsewhere:
        return FailureMode.RANK_INVERSION, elsewhere
    if gen is None:
        return FailureMode.OK, elsewhere
    if retrieval.gold_in_context and (gen.abstained or not gen.claims or elsewhere):
        return FailureMode.UNDER_USE, elsewhere
    if not gen.abstained and gen.claims and gen.verdict in ("contradicted", "neutral"):
        return FailureMode.FABRICATION, elsewhere
    return FailureMode.OK, elsewhere


def label_trace(ev: Evidence, gen: GroundingResult | None, *, answer: str | None = None,
                reference: str | None = None) -> TraceLabel:
    """All labels of one query. ``gen`` is None when only retrieval stages are audited. With a
    ``reference`` answer, ``pass``/``score`` measure ``answer``'s correctness against it."""
    retrieval = retrieval_label(ev)
    ranking = ranking_label(ev, retrieval)
    mode, elsewhere = primary_mode(retrieval, ranking, gen, ev.gold)
    passed, score, basis = answer_correctness(gen, answer, reference)
    refusal_justified = None
    if gen is not None and gen.abstained and retrieval.gold_in_context is not None:
        refusal_justified = not retrieval.gold_in_context
    if ev.gold is None:
        metrics: dict[str, float | None] = dict.fromkeys(LIST_MEASURES)
    else:
        metrics = query_measures(list(ev.ranked), dict.fromkeys(ev.gold, 1), LIST_MEASURES)
    metrics["token_f1"] = None
    if basis is ScoreBasis.REFERENCE and score is not None and answer and reference:
        metrics["token_f1"] = token_f1(answer, reference)
    # Retrieval-decided modes rest on G; generation-decided ones on the grounding labeller too.
    confidence = ev.gold_confidence if ev.gold is not None else 1.0
    if gen is not None and mode is not FailureMode.RETRIEVAL_GAP and not (mode is FailureMode.RANK_INVERSION
                                                                          and not retrieval.gold_in_context):
        confidence = min(confidence, gen.confidence)
    return TraceLabel(retrieval, ranking, gen, mode, passed, score, round(confidence, 6), refusal_justified,
                      metrics, elsewhere, basis)


def generation_class(record: Mapping[str, Any]) -> str | None:
    """The contingency's third dimension of a per-trace record: entailed / not_entailed / abstained."""
    gen = record.get("generation")
    if not gen:
        return None
    if gen.get("abstained"):
        return "abstained"
    return "entailed" if gen.get("verdict") == "entailed" else "not_entailed"


def contingency(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The 2 × 2 × 3 table over per-trace records: gold in pool × gold in context × generation
    (entailed / not_entailed = neutral or contradicted / abstained).

    Traces whose relevance is unknown, or whose generation was not labelled, are counted apart
    (``n_unknown_gold``, ``n_unlabelled_generation``) rather than dropped into a cell.
    """
    counts: dict[tuple[bool, bool, str], int] = {}
    unknown_gold = unlabelled = 0
    for rec in records:
        in_pool, in_ctx = rec.get("gold_in_pool"), rec.get("gold_in_context")
        if in_pool is None or in_ctx is None:
            unknown_gold += 1
            continue
        cls = generation_class(rec)
        if cls is None:
            unlabelled += 1
            continue
        key = (bool(in_pool), bool(in_ctx), cls)
        counts[key] = counts.get(key, 0) + 1
    total = sum(counts.values())
    cells = []
    for pool_flag in (True, False):
        for ctx_flag in (True, False):
            for cls in GENERATION_CLASSES:
                n = counts.get((pool_flag, ctx_flag, cls), 0)
                cells.append({"gold_in_pool": pool_flag, "gold_in_context": ctx_flag, "generation": cls,
                              "n": n, "rate": n / total if total else None})
    return {
        "dimensions": ["gold_in_pool", "gold_in_context", "generation"],
        "generation_classes": list(GENERATION_CLASSES),
        "n": total,
        "cells": cells,
        "n_unknown_gold": unknown_gold,
        "n_unlabelled_generation": unlabelled,
    }
