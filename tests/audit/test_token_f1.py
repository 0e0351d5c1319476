"""Token F1 against the reference answer: the surface axis the audit records beside groundedness."""

from __future__ import annotations

import pytest

from ragtrace_evaluator.audit.failure_modes import Evidence, label_trace, token_f1
from ragtrace_evaluator.labellers.protocol import ClaimVerdict, GroundingResult
from ragtrace_store import METRIC_NAMES, GoldSource


@pytest.mark.parametrize(("answer", "reference", "expected"), [
    # the SQuAD definition over content tokens: precision 1/4, recall 1/1
    ("The firm employs 1,465 staff.", "1465", 2 * 0.25 * 1.0 / 1.25),
    ("Velmora Dynamics was founded in 1931.", "Velmora Dynamics was founded in 1931.", 1.0),
    ("founded 1931 Velmora", "Velmora Dynamics founded 1931", 2 * 1.0 * 0.75 / 1.75),
    ("It was founded in 1942.", "1931", 0.0),
    # repeated tokens count as often as they occur (multisets)
    ("river river river", "river bank", 2 * (1 / 3) * 0.5 / ((1 / 3) + 0.5)),
])
def test_token_f1(answer: str, reference: str, expected: float) -> None:
    assert token_f1(answer, reference) == pytest.approx(expected, abs=1e-12)


def test_a_reference_without_tokens_decides_nothing() -> None:
    assert token_f1("anything", "  ...  ") is None


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
