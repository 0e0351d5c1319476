"""Fixtures of the SDK tests: ragtrace configured with an InMemorySpanExporter, and a loopback
OTLP/HTTP receiver. Every test starts and ends with ragtrace unconfigured."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragtrace

from .receiver import Receiver

SpanGetter = Callable[[], list[ReadableSpan]]


@pytest.fixture(autouse=True)
def _ragtrace_unconfigured() -> Iterator[None]:
    # Tests elsewhere in the suite may leave ragtrace configured; every SDK test starts clean.
    ragtrace.shutdown(timeout_s=5)
    yield
    ragtrace.shutdown(timeout_s=5)


@pytest.fixture
def configure_memory() -> Iterator[Callable[..., SpanGetter]]:
    """``configure_memory(**options)`` -> a function returning the spans exported so far
    (after a flush), by start time."""

    def setup(**options: Any) -> SpanGetter:
        exporter = InMemorySpanExporter()
        options.setdefault("service", "svc")
        ragtrace.configure(exporter=exporter, **options)

        def spans() -> list[ReadableSpan]:
            # a flush reports False when spans were queued while it ran (a server span ending as
            # the client reads its last chunk): flush again until one round leaves nothing queued
            deadline = time.monotonic() + 10
            while not ragtrace.force_flush(max(0.1, deadline - time.monotonic())):
                assert time.monotonic() < deadline, "the in-memory export did not drain within 10 s"
            return sorted(exporter.get_finished_spans(), key=lambda s: (s.start_time or 0))

        return spans

    yield setup


@pytest.fixture
def memory(configure_memory: Callable[..., SpanGetter]) -> SpanGetter:
    return configure_memory()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as rec:
        yield rec
