"""`ragtrace serve --export-labels URL` end to end: a real server (tenant token, periodic audits, the
offline labeller) sends the labels of `POST /api/audit` and of its periodic audits to a real OTLP/HTTP
receiver on loopback; when the receiver goes down, audits still answer and the drops show on /metrics.
A URL that could never be sent to stops the start with what to give instead."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ragtrace import semconv as sc
from tests import otlp_builders as otlp
from tests.audit.fixtures import scenario
from tests.audit.test_audit_serve import RAGTRACE, REPO, _env, _spec
from tests.loopback import serving

from .receiver import LogReceiver

TOKEN, TENANT = "export-token", "acme"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """(URL of a `ragtrace serve --export-labels` child, the port its receiver must listen on)."""
    port, receiver_port = otlp.free_port(), otlp.free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([RAGTRACE, "serve", "--store", str(tmp_path / "store"), "--port", str(port),
                                 "--tokens", f"{TOKEN}={TENANT}", "--no-fsync", "--batch-interval", "0.1s",
                                 "--audit-every", "3s", "--log-level", "warning",
                                 "--export-labels", f"http://127.0.0.1:{receiver_port}"],
                                cwd=REPO, env=_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        otlp.wait_until_ready(url, proc, log, timeout=60, token=TOKEN)
        yield url, receiver_port
    finally:
        otlp.stop_child(proc, 30)


def _send(url: str, release: str, *, age_s: float = 0.0) -> dict[str, str]:
    """The audit scenario's traces of ``release``, started ``age_s`` ago: expected mode -> trace id."""
    traces = scenario(release, release)
    ids = {name: os.urandom(16).hex() for name in traces}
    start = time.time_ns() - int(age_s * 1e9)
    spans = [s for name, tr in traces.items() for s in _spec(ids[name], tr).spans()]  # type: ignore[attr-defined]
    for s in spans:
        s.start_ns = start
    body = otlp.request(spans, service="qa", release=release).SerializeToString()
    resp = httpx.post(f"{url}/v1/traces", content=body, timeout=30,
                      headers={"Content-Type": "application/x-protobuf", **HEADERS})
    assert resp.status_code == 200, resp.text
    deadline = time.monotonic() + 30
    while len(httpx.get(f"{url}/api/traces", params={"release": release}, headers=HEADERS,
                        timeout=10).text.splitlines()) < len(ids):
        assert time.monotonic() < deadline, "traces not stored"
        time.sleep(0.2)
    return ids


def _metrics(url: str) -> dict[tuple[str, str], float]:
    text = httpx.get(f"{url}/metrics", headers=HEADERS, timeout=10).text
    return {(s.name, s.labels.get("reason", "")): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples if "label_export" in s.name}


def _wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := predicate()):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
    return got


def _by_trace(receiver: LogReceiver) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for e in receiver.events():
        out.setdefault(e.trace_id, []).append(e)
    return out


@pytest.mark.timeout(300)
def test_audits_export_their_labels_and_a_receiver_down_costs_only_labels(server: tuple[str, int]) -> None:
    url, receiver_port = server
    receiver = LogReceiver()
    with serving(receiver.app(), port=receiver_port):
        # POST /api/audit of traces two hours old (no periodic window reaches back that far)
        old = _send(url, "old", age_s=7200)
        audited = httpx.post(f"{url}/api/audit", json={"release": "old"}, headers=HEADERS, timeout=300)
        assert audited.status_code == 200, audited.text
        report = audited.json()
        assert report["n"] == len(old)
        got = _wait(lambda: (b := _by_trace(receiver)) and set(old.values()) <= set(b) and b, 30,
                    "the audit's labels at the receiver")
        for expected, trace_id in old.items():
            events = got[trace_id]
            root = hashlib.sha256(f"{trace_id}:0".encode()).hexdigest()[:16]
            assert {e.span_id for e in events} == {root}
            assert {e.attributes[sc.EVALUATION_TENANT] for e in events} == {TENANT}
            assert {e.attributes[sc.EVALUATION_MANIFEST_ID] for e in events} == {report["manifest_id"]}
            modes = [e.attributes[sc.GEN_AI_EVALUATION_SCORE_LABEL] for e in events
                     if e.attributes[sc.GEN_AI_EVALUATION_NAME] == "ragtrace.failure_mode"]
            assert modes == [expected.split("-")[0]], (expected, modes)

        # the periodic audit labels traces of the interval just past and exports them too
        new = _send(url, "new")
        _wait(lambda: set(new.values()) <= set(_by_trace(receiver)), 90, "the periodic audit's labels")
        events = receiver.events()
        assert len({(e.trace_id, e.attributes[sc.GEN_AI_EVALUATION_NAME]) for e in events}) == len(events), \
            "each label sent once"
        shown = _wait(lambda: (m := _metrics(url)) and m[("ragtrace_label_export_sent_total", "")] == len(events)
                      and m, 10, "the sent count on /metrics")
        assert sum(v for (name, _), v in shown.items() if name == "ragtrace_label_export_dropped_total") == 0

    # the receiver is down: an audit still answers with its labels written; its events are counted as dropped
    late = _send(url, "late", age_s=7200)
    t0 = time.monotonic()
    audited = httpx.post(f"{url}/api/audit", json={"release": "late"}, headers=HEADERS, timeout=300)
    took = time.monotonic() - t0
    assert audited.status_code == 200 and audited.json()["n"] == len(late), audited.text
    dropped = _wait(lambda: sum(v for (name, _), v in _metrics(url).items()
                                if name == "ragtrace_label_export_dropped_total"), 60, "drops on /metrics")
    assert dropped >= len(late), dropped
    assert took < 10, f"the audit waited on the receiver: {took:.1f} s"  # one batch's retries take 10 s


@pytest.mark.parametrize(("url", "says"), [("otel:4318", "http(s) URL"), ("http://otel:4318/v1/logs?k=1", "query")])
def test_a_bad_receiver_url_stops_the_start(tmp_path: Path, url: str, says: str) -> None:
    done = subprocess.run([RAGTRACE, "serve", "--store", str(tmp_path / "store"), "--export-labels", url],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "--export-labels / $RAGTRACE_EXPORT_LABELS" in done.stderr and says in done.stderr, done.stderr
    assert not (tmp_path / "store").exists(), "refused before the store was opened"
