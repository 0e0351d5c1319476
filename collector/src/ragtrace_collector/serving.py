"""The HTTP server around the collector app: uvicorn with limits on slow, idle and excess connections.

uvicorn on its own lets a connection that sends half a request line, or headers and part of a
body, stay open for as long as it likes (its keep-alive timer starts only after a response and is
cancelled by the first byte), accepts connections until the process runs out of file
descriptors, and then asyncio logs a traceback for every failed ``accept()`` (up to the listen
backlog per event-loop turn). `uvicorn_config` adds:

* a header deadline: a connection must complete each request's line and headers within
  ``header_timeout`` seconds of its start or of the previous response, or it is answered 408 and
  closed (every route's body has its own deadline, ``body_timeout``: `ragtrace_collector.body_deadline`);
* ``timeout_keep_alive``: an idle keep-alive connection is closed after ``keep_alive_timeout``;
* a connection cap: beyond ``max_connections`` open connections (lowered to fit the open-files
  limit, see `connection_cap`) a new connection takes the place of the connection that has waited
  longest on its client (for a request's headers or the rest of its body, at least `EVICT_AFTER_S`),
  which is answered 408 and closed, so clients that dawdle cannot keep prompt ones out. When
  connections wait on their clients but none has waited that long yet, the new one is *held* (not
  read from) until the first of them has, then takes its place: a burst of exports arriving just
  after slow clients took every slot is answered late, not refused (at most `MAX_HELD` are held at
  once). When no connection is waiting, the new one is answered 503 and closed at once, so the
  process keeps descriptors for its store, spool and the connections it serves; a small listen
  backlog bounds how many are accepted in one event-loop turn before the cap sees them;
* the host of a request line in absolute form (``GET http://name/path``), which uvicorn drops, kept in
  the scope for `ragtrace_collector.guard` to judge;
* client errors logged once per kind per interval (`ragtrace_collector.client_errors`);
* `StoppingServer`: SIGTERM starts `ragtrace_collector.shutdown.Shutdown`'s timeline, and the process is
  left at its deadline whatever still runs.
"""

from __future__ import annotations

import asyncio
import logging
import math
import resource
import socket
from collections.abc import Callable
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from ragtrace_collector.client_errors import ClientErrorFilter, ClientErrors
from ragtrace_collector.guard import TARGET_AUTHORITY
from ragtrace_collector.settings import CollectorSettings
from ragtrace_collector.shutdown import REQUESTS_SHARE, Shutdown

log = logging.getLogger("ragtrace.collector")

#: connections accepted per event-loop turn (uvicorn's default, 2048, lets a burst blow past the cap)
BACKLOG = 128
#: a connection waiting on its client for at least this long may be closed for a new one at the cap
EVICT_AFTER_S = 1.0
#: new connections held at the cap until a waiting one can be closed for them (their descriptors
#: come out of the listen backlog's share of `FD_RESERVE`'s headroom, see `connection_cap`)
MAX_HELD = 64
#: a held connection is refused (503) if no waiting connection could be closed for it in this time
#: (those waiting can start being served before they have waited `EVICT_AFTER_S`)
MAX_HOLD_S = 2 * EVICT_AFTER_S
#: descriptors kept for everything but client connections: the embedded engine's files, the
#: spool, ingest worker pipes, the store's HTTP connections
FD_RESERVE = 256

_TIMEOUT_408 = (b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-type: text/plain\r\n"
                b"content-length: 45\r\n\r\nrequest headers not received within the limit")
_EVICTED_408 = (b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-type: text/plain\r\n"
                 b"content-length: 62\r\n\r\nclosed to make room: the request was not sent in time; retry")
_OVER_CAP_503 = (b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\nretry-after: 1\r\n"
                 b"content-type: text/plain\r\ncontent-length: 40\r\n\r\ntoo many open connections; retry shortly")


def raise_open_files_limit() -> int:
    """Raise this process's soft open-files limit to its hard limit; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-files limit from %d to %d: %s", soft, target, exc)
    return soft


def connection_cap(max_connections: int, open_files: int) -> int:
    """The connections served at most: ``max_connections``, lowered so that with the listen
    backlog and `FD_RESERVE` they fit in ``open_files`` descriptors (at least 16)."""
    return max(16, min(max_connections, open_files - BACKLOG - FD_RESERVE))


def guarded_protocol(errors: ClientErrors, *, header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools when installed, else h11) with the header deadline and
    the connection cap."""

    #: connections accepted at the cap and not read from yet (`GuardedHTTPProtocol._hold`)
    held: set[asyncio.Protocol] = set()

    class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _header_timer: asyncio.TimerHandle | None = None
        _header_cycle: Any = None
        _admit_timer: asyncio.TimerHandle | None = None
        #: loop time this connection was first held at the cap (it is refused once held `MAX_HOLD_S`)
        _held_since: float = 0.0
        #: loop time since which the client owes the next request's headers or the rest of a body
        _owed_since: float = 0.0

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._admit()

        def _admit(self) -> None:
            """Serve this new connection if the cap allows, closing a connection that has waited on
            its client long enough if need be; else hold it until one has, or refuse it."""
            self._admit_timer = None
            if self.transport.is_closing():
                held.discard(self)
                return
            if len(self.connections) - len(held - {self}) > max_connections:
                victim = self._longest_waiting(EVICT_AFTER_S)
                if victim is None:
                    soonest = self._longest_waiting(0.0)
                    if soonest is not None and self._may_hold():
                        self._hold(soonest._owed_since + EVICT_AFTER_S - self.loop.time())
                        return
                    held.discard(self)
                    errors.note("connection_cap", f"{len(self.connections) - 1} open, limit {max_connections}")
                    self.transport.write(_OVER_CAP_503)
                    self.transport.close()
                    return
                victim._evict()
            if self in held:
                held.discard(self)
                self.transport.resume_reading()
            self._arm_header_deadline()

        def _may_hold(self) -> bool:
            if self in held:
                return bool(self.loop.time() < self._held_since + MAX_HOLD_S)
            return len(held) < MAX_HELD

        def _hold(self, delay: float) -> None:
            if self not in held:
                held.add(self)
                self._held_since = self.loop.time()
                self.transport.pause_reading()  # what it sends meanwhile waits in the socket
            self._admit_timer = self.loop.call_later(max(0.0, delay) + 0.001, self._admit)

        def waiting_on_client(self) -> bool:
            """Whether the connection waits for its client: for a request's headers (none in
            progress), or for the rest of a body no answer has been started for."""
            cycle = self.cycle
            if self.transport is None or self.transport.is_closing() or self in held:
                return False
            if cycle is None or cycle is self._header_cycle:
                return True
            return bool(getattr(cycle, "more_body", False)) and not getattr(cycle, "response_started", True)

        def _longest_waiting(self, at_least: float) -> GuardedHTTPProtocol | None:
            """The connection that has waited longest on its client, if for ``at_least`` seconds."""
            now = self.loop.time()
            waiting = [c for c in self.connections if c is not self and isinstance(c, GuardedHTTPProtocol)
                       and c.waiting_on_client() and now - c._owed_since >= at_least]
            return min(waiting, key=lambda c: c._owed_since, default=None)

        def _evict(self) -> None:
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
            errors.note("evicted", f"{client} after {self.loop.time() - self._owed_since:.1f} s")
            self.transport.write(_EVICTED_408)
            self.transport.close()

        def on_headers_complete(self) -> None:
            # httptools' protocol: uvicorn keeps only the path of `GET http://name/path`; its
            # authority goes into the scope so that RequestGuard judges the host that counts
            url: bytes = getattr(self, "url", b"")
            if url[:1] not in (b"/", b"*", b"") and b"://" in url:
                authority = urlsplit(url.decode("latin-1")).netloc
                self.scope.setdefault("extensions", {})[TARGET_AUTHORITY] = authority
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_header_deadline()
            if self._admit_timer is not None:
                self._admit_timer.cancel()
                self._admit_timer = None
            held.discard(self)
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_header_deadline()  # the next request's headers are due as well

        def _arm_header_deadline(self) -> None:
            self._cancel_header_deadline()
            # the request in progress when armed: a new one replaces it once its headers are in
            self._header_cycle = self.cycle
            self._owed_since = self.loop.time()
            self._header_timer = self.loop.call_later(header_timeout, self._header_deadline_passed)

        def _cancel_header_deadline(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _header_deadline_passed(self) -> None:
            self._header_timer = None
            if self.cycle is not self._header_cycle or self.transport.is_closing():
                return  # the headers arrived (a request is being served) or it is closing anyway
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
            errors.note("header_timeout", f"{client} after {header_timeout:g} s")
            self.transport.write(_TIMEOUT_408)
            self.transport.close()

    return GuardedHTTPProtocol


class StoppingServer(uvicorn.Server):
    """uvicorn's server, stopped on `Shutdown`'s timeline: SIGTERM (or SIGINT) begins it and arms
    ``leave`` for the deadline; after the app's own shutdown (the writer's flush), ``leave`` is called at
    once when requests cut by it are still held by worker threads that cannot be interrupted (their
    tasks would otherwise be waited for as the event loop closes). ``leave`` must end the process."""

    def __init__(self, config: uvicorn.Config, shutdown: Shutdown, leave: Callable[[], None]) -> None:
        super().__init__(config)
        self.stop = shutdown
        self.leave = leave

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if not self.stop.begun:
            self.stop.begin()
            self.stop.watch(self.leave)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        stragglers = self.stop.stragglers()
        if stragglers:
            log.warning("shutdown: %d request(s) cut at shutdown still run in worker threads; leaving without "
                        "waiting for them", stragglers)
            self.leave()


def uvicorn_config(app: Any, settings: CollectorSettings, errors: ClientErrors, *, log_level: str = "info",
                   access_log: bool = False) -> uvicorn.Config:
    """The uvicorn configuration `ragtrace serve` runs ``app`` with (see the module doc). Raises the
    open-files limit as far as allowed, and says so when the connection cap had to be lowered."""
    open_files = raise_open_files_limit()
    cap = connection_cap(settings.max_connections, open_files)
    if cap < settings.max_connections:
        log.warning("serving at most %d connections (--max-connections %d does not fit the open-files limit "
                    "%d); raise `ulimit -n` to serve more", cap, settings.max_connections, open_files)
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level=log_level, access_log=access_log,
        http=guarded_protocol(errors, header_timeout=settings.header_timeout, max_connections=cap),
        timeout_keep_alive=max(1, round(settings.keep_alive_timeout)), backlog=BACKLOG,
        # requests in flight are cut at their share of the timeout (shutdown.py); uvicorn then stops
        # waiting for their connections soon after
        timeout_graceful_shutdown=math.ceil(settings.shutdown_timeout * REQUESTS_SHARE) + 1)
    # after Config (which configures uvicorn's loggers): their per-occurrence client errors
    for name in ("uvicorn.error", "asyncio"):
        logging.getLogger(name).addFilter(ClientErrorFilter(errors))
    # a streaming answer cut by the shutdown ends without its last chunk, as intended: uvicorn says so
    # at ERROR level once per request; the cut is counted and logged by shutdown.py instead
    logging.getLogger("uvicorn.error").addFilter(_CutAnswerFilter(app))
    return config


class _CutAnswerFilter(logging.Filter):
    def __init__(self, app: Any) -> None:
        super().__init__()
        self.app = app

    def filter(self, record: logging.LogRecord) -> bool:
        shutdown = getattr(getattr(self.app, "state", None), "shutdown", None)
        return not (isinstance(shutdown, Shutdown) and shutdown.begun
                    and record.msg == "ASGI callable returned without completing response.")
