"""`ragtrace serve`, `ragtrace traces` and `ragtrace store`.

Each ``*_main(argv)`` returns an exit code: 0 success, 1 failure, 2 usage error or a store that
cannot be opened (with a message that says what to do).
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
import textwrap
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson
from ragtrace_collector.records import TraceRecord
from ragtrace_collector.settings import DEFAULT_TENANT, CollectorSettings, parse_duration, parse_tokens
from ragtrace_collector.store import (
    DEFAULT_TENANT as STORE_DEFAULT_TENANT,
)
from ragtrace_collector.store import (
    Store,
    StoreError,
    StoreLockedError,
    default_store_path,
    load_migrations,
    open_store,
    parse_time_bound,
)

assert DEFAULT_TENANT == STORE_DEFAULT_TENANT
log = logging.getLogger("ragtrace.collector")

_STORE_HELP = ("a directory (embedded chDB) or http(s)://user:password@host:8123/database; "
               f"default $RAGTRACE_STORE or {default_store_path()}")


def _open(store: str | None, *, migrate: bool, command: str, **kw: Any) -> Store | None:
    try:
        return open_store(store, migrate=migrate, **kw)
    except StoreLockedError as exc:
        print(f"ragtrace {command}: {exc}", file=sys.stderr)
        if command == "traces":
            print("  To read while the collector runs: ragtrace traces --server http://HOST:4318 "
                  "[--token TOKEN] (reads through the serving process).", file=sys.stderr)
        return None
    except StoreError as exc:
        print(f"ragtrace {command}: {exc}", file=sys.stderr)
        return None


# --- serve -------------------------------------------------------------------------------------
def serve_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ragtrace serve", description=(
        "Run the OTLP/HTTP collector (POST /v1/traces) with /healthz, /readyz, /metrics, the trace and "
        "audit API and the review UI. Acknowledged spans are spooled to disk before the answer, so they "
        "survive a store outage and a kill -9 of this process."))
    p.add_argument("--store", help=_STORE_HELP)
    p.add_argument("--host", help="listen address (default 127.0.0.1; $RAGTRACE_HOST)")
    p.add_argument("--port", type=int, help="listen port (default 4318, the OTLP/HTTP port; $RAGTRACE_PORT)")
    p.add_argument("--tokens", help="bearer tokens: TOKEN=TENANT,... ($RAGTRACE_TOKENS); none = no auth")
    p.add_argument("--max-body-bytes", type=int, help="largest request body ($RAGTRACE_MAX_BODY_BYTES)")
    p.add_argument("--spool-dir", help="write-ahead spool directory (default: next to the store)")
    p.add_argument("--spool-max-bytes", type=int, help="refuse with 503 beyond this spool size")
    p.add_argument("--no-fsync", action="store_true",
                   help="acknowledge after write() instead of fsync (survives kill -9, not a power loss)")
    p.add_argument("--batch-max-spans", type=int, help="write a batch at this many spans (default 8000)")
    p.add_argument("--batch-interval", help="... or this long after its first span (default 0.5s)")
    p.add_argument("--queue-max-bytes", type=int, help="429 beyond this much unwritten data in memory")
    p.add_argument("--shutdown-timeout", help="SIGTERM: flush for at most this long (default 10s)")
    p.add_argument("--audit-every", help="run an audit of each tenant every DURATION (e.g. 15m)")
    p.add_argument("--audit-sample", type=int, help="traces per background audit (default 200)")
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
            queue_max_bytes=a.queue_max_bytes,
            shutdown_timeout=parse_duration(a.shutdown_timeout) if a.shutdown_timeout else None,
            audit_every=parse_duration(a.audit_every) if a.audit_every else None, audit_sample=a.audit_sample,
            cluster=a.cluster, ingest_workers=a.ingest_workers)
    except ValueError as exc:
        p.error(str(exc))
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from ragtrace_collector.memory import keep_freed_memory

    keep_freed_memory()
    store = _open(settings.store, migrate=True, command="serve",
                  variant="cluster" if settings.cluster else "single", cluster=settings.cluster or None)
    if store is None:
        return 2
    import uvicorn
    from ragtrace_collector.app import create_app

    try:
        app = create_app(settings, store)
        print(f"ragtrace collector on http://{settings.host}:{settings.port}  store: {store.location}  "
              f"spool: {settings.spool_path}", flush=True)
        from ragtrace_collector import native_walk

        if native_walk.enabled():
            log.info("attribute walk: native (C++ protobuf, collector/native)")
        elif native_walk.available():
            log.info("attribute walk: Python (RAGTRACE_NATIVE_WALK=0)")
        else:
            log.warning("attribute walk: Python, about half the throughput: %s", native_walk.UNAVAILABLE)
        config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=a.log_level,
                                timeout_graceful_shutdown=max(1, int(settings.shutdown_timeout)),
                                access_log=a.log_level == "debug")
        server = uvicorn.Server(config)
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
        return 0 if server.started else 1
    finally:
        store.close()


# --- traces ------------------------------------------------------------------------------------
def traces_main(argv: list[str]) -> int:
    if argv and argv[0] == "show":
        return _traces_show(argv[1:])
    p = argparse.ArgumentParser(prog="ragtrace traces", description=(
        "List stored queries, newest first. `ragtrace traces show TRACE_ID` prints one with passage text."))
    _common_read_args(p)
    p.add_argument("--service")
    p.add_argument("--release")
    p.add_argument("--since", help="ISO time or an age such as 15m, 6h, 2d")
    p.add_argument("--until", help="ISO time or an age")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true", help="one JSON object per trace (JSON Lines)")
    a = p.parse_args(argv)
    try:
        since, until = parse_time_bound(a.since, "since"), parse_time_bound(a.until, "until")
    except ValueError as exc:
        p.error(str(exc))
    if a.limit <= 0:
        p.error("--limit must be > 0")
    if a.server:
        params: dict[str, Any] = {"limit": a.limit}
        for key, val in (("release", a.release), ("service", a.service), ("since", since), ("until", until)):
            if val is not None:
                params[key] = val.isoformat() if isinstance(val, datetime) else val
        rows = _fetch(a.server, "/api/traces", params, a.token)
        if rows is None:
            return 1
        objs = [orjson.loads(line) for line in rows.splitlines() if line.strip()]
    else:
        store = _open(a.store, migrate=False, command="traces")
        if store is None:
            return 2
        with store:
            if store.pending_migrations():
                print("ragtrace traces: the store has no (or an old) schema; run `ragtrace store migrate "
                      "--store ...` or start `ragtrace serve` on it", file=sys.stderr)
                return 1
            objs = [r.as_json() for r in store.read_traces(tenant=a.tenant, service=a.service, release=a.release,
                                                            since=since, until=until, limit=a.limit)]
    if a.json:
        out = sys.stdout.buffer
        for obj in objs:
            out.write(orjson.dumps(obj) + b"\n")
        out.flush()
    else:
        _print_table(objs)
    return 0


def _common_read_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", help=_STORE_HELP)
    p.add_argument("--tenant", default=DEFAULT_TENANT, help="tenant to read (direct store access only)")
    p.add_argument("--server", help="read through a running collector, e.g. http://127.0.0.1:4318 "
                                    "(needed while `ragtrace serve` owns an embedded store)")
    p.add_argument("--token", help="bearer token for --server (selects the tenant)")


def _fetch(server: str, path: str, params: dict[str, Any], token: str | None) -> str | None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        resp = httpx.get(server.rstrip("/") + path, params=params, headers=headers, timeout=60)
    except httpx.HTTPError as exc:
        print(f"ragtrace traces: cannot reach the collector at {server}: {exc}", file=sys.stderr)
        return None
    if resp.status_code != 200:
        print(f"ragtrace traces: the collector answered {resp.status_code}: {resp.text[:500]}", file=sys.stderr)
        return None
    return resp.text


def _short(text: str | None, width: int) -> str:
    if text is None:
        return "-"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_table(objs: Iterable[dict[str, Any]]) -> None:
    objs = list(objs)
    if not objs:
        print("no traces (a trace appears once its root span has arrived)")
        return
    header = f"{'trace_id':<32}  {'start (UTC)':<19}  {'release':<12}  {'P/R/C':>8}  {'gold':>4}  query → answer"
    print(header)
    print("-" * len(header))
    for o in objs:
        start = (o.get("start_time") or "")[:19].replace("T", " ")
        counts = f"{len(o['retrieved'])}/{len(o['reranked'])}/{len(o['context'])}"
        print(f"{o['trace_id']:<32}  {start:<19}  {_short(o['release'], 12):<12}  {counts:>8}  "
              f"{len(o['gold_ids']):>4}  {_short(o['query'], 40)} → {_short(o['answer'], 40)}")
    print(f"\n{len(objs)} trace(s). P/R/C = retrieved / reranked / supplied context documents.")


def _traces_show(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ragtrace traces show", description="One trace with passage text.")
    p.add_argument("trace_id")
    _common_read_args(p)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    tid = a.trace_id.strip().lower()
    if a.server:
        text = _fetch(a.server, f"/api/traces/{tid}", {}, a.token)
        if text is None:
            return 1
        obj = orjson.loads(text)
    else:
        store = _open(a.store, migrate=False, command="traces")
        if store is None:
            return 2
        with store:
            found: list[TraceRecord] = []
            if not store.pending_migrations():
                found = list(store.read_traces(tenant=a.tenant, trace_ids=[tid], with_content=True))
        if not found:
            print(f"ragtrace traces show: no trace {tid} in tenant {a.tenant!r} (or its root span has not "
                  "arrived yet)", file=sys.stderr)
            return 1
        obj = found[0].as_json(with_content=True)
    if a.json:
        print(orjson.dumps(obj).decode())
        return 0
    print(f"trace    {obj['trace_id']}   query id {obj['query_id'] or '-'}")
    print(f"service  {obj['service']}   release {obj['release']}   at {obj.get('start_time')}")
    print(f"query    {obj['query']}")
    print(f"answer   {obj['answer'] if obj['answer'] is not None else '-'}")
    print(f"gold     {', '.join(obj['gold_ids']) or '-'}")
    titles = (("retrieved", "retrieved (candidate pool)"), ("reranked", "reranked"),
              ("context", "context supplied to the generator" + (" (derived from top_k)"
                                                                  if obj.get("context_derived") else "")))
    for key, title in titles:
        docs = obj[key]
        print(f"\n== {title}: {len(docs)}")
        for d in docs:
            score = "-" if d["score"] is None else f"{d['score']:.4f}"
            print(f"  #{d['rank']:<3} {d['id']}  score {score}")
            if d.get("content"):
                print(textwrap.indent(textwrap.fill(d["content"], 100), "       "))
    return 0


# --- store ---------------------------------------------------------------------------------------
def store_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ragtrace store", description="Store administration.")
    sub = p.add_subparsers(dest="action", required=True)
    m = sub.add_parser("migrate", help="apply pending schema migrations (idempotent)")
    m.add_argument("--store", help=_STORE_HELP)
    m.add_argument("--variant", choices=["single", "cluster"], default="single",
                   help="single node, or a cluster (ReplicatedReplacingMergeTree + Distributed)")
    m.add_argument("--cluster", help="cluster name for --variant cluster (as in remote_servers)")
    m.add_argument("--print", action="store_true", dest="print_sql", help="print the SQL, apply nothing")
    s = sub.add_parser("status", help="schema version and row counts")
    s.add_argument("--store", help=_STORE_HELP)
    r = sub.add_parser("retention", help="keep traces for N days (ALTER TABLE ... MODIFY TTL); 0 = forever")
    r.add_argument("--store", help=_STORE_HELP)
    r.add_argument("--days", type=int, required=True)
    for sp in (s, r):
        sp.add_argument("--variant", choices=["single", "cluster"], default="single")
        sp.add_argument("--cluster", help="cluster name for --variant cluster")
    a = p.parse_args(argv)
    if a.action == "migrate":
        if a.variant == "cluster" and not a.cluster:
            p.error("--variant cluster needs --cluster NAME")
        if a.print_sql:
            for mig in load_migrations(a.variant):
                print(f"-- {mig.version:04d}_{mig.name}")
                for stmt in mig.statements:
                    sql = stmt.replace("{cluster}", a.cluster) if a.cluster else stmt
                    print(sql.replace("{db}", "ragtrace") + "\n;")
            return 0
        store = _open(a.store, migrate=False, command="store", variant=a.variant, cluster=a.cluster)
        if store is None:
            return 2
        with store:
            try:
                applied = store.migrate()
            except Exception as exc:
                print(f"ragtrace store migrate: failed: {exc}", file=sys.stderr)
                return 1
        names = [f"{x.version:04d}_{x.name}" for x in applied]
        print(f"applied {len(applied)} migration(s){': ' + ', '.join(names) if names else ' (up to date)'} "
              f"to {store.location}")
        return 0
    if a.variant == "cluster" and not a.cluster:
        p.error("--variant cluster needs --cluster NAME")
    store = _open(a.store, migrate=False, command="store", variant=a.variant, cluster=a.cluster)
    if store is None:
        return 2
    with store:
        if a.action == "status":
            versions = sorted(store.applied_versions())
            pending = [f"{x.version:04d}_{x.name}" for x in store.pending_migrations()]
            print(f"store      {store.location}")
            print(f"applied    {', '.join(f'{v:04d}' for v in versions) or 'none'}")
            print(f"pending    {', '.join(pending) or 'none'}")
            if not versions:
                return 0
            for table in ("queries", "spans", "documents", "passages", "gold", "reference_answers", "feedback",
                          "labels"):
                try:
                    n = store.query_rows(f"SELECT count() FROM {store.table(table)} FINAL")[0][0]
                except Exception:
                    continue
                print(f"{table:<17} {n} rows")
            return 0
        if a.days < 0:
            p.error("--days must be >= 0")
        return _retention(store, a.days)


# Traffic ages out; gold, reference answers and reviews are curated labels and are kept.
_RETENTION = {"spans": "start_time", "queries": "start_time", "documents": "start_time", "feedback": "added_at",
              "labels": "trace_time"}


def _retention(store: Store, days: int) -> int:
    for table, column in _RETENTION.items():
        # on a cluster the TTL belongs to the replicated local tables, on every node
        target = (f"{store.table(table + '_local')} ON CLUSTER '{store.cluster}'"
                  if store.variant == "cluster" else store.table(table))
        if days:
            sql = f"ALTER TABLE {target} MODIFY TTL toDateTime({column}) + INTERVAL {int(days)} DAY"
        else:
            sql = f"ALTER TABLE {target} REMOVE TTL"
        try:
            store.command(sql)
        except Exception as exc:
            if days == 0 and "TTL" in str(exc):
                continue  # no TTL to remove
            print(f"ragtrace store retention: {table}: {exc}", file=sys.stderr)
            return 1
    print(f"retention set to {days} day(s)" if days else "retention removed (keep forever)")
    return 0
