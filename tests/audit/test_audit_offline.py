"""The audit with the real offline default labellers (MiniLM + lexical checks; no test doubles):
injected failures in a real chDB store come out with the right primary mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragtrace_evaluator.audit.run import run_audit

from .fixtures import Trace, scenario, write_traces


def test_offline_default_finds_each_injected_failure(chdb_store: Any, tmp_path: Path) -> None:
    tenant = "audit-offline"
    traces = scenario("o")
    # one trace without gold: relevance comes from the offline relevance labeller
    traces["ok-nogold"] = Trace("o-nogold", "r1", ["gold", "mercury", "steam"], ["gold", "mercury"],
                                "Water boils at 100 degrees Celsius at sea level.")
    write_traces(chdb_store, tenant, list(traces.values()))
    out = tmp_path / "labels.jsonl"
    report = run_audit(chdb_store, tenant=tenant, labeller="offline", relevance_labeller="offline", per_trace=out)
    records = {json.loads(x)["trace_id"]: json.loads(x) for x in out.read_text().splitlines()}
    got = {name: records[tr.trace_id]["failure_mode"] for name, tr in traces.items()}
    assert got == {name: name.split("-")[0] for name in traces}
    assert records["o-fab"]["generation"]["verdict"] == "contradicted"
    assert records["o-under"]["generation"]["abstained"] is True
    nogold = records["o-nogold"]
    assert nogold["retrieval"]["gold_source"] == "labeller" and nogold["gold_in_context"] is True
    assert report["manifest"]["grounding_labeller"]["kind"] == "offline"
    assert report["manifest"]["relevance_labeller"] is not None
    # selective labelling: the offline labeller's review threshold, the share of each mode labelled at or
    # above it, and what the benchmark measured there on the dev sets for this very artefact
    sel = report["selective"]
    review = report["manifest"]["grounding_labeller"]["thresholds"]["review"]
    assert sel["review_threshold"] == review
    assert sel["all"]["n"] == len(records)
    assert sel["all"]["count"] == sum(1 for r in records.values() if (r["confidence"] or 0) >= review)
    assert set(sel["measured"]["sets"]) >= {"BEGIN dev, fully vs not fully attributable"}, sel["measured"]
