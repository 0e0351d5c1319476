"""Faults: the store goes away for a while; the collector is killed with SIGKILL mid-ingestion.

Acknowledged spans must all be in the store afterwards, exactly once (counted with FINAL and
against distinct keys), and replays and client retries must not double-count.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from ragtrace_store import open_store
from tests import otlp_builders as T

from ._server import free_port, running

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from chdb_http import ChdbHttpServer

RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))
PB = {"content-type": "application/x-protobuf"}


def _counts(store: Any, release: str) -> dict[str, tuple[int, int]]:
    """(rows under FINAL, distinct keys) per table, for one release's traces."""
    ids = f"(SELECT trace_id FROM {store.table('queries')} FINAL WHERE release = {{r:String}})"
    out = {}
    for table, key in (("queries", "trace_id"), ("spans", "trace_id, span_id"),
                       ("documents", "trace_id, stage, span_id, rank")):
        row = store.query_rows(f"SELECT count(), uniqExact({key}) FROM {store.table(table)} FINAL "
                               f"WHERE trace_id IN {ids}", {"r": release})[0]
        out[table] = (int(row[0]), int(row[1]))
    return out


def test_store_outage_spools_and_recovers_exactly(tmp_path: Path) -> None:
    server = ChdbHttpServer(tmp_path / "db")
    server.start()
    store = open_store(server.url)
    docs = T.corpus(40, size=200)
    traces = [T.standard_trace(docs, i) for i in range(12)]
    try:
        with running(store, str(tmp_path / "spool")) as (url, app):
            writer = app.state.writer
            writer.probe_max_interval = 1.0
            for tr in traces[:4]:
                assert httpx.post(f"{url}/v1/traces", content=T.request(tr.spans(), release="out").SerializeToString(),
                                  headers=PB).status_code == 200
            assert writer.flush(30)
            server.kill()  # the store disappears without a goodbye
            for tr in traces[4:]:
                body = T.request(tr.spans(), release="out").SerializeToString()
                assert httpx.post(f"{url}/v1/traces", content=body, headers=PB, timeout=30).status_code == 200
            # a client retry of an acknowledged request, while the store is down
            retry = T.request(traces[5].spans(), release="out").SerializeToString()
            assert httpx.post(f"{url}/v1/traces", content=retry, headers=PB).status_code == 200
            deadline = time.monotonic() + 30
            while writer.store_up and time.monotonic() < deadline:
                time.sleep(0.05)
            metrics = httpx.get(f"{url}/metrics").text
            assert "ragtrace_store_up 0" in metrics
            assert not writer.flush(0.5)
            assert any(p.suffix == ".wal" and p.stat().st_size for p in (tmp_path / "spool").iterdir())
            readyz = httpx.get(f"{url}/readyz")
            assert readyz.status_code == 503 and "unreachable" in readyz.json()["reason"]
            server.start()  # same data directory, same port
            assert writer.flush(60), "the spool was not replayed after the store returned"
            metrics = httpx.get(f"{url}/metrics").text
        assert "ragtrace_store_up 1" in metrics
        assert float(next(line.split()[1] for line in metrics.splitlines()
                          if line.startswith("ragtrace_spool_replayed_records_total"))) >= 1
        assert _counts(store, "out") == {"queries": (12, 12), "spans": (48, 48), "documents": (12 * 65, 12 * 65)}
        # and the read model, which collapses replays and retries without FINAL, reads each trace once, whole
        read = list(store.read_traces(release="out"))
        assert sorted(r.trace_id for r in read) == sorted(tr.trace_id for tr in traces)
        assert all((len(r.retrieved), len(r.context)) == (20, 5) for r in read)
        assert [p.name for p in (tmp_path / "spool").glob("*.wal")] == []  # nothing left to replay
    finally:
        store.close()
        server.stop()


def _serve(store: Path, spool: Path, port: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([RAGTRACE, "serve", "--store", str(store), "--port", str(port),
                             "--spool-dir", str(spool), *extra],
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def test_kill_9_during_ingestion_loses_nothing_acknowledged(tmp_path: Path) -> None:
    store_dir, spool, log = tmp_path / "store", tmp_path / "spool", tmp_path / "serve.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # A long batch interval keeps acknowledged requests in the spool only, so the kill lands while
    # they are in memory and on disk but not yet in the store.
    proc = _serve(store_dir, spool, port, log, "--batch-interval", "60s", "--batch-max-spans", "1000000",
                  "--ingest-workers", "1")
    T.wait_until_ready(url, proc, log)
    docs = T.corpus(50, size=300)
    acked: list[str] = []
    stop = threading.Event()

    def send() -> None:
        i = 0
        with httpx.Client(timeout=10) as client:
            while not stop.is_set() and i < 400:
                tr = T.standard_trace(docs, i)
                body = T.request(tr.spans(), release="k9").SerializeToString()
                try:
                    if client.post(f"{url}/v1/traces", content=body, headers=PB).status_code == 200:
                        acked.append(tr.trace_id)
                except httpx.HTTPError:
                    return  # the collector is gone: unacknowledged, the client would retry
                i += 1

    sender = threading.Thread(target=send)
    sender.start()
    deadline = time.monotonic() + 30
    while len(acked) < 25 and time.monotonic() < deadline:
        time.sleep(0.01)
    helpers = _children(proc.pid)
    assert helpers, "the ingest worker process should be running"
    proc.send_signal(signal.SIGKILL)  # mid-stream, the sender still running
    proc.wait(10)
    stop.set()
    sender.join(30)
    assert len(acked) >= 25
    assert list(spool.glob("*.wal")), "acknowledged requests must be in the spool"
    deadline = time.monotonic() + 20
    while any(os.path.exists(f"/proc/{pid}") for pid in helpers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in helpers if os.path.exists(f"/proc/{pid}")], "helper processes outlived serve"

    proc = _serve(store_dir, spool, port, log)
    try:
        T.wait_until_ready(url, proc, log)
        # while it serves, the embedded store is owned: direct readers are told what to do
        direct = subprocess.run([RAGTRACE, "traces", "--store", str(store_dir)], capture_output=True, text=True,
                                timeout=120)
        assert direct.returncode == 2
        assert "in use by another process" in direct.stderr and "--server" in direct.stderr
        found: set[str] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not set(acked) <= found:
            listed = subprocess.run([RAGTRACE, "traces", "--server", url, "--release", "k9", "--limit", "1000",
                                     "--json"], capture_output=True, text=True, timeout=120)
            assert listed.returncode == 0, listed.stderr
            found = {orjson.loads(line)["trace_id"] for line in listed.stdout.splitlines()}
            time.sleep(0.3)
        assert set(acked) <= found, f"{len(set(acked) - found)} acknowledged traces lost"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert time.monotonic() - t0 < 30
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # after it stopped, direct access works, with exactly one copy of everything
    store = subprocess.run([RAGTRACE, "traces", "--store", str(store_dir), "--release", "k9", "--limit", "1000",
                            "--json"], capture_output=True, text=True, timeout=120)
    assert store.returncode == 0, store.stderr
    objs = [orjson.loads(line) for line in store.stdout.splitlines()]
    assert len(objs) == len({o["trace_id"] for o in objs}) >= len(set(acked))
    one = objs[0]
    assert set(one) >= {"trace_id", "query_id", "query", "answer", "release", "service", "gold_ids", "retrieved",
                        "reranked", "context"}
    assert [d["rank"] for d in one["retrieved"]] == list(range(20)) and len(one["context"]) == 5
    assert set(one["context"][0]) == {"id", "rank", "score"}
    shown = subprocess.run([RAGTRACE, "traces", "show", one["trace_id"], "--store", str(store_dir)],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "passage" in shown.stdout and one["query"] in shown.stdout  # passage text is printed
    table = subprocess.run([RAGTRACE, "traces", "--store", str(store_dir), "--limit", "3"], capture_output=True,
                           text=True, timeout=120)
    assert table.returncode == 0 and "20/20/5" in table.stdout
    shutil.rmtree(tmp_path, ignore_errors=True)
    assert not os.path.exists(store_dir)
