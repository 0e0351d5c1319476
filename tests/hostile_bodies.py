"""OTLP protobuf bodies shaped like the attacks on `ragtrace serve`, written straight as wire bytes.

Building a million spans through the protobuf classes takes longer than the attack itself, so these
write the wire format directly (the field numbers are OTLP's: ``ExportTraceServiceRequest`` →
``ResourceSpans.scope_spans`` (2) → ``ScopeSpans.spans`` (2) → ``Span``). Shared by the tests and
``benchmarks/hostile_server.py``.
"""

from __future__ import annotations

import struct

#: a fixed start time for every span (2023-11-14, ns): the values do not matter, only the shape
_T0 = 1_700_000_000_000_000_000


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a message, a string or bytes)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def string_attribute(key: bytes, value: bytes) -> bytes:
    """A ``KeyValue`` whose value is ``AnyValue.string_value``."""
    return field(1, key) + field(2, field(1, value))


def span(i: int, *, name: bytes = b"s", extra: bytes = b"", parent: int | None = None) -> bytes:
    """A span of trace ``i + 1`` (never the all-zero id); ``extra`` is appended wire bytes
    (attributes, events)."""
    body = (field(1, (i + 1).to_bytes(16, "big")) + field(2, (i + 1).to_bytes(8, "big")) + field(5, name)
            + b"\x39" + struct.pack("<Q", _T0 + i) + b"\x41" + struct.pack("<Q", _T0 + i + 1) + extra)
    if parent is not None:
        body += field(4, parent.to_bytes(8, "big"))
    return body


def request(spans: list[bytes], resource_attributes: bytes = b"") -> bytes:
    """One ``ResourceSpans`` with one ``ScopeSpans`` holding ``spans`` (each a Span's bytes)."""
    scope = b"".join(field(2, s) for s in spans)
    resource = field(1, resource_attributes) if resource_attributes else b""
    return field(1, resource + field(2, scope))


def tiny_spans(n: int, *, name_bytes: int = 11) -> bytes:
    """``n`` parentless spans without attributes: the issue's 63 MiB request of 1,082,334 spans is
    ``tiny_spans(1_082_334)`` (61 bytes a span with an 11-byte name)."""
    name = b"s" * name_bytes
    return request([span(i, name=name) for i in range(n)])


def tiny_attributes(n_spans: int, per_span: int) -> bytes:
    """Spans with ``per_span`` attributes of a short key and an empty string each (~8 bytes apiece)."""
    attrs = b"".join(field(9, string_attribute(b"k%d" % j, b"")) for j in range(per_span))
    return request([span(i, extra=attrs) for i in range(n_spans)])


def long_array(n_spans: int, per_span: int) -> bytes:
    """Spans with one attribute holding an array of ``per_span`` empty strings."""
    array = field(5, b"".join(field(1, field(1, b"")) for _ in range(per_span)))
    attr = field(9, field(1, b"k") + field(2, array))
    return request([span(i, extra=attr) for i in range(n_spans)])


def large_values(total_bytes: int, value_bytes: int = 64 * 1024) -> bytes:
    """Parentless spans, each with one ``input.value`` of ``value_bytes``, until about ``total_bytes``:
    rows about twice the body (the value is kept as the query and in the span's attributes)."""
    value = b"v" * value_bytes
    n = max(1, total_bytes // (value_bytes + 80))
    return request([span(i, extra=field(9, string_attribute(b"input.value", value))) for i in range(n)])


def tiny_events(n_spans: int, per_span: int) -> bytes:
    """Spans with ``per_span`` events of a one-byte name each."""
    events = b"".join(field(11, b"\x09" + struct.pack("<Q", _T0) + field(2, b"e")) for _ in range(per_span))
    return request([span(i, extra=events) for i in range(n_spans)])
