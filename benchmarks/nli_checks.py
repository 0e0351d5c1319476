"""Did the entailment model learn entailment? Held-out NLI accuracy, near-copy contrasts, training cost.

    .venv/bin/python benchmarks/nli_checks.py [--model builtin | DIR] [--limit N] [--run shipped-v1] [--json out.json]

- **check sets** (never trained on): ``mnli_hw_val`` (5,000 MultiNLI pairs) and ``snli_test`` (9,824
  SNLI pairs) from ``../shared/data/nli-train``: accuracy, per-class precision and recall, and the
  expected calibration error of the predicted class's probability (10 equal bins), with n.
- **near-copies** (``benchmarks/data/near_copies.jsonl``, written by the team, not drawn from any
  training file): per premise, an entailed paraphrase and a near-copy that changes one number, date,
  name or negation. Reported: how often the paraphrase gets the higher P(entailment) (what word
  overlap gets backwards: the near-copy shares more words), the paraphrases called entailment, the
  near-copies not called entailment, and those called contradiction.
- **training cost**, from the run's metrics (``training/train_nli.py --run NAME``): pairs/s and CPU
  hours, when the run folder is on this machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: `benchmarks` is importable from the repository root
    sys.path.insert(0, str(ROOT))

from ragtrace_evaluator.labellers.nli import BUILTIN, NLIModel  # noqa: E402

NLI_DATA = ROOT.parent / "shared" / "data" / "nli-train"
NEAR_COPIES = ROOT / "benchmarks" / "data" / "near_copies.jsonl"
CLASSES = ("entailment", "neutral", "contradiction")
CHECK_SETS = ("mnli_hw_val", "snli_test")


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error: the n-weighted mean |accuracy − confidence| over equal-width bins."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.clip(np.digitize(confidence, edges[1:-1]), 0, bins - 1)
    total = 0.0
    for b in range(bins):
        sel = idx == b
        if sel.any():
            total += sel.sum() * abs(correct[sel].mean() - confidence[sel].mean())
    return float(total / max(1, len(confidence)))


def check_set(model: NLIModel, path: Path, limit: int | None) -> dict[str, Any]:
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    rows = [r for r in rows if r["label"] in CLASSES][:limit]
    probs = model.predict([(r["premise"], r["hypothesis"]) for r in rows])
    p = np.array([[q[c] for c in CLASSES] for q in probs])
    gold = np.array([CLASSES.index(r["label"]) for r in rows])
    pred = p.argmax(1)
    out: dict[str, Any] = {"n": len(rows), "accuracy": round(float((pred == gold).mean()), 4),
                           "ece": round(ece(p.max(1), (pred == gold).astype(float)), 4), "per_class": {}}
    for k, c in enumerate(CLASSES):
        tp = int(((pred == k) & (gold == k)).sum())
        out["per_class"][c] = {"n": int((gold == k).sum()),
                               "precision": round(tp / max(1, int((pred == k).sum())), 4),
                               "recall": round(tp / max(1, int((gold == k).sum())), 4)}
    return out


def near_copies(model: NLIModel, path: Path = NEAR_COPIES) -> dict[str, Any]:
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    para = model.predict([(r["premise"], r["paraphrase"]) for r in rows])
    near = model.predict([(r["premise"], r["near_copy"]) for r in rows])
    out: dict[str, Any] = {"n": len(rows), "by_kind": {}}

    def summary(sel: list[int]) -> dict[str, Any]:
        def share(flags: list[bool]) -> float:
            return round(sum(flags) / len(flags), 3)

        return {"n": len(sel),
                "paraphrase_ranked_higher": share([para[i]["entailment"] > near[i]["entailment"] for i in sel]),
                "paraphrase_entailed": share([max(para[i], key=para[i].__getitem__) == "entailment" for i in sel]),
                "near_copy_not_entailed": share([max(near[i], key=near[i].__getitem__) != "entailment" for i in sel]),
                "near_copy_contradiction": share([max(near[i], key=near[i].__getitem__) == "contradiction"
                                                  for i in sel])}

    out.update(summary(list(range(len(rows)))))
    for kind in sorted({r["kind"] for r in rows}):
        out["by_kind"][kind] = summary([i for i, r in enumerate(rows) if r["kind"] == kind])
    return out


def training_cost(run_dir: Path) -> dict[str, Any] | None:
    metrics = run_dir / "metrics.jsonl"
    if not metrics.exists():
        return None
    lines = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    train = [x for x in lines if x["kind"] == "train"]
    if not train:
        return None
    config = json.loads((run_dir / "config.json").read_text())
    steps = train[-1]["step"]
    pairs = steps * config["batch_size"]
    rate = float(np.median([x["pairs_per_s"] for x in train]))
    return {"run": run_dir.name, "steps": steps, "pairs_seen": pairs, "median_pairs_per_s": round(rate, 1),
            "wall_hours": round(pairs / rate / 3600, 2), "epochs": config["epochs"],
            "sources": config["sources"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="nli_checks", description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--model", default=BUILTIN, help="'builtin' (the shipped model) or a model directory")
    ap.add_argument("--data", type=Path, default=NLI_DATA, help="the nli-train folder")
    ap.add_argument("--limit", type=int, help="first N pairs of each check set (smoke runs)")
    ap.add_argument("--run", default="shipped-v1", help="the training run whose cost to report")
    ap.add_argument("--runs-dir", type=Path, default=Path.home() / ".cache" / "ragtrace" / "nli-runs")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    model = NLIModel(args.model, batch_size=64)
    started = time.perf_counter()
    report: dict[str, Any] = {"model": model.manifest().get("file_hash"), "backend": model.manifest().get("backend")}
    print(f"# entailment model checks ({args.model}, {report['backend']})")
    for name in CHECK_SETS:
        path = args.data / f"{name}.jsonl"
        if not path.exists():
            print(f"- {name}: no {path}; pass --data")
            continue
        res = report[name] = check_set(model, path, args.limit)
        per = ", ".join(f"{c} P {m['precision']:.3f} R {m['recall']:.3f} (n={m['n']})"
                        for c, m in res["per_class"].items())
        print(f"- {name}: accuracy {res['accuracy']:.4f} (n={res['n']}), ECE {res['ece']:.4f}; {per}")
    nc = report["near_copies"] = near_copies(model)
    print(f"- near-copies (n={nc['n']}): paraphrase ranked above its near-copy {nc['paraphrase_ranked_higher']:.3f}; "
          f"paraphrases entailed {nc['paraphrase_entailed']:.3f}; near-copies not entailed "
          f"{nc['near_copy_not_entailed']:.3f}, called contradiction {nc['near_copy_contradiction']:.3f}")
    for kind, m in nc["by_kind"].items():
        print(f"  - {kind} (n={m['n']}): ranked higher {m['paraphrase_ranked_higher']:.3f}, near-copy not entailed "
              f"{m['near_copy_not_entailed']:.3f}")
    cost = report["training_cost"] = training_cost(args.runs_dir / args.run)
    if cost:
        print(f"- training ({cost['run']}): {cost['pairs_seen']} pairs in {cost['steps']} steps, median "
              f"{cost['median_pairs_per_s']} pairs/s, about {cost['wall_hours']} hours of training on this machine")
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(f"elapsed {report['seconds']} s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
