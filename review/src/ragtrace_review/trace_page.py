"""What ``/traces/{trace_id}`` shows: the whole query, every label it has, and what people said.

The trace itself (candidates per stage, supplied context, answer with claims) is the same
`view.ItemView` the review item page renders, built by `view.trace_view` from the label of the
chosen manifest; around it: every manifest's label of this trace (never mixed: one is shown in
full, the others are listed with their manifest), the human review decisions from every queue,
user feedback, the gold set with where each gold document came from, and the reference answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ragtrace_review.queues import Decision, decisions_for_trace, queue_names
from ragtrace_review.trace_list import ManifestInfo, manifest_infos
from ragtrace_review.view import ItemView, trace_view
from ragtrace_store import LabelError, LabelRecord, Store, TraceRecord, as_utc, read_labels


@dataclass(frozen=True)
class Feedback:
    score: float | None
    comment: str
    added_at: datetime | None


@dataclass(frozen=True)
class GoldDoc:
    doc_id: str
    relevance: int
    source: str  # span | qrels | review


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
    params = {"tenant": tenant, "t": trace_id, "q": trace.query_id if trace else ""}
    feedback = tuple(Feedback(None if s is None else float(s), str(c), as_utc(at) if at else None)
                     for s, c, at in store.query_rows(
                         # the newest version of each feedback key (what FINAL keeps), by key; a
                         # tuple, so a NULL score is kept as the newest version's, not skipped
                         "SELECT w.1, w.2, at FROM (SELECT argMax(tuple(score, comment), added_at) AS w, "
                         f"max(added_at) AS at FROM {store.table('feedback')} WHERE tenant = {{tenant:String}} "
                         "AND (trace_id = {t:String} OR (trace_id = '' AND query_id != '' AND query_id = {q:String})) "
                         "GROUP BY trace_id, query_id, span_id) ORDER BY at", params))
    # which source each gold document came from: the same rule read_traces applies (gold keyed by
    # this trace wins over gold keyed by its query id)
    gold_rows = store.query_rows(
        # the newest judgement of each (source, query, trace, document) decides, as in read_traces
        "SELECT trace_id, doc_id, rel, source FROM (SELECT source, query_id, trace_id, doc_id, "
        f"argMax(relevance, added_at) AS rel FROM {store.table('gold')} WHERE tenant = {{tenant:String}} "
        "AND (trace_id = {t:String} OR (trace_id = '' AND query_id != '' AND query_id = {q:String})) "
        "GROUP BY source, query_id, trace_id, doc_id) WHERE rel > 0 ORDER BY source, doc_id", params)
    by_trace = [r for r in gold_rows if r[0]]
    gold = tuple(GoldDoc(str(d), int(rel), str(src)) for _, d, rel, src in (by_trace or gold_rows))
    return TracePageView(
        trace_id=trace_id, trace=trace, view=view, label=chosen,
        manifest_id=chosen.manifest_id if chosen else manifest_id, labels=entries,
        decisions=tuple(decisions_for_trace(store, tenant=tenant, trace_id=trace_id)),
        feedback=feedback, gold=gold, queues=tuple(queue_names(store, tenant=tenant)), label_error=label_error,
    )
