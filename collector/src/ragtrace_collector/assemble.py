"""OTLP spans → column-oriented rows for the store's tables, in one walk over the protobuf.

Spans of one trace arrive in any order and in different requests, so nothing here waits for a
trace to be whole: every span becomes rows keyed by (tenant, trace, span[, stage, rank]) and the
store assembles a query at read time (`Store.read_traces`). That makes late spans land, and
replays idempotent (ReplacingMergeTree on those keys).

What a span becomes:
- always one ``spans`` row, with the attributes that are *not* modelled below as JSON (document
  lists live in ``documents``/``passages``, so the raw row stays small);
- a query root → one ``queries`` row (and ``gold`` rows for ``ragtrace.gold.document_ids``);
- document attributes (OpenInference ``<prefix>.{i}.document.<field>``) → ``documents`` rows, text
  once per content hash in ``passages``;
- an annotation span (``ragtrace.annotates.trace_id``) → ``gold`` or ``feedback`` rows about the
  annotated trace.

Hot path: keys repeat across traces, so parsed attribute keys are cached; values are read with
the cheapest protobuf access that is right for the expected type.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ragtrace import semconv as sc
from ragtrace_store.cut_values import cut_attributes, cut_json, cut_message
from ragtrace_store.records import STAGE_CONTEXT, STAGE_RERANK_INPUT, STAGE_RERANKED, STAGE_RETRIEVED

#: Ranks beyond this are refused (kept only in the raw span): ranks are UInt32 and no service
#: hands a reranker ten million candidates.
MAX_RANK = 10_000_000
#: Start times further than this from the arrival time are replaced by the arrival time: the
#: tables are partitioned by month, and a fuzzed timestamp must not create hundreds of partitions.
MAX_CLOCK_SKEW_MS = 366 * 86_400_000
MAX_FUTURE_MS = 86_400_000

_PREFIX_STAGE = {
    sc.RETRIEVAL_DOCUMENTS: STAGE_RETRIEVED,
    sc.RERANKER_INPUT_DOCUMENTS: STAGE_RERANK_INPUT,
    sc.RERANKER_OUTPUT_DOCUMENTS: STAGE_RERANKED,
    sc.CONTEXT_DOCUMENTS: STAGE_CONTEXT,
}
# field codes, index into a document's slot list
F_ID, F_SCORE, F_CONTENT, F_META, F_HASH = range(5)
_FIELD_CODE = {
    sc.DOCUMENT_ID: F_ID,
    sc.DOCUMENT_SCORE: F_SCORE,
    sc.DOCUMENT_CONTENT: F_CONTENT,
    sc.DOCUMENT_METADATA: F_META,
    sc.DOCUMENT_CONTENT_HASH: F_HASH,
}

_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}

#: Column order of every table the collector writes (the store's `insert_columns` takes these).
COLUMNS: dict[str, tuple[str, ...]] = {
    "spans": ("tenant", "trace_id", "span_id", "parent_span_id", "name", "kind", "service", "release",
              "environment", "start_time", "end_time", "status_code", "status_message", "attributes",
              "events", "resource", "dropped_attributes", "cut_attributes", "received_at"),
    "queries": ("tenant", "trace_id", "span_id", "query_id", "service", "release", "environment", "route",
                "query", "answer", "answer_streamed", "status_code", "start_time", "duration_ms",
                "root_priority", "kind", "received_at"),
    "documents": ("tenant", "trace_id", "span_id", "stage", "rank", "doc_id", "score", "content_hash",
                  "metadata", "top_k", "start_time", "received_at"),
    "passages": ("tenant", "content_hash", "content", "content_length", "truncated", "first_seen"),
    "gold": ("tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"),
    "feedback": ("tenant", "trace_id", "query_id", "span_id", "score", "comment", "added_at"),
    "reference_answers": ("tenant", "query_id", "trace_id", "reference", "source", "added_at"),
}
#: The `spans` columns that vary per span, in the order of the walk's row tuples.
_SPAN_VARYING = tuple(name for name in COLUMNS["spans"] if name not in ("tenant", "received_at"))
#: Columns holding DateTime64(3) values, as integer milliseconds since the epoch (UTC).
TIME_COLUMNS = frozenset({"start_time", "end_time", "received_at", "first_seen", "added_at"})


@dataclass
class Rows:
    """Column lists for each table plus what the sender should hear about. Mutable accumulator."""

    cols: dict[str, dict[str, list[Any]]] = field(
        default_factory=lambda: {t: {c: [] for c in cs} for t, cs in COLUMNS.items()})
    spans: int = 0
    rejected: int = 0
    #: spans whose sender dropped attributes (``dropped_attributes_count`` > 0)
    dropped_attribute_spans: int = 0
    #: reasons for rejected spans and warnings about dropped attributes, deduplicated
    messages: list[str] = field(default_factory=list)
    #: approximate memory held, for the writer's bounded queue
    nbytes: int = 0
    #: rows as Arrow tables (columns in `COLUMNS` order), besides the lists: the native walk
    #: (`ragtrace_collector.native_walk`) hands over ``documents`` this way
    arrow: dict[str, list[Any]] = field(default_factory=dict)

    def count(self, table: str) -> int:
        first = COLUMNS[table][0]
        return len(self.cols[table][first]) + sum(int(t.num_rows) for t in self.arrow.get(table, ()))

    def extend(self, other: Rows) -> None:
        for table, cols in other.cols.items():
            mine = self.cols[table]
            for name, values in cols.items():
                mine[name].extend(values)
        for table, tables in other.arrow.items():
            self.arrow.setdefault(table, []).extend(tables)
        self.spans += other.spans
        self.rejected += other.rejected
        self.dropped_attribute_spans += other.dropped_attribute_spans
        self.nbytes += other.nbytes

    def note(self, message: str) -> None:
        if message not in self.messages and len(self.messages) < 20:
            self.messages.append(message)

    def error_message(self) -> str:
        return "; ".join(self.messages)


# --- key parsing -------------------------------------------------------------------------------
#: A document is addressed in the walk by one int, its stage's index times `_SLOT_STAGE` plus its
#: rank: ints hash and compare faster than (stage, rank) tuples, and they are built once per key.
_SLOT_STAGE = 1 << 24  # > MAX_RANK
_STAGE_NAMES = tuple(_PREFIX_STAGE.values())
_STAGE_INDEX = {stage: i for i, stage in enumerate(_STAGE_NAMES)}
_RERANKED_INDEX = _STAGE_INDEX[STAGE_RERANKED]
_RANK_MASK = _SLOT_STAGE - 1

_KEY_CACHE: dict[str, tuple[int, int] | None] = {}
_KEY_CACHE_MAX = 500_000


def parse_document_key(key: str) -> tuple[str, int, int] | None:
    """``retrieval.documents.3.document.id`` → (stage, 3, F_ID); None for any other attribute."""
    for prefix, stage in _PREFIX_STAGE.items():
        if key.startswith(prefix) and key[len(prefix) : len(prefix) + 1] == ".":
            rest = key[len(prefix) + 1 :]
            index, dot, fld = rest.partition(".")
            if not dot or not index.isascii() or not index.isdigit() or len(index) > 9:
                return None
            rank = int(index)
            code = _FIELD_CODE.get(fld)
            if code is None or rank > MAX_RANK:
                return None
            return stage, rank, code
    return None


def _key_info(key: str) -> tuple[int, int] | None:
    """`parse_document_key` as (slot, field code), cached: keys repeat across spans and traces."""
    parsed = parse_document_key(key)
    result = None if parsed is None else (_STAGE_INDEX[parsed[0]] * _SLOT_STAGE + parsed[1], parsed[2])
    if len(_KEY_CACHE) >= _KEY_CACHE_MAX:  # adversarial key streams must not grow memory
        _KEY_CACHE.clear()
    _KEY_CACHE[key] = result
    return result


# --- values ------------------------------------------------------------------------------------
def any_value(v: AnyValue) -> Any:
    """An OTLP AnyValue as a JSON-able Python value (bytes become hex)."""
    which = v.WhichOneof("value")
    if which == "string_value":
        return v.string_value
    if which == "int_value":
        return v.int_value
    if which == "double_value":
        d = v.double_value
        return d if d == d and d not in (float("inf"), float("-inf")) else str(d)
    if which == "bool_value":
        return v.bool_value
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return None


def _as_text(v: AnyValue) -> str:
    s = v.string_value
    if s:
        return s
    which = v.WhichOneof("value")
    if which is None or which == "string_value":
        return ""
    return value_text(any_value(v))


def _as_float(v: AnyValue) -> float | None:
    which = v.WhichOneof("value")
    if which == "double_value":
        d = v.double_value
        return d if d == d and abs(d) != float("inf") else None
    if which == "int_value":
        return float(v.int_value)
    if which == "string_value":
        try:
            d = float(v.string_value)
        except ValueError:
            return None
        return d if d == d and abs(d) != float("inf") else None
    return None


def _str_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(x) for x in value if x is not None and str(x) != ""]
    if isinstance(value, str) and value:
        # tolerate a JSON-encoded array or a single id
        if value.startswith("["):
            try:
                parsed = orjson.loads(value)
            except orjson.JSONDecodeError:
                return [value]
            return _str_list(parsed) if isinstance(parsed, list) else [value]
        return [value]
    return []


#: why gold ids of an unreadable type are not stored (said to the sender, not dropped in silence)
GOLD_IDS_TYPE = (f"{sc.GOLD_DOCUMENT_IDS} must be an array of document ids (strings or integers), or one id; "
                 "got a {type}: no gold stored from that span")


def _gold_ids(rows: Rows, value: Any) -> list[str]:
    """A span's gold ids: `_str_list`, plus a single integer id; any other type is told to the
    sender (partial_success) instead of storing no gold without a word."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [str(value)]
    if value is None or isinstance(value, list | str):
        return _str_list(value)
    rows.note(GOLD_IDS_TYPE.format(type={bool: "boolean", float: "double", dict: "key-value list"}.get(
        type(value), type(value).__name__)))
    return []


def _clamp_time(ms: int, received_ms: int) -> int:
    if ms <= 0 or ms < received_ms - MAX_CLOCK_SKEW_MS or ms > received_ms + MAX_FUTURE_MS:
        return received_ms
    return ms


# --- the walk ----------------------------------------------------------------------------------
#: One span as a walk hands it to `assemble_spans`: (trace_id, span_id, parent_span_id, name,
#: start_ns, end_ns, status_code, status_message, events_or_None, other, documents_or_None,
#: dropped_attributes_count).
#: ``other`` holds the non-document attributes as JSON-able values. ``documents`` is whatever the
#: walk's ``on_documents`` callback takes: here the five slot-keyed dicts of `_documents`, in the
#: native walk an index into its parsed request; None when the span has no document attribute.
SpanTuple = tuple[Any, ...]
#: One ResourceSpans: its attributes and its spans, in request order.
SpanGroup = tuple[dict[str, Any], list[SpanTuple]]


def extract_spans(request: ExportTraceServiceRequest) -> list[SpanGroup]:
    """The Python walk over a parsed request (`ragtrace_collector.native_walk` is the compiled one)."""
    groups: list[SpanGroup] = []
    key_get = _KEY_CACHE.get
    for rs in request.resource_spans:
        res_attrs = {kv.key: any_value(kv.value) for kv in rs.resource.attributes}
        spans: list[SpanTuple] = []
        for ss in rs.scope_spans:
            for span in ss.spans:
                # The hot loop (hundreds of attributes per span): one cached lookup per key says
                # whether it is a document field and which; document fields go to one dict per
                # field keyed by the document's (stage, rank) (last value wins, as for any
                # attribute), everything else to ``other``. Values are read with the accessor of
                # the expected type; slower paths only when that comes back empty.
                other: dict[str, Any] = {}
                ids: dict[int, str] = {}
                scores: dict[int, float | None] = {}
                contents: dict[int, Any] = {}
                metas: dict[int, str] = {}
                hashes: dict[int, str] = {}
                texts = (ids, None, None, metas, hashes)
                for kv in span.attributes:
                    key = kv.key
                    info = key_get(key, False)
                    if info is False:
                        info = _key_info(key)
                    if info is None:
                        v = kv.value
                        text = v.string_value
                        other[key] = text if text else any_value(v)
                        continue
                    slot, code = info  # type: ignore[misc]
                    if code == F_CONTENT:
                        # Kept unread (not even its value): the same passage usually appears at
                        # several stages of a trace, and its text is needed once per content hash.
                        contents[slot] = kv
                    elif code == F_SCORE:
                        v = kv.value
                        x = v.double_value
                        scores[slot] = x if (x and x - x == 0.0) else _as_float(v)
                    else:
                        v = kv.value
                        text = v.string_value
                        texts[code][slot] = text if text else _as_text(v)  # type: ignore[index]
                events = None
                if len(span.events) or len(span.links):
                    events = {
                        "events": [{"name": e.name, "time_ms": e.time_unix_nano // 1_000_000,
                                    "attributes": {kv.key: any_value(kv.value) for kv in e.attributes}}
                                   for e in span.events],
                        "links": [{"trace_id": ln.trace_id.hex(), "span_id": ln.span_id.hex()} for ln in span.links],
                    }
                status = span.status
                docs = (ids, scores, contents, metas, hashes) if ids or scores or contents or metas or hashes else None
                spans.append((span.trace_id, span.span_id, span.parent_span_id, span.name,
                              span.start_time_unix_nano, span.end_time_unix_nano, status.code, status.message,
                              events, other, docs, span.dropped_attributes_count))
        groups.append((res_attrs, spans))
    return groups


def python_text(content: Any) -> str:
    """The text of a ``contents`` value of the Python walk (a KeyValue)."""
    value = content.value
    return value.string_value or _as_text(value)


def value_text(value: Any) -> str:
    """A non-string attribute value (as `any_value` gives it) as text, as `_as_text` does: the
    native walk calls this for document ids, hashes, metadata and contents that are not strings."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def assemble(request: ExportTraceServiceRequest, tenant: str, received_ms: int,
             written: Mapping[tuple[str, str], int] | None = None) -> Rows:
    """All rows of one parsed OTLP request, by the Python walk. Never raises on content: bad spans
    are rejected with a reason.

    ``written`` maps (tenant, content hash) of passages the store already has to their length,
    positive when that copy was the full text (the writer's cache): a full passage sent again
    with its hash is then not even read.
    """
    rows = Rows()
    seen: dict[str, int] = {}
    verified: dict[str, str] = {}

    def on_documents(docs: Any, trace_id: str, span_id: str, other: dict[str, Any], start_ms: int) -> int:
        top_k, truncating = document_options(other)
        ids, scores, contents, metas, hashes = docs
        return _documents(rows.cols, seen, written, ids, scores, contents, metas, hashes, tenant, trace_id, span_id,
                          top_k, truncating, start_ms, python_text)

    def hashes_ok(docs: Any, other: dict[str, Any]) -> bool:
        # under truncation a text need not hash to the claimed (full text's) hash: it is then stored
        # under its own hash instead (`_documents`), so it can replace nothing
        return document_options(other)[1] or hashes_match(docs[2], docs[4], verified, python_text)

    return assemble_spans(rows, extract_spans(request), tenant, received_ms, on_documents, hashes_ok)


#: ``on_documents(documents, trace_id, span_id, other, start_ms) -> approximate bytes``
OnDocuments = Callable[[Any, str, str, dict[str, Any], int], int]
#: ``check_hashes(documents, other) -> bool``: False rejects the span (`HASH_MISMATCH`)
CheckHashes = Callable[[Any, dict[str, Any]], bool]

#: why a span is rejected whose document text does not hash to the content hash it claims: the store
#: keeps one text per hash, so an unchecked claim would let any sender replace another's passage
HASH_MISMATCH = ("a document's content does not hash to its document.content_hash (the hex sha256 of the "
                 "UTF-8 text, as the ragtrace SDK sends it; send no hash and the collector computes it): "
                 "span rejected")


#: why a second copy of a span (same trace and span id) in one request is rejected
DUPLICATE_SPAN = ("a span with the trace_id and span_id of an earlier span of this request: the later copy is "
                  "rejected (send each span once per request; a span re-sent in a later request replaces it)")


def hashes_match(contents: Mapping[int, Any], hashes: Mapping[int, str], verified: dict[str, str],
                 text_of: Callable[[Any], str]) -> bool:
    """Whether every document of a span that has both text and a claimed content hash hashes to it
    (sha256 hex of the UTF-8 text, as ``ragtrace._flatten`` computes it). ``verified`` (hash → text)
    is the request's memory of checked texts: a passage repeated at several stages is hashed once
    and then compared. ``native/otlp_walk.cc`` (``Request.verify``) does the same: change both."""
    for slot, chash in hashes.items():
        ref = contents.get(slot)
        if ref is None or not chash:
            continue
        text = text_of(ref)
        if not text:
            continue
        known = verified.get(chash)
        if known is None:
            if hashlib.sha256(text.encode("utf-8")).hexdigest() != chash:
                return False
            verified[chash] = text
        elif known != text:
            return False
    return True


def assemble_spans(rows: Rows, groups: Iterable[SpanGroup], tenant: str, received_ms: int,
                   on_documents: OnDocuments, check_hashes: CheckHashes | None = None) -> Rows:
    """Fill ``rows`` from a walk's spans: what each span means (a query root, an annotation, gold,
    a reference answer, a rejected span) is decided here, once for both walks; its documents are
    handed to ``on_documents``, after ``check_hashes`` accepted them."""
    c = rows.cols
    q, g, d = c["queries"], c["gold"], c["documents"]
    span_rows: list[tuple[Any, ...]] = []
    in_request: set[bytes] = set()
    gen_ai_docs: list[tuple[str, str, int, list[dict[str, Any]]]] = []
    nbytes = 0
    for res_attrs, spans in groups:
        service = _s(res_attrs.get(sc.SERVICE_NAME))
        release = _s(res_attrs.get(sc.SERVICE_VERSION))
        environment = _s(res_attrs.get(sc.DEPLOYMENT_ENVIRONMENT))
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
            if docs is not None and check_hashes is not None and not check_hashes(docs, other):
                rows.rejected += 1
                rows.note(HASH_MISMATCH)
                continue
            trace_id, span_id = tid.hex(), sid.hex()
            parent = parent_id.hex() if parent_id else ""
            start_ms = _clamp_time(start_ns // 1_000_000, received_ms)
            end_ms = end_ns // 1_000_000
            end_ms = end_ms if start_ms <= end_ms <= start_ms + MAX_CLOCK_SKEW_MS else start_ms

            kind = _s(other.get(sc.SPAN_KIND)).upper() or _gen_ai_kind(other)
            if docs is None and sc.GEN_AI_RETRIEVAL_DOCUMENTS in other:
                value = other[sc.GEN_AI_RETRIEVAL_DOCUMENTS]
                listed = _gen_ai_documents(value)
                if listed is None:
                    if not (isinstance(value, str) and cut_json(value)):  # a cut one is named below
                        rows.note(f"{sc.GEN_AI_RETRIEVAL_DOCUMENTS} must be an array of objects (or its JSON); "
                                  "kept only in the raw span")
                else:  # documents rows, like OpenInference's (and out of the raw span, like them)
                    del other[sc.GEN_AI_RETRIEVAL_DOCUMENTS]
                    gen_ai_docs.append((trace_id, span_id, start_ms, listed))
            # values the sender's SDK cut at its length limit: kept as they came, named on the span (the
            # read model decides whether the trace needed them) and to the sender
            cut = cut_attributes(other, kind)
            for key in cut:
                rows.note(cut_message(key, name, other[key]))
            status_code = _STATUS.get(code, "UNSET")
            events = "" if events_obj is None else orjson.dumps(events_obj).decode()
            attrs_json = orjson.dumps(other).decode()
            nbytes += len(attrs_json) + len(events) + 200

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
            query_id = _s(other.get(sc.QUERY_ID)) or _query_id(other)
            # An annotation names the trace it is about, or only a query id (gold/feedback
            # attached by `ragtrace.query.id`); either way it is never a query of its own.
            if annotated is not None or sc.ANNOTATION_KIND in other:
                _annotation(rows, tenant, span_id, other, _s(annotated).lower(), query_id, received_ms)
                continue

            priority = _root_priority(parent, kind, other)
            if priority:
                answer = other.get(sc.OUTPUT_VALUE)
                q["tenant"].append(tenant)
                q["trace_id"].append(trace_id)
                q["span_id"].append(span_id)
                q["query_id"].append(query_id)
                q["service"].append(service)
                q["release"].append(release)
                q["environment"].append(environment)
                q["route"].append(_s(other.get(sc.HTTP_ROUTE)))
                q["query"].append(_s(other.get(sc.INPUT_VALUE)))
                q["answer"].append(None if answer is None else _s(answer))
                q["answer_streamed"].append(other.get(sc.ANSWER_STREAMED) is True)
                q["status_code"].append(status_code)
                q["start_time"].append(start_ms)
                q["duration_ms"].append(max(0, end_ns - start_ns) / 1e6 if end_ns else 0.0)
                q["root_priority"].append(priority)
                q["kind"].append(kind)
                q["received_at"].append(received_ms)
            gold_ids = other.get(sc.GOLD_DOCUMENT_IDS)
            if gold_ids is not None:  # on the root, or on a nested pipeline span: same trace
                for doc_id in _gold_ids(rows, gold_ids):
                    _gold(g, tenant, query_id, trace_id, doc_id, received_ms)
            reference = other.get(sc.REFERENCE_ANSWER)
            if reference is not None and _s(reference).strip():  # like gold: any span of the trace
                ra = c["reference_answers"]
                for col, value in (("tenant", tenant), ("query_id", query_id), ("trace_id", trace_id),
                                   ("reference", _s(reference).strip()), ("source", "span"),
                                   ("added_at", received_ms)):
                    ra[col].append(value)

            if docs is not None:
                nbytes += on_documents(docs, trace_id, span_id, other, start_ms)
    if gen_ai_docs:
        # GenAI documents go before every OpenInference document of the request, in both walks alike
        # (the native walk adds its rows of those after this function returns)
        extra: dict[str, dict[str, list[Any]]] = {t: {col: [] for col in COLUMNS[t]} for t in ("documents", "passages")}
        seen: dict[str, int] = {}
        for trace_id, span_id, start_ms, listed in gen_ai_docs:
            ids, scores, contents, metas = _gen_ai_fields(listed)
            nbytes += _documents(extra, seen, None, ids, scores, contents, metas, {}, tenant, trace_id, span_id,
                                 None, False, start_ms, str)
        for table, cols in extra.items():
            for col, values in cols.items():
                if values:
                    c[table][col] = values + c[table][col]
    if span_rows:
        # collected as tuples (one allocation per span); the store takes columns
        n = len(span_rows)
        cols = dict(zip(_SPAN_VARYING, map(list, zip(*span_rows, strict=True)), strict=True))
        cols["tenant"] = [tenant] * n
        cols["received_at"] = [received_ms] * n
        c["spans"] = {name: cols[name] for name in COLUMNS["spans"]}
    n_docs = len(d["trace_id"])
    if n_docs:
        d["tenant"] = [tenant] * n_docs
        d["received_at"] = [received_ms] * n_docs
    n_pass = len(c["passages"]["content_hash"])
    if n_pass:
        c["passages"]["tenant"] = [tenant] * n_pass
        c["passages"]["first_seen"] = [received_ms] * n_pass
    rows.nbytes += nbytes
    return rows


def _s(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


#: ``gen_ai.operation.name`` values (OpenTelemetry GenAI conventions) → the OpenInference kind they
#: are read as, for spans that carry no ``openinference.span.kind``
_GEN_AI_KINDS = {"retrieval": sc.SpanKind.RETRIEVER.value, "chat": sc.SpanKind.LLM.value,
                 "text_completion": sc.SpanKind.LLM.value, "generate_content": sc.SpanKind.LLM.value,
                 "embeddings": sc.SpanKind.EMBEDDING.value}
#: keys of the root's OpenInference ``metadata`` JSON that hold the query id, in order
QUERY_ID_METADATA_KEYS = (sc.QUERY_ID, "query_id")


def _gen_ai_kind(other: dict[str, Any]) -> str:
    op = other.get(sc.GEN_AI_OPERATION_NAME)
    return _GEN_AI_KINDS.get(op, "") if isinstance(op, str) else ""


def _query_id(other: dict[str, Any]) -> str:
    """The query id of a span without ``ragtrace.query.id``: a `QUERY_ID_METADATA_KEYS` key of its
    OpenInference ``metadata`` (LangChain ``config={"metadata": ...}``, ``using_metadata``), else its
    ``session.id`` (``using_session``), else its GenAI ``gen_ai.conversation.id``. A session id is a
    query id only where a session is one query (an evaluation run): the README says so."""
    meta = other.get(sc.METADATA)
    if isinstance(meta, str) and meta.startswith("{"):
        try:
            meta = orjson.loads(meta)
        except orjson.JSONDecodeError:
            meta = None
    if isinstance(meta, dict):
        for key in QUERY_ID_METADATA_KEYS:
            value = meta.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
                return str(value)
    for key in (sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID):
        value = other.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _gen_ai_documents(value: Any) -> list[dict[str, Any]] | None:
    """``gen_ai.retrieval.documents`` (structured: an array of maps; or its JSON string) as a list of
    objects, None when it is neither."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        return None
    return value[: MAX_RANK + 1]


def _gen_ai_fields(listed: list[dict[str, Any]]) -> tuple[dict[int, str], dict[int, float | None], dict[int, str],
                                                          dict[int, str]]:
    """A GenAI document list as `_documents`' slot-keyed fields (stage ``retrieved``, rank = index):
    ``id``, ``score``, ``content`` and ``metadata`` (an object, kept as JSON)."""
    base = _STAGE_INDEX[STAGE_RETRIEVED] * _SLOT_STAGE
    ids: dict[int, str] = {}
    scores: dict[int, float | None] = {}
    contents: dict[int, str] = {}
    metas: dict[int, str] = {}
    for rank, doc in enumerate(listed):
        slot = base + rank
        doc_id = doc.get("id")
        ids[slot] = "" if doc_id is None or isinstance(doc_id, bool) else _s(doc_id)
        score = doc.get("score")
        scores[slot] = (float(score) if isinstance(score, int | float) and not isinstance(score, bool)
                        and math.isfinite(score) else None)
        content = doc.get("content")
        if isinstance(content, str) and content:
            contents[slot] = content
        meta = doc.get("metadata")
        if meta is not None:
            metas[slot] = _s(meta)
    return ids, scores, contents, metas


def _root_priority(parent: str, kind: str, other: dict[str, Any]) -> int:
    """Whether a span is a query root, and how sure we are (the highest priority per trace wins).

    3: the span the ragtrace SDK marks as the root (``ragtrace.sdk.version``: the outermost pipeline
    span, even under an HTTP server span); 2: a parentless CHAIN span (OpenInference
    instrumentation); 1: any other parentless span.
    """
    if sc.SDK_VERSION in other:
        return 3
    if parent:
        return 0
    return 2 if kind == "CHAIN" else 1


def document_options(other: dict[str, Any]) -> tuple[int | None, bool]:
    """What a span's other attributes say about its documents: the reranker's top_k (valid or
    None), and whether passages may be truncated prefixes. Under the SDK's "truncate:N" mode a
    passage is a prefix exactly when its text no longer hashes to the full text's hash, sent along;
    such a prefix cannot be checked against that hash and is stored under its own."""
    top_k = other.get(sc.RERANKER_TOP_K)
    valid = isinstance(top_k, int) and not isinstance(top_k, bool) and 0 <= top_k <= MAX_RANK
    return (top_k if valid else None), _s(other.get(sc.CONTENT_MODE)).startswith("truncate")


def _documents(c: dict[str, dict[str, list[Any]]], seen: dict[str, int],
               written: Mapping[tuple[str, str], int] | None, ids: dict[int, str],
               scores: dict[int, float | None], contents: dict[int, Any], metas: dict[int, str],
               hashes: dict[int, str], tenant: str, trace_id: str, span_id: str, top_k: int | None,
               truncating: bool, start_ms: int, text_of: Callable[[Any], str]) -> int:
    """The ``documents`` rows of one span (and ``passages`` for text not yet seen in this request),
    appended column by column; returns the approximate bytes they hold. ``tenant`` and the arrival
    time are filled in for the whole request by the caller. ``native/otlp_walk.cc`` mirrors this
    function step by step: change both."""
    p = c["passages"]
    p_hash, p_content, p_length, p_truncated = p["content_hash"], p["content"], p["content_length"], p["truncated"]
    nbytes = 0
    slots = list(ids)
    if (not truncating and list(hashes) == slots and (not contents or list(contents) == slots)
            and (not scores or list(scores) == slots) and (not metas or list(metas) == slots)
            and all(ids.values()) and all(hashes.values())):
        # The SDK's shape: every document has an id and a content hash, its fields in one order.
        # The columns are the dicts' values; text is read only for a hash neither seen in this
        # request nor known to be in the store in full (the same hash means the same full text).
        doc_ids = list(ids.values())
        chashes = list(hashes.values())
        known = written.get if written is not None else _nothing_written
        for chash, ref in zip(chashes, contents.values(), strict=False):  # aligned or empty
            if chash not in seen and known((tenant, chash), 0) <= 0:
                content = text_of(ref)
                if content:
                    n = seen[chash] = len(content)
                    p_hash.append(chash)
                    p_content.append(content)
                    p_length.append(n)
                    p_truncated.append(False)
                    nbytes += n + 120
        score_col = list(scores.values()) if scores else [None] * len(slots)
        meta_col = list(metas.values()) if metas else [""] * len(slots)
    else:
        # A document is any (stage, rank) with at least one field.
        if not all(len(f) <= len(ids) and f.keys() <= ids.keys() for f in (scores, contents, metas, hashes)):
            slots = list(dict.fromkeys([*ids, *scores, *contents, *metas, *hashes]))
        doc_ids = [ids.get(s, "") for s in slots]
        chashes = [hashes.get(s, "") for s in slots]
        for i, slot in enumerate(slots):
            chash = chashes[i]
            content_kv = contents.get(slot)
            truncated = False
            content = None
            # The text is read when it is needed: to hash it, or for a passage not yet seen in this
            # request. A claimed hash was checked against the text (`hashes_match`) unless the span
            # truncates: then the text is kept under the hash of what arrived, so a prefix (or
            # anything sent as one) never stands for the full text of the hash it claims.
            if content_kv is not None and (truncating or not chash or chash not in seen):
                content = text_of(content_kv)
            if content and (truncating or not chash):
                digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
                truncated = bool(chash) and chash != digest
                chash = chashes[i] = digest
            if not doc_ids[i]:
                # OpenInference allows documents without ids; the content hash is a stable stand-in.
                doc_ids[i] = f"sha256:{chash[:16]}" if chash else ""
            if content and chash:
                n = len(content)
                if seen.get(chash, -1) >= n:
                    continue
                seen[chash] = n
                p_hash.append(chash)
                p_content.append(content)
                p_length.append(n)
                p_truncated.append(truncated)
                nbytes += n + 120
        score_col = [scores.get(slot) for slot in slots]
        meta_col = [metas.get(slot) or "" for slot in slots]
    k = len(slots)
    d = c["documents"]
    d["trace_id"] += [trace_id] * k
    d["span_id"] += [span_id] * k
    names = _STAGE_NAMES
    d["stage"] += [names[slot >> 24] for slot in slots]
    d["rank"] += [slot & _RANK_MASK for slot in slots]
    d["doc_id"] += doc_ids
    d["score"] += score_col
    d["content_hash"] += chashes
    d["metadata"] += meta_col
    d["top_k"] += ([None] * k if top_k is None
                   else [top_k if slot >> 24 == _RERANKED_INDEX else None for slot in slots])
    d["start_time"] += [start_ms] * k
    return nbytes + 160 * k + sum(map(len, doc_ids))


def _nothing_written(key: tuple[str, str], default: int) -> int:
    return default


def _gold(g: dict[str, list[Any]], tenant: str, query_id: str, trace_id: str, doc_id: str, at: int,
          relevance: int = 1) -> None:
    g["tenant"].append(tenant)
    g["query_id"].append(query_id)
    g["trace_id"].append(trace_id)
    g["doc_id"].append(doc_id)
    g["relevance"].append(relevance)
    g["source"].append("span")
    g["added_at"].append(at)


def _annotation(rows: Rows, tenant: str, span_id: str, other: dict[str, Any], annotated: str,
                query_id: str, received_ms: int) -> None:
    if not annotated and not query_id:
        rows.note(f"an annotation needs {sc.ANNOTATES_TRACE_ID} or {sc.QUERY_ID}; kept only as a raw span")
        return
    if annotated and (len(annotated) != 32 or any(ch not in "0123456789abcdef" for ch in annotated)):
        rows.note(f"{sc.ANNOTATES_TRACE_ID} must be 32 hex characters; annotation kept only as a raw span")
        return
    kind = _s(other.get(sc.ANNOTATION_KIND)).lower()
    c = rows.cols
    if kind == "gold":
        for doc_id in _gold_ids(rows, other.get(sc.GOLD_DOCUMENT_IDS)):
            _gold(c["gold"], tenant, query_id, annotated, doc_id, received_ms)
    elif kind == "feedback":
        raw = other.get(sc.FEEDBACK_SCORE)
        score = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
        if score is not None and not 0.0 <= score <= 1.0:  # NaN fails this too
            score = None
        if raw is not None and score is None:
            # the comment is kept; the sender hears why the score is not (the SDK refuses it itself)
            rows.note(f"{sc.FEEDBACK_SCORE} must be a number in [0, 1] (True/False as 1/0 in the SDK); got "
                      f"{str(raw)[:40]!r}: the feedback is stored without its score")
        fb = c["feedback"]
        fb["tenant"].append(tenant)
        fb["trace_id"].append(annotated)
        fb["query_id"].append(query_id)
        fb["span_id"].append(span_id)
        fb["score"].append(score)
        fb["comment"].append(_s(other.get(sc.FEEDBACK_COMMENT)))
        fb["added_at"].append(received_ms)
    else:
        rows.note(f"{sc.ANNOTATION_KIND} must be 'gold' or 'feedback'; annotation kept only as a raw span")


def merge(parts: Iterable[Rows]) -> Rows:
    out = Rows()
    for part in parts:
        out.extend(part)
    return out
