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
