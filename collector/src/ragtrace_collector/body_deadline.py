"""A deadline for every request's body, and a client leaving mid-body counted instead of traced.

Whatever a route does with its body (the OTLP receiver streams it, the login form and the audit API
read it whole, FastAPI parses it), `BodyDeadline` (a plain ASGI middleware) wraps the ``receive`` the
route reads it through:

* the whole body must arrive within ``timeout`` seconds of the request's headers. When it has not, the
  client is answered 408 with ``Connection: close`` (an OTLP ``Status`` for ``/v1/traces``, JSON
  elsewhere), the route's wait ends with `BodyTimeout`, and whatever the route answers afterwards is
  dropped. Once the body is in, ``receive`` is not timed: it then only waits for a disconnect (a
  streaming response listens for one);
* a disconnect before the body is complete is counted (``ragtrace_client_errors_total{kind="disconnect"}``,
  one log line per minute) and the `ClientDisconnect` a route raises for it goes no further, so it is
  never logged as "Exception in ASGI application".

Both are counted in `ClientErrors`. What holds a connection slot while its client dawdles is bounded by
this, by the header deadline and, at the connection limit, by evicting the longest-waiting connection
(`ragtrace_collector.serving`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import ClientDisconnect

from ragtrace_collector.asgi_errors import OTLP_PATH, header, send_error
from ragtrace_collector.client_errors import ClientErrors
from ragtrace_collector.metrics import Metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTimeout(Exception):
    """Raised into a route whose request body did not arrive in time (the client has its 408)."""


class _Request:
    __slots__ = ("answered", "body_done", "received", "response_started")

    def __init__(self) -> None:
        self.body_done = False
        self.received = 0
        self.response_started = False
        self.answered = False  # the 408 went out: the route's own answer is dropped


class BodyDeadline:
    """The ASGI middleware described in the module docstring."""

    def __init__(self, app: ASGIApp, *, timeout: float, errors: ClientErrors, metrics: Metrics) -> None:
        self.app = app
        self.timeout = timeout
        self.errors = errors
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = _Request()
        deadline = asyncio.get_running_loop().time() + self.timeout

        async def timed_receive() -> Message:
            if state.body_done or state.answered:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                await self._timed_out(scope, state, send)
                raise BodyTimeout(f"the request body did not arrive within {self.timeout:g} s") from None
            if message["type"] == "http.request":
                state.received += len(message.get("body", b""))
                state.body_done = not message.get("more_body", False)
            elif message["type"] == "http.disconnect":
                state.body_done = True  # nothing more will come
                self.errors.note("disconnect", f"{scope.get('method')} {scope.get('path', '')[:100]} after "
                                               f"{state.received} of {_declared(scope)} bytes")
            return message

        async def guarded_send(message: Message) -> None:
            if state.answered:
                return
            if message["type"] == "http.response.start":
                state.response_started = True
            await send(message)

        # answered (408) or nobody left to answer; counted where it happened
        with contextlib.suppress(BodyTimeout, ClientDisconnect):
            await self.app(scope, timed_receive, guarded_send)

    async def _timed_out(self, scope: Scope, state: _Request, send: Send) -> None:
        client = scope.get("client")
        who = client[0] if client else "a client"
        path = scope.get("path", "")
        self.errors.note("body_timeout", f"{who} sent {state.received} of {_declared(scope)} bytes of "
                                         f"{scope.get('method')} {path[:100]} in {self.timeout:g} s")
        if state.response_started:
            return  # the route answered already (a refusal before the body was read): nothing to add
        reason = f"the request body did not arrive within {self.timeout:g} s (RAGTRACE_BODY_TIMEOUT)"
        if path == OTLP_PATH:
            self.metrics.inc("ragtrace_requests_total", code="408")
        state.answered = True
        await send_error(send, scope, 408, reason)


def _declared(scope: Scope) -> str:
    return (header(scope, b"content-length") or "?")[:20]
