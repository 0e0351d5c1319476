"""Shared fixtures for the grounding tests: MiniLM loads once per session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def _torch() -> Any:
    import torch

    return torch


def _transformers() -> Any:
    import transformers

    return transformers


@pytest.fixture(scope="session")
def embedder():  # type: ignore[no-untyped-def]
    from ragtrace_evaluator.labellers.embedding import SentenceEmbedder

    return SentenceEmbedder()


@pytest.fixture(scope="session")
def offline(embedder):  # type: ignore[no-untyped-def]
    from ragtrace_evaluator.labellers.offline import OfflineGroundingLabeller

    return OfflineGroundingLabeller(embedder=embedder)


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "water", "boils", "at", "100", "50",
         "degrees", "tower", "is", "in", "paris", "lyon", "not", ".", "a"]


def _build_tiny_nli(folder: Path, id2label: dict[int, str], winner: int) -> Path:
    """A 2-layer, 16-wide BERT sequence classifier whose class ``winner`` dominates."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    tokenizer = _transformers().BertTokenizer(str(folder / "vocab.txt"), do_lower_case=True)
    config = _transformers().BertConfig(
        vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64, num_labels=len(id2label),
        id2label=id2label, label2id={v: k for k, v in id2label.items()},
    )
    _torch().manual_seed(0)
    model = _transformers().BertForSequenceClassification(config)
    with _torch().no_grad():
        model.classifier.weight.mul_(0.01)
        model.classifier.bias.zero_()
        model.classifier.bias[winner] = 6.0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def build_tiny_nli():  # type: ignore[no-untyped-def]
    """Builds and saves a tiny NLI classifier: build_tiny_nli(folder, id2label, winner) -> folder."""
    return _build_tiny_nli
