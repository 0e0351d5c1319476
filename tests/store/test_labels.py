"""The labels contract (`ragtrace_store.labels`): one reader and writer of the per-trace label record.

``data/audit-per-trace.jsonl`` was written by `run_audit` *before* the contract moved to the store
(the audit test scenario plus a non-ASCII claim, a trace without an answer, one without gold and
one scored against a reference answer; then the same traces with ``stages="retrieval"``). Files like
it must keep reading, byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, get_args

import pytest

import ragtrace_store
from ragtrace_store import (
    CLAIM_VERDICTS,
    FAILURE_MODES,
    GENERATION_VERDICTS,
    LABEL_COLUMNS,
    OUTCOMES,
    FailureMode,
    GenerationVerdict,
    LabelError,
    LabelRecord,
    read_label_lines,
    read_labels,
    write_label_lines,
    write_labels,
)

DATA = Path(__file__).parent / "data" / "audit-per-trace.jsonl"
LINES = [line for line in DATA.read_text(encoding="utf-8").splitlines() if line]


def _records() -> list[LabelRecord]:
    return [LabelRecord.from_json(json.loads(line), f"{DATA.name}:{i}") for i, line in enumerate(LINES, 1)]


def _tenant() -> str:
    return f"labels-{uuid.uuid4().hex[:8]}"


def _times(records: list[LabelRecord]) -> dict[str, datetime]:
    t0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    ids = dict.fromkeys(r.trace_id for r in records)
    return {trace_id: t0 + timedelta(seconds=i) for i, trace_id in enumerate(ids)}


def _record(**changes: Any) -> dict[str, Any]:
    """A JSON object of the contract (the golden file's first line) with top-level changes."""
    return {**json.loads(LINES[0]), **changes}


# --- names ---------------------------------------------------------------------------------------------
def test_names_and_precedence_are_the_wire_values() -> None:
    assert FAILURE_MODES == ("retrieval_gap", "rank_inversion", "under_use", "fabrication", "ok")
    # the enum's order is the documented precedence; incomplete is an outcome, last and not a mode
    assert tuple(FailureMode)[:-1] == FAILURE_MODES and tuple(FailureMode)[-1] == FailureMode.INCOMPLETE
    assert (*FAILURE_MODES, "incomplete") == OUTCOMES
    assert CLAIM_VERDICTS == ("entailed", "neutral", "contradicted")
    assert GENERATION_VERDICTS[:3] == CLAIM_VERDICTS and GENERATION_VERDICTS[3] == "abstained"
    assert all(type(m) is str for m in FAILURE_MODES)  # plain strings: safe as dict keys for orjson
    assert LABEL_COLUMNS[0] == "tenant" and len(LABEL_COLUMNS) == 17


# --- JSON ----------------------------------------------------------------------------------------------
def test_files_written_by_the_audit_read_back_byte_for_byte(tmp_path: Path) -> None:
    records = _records()
    assert [r.to_json_line() for r in records] == LINES
    assert read_label_lines(DATA) == records
    out = tmp_path / "sub" / "again.jsonl"
    write_label_lines(out, records)
    assert out.read_bytes() == DATA.read_bytes()
    # what the file covers
    assert {r.failure_mode for r in records} == set(FailureMode) - {FailureMode.INCOMPLETE}
    assert any(r.generation is None for r in records) and any(r.score_basis == "reference" for r in records)
    assert any(not line.isascii() for line in LINES)  # written with ensure_ascii=False
    assert any(r.gold_in_pool is None for r in records)


def test_round_trip_record_json_record() -> None:
    for rec in _records():
        assert LabelRecord.from_json(json.loads(json.dumps(rec.to_json()))) == rec
    rec = _records()[0]
    assert rec.passed is True and rec.to_json()["pass"] is True
    assert rec.gold_in_context is rec.retrieval.gold_in_context


def test_the_audit_still_writes_the_same_lines(chdb_store: Any, tmp_path: Path) -> None:
    """Today's `run_audit` on the traces behind the golden file writes the same records (only the
    manifest id differs: it hashes the code version)."""
    from ragtrace_evaluator.audit.run import run_audit
    from tests.audit.fixtures import KeywordGrounding, Trace, scenario, write_traces

    tenant = _tenant()
    traces = list(scenario("golden").values())
    traces.append(Trace("golden-é", "r1", ["gold", "freeze"], ["gold", "freeze"],
                        "Water boils at 100 degrees Celsius at sea level. Café “crème” is 90 °C.", gold=["gold"],
                        query_id="Q-42"))
    traces.append(Trace("golden-noanswer", "r1", ["gold"], ["gold"], None, gold=["gold"]))
    traces.append(Trace("golden-nogold", "r1", ["freeze", "gold"], ["freeze"], "Water freezes at 0 degrees Celsius."))
    write_traces(chdb_store, tenant, traces)
    chdb_store.insert("reference_answers", [(tenant, "Q-42", "", "100 degrees Celsius", "import", datetime.now(UTC))],
                      ["tenant", "query_id", "trace_id", "reference", "source", "added_at"])
    full, retr = tmp_path / "full.jsonl", tmp_path / "retrieval.jsonl"
    run_audit(chdb_store, tenant=tenant, grounding=KeywordGrounding(), relevance_labeller=None, per_trace=full)
    run_audit(chdb_store, tenant=tenant, stages="retrieval", relevance_labeller=None, per_trace=retr)

    def normalised(lines: list[str]) -> list[dict[str, Any]]:
        return sorted(({**json.loads(x), "manifest_id": "m"} for x in lines), key=lambda r: r["trace_id"])

    written = full.read_text(encoding="utf-8").splitlines() + retr.read_text(encoding="utf-8").splitlines()
    assert normalised(written) == normalised(LINES)
    # and byte for byte once the manifest id is set aside
    golden = {(json.loads(x)["trace_id"], json.loads(x)["generation"] is None): x for x in LINES}
    for line in written:
        rec = json.loads(line)
        old = golden[(rec["trace_id"], rec["generation"] is None)]
        assert line.replace(rec["manifest_id"], "M") == old.replace(json.loads(old)["manifest_id"], "M")
    # the store rows read back as the records the file holds
    stored = read_labels(chdb_store, tenant=tenant)
    assert sorted(r.to_json_line() for r in stored) == sorted(written)


def test_unknown_top_level_keys_are_kept() -> None:
    rec = LabelRecord.from_json(_record(disagreement=True, harness={"run": 3}))
    assert rec.extra == {"disagreement": True, "harness": {"run": 3}}
    assert list(rec.to_json())[-2:] == ["disagreement", "harness"]
    assert LabelRecord.from_json(rec.to_json()) == rec


def test_older_records_without_later_fields_read() -> None:
    """Records of formula version 1 (no score_basis; generation without grounded_elsewhere/confidence)."""
    obj = _record()
    del obj["score_basis"]
    gen = dict(obj["generation"])
    del gen["grounded_elsewhere"], gen["confidence"]
    obj["generation"] = gen
    rec = LabelRecord.from_json(obj)
    assert rec.score_basis is None and rec.generation is not None and rec.generation.confidence is None
    # gold flags only under "retrieval" read too; the top level wins when both are given
    obj2 = _record(gold_in_context=False)
    del obj2["gold_in_pool"]
    rec2 = LabelRecord.from_json(obj2)
    assert rec2.gold_in_pool is True and rec2.gold_in_context is False


@pytest.mark.parametrize(("change", "message"), [
    ({"failure_mode": "hallucination"}, "'failure_mode' is 'hallucination', not one of retrieval_gap, rank_inversion"),
    ({"generation": {**json.loads(LINES[0])["generation"], "verdict": "maybe"}},
     "'generation.verdict' is 'maybe', not one of entailed, neutral, contradicted, abstained"),
    ({"generation": {**json.loads(LINES[0])["generation"],
                     "claims": [{"claim": "c", "verdict": "abstained", "support": 0.5, "contradiction": 0.0,
                                 "passage_id": None}]}},
     "'generation.claims[0].verdict' is 'abstained', not one of entailed, neutral, contradicted"),
    ({"retrieval": {"gold_in_pool": True, "gold_in_context": True, "n_gold": 1, "gold_source": "oracle"}},
     "'retrieval.gold_source' is 'oracle', not one of span, evidence, qrels, labeller, none"),
    ({"score_basis": "vibes"}, "'score_basis' is 'vibes', not one of reference, grounding"),
    ({"pass": "yes"}, "'pass' must be true or false, got 'yes'"),
    ({"score": 7}, "'score' is in [0, 1], got 7"),
    ({"trace_id": ""}, "'trace_id' must not be empty"),
    ({"ranking": {"ok": True, "best_gold_rank": -1, "best_distractor_rank": None}}, "'ranking.best_gold_rank'"),
    ({"ranking": {"ok": True, "best_gold_rank": 0, "best_distractor_rank": None, "rank": 3}},
     "unknown 'ranking.rank'"),
    ({"metrics": {"recall_5": "high"}}, "'metrics.recall_5' must be a finite number"),
])
def test_bad_values_name_the_field_and_the_fix(change: dict[str, Any], message: str) -> None:
    with pytest.raises(LabelError, match=r"^labels\.jsonl:3: ") as err:
        LabelRecord.from_json(_record(**change), "labels.jsonl:3")
    assert message in str(err.value)
    assert isinstance(err.value, ValueError) and isinstance(err.value, ragtrace_store.StoreError)


@pytest.mark.parametrize("missing", ["trace_id", "manifest_id", "failure_mode", "ranking", "pass", "confidence"])
def test_missing_fields_are_named(missing: str) -> None:
    obj = _record()
    del obj[missing]
    with pytest.raises(LabelError, match=f"missing '{missing}'"):
        LabelRecord.from_json(obj)


def test_missing_nested_fields_are_named() -> None:
    gen = dict(json.loads(LINES[0])["generation"])
    del gen["claims"]
    with pytest.raises(LabelError, match=r"missing 'generation\.claims'; the label record's generation has verdict"):
        LabelRecord.from_json(_record(generation=gen))
    with pytest.raises(LabelError, match="missing 'gold_in_context'"):
        LabelRecord.from_json({k: v for k, v in _record(retrieval={"n_gold": 0, "gold_source": "none"}).items()
                               if k != "gold_in_context"})


def test_not_an_object_and_built_in_code() -> None:
    with pytest.raises(LabelError, match="'record' must be a JSON object, got list"):
        LabelRecord.from_json([1, 2])
    # records built in code are checked too: an unknown name never gets into a record
    with pytest.raises(LabelError, match="'failure_mode' is 'nope'"):
        dataclasses.replace(_records()[0], failure_mode="nope")  # type: ignore[arg-type]


def test_bad_lines_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(LINES[0] + "\n\nnot json\n", encoding="utf-8")
    with pytest.raises(LabelError, match=r"bad.jsonl:3: not valid JSON"):
        read_label_lines(bad)
    bad.write_text(LINES[0] + "\n" + json.dumps(_record(failure_mode="x")) + "\n", encoding="utf-8")
    with pytest.raises(LabelError, match=r"bad.jsonl:2: 'failure_mode' is 'x'"):
        read_label_lines(bad)


# --- the labels table ----------------------------------------------------------------------------------
def test_round_trip_record_store_row_record(chdb_store: Any) -> None:
    tenant = _tenant()
    records = _records()
    assert write_labels(chdb_store, records, tenant=tenant, trace_times=_times(records)) == len(records)
    back = read_labels(chdb_store, tenant=tenant)
    assert sorted(back, key=lambda r: (r.manifest_id, r.trace_id)) == \
        sorted(records, key=lambda r: (r.manifest_id, r.trace_id))
    # filters, and the order: newest manifest first, then trace time
    full = next(r.manifest_id for r in records if r.generation is not None)
    only = read_labels(chdb_store, tenant=tenant, manifest_id=full, release="r1", service="qa",
                       trace_ids=["golden-ok", "golden-fab", "nowhere"])
    assert {r.trace_id for r in only} == {"golden-ok", "golden-fab"}
    assert read_labels(chdb_store, tenant=tenant, trace_ids=[]) == []
    assert read_labels(chdb_store, tenant=tenant + "-other") == []
    assert read_labels(chdb_store, tenant=tenant, release="r2") == []
    times = _times(records)
    manifests = [r.manifest_id for r in back]
    assert manifests == sorted(manifests, key=manifests.index)  # grouped by manifest
    first = [r for r in back if r.manifest_id == manifests[0]]
    assert [times[r.trace_id] for r in first] == sorted(times[r.trace_id] for r in first)


def test_a_newer_row_replaces_the_older_one(chdb_store: Any) -> None:
    tenant = _tenant()
    rec = _records()[0]
    t = {rec.trace_id: datetime(2026, 11, 1, tzinfo=UTC)}
    write_labels(chdb_store, [rec], tenant=tenant, trace_times=t, labelled_at=datetime(2026, 11, 2, tzinfo=UTC))
    newer = LabelRecord.from_json({**rec.to_json(), "failure_mode": "fabrication", "pass": False})
    write_labels(chdb_store, [newer], tenant=tenant, trace_times=t, labelled_at=datetime(2026, 11, 3, tzinfo=UTC))
    assert read_labels(chdb_store, tenant=tenant) == [newer]
    with pytest.raises(LabelError, match="no trace time given"):
        write_labels(chdb_store, [rec], tenant=tenant, trace_times={})


def test_a_bad_stored_row_names_the_row(chdb_store: Any) -> None:
    tenant = _tenant()
    rec = _records()[0]
    row = list(ragtrace_store.label_row(rec, tenant=tenant, trace_time=datetime(2026, 11, 1, tzinfo=UTC)))
    row[LABEL_COLUMNS.index("detail")] = "{not json"
    chdb_store.insert("labels", [tuple(row)], LABEL_COLUMNS)
    with pytest.raises(LabelError, match=f"labels row tenant={tenant} manifest_id=.* trace_id={rec.trace_id}: "
                                         "the detail column is not JSON"):
        read_labels(chdb_store, tenant=tenant)


# --- the consumers use these names -----------------------------------------------------------------------
def test_the_labeller_protocol_literals_are_the_contract_names() -> None:
    from ragtrace_evaluator.labellers import protocol

    assert get_args(protocol.ClaimVerdictName) == CLAIM_VERDICTS
    assert get_args(protocol.GenerationVerdict) == GENERATION_VERDICTS


def test_the_audit_uses_the_contract() -> None:
    from ragtrace_evaluator.audit.failure_modes import Evidence, label_trace
    from ragtrace_evaluator.audit.summary import summarise

    lab = label_trace(Evidence(("a",), ("a",), ("a",), frozenset({"g"}), "span"), None)
    assert lab.failure_mode is FailureMode.RETRIEVAL_GAP
    rec = lab.to_record(trace_id="t", query_id="q", release="r", service="s", manifest_id="m")
    assert LabelRecord.from_json(rec.to_json()) == rec
    report = summarise([r.to_json() for r in _records()], manifest={}, manifest_id="m")
    assert tuple(report["failure_modes"]) == FAILURE_MODES


@pytest.mark.parametrize("mode", FAILURE_MODES)
def test_compare_reads_every_mode(mode: str) -> None:
    from ragtrace_evaluator.compare.records import parse_record

    lab = parse_record(_record(failure_mode=mode))
    assert lab.trace_id == "golden-ok" and lab.verdict == "entailed"


def test_compare_reads_an_incomplete_record_as_its_own_outcome() -> None:
    from ragtrace_evaluator.compare.records import INCOMPLETE, parse_record

    rec = LabelRecord.incomplete(trace_id="t", query_id="q", release="r", service="s", manifest_id="m",
                                 reasons=["missing_stage: no generation span"])
    lab = parse_record(rec.to_json())
    assert lab.failure_mode == INCOMPLETE and lab.verdict is None and lab.gold_in_context is None


@pytest.mark.parametrize("verdict", list(GenerationVerdict))
def test_compare_reads_every_generation_verdict(verdict: GenerationVerdict) -> None:
    from ragtrace_evaluator.compare.records import parse_record

    gen = {**json.loads(LINES[0])["generation"], "verdict": verdict.value}
    assert parse_record(_record(generation=gen)).verdict == verdict.value
    harness = {"query_id": "q", "gold_in_context": True, "pass": True, "generation": {"verdict": verdict.value}}
    assert parse_record(harness).verdict == verdict.value


def test_compare_refuses_an_unknown_mode() -> None:
    from ragtrace_evaluator.compare.records import CompareError, parse_record

    with pytest.raises(CompareError, match="'failure_mode' is 'hallucination'"):
        parse_record(_record(failure_mode="hallucination"), "x.jsonl:1")


def test_review_queues_every_mode_and_accepts_every_name(chdb_store: Any) -> None:
    from ragtrace_review import auth, calibrate, queues, web
    from ragtrace_review.errors import ReviewError

    assert queues.FAILURE_MODES is web.FAILURE_MODES is calibrate.FAILURE_MODES is FAILURE_MODES
    assert queues.CLAIM_VERDICTS is web.CLAIM_VERDICTS is calibrate.CLAIM_VERDICTS is CLAIM_VERDICTS
    tenant = _tenant()
    claim = {"claim": "c", "verdict": "entailed", "support": 0.9, "contradiction": 0.0, "passage_id": "gold"}
    gen = {**json.loads(LINES[0])["generation"], "claims": [claim] * len(CLAIM_VERDICTS)}
    recs = [_record(trace_id=f"{tenant}-{m}", failure_mode=m, generation=gen) for m in FAILURE_MODES]
    res = queues.enqueue(chdb_store, "modes", recs, per_mode=5, reviewers=1, tenant=tenant)
    assert set(res.added) == {f"mode:{m}" for m in FAILURE_MODES}
    items = queues.list_items(chdb_store, tenant=tenant, queue="modes")
    assert {it.record.failure_mode for it in items} == set(FAILURE_MODES)
    reviewer, _token = auth.add_reviewer(chdb_store, "rev", tenant=tenant)
    for mode in FAILURE_MODES:
        trace_id = queues.next_item(chdb_store, reviewer, "modes")
        assert trace_id is not None
        d = queues.record_decision(chdb_store, reviewer, "modes", trace_id, failure_mode=mode,
                                   claims=list(CLAIM_VERDICTS))
        assert d.failure_mode == mode and [c["verdict"] for c in d.claims] == list(CLAIM_VERDICTS)
    with pytest.raises(ReviewError, match="'failure_mode' is 'nope'"):
        queues.enqueue(chdb_store, "bad", [_record(failure_mode="nope")], tenant=tenant)


def test_the_demo_reads_through_the_contract() -> None:
    from ragtrace_examples import demo, faults

    assert demo.FAILURE_MODES is FAILURE_MODES
    assert {f.expected_mode for f in faults.Fault} | {"ok"} == set(FAILURE_MODES)
    base = faults.baseline_release("r1")

    class _Q:
        def __init__(self, qid: str) -> None:
            self.id = qid

    class _Corpus:
        questions: ClassVar[list[_Q]] = [_Q(qid) for qid in dict.fromkeys(r.query_id for r in _records() if r.query_id)]

    records = _records()
    check = faults.check_labels(records, [base], _Corpus())  # type: ignore[arg-type]
    assert check["clean"]["n"] == len(_Corpus.questions) == 1
    assert check == faults.check_labels([r.to_json() for r in records], [base], _Corpus())  # type: ignore[arg-type]


# --- incomplete traces: their own outcome -------------------------------------------------------------
def test_an_incomplete_record_says_why_and_guesses_nothing(chdb_store: Any, tmp_path: Path) -> None:
    reasons = ("dropped_attributes: span 'retrieve' (RETRIEVER) lost 72 attributes",
               "document_holes: span 'retrieve' has 64 retrieved documents at ranks 36..99 (36 missing)")
    rec = LabelRecord.incomplete(trace_id="t-inc", query_id="q1", release="r1", service="svc", manifest_id="m",
                                 reasons=reasons, n_gold=1, gold_source="qrels")
    assert rec.is_incomplete and rec.failure_mode == "incomplete" and rec.incomplete_reasons == reasons
    assert (rec.gold_in_pool, rec.gold_in_context, rec.ranking.ok, rec.generation) == (None, None, None, None)
    assert (rec.passed, rec.score, rec.confidence, rec.metrics) == (False, None, None, {})
    obj = rec.to_json()
    assert obj["incomplete_reasons"] == list(reasons) and obj["failure_mode"] == "incomplete"
    assert LabelRecord.from_json(json.loads(rec.to_json_line())) == rec
    # through a file and the labels table
    path = tmp_path / "inc.jsonl"
    write_label_lines(path, [rec, *_records()[:2]])
    assert read_label_lines(path)[0] == rec
    tenant = _tenant()
    write_labels(chdb_store, [rec], tenant=tenant, trace_times={"t-inc": datetime.now(UTC)})
    (back,) = read_labels(chdb_store, tenant=tenant)
    assert back == rec
    # complete records keep their bytes: no new key
    assert all("incomplete_reasons" not in json.loads(line) for line in LINES)


@pytest.mark.parametrize(("change", "message"), [
    ({"incomplete_reasons": []}, "needs its incomplete_reasons"),
    ({"incomplete_reasons": "lost"}, "'incomplete_reasons' must be a list of non-empty strings"),
    ({"incomplete_reasons": [""]}, "'incomplete_reasons' must be a list of non-empty strings"),
    ({"failure_mode": "ok"}, "only an incomplete record has them"),
])
def test_incomplete_records_are_validated(change: dict[str, Any], message: str) -> None:
    rec = LabelRecord.incomplete(trace_id="t", query_id="", release="r", service="s", manifest_id="m",
                                 reasons=["missing_stage: x"])
    with pytest.raises(LabelError, match=message):
        LabelRecord.from_json({**rec.to_json(), **change})
