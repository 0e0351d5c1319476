"""Fit the offline labeller's support weights on synthetic claims, never on the evaluation sets.

The grounding dev sets (BEGIN, WiCE) measure the labeller, and other human-labelled sets judge it,
so its weights must not be fitted to them. Instead, claims are synthesised from a different corpus
(HotpotQA paragraphs, which carry no grounding labels at all) with the errors a generator makes:

supported
    a sentence of a supporting paragraph; its first clause alone; the sentence with some
    non-name, non-number content words dropped (a less specific restatement); its clauses in
    another order; two sentences of the paragraph fused into one claim (answers often combine).
not supported
    the sentence with a number or year changed, with a name swapped for one from a distractor
    paragraph, with a negation inserted, extended by a clause borrowed from a distractor paragraph
    (partial support), or a distractor sentence on the same topic.

Evidence is the question's supporting paragraphs. Negated sentences are synthesised (they test the
contradiction check) but left out of the support fit, since no support feature can see a negation.
A class-balanced, L2-regularised logistic
regression on the five support features (see :mod:`ragtrace_evaluator.grounding_offline`) gives the
weights; the decision threshold stays at 0.5 (equal costs).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .claims import split_sentences
from .grounding_embed import SentenceEmbedder
from .grounding_lexical import features
from .grounding_offline import OfflineGroundingLabeller, _passage_sentences
from .labeller import Passage

_AUX = re.compile(r"\b(is|was|are|were|has|had|can|will|does|did)\b")
_NUM = re.compile(r"\b\d{1,4}\b")
_CAP = re.compile(r"(?<=\s)[A-Z][a-z]{2,}")
FEATURE_NAMES = ("coverage", "bigram", "cosine", "missing_numbers", "missing_entities")


def _perturb_number(sentence: str, rng: random.Random) -> str | None:
    nums = list(_NUM.finditer(sentence))
    if not nums:
        return None
    m = rng.choice(nums)
    value = int(m.group())
    new = value + rng.choice([-1, 1]) * rng.randint(1, 12) if 1000 <= value <= 2099 else value + rng.randint(1, 9)
    return sentence[:m.start()] + str(max(new, 0)) + sentence[m.end():]


def _perturb_name(sentence: str, other: str, rng: random.Random) -> str | None:
    mine = list(_CAP.finditer(sentence))
    theirs = [m.group() for m in _CAP.finditer(other) if m.group() not in sentence]
    if not mine or not theirs:
        return None
    m = rng.choice(mine)
    return sentence[:m.start()] + rng.choice(theirs) + sentence[m.end():]


def _negate(sentence: str) -> str | None:
    m = _AUX.search(sentence)
    if not m:
        return None
    return sentence[:m.end()] + " not" + sentence[m.end():]


def _first_clause(sentence: str) -> str | None:
    head = sentence.split(",")[0].strip()
    return head if len(head.split()) >= 5 and head != sentence.strip() else None


def _drop_words(sentence: str, rng: random.Random) -> str | None:
    words = sentence.split()
    droppable = [i for i, w in enumerate(words) if i > 0 and w.islower() and not any(c.isdigit() for c in w)
                 and len(w) > 3]
    if len(droppable) < 3:
        return None
    drop = set(rng.sample(droppable, max(1, len(droppable) // 5)))
    return " ".join(w for i, w in enumerate(words) if i not in drop)


def _reorder(sentence: str) -> str | None:
    parts = [p.strip() for p in sentence.rstrip(".").split(",") if p.strip()]
    if len(parts) < 2:
        return None
    return f"{parts[-1][0].upper()}{parts[-1][1:]}, {', '.join(parts[:-1])}."


def _fuse(first: str, second: str) -> str:
    return f"{first.rstrip('.')}, and {second[0].lower()}{second[1:]}"


def synthesise(path: Path, seed: int = 7, max_questions: int = 500) -> list[tuple[str, list[Passage], int, str]]:
    """(claim, evidence passages, label, kind) rows from a HotpotQA-style JSONL file."""
    rng = random.Random(seed)
    rows: list[tuple[str, list[Passage], int, str]] = []
    with open(path, encoding="utf-8") as fh:
        questions = [json.loads(line) for line in fh][:max_questions]
    for q in questions:
        gold = [c for c in q["contexts"] if c.get("is_supporting")]
        other = [c for c in q["contexts"] if not c.get("is_supporting")]
        if not gold or not other:
            continue
        passages = [Passage(c["id"], c["paragraph_text"]) for c in gold]
        source = rng.choice(gold)
        sentences = [s for s in split_sentences(source["paragraph_text"]) if len(s.split()) >= 7]
        if not sentences:
            continue
        s = rng.choice(sentences)
        distractor = rng.choice(other)["paragraph_text"]
        d_sentences = [x for x in split_sentences(distractor) if len(x.split()) >= 6] or [distractor]
        d = rng.choice(d_sentences)
        candidates: list[tuple[str | None, int, str]] = [
            (s, 1, "exact"), (_first_clause(s), 1, "first_clause"), (_drop_words(s, rng), 1, "dropped_words"),
            (_perturb_number(s, rng), 0, "number"), (_perturb_name(s, distractor, rng), 0, "name"),
            (_negate(s), 0, "negation"), (f"{s.rstrip('.')}, and {d[0].lower()}{d[1:]}", 0, "borrowed_clause"),
            (d, 0, "distractor_sentence"), (_reorder(s), 1, "reordered"),
        ]
        others = [x for x in sentences if x != s]
        if others:
            candidates.append((_fuse(s, rng.choice(others)), 1, "fused"))
        rows.extend((c, passages, label, kind) for c, label, kind in candidates if c)
    return rows


def _fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2) -> np.ndarray:
    from scipy.optimize import minimize

    weight = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    xb = np.hstack([np.ones((len(x), 1)), x])

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = xb @ w
        p = 1 / (1 + np.exp(-z))
        eps = 1e-12
        nll = -np.mean(weight * (y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)))
        grad = xb.T @ (weight * (p - y)) / len(y)
        reg = l2 * np.r_[0.0, w[1:]]
        return nll + 0.5 * l2 * float(w[1:] @ w[1:]), grad + reg

    result = minimize(loss, np.zeros(xb.shape[1]), jac=True, method="L-BFGS-B")
    return np.asarray(result.x)


def calibrate(path: Path, embedder: SentenceEmbedder | None = None, seed: int = 7) -> dict[str, Any]:
    """Synthesise, extract features with the labeller's own code, fit, and report the weights."""
    labeller = OfflineGroundingLabeller(embedder=embedder)
    # Inserted negations keep every content word, so no support feature can see them: they are the
    # contradiction check's job and would only blur the support fit.
    rows = [r for r in synthesise(path, seed=seed) if r[3] != "negation"]
    feats = _features(labeller, [(c, p) for c, p, _, _ in rows])
    x = np.array([f for f in feats])
    y = np.array([label for _, _, label, _ in rows], dtype=float)
    w = _fit_logistic(x, y)
    p = 1 / (1 + np.exp(-(w[0] + x @ w[1:])))
    kinds = sorted({k for *_, k in rows})
    per_kind = {k: round(float(np.mean([(p[i] >= 0.5) == (y[i] == 1) for i, r in enumerate(rows) if r[3] == k])), 3)
                for k in kinds}
    return {
        "n": len(rows), "seed": seed,
        "weights": {"bias": round(float(w[0]), 2),
                    **{n: round(float(v) * (-1 if n.startswith("missing") else 1), 2)
                       for n, v in zip(FEATURE_NAMES, w[1:], strict=True)}},
        "accuracy_by_kind": per_kind,
    }


def _features(labeller: OfflineGroundingLabeller, items: Sequence[tuple[str, list[Passage]]]) -> list[list[float]]:
    texts: list[str] = []
    layouts = []
    for claim, passages in items:
        sentences = [s for p in passages for s in _passage_sentences(p.text)]
        owners = [i for i, p in enumerate(passages) for _ in _passage_sentences(p.text)]
        layouts.append((sentences, owners))
        texts.append(claim)
        texts.extend(sentences)
    vecs = labeller.embedder.embed(texts)
    out = []
    pos = 0
    for (claim, _), (sentences, owners) in zip(items, layouts, strict=True):
        c = vecs[pos]
        s = vecs[pos + 1:pos + 1 + len(sentences)]
        pos += 1 + len(sentences)
        features(claim)
        out.append(labeller.claim_features(claim, c, sentences, owners, s).vector())
    return out
