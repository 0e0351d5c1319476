-- ragtrace store, version 2 (clustered): evaluator output. Same columns as
-- single/0002_labels.sql: a replicated local table `<name>_local` on every node and a Distributed
-- `<name>` on top, which is what the collector and the evaluator read and write. Rows are sharded
-- so that everything deduplicated together (one trace's spans, documents and query row; one
-- passage hash) lands on one shard, which keeps FINAL correct across shards.
-- {cluster} is the cluster name (`ragtrace store migrate --variant cluster --cluster NAME`);
-- {shard} and {replica} are the servers' own macros. Minimum server: ClickHouse 24.8.

CREATE TABLE IF NOT EXISTS {db}.manifests_local ON CLUSTER '{cluster}'
(
    manifest_id  String,   -- sha256 of the canonical manifest JSON (first 16 hex chars)
    manifest     String,   -- canonical JSON: labeller kind, model id + revision/file hash, thresholds, formula version, code version
    created_at   DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{db}/manifests', '{replica}')
ORDER BY manifest_id
;
CREATE TABLE IF NOT EXISTS {db}.manifests ON CLUSTER '{cluster}' AS {db}.manifests_local
ENGINE = Distributed('{cluster}', '{db}', 'manifests_local', cityHash64(manifest_id))
;
CREATE TABLE IF NOT EXISTS {db}.labels_local ON CLUSTER '{cluster}'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{db}/labels', '{replica}', labelled_at)
PARTITION BY toYYYYMM(trace_time)
ORDER BY (tenant, manifest_id, trace_id)
;
CREATE TABLE IF NOT EXISTS {db}.labels ON CLUSTER '{cluster}' AS {db}.labels_local
ENGINE = Distributed('{cluster}', '{db}', 'labels_local', cityHash64(trace_id))
