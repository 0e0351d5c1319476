"""The deciding slice of a tripped recall gate: the queries that lost their gold — did their answers fall?"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragtrace_cli.commands.compare import compare_main
from ragtrace_evaluator.compare.comparison import compare
from ragtrace_evaluator.compare.deciding_slice import FELL, LABEL_CHECK, LABELS
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
    assert "yet 2 of them fell (a pass turned fail or the score fell by 0.5 or more): k007, k100" in ds["statement"]
    html = render_report(c, server_url="http://rt.example:4318")
    fell = html[html.index('id="deciding-fell-anyway"'):]
    assert all(f'href="http://rt.example:4318/traces/b-{q}"' in fell for q in broken)
    # where the answers did fall, nothing extra is said; where nothing fell, nothing is named
    assert "yet" not in _compare(*story_records()).to_json()["deciding_slice"]["statement"]
    assert _compare(*_stale_labels()).to_json()["deciding_slice"]["fell_anyway"]["n"] == 0


def _whole_index_recut(n: int = 300, n_lost: int = 240, n_fell: int = 30, n_rose: int = 10,
                       unmoved_shift: float = 0.0, seed: int = 5) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A chunker change that renames the whole index under chunk-id gold: ``n_lost`` queries lose
    their gold; the first ``n_fell`` of them really fall (pass 0.6-0.95 → fail 0.0-0.2), the next
    ``n_rose`` rise (fail 0.1-0.4 → pass 0.6-0.95), the other lost ones move by ``unmoved_shift``
    and noise of at most ±0.02, which never crosses the pass line; the rest hold."""
    rng = np.random.default_rng(seed)
    base, cand = [], []
    for i in range(n):
        qid = "k<b>000" if i == 0 else f"k{i:03d}"  # an id that must be escaped in the HTML
        score = float(rng.uniform(0.6, 0.95))
        lost, fell, rose = i < n_lost, i < n_fell, n_fell <= i < n_fell + n_rose
        for release, side in (("a", base), ("b", cand)):
            if release == "b" and fell:
                s = float(rng.uniform(0.0, 0.2))
            elif release == "a" and rose:
                s = float(rng.uniform(0.1, 0.4))
            else:
                shift = unmoved_shift if release == "b" and lost and not rose else 0.0
                s = min(1.0, score + float(rng.uniform(-0.02, 0.02)) + shift)
            side.append({"query_id": qid, "trace_id": f"{release}-{qid}", "release": release,
                         "gold_in_context": not (lost and release == "b"), "pass": s >= 0.5, "score": s,
                         "metrics": {"recall_5": 0.0 if (lost and release == "b") else 1.0}})
    return base, cand


def _mean(records: list[dict[str, Any]], lo: int, hi: int) -> float:
    return float(np.mean([r["score"] for r in records[lo:hi]]))


def test_a_few_answers_fell_and_most_did_not_move_reads_mixed(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Nearly every query "loses" chunk-id gold; 30 of the 240 really fell, 10 rose and 200 did not
    move. The lost queries as a whole fell too much for "labels", yet "fell" would blame all 240:
    "mixed" gives each part its numbers and names the label check."""
    base, cand = _whole_index_recut()
    c = _compare(base, cand)
    ds = c.to_json()["deciding_slice"]
    assert ds["tripped_gates"] == ["recall_5"] and ds["verdict"] == "mixed"
    assert ds["lost"]["n_queries"] == 240 and ds["held"]["n_queries"] == 60
    assert ds["lost"]["ci"]["percentile"][0] < -0.05  # as a whole, not "labels"
    split = ds["lost_split"]
    assert split["query_move"] == 0.5
    assert split["fell"]["n_queries"] == split["fell"]["n"] == 30 == ds["fell_anyway"]["n"]
    assert split["rose"]["n_queries"] == 10 and split["unmoved"]["n_queries"] == split["unmoved"]["n"] == 200
    fell_a, fell_b = _mean(base, 0, 30), _mean(cand, 0, 30)
    rose_a, rose_b = _mean(base, 30, 40), _mean(cand, 30, 40)
    unmoved_a, unmoved_b = _mean(base, 40, 240), _mean(cand, 40, 240)
    assert split["fell"]["baseline_mean"] == pytest.approx(fell_a)
    assert split["fell"]["candidate_mean"] == pytest.approx(fell_b)
    assert split["rose"]["delta"] == pytest.approx(rose_b - rose_a)
    assert split["unmoved"]["delta"] == pytest.approx(unmoved_b - unmoved_a)
    lo, hi = split["unmoved"]["ci"]["percentile"]
    assert -0.05 < lo <= hi < 0.05 and split["fell"]["ci"]["percentile"][1] < -0.4
    st = ds["statement"]
    assert st.startswith("30 of the 240 queries that lost their gold in context fell with it (a pass turned fail "
                         f"or the score fell by 0.5 or more; mean score {fell_a:.3f} → {fell_b:.3f}, "
                         f"Δ {fell_b - fell_a:+.3f}, 95% CI [")
    assert f"; 10 rose (mean score {rose_a:.3f} → {rose_b:.3f}, Δ {rose_b - rose_a:+.3f}, 95% CI [" in st
    assert (f"; the other 200 did not move (mean score {unmoved_a:.3f} → {unmoved_b:.3f}, "
            f"Δ {unmoved_b - unmoved_a:+.3f}, 95% CI [{lo:+.3f}, {hi:+.3f}]): {LABEL_CHECK}; "
            "the 60 whose state held") in st
    assert set(ds["fell_anyway"]["query_ids"]) == {r["query_id"] for r in base[:30]}
    assert "; the ones that fell: " in st
    # the terminal shows it under the tripped gate; the HTML in its table, escaped
    pa, pb = write_jsonl(tmp_path / "a.jsonl", base), write_jsonl(tmp_path / "b.jsonl", cand)
    assert compare_main(["--baseline", str(pa), "--candidate", str(pb), "--resamples", "2000", "--seed", "3"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "verdict: 30 of the 240 queries that lost their gold in context fell with it" in out
    assert f"the other 200 did not move (mean score {unmoved_a:.3f}" in out and LABEL_CHECK in out
    html = render_report(c)
    verdict = html[html.index('id="deciding-verdict"'):]
    assert verdict.startswith('id="deciding-verdict">30 of the 240 queries that lost their gold')
    assert "the other 200 did not move" in verdict and "check whether the gold labels still match this build" in verdict
    assert "k<b>000" not in html and "k&lt;b&gt;000" in html
    rows = {name: html[html.index(f'id="deciding-{name}"'):].split("</tr>")[0]
            for name in ("lost", "lost_fell", "lost_rose", "lost_unmoved", "held")}
    assert '<td class="n">30 (30)</td>' in rows["lost_fell"] and "12.50%" in rows["lost_fell"]
    assert '<td class="n">10 (10)</td>' in rows["lost_rose"] and "4.17%" in rows["lost_rose"]
    assert '<td class="n">200 (200)</td>' in rows["lost_unmoved"] and "83.33%" in rows["lost_unmoved"]
    assert '<td class="n">240 (240)</td>' in rows["lost"] and '<td class="n">60 (60)</td>' in rows["held"]
    assert "The lost queries that fell with their gold" in html


@pytest.mark.parametrize(("n_fell", "verdict"), [(109, "mixed"), (110, "fell")])
def test_mixed_needs_the_unmoved_part_to_be_a_majority(n_fell: int, verdict: str) -> None:
    """240 lost, 10 of them rose: 121 unmoved of 240 are a majority, 120 are not — then the answers fell."""
    ds = _compare(*_whole_index_recut(n_fell=n_fell)).to_json()["deciding_slice"]
    assert ds["lost_split"]["unmoved"]["n_queries"] == 240 - 10 - n_fell
    assert ds["verdict"] == verdict, ds["statement"]
    if verdict == "fell":
        assert ds["statement"].startswith(FELL)


@pytest.mark.parametrize("shift", [-0.1, 0.1])
def test_mixed_needs_the_unmoved_part_not_to_move(shift: float) -> None:
    """The same 30 falls, but the other 200 move by 0.1 each (passing still): they moved too."""
    ds = _compare(*_whole_index_recut(unmoved_shift=shift)).to_json()["deciding_slice"]
    lo, hi = ds["lost_split"]["unmoved"]["ci"]["percentile"]
    assert (hi < -0.05) if shift < 0 else (lo > 0.05)
    assert ds["verdict"] != "mixed" and (ds["verdict"] == "fell") == (shift < 0), ds["statement"]


def test_labels_and_fell_keep_their_verdicts_beside_the_split() -> None:
    """The stale-label fixture (nothing fell) still reads "labels", the story's evidence loss "fell";
    both carry the split of their lost queries."""
    ds = _compare(*_stale_labels()).to_json()["deciding_slice"]
    assert ds["verdict"] == "labels"
    assert [ds["lost_split"][k]["n_queries"] for k in ("fell", "rose", "unmoved")] == [0, 0, 60]
    ds = _compare(*story_records()).to_json()["deciding_slice"]
    assert ds["verdict"] == "fell"
    split = ds["lost_split"]
    assert split["fell"]["n_queries"] + split["rose"]["n_queries"] + split["unmoved"]["n_queries"] == 61
    assert split["fell"]["n_queries"] == ds["fell_anyway"]["n"] >= 25  # 53 passed, 28 pass now
    assert 2 * split["unmoved"]["n_queries"] <= 61
