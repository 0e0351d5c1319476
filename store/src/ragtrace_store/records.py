"""Frozen records that the store hands to its readers (the `traces` command, the evaluator, the review UI)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ragtrace_store.evidence_gold import GoldEvidence

#: The tenant of everything sent without a tenant token.
DEFAULT_TENANT = "default"

#: Stage names of the `documents` table, in pipeline order.
STAGE_RETRIEVED = "retrieved"
STAGE_RERANK_INPUT = "rerank_input"
STAGE_RERANKED = "reranked"
STAGE_CONTEXT = "context"
STAGES = (STAGE_RETRIEVED, STAGE_RERANK_INPUT, STAGE_RERANKED, STAGE_CONTEXT)


@dataclass(frozen=True)
class DocumentRef:
    """One document at one stage of one query. ``rank`` counts from 0 in the order the service used."""

    id: str
    rank: int
    score: float | None = None
    content_hash: str = ""
    #: passage text when the store has it (None when only the hash was sent)
    content: str | None = None
    metadata: str = ""

    def as_ref(self) -> dict[str, Any]:
        """The ``{id, rank, score}`` shape of `ragtrace traces --json`."""
        return {"id": self.id, "rank": self.rank, "score": self.score}


@dataclass(frozen=True)
class TraceRecord:
    """Everything the evaluator needs about one query, assembled from all its spans."""

    trace_id: str
    query_id: str
    tenant: str
    service: str
    release: str
    environment: str
    route: str
    start_time: datetime
    query: str
    answer: str | None
    retrieved: tuple[DocumentRef, ...] = ()
    reranked: tuple[DocumentRef, ...] = ()
    #: exactly what the generator was given, in order (derived from reranked[:top_k] or
    #: retrieved when the instrumentation did not record it)
    context: tuple[DocumentRef, ...] = ()
    #: gold document ids of the ``gold`` table: the trace's own (sent on its spans, or a reviewer's
    #: judgement), else its query id's qrels. Evidence spans are in `gold_evidence`; `all_gold_ids`
    #: is both, what readers show
    gold_ids: tuple[str, ...] = ()
    #: the reference (correct) answer when one is known: sent on the root span
    #: (``ragtrace.reference.answer``) or imported by query id (`ragtrace labels import REFS.jsonl`)
    reference: str | None = None
    #: False when the trace lost attributes or a stage (`incomplete_reasons` says which): its
    #: pool, order, context or answer cannot be trusted, so it is never given a failure mode
    complete: bool = True
    #: the context was derived rather than recorded by the SDK
    context_derived: bool = False
    #: where the context came from: ``recorded`` (``ragtrace.context.documents``), ``prompt`` (the
    #: documents whose text the generation span's prompt contains), ``reranker_top_k``,
    #: ``reranked`` or ``retrieved`` (guesses, when no prompt text can be read)
    context_source: str = "recorded"
    #: why the trace is incomplete, one ``"<reason>: <detail>"`` per problem (`ragtrace_store.assembly`)
    incomplete_reasons: tuple[str, ...] = ()
    #: the trace retrieves or generates under its root (or its root is the SDK's); False only for
    #: the other roots that ``read_traces(include_all=True)`` also returns
    is_query: bool = True
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    #: the span id of the trace's root (the span its query and answer are read from); what labels
    #: exported as evaluation events attach to ('' when unknown)
    root_span_id: str = ""
    #: the evidence spans (``gold_spans``) of the trace's query id placed on the chunks this trace saw
    #: (`ragtrace_store.evidence_gold.place_evidence`): each with the chunk that holds it, or none
    gold_evidence: tuple[GoldEvidence, ...] = ()

    @property
    def all_gold_ids(self) -> tuple[str, ...]:
        """Every gold id of the trace, sorted: `gold_ids` and the chunks that hold its evidence spans."""
        return tuple(sorted({*self.gold_ids, *(e.doc_id for e in self.gold_evidence if e.doc_id)}))

    def as_json(self, *, with_content: bool = False) -> dict[str, Any]:
        """The object `ragtrace traces --json` prints (and `GET /api/traces` returns) for this trace."""
        def docs(items: tuple[DocumentRef, ...]) -> list[dict[str, Any]]:
            out = []
            for d in items:
                ref = d.as_ref()
                if with_content:
                    ref["content"] = d.content
                out.append(ref)
            return out

        return {
            "trace_id": self.trace_id, "query_id": self.query_id, "query": self.query, "answer": self.answer,
            "release": self.release, "service": self.service, "environment": self.environment,
            "start_time": self.start_time.isoformat() if isinstance(self.start_time, datetime) else None,
            "gold_ids": list(self.all_gold_ids), "gold_evidence": [e.as_json() for e in self.gold_evidence],
            "retrieved": docs(self.retrieved), "reranked": docs(self.reranked),
            "context": docs(self.context), "context_derived": self.context_derived, "reference": self.reference,
            "context_source": self.context_source, "complete": self.complete,
            "incomplete_reasons": list(self.incomplete_reasons), "is_query": self.is_query,
        }
