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
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from ragtrace_collector.records import STAGE_CONTEXT, STAGE_RERANK_INPUT, STAGE_RERANKED, STAGE_RETRIEVED

from ragtrace import semconv as sc

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
              "events", "resource", "received_at"),
    "queries": ("tenant", "trace_id", "span_id", "query_id", "service", "release", "environment", "route",
                "query", "answer", "answer_streamed", "status_code", "start_time", "duration_ms",
                "root_priority", "received_at"),
    "documents": ("tenant", "trace_id", "span_id", "stage", "rank", "doc_id", "score", "content_hash",
                  "metadata", "top_k", "start_time", "received_at"),
    "passages": ("tenant", "content_hash", "content", "content_length", "truncated", "first_seen"),
    "gold": ("tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"),
    "feedback": ("tenant", "trace_id", "query_id", "span_id", "score", "comment", "added_at"),
}
#: Columns holding DateTime64(3) values, as integer milliseconds since the epoch (UTC).
TIME_COLUMNS = frozenset({"start_time", "end_time", "received_at", "first_seen", "added_at"})


@dataclass
class Rows:
    """Column lists for each table plus what the sender should hear about. Mutable accumulator."""

    cols: dict[str, dict[str, list[Any]]] = field(
        default_factory=lambda: {t: {c: [] for c in cs} for t, cs in COLUMNS.items()})
    spans: int = 0
    rejected: int = 0
    #: reasons for rejected spans and warnings about dropped attributes, deduplicated
    messages: list[str] = field(default_factory=list)
    #: approximate memory held, for the writer's bounded queue
    nbytes: int = 0

    def count(self, table: str) -> int:
        first = COLUMNS[table][0]
        return len(self.cols[table][first])

    def extend(self, other: Rows) -> None:
        for table, cols in other.cols.items():
            mine = self.cols[table]
            for name, values in cols.items():
                mine[name].extend(values)
        self.spans += other.spans
        self.rejected += other.rejected
        self.nbytes += other.nbytes

    def note(self, message: str) -> None:
        if message not in self.messages and len(self.messages) < 20:
            self.messages.append(message)

    def error_message(self) -> str:
        return "; ".join(self.messages)


# --- key parsing -------------------------------------------------------------------------------
_KEY_CACHE: dict[str, tuple[str, int, int] | None] = {}
_KEY_CACHE_MAX = 500_000


def parse_document_key(key: str) -> tuple[str, int, int] | None:
    """``retrieval.documents.3.document.id`` → (stage, 3, F_ID); None for any other attribute."""
    hit = _KEY_CACHE.get(key, False)
    if hit is not False:
        return hit  # type: ignore[return-value]
    result = _parse_document_key(key)
    if len(_KEY_CACHE) >= _KEY_CACHE_MAX:  # adversarial key streams must not grow memory
        _KEY_CACHE.clear()
    _KEY_CACHE[key] = result
    return result


def _parse_document_key(key: str) -> tuple[str, int, int] | None:
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


_SLOT_CACHE: dict[str, tuple[tuple[str, int], int] | None] = {}
_SLOT_KEYS: dict[tuple[str, int], tuple[str, int]] = {}


def _slot_info(key: str) -> tuple[tuple[str, int], int] | None:
    """Like `parse_document_key`, as ((stage, rank), field) with the tuple built once per key."""
    parsed = parse_document_key(key)
    result = None
    if parsed is not None:
        # one tuple object per (stage, rank), shared by the document's fields: the walk compares
        # them by identity
        pair = (parsed[0], parsed[1])
        result = (_SLOT_KEYS.setdefault(pair, pair), parsed[2])
    if len(_SLOT_CACHE) >= _KEY_CACHE_MAX:
        _SLOT_CACHE.clear()
        _SLOT_KEYS.clear()
    _SLOT_CACHE[key] = result
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
    value = any_value(v)
    return value if isinstance(value, str) else orjson.dumps(value).decode()


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


def _clamp_time(ms: int, received_ms: int) -> int:
    if ms <= 0 or ms < received_ms - MAX_CLOCK_SKEW_MS or ms > received_ms + MAX_FUTURE_MS:
        return received_ms
    return ms


# --- the walk ----------------------------------------------------------------------------------
def assemble(request: ExportTraceServiceRequest, tenant: str, received_ms: int) -> Rows:
    """All rows of one OTLP request. Never raises on content: bad spans are rejected with a reason."""
    rows = Rows()
    c = rows.cols
    q, g = c["queries"], c["gold"]
    span_rows: list[tuple[Any, ...]] = []
    doc_rows: list[tuple[Any, ...]] = []
    passage_rows: list[tuple[Any, ...]] = []
    seen_hashes: dict[str, int] = {}
    nbytes = 0
    slot_get = _SLOT_CACHE.get
    for rs in request.resource_spans:
        res_attrs = {kv.key: any_value(kv.value) for kv in rs.resource.attributes}
        service = _s(res_attrs.get(sc.SERVICE_NAME))
        release = _s(res_attrs.get(sc.SERVICE_VERSION))
        environment = _s(res_attrs.get(sc.DEPLOYMENT_ENVIRONMENT))
        resource_json = orjson.dumps(res_attrs).decode()
        for ss in rs.scope_spans:
            for span in ss.spans:
                tid, sid = span.trace_id, span.span_id
                if len(tid) != 16 or not any(tid) or len(sid) != 8 or not any(sid):
                    rows.rejected += 1
                    rows.note("spans need a 16-byte non-zero trace_id and an 8-byte non-zero span_id")
                    continue
                trace_id, span_id = tid.hex(), sid.hex()
                parent = span.parent_span_id.hex() if span.parent_span_id else ""
                start_ms = _clamp_time(span.start_time_unix_nano // 1_000_000, received_ms)
                end_ms = span.end_time_unix_nano // 1_000_000
                end_ms = end_ms if start_ms <= end_ms <= start_ms + MAX_CLOCK_SKEW_MS else start_ms

                other: dict[str, Any] = {}
                docs: dict[tuple[str, int], list[Any]] = {}
                last_key: tuple[str, int] | None = None
                slot: list[Any] = []
                # The hot loop (hundreds of attributes per span): cached key lookups, the value
                # read by the accessor of the expected type, slower paths only when that is empty.
                for kv in span.attributes:
                    key = kv.key
                    info = slot_get(key, False)
                    if info is False:
                        info = _slot_info(key)
                    if info is None:
                        other[key] = any_value(kv.value)
                        continue
                    slot_key, code = info  # type: ignore[misc]
                    if slot_key is not last_key:  # a document's fields usually arrive together
                        found = docs.get(slot_key)
                        if found is None:
                            found = docs[slot_key] = [None, None, None, None, None]
                        slot, last_key = found, slot_key
                    v = kv.value
                    if code == F_SCORE:
                        x = v.double_value
                        slot[F_SCORE] = x if (x and x - x == 0.0) else _as_float(v)
                    elif code == F_CONTENT:
                        # Kept unread: the same passage usually appears at several stages of a
                        # trace, and its text is needed once per content hash.
                        slot[F_CONTENT] = v
                    else:
                        text = v.string_value
                        slot[code] = text if text else _as_text(v)

                kind = _s(other.get(sc.SPAN_KIND)).upper()
                status_code = _STATUS.get(span.status.code, "UNSET")
                events = ""
                if len(span.events) or len(span.links):
                    events = orjson.dumps({
                        "events": [{"name": e.name, "time_ms": e.time_unix_nano // 1_000_000,
                                    "attributes": {kv.key: any_value(kv.value) for kv in e.attributes}}
                                   for e in span.events],
                        "links": [{"trace_id": ln.trace_id.hex(), "span_id": ln.span_id.hex()} for ln in span.links],
                    }).decode()
                attrs_json = orjson.dumps(other).decode()
                nbytes += len(attrs_json) + len(events) + 200

                span_rows.append((tenant, trace_id, span_id, parent, span.name, kind, service, release, environment,
                                  start_ms, end_ms, status_code, span.status.message, attrs_json, events,
                                  resource_json, received_ms))
                rows.spans += 1

                annotated = other.get(sc.ANNOTATES_TRACE_ID)
                query_id = _s(other.get(sc.QUERY_ID))
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
                    q["duration_ms"].append(max(0, span.end_time_unix_nano - span.start_time_unix_nano) / 1e6
                                            if span.end_time_unix_nano else 0.0)
                    q["root_priority"].append(priority)
                    q["received_at"].append(received_ms)
                gold_ids = other.get(sc.GOLD_DOCUMENT_IDS)
                if gold_ids is not None:  # on the root, or on a nested pipeline span: same trace
                    for doc_id in _str_list(gold_ids):
                        _gold(g, tenant, query_id, trace_id, doc_id, received_ms)

                if docs:
                    nbytes += _documents(doc_rows, passage_rows, seen_hashes, docs, tenant, trace_id, span_id,
                                         other, start_ms, received_ms)
    # rows were collected as tuples (one allocation each); the store takes columns
    for table, collected in (("spans", span_rows), ("documents", doc_rows), ("passages", passage_rows)):
        if collected:
            c[table] = {name: list(col) for name, col in zip(COLUMNS[table], zip(*collected, strict=True),
                                                             strict=True)}
    rows.nbytes = nbytes
    return rows


def _s(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


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


def _documents(doc_rows: list[tuple[Any, ...]], passage_rows: list[tuple[Any, ...]], seen: dict[str, int],
               docs: dict[tuple[str, int], list[Any]], tenant: str, trace_id: str, span_id: str,
               other: dict[str, Any], start_ms: int, received_ms: int) -> int:
    nbytes = 0
    top_k_raw = other.get(sc.RERANKER_TOP_K)
    top_k = top_k_raw if isinstance(top_k_raw, int) and 0 <= top_k_raw <= MAX_RANK else None
    # Under the SDK's "truncate:N" mode a passage may be a prefix; it is one exactly when its text
    # no longer hashes to the hash of the full text that the SDK sent along.
    truncating = _s(other.get(sc.CONTENT_MODE)).startswith("truncate")
    add_doc = doc_rows.append
    for (stage, rank), (doc_id, score, content_value, meta, chash) in docs.items():
        truncated = False
        content = None
        # The text is read when it is needed: to hash it, or for a passage not yet seen in this
        # request (under truncation a longer copy may follow, so it is always read).
        if content_value is not None and (truncating or not chash or chash not in seen):
            content = _as_text(content_value)
        if content and (truncating or not chash):
            digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
            truncated = bool(chash) and chash != digest
            chash = chash or digest
        chash = chash or ""
        if not doc_id:
            # OpenInference allows documents without ids; the content hash is a stable stand-in.
            doc_id = f"sha256:{chash[:16]}" if chash else ""
        add_doc((tenant, trace_id, span_id, stage, rank, doc_id, score, chash, meta or "",
                 top_k if stage == STAGE_RERANKED else None, start_ms, received_ms))
        nbytes += 160 + len(doc_id)
        if content and chash:
            n = len(content)
            if seen.get(chash, -1) >= n:
                continue
            seen[chash] = n
            passage_rows.append((tenant, chash, content, n, truncated, received_ms))
            nbytes += n + 120
    return nbytes


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
        for doc_id in _str_list(other.get(sc.GOLD_DOCUMENT_IDS)):
            _gold(c["gold"], tenant, query_id, annotated, doc_id, received_ms)
    elif kind == "feedback":
        raw = other.get(sc.FEEDBACK_SCORE)
        score = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
        if score is not None and not (score == score and abs(score) != float("inf")):
            score = None
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
