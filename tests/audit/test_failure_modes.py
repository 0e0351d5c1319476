"""Failure-mode precedence, ranking and quality rules on hand-built evidence and verdicts."""

from __future__ import annotations

import pytest

from ragtrace_evaluator.audit.failure_modes import Evidence, contingency, label_trace
from ragtrace_evaluator.audit.summary import wilson_interval
from ragtrace_evaluator.labellers.protocol import ClaimVerdict, GroundingResult


def claim(verdict: str, pid: str | None, support: float = 0.9) -> ClaimVerdict:
    return ClaimVerdict("c", verdict, support, 0.9 if verdict == "contradicted" else 0.0,  # type: ignore[arg-type]
                        0, pid)


def gen(*claims: ClaimVerdict) -> GroundingResult:
    verdicts = [c.verdict for c in claims]
    overall = ("contradicted" if "contradicted" in verdicts else
               "entailed" if all(v == "entailed" for v in verdicts) else "neutral")
    n_ent = sum(v == "entailed" for v in verdicts)
    return GroundingResult(overall, tuple(claims), n_ent / len(claims) if claims else None, False, 0.7)  # type: ignore[arg-type]


ABSTAIN = GroundingResult("abstained", (), None, True, 0.95)
GENERIC = GroundingResult("neutral", (), None, False, 0.6)


def ev(pool: list[str], ranked: list[str], ctx: list[str], gold: set[str] | None = frozenset({"g"})) -> Evidence:  # type: ignore[assignment]
    return Evidence(tuple(pool), tuple(ranked), tuple(ctx), None if gold is None else frozenset(gold), "span")


CLEAN = ev(["g", "a", "b"], ["g", "a", "b"], ["g", "a"])


@pytest.mark.parametrize(("evidence", "result", "mode"), [
    # retrieval_gap beats everything, even a perfectly grounded answer
    (ev(["a", "b"], ["a", "b"], ["a"]), gen(claim("entailed", "a")), "retrieval_gap"),
    (ev(["a", "b"], ["a", "b"], ["a"]), gen(claim("contradicted", "a")), "retrieval_gap"),
    # gold in pool but not in context: rank_inversion, whatever the answer
    (ev(["a", "b", "g"], ["a", "b", "g"], ["a", "b"]), gen(claim("entailed", "a")), "rank_inversion"),
    (ev(["a", "b", "g"], ["a", "b", "g"], ["a", "b"]), ABSTAIN, "rank_inversion"),
    # gold in context below a distractor, answer built on the distractor
    (ev(["a", "g"], ["a", "g"], ["a", "g"]), gen(claim("entailed", "a")), "rank_inversion"),
    # a failing answer with the gold in C is a generation failure, whatever the order inside C
    (ev(["a", "g"], ["a", "g"], ["a", "g"]), gen(claim("contradicted", "g")), "fabrication"),
    (ev(["a", "g"], ["a", "g"], ["a", "g"]), ABSTAIN, "under_use"),
    # ... but an answer that uses the gold passage despite the inversion is fine
    (ev(["a", "g"], ["a", "g"], ["a", "g"]), gen(claim("entailed", "g")), "ok"),
    # under_use: gold in C (ranked well) but abstains / generic / grounded elsewhere
    (CLEAN, ABSTAIN, "under_use"),
    (CLEAN, GENERIC, "under_use"),
    (CLEAN, gen(claim("entailed", "a")), "under_use"),
    # under_use precedes fabrication when both apply
    (CLEAN, gen(claim("entailed", "a"), claim("neutral", None, 0.2)), "under_use"),
    # fabrication: unsupported or contradicted claims
    (CLEAN, gen(claim("entailed", "g"), claim("neutral", None, 0.2)), "fabrication"),
    (CLEAN, gen(claim("contradicted", "g")), "fabrication"),
    (CLEAN, gen(claim("entailed", "g"), claim("entailed", "a")), "ok"),
    # unknown relevance: only generation-decided modes
    (ev(["a"], ["a"], ["a"], gold=None), gen(claim("contradicted", "a")), "fabrication"),
    (ev(["a"], ["a"], ["a"], gold=None), ABSTAIN, "ok"),
    # retrieval-only audit
    (CLEAN, None, "ok"),
    (ev(["a", "g"], ["a", "g"], ["a"]), None, "rank_inversion"),
])
def test_precedence(evidence: Evidence, result: GroundingResult | None, mode: str) -> None:
    assert label_trace(evidence, result).failure_mode == mode


def test_ranking_label() -> None:
    lab = label_trace(ev(["a", "b", "g"], ["a", "b", "g"], ["a", "b"]), None)
    assert (lab.ranking.ok, lab.ranking.best_gold_rank, lab.ranking.best_distractor_rank) == (False, 2, 0)
    assert label_trace(CLEAN, None).ranking.ok is True
    gap = label_trace(ev(["a"], ["a"], ["a"]), None)
    assert gap.ranking.ok is None and gap.retrieval.gold_in_pool is False
    only_gold = label_trace(ev(["g"], ["g"], ["g"]), None)
    assert only_gold.ranking.ok is True and only_gold.ranking.best_distractor_rank is None


def test_quality_is_independent_of_gold_and_undefined_for_abstention() -> None:
    gap = label_trace(ev(["a"], ["a"], ["a"]), gen(claim("entailed", "a", 0.8), claim("entailed", "a", 1.0)))
    assert gap.passed is True and gap.score == pytest.approx(0.9)
    contra = label_trace(CLEAN, gen(claim("entailed", "g", 1.0), claim("contradicted", "g", 0.7)))
    assert contra.passed is False and contra.score == pytest.approx(0.5)  # contradicted counts 0
    abst = label_trace(CLEAN, ABSTAIN)
    assert (abst.passed, abst.score, abst.refusal_justified) == (False, None, False)
    justified = label_trace(ev(["a", "g"], ["a", "g"], ["a"]), ABSTAIN)
    assert justified.refusal_justified is True
    unknown = label_trace(ev(["a"], ["a"], ["a"], gold=None), ABSTAIN)
    assert unknown.refusal_justified is None


def test_per_trace_record_and_metrics() -> None:
    lab = label_trace(ev(["a", "g", "b"], ["a", "g", "b"], ["a", "g"]), gen(claim("entailed", "g")))
    rec = lab.record(trace_id="t", query_id="q", release="r", service="s", manifest_id="m")
    assert rec["metrics"]["recip_rank"] == 0.5 and rec["metrics"]["recall_5"] == 1.0
    assert rec["metrics"]["precision_5"] == pytest.approx(0.2) and rec["metrics"]["success_5"] == 1.0
    assert rec["generation"]["claims"][0]["passage_id"] == "g"
    assert rec["pass"] is True and rec["failure_mode"] == "ok"
    unknown = label_trace(ev(["a"], ["a"], ["a"], gold=None), None).record(
        trace_id="t", query_id="", release="r", service="s", manifest_id="m")
    assert unknown["metrics"]["recall_5"] is None and unknown["gold_in_pool"] is None


def test_contingency_counts_unknown_apart() -> None:
    recs = [label_trace(e, g).record(trace_id=str(i), query_id="", release="r", service="s", manifest_id="m")
            for i, (e, g) in enumerate([(CLEAN, ABSTAIN), (CLEAN, gen(claim("entailed", "g"))),
                                        (ev(["a"], ["a"], ["a"]), gen(claim("neutral", None))),
                                        (ev(["a"], ["a"], ["a"], gold=None), ABSTAIN), (CLEAN, None)])]
    table = contingency(recs)
    cells = {(c["gold_in_pool"], c["gold_in_context"], c["generation"]): c["n"] for c in table["cells"]}
    assert cells[(True, True, "abstained")] == 1 and cells[(True, True, "entailed")] == 1
    assert cells[(False, False, "not_entailed")] == 1
    assert table["n"] == 3 and table["n_unknown_gold"] == 1 and table["n_unlabelled_generation"] == 1


def test_wilson_against_known_values() -> None:
    # textbook values: 0/10 -> [0, 0.2775]; 5/10 -> [0.2366, 0.7634]
    lo, hi = wilson_interval(0, 10)  # type: ignore[misc]
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-4)
    lo, hi = wilson_interval(5, 10)  # type: ignore[misc]
    assert (lo, hi) == (pytest.approx(0.23659, abs=1e-4), pytest.approx(0.76341, abs=1e-4))
    assert wilson_interval(0, 0) is None


def test_reference_answer_scores_correctness_not_grounding() -> None:
    from ragtrace_evaluator.audit.failure_modes import REFERENCE_PASS_THRESHOLD, reference_recall

    grounded = gen(claim("entailed", "a", 1.0))
    # grounded in the wrong passage: passes on grounding, fails against the reference
    gap = ev(["a"], ["a"], ["a"])
    no_ref = label_trace(gap, grounded, answer="The town lies at an elevation of 271 metres.")
    assert (no_ref.passed, no_ref.score, no_ref.score_basis) == (True, pytest.approx(1.0), "grounding")
    wrong = label_trace(gap, grounded, answer="The town lies at an elevation of 271 metres.", reference="1,465")
    assert (wrong.passed, wrong.score, wrong.score_basis) == (False, 0.0, "reference")
    assert wrong.failure_mode == no_ref.failure_mode == "retrieval_gap"  # precedence untouched
    right = label_trace(CLEAN, grounded, answer="It sits 1465 metres above sea level.", reference="1,465")
    assert (right.passed, right.score, right.score_basis) == (True, 1.0, "reference")
    # the share of the reference's content tokens; function words and case do not count
    half = label_trace(CLEAN, grounded, answer="The mayor is Wanda Smith.", reference="Wanda Stupoux")
    assert half.score == 0.5 and half.passed is (REFERENCE_PASS_THRESHOLD <= 0.5)
    assert reference_recall("It received the Sattler prize", "The Sattler Prize") == 1.0
    # most of the wording but the wrong number: the score says how much, the number decides pass
    number = label_trace(CLEAN, grounded, answer="It lies 271 metres high.", reference="1,465 metres")
    assert number.score == 0.5 and number.passed is False
    assert reference_recall("anything", "  ") is None
    # abstentions stay undefined; a reference without content tokens falls back to grounding
    abst = label_trace(CLEAN, ABSTAIN, answer="I don't know.", reference="1,465")
    assert (abst.passed, abst.score, abst.score_basis) == (False, None, "reference")
    punct = label_trace(CLEAN, grounded, answer="x", reference="?!")
    assert punct.score_basis == "grounding"
    # a retrieval-only audit does not judge the answer
    assert label_trace(CLEAN, None, answer="1465", reference="1465").score_basis is None
    rec = wrong.record(trace_id="t", query_id="q", release="r", service="s", manifest_id="m")
    assert rec["score_basis"] == "reference" and rec["score"] == 0.0 and rec["pass"] is False
