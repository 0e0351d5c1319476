"""The labels of one audited trace as OpenTelemetry GenAI evaluation results.

One `LabelRecord` holds several labels; each becomes one ``gen_ai.evaluation.result`` event (the
OpenTelemetry GenAI semantic conventions: an event, i.e. a log record with an event name, parented
to the span it judges) named by what it judges:

==========================  ===================================  ==========================================
``gen_ai.evaluation.name``  ``score.label``                      ``score.value``
==========================  ===================================  ==========================================
``ragtrace.failure_mode``   the mode (``retrieval_gap`` ...      none (a category, not a quantity)
                            ``ok``, or ``incomplete``)
``ragtrace.pass``           ``pass`` / ``fail``                  the end-to-end score in [0, 1], when defined
``ragtrace.groundedness``   the answer's verdict (``entailed``,  the share of its claims the supplied
                            ``neutral``, ``contradicted``,       passages support, when defined
                            ``abstained``)
``ragtrace.gold_in_context`` ``gold_in_context`` /               1 or 0
                            ``gold_not_in_context``
==========================  ===================================  ==========================================

A label that is unknown for a trace (no generation judged, gold unknown) is not sent: an absent
event means "not judged", never a guessed 0. An incomplete trace gets its failure-mode event only,
with its reasons as the explanation. Every event carries the labeller manifest id, the tenant and
the query id; its resource is the judged trace's service and release.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from ragtrace import semconv as sc
from ragtrace_store import ClaimRecord, ClaimVerdict, FailureMode, LabelRecord

#: ``gen_ai.evaluation.name`` of each label
FAILURE_MODE: Final = "ragtrace.failure_mode"
PASS: Final = "ragtrace.pass"
GROUNDEDNESS: Final = "ragtrace.groundedness"
GOLD_IN_CONTEXT: Final = "ragtrace.gold_in_context"
EVALUATION_NAMES: Final = (FAILURE_MODE, PASS, GROUNDEDNESS, GOLD_IN_CONTEXT)

#: OTLP identifiers are fixed-width lower-case hex: 16 bytes for a trace, 8 for a span
_TRACE_ID_HEX, _SPAN_ID_HEX = 32, 16


@dataclass(frozen=True)
class EvaluationEvent:
    """One ``gen_ai.evaluation.result`` event: the trace and span it judges, what it says, and the
    resource (service, release) it is reported under."""

    trace_id: str
    span_id: str
    service: str
    release: str
    #: the log record's attributes (`ragtrace.semconv` names); values are str, float or int
    attributes: dict[str, str | float | int] = field(hash=False)


def is_otlp_id(value: str, width: int) -> bool:
    """A non-zero lower- or upper-case hex id of ``width`` digits (what OTLP can carry)."""
    if len(value) != width:
        return False
    try:
        return int(value, 16) != 0
    except ValueError:
        return False


def evaluation_events(record: LabelRecord, *, span_id: str, tenant: str) -> list[EvaluationEvent]:
    """The events of one label record, attached to ``record.trace_id`` and ``span_id`` (the query's
    root span). Empty when either id is not one OTLP can carry (a trace imported from a file with
    made-up ids): such a label has no trace in any backend to sit beside."""
    if not is_otlp_id(record.trace_id, _TRACE_ID_HEX) or not is_otlp_id(span_id, _SPAN_ID_HEX):
        return []
    common: dict[str, str | float | int] = {sc.EVALUATION_MANIFEST_ID: record.manifest_id,
                                            sc.EVALUATION_TENANT: tenant}
    if record.query_id:
        common[sc.QUERY_ID] = record.query_id

    def event(name: str, label: str, value: float | None, explanation: str,
              confidence: float | None = None) -> EvaluationEvent:
        attrs: dict[str, str | float | int] = {sc.GEN_AI_EVALUATION_NAME: name,
                                               sc.GEN_AI_EVALUATION_SCORE_LABEL: label, **common}
        if value is not None:
            attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE] = float(value)
        if explanation:
            attrs[sc.GEN_AI_EVALUATION_EXPLANATION] = explanation
        if confidence is not None:
            attrs[sc.EVALUATION_CONFIDENCE] = float(confidence)
        return EvaluationEvent(record.trace_id.lower(), span_id.lower(), record.service, record.release, attrs)

    out = [event(FAILURE_MODE, record.failure_mode.value, None, failure_mode_explanation(record), record.confidence)]
    if record.is_incomplete:
        return out
    basis = f"measured against the {record.score_basis.value}" if record.score_basis is not None else ""
    out.append(event(PASS, "pass" if record.passed else "fail", record.score,
                     f"end-to-end score {basis}".strip() if record.score is not None else basis))
    gen = record.generation
    if gen is not None:
        out.append(event(GROUNDEDNESS, gen.verdict.value, gen.groundedness, _claims_explanation(gen.claims),
                         gen.confidence))
    if record.gold_in_context is not None:
        source = record.retrieval.gold_source.value
        out.append(event(GOLD_IN_CONTEXT, "gold_in_context" if record.gold_in_context else "gold_not_in_context",
                         1.0 if record.gold_in_context else 0.0,
                         f"{record.retrieval.n_gold} gold passage(s), from {source}"))
    return out


def failure_mode_explanation(record: LabelRecord) -> str:
    """Why this trace got its failure mode, from what its record holds."""
    mode = record.failure_mode
    if mode is FailureMode.INCOMPLETE:
        return "not labelled: " + "; ".join(record.incomplete_reasons)
    ranking = record.ranking
    if mode is FailureMode.RETRIEVAL_GAP:
        return (f"none of the {record.retrieval.n_gold} gold passage(s) was among the retrieved candidates "
                f"(gold from {record.retrieval.gold_source.value})")
    if mode is FailureMode.RANK_INVERSION:
        where = []
        if ranking.best_gold_rank is not None:
            where.append(f"best gold at rank {ranking.best_gold_rank}")
        if ranking.best_distractor_rank is not None:
            where.append(f"a distractor at rank {ranking.best_distractor_rank}")
        detail = f" ({', '.join(where)}; ranks from 0)" if where else ""
        return f"gold was retrieved but ranked below distractors or out of the context{detail}"
    gen = record.generation
    if mode is FailureMode.UNDER_USE:
        if gen is not None and gen.abstained:
            return "gold was in the context but the answer declined"
        if gen is not None and gen.grounded_elsewhere:
            return "gold was in the context but the answer rests on other passages"
        return "gold was in the context but the answer did not use it"
    if mode is FailureMode.FABRICATION:
        return "the answer makes claims no supplied passage supports" + (
            f": {_claims_explanation(gen.claims)}" if gen is not None and gen.claims else "")
    return "retrieval, ranking and the answer passed every check"


def _claims_explanation(claims: Sequence[ClaimRecord]) -> str:
    if not claims:
        return ""
    supported = sum(1 for c in claims if c.verdict is ClaimVerdict.ENTAILED)
    contradicted = sum(1 for c in claims if c.verdict is ClaimVerdict.CONTRADICTED)
    text = f"{supported} of {len(claims)} claim(s) supported by the supplied passages"
    return text + (f", {contradicted} contradicted" if contradicted else "")
