"""End to end: Debian's Prometheus scrapes a real `ragtrace serve --audit-every` (tenant tokens, the shipped
scrape configuration and alert rules) and sends what fires to Debian's Alertmanager (the shipped routes).

The traffic is the demo's: its example RAG pipeline (BM25, the MiniLM reranker, the extractive generator)
answers every golden question of a generated corpus, traced by the SDK, first as the clean baseline release,
then as a candidate release whose generator alters the facts of half its answers (the demo's fault
machinery, `ragtrace_examples.faults`: Fault.ALTER_FACTS). The periodic audit inside the server labels each
release's window with the offline labeller. The ceiling alert stays quiet on the clean release (while its
rates are scraped and the rule has been evaluated on them) and fires on the candidate's fabrication rate;
Alertmanager routes it to the on-call pager.

What the test changes of the shipped files: the target, the token file, ports and storage, seconds
instead of minutes for the intervals and the alerts' `for:` (`monitoring.py`). Each burst of traffic is
sent right after an audit ends, so it lies inside the next audit's window (which ends at least half an
interval after that: `ragtrace_cli.server.audit_loop`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from tests import otlp_builders as otlp
from tests.loopback import serving

from .monitoring import alertmanager, alerts, api, prometheus, wait_for

REPO = Path(__file__).resolve().parents[2]
RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))
TOKEN, TENANT = "alerting-token", "acme"
SERVICE = "example-rag"
#: seconds between periodic audits: long enough for one to label a release, short for the test
AUDIT_EVERY = 6
#: golden questions per release: the ceiling rule wants at least 30 labelled traces in a window
QUESTIONS = 32
CEILING = "RagtraceFailureModeAboveCeiling"


class WebhookSink:
    """Alertmanager's notifications, by receiver (the path of the webhook URL)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/{receiver}")
        async def hook(receiver: str, request: Request) -> dict[str, str]:
            self.received.append((receiver, await request.json()))
            return {}

        return app


@contextlib.contextmanager
def serving_ragtrace(folder: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    """A `ragtrace serve --audit-every` child with a tenant token: yields its URL at once and a function
    that waits until it is ready (the caller has work of its own to do meanwhile)."""
    port = otlp.free_port()
    url = f"http://127.0.0.1:{port}"
    log = folder / "serve.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))),
           "HF_HUB_OFFLINE": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen([RAGTRACE, "serve", "--store", str(folder / "store"), "--port", str(port),
                                 "--tokens", f"{TOKEN}={TENANT}", "--no-fsync", "--batch-interval", "0.1s",
                                 "--audit-every", f"{AUDIT_EVERY}s", "--log-level", "warning"],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield url, lambda: otlp.wait_until_ready(url, proc, log, timeout=90, token=TOKEN)
    finally:
        otlp.stop_child(proc, 30)


def _last_audit(url: str) -> float | None:
    """``ragtrace_audit_last_success_timestamp_seconds`` of the tenant, read from the server itself."""
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).text
    for line in text.splitlines():
        if line.startswith("ragtrace_audit_last_success_timestamp_seconds{") and f'tenant="{TENANT}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def _after_next_audit(url: str) -> None:
    """Return just after the server finishes its next periodic audit."""
    before = _last_audit(url)
    wait_for(lambda: (got := _last_audit(url)) is not None and got != before, 3 * AUDIT_EVERY + 60,
             "a periodic audit to finish", step=0.1)


def _send(pipeline: Any, release: str, url: str) -> None:
    import ragtrace

    ragtrace.configure(endpoint=url, service=SERVICE, release=release, environment="alerting",
                       headers={"authorization": f"Bearer {TOKEN}"}, schedule_delay_ms=100)
    try:
        for q in pipeline.corpus.questions:
            pipeline.ask(q.question, q.id)
        assert ragtrace.force_flush(30)
    finally:
        ragtrace.shutdown()


def _series(prom: str, query: str) -> list[dict[str, Any]]:
    return api(prom, "/api/v1/query", query=query)["result"]


def _unix(stamp: str) -> float:
    """An RFC 3339 time as Prometheus writes it (UTC, up to nanoseconds) in Unix seconds."""
    from datetime import datetime

    whole, _, fraction = stamp.removesuffix("Z").partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (fraction or "0"))


def _evaluated_since(prom: str, since: float) -> bool:
    """Every rule group evaluated after ``since`` (Unix time)."""
    return all(_unix(g["lastEvaluation"]) > since for g in api(prom, "/api/v1/rules")["groups"])


@pytest.mark.timeout(240)
def test_the_ceiling_alert_fires_on_the_faulty_release_only(tmp_path: Path) -> None:
    from ragtrace_examples.corpus import generate_corpus
    from ragtrace_examples.demo import reranker_encoder
    from ragtrace_examples.faults import Fault, baseline_release, candidate_release
    from ragtrace_examples.pipeline import RagPipeline

    sink = WebhookSink()
    with serving_ragtrace(tmp_path) as (server, wait_ready), serving(sink.app()) as hooks, \
            alertmanager(tmp_path / "am", webhook=hooks) as am:
        # the demo's pipelines for both releases, built while the server starts
        corpus = generate_corpus(QUESTIONS, seed=5)
        encoder = reranker_encoder()
        clean = RagPipeline(corpus, baseline_release("v1"), encoder=encoder)
        faulty = RagPipeline(corpus, candidate_release(corpus, "v2", rates={Fault.ALTER_FACTS: 0.5}), encoder=encoder)
        # the questions' embeddings in one batch, then every question once untraced (the decorators
        # pass through until `configure`): with the encoder's caches warm each traced burst takes well
        # under half an audit interval
        encoder.encode([q.question for q in corpus.questions])
        for q in corpus.questions:
            clean.ask(q.question, q.id)
            faulty.ask(q.question, q.id)
        wait_ready()
        target = server.removeprefix("http://")
        with prometheus(tmp_path / "prom", target=target, token=TOKEN, alertmanager_url=am,
                        durations={CEILING: "1s"}) as prom:
            _clean_then_faulty(server, prom, sink, target, clean, faulty)


def _clean_then_faulty(server: str, prom: str, sink: WebhookSink, target: str, clean: Any, faulty: Any) -> None:
    # the clean release: audited, scraped, evaluated, quiet
    _after_next_audit(server)
    _send(clean, "v1", server)
    _after_next_audit(server)
    size = wait_for(lambda: _series(prom, f'ragtrace_audit_sample_size{{release="v1",tenant="{TENANT}"}}'),
                    20, "v1's audit scraped by Prometheus")
    assert float(size[0]["value"][1]) == QUESTIONS
    seen_at = time.time()
    wait_for(lambda: _evaluated_since(prom, seen_at), 20, "the rules evaluated on v1's rates")
    lower = _series(prom, 'ragtrace_audit_failure_rate_lower{release="v1"}')
    assert {s["metric"]["mode"] for s in lower} == {"retrieval_gap", "rank_inversion", "under_use",
                                                    "fabrication"}
    assert all(float(s["value"][1]) < 0.10 for s in lower), lower
    assert alerts(prom, CEILING) == []

    # the faulty release: its fabrications page
    _after_next_audit(server)
    _send(faulty, "v2", server)
    firing = wait_for(lambda: [a for a in alerts(prom, CEILING) if a["state"] == "firing"],
                      3 * AUDIT_EVERY + 60, "the ceiling alert firing on v2")
    assert [(a["labels"]["release"], a["labels"]["mode"]) for a in firing] == [("v2", "fabrication")], firing
    alert = firing[0]
    assert alert["labels"]["severity"] == "page" and alert["labels"]["tenant"] == TENANT
    assert alert["labels"]["service"] == SERVICE and alert["labels"]["instance"] == target
    assert alert["annotations"]["summary"] == f"fabrication in {SERVICE} v2 is above its 10 % ceiling"
    assert float(alert["value"]) > 0.10

    # Alertmanager routed it by severity to the on-call pager
    notified = wait_for(lambda: [body for receiver, body in sink.received if receiver == "on-call-pager"],
                        30, "Alertmanager's notification to the on-call pager")
    paged = [a for body in notified for a in body["alerts"] if a["labels"]["alertname"] == CEILING]
    assert paged and all(a["labels"]["release"] == "v2" and a["status"] == "firing" for a in paged), paged
    elsewhere = [a["labels"] for r, body in sink.received if r != "on-call-pager" for a in body["alerts"]]
    assert not [a for a in elsewhere if a["alertname"] == CEILING], elsewhere
    print("other notifications:", elsewhere)
