"""Sinks that hand flattened spans to OpenTelemetry SDK objects.

- ``ExporterSink``: any ``SpanExporter`` (``InMemorySpanExporter`` in tests, a vendor exporter).
- ``ProviderSink``: an application's existing ``TracerProvider``; spans go through its span
  processors (and so its exporters, sampling aside), next to the application's own spans.

Both build ``ReadableSpan`` objects from already-flattened attributes, so the SDK's per-attribute
validation and its 128-attribute default limit do not apply: every document is kept.
The OpenTelemetry SDK is imported here only, and only when one of these sinks is used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ragtrace._flatten import KIND_SERVER, STATUS_ERROR, AttrValue, FlatSpan

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


class ReadableSpanBuilder:
    """FlatSpan -> ReadableSpan under one resource and instrumentation scope."""

    def __init__(self, resource: Resource, scope: InstrumentationScope) -> None:
        self.resource = resource
        self.scope = scope

    def build(self, span: FlatSpan) -> ReadableSpan:
        parent = (SpanContext(span.trace_id, span.parent_id, span.parent_remote, _SAMPLED)
                  if span.parent_id is not None else None)
        status = (Status(StatusCode.ERROR, span.status_message) if span.status_code == STATUS_ERROR
                  else Status(StatusCode.UNSET))
        events = [Event(e.name, dict(e.attributes), e.time_ns) for e in span.events]
        return ReadableSpan(
            name=span.name,
            context=SpanContext(span.trace_id, span.span_id, False, _SAMPLED),
            parent=parent,
            resource=self.resource,
            attributes=span.attributes,
            events=events,
            kind=SpanKind.SERVER if span.kind == KIND_SERVER else SpanKind.INTERNAL,
            status=status,
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=self.scope,
        )


class ExporterSink:
    def __init__(self, exporter: SpanExporter, builder: ReadableSpanBuilder) -> None:
        self.exporter = exporter
        self._builder = builder

    def export(self, spans: Sequence[FlatSpan]) -> bool:
        result = self.exporter.export([self._builder.build(s) for s in spans])
        return bool(result == SpanExportResult.SUCCESS)

    def after_fork(self) -> None:
        pass

    def shutdown(self) -> None:
        self.exporter.shutdown()


class ProviderSink:
    """Feeds an existing TracerProvider's span processors (its ``on_end`` hook)."""

    def __init__(self, provider: TracerProvider, builder: ReadableSpanBuilder) -> None:
        processor = getattr(provider, "_active_span_processor", None)
        if processor is None or not hasattr(processor, "on_end"):
            raise ValueError("ragtrace.configure(tracer_provider=...): pass an "
                             "opentelemetry.sdk.trace.TracerProvider (its span processors receive the spans)")
        self._processor: Any = processor
        self._builder = builder

    def export(self, spans: Sequence[FlatSpan]) -> bool:
        for span in spans:
            self._processor.on_end(self._builder.build(span))
        return True

    def after_fork(self) -> None:
        pass  # the provider's processors handle their own fork safety

    def shutdown(self) -> None:
        self._processor.force_flush()  # the provider belongs to the application: flush, never shut down


def resource_for(settings_attrs: Mapping[str, AttrValue], base: Resource | None = None) -> Resource:
    """Our resource attributes, over an application's existing resource when given."""
    ours = Resource(dict(settings_attrs))
    return base.merge(ours) if base is not None else ours
