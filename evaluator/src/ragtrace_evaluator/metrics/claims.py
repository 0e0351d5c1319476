"""RAGChecker's claim-level metrics computed from entailment verdicts.

Inputs are the checker's verdict matrices (``"Entailment"`` / ``"Neutral"`` / ``"Contradiction"``,
case-insensitive; only entailment counts as support):

- ``answer2response[i]``: is response claim i entailed by the gold answer (correct)?
- ``response2answer[j]``: is gold-answer claim j entailed by the response?
- ``retrieved2response[i][c]``: is response claim i entailed by retrieved chunk c?
- ``retrieved2answer[j][c]``: is gold-answer claim j entailed by retrieved chunk c?

A chunk is *relevant* when it entails at least one gold-answer claim. Every value is a share in
[0, 1] or None when its denominator is empty (no response claims, no gold claims, no chunks, no
gold claim covered by the context): undefined, never 0 or 1. Each result keeps the counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

ENTAILMENT = "entailment"


class ClaimMatrixError(ValueError):
    """The verdict matrices do not fit together (wrong lengths, unknown verdicts)."""


_VALID = {"entailment", "neutral", "contradiction"}


def _entailed(verdict: str) -> bool:
    v = verdict.strip().lower()
    if v not in _VALID:
        raise ClaimMatrixError(f"unknown verdict {verdict!r}: use Entailment, Neutral or Contradiction")
    return v == ENTAILMENT


def _share(num: int, den: int) -> float | None:
    return num / den if den else None


@dataclass(frozen=True)
class ClaimMetrics:
    """RAGChecker's per-example metrics (shares in [0, 1]; None = undefined) and the counts behind them."""

    precision: float | None
    recall: float | None
    f1: float | None
    claim_recall: float | None
    context_precision: float | None
    context_utilization: float | None
    noise_sensitivity_in_relevant: float | None
    noise_sensitivity_in_irrelevant: float | None
    hallucination: float | None
    self_knowledge: float | None
    faithfulness: float | None
    n_response_claims: int
    n_answer_claims: int
    n_chunks: int

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def claim_metrics(
    answer2response: Sequence[str],
    response2answer: Sequence[str],
    retrieved2response: Sequence[Sequence[str]],
    retrieved2answer: Sequence[Sequence[str]],
) -> ClaimMetrics:
    """All of RAGChecker's metrics for one example. Raises `ClaimMatrixError` on inconsistent input."""
    n_resp, n_ans = len(answer2response), len(response2answer)
    if len(retrieved2response) != n_resp:
        raise ClaimMatrixError(
            f"retrieved2response has {len(retrieved2response)} rows but answer2response has {n_resp} "
            "response claims: one row per response claim"
        )
    if len(retrieved2answer) != n_ans:
        raise ClaimMatrixError(
            f"retrieved2answer has {len(retrieved2answer)} rows but response2answer has {n_ans} "
            "gold-answer claims: one row per gold claim"
        )
    widths = {len(r) for r in (*retrieved2response, *retrieved2answer)}
    if len(widths) > 1:
        raise ClaimMatrixError(f"chunk matrices have rows of different lengths {sorted(widths)}: one column per chunk")
    n_chunks = widths.pop() if widths else 0

    correct = [_entailed(v) for v in answer2response]  # response claim is in the gold answer
    recalled = [_entailed(v) for v in response2answer]  # gold claim is in the response
    resp_by_chunk = [[_entailed(v) for v in row] for row in retrieved2response]
    ans_by_chunk = [[_entailed(v) for v in row] for row in retrieved2answer]

    relevant_chunk = [any(row[c] for row in ans_by_chunk) for c in range(n_chunks)]
    resp_in_context = [any(row) for row in resp_by_chunk]
    resp_in_relevant = [any(row[c] for c in range(n_chunks) if relevant_chunk[c]) for row in resp_by_chunk]
    resp_in_irrelevant = [any(row[c] for c in range(n_chunks) if not relevant_chunk[c]) for row in resp_by_chunk]
    ans_in_context = [any(row) for row in ans_by_chunk]

    precision = _share(sum(correct), n_resp)
    recall = _share(sum(recalled), n_ans)
    if precision is None or recall is None:
        f1 = None
    else:
        f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return ClaimMetrics(
        precision=precision,
        recall=recall,
        f1=f1,
        claim_recall=_share(sum(ans_in_context), n_ans),
        context_precision=_share(sum(relevant_chunk), n_chunks),
        # of the gold claims the context covers, how many did the response use
        context_utilization=_share(sum(1 for j in range(n_ans) if ans_in_context[j] and recalled[j]),
                                   sum(ans_in_context)),
        noise_sensitivity_in_relevant=_share(
            sum(1 for i in range(n_resp) if not correct[i] and resp_in_relevant[i]), n_resp),
        noise_sensitivity_in_irrelevant=_share(
            sum(1 for i in range(n_resp) if not correct[i] and resp_in_irrelevant[i] and not resp_in_relevant[i]),
            n_resp),
        hallucination=_share(sum(1 for i in range(n_resp) if not correct[i] and not resp_in_context[i]), n_resp),
        self_knowledge=_share(sum(1 for i in range(n_resp) if correct[i] and not resp_in_context[i]), n_resp),
        faithfulness=_share(sum(resp_in_context), n_resp),
        n_response_claims=n_resp,
        n_answer_claims=n_ans,
        n_chunks=n_chunks,
    )


def mean_claim_metrics(results: Sequence[ClaimMetrics]) -> dict[str, tuple[float | None, int]]:
    """Mean of each metric over examples where it is defined: ``{name: (mean or None, n_defined)}``."""
    names = [k for k in ClaimMetrics.__dataclass_fields__ if not k.startswith("n_")]
    out: dict[str, tuple[float | None, int]] = {}
    for name in names:
        vals = [getattr(r, name) for r in results if getattr(r, name) is not None]
        out[name] = (sum(vals) / len(vals) if vals else None, len(vals))
    return out
