"""The compiled walk, ``ragtrace_collector._otlp_native`` (``collector/native/otlp_walk.cc``): required.

It parses a protobuf request body with Google's C++ protobuf runtime, outside the GIL, into classes
generated from the official OTLP schema, hands Python each span's non-document attributes, checks
claimed content hashes, and makes every ``documents`` and ``passages`` row (one Arrow table per
request for ``documents``). It is the collector's only walk: built by ``collector/native/build.py``,
which ``make`` runs. Without it, or with a module built from an older ``otlp_walk.cc``, anything that
ingests (`ragtrace serve`, `ragtrace_collector.app.create_app`, `ragtrace_collector.assemble`) stops
with `NativeWalkMissing`, which says how to build it; nothing falls back to another walk.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from ragtrace_collector.documents import (
    FIELDS,
    GEN_AI_STAGE,
    MAX_RANK,
    STAGE_OF_PREFIX,
    STAGES,
    TOP_K_STAGE,
    DocumentSpan,
)
from ragtrace_collector.rows import COLUMNS, Rows
from ragtrace_collector.values import value_text

#: The version of the module's interface this code calls (``kInterface`` in otlp_walk.cc).
INTERFACE = 2
#: Bound of the passages the native walk has proven to hash to their content hash (per tenant,
#: across requests; least recently used out): a passage sent again is compared byte for byte with
#: the proven text instead of hashed again (hashing every passage of every request again was a
#: tenth of the collector's instructions per trace). Held beyond --max-inflight-bytes, like the
#: engine's caches; each ingest worker process has its own.
VERIFIED_TEXT_BYTES = 32 * 1024 * 1024
BUILD_HINT = ("build it with `make` (or `.venv/bin/python collector/native/build.py`, which needs g++, protoc and "
              "libprotobuf-dev: the `native` packages of deploy/debian-packages.txt)")


class NativeWalkMissing(RuntimeError):
    """The compiled walk is not built, or was built from another version of ``otlp_walk.cc``."""


_TIMESTAMP = pa.timestamp("ms", tz="UTC")
_otlp_native: Any = None
_problem = ""
try:
    _module = importlib.import_module("ragtrace_collector._otlp_native")
except ImportError as exc:
    _problem = f"the collector's compiled walk (ragtrace_collector._otlp_native) is not built ({exc}): {BUILD_HINT}"
else:
    built = getattr(_module, "INTERFACE", 1)
    if built != INTERFACE:
        where = getattr(_module, "__file__", None) or _module.__name__
        _problem = (f"the collector's compiled walk {where} is stale (built from an otlp_walk.cc of interface "
                    f"{built}, this code needs {INTERFACE}): re{BUILD_HINT}")
    else:
        _otlp_native = _module
        _otlp_native.configure(
            tuple(STAGE_OF_PREFIX), STAGES, FIELDS, MAX_RANK, STAGES.index(TOP_K_STAGE), STAGES.index(GEN_AI_STAGE),
            value_text, lambda text: hashlib.sha256(text.encode("utf-8")).hexdigest())
        _otlp_native.verified_cache(VERIFIED_TEXT_BYTES)


def require() -> Any:
    """The compiled module; raises `NativeWalkMissing` (saying how to build it) when it is not
    built or is stale."""
    if _otlp_native is None:
        raise NativeWalkMissing(_problem)
    return _otlp_native


def parse(body: bytes) -> Any:
    """A parsed request (``_otlp_native.Request``). Raises `ValueError` if ``body`` is not a valid
    ExportTraceServiceRequest, `NativeWalkMissing` without the module."""
    return require().parse(body)


def add_documents(rows: Rows, request: Any, plan: list[DocumentSpan], tenant: str, received_ms: int,
                  written: Mapping[tuple[str, str], int] | None) -> None:
    """The ``documents`` rows (one Arrow table) and ``passages`` rows (lists: the writer's passage
    cache works on them) of the spans in ``plan``, added to ``rows``."""
    docs, passages, nbytes = request.documents(plan, tenant, written)
    rows.nbytes += nbytes
    n = len(docs["rank"][2])
    if n:
        columns = {name: _array(docs[name], n) for name in docs}
        columns["tenant"] = pa.repeat(tenant, n).cast(pa.string())
        columns["received_at"] = pa.repeat(received_ms, n).cast(pa.int64()).cast(_TIMESTAMP)
        rows.arrow["documents"] = [pa.table({name: columns[name] for name in COLUMNS["documents"]})]
    m = len(passages["truncated"][2])
    if m:  # few (known text is skipped)
        p = rows.cols["passages"]
        for name, column in passages.items():
            p[name] = _array(column, m).to_pylist()
        p["tenant"] = [tenant] * m
        p["first_seen"] = [received_ms] * m


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
