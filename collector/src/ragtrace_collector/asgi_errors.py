"""Error answers sent by the collector's ASGI middlewares, in the form the route would have used.

``POST /v1/traces`` answers an OTLP ``google.rpc.Status`` in the request's encoding (protobuf or JSON),
as the OTLP/HTTP specification asks; every other route ``{"error": reason}``. Used where a middleware
answers for a route (a body that did not arrive in time, a request cut short by shutdown).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

import orjson

from ragtrace_collector.otlp import JSON, OtlpError, encode_status, media_type

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]

#: the OTLP receiver's path
OTLP_PATH = "/v1/traces"


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of request header ``name`` (lower case), or None."""
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def error_body(scope: Scope, status: int, reason: str) -> tuple[str, bytes]:
    """(media type, body) of an error answer to the request of ``scope``."""
    if scope.get("path") == OTLP_PATH:
        try:
            mt = media_type(header(scope, b"content-type"))
        except OtlpError:
            mt = JSON
        return mt, encode_status(mt, status, reason)
    return JSON, orjson.dumps({"error": reason})


async def send_error(send: Send, scope: Scope, status: int, reason: str,
                     headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Answer ``status`` with ``reason`` and close the connection after it."""
    ctype, body = error_body(scope, status, reason)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": body})
