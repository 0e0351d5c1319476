"""Surface × grounding in `ragtrace compare`: token F1 against the reference and groundedness as a
pair on the same queries, and the quadrant that lists exactly the queries whose surface score rose
while their grounding fell (a reranker promoting hard distractors: the fabricated answer shares the
reference's vocabulary)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragtrace_cli.commands.compare import compare_main
from ragtrace_evaluator.compare.comparison import compare
from ragtrace_evaluator.compare.records import label_set, parse_record
from ragtrace_evaluator.compare.report_html import render_report, write_report
from tests.browser import chromium

from .story import write_jsonl

# group: (size, Δ token F1, Δ groundedness); the baseline of each query is drawn in [0.3, 0.6]
GROUPS = {
    "up_down": (23, 0.30, -0.40),   # the planted subset
    "up_up": (40, 0.20, 0.15),
    "down_up": (30, -0.25, 0.20),
    "down_down": (20, -0.15, -0.30),
    "flat": (60, 0.03, -0.04),      # under the 0.05 dead zone on both axes
    "flat_one": (17, 0.35, 0.01),   # a big surface gain with grounding flat: in no quadrant
}
N_NO_REFERENCE = 6                   # no reference answer: token F1 undefined on both sides
N_CANDIDATE_ABSTAINED = 4            # the candidate abstained: groundedness (and token F1) undefined


def _rec(qid: str, release: str, f1: float | None, grounded: float | None) -> dict[str, Any]:
    return {"query_id": qid, "trace_id": f"{release}-{qid}", "release": release, "gold_in_context": True,
            "pass": bool(grounded is not None and grounded > 0.5),
            "metrics": {"token_f1": f1, "groundedness": grounded}}


def quadrant_story(seed: int = 4) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, list[str]]]:
    rng = np.random.default_rng(seed)
    base, cand, ids = [], [], {}
    i = 0
    for group, (size, ds, dg) in GROUPS.items():
        ids[group] = []
        for _ in range(size):
            qid = f"s{i:03d}"
            i += 1
            s0, g0 = float(rng.uniform(0.3, 0.6)), float(rng.uniform(0.3, 0.6))
            # jitter keeps every query's deltas distinct without leaving its group
            jitter = float(rng.uniform(-0.005, 0.005))
            base.append(_rec(qid, "a", s0, g0))
            cand.append(_rec(qid, "b", s0 + ds + jitter, g0 + dg + jitter))
            ids[group].append(qid)
    for _ in range(N_NO_REFERENCE):
        qid = f"s{i:03d}"
        i += 1
        base.append(_rec(qid, "a", None, 0.8))
        cand.append(_rec(qid, "b", None, 0.2))
    for _ in range(N_CANDIDATE_ABSTAINED):
        qid = f"s{i:03d}"
        i += 1
        base.append(_rec(qid, "a", 0.5, 0.8))
        cand.append(_rec(qid, "b", None, None))
    order = rng.permutation(len(base))
    return [base[k] for k in order], [cand[k] for k in order], ids


@pytest.fixture(scope="module")
def story() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, list[str]]]:
    return quadrant_story()


@pytest.fixture(scope="module")
def comparison(story: tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, list[str]]]) -> Any:
    base, cand, _ = story
    a = label_set("a", "file", [parse_record(r) for r in base])
    b = label_set("b", "file", [parse_record(r) for r in cand])
    return compare(a, b, n_resamples=2000, seed=5, warn=False)


def test_the_quadrant_lists_exactly_the_planted_queries(story: Any, comparison: Any) -> None:
    _, _, ids = story
    sg = comparison.to_json()["surface_grounding"]
    assert sg["available"] and sg["surface_metric"] == "token_f1"
    quadrants = {q["quadrant"]: q for q in sg["quadrants"]}
    assert set(quadrants["surface_up_grounding_down"]["query_ids"]) == set(ids["up_down"])
    assert len(quadrants["surface_up_grounding_down"]["query_ids"]) == 23
    assert set(quadrants["surface_up_grounding_up"]["query_ids"]) == set(ids["up_up"])
    assert set(quadrants["surface_down_grounding_up"]["query_ids"]) == set(ids["down_up"])
    assert set(quadrants["surface_down_grounding_down"]["query_ids"]) == set(ids["down_down"])
    assert sg["n_flat"] == 60 + 17
    # the movers are that quadrant, largest grounding fall first, with their traces
    movers = sg["movers"]
    assert movers["query_ids"] == quadrants["surface_up_grounding_down"]["query_ids"]
    assert movers["delta_grounding"] == sorted(movers["delta_grounding"])
    assert movers["candidate_trace_ids"] == [f"b-{q}" for q in movers["query_ids"]]


def test_the_pair_is_on_the_same_queries_with_paired_intervals(story: Any, comparison: Any) -> None:
    base, cand, _ = story
    sg = comparison.to_json()["surface_grounding"]
    n_pair = sum(size for size, _, _ in GROUPS.values())
    assert sg["n"] == n_pair and sg["n_no_surface"] == N_NO_REFERENCE + N_CANDIDATE_ABSTAINED
    assert sg["n_no_grounding"] == 0
    both = [(a, b) for a, b in zip(base, cand, strict=True)
            if None not in (a["metrics"]["token_f1"], b["metrics"]["token_f1"], b["metrics"]["groundedness"])]
    assert len(both) == n_pair
    for axis, key in (("surface", "token_f1"), ("grounding", "groundedness")):
        m = sg[axis]
        assert m["n_baseline"] == m["n_candidate"] == n_pair
        assert m["baseline"] == pytest.approx(np.mean([a["metrics"][key] for a, _ in both]), abs=1e-12)
        assert m["candidate"] == pytest.approx(np.mean([b["metrics"][key] for _, b in both]), abs=1e-12)
        lo, hi = m["ci"]["bca"]
        assert lo is not None and lo <= m["delta"] <= hi
    # overall both rose a little, which is why the quadrant matters
    assert sg["surface"]["delta"] > 0


def test_terminal_and_html_show_the_pair_and_the_movers(story: Any, comparison: Any, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    base, cand, ids = story
    a, b = write_jsonl(tmp_path / "a.jsonl", base), write_jsonl(tmp_path / "b.jsonl", cand)
    code = compare_main(["--baseline", str(a), "--candidate", str(b), "--resamples", "500", "--max-ids", "100",
                         "--html", str(tmp_path / "r.html"), "--json", str(tmp_path / "r.json"),
                         "--server-url", "http://trace.host:4318"])
    assert code in (0, 1)
    text = capsys.readouterr().out
    assert "Surface × grounding" in text and "surface up, grounding down: 23 queries" in text
    assert all(q in text for q in ids["up_down"])
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Surface up, grounding down (23)" in html
    for q in ids["up_down"]:
        assert f'href="http://trace.host:4318/traces/b-{q}"' in html
    assert json.loads((tmp_path / "r.json").read_text())["surface_grounding"]["movers"]["n"] == 23


def test_without_a_reference_the_report_says_so_rather_than_zero(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    recs_a = [_rec(f"n{i}", "a", None, 0.5 + i / 100) for i in range(20)]
    recs_b = [_rec(f"n{i}", "b", None, 0.4 + i / 100) for i in range(20)]
    a = label_set("a", "file", [parse_record(r) for r in recs_a])
    b = label_set("b", "file", [parse_record(r) for r in recs_b])
    c = compare(a, b, n_resamples=200, seed=0, warn=False)
    sg = c.to_json()["surface_grounding"]
    assert sg["available"] is False and sg["surface"] is None and "no reference answer" in sg["reason"]
    assert "pair:token_f1" not in c.run.results
    html = render_report(c)
    assert 'id="surface-no-reference"' in html and "No reference" in html and 'id="plot-surface"' not in html
    # only one release scored against a reference: still no pair, and the reason names the side
    recs_a[0]["metrics"]["token_f1"] = 0.4
    a = label_set("a", "file", [parse_record(r) for r in recs_a])
    sg = compare(a, b, n_resamples=200, seed=0, warn=False).to_json()["surface_grounding"]
    assert sg["available"] is False and "in the candidate (only the baseline has one)" in sg["reason"]
    pa, pb = write_jsonl(tmp_path / "a.jsonl", recs_a), write_jsonl(tmp_path / "b.jsonl", recs_b)
    compare_main(["--baseline", str(pa), "--candidate", str(pb), "--resamples", "200"])
    assert "Surface × grounding: no reference" in capsys.readouterr().out


def test_a_bad_min_change_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = [_rec(f"n{i}", "a", 0.5, 0.5) for i in range(5)]
    pa = write_jsonl(tmp_path / "a.jsonl", recs)
    assert compare_main(["--baseline", str(pa), "--candidate", str(pa), "--resamples", "200",
                         "--min-change", "1.5"]) == 2
    assert "--min-change" in capsys.readouterr().err


@pytest.mark.browser
def test_the_surface_plot_and_mode_table_render_in_headless_chromium(comparison: Any, tmp_path: Path) -> None:
    path = write_report(comparison, tmp_path / "report.html")
    errors: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        plot = page.evaluate("() => { const i = document.getElementById('plot-surface'); "
                             "return i && i.complete && i.naturalWidth > 100 && i.naturalHeight > 100; }")
        rows = page.locator("table.surface-movers tr").count()
        quadrant = page.inner_text("#quadrant-table")
    assert errors == []
    assert plot is True and rows == 1 + 23
    assert "surface up grounding down\t23" in quadrant
