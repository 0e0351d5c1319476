"""`ragtrace demo`'s closing summary: what a user copies from it (paths, URLs, the serve command) is
printed on one line and as it is, whatever the terminal's width and whatever the paths contain."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtrace_examples.demo import DemoConfig, DemoResult, print_summary


def test_copied_lines_are_whole_and_paths_are_not_markup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a long path (pytest's own are 60–100 characters) with brackets rich would read as a style tag
    out = tmp_path / ("a-rather-long-folder-name-for-the-demo-" * 2) / "[bold]run"
    out.mkdir(parents=True)
    labels = {"v1": out / "labels-v1.jsonl", "v2": out / "labels-v2.jsonl"}
    for path in labels.values():
        path.write_text("")
    store = out / "store"
    res = DemoResult(out=out, store=store, collector_url="http://127.0.0.1:41383", report_html=out / "report.html",
                     compare_json=out / "compare.json", labels=labels, faults=out / "faults.jsonl", audit={},
                     compare_exit=1, tripped_gates=["recall_5 (gold_in_context)"],
                     fault_check={"modes": [], "clean": {"n": 0, "hits": 0, "share": None}},
                     review_url="http://127.0.0.1:41383/review/login", reviewer_token="rtr_token",
                     deciding_slice="answers fell with the evidence: [not a style] 95% CI [-0.978, -0.692]")
    print_summary(res, DemoConfig(out=out))
    lines = capsys.readouterr().out.splitlines()

    serve = f"ragtrace serve --store {store} --port 41383"
    assert len(serve) > 80  # longer than the console's width when stdout is not a terminal
    assert any(serve in line for line in lines), lines
    assert any(line.startswith("HTML report:") and str(out / "report.html") in line for line in lines), lines
    assert any(f"{labels['v1']}, {labels['v2']}" in line for line in lines), lines
    assert any("[not a style]" in line for line in lines), lines
