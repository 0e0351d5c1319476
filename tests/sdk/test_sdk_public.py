"""The public surface: one sorted, complete ``__all__``; a light import; unique attribute names."""

from __future__ import annotations

import subprocess
import sys
import types

import ragtrace
from ragtrace import semconv

HEAVY = ("torch", "transformers", "fastapi", "starlette", "clickhouse_connect", "chdb", "numpy", "pandas")


def test_all_is_sorted_and_complete() -> None:
    assert ragtrace.__all__ == sorted(ragtrace.__all__)
    for name in ragtrace.__all__:  # the public names load on first use
        getattr(ragtrace, name)
    public = {name for name, value in vars(ragtrace).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert public == set(ragtrace.__all__) - {"__version__"}
    for name in ragtrace.__all__:
        assert hasattr(ragtrace, name), name


def test_contract_names_exist() -> None:
    for name in ("configure", "pipeline", "retriever", "reranker", "generator", "trace_query", "attach_gold",
                 "attach_feedback", "shutdown", "force_flush", "stats", "current_trace_id", "set_query_id"):
        assert callable(getattr(ragtrace, name))
    from ragtrace.asgi import RagtraceMiddleware

    assert callable(RagtraceMiddleware)


def test_importing_ragtrace_imports_no_heavy_package() -> None:
    code = ("import sys, ragtrace, ragtrace.asgi\n"
            "@ragtrace.pipeline\n"
            "def f(q):\n"
            "    return q\n"
            "f('x')\n"
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "", f"heavy modules imported: {out.stdout}"


def test_semconv_keys_never_collide() -> None:
    values = [v for k, v in vars(semconv).items() if k.isupper() and isinstance(v, str)]
    assert len(values) == len(set(values))
    fields = [semconv.DOCUMENT_ID, semconv.DOCUMENT_SCORE, semconv.DOCUMENT_CONTENT, semconv.DOCUMENT_METADATA,
              semconv.DOCUMENT_CONTENT_HASH]
    flattened = {semconv.document_attribute(p, i, f) for p in semconv.DOCUMENT_PREFIXES for i in range(3)
                 for f in fields}
    assert len(flattened) == len(semconv.DOCUMENT_PREFIXES) * 3 * len(fields)
    assert not flattened & set(values)
