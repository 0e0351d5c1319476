-- ragtrace store, version 8: what reading other clients' traces needs (docs/wire.md).
-- The clustered variant is generated from this file by ragtrace_store.migrations: each ALTER goes to
-- `<name>_local ON CLUSTER` and, because it changes columns, to the Distributed `<name>` too.

-- How many attributes the sender's SDK dropped from the span (OTLP `dropped_attributes_count`): a
-- stock OpenTelemetry SDK keeps 128 per span and drops the rest without an error, so a span with
-- 100 documents arrives without some of them. A trace with such a span is read as incomplete.
-- Rows written before this migration read 0 (their count was not kept).
ALTER TABLE {db}.spans ADD COLUMN IF NOT EXISTS dropped_attributes UInt32 DEFAULT 0
;
-- The root span's kind (`openinference.span.kind`, or the kind its GenAI operation stands for): a
-- retriever or LLM called outside any chain is a parentless span of its own and would otherwise be
-- taken for a query. Rows written before this migration read '' (not a stage, as before).
ALTER TABLE {db}.queries ADD COLUMN IF NOT EXISTS kind LowCardinality(String) DEFAULT ''
