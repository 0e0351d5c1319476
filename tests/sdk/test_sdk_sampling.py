"""Sampling is deterministic by trace id (OpenTelemetry's TraceIdRatioBased rule): every span of a
query is kept or dropped together, in every process."""

from __future__ import annotations

import random
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

import ragtrace
from ragtrace._runtime import sampled_by_ratio

LOW_BITS_ZERO = (0xABCDEF << 64) | 0x0000000000000001  # low 64 bits tiny -> kept at rate 0.5
LOW_BITS_HIGH = (0xABCDEF << 64) | 0xFFFFFFFFFFFFFFF0  # low 64 bits huge -> dropped at rate 0.5


@ragtrace.retriever
def retrieve(query: str) -> list[str]:
    return ["a", "b"]


@ragtrace.pipeline
def answer(query: str) -> str:
    retrieve(query)
    return "x"


def _in_trace(trace_id: int) -> None:
    parent = SpanContext(trace_id, 0x1234, True, TraceFlags(TraceFlags.SAMPLED))
    token = otel_context.attach(otel_trace.set_span_in_context(NonRecordingSpan(parent)))
    try:
        answer("q")
    finally:
        otel_context.detach(token)


def test_decision_follows_the_trace_id(configure_memory: Any) -> None:
    spans = configure_memory(sample_rate=0.5)
    _in_trace(LOW_BITS_ZERO)
    _in_trace(LOW_BITS_HIGH)
    got = spans()
    assert {s.context.trace_id for s in got} == {LOW_BITS_ZERO}
    assert len(got) == 2  # both spans of the kept query, none of the dropped one
    assert ragtrace.stats().dropped_queue_full == 0


def test_same_rule_as_opentelemetry_trace_id_ratio() -> None:
    rng = random.Random(7)
    for rate in (0.0, 0.1, 0.5, 0.9, 1.0):
        sampler = TraceIdRatioBased(rate)
        for _ in range(500):
            trace_id = rng.getrandbits(128)
            expected = sampler.should_sample(None, trace_id, "x").decision == Decision.RECORD_AND_SAMPLE
            assert sampled_by_ratio(trace_id, sampler.bound) == expected


def test_rate_is_respected_and_queries_are_whole(configure_memory: Any) -> None:
    spans = configure_memory(sample_rate=0.3)
    for i in range(400):
        answer(f"q{i}")
    got = spans()
    traces: dict[int, int] = {}
    for s in got:
        traces[s.context.trace_id] = traces.get(s.context.trace_id, 0) + 1
    assert set(traces.values()) == {2}  # never half a query
    assert 80 <= len(traces) <= 160  # 400 x 0.3 = 120, generous binomial bounds


def test_unsampled_query_records_nothing_and_still_runs(configure_memory: Any) -> None:
    spans = configure_memory(sample_rate=0.0)
    assert answer("q") == "x"
    assert spans() == []
    assert ragtrace.stats().spans_exported == 0
