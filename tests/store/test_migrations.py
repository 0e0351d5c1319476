"""Schema migrations: idempotent on the real engine; every statement of the clustered variant
parses. That the clustered variant (generated from the single-node DDL) matches it column for
column and setting for setting is checked in test_cluster_schema.py.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragtrace_store import Store, load_migrations


def _sql(stmt: str, db: str) -> str:
    return stmt.replace("{db}", db).replace("{cluster}", "ragtrace_cluster")


def test_migrate_is_idempotent(chdb_store: Any) -> None:
    db = f"mig_{uuid.uuid4().hex[:8]}"
    st = Store(chdb_store.client, db, location=chdb_store.location, embedded=True)
    st.lock = chdb_store.lock  # one engine, one lock
    applied = st.migrate()
    assert [m.version for m in applied] == [m.version for m in load_migrations("single")]
    assert st.migrate() == [] and st.pending_migrations() == []
    chdb_store.command(f"DROP DATABASE {db}")


def test_every_clustered_statement_parses(chdb_store: Any) -> None:
    cluster = load_migrations("cluster")
    assert [m.version for m in cluster] == [m.version for m in load_migrations("single")]
    for mig in cluster:
        for stmt in mig.statements:
            # a backfill runs once, through the Distributed tables (`ragtrace_store.migrations`)
            backfill = any(line.startswith("INSERT INTO {db}.") for line in stmt.splitlines())
            assert "ON CLUSTER '{cluster}'" in stmt or backfill, stmt[:80]
            chdb_store.query_rows("EXPLAIN AST " + _sql(stmt, "ragtrace"))


def _previous_schema(st: Store, version: int = 5) -> None:
    """``st``'s database as a store written before migration ``version``: every other migration
    applied and recorded, as `Store.migrate` records them."""
    from ragtrace_store import utc_now

    st.command(f"CREATE DATABASE IF NOT EXISTS {st.database}")
    st.command(f"CREATE TABLE IF NOT EXISTS {st.table('schema_migrations')} (version UInt32, name String, "
               "applied_at DateTime64(3, 'UTC')) ENGINE = ReplacingMergeTree ORDER BY version")
    for mig in load_migrations("single"):
        if mig.version == version:
            continue
        for stmt in mig.statements:
            st.command(_sql(stmt, st.database))
        st.insert("schema_migrations", [(mig.version, mig.name, utc_now())], ["version", "name", "applied_at"])


def _wait_for_mutations(st: Store, timeout: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while st.query_rows("SELECT count() FROM system.mutations WHERE database = {d:String} AND NOT is_done",
                        {"d": st.database})[0][0]:
        assert time.monotonic() < deadline, "MATERIALIZE PROJECTION did not finish"
        time.sleep(0.2)


@pytest.mark.parametrize("where", ["embedded", "server"])
def test_0005_on_a_store_written_by_the_previous_schema(chdb_store: Any, chdb_http_server: str, where: str) -> None:
    """Keys added to a store that already holds traces (duplicates and a gateway's root claimant
    included): the projections are built for the parts already there, the hash slice and the time
    window then read through them, and every reader returns what it returned before."""
    from ragtrace_store import SamplePlan, TraceFilter, open_store, sample_traces
    from tests.audit.test_sampling import BASE, build

    db = f"mig5_{uuid.uuid4().hex[:8]}"
    if where == "embedded":
        st = Store(chdb_store.client, db, location=chdb_store.location, embedded=True)
        st.lock = chdb_store.lock
    else:
        st = open_store(chdb_http_server.rsplit("/", 1)[0] + "/" + db, migrate=False)
    try:
        _previous_schema(st)
        assert [m.version for m in st.pending_migrations()] == [5]
        build(st, "t", 600, seed=5)
        # and a busier tenant, so a projection reads fewer marks than the table and the engine takes it
        st.command(f"INSERT INTO {st.table('queries')} (tenant, trace_id, span_id, release, start_time, root_priority, "
                   "received_at) SELECT 'bulk', lower(hex(sipHash128(number))), 'r', 'r1', "
                   "toDateTime64('2026-10-07 00:00:00', 3, 'UTC') + toIntervalSecond(number), 3, "
                   "toDateTime64('2026-10-08 00:00:00', 3, 'UTC') FROM numbers(40000)")
        window = TraceFilter(tenant="t", since=BASE + timedelta(minutes=20), until=BASE + timedelta(minutes=50))
        plan = SamplePlan(sample=25, stratify=("release",))
        by_hash = (f"SELECT count() FROM {st.table('queries')} WHERE tenant = 'bulk' AND xxHash64(trace_id) < "
                   f"{2**64 // 10} SETTINGS force_optimize_projection_name = 'by_hash'")
        by_time = (f"SELECT count() FROM {st.table('queries')} WHERE tenant = 'bulk' AND start_time >= "
                   "{s:DateTime64(3, 'UTC')} SETTINGS force_optimize_projection_name = 'by_time'")
        with pytest.raises(Exception, match="by_hash"):
            st.query_rows(by_hash)

        def reads() -> tuple[Any, ...]:
            return ([r.as_json() for r in st.read_traces(tenant="t")],
                    [r.trace_id for r in st.read_traces(tenant="t", since=window.since, until=window.until)],
                    sample_traces(st, TraceFilter(tenant="t"), plan).trace_ids,
                    sample_traces(st, window, SamplePlan(rate=0.5)).trace_ids)

        before = reads()
        assert [m.version for m in st.migrate()] == [5] and st.pending_migrations() == []
        _wait_for_mutations(st)
        parts = st.query_rows("SELECT count() FROM system.parts WHERE database = {d:String} AND table = 'queries' "
                              "AND active", {"d": db})[0][0]
        built = dict(st.query_rows(
            "SELECT name, count() FROM system.projection_parts WHERE database = {d:String} AND table = 'queries' "
            "AND active GROUP BY name", {"d": db}))
        assert parts > 1 and built == {"by_hash": parts, "by_time": parts}
        assert reads() == before
        assert 3000 < st.query_rows(by_hash)[0][0] < 5000
        assert st.query_rows(by_time, {"s": datetime(2026, 10, 7, 10, tzinfo=UTC)})[0][0] == 40000 - 36000
        # new rows get the projections as they are inserted
        build(st, "t2", 50, seed=6)
        assert len(sample_traces(st, TraceFilter(tenant="t2"), SamplePlan(rate=1.0)).trace_ids) > 40
        assert st.migrate() == []  # idempotent
    finally:
        st.command(f"DROP DATABASE IF EXISTS {db}")
        if where == "server":
            st.close()


def test_0005_on_a_cluster_builds_the_keys_on_every_shards_local_table() -> None:
    """The clustered 0005: the projections and their setting on `queries_local ON CLUSTER` (where the
    parts are), the column on the Distributed `queries` too, and nothing that needs a node of its own."""
    (mig,) = [m for m in load_migrations("cluster") if m.version == 5]
    heads = [s.split("\n", 1)[0] for s in mig.statements]
    local = "ALTER TABLE {db}.queries_local ON CLUSTER '{cluster}'"
    assert heads == [local, "ALTER TABLE {db}.queries ON CLUSTER '{cluster}'", local, local, local, local, local]
    body = [s.split("\n", 1)[1] for s in mig.statements]
    assert body[1].startswith("ADD COLUMN IF NOT EXISTS kind") and body[0] == body[1]
    assert [b.split()[0:3] for b in body[2:]] == [
        ["MODIFY", "SETTING", "deduplicate_merge_projection_mode"], ["ADD", "PROJECTION", "IF"],
        ["ADD", "PROJECTION", "IF"], ["MATERIALIZE", "PROJECTION", "by_time"], ["MATERIALIZE", "PROJECTION", "by_hash"]]


@pytest.mark.parametrize("where", ["embedded", "server"])
def test_0010_on_a_store_written_by_the_previous_schema(chdb_store: Any, chdb_http_server: str, where: str) -> None:
    """Query roots for a store that already holds traces (retried roots, a gateway's root claimant, a
    chain with a stage span, a bare retriever, parentless spans without any stage span): the backfill
    copies the roots that can be queries and no other, and the readers then return what the rule
    says, traces and order, as a plain recomputation in Python finds it."""
    from ragtrace_store import SamplePlan, TraceFilter, TraceListing, count_listing, open_store, sample_traces
    from tests.audit.test_sampling import BASE, build, query_winners, reference

    db = f"mig10_{uuid.uuid4().hex[:8]}"
    if where == "embedded":
        st = Store(chdb_store.client, db, location=chdb_store.location, embedded=True)
        st.lock = chdb_store.lock
    else:
        st = open_store(chdb_http_server.rsplit("/", 1)[0] + "/" + db, migrate=False)
    try:
        _previous_schema(st, 10)
        assert [m.version for m in st.pending_migrations()] == [10]
        rows, staged = build(st, "t", 400, seed=10, mark=False)
        st.command(f"INSERT INTO {st.table('queries')} (tenant, trace_id, span_id, start_time, root_priority, "
                   "received_at) SELECT 't', lower(hex(sipHash128(number, 'flood'))), 'x', "
                   "toDateTime64('2026-10-07 09:00:00', 3, 'UTC'), 1, now64(3) FROM numbers(3000)")
        assert [m.version for m in st.migrate()] == [10] and st.migrate() == []
        winners = query_winners(rows, staged)
        marked = {r[0] for r in st.query_rows(f"SELECT DISTINCT trace_id FROM {st.table('query_roots')}")}
        assert marked == {w.trace_id for w in winners}
        newest = sorted(winners, key=lambda w: (-w.start.timestamp(), w.trace_id))
        assert [r.trace_id for r in st.read_traces(tenant="t", limit=30)] == [w.trace_id for w in newest[:30]]
        assert count_listing(st, TraceListing(TraceFilter(tenant="t")), exact_up_to=None).queries == len(winners)
        plan = SamplePlan(sample=25, stratify=("release",))
        assert sample_traces(st, TraceFilter(tenant="t"), plan).trace_ids == reference(rows, staged, plan)
        window = TraceFilter(tenant="t", since=BASE + timedelta(minutes=20), until=BASE + timedelta(minutes=50))
        assert sorted(sample_traces(st, window, SamplePlan(rate=1.0)).trace_ids) == sorted(
            reference(rows, staged, SamplePlan(rate=1.0), since=window.since, until=window.until))
    finally:
        st.command(f"DROP DATABASE IF EXISTS {db}")
        if where == "server":
            st.close()
