"""A transformers NLI cross-encoder as a grounding labeller, for production machines that have one.

Any ``AutoModelForSequenceClassification`` NLI model works, by hub id or local directory. Label
names come from the model's own ``config.id2label`` (orders differ between models: the
cross-encoder family uses contradiction/entailment/neutral, MNLI heads often
entailment/neutral/contradiction), matched by prefix: ``entail*``, ``neutral*``, ``contradict*``.
Two-class heads (``entailment`` / ``not_entailment``) work too; they have no contradiction score.

Default production model: ``cross-encoder/nli-deberta-v3-base`` (DEFAULT_NLI_MODEL). It cannot be
downloaded on the development machines (no hub access), which is why the offline labeller is the
default there.

Scoring: every (passage, claim) pair is scored in batches; results are cached by the SHA-1 of the
pair, so a passage that recurs across traces is never re-scored with the same claim. Per claim,
``support`` is the highest entailment probability over passages and ``contradiction`` the highest
contradiction probability. Verdict: ``entailed`` if support ≥ 0.5 (some supplied passage entails
it, whatever another says); else ``contradicted`` if contradiction ≥ 0.5; else ``neutral``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrace_evaluator.labellers.claims import extract_claims, split_sentences
from ragtrace_evaluator.labellers.embedding import file_digest
from ragtrace_evaluator.labellers.hf_loading import quiet_loading
from ragtrace_evaluator.labellers.lexical import coverage, features
from ragtrace_evaluator.labellers.protocol import (
    ClaimVerdict,
    GroundingResult,
    Passage,
    aggregate_claims,
    no_claim_result,
)
from ragtrace_evaluator.labellers.windows import Windows, claim_windows

DEFAULT_NLI_MODEL = "cross-encoder/nli-deberta-v3-base"
FORMULA_VERSION = "nli-1"
#: claims read against aligned evidence windows (windows.py), not whole passages
WINDOWED_FORMULA_VERSION = "nli-windows-1"
LABELS = ("entailment", "neutral", "contradiction")


class NLIError(RuntimeError):
    """The NLI model cannot be loaded or does not look like an NLI classifier."""


def map_labels(id2label: dict[int, str]) -> dict[str, int]:
    """Map our label names to the model's class indices, from ``config.id2label``.

    Raises :class:`NLIError` when no class looks like entailment (then it is not an NLI model, or
    its config lost the names: fix ``id2label`` in its config.json).
    """
    out: dict[str, int] = {}
    for idx, raw in id2label.items():
        name = str(raw).lower().replace("-", "_")
        if name.startswith("not_entail") or name.startswith("non_entail"):
            out["not_entailment"] = int(idx)
        elif name.startswith("entail"):
            out["entailment"] = int(idx)
        elif name.startswith("neutral"):
            out["neutral"] = int(idx)
        elif name.startswith("contradict"):
            out["contradiction"] = int(idx)
    if "entailment" not in out:
        raise NLIError(
            f"the model's config.id2label {id2label} has no entailment class; an NLI model names its "
            "classes entailment/neutral/contradiction (set id2label in its config.json)"
        )
    return out


#: the model trained here and shipped in the package (``nli:builtin``; see nli_builtin.py)
BUILTIN = "builtin"


class NLIModel:
    """Batched, cached NLI probabilities. Loads lazily; ``revision`` pins a hub revision.

    ``model`` is a hub id, a local directory, or ``"builtin"`` (the model shipped in the package).
    ``backend``: ``"auto"`` runs a local model through ONNX Runtime when onnxruntime is installed and
    the export reproduces torch's logits (about 3x the pairs/s on 2 cores), else torch; ``"torch"``
    always torch.
    """

    def __init__(self, model: str | Path = DEFAULT_NLI_MODEL, batch_size: int = 16, max_length: int = 512,
                 revision: str | None = None, backend: str = "auto") -> None:
        if backend not in ("auto", "torch"):
            raise ValueError(f"backend {backend!r}: use 'auto' or 'torch'")
        self.backend = backend
        self.builtin = str(model) == BUILTIN
        self.model = str(model)
        self.batch_size = batch_size
        self.max_length = max_length
        self.revision = revision
        self._cache: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None
        self._max_tokens = max_length
        self._labels: dict[str, int] = {}
        #: pairs actually run through the model (cache misses), and forward passes
        self.pairs_scored = 0
        self.batches_run = 0
        self._onnx: Any = None
        self._backend_note = "torch"

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if self.builtin:
            from ragtrace_evaluator.labellers.nli_builtin import BuiltinModelError, builtin_dir

            try:
                self.model = str(builtin_dir())
            except BuiltinModelError as exc:
                raise NLIError(str(exc)) from exc
        if Path(self.model).is_dir():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            with quiet_loading():
                self._tokenizer = AutoTokenizer.from_pretrained(self.model, revision=self.revision)
                self._model = AutoModelForSequenceClassification.from_pretrained(self.model,
                                                                                 revision=self.revision)
        except OSError as exc:
            raise NLIError(
                f"cannot load NLI model {self.model!r}: {exc}. Pass a local directory with config.json, "
                "weights and tokenizer files, or a hub id reachable from this machine."
            ) from exc
        self._model.eval()
        self._labels = map_labels(dict(self._model.config.id2label))
        self._torch = torch
        # Never feed the model more positions than it has: the tokenizer's limit when it states one
        # (RoBERTa's config counts two extra positions), else the config's.
        limits = [self.max_length]
        tokenizer_max = getattr(self._tokenizer, "model_max_length", None)
        if isinstance(tokenizer_max, int) and 0 < tokenizer_max < 1_000_000:
            limits.append(tokenizer_max)
        positions = getattr(self._model.config, "max_position_embeddings", None)
        if isinstance(positions, int) and positions > 0:
            limits.append(positions)
        self._max_tokens = min(limits)
        weights = self._weights_file()
        if self.backend == "auto" and weights is not None:
            from ragtrace_evaluator.labellers.onnx_backend import load_or_export_classifier

            self._onnx, self._backend_note = load_or_export_classifier(
                self._model, self._tokenizer, file_digest(weights), Path(self.model))

    def _weights_file(self) -> Path | None:
        path = Path(self.model)
        if not path.is_dir():
            return None
        return next((path / n for n in ("model.safetensors", "pytorch_model.bin") if (path / n).exists()), None)

    @property
    def labels(self) -> dict[str, int]:
        self._load()
        return dict(self._labels)

    def manifest(self) -> dict[str, Any]:
        self._load()
        if self.builtin:
            from ragtrace_evaluator.labellers.nli_builtin import builtin_manifest

            return {**builtin_manifest(), "labels": self._labels, "backend": self._backend_note}
        weights = self._weights_file()
        return {
            "model_id": self.model,
            "revision": self.revision or getattr(self._model.config, "_commit_hash", None),
            "file_hash": file_digest(weights) if weights is not None else None,
            "labels": self._labels,
            "backend": self._backend_note,
        }

    def _probabilities(self, chunk: list[tuple[str, tuple[str, str]]], torch: Any) -> Any:
        # The passage is cut first; a claim longer than the whole window is cut too.
        premises, hypotheses = [p for _, (p, _) in chunk], [h for _, (_, h) in chunk]
        if self._onnx is not None:
            import numpy as np

            enc = self._tokenizer(premises, hypotheses, padding=True, truncation="longest_first",
                                  max_length=self._max_tokens, return_tensors="np")
            logits = self._onnx.logits(dict(enc)).astype(np.float64)
            logits -= logits.max(axis=1, keepdims=True)
            exp = np.exp(logits)
            return exp / exp.sum(axis=1, keepdims=True)
        enc = self._tokenizer(premises, hypotheses, padding=True, truncation="longest_first",
                              max_length=self._max_tokens, return_tensors="pt")
        with torch.inference_mode():
            return torch.softmax(self._model(**enc).logits.float(), dim=-1).cpu().numpy()

    @staticmethod
    def _key(premise: str, hypothesis: str) -> str:
        return hashlib.sha1(f"{premise}\x00{hypothesis}".encode()).hexdigest()

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, float]]:
        """Probabilities per (premise, hypothesis): keys ``entailment``, ``neutral``, ``contradiction``
        (0.0 for classes the model lacks; a two-class head's ``not_entailment`` goes to neutral)."""
        self._load()
        torch = self._torch
        with self._lock:
            keys = [self._key(p, h) for p, h in pairs]
            todo: dict[str, tuple[str, str]] = {}
            for key, pair in zip(keys, pairs, strict=True):
                if key not in self._cache:
                    todo.setdefault(key, pair)
            items = list(todo.items())
            for start in range(0, len(items), self.batch_size):
                chunk = items[start:start + self.batch_size]
                probs = self._probabilities(chunk, torch)
                self.batches_run += 1
                self.pairs_scored += len(chunk)
                for (key, _), row in zip(chunk, probs, strict=True):
                    result = {name: float(row[i]) for name, i in self._labels.items() if name in LABELS}
                    if "not_entailment" in self._labels:
                        result["neutral"] = float(row[self._labels["not_entailment"]])
                    for name in LABELS:
                        result.setdefault(name, 0.0)
                    self._cache[key] = result
            return [dict(self._cache[k]) for k in keys]


class NLIGroundingLabeller:
    """Grounding labeller over an :class:`NLIModel` (premise = a supplied passage, hypothesis = a claim)."""

    kind = "nli"

    def __init__(self, model: NLIModel | str | Path = DEFAULT_NLI_MODEL, support_threshold: float = 0.5,
                 contradiction_threshold: float = 0.5, windowed: bool | None = None) -> None:
        self.nli = model if isinstance(model, NLIModel) else NLIModel(model)
        self.support_threshold = support_threshold
        self.contradiction_threshold = contradiction_threshold
        #: read each claim against its aligned evidence windows (windows.py) instead of whole passages;
        #: the default for the built-in model, which was trained on a few sentences of evidence
        self.windowed = self.nli.builtin if windowed is None else windowed

    def manifest(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.nli.manifest(),
                "thresholds": {"support": self.support_threshold, "contradiction": self.contradiction_threshold},
                "premises": "aligned windows" if self.windowed else "whole passages",
                "formula_version": WINDOWED_FORMULA_VERSION if self.windowed else FORMULA_VERSION}

    def _windows(self, claim: str, passages: Sequence[Passage]) -> list[tuple[int, Windows]]:
        """Per passage with text: the claim's windows in it, its sentences ranked by word coverage."""
        cf = features(claim)
        out = []
        for i, p in enumerate(passages):
            if not p.text.strip():
                continue
            sentences = split_sentences(p.text) or [p.text]
            cover = [coverage(cf, features(s)) for s in sentences]
            ranked = sorted(range(len(sentences)), key=lambda j: -cover[j])
            w = claim_windows(sentences, [0] * len(sentences), ranked, [p.text])
            if w is not None:
                out.append((i, w))
        return out

    def _score_windowed(self, claims: Sequence[str], passages: Sequence[Passage]) -> list[ClaimVerdict]:
        per_claim = [self._windows(c, passages) for c in claims]
        probs = iter(self.nli.predict([(t, c) for c, ws in zip(claims, per_claim, strict=True)
                                       for _, w in ws for t in w.texts]))
        out = []
        for claim, ws in zip(claims, per_claim, strict=True):
            support, contradiction, at_e, at_c = 0.0, 0.0, None, None
            for idx, w in ws:
                rows = [next(probs) for _ in w.texts]
                e = max(r["entailment"] for r in rows)
                c = rows[w.aligned]["contradiction"]
                if at_e is None or e > support:
                    support, at_e = e, idx
                if at_c is None or c > contradiction:
                    contradiction, at_c = c, idx
            if at_e is None:
                out.append(ClaimVerdict(claim, "neutral", 0.0, 0.0, None, None))
                continue
            at: int | None = at_e
            if support >= self.support_threshold:
                verdict = "entailed"
            elif contradiction >= self.contradiction_threshold:
                verdict, at = "contradicted", at_c
            else:
                verdict = "neutral"
            out.append(ClaimVerdict(claim, verdict, round(support, 6),  # type: ignore[arg-type]
                                    round(contradiction, 6), at, passages[at].id if at is not None else None))
        return out

    def score_claims(self, claims: Sequence[str], passages: Sequence[Passage]) -> list[ClaimVerdict]:
        if self.windowed:
            return self._score_windowed(claims, passages)
        usable = [(i, p) for i, p in enumerate(passages) if p.text.strip()]
        probs = self.nli.predict([(p.text, c) for c in claims for _, p in usable])
        out = []
        for k, claim in enumerate(claims):
            row = probs[k * len(usable):(k + 1) * len(usable)]
            if not row:
                out.append(ClaimVerdict(claim, "neutral", 0.0, 0.0, None, None))
                continue
            best_e = max(range(len(row)), key=lambda j: row[j]["entailment"])
            best_c = max(range(len(row)), key=lambda j: row[j]["contradiction"])
            support, contradiction = row[best_e]["entailment"], row[best_c]["contradiction"]
            if support >= self.support_threshold:
                verdict, j = "entailed", best_e
            elif contradiction >= self.contradiction_threshold:
                verdict, j = "contradicted", best_c
            else:
                verdict, j = "neutral", best_e
            idx = usable[j][0]
            out.append(ClaimVerdict(claim, verdict, round(support, 6),  # type: ignore[arg-type]
                                    round(contradiction, 6), idx, passages[idx].id))
        return out

    def judge(self, answer: str, passages: Sequence[Passage]) -> GroundingResult:
        extracted = extract_claims(answer)
        if extracted.kind != "claims":
            return no_claim_result(extracted.kind)
        return aggregate_claims(self.score_claims(extracted.claims, passages), self.support_threshold)

    def judge_many(self, items: Sequence[tuple[str, Sequence[Passage]]]) -> list[GroundingResult]:
        # Warm the cache with every pair in one batched pass, then label item by item from it.
        pairs: list[tuple[str, str]] = []
        for answer, passages in items:
            extracted = extract_claims(answer)
            if self.windowed:
                pairs.extend((t, c) for c in extracted.claims for _, w in self._windows(c, passages)
                             for t in w.texts)
            else:
                pairs.extend((p.text, c) for c in extracted.claims for p in passages if p.text.strip())
        if pairs:
            self.nli.predict(pairs)
        return [self.judge(answer, passages) for answer, passages in items]
