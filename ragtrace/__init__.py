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

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ragtrace._version import VERSION as __version__

# The public names load on first use (PEP 562), so `import ragtrace.semconv` -- the wire contract
# that the collector, the evaluator and the tests import -- pulls in no OpenTelemetry module.
_LAZY: dict[str, str] = {
    "attach_feedback": "ragtrace._annotate",
    "attach_gold": "ragtrace._annotate",
    "ContentMode": "ragtrace._config",
    "Settings": "ragtrace._config",
    "generator": "ragtrace._decorators",
    "pipeline": "ragtrace._decorators",
    "reranker": "ragtrace._decorators",
    "retriever": "ragtrace._decorators",
    "Document": "ragtrace._documents",
    "DocumentShapeError": "ragtrace._documents",
    "QueryTrace": "ragtrace._explicit",
    "current_trace_id": "ragtrace._explicit",
    "set_attribute": "ragtrace._explicit",
    "set_gold_ids": "ragtrace._explicit",
    "set_query_id": "ragtrace._explicit",
    "trace_query": "ragtrace._explicit",
    "Stats": "ragtrace._export",
    "active_settings": "ragtrace._setup",
    "configure": "ragtrace._setup",
    "force_flush": "ragtrace._setup",
    "shutdown": "ragtrace._setup",
    "stats": "ragtrace._setup",
}

if _TYPE_CHECKING:
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


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragtrace' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
