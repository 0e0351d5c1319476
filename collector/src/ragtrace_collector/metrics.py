"""Collector metrics in the Prometheus text exposition format (no client library needed).

Counters only go up; gauges are read from their owners when scraped. Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_HELP = {
    "ragtrace_requests_total": ("counter", "OTLP export requests by HTTP status"),
    "ragtrace_spans_received_total": ("counter", "spans accepted and acknowledged"),
    "ragtrace_spans_rejected_total": ("counter", "spans refused (reported in partial_success)"),
    "ragtrace_spans_dropped_attributes_total": ("counter", "spans whose sender dropped attributes "
                                                "(dropped_attributes_count > 0): their traces read as incomplete"),
    "ragtrace_rows_written_total": ("counter", "rows inserted into the store, by table"),
    "ragtrace_batches_total": ("counter", "store batches written"),
    "ragtrace_batch_failures_total": ("counter", "store batch inserts that failed (retried or spooled)"),
    "ragtrace_spool_replayed_records_total": ("counter", "spooled requests replayed into the store"),
    "ragtrace_deadletter_records_total": ("counter", "requests the store refused as data; kept in spool/deadletter"),
    "ragtrace_store_insert_seconds_sum": ("counter", "time spent in store inserts"),
    "ragtrace_store_insert_seconds_count": ("counter", "store insert statements"),
    "ragtrace_audit_runs_total": ("counter", "background audits run, by outcome"),
    "ragtrace_passage_renewals_total": ("counter", "passage last_seen renewals asked of the store (for retention)"),
    "ragtrace_client_errors_total": ("counter", "client errors by kind (logged at most once per kind per minute)"),
}


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, str], float] = {}
        self._gauges: dict[str, tuple[str, Callable[[], float]]] = {}

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        key = (name, _labels(labels))
        with self._lock:
            self._counters[key] = self._counters.get(key, 0.0) + value

    def get(self, name: str, **labels: str) -> float:
        with self._lock:
            return self._counters.get((name, _labels(labels)), 0.0)

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self._gauges[name] = (help_text, read)

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            counters = dict(self._counters)
        by_name: dict[str, list[tuple[str, float]]] = {}
        for (name, labels), value in counters.items():
            by_name.setdefault(name, []).append((labels, value))
        for name in sorted(set(by_name) | set(_HELP)):
            kind, help_text = _HELP.get(name, ("counter", name))
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            for labels, value in sorted(by_name.get(name, [("", 0.0)])):
                lines.append(f"{name}{labels} {_num(value)}")
        for name, (help_text, read) in sorted(self._gauges.items()):
            try:
                value = float(read())
            except Exception:  # a gauge whose owner is gone must not break the scrape
                continue
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {_num(value)}"]
        return "\n".join(lines) + "\n"


def _num(v: float) -> str:
    return str(int(v)) if v == int(v) else repr(v)
