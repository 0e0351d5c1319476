-- ragtrace store, version 2: evaluator output. One row per (trace, labeller manifest).
-- Labels from different manifests are never mixed silently: every reader filters by manifest_id.
-- The clustered variant is generated from this file by ragtrace_store.migrations; the line
-- `-- cluster: shard by EXPR` directly before each CREATE TABLE is its sharding key.
-- cluster: shard by cityHash64(manifest_id)
CREATE TABLE IF NOT EXISTS {db}.manifests
(
    manifest_id  String,   -- sha256 of the canonical manifest JSON (first 16 hex chars)
    manifest     String,   -- canonical JSON: labeller kind, model id + revision/file hash, thresholds, formula version, code version
    created_at   DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY manifest_id
;
-- cluster: shard by cityHash64(trace_id)
CREATE TABLE IF NOT EXISTS {db}.labels
(
    tenant           LowCardinality(String),
    manifest_id      String,
    trace_id         String,
    query_id         String,
    service          LowCardinality(String),
    release          LowCardinality(String),
    failure_mode     LowCardinality(String),  -- retrieval_gap | rank_inversion | under_use | fabrication | ok
    gold_in_pool     Nullable(Bool),          -- NULL when relevance is unknown
    gold_in_context  Nullable(Bool),
    ranking_ok       Nullable(Bool),
    generation       LowCardinality(String),  -- entailed | neutral | contradicted | abstained
    passed           Bool,
    score            Nullable(Float64),       -- 0..1 end-to-end quality
    confidence       Nullable(Float64),       -- labeller confidence in the failure mode, 0..1
    detail           String,                  -- JSON: retrieval/ranking/generation labels, per-claim verdicts
    trace_time       DateTime64(3, 'UTC'),
    labelled_at      DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(labelled_at)
PARTITION BY toYYYYMM(trace_time)
ORDER BY (tenant, manifest_id, trace_id)
