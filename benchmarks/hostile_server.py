"""`ragtrace serve` under the attacks of a hostile-input campaign: slow bodies on every route, requests that
decode to far more than their bytes, huge responses, two large requests at once, and SIGTERM with work in
flight. Each scenario starts its own `ragtrace serve` (a separate process, on an embedded store in a temporary
directory) and prints one line of figures; the same shapes, scaled down and asserted, are the tests in
``tests/faults/`` (test_slow_bodies, test_request_memory, test_shutdown_deadline), tests/collector/
test_bounded_responses and test_request_cost.

Scenarios (``--only a,b``; default all):

slow-bodies   ``--conns`` connections (half to ``POST /review/login``, half to ``POST /api/audit``) each declare
              a 100-byte body and send one byte every ``--trickle`` seconds for ``--slow-seconds``; then the
              client closes what is still open. Prints how many were answered (and how) before the client gave
              up, after how long, and what the server's log grew by (lines, tracebacks).
starve        ``--max-connections`` slots all held by such slow bodies, then ``--good`` ordinary OTLP requests,
              one after another: their answers.
tiny-spans    one request of ``--spans`` parentless spans without attributes (1,082,334 make the campaign's
              63 MiB body): the answer, its time and the server's resident memory (peak, sampled every 0.1 s).
content       ``--content-traces`` traces with passage text, then ``GET /api/traces?content=true&limit=100000``
              read to the end: answer, bytes, peak RSS.
two-large     two requests of ``--large-mb`` MiB sent at once, ``--rounds`` times, and each alone (``--large-shape``:
              ordinary ragtrace traces, 64 KB string values or attribute-less spans; on a server with
              ``--max-inflight-bytes`` ``--large-inflight-mb``, default its own): their answers, peak RSS
              (``--timeline``: and RSS with the held bytes every 0.5 s).
shutdown      SIGTERM with a ``--shutdown-spans``-span request being decoded, then with a slowly read
              ``content=true`` listing in flight, then with an audit running (``--shutdown-timeout``): seconds
              from SIGTERM to exit, exit code, and what the clients got.
insert-slices what writing one batch holds beyond its rows (each in a fresh process on a fresh embedded store,
              merges stopped) for each ``--slice-mib`` bound of `ragtrace_store.insert_slices`: a 64 MiB request
              of 64 KB values and a full batch of ordinary traces; statements and seconds.
cost          what decoding a body holds at its peak (each in a fresh process, through the collector's
              walk) beside what `ragtrace_collector.request_cost` predicts from its wire bytes, for each shape:
              attribute-less spans, tiny attributes, long arrays, events, 64 KB values, ordinary traces. The
              ``PER_*`` constants there are upper bounds of these figures.

Usage:  .venv/bin/python benchmarks/hostile_server.py [--only tiny-spans,two-large] [...]
Not a test: it prints figures, it asserts nothing. Wall-clock figures move with the machine's load.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import hostile_bodies as H  # noqa: E402
from tests import otlp_builders as T  # noqa: E402

RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))
PB = {"content-type": "application/x-protobuf"}
MiB = 1024 * 1024


@contextlib.contextmanager
def collector(workdir: Path, *args: str) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    port = T.free_port()
    url = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"serve-{port}.log"
    proc = subprocess.Popen([RAGTRACE, "serve", "--store", str(workdir / f"store-{port}"), "--port", str(port),
                             "--spool-dir", str(workdir / f"spool-{port}"), "--no-fsync", *args],
                            stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    try:
        T.wait_until_ready(url, proc, log_path)
        yield proc, url, log_path
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def rss_mb(pid: int) -> float:
    m = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(m.group(1)) / 1024 if m else float("nan")


class PeakRss:
    """Samples a process's resident memory every 0.1 s while in use; ``peak`` in MB. With ``url`` it also
    keeps a timeline: (seconds, RSS MB, the server's ``ragtrace_held_bytes`` in MiB, read by a second thread
    since a busy server answers /metrics late), printed by `print_timeline`."""

    def __init__(self, pid: int, url: str = "") -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self.url, self.held, self.samples = url, float("nan"), list[tuple[float, float, float]]()
        self._t0 = time.monotonic()
        self._threads = [threading.Thread(target=self._run, daemon=True)]
        if url:
            self._threads.append(threading.Thread(target=self._read_held, daemon=True))

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                rss = rss_mb(self.pid)
                self.peak = max(self.peak, rss)
                if self.url:
                    self.samples.append((time.monotonic() - self._t0, rss, self.held))
            self._stop.wait(0.1)

    def _read_held(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(httpx.HTTPError, ValueError):
                text = httpx.get(f"{self.url}/metrics", timeout=5).text
                found = re.search(r"^ragtrace_held_bytes (\S+)$", text, re.M)
                self.held = float(found.group(1)) / MiB if found else float("nan")
            self._stop.wait(0.1)

    def print_timeline(self, rest: float, every: float = 0.5) -> None:
        """One line per ``every`` seconds in which RSS moved: the highest RSS (and over ``rest``), held MiB."""
        last = -1.0
        bucket: list[tuple[float, float, float]] = []
        for sample in [*self.samples, (float("inf"), 0.0, 0.0)]:
            if bucket and sample[0] >= bucket[0][0] + every:
                t, rss, held = max(bucket, key=lambda s: s[1])
                if abs(rss - last) >= 8:
                    print(f"  {t:6.1f} s  RSS {rss:6.0f} MB (+{rss - rest:4.0f})  held {held:5.0f} MiB")
                    last = rss
                bucket = []
            bucket.append(sample)

    def __enter__(self) -> PeakRss:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()


def log_growth(log_path: Path, since: int) -> str:
    with log_path.open("rb") as fh:
        fh.seek(since)
        text = fh.read().decode("utf-8", "replace")
    return (f"{len(text) / 1e3:.1f} kB, {text.count(chr(10))} lines, {text.count('Traceback')} tracebacks, "
            f"{text.count('ClientDisconnect')} mentioning ClientDisconnect")


def status_of(answer: bytes) -> str:
    return answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/1.1 ") else "closed"


def trickle(port: int, paths: list[tuple[str, str]], seconds: float, every: float,
            on_open: Callable[[], None] | None = None) -> dict[str, Any]:
    """Each (path, content type) a connection declaring a 100-byte body and sending one byte every
    ``every`` seconds, for ``seconds``: when each was answered or closed, and with what."""
    sel = selectors.DefaultSelector()
    opened: dict[socket.socket, float] = {}
    for path, ctype in paths:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {ctype}\r\n"
                  f"Content-Length: 100\r\n\r\n".encode())
        s.setblocking(False)
        opened[s] = time.monotonic()
        sel.register(s, selectors.EVENT_READ)
    if on_open is not None:
        on_open()
    answered: list[tuple[str, float]] = []
    t_end = time.monotonic() + seconds
    next_byte = time.monotonic() + every
    while opened and time.monotonic() < t_end:
        for key, _ in sel.select(timeout=min(0.2, max(0.0, t_end - time.monotonic()))):
            s = key.fileobj  # type: ignore[assignment]
            assert isinstance(s, socket.socket)
            try:
                answer = s.recv(65536)
            except OSError:
                answer = b""
            answered.append((status_of(answer), time.monotonic() - opened.pop(s)))
            sel.unregister(s)
            s.close()
        if time.monotonic() >= next_byte:
            next_byte += every
            for s in list(opened):
                with contextlib.suppress(OSError):
                    s.send(b"x")
    still_open = len(opened)
    for s in opened:  # the client gives up: the server sees a disconnect mid-body
        sel.unregister(s)
        s.close()
    codes: dict[str, int] = {}
    for code, _ in answered:
        codes[code] = codes.get(code, 0) + 1
    times = sorted(t for _, t in answered)
    return {"answered": codes, "still_open": still_open,
            "median_s": times[len(times) // 2] if times else float("nan"), "max_s": times[-1] if times else 0.0}


def slow_bodies(a: argparse.Namespace, workdir: Path) -> None:
    extra = ["--body-timeout", a.body_timeout] if a.body_timeout else []
    with collector(workdir, *extra) as (_proc, url, log_path):
        port = int(url.rsplit(":", 1)[1])
        paths = [("/review/login", "application/x-www-form-urlencoded") if i % 2 else
                 ("/api/audit", "application/json") for i in range(a.conns)]
        before = log_path.stat().st_size
        out = trickle(port, paths, a.slow_seconds, a.trickle)
        time.sleep(2.0)  # the server handles the disconnects
        print(f"slow-bodies: {a.conns} connections x 1 byte every {a.trickle:g} s for {a.slow_seconds:g} s: answered "
              f"{out['answered'] or 'none'} (median after {out['median_s']:.1f} s, last {out['max_s']:.1f} s), "
              f"{out['still_open']} still waiting when the client closed them; log grew by "
              f"{log_growth(log_path, before)}")


def starve(a: argparse.Namespace, workdir: Path) -> None:
    good_body = T.request(T.standard_trace(T.corpus(20, size=300), 1).spans()).SerializeToString()
    with collector(workdir, "--max-connections", str(a.max_connections)) as (_proc, url, _log):
        port = int(url.rsplit(":", 1)[1])
        codes: dict[str, int] = {}
        latencies: list[float] = []

        def good_traffic() -> None:
            with httpx.Client(timeout=30) as c:
                for _ in range(a.good):
                    t0 = time.perf_counter()
                    try:
                        code = str(c.post(f"{url}/v1/traces", content=good_body, headers=PB).status_code)
                    except httpx.HTTPError as exc:
                        code = type(exc).__name__
                    latencies.append(time.perf_counter() - t0)
                    codes[code] = codes.get(code, 0) + 1
                    time.sleep(0.2)  # an exporter's pause between batches

        sender = threading.Thread(target=good_traffic)
        slow = trickle(port, [("/api/audit", "application/json")] * a.max_connections,
                       a.good * 0.3 + 5, a.trickle, on_open=sender.start)
        sender.join()
        answered = slow["answered"] or "none answered"
        print(f"starve: --max-connections {a.max_connections} held by slow bodies ({answered}, "
              f"{slow['still_open']} still open at the end); {a.good} ordinary OTLP requests meanwhile: "
              f"{codes}, slowest {max(latencies):.2f} s")


def tiny_spans(a: argparse.Namespace, workdir: Path) -> None:
    body = H.tiny_spans(a.spans)
    with collector(workdir) as (proc, url, _log):
        rest = rss_mb(proc.pid)
        with PeakRss(proc.pid) as peak:
            t0 = time.perf_counter()
            r = httpx.post(f"{url}/v1/traces", content=body, headers=PB, timeout=600)
            took = time.perf_counter() - t0
            time.sleep(1.0)
        print(f"tiny-spans: one {len(body) / MiB:.1f} MiB request of {a.spans:,} spans: {r.status_code} in "
              f"{took:.1f} s ({reason(r)!r}); RSS {rest:.0f} MB at rest, peak {peak.peak:.0f} MB "
              f"(+{peak.peak - rest:.0f} MB)")


def _ingest_content_traces(url: str, n: int) -> None:
    docs = T.corpus(2000, size=1000)
    for start in range(0, n, 200):
        traces = [T.standard_trace(docs, i) for i in range(start, min(n, start + 200))]
        body = T.request([s for t in traces for s in t.spans()], release="content").SerializeToString()
        r = httpx.post(f"{url}/v1/traces", content=body, headers=PB, timeout=120)
        r.raise_for_status()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = httpx.get(f"{url}/metrics", timeout=30).text
        written = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                      if line.startswith('ragtrace_rows_written_total{table="queries"}'))
        if written >= n:
            return
        time.sleep(0.2)  # the writer is another process: poll its metrics


def content(a: argparse.Namespace, workdir: Path) -> None:
    with collector(workdir) as (proc, url, _log):
        _ingest_content_traces(url, a.content_traces)
        pages: list[dict[str, str | int]] = [{"content": "true", "limit": 100_000}, {"content": "true", "limit": 1000}]
        for params in pages:
            rest = rss_mb(proc.pid)
            with PeakRss(proc.pid) as peak:
                t0 = time.perf_counter()
                size, first = 0, b""
                with httpx.stream("GET", f"{url}/api/traces", params=params, timeout=600) as r:
                    for chunk in r.iter_bytes():
                        first = first or chunk
                        size += len(chunk)
                    code, cursor = r.status_code, r.headers.get("ragtrace-next-cursor")
                    head = first[:160] if code != 200 else b""
                took = time.perf_counter() - t0
            print(f"content: {a.content_traces} traces, GET /api/traces {params}: {code}, {size / 1e6:.1f} MB in "
                  f"{took:.1f} s{', next cursor' if cursor else ''}{f' ({head!r})' if head else ''}; RSS {rest:.0f} MB "
                  f"before, peak {peak.peak:.0f} MB")


def _large_body(a: argparse.Namespace) -> bytes:
    if a.large_shape == "tiny-spans":
        return H.tiny_spans(int(a.large_mb * MiB / 61))
    if a.large_shape == "ordinary":  # ragtrace traces, passages from a corpus of 2,000
        docs = T.corpus(2000, size=1000)
        per_trace = len(T.request(T.standard_trace(docs, 0).spans()).SerializeToString())
        traces = [T.standard_trace(docs, i) for i in range(int(a.large_mb * MiB / per_trace))]
        return T.request([s for t in traces for s in t.spans()]).SerializeToString()
    return H.large_values(int(a.large_mb * MiB))


def _pair(url: str, body: bytes) -> list[int | str]:
    """Two posts of ``body`` released at the same moment: their answers."""
    barrier = threading.Barrier(2)
    answers: list[int | str] = [0, 0]

    def send(k: int) -> None:
        barrier.wait()
        try:
            answers[k] = httpx.post(f"{url}/v1/traces", content=body, headers=PB, timeout=600).status_code
        except httpx.HTTPError as exc:
            answers[k] = type(exc).__name__

    threads = [threading.Thread(target=send, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(answers, key=str)


def reason(r: httpx.Response) -> str:
    """The readable part of an answer's body (an OTLP Status is protobuf)."""
    return "".join(c for c in r.content.decode("utf-8", "replace") if c.isprintable())[:200]


def two_large(a: argparse.Namespace, workdir: Path) -> None:
    body = _large_body(a)
    args = ["--max-body-bytes", str(max(64 * MiB, len(body) + MiB))]
    if a.large_inflight_mb:
        args += ["--max-inflight-bytes", str(a.large_inflight_mb * MiB)]
    with collector(workdir, *args) as (proc, url, _log):
        rest = rss_mb(proc.pid)
        with PeakRss(proc.pid, url if a.timeline else "") as peak:
            alone = [httpx.post(f"{url}/v1/traces", content=body, headers=PB, timeout=600).status_code
                     for _ in range(2)]
            rounds = [_pair(url, body) for _ in range(a.rounds)]
            time.sleep(2 if a.timeline else 0)  # the last rows' insert
        inflight = f"{a.large_inflight_mb} MiB" if a.large_inflight_mb else "its default"
        bound = a.large_inflight_mb or 512
        print(f"two-large: {len(body) / MiB:.1f} MiB ({a.large_shape}) on --max-inflight-bytes {inflight}: alone "
              f"{alone}; two at once, {a.rounds} rounds: {rounds}; RSS {rest:.0f} MB at rest, peak {peak.peak:.0f} MB "
              f"(rest + {peak.peak - rest:.0f}; the bound {bound} MiB = {bound * MiB / 1e6:.0f} MB)")
        if a.timeline:
            peak.print_timeline(rest)


def _stop(proc: subprocess.Popen[bytes], limit: float) -> tuple[float, int | None]:
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return time.monotonic() - t0, None
    return time.monotonic() - t0, code


def shutdown(a: argparse.Namespace, workdir: Path) -> None:
    timeout = a.shutdown_timeout
    body = H.tiny_spans(a.shutdown_spans)
    args = ["--shutdown-timeout", f"{timeout:g}s", "--max-inflight-bytes", str(8192 * MiB)]
    with collector(workdir / "decode", *args) as (proc, url, _log):
        answer: dict[str, Any] = {}

        def post() -> None:
            try:
                answer["code"] = httpx.post(f"{url}/v1/traces", content=body, headers=PB, timeout=600).status_code
            except httpx.HTTPError as exc:
                answer["code"] = type(exc).__name__

        sender = threading.Thread(target=post)
        sender.start()
        time.sleep(a.sigterm_after)
        took, code = _stop(proc, 150)
        sender.join()
        ended = code if code is not None else "nothing (killed at 150 s)"
        print(f"shutdown: SIGTERM {a.sigterm_after:g} s into a {a.shutdown_spans:,}-span request (--shutdown-timeout "
              f"{timeout:g}s): exited after {took:.1f} s with {ended}; the client got {answer.get('code')}")
    with collector(workdir / "read", *args) as (proc, url, _log):
        _ingest_content_traces(url, a.content_traces)
        got: dict[str, Any] = {"bytes": 0}
        server_gone = threading.Event()  # then drain what the socket buffers hold at full speed

        def slow_reader() -> None:
            try:
                with httpx.stream("GET", f"{url}/api/traces", params={"content": "true", "limit": 1000},
                                  timeout=600) as r:
                    got["code"] = r.status_code
                    for chunk in r.iter_raw(1024):
                        got["bytes"] += len(chunk)
                        if not server_gone.is_set():
                            time.sleep(0.05)  # a client reading 20 KB/s
                got["end"] = "complete"
            except httpx.HTTPError as exc:
                got["end"] = type(exc).__name__

        reader = threading.Thread(target=slow_reader)
        reader.start()
        time.sleep(3.0)
        took, code = _stop(proc, 150)
        server_gone.set()
        reader.join()
        print(f"shutdown: SIGTERM during a slowly read content listing (--shutdown-timeout {timeout:g}s): exited after "
              f"{took:.1f} s with {code if code is not None else 'nothing (killed at 150 s)'}; the reader got "
              f"{got.get('code')}, {got['bytes'] / 1e3:.0f} kB, then {got.get('end')}")
    with collector(workdir / "audit", *args) as (proc, url, _log):
        # a long synchronous read in a worker thread, which nothing can interrupt: an audit of every trace
        _ingest_content_traces(url, a.content_traces)
        audit: dict[str, Any] = {}

        def run_audit() -> None:
            t0 = time.monotonic()
            try:
                r = httpx.post(f"{url}/api/audit", json={"sample": a.content_traces, "stages": "retrieval"},
                               timeout=600)
                audit["code"] = r.status_code
            except httpx.HTTPError as exc:
                audit["code"] = type(exc).__name__
            audit["after"] = time.monotonic() - t0

        auditor = threading.Thread(target=run_audit)
        auditor.start()
        time.sleep(3.0)
        took, code = _stop(proc, 300)
        auditor.join()
        print(f"shutdown: SIGTERM 3 s into an audit of {a.content_traces} traces (--shutdown-timeout {timeout:g}s): "
              f"exited after {took:.1f} s with {code if code is not None else 'nothing (killed at 300 s)'}; the "
              f"client got {audit.get('code')} after {audit.get('after', 0):.1f} s")


_MEASURE = """
import sys
sys.path.insert(0, {root!r})
from tests import hostile_bodies as H, otlp_builders as T
from ragtrace_collector import request_cost as RC
from ragtrace_collector.ingest import decode_and_assemble

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

decode_and_assemble(H.tiny_spans(10), "application/x-protobuf", None, "t", 0, 1 << 30)  # imports done
body = {build}
counts = RC.count(body)
estimate = RC.decode_bytes(len(body), counts)
rest = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak (VmHWM) starts again from here
decode_and_assemble(body, "application/x-protobuf", None, "t", 0, 1 << 30)
print(len(body), status("VmHWM") - rest, estimate, counts.spans, counts.attributes, counts.values, counts.events)
"""

#: (shape, the body's expression in the measuring process, what its elements are)
_COST_SHAPES = [
    ("attribute-less spans", "H.tiny_spans(300_000)", "span"),
    ("tiny attributes", "H.tiny_attributes(3_000, 100)", "attribute"),
    ("long arrays", "H.long_array(50, 6_000)", "value"),
    ("events", "H.tiny_events(3_000, 50)", "event"),
    ("64 KB values", "H.large_values(48 << 20)", "byte"),
    ("ordinary traces", "T.request([s for i in range(1000) for s in T.standard_trace("
                        "T.corpus(20, size=1000, seed=i), i).spans()]).SerializeToString()", "byte"),
]


def cost(a: argparse.Namespace, workdir: Path) -> None:
    root = str(ROOT)
    for shape, build, unit in _COST_SHAPES:
        out = subprocess.run([sys.executable, "-c", _MEASURE.format(root=root, build=build)],
                             capture_output=True, text=True, timeout=600, check=True).stdout
        size, peak, estimate, spans, attributes, values, events = map(int, out.split())
        n = {"span": spans, "attribute": attributes, "value": values, "event": events, "byte": size}[unit]
        print(f"cost: {shape} ({size / MiB:.1f} MiB, {spans:,} spans, {attributes:,} attributes, {values:,} "
              f"values, {events:,} events): peak +{peak / MiB:.0f} MiB = {peak / n:,.2f} bytes per "
              f"{unit}; predicted {estimate / MiB:.0f} MiB ({estimate / peak:.2f} x the peak)")


_INSERT_MEASURE = """
import sys, tempfile, time
sys.path.insert(0, {root!r})
from tests import hostile_bodies as H, otlp_builders as T
from ragtrace_collector.metrics import Metrics
from ragtrace_collector.assemble import assemble_body
from ragtrace_collector.spool import Spool
from ragtrace_collector.writer import Writer
from ragtrace_store import open_store

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

tmp = tempfile.mkdtemp(prefix="ragtrace-insert-slices-")
store = open_store(tmp + "/store")
store.command("SYSTEM STOP MERGES")  # the insert's own memory, not the engine's merges after it
writer = Writer(store, Spool(tmp + "/spool", max_bytes=1 << 30, fsync=False), Metrics(),
                insert_slice_bytes={slice_bytes})
rows = assemble_body({build}, "t", int(time.time() * 1000))
rest = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak (VmHWM) starts again from here
t0 = time.perf_counter()
writer._insert([rows])
took = time.perf_counter() - t0
print(rows.nbytes, status("VmHWM") - rest, store.insert_statements, took)
"""

#: (batch, the body's expression in the measuring process)
_INSERT_SHAPES = [
    ("a 64 MiB request of 64 KB values", "H.large_values(64 << 20)"),
    ("8,000 spans of ordinary traces (a full batch)", "T.request([s for docs in [T.corpus(2000, size=1000)] "
                                                      "for i in range(2000) for s in T.standard_trace(docs, i)"
                                                      ".spans()]).SerializeToString()"),
]


def insert_slices(a: argparse.Namespace, workdir: Path) -> None:
    root = str(ROOT)
    for shape, build in _INSERT_SHAPES:
        for slice_mib in [int(x) for x in a.slice_mib.split(",")]:
            slice_bytes = slice_mib * MiB if slice_mib else 1 << 50
            out = subprocess.run([sys.executable, "-c", _INSERT_MEASURE.format(root=root, build=build,
                                                                               slice_bytes=slice_bytes)],
                                 capture_output=True, text=True, timeout=600, check=True).stdout
            nbytes, peak, statements, took = out.split()
            bound = f"slices of {slice_mib} MiB" if slice_mib else "one statement per table"
            print(f"insert-slices: {shape} ({int(nbytes) / MiB:.0f} MiB of rows), {bound}: {statements} statements, "
                  f"peak +{int(peak) / MiB:.0f} MiB over the rows, {float(took):.2f} s")


SCENARIOS: dict[str, Callable[[argparse.Namespace, Path], None]] = {
    "slow-bodies": slow_bodies, "starve": starve, "tiny-spans": tiny_spans, "content": content,
    "two-large": two_large, "shutdown": shutdown, "cost": cost, "insert-slices": insert_slices}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    ap.add_argument("--conns", type=int, default=300)
    ap.add_argument("--slow-seconds", type=float, default=55.0)
    ap.add_argument("--trickle", type=float, default=5.0, help="seconds between a slow body's bytes")
    ap.add_argument("--body-timeout", default="", help="passed to ragtrace serve (default: its own)")
    ap.add_argument("--max-connections", type=int, default=40)
    ap.add_argument("--good", type=int, default=20)
    ap.add_argument("--spans", type=int, default=1_082_334)
    ap.add_argument("--content-traces", type=int, default=3000)
    ap.add_argument("--large-mb", type=float, default=64.0)
    ap.add_argument("--large-shape", choices=["ordinary", "large-values", "tiny-spans"], default="ordinary")
    ap.add_argument("--large-inflight-mb", type=int, default=0, help="the server's --max-inflight-bytes (0: default)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slice-mib", default="0,8,16,32,64",
                    help="insert-slices: the slice bounds to measure, MiB (0: none)")
    ap.add_argument("--timeline", action="store_true",
                    help="two-large: also print RSS and the held bytes every 0.5 s in which RSS moved")
    ap.add_argument("--shutdown-spans", type=int, default=300_000)
    ap.add_argument("--shutdown-timeout", type=float, default=10.0)
    ap.add_argument("--sigterm-after", type=float, default=3.0)
    a = ap.parse_args()
    unknown = set(a.only.split(",")) - set(SCENARIOS)
    if unknown:
        ap.error(f"unknown scenarios {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="ragtrace-hostile-") as tmp:
        for name in a.only.split(","):
            SCENARIOS[name](a, Path(tmp) / name)


if __name__ == "__main__":
    main()
