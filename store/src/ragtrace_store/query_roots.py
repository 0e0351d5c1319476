"""The root rows that can be queries, kept apart when they are written, so that readers never walk
the roots that are not.

A trace is listed, counted and sampled when its winning root row (`ragtrace_store.roots`) is a query
(`ragtrace_store.traces.query_condition`): a root the ragtrace SDK marked (``root_priority`` 3), a row
another tool wrote (0), or another parentless span (1, 2) that is not itself a retriever, reranker or
LLM span and whose trace has such a span. Anyone who can send spans can add roots that are not
queries: one request of 300,000 parentless spans without attributes is well under every limit. A
reader that took its candidates from all of ``queries`` and then looked for the queries among them
paid for every such root (a listing of 5,000 traces ran for over ten minutes on such a store).

``query_roots`` (migration 0010) holds a copy of every root row that meets the rule (the values
readers filter and sort by; no text). Readers take their candidates from it, by time (its key) or
by hash (its ``by_hash`` projection), and still decide each candidate trace's winner from all its
rows in ``queries`` and check the rule on it: ``query_roots`` says where to look, so what a listing,
count or sample reads grows with the queries it returns, not with whatever else a tenant's store
holds. A row may be copied twice (a retried batch, a backfill run again); readers take trace ids
from it, never counts they report as exact.

Who writes it:

- the rows that are queries by their priority alone (3, 0): a materialized view on ``queries``,
  whoever inserts them;
- a root of priority 1 or 2 that is not a stage span, once its trace has a stage span: the
  collector's writer after each batch (`mark_batch`). When the root and a stage span of its trace
  are in the same batch (a trace's spans end together and are exported together: the usual case)
  the batch says so. Otherwise (a gateway's span exported apart from the pipeline's, a retriever in
  another service, a batch boundary) the two small tables of migration 0010 are asked about those
  traces only (`mark_stored`): ``stage_traces`` (the traces with a stage span) and ``other_roots``
  (the roots of priority 1 and 2 that are not stage spans), both views, both keyed by trace id
  with small granules, so a lookup costs a few hundred rows per trace id, whatever ``queries`` and
  ``spans`` hold; a batch of roots that are not queries costs one lookup of its ids (sorted, in
  chunks: at most one pass over ``stage_traces``);
- migration 0010's backfills, for the rows written before it.

One case is not marked: a trace with two different parentless spans, one of them stored before
any stage span of the trace and the other arriving later in a batch with one. That needs two roots
with one trace id, which an OpenTelemetry SDK does not make (a span without a parent starts a new
trace); a retried copy of a span is the same row.

A tool that writes root rows of priority 1 or 2 into ``queries`` itself (not through the collector)
calls `mark_stored` with their trace ids once the rows and the traces' spans are written.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragtrace_store.assembly import STAGE_KINDS

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["QUERY_ROOTS", "QUERY_ROOT_COLUMNS", "mark_batch", "mark_stored"]

#: the table (migration 0010)
QUERY_ROOTS = "query_roots"
#: its columns: those of ``queries`` the readers filter and sort candidates by
QUERY_ROOT_COLUMNS = ("tenant", "trace_id", "span_id", "service", "release", "route", "start_time", "root_priority",
                      "kind", "received_at")
#: the priorities whose rows are queries only when their trace has a stage span
_OTHER_ROOTS = (1, 2)


def mark_batch(store: Store, roots: Mapping[str, Sequence[Any]], staged: Collection[tuple[str, str]],
               time_columns: frozenset[str] = frozenset()) -> int:
    """Copy into ``query_roots`` the root rows of priority 1 or 2 that a batch just written makes
    queries (the view copies those of 3 and 0 itself); returns the rows copied from the batch.

    ``roots`` are the batch's ``queries`` columns (as `Store.insert_columns` takes them, times in
    ``time_columns`` as integer milliseconds); ``staged`` the (tenant, trace id) pairs with a
    retriever, reranker or LLM span in the batch. Call it once the batch's ``spans`` and ``queries``
    rows are in the store: what the batch cannot settle is looked up there (`mark_stored`)."""
    tenants, traces = roots["tenant"], roots["trace_id"]
    other = [i for i, (p, k) in enumerate(zip(roots["root_priority"], roots["kind"], strict=True))
             if p in _OTHER_ROOTS and k not in STAGE_KINDS]
    copy: list[int] = []
    ask: dict[str, list[str]] = {}
    for i in other:
        if (tenants[i], traces[i]) in staged:
            copy.append(i)
        else:  # its stage spans may have come in an earlier batch
            ask.setdefault(tenants[i], []).append(traces[i])
    if staged:
        rooted = set(zip(tenants, traces, strict=True))
        for tenant, trace_id in staged:
            if (tenant, trace_id) not in rooted:  # its root may have come in an earlier batch
                ask.setdefault(tenant, []).append(trace_id)
    if copy:
        store.insert_columns(QUERY_ROOTS, {c: [roots[c][i] for i in copy] for c in QUERY_ROOT_COLUMNS},
                             time_columns & frozenset(QUERY_ROOT_COLUMNS))
    for tenant, ids in ask.items():
        mark_stored(store, tenant, ids)
    return len(copy)


def mark_stored(store: Store, tenant: str, trace_ids: Iterable[str]) -> None:
    """Copy into ``query_roots`` the stored roots of priority 1 or 2 of these traces that are
    queries: not stage spans themselves, in a trace with a stored stage span (``other_roots`` and
    ``stage_traces``). A row copied before is copied again (harmless, see the module docstring).

    One statement (`Store.command_over_traces`): the ids are looked up in ``stage_traces`` by its
    key, and ``other_roots`` is read only for those with a stage span (none at all for a batch of
    roots that are not queries)."""
    cols = ", ".join(QUERY_ROOT_COLUMNS)
    store.command_over_traces(
        f"INSERT INTO {store.table(QUERY_ROOTS)} ({cols}) SELECT {cols} FROM {store.table('other_roots')} "
        f"WHERE (tenant, trace_id) IN (SELECT tenant, trace_id FROM {store.table('stage_traces')} "
        "WHERE (tenant, trace_id) IN (SELECT tenant, trace_id FROM {traces}))", tenant, list(trace_ids))
