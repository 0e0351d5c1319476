"""The bounded export queue and its worker thread.

The request path only appends a finished ``SpanRecord`` to a deque (≈0.1 µs). A worker thread,
started lazily on the first span, wakes when a batch is full or the schedule delay passes, turns
records into flattened spans (``_flatten``) and hands them to a sink (OTLP/HTTP, a user's
``SpanExporter`` or an existing TracerProvider's processors).

Guarantees:
- the queue is bounded: when full, new spans are dropped and counted (``stats().dropped_queue_full``);
- a sink failure is counted (``dropped_export_failed``) and logged at most once a minute (the
  OTLP sink also says its first failure at once, naming the endpoint);
- ``flush``/``shutdown`` wait at most their timeout; ``shutdown`` then drops what is still queued
  (``dropped_at_shutdown``) and says, in one warning, what this configuration did not export;
- fork-safe: in a forked child the queue is emptied (the parent exports those spans), the counters
  restart from zero, a new worker starts on the child's first span and the sink reopens its
  connections.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ragtrace._runtime import log_once

if TYPE_CHECKING:
    from ragtrace._flatten import FlatSpan, Flattener
    from ragtrace._runtime import SpanRecord

_log = logging.getLogger("ragtrace")


class RequestTooLarge(Exception):
    """A sink's receiver refused a request for its size (HTTP 413): the queue sends the batch again
    in halves, so one oversized span does not take the rest of its batch with it."""

    def __init__(self, spans: int, nbytes: int, reason: str) -> None:
        super().__init__(reason)
        self.spans = spans
        self.nbytes = nbytes
        self.reason = reason


class Sink(Protocol):
    """Where flattened spans go. ``export`` returns True on success and must not raise for
    ordinary failures (it may; the queue counts that as a failure too)."""

    def export(self, spans: Sequence[FlatSpan]) -> bool: ...

    def after_fork(self) -> None: ...

    def shutdown(self) -> None: ...


@dataclass(frozen=True)
class Stats:
    """Counters since ``configure()``; read them with ``ragtrace.stats()``.

    ``spans_queued`` counts spans waiting in the queue now; the others are cumulative.
    """

    spans_exported: int
    spans_queued: int
    dropped_queue_full: int
    dropped_export_failed: int
    dropped_flatten_failed: int
    export_requests: int
    export_failures: int
    #: spans still queued when ``shutdown()`` gave up waiting (its timeout passed)
    dropped_at_shutdown: int = 0


class ExportQueue:
    """Bounded queue + worker thread. One per ``configure()``."""

    def __init__(self, sink: Sink, flattener: Flattener, *, max_queue_size: int, max_batch: int,
                 schedule_delay_s: float) -> None:
        self._sink = sink
        self._flattener = flattener
        self._max_queue = max_queue_size
        self._max_batch = max_batch
        self._delay = schedule_delay_s
        self._queue: collections.deque[SpanRecord] = collections.deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()  # guards counters written off the worker, and thread start
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._flush_requested = 0
        self._flush_done = 0
        self._busy = False
        self.exported = 0
        self.dropped_queue_full = 0
        self.dropped_export_failed = 0
        self.dropped_flatten_failed = 0
        self.export_requests = 0
        self.export_failures = 0
        self.dropped_at_shutdown = 0
        self._inflight = 0  # spans of the batch the worker is exporting now
        _live_queues.add(self)

    # --- request path ------------------------------------------------------------------------

    def put(self, rec: SpanRecord) -> None:
        queue = self._queue
        if len(queue) >= self._max_queue or self._stopping:
            with self._lock:
                self.dropped_queue_full += 1
            log_once("queue-full", "ragtrace: export queue full (%d spans); dropping spans. "
                     "Raise RAGTRACE_MAX_QUEUE_SIZE or check the collector.", self._max_queue)
            return
        queue.append(rec)
        if self._thread is None:
            self._start_worker()
        if len(queue) >= self._max_batch:
            self._wake.set()

    def _start_worker(self) -> None:
        with self._lock:
            if self._thread is not None or self._stopping:
                return
            thread = threading.Thread(target=self._run, name="ragtrace-export", daemon=True)
            self._thread = thread
        thread.start()

    # --- worker ------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._wake.wait(self._delay)
            self._wake.clear()
            with self._lock:
                self._busy = True
                flush_target = self._flush_requested
                stopping = self._stopping
            try:
                self._drain()
            except Exception:  # a bug of ours must not kill the worker
                log_once("worker", "ragtrace: export worker error", exc_info=True)
            with self._lock:
                self._busy = False
                self._flush_done = max(self._flush_done, flush_target)
                self._idle.notify_all()
            if stopping:
                return

    def _drain(self) -> None:
        queue = self._queue
        while queue:
            records: list[SpanRecord] = []
            while queue and len(records) < self._max_batch:
                records.append(queue.popleft())
            spans, failed = self._flattener.flatten(records)
            if failed:
                with self._lock:
                    self.dropped_flatten_failed += failed
            if not spans:
                continue
            self._send(spans)

    def _send(self, spans: Sequence[FlatSpan]) -> None:
        """Export ``spans``; a request refused as too large goes again as two halves, down to one
        span, so only a span that is too large on its own is dropped."""
        ok = False
        self._inflight = len(spans)
        too_large: RequestTooLarge | None = None
        try:
            ok = self._sink.export(spans)
            if not ok:  # the OTLP sink has logged the details under the same key already
                log_once("export-failed", "ragtrace: exporting %d spans failed; they are dropped "
                         "(counted in ragtrace.stats())", len(spans))
        except RequestTooLarge as exc:
            too_large = exc
        except Exception as exc:
            log_once("export-failed", "ragtrace: exporting %d spans failed: %r", len(spans), exc)
        split = too_large is not None and len(spans) > 1
        with self._lock:
            self._inflight = 0
            self.export_requests += 1
            if ok:
                self.exported += len(spans)
            elif not split:
                self.export_failures += 1
                self.dropped_export_failed += len(spans)
        if too_large is None:
            return
        if split:
            log_once("export-split", "ragtrace: the collector refused %d spans (%d bytes) in one request as "
                     "too large (%s); sending them in smaller requests. Lower RAGTRACE_MAX_EXPORT_BATCH or "
                     "raise the collector's RAGTRACE_MAX_BODY_BYTES.", len(spans), too_large.nbytes,
                     too_large.reason)
            half = len(spans) // 2
            self._send(spans[:half])
            self._send(spans[half:])
        else:
            log_once("export-too-large", "ragtrace: dropped span %r: alone it is %d bytes, more than the "
                     "collector accepts (%s). Send less passage text (content='truncate:N' or 'hash') or "
                     "raise the collector's RAGTRACE_MAX_BODY_BYTES. Counted in ragtrace.stats().",
                     spans[0].name, too_large.nbytes, too_large.reason)

    # --- control -----------------------------------------------------------------------------

    def flush(self, timeout_s: float) -> bool:
        """Export everything queued now; True when done within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        if self._thread is None:
            if not self._queue:
                return True
            self._start_worker()
        with self._lock:
            self._flush_requested += 1
            target = self._flush_requested
        self._wake.set()
        with self._lock:
            while self._flush_done < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return not self._queue

    def shutdown(self, timeout_s: float) -> bool:
        """Flush for at most ``timeout_s`` in all, then stop: what is still queued is dropped and
        counted, and one warning says what this configuration did not export. True when
        everything was exported."""
        deadline = time.monotonic() + timeout_s
        # most of the budget for the flush; the rest lets the worker see the sink close and count
        # the batch it was sending
        done = self.flush(max(0.0, timeout_s - min(0.1, timeout_s / 4)))
        with self._lock:
            self._stopping = True
            thread = self._thread
            left = len(self._queue)
            self._queue.clear()
            self.dropped_at_shutdown += left
        self._wake.set()
        try:
            # before the join: it ends the sink's retries, so the worker stops within the bound
            self._sink.shutdown()
        except Exception:
            log_once("sink-shutdown", "ragtrace: sink shutdown failed", exc_info=True)
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
        _live_queues.discard(self)
        with self._lock:
            inflight = self._inflight if thread is not None and thread.is_alive() else 0
        st = self.stats()
        parts = [(left, "still queued"), (inflight, "being sent when it stopped"),
                 (st.dropped_export_failed, "failed to export"), (st.dropped_queue_full, "dropped on a full queue"),
                 (st.dropped_flatten_failed, "could not be encoded")]
        lost = sum(n for n, _ in parts)
        if lost:
            where = getattr(self._sink, "url", None) or type(self._sink).__name__
            _log.warning("ragtrace: %d spans of this run were not exported to %s (%s); shutdown waits at most "
                         "%.1f s (RAGTRACE_SHUTDOWN_TIMEOUT_MS). ragtrace.stats() has the counts.", lost, where,
                         ", ".join(f"{n} {what}" for n, what in parts if n), timeout_s)
        return done and not left

    def stats(self) -> Stats:
        with self._lock:
            return Stats(self.exported, len(self._queue), self.dropped_queue_full,
                         self.dropped_export_failed, self.dropped_flatten_failed,
                         self.export_requests, self.export_failures, self.dropped_at_shutdown)

    def _after_fork_in_child(self) -> None:
        # The worker thread does not exist in the child and the lock may have been held by it at
        # fork time. Spans already queued belong to the parent, which exports them.
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._queue.clear()
        self._thread = None
        self._busy = False
        self._flush_requested = self._flush_done = 0
        # Counters describe this process: the child starts from zero.
        self.exported = self.dropped_queue_full = self.dropped_export_failed = 0
        self.dropped_flatten_failed = self.export_requests = self.export_failures = 0
        self.dropped_at_shutdown = self._inflight = 0
        try:
            self._sink.after_fork()
        except Exception:
            log_once("fork", "ragtrace: sink could not reset after fork", exc_info=True)


_live_queues: weakref.WeakSet[ExportQueue] = weakref.WeakSet()


def _after_fork() -> None:
    for queue in list(_live_queues):
        queue._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
