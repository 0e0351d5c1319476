"""`ragtrace audit --queue NAME` fills a review queue, as a user runs it (console script, own process:
chDB allows one store directory per process and this test process owns the shared one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))
# The audit tests' deterministic keyword labeller: no model download, same verdicts every run.
LABELLER = "py:tests.audit.fixtures:make_grounding_labeller"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    # the repository first (for tests.audit.fixtures), then any source roots the caller set
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(list(args), capture_output=True, text=True, cwd=REPO, env=env, timeout=300, check=False)


def _seed(store_dir: Path) -> None:
    """The audit fixtures' five-mode scenario, written by a child process (the store is embedded)."""
    seed = textwrap.dedent(f"""
        from ragtrace_store import open_store
        from tests.audit.fixtures import scenario, write_traces
        with open_store({str(store_dir)!r}) as st:
            write_traces(st, "default", list(scenario("q").values()))
    """)
    proc = _run(sys.executable, "-c", seed)
    assert proc.returncode == 0, proc.stderr


def test_audit_fills_a_stratified_queue(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    _seed(store_dir)
    proc = _run(RAGTRACE, "audit", "--store", str(store_dir), "--labeller", LABELLER, "--relevance-labeller",
                "none", "--queue", "weekly", "--per-mode", "1", "--reviewers", "2", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    queued = report["review_queue"]
    # one trace per failure mode that occurred (the scenario has all five), K = 2
    assert queued["reviewers_per_item"] == 2 and queued["already_queued"] == 0
    modes = {k.split(":", 1)[1] for k in queued["added"] if k.startswith("mode:")}
    assert modes == {"retrieval_gap", "rank_inversion", "under_use", "fabrication", "ok"}
    assert all(v == 1 for k, v in queued["added"].items() if k.startswith("mode:"))
    assert "records" not in report
    check = textwrap.dedent(f"""
        from ragtrace_store import open_store
        from ragtrace_review.queues import list_items
        with open_store({str(store_dir)!r}) as st:
            items = list_items(st, tenant="default", queue="weekly")
            print(len(items), len({{i.manifest_id for i in items}}), items[0].manifest_id)
    """)
    proc = _run(sys.executable, "-c", check)
    assert proc.returncode == 0, proc.stderr
    n, n_manifests, manifest_id = proc.stdout.split()
    assert int(n) == sum(queued["added"].values()) and n_manifests == "1" and manifest_id == report["manifest_id"]
    # --queue needs the store itself, not a remote audit
    proc = _run(RAGTRACE, "audit", "--server", "http://127.0.0.1:9", "--queue", "weekly")
    assert proc.returncode == 2 and "--queue needs direct store access" in proc.stderr


def test_every_trace_below_the_review_threshold_goes_to_the_queue(tmp_path: Path) -> None:
    # The labeller states a review threshold (0.85) in its manifest: the audit reports, per failure
    # mode, the share labelled at or above it, and queues every trace below it, past the per-mode cap.
    store_dir = tmp_path / "store"
    _seed(store_dir)
    per_trace = tmp_path / "labels.jsonl"
    proc = _run(RAGTRACE, "audit", "--store", str(store_dir), "--labeller",
                "py:tests.audit.fixtures:make_reviewed_grounding_labeller", "--relevance-labeller", "none",
                "--queue", "unsure", "--per-mode", "1", "--per-trace", str(per_trace), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    records = [json.loads(line) for line in per_trace.read_text().splitlines()]
    complete = [r for r in records if r["failure_mode"] != "incomplete"]
    below = [r for r in complete if r["confidence"] < 0.85]
    assert 1 < len(below) < len(complete)  # the scenario has both, and more unsure traces than the cap
    sel = report["selective"]
    assert sel["review_threshold"] == 0.85
    assert sel["all"]["n"] == len(records) and sel["all"]["count"] == len(complete) - len(below)
    for mode, share in sel["by_mode"].items():
        of_mode = [r for r in records if r["failure_mode"] == mode]
        assert share["n"] == len(of_mode) and share["for_review"] == sum(r["confidence"] < 0.85 for r in of_mode)
    queued = report["review_queue"]
    assert queued["low_confidence_below"] == 0.85
    # every unsure trace is queued (as low confidence, or already under the disagreement stratum)
    assert queued["added"]["low_confidence"] + queued["added"].get("disagreement", 0) >= len(below)
    assert queued["added"]["low_confidence"] > 1
    check = textwrap.dedent(f"""
        from ragtrace_store import open_store
        from ragtrace_review.queues import list_items
        with open_store({str(store_dir)!r}) as st:
            print(" ".join(i.trace_id for i in list_items(st, tenant="default", queue="unsure")))
    """)
    proc = _run(sys.executable, "-c", check)
    assert proc.returncode == 0, proc.stderr
    assert {r["trace_id"] for r in below} <= set(proc.stdout.split())
