"""What ``/traces/{trace_id}`` shows: the whole query, every label it has, and what people said.

The trace itself (candidates per stage, supplied context, answer with claims) is the same
`view.ItemView` the review item page renders, built by `view.trace_view` from the label of the
chosen manifest; around it: every manifest's label of this trace (never mixed: one is shown in
full, the others are listed with their manifest), the human review decisions from every queue,
user feedback, the gold set with where each gold document came from, and the reference answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragtrace_review.explorer.trace_list import ManifestInfo, manifest_infos
from ragtrace_review.queues import Decision, decisions_for_trace, queue_names
from ragtrace_review.view import ItemView, trace_view
from ragtrace_store import LabelError, LabelRecord, Store, TraceRecord, read_labels
from ragtrace_store.feedback import Feedback, trace_feedback
from ragtrace_store.gold_judgements import GoldDoc, trace_gold

__all__ = ["Feedback", "GoldDoc", "LabelEntry", "TracePageView", "trace_page_view"]


@dataclass(frozen=True)
class LabelEntry:
    label: LabelRecord
    manifest: ManifestInfo | None


@dataclass(frozen=True)
class TracePageView:
    trace_id: str
    trace: TraceRecord | None
    view: ItemView
    #: the label shown in full (of ``manifest_id``), None when this trace has none under it
    label: LabelRecord | None
    manifest_id: str | None
    #: every manifest's label of this trace, most recently used manifest first
    labels: tuple[LabelEntry, ...]
    decisions: tuple[Decision, ...]
    feedback: tuple[Feedback, ...]
    gold: tuple[GoldDoc, ...]
    queues: tuple[str, ...]
    #: a label row that breaks the contract (shown instead of hiding the trace)
    label_error: str | None = None

    @property
    def found(self) -> bool:
        return self.trace is not None or bool(self.labels)


def trace_page_view(store: Store, *, tenant: str, trace_id: str, manifest_id: str | None = None) -> TracePageView:
    """Everything about one trace of ``tenant``; ``manifest_id`` picks the label shown in full
    (default: the most recently used manifest that labelled this trace)."""
    traces = list(store.read_traces(tenant=tenant, trace_ids=[trace_id], with_content=True))
    trace = traces[0] if traces else None
    label_error = None
    try:
        # most recently used manifest first (read_labels' order)
        records = read_labels(store, tenant=tenant, trace_ids=[trace_id])
    except LabelError as exc:
        records, label_error = [], str(exc)
    manifests = manifest_infos(store, [r.manifest_id for r in records])
    entries = tuple(LabelEntry(r, manifests.get(r.manifest_id)) for r in records)
    chosen = next((r for r in records if r.manifest_id == manifest_id), None) if manifest_id else \
        (records[0] if records else None)
    view = trace_view(trace, chosen)
    query_id = trace.query_id if trace else ""
    feedback = tuple(trace_feedback(store, tenant=tenant, trace_id=trace_id, query_id=query_id))
    # which source each gold document came from: the same rule read_traces applies (gold keyed by
    # this trace wins over gold keyed by its query id)
    gold = tuple(trace_gold(store, tenant=tenant, trace_id=trace_id, query_id=query_id))
    return TracePageView(
        trace_id=trace_id, trace=trace, view=view, label=chosen,
        manifest_id=chosen.manifest_id if chosen else manifest_id, labels=entries,
        decisions=tuple(decisions_for_trace(store, tenant=tenant, trace_id=trace_id)),
        feedback=feedback, gold=gold, queues=tuple(queue_names(store, tenant=tenant)), label_error=label_error,
    )
