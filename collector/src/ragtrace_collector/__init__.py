"""ragtrace collector: the OTLP/HTTP receiver and the batched, durable store writer (ingest)."""
