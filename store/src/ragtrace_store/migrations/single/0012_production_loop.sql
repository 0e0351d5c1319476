-- ragtrace store, version 12: the production loop (`ragtrace serve --audit-every`): each periodic audit's
-- window counts, its drift verdicts, and the anchors teams pin for drift.
-- The clustered variant is generated from this file by ragtrace_store.migrations; the line
-- `-- cluster: shard by EXPR` directly before each CREATE TABLE is its sharding key.

-- An anchor per (tenant, service): a release or a time window whose labels every periodic audit
-- compares its window with (service '' is the tenant's anchor for services without their own).
-- Every set or clear is a new row; the newest `set_at` of a key is in force, and a row with
-- cleared = true means no anchor.
-- cluster: shard by cityHash64(tenant)
CREATE TABLE IF NOT EXISTS {db}.anchors
(
    tenant       LowCardinality(String),
    service      String,
    release      String,                               -- '' for a time-window anchor
    window_from  Nullable(DateTime64(3, 'UTC')),       -- the time window, when not a release
    window_to    Nullable(DateTime64(3, 'UTC')),
    cleared      Bool,
    set_at       DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(set_at)
ORDER BY (tenant, service)
;
-- The counts of one periodic audit's window per (service, release) under its labeller manifest: the
-- newest label of each trace whose trace time is in [window_start, window_end). Counts, never rates:
-- readers form the rates with their intervals. `modes` counts the complete labels per failure mode.
-- scope 'release' rows are (service, release) groups (the newest few releases of a service: the metrics'
-- bound); the one scope 'service' row of a service (release '') pools every release of it, kept or not.
-- cluster: shard by cityHash64(tenant)
CREATE TABLE IF NOT EXISTS {db}.audit_windows
(
    tenant           LowCardinality(String),
    service          String,
    release          String,
    scope            LowCardinality(String),  -- release | service
    manifest_id      String,
    window_start     DateTime64(3, 'UTC'),
    window_end       DateTime64(3, 'UTC'),
    labels           UInt64,                 -- labelled traces, incomplete ones included
    complete         UInt64,                 -- the failure modes' denominator
    modes            Map(String, UInt64),
    judged           UInt64,                 -- answers with a generation verdict
    abstained        UInt64,
    entailed         UInt64,                 -- of the judged answers that did not abstain
    passed           UInt64,                 -- of the judged answers
    gold_known       UInt64,
    gold_in_context  UInt64,
    last_trace_time  DateTime64(3, 'UTC'),   -- the newest labelled trace of the group (recency)
    audited_at       DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(audited_at)
PARTITION BY toYYYYMM(window_end)
ORDER BY (tenant, manifest_id, service, window_end, scope, release)
;
-- Each periodic audit's drift verdict per (service, failure mode), against the previous window and
-- against the anchor: 1 significantly worse, -1 significantly better, 0 no significant change, NULL
-- undefined (a side with n = 0, no previous window, no anchor or no anchor labels under the manifest).
-- cluster: shard by cityHash64(tenant)
CREATE TABLE IF NOT EXISTS {db}.drift_verdicts
(
    tenant           LowCardinality(String),
    service          String,
    manifest_id      String,
    window_start     DateTime64(3, 'UTC'),
    window_end       DateTime64(3, 'UTC'),
    boundary         LowCardinality(String),  -- the failure mode (retrieval_gap | rank_inversion | ...)
    against          LowCardinality(String),  -- previous | anchor
    reference        String,                  -- what it was compared with, in words
    verdict          Nullable(Int8),
    delta            Nullable(Float64),       -- the window's rate minus the reference's
    lower            Nullable(Float64),
    upper            Nullable(Float64),
    count            UInt64,
    n                UInt64,
    reference_count  UInt64,
    reference_n      UInt64,
    level            Float64,                 -- each interval's confidence (1 - alpha / modes)
    family_alpha     Float64,                 -- the family-wise false-alarm bound of one comparison
    audited_at       DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(audited_at)
PARTITION BY toYYYYMM(window_end)
ORDER BY (tenant, manifest_id, service, window_end, against, boundary)
