"""The deciding slice of a tripped recall gate: the queries that lost their gold — did their answers fall?"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragtrace_cli.commands.compare import compare_main
from ragtrace_evaluator.compare.comparison import compare
from ragtrace_evaluator.compare.deciding_slice import FELL, LABELS
from ragtrace_evaluator.compare.records import label_set, parse_record
from ragtrace_evaluator.compare.report_html import render_report

from .story import story_records, write_jsonl


def _stale_labels(n: int = 300, n_lost: int = 60, seed: int = 1) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A recall drop by bookkeeping: 60 queries' gold stops matching the candidate's chunk ids, yet
    every answer scores what it scored before (up to noise)."""
    rng = np.random.default_rng(seed)
    base, cand = [], []
    for i in range(n):
        score = float(rng.uniform(0.55, 0.95))
        lost = i < n_lost
        for release, side in (("a", base), ("b", cand)):
            s = min(1.0, max(0.0, score + float(rng.normal(0, 0.02))))
            side.append({"query_id": f"k{i:03d}", "trace_id": f"{release}-k{i:03d}", "release": release,
                         "gold_in_context": not (lost and release == "b"), "pass": s >= 0.5, "score": s,
                         "metrics": {"recall_5": 0.0 if (lost and release == "b") else 1.0}})
    return base, cand


def _compare(base: list[dict[str, Any]], cand: list[dict[str, Any]]) -> Any:
    a = label_set("a", "file", [parse_record(r) for r in base])
    b = label_set("b", "file", [parse_record(r) for r in cand])
    return compare(a, b, n_resamples=2000, seed=3, warn=False)


def test_answers_that_fell_with_the_evidence() -> None:
    c = _compare(*story_records())
    ds = c.to_json()["deciding_slice"]
    assert ds["tripped_gates"] == ["recall_5"] and ds["verdict"] == "fell"
    assert ds["statement"].startswith(FELL)
    assert ds["lost"]["n"] == 61 and ds["held"]["n"] == 338
    assert ds["lost"]["baseline_mean"] == pytest.approx(0.84) and ds["lost"]["candidate_mean"] == pytest.approx(0.49)
    assert ds["lost"]["ci"]["percentile"][1] < 0
    assert "0.840 → 0.490" in ds["statement"] and "338 whose state held" in ds["statement"]


def test_answers_that_did_not_move_point_at_the_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = _stale_labels()
    c = _compare(base, cand)
    rep = c.to_json()
    gates = {g["metric"]: g["tripped"] for g in rep["gates"]}
    assert gates["recall_5"] is True and gates["pass_rate"] is False
    ds = rep["deciding_slice"]
    assert ds["verdict"] == "labels" and ds["statement"].startswith(LABELS)
    assert ds["lost"]["n"] == 60 and ds["held"]["n"] == 240
    # a fall this small may even be "significant" on 60 queries; it is not a fall that matters
    lo = ds["lost"]["ci"]["percentile"][0]
    assert lo > -0.05 and abs(ds["lost"]["delta"]) < 0.01 and ds["min_change"] == 0.05
    # the same verdict in the terminal, under the tripped gate, and in the HTML
    pa, pb = write_jsonl(tmp_path / "a.jsonl", base), write_jsonl(tmp_path / "b.jsonl", cand)
    assert compare_main(["--baseline", str(pa), "--candidate", str(pb), "--resamples", "2000", "--seed", "3"]) == 1
    out = capsys.readouterr().out
    tripped = out[out.index("GATE TRIPPED recall_5"):]
    assert "gold_in_context held: 240 queries" in tripped
    assert "verdict: answers did not move: check whether the gold labels still match this build's chunks" \
        in " ".join(tripped.split())
    html = render_report(c)
    assert 'id="deciding-verdict"' in html and "check whether the gold labels still match" in html


def test_a_wide_interval_is_undetermined() -> None:
    base, cand = _stale_labels(n=40, n_lost=6, seed=2)
    # the lost queries swing both ways by 0.3: on average a little lower, but nothing is shown either way
    for r, b, move in zip(cand[:6], base[:6], (-0.3, 0.3, -0.3, 0.3, -0.3, 0.2), strict=True):
        r["score"] = min(1.0, max(0.0, b["score"] + move))
    ds = _compare(base, cand).to_json()["deciding_slice"]
    lo, hi = ds["lost"]["ci"]["percentile"]
    assert lo < -0.05 < 0 < hi and ds["verdict"] == "undetermined" and ds["statement"].startswith("undetermined")


def test_no_query_lost_its_gold_is_undetermined() -> None:
    base, cand = _stale_labels(n=50, n_lost=0)
    ds = _compare(base, cand).to_json()["deciding_slice"]
    assert ds["verdict"] == "undetermined" and ds["tripped_gates"] == []
    assert ds["lost"]["n"] == 0 and ds["lost"]["baseline_mean"] is None  # undefined, not 0


def test_the_statement_counts_the_lost_queries_without_a_score_too() -> None:
    """A lost query whose answer is an abstention (score undefined) stays out of the means, and the
    statement says how many were scored, so its count matches the movers table."""
    base, cand = _stale_labels()
    for r in cand[:3]:
        r["score"] = None  # three of the 60 lost queries abstain in the candidate
    rep = _compare(base, cand).to_json()
    ds = rep["deciding_slice"]
    lost = next(m for m in rep["movers"] if (m["boundary"], m["direction"]) == ("gold_in_context", "lost"))
    assert lost["n"] == ds["lost"]["n_queries"] == 60 and ds["lost"]["n"] == 57
    assert ds["held"]["n_queries"] == ds["held"]["n"] == 240
    assert "the 60 queries that lost their gold in context (57 with a score in both releases): mean score" \
        in ds["statement"]
    assert "; the 240 whose state held" in ds["statement"]


def test_stale_labels_still_name_the_lost_queries_that_really_fell(tmp_path: Path) -> None:
    """A chunker that renames the whole index and breaks two documents: under chunk-id gold 120 queries
    "lose" it and the verdict blames the labels, but the two whose answers now fail are named all the
    same, in the statement, the JSON and the HTML (linked to their traces)."""
    base, cand = _stale_labels(n=300, n_lost=120, seed=4)
    broken = ("k007", "k100")
    for r in cand:
        if r["query_id"] in broken:
            r["score"], r["pass"] = 0.0, False
    c = _compare(base, cand)
    ds = c.to_json()["deciding_slice"]
    assert ds["verdict"] == "labels" and ds["statement"].startswith(LABELS)
    assert ds["lost"]["n"] == 120 and ds["lost"]["ci"]["percentile"][0] > -0.05
    assert sorted(ds["fell_anyway"]["query_ids"]) == sorted(broken)
    assert ds["fell_anyway"]["candidate_trace_ids"] == [f"b-{q}" for q in ds["fell_anyway"]["query_ids"]]
    assert "yet 2 of them passed in the baseline and fail now: k007, k100" in ds["statement"]
    html = render_report(c, server_url="http://rt.example:4318")
    fell = html[html.index('id="deciding-fell-anyway"'):]
    assert all(f'href="http://rt.example:4318/traces/b-{q}"' in fell for q in broken)
    # where the answers did fall, nothing extra is said; where nothing fell, nothing is named
    assert "passed in the baseline" not in _compare(*story_records()).to_json()["deciding_slice"]["statement"]
    assert _compare(*_stale_labels()).to_json()["deciding_slice"]["fell_anyway"]["n"] == 0
