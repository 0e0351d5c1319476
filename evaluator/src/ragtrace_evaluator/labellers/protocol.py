"""The labeller protocols: grounding (is the answer supported by the supplied passages?) and
relevance (does a passage answer the query?). Every labeller is injectable and describes itself in
a manifest, so each label it produces can be traced to the model, thresholds and code behind it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

ClaimVerdictName = Literal["entailed", "neutral", "contradicted"]
GenerationVerdict = Literal["entailed", "neutral", "contradicted", "abstained"]
#: what the claim extractor found: claims, a refusal, only claim-less chatter, or nothing
AnswerKind = Literal["claims", "abstention", "generic", "empty"]

#: confidence given to rule-based outcomes that make no claim (see no_claim_result)
NO_CLAIM_CONFIDENCE: dict[str, float] = {"abstention": 0.9, "generic": 0.8, "empty": 1.0}


@dataclass(frozen=True)
class Passage:
    """One supplied passage. ``id`` is the document id; ``text`` may be empty when only a hash was sent."""

    id: str
    text: str


@dataclass(frozen=True)
class ClaimVerdict:
    """One atomic claim of an answer and the labeller's judgement of it."""

    claim: str
    verdict: ClaimVerdictName
    #: support probability in [0, 1] from the best passage
    support: float
    #: probability that the best-contradicting passage contradicts the claim, in [0, 1]
    contradiction: float
    #: index into the passages of the best supporting (or contradicting) passage; None if none scored
    passage_index: int | None
    passage_id: str | None
    #: how strongly contradiction lowers the ranking score (``entailment``): a labeller may fit it
    #: (the offline one reads it from its artefact); 1 = a certain contradiction leaves no support
    contradiction_weight: float = 1.0

    @property
    def entailment(self) -> float:
        """support × (1 − contradiction_weight · contradiction): one score in [0, 1] for ranking claims
        (1 = grounded)."""
        return self.support * (1.0 - self.contradiction_weight * self.contradiction)


@dataclass(frozen=True)
class GroundingResult:
    """The generation label of one answer.

    ``groundedness`` is the share of claims entailed, and is None (undefined, never 0 or 1) when
    the answer abstains or makes no claim. ``confidence`` is the labeller's confidence in
    ``verdict``, in [0, 1].
    """

    verdict: GenerationVerdict
    claims: tuple[ClaimVerdict, ...]
    groundedness: float | None
    abstained: bool
    confidence: float
    #: ``"generic"`` and ``"empty"`` answers have verdict "neutral", no claims and groundedness None;
    #: an ``"abstention"`` has verdict "abstained"
    kind: AnswerKind = "claims"
    #: a ``"generic"`` answer's whole text judged as one claim (its entailment), when the labeller
    #: does that: it only ranks the answer (``score``); verdict and groundedness still say "no claim"
    text_score: float | None = None

    @property
    def score(self) -> float | None:
        """The weakest claim's entailment score (an answer is as grounded as its worst claim); for
        an answer without claims its ``text_score`` (None for abstentions and when not judged)."""
        if not self.claims:
            return self.text_score
        return min(c.entailment for c in self.claims)


def no_claim_result(kind: AnswerKind, text_score: float | None = None) -> GroundingResult:
    """The label of an answer with no claim: undefined groundedness, never 0 or 1 (``text_score``:
    see :class:`GroundingResult`; only for a generic answer)."""
    if kind == "claims":
        raise ValueError("no_claim_result is for answers without claims; kind must not be 'claims'")
    if text_score is not None and kind != "generic":
        raise ValueError(f"text_score is for generic answers only, not {kind!r} ones")
    abstained = kind == "abstention"
    return GroundingResult(verdict="abstained" if abstained else "neutral", claims=(), groundedness=None,
                           abstained=abstained, confidence=NO_CLAIM_CONFIDENCE[kind], kind=kind,
                           text_score=text_score)


def answer_verdict(claims: Sequence[ClaimVerdict]) -> GenerationVerdict:
    """The answer's verdict from its claims': contradicted if any claim is, entailed if all are,
    else neutral."""
    names = [c.verdict for c in claims]
    if "contradicted" in names:
        return "contradicted"
    return "entailed" if all(n == "entailed" for n in names) else "neutral"


def aggregate_claims(claims: Sequence[ClaimVerdict], support_threshold: float = 0.5) -> GroundingResult:
    """Answer-level label from claim verdicts: contradicted if any claim is, entailed if all are,
    else neutral; groundedness = share of entailed claims; confidence = the least confident claim's
    ``|entailment − threshold|`` rescaled to [0, 1]."""
    if not claims:
        return no_claim_result("generic")
    verdict = answer_verdict(claims)
    span = max(support_threshold, 1.0 - support_threshold)
    confidence = min(min(1.0, abs(c.entailment - support_threshold) / span) for c in claims)
    return GroundingResult(verdict=verdict, claims=tuple(claims),
                           groundedness=sum(c.verdict == "entailed" for c in claims) / len(claims), abstained=False,
                           confidence=round(confidence, 6), kind="claims")


@runtime_checkable
class GroundingLabeller(Protocol):
    """Judges an answer against the passages supplied to the generator."""

    def manifest(self) -> dict[str, Any]:
        """kind, model_id, revision or file_hash, thresholds, formula_version."""
        ...

    def judge(self, answer: str, passages: Sequence[Passage]) -> GroundingResult: ...

    def judge_many(self, items: Sequence[tuple[str, Sequence[Passage]]]) -> list[GroundingResult]: ...


@runtime_checkable
class RelevanceLabeller(Protocol):
    """Judges whether each passage answers the query, when no gold labels exist."""

    def manifest(self) -> dict[str, Any]: ...

    def relevance(self, query: str, passages: Sequence[Passage],
                  reference: str | None = None) -> list[float]:
        """A relevance score in [0, 1] per passage; ``reference`` is a reference answer if known."""
        ...

    @property
    def threshold(self) -> float:
        """Scores at or above this are relevant."""
        ...


# -- factories ------------------------------------------------------------------------------------
# Implementations are imported lazily: this module stays importable without torch/transformers.
