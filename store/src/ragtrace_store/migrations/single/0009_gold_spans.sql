-- ragtrace store, version 9: gold as evidence spans in source documents, not as chunk ids.
-- A chunk id names a piece of one build of the index; a re-chunking renames every piece it re-cuts,
-- and gold ids of the old build then point at chunks that no longer exist. A span (source document,
-- character offsets) names the evidence itself: the audit resolves it per trace to whichever
-- retrieved chunks overlap it (their provenance travels in document.metadata), so the same label
-- holds for every build. Imported by `ragtrace labels import SPANS.jsonl` (source 'import'), keyed
-- by query id; re-importing a (query, source, start, end) replaces it (newest added_at under FINAL).
-- The clustered variant is generated from this file by ragtrace_store.migrations; the line
-- `-- cluster: shard by EXPR` directly before each CREATE TABLE is its sharding key.
-- cluster: shard by cityHash64(query_id)
CREATE TABLE IF NOT EXISTS {db}.gold_spans
(
    tenant      LowCardinality(String),
    query_id    String,
    source_id   String,   -- the source document's id (ragtrace.source.id in document.metadata)
    span_start  UInt64,   -- character offset of the evidence in the source, from 0, inclusive
    span_end    UInt64,   -- exclusive
    relevance   Int32,    -- > 0 relevant (graded as TREC qrels); 0 a judged non-relevant span
    source      LowCardinality(String),
    added_at    DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(added_at)
ORDER BY (tenant, query_id, source_id, span_start, span_end)
