"""Relevance labellers: the offline default on MiniLM, NLI relevance on a tiny classifier, and eRAG
with a tiny randomly initialised causal LM the test saves itself (plus, marked slow, SmolLM2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragtrace_evaluator.labellers.erag import CausalLMReader, ERAGRelevance, ReaderError, smollm2_location
from ragtrace_evaluator.labellers.protocol import Passage, RelevanceLabeller
from ragtrace_evaluator.labellers.registry import make_relevance_labeller
from ragtrace_evaluator.labellers.relevance import RELEVANCE_THRESHOLD, LexicalEmbeddingRelevance, NLIRelevance
from ragtrace_evaluator.metrics.token_f1 import token_f1

PASSAGES = [
    Passage("gold", "Shirley Temple served as Chief of Protocol of the United States from 1976 to 1977."),
    Passage("topical", "Shirley Temple starred in many films as a child actress in the 1930s."),
    Passage("off", "The Amazon river carries more water than any other river in the world."),
    Passage("empty", ""),
]


def test_offline_relevance_orders_gold_topical_unrelated(embedder) -> None:  # type: ignore[no-untyped-def]
    labeller = LexicalEmbeddingRelevance(embedder=embedder)
    assert isinstance(labeller, RelevanceLabeller)
    query = "What government position did Shirley Temple hold?"
    without = labeller.relevance(query, PASSAGES)
    assert without[2] < RELEVANCE_THRESHOLD <= without[0] and without[3] == 0.0
    with_ref = labeller.relevance(query, PASSAGES, reference="Chief of Protocol")
    assert with_ref[0] > with_ref[1] > with_ref[2]
    assert with_ref[0] >= RELEVANCE_THRESHOLD > with_ref[1]
    assert labeller.manifest()["thresholds"] == {"relevance": RELEVANCE_THRESHOLD}


def _tiny_causal_lm(folder: Path) -> Path:
    import torch
    import transformers

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "answer", "question", "context", "the", "chief",
             "of", "protocol", "shirley", "temple", "amazon", "river", ":", ".", "?", "a", "reply", "with",
             "short", "using", "only"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    tok = transformers.BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
    tok.eos_token = "[SEP]"
    tok.save_pretrained(folder)
    config = transformers.GPT2Config(vocab_size=len(words), n_positions=256, n_embd=16, n_layer=1, n_head=2,
                                     bos_token_id=2, eos_token_id=3, pad_token_id=0)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


def test_erag_with_a_tiny_causal_lm(tmp_path: Path) -> None:
    reader = CausalLMReader(_tiny_causal_lm(tmp_path / "lm"), max_new_tokens=4)
    labeller = ERAGRelevance(reader)
    query = "What government position did Shirley Temple hold?"
    scores = labeller.relevance(query, PASSAGES, reference="Chief of Protocol")
    assert len(scores) == 4 and all(0.0 <= s <= 1.0 for s in scores) and scores[3] == 0.0
    answers = labeller.last_answers
    # Greedy decoding is deterministic and answers are cached per (query, document).
    assert labeller.relevance(query, PASSAGES, reference="Chief of Protocol") == scores
    assert reader.answer(query, PASSAGES[0].text) == answers[0]
    # Each score is exactly the token F1 of that document's reader answer against the reference.
    assert scores == [round(token_f1(a, "Chief of Protocol"), 6) for a in answers]
    with pytest.raises(ValueError, match="reference"):
        labeller.relevance(query, PASSAGES)
    # a reference without words: token F1 is undefined against it, so nothing is scored (not 0 for all)
    with pytest.raises(ValueError, match="reference answer with words"):
        labeller.relevance(query, PASSAGES, reference=" the ... ")
    assert labeller.manifest()["kind"] == "erag" and labeller.manifest()["decoding"] == "greedy"


def test_nli_relevance_needs_a_reference(tmp_path: Path, build_tiny_nli) -> None:  # type: ignore[no-untyped-def]
    model_dir = build_tiny_nli(tmp_path / "nli", {0: "contradiction", 1: "entailment", 2: "neutral"}, winner=1)
    labeller = NLIRelevance(str(model_dir))
    scores = labeller.relevance("q", PASSAGES, reference="the chief of protocol")
    assert scores[0] > 0.9 and scores[3] == 0.0
    with pytest.raises(ValueError, match="reference answer"):
        labeller.relevance("q", PASSAGES)


def test_readers_of_one_model_share_one_load_and_answer_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a process loads a reader model once (SmolLM2 costs ~15 s of CPU): every reader of it, and the
    # example generator, get the same tokenizer and model; beyond KEEP_BYTES the least recently used go
    from ragtrace_evaluator.labellers import causal_lm
    from ragtrace_evaluator.labellers.causal_lm import load_causal_lm

    folder = _tiny_causal_lm(tmp_path / "lm")
    first, second = CausalLMReader(folder, max_new_tokens=4), CausalLMReader(str(folder) + "/", max_new_tokens=4)
    query = "What government position did Shirley Temple hold?"
    assert first.answer(query, PASSAGES[0].text) == second.answer(query, PASSAGES[0].text)
    assert first._lm is second._lm and first._model_lock is second._model_lock
    assert load_causal_lm(folder) is load_causal_lm(str(folder))
    other = load_causal_lm(_tiny_causal_lm(tmp_path / "other"))
    assert other.model is not first._lm and load_causal_lm(folder).model is first._lm  # both fit: both kept
    # room for one: each load lets the other go, and the next use loads it anew
    monkeypatch.setattr(causal_lm, "KEEP_BYTES", load_causal_lm(folder).nbytes)
    assert causal_lm.KEEP_BYTES > 0
    third_folder = _tiny_causal_lm(tmp_path / "third")
    third = load_causal_lm(third_folder)
    assert load_causal_lm(folder).model is not first._lm
    assert load_causal_lm(third_folder).model is not third.model
    with pytest.raises(ReaderError, match="cannot load reader"):
        CausalLMReader(tmp_path / "no-model-here").answer(query, PASSAGES[0].text)


def test_relevance_factory() -> None:
    assert make_relevance_labeller("offline").threshold == RELEVANCE_THRESHOLD
    assert isinstance(make_relevance_labeller("erag:smollm2"), ERAGRelevance)
    with pytest.raises(ValueError, match="unknown relevance labeller"):
        make_relevance_labeller("bm25")


@pytest.mark.skipif(not os.environ.get("RAGTRACE_SLOW_TESTS"),
                    reason="loads SmolLM2 (~20 s, ~1 GB); set RAGTRACE_SLOW_TESTS=1 to run")
def test_erag_with_smollm2() -> None:
    smollm2_location()
    labeller = ERAGRelevance(CausalLMReader("smollm2", max_new_tokens=16))
    scores = labeller.relevance("What government position did Shirley Temple hold?", PASSAGES[:3],
                                reference="Chief of Protocol")
    assert scores[0] > scores[2], labeller.last_answers


def test_a_look_alike_about_a_sibling_entity_is_not_relevant(embedder) -> None:  # type: ignore[no-untyped-def]
    # The demo corpus's entity families: siblings share a name root and the sentence templates and
    # state other values. Topic alone (relevance-lexemb-1) calls the sibling relevant; the query's
    # name must be matched whole.
    from ragtrace_examples.corpus import generate_corpus

    corpus = generate_corpus(60, seed=3)
    q = next(q for q in corpus.questions if q.question == "Who heads Fiamae Textiles?")
    passages = [Passage(d, corpus.document(d).text) for d in (q.doc_id, *q.hard_distractors)]
    assert [corpus.document(d).title.split()[0] for d in q.hard_distractors] == ["Fiamae", "Fiamae"]
    names = LexicalEmbeddingRelevance(embedder=embedder)
    scores = names.relevance(q.question, passages)
    assert scores[0] >= RELEVANCE_THRESHOLD > max(scores[1:])
    topic_only = LexicalEmbeddingRelevance(embedder=embedder, match_names=False).relevance(q.question, passages)
    assert min(topic_only[1:]) >= RELEVANCE_THRESHOLD  # what the topic-only formula did
    assert names.manifest()["formula_version"] == "relevance-lexemb-2"


def test_the_query_names_and_numbers_are_matched_whole() -> None:
    from ragtrace_evaluator.labellers.lexical import features, name_phrases
    from ragtrace_evaluator.labellers.relevance import specificity

    assert name_phrases("Who heads Fiamae Textiles?") == (("fiamae", "textiles"),)
    sibling = features("Fiamae Ceramics is a ceramics producer. It is run by Ines Varga.")
    assert specificity("Who heads Fiamae Textiles?", sibling) == 0.0  # half a name is no match
    assert specificity("Who heads Fiamae Textiles?", features("Fiamae Textiles is a textile mill.")) == 1.0
    # a number in the query must be stated too; a query naming nothing has no specificity
    assert specificity("Which firm was founded in 1923?", features("The firm was founded in 1960.")) == 0.0
    assert specificity("which firm makes glass?", features("The firm makes glass.")) is None


def test_reader_weights_are_hashed_once_per_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest carries the GGUF file's hash; the audit asks for manifests per batch, so the
    ~100 MB file is read once per reader, not per call."""
    from ragtrace_evaluator.labellers import erag

    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"not really weights")
    calls: list[Path] = []
    real = erag.file_digest

    def counting(path: Path, limit: int | None = None) -> str:
        calls.append(path)
        return real(path, limit)

    monkeypatch.setattr(erag, "file_digest", counting)
    reader = CausalLMReader(tmp_path, gguf_file="model.gguf")
    first = ERAGRelevance(reader).manifest()
    assert ERAGRelevance(reader).manifest() == first and reader.manifest()["file_hash"] == first["file_hash"]
    assert first["file_hash"] == real(weights) and calls == [weights]
