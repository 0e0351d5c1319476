"""What a span means: its ``spans`` row, and whether it is a query root, an annotation, or rejected.

Spans of one trace arrive in any order and in different requests, so nothing here waits for a
trace to be whole: every span becomes rows keyed by (tenant, trace, span) and the store assembles
a query at read time (`Store.read_traces`). That makes late spans land, and replays idempotent
(ReplacingMergeTree on those keys). Per span, in `assemble_spans`:
- a span without valid ids, a second copy of a span in one request, or one whose documents claim
  a content hash their text does not have, is rejected with a reason for the sender;
- every other span is one ``spans`` row, with the attributes that are *not* document fields as JSON;
- an annotation span → ``gold`` or ``feedback`` rows about another trace (`annotations`);
- a query root → one ``queries`` row; gold ids and a reference answer on any span → ``gold`` and
  ``reference_answers`` rows;
- a span with documents → an entry of the plan the compiled walk makes ``documents`` rows from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from sys import getsizeof
from typing import Any

import orjson

from ragtrace import semconv as sc
from ragtrace_collector.annotations import add_annotation, add_gold, gold_ids
from ragtrace_collector.documents import DocumentSpan, document_options
from ragtrace_collector.interop import gen_ai_documents, gen_ai_kind, query_id_of
from ragtrace_collector.rows import COLUMNS, Rows
from ragtrace_collector.values import text_of
from ragtrace_store.cut_values import cut_attributes, cut_json, cut_message

#: Start times further than this from the arrival time are replaced by the arrival time: the
#: tables are partitioned by month, and a fuzzed timestamp must not create hundreds of partitions.
MAX_CLOCK_SKEW_MS = 366 * 86_400_000
MAX_FUTURE_MS = 86_400_000
#: What a ``spans`` row holds besides its attributes, events and name (counted by their size in memory):
#: its ids, times and list of cut keys as Python objects, and seventeen column slots; a ``queries`` row
#: besides its query and answer (`Rows.nbytes`). Measured on 100,000 attribute-less spans, each a query
#: root: 625 bytes a span with its query row, which these put at about 680.
SPAN_ROW_BYTES = 300
QUERY_ROW_BYTES = 150

_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}
#: The `spans` columns that vary per span, in the order of the row tuples.
_SPAN_VARYING = tuple(name for name in COLUMNS["spans"] if name not in ("tenant", "received_at"))

#: One span as the walk hands it over: (trace_id, span_id, parent_span_id, name, start_ns, end_ns,
#: status_code, status_message, events_or_None, other, documents_or_None, dropped_attributes_count).
#: ``other`` holds the non-document attributes as JSON-able values; ``documents`` is the span's
#: ordinal in the parsed request when it has document attributes, else None.
SpanTuple = tuple[Any, ...]
#: One ResourceSpans: its attributes and its spans, in request order.
SpanGroup = tuple[dict[str, Any], list[SpanTuple]]

#: why a span is rejected whose document text does not hash to the content hash it claims: the store
#: keeps one text per hash, so an unchecked claim would let any sender replace another's passage
HASH_MISMATCH = ("a document's content does not hash to its document.content_hash (the hex sha256 of the "
                 "UTF-8 text, as the ragtrace SDK sends it; send no hash and the collector computes it): "
                 "span rejected")
#: why a second copy of a span (same trace and span id) in one request is rejected
DUPLICATE_SPAN = ("a span with the trace_id and span_id of an earlier span of this request: the later copy is "
                  "rejected (send each span once per request; a span re-sent in a later request replaces it)")


def _clamp_time(ms: int, received_ms: int) -> int:
    if ms <= 0 or ms < received_ms - MAX_CLOCK_SKEW_MS or ms > received_ms + MAX_FUTURE_MS:
        return received_ms
    return ms


def root_priority(parent: str, kind: str, other: dict[str, Any]) -> int:
    """Whether a span is a query root, and how sure we are (the highest priority per trace wins).

    3: the span the ragtrace SDK marks as the root (``ragtrace.sdk.version``: the outermost pipeline
    span, even under an HTTP server span); 2: a parentless CHAIN span (OpenInference
    instrumentation); 1: any other parentless span; 0: not a root.
    """
    if sc.SDK_VERSION in other:
        return 3
    if parent:
        return 0
    return 2 if kind == "CHAIN" else 1


def assemble_spans(rows: Rows, groups: Iterable[SpanGroup], tenant: str, received_ms: int,
                   verify: Callable[[int], bool]) -> list[DocumentSpan]:
    """Fill ``rows`` from the walk's spans (every table but ``documents`` and ``passages``) and return
    the spans whose documents the walk is to make rows of: GenAI document lists first, then spans
    with OpenInference document attributes, each in request order. ``verify(ordinal)``: whether the
    documents of that span have the content hashes they claim (False rejects it, `HASH_MISMATCH`)."""
    c = rows.cols
    q = c["queries"]
    span_rows: list[tuple[Any, ...]] = []
    in_request: set[bytes] = set()
    gen_ai_plan: list[DocumentSpan] = []
    plan: list[DocumentSpan] = []
    nbytes = 0
    for res_attrs, spans in groups:
        service = text_of(res_attrs.get(sc.SERVICE_NAME))
        release = text_of(res_attrs.get(sc.SERVICE_VERSION))
        environment = text_of(res_attrs.get(sc.DEPLOYMENT_ENVIRONMENT))
        resource_json = orjson.dumps(res_attrs).decode()
        for (tid, sid, parent_id, name, start_ns, end_ns, code, status_message, events_obj, other, docs,
             dropped) in spans:
            if len(tid) != 16 or not any(tid) or len(sid) != 8 or not any(sid):
                rows.rejected += 1
                rows.note("spans need a 16-byte non-zero trace_id and an 8-byte non-zero span_id")
                continue
            key = tid + sid
            if key in in_request:
                # Two copies in one request share its arrival time, so the store could not tell which
                # is newer: their document rows would mix into one list (a later request replaces).
                rows.rejected += 1
                rows.note(DUPLICATE_SPAN)
                continue
            in_request.add(key)
            if docs is not None:
                # under truncation a text need not hash to the claimed (full text's) hash: it is then
                # stored under its own hash instead, so it can replace nothing
                top_k, truncating = document_options(other)
                if not truncating and not verify(docs):
                    rows.rejected += 1
                    rows.note(HASH_MISMATCH)
                    continue
            trace_id, span_id = tid.hex(), sid.hex()
            parent = parent_id.hex() if parent_id else ""
            start_ms = _clamp_time(start_ns // 1_000_000, received_ms)
            end_ms = end_ns // 1_000_000
            end_ms = end_ms if start_ms <= end_ms <= start_ms + MAX_CLOCK_SKEW_MS else start_ms

            kind = text_of(other.get(sc.SPAN_KIND)).upper() or gen_ai_kind(other)
            if docs is None and sc.GEN_AI_RETRIEVAL_DOCUMENTS in other:
                value = other[sc.GEN_AI_RETRIEVAL_DOCUMENTS]
                listed = gen_ai_documents(value)
                if listed is None:
                    if not (isinstance(value, str) and cut_json(value)):  # a cut one is named below
                        rows.note(f"{sc.GEN_AI_RETRIEVAL_DOCUMENTS} must be an array of objects (or its JSON); "
                                  "kept only in the raw span")
                else:  # documents rows, like OpenInference's (and out of the raw span, like them)
                    del other[sc.GEN_AI_RETRIEVAL_DOCUMENTS]
                    gen_ai_plan.append((listed, trace_id, span_id, start_ms, None, False))
            # values the sender's SDK cut at its length limit: kept as they came, named on the span (the
            # read model decides whether the trace needed them) and to the sender
            cut = cut_attributes(other, kind)
            for key in cut:
                rows.note(cut_message(key, name, other[key]))
            status_code = _STATUS.get(code, "UNSET")
            events = "" if events_obj is None else orjson.dumps(events_obj).decode()
            attrs_json = orjson.dumps(other).decode()
            nbytes += getsizeof(attrs_json) + getsizeof(events) + getsizeof(name) + SPAN_ROW_BYTES

            span_rows.append((trace_id, span_id, parent, name, kind, service, release, environment,
                              start_ms, end_ms, status_code, status_message, attrs_json, events,
                              resource_json, dropped, cut))
            rows.spans += 1
            if dropped:
                # the sender's SDK hit its attribute limit: the trace is read as incomplete
                rows.dropped_attribute_spans += 1
                rows.note(f"{dropped} attributes of span {name[:80]!r} were dropped by the sender's SDK "
                          "(dropped_attributes_count); raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT")

            annotated = other.get(sc.ANNOTATES_TRACE_ID)
            query_id = text_of(other.get(sc.QUERY_ID)) or query_id_of(other)
            # An annotation names the trace it is about, or only a query id (gold/feedback
            # attached by `ragtrace.query.id`); either way it is never a query of its own.
            if annotated is not None or sc.ANNOTATION_KIND in other:
                add_annotation(rows, tenant, span_id, other, text_of(annotated).lower(), query_id, received_ms)
                continue

            priority = root_priority(parent, kind, other)
            if priority:
                answer = other.get(sc.OUTPUT_VALUE)
                q["tenant"].append(tenant)
                q["trace_id"].append(trace_id)
                q["span_id"].append(span_id)
                q["query_id"].append(query_id)
                q["service"].append(service)
                q["release"].append(release)
                q["environment"].append(environment)
                q["route"].append(text_of(other.get(sc.HTTP_ROUTE)))
                query = text_of(other.get(sc.INPUT_VALUE))
                answer = None if answer is None else text_of(answer)
                q["query"].append(query)
                q["answer"].append(answer)
                # the query and answer are strings of their own beside the span's attributes JSON
                nbytes += getsizeof(query) + getsizeof(answer) + QUERY_ROW_BYTES
                q["answer_streamed"].append(other.get(sc.ANSWER_STREAMED) is True)
                q["status_code"].append(status_code)
                q["start_time"].append(start_ms)
                q["duration_ms"].append(max(0, end_ns - start_ns) / 1e6 if end_ns else 0.0)
                q["root_priority"].append(priority)
                q["kind"].append(kind)
                q["received_at"].append(received_ms)
            ids = other.get(sc.GOLD_DOCUMENT_IDS)
            if ids is not None:  # on the root, or on a nested pipeline span: same trace
                for doc_id in gold_ids(rows, ids):
                    add_gold(rows, tenant, query_id, trace_id, doc_id, received_ms)
            reference = other.get(sc.REFERENCE_ANSWER)
            if reference is not None and text_of(reference).strip():  # like gold: any span of the trace
                ra = c["reference_answers"]
                for col, value in (("tenant", tenant), ("query_id", query_id), ("trace_id", trace_id),
                                   ("reference", text_of(reference).strip()), ("source", "span"),
                                   ("added_at", received_ms)):
                    ra[col].append(value)

            if docs is not None:
                plan.append((docs, trace_id, span_id, start_ms, top_k, truncating))
    if span_rows:
        # collected as tuples (one allocation per span); the store takes columns
        n = len(span_rows)
        cols = dict(zip(_SPAN_VARYING, map(list, zip(*span_rows, strict=True)), strict=True))
        cols["tenant"] = [tenant] * n
        cols["received_at"] = [received_ms] * n
        c["spans"] = {name: cols[name] for name in COLUMNS["spans"]}
    rows.nbytes += nbytes
    # GenAI documents go before every OpenInference document of the request
    return gen_ai_plan + plan
