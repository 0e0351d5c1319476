"""Decode + assemble, in the serving process or in helper processes.

Walking the attributes of a request into rows is the collector's largest CPU cost, and it holds
the GIL. With ``ingest_workers > 0`` it runs in that many helper processes (spawned, so nothing
of the server's threads or its embedded engine is inherited), while the serving process keeps
HTTP, the spool and the store writes. Rows come back pickled, which costs about a tenth of
building them.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import lz4.frame

from ragtrace_collector.assemble import assemble_body
from ragtrace_collector.otlp import PROTOBUF, OtlpError, parse_request, receive
from ragtrace_collector.rows import Rows
from ragtrace_collector.writer import Backpressure

log = logging.getLogger("ragtrace.collector.ingest")

#: LZ4 frame level of spooled requests. Negative is LZ4's "fast acceleration" (lz4frame.h): on
#: OTLP bodies -4 compresses ~15% faster than the default for ~3% larger records.
SPOOL_LZ4_LEVEL = -4


def decode_and_assemble(body: bytes, ctype: str | None, encoding: str | None, tenant: str, received_ms: int,
                        max_bytes: int, written: Mapping[tuple[str, str], int] | None = None) -> tuple[Rows, bytes]:
    """Rows of one request, and what the spool keeps: the request as protobuf (a JSON or gzip body
    is re-encoded), LZ4-compressed (b"" when no span was accepted). Raises `OtlpError` for
    refused bodies. ``written``: passages the store has (see `assemble_body`)."""
    raw, mt = receive(body, ctype, encoding, max_bytes)
    if mt != PROTOBUF:
        # JSON becomes protobuf: the spool keeps protobuf, and one walk reads both
        raw = parse_request(raw, mt).SerializeToString()
    try:
        rows = assemble_body(raw, tenant, received_ms, written)
    except ValueError:
        parse_request(raw, PROTOBUF)  # raises OtlpError with the Python parser's reason
        raise OtlpError(400, "malformed OTLP protobuf body (rejected by the C++ protobuf parser)") from None
    if not rows.spans:
        return rows, b""
    return rows, lz4.frame.compress(raw, compression_level=SPOOL_LZ4_LEVEL)


def _worker_init() -> None:
    # The serving process decides about shutdown; a terminal's Ctrl-C must not kill workers mid-task.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A killed server (kill -9, OOM) cannot stop its workers: each watches for being orphaned and
    # exits. (PR_SET_PDEATHSIG would fire when the *thread* that spawned it ends, which a thread
    # pool does routinely.)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="ragtrace-orphan-watch", daemon=True).start()


class IngestPool:
    """``workers == 0``: run in the calling thread. Otherwise a process pool, rebuilt if a worker dies."""

    def __init__(self, workers: int) -> None:
        if workers < 0:
            raise ValueError(f"ingest_workers must be >= 0, got {workers}")
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.workers:
            self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_init)

    def run(self, body: bytes, ctype: str | None, encoding: str | None, tenant: str, received_ms: int,
            max_bytes: int, written: Mapping[tuple[str, str], int] | None = None) -> tuple[Rows, bytes]:
        """``written`` (the writer's passage cache) is used in this process only: workers have none."""
        pool = self._pool
        if pool is None:
            return decode_and_assemble(body, ctype, encoding, tenant, received_ms, max_bytes, written)
        try:
            return pool.submit(decode_and_assemble, body, ctype, encoding, tenant, received_ms,
                               max_bytes).result()
        except BrokenProcessPool as exc:
            with self._lock:
                if self._pool is pool:
                    log.error("an ingest worker died; starting a new pool")
                    self._pool = self._new_pool()
            raise Backpressure(503, 1, "an ingest worker died while decoding this request; retry it") from exc

    def stop(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
