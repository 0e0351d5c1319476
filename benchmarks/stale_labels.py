"""Stale labels: what compare says about chunker changes under chunk-id gold and under evidence spans.

The example service (its chunks report their provenance, its traces carry no gold ids) serves a
baseline and three chunker changes of the same generated corpus, through the SDK and OTLP to a real
`ragtrace serve` on an embedded store. The same traces are audited twice, as a user would: once with
the corpus's TREC qrels (chunk ids of the unsplit build: ``ragtrace labels import corpus/qrels.txt``)
and once with its evidence spans (``corpus/evidence.jsonl``, which the audit prefers), then each
change is compared with the baseline under each kind of gold:

- ``recut``: every document the chunker can cut after its evidence is re-cut there (benign: real
  recall unchanged, every such chunk renamed);
- ``chunk_split``: the demo's chunker fault alone (``--split-rate`` of the documents, 0.08 as in the
  demo, cut at the evidence sentence, which then no longer names its entity);
- ``new_chunker``: ``recut`` plus ``--broken`` (2) documents cut at the evidence — a real regression
  the size of a few queries inside an index-wide renaming.

Reported per change and kind of gold: the queries that lost their gold in context, the recall@5
change and whether its gate tripped, the failure-mode change of retrieval gaps, and the deciding
slice's verdict with its numbers. Ground truth is the release plan (which documents were cut where).

Usage:  .venv/bin/python benchmarks/stale_labels.py [--docs 150] [--broken 2] [--split-rate 0.08] [--json out.json]
About 4 minutes at 150 documents on 2 cores. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SERVICE = "stale-labels"


def _ragtrace(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "ragtrace_cli.main", *args], capture_output=True, text=True,
                          timeout=1800, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"ragtrace {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def _records(path: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line:
            rec = json.loads(line)
            out.setdefault(rec["release"], []).append(rec)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--docs", type=int, default=150)
    p.add_argument("--seed", type=int, default=4)
    p.add_argument("--broken", type=int, default=2, help="documents the new chunker cuts at the evidence")
    p.add_argument("--split-rate", type=float, default=0.08, help="share the chunk_split release breaks")
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--json", dest="json_path", help="write the rows here")
    a = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from ragtrace_evaluator.compare.comparison import compare
    from ragtrace_evaluator.compare.records import label_set, parse_record
    from ragtrace_examples.corpus import generate_corpus
    from ragtrace_examples.demo import record_releases, write_references
    from ragtrace_examples.faults import Fault, baseline_release, candidate_release, rechunked_release

    folder = Path(tempfile.mkdtemp(prefix="ragtrace-stale-labels-"))
    corpus = generate_corpus(a.docs, seed=a.seed)
    corpus.save(folder / "corpus")
    broken = candidate_release(corpus, "new_chunker", rates={Fault.CHUNK_SPLIT: a.broken / a.docs}, seed=2).plan
    releases = [baseline_release("baseline"), rechunked_release(corpus, "recut", share=1.0, seed=1),
                candidate_release(corpus, "chunk_split", rates={Fault.CHUNK_SPLIT: a.split_rate}, seed=1),
                rechunked_release(corpus, "new_chunker", share=1.0, seed=1, plan=broken)]
    store = folder / "store"
    _ragtrace("store", "migrate", "--store", str(store))
    _ragtrace("labels", "import", str(write_references(folder / "refs.jsonl", corpus)), "--store", str(store))
    record_releases(corpus, releases, store, folder, service=SERVICE, environment="bench")
    audit = ("audit", "--store", str(store), "--service", SERVICE, "--relevance-labeller", "none", "--quiet")
    _ragtrace("labels", "import", str(folder / "corpus" / "qrels.txt"), "--store", str(store))
    _ragtrace(*audit, "--per-trace", str(folder / "chunk-ids.jsonl"))
    _ragtrace("labels", "import", str(folder / "corpus" / "evidence.jsonl"), "--store", str(store))
    _ragtrace(*audit, "--no-resume", "--per-trace", str(folder / "spans.jsonl"))

    rows = []
    for kind in ("chunk-ids", "spans"):
        recs = _records(folder / f"{kind}.jsonl")
        base = label_set("baseline", "file", [parse_record(r) for r in recs["baseline"]])
        for rel in releases[1:]:
            cand = label_set(rel.name, "file", [parse_record(r) for r in recs[rel.name]])
            rep = compare(base, cand, n_resamples=a.resamples, seed=0, warn=False).to_json()
            lost = next(m for m in rep["movers"] if (m["boundary"], m["direction"]) == ("gold_in_context", "lost"))
            gate = next(g for g in rep["gates"] if g["metric"] == "recall_5")
            gap = next(m for m in rep["failure_modes"] if m["mode"] == "retrieval_gap")
            cut_at_evidence = sorted(q for q, f in rel.plan.items() if f is Fault.CHUNK_SPLIT)
            ds = rep["deciding_slice"]
            rows.append({"release": rel.name, "gold": kind, "recut_documents": len(rel.rechunk),
                         "cut_at_evidence": len(cut_at_evidence), "lost": lost["n"],
                         "lost_are_the_cut_at_evidence": sorted(lost["query_ids"]) == cut_at_evidence,
                         "recall_5_delta": gate["observed"], "recall_gate_tripped": gate["tripped"],
                         "retrieval_gap": f"{gap['baseline_count']} → {gap['candidate_count']}",
                         "verdict": ds["verdict"], "statement": ds["statement"]})
    print(f"{a.docs} documents, seed {a.seed}; traces and store in {folder}")
    for r in rows:
        print(f"{r['release']:<12} {r['gold']:<9} recut {r['recut_documents']:>3}  cut at evidence "
              f"{r['cut_at_evidence']:>3}  lost {r['lost']:>3}  recall@5 {r['recall_5_delta']:+.3f} "
              f"(gate {'TRIPPED' if r['recall_gate_tripped'] else 'ok'})  retrieval_gap {r['retrieval_gap']}\n"
              f"             {r['statement']}")
    if a.json_path:
        Path(a.json_path).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
