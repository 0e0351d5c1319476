"""Client errors: counted each time, logged once per kind per interval.

A broken or hostile client population repeats the same error thousands of times a second: a
disconnect in the middle of a body, a connection that never finishes its headers, ``accept()``
out of file descriptors. One traceback each filled 16 MB of log in 45 s and buried everything
else. `ClientErrors.note` counts every occurrence in ``ragtrace_client_errors_total{kind=...}``
and logs a kind at most once per ``interval`` seconds, saying how many were not logged since.
`ClientErrorFilter` does the same for the per-occurrence messages of uvicorn and asyncio.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ragtrace_collector.metrics import Metrics

log = logging.getLogger("ragtrace.collector.clients")

#: what each kind means, as logged
KINDS = {
    "disconnect": "a client disconnected before sending its whole body",
    "body_timeout": "a request body did not arrive in time (answered 408)",
    "header_timeout": "a connection did not send its request headers in time (closed)",
    "connection_cap": "a connection beyond the connection limit (answered 503 and closed)",
    "evicted": "a connection waiting on its client was closed (408) to make room at the connection limit",
    "invalid_http": "a request that is not valid HTTP (answered 400)",
    "accept_failed": "accepting a connection failed (out of file descriptors or memory)",
    "refused": "a request refused with 429 or 503 (backpressure; the client retries)",
    "cut_at_shutdown": "a request still in flight when the shutdown's time for requests ran out (503 or cut off)",
}
INTERVAL_S = 60.0


class ClientErrors:
    """Thread-safe; ``clock`` is monotonic seconds."""

    def __init__(self, metrics: Metrics, *, interval: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, logger: logging.Logger = log) -> None:
        self.metrics = metrics
        self.interval = interval
        self.clock = clock
        self.logger = logger
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def note(self, kind: str, detail: str = "") -> None:
        """One occurrence of ``kind`` (a key of `KINDS`); ``detail`` (the client, the reason) is
        logged with the next line for the kind."""
        self.metrics.inc("ragtrace_client_errors_total", kind=kind)
        now = self.clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval:
                self._unlogged[kind] = self._unlogged.get(kind, 0) + 1
                return
            self._last[kind] = now
            more = self._unlogged.pop(kind, 0)
        what = KINDS.get(kind, kind)
        since = f"; {more} more since the last line, not logged" if more else ""
        self.logger.warning("%s%s%s (counted in ragtrace_client_errors_total{kind=\"%s\"}, logged at most once "
                            "every %.0f s)", what, f": {detail}" if detail else "", since, kind, self.interval)


#: message prefixes of uvicorn's and asyncio's per-occurrence client-error records -> kind
LOGGED_BY_OTHERS = {
    "Invalid HTTP request received.": "invalid_http",
    "socket.accept() out of system resource": "accept_failed",
    # asyncio re-arms accept() with a timer after a failure; the timer fails too at shutdown
    "Exception in callback BaseSelectorEventLoop._start_serving": "accept_failed",
}


class ClientErrorFilter(logging.Filter):
    """Drops the per-occurrence client-error records of uvicorn and asyncio (`LOGGED_BY_OTHERS`)
    and notes them in `ClientErrors` instead."""

    def __init__(self, errors: ClientErrors) -> None:
        super().__init__()
        self.errors = errors

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        for prefix, kind in LOGGED_BY_OTHERS.items():
            if message.startswith(prefix):
                exc = record.exc_info[1] if record.exc_info else None
                self.errors.note(kind, str(exc) if exc else "")
                return False
        return True
