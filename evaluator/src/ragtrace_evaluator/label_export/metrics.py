"""What the label export did, as Prometheus families for `ragtrace serve`'s /metrics (a
``prometheus_client`` collector, registered with `ragtrace_collector.metrics.Metrics.register`).

- ``ragtrace_label_export_sent_total``: evaluation events the receiver accepted;
- ``ragtrace_label_export_dropped_total{reason}``: events given up, by reason (``queue_full``: the
  queue was full when the audit handed them over; ``export_failed``: the receiver refused them or
  could not be reached, after the exporter's retries; ``shutdown``: still queued when the server
  stopped). Every reason is exposed from the start at 0, so ``increase()`` over it is defined;
- ``ragtrace_label_export_queued_events``: events waiting to be sent now.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from ragtrace_evaluator.label_export.exporter import LabelExporter


class LabelExportMetrics:
    """``collect()`` reads the exporter's counts at scrape time."""

    def __init__(self, exporter: LabelExporter) -> None:
        self._exporter = exporter

    def collect(self) -> Iterator[Metric]:
        counts = self._exporter.counts()
        yield CounterMetricFamily("ragtrace_label_export_sent_total",
                                  "audit labels sent as OTLP evaluation events and accepted by the receiver",
                                  value=counts["sent"])
        dropped = CounterMetricFamily("ragtrace_label_export_dropped_total",
                                      "audit labels not exported (evaluation events given up), by reason: "
                                      "queue_full | export_failed | shutdown", labels=("reason",))
        for reason, n in sorted(counts["dropped"].items()):
            dropped.add_metric([reason], n)
        yield dropped
        yield GaugeMetricFamily("ragtrace_label_export_queued_events", "evaluation events waiting to be sent",
                                value=counts["queued"])
