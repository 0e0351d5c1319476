"""What every request of `ragtrace serve` passes before a route sees it, and what every response carries.

Without tenant tokens the collector has no credential a browser would lack, so a web page the user
happens to open could drive it: post a cross-site form (``enctype=text/plain`` needs no CORS
preflight) to the admin or audit API, or rebind its own DNS name to 127.0.0.1 and read the trace API
as "same origin". `RequestGuard` (a plain ASGI middleware, so the OTLP hot path pays a header scan
and nothing else) refuses, in this order:

1. a ``Host`` that is not one of this server's names (DNS rebinding) — 400. The names are
   ``settings.allowed_hosts``, by default the loopback names and ``settings.host``; checked whenever
   no tokens are configured, and with tokens too once ``allowed_hosts`` is set;
2. a write (any method but GET/HEAD/OPTIONS) from another origin — 403: ``Sec-Fetch-Site`` other than
   ``same-origin``/``none`` when the browser sends it, else an ``Origin`` that is not this server.
   Scripts and SDKs send neither header;
3. a JSON API write (``/api/...``, ``/review/api/...``) whose body is not ``application/json`` — 415.
   A browser cannot send that type cross-origin without a CORS preflight, which this server never
   grants. OTLP (``/v1/traces``) keeps its own two media types, checked by its route;
4. without a credential, when tokens are configured: ``/openapi.json``, ``/metrics`` and ``/readyz``
   (they describe the deployment, not one tenant; any tenant token or the admin token opens them) — 401.

Every response gets ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and frame
protection; everything but the static assets ``Cache-Control: no-store``; HTML pages a
Content-Security-Policy. Headers a route set itself (the review UI's own policy) are kept.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from ragtrace_collector.settings import CollectorSettings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: names a loopback-only server answers to by default
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
#: listen addresses that are not a name of the server ("every interface")
_ANY_ADDRESS = ("0.0.0.0", "::", "")
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_JSON_API_PREFIXES = ("/api/", "/review/api/")
#: deployment-wide routes: behind a credential when tokens are configured
OPERATOR_PATHS = frozenset({"/openapi.json", "/metrics", "/readyz"})
_STATIC_PREFIX = "/review/static/"

#: a policy for anything that is not a page: nothing may load, nothing may frame it
_API_CSP = b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'"
#: pages rendered elsewhere than the review UI (which sets its own, allowing its script and style)
_PAGE_CSP = (b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; "
             b"frame-ancestors 'none'; base-uri 'none'")


def allowed_hosts(settings: CollectorSettings) -> frozenset[str] | None:
    """The Host names served (lower case, no port), or None for any."""
    if "*" in settings.allowed_hosts:
        return None
    if settings.allowed_hosts:
        return frozenset(_strip_brackets(h.strip().lower()) for h in settings.allowed_hosts)
    names = set(LOOPBACK_HOSTS)
    if settings.host not in _ANY_ADDRESS:
        names.add(_strip_brackets(settings.host.lower()))
    return frozenset(names)


def host_name(host: str) -> str:
    """``Host`` header → the name without port, lower case (``[::1]:4318`` → ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    name, sep, port = host.rpartition(":")
    return name if sep and port.isdigit() and ":" not in name else host


def _strip_brackets(name: str) -> str:
    return name[1:-1] if name.startswith("[") and name.endswith("]") else name


class RequestGuard:
    """The ASGI middleware described in the module docstring."""

    def __init__(self, app: ASGIApp, settings: CollectorSettings) -> None:
        self.app = app
        self.hosts = allowed_hosts(settings)
        self.check_host = self.hosts is not None and (not settings.tokens or bool(settings.allowed_hosts))
        # names the operator declared as this server's: an Origin naming one of them is not foreign
        # (a reverse proxy may rewrite Host while the browser's Origin keeps the public name)
        self.own_names = frozenset(_strip_brackets(h.strip().lower()) for h in settings.allowed_hosts
                                   if h.strip() != "*")
        self.credentials = [t.encode() for t in settings.tokens]
        if settings.admin_token:
            self.credentials.append(settings.admin_token.encode())
        self.protect_operator_paths = bool(settings.tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope.get("headers", ()))
        path: str = scope.get("path", "")
        refusal = self.refusal(scope.get("method", "GET"), path, headers)
        if refusal is not None:
            status, reason, extra = refusal
            await _send_error(send, status, reason, extra)
            return
        await self.app(scope, receive, _with_security_headers(send, path))

    def refusal(self, method: str, path: str, headers: Mapping[str, str]
                ) -> tuple[int, str, dict[str, str]] | None:
        """(status, reason, headers) when the request is refused, else None."""
        host = headers.get("host", "")
        if self.check_host:
            name = host_name(host)
            if not host:
                return 400, "a Host header is required", {}
            if self.hosts is not None and name not in self.hosts:
                return 400, (f"this server does not answer to Host {name[:100]!r}; if that is its name, "
                             "start it with --allowed-hosts NAME (RAGTRACE_ALLOWED_HOSTS)"), {}
        if method not in _SAFE_METHODS:
            if not self._same_origin_write(headers, host):
                return 403, "cross-origin writes are refused: send this request from this server's own pages " \
                            "or from a script (which sends no Origin header)", {}
            if path.startswith(_JSON_API_PREFIXES) and _has_body(headers):
                media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
                if media != "application/json":
                    return 415, f"this API takes 'Content-Type: application/json', not {media[:100]!r}", {}
        if self.protect_operator_paths and path in OPERATOR_PATHS and not self._authorised(headers):
            return 401, (f"{path} needs 'Authorization: Bearer TOKEN' (a tenant token or "
                         "RAGTRACE_ADMIN_TOKEN) when the collector has tokens"), {"WWW-Authenticate": "Bearer"}
        return None

    def _same_origin_write(self, headers: Mapping[str, str], host: str) -> bool:
        # Sec-Fetch-Site is set by the browser itself (no page can forge it) and says what Origin
        # cannot always: under `Referrer-Policy: no-referrer`, which the review UI sends, Chromium
        # sends `Origin: null` even on the UI's own forms. Browsers without it send a real Origin.
        site = headers.get("sec-fetch-site")
        if site is not None:
            return site.lower() in ("same-origin", "none")
        origin = headers.get("origin")
        return origin is None or self._same_origin(origin, host)

    def _same_origin(self, origin: str, host: str) -> bool:
        if origin == "null":  # sandboxed frames, file: pages, cross-origin redirects
            return False
        try:
            netloc = urlsplit(origin).netloc.lower()
        except ValueError:
            return False
        return bool(netloc) and (netloc == host.strip().lower() or host_name(netloc) in self.own_names)

    def _authorised(self, headers: Mapping[str, str]) -> bool:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        sent = token.strip().encode()
        ok = False
        for known in self.credentials:  # every one compared, in constant time
            ok |= scheme.lower() == "bearer" and bool(sent) and hmac.compare_digest(known, sent)
        return ok


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in raw:
        name = key.decode("latin-1").lower()
        if name not in out:  # the first of repeated headers, as Starlette's Headers.get does
            out[name] = value.decode("latin-1")
    return out


def _has_body(headers: Mapping[str, str]) -> bool:
    length = headers.get("content-length", "").strip()
    return "transfer-encoding" in headers or (length != "" and length != "0")


async def _send_error(send: Send, status: int, reason: str, extra: dict[str, str]) -> None:
    body = orjson.dumps({"error": reason})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in extra.items()]
    await _with_security_headers(send, "")({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _with_security_headers(send: Send, path: str) -> Send:
    cacheable = path.startswith(_STATIC_PREFIX)

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            present = {k.lower() for k, _ in headers}
            ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
            add = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                   (b"x-frame-options", b"DENY"),
                   (b"content-security-policy", _PAGE_CSP if ctype.startswith(b"text/html") else _API_CSP)]
            if not cacheable:
                add.append((b"cache-control", b"no-store"))
            headers += [(k, v) for k, v in add if k not in present]
            message["headers"] = headers
        await send(message)

    return wrapped
