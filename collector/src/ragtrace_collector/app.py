"""The collector's FastAPI application: OTLP/HTTP receiver, health, metrics and the trace API.

`create_app(settings, store)` builds it; nothing is started at import time. What the serving process
adds on top (the review UI, the audit API, the background audit) is passed in by the composition
root (`ragtrace_cli.server`) as ``extensions`` and ``background`` tasks, so ingest never imports the
evaluator or the review package. The lifespan opens the spool, starts the writer (which replays
anything a previous run left in the spool) and the background tasks, and on shutdown (SIGTERM
under uvicorn) stops accepting, flushes for at most ``settings.shutdown_timeout`` seconds and
closes the spool.

Tenancy: with ``settings.tokens`` every route needs ``Authorization: Bearer TOKEN`` and works on
that token's tenant only; without tokens everything is tenant "default".
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import itertools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated

import orjson
from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from ragtrace_collector import native_walk
from ragtrace_collector.admission import Admission, Ticket, decode_slots
from ragtrace_collector.body_deadline import BodyDeadline
from ragtrace_collector.bounded_decode import decode_within_bound
from ragtrace_collector.client_errors import ClientErrors
from ragtrace_collector.guard import RequestGuard
from ragtrace_collector.ingest import IngestPool
from ragtrace_collector.memory import GiveBack
from ragtrace_collector.metrics import Metrics
from ragtrace_collector.otlp import JSON, OtlpError, encode_response, encode_status, media_type
from ragtrace_collector.rows import Rows
from ragtrace_collector.settings import CollectorSettings
from ragtrace_collector.shutdown import Shutdown, ShutdownGate
from ragtrace_collector.spool import Spool, SpoolError
from ragtrace_collector.writer import Backpressure, Writer, insert_slice_bytes, insert_working_bytes
from ragtrace_store import DEFAULT_TENANT, CursorError, Store, TraceFilter, TraceListing, count_traces, encode_cursor
from ragtrace_store.status import ping

log = logging.getLogger("ragtrace.collector")

#: the most traces one page of GET /api/traces holds (a larger limit streams, without a cursor)
PAGE_MAX = 1000
#: the most bytes one answer of GET /api/traces (a page) or /api/traces/{id} holds: a page with passage
#: text (content=true) ends early, at the last trace that fits, and its cursor goes on from there
RESPONSE_MAX_BYTES = 32 * 1024 * 1024


class AuthError(Exception):
    pass


def tenant_of(request: Request) -> str:
    """The tenant of a request: its bearer token's, or "default" when no tokens are configured."""
    settings: CollectorSettings = request.app.state.settings
    if not settings.tokens:
        return DEFAULT_TENANT
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("missing bearer token: send 'Authorization: Bearer TOKEN'")
    found = None
    for known, tenant in settings.tokens.items():
        # compare every token in constant time so timing does not reveal which one nearly matched
        if hmac.compare_digest(known.encode(), token.strip().encode()):
            found = tenant
    if found is None:
        raise AuthError("unknown bearer token")
    return found


TenantDep = Annotated[str, Depends(tenant_of)]

#: Adds routes to the app: ``extension(app, get_store, settings)`` (its return value is ignored).
Extension = Callable[[FastAPI, Callable[[], Store], CollectorSettings], object]
#: Runs in its own daemon thread for the app's lifetime and returns once the event is set.
BackgroundTask = Callable[[Store, CollectorSettings, Metrics, threading.Event], None]


def create_app(settings: CollectorSettings, store: Store, *, metrics: Metrics | None = None,
               extensions: Sequence[Extension] = (), background: Sequence[BackgroundTask] = ()) -> FastAPI:
    """The collector app for ``store`` (which the caller opened and closes), with ``extensions``
    mounted after the collector's own routes and each ``background`` task run while it serves.
    Raises `native_walk.NativeWalkMissing` (which says how to build it) without the compiled walk."""
    native_walk.require()
    metrics = metrics or Metrics()
    spool = Spool(settings.spool_path, max_bytes=settings.spool_max_bytes, fsync=settings.spool_fsync)
    # after a large request or batch, freed memory goes back to the system (memory.py)
    give_back = GiveBack(store.release_memory, metrics=metrics)
    writer = Writer(store, spool, metrics, batch_max_spans=settings.batch_max_spans,
                    batch_interval=settings.batch_interval, queue_max_bytes=settings.queue_max_bytes,
                    give_back=give_back, insert_slice_bytes=insert_slice_bytes(settings.max_inflight_bytes))
    pool = IngestPool(settings.ingest_workers)
    stop_background = threading.Event()
    errors = ClientErrors(metrics)
    shutdown = Shutdown(settings.shutdown_timeout, errors)
    # Bodies being received or decoded plus rows queued for the store, bounded together (admission.py).
    # ... and the store inserts' working memory, whose bound is kept out of what requests may take
    reserve = insert_working_bytes(writer.insert_slice_bytes, writer.insert_slice_bytes)
    admission = Admission(settings.max_inflight_bytes, lambda: writer.rows_bytes,
                          working=lambda: writer.working_bytes, insert_reserve=reserve)
    metrics.gauge("ragtrace_inflight_bytes", "request bodies being received or decoded, bytes",
                  lambda: admission.bodies)
    metrics.gauge("ragtrace_held_bytes", "bodies plus queued rows plus the insert in progress, the total "
                  "--max-inflight-bytes bounds, bytes",
                  admission.held)
    # At most this many requests decode at once (their working set is a few times the body); the
    # others wait in the executor's queue, holding only their body, not a thread. Always the same
    # few threads, so the allocator keeps freed decode memory in as few arenas.
    decoding = ThreadPoolExecutor(decode_slots(settings.ingest_workers), thread_name_prefix="ragtrace-decode")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            writer.start()
        except SpoolError as exc:
            log.error("cannot start: %s", exc)
            raise
        pool.start()
        give_back.start()
        threads = [threading.Thread(target=task, args=(store, settings, metrics, stop_background),
                                    name=f"ragtrace-{getattr(task, '__name__', 'task')}", daemon=True)
                   for task in background]
        for thread in threads:
            thread.start()
        shutdown.attach(asyncio.get_running_loop())
        try:
            yield
        finally:
            # within --shutdown-timeout of SIGTERM (shutdown.py): a decode still running is not
            # waited for (its request was cut), the writer flushes for what is left of the timeout
            stop_background.set()
            give_back.stop()
            decoding.shutdown(wait=False, cancel_futures=True)
            await _within(pool.stop, shutdown.flush_budget())
            clean = await run_in_threadpool(writer.stop, shutdown.flush_budget())
            if not clean:
                log.warning("shutdown timeout: unwritten requests stay in the spool %s and are replayed "
                            "on the next start", spool.dir)
            for thread in threads:
                thread.join(min(1.0, shutdown.flush_budget()))

    app = FastAPI(title="ragtrace collector", lifespan=lifespan, docs_url=None, redoc_url=None)
    # For every route, innermost first: the body deadline and disconnects mid-body (body_deadline.py);
    # requests in flight cut at shutdown (shutdown.py); the Host, origin and content-type checks and
    # the security headers (guard.py).
    app.add_middleware(BodyDeadline, timeout=settings.body_timeout, errors=errors, metrics=metrics)
    app.add_middleware(ShutdownGate, shutdown=shutdown)
    app.add_middleware(RequestGuard, settings=settings)
    app.state.settings = settings
    app.state.store = store
    app.state.writer = writer
    app.state.metrics = metrics
    app.state.client_errors = errors
    app.state.admission = admission
    app.state.shutdown = shutdown

    def get_store() -> Store:
        return store

    @app.exception_handler(AuthError)
    async def _auth_error(request: Request, exc: AuthError) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=401, headers={"WWW-Authenticate": "Bearer"})

    # --- OTLP/HTTP ---------------------------------------------------------------------------
    @app.post("/v1/traces")
    async def export_traces(request: Request) -> Response:
        ctype = request.headers.get("content-type")
        try:
            mt = media_type(ctype)
        except OtlpError as exc:
            return _refuse(metrics, JSON, exc.status, exc.reason)
        try:
            tenant = tenant_of(request)
        except AuthError as exc:
            return _refuse(metrics, mt, 401, str(exc), {"WWW-Authenticate": "Bearer"})
        declared = request.headers.get("content-length")
        size_hint = int(declared) if declared and declared.isdigit() else 0
        if size_hint > settings.max_body_bytes:
            return _refuse(metrics, mt, 413, f"request body of {declared} bytes exceeds "
                                             f"{settings.max_body_bytes} (RAGTRACE_MAX_BODY_BYTES)")
        # Admission before a byte of the body is read: memory is promised by what is held now,
        # not discovered after the body is in (the rest of a refused body is discarded unread).
        ticket = admission.open()
        try:
            if not admission.fits(size_hint):
                return _over_bound(metrics, errors, mt, admission, size_hint)
            chunks: list[bytes] = []
            size = 0
            # --body-timeout and disconnects mid-body: BodyDeadline, as for every route
            async for chunk in request.stream():
                if not ticket.take(len(chunk)):
                    return _over_bound(metrics, errors, mt, admission, size_hint or size + len(chunk))
                size += len(chunk)
                if size > settings.max_body_bytes:
                    return _refuse(metrics, mt, 413, f"request body exceeds {settings.max_body_bytes} bytes "
                                                     "(RAGTRACE_MAX_BODY_BYTES)")
                chunks.append(chunk)
            body = b"".join(chunks)
            del chunks
            received_ms = time.time_ns() // 1_000_000
            try:
                # what the decode will hold is counted and reserved before it starts (bounded_decode.py)
                rows, spooled, reserved = await asyncio.get_running_loop().run_in_executor(
                    decoding, functools.partial(decode_within_bound, ticket, pool, body, ctype,
                                                request.headers.get("content-encoding"), tenant, received_ms,
                                                settings.max_body_bytes, writer.written_passages))
                del body  # decoded: what is left of it is the spool's compressed copy
                rejected, message = await run_in_threadpool(_ingest, writer, ticket, reserved, rows, spooled, tenant,
                                                            received_ms, metrics)
            except OtlpError as exc:
                return _refuse(metrics, mt, exc.status, exc.reason)
            except Backpressure as exc:
                return _refuse(metrics, mt, exc.status, exc.reason, {"Retry-After": str(exc.retry_after)},
                               errors=errors)
        finally:
            released = ticket.held
            ticket.close()  # gives back what the request still holds
            give_back.after(released)  # a large body and its decode: their memory goes back to the system
        metrics.inc("ragtrace_requests_total", code="200")
        return Response(encode_response(mt, rejected, message), status_code=200, media_type=mt)

    # --- health -------------------------------------------------------------------------------
    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> Response:
        try:
            ping(store)
            pending = store.pending_migrations()
        except Exception as exc:
            # The exception names the store's path or URL (with its password): log it, do not answer it.
            log.warning("readyz: store unreachable: %s", str(exc)[:500])
            return JSONResponse({"ready": False, "reason": "store unreachable (the collector's log has the "
                                                          "error)"}, status_code=503)
        if pending:
            names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
            return JSONResponse({"ready": False, "reason": f"migrations not applied: {names}; run "
                                                           "`ragtrace store migrate`"}, status_code=503)
        # no store location here: a path or URL tells a caller where the data lives (the start-up log has it)
        return JSONResponse({"ready": True, "store_up": writer.store_up})

    @app.get("/metrics")
    def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    # --- reading (tenant-scoped) --------------------------------------------------------------
    @app.get("/api/traces")
    def list_traces(tenant: TenantDep, release: str | None = None, service: str | None = None,
                    since: datetime | None = None, until: datetime | None = None,
                    limit: Annotated[int, Query(ge=1, le=100_000)] = 100, content: bool = False,
                    include_all: Annotated[bool, Query(alias="all")] = False, cursor: str | None = None,
                    total: bool = False) -> Response:
        """NDJSON, newest first. A page of at most `PAGE_MAX` traces says where the next one starts
        (``Ragtrace-Next-Cursor``; absent on the last page) and, with ``total=true``, how many
        there are (``Ragtrace-Total``, ``Ragtrace-Total-Exact``). A larger ``limit`` is streamed in
        one response without a cursor. Memory stays bounded either way."""
        # all=true: also the roots that are not queries (`ragtrace_store.query_roots`)
        flt = TraceFilter(tenant=tenant, release=release, service=service, since=since, until=until)
        if content and limit > PAGE_MAX:
            # passage text makes a trace tens of KB: 100,000 of them streamed made a 377 MB answer
            return JSONResponse({"error": f"content=true is answered in pages: ask limit <= {PAGE_MAX} and follow "
                                          "the Ragtrace-Next-Cursor header to the next page"}, status_code=400)
        try:
            records = store.read_traces(tenant=tenant, release=release, service=service, since=since, until=until,
                                        limit=limit + 1 if limit <= PAGE_MAX else limit, with_content=content,
                                        include_all=include_all, cursor=cursor)
            first = next(records, None)  # a bad cursor raises here, before anything is sent
        except CursorError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        rows = itertools.chain([first] if first is not None else [], records)
        if limit > PAGE_MAX:
            return StreamingResponse((orjson.dumps(r.as_json(with_content=content)) + b"\n" for r in rows),
                                     media_type="application/x-ndjson")
        # a page ends at `limit` traces or at the last one that fits in RESPONSE_MAX_BYTES, whichever
        # comes first; the cursor goes on after its last trace either way
        lines: list[bytes] = []
        size, last, more = 0, None, False
        for record in itertools.islice(rows, limit + 1):
            line = orjson.dumps(record.as_json(with_content=content)) + b"\n"
            if len(lines) == limit or (lines and size + len(line) > RESPONSE_MAX_BYTES):
                more = True
                break
            if size + len(line) > RESPONSE_MAX_BYTES:
                return _too_large(f"trace {record.trace_id}", len(line), "list without content=true, and read "
                                  f"this trace alone (GET /api/traces/{record.trace_id}, content=false if need be)")
            lines.append(line)
            size += len(line)
            last = record
        headers = {}
        if more and last is not None:
            # the cursor of the listing read_traces read (`ragtrace_store.listing`): the CLI's and /traces' format
            headers["Ragtrace-Next-Cursor"] = encode_cursor(TraceListing(flt, include_all=include_all),
                                                            last.start_time, last.trace_id)
        if total:
            got = count_traces(store, flt, include_all=include_all)
            headers["Ragtrace-Total"], headers["Ragtrace-Total-Exact"] = str(got.queries), str(got.exact).lower()
        return Response(b"".join(lines), media_type="application/x-ndjson", headers=headers)

    @app.get("/api/traces/{trace_id}")
    def get_trace(trace_id: str, tenant: TenantDep, content: bool = True) -> Response:
        found = list(store.read_traces(tenant=tenant, trace_ids=[trace_id.lower()], with_content=content,
                                       include_all=True))
        if not found:
            return JSONResponse({"error": f"no trace {trace_id} (or its root span has not arrived yet)"},
                                status_code=404)
        body = orjson.dumps(found[0].as_json(with_content=content))
        if len(body) > RESPONSE_MAX_BYTES:
            return _too_large(f"trace {trace_id}", len(body), "ask without its passages' text (content=false)")
        return Response(body, media_type=JSON)

    for extension in extensions:
        extension(app, get_store, settings)
    return app


async def _within(stop: Callable[[], None], seconds: float) -> None:
    """Run ``stop`` in a daemon thread and wait for it at most ``seconds``: a process pool that is
    still decoding must not hold the shutdown past its deadline (an executor's thread would be
    joined at exit)."""
    done = threading.Event()

    def run() -> None:
        try:
            stop()
        finally:
            done.set()

    threading.Thread(target=run, name="ragtrace-stop", daemon=True).start()
    deadline = time.monotonic() + seconds
    while not done.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)  # a thread's end has no awaitable: poll it


def _ingest(writer: Writer, ticket: Ticket, reserved: int, rows: Rows, spooled: bytes, tenant: str,
            received_ms: int, metrics: Metrics) -> tuple[int, str]:
    """Spool and queue decoded rows. Runs in a worker thread; returns (rejected spans, message).
    The rows are part of what the request reserved for its decode (``reserved``; more is charged if
    they came out larger), and their charge passes to the writer's queue as they are queued: what the
    collector holds stays under --max-inflight-bytes while a request changes from body to rows."""
    if rows.spans:
        admission = ticket.admission
        if rows.nbytes > reserved and not ticket.take(rows.nbytes - reserved):
            raise Backpressure(429, 1, f"the collector holds {admission.held()} bytes; the {rows.nbytes} bytes of "
                                       f"rows decoded from this request would exceed its limit of {admission.limit} "
                                       "(RAGTRACE_MAX_INFLIGHT_BYTES): retry after the Retry-After seconds")
        writer.submit(tenant, received_ms, spooled, rows,
                      enqueue_via=lambda enqueue: ticket.to_queue(rows.nbytes, enqueue))
    metrics.inc("ragtrace_spans_received_total", rows.spans)
    if rows.rejected:
        metrics.inc("ragtrace_spans_rejected_total", rows.rejected)
    if rows.dropped_attribute_spans:
        metrics.inc("ragtrace_spans_dropped_attributes_total", rows.dropped_attribute_spans)
    return rows.rejected, rows.error_message()


def _too_large(what: str, nbytes: int, instead: str) -> Response:
    return JSONResponse({"error": f"{what} with its passages' text is {nbytes:,} bytes, more than an answer may hold "
                                  f"({RESPONSE_MAX_BYTES:,} bytes): {instead}"}, status_code=413)


def _refuse(metrics: Metrics, mt: str, status: int, reason: str,
            headers: dict[str, str] | None = None, *, errors: ClientErrors | None = None) -> Response:
    metrics.inc("ragtrace_requests_total", code=str(status))
    if status >= 500 or status == 429:
        if errors is not None:  # under load these come by the thousand: one line per interval
            errors.note("refused", f"{status}: {reason}")
        else:
            log.info("refused an export with %d: %s", status, reason)
    return Response(encode_status(mt, status, reason), status_code=status, media_type=mt, headers=headers)


def _over_bound(metrics: Metrics, errors: ClientErrors, mt: str, admission: Admission, nbytes: int) -> Response:
    reason = (f"the collector holds {admission.held()} bytes for other requests; {nbytes} more would exceed "
              f"its limit of {admission.limit} (RAGTRACE_MAX_INFLIGHT_BYTES): retry after the Retry-After seconds")
    return _refuse(metrics, mt, 429, reason, {"Retry-After": "1"}, errors=errors)
