"""Schema 0003: the single-node tables exist with a tenant column; the clustered variant parses."""

from __future__ import annotations

import re

from ragtrace_store import Store, load_migrations

REVIEW_TABLES = {"reviewers", "review_sessions", "review_queues", "review_items", "review_assignments",
                 "review_decisions"}


def _review_migration(variant: str) -> list[str]:
    mig = next(m for m in load_migrations(variant) if m.name == "review")
    assert mig.version == 3
    return list(mig.statements)


def test_single_node_tables_carry_tenant(store: Store) -> None:
    for table in REVIEW_TABLES:
        cols = {r[0] for r in store.query_rows(f"DESCRIBE TABLE {store.table(table)}")}
        assert "tenant" in cols, table


def test_cluster_variant_parses_and_matches_single(store: Store) -> None:
    statements = _review_migration("cluster")
    local = set()
    distributed = set()
    for stmt in statements:
        sql = stmt.replace("{db}", store.database)
        # EXPLAIN AST runs the real ClickHouse parser without needing a cluster or ZooKeeper.
        assert store.query_rows(f"EXPLAIN AST {sql}"), sql
        assert "ON CLUSTER '{cluster}'" in stmt
        name = re.search(r"CREATE TABLE IF NOT EXISTS \{db\}\.(\w+)", stmt)
        assert name
        if "ReplicatedReplacingMergeTree" in stmt:
            local.add(name.group(1).removesuffix("_local"))
        elif "Distributed(" in stmt:
            distributed.add(name.group(1))
    assert local == distributed == REVIEW_TABLES
    # same columns as the single-node variant, in the same order
    single = {re.search(r"\{db\}\.(\w+)", s).group(1): re.findall(r"^\s{4}(\w+)\s", s, re.M)  # type: ignore[union-attr]
              for s in _review_migration("single")}
    for stmt in statements:
        m = re.search(r"\{db\}\.(\w+)_local ON CLUSTER", stmt)
        if m:
            assert re.findall(r"^\s{4}(\w+)\s", stmt, re.M) == single[m.group(1)]
