"""OTLP requests → rows for the store's tables, by one walk: the compiled one.

A request body (protobuf; JSON is re-encoded first) is parsed by the compiled walk
(`ragtrace_collector.native_walk`, C++ protobuf, outside the GIL). What each span means — rejected,
a query root, an annotation, gold, a reference answer — is decided in Python (`spans.assemble_spans`,
with `annotations` and `interop`); every ``documents`` and ``passages`` row is made by the compiled
walk, from OpenInference document attributes (`documents`) and GenAI document lists alike. Document
lists are kept out of the raw ``spans`` row; passage text is stored once per content hash.

Never raises on content: bad spans are rejected with a reason for the sender (`Rows.messages`).
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragtrace_collector import native_walk
from ragtrace_collector.rows import Rows
from ragtrace_collector.spans import assemble_spans


def assemble_body(body: bytes, tenant: str, received_ms: int,
                  written: Mapping[tuple[str, str], int] | None = None) -> Rows:
    """All rows of one protobuf ExportTraceServiceRequest body. Raises `ValueError` if it is not a
    valid one (`otlp.parse_request` says why), `native_walk.NativeWalkMissing` without the walk.

    ``written`` maps (tenant, content hash) of passages the store already has to their length,
    positive when that copy was the full text (the writer's cache): a full passage sent again
    with its hash is then not even read.
    """
    request = native_walk.parse(body)
    rows = Rows()

    def verify(ordinal: int) -> bool:
        # texts proven for this tenant before (in this process) are compared, not hashed again
        return bool(request.verify(ordinal, tenant))

    plan = assemble_spans(rows, request.spans(), tenant, received_ms, verify)
    if plan:
        native_walk.add_documents(rows, request, plan, tenant, received_ms, written)
    return rows


def assemble(request: ExportTraceServiceRequest, tenant: str, received_ms: int,
             written: Mapping[tuple[str, str], int] | None = None) -> Rows:
    """`assemble_body` of a request built in Python (tests, benchmarks, imports)."""
    return assemble_body(request.SerializeToString(), tenant, received_ms, written)
