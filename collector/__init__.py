"""ragtrace collector: OTLP/HTTP receiver, ClickHouse store writer and the human review UI."""
