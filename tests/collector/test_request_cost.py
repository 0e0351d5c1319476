"""What a request's decode will hold, counted from its wire bytes (`ragtrace_collector.request_cost`).

The compiled scan and the Python one count the same on every body, refuse what a protobuf parser
refuses, and the bytes they predict are at least what decoding the body really holds at its peak
(and at most four times that), for the shapes of the hostile-input campaign and for ordinary traces
(measured in a fresh process each: its peak resident memory while it decodes).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ragtrace_collector import request_cost as RC
from tests import hostile_bodies as H
from tests import otlp_builders as T

ROOT = Path(__file__).resolve().parents[2]


def test_the_compiled_scan_is_built() -> None:
    assert RC.compiled(), "build it with `.venv/bin/python collector/native/build.py` (make native does)"


def _both(body: bytes) -> RC.Counts:
    compiled = RC.count(body)
    assert RC.count_in_python(body) == compiled
    return compiled


def test_the_campaign_shapes_are_counted() -> None:
    assert _both(H.tiny_spans(5000)) == RC.Counts(spans=5000)
    assert _both(H.tiny_attributes(30, 40)) == RC.Counts(spans=30, attributes=1200)
    assert _both(H.long_array(3, 500)) == RC.Counts(spans=3, attributes=3, values=1500)
    assert _both(H.tiny_events(7, 11)) == RC.Counts(spans=7, events=77)


def test_ordinary_traces_are_counted_as_the_parser_sees_them() -> None:
    docs = T.corpus(20, size=200)
    req = T.request([s for i in range(3) for s in T.standard_trace(docs, i).spans()])
    span = req.resource_spans[0].scope_spans[0].spans[0]
    event = span.events.add(name="e", attributes=T.kvs({"a": 1, "b": [1, 2, 3]}))
    span.links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, attributes=T.kvs({"c": "d"}))
    kvlist = span.attributes.add(key="nested")
    kvlist.value.kvlist_value.values.extend(T.kvs({"x": "1", "y": ["p", "q"]}))
    body = req.SerializeToString()
    got = _both(body)
    spans = [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    attributes = (sum(len(s.attributes) for s in spans) + len(req.resource_spans[0].resource.attributes)
                  + len(event.attributes) + 1 + 2)  # the event's, the link's, the key-value list's
    assert got == RC.Counts(spans=len(spans), attributes=attributes, values=3 + 2, events=2)


def test_unknown_fields_and_groups_are_skipped_as_a_parser_keeps_them() -> None:
    # a span with an unknown varint, fixed32, fixed64 and length-delimited field, and a group (proto2
    # wire types 3/4) holding fields of its own: every parser keeps them as unknown fields
    extra = (H.varint(100 << 3 | 0) + H.varint(7) + H.varint(101 << 3 | 5) + b"\0" * 4
             + H.varint(102 << 3 | 1) + b"\0" * 8 + H.field(103, b"xyz")
             + H.varint(104 << 3 | 3) + H.field(9, b"not an attribute") + H.varint(104 << 3 | 4))
    body = H.request([H.span(0, extra=extra + H.field(9, H.string_attribute(b"k", b"v")))])
    ExportTraceServiceRequest().ParseFromString(body)  # valid for protobuf itself
    assert _both(body) == RC.Counts(spans=1, attributes=1)


@pytest.mark.parametrize("body", [
    b"\x0a\x05ab",  # a field longer than the body
    b"\x0f",  # wire type 7
    b"\x0a\x02\x12",  # a message cut inside
    b"\x0b\x08\x01",  # a group never closed
    b"\x0c",  # an end-group tag without its start
    b"\x0a\x01\x80",  # a truncated varint inside
    b"\x00\x01",  # field number 0
    H.field(1, H.field(2, H.field(2, H.field(9, b"\x12\x05ab")))),  # a broken attribute inside a span
])
def test_what_a_parser_refuses_the_scan_refuses(body: bytes) -> None:
    with pytest.raises(DecodeError):
        ExportTraceServiceRequest().ParseFromString(body)
    with pytest.raises(RC.WireError):
        RC.count(body)
    with pytest.raises(RC.WireError):
        RC.count_in_python(body)


def test_nesting_deeper_than_a_parser_allows_is_refused() -> None:
    value = H.field(1, b"")  # an AnyValue holding a string
    for _ in range(60):  # each level: AnyValue{array_value{values: [value]}}
        value = H.field(5, H.field(1, value))
    body = H.request([H.span(0, extra=H.field(9, H.field(1, b"k") + H.field(2, value)))])
    with pytest.raises(DecodeError):
        ExportTraceServiceRequest().ParseFromString(body)
    with pytest.raises(RC.WireError, match="deep"):
        RC.count(body)
    with pytest.raises(RC.WireError, match="deep"):
        RC.count_in_python(body)


_values = st.recursive(
    st.one_of(st.text(max_size=5), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(allow_nan=False),
              st.booleans(), st.binary(max_size=4)),
    lambda inner: st.lists(inner, max_size=4), max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.dictionaries(st.text(min_size=1, max_size=6), _values, max_size=6),
                          st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=2)),
                max_size=6),
       st.integers(min_value=0, max_value=40))
def test_the_compiled_and_the_python_scan_agree(spans: list[tuple[dict[str, object], int, int]], cut: int) -> None:
    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add().scope_spans.add()
    for i, (attrs, events, links) in enumerate(spans):
        span = Span(trace_id=bytes([i + 1]) * 16, span_id=bytes([i + 1]) * 8, name="s", attributes=T.kvs(attrs))
        for _ in range(events):
            span.events.add(name="e", attributes=T.kvs(attrs))
        for _ in range(links):
            span.links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
        ss.spans.append(span)
    body = req.SerializeToString()
    got = _both(body)
    assert got.spans == len(spans) and got.events == sum(e + k for _, e, k in spans)
    truncated = body[:max(0, len(body) - cut)]  # a body cut short: both refuse it, or both count the same
    try:
        compiled = RC.count(truncated)
    except RC.WireError:
        with pytest.raises(RC.WireError):
            RC.count_in_python(truncated)
    else:
        assert RC.count_in_python(truncated) == compiled


_MEASURE = """
import os, sys
sys.path.insert(0, {root!r})
from tests import hostile_bodies as H, otlp_builders as T
from ragtrace_collector import request_cost as RC
from ragtrace_collector.ingest import decode_and_assemble

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

decode_and_assemble(H.tiny_spans(10), "application/x-protobuf", None, "t", 0, 1 << 30)  # imports done
body = {build}
estimate = RC.decode_bytes(len(body), RC.count(body))
rest = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak (VmHWM) starts again from here
rows, _ = decode_and_assemble(body, "application/x-protobuf", None, "t", 0, 1 << 30)
print(status("VmHWM") - rest, estimate)
"""


@pytest.mark.parametrize("build", [
    "H.tiny_spans(60_000)",
    "H.tiny_attributes(600, 100)",
    "H.long_array(10, 6000)",
    "H.tiny_events(600, 50)",
    "H.large_values(12 << 20)",
    "T.request([s for i in range(200) for s in T.standard_trace(T.corpus(20, size=1000, seed=i), i).spans()])"
    ".SerializeToString()",
])
def test_the_estimate_holds_what_the_decode_holds(build: str) -> None:
    out = subprocess.run([sys.executable, "-c", _MEASURE.format(root=str(ROOT), build=build)],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    peak, estimate = map(int, out.split())
    assert peak > 2 << 20, "the decode was measured"
    assert peak <= estimate, (build, peak, estimate)
    assert estimate <= 4 * peak, (build, peak, estimate)  # an upper bound, not a wild one
