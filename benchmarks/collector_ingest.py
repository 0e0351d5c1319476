"""Collector ingest throughput, against the limit measured in the same run.

What it does:
1. Builds OTLP protobuf requests of ``--per-request`` traces each (4 spans: a root, a retriever
   with 20 candidates of ~1 KB, a reranker with those 20 in and 20 out, a generation span with the
   5 supplied), passages drawn from a corpus of ``--corpus`` distinct texts (as in production,
   passages repeat; ``--corpus 0`` makes every passage unique).
2. Starts ``ragtrace serve`` (a separate process) on an embedded store, posts the requests over
   loopback from ``--clients`` threads, and stops the clock when the collector's metrics report
   every query row written (queryable). The collector's walk is the compiled one (`make native`).
3. The limit, in this process on its own store: protobuf-parse the same request bodies, and insert
   the same rows straight into the same engine with its fastest input path (Arrow through chDB's
   ``Python()`` table function), all rows in one insert per table. No HTTP, no spool, no walk.
4. Optionally (``--overload SECONDS``) sends as fast as possible from ``--overload-clients`` (6)
   threads and samples the collector's resident memory once a second, counting 429/503 answers
   (backpressure).
5. With ``--body-mb MB`` the overload is the hostile-load test of issue 14 instead, against a fresh
   collector started with ``--max-inflight-bytes`` (``--inflight-mb``, default 256): ``--clients``
   threads post bodies of about MB megabytes without backing off, for ``--overload`` seconds, while
   the collector's resident memory is sampled every 0.2 s (peak RSS, share of 429/503, any 5xx, p99
   latency of every answer). Then ``--slow`` (2,000) slow connections are opened and kept open (half
   send part of the request line and headers and stall, half send headers and part of a body and
   stall; any the collector closes are opened again) while ``--good-clients`` (4) threads post
   ordinary requests (``--good-traces`` traces, default 10) for ``--slow-seconds`` (30): the share
   answered 200 within 1 s, the collector's open file descriptors and the bytes its log grew by.
   Targets (issue 14): peak RSS <= 2 x the in-flight bound + 500 MB, no 5xx, good traffic >= 99 %
   answered within 1 s. The soft open-files limit of this process is raised to its hard limit.

Usage:  .venv/bin/python benchmarks/collector_ingest.py [--traces 3000] [--overload 60]
        .venv/bin/python benchmarks/collector_ingest.py --overload 60 --clients 64 --body-mb 8
Reports traces/s, spans/s, document rows/s, the ratio to the limit, and the collector's CPU time per
trace (user and system, all its threads, from /proc): on a shared machine the throughput follows the
CPU the other jobs leave, the CPU per trace much less. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragtrace_collector.assemble import assemble_body
from ragtrace_collector.rows import COLUMNS, TIME_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: `tests` (the OTLP request builders) is importable from the root
    sys.path.insert(0, str(ROOT))

from tests import otlp_builders as T  # noqa: E402

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
                      overload: float, serve_args: list[str]) -> dict[str, Any]:
    port = T.free_port()
    url = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    log = (workdir / "serve.log").open("wb")
    proc = subprocess.Popen([RAGTRACE, "serve", "--store", str(workdir / "store"), "--port", str(port),
                             "--spool-dir", str(workdir / "spool"), "--log-level", "warning", *serve_args],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        T.wait_until_ready(url, proc, workdir / "serve.log")
        # warm-up: one request, so imports and first-insert costs are not counted
        warm = build_bodies(20, 20, 50, seed=99)
        post_all(url, warm, 1)
        while metric(url, "ragtrace_rows_written_total{table=\"queries\"}") < 20:
            time.sleep(0.05)  # the collector is another process: poll its metrics
        base_q = metric(url, "ragtrace_rows_written_total{table=\"queries\"}")
        base_d = metric(url, "ragtrace_rows_written_total{table=\"documents\"}")
        counted = ("ragtrace_batches_total", "ragtrace_store_insert_statements_total",
                   "ragtrace_memory_give_backs_total")
        base_counts = {name: metric(url, name) for name in counted}
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
        # what the writer did: batches, INSERT statements (an insert cut into slices counts each), give-backs
        work = {name.removeprefix("ragtrace_"): metric(url, name) - base_counts[name] for name in counted}
        out: dict[str, Any] = {"seconds": elapsed, "acked_seconds": acked, "doc_rows": docs, "client_cpu": client_cpu,
                               "rss_mb_after": rss_mb(proc.pid), "cpu_user": user, "cpu_system": system,
                               "work": work}
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


def start_collector(workdir: Path, serve_args: list[str]) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = T.free_port()
    url = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "serve.log"
    proc = subprocess.Popen([RAGTRACE, "serve", "--store", str(workdir / "store"), "--port", str(port),
                             "--spool-dir", str(workdir / "spool"), "--log-level", "warning", *serve_args],
                            stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    T.wait_until_ready(url, proc, log_path)
    return proc, url, log_path


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (ingest workers), MB."""
    total = rss_mb(pid)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    total += rss_mb(int(entry.name))
    return total


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def hostile_overload(url: str, pid: int, body: bytes, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` threads post ``body`` back to back for ``seconds`` (no backing off: the point is
    the pressure); the collector's RSS is sampled every 0.2 s."""
    stop = threading.Event()
    lock = threading.Lock()
    codes: dict[str, int] = {}
    latencies: list[float] = []

    def worker() -> None:
        with httpx.Client(timeout=120) as c:
            while not stop.is_set():
                t0 = time.perf_counter()
                try:
                    code = str(c.post(f"{url}/v1/traces", content=body, headers=PB).status_code)
                except httpx.HTTPError as exc:
                    code = type(exc).__name__  # a connection the collector dropped counts as a failure
                with lock:
                    codes[code] = codes.get(code, 0) + 1
                    latencies.append(time.perf_counter() - t0)

    samples: list[float] = []
    held: dict[str, float] = {"ragtrace_inflight_bytes": 0.0, "ragtrace_queue_bytes": 0.0}

    def gauges() -> None:
        # what the collector says it holds: bodies in flight and rows queued (its admission bound)
        while not stop.is_set():
            with contextlib.suppress(httpx.HTTPError):
                for name in held:
                    held[name] = max(held[name], metric(url, name))
            time.sleep(0.5)  # two scrapes a second

    threads = [threading.Thread(target=worker) for _ in range(clients)] + [threading.Thread(target=gauges)]
    for t in threads:
        t.start()
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        samples.append(tree_rss_mb(pid))
        time.sleep(0.2)  # five memory samples a second
    stop.set()
    for t in threads:
        t.join()
    after = []
    for _ in range(10):  # and what is left 10 s later
        time.sleep(1.0)
        after.append(tree_rss_mb(pid))
    return {"codes": codes, "latencies": latencies, "rss_max": max(samples), "rss_first": samples[0],
            "rss_after": after[-1], "bodies_max_mb": held["ragtrace_inflight_bytes"] / 1e6,
            "queue_max_mb": held["ragtrace_queue_bytes"] / 1e6}


def _slow_connection(port: int, i: int) -> socket.socket:
    """A client that stops mid-request: half stall in the headers, half in the body."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setblocking(False)
    if i % 2:
        s.send(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n")
    else:
        s.send(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
               b"Content-Length: 1048576\r\n\r\n" + b"\0" * 1024)
    return s


def slow_connections_with_good_traffic(url: str, pid: int, good_body: bytes, slow: int, good_clients: int,
                                       seconds: float) -> dict[str, Any]:
    port = int(url.rsplit(":", 1)[1])
    stop = threading.Event()
    opened = {"n": 0, "failed": 0, "closed_by_server": 0}
    sel = selectors.DefaultSelector()

    def keep_open() -> None:
        conns: set[socket.socket] = set()
        while not stop.is_set():
            while len(conns) < slow and not stop.is_set():
                try:
                    s = _slow_connection(port, opened["n"])
                except OSError:
                    opened["failed"] += 1
                    time.sleep(0.05)  # the collector refuses connections: try again shortly
                    break
                opened["n"] += 1
                conns.add(s)
                sel.register(s, selectors.EVENT_READ)
            for key, _ in sel.select(timeout=0.2):
                s = key.fileobj  # readable: the collector answered or closed it
                assert isinstance(s, socket.socket)
                with contextlib.suppress(OSError):
                    s.recv(65536)
                sel.unregister(s)
                s.close()
                conns.discard(s)
                opened["closed_by_server"] += 1
        for s in conns:
            sel.unregister(s)
            s.close()

    keeper = threading.Thread(target=keep_open)
    keeper.start()
    deadline = time.monotonic() + 60
    while opened["n"] < slow and time.monotonic() < deadline:
        time.sleep(0.1)  # wait until the slow connections are open
    lock = threading.Lock()
    good: list[tuple[str, float]] = []

    def worker() -> None:
        with httpx.Client(timeout=30) as c:
            while not stop.is_set():
                t0 = time.perf_counter()
                try:
                    code = str(c.post(f"{url}/v1/traces", content=good_body, headers=PB).status_code)
                except httpx.HTTPError as exc:
                    code = type(exc).__name__
                with lock:
                    good.append((code, time.perf_counter() - t0))
                time.sleep(0.05)  # ordinary exporters pause between batches

    fds_max = 0
    threads = [threading.Thread(target=worker) for _ in range(good_clients)]
    for t in threads:
        t.start()
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        with contextlib.suppress(OSError):
            fds_max = max(fds_max, len(os.listdir(f"/proc/{pid}/fd")))
        time.sleep(0.5)  # sample the collector's open files twice a second
    stop.set()
    for t in threads:
        t.join()
    keeper.join()
    codes: dict[str, int] = {}
    for code, _ in good:
        codes[code] = codes.get(code, 0) + 1
    fast = sum(1 for code, lat in good if code == "200" and lat <= 1.0)
    return {"good": len(good), "good_codes": codes, "good_ok_within_1s": fast, "opened": opened,
            "good_p99": percentile([lat for _, lat in good], 0.99), "fds_max": fds_max}


def hostile(a: argparse.Namespace, workdir: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 2,000 sockets on this side too
    per_trace = len(build_bodies(1, 1, a.corpus)[0])
    n = max(1, int(a.body_mb * 1e6 / per_trace))
    body = build_bodies(n, n, a.corpus)[0]
    good_body = build_bodies(a.good_traces, a.good_traces, a.corpus, seed=2)[0]
    bound = a.inflight_mb * 1024 * 1024
    serve_args = ["--ingest-workers", str(a.ingest_workers), *(["--no-fsync"] if a.no_fsync else [])]
    if not a.old_collector:
        serve_args += ["--max-inflight-bytes", str(bound)]
    print(f"hostile load: {a.clients} clients x {len(body) / 1e6:.1f} MB bodies ({n} traces) for {a.overload:.0f} s, "
          f"then {a.slow} slow connections + {a.good_clients} clients of {len(good_body) / 1e6:.2f} MB requests "
          f"for {a.slow_seconds:.0f} s; in-flight bound {a.inflight_mb} MiB"
          f"{' (not passed: --old-collector)' if a.old_collector else ''}; open files {soft} -> "
          f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]} here; {os.cpu_count()} cores; load average "
          f"{os.getloadavg()[0]:.1f}")
    proc, url, log_path = start_collector(workdir / "hostile", serve_args)
    try:
        rss0 = tree_rss_mb(proc.pid)
        over = hostile_overload(url, proc.pid, body, a.clients, a.overload)
        total = sum(over["codes"].values())
        refused = sum(v for k, v in over["codes"].items() if k in ("429", "503"))
        # every 5xx counts against "no 5xx" (503 included); connection errors are failures too
        errors = {k: v for k, v in over["codes"].items() if not k.isdigit() or k.startswith("5")}
        target = 2 * a.inflight_mb * 1.048576 + 500
        print(f"overload:  answers {dict(sorted(over['codes'].items()))} of {total}: 429/503 "
              f"{refused / max(total, 1):.1%}, other failures {errors or 'none'}; latency p50 "
              f"{percentile(over['latencies'], 0.5):.2f} s, p99 {percentile(over['latencies'], 0.99):.2f} s")
        print(f"           collector RSS at rest {rss0:.0f} MB, peak {over['rss_max']:.0f} MB (target <= "
              f"{target:.0f} MB: {'met' if over['rss_max'] <= target else 'NOT met'}), 10 s after "
              f"{over['rss_after']:.0f} MB; held by its account at most {over['bodies_max_mb']:.0f} MB of bodies "
              f"and {over['queue_max_mb']:.0f} MB of queued rows (scraped twice a second)")
        log_before = log_path.stat().st_size
        slow = slow_connections_with_good_traffic(url, proc.pid, good_body, a.slow, a.good_clients,
                                                  a.slow_seconds)
        with log_path.open("rb") as fh:
            fh.seek(log_before)
            grown = fh.read().decode("utf-8", "replace")
        share = slow["good_ok_within_1s"] / max(slow["good"], 1)
        print(f"slow:      {a.slow} slow connections kept open ({slow['opened']['n']} opened, "
              f"{slow['opened']['closed_by_server']} closed by the collector, {slow['opened']['failed']} refused); "
              f"good traffic {slow['good']} requests {slow['good_codes']}, {share:.1%} answered 200 within 1 s "
              f"(target >= 99 %: {'met' if share >= 0.99 else 'NOT met'}), p99 {slow['good_p99']:.2f} s; "
              f"collector open files at most {slow['fds_max']}; its log grew by {len(grown) / 1e3:.1f} kB "
              f"({grown.count(chr(10))} lines, {grown.count('Traceback')} tracebacks)")
        bad = [k for k in slow["good_codes"] if not k.isdigit() or k.startswith("5")]
        print(f"5xx:       {'none (target met)' if not errors and not bad else f'{errors} {bad} (target NOT met)'}")
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure_limit(bodies: list[bytes], workdir: Path) -> dict[str, float]:
    """Parse + the engine's fastest insert of the same rows: all of them, one insert per table."""
    import clickhouse_connect

    from ragtrace_collector.rows import Rows
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
        merged.extend(assemble_body(body, "default", int(time.time() * 1000)))
    # the same rows the collector writes: passage text once per hash
    pc = merged.cols["passages"]
    first = {h: i for i, h in reversed(list(enumerate(pc["content_hash"])))}
    keep = sorted(first.values())
    merged.cols["passages"] = {c: [v[i] for i in keep] for c, v in pc.items()}
    tables = {}
    for table in COLUMNS:
        if merged.count(table):
            tables[table] = arrow_table(merged.columns(table), TIME_COLUMNS)
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
    ap.add_argument("--body-mb", type=float, default=0.0,
                    help="hostile load instead (issue 14): --clients threads posting bodies of this many MB")
    ap.add_argument("--inflight-mb", type=int, default=256, help="the collector's --max-inflight-bytes, MiB")
    ap.add_argument("--slow", type=int, default=2000, help="slow connections kept open (hostile load)")
    ap.add_argument("--slow-seconds", type=float, default=30.0)
    ap.add_argument("--good-clients", type=int, default=4)
    ap.add_argument("--good-traces", type=int, default=10, help="traces per good-traffic request")
    ap.add_argument("--old-collector", action="store_true",
                    help="do not pass --max-inflight-bytes (to measure a collector without it)")
    ap.add_argument("--no-fsync", action="store_true", help="run the collector with --no-fsync")
    ap.add_argument("--ingest-workers", type=int, default=0, help="run the collector with --ingest-workers N")
    a = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ragtrace-bench-"))
    if a.body_mb:
        try:
            hostile(a, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return
    try:
        bodies = build_bodies(a.traces, a.per_request, a.corpus)
        mb = sum(map(len, bodies)) / 1e6
        print(f"{a.traces} traces in {len(bodies)} requests, {mb:.0f} MB of OTLP protobuf; "
              f"corpus {a.corpus or 'unique'}; {a.clients} client threads; {os.cpu_count()} cores; "
              f"spool fsync {'off' if a.no_fsync else 'on'}; ingest workers {a.ingest_workers}; "
              f"load average {os.getloadavg()[0]:.1f}")
        serve_args = (["--no-fsync"] if a.no_fsync else []) + ["--ingest-workers", str(a.ingest_workers)]
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
        print("writer:    " + ", ".join(f"{v:,.0f} {k}" for k, v in col["work"].items()))
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
