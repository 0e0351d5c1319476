"""The example pipeline over HotpotQA (500 dev questions, all paragraphs pooled into one corpus).

    .venv/bin/python benchmarks/hotpotqa_pipeline.py                 # all 500 questions
    .venv/bin/python benchmarks/hotpotqa_pipeline.py --limit 100     # a quicker look

Needs ../shared/data/hotpotqa-dev500 (not part of a clone). Every paragraph of every question
goes into one corpus (~5k paragraphs); the ``is_supporting`` paragraphs are the qrels. The
pipeline is the example one — BM25 (bm25s) → MiniLM hybrid rerank → extractive answer —
instrumented with the ragtrace decorators and exporting over OTLP to a real `ragtrace serve` on
a temporary embedded store; the audit then runs inside the server (``POST /api/audit``).

Reports, as a table and as JSON (``--out``):
- retrieval metrics (trec_eval conventions, binary gains) of the BM25 pool and of the reranked
  order, and their ratio (the reranker against the in-run BM25 baseline);
- the audit's failure-mode distribution and its 2 × 2 × 3 contingency;
- throughput: pipeline queries/s and audit traces/s, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ragtrace
from ragtrace_evaluator.metrics.trec import query_measures
from ragtrace_examples.components import (
    Bm25Retriever,
    Chunk,
    ExtractiveGenerator,
    HybridReranker,
    MiniLMEncoder,
    ScoredChunk,
)
from ragtrace_examples.demo import Collector, _free_port, audit_through_server, wait_for_traces

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "hotpotqa-dev500" / "dev_subsampled.jsonl"
SERVICE = "hotpotqa-bench"
RELEASE = "bm25-minilm-extractive"
MEASURES = ("recall_5", "recall_20", "P_5", "recip_rank", "ndcg_cut_5", "success_5")


def load(path: Path, limit: int | None) -> tuple[list[Chunk], list[dict[str, Any]]]:
    """Pooled paragraphs (deduplicated by title and text) and the questions with their gold ids."""
    chunks: list[Chunk] = []
    ids: dict[tuple[str, str], str] = {}
    questions = []
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    for row in rows:  # the corpus always pools all 500 questions' paragraphs
        gold = []
        for ctx in row["contexts"]:
            key = (ctx["title"], ctx["paragraph_text"].strip())
            if key not in ids:
                ids[key] = f"p{len(ids):05d}"
                text = " ".join(key[1].split())
                chunks.append(Chunk(ids[key], ids[key], key[0], text, 0, len(text)))
            if ctx["is_supporting"]:
                gold.append(ids[key])
        answers = [s for a in row["answers_objects"] for s in a.get("spans", [])]
        questions.append({"id": row["question_id"], "question": row["question_text"], "gold": gold,
                          "answers": answers})
    return chunks, questions[:limit] if limit else questions


class Pipeline:
    def __init__(self, chunks: list[Chunk], encoder: MiniLMEncoder, pool: int, top_k: int) -> None:
        self.retriever = Bm25Retriever(chunks, with_title=True)
        self.reranker = HybridReranker(encoder)
        self.generator = ExtractiveGenerator(encoder)
        self.pool, self.top_k = pool, top_k
        self.last: dict[str, list[str]] = {}

    @ragtrace.retriever(name="bm25.search")
    def retrieve(self, query: str, k: int) -> list[ScoredChunk]:
        return self.retriever.search(query, k)

    @ragtrace.reranker(name="minilm.rerank", model="all-MiniLM-L6-v2+bm25")
    def rerank(self, query: str, documents: list[ScoredChunk], top_k: int) -> list[ScoredChunk]:
        return self.reranker.rerank(query, documents)

    @ragtrace.generator(name="generate", model="extractive-minilm")
    def generate(self, question: str, context: list[ScoredChunk]) -> str:
        return self.generator.generate(question, context)

    @ragtrace.pipeline(name="rag.answer")
    def answer(self, query: str, query_id: str | None = None, gold_ids: list[str] | None = None) -> str:
        pool = self.retrieve(query, k=self.pool)
        ranked = self.rerank(query, pool, top_k=self.top_k)
        self.last = {"pool": [c.id for c in pool], "ranked": [c.id for c in ranked]}
        return self.generate(query, context=ranked[: self.top_k])


def mean_measures(lists: list[tuple[list[str], list[str]]]) -> dict[str, float]:
    """Mean of each measure over queries (ranked ids, gold ids); undefined values are skipped."""
    sums = dict.fromkeys(MEASURES, 0.0)
    counts = dict.fromkeys(MEASURES, 0)
    for ranked, gold in lists:
        for name, value in query_measures(ranked, dict.fromkeys(gold, 1), MEASURES).items():
            if value is not None:
                sums[name] += value
                counts[name] += 1
    return {m: round(sums[m] / counts[m], 4) if counts[m] else float("nan") for m in MEASURES}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--limit", type=int, default=None, help="questions to run (default: all 500)")
    p.add_argument("--pool", type=int, default=20, help="BM25 candidates per question")
    p.add_argument("--top-k", type=int, default=5, help="passages given to the generator")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    a = p.parse_args(argv)
    if not a.data.is_file():
        print(f"no HotpotQA data at {a.data} (../shared/data is not part of a clone)", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    chunks, questions = load(a.data, a.limit)
    print(f"{len(chunks)} pooled paragraphs, {len(questions)} questions", flush=True)

    work = Path(tempfile.mkdtemp(prefix="ragtrace-hotpotqa-"))
    collector = Collector(work / "store", _free_port(), work / "collector.log")
    collector.start()
    try:
        ragtrace.configure(endpoint=collector.url, service=SERVICE, release=RELEASE, schedule_delay_ms=200)
        encoder = MiniLMEncoder()
        pipe = Pipeline(chunks, encoder, a.pool, a.top_k)
        # No warm-up: passages and sentences are embedded when first needed (and cached), so the
        # pipeline time includes every embedding it required.
        pool_lists, ranked_lists, answers = [], [], 0
        t = time.perf_counter()
        for q in questions:
            text = pipe.answer(q["question"], query_id=q["id"], gold_ids=q["gold"])
            pool_lists.append((pipe.last["pool"], q["gold"]))
            ranked_lists.append((pipe.last["ranked"], q["gold"]))
            answers += any(ans.lower() in text.lower() for ans in q["answers"])
        pipeline_s = time.perf_counter() - t
        ragtrace.shutdown()
        wait_for_traces(collector.url, SERVICE, {RELEASE: len(questions)}, timeout=300)
        t = time.perf_counter()
        report = audit_through_server(collector.url, SERVICE)
        audit_wall_s = time.perf_counter() - t
    finally:
        collector.stop()
    records = report.pop("records", [])
    bm25, reranked = mean_measures(pool_lists), mean_measures(ranked_lists)
    modes = {m: r["count"] for m, r in report["failure_modes"].items()}
    timing = report.get("timing", {})
    results = {
        "questions": len(questions), "paragraphs": len(chunks), "pool": a.pool, "top_k": a.top_k,
        "retrieval": {"bm25": bm25, "reranked": reranked,
                      "ratio_reranked_over_bm25": {m: round(reranked[m] / bm25[m], 3) if bm25[m] else None
                                                   for m in MEASURES}},
        "answer_contains_reference": round(answers / len(questions), 4),
        "failure_modes": modes,
        "contingency": report.get("contingency"),
        "throughput": {
            "pipeline_s": round(pipeline_s, 1),
            "pipeline_queries_per_s": round(len(questions) / pipeline_s, 2),
            "audit_wall_s": round(audit_wall_s, 1), "audit_label_s": timing.get("label_seconds"),
            "audit_traces_per_s": timing.get("traces_per_second"),
        },
        "records": len(records),
    }
    tp = results["throughput"]
    if tp["audit_traces_per_s"]:
        tp["audit_over_pipeline"] = round(tp["audit_traces_per_s"] / tp["pipeline_queries_per_s"], 2)
    print_table(results)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


def print_table(r: dict[str, Any]) -> None:
    print(f"\nHotpotQA dev500: {r['questions']} questions over {r['paragraphs']} pooled paragraphs "
          f"(pool {r['pool']}, context top {r['top_k']})")
    print("| measure | BM25 pool | reranked | ratio |\n|---|---|---|---|")
    for m in MEASURES:
        ratio = r["retrieval"]["ratio_reranked_over_bm25"][m]
        print(f"| {m} | {r['retrieval']['bm25'][m]:.4f} | {r['retrieval']['reranked'][m]:.4f} | "
              f"{ratio if ratio is not None else '-'} |")
    n = sum(r["failure_modes"].values()) or 1
    print("\n| failure mode | count | share |\n|---|---|---|")
    for mode, count in r["failure_modes"].items():
        print(f"| {mode} | {count} | {100 * count / n:.1f}% |")
    print(f"\nanswer contains a reference answer: {100 * r['answer_contains_reference']:.1f}%")
    print("throughput: " + ", ".join(f"{k}={v}" for k, v in r["throughput"].items()))


if __name__ == "__main__":
    sys.exit(main())
