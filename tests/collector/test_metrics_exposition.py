"""/metrics is written by prometheus_client: what it exposes parses with the library's own parser, each
app has its own registry, label values a sender chose are escaped, and NaN / ±Inf survive the round trip."""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client import REGISTRY
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from ragtrace_collector.metrics import Metrics


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_counters_keep_their_names_and_parse() -> None:
    m = Metrics()
    m.inc("ragtrace_requests_total", code="200")
    m.inc("ragtrace_requests_total", 2, code="429")
    m.inc("ragtrace_store_insert_seconds_sum", 0.5)
    m.inc("ragtrace_store_insert_seconds_count", 3)
    m.inc("ragtrace_audit_runs_total", tenant="acme", outcome="ok")
    m.gauge("ragtrace_store_up", "1 when up", lambda: 1)
    got = _samples(m.render())
    assert got[("ragtrace_requests_total", (("code", "200"),))] == 1
    assert got[("ragtrace_requests_total", (("code", "429"),))] == 2
    assert got[("ragtrace_store_insert_seconds_sum", ())] == 0.5
    assert got[("ragtrace_store_insert_seconds_count", ())] == 3
    assert got[("ragtrace_spans_received_total", ())] == 0  # unlabelled counters exist from the start
    assert got[("ragtrace_audit_runs_total", (("outcome", "ok"), ("tenant", "acme")))] == 1
    assert got[("ragtrace_store_up", ())] == 1
    assert m.get("ragtrace_requests_total") == 3 and m.get("ragtrace_audit_runs_total", outcome="ok") == 1
    assert m.get("ragtrace_audit_runs_total", outcome="error") == 0


def test_private_registry_escaping_and_non_finite_values() -> None:
    class Hostile:
        def collect(self) -> Iterator[Metric]:
            g = GaugeMetricFamily("ragtrace_test_value", "test", labels=["release"])
            g.add_metric(['v1"} 1\nragtrace_fake 9'], float("nan"))
            g.add_metric(["up"], float("inf"))
            g.add_metric(["down"], float("-inf"))
            yield g

    a, b = Metrics(), Metrics()
    a.register(Hostile())
    assert "ragtrace_test_value" in a.render() and "ragtrace_test_value" not in b.render()
    assert "ragtrace_test_value" not in "".join(f.name for f in REGISTRY.collect())
    got = _samples(a.render())
    assert ("ragtrace_fake", ()) not in got  # the newline stayed inside the escaped label value
    assert math.isnan(got[("ragtrace_test_value", (("release", 'v1"} 1\nragtrace_fake 9'),))])
    assert got[("ragtrace_test_value", (("release", "up"),))] == math.inf
    assert got[("ragtrace_test_value", (("release", "down"),))] == -math.inf


def test_a_failing_gauge_is_left_out_of_the_scrape() -> None:
    m = Metrics()
    m.gauge("ragtrace_spool_bytes", "bytes", lambda: 1 / 0)
    m.gauge("ragtrace_queue_bytes", "bytes", lambda: 7)
    got = _samples(m.render())
    assert ("ragtrace_spool_bytes", ()) not in got and got[("ragtrace_queue_bytes", ())] == 7
