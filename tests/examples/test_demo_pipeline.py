"""The demo's pipeline at small size: the audit must recover every injected fault at its boundary.

Real everything: generated corpus, the example service over HTTP, OTLP to `ragtrace serve` on an
embedded store, the audit run inside the server, compare, the review queue and a reviewer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragtrace_evaluator.compare.deciding_slice import FELL
from ragtrace_examples.demo import DemoConfig, run_demo
from ragtrace_examples.faults import Fault


def test_injected_faults_are_labelled_with_their_boundary(tmp_path: Path) -> None:
    rates = dict.fromkeys(Fault, 0.12)
    res = run_demo(DemoConfig(out=tmp_path / "demo", docs=60, seed=3, rates=rates, quiet=True, resamples=400))

    check = res.fault_check
    for row in check["modes"]:
        assert row["missing"] == 0, row
        assert row["n"] >= 7, row
        assert row["share"] >= 0.9, f"{row['fault']}: {row['hits']}/{row['n']} labelled {row['expected_mode']}, " \
                                    f"confusions {row['confusions']}"
    clean = check["clean"]
    assert clean["missing"] == 0 and clean["n"] >= 60 + 60 - 4 * 7
    assert clean["share"] >= 0.9, clean

    # the comparison sees the regression: a gate trips and the report is written
    assert res.compare_exit == 1 and res.tripped_gates
    html = res.report_html.read_text(encoding="utf-8")
    assert "<html" in html.lower() and "v2" in html
    compare = json.loads(res.compare_json.read_text(encoding="utf-8"))
    assert compare["tripped"] is True
    # the reference answers were imported, so pass/score measure correctness: the queries that lost
    # their evidence fall, and an answer without gold in its context rarely passes
    lost = next(m for m in compare["movers"] if (m["boundary"], m["direction"]) == ("gold_in_context", "lost"))
    assert lost["n"] >= 7 and lost["candidate_mean"] < lost["baseline_mean"] - 0.4, lost
    assert compare["decomposition"]["candidate"]["p_pass_without_gold"] < 0.3, compare["decomposition"]
    # every trace of both releases was stored and labelled, its gold the imported evidence spans
    # resolved to the chunks of that release's build (the traces carry no gold ids)
    records: dict[str, dict[str, dict[str, Any]]] = {}
    for release, path in res.labels.items():
        lines = [json.loads(line) for line in path.read_text().splitlines() if line]
        assert len(lines) == 60 and {r["release"] for r in lines} == {release}
        assert {r["score_basis"] for r in lines} == {"reference"}
        assert {r["retrieval"]["gold_source"] for r in lines} == {"evidence"}
        records[release] = {r["query_id"]: r for r in lines}
    assert res.audit["gold_sources"] == {"evidence": 120}
    # the chunker fault re-cuts its documents; with offsets it reads as the real retrieval regression
    # it is: its queries lost their evidence and their answers fell with it
    faults = [json.loads(line) for line in res.faults.read_text().splitlines() if line]
    split = {f["query_id"] for f in faults if f["fault"] == Fault.CHUNK_SPLIT.value}
    had = {q for q, r in records["v1"].items() if r["gold_in_context"]}
    split_lost = {q for q in split & had if records["v2"][q]["failure_mode"] == "retrieval_gap"}
    assert len(split_lost) >= 0.9 * len(split)
    assert split_lost <= set(lost["query_ids"])
    ds = compare["deciding_slice"]
    assert "recall_5" in ds["tripped_gates"] and ds["verdict"] == "fell", ds["statement"]
    assert res.deciding_slice == ds["statement"] and ds["statement"].startswith(FELL)
    # ground truth written next to the labels, and a review queue with a reviewer to work it
    assert len(res.faults.read_text().splitlines()) == sum(row["n"] for row in check["modes"])
    assert res.reviewer_token and res.review_url.endswith("/review/login")
