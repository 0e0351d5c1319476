"""Accuracy of a grounding labeller against human labels, beside two baselines, in one run.

    .venv/bin/python benchmarks/grounding_accuracy.py [--labeller offline,nli:builtin]
        [--dev ../shared/data/grounding-dev] [--train ../shared/data/grounding-train]
        [--cache-dir build/grounding-cache] [--json out.json] [--bootstrap 1000] [--limit N] [--no-folds]
        [--relevance] [--speed] [--nli-checks] [--all] [--write-measured]

Several labellers are measured side by side in one run (``--labeller offline,offline@c108558,nli:builtin``:
``offline@REV`` is the offline labeller with the artefact shipped at that git revision), each with the
paired difference of its AUROC to token overlap (95% CI from the same bootstrap resamples of items).

What is measured (positives = supported, the class the scores rank high):

- **dev sets** (``grounding-dev/``, never fitted on): BEGIN dev (wow + cmu + tc), a dialogue response
  vs its knowledge snippet, fully vs not fully attributable ("Generic" rows make no claim: left out of
  the binary task, reported apart); WiCE dev claims vs the cited page, supported vs partially/not
  supported, and supported vs not.
- **leave-one-set-out folds of the training pool** (``grounding-train/``): each of its eight sets in
  turn. A labeller fitted on the pool is refitted without the held-out set before it is scored there
  (`benchmarks.grounding_fit`), so each fold shows how it does on a domain it has not seen; a
  labeller not fitted on the pool (``offline-6``, NLI, LLM judge) is simply scored on each set.

Systems, on the same items in the same run: token overlap (share of the response's distinct content
words found in the evidence), MiniLM cosine alone (max over evidence sentences), and the labeller
through its own API (``judge_many``): its answer ``score`` ranks; its verdict ``entailed`` is the
shipped decision; an answer it finds claim-less ranks by the score the labeller still gives it (the
offline labeller judges a generic answer's whole text as one claim), else last (score 0), as token
overlap ranks a response with no content word, and every system's AUROC on the claim-bearing items
alone is printed too. Per system: AUROC with a 95% percentile-bootstrap CI (1,000 seeded resamples), balanced accuracy
at the shipped threshold (0.5 for the baselines), ECE of the score read as P(supported) (10 equal
bins), per-class precision/recall, n. For the labeller also risk–coverage: the share of items whose
confidence reaches each threshold and the accuracy of the verdicts there (below it they go to review).

``--relevance``: the relevance labeller on HotpotQA dev500 (gold vs hard distractor paragraphs).
``--speed``: labeller throughput, cold (empty embedding cache) and warm, beside MiniLM alone.
``--labeller nli:MODEL`` / ``llm:MODEL@URL`` measures another grounding labeller the same way.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ARTEFACT_DIR = ROOT / "evaluator" / "src" / "ragtrace_evaluator" / "labellers" / "models"
if str(ROOT) not in sys.path:  # run as a script: `benchmarks` is importable from the repository root
    sys.path.insert(0, str(ROOT))

from benchmarks.grounding_data import (  # noqa: E402
    DEFAULT_DEV,
    DEFAULT_TRAIN,
    SHARED,
    TRAIN_SOURCES,
    Item,
    load_begin,
    load_train_pool,
    load_wice,
)
from benchmarks.grounding_metrics import auroc, evaluate, paired_auroc_difference, risk_coverage  # noqa: E402
from ragtrace_evaluator.labellers.claims import extract_claims, split_sentences  # noqa: E402
from ragtrace_evaluator.labellers.embedding import SentenceEmbedder  # noqa: E402
from ragtrace_evaluator.labellers.lexical import STOPWORDS  # noqa: E402
from ragtrace_evaluator.labellers.protocol import GroundingLabeller, GroundingResult, Passage  # noqa: E402
from ragtrace_evaluator.labellers.registry import make_grounding_labeller  # noqa: E402

# -- systems -------------------------------------------------------------------------------------

def _words(text: str) -> set[str]:
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
    vecs = embedder.embed(texts)
    scores = []
    pos = len(items)
    for k, it in enumerate(items):
        e = vecs[pos:pos + len(it.evidence)]
        pos += len(it.evidence)
        scores.append(float(np.max(e @ vecs[k])) if len(e) else 0.0)
    return np.array(scores)


class Outputs:
    """A system's per-item outputs: score (ranks), predicted (shipped decision), probability (for
    ECE) and confidence (for risk–coverage; None for the baselines)."""

    def __init__(self, score: np.ndarray, predicted: np.ndarray, prob: np.ndarray | None = None,
                 confidence: np.ndarray | None = None, claimless: int = 0, undefined: int = 0,
                 contradicted: np.ndarray | None = None) -> None:
        self.score, self.predicted = score, predicted
        #: per item, whether the verdict was "contradicted" (labellers only)
        self.contradicted = contradicted
        self.prob = score if prob is None else prob
        self.confidence = confidence
        self.claimless = claimless
        self.undefined = undefined


def labeller_outputs(results: Sequence[GroundingResult]) -> Outputs:
    """The labeller's own answer-level output: score = ``GroundingResult.score`` (0 when it gives
    none, e.g. an abstention: nothing in it is attributed to the evidence, so it ranks last),
    predicted = verdict ``entailed``, confidence = ``GroundingResult.confidence``. A claim-bearing
    answer left without a score (an LLM judge's reply that was not rubric JSON) also ranks last, and is
    counted apart so that a labeller that failed on every item is not read as one that ranks at chance."""
    scores = np.array([r.score if r.score is not None else 0.0 for r in results])
    predicted = np.array([r.verdict == "entailed" for r in results], dtype=int)
    conf = np.array([r.confidence for r in results])
    return Outputs(scores, predicted, scores, conf, sum(1 for r in results if r.kind != "claims" and r.score is None),
                   sum(1 for r in results if r.kind == "claims" and r.groundedness is None),
                   np.array([r.verdict == "contradicted" for r in results], dtype=bool))


def judge(labeller: GroundingLabeller, items: Sequence[Item], batch: int = 256) -> list[GroundingResult]:
    out: list[GroundingResult] = []
    for i in range(0, len(items), batch):
        out.extend(labeller.judge_many([(it.text, [Passage("evidence", it.passage_text)])
                                        for it in items[i:i + batch]]))
    return out


def _r4(v: float) -> float:
    return round(v, 4)


def claim_bearing_mask(items: Sequence[Item]) -> np.ndarray:
    return np.array([extract_claims(it.text).kind == "claims" for it in items])


def score_set(name: str, items: Sequence[Item], systems: dict[str, Outputs], n_boot: int,
              ours: str) -> dict[str, Any]:
    labels = np.array([it.label for it in items])
    mask = claim_bearing_mask(items)
    out: dict[str, Any] = {"set": name, "systems": {}, "claim_bearing": {
        "n": int(mask.sum()), "n_supported": int(labels[mask].sum()), "auroc": {}}}
    for sys_name, o in systems.items():
        out["systems"][sys_name] = evaluate(labels, o.score, o.predicted, o.prob, n_boot)
        a = auroc(labels[mask], o.score[mask])
        out["claim_bearing"]["auroc"][sys_name] = None if a is None else round(a, 4)
    overlap = systems["token overlap"].score
    out["paired_vs_token_overlap"] = {
        sys_name: paired_auroc_difference(labels, o.score, overlap, n_boot)
        for sys_name, o in systems.items() if sys_name not in ("token overlap", "MiniLM cosine")}
    # "contradicted" must mean the evidence does not support the answer: how often that holds
    out["contradiction_precision"] = {
        sys_name: {"called": int(o.contradicted.sum()),
                   "precision": _r4(float((labels[o.contradicted] == 0).mean())) if o.contradicted.any() else None}
        for sys_name, o in systems.items() if o.contradicted is not None}
    o = systems[ours]
    out["claimless_ranked_last"] = o.claimless
    out["undefined_ranked_last"] = o.undefined
    if o.confidence is not None:
        out["risk_coverage"] = risk_coverage(labels, o.predicted, o.confidence)
    return out


# -- the training pool's folds -----------------------------------------------------------------------

FoldLabeller = Callable[[str], GroundingLabeller]


def fold_labellers(labeller: GroundingLabeller, train_dir: Path, embedder: SentenceEmbedder) -> FoldLabeller | None:
    """A factory of the labeller refitted without one training set, when the labeller was fitted on
    the pool (its manifest names ``training_data``); None when it was not (then it is scored as is)."""
    manifest = labeller.manifest()
    if not manifest.get("training_data"):
        return None
    from benchmarks.grounding_fit import fold_labeller_factory

    return fold_labeller_factory(train_dir, embedder)


# -- report ----------------------------------------------------------------------------------------

def _fmt(metric: Any) -> str:
    if not isinstance(metric, dict):
        return "—" if metric is None else f"{metric:.2f}"
    if metric["value"] is None:
        return "—"
    ci = metric["ci95"]
    return f"{metric['value']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def print_table(title: str, results: list[dict[str, Any]], ours: str) -> None:
    print(f"\n# {title}")
    print("| set (n: supported / not) | system | AUROC [95% CI] | balanced acc. at shipped threshold | ECE "
          "| P / R supported | P / R not |")
    print("|---|---|---|---|---|---|---|")
    for res in results:
        first = next(iter(res["systems"].values()))
        label = f"{res['set']} ({first['n']}: {first['n_supported']} / {first['n_unsupported']})"
        for k, (sys_name, m) in enumerate(res["systems"].items()):
            name = f"**{sys_name}**" if sys_name == ours else sys_name
            print(f"| {label if k == 0 else ''} | {name} | {_fmt(m['auroc'])} | {_fmt(m['balanced_accuracy'])} | "
                  f"{_fmt(m['ece'])} | {_fmt(m['precision_supported'])} / {_fmt(m['recall_supported'])} | "
                  f"{_fmt(m['precision_unsupported'])} / {_fmt(m['recall_unsupported'])} |")
    for res in results:
        systems = res["systems"]
        cb = res["claim_bearing"]
        gaps = "; ".join(f"{name} − token overlap AUROC = {_signed(d)}"
                         for name, d in res.get("paired_vs_token_overlap", {}).items())
        line = f"- {res['set']}: {gaps}"
        if cb["n"] < next(iter(systems.values()))["n"]:
            line += (f"; claim-bearing only (n={cb['n']}): "
                     + ", ".join(f"{k} {v:.3f}" for k, v in cb["auroc"].items() if v is not None))
        print(line)
    for res in results:
        calls = "; ".join(f"{k}: {v['called']} called, precision {_fmt(v['precision'])}"
                          for k, v in res.get("contradiction_precision", {}).items())
        if calls:
            print(f"- {res['set']}, 'contradicted' verdicts that are not supported: {calls}")
    for res in results:
        if res.get("undefined_ranked_last"):
            print(f"- {res['set']}: {ours} left {res['undefined_ranked_last']} of {res['claim_bearing']['n']} "
                  "claim-bearing items undefined (e.g. a judge reply that was not rubric JSON): scored 0, not entailed")
    for res in results:
        rc = res.get("risk_coverage")
        if rc:
            print(f"- {res['set']}, risk–coverage of {ours} (confidence ≥ t: coverage, accuracy): "
                  + "; ".join(f"t={r['threshold']}: {_fmt(r['coverage'])}, {_fmt(r['accuracy'])}" for r in rc))


def _signed(diff: dict[str, Any]) -> str:
    if diff["value"] is None:
        return "—"
    ci = diff["ci95"]
    return f"{diff['value']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}] (paired, n={diff['n']})" if ci else "")


def _mean_auroc(folds: list[dict[str, Any]]) -> dict[str, float | None]:
    """Per system, the mean over the held-out sets of its AUROC (None when a set has none)."""
    names = list(folds[0]["systems"]) if folds else []
    out: dict[str, float | None] = {}
    for name in names:
        values = [f["systems"][name]["auroc"]["value"] for f in folds]
        out[name] = None if any(v is None for v in values) else round(float(np.mean(values)), 4)
    return out


# -- relevance and speed ------------------------------------------------------------------------------

def relevance_accuracy(path: Path, embedder: SentenceEmbedder, n_boot: int,
                       limit: int | None) -> dict[str, Any]:
    """The offline relevance labeller, beside its topic-only formula (relevance-lexemb-1), on
    (a) HotpotQA dev500: each question's 2 supporting paragraphs vs its 8 retrieved hard distractors,
    with the query alone and with the reference answer; (b) the demo corpus's entity families
    (`ragtrace_examples.corpus`, 300 documents, seed 0): each golden question's answering document vs
    its siblings (same name root and template, other values), query alone. AUROC, balanced accuracy at
    the threshold, the share of look-alikes marked relevant, and the precision of the top-ranked."""
    from ragtrace_evaluator.labellers.relevance import LexicalEmbeddingRelevance
    from ragtrace_examples.corpus import generate_corpus

    labellers = {"relevance-lexemb-2 (names and numbers matched)": LexicalEmbeddingRelevance(embedder=embedder),
                 "relevance-lexemb-1 (topic only)": LexicalEmbeddingRelevance(embedder=embedder, match_names=False)}
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh][: limit or None]
    hotpot = [(q["question_text"], [Passage(c["id"], f"{c['title']}. {c['paragraph_text']}") for c in q["contexts"]],
               [1 if c["is_supporting"] else 0 for c in q["contexts"]], q["answers_objects"][0]["spans"][0])
              for q in rows]
    corpus = generate_corpus(300, seed=0)
    demo = [(q.question, [Passage(d, corpus.document(d).text) for d in (q.doc_id, *q.hard_distractors)],
             [1] + [0] * len(q.hard_distractors), None)
            for q in corpus.questions if q.hard_distractors][: limit or None]
    out: dict[str, Any] = {}
    for name, labeller in labellers.items():
        res: dict[str, Any] = {"threshold": labeller.threshold, "manifest": labeller.manifest()}
        for mode, items, with_ref in (("hotpotqa, query only", hotpot, False),
                                      ("hotpotqa, with reference answer", hotpot, True),
                                      ("demo entity families, query only", demo, False)):
            labels: list[int] = []
            scores: list[float] = []
            top_gold = 0
            for query, passages, gold, ref in items:
                s = labeller.relevance(query, passages, reference=ref if with_ref else None)
                scores.extend(s)
                labels.extend(gold)
                top_gold += gold[int(np.argmax(s))]
            y, sc = np.array(labels), np.array(scores)
            m = evaluate(y, sc, (sc >= labeller.threshold).astype(int), None, n_boot)
            m["precision_at_1"] = round(top_gold / len(items), 4) if items else None
            m["questions"] = len(items)
            rec = m["recall_unsupported"]
            m["lookalikes_marked_relevant"] = None if rec is None else round(1 - rec, 4)
            res[mode] = m
        out[name] = res
    return out


def speed(path: Path, labeller_factory: Callable[[SentenceEmbedder], GroundingLabeller],
          n_traces: int = 200) -> dict[str, Any]:
    """Traces/s for judge_many on ``n_traces`` HotpotQA questions (5 paragraphs each, a 3-sentence
    answer made of one gold sentence, one altered sentence and one distractor sentence), in batches of
    32: cold (empty embedding cache, model loaded), warm (same traces again), new answers over cached
    passages; beside MiniLM alone embedding the same texts cold (the floor every labeller here pays),
    so the ratio stays comparable when the shared machine's load changes."""
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh][:n_traces]
    traces = []
    for q in rows:
        ctx = q["contexts"][:5]
        sents = [split_sentences(c["paragraph_text"])[0] for c in ctx]
        answer = f"{sents[0]} {sents[1].replace('was', 'was not', 1)} {sents[2]}"
        traces.append((answer, [Passage(c["id"], c["paragraph_text"]) for c in ctx]))
    out: dict[str, Any] = {"n_traces": len(traces), "passages_per_trace": 5, "answer_sentences": 3}
    floor = SentenceEmbedder()
    floor.embed(["warm up the model."])
    texts = [t for a, ps in traces for t in (*split_sentences(a), *(s for p in ps for s in split_sentences(p.text)))]
    started = time.perf_counter()
    for i in range(0, len(texts), 512):
        floor.embed(texts[i:i + 512])
    out["minilm_only_cold_traces_per_s"] = round(len(traces) / (time.perf_counter() - started), 1)
    labeller = labeller_factory(SentenceEmbedder())
    labeller.judge("warm up the model.", [Passage("x", "load the weights.")])
    fresh = [(" ".join(reversed(split_sentences(a))).replace(".", " indeed.", 1), p) for a, p in traces]
    for phase, batch in (("cold", traces), ("warm", traces), ("new_answers", fresh)):
        started = time.perf_counter()
        for i in range(0, len(batch), 32):
            labeller.judge_many(batch[i:i + 32])
        out[f"{phase}_traces_per_s"] = round(len(batch) / (time.perf_counter() - started), 1)
    out["cold_vs_minilm_only"] = round(out["cold_traces_per_s"] / out["minilm_only_cold_traces_per_s"], 3)
    return out


# -- main -------------------------------------------------------------------------------------------

def _systems(items: Sequence[Item], labellers: dict[str, GroundingLabeller],
             embedder: SentenceEmbedder) -> dict[str, Outputs]:
    overlap = token_overlap(items)
    cosine = minilm_cosine(items, embedder)
    return {"token overlap": Outputs(overlap, (overlap >= 0.5).astype(int)),
            "MiniLM cosine": Outputs(cosine, (cosine >= 0.5).astype(int)),
            **{name: labeller_outputs(judge(labeller, items)) for name, labeller in labellers.items()}}


def make_labeller(name: str, embedder: SentenceEmbedder) -> GroundingLabeller:
    """A labeller by registry name; ``offline@REV`` is the offline labeller with the support-model
    artefact the package held at git revision REV (e.g. the previous release's, to compare them)."""
    if name == "offline" or name.startswith("offline@"):
        from ragtrace_evaluator.labellers.offline import OfflineGroundingLabeller

        if name == "offline":
            return OfflineGroundingLabeller(embedder=embedder)
        import subprocess

        from ragtrace_evaluator.labellers.support_model import DEFAULT_ARTEFACT, parse_artefact

        rev = name.partition("@")[2]
        rel = (ARTEFACT_DIR / DEFAULT_ARTEFACT).relative_to(ROOT)
        try:
            data = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{rel}"], capture_output=True,
                                  check=True).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SystemExit(f"{name}: cannot read {rel} at git revision {rev!r} ({exc})") from exc
        return OfflineGroundingLabeller(embedder=embedder, model=parse_artefact(data))
    return make_grounding_labeller(name)


def _display_name(name: str, labeller: GroundingLabeller) -> str:
    return f"{name} ({labeller.manifest().get('formula_version', '?')})"


def _write_measured(labeller: GroundingLabeller, review: float | None, at_review: dict[str, Any],
                    args: argparse.Namespace) -> None:
    """The audit's "measured precision" for the packaged artefact: per dev set, the share of items
    labelled at or above the review threshold and how often those verdicts are right. Kept in its
    own file, keyed by the artefact's hash, so re-measuring never changes the artefact."""
    from ragtrace_evaluator.labellers.support_model import MEASURED, load_artefact

    model = load_artefact()
    if getattr(labeller, "model", None) is not model or review is None:
        raise SystemExit("--write-measured: the labeller is not the packaged artefact's")
    path = ARTEFACT_DIR / MEASURED
    record = {"artefact_sha256": model.sha256, "review_threshold": review,
              "source": f"benchmarks/grounding_accuracy.py --write-measured on {args.dev.name} "
                        "(BEGIN dev, WiCE dev; never fitted on)", "sets": at_review}
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grounding_accuracy", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--dev", "--data", dest="dev", type=Path, default=DEFAULT_DEV)
    parser.add_argument("--train", type=Path, default=DEFAULT_TRAIN)
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "build" / "grounding-cache")
    parser.add_argument("--token-cache-dir", type=Path, default=ROOT / "build" / "grounding-tokens",
                        help="MiniLM token states (the folds refit on grounding-train's, ~1.2 GB)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--limit", type=int, help="first N items per set (smoke runs)")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--labeller", default="offline,nli:builtin",
                        help="the grounding labellers to measure side by side, comma-separated (as `ragtrace audit "
                             "--labeller`): offline, offline@<git revision> (the artefact shipped then), nli:builtin, "
                             "nli:<model id or directory>, llm:<model>@<base URL>; the first one is the one the "
                             "risk-coverage and --write-measured are for")
    parser.add_argument("--nli-checks", action="store_true",
                        help="also the entailment model's held-out NLI accuracy and near-copy contrasts "
                             "(benchmarks/nli_checks.py)")
    parser.add_argument("--no-folds", action="store_true", help="skip the training pool's leave-one-set-out folds")
    parser.add_argument("--relevance", action="store_true", help="also the relevance labellers' accuracy")
    parser.add_argument("--speed", action="store_true", help="also labeller throughput, cold and warm")
    parser.add_argument("--all", action="store_true", help="accuracy, folds, relevance and speed")
    parser.add_argument("--only", choices=("relevance", "speed"), help="only that section")
    parser.add_argument("--hotpot", type=Path, default=SHARED / "hotpotqa-dev500")
    parser.add_argument("--write-measured", action="store_true",
                        help="store the dev-set coverage and accuracy at the review threshold beside the packaged "
                             "artefact (the audit prints it); offline labeller, full dev sets only")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.labeller.split(",") if n.strip()]
    if not names:
        parser.error("--labeller: name at least one labeller")
    if args.write_measured and (names[0] != "offline" or args.limit or args.only):
        parser.error("--write-measured measures the packaged offline labeller on the full dev sets: "
                     "drop --labeller/--limit/--only")

    embedder = SentenceEmbedder(cache_dir=args.cache_dir, token_cache_dir=args.token_cache_dir,
                                max_token_entries=1_000_000)
    hotpot = args.hotpot / "dev_subsampled.jsonl"
    report: dict[str, Any] = {}
    started = time.perf_counter()
    if args.only is None:
        if not args.dev.exists():
            print(f"no grounding dev data at {args.dev}; pass --dev", file=sys.stderr)
            return 2
        built = {name: make_labeller(name, embedder) for name in names}
        labellers = {_display_name(name, lab): lab for name, lab in built.items()}
        ours, labeller = next(iter(labellers.items()))
        begin, generic = load_begin(args.dev / "begin", args.limit)
        wice = load_wice(args.dev / "wice", args.limit)
        wice_binary = [it for it in wice if it.fine_label != "partially_supported"]
        dev = []
        at_review: dict[str, Any] = {}
        review = getattr(labeller, "review_threshold", None)
        for name, items in (("BEGIN dev, fully vs not fully attributable", begin),
                            ("WiCE claim dev, supported vs partially/not", wice),
                            ("WiCE claim dev, supported vs not", wice_binary)):
            systems = _systems(items, labellers, embedder)
            dev.append(score_set(name, items, systems, args.bootstrap, ours))
            o = systems[ours]
            if review is not None and o.confidence is not None:
                (point,) = risk_coverage(np.array([it.label for it in items]), o.predicted, o.confidence, (review,))
                at_review[name] = {k: point[k] for k in ("coverage", "accuracy", "balanced_accuracy", "n")} | {
                    "n_items": len(items)}
            embedder.save()
        report["dev"] = dev
        report["at_review_threshold"] = {"review_threshold": review, "sets": at_review}
        if args.write_measured:
            _write_measured(labeller, review, at_review, args)
        report["begin_generic"] = {"n": len(generic),
                                   "flagged_claimless": sum(1 for g in generic if extract_claims(g).kind != "claims")}
        report["manifest"] = labeller.manifest()
        report["manifests"] = {name: lab.manifest() for name, lab in labellers.items()}
        print_table("dev sets (grounding-dev; never fitted on)", dev, ours)
        g = report["begin_generic"]
        print(f"\nBEGIN Generic rows: {g['flagged_claimless']}/{g['n']} recognised as making no claim")
        if not args.no_folds and args.train.exists():
            pool = load_train_pool(args.train, args.limit)
            # a labeller fitted on the pool is refitted without the held-out set; the others are scored as is
            folds_of = {name: fold_labellers(lab, args.train, embedder) for name, lab in labellers.items()}
            folds = []
            for source in TRAIN_SOURCES:
                items = [it for it in pool if it.source == source]
                if not items:
                    continue
                fold = {name: (f(source) if (f := folds_of[name]) is not None else labellers[name])
                        for name in labellers}
                folds.append(score_set(source, items, _systems(items, fold, embedder), args.bootstrap, ours))
                embedder.save()
            report["folds"] = {"refitted_per_fold": {k: v is not None for k, v in folds_of.items()}, "sets": folds,
                               "mean_auroc": _mean_auroc(folds)}
            how = "; ".join(f"{k}: {'refitted without the held-out set' if v is not None else 'scored as is'}"
                            for k, v in folds_of.items())
            print_table(f"grounding-train, leave one set out ({how})", folds, ours)
            print("- leave-one-set-out mean AUROC: "
                  + ", ".join(f"{k} {v:.3f}" for k, v in report["folds"]["mean_auroc"].items() if v is not None))
    if args.all or args.relevance or args.only == "relevance":
        report["relevance"] = relevance_accuracy(hotpot, embedder, args.bootstrap, args.limit)
        embedder.save()
        print("\n# relevance: HotpotQA dev500 (supporting vs hard distractor paragraphs); demo corpus entity "
              "families (answering document vs its siblings)")
        for name, res in report["relevance"].items():
            for mode, m in res.items():
                if not isinstance(m, dict) or "auroc" not in m:
                    continue
                print(f"- {name}, {mode}: AUROC {_fmt(m['auroc'])}, balanced acc. {_fmt(m['balanced_accuracy'])} at "
                      f"{res['threshold']}, look-alikes marked relevant {m['lookalikes_marked_relevant']}, precision "
                      f"of the top-ranked {m['precision_at_1']} (n={m['n']}: {m['n_supported']} / "
                      f"{m['n_unsupported']}, {m['questions']} questions)")
    if args.all or args.speed or args.only == "speed":
        report["speed"] = {}
        for name in names:
            s = report["speed"][name] = speed(hotpot, lambda emb, name=name: make_labeller(name, emb))
            print(f"\n# speed of {name} ({s['n_traces']} traces, 5 passages, 3-sentence answers; traces/s): cold "
                  f"{s['cold_traces_per_s']}, warm {s['warm_traces_per_s']}, new answers "
                  f"{s['new_answers_traces_per_s']}; MiniLM alone cold {s['minilm_only_cold_traces_per_s']} "
                  f"(labeller/MiniLM {s['cold_vs_minilm_only']})")
    if args.all or args.nli_checks:
        from benchmarks import nli_checks

        print()
        nli_checks.main([] if args.limit is None else ["--limit", str(args.limit)])
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(f"\nelapsed {report['seconds']} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
