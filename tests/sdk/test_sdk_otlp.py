"""Real OTLP/HTTP export over loopback, decoded with opentelemetry.proto; the hand-written encoder
against the OpenTelemetry SDK's own encoder."""

from __future__ import annotations

import string
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

import ragtrace
from ragtrace import semconv as sc
from ragtrace._flatten import FlatEvent, FlatSpan
from ragtrace._otlp import Encoder
from ragtrace._sinks import ReadableSpanBuilder

from .receiver import Receiver, span_attributes
from .util import FULL, ROOT, doc_attrs, docs


@ragtrace.retriever
def retrieve(query: str) -> list[dict[str, Any]]:
    return docs(3)


@ragtrace.pipeline
def answer(query: str) -> str:
    retrieve(query)
    return "the answer"


def test_real_export_over_loopback(receiver: Receiver) -> None:
    ragtrace.configure(endpoint=receiver.url, service="qa", release="2024-06-01", environment="test",
                       headers={"authorization": "Bearer t0k"})
    answer("who?")
    assert ragtrace.force_flush(10)
    got = receiver.wait_for_spans(2)
    assert len(got) == 2
    resource, _ = got[0]
    assert resource[sc.SERVICE_NAME] == "qa"
    assert resource[sc.SERVICE_VERSION] == "2024-06-01"
    assert resource[sc.DEPLOYMENT_ENVIRONMENT] == "test"
    spans = {s.name.rsplit(".", 1)[-1]: s for _, s in got}
    root, ret = spans["answer"], spans["retrieve"]
    assert span_attributes(root) == {sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: "who?",
                                     sc.OUTPUT_VALUE: "the answer", **ROOT}
    assert span_attributes(ret) == {sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: "who?",
                                    **doc_attrs(sc.RETRIEVAL_DOCUMENTS, docs(3)), **FULL}
    assert ret.trace_id == root.trace_id and ret.parent_span_id == root.span_id
    assert root.parent_span_id == b"" and root.kind == Span.SPAN_KIND_INTERNAL
    assert ret.end_time_unix_nano >= ret.start_time_unix_nano > 0
    assert receiver.headers[0]["authorization"] == "Bearer t0k"
    assert receiver.headers[0]["content-type"] == "application/x-protobuf"
    stats = ragtrace.stats()
    assert stats.spans_exported == 2 and stats.export_failures == 0


def test_gzip_and_retry_after_503(receiver: Receiver) -> None:
    receiver.script.append((503, {"Retry-After": "0"}))
    receiver.script.append((429, {}))
    ragtrace.configure(endpoint=receiver.url, compression="gzip", export_timeout_ms=10_000)
    answer("q")
    assert ragtrace.force_flush(15)
    assert len(receiver.wait_for_spans(2)) == 2
    assert len(receiver.headers) == 3  # two refusals, then accepted
    assert receiver.headers[-1]["content-encoding"] == "gzip"
    assert ragtrace.stats().export_failures == 0


def test_non_retryable_status_is_counted_not_retried(receiver: Receiver) -> None:
    receiver.script.append((400, {}))
    ragtrace.configure(endpoint=receiver.url)
    answer("q")
    ragtrace.force_flush(10)
    stats = ragtrace.stats()
    assert stats.export_failures == 1 and stats.dropped_export_failed == 2
    assert len(receiver.headers) == 1


def test_unreachable_collector_never_blocks_or_raises() -> None:
    with Receiver() as dead:
        url = dead.url
    ragtrace.configure(endpoint=url, export_timeout_ms=300)
    assert answer("q") == "the answer"
    ragtrace.force_flush(5)
    assert ragtrace.stats().dropped_export_failed == 2


# --- encoder equivalence -----------------------------------------------------------------------

_text = st.text(alphabet=string.printable + "éß中🙂", max_size=40)
_value = st.one_of(
    _text, st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False), st.tuples(_text, _text),
)
_ids = st.integers(min_value=1, max_value=2**64 - 1)


@st.composite
def flat_spans(draw: st.DrawFn) -> FlatSpan:
    error = draw(st.booleans())
    return FlatSpan(
        name=draw(_text), trace_id=draw(st.integers(min_value=1, max_value=2**128 - 1)),
        span_id=draw(_ids), parent_id=draw(st.one_of(st.none(), _ids)), kind=draw(st.sampled_from([1, 2])),
        start_ns=draw(st.integers(min_value=0, max_value=2**63)),
        end_ns=draw(st.integers(min_value=0, max_value=2**63)),
        attributes=draw(st.dictionaries(_text, _value, max_size=8)),
        status_code=2 if error else 0, status_message=draw(_text) if error else "",
        events=tuple(draw(st.lists(st.builds(FlatEvent, _text, st.integers(min_value=0, max_value=2**63),
                                             st.dictionaries(_text, _text, max_size=3)), max_size=2))),
        parent_remote=draw(st.booleans()),
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(flat_spans(), min_size=1, max_size=4))
def test_encoder_matches_the_opentelemetry_sdk(spans: list[FlatSpan]) -> None:
    resource = {"service.name": "svc", "service.version": "r1", "n": 3}
    ours = ExportTraceServiceRequest()
    ours.ParseFromString(Encoder(resource, "ragtrace", "0.1.0").request(spans))
    builder = ReadableSpanBuilder(Resource(resource), InstrumentationScope("ragtrace", "0.1.0"))
    reference = encode_spans([builder.build(s) for s in spans])
    # Message equality covers every field, including the span flags and the (always written) status.
    assert ours == reference


def test_encoder_output_for_a_real_trace_decodes(receiver: Receiver) -> None:
    request = ExportTraceServiceRequest()
    span = FlatSpan("n", 1, 2, None, 1, 10, 20, {"a": ("x", "y"), "b": 1.5}, 2, "bad")
    request.ParseFromString(Encoder({}, "ragtrace", "0").request([span]))
    decoded = request.resource_spans[0].scope_spans[0].spans[0]
    assert span_attributes(decoded) == {"a": ("x", "y"), "b": 1.5}
    assert decoded.status.code == Status.STATUS_CODE_ERROR and decoded.status.message == "bad"
    assert request.resource_spans[0].scope_spans[0].scope.name == "ragtrace"
