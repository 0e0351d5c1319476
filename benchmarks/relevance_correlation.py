"""Which relevance labels predict answer quality? eRAG vs qrels vs the offline labeller, the paper's way.

    nice -n 10 .venv/bin/python benchmarks/relevance_correlation.py --queries 60 --budget-s 3600
    .venv/bin/python benchmarks/relevance_correlation.py --queries 60          # rerun: from the cache

Data: ../shared/data/hotpotqa-dev500 (IRCoT's 500-question HotpotQA dev sample; every paragraph of
every question pooled into one corpus of ~5k paragraphs; ``is_supporting`` paragraphs are the qrels).
The first ``--queries`` questions in file order are used; all numbers are dev-set measurements (no
fitting anywhere: thresholds are the labellers' a-priori defaults).

Method (Salemi & Zamani 2024, "Evaluating Retrieval Quality in Retrieval-Augmented Generation"):

1. Six retrieval configurations of the example pipeline, each giving a ranked list per question:
   ``bm25`` (bm25s over title + text), ``bm25+hybrid`` (the example's MiniLM + BM25 reranker over the
   BM25 top 30), ``bm25+minilm`` (pure MiniLM cosine over the same 30), ``bm25-skip5`` and
   ``bm25-skip10`` (deliberately degraded: BM25's top 5 / top 10 dropped), and ``chunk-fault`` (the
   demo's chunker fault: each answering paragraph is cut in two at its middle sentence, and the tail
   chunk loses the title, so it no longer names its entity).
2. End to end: for each configuration and list length L in 5/10/20, the example pipeline's SmolLM2
   generator answers from the top L; the e2e score is the token F1 of that answer against the
   reference answers (best alias).
3. Relevance sources label every unit in any configuration's top 20: ``qrels`` (supporting
   paragraphs; a chunk inherits its paragraph's label, as provenance labels do), ``offline`` (the
   default relevance labeller, query only, as the audit runs it without gold) and ``offline+ref``
   (with the reference answer), and eRAG with the SmolLM2 reader on each unit alone, scored by token F1
   (``erag-f1``, relevant at F1 ≥ 0.5), exact match (``erag-em``) and answer containment
   (``erag-has``). The NLI labeller has no weights on this machine and is not run.
4. List metrics (trec_eval conventions, `ragtrace_evaluator.metrics.trec`, binary gains; a query's
   judgements are every labelled unit of the configuration's own corpus, so a cut paragraph counts
   as its halves under ``chunk-fault`` and as itself elsewhere): recall@L, P@L, MRR (of the top L),
   nDCG@L, hit@L.
5. Agreement (`ragtrace_evaluator.metrics.correlation`): Kendall τ-b and Spearman ρ between the
   configurations' ranking by mean metric and by mean e2e F1, with percentile bootstrap CIs over
   queries; and the query-level ρ over all (question, configuration) cells. A question where a source
   labels no unit of some configuration's corpus relevant has undefined recall/MRR/nDCG there and is
   left out of that source's rows for those metrics (``n`` says how many remain).

Cost: every reader call (eRAG per unit, e2e per list) is cached under ``build/relevance_correlation/``
by content hash with the CPU seconds it took, so a rerun is cheap and still reports the first run's
cost; peak memory comes from two short probe processes (one per method, uncached, one question).
Torch runs one thread per process: on a shared 2-core machine two spinning threads made SmolLM2 ~10x
slower than one. ``--shard I/N`` lets N processes split the questions and share the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.hotpotqa_pipeline import DATA, load
from ragtrace_evaluator.labellers.erag import ERAGRelevance
from ragtrace_evaluator.labellers.protocol import Passage, RelevanceLabeller
from ragtrace_evaluator.metrics.correlation import (
    paired_query_level_difference,
    query_level_agreement,
    system_level_agreement,
)
from ragtrace_evaluator.metrics.token_f1 import normalise_answer, token_f1
from ragtrace_evaluator.metrics.trec import query_measures
from ragtrace_examples.components import (
    Bm25Retriever,
    Chunk,
    HybridReranker,
    MiniLMEncoder,
    ScoredChunk,
    split_sentences,
)

OUT = Path(__file__).resolve().parents[1] / "build" / "relevance_correlation"
CONFIGS = ("bm25", "bm25+hybrid", "bm25+minilm", "bm25-skip5", "bm25-skip10", "chunk-fault")
LENGTHS = (5, 10, 20)
POOL = 30
SOURCES = ("qrels", "offline", "offline+ref", "erag-f1", "erag-em", "erag-has")
METRICS = ("recall", "precision", "mrr", "ndcg", "hit")


def trec_name(metric: str, length: int) -> str:
    return {"recall": f"recall_{length}", "precision": f"P_{length}", "mrr": "recip_rank",
            "ndcg": f"ndcg_cut_{length}", "hit": f"success_{length}"}[metric]


# --- reader calls, cached by content hash ----------------------------------------------------------
class NotCached(LookupError):
    """``cached_only`` was asked for and this call has not been made before."""


class CallCache:
    """Reader outputs by content hash, with the CPU seconds each took. One JSON-lines file per
    writer (shards never share a file); every file under the folder is read at start.
    ``cached_only`` raises `NotCached` instead of running a call (to report on what is done)."""

    def __init__(self, folder: Path, writer: str, *, cached_only: bool = False) -> None:
        self.folder = folder
        self.cached_only = cached_only
        folder.mkdir(parents=True, exist_ok=True)
        self.entries: dict[str, dict[str, Any]] = {}
        for path in sorted(folder.glob("calls-*.jsonl")):
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        row = json.loads(line)
                        self.entries[row["key"]] = row
        self._fh = open(folder / f"calls-{writer}.jsonl", "a", encoding="utf-8")  # noqa: SIM115

    @staticmethod
    def key(*parts: str) -> str:
        h = hashlib.sha256()
        for p in parts:
            h.update(p.encode("utf-8"))
            h.update(b"\x1f")
        return h.hexdigest()

    def call(self, key: str, fn: Callable[[], str], prepare: Callable[[], object] | None = None, *,
             reader: bool = True) -> dict[str, Any]:
        """``fn()``'s text from the cache, or run and timed; ``prepare`` (a model load) runs untimed
        first. ``cached_only`` holds back reader calls only (``reader=False`` calls are cheap)."""
        hit = self.entries.get(key)
        if hit is not None:
            return {**hit, "cached": True}
        if self.cached_only and reader:
            raise NotCached(key)
        if prepare is not None:
            prepare()
        cpu, wall = time.process_time(), time.perf_counter()
        text = fn()
        row = {"key": key, "text": text, "cpu_s": round(time.process_time() - cpu, 4),
               "wall_s": round(time.perf_counter() - wall, 4)}
        self.entries[key] = row
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()
        return {**row, "cached": False}

    def close(self) -> None:
        self._fh.close()


@dataclass
class CallLog:
    """Reader calls of one question: count, CPU seconds (as first measured) and how many ran now."""

    calls: int = 0
    cpu_s: float = 0.0
    fresh: int = 0

    def add(self, row: dict[str, Any]) -> None:
        self.calls += 1
        self.cpu_s += float(row["cpu_s"])
        self.fresh += 0 if row["cached"] else 1


class Reader(Protocol):
    """What eRAG needs of a reader (`ragtrace_evaluator.labellers.erag.CausalLMReader` is one)."""

    def answer(self, query: str, context: str) -> str: ...

    def manifest(self) -> dict[str, Any]: ...


class CachedReader:
    """A reader whose answers go through the call cache (and are counted per question)."""

    def __init__(self, reader: Reader, cache: CallCache) -> None:
        self.reader = reader
        self.cache = cache
        m = reader.manifest()
        # the weights' hash, not where they are installed: a path made every cached answer miss when the
        # same package was reached through another checkout's virtualenv (a symlink) or on another machine
        identity = {"weights": m.get("file_hash") or m.get("model_id"), "gguf_file": m.get("gguf_file"),
                    "max_new_tokens": m.get("max_new_tokens")}
        self._id = json.dumps(identity, sort_keys=True)
        self._manifest = m
        self.log = CallLog()

    def manifest(self) -> dict[str, Any]:
        return self._manifest

    def answer(self, query: str, context: str) -> str:
        row = self.cache.call(CallCache.key("erag", self._id, query, context),
                              lambda: self.reader.answer(query, context), getattr(self.reader, "_load", None))
        self.log.add(row)
        return str(row["text"])


class Generator(Protocol):
    """The end-to-end generator: the example's `SmolLM2Generator`, or anything with its two methods."""

    name: str

    def prompt(self, question: str, context: Sequence[ScoredChunk]) -> str: ...

    def complete(self, prompt: str) -> str: ...


class ReaderGenerator:
    """An e2e generator made of a reader answering from the passages joined (the tests' tiny one)."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.name = "reader:" + str(reader.manifest().get("model_id"))

    def prompt(self, question: str, context: Sequence[ScoredChunk]) -> str:
        return json.dumps([question, [c.text for c in context]])

    def complete(self, prompt: str) -> str:
        question, texts = json.loads(prompt)
        return self.reader.answer(question, "\n\n".join(texts))


class LazySmolLM2:
    """The example pipeline's SmolLM2 generator, loaded on the first uncached call."""

    def __init__(self, max_new_tokens: int = 32) -> None:
        self.max_new_tokens = max_new_tokens
        self.name = f"smollm2-135m-instruct/greedy/max{max_new_tokens}"
        self._gen: Any = None

    def load(self) -> Any:
        if self._gen is None:
            from ragtrace_examples.components import SmolLM2Generator

            self._gen = SmolLM2Generator(max_new_tokens=self.max_new_tokens)
        return self._gen

    def prompt(self, question: str, context: Sequence[ScoredChunk]) -> str:
        from ragtrace_examples.components import build_prompt

        return build_prompt(question, context)

    def complete(self, prompt: str) -> str:
        return str(self.load().complete(prompt))


# --- answer scores -----------------------------------------------------------------------------------
def best_f1(answer: str, references: Sequence[str]) -> float:
    """The answer's token F1 against its best reference; a question none of whose references has a
    word has no F1 (undefined, not 0): refused, as eRAG refuses to score against it."""
    scores = [f1 for r in references if (f1 := token_f1(answer, r)) is not None]
    if not scores:
        raise ValueError(f"no reference answer with words among {list(references)!r}")
    return max(scores)


def exact_match(answer: str, references: Sequence[str]) -> float:
    a = normalise_answer(answer)
    return 1.0 if any(a == normalise_answer(r) and a for r in references) else 0.0


def has_answer(answer: str, references: Sequence[str]) -> float:
    """1 when a reference's normalised tokens appear, in order and contiguous, in the answer."""
    a = " " + " ".join(normalise_answer(answer)) + " "
    return 1.0 if any((r2 := " ".join(normalise_answer(r))) and f" {r2} " in a for r in references) else 0.0


# --- the configurations --------------------------------------------------------------------------------
def faulty_chunks(chunks: Sequence[Chunk], questions: Sequence[dict[str, Any]]) -> list[Chunk]:
    """The demo's chunker fault on HotpotQA: every supporting paragraph cut at its middle sentence;
    the tail keeps no title (the chunker puts it on the first chunk only), so it names no entity."""
    gold = {g for q in questions for g in q["gold"]}
    out: list[Chunk] = []
    for c in chunks:
        sentences = split_sentences(c.text)
        if c.id not in gold or len(sentences) < 2:
            out.append(c)
            continue
        head_text = " ".join(sentences[: len(sentences) // 2])
        cut = len(head_text)
        out.append(Chunk(f"{c.id}#0", c.id, c.title, head_text, 0, cut))
        out.append(Chunk(f"{c.id}#1", c.id, "", c.text[cut:].strip(), cut, len(c.text)))
    return out


class Configurations:
    """The six ranked lists of a question (each up to 20 long)."""

    def __init__(self, chunks: Sequence[Chunk], all_questions: Sequence[dict[str, Any]],
                 encoder: MiniLMEncoder) -> None:
        self.bm25 = Bm25Retriever(chunks, with_title=True)
        faulty = faulty_chunks(chunks, all_questions)
        self.faulty = Bm25Retriever(faulty, with_title=True)
        #: paragraph id -> its chunk ids under the faulty chunker (only the paragraphs it cut)
        self.halves: dict[str, list[str]] = {}
        for c in faulty:
            if c.id != c.doc_id:
                self.halves.setdefault(c.doc_id, []).append(c.id)
        self.hybrid = HybridReranker(encoder)
        self.minilm = HybridReranker(encoder, lexical_weight=0.0)

    def lists(self, question: str) -> dict[str, list[ScoredChunk]]:
        top = max(LENGTHS)
        pool = self.bm25.search(question, POOL)
        return {
            "bm25": pool[:top],
            "bm25+hybrid": self.hybrid.rerank(question, pool)[:top],
            "bm25+minilm": self.minilm.rerank(question, pool)[:top],
            "bm25-skip5": pool[5:5 + top],
            "bm25-skip10": pool[10:10 + top],
            "chunk-fault": self.faulty.search(question, top),
        }


# --- one question ----------------------------------------------------------------------------------------
@dataclass
class QuestionResult:
    qid: str
    #: config -> ranked unit ids (up to 20)
    lists: dict[str, list[str]]
    #: source -> unit id -> binary judgement
    judgements: dict[str, dict[str, int]]
    #: (config, length) -> e2e scores {"f1", "em", "has"} and the answer
    e2e: dict[str, dict[str, Any]]
    erag_answers: dict[str, str]
    cost: dict[str, dict[str, float]] = field(default_factory=dict)
    #: labelled paragraphs that the faulty chunker cut (they exist only outside "chunk-fault")
    split: list[str] = field(default_factory=list)

    def judgements_for(self, source: str, config: str) -> dict[str, int]:
        """The judgements over the units of ``config``'s own corpus: the chunker fault's corpus has
        the halves of a cut paragraph instead of the paragraph, the others the paragraph only. So
        recall's denominator is the relevant units a configuration could have retrieved."""
        split = set(self.split)
        if config == "chunk-fault":
            return {u: v for u, v in self.judgements[source].items() if u not in split}
        return {u: v for u, v in self.judgements[source].items() if "#" not in u}

    def to_json(self) -> dict[str, Any]:
        return {"qid": self.qid, "lists": self.lists, "judgements": self.judgements, "e2e": self.e2e,
                "erag_answers": self.erag_answers, "cost": self.cost, "split": self.split}


def run_question(q: dict[str, Any], configs: Configurations, *, generator: Generator, gen_cache: CallCache,
                 erag: ERAGRelevance, erag_reader: CachedReader, offline: RelevanceLabeller) -> QuestionResult:
    lists = configs.lists(q["question"])
    units: dict[str, ScoredChunk] = {}
    for ranked in lists.values():
        for c in ranked:
            units.setdefault(c.id, c)
    ids = sorted(units)
    passages = [Passage(i, units[i].text) for i in ids]
    refs = list(q["answers"]) or [""]
    gold = set(q["gold"])

    judgements: dict[str, dict[str, int]] = {"qrels": {i: int(units[i].doc_id in gold) for i in ids}}
    for g in gold:  # gold units nobody retrieved still count in recall's denominator
        for unit in (g, *configs.halves.get(g, ())):
            judgements["qrels"].setdefault(unit, 1)

    # the offline labeller's scores go through the cache too, so a rerun reports the first run's cost
    texts = json.dumps([p.text for p in passages])
    offline_id = json.dumps(offline.manifest(), sort_keys=True)
    offline_rows = [gen_cache.call(CallCache.key("offline", offline_id, q["question"], ref or "", texts),
                                   lambda r=ref: json.dumps(offline.relevance(q["question"], passages, reference=r)),
                                   reader=False)
                    for ref in (None, refs[0])]
    query_only, with_ref = (json.loads(row["text"]) for row in offline_rows)
    offline_cpu = sum(float(row["cpu_s"]) for row in offline_rows)
    judgements["offline"] = {i: int(s >= offline.threshold) for i, s in zip(ids, query_only, strict=True)}
    judgements["offline+ref"] = {i: int(s >= offline.threshold) for i, s in zip(ids, with_ref, strict=True)}

    erag_reader.log = CallLog()
    f1s = erag.relevance(q["question"], passages, reference=refs[0])
    answers = dict(zip(ids, erag.last_answers, strict=True))
    # F1 against the best alias (the labeller scores against one reference)
    judgements["erag-f1"] = {i: int(max(f, best_f1(answers[i], refs)) >= erag.threshold)
                             for i, f in zip(ids, f1s, strict=True)}
    judgements["erag-em"] = {i: int(exact_match(answers[i], refs)) for i in ids}
    judgements["erag-has"] = {i: int(has_answer(answers[i], refs)) for i in ids}

    gen_log = CallLog()
    e2e: dict[str, dict[str, Any]] = {}
    for name, ranked in lists.items():
        for length in LENGTHS:
            prompt = generator.prompt(q["question"], ranked[:length])
            row = gen_cache.call(CallCache.key("e2e", generator.name, prompt), lambda p=prompt: generator.complete(p),
                                 getattr(generator, "load", None))
            gen_log.add(row)
            text = str(row["text"])
            e2e[f"{name}@{length}"] = {"f1": round(best_f1(text, refs), 4), "em": exact_match(text, refs),
                                       "has": has_answer(text, refs), "answer": text}
    cost = {"erag": {"calls": erag_reader.log.calls, "cpu_s": round(erag_reader.log.cpu_s, 3),
                     "fresh": erag_reader.log.fresh},
            "e2e": {"calls": gen_log.calls, "cpu_s": round(gen_log.cpu_s, 3), "fresh": gen_log.fresh},
            "offline": {"calls": 2 * len(passages), "cpu_s": round(offline_cpu, 3)}}
    split = sorted(u for u in {*ids, *judgements["qrels"]} if u in configs.halves)
    return QuestionResult(q["id"], {k: [c.id for c in v] for k, v in lists.items()}, judgements, e2e, answers,
                          cost, split)


# --- the table ------------------------------------------------------------------------------------------------
def metric_matrix(results: Sequence[QuestionResult], source: str, metric: str,
                  length: int) -> tuple[np.ndarray, list[int]]:
    """(questions with a defined value, configs) matrix of one list metric, and which rows those are."""
    name = trec_name(metric, length)
    rows, kept = [], []
    for n, r in enumerate(results):
        vals = [query_measures(r.lists[c][:length], r.judgements_for(source, c), (name,))[name] for c in CONFIGS]
        if any(v is None for v in vals):
            continue  # no unit labelled relevant: recall, MRR and nDCG are undefined
        rows.append(vals)
        kept.append(n)
    return np.array(rows, dtype=float).reshape(len(rows), len(CONFIGS)), kept


def e2e_matrix(results: Sequence[QuestionResult], length: int, score: str = "f1") -> np.ndarray:
    return np.array([[r.e2e[f"{c}@{length}"][score] for c in CONFIGS] for r in results], dtype=float)


def agreement_table(results: Sequence[QuestionResult], *, n_resamples: int = 2000, seed: int = 0,
                    target: str = "f1") -> list[dict[str, Any]]:
    """One row per source x metric x length; ``target`` is the e2e score ("f1", "em" or "has")."""
    rows = []
    for length in LENGTHS:
        e2e = e2e_matrix(results, length, target)
        for source in SOURCES:
            for metric in METRICS:
                m, kept = metric_matrix(results, source, metric, length)
                row: dict[str, Any] = {"source": source, "metric": metric, "length": length, "n": len(kept),
                                       "config_means": dict(zip(CONFIGS, np.round(m.mean(axis=0), 4).tolist(),
                                                                strict=True)) if kept else None}
                if len(kept) >= 2:
                    row["system"] = system_level_agreement(m, e2e[kept], n_resamples=n_resamples,
                                                           seed=seed).to_json()
                    row["query"] = query_level_agreement(m, e2e[kept], n_resamples=max(200, n_resamples // 4),
                                                         seed=seed).to_json()
                rows.append(row)
    return rows


def paired_against_qrels(results: Sequence[QuestionResult], *, n_resamples: int = 500, seed: int = 0,
                         metrics: Sequence[str] = ("hit", "precision")) -> list[dict[str, Any]]:
    """Is a source's query-level ρ (list metric vs e2e F1) above qrels'? The difference of the two, on
    the questions where both are defined, with the same resampled questions for both in every replicate."""
    rows = []
    for length in LENGTHS:
        e2e = e2e_matrix(results, length)
        for metric in metrics:
            base, base_kept = metric_matrix(results, "qrels", metric, length)
            for source in SOURCES[1:]:
                m, kept = metric_matrix(results, source, metric, length)
                common = sorted(set(kept) & set(base_kept))
                row: dict[str, Any] = {"source": source, "metric": metric, "length": length, "n": len(common)}
                if len(common) >= 2:
                    a = m[[kept.index(k) for k in common]]
                    b = base[[base_kept.index(k) for k in common]]
                    row["paired"] = paired_query_level_difference(a, b, e2e[common], n_resamples=n_resamples,
                                                                  seed=seed).to_json()
                rows.append(row)
    return rows


def cost_summary(results: Sequence[QuestionResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method in ("erag", "e2e", "offline"):
        calls = [r.cost[method]["calls"] for r in results]
        cpu = [r.cost[method]["cpu_s"] for r in results]
        out[method] = {"calls_per_query": round(float(np.mean(calls)), 2),
                       "cpu_s_per_query": round(float(np.mean(cpu)), 2)}
    return out


def fmt_ci(d: dict[str, Any] | None, key: str) -> str:
    if not d or d.get(key) is None:
        return "–"
    lo, hi = d[f"{key}_ci"]
    ci = f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None and hi is not None else ""
    return f"{d[key]:+.2f}{ci}"


def markdown(report: dict[str, Any]) -> str:
    asked = report.get("first_questions_asked", report["questions"])
    lines = [f"HotpotQA dev500: {report['questions']} questions (those fully measured among the first {asked}); "
             f"configurations: {', '.join(CONFIGS)}.",
             "",
             "e2e F1 (SmolLM2 generator) per configuration and list length:", "",
             "| L | " + " | ".join(CONFIGS) + " |", "|---|" + "---|" * len(CONFIGS)]
    for length in LENGTHS:
        means = report["e2e_means"][str(length)]
        lines.append(f"| {length} | " + " | ".join(f"{means[c]:.3f}" for c in CONFIGS) + " |")
    lines += ["", "| source | metric | L | n | τ vs e2e [95% CI] | ρ vs e2e [95% CI] | query-level ρ [95% CI] |",
              "|---|---|---|---|---|---|---|"]
    for row in report["table"]:
        lines.append(f"| {row['source']} | {row['metric']} | {row['length']} | {row['n']} | "
                     f"{fmt_ci(row.get('system'), 'tau')} | {fmt_ci(row.get('system'), 'rho')} | "
                     f"{fmt_ci(row.get('query'), 'rho')} |")
    lines += ["", "Against e2e answer containment instead of F1 (share of answers containing a reference, per "
              "configuration at L = " + "/".join(str(n) for n in LENGTHS) + ": "
              + "; ".join(f"{c} " + "/".join(f"{report['e2e_has_means'][str(n)][c]:.2f}" for n in LENGTHS)
                          for c in CONFIGS) + "), τ [95% CI]:", "",
              "| source | metric | " + " | ".join(f"L={n}" for n in LENGTHS) + " |",
              "|---|---|" + "---|" * len(LENGTHS)]
    has = {(r["source"], r["metric"], r["length"]): r for r in report["table_has"]}
    for source in SOURCES:
        for metric in METRICS:
            lines.append(f"| {source} | {metric} | " + " | ".join(
                fmt_ci(has[(source, metric, n)].get("system"), "tau") for n in LENGTHS) + " |")
    if report.get("paired_vs_qrels"):
        lines += ["", "Query-level ρ (list metric vs e2e F1) of each source minus qrels' on the same questions, "
                  "paired bootstrap [95% CI] (share of replicates not above qrels):", "",
                  "| source | metric | L | n | Δρ vs qrels [95% CI] | not above |", "|---|---|---|---|---|---|"]
        for row in report["paired_vs_qrels"]:
            p = row.get("paired")
            if not p or p["difference"] is None:
                lines.append(f"| {row['source']} | {row['metric']} | {row['length']} | {row['n']} | – | – |")
                continue
            lo, hi = p["difference_ci"]
            ci = f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None and hi is not None else ""
            lines.append(f"| {row['source']} | {row['metric']} | {row['length']} | {row['n']} | "
                         f"{p['difference']:+.2f}{ci} | {p['share_not_above']:.3f} |")
    c = report["cost"]
    lines += ["", "| per question | reader calls | CPU s |", "|---|---|---|"]
    for method, label in (("erag", "eRAG (SmolLM2 reader, each unit of any top 20)"),
                          ("e2e", f"end to end ({len(CONFIGS)} configs × {len(LENGTHS)} lengths)"),
                          ("offline", "offline labeller (MiniLM + lexical; texts scored)")):
        lines.append(f"| {label} | {c[method]['calls_per_query']} | {c[method]['cpu_s_per_query']} |")
    if report.get("memory"):
        lines += ["", "peak RSS of a process running one method on one question (MB): "
                  + ", ".join(f"{k} {v}" for k, v in report["memory"].items())]
    return "\n".join(lines) + "\n"


# --- memory probe: one method, one question, a fresh process, no cache --------------------------------------
def memory_probe(method: str, data: Path) -> int:
    import torch

    torch.set_num_threads(1)
    chunks, questions = load(data, 1)
    q = questions[0]
    texts = [c.text for c in chunks if c.id in q["gold"]]
    if method == "erag":
        from ragtrace_evaluator.labellers.erag import CausalLMReader

        reader = CausalLMReader("smollm2")
        for t in texts:
            reader.answer(q["question"], t)
    elif method == "e2e":
        gen = LazySmolLM2()
        ctx = [ScoredChunk(c.id, c.text, 1.0, c.id) for c in chunks[:20]]
        gen.complete(gen.prompt(q["question"], ctx))
    elif method == "offline":
        from ragtrace_evaluator.labellers.relevance import LexicalEmbeddingRelevance

        LexicalEmbeddingRelevance().relevance(q["question"], [Passage(str(i), t) for i, t in enumerate(texts)])
    else:
        raise SystemExit(f"--probe {method!r}: use erag, e2e or offline")
    print(json.dumps({"method": method, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
    return 0


def measure_memory(data: Path) -> dict[str, int]:
    out = {}
    for method in ("offline", "erag", "e2e"):
        proc = subprocess.run([sys.executable, __file__, "--probe", method, "--data", str(data)],
                              capture_output=True, text=True, check=True)
        out[method] = json.loads(proc.stdout.strip().splitlines()[-1])["peak_rss_mb"]
    return out


# --- driver ------------------------------------------------------------------------------------------------------
def run(questions: Sequence[dict[str, Any]], chunks: Sequence[Chunk], all_questions: Sequence[dict[str, Any]], *,
        encoder: MiniLMEncoder, offline: RelevanceLabeller, erag_reader: Reader, generator: Generator,
        out: Path, writer: str = "main", budget_s: float | None = None, cached_only: bool = False,
        progress: Callable[[str], None] = lambda s: None) -> list[QuestionResult]:
    """Every question until done or until ``budget_s`` has passed (the started one finishes).
    ``cached_only``: only the questions whose every call is cached (the others are skipped)."""
    cache = CallCache(out / "cache", writer, cached_only=cached_only)
    try:
        reader = CachedReader(erag_reader, cache)
        erag = ERAGRelevance(reader)  # type: ignore[arg-type]  # a cached reader has the reader's methods
        configs = Configurations(chunks, all_questions, encoder)
        results = []
        start = time.perf_counter()
        for n, q in enumerate(questions, 1):
            if budget_s is not None and time.perf_counter() - start > budget_s:
                progress(f"budget of {budget_s:.0f} s spent after {n - 1} questions")
                break
            t = time.perf_counter()
            try:
                r = run_question(q, configs, generator=generator, gen_cache=cache, erag=erag, erag_reader=reader,
                                 offline=offline)
            except NotCached:
                progress(f"[{writer}] question {n} {q['id']}: not (fully) cached, skipped")
                continue
            results.append(r)
            progress(f"[{writer}] question {n}/{len(questions)} {q['id']}: {time.perf_counter() - t:.1f} s, "
                     f"fresh calls erag {r.cost['erag']['fresh']} e2e {r.cost['e2e']['fresh']}, "
                     f"elapsed {time.perf_counter() - start:.0f} s")
        return results
    finally:
        cache.close()


def report(results: Sequence[QuestionResult], *, n_resamples: int = 2000) -> dict[str, Any]:
    return {"questions": len(results), "question_ids": [r.qid for r in results], "configs": list(CONFIGS),
            "lengths": list(LENGTHS),
            "e2e_means": {str(length): dict(zip(CONFIGS, e2e_matrix(results, length).mean(axis=0).round(4).tolist(),
                                                strict=True)) for length in LENGTHS},
            "e2e_has_means": {str(length): dict(zip(CONFIGS, e2e_matrix(results, length, "has").mean(axis=0)
                                                    .round(4).tolist(), strict=True)) for length in LENGTHS},
            "table": agreement_table(results, n_resamples=n_resamples),
            # SmolLM2 restates the question before answering, which caps token F1: answer containment
            # is the second e2e target
            "table_has": agreement_table(results, n_resamples=n_resamples, target="has"),
            "paired_vs_qrels": paired_against_qrels(results, n_resamples=max(200, n_resamples // 4)),
            "cost": cost_summary(results)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--queries", type=int, default=60, help="the first N questions (default 60)")
    p.add_argument("--budget-s", type=float, default=None, help="start no question after this many seconds")
    p.add_argument("--shard", default="0/1", help="I/N: this process takes questions I, I+N, ... (cache shared)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--memory", action="store_true",
                   help="only measure peak memory (three probe processes) into OUT/memory.json")
    p.add_argument("--cached-only", action="store_true",
                   help="report on the questions whose reader calls are all cached; run none")
    p.add_argument("--probe", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if not a.data.is_file():
        print(f"no HotpotQA data at {a.data} (../shared/data is not part of a clone)", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.probe:
        return memory_probe(a.probe, a.data)
    if a.memory:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "memory.json").write_text(json.dumps(measure_memory(a.data)) + "\n", encoding="utf-8")
        return 0
    import torch

    torch.set_num_threads(1)
    shard, shards = (int(x) for x in a.shard.split("/"))
    chunks, all_questions = load(a.data, None)
    questions = all_questions[: a.queries][shard::shards]
    from ragtrace_evaluator.labellers.embedding import SentenceEmbedder
    from ragtrace_evaluator.labellers.erag import CausalLMReader
    from ragtrace_evaluator.labellers.relevance import LexicalEmbeddingRelevance

    # no embedding cache: the offline labeller's cost is a first run's (its scores are cached instead)
    embedder = SentenceEmbedder()
    t = time.perf_counter()
    results = run(questions, chunks, all_questions, encoder=MiniLMEncoder(),
                  offline=LexicalEmbeddingRelevance(embedder=embedder), erag_reader=CausalLMReader("smollm2"),
                  generator=LazySmolLM2(), out=a.out, writer=f"{shard}of{shards}", budget_s=a.budget_s,
                  cached_only=a.cached_only, progress=lambda s: print(s, file=sys.stderr, flush=True))
    wall = time.perf_counter() - t
    a.out.mkdir(parents=True, exist_ok=True)
    with open(a.out / f"questions-{shard}of{shards}.jsonl", "w", encoding="utf-8") as fh:
        for r in results:
            fh.write(json.dumps(r.to_json()) + "\n")
    if shards > 1:
        print(f"shard {a.shard}: {len(results)} questions in {wall:.0f} s", file=sys.stderr)
        return 0
    rep = report(results)
    rep["wall_s"] = round(wall, 1)
    rep["fresh_calls"] = {m: sum(r.cost[m]["fresh"] for r in results) for m in ("erag", "e2e")}
    rep["first_questions_asked"] = a.queries
    if (a.out / "memory.json").is_file():
        rep["memory"] = json.loads((a.out / "memory.json").read_text(encoding="utf-8"))
    (a.out / "results.json").write_text(json.dumps(rep, indent=1) + "\n", encoding="utf-8")
    text = markdown(rep)
    (a.out / "table.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
