"""Fork safety (pre-fork servers such as gunicorn) and adding spans to an existing TracerProvider."""

from __future__ import annotations

import os
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragtrace
from ragtrace import semconv as sc

from .receiver import Receiver, span_attributes
from .util import short


@ragtrace.retriever
def retrieve(query: str) -> list[str]:
    return ["a passage"]


@ragtrace.pipeline
def answer(query: str) -> str:
    retrieve(query)
    return f"answer to {query}"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_forked_child_exports_its_own_spans(receiver: Receiver) -> None:
    ragtrace.configure(endpoint=receiver.url, schedule_delay_ms=50)
    answer("parent-before")  # the parent's worker thread is running and its connection open
    assert ragtrace.force_flush(10)
    answer("parent-queued")  # queued in the parent at fork time: the parent exports it, not the child
    pid = os.fork()
    if pid == 0:  # child: trace, flush, and report through the exit code only
        code = 1
        try:
            answer("child")
            ok = ragtrace.force_flush(10)
            stats = ragtrace.stats()
            code = 0 if ok and stats.spans_exported == 2 and stats.dropped_export_failed == 0 else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    answer("parent-after")
    assert ragtrace.force_flush(10)
    got = receiver.wait_for_spans(8)
    queries = sorted(span_attributes(s)[sc.INPUT_VALUE] for _, s in got if short(s.name) == "answer")
    # every query exactly once: nothing lost, nothing exported twice by parent and child
    assert queries == ["child", "parent-after", "parent-before", "parent-queued"]
    assert len(got) == 8


def test_spans_join_an_existing_tracer_provider() -> None:
    app_exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "app-service", "team": "search"}))
    provider.add_span_processor(SimpleSpanProcessor(app_exporter))
    tracer = provider.get_tracer("app")
    ragtrace.configure(tracer_provider=provider, release="r7")

    @ragtrace.retriever
    def search(query: str) -> list[str]:
        # the app's own instrumentation inside a ragtrace stage nests under it
        with tracer.start_as_current_span("vector-db-call"):
            return ["doc"]

    with tracer.start_as_current_span("http-server"):
        answer_text = ragtrace.trace_query("q")
        with answer_text:
            search("q")
    assert ragtrace.force_flush(10)
    spans = {short(s.name): s for s in app_exporter.get_finished_spans()}
    assert set(spans) == {"http-server", "query", "search", "vector-db-call"}
    server, query, search_span, db = (spans[n] for n in ("http-server", "query", "search", "vector-db-call"))
    assert len({s.context.trace_id for s in spans.values()}) == 1
    assert query.parent is not None and query.parent.span_id == server.context.span_id
    assert search_span.parent is not None and search_span.parent.span_id == query.context.span_id
    assert db.parent is not None and db.parent.span_id == search_span.context.span_id
    resource = dict(query.resource.attributes)
    assert resource[sc.SERVICE_NAME] == "app-service"  # the application's resource is kept
    assert resource["team"] == "search" and resource[sc.SERVICE_VERSION] == "r7"
    assert (search_span.attributes or {})[sc.SPAN_KIND] == "RETRIEVER"
    assert otel_trace.get_current_span() is otel_trace.INVALID_SPAN


def test_provider_and_exporter_together_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not both"):
        ragtrace.configure(tracer_provider=TracerProvider(), exporter=InMemorySpanExporter())


def test_tracer_provider_must_be_an_sdk_provider() -> None:
    with pytest.raises(ValueError, match=r"opentelemetry\.sdk\.trace\.TracerProvider"):
        ragtrace.configure(tracer_provider=otel_trace.NoOpTracerProvider())  # type: ignore[arg-type]


def test_stats_fields_are_numbers(memory: Any) -> None:
    answer("q")
    memory()
    stats = ragtrace.stats()
    assert stats.spans_exported == 2 and stats.export_requests >= 1
