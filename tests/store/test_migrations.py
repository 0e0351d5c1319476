"""Schema migrations: idempotent on the real engine; every statement of the clustered variant
parses. That the clustered variant (generated from the single-node DDL) matches it column for
column and setting for setting is checked in test_cluster_schema.py.
"""

from __future__ import annotations

import uuid
from typing import Any

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
            assert "ON CLUSTER '{cluster}'" in stmt, stmt[:80]
            chdb_store.query_rows("EXPLAIN AST " + _sql(stmt, "ragtrace"))
