"""Accuracy of the offline grounding labeller against human labels, beside two baselines.

    .venv/bin/python benchmarks/grounding_accuracy.py [--data ../shared/data/grounding-dev]
        [--cache-dir build/grounding-cache] [--json out.json] [--limit N] [--bootstrap 1000]
    .venv/bin/python benchmarks/grounding_accuracy.py --calibrate [--hotpot ../shared/data/hotpotqa-dev500]
        [--lm-cache build/grounding-synthetic/smollm2_raw.jsonl | --no-lm]

Sets (positives = supported, the class the scores rank high):
- BEGIN dev (wow + cmu + tc): a dialogue response vs its knowledge snippet, "Fully attributable" vs
  "Not fully attributable". "Generic" rows make no claim: they are left out of the binary task and
  reported apart (how many the claim extractor also calls claim-less).
- WiCE dev claims vs the cited page: supported vs partially/not supported, and supported vs not.

Systems, all in the same run on the same items: token overlap (share of the response's distinct
content words found in the evidence), MiniLM cosine alone (max over evidence sentences), and the
offline labeller (its answer score from ``judge_many`` = the weakest claim's support ×
(1 − contradiction); an answer with no claim ranks last, and every system's AUROC on the
claim-bearing items alone is printed too). Balanced
accuracy and per-class precision/recall use each system's fixed, a-priori threshold (0.5 for all
three; for the labeller that is "every claim entailed"), never a threshold fitted to these files.
CIs are percentile bootstrap over items (seeded).

``--labeller nli:MODEL`` (or ``llm:MODEL@URL``) measures another grounding labeller the same way, e.g.
an NLI cross-encoder where its weights can be installed (none can be on the development machine).

``--calibrate`` refits the labeller's support weights on synthetic claims built from HotpotQA
(see benchmarks.grounding_calibration) and prints them; it never reads BEGIN or WiCE. It
also uses SmolLM2's closed-book replies, cached in ``--lm-cache`` (default
build/grounding-synthetic/smollm2_raw.jsonl) and generated there when missing (~400 greedy replies,
about 15-30 min on two cores); ``--no-lm`` fits on the rule-made claims alone.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragtrace_evaluator.labellers.claims import extract_claims, split_sentences
from ragtrace_evaluator.labellers.embedding import SentenceEmbedder
from ragtrace_evaluator.labellers.lexical import STOPWORDS
from ragtrace_evaluator.labellers.offline import OfflineGroundingLabeller
from ragtrace_evaluator.labellers.protocol import GroundingLabeller, Passage
from ragtrace_evaluator.labellers.registry import make_grounding_labeller

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / ".." / "shared" / "data" / "grounding-dev"


@dataclass(frozen=True)
class Item:
    text: str
    evidence: tuple[str, ...]  # evidence sentences (BEGIN: the snippet's sentences)
    label: int  # 1 = supported


def load_begin(folder: Path, limit: int | None) -> tuple[list[Item], list[str]]:
    csv.field_size_limit(1 << 30)
    items: list[Item] = []
    generic: list[str] = []
    for name in ("wow", "cmu", "tc"):
        with open(folder / f"begin_dev_{name}.tsv", newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
                label = row["begin_label"].strip()
                if label == "Generic":
                    generic.append(row["response"])
                    continue
                evidence = tuple(split_sentences(row["knowledge"])) or (row["knowledge"],)
                items.append(Item(row["response"], evidence, 1 if label == "Fully attributable" else 0))
    return items[:limit] if limit else items, generic


def load_wice(folder: Path, limit: int | None) -> list[tuple[Item, str]]:
    out = []
    with open(folder / "claim" / "dev.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            evidence = tuple(s for s in row["evidence"] if s.strip())
            out.append((Item(row["claim"], evidence, 1 if row["label"] == "supported" else 0), row["label"]))
    return out[:limit] if limit else out


# -- systems -------------------------------------------------------------------------------------

def _words(text: str) -> set[str]:
    import re
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS}


def token_overlap(items: Sequence[Item]) -> np.ndarray:
    scores = []
    for it in items:
        claim = _words(it.text)
        ev = set().union(*(_words(s) for s in it.evidence))
        scores.append(len(claim & ev) / len(claim) if claim else 0.0)
    return np.array(scores)


def minilm_cosine(items: Sequence[Item], embedder: SentenceEmbedder) -> np.ndarray:
    texts = [it.text for it in items] + [s for it in items for s in it.evidence]
    embedder.embed(texts)  # one batched call warms the cache
    scores = []
    for it in items:
        c = embedder.embed([it.text])[0]
        e = embedder.embed(list(it.evidence))
        scores.append(float(np.max(e @ c)) if len(e) else 0.0)
    return np.array(scores)


def labeller_scores(items: Sequence[Item], labeller: GroundingLabeller) -> tuple[np.ndarray, np.ndarray, int]:
    """(score, predicted-supported, number of items the claim extractor found claim-less), from the
    labeller's own answer-level output (``judge_many``): score = ``GroundingResult.score`` (the
    weakest claim's support × (1 − contradiction)), predicted = verdict ``entailed``. An answer with
    no claim (an open question, chit-chat, an abstention) gets verdict neutral/abstained and no
    score: nothing in it is attributed to the evidence, so it ranks at the bottom (score 0), as
    token overlap ranks a response with no content word. ``claim_bearing`` in the report gives
    every system's AUROC without those items."""
    results = labeller.judge_many([(it.text, [Passage("evidence", "\n\n".join(it.evidence))]) for it in items])
    scores = np.array([r.score if r.score is not None else 0.0 for r in results])
    predicted = np.array([r.verdict == "entailed" for r in results])
    claimless = sum(1 for r in results if r.kind != "claims")
    return scores, predicted, claimless


def claim_bearing_mask(items: Sequence[Item]) -> np.ndarray:
    return np.array([extract_claims(it.text).kind == "claims" for it in items])


# -- metrics ---------------------------------------------------------------------------------------

def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Mann-Whitney AUROC with ties counted one half."""
    from scipy.stats import rankdata

    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def classification(labels: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    out: dict[str, float] = {}
    recalls = []
    for cls, name in ((1, "supported"), (0, "unsupported")):
        truth = labels == cls
        pred = predicted == cls
        tp = float((truth & pred).sum())
        out[f"precision_{name}"] = tp / pred.sum() if pred.sum() else float("nan")
        out[f"recall_{name}"] = tp / truth.sum() if truth.sum() else float("nan")
        recalls.append(out[f"recall_{name}"])
    out["balanced_accuracy"] = float(np.mean(recalls))
    return out


def evaluate(labels: np.ndarray, scores: np.ndarray, predicted: np.ndarray, n_boot: int,
             seed: int = 20261130) -> dict[str, object]:
    point: dict[str, float] = {"auroc": auroc(labels, scores), **classification(labels, predicted)}
    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {k: [] for k in point}
    n = len(labels)
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        b = {"auroc": auroc(labels[idx], scores[idx]), **classification(labels[idx], predicted[idx])}
        for k, v in b.items():
            samples[k].append(v)
    result: dict[str, object] = {"n": n, "n_supported": int(labels.sum()), "n_unsupported": int(n - labels.sum())}
    for k, v in point.items():
        arr = np.array(samples[k], dtype=float)
        arr = arr[~np.isnan(arr)]
        lo, hi = (np.percentile(arr, [2.5, 97.5]) if len(arr) else (float("nan"), float("nan")))
        result[k] = {"value": round(v, 4), "ci95": [round(float(lo), 4), round(float(hi), 4)]}
    return result


def run_set(name: str, items: Sequence[Item], systems: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]],
            n_boot: int) -> dict[str, object]:
    labels = np.array([it.label for it in items])
    mask = claim_bearing_mask(items)
    out: dict[str, object] = {}
    bearing: dict[str, float] = {}
    for sys_name, fn in systems.items():
        scores, predicted = fn()
        out[sys_name] = evaluate(labels, scores, predicted, n_boot)
        bearing[sys_name] = round(auroc(labels[mask], scores[mask]), 4)
    return {"set": name, "systems": out,
            "claim_bearing": {"n": int(mask.sum()), "n_supported": int(labels[mask].sum()), "auroc": bearing}}


def _fmt(metric: object) -> str:
    if not isinstance(metric, dict):
        return str(metric)
    lo, hi = metric["ci95"]
    return f"{metric['value']:.3f} [{lo:.3f}, {hi:.3f}]"


def print_table(results: list[dict[str, object]]) -> None:
    cols = ["auroc", "balanced_accuracy", "precision_supported", "recall_supported",
            "precision_unsupported", "recall_unsupported"]
    for res in results:
        systems = res["systems"]
        assert isinstance(systems, dict)
        first = next(iter(systems.values()))
        print(f"\n## {res['set']}  (n={first['n']}: {first['n_supported']} supported, "
              f"{first['n_unsupported']} not)")
        print("| system | " + " | ".join(cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for sys_name, metrics in systems.items():
            print(f"| {sys_name} | " + " | ".join(_fmt(metrics[c]) for c in cols) + " |")
        ours = list(systems)[-1]  # the labeller under test comes after the two baselines
        base = max(systems[s]["auroc"]["value"] for s in systems if s != ours)
        gap = systems[ours]["auroc"]["value"] - base
        print(f"{ours} AUROC − best baseline = {gap:+.3f} (target ≥ +0.050)")
        cb = res["claim_bearing"]
        assert isinstance(cb, dict)
        if cb["n"] < first["n"]:
            print(f"claim-bearing items only (n={cb['n']}: {cb['n_supported']} supported): AUROC "
                  + ", ".join(f"{k} {v:.3f}" for k, v in cb["auroc"].items()))


def relevance_accuracy(path: Path, embedder: SentenceEmbedder, n_boot: int,
                       limit: int | None) -> dict[str, object]:
    """AUROC and P/R at the documented threshold of the offline relevance labeller, paragraph level:
    HotpotQA's 2 supporting paragraphs per question vs its 8 retrieved distractors, with the query
    alone and with the reference answer."""
    from ragtrace_evaluator.labellers.relevance import LexicalEmbeddingRelevance

    labeller = LexicalEmbeddingRelevance(embedder=embedder)
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh][: limit or None]
    out: dict[str, object] = {"threshold": labeller.threshold, "questions": len(rows)}
    for mode in ("query only", "with reference answer"):
        labels: list[int] = []
        scores: list[float] = []
        for q in rows:
            passages = [Passage(c["id"], f"{c['title']}. {c['paragraph_text']}") for c in q["contexts"]]
            ref = q["answers_objects"][0]["spans"][0] if mode != "query only" else None
            scores.extend(labeller.relevance(q["question_text"], passages, reference=ref))
            labels.extend(1 if c["is_supporting"] else 0 for c in q["contexts"])
        y, s = np.array(labels), np.array(scores)
        out[mode] = evaluate(y, s, s >= labeller.threshold, n_boot)
    return out


def speed(path: Path, n_traces: int = 200) -> dict[str, object]:
    """Traces/s for judge_many on n_traces HotpotQA questions (5 paragraphs each, a 3-sentence answer
    made of one gold sentence, one altered sentence and one distractor sentence), cold (empty
    embedding cache, model already loaded), warm (same traces again) and new answers over cached
    passages, in batches of 32."""
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh][:n_traces]
    traces = []
    for q in rows:
        ctx = q["contexts"][:5]
        sents = [split_sentences(c["paragraph_text"])[0] for c in ctx]
        answer = f"{sents[0]} {sents[1].replace('was', 'was not', 1)} {sents[2]}"
        traces.append((answer, [Passage(c["id"], c["paragraph_text"]) for c in ctx]))
    labeller = OfflineGroundingLabeller(embedder=SentenceEmbedder())
    labeller.judge("warm up the model.", [Passage("x", "load the weights.")])
    out: dict[str, object] = {"n_traces": len(traces), "passages_per_trace": 5, "answer_sentences": 3}
    # "new answers": the same passages (cached) with answers never seen (3 new claims to embed).
    fresh = [(" ".join(reversed(split_sentences(a))).replace(".", " indeed.", 1), p) for a, p in traces]
    for phase, batch in (("cold", traces), ("warm", traces), ("new_answers", fresh)):
        started = time.perf_counter()
        for i in range(0, len(batch), 32):
            labeller.judge_many(batch[i:i + 32])
        out[f"{phase}_traces_per_s"] = round(len(batch) / (time.perf_counter() - started), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grounding_accuracy", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "build" / "grounding-cache")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--limit", type=int, help="first N items per set (smoke runs)")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--labeller", default="offline",
                        help="the grounding labeller to measure (as `ragtrace audit --labeller`): offline, "
                             "nli:<model id or directory>, llm:<model>@<base URL>")
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--lm-cache", type=Path, default=ROOT / "build" / "grounding-synthetic" / "smollm2_raw.jsonl",
                        help="SmolLM2 closed-book replies for --calibrate (generated into it when missing)")
    parser.add_argument("--no-lm", action="store_true", help="--calibrate on the rule-made claims alone")
    parser.add_argument("--relevance", action="store_true",
                        help="offline relevance labeller on HotpotQA: gold vs distractor paragraphs")
    parser.add_argument("--speed", action="store_true",
                        help="labeller throughput on HotpotQA traces: 5 passages, a 3-sentence answer")
    parser.add_argument("--hotpot", type=Path, default=ROOT / ".." / "shared" / "data" / "hotpotqa-dev500")
    args = parser.parse_args(argv)

    embedder = SentenceEmbedder(cache_dir=args.cache_dir)
    if args.calibrate:
        from benchmarks.grounding_calibration import calibrate

        report = calibrate(args.hotpot / "dev_subsampled.jsonl", embedder,
                           lm_cache=None if args.no_lm else args.lm_cache)
        embedder.save()
        print(json.dumps(report, indent=2))
        return 0
    if args.relevance:
        report = relevance_accuracy(args.hotpot / "dev_subsampled.jsonl", embedder, args.bootstrap, args.limit)
        embedder.save()
        print(json.dumps(report, indent=2))
        return 0
    if args.speed:
        print(json.dumps(speed(args.hotpot / "dev_subsampled.jsonl"), indent=2))
        return 0
    if not args.data.exists():
        print(f"no grounding dev data at {args.data}; pass --data", file=sys.stderr)
        return 2
    labeller: GroundingLabeller = (OfflineGroundingLabeller(embedder=embedder) if args.labeller == "offline"
                                   else make_grounding_labeller(args.labeller))
    ours_name = "offline labeller" if args.labeller == "offline" else f"labeller {args.labeller}"
    started = time.perf_counter()
    begin, generic = load_begin(args.data / "begin", args.limit)
    wice = load_wice(args.data / "wice", args.limit)
    results = []

    def systems(items: Sequence[Item]) -> dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]]:
        def overlap() -> tuple[np.ndarray, np.ndarray]:
            s = token_overlap(items)
            return s, s >= 0.5

        def cosine() -> tuple[np.ndarray, np.ndarray]:
            s = minilm_cosine(items, embedder)
            return s, s >= 0.5

        def ours() -> tuple[np.ndarray, np.ndarray]:
            s, p, forced = labeller_scores(items, labeller)
            forced_counts.append(forced)
            return s, p

        return {"token overlap": overlap, "MiniLM cosine": cosine, ours_name: ours}

    forced_counts: list[int] = []
    results.append(run_set("BEGIN dev, fully vs not fully attributable", begin, systems(begin), args.bootstrap))
    wice_all = [it for it, _ in wice]
    results.append(run_set("WiCE claim dev, supported vs partially/not", wice_all, systems(wice_all),
                           args.bootstrap))
    wice_binary = [it for it, label in wice if label != "partially_supported"]
    results.append(run_set("WiCE claim dev, supported vs not", wice_binary, systems(wice_binary),
                           args.bootstrap))
    embedder.save()
    generic_flagged = sum(1 for g in generic if extract_claims(g).kind != "claims")
    extra = {
        "begin_generic": {"n": len(generic), "flagged_claimless": generic_flagged},
        "claimless_ranked_last": dict(zip([r["set"] for r in results], forced_counts, strict=True)),
        "seconds": round(time.perf_counter() - started, 1),
        "manifest": labeller.manifest(),
    }
    print_table(results)
    print(f"\nBEGIN Generic rows: {generic_flagged}/{len(generic)} recognised as making no claim")
    print(f"claim-less items (ranked at the bottom by the labeller): {extra['claimless_ranked_last']}")
    print(f"elapsed {extra['seconds']} s")
    if args.json:
        args.json.write_text(json.dumps({"results": results, **extra}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
