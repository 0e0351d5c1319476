"""ragtrace SDK: record every stage of a RAG query as OpenTelemetry spans.

    import ragtrace
    ragtrace.configure(endpoint="http://collector:4318", service="qa", release="2024-06-01")

    @ragtrace.retriever
    def search(query): ...

    @ragtrace.pipeline
    def answer(query): ...

The public API is everything in ``__all__``; the ASGI middleware is ``ragtrace.asgi``. Attribute
names are in ``ragtrace.semconv``. Importing this package imports no web framework, database
driver or ML library, and until ``configure()`` every decorator is a pass-through.
"""

from ragtrace._annotate import attach_feedback, attach_gold
from ragtrace._config import ContentMode, Settings
from ragtrace._decorators import generator, pipeline, reranker, retriever
from ragtrace._documents import Document, DocumentShapeError
from ragtrace._explicit import (
    QueryTrace,
    current_trace_id,
    set_attribute,
    set_gold_ids,
    set_query_id,
    trace_query,
)
from ragtrace._export import Stats
from ragtrace._setup import active_settings, configure, force_flush, shutdown, stats
from ragtrace._version import VERSION as __version__

__all__ = [
    "ContentMode",
    "Document",
    "DocumentShapeError",
    "QueryTrace",
    "Settings",
    "Stats",
    "__version__",
    "active_settings",
    "attach_feedback",
    "attach_gold",
    "configure",
    "current_trace_id",
    "force_flush",
    "generator",
    "pipeline",
    "reranker",
    "retriever",
    "set_attribute",
    "set_gold_ids",
    "set_query_id",
    "shutdown",
    "stats",
    "trace_query",
]
