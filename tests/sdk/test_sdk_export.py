"""The export queue never hurts the host: bounded, drops counted, failures logged once, bounded
shutdown, and no exception of ragtrace's own reaches user code."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import ragtrace
from ragtrace import _runtime


class BlockingExporter(SpanExporter):
    """Blocks every export until released; counts spans."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(30)
        self.count += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


class FailingExporter(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        if self.calls % 2:
            raise ConnectionError("collector down")
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


@ragtrace.retriever
def retrieve(query: str) -> list[str]:
    return ["a"]


def test_queue_is_bounded_and_drops_are_counted() -> None:
    exporter = BlockingExporter()
    ragtrace.configure(exporter=exporter, max_queue_size=10, max_export_batch=5, schedule_delay_ms=10)
    retrieve("first")  # starts the worker, which then blocks inside export
    assert exporter.entered.wait(5)
    for i in range(25):
        assert retrieve(f"q{i}") == ["a"]
    stats = ragtrace.stats()
    assert stats.spans_queued == 10
    assert stats.dropped_queue_full == 15
    exporter.release.set()
    assert ragtrace.force_flush(10)
    stats = ragtrace.stats()
    assert stats.spans_exported == 11 == exporter.count and stats.spans_queued == 0


def test_exporter_failures_are_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    _runtime._last_logged.clear()
    exporter = FailingExporter()
    ragtrace.configure(exporter=exporter, max_export_batch=1, schedule_delay_ms=10)
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        for i in range(6):
            retrieve(f"q{i}")
        ragtrace.force_flush(10)
    stats = ragtrace.stats()
    assert stats.export_failures == 6 and stats.dropped_export_failed == 6 and stats.spans_exported == 0
    assert exporter.calls == 6
    assert len([r for r in caplog.records if "exporting" in r.getMessage()]) == 1


def test_shutdown_is_bounded_when_the_exporter_hangs() -> None:
    exporter = BlockingExporter()
    ragtrace.configure(exporter=exporter, schedule_delay_ms=10)
    retrieve("q")
    assert exporter.entered.wait(5)
    retrieve("q2")
    t0 = time.monotonic()
    assert ragtrace.shutdown(timeout_s=0.3) is False  # not everything could be exported
    assert time.monotonic() - t0 < 2.5
    assert ragtrace.active_settings() is None


def test_internal_failure_never_reaches_user_code(memory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def __init__(self, *args: Any) -> None:
            raise RuntimeError("ragtrace bug")

    monkeypatch.setattr(_runtime, "SpanRecord", Broken)

    @ragtrace.pipeline
    def ask(query: str) -> str:
        return query.upper()

    assert ask("ok") == "OK"
    assert memory() == []


def test_reconfigure_flushes_the_previous_configuration(configure_memory: Any) -> None:
    first = configure_memory()
    retrieve("one")
    second = configure_memory()
    retrieve("two")
    assert len(first()) == 1
    assert len(second()) == 1
