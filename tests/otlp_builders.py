"""Builders of real OTLP requests shaped like ragtrace SDK output, for tests and benchmarks.

They produce the same `ExportTraceServiceRequest` messages an OpenTelemetry exporter sends
(without running a service), so tests can control ordering, splitting and malformations exactly.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ragtrace import semconv as sc


def value(v: Any) -> AnyValue:
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    if isinstance(v, bytes):
        return AnyValue(bytes_value=v)
    if isinstance(v, (list, tuple)):
        av = AnyValue()
        av.array_value.values.extend(value(x) for x in v)
        return av
    return AnyValue(string_value=str(v))


def kvs(attrs: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=value(v)) for k, v in attrs.items()]


@dataclass
class Doc:
    id: str
    content: str = ""
    score: float | None = None


def doc_attrs(prefix: str, docs: Sequence[Doc], *, content: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, doc in enumerate(docs):
        out[sc.document_attribute(prefix, i, sc.DOCUMENT_ID)] = doc.id
        if doc.score is not None:
            out[sc.document_attribute(prefix, i, sc.DOCUMENT_SCORE)] = doc.score
        if doc.content:
            out[sc.document_attribute(prefix, i, sc.DOCUMENT_CONTENT_HASH)] = hashlib.sha256(
                doc.content.encode()).hexdigest()
            if content:
                out[sc.document_attribute(prefix, i, sc.DOCUMENT_CONTENT)] = doc.content
    return out


@dataclass
class SpanSpec:
    """One span to put in a request; ids are hex strings."""

    trace_id: str
    span_id: str
    name: str
    attrs: dict[str, Any]
    parent: str = ""
    start_ns: int = 0
    end_ns: int = 0
    #: what the sender's SDK says it dropped (OTLP ``dropped_attributes_count``)
    dropped: int = 0

    def message(self) -> Span:
        start = self.start_ns or time.time_ns()
        return Span(trace_id=bytes.fromhex(self.trace_id), span_id=bytes.fromhex(self.span_id),
                    parent_span_id=bytes.fromhex(self.parent) if self.parent else b"", name=self.name,
                    kind=Span.SPAN_KIND_INTERNAL, start_time_unix_nano=start,
                    end_time_unix_nano=self.end_ns or start + 5_000_000, attributes=kvs(self.attrs),
                    dropped_attributes_count=self.dropped)


@dataclass
class TraceSpec:
    """A retrieve → rerank → generate query as the ragtrace SDK records it (4 spans)."""

    trace_id: str = field(default_factory=lambda: os.urandom(16).hex())
    query: str = "what is the boiling point of water?"
    answer: str | None = "100 °C at sea level."
    query_id: str = ""
    retrieved: Sequence[Doc] = ()
    reranked: Sequence[Doc] = ()
    context: Sequence[Doc] | None = None  # None: the reranked top_k
    top_k: int = 5
    gold: Sequence[str] = ()
    openinference_only: bool = False  # no ragtrace.* attributes at all
    with_reranker: bool = True
    content: bool = True

    def spans(self) -> list[SpanSpec]:
        # span ids derive from the trace id, so building the same trace twice gives the same spans
        root_id, ret_id, rr_id, gen_id = (hashlib.sha256(f"{self.trace_id}:{n}".encode()).hexdigest()[:16]
                                          for n in range(4))
        root: dict[str, Any] = {sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: self.query}
        if self.answer is not None:
            root[sc.OUTPUT_VALUE] = self.answer
        if not self.openinference_only:
            root[sc.SDK_VERSION] = "0.1.0"
            if self.query_id:
                root[sc.QUERY_ID] = self.query_id
            if self.gold:
                root[sc.GOLD_DOCUMENT_IDS] = list(self.gold)
        ret = {sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: self.query,
               **doc_attrs(sc.RETRIEVAL_DOCUMENTS, self.retrieved, content=self.content)}
        out = [SpanSpec(self.trace_id, root_id, "pipeline", root),
               SpanSpec(self.trace_id, ret_id, "retrieve", ret, parent=root_id)]
        ctx = list(self.context) if self.context is not None else list(self.reranked)[: self.top_k]
        if self.with_reranker:
            rr = {sc.SPAN_KIND: "RERANKER", sc.RERANKER_QUERY: self.query, sc.RERANKER_TOP_K: self.top_k,
                  **doc_attrs(sc.RERANKER_INPUT_DOCUMENTS, self.retrieved, content=self.content),
                  **doc_attrs(sc.RERANKER_OUTPUT_DOCUMENTS, self.reranked, content=self.content)}
            out.append(SpanSpec(self.trace_id, rr_id, "rerank", rr, parent=root_id))
        gen: dict[str, Any] = {sc.SPAN_KIND: "LLM", sc.INPUT_VALUE: "prompt", sc.OUTPUT_VALUE: self.answer or ""}
        if not self.openinference_only:
            gen.update(doc_attrs(sc.CONTEXT_DOCUMENTS, ctx, content=self.content))
        else:
            # as OpenInference instrumentors send it: no context attributes, the passages in the prompt
            shown = ctx if self.with_reranker or self.context is not None else list(self.retrieved)
            gen[sc.INPUT_VALUE] = "Answer from:\n" + "\n\n".join(d.content for d in shown) + f"\n\nQ: {self.query}"
        out.append(SpanSpec(self.trace_id, gen_id, "generate", gen, parent=root_id))
        return out


def request(spans: Iterable[SpanSpec], *, service: str = "svc", release: str = "r1",
            environment: str = "test") -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(kvs({sc.SERVICE_NAME: service, sc.SERVICE_VERSION: release,
                                       sc.DEPLOYMENT_ENVIRONMENT: environment}))
    ss = rs.scope_spans.add()
    ss.scope.name = "ragtrace"
    ss.spans.extend(s.message() for s in spans)
    return req


def corpus(n: int, size: int = 1000, seed: int = 0) -> list[Doc]:
    """n distinct passages of about ``size`` characters (deterministic)."""
    words = ["water", "boils", "at", "sea", "level", "pressure", "the", "of", "and", "degrees", "celsius",
             "kelvin", "altitude", "lower", "higher", "temperature", "vapour", "point", "measured", "in"]
    out = []
    for i in range(n):
        h = hashlib.sha256(f"{seed}:{i}".encode()).digest()
        text, j = [f"passage {i}:"], 0
        while sum(len(t) + 1 for t in text) < size:
            text.append(words[(h[j % 32] + j) % len(words)])
            j += 1
        out.append(Doc(id=f"doc-{seed}-{i}", content=" ".join(text)[:size]))
    return out


def standard_trace(docs: Sequence[Doc], i: int, *, n_candidates: int = 20, top_k: int = 5,
                   **kw: Any) -> TraceSpec:
    """The benchmark's shape: 20 candidates, the same 20 reordered by the reranker, top 5 supplied."""
    n = len(docs)
    cands = [Doc(docs[(i * 7 + j * 13) % n].id, docs[(i * 7 + j * 13) % n].content, 1.0 - j / 100)
             for j in range(n_candidates)]
    reranked = [Doc(d.id, d.content, 0.9 - k / 50) for k, d in enumerate(reversed(cands))]
    return TraceSpec(query=f"query {i}", query_id=f"q{i}", retrieved=cands, reranked=reranked,
                     top_k=top_k, **kw)


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_child(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """SIGTERM a child server and wait for it; SIGKILL it when it has not left within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_until_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 90,
                     token: str | None = None) -> None:
    """Poll ``GET /readyz`` of a `ragtrace serve` child until it answers 200 (with ``token`` as the
    bearer credential, which /readyz needs when the server has tokens).

    Raises RuntimeError with the tail of the child's log when it exits or the timeout passes.
    """
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ragtrace serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            headers = {"authorization": f"Bearer {token}"} if token else {}
            if httpx.get(f"{url}/readyz", timeout=2, headers=headers).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)  # polling a separate process; there is no event to wait on
    raise RuntimeError(f"ragtrace serve did not become ready within {timeout:.0f}s:\n{log.read_text()[-3000:]}")
