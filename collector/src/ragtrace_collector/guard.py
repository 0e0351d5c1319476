"""What every request of `ragtrace serve` passes before a route sees it, and what every response carries.

Without tenant tokens the collector has no credential a browser would lack, so a web page the user
happens to open could drive it: post a cross-site form (``enctype=text/plain`` needs no CORS
preflight) to the admin or audit API, or rebind its own DNS name to 127.0.0.1 and read the trace API
as "same origin". `RequestGuard` (a plain ASGI middleware, so the OTLP hot path pays a header scan
and nothing else) refuses, in this order:

1. an ambiguous host — 400: more than one ``Host`` header, or a request line in absolute form
   (``GET http://name/path``) whose host is not the ``Host`` header's (RFC 9112 §3.2: the request
   line's host is the one that counts, so a check of ``Host`` alone would judge another name);
2. a host that is not one of this server's names (DNS rebinding) — 400. The names are
   ``settings.allowed_hosts``, by default the loopback names and ``settings.host``; checked whenever
   no tokens are configured, and with tokens too once ``allowed_hosts`` is set;
3. a write (any method but GET/HEAD/OPTIONS) from another origin — 403: ``Sec-Fetch-Site`` other than
   ``same-origin``/``none`` when the browser sends it, else an ``Origin`` whose scheme, host and port
   are not this request's (the loopback names count as one host: a page of ``http://localhost:4318``
   is this server's when the request says ``Host: 127.0.0.1:4318``). An ``Origin`` naming one of
   ``settings.allowed_hosts`` is this server's whatever its scheme and port (http or https): behind a
   reverse proxy the browser's scheme and port are the proxy's. Scripts and SDKs send neither header;
4. a JSON API write (``/api/...``, ``/review/api/...``) whose body is not ``application/json`` — 415.
   A browser cannot send that type cross-origin without a CORS preflight, which this server never
   grants. OTLP (``/v1/traces``) keeps its own two media types, checked by its route;
5. without a credential, when tokens are configured: ``/openapi.json``, ``/metrics`` and ``/readyz``
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

#: names a loopback-only server answers to by default; one host when origins are compared
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
#: where `ragtrace_collector.serving` puts the authority of a request line in absolute form
#: (``GET http://name:port/path``) in the ASGI scope's ``extensions``: uvicorn keeps only the path
TARGET_AUTHORITY = "ragtrace.target_authority"
_DEFAULT_PORTS = {"http": 80, "https": 443}
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


def host_port(host: str, scheme: str) -> tuple[str, int | None]:
    """``Host`` header → (name, port): the scheme's default port when none is given, None when the
    port is not a number (``[::1]:4318`` → ``("::1", 4318)``)."""
    h = host.strip().lower()
    if h.startswith("[") and "]" in h:
        end = h.find("]")
        name, rest = h[1:end], h[end + 1:]
        port = rest[1:] if rest.startswith(":") else ""
    elif h.count(":") == 1:
        name, _, port = h.partition(":")
    else:  # no port, or a bare IPv6 address
        name, port = h, ""
    if not port:
        return name, _DEFAULT_PORTS.get(scheme)
    return name, int(port) if port.isdigit() else None


def _strip_brackets(name: str) -> str:
    return name[1:-1] if name.startswith("[") and name.endswith("]") else name


def _same_host(a: str, b: str) -> bool:
    return a == b or (a in LOOPBACK_HOSTS and b in LOOPBACK_HOSTS)


def target_authority(scope: Scope) -> str | None:
    """The authority of a request line in absolute form (``http://NAME:PORT/path``), else None. Put
    in the scope by `ragtrace_collector.serving`'s protocol; under another server an absolute-form
    target shows as a path that does not start with ``/`` (h11), which is read here too."""
    found = (scope.get("extensions") or {}).get(TARGET_AUTHORITY)
    if isinstance(found, str):
        return found
    path: str = scope.get("path", "")
    if path and not path.startswith("/") and "://" in path:
        return urlsplit(path).netloc
    return None


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
        headers, hosts = _headers(scope.get("headers", ()))
        path: str = scope.get("path", "")
        refusal = _ambiguous_host(hosts, target_authority(scope))
        if refusal is None:
            # the request line's host, when it names one, is the one that counts (RFC 9112 §3.2.2)
            headers["host"] = target_authority(scope) or headers.get("host", "")
            refusal = self.refusal(scope.get("method", "GET"), path, headers, scope.get("scheme", "http"))
        if refusal is not None:
            status, reason, extra = refusal
            await _send_error(send, status, reason, extra)
            return
        await self.app(scope, receive, _with_security_headers(send, path))

    def refusal(self, method: str, path: str, headers: Mapping[str, str], scheme: str = "http"
                ) -> tuple[int, str, dict[str, str]] | None:
        """(status, reason, headers) when the request is refused, else None. ``scheme``: the
        request's (``http``, or ``https`` when a proxy said so)."""
        host = headers.get("host", "")
        if self.check_host:
            name = host_name(host)
            if not host:
                return 400, "a Host header is required", {}
            if self.hosts is not None and name not in self.hosts:
                return 400, (f"this server does not answer to Host {name[:100]!r}; if that is its name, "
                             "start it with --allowed-hosts NAME (RAGTRACE_ALLOWED_HOSTS)"), {}
        if method not in _SAFE_METHODS:
            if not self._same_origin_write(headers, host, scheme):
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

    def _same_origin_write(self, headers: Mapping[str, str], host: str, scheme: str) -> bool:
        # Sec-Fetch-Site is set by the browser itself (no page can forge it) and says what Origin
        # cannot always: under `Referrer-Policy: no-referrer`, which the review UI sends, Chromium
        # sends `Origin: null` even on the UI's own forms. Browsers without it send a real Origin.
        site = headers.get("sec-fetch-site")
        if site is not None:
            return site.lower() in ("same-origin", "none")
        origin = headers.get("origin")
        return origin is None or self._same_origin(origin, host, scheme)

    def _same_origin(self, origin: str, host: str, scheme: str) -> bool:
        """Whether ``origin`` is this request's own: the same scheme, host and port (the loopback
        names count as one host), or one of the names the operator declared (``allowed_hosts``)."""
        if origin == "null":  # sandboxed frames, file: pages, cross-origin redirects
            return False
        try:
            parts = urlsplit(origin)
            o_scheme, o_host, o_port = parts.scheme.lower(), (parts.hostname or ""), parts.port
        except ValueError:  # a port that is not a number, a malformed address
            return False
        if o_scheme not in _DEFAULT_PORTS or not o_host:
            return False
        if o_host in self.own_names:
            # behind a reverse proxy the browser's scheme and port are the proxy's, not this request's
            return True
        name, port = host_port(host, scheme)
        return (o_scheme == scheme.lower() and (o_port or _DEFAULT_PORTS[o_scheme]) == port
                and _same_host(o_host, name))

    def _authorised(self, headers: Mapping[str, str]) -> bool:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        sent = token.strip().encode()
        ok = False
        for known in self.credentials:  # every one compared, in constant time
            ok |= scheme.lower() == "bearer" and bool(sent) and hmac.compare_digest(known, sent)
        return ok


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> tuple[dict[str, str], list[str]]:
    """The headers (the first of repeated ones, as Starlette's ``Headers.get`` reads them) and every
    ``Host`` value."""
    out: dict[str, str] = {}
    hosts: list[str] = []
    for key, value in raw:
        name = key.decode("latin-1").lower()
        if name == "host":
            hosts.append(value.decode("latin-1"))
        if name not in out:
            out[name] = value.decode("latin-1")
    return out, hosts


def _ambiguous_host(hosts: list[str], authority: str | None) -> tuple[int, str, dict[str, str]] | None:
    """400 for a request that names two hosts: two ``Host`` headers, or an absolute-form request
    line whose host is not its ``Host`` header's (RFC 9112 §3.2 requires them to be the same)."""
    if len(hosts) > 1:
        return 400, "a request must carry one Host header, this one has several (RFC 9112 §3.2)", {}
    if authority is not None:
        if not authority:
            return 400, "the request line's URL names no host", {}
        if hosts and hosts[0].strip().lower() != authority.strip().lower():
            return 400, (f"the request line names host {authority[:100]!r} but the Host header says "
                         f"{hosts[0][:100]!r}; send the same in both (RFC 9112 §3.2)"), {}
    return None


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
