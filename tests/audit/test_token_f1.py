"""Token F1 against the reference answer (`ragtrace_evaluator.metrics.token_f1`, tested in
tests/metrics/test_token_f1.py): the surface axis the audit records beside groundedness."""

from __future__ import annotations

import pytest

from ragtrace_evaluator.audit.failure_modes import Evidence, label_trace
from ragtrace_evaluator.labellers.protocol import ClaimVerdict, GroundingResult
from ragtrace_store import METRIC_NAMES, GoldSource


def _gen(abstained: bool = False) -> GroundingResult:
    if abstained:
        return GroundingResult("abstained", (), None, True, 0.9)
    c = ClaimVerdict("The firm employs 1,465 staff.", "entailed", 0.95, 0.0, 0, "g")
    return GroundingResult("entailed", (c,), 1.0, False, 0.8)


EV = Evidence(("g", "a"), ("g", "a"), ("g",), frozenset({"g"}), GoldSource.QRELS)


def test_label_records_carry_token_f1_only_when_a_reference_decides_it() -> None:
    assert "token_f1" in METRIC_NAMES
    rec = label_trace(EV, _gen(), answer="The firm employs 1,465 staff.", reference="1465").to_record(
        trace_id="t", query_id="q", release="r", service="s", manifest_id="m")
    assert rec.metrics["token_f1"] == pytest.approx(0.4)
    # no reference, an abstention, or no judged answer: undefined, never 0
    for kwargs, gen in (({"answer": "The firm employs 1,465 staff.", "reference": None}, _gen()),
                        ({"answer": "I cannot answer that.", "reference": "1465"}, _gen(abstained=True)),
                        ({"answer": "x", "reference": "1465"}, None)):
        rec = label_trace(EV, gen, **kwargs).to_record(trace_id="t", query_id="q", release="r", service="s",
                                                       manifest_id="m")
        assert rec.metrics["token_f1"] is None
    # a reference without words decides no token F1 (undefined, not 0)
    rec = label_trace(EV, _gen(), answer="The firm employs 1,465 staff.", reference="The.").to_record(
        trace_id="t", query_id="q", release="r", service="s", manifest_id="m")
    assert rec.metrics["token_f1"] is None
