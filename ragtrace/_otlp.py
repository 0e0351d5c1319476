"""OTLP/HTTP export: flattened spans -> ExportTraceServiceRequest protobuf bytes -> POST /v1/traces.

Why a hand-written encoder: building protobuf message objects costs about 5 µs per attribute in
Python (~1.1 ms for a 4-span query carrying 20 passages), more than the whole request-path cost.
The wire format of the few messages involved is small and stable, so spans are written as bytes
directly (about 4x cheaper); tests decode the output with ``opentelemetry.proto`` and compare it
with the OpenTelemetry SDK's own encoder.

The HTTP client is the standard library's (one keep-alive connection per process, reopened after a
fork). Retries follow the OTLP spec: 429/502/503/504 and connection errors are retried with
exponential backoff (``Retry-After`` honoured) within the export timeout; other failures are not.
Failures are logged at most once a minute.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import logging
import ssl
import struct
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Final

from ragtrace._export import RequestTooLarge
from ragtrace._flatten import AttrValue, FlatEvent, FlatSpan
from ragtrace._runtime import log_once

_log = logging.getLogger("ragtrace")
_VARINT_1: Final = [bytes((i,)) for i in range(128)]
_pack_q = struct.Struct("<Q").pack
_pack_d = struct.Struct("<d").pack
_pack_i = struct.Struct("<I").pack

# Span.flags: the SDK encoder always says whether the parent is remote (OTLP SpanFlags).
_FLAG_HAS_IS_REMOTE: Final = 0x100
_FLAG_IS_REMOTE: Final = 0x200


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 two's complement
    elif value < 0x80:
        return _VARINT_1[value]
    elif value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field (tag byte(s) already encoded)."""
    return tag + _varint(len(payload)) + payload


def _any_value(value: AttrValue) -> bytes:
    """AnyValue: string=1, bool=2, int=3, double=4, array=5."""
    if isinstance(value, str):
        # protobuf strings must be valid UTF-8: a lone surrogate ("\ud800", from surrogateescape or
        # JSON) is sent as "?", or the collector refuses the whole request as corrupt
        raw = value.encode("utf-8", "replace")
        return b"\x0a" + _varint(len(raw)) + raw
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + _pack_d(value)
    if isinstance(value, tuple | list):
        items = b"".join(_field(b"\x0a", _any_value(v)) for v in value)
        return _field(b"\x2a", items)
    raise TypeError(f"unsupported attribute value type {type(value).__name__}")


class Encoder:
    """Writes ExportTraceServiceRequest bytes. Keeps a cache of encoded attribute keys."""

    def __init__(self, resource: Mapping[str, AttrValue], scope_name: str, scope_version: str) -> None:
        self._keys: dict[str, bytes] = {}
        resource_msg = self._attributes(b"\x0a", resource)
        scope_msg = _field(b"\x0a", scope_name.encode()) + _field(b"\x12", scope_version.encode())
        self._resource_field = _field(b"\x0a", resource_msg)  # ResourceSpans.resource = 1
        self._scope_field = _field(b"\x0a", scope_msg)  # ScopeSpans.scope = 1

    def _key(self, key: str) -> bytes:
        encoded = self._keys.get(key)
        if encoded is None:
            encoded = _field(b"\x0a", key.encode("utf-8", "replace"))  # KeyValue.key = 1
            if len(self._keys) < 100_000:
                self._keys[key] = encoded
        return encoded

    def _attributes(self, tag: bytes, attributes: Mapping[str, AttrValue]) -> bytes:
        parts = []
        for key, value in attributes.items():
            any_value = _any_value(value)
            kv = self._key(key) + b"\x12" + _varint(len(any_value)) + any_value  # KeyValue.value = 2
            parts.append(tag + _varint(len(kv)) + kv)
        return b"".join(parts)

    def _event(self, event: FlatEvent) -> bytes:
        body = (b"\x09" + _pack_q(event.time_ns) + _field(b"\x12", event.name.encode())
                + self._attributes(b"\x1a", event.attributes))
        return _field(b"\x5a", body)  # Span.events = 11

    def span(self, span: FlatSpan) -> bytes:
        parts = [
            b"\x0a\x10" + span.trace_id.to_bytes(16, "big"),
            b"\x12\x08" + span.span_id.to_bytes(8, "big"),
        ]
        if span.parent_id is not None:
            parts.append(b"\x22\x08" + span.parent_id.to_bytes(8, "big"))
        parts.append(_field(b"\x2a", span.name.encode("utf-8", "replace")))
        parts.append(b"\x30" + _varint(span.kind))
        parts.append(b"\x39" + _pack_q(span.start_ns))
        parts.append(b"\x41" + _pack_q(span.end_ns))
        parts.append(self._attributes(b"\x4a", span.attributes))
        for event in span.events:
            parts.append(self._event(event))
        status = b""
        if span.status_message:
            status += _field(b"\x12", span.status_message.encode("utf-8", "replace"))
        if span.status_code:
            status += b"\x18" + _varint(span.status_code)
        parts.append(_field(b"\x7a", status))  # Span.status = 15, present even when unset
        remote = span.parent_remote and span.parent_id is not None
        flags = _FLAG_HAS_IS_REMOTE | (_FLAG_IS_REMOTE if remote else 0)
        parts.append(b"\x85\x01" + _pack_i(flags))  # Span.flags = 16, fixed32
        return b"".join(parts)

    def request(self, spans: Sequence[FlatSpan]) -> bytes:
        """One ResourceSpans with one ScopeSpans holding every span."""
        span_fields = b"".join(_field(b"\x12", self.span(s)) for s in spans)  # ScopeSpans.spans = 2
        scope_spans = _field(b"\x12", self._scope_field + span_fields)  # ResourceSpans.scope_spans = 2
        return _field(b"\x0a", self._resource_field + scope_spans)  # request.resource_spans = 1


_RETRYABLE: Final = frozenset({429, 502, 503, 504})


def status_message(raw: bytes) -> str | None:
    """The ``message`` of a protobuf ``google.rpc.Status``, the body an OTLP/HTTP collector refuses
    a protobuf request with; None when ``raw`` is not one or has no message."""
    # imported here: only a refused export needs it (googleapis-common-protos comes with the
    # OpenTelemetry OTLP exporter, a dependency of the SDK)
    from google.protobuf.message import DecodeError
    from google.rpc.status_pb2 import Status

    try:
        return Status.FromString(raw).message or None
    except DecodeError:
        return None


class OtlpHttpSink:
    """POSTs encoded spans to an OTLP/HTTP traces URL."""

    def __init__(self, url: str, encoder: Encoder, *, headers: Mapping[str, str] | None = None,
                 compression: str = "none", timeout_s: float = 10.0) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL")
        self.url = url
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port or (443 if self._https else 80)
        self._path = (parsed.path or "/") + (f"?{parsed.query}" if parsed.query else "")
        self._encoder = encoder
        self._headers = {"Content-Type": "application/x-protobuf", "User-Agent": "ragtrace"}
        self._headers.update(headers or {})
        self._gzip = compression == "gzip"
        if self._gzip:
            self._headers["Content-Encoding"] = "gzip"
        self._timeout = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._closing = threading.Event()
        self._warned = False  # the first failure of this sink is said at once, loudly

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                                         context=ssl.create_default_context())
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None

    def _post(self, body: bytes, timeout: float) -> tuple[int, str, str | None]:
        """One POST; returns (status, response text excerpt, Retry-After). Raises OSError."""
        conn = self._connection()
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        try:
            conn.request("POST", self._path, body=body, headers=self._headers)
            response = conn.getresponse()
            raw = response.read(4096)
            response.read()  # drain so the connection can be reused
            message = None
            if (response.getheader("Content-Type") or "").startswith("application/x-protobuf"):
                message = status_message(raw)  # a google.rpc.Status: its message, not its bytes
            text = message if message is not None else raw.decode("utf-8", "replace")
            if response.getheader("Connection", "").lower() == "close":
                self._drop_connection()
            return response.status, text, response.getheader("Retry-After")
        except (OSError, http.client.HTTPException):
            self._drop_connection()
            raise

    def export(self, spans: Sequence[FlatSpan]) -> bool:
        """POST the spans; True when the collector took them. Raises `RequestTooLarge` on 413, so
        the queue can send the batch in smaller requests."""
        body = self._encoder.request(spans)
        if self._gzip:
            body = gzip.compress(body, compresslevel=5)
        deadline = time.monotonic() + self._timeout
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            retry_after: float | None = None
            try:
                status, text, retry_header = self._post(body, max(remaining, 0.1))
            except (OSError, http.client.HTTPException) as exc:
                if attempt == 0:  # a stale keep-alive connection: retry at once
                    attempt += 1
                    continue
                problem, retryable = f"{type(exc).__name__}: {exc}", True
                unreachable = True
            else:
                if 200 <= status < 300:
                    return True
                if status == 413:  # a refusal of this request's size, not of the spans: not a failure yet
                    raise RequestTooLarge(len(spans), len(body), f"HTTP 413: {text[:200]}")
                problem, retryable = f"HTTP {status}: {text[:200]}", status in _RETRYABLE
                unreachable = status == 404  # something answers there, but not an OTLP collector
                if retry_header is not None:
                    try:
                        retry_after = max(0.0, float(retry_header))
                    except ValueError:
                        retry_after = None
            if not self._warned:
                # Said at the first failure, not when the retries give up: a short-lived process
                # exits long before that, and must not end without a word (issue: a silent 6 s hang).
                self._warned = True
                # A collector that answered and refused (401, 400, 415) is listening: its reason is
                # what to fix, and such a refusal is not retried.
                hint = (" Is `ragtrace serve` (or another OTLP/HTTP collector) listening there? Set "
                        "RAGTRACE_ENDPOINT or configure(endpoint=...)." if unreachable else "")
                _log.warning("ragtrace: cannot export spans to %s (%s).%s %s spans that cannot be sent are "
                             "dropped and counted in ragtrace.stats().", self.url, problem, hint,
                             "Retrying;" if retryable else "Not retried:")
            attempt += 1
            backoff = retry_after if retry_after is not None else min(0.25 * 2 ** (attempt - 1), 8.0)
            remaining = deadline - time.monotonic()
            if not retryable or backoff >= remaining or self._closing.is_set():
                log_once("export-failed", "ragtrace: could not export %d spans to %s (%s); they are "
                         "dropped. Counted in ragtrace.stats().", len(spans), self.url, problem)
                return False
            if self._closing.wait(backoff):
                # shutdown's own warning counts these spans among what was not exported
                log_once("export-closing", "ragtrace: shutting down while %s was failing (%s)",
                         self.url, problem, level=logging.DEBUG)
                return False

    def after_fork(self) -> None:
        # The parent owns the socket; the child opens its own on its next export.
        self._conn = None
        self._closing = threading.Event()

    def shutdown(self) -> None:
        self._closing.set()
        self._drop_connection()
