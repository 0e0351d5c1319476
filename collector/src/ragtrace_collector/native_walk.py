"""The compiled walk (``_otlp_native``, built by ``collector/native/build.py``), when it is built.

It parses a protobuf request body with Google's C++ protobuf runtime, outside the GIL, into
classes generated from the official OTLP schema, and produces the same rows as the Python walk
(`assemble.assemble`): span meanings are decided by the same Python code (`assemble_spans`), and
the ``documents`` rows come back as one Arrow table per request instead of Python lists. About
2× the collector's throughput (benchmarks/collector_ingest.py). Without the module, or with
``RAGTRACE_NATIVE_WALK=0``, the collector uses the Python walk.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragtrace_collector import assemble as A
from ragtrace_collector.assemble import COLUMNS, Rows

#: Bound of the passages the native walk has proven to hash to their content hash (per tenant,
#: across requests; least recently used out): a passage sent again is compared byte for byte with
#: the proven text instead of hashed again (issue 35: hashing every passage of every request again
#: was a tenth of the collector's instructions per trace). Held beyond --max-inflight-bytes, like
#: the engine's caches; each ingest worker process has its own.
VERIFIED_TEXT_BYTES = 32 * 1024 * 1024

_otlp_native: Any
try:
    _otlp_native = importlib.import_module("ragtrace_collector._otlp_native")
except ImportError as exc:
    _otlp_native = None
    UNAVAILABLE = f"{exc}; build it with `.venv/bin/python collector/native/build.py` (make does)"
else:
    if not hasattr(_otlp_native.Request, "verify"):
        # a module built before content hashes were checked would accept any claimed hash
        _otlp_native = None
        UNAVAILABLE = ("the built module predates the content-hash check (no Request.verify); rebuild it with "
                       "`.venv/bin/python collector/native/build.py` (make does)")
    elif not hasattr(_otlp_native, "verified_cache"):
        # built before texts proven once were remembered: its verify() takes no tenant
        _otlp_native = None
        UNAVAILABLE = ("the built module predates the cache of verified passages (no verified_cache); rebuild it "
                       "with `.venv/bin/python collector/native/build.py` (make does)")
if _otlp_native is not None:
    UNAVAILABLE = ""
    _otlp_native.configure(
        tuple(A._PREFIX_STAGE), tuple(A._PREFIX_STAGE.values()),
        tuple(sorted(A._FIELD_CODE, key=A._FIELD_CODE.__getitem__)), A.MAX_RANK, A._RERANKED_INDEX,
        A.value_text, lambda text: hashlib.sha256(text.encode("utf-8")).hexdigest())
    # the C++ side hard-codes the field codes' order (id, score, content, metadata, hash)
    assert (A.F_ID, A.F_SCORE, A.F_CONTENT, A.F_META, A.F_HASH) == (0, 1, 2, 3, 4)
    _otlp_native.verified_cache(VERIFIED_TEXT_BYTES)

_TIMESTAMP = pa.timestamp("ms", tz="UTC")


def available() -> bool:
    return _otlp_native is not None


def enabled() -> bool:
    """Whether protobuf requests go through the compiled walk (built, and not switched off)."""
    return _otlp_native is not None and os.environ.get("RAGTRACE_NATIVE_WALK", "1") != "0"


def assemble_protobuf(body: bytes, tenant: str, received_ms: int,
                      written: Mapping[tuple[str, str], int] | None = None) -> Rows:
    """The rows of a protobuf request body, by the native walk when it is enabled, else by the Python
    walk (the same rows). Raises `ValueError` if the body is not a valid ExportTraceServiceRequest."""
    if enabled():
        return assemble_body(body, tenant, received_ms, written)
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise ValueError(f"not a valid OTLP ExportTraceServiceRequest: {exc}") from exc
    return A.assemble(request, tenant, received_ms, written)


def assemble_body(body: bytes, tenant: str, received_ms: int,
                  written: Mapping[tuple[str, str], int] | None = None) -> Rows:
    """`assemble.assemble` of a protobuf body. Raises `ValueError` if the body is not a valid
    ExportTraceServiceRequest (the caller asks the Python parser for the reason)."""
    if _otlp_native is None:
        raise RuntimeError(f"the native OTLP walk is not built: {UNAVAILABLE}")
    request = _otlp_native.parse(body)
    rows = Rows()
    plan: list[tuple[int, str, str, int, int | None, bool]] = []

    def on_documents(ordinal: Any, trace_id: str, span_id: str, other: dict[str, Any], start_ms: int) -> int:
        top_k, truncating = A.document_options(other)
        plan.append((ordinal, trace_id, span_id, start_ms, top_k, truncating))
        return 0  # counted below, with the rows

    def hashes_ok(ordinal: Any, other: dict[str, Any]) -> bool:
        # as assemble.hashes_match; texts proven for this tenant before are compared, not hashed
        return A.document_options(other)[1] or bool(request.verify(ordinal, tenant))

    A.assemble_spans(rows, request.spans(), tenant, received_ms, on_documents, hashes_ok)
    if plan:
        docs, passages, nbytes = request.documents(plan, tenant, written)
        rows.nbytes += nbytes
        n = len(docs["rank"][2])
        if n:
            columns = {name: _array(docs[name], n) for name in docs}
            columns["tenant"] = pa.repeat(tenant, n).cast(pa.string())
            columns["received_at"] = pa.repeat(received_ms, n).cast(pa.int64()).cast(_TIMESTAMP)
            rows.arrow["documents"] = [pa.table({name: columns[name] for name in COLUMNS["documents"]})]
        m = len(passages["truncated"][2])
        if m:  # few (known text is skipped): the writer's passage cache works on lists
            p = rows.cols["passages"]  # may already hold GenAI documents' passages (assemble_spans)
            for name, column in passages.items():
                p[name] = p[name] + _array(column, m).to_pylist()
            p["tenant"] = p["tenant"] + [tenant] * m
            p["first_seen"] = p["first_seen"] + [received_ms] * m
    return rows


def _array(column: tuple[str, bytes, bytes], n: int) -> pa.Array:
    """An Arrow array from the buffers `_otlp_native` returns: ("str", offsets, data) or
    (kind, values, valid) with one validity byte per row."""
    kind, first, second = column
    if kind == "str":
        return pa.StringArray.from_buffers(n, pa.py_buffer(first), pa.py_buffer(second))
    valid = np.frombuffer(second, dtype=np.bool_)
    mask = None if valid.all() else ~valid
    if kind == "f64":
        return pa.array(np.frombuffer(first, dtype=np.float64), mask=mask)
    if kind == "bool":
        return pa.array(np.frombuffer(first, dtype=np.bool_), mask=mask)
    values = pa.array(np.frombuffer(first, dtype=np.int64), mask=mask)
    return values.cast(_TIMESTAMP) if kind == "ts" else values
