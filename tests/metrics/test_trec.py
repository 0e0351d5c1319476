"""trec_eval peer test: our measures equal trec_eval's own expected outputs, every query and measure."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragtrace_cli.commands.metrics import metrics_main
from ragtrace_evaluator.metrics import trec

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "trec_eval"
_OURS = re.compile(r"^(P|recall|ndcg_cut|success)_\d+$|^(recip_rank|map|num_ret|num_rel|num_rel_ret|num_q)$")


def _expected(name: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for line in (DATA / name).read_text().splitlines():
        measure, qid, value = line.split()
        if _OURS.match(measure):
            out.setdefault(qid, {})[measure] = value
    return out


def _shown(v: object) -> str:
    return str(v) if isinstance(v, int) else f"{v:.4f}"


# (expected output, qrels, run, options): the command lines of quicktest_commands.txt
FIXTURES = [
    ("out.test", "qrels.test", "results.test", {}),
    ("out.test.a", "qrels.test", "results.test", {}),
    ("out.test.aq", "qrels.test", "results.test", {}),
    ("out.test.aqc", "qrels.test", "results.trunc", {"complete": True}),
    ("out.test.aql", "qrels.rel_level", "results.test", {"relevance_level": 2}),
    ("out.test.meas_params", "qrels.test", "results.test", {}),
]


@pytest.mark.shared_data
@pytest.mark.parametrize(("out", "qrels", "run", "opts"), FIXTURES, ids=[f[0] for f in FIXTURES])
def test_equals_trec_eval_fixture(out: str, qrels: str, run: str, opts: dict[str, object]) -> None:
    if not DATA.is_dir():
        pytest.skip(f"reference data not present at {DATA} (only in the development checkout)")
    expected = _expected(out)
    measures = sorted({m for vals in expected.values() for m in vals if not m.startswith("num_")})
    report = trec.evaluate(trec.read_qrels(DATA / qrels), trec.read_run(DATA / run), measures,
                           **opts).as_json()  # type: ignore[arg-type]
    checked = 0
    for qid, vals in expected.items():
        got = report["all"] if qid == "all" else report["per_query"][qid]  # type: ignore[index]
        for measure, value in vals.items():
            assert _shown(got[measure]) == value, f"{out}: {measure} for {qid}"
            checked += 1
    assert checked >= 15


@pytest.mark.shared_data
def test_cli_json_matches_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    if not DATA.is_dir():
        pytest.skip(f"reference data not present at {DATA}")
    rc = metrics_main(["--qrels", str(DATA / "qrels.test"), "--run", str(DATA / "results.test"), "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) >= {"per_query", "all"}
    assert f"{report['all']['recip_rank']:.4f}" == "0.4064"
    assert f"{report['per_query']['302']['ndcg_cut_10']:.4f}" == "0.7530"
    assert report["per_query"]["302"]["success_5"] == 1.0
    assert f"{report['all']['recall_10']:.4f}" == "0.0317"


def test_cli_through_console_script(tmp_path: Path) -> None:
    qrels = tmp_path / "q.txt"
    run = tmp_path / "r.txt"
    qrels.write_text("q1 0 a 1\nq1 0 b 0\nq1 0 c 2\n")
    run.write_text("q1 Q0 b 1 0.9 t\nq1 Q0 a 2 0.5 t\nq1 Q0 c 3 0.5 t\n")
    exe = Path(sys.executable).with_name("ragtrace")
    proc = subprocess.run([str(exe), "metrics", "--qrels", str(qrels), "--run", str(run), "-m", "P_2,recip_rank"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    # ties broken by doc id descending: b (0.9), c (0.5), a (0.5) -> P_2 = 1/2, first relevant at rank 2
    assert "P_2                   \tall\t0.5000" in proc.stdout
    assert "recip_rank            \tall\t0.5000" in proc.stdout


def test_tie_break_is_docno_descending() -> None:
    assert trec.trec_order({"a": 1.0, "c": 1.0, "b": 2.0, "B": 1.0}) == ["b", "c", "a", "B"]


def test_graded_ndcg_and_undefined() -> None:
    vals = trec.query_measures(["x", "y", "z"], {"y": 2, "z": 1, "w": -1}, ["ndcg_cut_2", "recall_2", "P_5"])
    ideal = 2 + 1 / 1.5849625007211562
    assert vals["ndcg_cut_2"] == pytest.approx((2 / 1.5849625007211562) / ideal)
    assert vals["recall_2"] == 0.5
    assert vals["P_5"] == pytest.approx(2 / 5)  # divides by k, not by the retrieved count
    none = trec.query_measures(["x"], {"x": 0}, ["recall_5", "map", "ndcg_cut_5", "recip_rank", "P_5"])
    assert none == {"recall_5": None, "map": None, "ndcg_cut_5": None, "recip_rank": None, "P_5": 0.0}


def test_unjudged_documents_are_not_relevant_at_level_0() -> None:
    # -l 0 makes judged-0 documents relevant; the unjudged one ranked first stays not relevant,
    # agreeing with num_rel_ret (as in trec_eval, where an unjudged document has no grade)
    result = trec.evaluate({"q": {"judged0": 0, "gold": 2}}, {"q": {"unjudged": 3.0, "judged0": 2.0, "gold": 1.0}},
                           ["P_1", "P_3", "recip_rank", "success_1"], relevance_level=0)
    assert result.per_query["q"] == {"P_1": 0.0, "P_3": pytest.approx(2 / 3), "recip_rank": 0.5, "success_1": 0.0}
    assert result.as_json()["all"]["num_rel_ret"] == 2


def test_undefined_counted_in_summary() -> None:
    result = trec.evaluate({"q1": {"a": 1}, "q2": {"a": 0}}, {"q1": {"a": 1.0}, "q2": {"a": 1.0}}, ["recall_5"])
    s = result.summary["recall_5"]
    assert (s.n, s.n_undefined, s.mean) == (2, 1, 0.5)
    assert result.as_json()["undefined"] == {"recall_5": 1}


@pytest.mark.parametrize("bad", ["P_0", "ndcg", "P5", "recall_x"])
def test_bad_measure_names(bad: str) -> None:
    with pytest.raises(trec.TrecFormatError):
        trec.parse_measure(bad)


def test_bad_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 a\n")
    run = tmp_path / "r.txt"
    run.write_text("q1 Q0 a 1 0.5 t\n")
    assert metrics_main(["--qrels", str(qrels), "--run", str(run)]) == 2
    assert "expected 4 fields" in capsys.readouterr().err
    assert metrics_main(["--qrels", str(tmp_path / "missing"), "--run", str(run)]) == 2
    run.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 a 2 0.4 t\n")
    qrels.write_text("q1 0 a 1\n")
    assert metrics_main(["--qrels", str(qrels), "--run", str(run)]) == 2
    assert "appears twice" in capsys.readouterr().err
