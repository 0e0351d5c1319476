"""A release story as data: 400 questions, a chunking change that loses evidence and a prompt change
that makes generation better, so end-to-end quality rises slightly while retrieval collapses.

Exact counts (so the test can assert exact values):

- gold in context: baseline 324/400 = 0.81, candidate 264/400 = 0.66 — 61 queries lose their evidence,
  1 gains it, 263 keep it, 75 never have it;
- P(pass | gold in C): 279/324 = 0.861 → 246/264 = 0.932; P(pass | no gold): 33/76 = 0.434 → 69/136 = 0.507;
- e2e pass: 312/400 = 0.780 → 315/400 = 0.7875;
- mean score of the 61 that lost their evidence: 0.84 → 0.49; of the other 339: 0.77 → 0.84.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

# group: (size, baseline gold, candidate gold, baseline passes, candidate passes)
GROUPS = {
    "lost": (61, True, False, 53, 28),
    "gained": (1, False, True, 0, 1),
    "held_gold": (263, True, True, 226, 245),
    "held_none": (75, False, False, 33, 41),
}
# target mean scores: (baseline, candidate) for the lost group and for everyone else
LOST_SCORES = (0.84, 0.49)
REST_SCORES = (0.77, 0.84)


def _record(qid: str, release: str, gold: bool, passed: bool, score: float,
            rng: np.random.Generator) -> dict[str, Any]:
    rank = int(rng.integers(1, 6)) if gold else None
    pool = True if gold else bool(rng.random() < 0.5)
    ranking_ok: bool | None = (rank == 1 or bool(rng.random() < 0.8)) if gold else (False if pool else None)
    abstained = (not passed) and (not gold) and bool(rng.random() < 0.25)
    if abstained:
        verdict, grounded = "abstained", None
    elif passed:
        verdict, grounded = "entailed", float(rng.uniform(0.8, 1.0))
    else:
        verdict, grounded = ("neutral" if rng.random() < 0.6 else "contradicted"), float(rng.uniform(0.1, 0.6))
    if not pool:
        mode = "retrieval_gap"
    elif not gold or ranking_ok is False:
        mode = "rank_inversion"
    elif abstained or verdict == "neutral":
        mode = "under_use"
    elif verdict == "contradicted":
        mode = "fabrication"
    else:
        mode = "ok"
    return {
        "trace_id": f"{release}-{qid}", "query_id": qid, "release": release, "service": "story-rag",
        "manifest_id": "story-manifest", "failure_mode": mode,
        "gold_in_pool": pool, "gold_in_context": gold,
        "retrieval": {"gold_in_pool": pool, "gold_in_context": gold, "n_gold": 1, "gold_source": "qrels"},
        "ranking": {"ok": ranking_ok, "best_gold_rank": rank, "best_distractor_rank": None},
        "generation": {"verdict": verdict, "groundedness": grounded, "abstained": abstained,
                       "refusal_justified": (not gold) if abstained else None, "claims": []},
        "metrics": {
            "recall_5": 1.0 if gold else 0.0, "precision_5": 0.2 if gold else 0.0,
            "recip_rank": 1.0 / rank if rank else 0.0,
            "ndcg_cut_5": float(1.0 / np.log2(rank + 1)) if rank else 0.0,
            "success_5": 1.0 if gold else 0.0, "groundedness": grounded, "abstained": abstained,
        },
        "pass": passed, "score": score, "confidence": 0.9,
    }


def story_records(seed: int = 5) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(baseline records, candidate records) of the story, in shuffled query order."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, bool, bool, bool, bool]] = []  # group, gold a, gold b, pass a, pass b
    for group, (size, gold_a, gold_b, pass_a, pass_b) in GROUPS.items():
        pa = np.zeros(size, bool)
        pa[rng.choice(size, pass_a, replace=False)] = True
        pb = np.zeros(size, bool)
        pb[rng.choice(size, pass_b, replace=False)] = True
        rows += [(group, gold_a, gold_b, bool(x), bool(y)) for x, y in zip(pa, pb, strict=True)]
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    raw = {side: np.array([(0.93 if r[3 + side] else 0.10) + rng.uniform(-0.02, 0.02) for r in rows])
           for side in (0, 1)}
    lost = np.array([r[0] == "lost" for r in rows])
    for side in (0, 1):
        for mask, targets in ((lost, LOST_SCORES), (~lost, REST_SCORES)):
            raw[side][mask] += targets[side] - raw[side][mask].mean()
    base, cand = [], []
    for i, (_group, gold_a, gold_b, pass_a, pass_b) in enumerate(rows):
        qid = f"q{order[i]:03d}"
        base.append(_record(qid, "v1", gold_a, pass_a, float(raw[0][i]), rng))
        cand.append(_record(qid, "v2", gold_b, pass_b, float(raw[1][i]), rng))
    return base, cand


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
