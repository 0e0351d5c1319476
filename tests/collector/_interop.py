"""A real `ragtrace serve` app on loopback and a stock OpenTelemetry SDK exporting to it over OTLP/HTTP,
for tests that run third-party instrumentation (OpenInference's LangChain and LlamaIndex
instrumentors) exactly as a user would point it at ragtrace."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragtrace_store import TraceRecord

from ._server import running

TOKEN = "interop-token"


@dataclass
class Collector:
    """The serve app (``url``, ``app``) of one tenant, and tracer providers that export to it."""

    store: Any
    url: str
    app: Any
    tenant: str
    providers: list[TracerProvider] = field(default_factory=list)

    def provider(self, service: str, release: str, *, max_attributes: int | None = None,
                 max_value_length: int | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
        """A stock SDK provider exporting over OTLP/HTTP (protobuf) to the app; ``max_attributes``
        None keeps the SDK's default limit (128, or ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``), and
        ``max_value_length`` None its attribute value length limit (none, or
        ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``). The in-memory exporter beside it tells the test which
        trace ids it made, and holds the spans as the SDK exported them (`resend`)."""
        limits = SpanLimits(max_span_attributes=max_attributes, max_attribute_length=max_value_length)
        tp = TracerProvider(resource=Resource.create({"service.name": service, "service.version": release}),
                            span_limits=limits)
        tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
            endpoint=f"{self.url}/v1/traces", headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)))
        seen = InMemorySpanExporter()
        tp.add_span_processor(SimpleSpanProcessor(seen))
        self.providers.append(tp)
        return tp, seen

    @contextmanager
    def instrumented(self, instrumentor: Any, service: str, release: str, *, max_attributes: int | None = None,
                     max_value_length: int | None = None) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
        """``instrumentor`` (an OpenInference instrumentor instance) on a fresh provider of
        :meth:`provider`, uninstrumented again on exit."""
        tp, seen = self.provider(service, release, max_attributes=max_attributes, max_value_length=max_value_length)
        instrumentor.instrument(tracer_provider=tp)
        try:
            yield tp, seen
        finally:
            instrumentor.uninstrument()

    def flush(self, tp: TracerProvider) -> None:
        assert tp.force_flush(30_000), "the SDK did not export within 30 s"
        assert self.app.state.writer.flush(30), "the collector did not write within 30 s"

    def traced(self, tp: TracerProvider, seen: InMemorySpanExporter, run: Callable[[], Any]) -> list[str]:
        """Run ``run`` and return the ids of the traces it made, in the order their roots ended."""
        seen.clear()
        run()
        self.flush(tp)
        roots = [s for s in seen.get_finished_spans() if s.parent is None]
        return [f"{s.context.trace_id:032x}" for s in roots]

    def resend(self, seen: InMemorySpanExporter) -> str:
        """Post the spans the SDK exported last (as its OTLP exporter encodes them) once more and
        return the collector's ``partial_success`` message: the stock exporter does not read it."""
        body = encode_spans(seen.get_finished_spans()).SerializeToString()
        r = httpx.post(f"{self.url}/v1/traces", content=body, timeout=30, headers={
            "content-type": "application/x-protobuf", "authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200, r.text
        assert self.app.state.writer.flush(30)
        return ExportTraceServiceResponse.FromString(r.content).partial_success.error_message

    def record(self, trace_id: str, **kw: Any) -> TraceRecord:
        found = list(self.store.read_traces(tenant=self.tenant, trace_ids=[trace_id], with_content=True, **kw))
        assert len(found) == 1, f"trace {trace_id} is not a query in the store"
        rec: TraceRecord = found[0]
        return rec


@contextmanager
def collector(store: Any, tmp: Path) -> Iterator[Collector]:
    tenant = f"interop-{uuid.uuid4().hex[:10]}"
    with ExitStack() as stack:
        url, app = stack.enter_context(running(store, str(tmp / "spool"), tokens={TOKEN: tenant}))
        c = Collector(store, url, app, tenant)
        try:
            yield c
        finally:
            for tp in c.providers:
                tp.shutdown()


#: fixed documents: one gold passage for QUERY and seven distractors
PASSAGES = {
    "gold": "Water boils at 100 degrees Celsius at sea level.",
    "freeze": "Water freezes at 0 degrees Celsius under normal pressure.",
    "mercury": "Mercury is a metal that is liquid at room temperature.",
    "ocean": "The ocean covers most of the surface of the planet.",
    "salt": "Salt water boils at a slightly higher temperature than fresh water.",
    "steam": "Steam engines were central to the industrial revolution.",
    "everest": "On the summit of Everest water boils at about 70 degrees Celsius.",
    "ice": "Ice is less dense than liquid water, so it floats.",
}
QUERY = "At what temperature does water boil at sea level?"
GOOD = "Water boils at 100 degrees Celsius at sea level."
WRONG = "Water boils at 90 degrees Celsius at sea level."
