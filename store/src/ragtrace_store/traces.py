"""The read model: stored spans, documents, gold and references assembled into `TraceRecord`s.

Every reader (the `traces` command, the evaluator, the review UI) goes through `read_traces`, so a
trace reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ragtrace_store.clock import as_utc
from ragtrace_store.filters import TraceFilter
from ragtrace_store.records import (
    DEFAULT_TENANT,
    STAGE_CONTEXT,
    STAGE_RERANKED,
    STAGE_RETRIEVED,
    DocumentRef,
    TraceRecord,
)

if TYPE_CHECKING:
    from ragtrace_store.client import Store


def read_traces(
    store: Store,
    *,
    tenant: str = DEFAULT_TENANT,
    service: str | None = None,
    release: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    trace_ids: Sequence[str] | None = None,
    limit: int | None = None,
    with_content: bool = False,
) -> Iterator[TraceRecord]:
    """Assembled queries, newest first. Only traces whose root span has arrived are returned."""
    where, params = TraceFilter(tenant=tenant, service=service, release=release, since=since, until=until,
                                trace_ids=trace_ids).conditions()
    # Pages of roots (keyset pagination on the sort order), each assembled before the next is
    # read, so memory stays bounded however large the store is.
    page = 500
    left = limit
    after: tuple[Any, str] | None = None
    while left is None or left > 0:
        cond = list(where)
        if after is not None:
            cond.append("(start_time < {after_t:DateTime64(3, 'UTC')} OR (start_time = "
                        "{after_t:DateTime64(3, 'UTC')} AND trace_id > {after_id:String}))")
            params["after_t"], params["after_id"] = after
        n = page if left is None else min(page, left)
        roots = store.query_rows(
            "SELECT trace_id, query_id, service, release, environment, route, start_time, query, answer "
            f"FROM {store.table('queries')} FINAL WHERE {' AND '.join(cond)} "
            f"ORDER BY start_time DESC, trace_id LIMIT {int(n)}", params)
        if not roots:
            return
        yield from _assemble(store, tenant, roots, with_content)
        if len(roots) < n:
            return
        after = (roots[-1][6], roots[-1][0])
        if left is not None:
            left -= len(roots)


def _assemble(store: Store, tenant: str, roots: list[tuple[Any, ...]], with_content: bool) -> Iterator[TraceRecord]:
    ids = [r[0] for r in roots]
    params = {"tenant": tenant, "ids": ids}
    content_col = "p.content" if with_content else "''"
    docs = store.query_rows(
        f"SELECT d.trace_id, d.stage, d.span_id, d.rank, d.doc_id, d.score, d.content_hash, "
        f"{content_col}, d.metadata, d.top_k, d.start_time "
        f"FROM {store.table('documents')} AS d FINAL "
        + (f"LEFT JOIN (SELECT content_hash, argMax(content, content_length) AS content "
           f"FROM {store.table('passages')} "
           "WHERE tenant = {tenant:String} AND content_hash IN (SELECT content_hash FROM "
           f"{store.table('documents')} WHERE tenant = {{tenant:String}} AND trace_id IN {{ids:Array(String)}}) "
           "GROUP BY content_hash) AS p ON p.content_hash = d.content_hash "
           if with_content else "")
        # A span re-sent with fewer documents must not keep the longer version's extra ranks:
        # only the rows of the span's latest version count. Every row of a request carries the
        # request's received_at (kept when the spool replays it), so that version is the span's
        # newest received_at; a document without a span row (never the case) is kept.
        + f"LEFT JOIN (SELECT trace_id, span_id, max(received_at) AS span_received FROM {store.table('spans')} "
        "WHERE tenant = {tenant:String} AND trace_id IN {ids:Array(String)} GROUP BY trace_id, span_id) AS s "
        "ON s.trace_id = d.trace_id AND s.span_id = d.span_id "
        "WHERE d.tenant = {tenant:String} AND d.trace_id IN {ids:Array(String)} "
        "AND d.received_at >= s.span_received "
        "ORDER BY d.trace_id, d.stage, d.start_time, d.span_id, d.rank",
        params,
    )
    by_trace: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
    for row in docs:
        by_trace.setdefault(row[0], {}).setdefault(row[1], []).append(row)
    gold_rows = store.query_rows(
        f"SELECT trace_id, query_id, doc_id FROM {store.table('gold')} FINAL "
        "WHERE tenant = {tenant:String} AND relevance > 0 AND (trace_id IN {ids:Array(String)} "
        "OR query_id IN {qids:Array(String)})",
        {**params, "qids": [r[1] for r in roots if r[1]]},
    )
    gold_by_trace: dict[str, set[str]] = {}
    gold_by_query: dict[str, set[str]] = {}
    for trace_id, query_id, doc_id in gold_rows:
        if trace_id:
            gold_by_trace.setdefault(trace_id, set()).add(doc_id)
        elif query_id:
            gold_by_query.setdefault(query_id, set()).add(doc_id)
    ref_by_trace, ref_by_query = _references(store, tenant, ids, [r[1] for r in roots if r[1]])
    answers = _generation_answers(store, [r[0] for r in roots if r[8] is None], tenant)
    for trace_id, query_id, service, release, env, route, start, query, answer in roots:
        stages = by_trace.get(trace_id, {})
        retrieved = _last_span(stages.get(STAGE_RETRIEVED, []), with_content)
        reranked = _last_span(stages.get(STAGE_RERANKED, []), with_content)
        context = _last_span(stages.get(STAGE_CONTEXT, []), with_content)
        derived = False
        if not context:
            # OpenInference-only instrumentation: the generator saw the reranker's top_k,
            # or the retriever's output when there was no reranker.
            derived = True
            if reranked:
                top_k = next((r[9] for r in stages.get(STAGE_RERANKED, []) if r[9] is not None), None)
                context = reranked[: int(top_k)] if top_k else reranked
            else:
                context = retrieved
        gold = gold_by_trace.get(trace_id) or gold_by_query.get(query_id, set())
        yield TraceRecord(
            trace_id=trace_id, query_id=query_id, tenant=tenant, service=service, release=release,
            environment=env, route=route, start_time=as_utc(start), query=query,
            answer=answer if answer is not None else answers.get(trace_id),
            retrieved=retrieved, reranked=reranked, context=context,
            gold_ids=tuple(sorted(gold)),
            reference=ref_by_trace.get(trace_id) or ref_by_query.get(query_id),
            complete=True, context_derived=derived,
        )


def _references(store: Store, tenant: str, trace_ids: list[str],
                query_ids: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Reference answers ``(by trace id, by query id)``: one sent on a trace's spans
    (``ragtrace.reference.answer``) is keyed by its trace and wins for that trace; imported ones
    (trace_id '') apply to every trace of their query id."""
    rows = store.query_rows(
        f"SELECT query_id, trace_id, reference FROM {store.table('reference_answers')} FINAL "
        "WHERE tenant = {tenant:String} AND reference != '' AND (trace_id IN {ids:Array(String)} "
        "OR (trace_id = '' AND query_id IN {qids:Array(String)}))",
        {"tenant": tenant, "ids": trace_ids, "qids": query_ids},
    )
    by_trace = {t: ref for _q, t, ref in rows if t}
    by_query = {q: ref for q, t, ref in rows if not t}
    return by_trace, by_query


def _generation_answers(store: Store, trace_ids: list[str], tenant: str) -> dict[str, str]:
    """The answer of a query whose root has none: the last generation span's ``output.value``."""
    if not trace_ids:
        return {}
    rows = store.query_rows(
        f"SELECT trace_id, argMax(JSONExtractString(attributes, 'output.value'), end_time) "
        f"FROM {store.table('spans')} FINAL WHERE tenant = {{tenant:String}} AND kind = 'LLM' "
        "AND trace_id IN {ids:Array(String)} GROUP BY trace_id",
        {"tenant": tenant, "ids": trace_ids},
    )
    return {r[0]: r[1] for r in rows if r[1]}


def _last_span(rows: list[tuple[Any, ...]], with_content: bool) -> tuple[DocumentRef, ...]:
    """Documents of the stage's last span (a query that retrieved twice keeps the final list)."""
    if not rows:
        return ()
    last = rows[-1][2]
    return tuple(
        DocumentRef(id=r[4], rank=int(r[3]), score=r[5], content_hash=r[6],
                    content=(r[7] or None) if with_content else None, metadata=r[8])
        for r in rows
        if r[2] == last
    )
