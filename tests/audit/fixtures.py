"""Test collaborators for the audit: trace rows written the way the collector stores them, and small
deterministic labellers (legitimate injected collaborators: the audit is under test, not them)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ragtrace_evaluator.labellers.protocol import ClaimVerdict, GroundingResult, Passage

_WORD = re.compile(r"[a-z0-9]+")
_ABSTAIN = ("i cannot answer", "i don't know", "the context does not say")
STOP = {"the", "and", "for", "with", "that", "this", "are", "was", "its", "from", "under", "what", "which"}


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in STOP} | set(
        re.findall(r"\d+", text))


class KeywordGrounding:
    """Entailed when some passage holds every content word of the claim; contradicted when the best
    passage shares most words but not the claim's numbers; else neutral."""

    def __init__(self) -> None:
        self.calls = 0

    def manifest(self) -> dict[str, Any]:
        return {"kind": "test-keyword", "model_id": None, "thresholds": {"entail": 1.0, "contradict": 0.5},
                "formula_version": "kw/1"}

    def judge(self, answer: str, passages: Sequence[Passage]) -> GroundingResult:
        self.calls += 1
        if answer.strip().lower().startswith(_ABSTAIN):
            return GroundingResult("abstained", (), None, True, 0.9)
        claims = [s.strip() for s in re.split(r"(?<=[.!?])\s+", answer) if s.strip()]
        verdicts = []
        for claim in claims:
            cw = words(claim)
            best_i, best = None, -1.0
            for i, p in enumerate(passages):
                overlap = len(cw & words(p.text)) / len(cw) if cw else 0.0
                if overlap > best:
                    best_i, best = i, overlap
            nums = {w for w in cw if w.isdigit()}
            pw = words(passages[best_i].text) if best_i is not None else set()
            if best >= 1.0:
                verdict, support, contra = "entailed", 1.0, 0.0
            elif best >= 0.5 and nums and not nums <= pw:
                verdict, support, contra = "contradicted", 0.1, 0.9
            else:
                verdict, support, contra = "neutral", max(best, 0.0), 0.0
            verdicts.append(ClaimVerdict(claim, verdict, support, contra, best_i,  # type: ignore[arg-type]
                                         passages[best_i].id if best_i is not None else None))
        if not verdicts:
            return GroundingResult("neutral", (), None, False, 0.5)
        n_ent = sum(v.verdict == "entailed" for v in verdicts)
        overall = ("contradicted" if any(v.verdict == "contradicted" for v in verdicts)
                   else "entailed" if n_ent == len(verdicts) else "neutral")
        return GroundingResult(overall, tuple(verdicts), n_ent / len(verdicts), False, 0.8)  # type: ignore[arg-type]

    def judge_many(self, items: Sequence[tuple[str, Sequence[Passage]]]) -> list[GroundingResult]:
        return [self.judge(a, p) for a, p in items]


class KeywordRelevance:
    """A passage is relevant when it contains every content word of ``key`` (the query's answer key)."""

    def __init__(self, key: str) -> None:
        self.key = words(key)

    def manifest(self) -> dict[str, Any]:
        return {"kind": "test-relevance", "key": sorted(self.key)}

    @property
    def threshold(self) -> float:
        return 0.5

    def relevance(self, query: str, passages: Sequence[Passage], reference: str | None = None) -> list[float]:
        return [1.0 if self.key <= words(p.text) else 0.0 for p in passages]


def make_grounding_labeller(name: str) -> KeywordGrounding:
    """Factory in the shape `ragtrace audit --labeller module:function` loads."""
    return KeywordGrounding()


class ReviewedKeywordGrounding(KeywordGrounding):
    """The keyword labeller stating a review threshold (as the offline labeller's artefact does):
    its answers' confidence is 0.8 (0.9 for abstentions), so most labels fall below 0.85."""

    def manifest(self) -> dict[str, Any]:
        m = super().manifest()
        return {**m, "thresholds": {**m["thresholds"], "review": 0.85}}


def make_reviewed_grounding_labeller(name: str) -> ReviewedKeywordGrounding:
    return ReviewedKeywordGrounding()


def make_relevance_labeller(name: str) -> KeywordRelevance:
    return KeywordRelevance(name or "boils 100")


# --- traces -------------------------------------------------------------------------------------------
PASSAGES = {
    "gold": "Water boils at 100 degrees Celsius at sea level.",
    "freeze": "Water freezes at 0 degrees Celsius under normal pressure.",
    "mercury": "Mercury is a metal that is liquid at room temperature.",
    "ocean": "The ocean covers most of the surface of the planet.",
    "salt": "Salt water boils at a slightly higher temperature than fresh water.",
    "steam": "Steam engines were central to the industrial revolution.",
}
QUERY = "At what temperature does water boil at sea level?"
GOOD = "Water boils at 100 degrees Celsius at sea level."


@dataclass
class Trace:
    trace_id: str
    release: str
    retrieved: list[str]
    context: list[str]
    answer: str | None
    reranked: list[str] | None = None
    gold: list[str] | None = None  # gold on the span (source 'span')
    query_id: str = ""
    route: str = "/ask"
    service: str = "qa"
    start: datetime = field(default_factory=lambda: datetime(2026, 11, 1, 12, 0, tzinfo=UTC))


def scenario(prefix: str, release: str = "r1") -> dict[str, Trace]:
    """One trace per failure mode plus clean ones; keys are the expected primary mode (+ suffix)."""
    t = lambda name: f"{prefix}-{name}"  # noqa: E731
    d = ["freeze", "mercury", "ocean", "salt", "steam"]
    return {
        "ok": Trace(t("ok"), release, ["gold", *d[:4]], ["gold", "freeze", "mercury"], GOOD, gold=["gold"]),
        "ok-2": Trace(t("ok2"), release, ["gold", *d[:4]], ["gold", "ocean", "mercury"],
                      "Water boils at 100 degrees Celsius at sea level. The ocean covers most of the surface of "
                      "the planet.", gold=["gold"]),
        "retrieval_gap": Trace(t("gap"), release, d, d[:3], "Water freezes at 0 degrees Celsius.", gold=["gold"]),
        "rank_inversion": Trace(t("inv"), release, ["freeze", "mercury", "gold", "ocean"], ["freeze", "mercury"],
                                "Water freezes at 0 degrees Celsius.", reranked=["freeze", "mercury", "ocean", "gold"],
                                gold=["gold"]),
        "rank_inversion-incontext": Trace(t("inv2"), release, ["salt", "gold", "ocean"], ["salt", "gold", "ocean"],
                                          "Salt water boils at a slightly higher temperature than fresh water.",
                                          gold=["gold"]),
        "under_use": Trace(t("under"), release, ["gold", *d[:3]], ["gold", "freeze"],
                           "I cannot answer this from the provided documents.", gold=["gold"]),
        "fabrication": Trace(t("fab"), release, ["gold", *d[:3]], ["gold", "freeze"],
                             "Water boils at 90 degrees Celsius at sea level.", gold=["gold"]),
        "retrieval_gap-refusal": Trace(t("gapref"), release, d, d[:2], "I don't know.", gold=["gold"]),
    }


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_traces(store: Any, tenant: str, traces: Sequence[Trace], *, root_priority: int = 0,
                 received_at: datetime | None = None) -> None:
    """Rows as the collector writes them: queries, documents per stage, passages by hash, gold.
    ``root_priority`` 3 writes the roots as the SDK's; ``received_at`` (default now) dates every row."""
    now = received_at or datetime.now(UTC)
    queries, docs, passages, gold = [], [], [], []
    seen: set[str] = set()
    for i, tr in enumerate(traces):
        start = tr.start + timedelta(seconds=i)
        queries.append((tenant, tr.trace_id, "root", tr.query_id, tr.service, tr.release, "test", tr.route, QUERY,
                        tr.answer, False, "OK", start, 12.5, now, root_priority))
        stages = [("retrieved", "s-ret", tr.retrieved, None)]
        if tr.reranked is not None:
            stages.append(("reranked", "s-rr", tr.reranked, len(tr.context)))
        stages.append(("context", "s-gen", tr.context, None))
        for stage, span, ids, top_k in stages:
            for rank, doc in enumerate(ids):
                text = PASSAGES[doc]
                h = content_hash(text)
                docs.append((tenant, tr.trace_id, span, stage, rank, doc, 1.0 - rank / 10, h, "", top_k, start, now))
                if h not in seen:
                    seen.add(h)
                    passages.append((tenant, h, text, False, now))
        for doc in tr.gold or []:
            gold.append((tenant, "", tr.trace_id, doc, 1, "span", now))
    store.insert("queries", queries, ["tenant", "trace_id", "span_id", "query_id", "service", "release",
                                      "environment", "route", "query", "answer", "answer_streamed", "status_code",
                                      "start_time", "duration_ms", "received_at", "root_priority"])
    store.insert("documents", docs, ["tenant", "trace_id", "span_id", "stage", "rank", "doc_id", "score",
                                     "content_hash", "metadata", "top_k", "start_time", "received_at"])
    store.insert("passages", passages, ["tenant", "content_hash", "content", "truncated", "first_seen"])
    store.insert("gold", gold, ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])
