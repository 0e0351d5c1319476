"""Labels that survive a re-chunking: the example service's chunks carry their provenance, the gold is
imported once as chunk ids (TREC qrels of the unsplit build) and once as evidence spans, and the
same traces are audited under each.

- v2 re-cuts half the answering documents *after* their evidence (a benign chunker change; real
  recall unchanged): with evidence spans nothing is lost; with chunk ids recall "drops" by
  bookkeeping, the gate trips, and the deciding slice says the answers did not move — check the
  labels.
- v3 is the demo's chunker fault alone, without the demo's re-cut of the rest of the index
  (documents split at the evidence sentence, which no longer names its entity): with evidence
  spans it reads as what it is, a real retrieval regression whose answers fell with the evidence.
  With chunk ids every split document's queries lose their gold by bookkeeping, but here the
  evidence really left the context too, so the same queries are lost and the slice says "fell" as
  well: stale chunk ids read as a labels problem only when the answers did not move (the demo,
  whose chunker also renames the rest of the index, reads "mixed": test_demo_pipeline.py).

Real everything: the generated corpus, the instrumented pipeline and the SDK exporting over OTLP to
`ragtrace serve` in a child process, `ragtrace labels import` and `ragtrace audit` as a user runs
them (each owns the embedded store in turn), and `compare` on the per-trace records they wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from ragtrace_evaluator.compare.comparison import compare
from ragtrace_evaluator.compare.records import label_set, parse_record
from ragtrace_examples.corpus import generate_corpus
from ragtrace_examples.faults import Fault, baseline_release, candidate_release, rechunked_release

SERVICE = "evidence-rag"
N_DOCS = 30


def _ragtrace(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "ragtrace_cli.main", *args], capture_output=True, text=True,
                          timeout=900, check=False, env=None)
    assert proc.returncode == 0, f"ragtrace {' '.join(args)}: {proc.stderr[-2000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from ragtrace_examples.demo import record_releases, write_references

    folder = tmp_path_factory.mktemp("evidence-gold")
    corpus = generate_corpus(N_DOCS, seed=4)
    corpus.save(folder / "corpus")
    rechunk = rechunked_release(corpus, "v2", share=0.5, seed=1)
    fault = candidate_release(corpus, "v3", rates={Fault.CHUNK_SPLIT: 0.3}, seed=1)
    releases = [baseline_release("v1"), rechunk, fault]
    store = folder / "store"
    _ragtrace("store", "migrate", "--store", str(store))
    _ragtrace("labels", "import", str(write_references(folder / "refs.jsonl", corpus)), "--store", str(store))
    record_releases(corpus, releases, store, folder, service=SERVICE, environment="test", timeout=120)
    out: dict[str, Any] = {"corpus": corpus, "rechunk": rechunk, "fault": fault}
    # chunk-id gold first (qrels.txt names documents: the chunk ids of the unsplit build) ...
    qrels_out = _ragtrace("labels", "import", str(folder / "corpus" / "qrels.txt"), "--store", str(store))
    assert f"for {N_DOCS} queries" in qrels_out
    _ragtrace("audit", "--store", str(store), "--service", SERVICE, "--relevance-labeller", "none", "--quiet",
              "--per-trace", str(folder / "chunk-ids.jsonl"))
    # ... then the same evidence as spans, which the audit prefers to chunk-id qrels
    spans_out = _ragtrace("labels", "import", str(folder / "corpus" / "evidence.jsonl"), "--store", str(store))
    assert f"imported {N_DOCS} evidence spans" in spans_out
    _ragtrace("audit", "--store", str(store), "--service", SERVICE, "--relevance-labeller", "none", "--quiet",
              "--no-resume", "--per-trace", str(folder / "spans.jsonl"))
    for kind in ("chunk-ids", "spans"):
        recs = [json.loads(line) for line in (folder / f"{kind}.jsonl").read_text().splitlines() if line]
        out[kind] = {rel.name: [r for r in recs if r["release"] == rel.name] for rel in releases}
    return out


def _compare(records: dict[str, list[dict[str, Any]]], a: str, b: str) -> dict[str, Any]:
    sa = label_set(a, "file", [parse_record(r) for r in records[a]])
    sb = label_set(b, "file", [parse_record(r) for r in records[b]])
    return compare(sa, sb, n_resamples=2000, seed=0, warn=False).to_json()


def _lost(report: dict[str, Any]) -> set[str]:
    mv = next(m for m in report["movers"] if (m["boundary"], m["direction"]) == ("gold_in_context", "lost"))
    return set(mv["query_ids"])


def test_traces_carry_provenance_and_the_gold_sources_are_what_was_imported(audited: dict[str, Any]) -> None:
    for rel, recs in audited["spans"].items():
        assert len(recs) == N_DOCS, rel
        assert {r["retrieval"]["gold_source"] for r in recs} == {"evidence"}
        assert {r["retrieval"]["gold_source"] for r in audited["chunk-ids"][rel]} == {"qrels"}


def test_a_rechunking_is_no_recall_drop_with_evidence_spans(audited: dict[str, Any]) -> None:
    rep = _compare(audited["spans"], "v1", "v2")
    assert _lost(rep) == set()
    gates = {g["metric"]: g for g in rep["gates"]}
    assert gates["recall_5"]["tripped"] is False
    assert rep["deciding_slice"]["tripped_gates"] == []


def test_a_rechunking_drops_chunk_id_recall_and_the_slice_blames_the_labels(audited: dict[str, Any]) -> None:
    corpus, rechunk = audited["corpus"], audited["rechunk"]
    rep = _compare(audited["chunk-ids"], "v1", "v2")
    recut = {q.id for q in corpus.questions if q.doc_id in rechunk.rechunk}
    lost = _lost(rep)
    # exactly the re-cut documents' queries that had their gold in context lose it — by bookkeeping
    had_gold = {r["query_id"] for r in audited["chunk-ids"]["v1"] if r["gold_in_context"]}
    assert lost == recut & had_gold and len(lost) >= 5
    gates = {g["metric"]: g for g in rep["gates"]}
    assert gates["recall_5"]["tripped"] is True
    ds = rep["deciding_slice"]
    assert ds["tripped_gates"] and ds["verdict"] == "labels", ds["statement"]
    assert "check whether the gold labels still match this build's chunks" in ds["statement"]


def test_the_chunker_fault_is_a_real_regression_with_evidence_spans(audited: dict[str, Any]) -> None:
    corpus, fault = audited["corpus"], audited["fault"]
    rep = _compare(audited["spans"], "v1", "v3")
    split = {q for q, f in fault.plan.items() if f is Fault.CHUNK_SPLIT}
    lost = _lost(rep)
    assert lost and lost <= split
    assert len(lost) >= 0.7 * len(split)
    v3 = {r["query_id"]: r for r in audited["spans"]["v3"]}
    assert all(v3[q]["failure_mode"] == "retrieval_gap" for q in lost)
    ds = rep["deciding_slice"]
    assert ds["tripped_gates"] and ds["verdict"] == "fell", ds["statement"]
    assert ds["statement"].startswith("answers fell with the evidence")
    assert len(corpus.questions) == N_DOCS



def test_the_chunker_fault_reads_as_a_real_regression_with_chunk_id_labels_too(audited: dict[str, Any]) -> None:
    """The same chunker fault under chunk-id gold. Every split document's chunk id is gone from the new
    build, so each of its queries "loses" its gold by bookkeeping whatever retrieval found; but this
    fault really does take the evidence out of the context (the cut leaves the evidence chunk without
    the entity's name), so the answers fell and the slice says so under either kind of label. A drop
    reads as stale labels only when the answers did not move (the benign re-cut above)."""
    fault = audited["fault"]
    split = {q for q, f in fault.plan.items() if f is Fault.CHUNK_SPLIT}
    by_ids, by_spans = _compare(audited["chunk-ids"], "v1", "v3"), _compare(audited["spans"], "v1", "v3")
    had_gold = {r["query_id"] for r in audited["chunk-ids"]["v1"] if r["gold_in_context"]}
    lost_ids, lost_spans = _lost(by_ids), _lost(by_spans)
    assert lost_ids == split & had_gold
    assert lost_spans <= lost_ids
    v3 = {r["query_id"]: r for r in audited["spans"]["v3"]}
    # anything chunk ids call lost and the spans do not had its evidence chunk in the context still
    assert all(v3[q]["gold_in_context"] for q in lost_ids - lost_spans)
    for rep in (by_ids, by_spans):
        gates = {g["metric"]: g for g in rep["gates"]}
        ds = rep["deciding_slice"]
        assert gates["recall_5"]["tripped"] is True
        assert ds["verdict"] == "fell" and ds["statement"].startswith("answers fell with the evidence"), ds
