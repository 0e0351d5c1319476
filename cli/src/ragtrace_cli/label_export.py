"""`ragtrace serve --export-labels URL`: the serving process's one label exporter.

Built with the app when the server's settings name a receiver (never from a request: no client
chooses where labels go); every audit the process runs, periodic or `POST /api/audit`, hands its
labels to it batch by batch (`run_audit(on_labels=...)`), and it is closed when the server stops.
The exporting itself is `ragtrace_evaluator.label_export`: a bounded queue, one sending thread,
counted drops, nothing that waits on the audit's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ragtrace_collector.metrics import Metrics
from ragtrace_collector.settings import CollectorSettings
from ragtrace_store import LabelRecord, Store, TraceRecord

if TYPE_CHECKING:
    from ragtrace_evaluator.label_export import LabelExporter

OnLabels = Callable[[Sequence[LabelRecord], Sequence[TraceRecord]], None]

#: seconds the stopping server gives queued labels to reach the receiver
CLOSE_TIMEOUT = 2.0


class LabelExport:
    """The exporter of one serving process and its /metrics families."""

    def __init__(self, url: str, metrics: Metrics) -> None:
        from ragtrace_evaluator.label_export import LabelExporter
        from ragtrace_evaluator.label_export.metrics import LabelExportMetrics

        self.exporter: LabelExporter = LabelExporter(url)
        metrics.register(LabelExportMetrics(self.exporter))

    def hand_over(self, tenant: str) -> OnLabels:
        """The ``on_labels`` of an audit of ``tenant``."""
        def on_labels(labels: Sequence[LabelRecord], records: Sequence[TraceRecord]) -> None:
            self.exporter.submit_labels(labels, records, tenant=tenant)

        return on_labels

    def close_when_stopped(self, store: Store, settings: CollectorSettings, metrics: Metrics,
                           stop: threading.Event) -> None:
        """A background task of the app: wait for the server to stop, then send what is queued for up to
        `CLOSE_TIMEOUT` seconds and close."""
        stop.wait()
        self.exporter.close(timeout=CLOSE_TIMEOUT)


def label_export(settings: CollectorSettings, metrics: Metrics) -> LabelExport | None:
    """The process's `LabelExport`, or None when ``settings.export_labels`` names no receiver."""
    return LabelExport(settings.export_labels, metrics) if settings.export_labels else None
