"""The periodic audits' figures as Prometheus gauges (a ``prometheus_client`` collector that the
serving process registers beside its ingest counters: `ragtrace_collector.metrics.Metrics.register`).

Each tenant's newest `WindowResult` is held in memory and turned into families when scraped, so a
scrape reads no store and its cost is bounded by the window's kept groups (`periodic.Limits`). Names
and labels (docs/production-metrics.md):

* per (tenant, service, release, labeller): ``ragtrace_audit_failure_rate{mode}`` and its 95 % Wilson
  ``_lower`` / ``_upper``; ``ragtrace_audit_rate{metric}`` (gold_in_context | grounded | pass |
  abstention) with ``_lower`` / ``_upper``; ``ragtrace_audit_sample_size`` (labelled traces);
* per tenant: ``ragtrace_audit_window_seconds``, ``ragtrace_audit_window_end_timestamp_seconds``,
  ``ragtrace_audit_last_success_timestamp_seconds``, ``ragtrace_audit_groups_dropped``;
* ``ragtrace_audit_interval_seconds`` (the configured ``--audit-every``);
* per (tenant, service, boundary, against): ``ragtrace_drift`` (1 worse, -1 better, 0 no significant
  change, NaN undefined), ``ragtrace_drift_delta`` with ``_lower`` / ``_upper`` (NaN when undefined).

A rate whose n is 0 is NaN (undefined), never 0: a comparison with NaN is false in PromQL, so no
alert fires on it.

The figures change only when an audit ends, so their exposition is rendered then, on the audit's
thread, and a scrape copies the text (`exposition`; `Metrics.register_rendered`): at the cardinality
bound the families are thousands of series, whose rendering would otherwise cost every scrape
~100 ms on this project's 2-core machine (benchmarks/audit_metrics.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from ragtrace_evaluator.audit.drift import BOUNDARIES
from ragtrace_evaluator.audit.periodic import WindowResult
from ragtrace_evaluator.audit.summary import wilson_interval
from ragtrace_store import Store
from ragtrace_store.audit_windows import WindowCounts, latest_window
from ragtrace_store.drift_verdicts import latest_drift

__all__ = ["RATE_METRICS", "AuditGauges"]

NAN = float("nan")
#: the rates beside the failure modes: name -> (count, n) of a window's counts
RATE_METRICS: dict[str, Callable[[WindowCounts], tuple[int, int]]] = {
    "gold_in_context": lambda c: (c.gold_in_context, c.gold_known),
    "grounded": lambda c: (c.entailed, c.judged - c.abstained),
    "pass": lambda c: (c.passed, c.judged),
    "abstention": lambda c: (c.abstained, c.judged),
}
_GROUP = ["tenant", "service", "release", "labeller"]
_DRIFT = ["tenant", "service", "boundary", "against"]


def _bounds(k: int, n: int) -> tuple[float, float, float]:
    ci = wilson_interval(k, n)
    if ci is None:
        return NAN, NAN, NAN
    return k / n, ci[0], ci[1]


def _ts(dt: datetime) -> float:
    return dt.timestamp()


class AuditGauges:
    """The newest periodic audit of each tenant, exposed as gauges. Thread-safe: the audit thread
    calls `update`, the scrape calls `collect`."""

    def __init__(self, interval_seconds: float) -> None:
        self.interval_seconds = float(interval_seconds)
        self._lock = threading.Lock()
        self._results: dict[str, WindowResult] = {}
        self._last_success: dict[str, float] = {}
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self)
        self._text = generate_latest(self._registry)

    def exposition(self) -> bytes:
        """The gauges in the Prometheus text format, as rendered when the newest audit ended."""
        return self._text

    def _rendered(self) -> None:
        self._text = generate_latest(self._registry)

    def update(self, result: WindowResult, *, succeeded_at: float | None = None) -> None:
        with self._lock:
            self._results[result.tenant] = result
            self._last_success[result.tenant] = succeeded_at if succeeded_at is not None else _ts(result.audited_at)
        self._rendered()

    def window_end(self, tenant: str) -> datetime | None:
        """The end of the tenant's newest window shown (None before its first)."""
        with self._lock:
            result = self._results.get(tenant)
        return result.end if result else None

    def restore(self, store: Store, tenant: str) -> bool:
        """Show the tenant's newest stored window again (after a restart, before the next audit);
        False when the store holds none."""
        windows = latest_window(store, tenant=tenant)
        if not windows:
            return False
        first = windows[0]
        drift = latest_drift(store, tenant=tenant, manifest_id=first.manifest_id)
        result = WindowResult(
            tenant=tenant, manifest_id=first.manifest_id, start=first.start, end=first.end,
            services=tuple(w.pooled for w in windows), releases=tuple(r for w in windows for r in w.releases),
            dropped_groups=0, drift=tuple(d for d in drift if d.window_end == first.end), families={},
            audited_at=max(w.audited_at for w in windows))
        with self._lock:
            if tenant not in self._results:  # an audit that finished meanwhile is newer
                self._results[tenant] = result
                self._last_success[tenant] = _ts(result.audited_at)
        self._rendered()
        return True

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            results = dict(self._results)
            last = dict(self._last_success)
        fam = {name: GaugeMetricFamily(name, text, labels=labels) for name, text, labels in (
            ("ragtrace_audit_failure_rate", "share of the window's complete labelled traces with this failure mode "
             "(NaN when n = 0)", [*_GROUP, "mode"]),
            ("ragtrace_audit_failure_rate_lower", "95% Wilson lower bound of ragtrace_audit_failure_rate",
             [*_GROUP, "mode"]),
            ("ragtrace_audit_failure_rate_upper", "95% Wilson upper bound of ragtrace_audit_failure_rate",
             [*_GROUP, "mode"]),
            ("ragtrace_audit_rate", "gold_in_context, grounded (every claim entailed), pass and abstention rates of "
             "the window (NaN when n = 0)", [*_GROUP, "metric"]),
            ("ragtrace_audit_rate_lower", "95% Wilson lower bound of ragtrace_audit_rate", [*_GROUP, "metric"]),
            ("ragtrace_audit_rate_upper", "95% Wilson upper bound of ragtrace_audit_rate", [*_GROUP, "metric"]),
            ("ragtrace_audit_sample_size", "labelled traces in the window, incomplete ones included", _GROUP),
            ("ragtrace_audit_window_seconds", "length of the newest periodic audit's window", ["tenant"]),
            ("ragtrace_audit_window_end_timestamp_seconds", "end of the newest periodic audit's window (Unix time)",
             ["tenant"]),
            ("ragtrace_audit_last_success_timestamp_seconds", "when the tenant's last periodic audit succeeded "
             "(Unix time)", ["tenant"]),
            ("ragtrace_audit_groups_dropped", "(service, release) groups of the newest window left out of these "
             "metrics by the cardinality bound", ["tenant"]),
            ("ragtrace_drift", "1 significantly worse, -1 significantly better, 0 no significant change, NaN "
             "undefined: the window's failure-mode rate against the previous window or the anchor", _DRIFT),
            ("ragtrace_drift_delta", "the window's failure-mode rate minus the reference's (NaN when undefined)",
             _DRIFT),
            ("ragtrace_drift_delta_lower", "lower bound of ragtrace_drift_delta (Newcombe, Bonferroni over the modes)",
             _DRIFT),
            ("ragtrace_drift_delta_upper", "upper bound of ragtrace_drift_delta (Newcombe, Bonferroni over the modes)",
             _DRIFT),
        )}
        for tenant, r in sorted(results.items()):
            for c in r.releases:
                self._group(fam, tenant, r.manifest_id, c)
            fam["ragtrace_audit_window_seconds"].add_metric([tenant], (r.end - r.start).total_seconds())
            fam["ragtrace_audit_window_end_timestamp_seconds"].add_metric([tenant], _ts(r.end))
            fam["ragtrace_audit_groups_dropped"].add_metric([tenant], float(r.dropped_groups))
            if tenant in last:
                fam["ragtrace_audit_last_success_timestamp_seconds"].add_metric([tenant], last[tenant])
            for d in r.drift:
                labels = [tenant, d.service, d.boundary, d.against]
                fam["ragtrace_drift"].add_metric(labels, NAN if d.verdict is None else float(d.verdict))
                for suffix, value in (("", d.delta), ("_lower", d.lower), ("_upper", d.upper)):
                    fam[f"ragtrace_drift_delta{suffix}"].add_metric(labels, NAN if value is None else value)
        yield from fam.values()
        yield GaugeMetricFamily("ragtrace_audit_interval_seconds", "the configured periodic audit interval "
                                "(ragtrace serve --audit-every)", value=self.interval_seconds)

    @staticmethod
    def _group(fam: dict[str, GaugeMetricFamily], tenant: str, labeller: str, c: WindowCounts) -> None:
        group = [tenant, c.service, c.release, labeller]
        fam["ragtrace_audit_sample_size"].add_metric(group, float(c.labels))
        for mode in BOUNDARIES:
            value, low, high = _bounds(*c.mode(mode))
            fam["ragtrace_audit_failure_rate"].add_metric([*group, mode], value)
            fam["ragtrace_audit_failure_rate_lower"].add_metric([*group, mode], low)
            fam["ragtrace_audit_failure_rate_upper"].add_metric([*group, mode], high)
        for metric, pick in RATE_METRICS.items():
            value, low, high = _bounds(*pick(c))
            fam["ragtrace_audit_rate"].add_metric([*group, metric], value)
            fam["ragtrace_audit_rate_lower"].add_metric([*group, metric], low)
            fam["ragtrace_audit_rate_upper"].add_metric([*group, metric], high)
