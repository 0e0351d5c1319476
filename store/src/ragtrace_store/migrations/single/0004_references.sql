-- ragtrace store, version 4: reference answers, so the audit can score an answer's correctness
-- (not only its grounding). Imported references (`ragtrace labels import REFS.jsonl`, source
-- 'import') are keyed by query_id with trace_id ''; a reference sent on the root span
-- (`ragtrace.reference.answer`, source 'span') also carries its trace_id and wins for that trace.
-- Re-importing a query id replaces its reference (the newest added_at wins under FINAL).
-- The clustered variant is generated from this file by ragtrace_store.migrations; the line
-- `-- cluster: shard by EXPR` directly before each CREATE TABLE is its sharding key.
-- cluster: shard by cityHash64(query_id, trace_id)
CREATE TABLE IF NOT EXISTS {db}.reference_answers
(
    tenant      LowCardinality(String),
    query_id    String,
    trace_id    String,
    reference   String,
    source      LowCardinality(String),
    added_at    DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(added_at)
ORDER BY (tenant, query_id, trace_id)
