"""ASGI middleware: one root span per HTTP request, for FastAPI, Starlette or any ASGI app.

    app.add_middleware(RagtraceMiddleware)            # FastAPI / Starlette
    app = RagtraceMiddleware(app)                     # any ASGI app

- A W3C ``traceparent`` header is honoured: the request span joins the caller's trace.
- ``http.request.method``, ``url.path``, ``http.route`` (the matched route template, when the
  framework exposes it) and ``http.response.status_code`` are recorded; a 5xx status or an
  exception marks the span as an error (the exception is re-raised unchanged).
- Streaming responses: the span ends when the application has sent the whole body, so a
  ``@ragtrace.pipeline`` streaming its answer inside the request is complete by then; the
  request span carries the pipeline's query, answer and query id as well.
- ``trace_id_header="x-trace-id"`` adds the trace id to every response, for clients that want to
  send feedback later.

Needs no web framework import; costs nothing when ragtrace is not configured.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry.trace import SpanContext, TraceFlags

from ragtrace import _runtime as rt
from ragtrace import semconv as sc
from ragtrace._runtime import REQUEST, log_once

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_HEX = frozenset(b"0123456789abcdef")


def parse_traceparent(value: bytes | str | None) -> SpanContext | None:
    """A W3C ``traceparent`` value -> remote SpanContext; None when absent or malformed."""
    if value is None:
        return None
    raw = value.encode("latin-1") if isinstance(value, str) else value
    parts = raw.strip().lower().split(b"-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == b"ff":
        return None
    if parts[0] == b"00" and len(parts) != 4:
        return None
    version, trace_hex, span_hex, flags_hex = parts[:4]
    if len(trace_hex) != 32 or len(span_hex) != 16 or len(flags_hex) != 2:
        return None
    if not (set(version + trace_hex + span_hex + flags_hex) <= _HEX):
        return None
    trace_id, span_id = int(trace_hex, 16), int(span_hex, 16)
    if trace_id == 0 or span_id == 0:
        return None
    return SpanContext(trace_id, span_id, True, TraceFlags(int(flags_hex, 16)))


class RagtraceMiddleware:
    """Wraps an ASGI app; see the module docstring."""

    def __init__(self, app: ASGIApp, *, trace_id_header: str | None = None,
                 exclude_paths: Iterable[str] = ()) -> None:
        self.app = app
        self._trace_header = trace_id_header.lower().encode("latin-1") if trace_id_header else None
        self._exclude = frozenset(exclude_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or rt.runtime() is None or scope.get("path") in self._exclude:
            await self.app(scope, receive, send)
            return
        rec = None
        try:
            method = str(scope.get("method", "GET"))
            parent = None
            # When other instrumentation already opened a server span for this request, nest under
            # it (it has honoured the traceparent itself); otherwise read the header.
            if not otel_trace.get_current_span().get_span_context().is_valid:
                for key, value in scope.get("headers") or ():
                    if key == b"traceparent":
                        parent = parse_traceparent(value)
                        break
            rec = rt.start(REQUEST, method, parent=parent)
            if rec is not None:
                rec.http = {sc.HTTP_REQUEST_METHOD: method, sc.URL_PATH: str(scope.get("path", ""))}
        except Exception:
            log_once("asgi-start", "ragtrace: could not start a request span", exc_info=True)
        if rec is None:
            await self.app(scope, receive, send)
            return

        http = rec.http
        trace_header = self._trace_header
        trace_id = format(rec.trace_id, "032x").encode()

        async def send_wrapper(message: Message) -> None:
            if message.get("type") == "http.response.start" and http is not None:
                try:
                    http[sc.HTTP_RESPONSE_STATUS_CODE] = int(message.get("status", 0))
                    if trace_header is not None:
                        message = dict(message)
                        message["headers"] = [*message.get("headers", ()), (trace_header, trace_id)]
                except Exception:
                    log_once("asgi-send", "ragtrace: could not read the response start", exc_info=True)
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except BaseException as exc:
            rec.error = exc
            if http is not None and sc.HTTP_RESPONSE_STATUS_CODE not in http:
                http[sc.HTTP_RESPONSE_STATUS_CODE] = 500
            raise
        finally:
            try:
                self._finish(rec, scope, method)
            except Exception:
                log_once("asgi-end", "ragtrace: could not end a request span", exc_info=True)

    @staticmethod
    def _finish(rec: rt.SpanRecord, scope: Scope, method: str) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) if route is not None else None
        if isinstance(template, str) and template:
            rec.name = f"{method} {template}"
            if rec.http is not None:
                rec.http[sc.HTTP_ROUTE] = template
        rt.end(rec)
