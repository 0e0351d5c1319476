"""`LabelExporter`: send audit labels as OTLP/HTTP evaluation events, never holding the audit up.

The audit hands each batch of labels to `LabelExporter.submit_labels`, which turns them into
``gen_ai.evaluation.result`` events (`ragtrace_evaluator.label_export.events`) and puts them on a
bounded queue without waiting: when the queue is full the event is dropped and counted. One worker
thread drains the queue in batches through the OpenTelemetry SDK's OTLP/HTTP log exporter, which
retries what a receiver refuses for a while (429, 502, 503, 504, a refused or reset connection)
with exponential backoff for up to ``export_timeout`` seconds per batch; a batch that still fails
is dropped and counted. So a receiver that is down or slow costs labels, counted in `counts`, and
never costs the audit time.

Headers (an API key of a hosted backend) and TLS files come from the OpenTelemetry exporter's own
environment variables (``OTEL_EXPORTER_OTLP_LOGS_HEADERS`` or ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE`` ...); the URL is the server's configuration, never a client's.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import urlsplit, urlunsplit

from ragtrace import semconv as sc
from ragtrace_evaluator.label_export.events import EvaluationEvent, evaluation_events
from ragtrace_store import LabelRecord, TraceRecord

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord

log = logging.getLogger("ragtrace.label_export")

#: why an event was not delivered (the ``reason`` of `LabelExporter.counts`' drops)
QUEUE_FULL: Final = "queue_full"
EXPORT_FAILED: Final = "export_failed"
SHUTDOWN: Final = "shutdown"
DROP_REASONS: Final = (QUEUE_FULL, EXPORT_FAILED, SHUTDOWN)

#: the OTLP/HTTP path of logs, appended to a URL given without a path
LOGS_PATH: Final = "/v1/logs"
#: the instrumentation scope the events are reported under
SCOPE_NAME: Final = "ragtrace.evaluator"
#: at most one warning about drops per this many seconds (a receiver that is down would flood the log)
_WARN_EVERY_S = 60.0


class LabelExportError(ValueError):
    """The label export cannot be set up as asked; the message says what to change."""


class LogExporter(Protocol):
    """What `LabelExporter` needs of an exporter (the SDK's `OTLPLogExporter` is one)."""

    def export(self, batch: Sequence[ReadableLogRecord]) -> Any: ...

    def shutdown(self) -> Any: ...


def logs_endpoint(url: str) -> str:
    """The OTLP/HTTP logs URL of ``url``: ``http(s)://host[:port]`` gets ``/v1/logs`` appended (the
    path every OTLP/HTTP receiver serves), a URL with a path is used as given. Raises
    `LabelExportError` for anything else."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LabelExportError(f"--export-labels {url!r}: give the http(s) URL of an OTLP/HTTP receiver, e.g. "
                               "http://otel-collector:4318 (its /v1/logs is used) or a full .../v1/logs URL")
    if parts.query or parts.fragment:
        raise LabelExportError(f"--export-labels {url!r}: a receiver URL has no query or fragment; drop them")
    try:
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError as exc:
        raise LabelExportError(f"--export-labels {url!r}: {exc}") from None
    path = parts.path if parts.path not in ("", "/") else LOGS_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


class LabelExporter:
    """A bounded queue of evaluation events drained to an OTLP/HTTP receiver by one worker thread.

    ``exporter`` is the collaborator that sends a batch (default: the SDK's ``OTLPLogExporter`` for
    ``url`` with ``export_timeout``); it must return a result whose ``name`` is ``"SUCCESS"`` when
    the receiver accepted the batch. Thread-safe; `submit` and `submit_labels` never block or raise.
    """

    def __init__(self, url: str, *, queue_size: int = 10_000, batch_size: int = 512,
                 export_timeout: float = 10.0, exporter: LogExporter | None = None) -> None:
        if queue_size < 1 or batch_size < 1:
            raise LabelExportError(f"queue_size ({queue_size}) and batch_size ({batch_size}) must be >= 1")
        if not export_timeout > 0:
            raise LabelExportError(f"export_timeout must be > 0 seconds, got {export_timeout!r}")
        self.endpoint = logs_endpoint(url)
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

            exporter = OTLPLogExporter(endpoint=self.endpoint, timeout=export_timeout)
        self._exporter: LogExporter = exporter
        self._queue: queue.Queue[EvaluationEvent] = queue.Queue(maxsize=queue_size)
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._sent = 0
        self._dropped = dict.fromkeys(DROP_REASONS, 0)
        self._warned_at = float("-inf")
        self._resources: dict[tuple[str, str], Any] = {}
        self._closing = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="ragtrace-label-export", daemon=True)
        self._thread.start()

    # --- the audit's side ------------------------------------------------------------------------
    def submit_labels(self, labels: Sequence[LabelRecord], traces: Iterable[TraceRecord], *, tenant: str) -> None:
        """Queue the events of ``labels``, each attached to its trace's root span (from ``traces``,
        the records the labels were made from). Labels of traces without a root span id are skipped."""
        try:
            spans = {t.trace_id: t.root_span_id for t in traces}
            events = [e for rec in labels if spans.get(rec.trace_id)
                      for e in evaluation_events(rec, span_id=spans[rec.trace_id], tenant=tenant)]
        except Exception:  # a label that cannot be read as events must not fail the audit that wrote it
            log.exception("label export: could not build evaluation events; %d label(s) not exported", len(labels))
            return
        self.submit(events)

    def submit(self, events: Iterable[EvaluationEvent]) -> None:
        """Queue ``events`` without waiting; those that find the queue full (or the exporter closed)
        are dropped and counted."""
        full = closed = 0
        for event in events:
            if self._closing.is_set():
                closed += 1
                continue
            try:
                self._queue.put_nowait(event)
            except queue.Full:
                full += 1
        if full or closed:
            self._drop(QUEUE_FULL, full)
            self._drop(SHUTDOWN, closed)

    # --- what /metrics shows -----------------------------------------------------------------------
    def counts(self) -> dict[str, Any]:
        """``{"sent": n, "dropped": {reason: n}, "queued": n}``: events the receiver accepted, events
        given up (`DROP_REASONS`), events waiting now."""
        with self._lock:
            return {"sent": self._sent, "dropped": dict(self._dropped), "queued": self._queue.qsize()}

    # --- the worker ----------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=0.2)
            except queue.Empty:
                if self._closing.is_set():
                    return
                continue
            batch = [first]
            while len(batch) < self._batch_size:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._export(batch)

    def _export(self, batch: list[EvaluationEvent]) -> None:
        try:
            result = self._exporter.export([self._log_record(e) for e in batch])
            ok = getattr(result, "name", None) == "SUCCESS"
        except Exception:  # the SDK exporter reports failures as results; anything else is a bug to log
            log.exception("label export: exporting %d event(s) raised", len(batch))
            ok = False
        if ok:
            with self._lock:
                self._sent += len(batch)
        else:
            self._drop(EXPORT_FAILED, len(batch))

    def _drop(self, reason: str, n: int) -> None:
        if n <= 0:
            return
        now = time.monotonic()
        with self._lock:
            self._dropped[reason] += n
            warn = now - self._warned_at >= _WARN_EVERY_S
            if warn:
                self._warned_at = now
                totals = dict(self._dropped)
        if warn:
            log.warning("label export to %s: dropped %d event(s) (%s); dropped so far: %s", self.endpoint, n,
                        reason, ", ".join(f"{k} {v}" for k, v in totals.items()))

    def _log_record(self, event: EvaluationEvent) -> ReadableLogRecord:
        from opentelemetry._logs import LogRecord, SeverityNumber
        from opentelemetry.sdk._logs import ReadableLogRecord
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

        # the judged span, as the event's parent: a remote, sampled span context of its ids
        parent = set_span_in_context(NonRecordingSpan(SpanContext(
            int(event.trace_id, 16), int(event.span_id, 16), is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED))))
        now = time.time_ns()
        record = LogRecord(timestamp=now, observed_timestamp=now, context=parent,
                           severity_number=SeverityNumber.INFO, event_name=sc.EVALUATION_RESULT_EVENT,
                           attributes=event.attributes)
        return ReadableLogRecord(log_record=record, resource=self._resource(event.service, event.release),
                                 instrumentation_scope=InstrumentationScope(SCOPE_NAME))

    def _resource(self, service: str, release: str) -> Any:
        from opentelemetry.sdk.resources import Resource

        key = (service, release)
        got = self._resources.get(key)
        if got is None:
            if len(self._resources) >= 1024:  # releases come and go; keep the cache bounded
                self._resources.clear()
            attrs = {sc.SERVICE_NAME: service} | ({sc.SERVICE_VERSION: release} if release else {})
            got = self._resources[key] = Resource(attrs)
        return got

    # --- shutdown ----------------------------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued for up to ``timeout`` seconds, then stop; what is left is dropped
        (counted as ``shutdown``). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        self._thread.join(timeout)
        # a batch still retrying against a receiver that is down: stop its backoff now
        self._exporter.shutdown()
        self._thread.join(2.0)
        left = 0
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
            left += 1
        self._drop(SHUTDOWN, left)

    def __enter__(self) -> LabelExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

