"""What decoding a request will cost in memory, known from its wire bytes before it is decoded.

A request's bytes say little about its decoded size: 63 MiB of attribute-less spans (61 bytes each)
decode to 1.08 million spans and took the collector from 365 MB to 2.4 GB, while 63 MiB of ordinary
ragtrace traces decode to about 2.5 times their size. What costs memory is the number of things
decoded, so `count` reads the protobuf wire format (without building any message) and counts spans,
attributes (``KeyValue`` anywhere: span, event, link, resource, scope, key-value lists), array and
key-value-list elements, and events and links; `decode_bytes` turns the counts into the bytes the
decode will hold at its peak, an upper bound measured on the collector's walks (`PER_*`, and
``benchmarks/hostile_server.py --only cost``). The admission bound charges that before the decode
starts (`ragtrace_collector.admission`).

The count is the compiled scan ``_otlp_measure`` (``collector/native/otlp_measure.cc``, built with the
native walk) when it is built, else the same scan in Python (`count_in_python`), about a hundred
times slower. Both follow only the fields of the OTLP schema that hold messages, skip everything else
whatever its field number, and reject what no protobuf parser would accept (a truncated field, a
wire type 6 or 7, a group left open, nesting deeper than `MAX_DEPTH`): such a body is refused before
anything is decoded.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

#: deeper nesting than any protobuf parser accepts (Google's default recursion limit is 100)
MAX_DEPTH = 100

# Peak decode memory, bytes: per element decoded, and per byte of protobuf. Upper bounds of what
# `benchmarks/hostile_server.py --only cost` measures through the collector's walk (the Python walk it
# replaced held less per element): attribute-less spans 1.7 KB each, one-character attributes 0.29 KB,
# array elements 0.09 KB, events 0.6 KB; 64 KB string values 2.7 x their bytes (the parse, the Python
# string, the span's JSON), traces of distinct 1 KB passages 3.5-4 x their bytes with their attributes,
# ordinary ragtrace traces (passages repeating) 2.5 x, which this overstates by about 1.6.
PER_SPAN = 2048
PER_ATTRIBUTE = 320
PER_VALUE = 120
PER_EVENT = 700
PER_BYTE = 3.2
#: a JSON body is parsed into Python objects before it becomes protobuf: per JSON object, array and
#: string (measured 80-155 bytes) and per byte (2.0), while the parse and the conversion run
PER_JSON_ITEM = 160
PER_JSON_BYTE = 2.5


class WireError(ValueError):
    """The body is not valid protobuf; the message says where."""


@dataclass(frozen=True)
class Counts:
    """What a request decodes to: spans, attributes (``KeyValue`` anywhere), elements of array and
    key-value-list values, events plus links."""

    spans: int = 0
    attributes: int = 0
    values: int = 0
    events: int = 0

    def describe(self) -> str:
        return (f"{self.spans:,} spans, {self.attributes:,} attributes, {self.values:,} array values, "
                f"{self.events:,} events and links")


def decode_bytes(raw_bytes: int, counts: Counts) -> int:
    """The peak memory decoding a protobuf body of ``raw_bytes`` with these counts takes, bytes
    (the body itself not included)."""
    return (int(PER_BYTE * raw_bytes) + PER_SPAN * counts.spans + PER_ATTRIBUTE * counts.attributes
            + PER_VALUE * counts.values + PER_EVENT * counts.events)


def json_decode_bytes(body: bytes) -> int:
    """The peak memory of turning an OTLP/JSON body into protobuf, bytes: from its bytes and its
    objects, arrays and strings (counted by their opening characters, in C: a ``{`` inside a string
    counts too, which only overstates)."""
    items = body.count(b"{") + body.count(b"[") + body.count(b'"') // 2
    return int(PER_JSON_BYTE * len(body)) + PER_JSON_ITEM * items


# --- the scan ---------------------------------------------------------------------------------
# message kinds, and for each the fields that hold messages: field number -> kind
(REQUEST, RESOURCE_SPANS, RESOURCE, SCOPE_SPANS, SCOPE, SPAN, EVENT, LINK, KEY_VALUE, ANY_VALUE, ARRAY,
 KV_LIST) = range(12)
CHILDREN: dict[int, dict[int, int]] = {
    REQUEST: {1: RESOURCE_SPANS},
    RESOURCE_SPANS: {1: RESOURCE, 2: SCOPE_SPANS},
    RESOURCE: {1: KEY_VALUE},
    SCOPE_SPANS: {1: SCOPE, 2: SPAN},
    SCOPE: {3: KEY_VALUE},
    SPAN: {9: KEY_VALUE, 11: EVENT, 13: LINK},
    EVENT: {3: KEY_VALUE},
    LINK: {4: KEY_VALUE},
    KEY_VALUE: {2: ANY_VALUE},
    ANY_VALUE: {5: ARRAY, 6: KV_LIST},
    ARRAY: {1: ANY_VALUE},
    KV_LIST: {1: KEY_VALUE},
}


def count_in_python(body: bytes) -> Counts:
    """`count` in Python (when the compiled scan is not built). Raises `WireError`."""
    tally = [0, 0, 0, 0]  # spans, attributes, values, events
    _scan(memoryview(body), 0, len(body), REQUEST, tally, 0)
    return Counts(*tally)


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError(f"truncated or overlong varint at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _scan(buf: memoryview, pos: int, end: int, kind: int, tally: list[int], depth: int,
          group: int | None = None) -> int:
    """Scan one message (or, with ``group``, the fields of an open group up to its end tag); returns
    where it ended."""
    if depth > MAX_DEPTH:
        raise WireError(f"messages nested deeper than {MAX_DEPTH}")
    children = CHILDREN.get(kind, {}) if group is None else {}
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {pos}")
        if wire == 0:
            _, pos = _varint(buf, pos, end)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = _varint(buf, pos, end)
            if pos + length > end:
                raise WireError(f"a field of {length} bytes at byte {pos} runs past its message")
            child = children.get(number)
            if child is not None:
                if child == SPAN:
                    tally[0] += 1
                elif child == KEY_VALUE:
                    tally[1] += 1
                elif child == ANY_VALUE and kind == ARRAY:
                    tally[2] += 1
                elif child in (EVENT, LINK):
                    tally[3] += 1
                _scan(buf, pos, pos + length, child, tally, depth + 1)
            pos += length
        elif wire == 3:  # a group (proto2): legal in the unknown fields a parser keeps
            pos = _scan(buf, pos, end, kind, tally, depth + 1, group=number)
        elif wire == 4:
            if group != number:
                raise WireError(f"an end-group tag without its start at byte {pos}")
            return pos
        else:
            raise WireError(f"wire type {wire} at byte {pos}")
        if pos > end:
            raise WireError(f"a field at byte {pos} runs past its message")
    if group is not None:
        raise WireError(f"group {group} is not closed")
    return pos


_native: Any
try:
    _native = importlib.import_module("ragtrace_collector._otlp_measure")
except ImportError:
    _native = None


def compiled() -> bool:
    """Whether the compiled scan is built."""
    return _native is not None


def count(body: bytes) -> Counts:
    """The counts of a protobuf ``ExportTraceServiceRequest`` body. Raises `WireError`."""
    if _native is None:
        return count_in_python(body)
    try:
        return Counts(*_native.count(body, MAX_DEPTH))
    except ValueError as exc:
        raise WireError(str(exc)) from None
