"""Audit throughput end to end: traces/s from the store to labels written back, with the offline labeller.

Shape (the issue's): 5 supplied passages and a 3-sentence answer per trace. Passages and questions come
from HotpotQA dev (../shared/data/hotpotqa-dev500: 2 gold + 3 distractor paragraphs per question); the
answer is three sentences taken from the passages with one number or name changed in a third of the
traces, so the labeller does real work. Traces enter the embedded store through the collector's own
OTLP assembly (`ragtrace_collector.assemble`) and are audited with `run_audit`.

Phases, each timed around `run_audit` alone (store reads, labelling, label writes):
- baseline: ``--stages retrieval`` (no grounding): the store + pipeline cost; the in-run baseline;
- cold:     a fresh labeller (model loaded before timing), empty caches;
- warm:     the same traces again with the same labeller (``resume=False``): every passage cached;
- warm-passages: new traces reusing the same passages with new answers (production's usual case).
Peak memory: the process's peak RSS after each phase (includes torch and chDB).

    .venv/bin/python benchmarks/audit_throughput.py [--traces 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the traces are built with tests/otlp_builders.py: the repository root on the path, as pytest has it
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "hotpotqa-dev500" / "dev_subsampled.jsonl"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.strip()) > 20]


def perturb(sentence: str, rng: random.Random) -> str:
    """Change a number (or else swap a capitalised name) so the claim is contradicted or unsupported."""
    m = re.search(r"\d+", sentence)
    if m:
        return sentence[: m.start()] + str(int(m.group()) + rng.randint(2, 9)) + sentence[m.end():]
    words = sentence.split()
    caps = [i for i, w in enumerate(words) if i and w[:1].isupper()]
    if caps:
        words[rng.choice(caps)] = rng.choice(["Berlin", "Madrid", "Lagos", "Osaka"])
    return " ".join(words)


def build_traces(n: int, offset: int, *, answer_seed: int) -> list[Any]:
    from tests.otlp_builders import Doc, TraceSpec

    if not DATA.exists():
        sys.exit(f"reference data not found at {DATA}: the benchmark needs ../shared/data/hotpotqa-dev500")
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").split("\n") if line.strip()]
    rng = random.Random(answer_seed)
    specs = []
    for i in range(n):
        q = rows[(offset + i) % len(rows)]
        gold = [c for c in q["contexts"] if c["is_supporting"]][:2]
        other = [c for c in q["contexts"] if not c["is_supporting"]][:3]
        passages = gold + other
        rng.shuffle(passages)
        docs = [Doc(f"hp-{q['question_id']}-{c['id']}", c["paragraph_text"], 1.0 - k / 10)
                for k, c in enumerate(passages)]
        pool = [s for c in gold for s in sentences(c["paragraph_text"])] or sentences(passages[0]["paragraph_text"])
        answer = [rng.choice(pool) for _ in range(3)]
        if i % 3 == 0:
            answer[2] = perturb(answer[2], rng)
        specs.append(TraceSpec(trace_id=os.urandom(16).hex(), query=q["question_text"], answer=" ".join(answer),
                               query_id=q["question_id"], retrieved=docs, reranked=docs, context=docs, top_k=5,
                               gold=[f"hp-{q['question_id']}-{c['id']}" for c in gold], with_reranker=False))
    return specs


def ingest(store: Any, specs: list[Any], release: str) -> None:
    from ragtrace_collector.assemble import assemble
    from ragtrace_collector.rows import TIME_COLUMNS
    from tests.otlp_builders import request

    for i in range(0, len(specs), 100):
        spans = [s for spec in specs[i : i + 100] for s in spec.spans()]
        rows = assemble(request(spans, service="bench", release=release), "default", int(time.time() * 1000))
        for table in ("spans", "queries", "documents", "passages", "gold"):
            store.insert_columns(table, rows.columns(table), TIME_COLUMNS)


def make_labeller() -> Any:
    """The offline default, through the same factory `ragtrace audit --labeller offline` uses."""
    from ragtrace_evaluator.audit.run import resolve_labellers

    grounding, _ = resolve_labellers(stages="all", labeller="offline", relevance_labeller=None, grounding=None,
                                     relevance=None)
    return grounding


def phase(name: str, store: Any, release: str, n: int, **kw: Any) -> dict[str, Any]:
    from ragtrace_evaluator.audit.run import run_audit

    t0 = time.perf_counter()
    report = run_audit(store, release=release, relevance_labeller=None, resume=False, batch_size=32, **kw)
    seconds = time.perf_counter() - t0
    assert report["n"] == n, (report["n"], n)
    out = {"phase": name, "n": n, "seconds": round(seconds, 3), "traces_per_s": round(n / seconds, 2),
           "peak_rss_mb": round(peak_rss_mb(), 1),
           "failure_modes": {m: r["count"] for m, r in report["failure_modes"].items()}}
    print(f"{name:<14} n={n:<5} {seconds:7.2f} s  {n / seconds:8.2f} traces/s  peak RSS {out['peak_rss_mb']:.0f} MB  "
          f"modes {out['failure_modes']}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=int, default=200)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    from ragtrace_store import open_store

    with tempfile.TemporaryDirectory(prefix="ragtrace-bench-") as tmp:
        store = open_store(Path(tmp) / "store")
        first = build_traces(args.traces, 0, answer_seed=1)
        again = build_traces(args.traces, 0, answer_seed=2)  # same passages, new answers
        ingest(store, first, "bench-a")
        ingest(store, again, "bench-b")
        print(f"ingested {2 * args.traces} traces (5 passages, 3-sentence answers); peak RSS {peak_rss_mb():.0f} MB")
        results = [phase("baseline", store, "bench-a", args.traces, stages="retrieval")]
        t0 = time.perf_counter()
        labeller = make_labeller()
        manifest = labeller.manifest()
        from ragtrace_evaluator.labellers.protocol import Passage

        # Load the model now (labellers load lazily) so "cold" measures empty caches, not loading.
        labeller.judge("Warm-up sentence for loading.", [Passage("warmup", "Loading the model happens here.")])
        load_s = time.perf_counter() - t0
        print(f"labeller {manifest.get('kind')} ready in {load_s:.2f} s")
        results.append(phase("cold", store, "bench-a", args.traces, grounding=labeller))
        results.append(phase("warm", store, "bench-a", args.traces, grounding=labeller))
        results.append(phase("warm-passages", store, "bench-b", args.traces, grounding=labeller))
        store.close()
    base = results[0]["traces_per_s"]
    print("\nphase           traces/s   vs retrieval-only baseline")
    for r in results:
        print(f"{r['phase']:<14} {r['traces_per_s']:9.2f}   {r['traces_per_s'] / base:6.3f}x")
    warm = results[2]["traces_per_s"]
    print(f"target >= 10 traces/s warm: {'met' if warm >= 10 else 'NOT met'} ({warm:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"labeller_load_s": round(load_s, 2), "labeller": manifest,
                                               "cpu_count": os.cpu_count(), "results": results}, indent=2,
                                              default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
