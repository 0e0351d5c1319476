"""The read model: stored spans, documents, gold and references assembled into `TraceRecord`s.

Every reader (the `traces` command, the evaluator, the review UI) goes through `read_traces`, so a
trace reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import orjson

from ragtrace_store.assembly import (
    STAGE_KINDS,
    SpanNode,
    StageList,
    assemble_query,
    document_id_from_metadata,
    document_score_from_metadata,
    query_input_keys,
)
from ragtrace_store.clock import as_utc
from ragtrace_store.evidence_gold import place_evidence
from ragtrace_store.filters import TraceFilter
from ragtrace_store.gold_judgements import relevant_judgements
from ragtrace_store.gold_spans import read_gold_spans
from ragtrace_store.records import DEFAULT_TENANT, STAGE_CONTEXT, DocumentRef, TraceRecord

if TYPE_CHECKING:
    from ragtrace_store.client import Store

#: `queries.root_priority` of the span the ragtrace SDK marks as the root (see 0001_core.sql)
SDK_ROOT_PRIORITY = 3


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
    include_all: bool = False,
    cursor: str | None = None,
) -> Iterator[TraceRecord]:
    """Assembled queries, newest first (ties by trace id ascending: `ragtrace_store.listing`). Only
    traces whose root span has arrived are returned, and only queries (`ragtrace_store.query_roots`)
    unless ``include_all`` (the others have ``is_query`` False). ``cursor`` (`ragtrace_store.paging.encode_cursor`
    of the same listing: ``TraceListing(TraceFilter(...), include_all=...)`` of these arguments)
    continues a listing after the trace it names; a cursor of other filters, or not a cursor,
    raises `ragtrace_store.paging.CursorError`."""
    from ragtrace_store.listing import TraceListing, root_page
    from ragtrace_store.paging import decode_cursor

    listing = TraceListing(TraceFilter(tenant=tenant, service=service, release=release, since=since, until=until,
                                       trace_ids=trace_ids), include_all=include_all)
    # a time listing's cursor decodes to a start time (`decode_cursor`)
    after = None if cursor is None else cast(tuple[datetime, str], decode_cursor(cursor, listing))
    ids = listing.filter.trace_ids
    if ids is not None:
        # Listed ids: their root rows are read in one pass (rows of random ids sit in most of the
        # table's granules, so each query over them costs about a pass; the root rows are small),
        # and assembled 2,000 at a time (their documents, gold, references and spans: one pass each).
        roots = root_page(store, listing, after, limit or max(1, len(set(ids))))
        for i in range(0, len(roots), _LISTED_CHUNK):
            yield from _assemble(store, tenant, roots[i:i + _LISTED_CHUNK], with_content)
        return
    # Pages of roots (keyset pagination on the listing's order), each assembled before the next is
    # read, so memory stays bounded however large the store is.
    page = 500
    left = limit
    while left is None or left > 0:
        n = page if left is None else min(page, left)
        roots = root_page(store, listing, after, n)
        if not roots:
            return
        yield from _assemble(store, tenant, roots, with_content)
        if len(roots) < n:
            return
        after = (roots[-1][6], roots[-1][0])
        if left is not None:
            left -= len(roots)


#: listed traces assembled at a time (what one reader holds of their documents)
_LISTED_CHUNK = 2000


def count_roots(store: Store, flt: TraceFilter) -> dict[str, int]:
    """``{"queries": n, "other": m}``: the traces `read_traces` returns, and the other roots, exactly
    (each trace's winning root row, no FINAL; memory grows with the matching traces: a bounded count
    for listings is `ragtrace_store.listing.count_traces`)."""
    from ragtrace_store.listing import count_traces

    got = count_traces(store, flt, exact_up_to=None)
    return {"queries": got.queries, "other": got.others or 0}


def _assemble(store: Store, tenant: str, roots: list[tuple[Any, ...]], with_content: bool) -> Iterator[TraceRecord]:
    ids = [r[0] for r in roots]
    params = {"tenant": tenant, "ids": ids}
    content_col = "p.content" if with_content else "''"
    docs = store.query_rows(
        f"SELECT d.trace_id, d.stage, d.span_id, d.rank, d.doc_id, d.score, d.content_hash, "
        f"{content_col}, d.metadata, d.top_k, d.start_time "
        f"FROM (SELECT trace_id, stage, span_id, rank, doc_id, score, content_hash, metadata, top_k, start_time, "
        f"received_at FROM {store.table('documents')} "
        "WHERE tenant = {tenant:String} AND trace_id IN {ids:Array(String)} "
        # the table's key, newest version first: what FINAL would keep, for these traces only
        "ORDER BY received_at DESC LIMIT 1 BY trace_id, stage, span_id, rank) AS d "
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
        "WHERE d.received_at >= s.span_received "
        "ORDER BY d.trace_id, d.stage, d.start_time, d.span_id, d.rank",
        params,
    )
    by_trace: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
    for row in docs:
        by_trace.setdefault(row[0], {}).setdefault(row[1], []).append(row)
    gold_by_trace: dict[str, set[str]] = {}
    gold_by_query: dict[str, set[str]] = {}
    for judged in relevant_judgements(store, tenant=tenant, trace_ids=ids, query_ids=[r[1] for r in roots]):
        if judged.trace_id:
            gold_by_trace.setdefault(judged.trace_id, set()).add(judged.doc_id)
        else:
            gold_by_query.setdefault(judged.query_id, set()).add(judged.doc_id)
    # evidence spans are keyed by query id; each trace places them on the chunks it saw
    evidence_spans = read_gold_spans(store, tenant=tenant, query_ids=[r[1] for r in roots if r[1]])
    ref_by_trace, ref_by_query = _references(store, tenant, ids, [r[1] for r in roots if r[1]])
    spans = _span_nodes(store, tenant, ids)

    # Span attributes and passage text are read only for the traces that need them: the SDK
    # records query, answer and context explicitly, other clients leave them to be read from the
    # LLM and retriever spans (`ragtrace_store.assembly`).
    need_attrs, need_text = [], []
    for trace_id, _qid, _svc, _rel, _env, _route, _start, query, answer, _span_id, priority, _kind in roots:
        stages = by_trace.get(trace_id, {})
        kinds = {n.kind for n in spans.get(trace_id, {}).values()}
        sdk = priority == SDK_ROOT_PRIORITY
        recover = STAGE_CONTEXT not in stages and "LLM" in kinds
        if recover or ((answer is None or not sdk) and "LLM" in kinds) or (not sdk and _maybe_mapping(query)):
            need_attrs.append(trace_id)
        if recover and not with_content:
            need_text.append(trace_id)
    attrs = _span_attributes(store, tenant, need_attrs)
    texts = _passage_texts(store, tenant, [r[6] for t in need_text for rows in by_trace.get(t, {}).values()
                                           for r in rows if r[6]])
    query_keys = query_input_keys()

    for trace_id, query_id, service, release, env, route, start, query, answer, span_id, priority, kind in roots:
        stages = by_trace.get(trace_id, {})
        nodes = spans.get(trace_id, {})
        if trace_id in attrs:
            nodes = {s: replace(n, attributes=attrs[trace_id].get(s)) for s, n in nodes.items()}
        lists = {stage: _stage_lists(rows, with_content, texts) for stage, rows in stages.items()}
        got = assemble_query(root_span_id=span_id, sdk_root=priority == SDK_ROOT_PRIORITY, query=query,
                             answer=answer, spans=nodes, stages=lists, query_keys=query_keys)
        gold = gold_by_trace.get(trace_id) or gold_by_query.get(query_id, set())
        evidence = place_evidence(evidence_spans.get(query_id, ()), (*got.retrieved, *got.reranked, *got.context))
        yield TraceRecord(
            trace_id=trace_id, query_id=query_id, tenant=tenant, service=service, release=release,
            environment=env, route=route, start_time=as_utc(start), query=got.query, answer=got.answer,
            retrieved=_shown(got.retrieved, with_content), reranked=_shown(got.reranked, with_content),
            context=_shown(got.context, with_content), gold_ids=tuple(sorted(gold)),
            reference=ref_by_trace.get(trace_id) or ref_by_query.get(query_id),
            complete=not got.incomplete_reasons, context_derived=got.context_source != "recorded",
            context_source=got.context_source, incomplete_reasons=got.incomplete_reasons,
            # the rule `ragtrace_store.query_roots` keeps at ingest
            is_query=priority in (0, SDK_ROOT_PRIORITY) or (kind not in STAGE_KINDS and any(
                n.kind in STAGE_KINDS for n in nodes.values())),
            root_span_id=span_id, gold_evidence=evidence,
        )


def _references(store: Store, tenant: str, trace_ids: list[str],
                query_ids: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Reference answers ``(by trace id, by query id)``: one sent on a trace's spans
    (``ragtrace.reference.answer``) is keyed by its trace and wins for that trace; imported ones
    (trace_id '') apply to every trace of their query id."""
    rows = store.query_rows(
        # the newest reference of each (query, trace) decides; a blank one is none
        "SELECT query_id, trace_id, ref FROM (SELECT query_id, trace_id, argMax(reference, added_at) AS ref "
        f"FROM {store.table('reference_answers')} WHERE tenant = {{tenant:String}} "
        "AND (trace_id IN {ids:Array(String)} OR (trace_id = '' AND query_id IN {qids:Array(String)})) "
        "GROUP BY query_id, trace_id) WHERE ref != ''",
        {"tenant": tenant, "ids": trace_ids, "qids": query_ids},
    )
    by_trace = {t: ref for _q, t, ref in rows if t}
    by_query = {q: ref for q, t, ref in rows if not t}
    return by_trace, by_query


def _maybe_mapping(query: str) -> bool:
    return not query.strip() or query.lstrip().startswith("{")


def _span_nodes(store: Store, tenant: str, trace_ids: list[str]) -> dict[str, dict[str, SpanNode]]:
    """The tree of each trace: every span's id, parent, kind, name, times, dropped-attribute count and
    the attributes whose values arrived cut (no attributes)."""
    rows = store.query_rows(
        f"SELECT trace_id, span_id, parent_span_id, kind, name, start_time, end_time, dropped_attributes, "
        f"cut_attributes FROM {store.table('spans')} WHERE tenant = {{tenant:String}} "
        "AND trace_id IN {ids:Array(String)} ORDER BY received_at DESC LIMIT 1 BY trace_id, span_id",
        {"tenant": tenant, "ids": trace_ids},
    )
    out: dict[str, dict[str, SpanNode]] = {}
    for trace_id, span_id, parent, kind, name, start, end, dropped, cut in rows:
        out.setdefault(trace_id, {})[span_id] = SpanNode(span_id, parent, kind, name, start, end, int(dropped),
                                                         cut_attributes=tuple(cut))
    return out


def _span_attributes(store: Store, tenant: str, trace_ids: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{trace: {span: attributes}}`` of the LLM, retriever and reranker spans of these traces."""
    if not trace_ids:
        return {}
    rows = store.query_rows(
        f"SELECT trace_id, span_id, attributes FROM {store.table('spans')} "
        "WHERE tenant = {tenant:String} AND trace_id IN {ids:Array(String)} AND kind IN {kinds:Array(String)} "
        "ORDER BY received_at DESC LIMIT 1 BY trace_id, span_id",
        {"tenant": tenant, "ids": trace_ids, "kinds": list(STAGE_KINDS)},
    )
    out: dict[str, dict[str, dict[str, Any]]] = {t: {} for t in trace_ids}
    for trace_id, span_id, attributes in rows:
        try:
            parsed = orjson.loads(attributes) if attributes else {}
        except orjson.JSONDecodeError:
            parsed = {}
        out[trace_id][span_id] = parsed if isinstance(parsed, dict) else {}
    return out


def _passage_texts(store: Store, tenant: str, hashes: list[str]) -> dict[str, str]:
    """Passage text by content hash (the longest copy), for matching documents against prompts."""
    if not hashes:
        return {}
    rows = store.query_rows(
        f"SELECT content_hash, argMax(content, content_length) FROM {store.table('passages')} "
        "WHERE tenant = {tenant:String} AND content_hash IN {hashes:Array(String)} GROUP BY content_hash",
        {"tenant": tenant, "hashes": list(dict.fromkeys(hashes))},
    )
    return {h: c for h, c in rows if c}


def _stage_lists(rows: list[tuple[Any, ...]], with_content: bool, texts: dict[str, str]) -> list[StageList]:
    """One stage's document rows (ordered by start time, span, rank) as one list per span."""
    # each span's documents gathered in a list and made a tuple once: appending to a tuple row by
    # row copied it every time, quadratic in a span's documents (23 s for one span of 100k)
    spans: list[tuple[Any, Any, list[DocumentRef], list[int]]] = []
    for r in rows:
        if not spans or spans[-1][0] != r[2]:
            spans.append((r[2], r[10], [], []))
        content = (r[7] or None) if with_content else texts.get(r[6])
        spans[-1][2].append(DocumentRef(id=document_id_from_metadata(r[4], r[8]), rank=int(r[3]),
                                        score=document_score_from_metadata(r[5], r[8]), content_hash=r[6],
                                        content=content, metadata=r[8]))
        if r[9] is not None and not spans[-1][3]:
            spans[-1][3].append(int(r[9]))  # the span's first top_k given
    return [StageList(span_id, start, tuple(docs), top_k[0] if top_k else None)
            for span_id, start, docs, top_k in spans]


def _shown(docs: tuple[DocumentRef, ...], with_content: bool) -> tuple[DocumentRef, ...]:
    """Passage text read only to recover the context stays out of records read without content."""
    return docs if with_content else tuple(replace(d, content=None) if d.content is not None else d for d in docs)
