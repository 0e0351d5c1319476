"""The LLM judge: the deterministic policy and parser as units, and the HTTP path against a real local
server that speaks the OpenAI chat-completions API, generating with a real transformers causal LM
(a tiny random one by default; SmolLM2 with RAGTRACE_SLOW_TESTS=1)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragtrace_evaluator.labellers.llm_judge import (
    JudgeParseError,
    JudgeScores,
    LLMJudge,
    LLMJudgeError,
    parse_judgement,
    verdict_policy,
)
from ragtrace_evaluator.labellers.protocol import Passage
from tests.loopback import serving

PASSAGES = [Passage("d1", "The bridge opened in 1932 and is 503 metres long.")]


@pytest.mark.parametrize(("scores", "expected"), [
    (JudgeScores(0.95, 1.0, "none", ()), ("entailed", 0.1875)),  # |0.95 − 0.8| / 0.8
    (JudgeScores(0.8, 1.0, "none", ()), ("entailed", 0.0)),
    (JudgeScores(0.95, 1.0, "minor", ("x",)), ("neutral", 0.1875)),
    (JudgeScores(0.4, 1.0, "none", ()), ("neutral", 0.5)),
    (JudgeScores(0.9, 1.0, "major", ("x",)), ("contradicted", 1.0)),
])
def test_verdict_policy(scores: JudgeScores, expected: tuple[str, float]) -> None:
    verdict, confidence = verdict_policy(scores)
    assert (verdict, round(confidence, 6)) == expected


def test_parse_judgement_tolerates_fences_and_validates() -> None:
    scores = parse_judgement('Sure!\n```json\n{"faithfulness": 0.5, "answer_relevance": 1, "severity": "minor", '
                             '"unsupported_claims": ["It is 600 metres long."]}\n```')
    assert scores == JudgeScores(0.5, 1.0, "minor", ("It is 600 metres long.",))
    for bad, field in [('{"faithfulness": 2, "answer_relevance": 1, "severity": "none"}', "faithfulness"),
                       ('{"faithfulness": 1, "answer_relevance": 1, "severity": "bad"}', "severity"),
                       ('{"faithfulness": 1, "answer_relevance": 1, "severity": "none", '
                        '"unsupported_claims": "x"}', "unsupported_claims"),
                       ("no json here", "no JSON object")]:
        with pytest.raises(JudgeParseError, match=field):
            parse_judgement(bad)


def _tiny_lm(folder: Path) -> Path:
    import torch
    import transformers

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "{", "}", '"', ":", ",", "faithfulness", "none",
             "the", "bridge", "opened", "in", "1932", "json", "answer", "passages"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    tok = transformers.BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
    tok.eos_token = "[SEP]"
    tok.save_pretrained(folder)
    config = transformers.GPT2Config(vocab_size=len(words), n_positions=512, n_embd=16, n_layer=1, n_head=2,
                                     bos_token_id=2, eos_token_id=3, pad_token_id=0)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


def _make_app(model_dir: str, gguf_file: str | None) -> Any:
    """A minimal OpenAI-compatible chat-completions server around a transformers causal LM."""
    import torch
    from fastapi import FastAPI, HTTPException

    from ragtrace_evaluator.labellers.causal_lm import load_causal_lm

    # the process's copy: SmolLM2 is loaded once for this and the eRAG reader tests on this worker
    loaded = load_causal_lm(model_dir, gguf_file)
    tok, lm = loaded.tokenizer, loaded.model
    app = FastAPI()

    @app.post("/v1/chat/completions")
    def chat(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        if getattr(tok, "chat_template", None):
            enc = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                          return_dict=True)
        else:
            enc = tok("\n".join(m["content"] for m in messages), return_tensors="pt", truncation=True,
                      max_length=400)
        with loaded.lock, torch.inference_mode():
            out = lm.generate(**enc, max_new_tokens=min(int(body.get("max_tokens", 64)), 96), do_sample=False,
                              pad_token_id=tok.pad_token_id or tok.eos_token_id)
        text = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        return {"id": "x", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}]}

    @app.post("/broken/v1/chat/completions")
    def broken() -> None:
        raise HTTPException(status_code=503, detail="overloaded")

    return app


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(_make_app(str(_tiny_lm(tmp_path_factory.mktemp("judge_lm"))), None)) as url:
        yield url


def test_unparseable_reply_is_undefined_not_scored(tiny_server: str) -> None:
    # A random tiny model cannot write rubric JSON: the label must be undefined with zero confidence.
    judge = LLMJudge(f"{tiny_server}/v1", model="tiny", max_tokens=24)
    result = judge.judge("The bridge opened in 1932.", PASSAGES)
    assert judge.parse_failures == 1
    assert result.verdict == "neutral" and result.groundedness is None and result.confidence == 0.0
    abstained = judge.judge("I cannot answer that from the context.", PASSAGES)
    assert abstained.verdict == "abstained" and judge.parse_failures == 1  # no request made
    assert judge.manifest()["kind"] == "llm-judge"


def test_the_accuracy_benchmark_counts_failed_judgements_apart(tiny_server: str) -> None:
    # benchmarks/grounding_accuracy.py ranks an undefined answer last; it must also say how many there
    # were, or a judge that failed on every item reads as one that ranks at chance (AUROC 0.5)
    from benchmarks.grounding_accuracy import labeller_outputs

    judge = LLMJudge(f"{tiny_server}/v1", model="tiny", max_tokens=24)
    results = judge.judge_many([("The bridge opened in 1932.", PASSAGES), ("Hello there!", PASSAGES)])
    out = labeller_outputs(results)
    assert (out.undefined, out.claimless) == (1, 1)
    assert list(out.score) == [0.0, 0.0] and list(out.predicted) == [0, 0]


def test_http_failure_names_the_endpoint(tiny_server: str) -> None:
    judge = LLMJudge(f"{tiny_server}/broken/v1", model="tiny")
    with pytest.raises(LLMJudgeError, match="broken/v1/chat/completions"):
        judge.judge("The bridge opened in 1932.", PASSAGES)
    with pytest.raises(ValueError, match="http"):
        LLMJudge("localhost:8000", model="x")


@pytest.mark.skipif(not os.environ.get("RAGTRACE_SLOW_TESTS"),
                    reason="serves SmolLM2 (~20 s load, slow generation); set RAGTRACE_SLOW_TESTS=1 to run")
def test_judge_against_smollm2_served_locally() -> None:
    from ragtrace_evaluator.labellers.erag import smollm2_location

    folder, gguf = smollm2_location()
    with serving(_make_app(str(folder), gguf)) as base:
        judge = LLMJudge(f"{base}/v1", model="smollm2", max_tokens=96)
        result = judge.judge("The bridge opened in 1932. It is 503 metres long.", PASSAGES)
        # SmolLM2-135M often fails the rubric; either way the label must be well-formed.
        assert result.verdict in ("entailed", "neutral", "contradicted")
        assert (result.groundedness is None) == (judge.parse_failures == 1)


def test_rubric_reply_becomes_claim_verdicts() -> None:
    # The network is swapped for an httpx transport that returns a fixed rubric reply (as httpx's own
    # tests do); the server path itself is covered above.
    import httpx

    seen: list[dict[str, Any]] = []

    def reply(request: httpx.Request) -> httpx.Response:
        import json

        seen.append(json.loads(request.content))
        content = ('{"faithfulness": 0.5, "answer_relevance": 1.0, "severity": "major", '
                   '"unsupported_claims": ["It is 600 metres long."]}')
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": content}}]})

    judge = LLMJudge("http://judge.invalid/v1", model="m", client=httpx.Client(transport=httpx.MockTransport(reply)))
    result = judge.judge("The bridge opened in 1932. It is 600 metres long.", PASSAGES)
    assert result.verdict == "contradicted" and result.confidence == 1.0
    assert [c.verdict for c in result.claims] == ["entailed", "contradicted"]
    assert result.groundedness == 0.5
    assert seen[0]["temperature"] == 0 and "503 metres" in seen[0]["messages"][1]["content"]


def test_factory_builds_the_judge() -> None:
    from ragtrace_evaluator.labellers.registry import make_grounding_labeller

    judge = make_grounding_labeller("llm:qwen2.5-7b@http://127.0.0.1:8000/v1")
    assert isinstance(judge, LLMJudge) and judge.model == "qwen2.5-7b"
    assert judge.manifest()["endpoint"] == "http://127.0.0.1:8000/v1"
