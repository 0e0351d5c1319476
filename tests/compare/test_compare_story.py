"""A release story (400 questions): retrieval collapses, generation improves, e2e rises slightly —
and `ragtrace compare` makes it impossible to miss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrace_cli.commands.compare import compare_main
from ragtrace_cli.main import main as ragtrace_main
from ragtrace_evaluator.compare.comparison import compare
from ragtrace_evaluator.compare.records import label_set, parse_record

from .story import story_records, write_jsonl

RESAMPLES = 2000  # enough for stable gates on n = 400, and quick


@pytest.fixture(scope="module")
def story_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("story")
    base, cand = story_records()
    return write_jsonl(d / "v1.jsonl", base), write_jsonl(d / "v2.jsonl", cand)


@pytest.fixture(scope="module")
def story_report(story_files: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("out") / "report.json"
    code = compare_main(["--baseline", str(story_files[0]), "--candidate", str(story_files[1]),
                         "--json", str(out), "--resamples", str(RESAMPLES), "--seed", "3"])
    assert code == 1
    return json.loads(out.read_text())


def test_decomposition_shows_the_cancellation(story_report: dict) -> None:
    d = story_report["decomposition"]
    b, c, delta = d["baseline"], d["candidate"], d["delta"]
    assert b["recall"] == pytest.approx(0.81) and c["recall"] == pytest.approx(0.66)
    assert b["p_pass_given_gold"] == pytest.approx(279 / 324) and c["p_pass_given_gold"] == pytest.approx(246 / 264)
    assert b["p_pass_without_gold"] == pytest.approx(33 / 76) and c["p_pass_without_gold"] == pytest.approx(69 / 136)
    assert b["e2e"] == pytest.approx(0.78) and c["e2e"] == pytest.approx(0.7875)
    for side in (b, c):
        assert side["term_gold"] == pytest.approx(side["recall"] * side["p_pass_given_gold"])
        assert side["term_without_gold"] == pytest.approx((1 - side["recall"]) * side["p_pass_without_gold"])
        assert side["term_gold"] + side["term_without_gold"] == pytest.approx(side["e2e"])
    # The two terms move in opposite directions by far more than e2e moves.
    assert delta["term_gold"] == pytest.approx(-0.0825) and delta["term_without_gold"] == pytest.approx(0.09)
    assert delta["e2e"] == pytest.approx(0.0075)
    lo, hi = d["ci"]["term_gold"]["bca"]
    assert hi < 0  # the retrieval term's loss is significant
    lo, hi = d["ci"]["e2e"]["percentile"]
    assert lo < 0 < hi  # while e2e's change is indistinguishable from none


def test_movers_name_the_61_that_lost_their_evidence(story_report: dict) -> None:
    movers = {(m["boundary"], m["direction"]): m for m in story_report["movers"]}
    lost = movers[("gold_in_context", "lost")]
    assert lost["n"] == 61 and len(lost["query_ids"]) == 61
    assert lost["baseline_mean"] == pytest.approx(0.84) and lost["candidate_mean"] == pytest.approx(0.49)
    assert lost["candidate_below"] > lost["baseline_below"]
    gained, held = movers[("gold_in_context", "gained")], movers[("gold_in_context", "held")]
    assert gained["n"] == 1 and held["n"] == 338
    rest_b = (gained["baseline_mean"] * 1 + held["baseline_mean"] * 338) / 339
    rest_c = (gained["candidate_mean"] * 1 + held["candidate_mean"] * 338) / 339
    assert rest_b == pytest.approx(0.77) and rest_c == pytest.approx(0.84)
    assert {m["boundary"] for m in story_report["movers"]} == {"gold_in_context", "ranking", "generation"}
    assert all(set(m) >= {"boundary", "direction", "n", "baseline_mean", "candidate_mean"}
               for m in story_report["movers"])
    # Trace ids travel with the query ids, for `ragtrace traces show`.
    assert lost["candidate_trace_ids"][0] == "v2-" + lost["query_ids"][0]


def test_recall_gate_trips_although_e2e_rose(story_report: dict) -> None:
    gates = {g["metric"]: g for g in story_report["gates"]}
    assert gates["recall_5"]["tripped"] is True
    assert gates["recall_5"]["observed"] == pytest.approx(-0.15)
    assert gates["pass_rate"]["tripped"] is False
    assert gates["decomposition.p_pass_given_gold"]["tripped"] is False
    metrics = {m["metric"]: m for m in story_report["metrics"]}
    assert metrics["pass_rate"]["delta"] > 0 and metrics["mean_score"]["delta"] > 0
    assert story_report["tripped"] is True
    fwer = story_report["gates_summary"]["family_false_alarm"]
    assert 0 < fwer < 0.1 and fwer <= story_report["gates_summary"]["independent_false_alarm"] + 0.02


def test_every_stage_metric_and_cell_has_both_values_delta_ci_and_n(story_report: dict) -> None:
    names = {m["metric"] for m in story_report["metrics"]}
    assert names >= {"recall_5", "precision_5", "recip_rank", "ndcg_cut_5", "success_5", "groundedness",
                     "abstention_rate", "pass_rate", "mean_score", "gold_in_context", "below_threshold"}
    for m in story_report["metrics"] + story_report["contingency"]:
        assert set(m) >= {"n", "baseline", "candidate", "delta", "ci", "se"}
        assert set(m["ci"]) >= {"percentile", "bca"}
    cells = {c["cell"]: c for c in story_report["contingency"]}
    assert cells["gold_in_context=yes pass=yes"]["baseline_count"] == 279
    assert cells["gold_in_context=no pass=yes"]["candidate_count"] == 69
    # The structurally empty cell (gold in context but not in the pool) is reported with an
    # undefined interval and a warning, not dropped and not given a zero-width interval.
    empty = cells["pool=no context=yes generation=entailed"]
    assert empty["baseline_count"] == 0 and empty["ci"]["bca"] == [None, None]
    assert any("pool=no context=yes generation=entailed" in w for w in story_report["warnings"])
    assert sum(c["baseline_count"] for k, c in cells.items() if k.startswith("pool=")) == 400


def test_terminal_output_prints_the_tripped_boundarys_movers(story_files: tuple[Path, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = ragtrace_main(["compare", "--baseline", str(story_files[0]), "--candidate", str(story_files[1]),
                          "--resamples", str(RESAMPLES), "--max-ids", "3"])
    out = capsys.readouterr().out
    assert code == 1
    assert "GATE TRIPPED recall_5" in out
    assert "gold_in_context lost: 61 queries, mean score 0.840 → 0.490" in out
    assert "ragtrace traces show v2-" in out and "… 58 more" in out
    assert "family-wise false-alarm probability" in out
    assert "Decomposition" in out and "Contingency cells" in out


def test_mover_lines_keep_their_command_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Real trace ids are 32 hex digits: a mover's line then names two and is wider than the console
    (150 columns when stdout is not a terminal); its `ragtrace traces show` command stays on one line."""
    base, cand = story_records()
    for side, records in (("a", base), ("b", cand)):
        for k, rec in enumerate(records):
            rec["trace_id"] = f"{side}{k:031x}"
    files = write_jsonl(tmp_path / "v1.jsonl", base), write_jsonl(tmp_path / "v2.jsonl", cand)
    code = ragtrace_main(["compare", "--baseline", str(files[0]), "--candidate", str(files[1]),
                          "--resamples", "200", "--max-ids", "3"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    shown = [line for line in lines if "→ ragtrace traces show" in line]
    assert shown
    for line in shown:
        candidate_id = line.split(" candidate ")[1].split()[0]
        assert len(candidate_id) == 32 and line.rstrip().endswith(f"ragtrace traces show {candidate_id}"), line


def test_seed_reproduces_the_report(story_files: tuple[Path, Path], tmp_path: Path) -> None:
    outs = []
    for i, seed in enumerate(("7", "7", "8")):
        out = tmp_path / f"r{i}.json"
        compare_main(["--baseline", str(story_files[0]), "--candidate", str(story_files[1]), "--json", str(out),
                      "--resamples", "500", "--seed", seed])
        outs.append(json.loads(out.read_text())["metrics"])
    assert outs[0] == outs[1]
    assert outs[0] != outs[2]


def test_unmatched_query_ids_are_reported_not_dropped(tmp_path: Path) -> None:
    base, cand = story_records()
    a = write_jsonl(tmp_path / "a.jsonl", base[:-3])
    b = write_jsonl(tmp_path / "b.jsonl", cand[5:])
    out = tmp_path / "r.json"
    compare_main(["--baseline", str(a), "--candidate", str(b), "--json", str(out), "--resamples", "300"])
    rep = json.loads(out.read_text())
    assert rep["pairing"]["n_pairs"] == 392
    assert rep["pairing"]["only_baseline"]["query_ids"] == sorted(r["query_id"] for r in cand[:5])
    assert rep["pairing"]["only_candidate"]["query_ids"] == sorted(r["query_id"] for r in base[-3:])
    assert any("only in the baseline" in w for w in rep["warnings"])


def test_minimal_records_from_another_harness(tmp_path: Path) -> None:
    base = [{"query_id": f"q{i}", "gold_in_context": i % 4 != 0, "pass": i % 3 != 0} for i in range(60)]
    cand = [{"query_id": f"q{i}", "gold_in_context": i % 5 != 0, "pass": i % 2 == 0} for i in range(60)]
    out = tmp_path / "r.json"
    code = compare_main(["--baseline", str(write_jsonl(tmp_path / "a.jsonl", base)), "--candidate",
                         str(write_jsonl(tmp_path / "b.jsonl", cand)), "--json", str(out), "--resamples", "300"])
    rep = json.loads(out.read_text())
    assert code in (0, 1)
    assert {m["metric"] for m in rep["metrics"]} == {"gold_in_context", "pass_rate"}
    assert all(m["value"] == "pass" for m in rep["movers"])
    assert [m["boundary"] for m in rep["movers"]] == ["gold_in_context"] * 3
    assert any("no record has a score" in w for w in rep["warnings"])


def test_no_gold_at_all_gives_undefined_conditional_rates_with_warnings(tmp_path: Path) -> None:
    base = [{"query_id": f"q{i}", "gold_in_context": False, "pass": i % 2 == 0, "score": 0.3 + 0.01 * i}
            for i in range(30)]
    cand = [{"query_id": f"q{i}", "gold_in_context": None, "pass": i % 3 == 0, "score": 0.2 + 0.01 * i}
            for i in range(30)]
    a = label_set("a", "file", [parse_record(r) for r in base])
    b = label_set("b", "file", [parse_record(r) for r in cand])
    with pytest.warns(RuntimeWarning, match="degenerate"):
        c = compare(a, b, n_resamples=300, seed=0)
    rep = c.to_json()
    assert rep["decomposition"]["baseline"]["p_pass_given_gold"] is None
    assert rep["decomposition"]["candidate"]["recall"] is None  # relevance unknown for every query
    assert rep["decomposition"]["delta"]["p_pass_given_gold"] is None
    gates = {g["metric"]: g for g in rep["gates"]}
    assert gates["decomposition.p_pass_given_gold"]["status"] == "undefined"
    assert gates["decomposition.p_pass_given_gold"]["tripped"] is False
    assert any("p_pass_given_gold: undefined" in w for w in rep["warnings"])
    json.dumps(rep, allow_nan=False)  # undefined is null, never NaN in the JSON


def test_one_query_compares_without_crashing(tmp_path: Path) -> None:
    rec = {"query_id": "only", "gold_in_context": True, "pass": True, "score": 0.9}
    out = tmp_path / "r.json"
    code = compare_main(["--baseline", str(write_jsonl(tmp_path / "a.jsonl", [rec])), "--candidate",
                         str(write_jsonl(tmp_path / "b.jsonl", [{**rec, "score": 0.4}])), "--json", str(out),
                         "--resamples", "200"])
    rep = json.loads(out.read_text())
    assert code == 0  # no gate can be evaluated on one pair: they are undefined, not tripped
    score = next(m for m in rep["metrics"] if m["metric"] == "mean_score")
    assert score["n"] == 1 and score["delta"] == pytest.approx(-0.5) and score["ci"]["bca"] == [None, None]
    assert any("n = 1" in w for w in rep["warnings"])


def test_mixed_manifests_are_refused_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = story_records()
    a = write_jsonl(tmp_path / "a.jsonl", base)
    b = write_jsonl(tmp_path / "b.jsonl", [{**r, "manifest_id": "other-labeller"} for r in cand])
    args = ["--baseline", str(a), "--candidate", str(b), "--resamples", "300"]
    assert compare_main(args) == 2
    assert "labeller manifests" in capsys.readouterr().err
    out = tmp_path / "r.json"
    assert compare_main([*args, "--force", "--json", str(out)]) == 1
    assert any("--force" in w for w in json.loads(out.read_text())["warnings"])


@pytest.mark.parametrize("content, message", [
    ('{"query_id": "q1", "gold_in_context": true}\n', "missing 'pass'"),
    ('{"query_id": "q1", "pass": true}\n', "missing 'gold_in_context'"),
    ('{"query_id": "q1", "gold_in_context": true, "pass": "yes"}\n', "'pass' must be true or false"),
    ('{"query_id": "q1", "gold_in_context": true, "pass": true, "score": 7}\n', "in [0, 1]"),
    ("not json\n", "not valid JSON"),
])
def test_bad_input_is_a_usage_error_that_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        content: str, message: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    good = write_jsonl(tmp_path / "good.jsonl", [{"query_id": "q1", "gold_in_context": True, "pass": True}])
    assert compare_main(["--baseline", str(good), "--candidate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert message in err and "bad.jsonl:1" in err


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert compare_main([]) == 2
    assert compare_main(["--baseline", str(tmp_path / "missing.jsonl"), "--candidate", "x.jsonl"]) == 2
    assert "no such file" in capsys.readouterr().err
    good = write_jsonl(tmp_path / "g.jsonl", [{"query_id": "q1", "gold_in_context": True, "pass": True}])
    other = write_jsonl(tmp_path / "o.jsonl", [{"query_id": "q2", "gold_in_context": True, "pass": True}])
    assert compare_main(["--baseline", str(good), "--candidate", str(other)]) == 2
    assert "no query id is in both releases" in capsys.readouterr().err
    assert compare_main(["--baseline", str(good), "--candidate", str(good), "--threshold", "3"]) == 2


def test_abstentions_without_a_score_are_excluded_from_means_but_count_as_below(tmp_path: Path) -> None:
    # As the audit writes them: an abstention has score null and does not pass.
    base = [{"query_id": f"q{i}", "gold_in_context": True, "pass": True, "score": 0.8} for i in range(20)]
    cand = [dict(r) for r in base]
    for r in cand[:5]:
        r.update({"gold_in_context": False, "pass": False, "score": None,
                  "generation": {"verdict": "abstained", "refusal_justified": True}})
    a = label_set("a", "file", [parse_record(r) for r in base])
    b = label_set("b", "file", [parse_record(r) for r in cand])
    rep = compare(a, b, n_resamples=300, seed=0, warn=False).to_json()
    lost = next(m for m in rep["movers"] if m["boundary"] == "gold_in_context" and m["direction"] == "lost")
    assert lost["value"] == "score" and lost["n"] == 5
    assert lost["baseline_mean"] == pytest.approx(0.8) and lost["candidate_mean"] is None  # undefined, not 0
    assert lost["baseline_below"] == 0.0 and lost["candidate_below"] == 1.0
    metrics = {m["metric"]: m for m in rep["metrics"]}
    assert metrics["mean_score"]["candidate"] == pytest.approx(0.8) and metrics["mean_score"]["n_candidate"] == 15
    assert metrics["below_threshold"]["candidate"] == pytest.approx(0.25)


def test_a_harness_metric_named_like_ours_does_not_collide() -> None:
    recs = [{"query_id": f"q{i}", "gold_in_context": True, "pass": i % 2 == 0,
             "metrics": {"pass_rate": 0.5, "abstained": False, "abstention_rate": 0.1}} for i in range(10)]
    a = label_set("a", "file", [parse_record(r) for r in recs])
    names = {m["metric"] for m in compare(a, a, n_resamples=200, warn=False).to_json()["metrics"]}
    assert {"pass_rate", "metrics.pass_rate", "abstention_rate", "metrics.abstention_rate"} <= names


def test_an_unwritable_report_path_is_a_usage_error(story_files: tuple[Path, Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = compare_main(["--baseline", str(story_files[0]), "--candidate", str(story_files[1]),
                         "--resamples", "200", "--json", str(blocker / "out.json")])
    assert code == 2 and "cannot write" in capsys.readouterr().err


def test_a_file_side_is_named_by_its_release(tmp_path: Path) -> None:
    from ragtrace_evaluator.compare.records import load_jsonl

    one = tmp_path / "labels-a.jsonl"
    one.write_text(json.dumps({"query_id": "q1", "gold_in_context": True, "pass": True, "release": "v7"}) + "\n")
    mixed = tmp_path / "labels-b.jsonl"
    mixed.write_text("\n".join(json.dumps({"query_id": f"q{i}", "gold_in_context": True, "pass": True,
                                            "release": f"v{i}"}) for i in range(2)) + "\n")
    assert load_jsonl(one).name == "v7 (labels-a.jsonl)"
    assert load_jsonl(mixed).name == str(mixed)
    assert load_jsonl(one, name="mine").name == "mine"
