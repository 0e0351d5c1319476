"""Collector ingest throughput, against the limit measured in the same run.

What it does:
1. Builds OTLP protobuf requests of ``--per-request`` traces each (4 spans: a root, a retriever
   with 20 candidates of ~1 KB, a reranker with those 20 in and 20 out, a generation span with the
   5 supplied), passages drawn from a corpus of ``--corpus`` distinct texts (as in production,
   passages repeat; ``--corpus 0`` makes every passage unique).
2. Starts ``ragtrace serve`` (a separate process) on an embedded store, posts the requests over
   loopback from ``--clients`` threads, and stops the clock when the collector's metrics report
   every query row written (queryable). The collector uses its native walk when it is built
   (`make native`); ``--python-walk`` first measures it with the Python walk too.
3. The limit, in this process on its own store: protobuf-parse the same request bodies, and insert
   the same rows straight into the same engine with its fastest input path (Arrow through chDB's
   ``Python()`` table function), all rows in one insert per table. No HTTP, no spool, no walk.
4. Optionally (``--overload SECONDS``) sends as fast as possible from more clients and samples the
   collector's resident memory once a second, counting 429/503 answers (backpressure).

Usage:  .venv/bin/python benchmarks/collector_ingest.py [--traces 3000] [--overload 60]
Reports traces/s, spans/s, document rows/s, the ratio to the limit, and the collector's CPU time per
trace (user and system, all its threads, from /proc): on a shared machine the throughput follows the
CPU the other jobs leave, the CPU per trace much less. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragtrace_collector.assemble import COLUMNS, TIME_COLUMNS, assemble
from tests import otlp_builders as T

RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))
PB = {"content-type": "application/x-protobuf"}


def build_bodies(n_traces: int, per_request: int, corpus: int, seed: int = 1) -> list[bytes]:
    docs = T.corpus(corpus, size=1000, seed=seed) if corpus else None
    bodies = []
    for start in range(0, n_traces, per_request):
        spans = []
        for i in range(start, min(n_traces, start + per_request)):
            pool = docs or T.corpus(20, size=1000, seed=seed * 1_000_000 + i)
            spans += T.standard_trace(pool, i).spans()
        bodies.append(T.request(spans, service="bench", release=f"b{seed}").SerializeToString())
    return bodies


def metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name):
            total += float(line.rsplit(" ", 1)[1])
    return total


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    m = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(m.group(1)) / 1024 if m else float("nan")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time of a process so far (all its threads); robust to a loaded machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def post_all(url: str, bodies: list[bytes], clients: int, stop: threading.Event | None = None,
             codes: dict[int, int] | None = None) -> None:
    codes = codes if codes is not None else {}
    lock = threading.Lock()
    it = iter(range(len(bodies)))

    def worker() -> None:
        with httpx.Client(timeout=120) as c:
            while stop is None or not stop.is_set():
                with lock:
                    i = next(it, None)
                if i is None:
                    return
                while True:
                    r = c.post(f"{url}/v1/traces", content=bodies[i], headers=PB)
                    with lock:
                        codes[r.status_code] = codes.get(r.status_code, 0) + 1
                    if r.status_code == 200 or stop is not None:
                        break
                    # backpressure: back off as told (scaled down: the benchmark wants the pressure)
                    time.sleep(float(r.headers.get("retry-after", "1")) / 10)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def measure_collector(bodies: list[bytes], n_traces: int, clients: int, workdir: Path,
                      overload: float, serve_args: list[str], python_walk: bool = False) -> dict[str, Any]:
    port = T.free_port()
    url = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    log = (workdir / "serve.log").open("wb")
    env = {**os.environ, "RAGTRACE_NATIVE_WALK": "0" if python_walk else "1"}
    proc = subprocess.Popen([RAGTRACE, "serve", "--store", str(workdir / "store"), "--port", str(port),
                             "--spool-dir", str(workdir / "spool"), "--log-level", "warning", *serve_args],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        T.wait_until_ready(url, proc, workdir / "serve.log")
        # warm-up: one request, so imports and first-insert costs are not counted
        warm = build_bodies(20, 20, 50, seed=99)
        post_all(url, warm, 1)
        while metric(url, "ragtrace_rows_written_total{table=\"queries\"}") < 20:
            time.sleep(0.05)  # the collector is another process: poll its metrics
        base_q = metric(url, "ragtrace_rows_written_total{table=\"queries\"}")
        base_d = metric(url, "ragtrace_rows_written_total{table=\"documents\"}")
        cpu0 = cpu_seconds(proc.pid)
        client0 = time.process_time()
        t0 = time.perf_counter()
        post_all(url, bodies, clients)
        acked = time.perf_counter() - t0
        client_cpu = time.process_time() - client0
        while metric(url, "ragtrace_rows_written_total{table=\"queries\"}") < base_q + n_traces:
            time.sleep(0.01)  # until every query row is written (polled from the metrics)
        elapsed = time.perf_counter() - t0
        user, system = (b - a for a, b in zip(cpu0, cpu_seconds(proc.pid), strict=True))
        docs = metric(url, "ragtrace_rows_written_total{table=\"documents\"}") - base_d
        out: dict[str, Any] = {"seconds": elapsed, "acked_seconds": acked, "doc_rows": docs, "client_cpu": client_cpu,
                               "rss_mb_after": rss_mb(proc.pid), "cpu_user": user, "cpu_system": system}
        if overload > 0:
            out.update(overload_phase(url, proc.pid, bodies, overload))
        return out
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()


def overload_phase(url: str, pid: int, bodies: list[bytes], seconds: float) -> dict[str, Any]:
    stop = threading.Event()
    codes: dict[int, int] = {}
    samples: list[float] = []
    endless = bodies * 1000
    sender = threading.Thread(target=post_all, args=(url, endless, 6, stop, codes))
    sender.start()
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        samples.append(rss_mb(pid))
        time.sleep(1.0)  # one memory sample a second
    stop.set()
    sender.join()
    return {"overload_seconds": seconds, "overload_codes": codes, "overload_rss_max_mb": max(samples),
            "overload_rss_first_mb": samples[0], "overload_rss_last_mb": samples[-1]}


def measure_limit(bodies: list[bytes], workdir: Path) -> dict[str, float]:
    """Parse + the engine's fastest insert of the same rows: all of them, one insert per table."""
    import clickhouse_connect

    from ragtrace_collector.assemble import Rows
    from ragtrace_store import Store, arrow_table

    client = clickhouse_connect.get_client(interface="chdb", path=str(workdir / "limit-store"))
    conn = client._backend._handle.conn
    store = Store(client, "ragtrace", location=str(workdir / "limit-store"), embedded=True)
    store.migrate()
    # rows and Arrow tables are prepared untimed: the limit is parse + engine insert only
    parse_s = 0.0
    merged = Rows()
    for body in bodies:
        t = time.perf_counter()
        msg = ExportTraceServiceRequest()
        msg.ParseFromString(body)
        parse_s += time.perf_counter() - t
        merged.extend(assemble(msg, "default", int(time.time() * 1000)))
    # the same rows the collector writes: passage text once per hash
    pc = merged.cols["passages"]
    first = {h: i for i, h in reversed(list(enumerate(pc["content_hash"])))}
    keep = sorted(first.values())
    merged.cols["passages"] = {c: [v[i] for i in keep] for c, v in pc.items()}
    tables = {}
    for table in COLUMNS:
        cols = merged.cols[table]
        if cols[COLUMNS[table][0]]:
            tables[table] = arrow_table(cols, TIME_COLUMNS)
    insert_s = 0.0
    for table, batch in tables.items():
        cols_sql = ", ".join(f"`{c}`" for c in batch.column_names)
        t = time.perf_counter()
        conn.query(f"INSERT INTO ragtrace.{table} ({cols_sql}) SELECT {cols_sql} FROM Python(batch)")
        insert_s += time.perf_counter() - t
    client.close()
    return {"parse_seconds": parse_s, "insert_seconds": insert_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=3000)
    ap.add_argument("--per-request", type=int, default=100)
    ap.add_argument("--corpus", type=int, default=5000, help="distinct passages (0 = all unique)")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--overload", type=float, default=0.0, help="seconds of overload after the run")
    ap.add_argument("--no-fsync", action="store_true", help="run the collector with --no-fsync")
    ap.add_argument("--ingest-workers", type=int, default=0, help="run the collector with --ingest-workers N")
    ap.add_argument("--python-walk", action="store_true",
                    help="also measure the collector with the Python attribute walk (RAGTRACE_NATIVE_WALK=0)")
    a = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ragtrace-bench-"))
    try:
        bodies = build_bodies(a.traces, a.per_request, a.corpus)
        mb = sum(map(len, bodies)) / 1e6
        print(f"{a.traces} traces in {len(bodies)} requests, {mb:.0f} MB of OTLP protobuf; "
              f"corpus {a.corpus or 'unique'}; {a.clients} client threads; {os.cpu_count()} cores; "
              f"spool fsync {'off' if a.no_fsync else 'on'}; ingest workers {a.ingest_workers}; "
              f"load average {os.getloadavg()[0]:.1f}")
        serve_args = (["--no-fsync"] if a.no_fsync else []) + ["--ingest-workers", str(a.ingest_workers)]
        if a.python_walk:
            py = measure_collector(bodies, a.traces, a.clients, workdir / "python-walk", 0, serve_args,
                                   python_walk=True)
            cpu = py["cpu_user"] + py["cpu_system"]
            print(f"python walk: {a.traces / py['seconds']:,.0f} traces/s, collector CPU "
                  f"{cpu * 1e6 / a.traces:,.0f} µs per trace ({cpu / py['seconds']:.2f} cores busy)")
        col = measure_collector(bodies, a.traces, a.clients, workdir, a.overload, serve_args)
        lim = measure_limit(bodies, workdir)
        spans = 4 * a.traces
        limit_s = lim["parse_seconds"] + lim["insert_seconds"]
        tps = a.traces / col["seconds"]
        print(f"collector: {tps:,.0f} traces/s, {spans / col['seconds']:,.0f} spans/s, "
              f"{col['doc_rows'] / col['seconds']:,.0f} document rows/s "
              f"({col['seconds']:.2f} s until queryable; all acknowledged after {col['acked_seconds']:.2f} s; "
              f"RSS {col['rss_mb_after']:.0f} MB)")
        cpu = col["cpu_user"] + col["cpu_system"]
        print(f"           collector CPU {cpu * 1e6 / a.traces:,.0f} µs per trace "
              f"({col['cpu_user'] * 1e6 / a.traces:,.0f} user + "
              f"{col['cpu_system'] * 1e6 / a.traces:,.0f} system, all threads: "
              f"{cpu / col['seconds']:.2f} cores busy; the load generator used "
              f"{col['client_cpu'] / col['acked_seconds']:.2f} cores)")
        print(f"limit:     {a.traces / limit_s:,.0f} traces/s (protobuf parse {lim['parse_seconds'] * 1e3:.0f} ms + "
              f"Arrow insert {lim['insert_seconds'] * 1e3:.0f} ms for the same rows)")
        print(f"ratio:     {(a.traces / col['seconds']) / (a.traces / limit_s):.1%} of the limit")
        if a.overload:
            print(f"overload:  {col['overload_seconds']:.0f} s at 6 clients: answers {col['overload_codes']}, "
                  f"collector RSS first {col['overload_rss_first_mb']:.0f} MB, max "
                  f"{col['overload_rss_max_mb']:.0f} MB, last {col['overload_rss_last_mb']:.0f} MB")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
