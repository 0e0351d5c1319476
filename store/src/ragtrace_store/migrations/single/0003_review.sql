-- ragtrace store, version 3: human review. Every row carries its tenant; a reviewer belongs to one
-- tenant and sees only that tenant's queues. Mutable rows (a reviewer disabled, a session revoked)
-- are new versions of the same key in a ReplacingMergeTree; readers use FINAL.
-- The clustered variant is generated from this file by ragtrace_store.migrations; the line
-- `-- cluster: shard by EXPR` directly before each CREATE TABLE is its sharding key (tenant,
-- so one tenant's review state stays on one shard).

-- Reviewers log in with a token that is stored only as its sha256 (tokens are 256-bit random, so
-- an unsalted hash is enough: nothing to brute-force).
-- cluster: shard by cityHash64(tenant)
CREATE TABLE IF NOT EXISTS {db}.reviewers
(
    tenant        LowCardinality(String),
    reviewer_id   String,
    name          String,
    token_hash    String,
    disabled      Bool,
    created_at    DateTime64(3, 'UTC'),
    updated_at    DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (tenant, reviewer_id)
;
-- Browser sessions, looked up by the sha256 of the random id in the signed cookie. Logging out or
-- disabling the reviewer ends them server-side.
-- cluster: shard by cityHash64(tenant)
CREATE TABLE IF NOT EXISTS {db}.review_sessions
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
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (session_hash)
;
-- cluster: shard by cityHash64(tenant)
CREATE TABLE IF NOT EXISTS {db}.review_queues
(
    tenant              LowCardinality(String),
    queue               String,
    reviewers_per_item  UInt8,            -- K distinct reviewers per item
    description         String,
    options             String,           -- JSON: how the queue was filled (strata, thresholds)
    created_at          DateTime64(3, 'UTC'),
    updated_at          DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (tenant, queue)
;
-- One row per (queue, trace). label_detail is a snapshot of the per-trace label record under
-- review, so a reviewer always judges exactly the label of manifest_id.
-- cluster: shard by cityHash64(tenant)
CREATE TABLE IF NOT EXISTS {db}.review_items
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
ENGINE = ReplacingMergeTree(added_at)
ORDER BY (tenant, queue, trace_id)
;
-- Which reviewer holds which item: an item is never offered to a reviewer who already holds or
-- decided it, and at most K reviewers hold it at a time (leases expire).
-- cluster: shard by cityHash64(tenant)
CREATE TABLE IF NOT EXISTS {db}.review_assignments
(
    tenant        LowCardinality(String),
    queue         String,
    trace_id      String,
    reviewer_id   String,
    assigned_at   DateTime64(3, 'UTC'),
    expires_at    DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(assigned_at)
ORDER BY (tenant, queue, trace_id, reviewer_id)
;
-- One decision per (item, reviewer): the confirmed or corrected failure mode, per-claim support,
-- per-passage relevance, a note, and the manifest of the label that was reviewed.
-- cluster: shard by cityHash64(tenant)
CREATE TABLE IF NOT EXISTS {db}.review_decisions
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
ENGINE = ReplacingMergeTree(decided_at)
PARTITION BY toYYYYMM(decided_at)
ORDER BY (tenant, queue, trace_id, reviewer_id)
