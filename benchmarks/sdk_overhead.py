"""What tracing one RAG query costs the caller, and in CPU overall.

    .venv/bin/python benchmarks/sdk_overhead.py [--queries 2000] [--rounds 3]

One query = 4 spans: a pipeline calling a retriever (20 candidates of ~1 KB text), a reranker
(20 in, 20 out) and a generator (5 supplied). Traced three ways, in the same process and run:

  (a) not at all;
  (b) hand-written OpenTelemetry spans setting the same OpenInference attributes (span limits
      raised so no document is dropped), BatchSpanProcessor + the OTLP/HTTP protobuf exporter;
  (c) ragtrace decorators (content "full": ragtrace also sends a sha256 per passage, which (b)
      does not).

Both (b) and (c) export to the same discard HTTP sink, a separate process on loopback (so its
CPU is not counted). Reported: caller time p50/p99 in µs, and all-in CPU per query (process CPU
time including the export thread, measured until every span is exported) — and the ratios c/b.
Modes run in interleaved rounds; each figure is the median over rounds.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

N_CANDIDATES = 20
N_CONTEXT = 5
TEXT_BYTES = 1000


# --- the discard sink (its own process) -----------------------------------------------------


class _Discard(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(port_queue: Any) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Discard)
    port_queue.put(server.server_address[1])
    server.serve_forever()


# --- the workload -----------------------------------------------------------------------------


def make_corpus() -> list[dict[str, Any]]:
    words = ["retrieval", "ranking", "evidence", "answer", "passage", "context", "model", "query", "gold", "release"]
    docs = []
    for i in range(N_CANDIDATES):
        text = " ".join(words[(i + j) % len(words)] for j in range(200))[:TEXT_BYTES]
        docs.append({"id": f"doc-{i:04d}", "text": text, "score": 1.0 - i / 100})
    return docs


CORPUS = make_corpus()
ANSWER = "The evidence in the supplied passages says the release improved recall at five."


def plain_pipeline() -> Callable[[str], str]:
    def retrieve(query: str) -> list[dict[str, Any]]:
        return CORPUS

    def rerank(query: str, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return documents[::-1]

    def generate(query: str, context: list[dict[str, Any]]) -> str:
        return ANSWER

    def answer(query: str) -> str:
        candidates = retrieve(query)
        ranked = rerank(query, candidates)
        return generate(query, ranked[:N_CONTEXT])

    return answer


def otel_pipeline(endpoint: str) -> tuple[Callable[[str], str], Callable[[], None], Callable[[], None]]:
    """(b): what a careful engineer writes by hand with the OpenTelemetry SDK."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from ragtrace import semconv as sc

    provider = TracerProvider(
        resource=Resource.create({"service.name": "bench", "service.version": "b"}),
        span_limits=SpanLimits(max_span_attributes=10_000, max_attribute_length=None),
    )
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=endpoint + "/v1/traces"), max_queue_size=65536, max_export_batch_size=256,
        schedule_delay_millis=1000))
    tracer = provider.get_tracer("bench")

    def docs_attrs(prefix: str, docs: list[dict[str, Any]], attrs: dict[str, Any]) -> None:
        for i, doc in enumerate(docs):
            attrs[f"{prefix}.{i}.document.id"] = doc["id"]
            attrs[f"{prefix}.{i}.document.score"] = doc["score"]
            attrs[f"{prefix}.{i}.document.content"] = doc["text"]

    def retrieve(query: str) -> list[dict[str, Any]]:
        with tracer.start_as_current_span("retrieve") as span:
            result = CORPUS
            attrs: dict[str, Any] = {sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: query}
            docs_attrs(sc.RETRIEVAL_DOCUMENTS, result, attrs)
            span.set_attributes(attrs)
            return result

    def rerank(query: str, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with tracer.start_as_current_span("rerank") as span:
            result = documents[::-1]
            attrs: dict[str, Any] = {sc.SPAN_KIND: "RERANKER", sc.RERANKER_QUERY: query,
                                     sc.RERANKER_TOP_K: len(result)}
            docs_attrs(sc.RERANKER_INPUT_DOCUMENTS, documents, attrs)
            docs_attrs(sc.RERANKER_OUTPUT_DOCUMENTS, result, attrs)
            span.set_attributes(attrs)
            return result

    def generate(query: str, context: list[dict[str, Any]]) -> str:
        with tracer.start_as_current_span("generate") as span:
            result = ANSWER
            attrs: dict[str, Any] = {sc.SPAN_KIND: "LLM", sc.INPUT_VALUE: query, sc.OUTPUT_VALUE: result}
            docs_attrs(sc.CONTEXT_DOCUMENTS, context, attrs)
            span.set_attributes(attrs)
            return result

    def answer(query: str) -> str:
        with tracer.start_as_current_span("answer") as span:
            candidates = retrieve(query)
            ranked = rerank(query, candidates)
            result = generate(query, ranked[:N_CONTEXT])
            span.set_attributes({sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: query, sc.OUTPUT_VALUE: result})
            return result

    return answer, lambda: provider.force_flush(120_000) and None, provider.shutdown


def ragtrace_pipeline(endpoint: str) -> tuple[Callable[[str], str], Callable[[], None], Callable[[], None]]:
    """(c): the same pipeline with ragtrace decorators."""
    import ragtrace

    ragtrace.configure(endpoint=endpoint, service="bench", release="c", max_queue_size=65536,
                       max_export_batch=256, schedule_delay_ms=1000, shutdown_timeout_ms=120_000)

    @ragtrace.retriever
    def retrieve(query: str) -> list[dict[str, Any]]:
        return CORPUS

    @ragtrace.reranker
    def rerank(query: str, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return documents[::-1]

    @ragtrace.generator
    def generate(query: str, context: list[dict[str, Any]]) -> str:
        return ANSWER

    @ragtrace.pipeline
    def answer(query: str) -> str:
        candidates = retrieve(query)
        ranked = rerank(query, candidates)
        return generate(query, ranked[:N_CONTEXT])

    def flush() -> None:
        ragtrace.force_flush(120.0)
        stats = ragtrace.stats()
        if stats.dropped_queue_full or stats.dropped_export_failed:
            print(f"warning: ragtrace dropped spans: {stats}", file=sys.stderr)

    return answer, flush, lambda: ragtrace.shutdown() and None


# --- measurement ------------------------------------------------------------------------------


def measure(fn: Callable[[str], str], flush: Callable[[], None], n: int) -> tuple[float, float, float]:
    """(p50 µs, p99 µs, CPU µs per query incl. export)."""
    for i in range(50):  # warm-up
        fn(f"warm {i}")
    flush()
    timings = []
    cpu0 = time.process_time()
    for i in range(n):
        t0 = time.perf_counter_ns()
        fn(f"question {i}")
        timings.append(time.perf_counter_ns() - t0)
    flush()
    cpu = (time.process_time() - cpu0) / n * 1e6
    q = statistics.quantiles(timings, n=100)
    return q[49] / 1000, q[98] / 1000, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sdk_overhead", description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=2000, help="queries per mode per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    ctx = multiprocessing.get_context("spawn")
    port_queue = ctx.Queue()
    sink = ctx.Process(target=_serve, args=(port_queue,), daemon=True)
    sink.start()
    endpoint = f"http://127.0.0.1:{port_queue.get(timeout=30)}"
    try:
        modes: dict[str, tuple[Callable[[str], str], Callable[[], None], Callable[[], None]]] = {
            "a": (plain_pipeline(), lambda: None, lambda: None),
            "b": otel_pipeline(endpoint),
            "c": ragtrace_pipeline(endpoint),
        }
        results: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
        for _ in range(args.rounds):
            for mode, (fn, flush, _close) in modes.items():
                results[mode].append(measure(fn, flush, args.queries))
        for _fn, _flush, close in modes.values():
            close()
    finally:
        sink.terminate()
        sink.join(5)

    def med(mode: str, i: int) -> float:
        return statistics.median(r[i] for r in results[mode])

    labels = {"a": "(a) untraced", "b": "(b) hand-written OTel", "c": "(c) ragtrace"}
    print(f"{args.queries} queries x {args.rounds} rounds; 4 spans/query, {N_CANDIDATES} candidates "
          f"of {TEXT_BYTES} B, {N_CANDIDATES} reranked, {N_CONTEXT} supplied; medians over rounds")
    print(f"{'mode':<24}{'caller p50 µs':>15}{'caller p99 µs':>15}{'CPU/query µs':>15}")
    for mode, label in labels.items():
        print(f"{label:<24}{med(mode, 0):>15.1f}{med(mode, 1):>15.1f}{med(mode, 2):>15.1f}")
    print(f"{'ratio c/b':<24}{med('c', 0) / med('b', 0):>15.3f}{med('c', 1) / med('b', 1):>15.3f}"
          f"{med('c', 2) / med('b', 2):>15.3f}")
    print("targets: caller time c/b <= 0.5, all-in CPU c/b <= 1.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
