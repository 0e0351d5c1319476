"""`ragtrace serve`: the collector, the review UI and the audit API in one process.

Exit codes: 0 after a clean stop (SIGTERM/SIGINT), 1 when the server failed, 2 for a usage error, a
store that cannot be opened, or a collector whose compiled walk is not built (or stale).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ragtrace_cli.commands.common import STORE_HELP, open_or_report
from ragtrace_collector.settings import CollectorSettings, parse_names, parse_tokens
from ragtrace_store import Store, parse_duration

if TYPE_CHECKING:  # the review UI is optional
    from ragtrace_review.local_admin import LocalAdmin

log = logging.getLogger("ragtrace.collector")


def serve_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ragtrace serve", description=(
        "Run the OTLP/HTTP collector (POST /v1/traces) with /healthz, /readyz, /metrics, the trace and "
        "audit API and the review UI. Acknowledged spans are spooled to disk before the answer, so they "
        "survive a store outage and a kill -9 of this process."))
    p.add_argument("--store", help=STORE_HELP)
    p.add_argument("--host", help="listen address (default 127.0.0.1; $RAGTRACE_HOST)")
    p.add_argument("--port", type=int, help="listen port (default 4318, the OTLP/HTTP port; $RAGTRACE_PORT)")
    p.add_argument("--tokens", help="bearer tokens: TOKEN=TENANT,... ($RAGTRACE_TOKENS); none = no auth")
    p.add_argument("--allowed-hosts", help="Host header names served, comma-separated, or '*' "
                   "($RAGTRACE_ALLOWED_HOSTS; default: loopback names and --host). Set it before exposing the port")
    p.add_argument("--max-body-bytes", type=int, help="largest request body ($RAGTRACE_MAX_BODY_BYTES)")
    p.add_argument("--spool-dir", help="write-ahead spool directory (default: next to the store)")
    p.add_argument("--spool-max-bytes", type=int, help="refuse with 503 beyond this spool size")
    p.add_argument("--no-fsync", action="store_true",
                   help="acknowledge after write() instead of fsync (survives kill -9, not a power loss)")
    p.add_argument("--batch-max-spans", type=int, help="write a batch at this many spans (default 8000)")
    p.add_argument("--batch-interval", help="... or this long after its first span (default 0.5s)")
    p.add_argument("--queue-max-bytes", type=int, help="429 beyond this much unwritten data in memory")
    p.add_argument("--max-inflight-bytes", type=int,
                   help="bytes held for clients at once (bodies being received, what their decodes hold, counted "
                        "before they start, + rows queued for the store); requests beyond it get 429, one whose "
                        "decode could never fit 413 (default 512 MiB; $RAGTRACE_MAX_INFLIGHT_BYTES)")
    p.add_argument("--header-timeout", help="a connection must send a request's headers within this (default 10s)")
    p.add_argument("--body-timeout", help="any request must send its body within this, else 408 (default 30s)")
    p.add_argument("--keep-alive-timeout", help="idle keep-alive connections close after this (default 5s)")
    p.add_argument("--max-connections", type=int,
                   help="open connections at most; more are answered 503 and closed (default 4096, lowered to fit "
                        "the open-files limit; $RAGTRACE_MAX_CONNECTIONS)")
    p.add_argument("--shutdown-timeout", help="SIGTERM: flush for at most this long (default 10s)")
    p.add_argument("--audit-every", help="run an audit of each tenant every DURATION (e.g. 15m)")
    p.add_argument("--audit-sample", type=int, help="traces per background audit (default 200)")
    p.add_argument("--audit-metric-services", type=int, metavar="N",
                   help="the periodic audit's metrics keep the newest N services of a tenant (default 20; "
                        "$RAGTRACE_AUDIT_METRIC_SERVICES)")
    p.add_argument("--audit-metric-releases", type=int, metavar="N",
                   help="... and the newest N releases of each (default 5; $RAGTRACE_AUDIT_METRIC_RELEASES)")
    p.add_argument("--audit-labellers", help="labeller names POST /api/audit may ask for, comma-separated "
                   "($RAGTRACE_AUDIT_LABELLERS; default: offline)")
    p.add_argument("--export-labels", metavar="URL",
                   help="also send every label the audits write to this OTLP/HTTP receiver, as OpenTelemetry "
                        "evaluation events on their traces (e.g. http://otel-collector:4318; $RAGTRACE_EXPORT_LABELS)")
    p.add_argument("--cluster", help="ClickHouse cluster name: apply the clustered schema ($RAGTRACE_CLUSTER)")
    p.add_argument("--ingest-workers", type=int,
                   help="helper processes that decode and assemble requests (default 0: in this process; "
                        "$RAGTRACE_INGEST_WORKERS)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    a = p.parse_args(argv)
    try:
        settings = CollectorSettings.from_env(
            store=a.store, host=a.host, port=a.port, tokens=parse_tokens(a.tokens) if a.tokens else None,
            max_body_bytes=a.max_body_bytes, spool_dir=a.spool_dir, spool_max_bytes=a.spool_max_bytes,
            spool_fsync=False if a.no_fsync else None, batch_max_spans=a.batch_max_spans,
            batch_interval=parse_duration(a.batch_interval) if a.batch_interval else None,
            queue_max_bytes=a.queue_max_bytes, max_inflight_bytes=a.max_inflight_bytes,
            header_timeout=parse_duration(a.header_timeout) if a.header_timeout else None,
            body_timeout=parse_duration(a.body_timeout) if a.body_timeout else None,
            keep_alive_timeout=parse_duration(a.keep_alive_timeout) if a.keep_alive_timeout else None,
            max_connections=a.max_connections,
            shutdown_timeout=parse_duration(a.shutdown_timeout) if a.shutdown_timeout else None,
            audit_every=parse_duration(a.audit_every) if a.audit_every else None, audit_sample=a.audit_sample,
            audit_metric_services=a.audit_metric_services, audit_metric_releases=a.audit_metric_releases,
            cluster=a.cluster, ingest_workers=a.ingest_workers,
            allowed_hosts=parse_names(a.allowed_hosts) if a.allowed_hosts else None,
            audit_labellers=parse_names(a.audit_labellers) if a.audit_labellers else None,
            export_labels=a.export_labels)
    except ValueError as exc:
        p.error(str(exc))
    _check_audit_labellers(p, settings.audit_labellers)
    _check_export_labels(p, settings.export_labels)
    try:  # else uvicorn says "Name or service not known" only after the store was opened and migrated
        socket.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        p.error(f"--host / $RAGTRACE_HOST {settings.host!r}: not an address or a name this machine can resolve "
                f"({exc}); e.g. 127.0.0.1, 0.0.0.0 or ::")
    if settings.spool_path.exists() and not settings.spool_path.is_dir():
        # else the app's startup fails with a SpoolError traceback, after the store was opened
        p.error(f"--spool-dir {settings.spool_path} is a file; give a directory (or unset it: the default is "
                "next to the store)")
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from ragtrace_collector.native_walk import NativeWalkMissing, require

    try:  # before the store is opened: without its walk the collector cannot ingest (or replay its spool)
        require()
    except NativeWalkMissing as exc:
        print(f"ragtrace serve: {exc}", file=sys.stderr)
        return 2
    from ragtrace_collector.memory import keep_freed_memory

    # freed memory kept for reuse is memory held too: a quarter of the in-flight bound at most
    keep_freed_memory(settings.max_inflight_bytes // 4)
    store = open_or_report(settings.store, migrate=True, command="serve",
                  variant="cluster" if settings.cluster else "single", cluster=settings.cluster or None)
    if store is None:
        return 2
    from ragtrace_cli.server import build_app
    from ragtrace_collector.serving import StoppingServer, uvicorn_config

    local_admin = None
    try:
        local_admin = _local_admin(settings, store)
        app = build_app(settings, store, local_admin=local_admin)
        print(f"ragtrace collector on http://{settings.host}:{settings.port}  store: {store.location}  "
              f"spool: {settings.spool_path}", flush=True)
        if local_admin is not None:
            print(f"first reviewer: `ragtrace reviewers add NAME --server {local_admin.url}` as this user on this "
                  f"machine (it proves itself with {local_admin.path}, which only this user can read)", flush=True)
        # timeouts for slow and idle connections, the connection cap, client errors logged once per
        # kind per minute (ragtrace_collector.serving)
        config = uvicorn_config(app, settings, app.state.client_errors, log_level=a.log_level,
                                access_log=a.log_level == "debug")
        # SIGTERM: out within --shutdown-timeout whatever is in flight (ragtrace_collector.shutdown)
        server = StoppingServer(config, app.state.shutdown, _leave)
        # Requests allocate many short-lived containers, freed by reference counting; the cyclic
        # collector would otherwise run every 700 allocations and re-scan everything imported at
        # start. Freeze what exists now and collect less often (~3% of the collector's CPU).
        gc.freeze()
        gc.set_threshold(10_000, 20, 20)
        # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal to whatever
        # handler was installed before it. A handler that only records it makes a clean stop
        # (flushed, spool closed) exit 0, as process supervisors expect.
        stopped_by: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: stopped_by.append(signum))
        server.run()
        if stopped_by:
            log.info("stopped by signal %d", stopped_by[0])
        code = 0 if server.started else 1
    finally:
        if local_admin is not None:
            local_admin.close()
        store.close()
    busy = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if busy and stopped_by:
        # a decode of a request cut by the shutdown: Python would join its thread at exit, past the
        # --shutdown-timeout; its request was answered 503 and nothing of it was acknowledged
        log.info("leaving without waiting for %d worker thread(s) still running (%s)", len(busy),
                 ", ".join(sorted(set(busy)))[:200])
        _leave(code)
    return code


def _local_admin(settings: CollectorSettings, store: Store) -> LocalAdmin | None:
    """The credential that lets this user create the first reviewer while the server owns its embedded
    store (`ragtrace_review.local_admin`): for a server without tenant tokens, whose reviewer
    administration would otherwise need RAGTRACE_ADMIN_TOKEN. A ClickHouse server store needs none
    (`ragtrace reviewers add --store URL` works beside the server), nor do tenant tokens (each opens
    its tenant's administration)."""
    if settings.tokens or not store.embedded:
        return None
    try:
        from ragtrace_review.local_admin import LocalAdmin, loopback_url
    except ImportError:  # no review UI installed: no reviewers to administer
        return None
    try:
        return LocalAdmin(Path(store.location).resolve(), loopback_url(settings.host, settings.port))
    except OSError as exc:  # the store works, so serve it; reviewers then need RAGTRACE_ADMIN_TOKEN
        log.warning("no local admin credential (cannot write it in %s: %s); create reviewers with "
                    "RAGTRACE_ADMIN_TOKEN set on the server", store.location, exc)
        return None


def _leave(code: int = 0) -> None:
    """End the process now (exit status ``code``): the shutdown's deadline passed, or what is left is
    work it cut that worker threads still hold (a store read, an audit, a decode). Acknowledged data is
    in the spool; leaving is what a kill -9 would do, which the spool is built for. Any thread."""
    logging.shutdown()  # flush the log handlers: os._exit skips it
    sys.stdout.flush()
    os._exit(code)


def _check_audit_labellers(p: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    """At start, not at the first POST /api/audit that names one: a mistyped name would otherwise
    serve for days and fail only when someone asks for it."""
    try:
        from ragtrace_evaluator.audit.run import AuditError, check_labeller_name
    except ImportError:  # no evaluator installed: POST /api/audit says so itself
        return
    for name in names:
        try:
            check_labeller_name(name)
        except AuditError as exc:
            p.error(f"--audit-labellers / $RAGTRACE_AUDIT_LABELLERS: {exc}")


def _check_export_labels(p: argparse.ArgumentParser, url: str) -> None:
    """A receiver URL that could never be sent to stops the start, not every audit after it."""
    if not url:
        return
    try:
        from ragtrace_evaluator.label_export import LabelExportError, logs_endpoint
    except ImportError as exc:
        p.error(f"--export-labels / $RAGTRACE_EXPORT_LABELS needs the evaluator ({exc.name}): "
                "pip install 'ragtrace[evaluator]'")
    try:
        logs_endpoint(url)
    except LabelExportError as exc:
        p.error(str(exc).replace("--export-labels", "--export-labels / $RAGTRACE_EXPORT_LABELS", 1))
