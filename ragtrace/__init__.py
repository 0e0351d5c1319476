"""ragtrace SDK: record every stage of a RAG query as OpenTelemetry spans."""

__version__ = "0.1.0"
