"""``configure()``, ``shutdown()``, ``force_flush()`` and ``stats()``.

Until ``configure()`` is called every decorator is a pass-through costing one global lookup.
Calling ``configure()`` again replaces the previous configuration (its queue is flushed first).
Spans go to exactly one place:

- ``exporter=``: an OpenTelemetry ``SpanExporter`` (e.g. ``InMemorySpanExporter`` in tests);
- ``tracer_provider=``: an application's existing SDK ``TracerProvider``; ragtrace spans are handed
  to its span processors next to the application's spans (its resource is kept, ours merged on top);
- otherwise: OTLP/HTTP protobuf to ``<endpoint>/v1/traces`` with ragtrace's own encoder.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ragtrace import _runtime as rt
from ragtrace import semconv as sc
from ragtrace._config import UNSET, Settings, resolve
from ragtrace._export import ExportQueue, Sink, Stats
from ragtrace._flatten import AttrValue, Flattener
from ragtrace._version import VERSION

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

SCOPE_NAME = "ragtrace"
_lock = threading.Lock()
_atexit_registered = False
#: the queue of the configuration `shutdown()` stopped last: `stats()` reads it until the next
#: `configure()`, so the counters of a finished run can still be read (at exit, in a test)
_last_queue: ExportQueue | None = None


def resource_attributes(settings: Settings, *, include_default_service: bool = True) -> dict[str, AttrValue]:
    attrs: dict[str, AttrValue] = dict(settings.resource_attributes)
    attrs.update({
        sc.TELEMETRY_SDK_LANGUAGE: "python",
        sc.TELEMETRY_SDK_NAME: "ragtrace",
        sc.TELEMETRY_SDK_VERSION: VERSION,
    })
    if include_default_service or settings.service != Settings().service:
        attrs[sc.SERVICE_NAME] = settings.service
    if settings.release is not None:
        attrs[sc.SERVICE_VERSION] = settings.release
    if settings.environment is not None:
        attrs[sc.DEPLOYMENT_ENVIRONMENT] = settings.environment
    return attrs


def _make_sink(settings: Settings, exporter: SpanExporter | None,
               tracer_provider: TracerProvider | None) -> Sink:
    if exporter is not None and tracer_provider is not None:
        raise ValueError("ragtrace.configure(): pass exporter= or tracer_provider=, not both")
    if exporter is None and tracer_provider is None:
        from ragtrace._otlp import Encoder, OtlpHttpSink

        encoder = Encoder(resource_attributes(settings), SCOPE_NAME, VERSION)
        return OtlpHttpSink(settings.traces_url, encoder, headers=settings.headers,
                            compression=settings.compression, timeout_s=settings.export_timeout_s)
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from ragtrace._sinks import ExporterSink, ProviderSink, ReadableSpanBuilder, resource_for

    scope = InstrumentationScope(SCOPE_NAME, VERSION)
    if exporter is not None:
        if not callable(getattr(exporter, "export", None)):
            raise ValueError("ragtrace.configure(exporter=...): pass an OpenTelemetry SpanExporter")
        return ExporterSink(exporter, ReadableSpanBuilder(resource_for(resource_attributes(settings)), scope))
    assert tracer_provider is not None
    base = getattr(tracer_provider, "resource", None)
    attrs = resource_attributes(settings, include_default_service=False)
    return ProviderSink(tracer_provider, ReadableSpanBuilder(resource_for(attrs, base), scope))


def configure(
    endpoint: str | None = None,
    service: str | None = None,
    release: str | None = None,
    environment: str | None = None,
    sample_rate: float | None = None,
    content: str | int | None = None,
    redact: Callable[[str], str] | str | None = None,
    headers: Mapping[str, str] | str | None = None,
    *,
    compression: str | None = None,
    enabled: bool | None = None,
    exporter: SpanExporter | None = None,
    tracer_provider: TracerProvider | None = None,
    max_queue_size: int | None = None,
    max_export_batch: int | None = None,
    schedule_delay_ms: int | None = None,
    export_timeout_ms: int | None = None,
    shutdown_timeout_ms: int | None = None,
) -> Settings:
    """Start tracing. Each option falls back to its ``RAGTRACE_*`` variable, then to the standard
    ``OTEL_*`` one where there is one, then to the default (see README "SDK").

    ``endpoint`` is the OTLP/HTTP base URL (spans are posted to ``<endpoint>/v1/traces``);
    ``release`` becomes resource ``service.version``; ``content`` is ``"full"``, an int N or
    ``"truncate:N"``, or ``"hash"``; ``redact`` is applied to the query, passages, prompt and
    answer before anything leaves the process.

    Raises ``ValueError`` for a bad argument (the only place ragtrace raises). Returns the
    resolved settings.
    """
    args: dict[str, Any] = {
        "endpoint": endpoint, "service": service, "release": release, "environment": environment,
        "sample_rate": sample_rate, "content": content, "redact": redact, "headers": headers,
        "compression": compression, "enabled": enabled, "max_queue_size": max_queue_size,
        "max_export_batch": max_export_batch, "schedule_delay_ms": schedule_delay_ms,
        "export_timeout_ms": export_timeout_ms, "shutdown_timeout_ms": shutdown_timeout_ms,
    }
    given: dict[str, object] = {k: (UNSET if v is None else v) for k, v in args.items()}
    settings = resolve(**given)  # type: ignore[arg-type]
    runtime: rt.Runtime | None = None
    if settings.enabled:
        sink = _make_sink(settings, exporter, tracer_provider)
        queue = ExportQueue(sink, Flattener(settings), max_queue_size=settings.max_queue_size,
                            max_batch=settings.max_export_batch, schedule_delay_s=settings.schedule_delay_s)
        runtime = rt.Runtime(settings, queue)
    global _last_queue
    with _lock:
        old = rt.install(runtime)
        _last_queue = None
        _register_atexit()
    if old is not None:
        old.queue.shutdown(old.settings.shutdown_timeout_s)
    return settings


def _register_atexit() -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_at_exit)
        _atexit_registered = True


def _at_exit() -> None:
    shutdown()


def shutdown(timeout_s: float | None = None) -> bool:
    """Flush queued spans (waiting at most ``timeout_s``, default RAGTRACE_SHUTDOWN_TIMEOUT_MS: 1 s) and
    stop tracing; what could not be exported in that time is dropped, counted in `stats()` and
    named in one warning. True when everything queued was exported. Never raises."""
    global _last_queue
    try:
        with _lock:
            old = rt.install(None)
            if old is not None:
                _last_queue = old.queue
        if old is None:
            return True
        return old.queue.shutdown(old.settings.shutdown_timeout_s if timeout_s is None else timeout_s)
    except Exception:
        rt.log_once("shutdown", "ragtrace: shutdown failed", exc_info=True)
        return False


def force_flush(timeout_s: float | None = None) -> bool:
    """Export everything queued so far; True when done within the timeout. Never raises."""
    runtime = rt.runtime()
    if runtime is None:
        return True
    try:
        return runtime.queue.flush(runtime.settings.shutdown_timeout_s if timeout_s is None else timeout_s)
    except Exception:
        rt.log_once("flush", "ragtrace: flush failed", exc_info=True)
        return False


def stats() -> Stats:
    """Export counters of the current configuration; after `shutdown()`, those of the configuration
    it stopped (until the next `configure()`); all zero when never configured."""
    runtime = rt.runtime()
    if runtime is not None:
        return runtime.queue.stats()
    last = _last_queue
    return last.stats() if last is not None else Stats(0, 0, 0, 0, 0, 0, 0)


def active_settings() -> Settings | None:
    """The active settings, or None when ragtrace is not configured."""
    runtime = rt.runtime()
    return runtime.settings if runtime is not None else None
