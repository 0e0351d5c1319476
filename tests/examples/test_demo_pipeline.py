"""The demo's pipeline at small size: the audit must recover every injected fault at its boundary,
and the terminal gets its steps and its summary (at most 40 lines), the rest goes to demo.log.

Real everything: generated corpus, the example service over HTTP, OTLP to `ragtrace serve` on an
embedded store, the audit run inside the server, compare, the review queue and a reviewer.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragtrace_evaluator.compare.comparison import compare
from ragtrace_evaluator.compare.deciding_slice import FELL, LABEL_CHECK, QUERY_MOVE
from ragtrace_evaluator.compare.records import label_set, parse_record
from ragtrace_examples.corpus import generate_corpus
from ragtrace_examples.demo import DemoConfig, print_summary, run_demo
from ragtrace_examples.faults import Fault, candidate_release

#: 7 queries per fault, 35 % of them faulted (the demo's default candidate: 30 %): with chunk-id gold
#: the re-cut index's unmoved answers are then the majority of the lost queries, as in the demo
DOCS, RATE = 80, 0.09


@pytest.mark.browser
def test_injected_faults_are_labelled_with_their_boundary(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    rates = dict.fromkeys(Fault, RATE)
    cfg = DemoConfig(out=tmp_path / "demo", docs=DOCS, seed=3, rates=rates, resamples=400)
    res = run_demo(cfg)
    print_summary(res, cfg)  # as `ragtrace demo` does after the steps
    shown = capfd.readouterr()
    _check_terminal(res, shown.out + shown.err)

    check = res.fault_check
    for row in check["modes"]:
        assert row["missing"] == 0, row
        assert row["n"] >= 7, row
        assert row["share"] >= 0.9, f"{row['fault']}: {row['hits']}/{row['n']} labelled {row['expected_mode']}, " \
                                    f"confusions {row['confusions']}"
    clean = check["clean"]
    assert clean["missing"] == 0 and clean["n"] >= 2 * DOCS - 4 * 7
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
        assert len(lines) == DOCS and {r["release"] for r in lines} == {release}
        assert {r["score_basis"] for r in lines} == {"reference"}
        assert {r["retrieval"]["gold_source"] for r in lines} == {"evidence"}
        records[release] = {r["query_id"]: r for r in lines}
    assert res.audit["gold_sources"] == {"evidence": 2 * DOCS}
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

    # The candidate's chunker re-cuts the whole index (as a real chunker change does): every
    # answering document with a sentence after its evidence is re-cut there, keeping its evidence,
    # and only the chunk_split documents are cut at it. With offsets the re-cut loses nothing it
    # did not break: every lost query is one whose evidence a fault took out of the context.
    corpus = generate_corpus(DOCS, seed=3)
    v2 = candidate_release(corpus, "v2", rates=rates, seed=3, recut_index=True)
    recut = {q.id for q in corpus.questions if q.doc_id in v2.split_documents(corpus)}
    rerank = {f["query_id"] for f in faults if f["fault"] == Fault.RERANK_DISTRACTOR.value}
    lost_spans = set(lost["query_ids"])
    assert len(lost_spans) == lost["n"]  # the JSON lists every mover (--max-ids caps the terminal only)
    assert len(recut - split) >= 0.6 * len(corpus.questions) and lost_spans <= split | rerank

    # The same release with the gold as chunk ids (corpus/qrels.txt: the ids of the unsplit build),
    # on a copy of the demo's store without its spans: every re-cut document's gold names no chunk
    # of the candidate, so recall drops for nearly every query, and the deciding slice splits them:
    # the few whose answers fell (the chunker fault's and the other faults') and the majority that
    # did not move, which it blames on the labels.
    by_ids = _chunk_id_reading(res.store, res.out, tmp_path / "store-qrels", records)
    lost_ids = _lost(by_ids)
    assert lost_ids == (had & recut) | lost_spans and len(lost_ids) >= 0.75 * len(corpus.questions)
    gates = {g["metric"]: g for g in by_ids["gates"]}
    assert gates["recall_5"]["tripped"] is True and gates["recall_5"]["observed"] < -0.6
    ds_ids = by_ids["deciding_slice"]
    assert ds_ids["verdict"] == "mixed", ds_ids["statement"]
    fell_ids = set(ds_ids["fell_anyway"]["query_ids"])
    assert fell_ids == {q for q in lost_ids if _fell(records["v1"][q], records["v2"][q])}
    assert {q for q in split_lost if records["v1"][q]["pass"]} <= fell_ids
    split_ids = ds_ids["lost_split"]
    n_unmoved = split_ids["unmoved"]["n_queries"]
    assert n_unmoved == len(lost_ids) - len(fell_ids) - split_ids["rose"]["n_queries"]
    assert 2 * n_unmoved > len(lost_ids) and abs(split_ids["unmoved"]["delta"]) < 0.05
    assert ds_ids["statement"].startswith(f"{len(fell_ids)} of the {len(lost_ids)} queries that lost their gold "
                                          "in context fell with it")
    assert f"the other {n_unmoved} did not move" in ds_ids["statement"] and LABEL_CHECK in ds_ids["statement"]

    _check_gold_is_shown(res, records["v2"], tmp_path)


def _check_gold_is_shown(res: Any, labelled: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """The demo's gold is evidence spans, not ids: on a rank inversion, the chunk that holds the
    evidence (in the pool, pushed out of the context) is marked gold, with its span, in `traces show`,
    in ``GET /api/traces`` and on the trace page in a real browser; a review item's page stars what the
    API gives for its trace."""
    import httpx

    from ragtrace_examples.demo import Collector, _free_port
    from tests.browser import chromium

    inverted = sorted(r["trace_id"] for r in labelled.values() if r["failure_mode"] == "rank_inversion")
    assert inverted, "the demo has rank inversions"
    trace_id = inverted[0]

    shown = _ragtrace("traces", "show", trace_id, "--store", str(res.store))
    evidence = re.findall(r"^evidence (\S+\[\d+:\d+\])  in (\S+)$", shown, re.M)
    assert evidence, shown
    span, chunk = evidence[0]
    sections = dict(re.findall(r"^== (\w+)[^\n]*\n((?:  .*\n?)*)", shown, re.M))
    assert re.search(rf"^  #\d+ +{re.escape(chunk)}  score \S+  ★ gold {re.escape(span)}", sections["retrieved"],
                     re.M), shown
    assert chunk not in sections["context"], shown  # the reranker pushed it out
    assert re.search(rf"^gold +.*{re.escape(chunk)}", shown, re.M), shown

    collector = Collector(res.store, _free_port(), tmp_path / "gold-serve.log")
    collector.start()
    try:
        with httpx.Client(base_url=collector.url, timeout=60, follow_redirects=False) as client:
            listed = client.get("/api/traces", params={"release": "v2", "limit": 1000})
            assert listed.status_code == 200, listed.text[:500]
            obj = next(json.loads(line) for line in listed.text.splitlines()
                       if line and json.loads(line)["trace_id"] == trace_id)
            assert chunk in obj["gold_ids"]
            source, offsets = span.rstrip("]").split("[")
            start, end = (int(x) for x in offsets.split(":"))
            assert {"doc_id": chunk, "source_id": source, "start": start, "end": end} in obj["gold_evidence"]
            assert chunk in {d["id"] for d in obj["retrieved"]} - {d["id"] for d in obj["context"]}

            with chromium() as browser:
                page = browser.new_page()
                page.goto(f"{collector.url}/traces/{trace_id}")
                assert "/review/login" in page.url  # and back to the trace after it
                page.fill("#token", res.reviewer_token)
                page.keyboard.press("Enter")
                page.wait_for_url(f"{collector.url}/traces/{trace_id}")
                assert "No gold documents are known" not in page.content()
                # the trace page: the evidence chunk's row is starred with its span, and not in context
                gold = _gold_rows(page)
                assert gold == _expected_gold(obj) and span in gold[chunk].split(), (gold, obj["gold_evidence"])
                assert "in-context" not in page.locator("section.candidates tbody tr").evaluate_all(
                    f"rs => rs.find(r => r.querySelector('td code').textContent === {json.dumps(chunk)}).className")
                assert page.locator(f"code >> text={span}").count() >= 1  # the gold section names the span

                # a review item (the queue's first for this reviewer): it stars the candidates that hold
                # the evidence the API gives for that trace, and names the spans none holds
                page.goto(f"{collector.url}/review/queues/demo/next")
                page.wait_for_url(re.compile(r".*/review/queues/demo/items/[0-9a-f]{32}$"))
                item = client.get(f"/api/traces/{page.url.rsplit('/', 1)[1]}").json()
                assert item["gold_evidence"], "every demo query has its evidence"
                assert _gold_rows(page) == _expected_gold(item)
                assert page.locator("p.evidence-not-found code").all_inner_texts() == [
                    f"{e['source_id']}[{e['start']}:{e['end']}]" for e in item["gold_evidence"] if not e["doc_id"]]
                browser.close()
    finally:
        collector.stop()


def _expected_gold(obj: dict[str, Any]) -> dict[str, str]:
    """What a page should star, from a trace's JSON: each candidate that holds evidence, its spans."""
    shown = {d["id"] for d in obj["retrieved"] + obj["reranked"] + obj["context"]}
    spans: dict[str, list[str]] = {}
    for e in obj["gold_evidence"]:
        if e["doc_id"] in shown:
            spans.setdefault(e["doc_id"], []).append(f"{e['source_id']}[{e['start']}:{e['end']}]")
    return {doc: " ".join(s) for doc, s in spans.items()}


def _gold_rows(page: Any) -> dict[str, str]:
    """The starred candidates of a trace or item page (a real browser's DOM): id -> the span beside it."""
    rows = page.locator("section.candidates tbody tr").evaluate_all(
        "rs => rs.map(r => [r.querySelector('td code').textContent, r.querySelector('td.gold-mark').textContent])")
    return {doc: " ".join(mark.replace("★", "").split()) for doc, mark in rows if "★" in mark}


def _check_terminal(res: Any, out: str) -> None:
    """What `ragtrace demo` printed, child processes included: one line a step and the summary with
    where to look; the comparison's tables and notes are in demo.log and the report."""
    lines = out.splitlines()
    assert len(lines) <= 40, out
    assert [line[:5] for line in lines if re.match(r"\[\d/6\]", line)] == [f"[{i}/6]" for i in range(1, 7)], out
    # the summary: the modes beside the faults, the gates, the deciding slice, and where everything is
    assert any(re.match(r"retrieval_gap +\d+ +\d+ +chunk_split +\d+ of \d+ \(\d+%\)", line) for line in lines), out
    assert "Gates tripped (ragtrace compare exit code 1): recall_5 (gold_in_context)" in out
    assert "Deciding slice: answers fell with the evidence" in out
    log = res.out / "demo.log"
    for label, path in (("HTML report:", res.report_html), ("Details:", log), ("Ground truth:", res.faults)):
        assert any(line.startswith(label) and str(path) in line for line in lines), (label, out)
    assert f"Review queue:  {res.review_url}" in out and f"Reviewer token: {res.reviewer_token}" in out
    # not the comparison's own output: no tables of every statistic, no bootstrap notes
    for detail in ("ragtrace compare  baseline", "Stage metrics", "GATE TRIPPED", "replicates", "bootstrap notes"):
        assert detail not in out, detail
    # which all went to demo.log, after the command that printed them
    text = log.read_text(encoding="utf-8")
    compare_out = text[text.index("$ ragtrace compare --baseline"):]
    for detail in ("Stage metrics", "GATE TRIPPED recall_5", "bootstrap notes on undefined values or intervals"):
        assert detail in compare_out, detail
    assert "[5/6] ragtrace compare" in text and "v1: 50/80 questions" in text  # progress: log only


def _fell(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """A pass turned fail, or the score fell by QUERY_MOVE or more (the pipeline's records, read directly)."""
    scored = a["score"] is not None and b["score"] is not None
    return (a["pass"] and not b["pass"]) or (scored and b["score"] - a["score"] <= -QUERY_MOVE)


def _lost(report: dict[str, Any]) -> set[str]:
    mv = next(m for m in report["movers"] if (m["boundary"], m["direction"]) == ("gold_in_context", "lost"))
    return set(mv["query_ids"])


def _ragtrace(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "ragtrace_cli.main", *args], capture_output=True, text=True,
                          timeout=240, check=False)
    assert proc.returncode == 0, f"ragtrace {' '.join(args)}: {proc.stderr[-2000:]}"
    return proc.stdout


def _chunk_id_reading(store: Path, out: Path, copy: Path,
                      spans: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Re-audit a copy of the demo's store with chunk-id qrels instead of its evidence spans (which the
    audit would prefer) and compare v1 with v2 from those records."""
    shutil.copytree(store, copy, symlinks=True)  # chDB's metadata links are relative
    # a child process: the embedded store is opened by one process at a time
    drop_spans = ("import sys; from ragtrace_store import open_store; s = open_store(sys.argv[1]); "
                  "s.command('TRUNCATE TABLE ' + s.table('gold_spans')); s.close()")
    subprocess.run([sys.executable, "-c", drop_spans, str(copy)], check=True, timeout=120)
    imported = _ragtrace("labels", "import", str(out / "corpus" / "qrels.txt"), "--store", str(copy))
    assert f"for {DOCS} queries" in imported
    per_trace = copy.parent / "chunk-ids.jsonl"
    _ragtrace("audit", "--store", str(copy), "--service", "example-rag", "--relevance-labeller", "none", "--quiet",
              "--no-resume", "--per-trace", str(per_trace))
    recs = [json.loads(line) for line in per_trace.read_text().splitlines() if line]
    assert {r["retrieval"]["gold_source"] for r in recs} == {"qrels"} and len(recs) == 2 * DOCS
    # the baseline build is unsplit, so its chunk-id gold is its evidence: the same queries had it
    assert {r["query_id"] for r in recs if r["release"] == "v1" and r["gold_in_context"]} == \
        {q for q, r in spans["v1"].items() if r["gold_in_context"]}
    sets = {rel: label_set(rel, "file", [parse_record(r) for r in recs if r["release"] == rel]) for rel in ("v1", "v2")}
    return compare(sets["v1"], sets["v2"], n_resamples=400, seed=0, warn=False).to_json()
