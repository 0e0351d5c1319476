"""What the item page and the trace page show: one trace and its label, arranged for a person.

Built from the stored trace (query, candidates per stage, supplied context, answer) and a label
(failure mode, claims with verdicts and evidence passage ids): the queue item's snapshot on the
review item page, the chosen manifest's label on ``/traces/{trace_id}``. Both pages render it with
the same partial (``templates/_trace.html``). Text stays raw here; the templates escape it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragtrace_review.queues import QueueItem
from ragtrace_store import GoldEvidence, LabelRecord, Store
from ragtrace_store.records import DocumentRef, TraceRecord


@dataclass(frozen=True)
class Candidate:
    doc_id: str
    retrieved_rank: int | None  # ranks shown from 1
    retrieved_score: float | None
    reranked_rank: int | None
    reranked_score: float | None
    #: positions gained by reranking (> 0 moved up, < 0 moved down); None if not in both lists
    moved: int | None
    in_context: bool
    #: gold from any source (`TraceRecord.all_gold_ids`: gold ids, qrels, review, evidence spans)
    gold: bool
    content: str | None = None
    #: the evidence spans this chunk holds, as ``SOURCE[START:END]`` (character offsets, end exclusive)
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContextPassage:
    anchor: str  # HTML id, from the position (document ids are arbitrary text)
    position: int
    doc_id: str
    content: str | None
    gold: bool


@dataclass(frozen=True)
class ClaimView:
    index: int
    claim: str
    verdict: str
    support: float | None
    passage_id: str | None
    passage_anchor: str | None  # None when the evidence passage is not in the supplied context


@dataclass(frozen=True)
class ItemView:
    trace_found: bool
    query: str
    answer: str | None
    service: str
    release: str
    candidates: tuple[Candidate, ...]
    context: tuple[ContextPassage, ...]
    claims: tuple[ClaimView, ...]
    generation_verdict: str
    groundedness: float | None
    abstained: bool
    retrieval: dict[str, Any]
    ranking: dict[str, Any]
    #: evidence spans of the query that no chunk of this trace holds (what retrieval missed)
    evidence_not_found: tuple[str, ...] = ()


def span_text(e: GoldEvidence) -> str:
    """An evidence span as ``SOURCE[START:END]``."""
    return f"{e.source_id}[{e.start}:{e.end}]"


def _by_id(docs: tuple[DocumentRef, ...]) -> dict[str, DocumentRef]:
    out: dict[str, DocumentRef] = {}
    for d in docs:
        out.setdefault(d.id, d)  # a duplicate id keeps its best (first) rank
    return out


def candidates(trace: TraceRecord) -> tuple[Candidate, ...]:
    """Every document the query touched (reranked, then retrieved-only, then context-only), with its
    rank in each list and how the reranker moved it."""
    ret, rer, ctx_docs = _by_id(trace.retrieved), _by_id(trace.reranked), _by_id(trace.context)
    ctx = set(ctx_docs)
    gold = set(trace.all_gold_ids)
    evidence: dict[str, list[str]] = {}
    for e in trace.gold_evidence:
        if e.doc_id:
            evidence.setdefault(e.doc_id, []).append(span_text(e))
    ids = list(rer) + [i for i in ret if i not in rer] + [i for i in ctx_docs if i not in rer and i not in ret]
    out = []
    for doc_id in ids:
        a, b = ret.get(doc_id), rer.get(doc_id)
        text = next((d.content for d in (b, a, ctx_docs.get(doc_id)) if d is not None and d.content is not None),
                    None)
        out.append(Candidate(
            doc_id=doc_id,
            retrieved_rank=a.rank + 1 if a else None, retrieved_score=a.score if a else None,
            reranked_rank=b.rank + 1 if b else None, reranked_score=b.score if b else None,
            moved=(a.rank - b.rank) if a and b else None,
            in_context=doc_id in ctx, gold=doc_id in gold, content=text,
            evidence=tuple(evidence.get(doc_id, ())),
        ))
    return tuple(out)


def item_view(store: Store, item: QueueItem) -> ItemView:
    traces = list(store.read_traces(tenant=item.tenant, trace_ids=[item.trace_id], with_content=True))
    return trace_view(traces[0] if traces else None, item.record)


def trace_view(trace: TraceRecord | None, label: LabelRecord | None, *, service: str = "",
               release: str = "") -> ItemView:
    """One trace (None: no longer in the store) with one label (None: not labelled under the chosen
    manifest). ``service``/``release`` stand in when neither gives them."""
    context: tuple[ContextPassage, ...] = ()
    anchors: dict[str, str] = {}
    if trace is not None:
        gold = set(trace.all_gold_ids)
        context = tuple(ContextPassage(f"passage-{i + 1}", i + 1, d.id, d.content, d.id in gold)
                        for i, d in enumerate(trace.context))
        for p in context:
            anchors.setdefault(p.doc_id, p.anchor)
    gen = label.generation if label is not None else None
    claims = []
    for i, c in enumerate(gen.claims if gen is not None else ()):
        pid = c.passage_id
        claims.append(ClaimView(i, c.claim, c.verdict.value, c.support, pid, anchors.get(pid) if pid else None))
    return ItemView(
        trace_found=trace is not None,
        query=trace.query if trace else "",
        answer=trace.answer if trace else None,
        service=trace.service if trace else (label.service if label else service),
        release=trace.release if trace else (label.release if label else release),
        candidates=candidates(trace) if trace else (),
        context=context,
        claims=tuple(claims),
        generation_verdict=gen.verdict.value if gen is not None else "",
        groundedness=gen.groundedness if gen is not None else None,
        abstained=gen.abstained if gen is not None else False,
        retrieval=label.retrieval.to_json() if label is not None else {},
        ranking=label.ranking.to_json() if label is not None else {},
        evidence_not_found=tuple(span_text(e) for e in trace.gold_evidence if not e.doc_id) if trace else (),
    )
