"""What the collector stores must be what the client sent, exactly.

Each test reproduces a fault against a real collector on loopback writing to the real engine:
a span re-sent with fewer documents, a gzip body of several members, query ids with spaces in a
reference import, and the spool after a clean SIGTERM.
"""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from ragtrace_cli.commands.audit import labels_main
from ragtrace_store import open_store
from tests import otlp_builders as T
from tests.collector._server import running

RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))
PB = {"content-type": "application/x-protobuf"}


def _post(url: str, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{url}/v1/traces", content=body, headers={**PB, **(headers or {})}, timeout=30)


def _one(store: Any, release: str, trace_id: str) -> Any:
    found = list(store.read_traces(release=release, trace_ids=[trace_id], with_content=True))
    assert len(found) == 1
    return found[0]


def test_a_span_resent_with_fewer_documents_keeps_only_the_new_list(chdb_store: Any, tmp_path: Path) -> None:
    release = f"resend-{uuid.uuid4().hex[:8]}"
    docs = T.corpus(40, size=200)
    first = T.standard_trace(docs, 1)
    # the same trace and span ids, re-sent (a retry through another pipeline that dropped
    # documents): 8 candidates instead of 20, 3 reranked instead of 20, no supplied context
    again = T.TraceSpec(trace_id=first.trace_id, query=first.query, query_id=first.query_id,
                        retrieved=[T.Doc(f"new-{j}", docs[j].content, 0.5) for j in range(8)],
                        reranked=[T.Doc(f"new-{j}", docs[j].content, 0.4) for j in range(3)], top_k=5,
                        context=[])
    with running(chdb_store, str(tmp_path / "spool")) as (url, app):
        assert _post(url, T.request(first.spans(), release=release).SerializeToString()).status_code == 200
        assert app.state.writer.flush(30)
        before = _one(chdb_store, release, first.trace_id)
        assert (len(before.retrieved), len(before.reranked), len(before.context)) == (20, 20, 5)
        assert _post(url, T.request(again.spans(), release=release).SerializeToString()).status_code == 200
        assert app.state.writer.flush(30)
    after = _one(chdb_store, release, first.trace_id)
    assert [d.id for d in after.retrieved] == [f"new-{j}" for j in range(8)]
    assert [d.rank for d in after.retrieved] == list(range(8))
    assert [d.id for d in after.reranked] == ["new-0", "new-1", "new-2"]
    # the re-sent generation span supplied no documents: the earlier 5 must not survive either
    assert all(not d.id.startswith("doc-") for d in after.context)
    assert after.retrieved[0].content == docs[0].content


def test_a_multi_member_gzip_body_is_decoded_whole(chdb_store: Any, tmp_path: Path) -> None:
    release = f"gzip-{uuid.uuid4().hex[:8]}"
    docs = T.corpus(40, size=200)
    traces = [T.standard_trace(docs, i) for i in range(2)]
    # Concatenated protobuf messages are one message whose repeated fields are joined, and RFC
    # 1952 allows a gzip file of several members (what `cat a.gz b.gz` or a streaming
    # compressor writes): the request holds both traces.
    body = b"".join(gzip.compress(T.request(t.spans(), release=release).SerializeToString()) for t in traces)
    with running(chdb_store, str(tmp_path / "spool")) as (url, app):
        r = _post(url, body, {"content-encoding": "gzip"})
        assert r.status_code == 200, r.text
        assert app.state.writer.flush(30)
        # a member cut short is a corrupt body, not a shorter request
        cut = body[: len(body) - 20]
        bad = _post(url, cut, {"content-encoding": "gzip"})
        assert bad.status_code == 400 and "gzip" in bad.text
    got = {r.trace_id for r in chdb_store.read_traces(release=release)}
    assert got == {t.trace_id for t in traces}


def test_reference_import_keeps_query_ids_as_the_collector_does(chdb_http_server: str, tmp_path: Path) -> None:
    tenant = f"refs-{uuid.uuid4().hex[:8]}"
    release = f"refs-{uuid.uuid4().hex[:8]}"
    docs = T.corpus(20, size=100)
    # query ids are opaque: the SDK and the collector keep " q 7 " as sent, spaces included
    odd = replace(T.standard_trace(docs, 7), query_id=" q 7 ")
    plain = replace(T.standard_trace(docs, 8), query_id="q8")
    store = open_store(chdb_http_server, migrate=True)
    try:
        with running(store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
            for tr in (odd, plain):
                r = httpx.post(f"{url}/v1/traces", content=T.request(tr.spans(), release=release).SerializeToString(),
                               headers={**PB, "authorization": "Bearer tok"}, timeout=30)
                assert r.status_code == 200
            assert app.state.writer.flush(30)
        assert {r.query_id for r in store.read_traces(tenant=tenant)} == {" q 7 ", "q8"}
        refs = tmp_path / "refs.jsonl"
        refs.write_text(json.dumps({"query_id": " q 7 ", "reference": "seven"}) + "\n"
                        + json.dumps({"query_id": "q8 ", "reference": "eight"}) + "\n", encoding="utf-8")
        assert labels_main(["import", str(refs), "--store", chdb_http_server, "--tenant", tenant]) == 0
        got = {r.query_id: r.reference for r in store.read_traces(tenant=tenant)}
        # " q 7 " matches itself; "q8 " is another id than "q8" (not silently merged with it)
        assert got == {" q 7 ": "seven", "q8": None}
    finally:
        store.close()


def test_a_clean_sigterm_leaves_nothing_to_replay(tmp_path: Path) -> None:
    store_dir, spool, log = tmp_path / "store", tmp_path / "spool", tmp_path / "serve.log"
    port = T.free_port()
    url = f"http://127.0.0.1:{port}"
    docs = T.corpus(30, size=200)

    def serve() -> subprocess.Popen[bytes]:
        return subprocess.Popen([RAGTRACE, "serve", "--store", str(store_dir), "--port", str(port),
                                 "--spool-dir", str(spool), "--batch-interval", "0.05s"],
                                stdout=log.open("ab"), stderr=subprocess.STDOUT)

    proc = serve()
    try:
        T.wait_until_ready(url, proc, log)
        for i in range(5):
            body = T.request(T.standard_trace(docs, i).spans(), release="sigterm").SerializeToString()
            assert _post(url, body).status_code == 200
        # every request is written (queries rows counted by the collector itself)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            text = httpx.get(f"{url}/metrics", timeout=10).text
            if 'ragtrace_rows_written_total{table="queries"} 5' in text:
                break
            time.sleep(0.05)  # another process: poll its metrics
        else:
            raise AssertionError("the collector did not write the five queries")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert sorted(p.name for p in spool.glob("*.wal")) == [], "a clean stop left a segment to replay"

    proc = serve()
    try:
        T.wait_until_ready(url, proc, log)
        text = httpx.get(f"{url}/metrics", timeout=10).text
        replayed = [line for line in text.splitlines() if line.startswith("ragtrace_spool_replayed_records_total")]
        assert all(float(line.split()[-1]) == 0 for line in replayed), replayed
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "replaying spooled requests" not in log.read_text()
