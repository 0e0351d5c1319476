-- ragtrace store, version 1: traces as the collector assembles them.
-- Applied by `ragtrace store migrate` (and on `ragtrace serve` start). Statements are separated
-- by lines holding only ';'. Every statement must be idempotent (IF NOT EXISTS).
-- {db} is replaced by the database name. Minimum ClickHouse server: 24.8.
-- This file is the only schema source: the clustered variant (`--variant cluster`: a replicated
-- `<name>_local` on every node, a Distributed `<name>` on top) is generated from it by
-- ragtrace_store.migrations. The line `-- cluster: shard by EXPR` directly before each CREATE TABLE
-- is that table's sharding key; rows deduplicated together (one trace's spans, documents and
-- query row; one passage hash) must land on one shard, which keeps FINAL correct across shards.

-- Every span as it arrived, so nothing that is not modelled below is lost.
-- cluster: shard by cityHash64(trace_id)
CREATE TABLE IF NOT EXISTS {db}.spans
(
    tenant          LowCardinality(String),
    trace_id        String,
    span_id         String,
    parent_span_id  String,
    name            String,
    kind            LowCardinality(String),
    service         LowCardinality(String),
    release         LowCardinality(String),
    environment     LowCardinality(String),
    start_time      DateTime64(3, 'UTC'),
    end_time        DateTime64(3, 'UTC'),
    status_code     LowCardinality(String),
    status_message  String,
    attributes      String,  -- JSON object of the attributes not modelled elsewhere (document lists
                             -- live in `documents` / `passages`)
    events          String,  -- JSON {"events": [...], "links": [...]}, '' when the span had none
    resource        String,  -- JSON object of the resource attributes
    received_at     DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(start_time)
ORDER BY (tenant, trace_id, span_id)
;
-- One row per query, written from its root span. Several spans may claim to be the root (an
-- HTTP server span above the SDK's pipeline span); the highest root_priority wins under FINAL:
-- 3 = the ragtrace SDK's CHAIN span, 2 = a parentless CHAIN span, 1 = any other parentless span.
-- cluster: shard by cityHash64(trace_id)
CREATE TABLE IF NOT EXISTS {db}.queries
(
    tenant          LowCardinality(String),
    trace_id        String,
    span_id         String,
    query_id        String,
    service         LowCardinality(String),
    release         LowCardinality(String),
    environment     LowCardinality(String),
    route           LowCardinality(String),
    query           String,
    answer          Nullable(String),
    answer_streamed Bool,
    status_code     LowCardinality(String),
    start_time      DateTime64(3, 'UTC'),
    duration_ms     Float64,
    root_priority   UInt8,
    received_at     DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(root_priority)
PARTITION BY toYYYYMM(start_time)
ORDER BY (tenant, trace_id)
;
-- One row per (trace, stage, span, rank) document. stage is one of
-- 'retrieved' | 'rerank_input' | 'reranked' | 'context'. rank counts from 0 in the order the
-- service used. Text lives in `passages`, keyed by content_hash.
-- cluster: shard by cityHash64(trace_id)
CREATE TABLE IF NOT EXISTS {db}.documents
(
    tenant        LowCardinality(String),
    trace_id      String,
    span_id       String,
    stage         LowCardinality(String),
    rank          UInt32,
    doc_id        String,
    score         Nullable(Float64),
    content_hash  String,
    metadata      String,
    top_k         Nullable(UInt32),  -- reranker.top_k on reranked rows
    start_time    DateTime64(3, 'UTC'),
    received_at   DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(start_time)
ORDER BY (tenant, trace_id, stage, span_id, rank)
;
-- Passage text once per content hash (production repeats the same passages millions of times).
-- truncated = the SDK sent only a prefix. Documents sent with only a hash have no row here.
-- The longest text seen for a hash wins (a full copy replaces an earlier truncated one).
-- cluster: shard by cityHash64(content_hash)
CREATE TABLE IF NOT EXISTS {db}.passages
(
    tenant          LowCardinality(String),
    content_hash    String,
    content         String,
    content_length  UInt32,
    truncated       Bool,
    first_seen      DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(content_length)
ORDER BY (tenant, content_hash)
;
-- Known-relevant documents. From the span (source 'span', keyed by trace), imported qrels
-- (source 'qrels', keyed by query_id) or reviewers (source 'review').
-- cluster: shard by cityHash64(query_id, trace_id)
CREATE TABLE IF NOT EXISTS {db}.gold
(
    tenant      LowCardinality(String),
    query_id    String,
    trace_id    String,
    doc_id      String,
    relevance   Int32,
    source      LowCardinality(String),
    added_at    DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(added_at)
ORDER BY (tenant, source, query_id, trace_id, doc_id)
;
-- User feedback attached after the fact.
-- cluster: shard by cityHash64(trace_id)
CREATE TABLE IF NOT EXISTS {db}.feedback
(
    tenant      LowCardinality(String),
    trace_id    String,
    query_id    String,
    span_id     String,
    score       Nullable(Float64),
    comment     String,
    added_at    DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(added_at)
ORDER BY (tenant, trace_id, query_id, span_id)
