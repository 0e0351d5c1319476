"""An LLM judge over any OpenAI-compatible chat API (httpx), with a structured JSON rubric.

The model scores; it does not decide. It returns a JSON object::

    {"faithfulness": 0..1,          # share of the answer supported by the passages
     "answer_relevance": 0..1,      # does the answer address the question / request
     "severity": "none" | "minor" | "major",   # worst unsupported content: none, a detail, a wrong fact
     "unsupported_claims": ["...", ...]}       # the answer's claims the passages do not support

and :func:`verdict_policy` — a separate, deterministic, unit-tested function — turns those scores into a
verdict: ``contradicted`` when severity is major; ``entailed`` when faithfulness ≥ 0.8 and severity is
none; otherwise ``neutral``. A reply that is not valid rubric JSON gives verdict ``neutral`` with
``confidence = 0`` and ``groundedness = None`` (undefined, never 0 or 1), and is counted in
``parse_failures``: low-confidence labels are what review queues pull in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from ragtrace_evaluator.labellers.claims import extract_claims
from ragtrace_evaluator.labellers.protocol import (
    ClaimVerdict,
    ClaimVerdictName,
    GenerationVerdict,
    GroundingResult,
    Passage,
    no_claim_result,
)
from ragtrace_evaluator.metrics.token_f1 import token_f1

RUBRIC_VERSION = "llm-judge-rubric-1"
Severity = Literal["none", "minor", "major"]
SEVERITIES: tuple[Severity, ...] = ("none", "minor", "major")
ENTAIL_AT = 0.8

SYSTEM_PROMPT = (
    "You check whether an answer is supported by the passages it was given. Reply with one JSON object "
    'and nothing else: {"faithfulness": number 0-1 (share of the answer supported by the passages), '
    '"answer_relevance": number 0-1 (does it address the question), "severity": "none" | "minor" | "major" '
    '(worst unsupported content: none; a minor detail; a wrong or contradicted fact), '
    '"unsupported_claims": [strings copied from the answer that the passages do not support]}.'
)


class LLMJudgeError(RuntimeError):
    """The judge endpoint failed (HTTP error, timeout, or a reply without a message)."""


class JudgeParseError(ValueError):
    """The model's reply is not a rubric JSON object; the message says which field is wrong."""


@dataclass(frozen=True)
class JudgeScores:
    faithfulness: float
    answer_relevance: float
    severity: Severity
    unsupported_claims: tuple[str, ...]


def _unit(obj: dict[str, Any], name: str) -> float:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise JudgeParseError(f"{name!r} must be a number in [0, 1], got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise JudgeParseError(f"{name!r} must be in [0, 1], got {value}")
    return float(value)


def parse_judgement(text: str) -> JudgeScores:
    """The rubric scores in a model reply. Tolerates code fences and prose around one JSON object."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match is None:
        raise JudgeParseError(f"no JSON object in the reply: {text[:200]!r}")
    try:
        obj = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"invalid JSON in the reply ({exc.msg}): {match.group(0)[:200]!r}") from exc
    if not isinstance(obj, dict):
        raise JudgeParseError("the reply's JSON must be an object")
    severity = obj.get("severity")
    if severity not in SEVERITIES:
        raise JudgeParseError(f"'severity' must be one of {SEVERITIES}, got {severity!r}")
    claims = obj.get("unsupported_claims", [])
    if not isinstance(claims, list) or not all(isinstance(c, str) for c in claims):
        raise JudgeParseError("'unsupported_claims' must be a list of strings")
    return JudgeScores(_unit(obj, "faithfulness"), _unit(obj, "answer_relevance"), severity, tuple(claims))


def verdict_policy(scores: JudgeScores, entail_at: float = ENTAIL_AT) -> tuple[GenerationVerdict, float]:
    """(verdict, confidence) from rubric scores — the only place judge scores become verdicts.

    major severity → contradicted (confidence 1); faithfulness ≥ ``entail_at`` with no unsupported
    content → entailed; else neutral. Confidence for the other two is the faithfulness distance from
    ``entail_at``, scaled to [0, 1].
    """
    if scores.severity == "major":
        return "contradicted", 1.0
    span = max(entail_at, 1.0 - entail_at)
    confidence = round(min(1.0, abs(scores.faithfulness - entail_at) / span), 6)
    if scores.faithfulness >= entail_at and scores.severity == "none":
        return "entailed", confidence
    return "neutral", confidence


class LLMJudge:
    """Grounding labeller backed by a chat model. ``client`` is injectable (an ``httpx.Client``)."""

    kind = "llm-judge"

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 client: httpx.Client | None = None, timeout: float = 120.0, max_tokens: int = 256,
                 entail_at: float = ENTAIL_AT) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL such as http://localhost:8000/v1, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_tokens = max_tokens
        self.entail_at = entail_at
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = client if client is not None else httpx.Client(timeout=timeout, headers=headers)
        self.parse_failures = 0

    def manifest(self) -> dict[str, Any]:
        return {"kind": self.kind, "model_id": self.model, "endpoint": self.base_url,
                "rubric_version": RUBRIC_VERSION, "thresholds": {"entailed_faithfulness": self.entail_at},
                "formula_version": "llm-judge-policy-1", "decoding": "temperature 0"}

    def _ask(self, answer: str, passages: Sequence[Passage]) -> str:
        context = "\n\n".join(f"[{i + 1}] {p.text}" for i, p in enumerate(passages)) or "(no passages)"
        body = {
            "model": self.model, "temperature": 0, "max_tokens": self.max_tokens,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                         {"role": "user", "content": f"Passages:\n{context}\n\nAnswer:\n{answer}\n\nJSON:"}],
        }
        try:
            response = self.client.post(f"{self.base_url}/chat/completions", json=body)
            response.raise_for_status()
            return str(response.json()["choices"][0]["message"]["content"])
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
            raise LLMJudgeError(f"judge request to {self.base_url}/chat/completions failed: {exc}") from exc

    def judge(self, answer: str, passages: Sequence[Passage]) -> GroundingResult:
        extracted = extract_claims(answer)
        if extracted.kind != "claims":
            return no_claim_result(extracted.kind)
        reply = self._ask(answer, passages)
        try:
            scores = parse_judgement(reply)
        except JudgeParseError:
            self.parse_failures += 1
            claims = tuple(ClaimVerdict(c, "neutral", 0.0, 0.0, None, None) for c in extracted.claims)
            return GroundingResult("neutral", claims, None, False, 0.0, "claims")
        verdict, confidence = verdict_policy(scores, self.entail_at)
        claims = tuple(self._claim(c, verdict, scores) for c in extracted.claims)
        entailed = sum(1 for c in claims if c.verdict == "entailed")
        return GroundingResult(verdict, claims, entailed / len(claims), False, confidence, "claims")

    @staticmethod
    def _claim(claim: str, verdict: GenerationVerdict, scores: JudgeScores) -> ClaimVerdict:
        # A claim the judge lists as unsupported takes the unsupported side of the verdict; the rest
        # share the answer's verdict (the rubric is answer-level).
        # an unsupported claim the judge wrote without words matches nothing (its F1 is undefined)
        listed = any((f1 := token_f1(claim, u)) is not None and f1 >= 0.5 for u in scores.unsupported_claims)
        name: ClaimVerdictName
        if listed:
            name = "contradicted" if scores.severity == "major" else "neutral"
        elif scores.unsupported_claims:
            name = "entailed"  # the judge itemised what is unsupported, and this claim is not in it
        else:
            name = "entailed" if verdict == "entailed" else "contradicted" if verdict == "contradicted" else "neutral"
        contradiction = 1.0 if name == "contradicted" else 0.0
        return ClaimVerdict(claim, name, scores.faithfulness, contradiction, None, None)

    def judge_many(self, items: Sequence[tuple[str, Sequence[Passage]]]) -> list[GroundingResult]:
        return [self.judge(answer, passages) for answer, passages in items]
