"""The periodic audit's metrics from a real `ragtrace serve --audit-every`: traces with known failure
modes sent over OTLP/HTTP on loopback, labelled by the offline labeller inside the serving process,
and read back from /metrics with prometheus_client's own parser."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import otlp_builders as otlp

from .fixtures import scenario
from .test_audit_serve import RAGTRACE, REPO, TOKEN, _env, _spec

Sample = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(url: str) -> tuple[Sample, str]:
    r = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(r.text) for s in fam.samples}, r.text


#: the audit interval; a window ends half an interval before its audit (WINDOW_SETTLE): 5 s for the traces to
#: reach the store on a loaded machine (with 4 s, a CI run under load wrote them after their window's audit,
#: and no later window holds them)
EVERY_S = 10


@pytest.mark.timeout(240)
def test_periodic_audit_rates_on_metrics(tmp_path: Path) -> None:
    store = tmp_path / "store"
    port = otlp.free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([RAGTRACE, "serve", "--store", str(store), "--port", str(port), "--tokens",
                                 f"{TOKEN}=acme", "--no-fsync", "--batch-interval", "0.1s", "--log-level", "info",
                                 "--audit-every", f"{EVERY_S}s", "--audit-metric-releases", "1"],
                                cwd=REPO, env=_env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            otlp.wait_until_ready(url, proc, log_path, timeout=60, token=TOKEN)
            # an older release (its spans start 20 ms earlier: within one window, but never in the same
            # millisecond, where the tie would go to the release name), then the one the bound keeps
            now = time.time_ns()
            older = [s for tr in scenario("old").values() for s in _spec(os.urandom(16).hex(), tr).spans()]  # type: ignore[attr-defined]
            traces = scenario("met")
            spans = [s for tr in traces.values() for s in _spec(os.urandom(16).hex(), tr).spans()]  # type: ignore[attr-defined]
            for s in older:
                s.start_ns = now - 20_000_000
            for s in spans:
                s.start_ns = now
            request = otlp.request(older, service="qa", release="r-old")
            request.resource_spans.extend(otlp.request(spans, service="qa", release="r-metrics").resource_spans)
            sent = httpx.post(f"{url}/v1/traces", content=request.SerializeToString(), timeout=30,
                              headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {TOKEN}"})
            assert sent.status_code == 200, sent.text
            deadline = time.monotonic() + 180
            size = ("ragtrace_audit_sample_size", None)
            while time.monotonic() < deadline:
                got, text = _scrape(url)
                found = [k for k in got if k[0] == size[0] and ("release", "r-metrics") in k[1]]
                if found:
                    break
                assert proc.poll() is None, log_path.read_text()[-3000:]
                time.sleep(0.2)
            else:
                raise AssertionError(f"no window with the traces on /metrics:\n{log_path.read_text()[-3000:]}")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    (key,) = found
    labels = dict(key[1])
    assert labels["tenant"] == "acme" and labels["service"] == "qa" and len(labels["labeller"]) == 16
    assert got[key] == len(traces)

    def rate(name: str, **extra: str) -> float:
        return got[(name, tuple(sorted({**labels, **extra}.items())))]

    expected = {m: sum(1 for name in traces if name.split("-")[0] == m) / len(traces)
                for m in ("retrieval_gap", "rank_inversion", "under_use", "fabrication")}
    for mode, share in expected.items():
        assert rate("ragtrace_audit_failure_rate", mode=mode) == pytest.approx(share), mode
        assert rate("ragtrace_audit_failure_rate_lower", mode=mode) <= share <= rate(
            "ragtrace_audit_failure_rate_upper", mode=mode)
    for metric in ("gold_in_context", "grounded", "pass", "abstention"):
        value = rate("ragtrace_audit_rate", metric=metric)
        assert 0 <= value <= 1 and rate("ragtrace_audit_rate_lower", metric=metric) <= value, metric
    assert got[("ragtrace_audit_interval_seconds", ())] == EVERY_S
    assert got[("ragtrace_audit_window_seconds", (("tenant", "acme"),))] == pytest.approx(EVERY_S, abs=0.5)
    assert abs(got[("ragtrace_audit_last_success_timestamp_seconds", (("tenant", "acme"),))] - time.time()) < 200
    assert got[("ragtrace_audit_runs_total", (("outcome", "ok"), ("tenant", "acme")))] >= 1
    drift = {dict(k[1])["against"]: v for k, v in got.items()
             if k[0] == "ragtrace_drift" and dict(k[1])["boundary"] == "fabrication"}
    assert set(drift) == {"previous", "anchor"} and math.isnan(drift["anchor"])  # no anchor set: undefined
    assert "ragtrace_requests_total" in text  # the ingest counters sit beside them
    # --audit-metric-releases 1: the older release is left out and counted, the service's drift pools both
    assert not any(("release", "r-old") in k[1] for k in got)
    assert got[("ragtrace_audit_groups_dropped", (("tenant", "acme"),))] == 1
