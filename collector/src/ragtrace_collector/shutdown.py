"""Stopping within ``--shutdown-timeout`` of SIGTERM, whatever is in flight.

uvicorn's graceful shutdown waits for every request to finish, and a request cannot always be made to:
a store read or an audit runs in a worker thread that nothing can interrupt, so a long listing kept
the server up for minutes after SIGTERM, and a large decode for seconds past the timeout. `Shutdown`
splits the timeout ``T`` from the signal:

* until ``T × REQUESTS_SHARE`` requests in flight may finish (an export in flight is answered as usual);
* then `ShutdownGate` (an ASGI middleware that knows every request in flight) cuts the rest: one that has
  not begun its answer gets 503 with ``Retry-After`` and ``Connection: close`` (an OTLP ``Status`` on
  ``/v1/traces``: the exporter retries, against another replica or after the restart; nothing of it was
  acknowledged, so nothing is lost), one whose answer is streaming is cut off (the client sees the
  connection close before the end of the body, never a complete-looking answer). Their tasks are
  cancelled; one held by a worker thread stays behind as a *straggler* until the thread returns;
* the writer flushes what is queued until ``T - FLUSH_MARGIN_S`` (what is left stays in the spool and
  is replayed at the next start);
* whoever runs the server (`ragtrace serve`) leaves at once when stragglers remain after that, and in
  any case at ``T`` (`Shutdown.watch`): exiting then is what a kill -9 would do, which the spool is
  built to survive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ragtrace_collector.asgi_errors import send_error
from ragtrace_collector.client_errors import ClientErrors

log = logging.getLogger("ragtrace.collector")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the share of the timeout requests in flight get to finish
REQUESTS_SHARE = 0.5
#: seconds of the timeout kept for leaving after the writer's flush
FLUSH_MARGIN_S = 0.5
#: what a request cut by the shutdown is told
CUT_REASON = "the server is shutting down; retry the request (it was not processed)"


class ShutdownCut(Exception):
    """Raised into a request's task when it sends after being cut."""


class _InFlight:
    __slots__ = ("cut", "response_started", "scope", "send", "task")

    def __init__(self, scope: Scope, send: Send, task: asyncio.Task[Any] | None) -> None:
        self.scope = scope
        self.send = send
        self.task = task
        self.response_started = False
        self.cut = False


class Shutdown:
    """The timeline described in the module docstring. ``begin`` may be called from a signal handler."""

    def __init__(self, timeout: float, errors: ClientErrors | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout = timeout
        self.errors = errors
        self.clock = clock
        self.began_at: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_flight: set[_InFlight] = set()
        self._cut: list[_InFlight] = []

    @property
    def begun(self) -> bool:
        return self.began_at is not None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop requests are served on (the app's lifespan calls this at start)."""
        self._loop = loop

    def begin(self) -> None:
        """SIGTERM: the clock starts. Safe from a signal handler and from any thread."""
        if self.began_at is not None:
            return
        self.began_at = self.clock()
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._schedule_cut)

    def remaining(self) -> float:
        """Seconds left until the deadline (the whole timeout before `begin`)."""
        if self.began_at is None:
            return self.timeout
        return max(0.0, self.began_at + self.timeout - self.clock())

    def flush_budget(self) -> float:
        """How long the writer may flush: until `FLUSH_MARGIN_S` before the deadline."""
        return max(0.0, self.remaining() - FLUSH_MARGIN_S)

    def stragglers(self) -> int:
        """Requests cut whose task has not ended (a worker thread still holds it)."""
        return sum(1 for r in self._cut if r.task is not None and not r.task.done())

    def watch(self, leave: Callable[[], None]) -> None:
        """Call ``leave`` (which must end the process) at the deadline unless the process ended first.
        Starts a daemon thread; call after `begin`."""
        def wait_then_leave() -> None:
            time.sleep(self.remaining())
            log.warning("shutdown: --shutdown-timeout (%g s) has passed; leaving now (what was not written "
                        "stays in the spool and is replayed at the next start)", self.timeout)
            leave()

        threading.Thread(target=wait_then_leave, name="ragtrace-shutdown-deadline", daemon=True).start()

    # --- in the event loop ------------------------------------------------------------------
    def _schedule_cut(self) -> None:
        assert self._loop is not None and self.began_at is not None
        delay = max(0.0, self.began_at + self.timeout * REQUESTS_SHARE - self.clock())
        self._loop.call_later(delay, self._cut_in_flight)

    def _cut_in_flight(self) -> None:
        requests = [r for r in self._in_flight if not r.cut]
        if requests:
            log.warning("shutdown: cutting %d request(s) still in flight after %.1f s", len(requests),
                        self.timeout * REQUESTS_SHARE)
        for request in requests:
            request.cut = True
            self._cut.append(request)
            if self.errors is not None:
                self.errors.note("cut_at_shutdown", f"{request.scope.get('method')} {request.scope.get('path')}")
            if request.response_started:
                if request.task is not None:
                    request.task.cancel("cut by the shutdown")
            else:
                assert self._loop is not None
                self._loop.create_task(self._refuse(request))

    async def _refuse(self, request: _InFlight) -> None:
        with contextlib.suppress(Exception):  # the client may be gone already
            await send_error(request.send, request.scope, 503, CUT_REASON, [(b"retry-after", b"1")])
        if request.task is not None:
            request.task.cancel("cut by the shutdown")


class ShutdownGate:
    """The middleware that lets `Shutdown` cut the requests in flight."""

    def __init__(self, app: ASGIApp, shutdown: Shutdown) -> None:
        self.app = app
        self.shutdown = shutdown

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = _InFlight(scope, send, asyncio.current_task())

        async def gated_send(message: Message) -> None:
            if request.cut:
                raise ShutdownCut(CUT_REASON)
            if message["type"] == "http.response.start":
                request.response_started = True
            await send(message)

        self.shutdown._in_flight.add(request)
        try:
            await self.app(scope, receive, gated_send)
        except (asyncio.CancelledError, ShutdownCut, BaseExceptionGroup):
            if not request.cut:
                raise
            # cut by the shutdown: answered (503) or cut off; nothing more to say
        finally:
            self.shutdown._in_flight.discard(request)
