"""The request-path core: span records, the current-span context, sampling and ids.

A ragtrace span on the request path is a ``SpanRecord``: a slotted object holding *references*
(the query string, a shallow copy of a document list, the answer) and two timestamps. Nothing is
validated, flattened, hashed or encoded here; that happens on the export thread (``_flatten``), so a
traced query costs the caller a few microseconds per stage.

Every function called from user code catches its own failures: ragtrace never raises into the
host. ``start`` returns ``None`` when the SDK is unconfigured, disabled or the trace is sampled
out, and callers then run the user function untouched.
"""

from __future__ import annotations

import contextvars
import logging
import os
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

if TYPE_CHECKING:
    from ragtrace._config import Settings
    from ragtrace._documents import Adapter
    from ragtrace._export import ExportQueue

_log = logging.getLogger("ragtrace")

# Stages, in pipeline order. REQUEST is the ASGI middleware's span; ANNOTATION carries gold ids or
# feedback after the fact.
PIPELINE: Final = 0
RETRIEVER: Final = 1
RERANKER: Final = 2
GENERATOR: Final = 3
REQUEST: Final = 4
ANNOTATION: Final = 5

_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_TRACE_ID_LOW: Final = (1 << 64) - 1


class SpanRecord:
    """One span while it is open and until it is flattened on the export thread.

    Not a dataclass: it is filled in as the stage runs, and slots keep creation at ~1 µs.
    """

    __slots__ = (
        "adapter", "annotation", "attributes", "chunks", "documents", "end_ns", "error", "gold_ids",
        "has_pipeline", "http", "input", "input_documents", "model", "name", "nested", "otel_token", "outer",
        "output", "parent_id", "query_id", "remote_parent", "root", "sampled", "span_id", "stage", "start_ns",
        "streamed", "token", "top_k", "trace_id",
    )

    def __init__(self, stage: int, name: str, trace_id: int, span_id: int, parent_id: int | None,
                 sampled: bool) -> None:
        self.stage = stage
        self.name = name
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.sampled = sampled
        self.remote_parent = False
        self.start_ns = time.time_ns()
        self.end_ns = 0
        self.input: object = None
        self.output: object = None
        self.documents: list[Any] | None = None
        self.input_documents: list[Any] | None = None
        self.adapter: Adapter | None = None
        self.top_k: int | None = None
        self.model: str | None = None
        self.query_id: str | None = None
        self.gold_ids: list[str] | None = None
        self.error: BaseException | None = None
        self.streamed = False
        self.has_pipeline = False  # a request record that a pipeline ran inside
        self.nested = False  # a pipeline inside another pipeline: a sub-step, not a query root
        self.chunks: list[Any] | None = None
        self.attributes: dict[str, Any] | None = None  # extra attributes set by the user
        self.http: dict[str, Any] | None = None  # method, path, route, status (middleware)
        self.annotation: dict[str, Any] | None = None
        self.root: SpanRecord | None = None  # the query's root record (pipeline or request)
        self.outer: SpanRecord | None = None  # for a pipeline inside a request: the request record
        self.token: contextvars.Token[SpanRecord | None] | None = None
        self.otel_token: object = None


_CURRENT: contextvars.ContextVar[SpanRecord | None] = contextvars.ContextVar("ragtrace_span", default=None)

# A private generator: a service calling random.seed() must not make trace ids repeat.
_rng = random.Random()
_getrandbits = _rng.getrandbits


def _reseed() -> None:
    _rng.seed()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed)


class Runtime:
    """What ``configure()`` installed: settings, the sampling bound and the export queue."""

    __slots__ = ("bound", "queue", "settings")

    def __init__(self, settings: Settings, queue: ExportQueue) -> None:
        self.settings = settings
        self.queue = queue
        # Same rule as OpenTelemetry's TraceIdRatioBased: keep when the low 64 bits of the trace id
        # are below rate * 2^64, so every process (and the evaluator) agrees on a trace.
        self.bound = round(settings.sample_rate * (_TRACE_ID_LOW + 1))


_runtime: Runtime | None = None


def runtime() -> Runtime | None:
    return _runtime


def install(new: Runtime | None) -> Runtime | None:
    """Swap the active runtime; returns the previous one (the caller shuts it down)."""
    global _runtime
    old, _runtime = _runtime, new
    return old


def sampled_by_ratio(trace_id: int, bound: int) -> bool:
    return (trace_id & _TRACE_ID_LOW) < bound


def new_span_id() -> int:
    span_id = _getrandbits(64)
    while span_id == 0:
        span_id = _getrandbits(64)
    return span_id


def new_trace_id() -> int:
    trace_id = _getrandbits(128)
    while trace_id == 0:
        trace_id = _getrandbits(128)
    return trace_id


def child_record(parent: SpanRecord, stage: int, name: str, start_ns: int) -> SpanRecord:
    """A span under ``parent`` that never becomes current (the explicit API records stages
    after they ran)."""
    rec = SpanRecord(stage, name, parent.trace_id, new_span_id(), parent.span_id, parent.sampled)
    rec.start_ns = start_ns
    rec.root = parent.root
    return rec


def current() -> SpanRecord | None:
    return _CURRENT.get()


def start(stage: int, name: str, parent: SpanContext | None = None) -> SpanRecord | None:
    """Open a span record and make it current. ``None``: run the user code without tracing.

    ``parent`` overrides the context (the middleware passes the incoming ``traceparent``).
    """
    rt = _runtime
    if rt is None:
        return None
    try:
        cur = _CURRENT.get()
        if cur is not None and not cur.sampled:
            return None
        if parent is None:
            ctx = otel_trace.get_current_span().get_span_context()
            parent = ctx if ctx.is_valid else None
        if parent is not None:
            trace_id, parent_id = parent.trace_id, parent.span_id
        elif cur is not None:
            trace_id, parent_id = cur.trace_id, cur.span_id
        else:
            trace_id, parent_id = new_trace_id(), None
        sampled = cur.sampled if cur is not None and cur.trace_id == trace_id else sampled_by_ratio(trace_id, rt.bound)
        rec = SpanRecord(stage, name, trace_id, new_span_id(), parent_id, sampled)
        if parent is not None and parent.is_remote:
            rec.remote_parent = True
        if stage in (PIPELINE, REQUEST):
            rec.root = rec
            if cur is not None and cur.trace_id == trace_id:
                rec.outer = cur.root
                rec.nested = cur.root is not None and cur.root.stage == PIPELINE
        elif cur is not None and cur.trace_id == trace_id:
            rec.root = cur.root
        rec.token = _CURRENT.set(rec)
        if sampled:
            # Other OpenTelemetry instrumentation (HTTP clients, DB drivers) nests under our span
            # and propagates its traceparent.
            span_ctx = SpanContext(trace_id, rec.span_id, False, _SAMPLED)
            rec.otel_token = otel_context.attach(otel_trace.set_span_in_context(NonRecordingSpan(span_ctx)))
        return rec
    except Exception:  # never into the host
        log_once("start", "ragtrace: could not start a span; the call runs untraced", exc_info=True)
        return None


def activate(rec: SpanRecord) -> None:
    """Make ``rec`` current again (a stream resuming its inner generator)."""
    try:
        rec.token = _CURRENT.set(rec)
        if rec.sampled:
            span_ctx = SpanContext(rec.trace_id, rec.span_id, False, _SAMPLED)
            rec.otel_token = otel_context.attach(otel_trace.set_span_in_context(NonRecordingSpan(span_ctx)))
    except Exception:
        log_once("activate", "ragtrace: could not reactivate a span", exc_info=True)


def deactivate(rec: SpanRecord) -> None:
    """Undo ``start``'s context changes (in the same context that made them)."""
    try:
        if rec.otel_token is not None:
            otel_context.detach(rec.otel_token)  # type: ignore[arg-type]
            rec.otel_token = None
        if rec.token is not None:
            _CURRENT.reset(rec.token)
            rec.token = None
    except Exception:  # a context switched under us (e.g. an async generator closed elsewhere)
        rec.token = None
        rec.otel_token = None


def finish(rec: SpanRecord) -> None:
    """Close and enqueue a record whose context was already deactivated."""
    try:
        rec.end_ns = time.time_ns()
        if rec.outer is not None and rec.outer.stage == REQUEST:
            _fill_outer(rec, rec.outer)
        # A root points at itself; break the cycle so records die by refcount, not by the GC.
        rec.root = None
        rec.outer = None
        if rec.sampled:
            rt = _runtime
            if rt is not None:
                rt.queue.put(rec)
    except Exception:
        log_once("finish", "ragtrace: could not record a span", exc_info=True)


def end(rec: SpanRecord) -> None:
    deactivate(rec)
    finish(rec)


def _fill_outer(rec: SpanRecord, outer: SpanRecord) -> None:
    """A pipeline inside a request: the request's root span also carries the query and answer,
    so a collector reading the trace root finds them whichever span is the root."""
    outer.has_pipeline = True
    if outer.input is None:
        outer.input = rec.input
    if outer.output is None:
        outer.output = rec.output
        outer.chunks = rec.chunks
        outer.streamed = rec.streamed
    if outer.query_id is None:
        outer.query_id = rec.query_id
    if outer.gold_ids is None:
        outer.gold_ids = rec.gold_ids


def current_root() -> SpanRecord | None:
    cur = _CURRENT.get()
    if cur is None or not cur.sampled:
        return None
    return cur.root


def current_trace_id() -> str | None:
    """32 lowercase hex digits of the current trace, or None outside a trace."""
    cur = _CURRENT.get()
    if cur is not None:
        return format(cur.trace_id, "032x")
    ctx = otel_trace.get_current_span().get_span_context()
    if ctx.is_valid:
        return format(ctx.trace_id, "032x")
    return None


# --- logging at most once per interval ---------------------------------------------------------

_LOG_INTERVAL_S: Final = 60.0
_last_logged: dict[str, float] = {}


def log_once(key: str, message: str, *args: object, exc_info: bool = False,
             level: int = logging.WARNING, clock: Callable[[], float] = time.monotonic) -> bool:
    """Log ``message`` unless the same key was logged in the last minute. Returns whether it logged."""
    now = clock()
    last = _last_logged.get(key)
    if last is not None and now - last < _LOG_INTERVAL_S:
        return False
    _last_logged[key] = now
    _log.log(level, message, *args, exc_info=exc_info)
    return True
