"""Collector metrics, exposed in the Prometheus text format by the official ``prometheus_client``.

Counters only go up (`Metrics.inc`); gauges are read from their owners when scraped
(`Metrics.gauge`); other parts of the serving process add their own collectors (`Metrics.register`,
e.g. the periodic audit's rates). Each `Metrics` owns a private `CollectorRegistry`, never the
library's global one, so two apps in one process (tests, benchmarks) never share or collide.

The library writes the exposition: label values are escaped, NaN and ±Inf are written as
Prometheus reads them. Thread-safe.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE", "COUNTERS", "Metrics"]

#: the media type of `Metrics.render`'s text (the 0.0.4 text format every Prometheus reads)
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

#: every counter: name -> (help, label names). An unlabelled counter is exposed at 0 before its first
#: increment (a rate over it is then defined from the first scrape); a labelled one from its first.
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ragtrace_requests_total": ("OTLP export requests by HTTP status", ("code",)),
    "ragtrace_spans_received_total": ("spans accepted and acknowledged", ()),
    "ragtrace_spans_rejected_total": ("spans refused (reported in partial_success)", ()),
    "ragtrace_spans_dropped_attributes_total": ("spans whose sender dropped attributes (dropped_attributes_count "
                                                "> 0): their traces read as incomplete", ()),
    "ragtrace_rows_written_total": ("rows inserted into the store, by table", ("table",)),
    "ragtrace_batches_total": ("store batches written", ()),
    "ragtrace_batch_failures_total": ("store batch inserts that failed (retried or spooled)", ()),
    "ragtrace_store_insert_statements_total": ("INSERT statements run for the batches' rows: one per table, or "
                                               "several for a table's rows beyond the embedded engine's slice bound",
                                               ()),
    "ragtrace_memory_give_backs_total": ("times freed memory was handed back to the system after a large request "
                                         "or batch", ()),
    "ragtrace_spool_replayed_records_total": ("spooled requests replayed into the store", ()),
    "ragtrace_deadletter_records_total": ("requests the store refused as data; kept in spool/deadletter", ()),
    "ragtrace_audit_runs_total": ("periodic audits run (ragtrace serve --audit-every), by tenant and outcome "
                                  "(ok | error)", ("tenant", "outcome")),
    "ragtrace_passage_renewals_total": ("passage last_seen renewals asked of the store (for retention)", ()),
    "ragtrace_client_errors_total": ("client errors by kind (logged at most once per kind per minute)", ("kind",)),
}
#: counted with `Metrics.inc` under these two names, exposed as one summary (its _sum and _count)
_SUMMARIES = {"ragtrace_store_insert_seconds": "time spent in store inserts, seconds, and the insert statements"}


class Metrics:
    """The serving process's metrics: ingest counters, gauges read at scrape time, and any
    collector `register`-ed beside them, in one private registry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        self._gauges: dict[str, tuple[str, Callable[[], float]]] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Own(self))
        self._rendered: list[Callable[[], bytes]] = []

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        """Add ``value`` to counter ``name`` (a `COUNTERS` name, or ``<summary>_sum`` / ``_count``)."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._counters.setdefault(name, {})
            series[key] = series.get(key, 0.0) + value

    def get(self, name: str, **labels: str) -> float:
        """The counter's total over the series whose labels include ``labels`` (all of them when none)."""
        want = set(labels.items())
        with self._lock:
            return sum(v for k, v in self._counters.get(name, {}).items() if want <= set(k))

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """A gauge whose value ``read()`` gives at scrape time (a failing read leaves it out of that scrape)."""
        self._gauges[name] = (help_text, read)

    def register(self, collector: Collector) -> None:
        """Expose ``collector``'s families too (a ``prometheus_client`` collector: ``collect()``)."""
        self.registry.register(collector)

    def register_rendered(self, exposition: Callable[[], bytes]) -> None:
        """Append ``exposition()`` (families in the text format, rendered by ``prometheus_client`` when
        they last changed, none of them named like another's) to every scrape: for many series that
        change seldom, whose rendering would cost every scrape."""
        self._rendered.append(exposition)

    def render(self) -> str:
        """The exposition of everything registered, in the text format `CONTENT_TYPE` names."""
        return b"".join([generate_latest(self.registry), *(render() for render in self._rendered)]).decode("utf-8")

    # --- what `_Own` exposes --------------------------------------------------------------------
    def _families(self) -> Iterator[Metric]:
        with self._lock:
            counters = {name: dict(series) for name, series in self._counters.items()}
        summary_parts = {f"{s}_{part}" for s in _SUMMARIES for part in ("sum", "count")}
        names = sorted((set(counters) | set(COUNTERS)) - summary_parts)
        for name in names:
            help_text, label_names = COUNTERS.get(name, (name, ()))
            series = counters.get(name, {})
            if series:
                label_names = tuple(k for k, _ in next(iter(series)))
            family = CounterMetricFamily(name, help_text, labels=label_names)
            if not series and not label_names:
                family.add_metric([], 0.0)
            for key, value in sorted(series.items()):
                if tuple(k for k, _ in key) == label_names:  # a call with other labels cannot be a series here
                    family.add_metric([v for _, v in key], value)
            yield family
        for name, help_text in _SUMMARIES.items():
            count = int(sum(counters.get(f"{name}_count", {}).values()))
            total = sum(counters.get(f"{name}_sum", {}).values())
            yield SummaryMetricFamily(name, help_text, count_value=count, sum_value=total)
        for name, (help_text, read) in sorted(self._gauges.items()):
            try:
                value = float(read())
            except Exception:  # a gauge whose owner is gone must not break the scrape
                continue
            if math.isnan(value):
                continue
            yield GaugeMetricFamily(name, help_text, value=value)


class _Own:
    """The `Metrics`' own counters and gauges as a ``prometheus_client`` collector."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return self._metrics._families()
