"""End to end on the real chDB engine: traces with injected failures -> run_audit -> right primary mode,
labels written back, resumable, deterministic sampling, per-trace JSON Lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ragtrace_evaluator.audit.run import AuditError, run_audit
from ragtrace_evaluator.manifest import load_manifest

from .fixtures import GOOD, KeywordGrounding, KeywordRelevance, Trace, scenario, write_traces

PER_TRACE_KEYS = {"trace_id", "query_id", "release", "service", "manifest_id", "failure_mode", "gold_in_pool",
                  "gold_in_context", "retrieval", "ranking", "generation", "metrics", "pass", "score", "confidence"}


def _audit(store: Any, tenant: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("grounding", KeywordGrounding())
    kw.setdefault("relevance_labeller", None)
    return run_audit(store, tenant=tenant, **kw)


def test_each_injected_failure_gets_its_mode(chdb_store: Any, tmp_path: Path) -> None:
    tenant = "audit-modes"
    traces = scenario("m")
    write_traces(chdb_store, tenant, list(traces.values()))
    out = tmp_path / "labels.jsonl"
    report = _audit(chdb_store, tenant, per_trace=out)
    records = {json.loads(line)["trace_id"]: json.loads(line) for line in out.read_text().splitlines()}
    assert len(records) == len(traces) == report["n"]
    for expected, tr in traces.items():
        rec = records[tr.trace_id]
        assert rec["failure_mode"] == expected.split("-")[0], (expected, rec)
        assert set(rec) >= PER_TRACE_KEYS
        assert rec["retrieval"]["gold_source"] == "span"

    under = records[traces["under_use"].trace_id]
    assert under["generation"]["verdict"] == "abstained" and under["score"] is None and under["pass"] is False
    assert under["generation"]["refusal_justified"] is False and under["generation"]["groundedness"] is None
    refusal = records[traces["retrieval_gap-refusal"].trace_id]
    assert refusal["generation"]["refusal_justified"] is True
    gap = records[traces["retrieval_gap"].trace_id]
    assert gap["pass"] is True and gap["gold_in_context"] is False  # pass is independent of gold
    inv = records[traces["rank_inversion-incontext"].trace_id]
    assert inv["ranking"] == {"ok": False, "best_gold_rank": 1, "best_distractor_rank": 0}
    ok = records[traces["ok"].trace_id]
    assert ok["metrics"]["recip_rank"] == 1.0 and ok["metrics"]["recall_5"] == 1.0 and ok["score"] == 1.0
    fab = records[traces["fabrication"].trace_id]
    assert fab["generation"]["verdict"] == "contradicted" and fab["pass"] is False

    # summary: counts, Wilson CIs, contingency, abstention
    modes = report["failure_modes"]
    assert modes["retrieval_gap"]["count"] == 2 and modes["rank_inversion"]["count"] == 2
    assert modes["ok"]["count"] == 2 and modes["under_use"]["count"] == 1 and modes["fabrication"]["count"] == 1
    lo, hi = modes["ok"]["ci95"]
    assert lo < 2 / 8 < hi
    assert report["abstention"]["count"] == 2
    assert (report["abstention"]["justified"], report["abstention"]["unjustified"]) == (1, 1)
    cells = {(c["gold_in_pool"], c["gold_in_context"], c["generation"]): c["n"]
             for c in report["contingency"]["cells"]}
    assert len(cells) == 12 and sum(cells.values()) == 8
    assert cells[(False, False, "abstained")] == 1 and cells[(True, True, "abstained")] == 1
    assert cells[(True, False, "entailed")] == 1
    assert report["metrics"]["retrieval"]["gold_in_pool"]["rate"] == pytest.approx(6 / 8)

    # written back: labels rows and the manifest
    rows = chdb_store.query_rows(
        f"SELECT trace_id, failure_mode, generation, passed, detail FROM {chdb_store.table('labels')} FINAL "
        "WHERE tenant = {t:String} AND manifest_id = {m:String}", {"t": tenant, "m": report["manifest_id"]})
    assert {r[0]: r[1] for r in rows} == {tr.trace_id: k.split("-")[0] for k, tr in traces.items()}
    assert json.loads(rows[0][4])["manifest_id"] == report["manifest_id"]
    stored = load_manifest(chdb_store, report["manifest_id"])
    assert stored is not None and stored["grounding_labeller"]["kind"] == "test-keyword"
    assert stored["code_version"]["package"]


def test_resumes_under_same_manifest(chdb_store: Any) -> None:
    tenant = "audit-resume"
    write_traces(chdb_store, tenant, list(scenario("r").values()))
    first = _audit(chdb_store, tenant, sample=5)
    assert first["sampling"]["n_labelled_now"] == 5
    labeller = KeywordGrounding()
    second = _audit(chdb_store, tenant, sample=8, grounding=labeller)
    assert second["sampling"]["n_resumed"] == 5 and second["sampling"]["n_labelled_now"] == 3
    assert labeller.calls == 3  # only the new traces were judged
    third = _audit(chdb_store, tenant, sample=8, grounding=labeller)
    assert third["sampling"]["n_labelled_now"] == 0 and labeller.calls == 3
    assert third["failure_modes"] == second["failure_modes"]
    # a different manifest (retrieval-only stages) labels everything again
    retr = _audit(chdb_store, tenant, sample=8, stages="retrieval")
    assert retr["manifest_id"] != second["manifest_id"] and retr["sampling"]["n_labelled_now"] == 8
    assert retr["contingency"]["n_unlabelled_generation"] == 8
    assert retr["failure_modes"]["fabrication"]["count"] == 0


def test_sampling_and_shards_agree(chdb_store: Any) -> None:
    tenant = "audit-shards"
    traces = [Trace(f"s{i:03d}", f"r{i % 2}", ["gold", "freeze"], ["gold"], "Water boils at 100 degrees Celsius.",
                    gold=["gold"], route=f"/r{i % 3}") for i in range(60)]
    write_traces(chdb_store, tenant, traces)
    whole = _audit(chdb_store, tenant, sample=20, stages="retrieval", per_trace=None)
    assert whole["n"] == 20
    ids = set()
    for i in range(3):
        part = _audit(chdb_store, tenant, sample=20, stages="retrieval", shard=f"{i}/3")
        ids |= {r for r in _ids(chdb_store, tenant, part["manifest_id"])}
    assert len(ids) == 20
    strat = _audit(chdb_store, tenant, sample=4, stratify="release,route", stages="retrieval")
    assert strat["n"] == 4 * 6
    only_r1 = _audit(chdb_store, tenant, release="r1", rate=0.5, stages="retrieval")
    assert 0 < only_r1["n"] < 30 and only_r1["sampling"]["n_candidates"] == 30


def _ids(store: Any, tenant: str, mid: str) -> set[str]:
    rows = store.query_rows(f"SELECT trace_id FROM {store.table('labels')} FINAL WHERE tenant = {{t:String}} "
                            "AND manifest_id = {m:String}", {"t": tenant, "m": mid})
    return {r[0] for r in rows}


def test_gold_from_qrels_and_from_relevance_labeller(chdb_store: Any) -> None:
    tenant = "audit-gold"
    no_gold = Trace("g-none", "r1", ["freeze", "gold"], ["freeze", "gold"], "Water boils at 100 degrees Celsius.")
    by_query = Trace("g-q", "r1", ["freeze", "gold"], ["freeze"], "Water freezes at 0 degrees Celsius.",
                     query_id="Q7")
    write_traces(chdb_store, tenant, [no_gold, by_query])
    chdb_store.insert("gold", [(tenant, "Q7", "", "gold", 1, "qrels", no_gold.start)],
                      ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])
    report = _audit(chdb_store, tenant, relevance=KeywordRelevance("boils 100"), relevance_labeller="x")
    assert report["gold_sources"] == {"labeller": 1, "qrels": 1}
    assert report["manifest"]["relevance_labeller"]["kind"] == "test-relevance"
    unknown = _audit(chdb_store, tenant, relevance_labeller="none")
    assert unknown["gold_sources"] == {"none": 1, "qrels": 1}
    assert unknown["contingency"]["n_unknown_gold"] == 1
    assert unknown["metrics"]["retrieval"]["recall_5"]["n_undefined"] == 1


def test_bad_options_say_what_to_fix(chdb_store: Any) -> None:
    with pytest.raises(AuditError, match="--stages"):
        _audit(chdb_store, "x", stages="rank")
    with pytest.raises(AuditError, match="not both"):
        _audit(chdb_store, "x", sample=3, rate=0.5)
    with pytest.raises(AuditError, match="--since"):
        _audit(chdb_store, "x", since="yesterday")
    with pytest.raises(AuditError, match="--shard"):
        _audit(chdb_store, "x", shard="3/3")


def test_time_window_filters(chdb_store: Any) -> None:
    tenant = "audit-window"
    traces = list(scenario("w").values())  # start 2026-11-01T12:00:00Z + i seconds
    write_traces(chdb_store, tenant, traces)
    inside = _audit(chdb_store, tenant, since="2026-11-01T12:00:02Z", until="2026-11-01T12:00:05+00:00",
                    stages="retrieval")
    assert inside["n"] == 3
    assert _audit(chdb_store, tenant, since="2026-11-01T13:00:00", stages="retrieval")["n"] == 0
    now = datetime.now(UTC)
    recent = [Trace(f"w-recent-{h}", "r1", ["gold"], ["gold"], GOOD, gold=["gold"], start=now - timedelta(hours=h))
              for h in (1, 3, 50)]
    write_traces(chdb_store, tenant + "-rel", recent)
    assert _audit(chdb_store, tenant + "-rel", since="-2h", stages="retrieval")["n"] == 1
    assert _audit(chdb_store, tenant + "-rel", since="-2d", stages="retrieval")["n"] == 2
    assert _audit(chdb_store, tenant + "-rel", until="-2d", stages="retrieval")["n"] == 1


def test_audit_against_clickhouse_http_server(chdb_http_server: str, tmp_path: Path) -> None:
    """The cron'd-audit topology: a ClickHouse server over HTTP (chDB behind ClickHouse's HTTP protocol,
    in another process), reached by the unmodified clickhouse-connect HTTP client."""
    import subprocess
    import sys

    from ragtrace_store import open_store

    traces = scenario("h")
    traces["rank_inversion-qrels"] = Trace("h-qrels", "r1", ["freeze", "gold"], ["freeze"],
                                           "Water freezes at 0 degrees Celsius.", query_id="QH")
    with open_store(chdb_http_server) as store:
        write_traces(store, "audit-http", list(traces.values()))
    qrels = tmp_path / "q.txt"
    qrels.write_text("QH 0 gold 1\n")
    repo = Path(__file__).resolve().parents[2]
    exe = str(Path(sys.executable).with_name("ragtrace"))
    imp = subprocess.run([exe, "labels", "import", str(qrels), "--store", chdb_http_server, "--tenant", "audit-http"],
                         capture_output=True, text=True, cwd=repo, timeout=120, check=False)
    assert imp.returncode == 0 and "1 of those query ids match" in imp.stdout, imp.stderr
    with open_store(chdb_http_server) as store:
        report = _audit(store, "audit-http", per_trace=tmp_path / "l.jsonl")
    records = {json.loads(x)["trace_id"]: json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()}
    assert {n: records[t.trace_id]["failure_mode"] for n, t in traces.items()} == {n: n.split("-")[0] for n in traces}
    assert records["h-qrels"]["retrieval"]["gold_source"] == "qrels" and report["n"] == len(traces)


class _NeedsReference(KeywordRelevance):
    """Like eRAG/NLI relevance: refuses to score without a reference answer."""

    def __init__(self) -> None:
        super().__init__("boils 100")
        self.references: list[str | None] = []

    def relevance(self, query: str, passages: Any, reference: str | None = None) -> list[float]:
        self.references.append(reference)
        if reference is None:
            raise ValueError("needs a reference answer")
        return super().relevance(query, passages, reference)


def test_reference_based_relevance_gets_the_production_answer(chdb_store: Any) -> None:
    tenant = "audit-reference"
    tr = Trace("ref-1", "r1", ["freeze", "gold"], ["freeze", "gold"], GOOD)
    write_traces(chdb_store, tenant, [tr])
    rel = _NeedsReference()
    report = _audit(chdb_store, tenant, relevance=rel, relevance_labeller="x")
    assert rel.references == [None, GOOD]
    assert report["gold_sources"] == {"labeller": 1} and report["failure_modes"]["ok"]["count"] == 1


def test_empty_selection_is_an_empty_report(chdb_store: Any) -> None:
    report = _audit(chdb_store, "audit-nobody")
    assert report["n"] == 0 and report["failure_modes"]["ok"]["rate"] is None
    assert report["failure_modes"]["ok"]["ci95"] is None and report["contingency"]["n"] == 0


def test_reference_answers_join_by_query_id_and_score_the_answer(chdb_store: Any) -> None:
    from ragtrace_cli.commands.audit import import_references

    tenant = "audit-refs"
    traces = [
        Trace("ref-right", "r1", ["gold", "freeze"], ["gold"], GOOD, gold=["gold"], query_id="QR-1"),
        Trace("ref-wrong", "r1", ["freeze", "ocean"], ["freeze"], "Water freezes at 0 degrees Celsius.",
              gold=["gold"], query_id="QR-1"),
        Trace("ref-span", "r1", ["gold"], ["gold"], GOOD, gold=["gold"], query_id="QR-2"),
        Trace("ref-none", "r1", ["gold"], ["gold"], GOOD, gold=["gold"], query_id="QR-3"),
        Trace("ref-noid", "r1", ["gold"], ["gold"], GOOD, gold=["gold"]),
    ]
    write_traces(chdb_store, tenant, traces)
    summary = import_references(chdb_store, {"QR-1": "100 degrees", "QR-2": "imported"}, tenant=tenant)
    assert summary == {"queries": 2, "matched_queries": 2}
    # a re-import replaces the reference; another tenant's references never leak in
    import_references(chdb_store, {"QR-1": "100 degrees Celsius"}, tenant=tenant)
    import_references(chdb_store, {"QR-3": "other tenant"}, tenant="audit-refs-other")
    # a reference sent on a trace's root span (trace-keyed) wins over the imported one for that trace
    chdb_store.insert("reference_answers", [(tenant, "QR-2", "ref-span", "boils at 100", "span", datetime.now(UTC))],
                      ["tenant", "query_id", "trace_id", "reference", "source", "added_at"])
    got = {r.trace_id: r.reference for r in chdb_store.read_traces(tenant=tenant)}
    assert got == {"ref-right": "100 degrees Celsius", "ref-wrong": "100 degrees Celsius",
                   "ref-span": "boils at 100", "ref-none": None, "ref-noid": None}

    report = _audit(chdb_store, tenant, return_records=True)
    recs = {r["trace_id"]: r for r in report["records"]}
    assert (recs["ref-right"]["score"], recs["ref-right"]["pass"], recs["ref-right"]["score_basis"]) == \
        (1.0, True, "reference")
    # grounded in the freezing passage, so it passes on grounding; against the reference it is wrong
    wrong = recs["ref-wrong"]
    assert wrong["score_basis"] == "reference" and wrong["pass"] is False
    # 'degrees' and 'celsius' of {100, degrees, celsius}: most of the wording, but the number is wrong
    assert wrong["score"] == pytest.approx(2 / 3)
    assert wrong["failure_mode"] == "retrieval_gap"
    assert recs["ref-none"]["score_basis"] == recs["ref-noid"]["score_basis"] == "grounding"
    manifest = load_manifest(chdb_store, report["manifest_id"])
    assert manifest is not None and "reference" in manifest["formula_version"]


# --- duplicates and late spans, read without FINAL -------------------------------------------------------
_Q_COLS = ["tenant", "trace_id", "span_id", "query_id", "service", "release", "environment", "route", "query",
           "answer", "answer_streamed", "status_code", "start_time", "duration_ms", "root_priority", "received_at"]


def _gateway_roots(store: Any, tenant: str, traces: list[Trace], received: datetime) -> None:
    """A gateway's HTTP server span above each trace's SDK root: another service, release and route,
    3 ms earlier, exported after it (a parent ends last). It claims the root with priority 1."""
    store.insert("queries", [
        (tenant, tr.trace_id, "gw-span", "", "gateway", "gw-9", "prod", "/gw", "", None, False, "OK",
         tr.start + timedelta(seconds=i) - timedelta(milliseconds=3), 40.0, 1, received)
        for i, tr in enumerate(traces)], _Q_COLS)


@pytest.fixture
def no_merges(chdb_store: Any) -> Iterator[None]:
    """Background merges stopped, so duplicates stay in their own parts (as between merges in
    production) and the readers, not the engine's merges, must collapse them."""
    tables = ("queries", "documents", "spans", "gold", "query_roots", "other_roots", "stage_traces")
    for t in tables:
        chdb_store.command(f"SYSTEM STOP MERGES {chdb_store.table(t)}")
    try:
        yield
    finally:
        for t in tables:
            chdb_store.command(f"SYSTEM START MERGES {chdb_store.table(t)}")


def _read(store: Any, tenant: str, **kw: Any) -> list[dict[str, Any]]:
    return [r.as_json(with_content=True) for r in store.read_traces(tenant=tenant, with_content=True, **kw)]


def test_duplicate_root_rows_and_a_gateway_root_read_exactly(chdb_store: Any, no_merges: None) -> None:
    tenant = "audit-dupes"
    traces = list(scenario("d").values())
    t0 = datetime(2026, 11, 2, tzinfo=UTC)
    write_traces(chdb_store, tenant, traces, root_priority=3, received_at=t0)
    before, report = _read(chdb_store, tenant), _audit(chdb_store, tenant)
    assert len(before) == len(traces) and report["n"] == len(traces)

    # every row again, as a retried batch and a spool replay write it (later, then the same time),
    # and the gateway's root claimant arriving last: three more parts, nothing merged
    write_traces(chdb_store, tenant, traces, root_priority=3, received_at=t0 + timedelta(seconds=30))
    write_traces(chdb_store, tenant, traces, root_priority=3, received_at=t0 + timedelta(seconds=30))
    _gateway_roots(chdb_store, tenant, traces, t0 + timedelta(minutes=1))
    (rows,) = chdb_store.query_rows(f"SELECT count() FROM {chdb_store.table('queries')} WHERE tenant = {{t:String}}",
                                    {"t": tenant})[0]
    assert rows == 4 * len(traces)

    assert _read(chdb_store, tenant) == before
    assert _read(chdb_store, tenant, release="r1") == before
    assert _read(chdb_store, tenant, release="gw-9") == [] and _read(chdb_store, tenant, service="gateway") == []
    assert [r["trace_id"] for r in _read(chdb_store, tenant, limit=3)] == [r["trace_id"] for r in before[:3]]
    again = _audit(chdb_store, tenant, resume=False)
    assert again["n"] == len(traces) and again["failure_modes"] == report["failure_modes"]
    # rows that can be queries, an upper bound (documented): the SDK's roots, written three times;
    # the gateway's roots are not queries here (no stage span under them), so they are not candidates
    assert again["sampling"]["n_candidates"] == 3 * len(traces)
    one = _audit(chdb_store, tenant, release="gw-9")
    assert one["n"] == 0  # the gateway's rows never win a trace


def test_late_spans_change_what_a_trace_reads(chdb_store: Any, no_merges: None) -> None:
    tenant = "audit-late"
    tr = Trace("late-1", "r1", ["gold", "freeze"], ["gold"], GOOD, gold=["gold"])
    t0 = datetime(2026, 11, 3, tzinfo=UTC)
    # the gateway's span arrives first: a root that is no query (no stage span, not the SDK's)
    _gateway_roots(chdb_store, tenant, [tr], t0)
    assert _read(chdb_store, tenant) == []
    assert [r["release"] for r in _read(chdb_store, tenant, include_all=True)] == ["gw-9"]
    # then the SDK's root and its documents: it outranks the gateway's span
    write_traces(chdb_store, tenant, [tr], root_priority=3, received_at=t0 + timedelta(seconds=2))
    (got,) = _read(chdb_store, tenant)
    assert (got["release"], [d["id"] for d in got["retrieved"]], got["gold_ids"]) == (
        "r1", ["gold", "freeze"], ["gold"])
    # a re-sent retriever span with one document more (late, newer): only its newest version reads
    chdb_store.insert("documents", [(tenant, tr.trace_id, "s-ret", "retrieved", 2, "ocean", 0.1, "h-ocean", "", None,
                                     tr.start, t0 + timedelta(seconds=9))],
                      ["tenant", "trace_id", "span_id", "stage", "rank", "doc_id", "score", "content_hash",
                       "metadata", "top_k", "start_time", "received_at"])
    (got,) = _read(chdb_store, tenant)
    assert [d["id"] for d in got["retrieved"]] == ["gold", "freeze", "ocean"]
    # a gold judgement withdrawn later (relevance 0, newer) is no longer gold
    chdb_store.insert("gold", [(tenant, "", tr.trace_id, "gold", 0, "span", t0 + timedelta(seconds=9))],
                      ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])
    (got,) = _read(chdb_store, tenant)
    assert got["gold_ids"] == []
