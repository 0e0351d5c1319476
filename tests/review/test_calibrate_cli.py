"""Agreement report, gold export and the `ragtrace reviewers` / `ragtrace review` commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragtrace_cli.commands.review import review_main, reviewers_main
from ragtrace_review import auth
from ragtrace_review.calibrate import agreement_report
from ragtrace_review.queues import enqueue, next_item, record_decision
from ragtrace_store import Store

from .rows import label_record

Seeder = Callable[..., list[dict[str, Any]]]


def _two_reviewers_decide(store: Store, tenant: str) -> None:
    a, _ = auth.add_reviewer(store, "ann", tenant=tenant)
    b, _ = auth.add_reviewer(store, "ben", tenant=tenant)
    # labeller modes by item: fabrication, ok, under_use, ok (claims labelled entailed, neutral)
    plan = {
        "ann": {0: ("fabrication", ["entailed", "neutral"]), 1: ("ok", ["entailed", "neutral"]),
                2: ("under_use", ["entailed", "neutral"]), 3: ("ok", ["entailed", "neutral"])},
        "ben": {0: ("fabrication", ["entailed", "contradicted"]), 1: ("ok", ["entailed", "neutral"]),
                2: ("ok", ["entailed", "neutral"]), 3: ("ok", ["entailed", "neutral"])},
    }
    for reviewer in (a, b):  # ann decides everything first, so she is "rater 1" on every item
        while (t := next_item(store, reviewer, "cal")) is not None:
            index = int(t.rsplit("tr", 1)[1])
            mode, claims = plan[reviewer.name][index]
            relevance = {"d1": True, "d2": reviewer.name == "ben" and index == 0}
            record_decision(store, reviewer, "cal", t, failure_mode=mode, claims=claims, relevance=relevance,
                            note="d2 is off-topic" if reviewer.name == "ann" and index == 0 else "")


def test_agreement_report_hand_computed(store: Store, tenant: str, seeded: Seeder,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    seeded(["fabrication", "ok", "under_use", "ok"])
    enqueue(store, "cal", None, per_mode=5, reviewers=2, tenant=tenant)
    _two_reviewers_decide(store, tenant)
    report = agreement_report(store, tenant=tenant, queue="cal")
    fm = report["inter_reviewer"]["failure_mode"]
    # rater 1 (ann): fab ok uu ok; rater 2 (ben): fab ok ok ok. po = 3/4;
    # pe = .25*.25 (fab) + .5*.75 (ok) + .25*0 (uu) = .4375; kappa = .3125/.5625 = 5/9
    assert fm["method"] == "cohen" and fm["n"] == 4
    assert fm["kappa"] == pytest.approx(5 / 9)
    assert fm["ci"][0] < 5 / 9 < fm["ci"][1]
    assert fm["fleiss"]["kappa"] is not None
    # claims: 8 units, one disagreement (item 0, claim 2); po = 7/8,
    # pe = .5*.5 (entailed) + .5*.375 (neutral) + 0*.125 = .4375; kappa = .4375/.5625 = 7/9
    assert report["inter_reviewer"]["claims"]["kappa"] == pytest.approx(7 / 9)
    cal = report["labeller"]["m-test"]["failure_mode"]
    # majorities: fab, ok, (tie), ok -> the labeller matches all 3 items with a majority
    assert cal["n"] == 3 and cal["no_majority"] == 1
    assert cal["accuracy"]["k"] == 3 and cal["accuracy"]["n"] == 3
    assert cal["confusion"]["fabrication"]["fabrication"] == 1 and cal["confusion"]["ok"]["ok"] == 2
    per_mode = {m["mode"]: m for m in cal["per_mode"]}
    assert per_mode["ok"]["precision"]["n"] == 2 and per_mode["under_use"]["precision"]["n"] == 0
    assert per_mode["under_use"]["precision"]["value"] is None

    assert review_main(["agreement", "--queue", "cal", "--tenant", tenant, "--json"], store=store) == 0
    assert json.loads(capsys.readouterr().out)["inter_reviewer"]["failure_mode"]["kappa"] == pytest.approx(5 / 9)
    assert review_main(["agreement", "--queue", "cal", "--tenant", tenant], store=store) == 0
    text = capsys.readouterr().out
    assert "Cohen's kappa = 0.556" in text and "labeller (manifest m-test)" in text
    assert review_main(["status", "--tenant", tenant, "--json"], store=store) == 0
    status = json.loads(capsys.readouterr().out)
    assert status == [{"queue": "cal", "items": 4, "reviewers_per_item": 2, "complete": 4, "decisions": 8,
                       "target": 8, "reviewers": [{"name": "ann", "decided": 4}, {"name": "ben", "decided": 4}]}]
    assert review_main(["status", "--tenant", tenant], store=store) == 0
    assert "cal: 8/8 decisions (100%), 4 of 4 items complete, K=2; ann 4, ben 4" in capsys.readouterr().out
    assert review_main(["agreement", "--queue", "nope", "--tenant", tenant], store=store) == 1
    assert "no queue 'nope'" in capsys.readouterr().err


def test_export_writes_gold_jsonl_and_qrels(store: Store, tenant: str, seeded: Seeder, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    seeded(["fabrication", "ok", "under_use", "ok"])
    enqueue(store, "cal", None, per_mode=5, reviewers=2, tenant=tenant)
    _two_reviewers_decide(store, tenant)
    out = tmp_path / "gold"
    assert review_main(["export", "--queue", "cal", "--tenant", tenant, "--out", str(out), "--to-store"],
                       store=store) == 0
    assert "wrote 4 reviewed items" in capsys.readouterr().out
    records = [json.loads(line) for line in (out / "reviews.jsonl").read_text().splitlines()]
    assert len(records) == 4
    first = next(r for r in records if r["trace_id"].endswith("tr000"))
    assert first["failure_mode"] == "fabrication" and first["votes"] == {"fabrication": 2}
    assert [c["verdict"] for c in first["claims"]] == ["entailed", None]  # neutral vs contradicted: tie
    assert first["notes"] == [{"reviewer": "ann", "note": "d2 is off-topic"}]
    assert next(r for r in records if r["trace_id"].endswith("tr002"))["failure_mode"] is None  # tie
    qrels = (out / "qrels.txt").read_text().splitlines()
    # 4 items x (d1, d2), minus item 0's d2 (one reviewer each way: no majority)
    assert len(qrels) == 7
    assert f"q-{tenant}-tr000 0 d1 1" in qrels and f"q-{tenant}-tr001 0 d2 0" in qrels
    gold = store.query_rows(
        f"SELECT query_id, doc_id, relevance FROM {store.table('gold')} FINAL "
        "WHERE tenant = {t:String} AND source = 'review' ORDER BY query_id, doc_id", {"t": tenant})
    assert len(gold) == 7 and (f"q-{tenant}-tr000", "d1", 1) in gold


def test_export_of_a_queue_that_does_not_exist_or_to_a_file_is_refused(
        store: Store, tenant: str, seeded: Seeder, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gold"
    assert review_main(["export", "--queue", "nope", "--tenant", tenant, "--out", str(out)], store=store) == 1
    assert "no queue 'nope'" in capsys.readouterr().err
    assert not out.exists()  # nothing written for a queue that is not there
    seeded(["ok"])
    enqueue(store, "exp-file", None, per_mode=5, reviewers=1, tenant=tenant)
    a_file = tmp_path / "out.txt"
    a_file.write_text("keep me", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        review_main(["export", "--queue", "exp-file", "--tenant", tenant, "--out", str(a_file)], store=store)
    assert exc.value.code == 2
    assert f"--out {a_file}: is a file; give a directory" in capsys.readouterr().err
    assert a_file.read_text(encoding="utf-8") == "keep me"


def test_reviewers_cli_in_process(store: Store, tenant: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert reviewers_main(["add", "hal", "--tenant", tenant], store=store) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1]
    reviewer = auth.reviewer_for_token(store, token)
    assert reviewer is not None and reviewer.name == "hal" and reviewer.tenant == tenant
    # stored only as a hash
    rows = store.query_rows(f"SELECT token_hash FROM {store.table('reviewers')} WHERE tenant = {{t:String}}",
                            {"t": tenant})
    assert token not in {r[0] for r in rows} and auth.hash_secret(token) in {r[0] for r in rows}
    assert reviewers_main(["add", "hal", "--tenant", tenant], store=store) == 1
    assert "already has a reviewer named 'hal'" in capsys.readouterr().err
    assert reviewers_main(["list", "--tenant", tenant, "--json"], store=store) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["disabled"]) for r in listed] == [("hal", False)]
    assert reviewers_main(["disable", "hal", "--tenant", tenant], store=store) == 0
    assert auth.reviewer_for_token(store, token) is None
    assert reviewers_main(["disable", "nobody", "--tenant", tenant], store=store) == 1
    with pytest.raises(SystemExit) as exc:
        reviewers_main(["frob"], store=store)
    assert exc.value.code == 2


def test_review_enqueue_cli_from_a_labels_file(store: Store, tenant: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(label_record(f"{tenant}-f{i}", m)) + "\n"
                            for i, m in enumerate(["ok", "ok", "fabrication"])))
    assert review_main(["enqueue", "--queue", "fromfile", "--labels", str(path), "--per-mode", "1",
                        "--reviewers", "3", "--tenant", tenant], store=store) == 0
    out = capsys.readouterr().out
    assert "added 2 of 3 labelled traces" in out and "mode:fabrication: 1" in out and "K=3" in out


def test_console_script_prints_the_token_last(tmp_path: Path) -> None:
    # The real entry point in a fresh process (its own embedded store directory).
    exe = Path(sys.executable).with_name("ragtrace")
    env = {**os.environ, "RAGTRACE_STORE": str(tmp_path / "store")}
    # only `ragtrace store migrate` (or `serve`) creates the schema; reviewer commands never do
    proc = subprocess.run([str(exe), "store", "migrate"], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([str(exe), "reviewers", "add", "ivy", "--tenant", "acme"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    token = proc.stdout.strip().splitlines()[-1]
    assert token.startswith(auth.TOKEN_PREFIX) and len(token) > 40
    proc = subprocess.run([str(exe), "review", "enqueue", "--queue", "q", "--tenant", "acme"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1 and "has no labels yet: run `ragtrace audit` first" in proc.stderr


def test_three_reviewers_use_fleiss(store: Store, tenant: str, seeded: Seeder) -> None:
    seeded(["ok", "ok"])
    enqueue(store, "k3", None, per_mode=5, reviewers=3, tenant=tenant)
    votes = {"r1": ["ok", "ok"], "r2": ["ok", "fabrication"], "r3": ["ok", "fabrication"]}
    for name, modes in votes.items():
        reviewer, _ = auth.add_reviewer(store, name, tenant=tenant)
        for mode in modes:
            t = next_item(store, reviewer, "k3")
            assert t is not None
            record_decision(store, reviewer, "k3", t, failure_mode=mode, claims=["entailed", "neutral"])
    report = agreement_report(store, tenant=tenant, queue="k3")
    fm = report["inter_reviewer"]["failure_mode"]
    # items: [ok ok ok] P=1, [ok fab fab] P=(1+4-3)/6=1/3; Po=2/3; p_ok=4/6, p_fab=2/6;
    # Pe = 16/36 + 4/36 = 5/9; kappa = (2/3 - 5/9)/(4/9) = 1/4
    assert fm["method"] == "fleiss" and fm["raters_per_item"] == 3 and fm["n"] == 2
    assert fm["kappa"] == pytest.approx(0.25)
    cal = report["labeller"]["m-test"]["failure_mode"]
    assert cal["confusion"]["ok"]["ok"] == 1 and cal["confusion"]["ok"]["fabrication"] == 1
