-- ragtrace store, version 4 (clustered): reference answers. Same columns as
-- single/0004_references.sql: a replicated local table `<name>_local` on every node and a
-- Distributed `<name>` on top, sharded like `gold` so one key's rows deduplicate on one shard.
-- {cluster} is the cluster name (`ragtrace store migrate --variant cluster --cluster NAME`);
-- {shard} and {replica} are the servers' own macros. Minimum server: ClickHouse 24.8.

CREATE TABLE IF NOT EXISTS {db}.reference_answers_local ON CLUSTER '{cluster}'
(
    tenant      LowCardinality(String),
    query_id    String,
    trace_id    String,
    reference   String,
    source      LowCardinality(String),
    added_at    DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{db}/reference_answers', '{replica}', added_at)
ORDER BY (tenant, query_id, trace_id)
;
CREATE TABLE IF NOT EXISTS {db}.reference_answers ON CLUSTER '{cluster}' AS {db}.reference_answers_local
ENGINE = Distributed('{cluster}', '{db}', 'reference_answers_local', cityHash64(query_id, trace_id))
