"""`ragtrace audit` and `ragtrace labels import` as a user runs them: the console script in its own
process against an embedded store directory (a separate process, since chDB allows one directory
per process and this test process may own another)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))
LABELLER = "py:tests.audit.fixtures:make_grounding_labeller"


def _env() -> dict[str, str]:
    # the repository first (tests.audit.fixtures), then any source roots already on the path, so a
    # worktree's console script imports that worktree's packages rather than the installed ones
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RAGTRACE, *args], capture_output=True, text=True, cwd=REPO, env=_env(), timeout=300,
                          check=False)


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli-store")
    script = textwrap.dedent(f"""
        from ragtrace_store import open_store
        from tests.audit.fixtures import Trace, scenario, write_traces
        with open_store({str(path)!r}) as st:
            traces = list(scenario("c").values())
            traces.append(Trace("c-qrels", "r1", ["freeze", "gold"], ["freeze"],
                                "Water freezes at 0 degrees Celsius.", query_id="Q-42"))
            write_traces(st, "default", traces)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, env=_env(),
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return path


def test_labels_import_then_audit(store_dir: Path, tmp_path: Path) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("Q-42 0 gold 1\nQ-42 0 freeze 0\nQ-99 0 x 2\n")
    imp = _run("labels", "import", str(qrels), "--store", str(store_dir))
    assert imp.returncode == 0, imp.stderr
    assert "imported 3 judgements (2 relevant) for 2 queries" in imp.stdout
    assert "1 of those query ids match stored traces" in imp.stdout

    report_path, per_trace = tmp_path / "report.json", tmp_path / "labels.jsonl"
    proc = _run("audit", "--store", str(store_dir), "--labeller", LABELLER, "--relevance-labeller", "none",
                "--json", str(report_path), "--per-trace", str(per_trace))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    assert report["n"] == 9
    assert report["failure_modes"]["rank_inversion"]["count"] == 3  # two injected + the qrels trace
    records = {json.loads(x)["trace_id"]: json.loads(x) for x in per_trace.read_text().splitlines()}
    assert records["c-qrels"]["retrieval"]["gold_source"] == "qrels"
    assert records["c-qrels"]["failure_mode"] == "rank_inversion"
    assert records["c-fab"]["failure_mode"] == "fabrication"
    # the terminal shows the same as tables
    for text in ("Primary failure mode", "rank_inversion", "Contingency", "Stage metrics", "abstentions: 2"):
        assert text in proc.stdout, text

    again = _run("audit", "--store", str(store_dir), "--labeller", LABELLER, "--relevance-labeller", "none",
                 "--json", "-")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["sampling"]["n_resumed"] == 9 and second["sampling"]["n_labelled_now"] == 0
    assert second["manifest_id"] == report["manifest_id"]


def test_usage_errors_exit_2(store_dir: Path, tmp_path: Path) -> None:
    both = _run("audit", "--store", str(store_dir), "--sample", "3", "--rate", "0.5")
    assert both.returncode == 2 and "not allowed with" in both.stderr
    shard = _run("audit", "--store", str(store_dir), "--labeller", LABELLER, "--shard", "4/2")
    assert shard.returncode == 2 and "--shard" in shard.stderr
    bad = tmp_path / "bad.txt"
    bad.write_text("Q1 gold 1\n")
    imp = _run("labels", "import", str(bad), "--store", str(store_dir))
    assert imp.returncode == 2 and "expected 4 fields" in imp.stderr
    plug = _run("audit", "--store", str(store_dir), "--labeller", "py:nowhere.at_all:make")
    assert plug.returncode == 2 and "cannot load nowhere.at_all:make" in plug.stderr


def test_audit_of_a_release_that_matches_nothing_says_so(store_dir: Path) -> None:
    proc = _run("audit", "--store", str(store_dir), "--labeller", LABELLER, "--release", "r-typo", "--quiet")
    assert proc.returncode == 0, proc.stderr  # an empty window is not an error (a scheduled audit may find one)
    assert "no stored trace matches --tenant 'default', --release 'r-typo'; nothing was labelled" in proc.stderr
    found = _run("audit", "--store", str(store_dir), "--labeller", LABELLER, "--release", "r1", "--quiet")
    assert found.returncode == 0 and "no stored trace matches" not in found.stderr


def test_labels_import_references_then_audit(store_dir: Path, tmp_path: Path) -> None:
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"query_id": "Q-42", "reference": "100 degrees Celsius"}\n\n{"query_id": "Q-77", '
                    '"reference": "elsewhere"}\n')
    imp = _run("labels", "import", str(refs), "--store", str(store_dir))
    assert imp.returncode == 0, imp.stderr
    assert "imported 2 reference answers" in imp.stdout and "1 of those query ids match" in imp.stdout
    per_trace = tmp_path / "labels.jsonl"
    proc = _run("audit", "--store", str(store_dir), "--labeller", LABELLER, "--relevance-labeller", "none",
                "--no-resume", "--quiet", "--per-trace", str(per_trace))
    assert proc.returncode == 0, proc.stderr
    records = {json.loads(x)["trace_id"]: json.loads(x) for x in per_trace.read_text().splitlines()}
    # "Water freezes at 0 degrees Celsius." is grounded but wrong: the reference's number is missing
    qrels_trace = records["c-qrels"]
    assert qrels_trace["score_basis"] == "reference" and qrels_trace["pass"] is False
    assert qrels_trace["failure_mode"] == "rank_inversion"  # the failure mode does not move
    assert {r["score_basis"] for t, r in records.items() if t != "c-qrels"} <= {"grounding", None}


def test_labels_import_bad_references_name_the_line(store_dir: Path, tmp_path: Path) -> None:
    cases = {
        '{"query_id": "Q1", "reference": "a"}\n{"query_id": "Q2", "reference": "b"\n': (":2", "not valid JSON"),
        '{"query_id": "Q1", "reference": "a"}\n\n{"query_id": "Q3"}\n': (":3", "'reference' must be"),
        '{"reference": "a"}\n': (":1", "'query_id' must be"),
        '{"query_id": "Q1", "reference": "a"}\n["Q2", "b"]\n': (":2", "not an object"),
    }
    for i, (text, (line, what)) in enumerate(cases.items()):
        bad = tmp_path / f"bad{i}.jsonl"
        bad.write_text(text)
        imp = _run("labels", "import", str(bad), "--store", str(store_dir))
        assert imp.returncode == 2, imp.stdout
        assert f"{bad}{line}: {what}" in imp.stderr and '{"query_id": "q1", "reference":' in imp.stderr
    # forcing the wrong kind says so: a JSON file read as qrels, and qrels read as references
    forced = _run("labels", "import", str(tmp_path / "bad0.jsonl"), "--kind", "qrels", "--store", str(store_dir))
    assert forced.returncode == 2 and "the file looks like references: use --kind references" in forced.stderr
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("Q-42 0 gold 1\n")
    as_refs = _run("labels", "import", str(qrels), "--kind", "references", "--store", str(store_dir))
    assert as_refs.returncode == 2 and f"{qrels}:1: not valid JSON" in as_refs.stderr
    assert "use --kind qrels" in as_refs.stderr


def test_audit_through_the_server_of_an_empty_tenant_says_so(chdb_store: object,
                                                             tmp_path_factory: pytest.TempPathFactory,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # with --server the tenant is the token's, so an audit without filters names none: the message
    # read "no stored trace matches ; nothing was labelled"
    import uuid

    from ragtrace_cli.commands.audit import audit_main
    from tests.collector._server import running

    with running(chdb_store, str(tmp_path_factory.mktemp("spool")),
                 tokens={"empty-tok": f"empty-{uuid.uuid4().hex[:8]}"}) as (url, _app):
        assert audit_main(["--server", url, "--token", "empty-tok", "--sample", "5", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "no stored trace is in the token's tenant; nothing was labelled" in err
    assert "matches ;" not in err


@pytest.mark.parametrize(("flags", "problem"), [
    (["--reviewers", "99"], "reviewers (K per item) must be between 1 and 50, got 99"),
    (["--per-mode", "0"], "per_mode must be >= 1, got 0"),
    (["--queue", "weekly/2"], "invalid queue name 'weekly/2'"),
])
def test_queue_options_that_no_queue_takes_are_refused_before_the_audit(store_dir: Path, tmp_path: Path,
                                                                        flags: list[str], problem: str) -> None:
    # before, the whole audit ran (labels written, per-trace file and all) and only then was the
    # queue refused
    per_trace = tmp_path / "labels.jsonl"
    proc = _run("audit", "--store", str(store_dir), "--labeller", LABELLER, "--quiet", "--no-resume",
                "--per-trace", str(per_trace), "--queue", "weekly", *flags)
    assert proc.returncode == 2 and f"ragtrace audit: --queue: {problem}" in proc.stderr, proc.stderr
    assert not per_trace.exists()
