"""Audit labels as OpenTelemetry GenAI evaluation events over real OTLP/HTTP on loopback.

Traces with known failures go through the real collector into the chDB store; a real audit labels
them and hands each batch to `LabelExporter`, which sends ``gen_ai.evaluation.result`` log records
to a real OTLP/HTTP receiver that decodes the protobuf. The receiver refusing, then down: labels
are retried, then dropped and counted, and the audit neither waits nor fails.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ragtrace import semconv as sc
from ragtrace_collector.metrics import Metrics
from ragtrace_evaluator.audit.run import run_audit
from ragtrace_evaluator.label_export import LabelExporter, LabelExportError, evaluation_events, logs_endpoint
from ragtrace_evaluator.label_export.events import FAILURE_MODE, GOLD_IN_CONTEXT, GROUNDEDNESS, PASS
from ragtrace_evaluator.label_export.metrics import LabelExportMetrics
from ragtrace_store import LabelRecord, TraceRecord
from tests import otlp_builders as otlp
from tests.audit.fixtures import PASSAGES, QUERY, KeywordGrounding, Trace, scenario
from tests.collector._server import running
from tests.loopback import serving

from .receiver import LogReceiver

TENANT = "default"  # the collector runs without tokens


def _spec(trace_id: str, tr: Trace) -> otlp.TraceSpec:
    docs = lambda ids: [otlp.Doc(d, PASSAGES[d], 1.0 - i / 10) for i, d in enumerate(ids)]  # noqa: E731
    return otlp.TraceSpec(trace_id=trace_id, query=QUERY, answer=tr.answer, retrieved=docs(tr.retrieved),
                          reranked=docs(tr.reranked or tr.retrieved), context=docs(tr.context),
                          top_k=len(tr.context), gold=tr.gold or [], with_reranker=tr.reranked is not None)


def _root_span_id(trace_id: str) -> str:
    return hashlib.sha256(f"{trace_id}:0".encode()).hexdigest()[:16]  # TraceSpec's root span


@pytest.fixture(scope="module")
def stored(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, str]]]:
    """Two releases of the audit scenario sent over OTLP/HTTP to the real collector and stored:
    release -> {expected mode (+ suffix) -> trace id}."""
    out: dict[str, dict[str, str]] = {}
    with running(chdb_store, str(tmp_path_factory.mktemp("spool"))) as (url, app):
        for release in ("export-a", "export-b"):
            traces = scenario(release, release)
            ids = {name: os.urandom(16).hex() for name in traces}
            spans = [s for name, tr in traces.items() for s in _spec(ids[name], tr).spans()]
            body = otlp.request(spans, service="qa", release=release).SerializeToString()
            resp = httpx.post(f"{url}/v1/traces", content=body, timeout=30,
                              headers={"Content-Type": "application/x-protobuf"})
            assert resp.status_code == 200, resp.text
            out[release] = ids
        assert app.state.writer.flush(30)
    yield out


def _audit(store: Any, release: str, exporter: LabelExporter | None, seen: list[float] | None = None,
           **kw: Any) -> dict[str, Any]:
    def hand_over(labels: Sequence[LabelRecord], records: Sequence[TraceRecord]) -> None:
        t0 = time.perf_counter()
        assert exporter is not None
        exporter.submit_labels(labels, records, tenant=TENANT)
        if seen is not None:
            seen.append(time.perf_counter() - t0)

    return run_audit(store, tenant=TENANT, release=release, grounding=KeywordGrounding(), relevance_labeller=None,
                     resume=False, on_labels=hand_over if exporter is not None else None, **kw)


def test_every_label_arrives_on_its_trace_and_root_span(chdb_store: Any, stored: dict[str, dict[str, str]]) -> None:
    receiver = LogReceiver()
    with serving(receiver.app()) as url:
        exporter = LabelExporter(url)
        report = _audit(chdb_store, "export-a", exporter, batch_size=3)  # three batches: three hand-overs
        exporter.close(timeout=30)
    events = receiver.events()
    ids = stored["export-a"]
    assert report["n"] == len(ids)
    counts = exporter.counts()
    assert counts == {"sent": len(events), "dropped": {"queue_full": 0, "export_failed": 0, "shutdown": 0},
                      "queued": 0}

    by_trace: dict[str, dict[str, Any]] = {}
    for e in events:
        assert e.event_name == sc.EVALUATION_RESULT_EVENT
        assert e.span_id == _root_span_id(e.trace_id), "attached to the judged query's root span"
        assert e.flags & 0x01, "sampled, as the judged span was"
        assert e.resource == {sc.SERVICE_NAME: "qa", sc.SERVICE_VERSION: "export-a"}
        assert e.scope == "ragtrace.evaluator"
        assert e.attributes[sc.EVALUATION_MANIFEST_ID] == report["manifest_id"]
        assert e.attributes[sc.EVALUATION_TENANT] == TENANT
        name = e.attributes[sc.GEN_AI_EVALUATION_NAME]
        assert name not in by_trace.setdefault(e.trace_id, {}), f"{name} sent twice for {e.trace_id}"
        by_trace[e.trace_id][name] = e.attributes
    assert set(by_trace) == set(ids.values())

    for expected, trace_id in ids.items():
        got = by_trace[trace_id]
        mode = got[FAILURE_MODE]
        assert mode[sc.GEN_AI_EVALUATION_SCORE_LABEL] == expected.split("-")[0], (expected, mode)
        assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in mode  # a category, not a number
        assert mode[sc.GEN_AI_EVALUATION_EXPLANATION]
        assert 0.0 <= mode[sc.EVALUATION_CONFIDENCE] <= 1.0
        # every trace here has gold on its span and an answer: all four labels are known
        assert set(got) == {FAILURE_MODE, PASS, GROUNDEDNESS, GOLD_IN_CONTEXT}, expected
    fab = by_trace[ids["fabrication"]]
    assert fab[PASS][sc.GEN_AI_EVALUATION_SCORE_LABEL] == "fail"
    assert fab[GROUNDEDNESS][sc.GEN_AI_EVALUATION_SCORE_LABEL] == "contradicted"
    assert "contradicted" in fab[FAILURE_MODE][sc.GEN_AI_EVALUATION_EXPLANATION]
    ok = by_trace[ids["ok"]]
    assert ok[PASS][sc.GEN_AI_EVALUATION_SCORE_LABEL] == "pass" and ok[PASS][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert ok[GOLD_IN_CONTEXT][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    gap = by_trace[ids["retrieval_gap"]]
    assert gap[GOLD_IN_CONTEXT][sc.GEN_AI_EVALUATION_SCORE_LABEL] == "gold_not_in_context"
    under = by_trace[ids["under_use"]]
    assert under[GROUNDEDNESS][sc.GEN_AI_EVALUATION_SCORE_LABEL] == "abstained"
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in under[GROUNDEDNESS], "undefined groundedness is not sent as 0"
    assert "declined" in under[FAILURE_MODE][sc.GEN_AI_EVALUATION_EXPLANATION]


def test_a_refusing_receiver_is_retried(chdb_store: Any, stored: dict[str, dict[str, str]]) -> None:
    receiver = LogReceiver(refuse_first=2)  # 503 twice, as a receiver that is restarting
    with serving(receiver.app()) as url:
        exporter = LabelExporter(url, export_timeout=20)
        _audit(chdb_store, "export-b", exporter)
        exporter.close(timeout=30)
    assert receiver.refused == 2
    counts = exporter.counts()
    assert counts["sent"] == len(receiver.events()) == 4 * len(stored["export-b"])  # four labels a trace
    assert sum(counts["dropped"].values()) == 0, counts
    assert {e.trace_id for e in receiver.events()} == set(stored["export-b"].values())


def test_a_receiver_that_is_down_costs_labels_not_the_audit(chdb_store: Any,
                                                            stored: dict[str, dict[str, str]]) -> None:
    down = f"http://127.0.0.1:{otlp.free_port()}"  # nothing listens there
    # a queue smaller than one audit's events, so some find it full while the worker is retrying
    exporter = LabelExporter(down, queue_size=5, batch_size=2, export_timeout=1.5)
    handed: list[float] = []
    report = _audit(chdb_store, "export-a", exporter, handed, batch_size=2)
    exporter.close(timeout=3)
    ids = stored["export-a"]
    assert report["n"] == len(ids) and report["sampling"]["n_labelled_now"] == len(ids)
    assert len(handed) == (len(ids) + 1) // 2
    # the hand-over queues without waiting on the network: well under the 1.5 s a single retry takes
    assert max(handed) < 0.5, handed
    counts = exporter.counts()
    dropped = counts["dropped"]
    assert counts["sent"] == 0 and counts["queued"] == 0
    assert dropped["queue_full"] > 0 and dropped["export_failed"] > 0, dropped
    expected = len(_events_of(chdb_store, report["manifest_id"], ids))
    assert sum(dropped.values()) == expected, (dropped, expected)

    # what /metrics shows of it, parsed by prometheus_client's own parser
    metrics = Metrics()
    metrics.register(LabelExportMetrics(exporter))
    shown = {(s.name, s.labels.get("reason", "")): s.value
             for fam in text_string_to_metric_families(metrics.render()) for s in fam.samples}
    assert shown[("ragtrace_label_export_sent_total", "")] == 0
    assert {r: shown[("ragtrace_label_export_dropped_total", r)] for r in dropped} == dropped
    assert shown[("ragtrace_label_export_queued_events", "")] == 0


def _events_of(store: Any, manifest_id: str, ids: dict[str, str]) -> list[Any]:
    """The events the stored labels of ``ids`` make (each trace's root span from the store)."""
    from ragtrace_store import read_labels

    records = {r.trace_id: r for r in store.read_traces(tenant=TENANT, trace_ids=list(ids.values()))}
    labels = read_labels(store, tenant=TENANT, manifest_id=manifest_id, trace_ids=list(ids.values()))
    assert {rec.trace_id: rec.root_span_id for rec in records.values()} == {
        t: _root_span_id(t) for t in ids.values()}
    return [e for lab in labels for e in evaluation_events(lab, span_id=records[lab.trace_id].root_span_id,
                                                           tenant=TENANT)]


def test_labels_of_traces_without_otlp_ids_are_not_sent(tmp_path: Path) -> None:
    rec = LabelRecord.incomplete(trace_id="imported-7", query_id="q7", release="r", service="s", manifest_id="m",
                                 reasons=["missing_stage: no retriever span"])
    assert evaluation_events(rec, span_id="0123456789abcdef", tenant=TENANT) == []
    good = LabelRecord.incomplete(trace_id="ab" * 16, query_id="q7", release="r", service="s", manifest_id="m",
                                  reasons=["missing_stage: no retriever span"])
    (only,) = evaluation_events(good, span_id="0123456789ABCDEF", tenant=TENANT)
    assert only.span_id == "0123456789abcdef"
    assert only.attributes[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "incomplete"
    assert only.attributes[sc.GEN_AI_EVALUATION_EXPLANATION] == "not labelled: missing_stage: no retriever span"
    assert evaluation_events(good, span_id="0" * 16, tenant=TENANT) == []  # the invalid (all-zero) span id


@pytest.mark.parametrize(("url", "endpoint"), [
    ("http://otel:4318", "http://otel:4318/v1/logs"),
    ("https://otel.example/", "https://otel.example/v1/logs"),
    ("http://127.0.0.1:4318/custom/v1/logs", "http://127.0.0.1:4318/custom/v1/logs"),
])
def test_logs_endpoint(url: str, endpoint: str) -> None:
    assert logs_endpoint(url) == endpoint


@pytest.mark.parametrize(("url", "says"), [
    ("otel:4318", "http(s) URL"),
    ("ftp://otel/v1/logs", "http(s) URL"),
    ("http://otel:4318/v1/logs?key=1", "no query"),
    ("http://otel:99999", "port"),
])
def test_bad_export_urls_say_what_to_give(url: str, says: str) -> None:
    with pytest.raises(LabelExportError, match=r"--export-labels") as err:
        logs_endpoint(url)
    assert says in str(err.value)
