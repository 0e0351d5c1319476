"""Choose the built-in entailment model's decision thresholds on grounding-train, and record them in its manifest.

    .venv/bin/python training/calibrate_nli.py [--per-set 400] [--dry-run]

The thresholds are fitted on training material only (``../shared/data/grounding-train``, never the dev
sets): ``nli:builtin`` judges a seeded sample of each set's texts against their evidence (windows,
as in use). The support threshold is the one maximising the mean over the sets of the balanced
accuracy of "entailed" (an answer is entailed when every claim's support reaches it). The
contradiction threshold is the lowest on a grid at which the answers called contradicted are not
supported at least 90% of the time on the same sample (0.5 when none reaches it): a contradiction
verdict must mean the evidence speaks against the claim. Both, the sample and the measured figures
go into ``nli-minilm.json`` under ``"thresholds"``; the weights' hash does not change.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.grounding_data import DEFAULT_TRAIN, TRAIN_SOURCES, Item, load_train_pool  # noqa: E402
from benchmarks.grounding_metrics import auroc, balanced_accuracy, ece  # noqa: E402
from ragtrace_evaluator.labellers.nli import BUILTIN, NLIGroundingLabeller, NLIModel  # noqa: E402
from ragtrace_evaluator.labellers.nli_builtin import MANIFEST, models_dir  # noqa: E402
from ragtrace_evaluator.labellers.protocol import Passage  # noqa: E402

CONTRADICTION_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
CONTRADICTION_PRECISION = 0.9


def sample(items: list[Item], per_set: int, seed: int = 7) -> list[Item]:
    out = []
    for source in TRAIN_SOURCES:
        rows = [it for it in items if it.source == source]
        out.extend(random.Random(f"{seed}:{source}").sample(rows, min(per_set, len(rows))))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--train", type=Path, default=DEFAULT_TRAIN)
    ap.add_argument("--per-set", type=int, default=400, help="texts sampled from each grounding-train set")
    ap.add_argument("--dry-run", action="store_true", help="print the choice, do not write the manifest")
    args = ap.parse_args(argv)
    items = sample(load_train_pool(args.train), args.per_set)
    labeller = NLIGroundingLabeller(NLIModel(BUILTIN), windowed=True)
    started = time.perf_counter()
    results = []
    for start in range(0, len(items), 64):
        results.extend(labeller.judge_many([(it.text, [Passage("evidence", it.passage_text)])
                                            for it in items[start:start + 64]]))
        print(f"  judged {len(results)}/{len(items)} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    labels = np.array([it.label for it in items])
    sets = np.array([it.source for it in items])
    # an answer's support: its weakest claim's P(entailment); claim-less texts are never entailed
    support = np.array([min((c.support for c in r.claims), default=0.0) for r in results])
    contra = np.array([max((c.contradiction for c in r.claims), default=0.0) for r in results])

    def mean_ba(t: float) -> float:
        values = [balanced_accuracy(labels[sets == s], (support[sets == s] >= t).astype(int))
                  for s in TRAIN_SOURCES if (sets == s).any()]
        return float(np.mean([v for v in values if v is not None]))

    grid = np.round(np.arange(0.05, 0.96, 0.01), 2)
    support_t = float(max(grid, key=mean_ba))
    contradiction_t = 0.5
    for c in CONTRADICTION_GRID:
        called = (contra >= c) & (support < support_t)
        if called.sum() >= 20 and (labels[called] == 0).mean() >= CONTRADICTION_PRECISION:
            contradiction_t = c
            break
    called = (contra >= contradiction_t) & (support < support_t)
    record: dict[str, Any] = {
        "support": support_t, "contradiction": contradiction_t,
        "chosen_on": f"grounding-train, {args.per_set} texts per set (seed 7), {len(items)} in all",
        "train_mean_balanced_accuracy": round(mean_ba(support_t), 4),
        "train_auroc": round(auroc(labels, support) or float("nan"), 4),
        "train_ece_of_support": round(ece(labels, support) or float("nan"), 4),
        "train_contradiction_precision": round(float((labels[called] == 0).mean()), 4) if called.any() else None,
        "train_contradiction_called": int(called.sum()),
    }
    print(json.dumps(record, indent=2))
    if not args.dry_run:
        path = models_dir() / MANIFEST
        manifest = json.loads(path.read_text())
        manifest["thresholds"] = record
        path.write_text(json.dumps(manifest, indent=2) + "\n")
        print(f"wrote the thresholds into {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
