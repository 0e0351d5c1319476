-- ragtrace store, version 7: what the team's web view (/traces, /dashboard) needs.
-- The clustered variant is generated from this file by ragtrace_store.migrations: an ALTER goes to
-- `<name>_local ON CLUSTER` (and, for column changes, to the Distributed `<name>` too); the line
-- `-- cluster: shard by EXPR` directly before each CREATE TABLE is its sharding key.

-- A reviewer's role: 'reviewer' labels queue items; 'viewer' may log in and read traces, the
-- dashboard and queue progress, but never posts a decision or fills a queue. Rows written before
-- this migration are reviewers (the DEFAULT), so nobody loses a right they had.
ALTER TABLE {db}.reviewers ADD COLUMN IF NOT EXISTS role LowCardinality(String) DEFAULT 'reviewer'
;
-- The answer's groundedness as a column, computed once when a label row is written: the dashboard
-- averages it over every label of a window, and parsing each row's detail JSON there costs more
-- than the rest of the query. NULL when undefined (abstentions, claim-less or unjudged answers).
-- Rows written before this migration compute it when read, with the same result.
ALTER TABLE {db}.labels ADD COLUMN IF NOT EXISTS groundedness Nullable(Float64)
    MATERIALIZED JSONExtract(detail, 'generation', 'groundedness', 'Nullable(Float64)')
;
-- `ragtrace compare --save` keeps its JSON report here, so the dashboard can show the latest
-- comparison's gates. `gates` holds only the report's gates, gates_summary and tripped keys (what
-- the dashboard reads); `report` is the whole report.
-- cluster: shard by cityHash64(tenant)
CREATE TABLE IF NOT EXISTS {db}.compare_reports
(
    tenant       LowCardinality(String),
    report_id    String,                 -- random hex, one per saved comparison
    baseline     String,                 -- the release name or file given as --baseline
    candidate    String,
    manifest_ids Array(String),          -- the labeller manifests of both sides
    tripped      Bool,
    gates        String,                 -- JSON {"gates": [...], "gates_summary": {...}, "tripped": [...]}
    report       String CODEC(ZSTD(3)),  -- the whole JSON report of `ragtrace compare --json`
    created_at   DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(created_at)
ORDER BY (tenant, report_id)
