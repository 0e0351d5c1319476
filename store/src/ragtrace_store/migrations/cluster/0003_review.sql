-- ragtrace store, version 3 (clustered): human review. Same tables as single/0003_review.sql:
-- replicated local tables `<name>_local` on every node, Distributed `<name>` on top (sharded by
-- tenant so one tenant's review state stays on one shard). {cluster} is the cluster name;
-- {shard} and {replica} are the servers' own macros.

CREATE TABLE IF NOT EXISTS {db}.reviewers_local ON CLUSTER '{cluster}'
(
    tenant        LowCardinality(String),
    reviewer_id   String,
    name          String,
    token_hash    String,
    disabled      Bool,
    created_at    DateTime64(3, 'UTC'),
    updated_at    DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{db}/reviewers', '{replica}', updated_at)
ORDER BY (tenant, reviewer_id)
;
CREATE TABLE IF NOT EXISTS {db}.reviewers ON CLUSTER '{cluster}' AS {db}.reviewers_local
ENGINE = Distributed('{cluster}', '{db}', 'reviewers_local', cityHash64(tenant))
;
CREATE TABLE IF NOT EXISTS {db}.review_sessions_local ON CLUSTER '{cluster}'
(
    tenant        LowCardinality(String),
    session_hash  String,
    reviewer_id   String,
    csrf_token    String,
    created_at    DateTime64(3, 'UTC'),
    expires_at    DateTime64(3, 'UTC'),
    revoked       Bool,
    updated_at    DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{db}/review_sessions', '{replica}', updated_at)
ORDER BY (session_hash)
;
CREATE TABLE IF NOT EXISTS {db}.review_sessions ON CLUSTER '{cluster}' AS {db}.review_sessions_local
ENGINE = Distributed('{cluster}', '{db}', 'review_sessions_local', cityHash64(tenant))
;
CREATE TABLE IF NOT EXISTS {db}.review_queues_local ON CLUSTER '{cluster}'
(
    tenant              LowCardinality(String),
    queue               String,
    reviewers_per_item  UInt8,            -- K distinct reviewers per item
    description         String,
    options             String,           -- JSON: how the queue was filled (strata, thresholds)
    created_at          DateTime64(3, 'UTC'),
    updated_at          DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{db}/review_queues', '{replica}', updated_at)
ORDER BY (tenant, queue)
;
CREATE TABLE IF NOT EXISTS {db}.review_queues ON CLUSTER '{cluster}' AS {db}.review_queues_local
ENGINE = Distributed('{cluster}', '{db}', 'review_queues_local', cityHash64(tenant))
;
CREATE TABLE IF NOT EXISTS {db}.review_items_local ON CLUSTER '{cluster}'
(
    tenant            LowCardinality(String),
    queue             String,
    trace_id          String,
    query_id          String,
    manifest_id       String,
    reason            LowCardinality(String),   -- disagreement | low_confidence | mode
    failure_mode      LowCardinality(String),   -- the labeller's proposal
    confidence        Nullable(Float64),
    label_detail      String,
    position          UInt32,                   -- serving order within the queue
    added_at          DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{db}/review_items', '{replica}', added_at)
ORDER BY (tenant, queue, trace_id)
;
CREATE TABLE IF NOT EXISTS {db}.review_items ON CLUSTER '{cluster}' AS {db}.review_items_local
ENGINE = Distributed('{cluster}', '{db}', 'review_items_local', cityHash64(tenant))
;
CREATE TABLE IF NOT EXISTS {db}.review_assignments_local ON CLUSTER '{cluster}'
(
    tenant        LowCardinality(String),
    queue         String,
    trace_id      String,
    reviewer_id   String,
    assigned_at   DateTime64(3, 'UTC'),
    expires_at    DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{db}/review_assignments', '{replica}', assigned_at)
ORDER BY (tenant, queue, trace_id, reviewer_id)
;
CREATE TABLE IF NOT EXISTS {db}.review_assignments ON CLUSTER '{cluster}' AS {db}.review_assignments_local
ENGINE = Distributed('{cluster}', '{db}', 'review_assignments_local', cityHash64(tenant))
;
CREATE TABLE IF NOT EXISTS {db}.review_decisions_local ON CLUSTER '{cluster}'
(
    tenant                 LowCardinality(String),
    queue                  String,
    trace_id               String,
    reviewer_id            String,
    reviewer_name          String,
    manifest_id            String,
    labeller_failure_mode  LowCardinality(String),
    failure_mode           LowCardinality(String),
    claims                 String,   -- JSON [{index, claim, labeller_verdict, verdict}]
    relevance              String,   -- JSON [{doc_id, relevant}]
    note                   String,
    decided_at             DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{db}/review_decisions', '{replica}', decided_at)
PARTITION BY toYYYYMM(decided_at)
ORDER BY (tenant, queue, trace_id, reviewer_id)
;
CREATE TABLE IF NOT EXISTS {db}.review_decisions ON CLUSTER '{cluster}' AS {db}.review_decisions_local
ENGINE = Distributed('{cluster}', '{db}', 'review_decisions_local', cityHash64(tenant))
