"""Every metric the shipped alert rules read is one `ragtrace serve` exposes: a renamed gauge would
otherwise leave its alert silently unable to fire (PromQL finds no series and says nothing)."""

from __future__ import annotations

import re

from prometheus_client.metrics_core import Metric

from ragtrace_collector.metrics import COUNTERS
from ragtrace_evaluator.audit.audit_gauges import AuditGauges
from ragtrace_evaluator.label_export import LabelExporter
from ragtrace_evaluator.label_export.metrics import LabelExportMetrics
from tests.otlp_builders import free_port

from .tools import PROMETHEUS_DIR


def _exposed(families: list[Metric]) -> set[str]:
    # a counter family is named without its `_total`; its series are named with it
    return {f"{f.name}_total" if f.type == "counter" else f.name for f in families}


def test_the_rules_read_only_metrics_the_server_exposes() -> None:
    exporter = LabelExporter(f"http://127.0.0.1:{free_port()}")
    try:
        names = _exposed([*AuditGauges(900).collect(), *LabelExportMetrics(exporter).collect()])
    finally:
        exporter.close(timeout=1)
    names |= set(COUNTERS) | {"up"}  # the ingest counters, and what Prometheus records of each scrape
    rules = (PROMETHEUS_DIR / "ragtrace-rules.yml").read_text()
    exprs = "\n".join(re.findall(r"expr: \|\n((?:\s{10}.*\n)+)", rules))
    used = set(re.findall(r"\bragtrace_[a-z_]+", exprs)) | set(re.findall(r"\bup(?=\{)", exprs))
    assert used >= {"ragtrace_audit_failure_rate_lower", "ragtrace_audit_sample_size", "ragtrace_drift",
                    "ragtrace_audit_last_success_timestamp_seconds", "ragtrace_audit_interval_seconds", "up",
                    "ragtrace_label_export_dropped_total"}, used
    assert used <= names, f"the rules read metrics nothing exposes: {sorted(used - names)}"
