"""`ragtrace store retention` removes passage text that no kept document uses.

Before, retention put a TTL on traces only: passages (text stored once per content hash, shared
by every trace that used it) were kept forever. Now each passage has a last_seen, which the
collector renews for every hash a written document uses (text or hash only), and retention keeps a
passage for its days plus a margin after that. Everything here runs on the real engine (chDB behind
ClickHouse's HTTP interface, in its own process) and through a real collector on loopback.
"""

from __future__ import annotations

import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from ragtrace_cli.commands.store import store_main
from ragtrace_collector.assemble import assemble
from ragtrace_collector.rows import COLUMNS, TIME_COLUMNS
from ragtrace_store import open_store, utc_now
from tests import otlp_builders as T
from tests.collector._server import running

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from chdb_http import ChdbHttpServer

PB = {"content-type": "application/x-protobuf"}
DAY_MS = 86_400_000


def _doc(name: str) -> T.Doc:
    return T.Doc(f"doc-{name}", f"passage {name}: " + "the text of a passage, " * 10, 0.5)


def _write_in_the_past(store: Any, trace: T.TraceSpec, release: str, at_ms: int) -> None:
    """What the collector wrote ``at_ms`` (rows from the real assembly, inserted as the writer does)."""
    spans = trace.spans()
    for s in spans:
        s.start_ns, s.end_ns = at_ms * 1_000_000, at_ms * 1_000_000 + 5_000_000
    rows = assemble(T.request(spans, release=release), "default", at_ms)
    for table in COLUMNS:
        cols = rows.columns(table)
        if table == "passages":
            cols = {**cols, "last_seen": cols["first_seen"]}
        if cols[COLUMNS[table][0]]:
            store.insert_columns(table, cols, TIME_COLUMNS | {"last_seen"})


def _passages(store: Any) -> dict[str, int]:
    """content hash -> last_seen (ms) as a reader sees it."""
    rows = store.query_rows(f"SELECT content_hash, toUnixTimestamp64Milli(last_seen) FROM "
                            f"{store.table('passages')} FINAL WHERE tenant = 'default'")
    return {h: int(ms) for h, ms in rows}


def _metric(app: Any, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in app.state.metrics.render().splitlines()
               if line.startswith(name))


def _expire(store: Any) -> None:
    # TTL is applied when parts merge; a final merge applies it now instead of eventually
    for table in ("documents", "queries", "spans", "passages"):
        store.command(f"OPTIMIZE TABLE {store.table(table)} FINAL")


def test_retention_removes_passage_text_that_no_kept_document_uses(tmp_path: Path) -> None:
    server = ChdbHttpServer(tmp_path / "engine")
    server.start()
    store = open_store(server.url, migrate=True)
    try:
        now = int(time.time() * 1000)
        a, b, c, d = (_doc(x) for x in "abcd")
        hashes = {name: T.doc_attrs("x", [doc])["x.0.document.content_hash"]
                  for name, doc in zip("abcd", (a, b, c, d), strict=True)}
        # 60 days ago a trace used passages a, b and c
        old = T.TraceSpec(query_id="old", retrieved=[a, b, c], reranked=[a, b, c], top_k=3)
        _write_in_the_past(store, old, "old", now - 60 * DAY_MS)
        assert set(_passages(store)) == {hashes["a"], hashes["b"], hashes["c"]}

        # today: one trace sends b's text, another only c's hash (content off), a third a new d
        with_text = T.TraceSpec(query_id="t1", retrieved=[b, d], reranked=[b, d], top_k=2)
        hash_only = T.TraceSpec(query_id="t2", retrieved=[c], reranked=[c], top_k=1, content=False)
        with running(store, str(tmp_path / "spool")) as (url, app):
            for tr in (with_text, hash_only):
                r = httpx.post(f"{url}/v1/traces", content=T.request(tr.spans(), release="new").SerializeToString(),
                               headers=PB, timeout=30)
                assert r.status_code == 200
            assert app.state.writer.flush(30)
            seen = _passages(store)
            assert seen[hashes["a"]] < now - 59 * DAY_MS  # nobody used a since
            assert min(seen[hashes["b"]], seen[hashes["c"]], seen[hashes["d"]]) >= now
            # renewing is cheap: the same passages again within the interval write nothing
            renewals = _metric(app, "ragtrace_passage_renewals_total")
            written = _metric(app, 'ragtrace_rows_written_total{table="passages"}')
            again = T.TraceSpec(query_id="t3", retrieved=[d, b], reranked=[b, d], top_k=2)
            r = httpx.post(f"{url}/v1/traces", content=T.request(again.spans(), release="new").SerializeToString(),
                           headers=PB, timeout=30)
            assert r.status_code == 200 and app.state.writer.flush(30)
            assert _metric(app, "ragtrace_passage_renewals_total") == renewals
            assert _metric(app, 'ragtrace_rows_written_total{table="passages"}') == written

        # The store was upgraded to last_seen (migration 0006) only 10 days ago: a's last_seen
        # predates it, so it is not trusted and a is kept until 10 + 30 + 2 days after the upgrade.
        migrated = utc_now() - timedelta(days=10)
        store.insert("schema_migrations", [(6, "passage_last_seen", migrated)], ["version", "name", "applied_at"])
        assert store_main(["retention", "--store", server.url, "--days", "30"]) == 0
        _expire(store)
        kept = {r.query_id: r for r in store.read_traces(with_content=True)}
        assert set(kept) == {"t1", "t2", "t3"}  # the 60-day-old trace is gone
        assert set(_passages(store)) == set(hashes.values())

        # migrated long ago: a's last_seen counts, and nothing kept uses a
        store.insert("schema_migrations", [(6, "passage_last_seen", utc_now() - timedelta(days=90))],
                     ["version", "name", "applied_at"])
        assert store_main(["retention", "--store", server.url, "--days", "30"]) == 0
        _expire(store)
        assert set(_passages(store)) == {hashes["b"], hashes["c"], hashes["d"]}
        kept = {r.query_id: r for r in store.read_traces(with_content=True)}
        assert kept["t2"].retrieved[0].content == c.content  # a hash-only document still shows its text
        assert [doc.content for doc in kept["t1"].retrieved] == [b.content, d.content]

        # --days 0 keeps everything from now on, passages included
        assert store_main(["retention", "--store", server.url, "--days", "0"]) == 0
        ddl = store.query_rows("SELECT create_table_query FROM system.tables WHERE database = 'ragtrace' "
                               "AND name = 'passages'")[0][0]
        assert "TTL" not in ddl
    finally:
        store.close()
        server.stop()


def test_the_writer_renews_last_seen_after_the_interval(chdb_store: Any, tmp_path: Path) -> None:
    # the same passage used again after the renewal interval: its last_seen moves, once
    tenant = f"renew-{uuid.uuid4().hex[:8]}"
    doc = _doc(tenant)
    later = {"s": 0.0}
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        writer = app.state.writer
        # the writer's clock, moved forward by hand instead of waiting 6 hours
        writer.clock = lambda: time.time() + later["s"]
        headers = {**PB, "authorization": "Bearer tok"}

        def send(hash_only: bool) -> int:
            tr = T.TraceSpec(retrieved=[doc], reranked=[doc], top_k=1, content=not hash_only)
            r = httpx.post(f"{url}/v1/traces", content=T.request(tr.spans()).SerializeToString(), headers=headers,
                           timeout=30)
            assert r.status_code == 200 and writer.flush(30)
            rows = chdb_store.query_rows(f"SELECT toUnixTimestamp64Milli(last_seen) FROM "
                                         f"{chdb_store.table('passages')} FINAL WHERE tenant = {{t:String}}",
                                         {"t": tenant})
            assert len(rows) == 1
            return int(rows[0][0])

        first = send(hash_only=False)
        assert send(hash_only=True) == first  # within the interval: nothing renewed
        later["s"] = writer.passage_refresh + 3600
        renewed = send(hash_only=True)
        assert renewed >= first + writer.passage_refresh * 1000
        assert send(hash_only=True) == renewed
