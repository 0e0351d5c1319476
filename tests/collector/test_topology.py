"""Production topology on one machine: an instrumented process exports with the OpenTelemetry SDK,
`ragtrace serve` (its own process) writes to ClickHouse over HTTP (chDB behind the HTTP
interface, a third process), and `ragtrace traces` reads it from a fourth."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ragtrace import semconv as sc
from tests import otlp_builders as T

from ._server import free_port

RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))


def test_sdk_exporter_to_serve_to_clickhouse_http_to_traces_cli(chdb_http_server: str, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    proc = subprocess.Popen([RAGTRACE, "serve", "--store", chdb_http_server, "--port", str(port),
                             "--spool-dir", str(tmp_path / "spool"), "--batch-interval", "100ms",
                             "--ingest-workers", "1"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    release = f"rel-{uuid.uuid4().hex[:8]}"
    try:
        T.wait_until_ready(url, proc, log)

        # OpenInference-style spans from a plain OpenTelemetry SDK (no ragtrace SDK involved);
        # limits raised because a reranker span with 2 x 20 documents exceeds the default 128.
        provider = TracerProvider(resource=Resource.create({sc.SERVICE_NAME: "topo", sc.SERVICE_VERSION: release}),
                                  span_limits=SpanLimits(max_span_attributes=10_000))
        exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces")
        provider.add_span_processor(BatchSpanProcessor(exporter))
        tracer = provider.get_tracer("test")
        docs = T.corpus(30, size=400)
        expected = {}
        for i in range(5):
            tr = T.standard_trace(docs, i)
            with tracer.start_as_current_span("query", attributes={sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: tr.query,
                                                                   sc.OUTPUT_VALUE: f"answer {i}"}) as root:
                with tracer.start_as_current_span("retrieve", attributes={
                        sc.SPAN_KIND: "RETRIEVER", **T.doc_attrs(sc.RETRIEVAL_DOCUMENTS, tr.retrieved)}):
                    pass
                with tracer.start_as_current_span("rerank", attributes={
                        sc.SPAN_KIND: "RERANKER", sc.RERANKER_TOP_K: 4,
                        **T.doc_attrs(sc.RERANKER_INPUT_DOCUMENTS, tr.retrieved),
                        **T.doc_attrs(sc.RERANKER_OUTPUT_DOCUMENTS, tr.reranked)}):
                    pass
                expected[format(root.get_span_context().trace_id, "032x")] = tr
        assert provider.force_flush(30_000)
        provider.shutdown()

        found: list[dict] = []
        deadline = time.monotonic() + 60
        while len(found) < 5 and time.monotonic() < deadline:
            out = subprocess.run([RAGTRACE, "traces", "--store", chdb_http_server, "--release", release, "--json"],
                                 capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            found = [orjson.loads(line) for line in out.stdout.splitlines()]
            time.sleep(0.2)
        assert {o["trace_id"] for o in found} == set(expected)
        for o in found:
            tr = expected[o["trace_id"]]
            assert o["service"] == "topo" and o["release"] == release and o["query"] == tr.query
            assert [d["id"] for d in o["retrieved"]] == [d.id for d in tr.retrieved]
            assert [d["id"] for d in o["reranked"]] == [d.id for d in tr.reranked]
            assert [d["id"] for d in o["context"]] == [d.id for d in tr.reranked[:4]]  # derived from top_k
            assert [d["rank"] for d in o["context"]] == [0, 1, 2, 3]
            assert o["reranked"][0]["score"] == pytest.approx(tr.reranked[0].score)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
