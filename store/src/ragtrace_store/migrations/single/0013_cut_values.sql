-- ragtrace store, version 13: which attribute values of a span arrived cut (ragtrace_store.cut_values).
-- A stock OpenTelemetry SDK cuts every string attribute value to OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT
-- characters when that is set, and says nothing: a cut JSON value (GenAI documents or messages, a
-- chain's input or output, metadata) no longer parses, a cut prompt shows fewer passages than the model
-- saw. The collector names the attributes of a span whose values look cut here; the read model makes a
-- trace incomplete when it needed one of them. Rows written before this migration read [] (not known).
-- The clustered variant is generated from this file by ragtrace_store.migrations (the ALTER goes to
-- `spans_local ON CLUSTER` and to the Distributed `spans`).
ALTER TABLE {db}.spans ADD COLUMN IF NOT EXISTS cut_attributes Array(String) DEFAULT []
