"""The readers on a two-shard cluster of the real engine, beside the same data on one node.

Run by tests/store/test_cluster_reads.py in a process of its own (an embedded engine takes its
configuration once per process): ``python tests/store/cluster_engine.py DIR`` prints one JSON object,
``{reader: [single-node result, cluster result]}``, each result a value or ``"error: ..."``.

What is real: chDB's engine, its Distributed table engine, the schema `load_migrations("cluster")`
generates (every ``_local`` table, projection and Distributed table), the default
``distributed_product_mode = 'deny'``, and a cluster ``two`` of two shards, each read and written by
the Distributed engine as a shard of its own. What is not: both shards are this one process (a
replica on localhost is read in place, not over the network), so they share one set of ``_local``
tables, and every row written once is read once by each shard, as if it had been written again on
the other one. Readers that collapse a trace's rows by key, as every trace and label reader must
(retried batches write rows twice on one node too), return the single-node result anyway; a raw
count of rows would be doubled. Replicated engines and ``ON CLUSTER`` need Keeper, which no package
here provides: they are rewritten to the plain engine and a local statement.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import astuple
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

CLUSTER = "two"
CONFIG = f"""<clickhouse>
  <!-- a replica on this host and port is the engine itself: read and written in place -->
  <tcp_port>9000</tcp_port>
  <remote_servers>
    <{CLUSTER}>
      <shard><replica><host>localhost</host><port>9000</port></replica></shard>
      <shard><replica><host>127.0.0.1</host><port>9000</port></replica></shard>
    </{CLUSTER}>
  </remote_servers>
</clickhouse>
"""
#: a replicated engine's clause, ``Replicated<X>MergeTree(path, replica, ``: what needs Keeper
REPLICATED = re.compile(r"\bReplicated(\w*MergeTree)\('((?:[^'\\]|\\.)*)', '((?:[^'\\]|\\.)*)'(?:, )?")
TENANT = "cluster"
COLLECTED = "cluster-otlp"  # the tenant of the traces written through the collector


def cluster_schema(client: Any, database: str, versions: range) -> int:
    """The generated clustered DDL of ``versions``, run on this one node (Keeper-less); returns the
    statements run."""
    from ragtrace_store import load_migrations

    client.command(f"CREATE DATABASE IF NOT EXISTS {database}")
    n = 0
    for mig in load_migrations("cluster"):
        if mig.version not in versions:
            continue
        for stmt in mig.statements:
            sql = REPLICATED.sub(lambda m: f"{m.group(1)}(", stmt.replace(" ON CLUSTER '{cluster}'", ""))
            client.command(sql.replace("{cluster}", CLUSTER).replace("{db}", database))
            n += 1
    return n


def collect(store: Any, spool: Path) -> None:
    """Twelve SDK-shaped traces (candidates, rerank, context, answer) through the collector's writer."""
    import otlp_builders as otlp

    from ragtrace_collector.ingest import decode_and_assemble
    from ragtrace_collector.metrics import Metrics
    from ragtrace_collector.spool import Spool
    from ragtrace_collector.writer import Writer

    docs = otlp.corpus(40, size=200)
    traces = [otlp.standard_trace(docs, i, trace_id=f"{i + 1:032x}", gold=[docs[i].id]) for i in range(12)]
    body = otlp.request([span for tr in traces for span in tr.spans()]).SerializeToString()
    received_ms = int(datetime(2026, 11, 2, tzinfo=UTC).timestamp() * 1000)
    rows, spooled = decode_and_assemble(body, "application/x-protobuf", None, COLLECTED, received_ms, 1 << 26)
    writer = Writer(store, Spool(spool, max_bytes=1 << 26), Metrics())
    writer.start()
    writer.submit(COLLECTED, received_ms, spooled, rows)
    if not writer.flush(60) or not writer.stop():
        raise RuntimeError(f"the collector's writer did not write its batch to {store.database}")


def main(where: Path) -> None:
    import clickhouse_connect
    from audit.fixtures import KeywordGrounding, scenario, write_traces

    from ragtrace_evaluator.audit.run import run_audit
    from ragtrace_evaluator.compare.records import load_pair, releases_manifests
    from ragtrace_review.auth import add_reviewer
    from ragtrace_review.explorer.series import dashboard_series
    from ragtrace_review.explorer.trace_list import TraceListQuery, list_traces
    from ragtrace_review.queues import enqueue, get_item, next_item, progress, record_decision
    from ragtrace_store import SamplePlan, Store, TraceFilter, count_traces, read_labels, sample_traces

    where.mkdir(parents=True, exist_ok=True)
    (where / "config.xml").write_text(CONFIG)
    client = clickhouse_connect.get_client(interface="chdb", path=str(where / "data"), tz_mode="aware",
                                           chdb_options={"config-file": str(where / "config.xml")})
    # a write through the Distributed table reaches its shard before the statement returns
    client.set_client_setting("distributed_foreground_insert", 1)
    shards = client.query(f"SELECT count(), sum(is_local) FROM system.clusters WHERE cluster = '{CLUSTER}'")
    single = Store(client, "single", location="single", embedded=True)
    single.migrate()
    # the cluster's store is written by the schema before migration 0005 (the read keys), then migrated
    statements = cluster_schema(client, "ragtrace", range(1, 5))
    # opened as the commands that read open it, without saying it is a cluster (as `open_store`
    # does for a server); it finds out from its tables once they exist
    cluster = Store(client, "ragtrace", location="cluster", embedded=True)
    adopted = [cluster.adopt_cluster(), cluster.variant, cluster.cluster]

    # two releases asking the same questions (query ids shared, so compare pairs them); the same
    # traces again under a second root claimant (an HTTP span, priority 1), as retried batches leave them
    traces = []
    for i in range(3):
        for release in ("r1", "r2"):
            for name, tr in scenario(f"{release}-{i}", release=release).items():
                tr.query_id = f"q-{i}-{name}"
                tr.start = datetime(2026, 11, 1, 12, tzinfo=UTC) + timedelta(minutes=10 * i)
                traces.append(tr)
    for st in (single, cluster):
        write_traces(st, TENANT, traces, root_priority=3)
        write_traces(st, TENANT, traces[:8], root_priority=1)
    # MATERIALIZE PROJECTION is a background mutation: waited for, so the check of its parts below
    # does not race it (readers are right either way: a part without its projection is read in order)
    client.set_client_setting("mutations_sync", 2)
    statements += cluster_schema(client, "ragtrace", range(5, 10_000))
    # and OTLP spans as the collector writes them (its native walk, its writer: Arrow inserts)
    for st in (single, cluster):
        collect(st, where / f"spool-{st.database}")
    for st in (single, cluster):
        for release in ("r1", "r2"):
            run_audit(st, tenant=TENANT, release=release, grounding=KeywordGrounding(), relevance_labeller=None)

    everyone, r2 = TraceFilter(tenant=TENANT), TraceFilter(tenant=TENANT, release="r2")
    window = TraceFilter(tenant=TENANT, since=datetime(2026, 11, 1, 12, 5, tzinfo=UTC),
                         until=datetime(2026, 11, 1, 12, 25, tzinfo=UTC))

    def compare(st: Store) -> Any:
        found = releases_manifests(st, ["r1", "r2"], tenant=TENANT)
        a, b = load_pair(st, ("r1", found["r1"][0]), ("r2", found["r2"][0]), tenant=TENANT)
        return [sorted((x.query_id, x.trace_id, x.failure_mode, x.passed) for x in side.labels)
                for side in (a, b)] + [sorted((*a.unpaired, *b.unpaired))]

    def review(st: Store) -> Any:
        # a queue of r1's labels for two reviewers each, worked to the end by three reviewers
        added = enqueue(st, "k2", None, per_mode=3, reviewers=2, tenant=TENANT,
                        manifest_id=releases_manifests(st, ["r1"], tenant=TENANT)["r1"][0]).total_added
        decided: dict[str, list[str]] = {}
        for name in ("alice", "bob", "carol"):
            reviewer, _token = add_reviewer(st, name, tenant=TENANT)
            decided[name] = []
            while (t := next_item(st, reviewer, "k2")) is not None:
                item = get_item(st, tenant=TENANT, queue="k2", trace_id=t)
                assert item is not None
                gen = item.record.generation
                record_decision(st, reviewer, "k2", t, failure_mode="ok",
                                claims=["entailed"] * (len(gen.claims) if gen is not None else 0))
                decided[name].append(t)
        # progress() counts the queue's rows, which both shards here read (each item twice): its
        # numbers are doubled on this cluster, not on a real one, so only the items it finds complete
        return [added, sorted(decided["alice"]), sorted(decided["bob"]), decided["carol"],
                progress(st, tenant=TENANT, queue="k2").complete]

    def dashboard(st: Store) -> Any:
        series = dashboard_series(st, tenant=TENANT, manifest_id=releases_manifests(st, ["r2"], tenant=TENANT)["r2"][0])
        return [series.bucket, list(series.releases), [repr(b) for b in series.buckets]]

    readers: dict[str, Callable[[Store], Any]] = {
        "read_traces": lambda st: sorted((r.trace_id, r.release, r.query_id) for r in st.read_traces(tenant=TENANT)),
        "the collector's traces, read": lambda st: sorted(
            (r.trace_id, r.query_id, [d.content for d in r.retrieved], [d.id for d in r.reranked],
             [d.id for d in r.context], r.answer, sorted(r.gold_ids))
            for r in st.read_traces(tenant=COLLECTED, with_content=True)),
        "read_traces release, limit": lambda st: [r.trace_id for r in st.read_traces(tenant=TENANT, release="r1",
                                                                                       limit=5)],
        "read_traces with content": lambda st: sorted(
            (r.trace_id, [d.content for d in r.retrieved], [d.id for d in r.context])
            for r in st.read_traces(tenant=TENANT, with_content=True)),
        "count_traces release": lambda st: astuple(count_traces(st, r2)),
        "count_traces window": lambda st: astuple(count_traces(st, window)),
        "sample rate": lambda st: sample_traces(st, everyone, SamplePlan(rate=0.5)).trace_ids,
        "sample N": lambda st: sample_traces(st, everyone, SamplePlan(sample=7)).trace_ids,
        "sample per release": lambda st: sample_traces(st, everyone, SamplePlan(sample=4, stratify=("release",))
                                                       ).trace_ids,
        "sample per release, shard 1/2": lambda st: sample_traces(
            st, everyone, SamplePlan(sample=4, stratify=("release",), shard=(1, 2))).trace_ids,
        "sample of a release": lambda st: sample_traces(st, r2, SamplePlan(sample=5)).trace_ids,
        "sample of a window": lambda st: sample_traces(st, window, SamplePlan(rate=1.0)).trace_ids,
        "read_labels": lambda st: sorted((r.trace_id, r.release, r.failure_mode.value)
                                         for r in read_labels(st, tenant=TENANT)),
        "compare's read": compare,
        "trace list, release": lambda st: [(r.trace_id, r.failure_mode) for r in list_traces(
            st, TraceListQuery(tenant=TENANT, release="r2", limit=6)).rows],
        "trace list, window, a mode": lambda st: [r.trace_id for r in list_traces(
            st, TraceListQuery(tenant=TENANT, since=window.since, until=window.until, mode="fabrication",
                               manifest_id=releases_manifests(st, ["r1"], tenant=TENANT)["r1"][0])).rows],
        "the dashboard's series": dashboard,
        "a review queue worked to the end": review,
    }
    # migration 0005's projections exist on the local tables: the parts written before it have them now
    projected = client.query("SELECT groupUniqArray(name) FROM system.projection_parts WHERE database = 'ragtrace' "
                             "AND table = 'queries_local' AND active").result_rows[0][0]
    out: dict[str, Any] = {"_shards": list(shards.result_rows[0]), "_statements": statements, "_adopted": adopted,
                           "_projections": sorted(projected)}
    for name, read in readers.items():
        got = []
        for st in (single, cluster):
            try:
                got.append(json.loads(json.dumps(read(st), default=str)))
            except Exception as exc:  # reported, so the test names the reader and the engine's reason
                got.append(f"error: {str(exc).splitlines()[0][:400]}")
        out[name] = got
    print(json.dumps(out))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures' modules
    main(Path(sys.argv[1]))
