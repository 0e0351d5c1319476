"""Schema migrations: idempotent on the real engine; the clustered variant parses and matches the
single-node one column for column.

No ClickHouse cluster (ZooKeeper/Keeper, remote_servers) can run here, so the clustered DDL is
checked as far as one engine can: every statement must parse (`EXPLAIN AST`), and with the
replication removed (Replicated* → plain engine, no ON CLUSTER) the local tables must apply and
carry exactly the columns, sorting keys and version columns of the single-node tables.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from ragtrace_store import Store, load_migrations

_REPL = re.compile(r"ReplicatedReplacingMergeTree\('[^']*',\s*'\{replica\}'(?:,\s*(\w+))?\)")


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
            assert "ON CLUSTER '{cluster}'" in stmt, stmt[:80]
            chdb_store.query_rows("EXPLAIN AST " + _sql(stmt, "ragtrace"))


def test_clustered_local_tables_match_the_single_node_schema(chdb_store: Any) -> None:
    db = f"clu_{uuid.uuid4().hex[:8]}"
    chdb_store.command(f"CREATE DATABASE {db}")
    try:
        distributed = {}
        for mig in load_migrations("cluster"):
            for stmt in mig.statements:
                sql = _sql(stmt, db).replace(" ON CLUSTER 'ragtrace_cluster'", "")
                m = re.search(r"CREATE TABLE IF NOT EXISTS \w+\.(\w+) AS \w+\.(\w+)\s+ENGINE = Distributed\("
                              r"'ragtrace_cluster', '\w+', '(\w+)', (.+)\)\s*$", sql, re.S)
                if m:
                    distributed[m.group(1)] = (m.group(2), m.group(3), m.group(4))
                    continue
                chdb_store.command(_REPL.sub(lambda r: f"ReplacingMergeTree({r.group(1) or ''})", sql))

        def tables(database: str) -> dict[str, Any]:
            rows = chdb_store.query_rows(
                "SELECT name, engine_full, sorting_key FROM system.tables WHERE database = {d:String}", {"d": database})
            cols = chdb_store.query_rows(
                "SELECT table, groupArray((name, type)) FROM (SELECT table, name, type FROM system.columns "
                "WHERE database = {d:String} ORDER BY table, position) GROUP BY table", {"d": database})
            by = {t: c for t, c in cols}
            return {n: (by[n], k, re.search(r"ReplacingMergeTree\((\w*)\)|ReplacingMergeTree", e).group(0))
                    for n, e, k in rows}

        single = {n: v for n, v in tables("ragtrace").items() if n != "schema_migrations"}
        local = tables(db)
        assert {"spans", "queries", "documents", "passages", "gold", "feedback", "labels"} <= set(single)
        for name, spec in single.items():
            assert f"{name}_local" in local, f"no clustered table for {name}"
            assert local[f"{name}_local"] == spec, name
            target, local_name, key = distributed[name]
            assert (target, local_name) == (f"{name}_local", f"{name}_local") and key
    finally:
        chdb_store.command(f"DROP DATABASE {db}")
