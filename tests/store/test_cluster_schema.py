"""The clustered schema is generated from the single-node DDL (`ragtrace_store.migrations`): on the real
engine, the two agree column for column and setting for setting, and the check can fail.

No Keeper exists here, and the embedded store of this process knows no cluster (not even
`test_shard_localhost`; tests/store/test_cluster_reads.py runs one of its own in another process,
configured with a two-shard cluster, and the readers on it). The check therefore applies the
single-node DDL in one throwaway database and the clustered DDL in another after the one
transformation this engine cannot run without Keeper (``Replicated*MergeTree(path, replica, args)`` becomes
``*MergeTree(args)``, ``ON CLUSTER`` goes), compares `system.columns` and `system.tables` table by
table, and checks each Distributed statement through the real parser (`formatQuerySingleLine`): its
source table, its target, and a sharding key the engine types as an integer over the local table.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragtrace_store import StoreError, load_migrations
from ragtrace_store.migrations import cluster_statements

from .cluster_engine import REPLICATED as _REPLICATED

CLUSTER = "ragtrace_cluster"
RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))

_COLUMNS = ("name", "type", "position", "default_kind", "default_expression", "compression_codec", "comment")
_TABLE = ("engine", "engine_full", "sorting_key", "partition_key", "primary_key", "sampling_key",
          "create_table_query")
_DISTRIBUTED = re.compile(r"^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+) ON CLUSTER (\w+) AS (\w+)\.(\w+) "
                          r"ENGINE = Distributed\('(\w+)', '(\w+)', '(\w+)', (.+)\)$")
_ALTER = re.compile(r"^ALTER TABLE (\w+)\.(\w+) ON CLUSTER (\w+) (.+)$")
# the engine prints an ALTER's actions as "(ACTION), (ACTION)"; each starts with one of these verbs
_ACTION = re.compile(r"\), \((?=(?:ADD|DROP|MODIFY|RENAME|COMMENT|MATERIALIZE|CLEAR|RESET|REMOVE) )")
_COLUMN_ACTION = re.compile(r"^(ADD|DROP|MODIFY|RENAME|COMMENT) COLUMN ")


def _statements(variant: str) -> list[str]:
    return [s for m in load_migrations(variant) for s in m.statements]


def _one_line(store: Any, sql: str) -> str:
    """The statement as the engine's own parser prints it (no comments, canonical spacing)."""
    return str(store.query_rows("SELECT formatQuerySingleLine({q:String})", {"q": sql})[0][0])


def schema_differences(store: Any, single: Sequence[str], cluster: Sequence[str]) -> list[str]:
    """Every way the clustered DDL ``cluster`` fails to be the single-node DDL ``single`` made
    replicated + distributed; empty when they agree. Uses two throwaway databases in ``store``."""
    tag = uuid.uuid4().hex[:8]
    sdb, cdb = f"schema_single_{tag}", f"schema_cluster_{tag}"
    problems: list[str] = []
    paths: dict[str, tuple[str, str]] = {}
    distributed: dict[str, tuple[str, ...]] = {}
    # column actions of the ALTERs, per table: run on the replicated twin, and expected on the
    # Distributed table too (which chDB cannot create, so only what it would receive is compared)
    local_columns: dict[str, list[str]] = {}
    dist_columns: dict[str, list[str]] = {}
    try:
        for db in (sdb, cdb):
            store.command(f"CREATE DATABASE {db}")
        for stmt in single:
            store.command(stmt.replace("{db}", sdb))
        for stmt in cluster:
            sql = _one_line(store, stmt.replace("{db}", cdb).replace("{cluster}", CLUSTER))
            if sql.startswith("ALTER TABLE "):
                a = _ALTER.match(sql)
                if not a or a.group(1) != cdb or a.group(3) != CLUSTER:
                    problems.append(f"not an ALTER ... ON CLUSTER of this database: {sql[:80]}")
                    continue
                table, actions = a.group(2), a.group(4)
                parts = _ACTION.split(actions.removeprefix("(").removesuffix(")"))
                columns = [x for x in parts if _COLUMN_ACTION.match(x)]
                if table.endswith("_local"):
                    store.command(f"ALTER TABLE {cdb}.{table} {actions}")
                    local_columns.setdefault(table.removesuffix("_local"), []).extend(columns)
                elif table not in distributed:
                    problems.append(f"{table}: ALTER of a Distributed table that does not exist")
                elif len(columns) != len(parts):
                    problems.append(f"{table}: the Distributed table's ALTER has non-column actions: {actions}")
                else:
                    dist_columns.setdefault(table, []).extend(columns)
                continue
            if sql.startswith(f"INSERT INTO {cdb}."):
                continue  # a backfill: rows, through the Distributed tables; nothing of the schema
            if sql.startswith("CREATE MATERIALIZED VIEW IF NOT EXISTS "):
                if f" ON CLUSTER {CLUSTER} " not in sql:
                    problems.append(f"no ON CLUSTER: {sql[:80]}")
                view = re.match(r"CREATE MATERIALIZED VIEW IF NOT EXISTS \w+\.(\w+)", sql).group(1)  # type: ignore[union-attr]
                try:  # the engine's refusal (a target it cannot find here: not a local table) is the finding
                    store.command(sql.replace(f" ON CLUSTER {CLUSTER}", ""))
                except Exception as exc:
                    problems.append(f"{view.removesuffix('_local')}: the clustered view does not run: {str(exc)[:120]}")
                continue
            if not sql.startswith("CREATE TABLE IF NOT EXISTS "):
                problems.append(f"not an idempotent CREATE TABLE: {sql[:80]}")
                continue
            if f" ON CLUSTER {CLUSTER} " not in sql:
                problems.append(f"no ON CLUSTER: {sql[:80]}")
            d = _DISTRIBUTED.match(sql)
            if d:
                distributed[d.group(2)] = d.groups()
                continue
            r = _REPLICATED.search(sql)
            name = re.match(r"CREATE TABLE IF NOT EXISTS \w+\.(\w+)", sql).group(1)  # type: ignore[union-attr]
            if not r:
                problems.append(f"{name}: neither a replicated table nor a Distributed one")
                continue
            paths[name] = (r.group(2), r.group(3))
            local = _REPLICATED.sub(lambda x: f"{x.group(1)}(", sql).replace(f" ON CLUSTER {CLUSTER}", "")
            store.command(local)
            store.command(local)  # idempotent

        def tables(db: str) -> dict[str, dict[str, Any]]:
            rows = store.query_rows(f"SELECT name, {', '.join(_TABLE)} FROM system.tables "
                                    "WHERE database = {d:String}", {"d": db})
            cols = store.query_rows(f"SELECT table, {', '.join(_COLUMNS)} FROM system.columns "
                                    "WHERE database = {d:String} ORDER BY table, position", {"d": db})
            out = {r[0]: dict(zip(_TABLE, r[1:], strict=True)) | {"columns": []} for r in rows}
            for c in cols:
                out[c[0]]["columns"].append(tuple(c[1:]))
            for name, spec in out.items():  # the table's own name is the one thing allowed to differ
                spec["create_table_query"] = spec["create_table_query"].replace(f"{db}.{name} ", "<table> ")
                if spec["engine"] == "MaterializedView":
                    # and a view's tables: the clustered one reads and writes the local tables
                    query = spec["create_table_query"].replace(f"{db}.", "<db>.")
                    spec["tables"] = re.findall(r"<db>\.(\w+)", query)
                    spec["create_table_query"] = re.sub(r"(<db>\.\w+)_local\b", r"\1", query)
            return out

        s_tables, c_tables = tables(sdb), tables(cdb)
        for name, spec in sorted(s_tables.items()):
            twin = c_tables.get(f"{name}_local")
            if twin is None:
                problems.append(f"{name}: no {name}_local in the clustered schema")
                continue
            for c in sorted(set(spec["columns"]) ^ set(twin["columns"]), key=lambda c: (c[2], c[0])):
                side = "single-node only" if c in spec["columns"] else "clustered only"
                problems.append(f"{name}: column {c} is {side}")
            for field in _TABLE:
                if spec[field] != twin[field]:
                    problems.append(f"{name}: {field} differs: {spec[field]!r} vs {twin[field]!r}")
            if spec["engine"] == "MaterializedView":  # on every node, over its local tables; nothing on top
                if not all(t.endswith("_local") for t in twin["tables"]):
                    problems.append(f"{name}: the clustered view reads or writes {twin['tables']}, not local tables")
                continue
            dist = distributed.get(name)
            if dist is None:
                problems.append(f"{name}: no Distributed table")
                continue
            db, _, on, as_db, as_table, d_cluster, d_db, d_table, key = dist
            expected = (cdb, CLUSTER, cdb, f"{name}_local", CLUSTER, cdb, f"{name}_local")
            if (db, on, as_db, as_table, d_cluster, d_db, d_table) != expected:
                problems.append(f"{name}: Distributed table points elsewhere: {dist}")
            try:
                key_type = store.query_rows(f"DESCRIBE (SELECT {key} FROM {cdb}.{name}_local)")[0][1]
            except Exception as exc:  # the engine's refusal is the finding
                problems.append(f"{name}: sharding key {key} does not evaluate: {str(exc)[:120]}")
            else:
                # Distributed wants an integer (`isValueRepresentedByInteger`, which looks through
                # LowCardinality: cityHash64 of a LowCardinality column is LowCardinality(UInt64))
                if not re.fullmatch(r"U?Int\d+|LowCardinality\(U?Int\d+\)", key_type):
                    problems.append(f"{name}: sharding key {key} is {key_type}, not an integer")
        for name in sorted(set(local_columns) | set(dist_columns)):
            if local_columns.get(name, []) != dist_columns.get(name, []):
                problems.append(f"{name}: column changes of {name}_local {local_columns.get(name, [])} are not "
                                f"the Distributed table's {dist_columns.get(name, [])}")
        for extra in sorted(set(c_tables) - {f"{n}_local" for n in s_tables}):
            problems.append(f"{extra}: a clustered table with no single-node source")
        for extra in sorted(set(distributed) - set(s_tables)):
            problems.append(f"{extra}: a Distributed table with no single-node source")

        seen: dict[str, str] = {}
        for name, (path, replica) in sorted(paths.items()):
            if "{shard}" not in path or f"/{cdb}/" not in path:
                problems.append(f"{name}: replication path {path!r} lacks {{shard}} or the database")
            if "{replica}" not in replica:
                problems.append(f"{name}: replica name {replica!r} lacks {{replica}}")
            if path in seen:
                problems.append(f"{name}: replication path {path!r} is also {seen[path]}'s")
            seen[path] = name
    finally:
        for db in (sdb, cdb):
            store.command(f"DROP DATABASE IF EXISTS {db}")
    return problems


def test_clustered_schema_matches_the_single_node_schema(chdb_store: Any) -> None:
    single = _statements("single")
    assert schema_differences(chdb_store, single, _statements("cluster")) == []
    names = {re.search(r"\{db\}\.(\w+)", s).group(1) for s in single}  # type: ignore[union-attr]
    assert {"spans", "queries", "documents", "passages", "gold", "feedback", "manifests", "labels",
            "reviewers", "review_decisions", "reference_answers"} <= names


def _with_extra_column(statements: list[str]) -> list[str]:
    out = list(statements)
    i = next(i for i, s in enumerate(out) if "{db}.spans\n" in s)
    out[i] = out[i].replace("    received_at     DateTime64(3, 'UTC')\n",
                            "    received_at     DateTime64(3, 'UTC'),\n    extra  UInt8 DEFAULT 1\n")
    assert out[i] != statements[i]
    return out


def test_the_check_fails_on_an_extra_single_node_column(chdb_store: Any) -> None:
    single = _with_extra_column(_statements("single"))
    problems = schema_differences(chdb_store, single, _statements("cluster"))
    assert any(p.startswith("spans: column ('extra', 'UInt8', 18, 'DEFAULT', '1'") and "single-node only" in p
               for p in problems), problems
    # ...and regenerating from the changed source makes the two agree again
    assert schema_differences(chdb_store, single, [c for s in single for c in cluster_statements(s)]) == []


@pytest.mark.parametrize(("old", "new", "finding"), [
    ("ORDER BY (tenant, trace_id, span_id)",
     "ORDER BY (tenant, trace_id, span_id)\nSETTINGS index_granularity = 1024", "spans: engine_full differs"),
    ("status_message  String,", "status_message  String CODEC(ZSTD(3)),", "spans: column ('status_message'"),
    ("PARTITION BY toYYYYMM(start_time)\n", "", "spans: partition_key differs"),
    ("cityHash64(trace_id))", "cityHash64(no_such_column))", "spans: sharding key cityHash64(no_such_column)"),
    ("cityHash64(trace_id))", "trace_id)", "spans: sharding key trace_id is String"),
    ("'spans_local', cityHash64", "'queries_local', cityHash64", "spans: Distributed table points elsewhere"),
    ("/{db}/spans'", "/{db}/queries'", "is also queries_local's"),
    ("/{shard}/{db}/spans'", "/{db}/spans'", "spans_local: replication path"),
])
def test_the_check_fails_on_a_drifted_cluster_statement(chdb_store: Any, old: str, new: str,
                                                        finding: str) -> None:
    cluster = _statements("cluster")
    i = next(i for i, s in enumerate(cluster) if old in s and "{db}.spans" in s)
    cluster[i] = cluster[i].replace(old, new, 1)
    problems = schema_differences(chdb_store, _statements("single"), cluster)
    assert any(finding in p for p in problems), problems


def test_sharding_keys_and_replication_paths_are_unchanged() -> None:
    """Data placement on a live cluster: changing a sharding key or a replication path strands the
    rows already written, so it must be a deliberate edit here too."""
    keys, paths = {}, {}
    for stmt in _statements("cluster"):
        d = re.search(r"Distributed\('\{cluster\}', '\{db\}', '(\w+)_local', (.+)\)$", stmt)
        if d:
            keys[d.group(1)] = d.group(2)
        r = re.search(r"\{db\}\.(\w+)_local ON CLUSTER .*ReplicatedReplacingMergeTree\('([^']+)', '\{replica\}'",
                      stmt, re.S)
        if r:
            paths[r.group(1)] = r.group(2)
    by_trace = "cityHash64(trace_id)"
    assert keys == {
        "spans": by_trace, "queries": by_trace, "documents": by_trace, "passages": "cityHash64(content_hash)",
        "gold": "cityHash64(query_id, trace_id)", "feedback": by_trace, "manifests": "cityHash64(manifest_id)",
        "labels": by_trace, "reference_answers": "cityHash64(query_id, trace_id)",
        "gold_spans": "cityHash64(query_id)",
        **{t: by_trace for t in ("query_roots", "stage_traces", "other_roots")},
        **{t: "cityHash64(tenant)" for t in ("reviewers", "review_sessions", "review_queues", "review_items",
                                             "review_assignments", "review_decisions", "compare_reports",
                                             # the periodic audits' windows, drift and anchors (0012)
                                             "anchors", "audit_windows", "drift_verdicts")},
    }
    assert paths == {t: f"/clickhouse/tables/{{shard}}/{{db}}/{t}" for t in keys}


def test_generation_is_deterministic_and_idempotent(chdb_store: Any) -> None:
    first = load_migrations("cluster")
    regenerated = [tuple(c for s in m.statements for c in cluster_statements(s)) for m in load_migrations("single")]
    assert [m.statements for m in first] == regenerated
    assert [(m.version, m.name) for m in first] == [(m.version, m.name) for m in load_migrations("single")]

    def printed(seed: str) -> str:
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([RAGTRACE, "store", "migrate", "--variant", "cluster", "--cluster", "c", "--print"],
                             capture_output=True, text=True, timeout=120, env=env, check=True)
        return out.stdout

    assert printed("1") == printed("2")  # across processes too, whatever the hash seed
    for stmt in (s for m in first for s in m.statements):
        assert _one_line(chdb_store, stmt.replace("{db}", "ragtrace").replace("{cluster}", CLUSTER)).startswith(
            ("CREATE TABLE IF NOT EXISTS ", "ALTER TABLE ragtrace.", "CREATE MATERIALIZED VIEW IF NOT EXISTS ",
             "INSERT INTO ragtrace.")), stmt[:80]


_TABLE_SQL = """-- cluster: shard by cityHash64(a)
CREATE TABLE IF NOT EXISTS {db}.t
(
    a  String,  -- ENGINE = Memory, a comment that must not be mistaken for the clause
    b  String DEFAULT 'ENGINE = Log(x)',
    n  UInt64
)
ENGINE = SummingMergeTree((n))
ORDER BY a"""


def test_generation_reads_the_engine_clause_not_lookalikes() -> None:
    local, dist = cluster_statements(_TABLE_SQL)
    assert "ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{db}/t', '{replica}', (n))" in local
    assert "-- ENGINE = Memory," in local and "DEFAULT 'ENGINE = Log(x)'" in local
    assert local.count("{db}.t_local ON CLUSTER '{cluster}'") == 1
    assert dist == ("CREATE TABLE IF NOT EXISTS {db}.t ON CLUSTER '{cluster}' AS {db}.t_local\n"
                    "ENGINE = Distributed('{cluster}', '{db}', 't_local', cityHash64(a))")


@pytest.mark.parametrize(("sql", "message"), [
    (_TABLE_SQL.replace("-- cluster: shard by cityHash64(a)\n", ""), "shard by"),
    (_TABLE_SQL.replace("\nCREATE", "\n-- something else\nCREATE"), "directly before"),
    (_TABLE_SQL.replace("{db}.t", "{db}.t ON CLUSTER '{cluster}'"), "ON CLUSTER"),
    (_TABLE_SQL.replace("SummingMergeTree((n))", "Memory"), "engine Memory"),
    (_TABLE_SQL.replace("SummingMergeTree", "ReplicatedSummingMergeTree"), "ReplicatedSummingMergeTree"),
    (_TABLE_SQL.replace("IF NOT EXISTS ", ""), "only `CREATE TABLE IF NOT EXISTS"),
    ("ALTER TABLE {db}.spans UPDATE name = '' WHERE 1", "cannot generate the clustered variant of 'UPDATE"),
    ("ALTER TABLE {db}.spans DELETE WHERE 1", "cannot generate the clustered variant of 'DELETE"),
    ("ALTER TABLE {db}.spans ADD COLUMN x String", "must say IF NOT EXISTS"),
    ("ALTER TABLE {db}.spans ADD COLUMN IF NOT EXISTS x String, DROP PARTITION 1", "'DROP PARTITION 1'"),
    ("ALTER TABLE {db}.spans ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS x String", "ON CLUSTER"),
    ("ALTER TABLE {db}.spans", "no action"),
    ("ALTER TABLE spans ADD COLUMN IF NOT EXISTS x String", "only `CREATE TABLE IF NOT EXISTS"),
    ("CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.v TO {db}.t AS SELECT 1", "exactly one table"),
    ("CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.v TO {db}.t AS SELECT a FROM {db}.s WHERE a IN "
     "(SELECT a FROM {db}.u)", "exactly one table"),
    ("CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.v ON CLUSTER '{cluster}' TO {db}.t AS SELECT a FROM {db}.s",
     "only `CREATE TABLE IF NOT EXISTS"),
    ("CREATE MATERIALIZED VIEW {db}.v TO {db}.t AS SELECT a FROM {db}.s", "only `CREATE TABLE IF NOT EXISTS"),
    ("CREATE VIEW IF NOT EXISTS {db}.v AS SELECT a FROM {db}.s", "only `CREATE TABLE IF NOT EXISTS"),
    ("INSERT INTO {db}.t VALUES (1)", "a migration's INSERT is a backfill"),
])
def test_generation_refuses_what_it_cannot_translate(sql: str, message: str) -> None:
    with pytest.raises(StoreError, match=re.escape(message)):
        cluster_statements(sql)


def test_an_alter_goes_to_the_local_table_and_its_column_changes_to_the_distributed_one() -> None:
    sql = """-- a comment before, with a comma, that must go
ALTER TABLE {db}.spans
    ADD COLUMN IF NOT EXISTS a String DEFAULT 'x, y',  -- trailing comment, with a comma
    ADD INDEX IF NOT EXISTS a_idx a TYPE bloom_filter GRANULARITY 4,
    MODIFY COLUMN IF EXISTS b Map(String, UInt8)"""
    local, dist = cluster_statements(sql)
    assert local == ("ALTER TABLE {db}.spans_local ON CLUSTER '{cluster}'\n"
                     "ADD COLUMN IF NOT EXISTS a String DEFAULT 'x, y',\n"
                     "ADD INDEX IF NOT EXISTS a_idx a TYPE bloom_filter GRANULARITY 4,\n"
                     "MODIFY COLUMN IF EXISTS b Map(String, UInt8)")
    assert dist == ("ALTER TABLE {db}.spans ON CLUSTER '{cluster}'\n"
                    "ADD COLUMN IF NOT EXISTS a String DEFAULT 'x, y',\n"
                    "MODIFY COLUMN IF EXISTS b Map(String, UInt8)")
    # a change of the stored data's layout only: the Distributed table is left alone
    assert cluster_statements("ALTER TABLE {db}.spans MATERIALIZE INDEX a_idx") == [
        "ALTER TABLE {db}.spans_local ON CLUSTER '{cluster}'\nMATERIALIZE INDEX a_idx"]


def test_a_view_runs_on_every_node_over_the_local_tables_and_a_backfill_as_it_is() -> None:
    view = """-- a comment naming {db}.spans, which is not the source
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.marks TO {db}.marked AS
SELECT tenant, trace_id FROM {db}.spans WHERE kind = 'LLM'"""
    assert cluster_statements(view) == [
        "-- a comment naming {db}.spans, which is not the source\n"
        "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.marks_local ON CLUSTER '{cluster}' TO {db}.marked_local AS\n"
        "SELECT tenant, trace_id FROM {db}.spans_local WHERE kind = 'LLM'"]
    backfill = "INSERT INTO {db}.marked (tenant, trace_id) SELECT tenant, trace_id FROM {db}.spans WHERE kind = 'LLM'"
    assert cluster_statements(backfill) == [backfill]
    with pytest.raises(StoreError, match="must not say ON CLUSTER"):
        cluster_statements(backfill.replace("{db}.marked ", "{db}.marked ON CLUSTER '{cluster}' "))


def test_the_check_fails_when_a_clustered_view_writes_the_distributed_table(chdb_store: Any) -> None:
    cluster = _statements("cluster")
    i = next(i for i, s in enumerate(cluster) if "TO {db}.query_roots_local AS" in s)
    cluster[i] = cluster[i].replace("TO {db}.query_roots_local AS", "TO {db}.query_roots AS")
    problems = schema_differences(chdb_store, _statements("single"), cluster)
    assert any(p.startswith("query_roots_by_priority: the clustered view") for p in problems), problems


def test_the_check_fails_when_an_alter_misses_the_distributed_table(chdb_store: Any) -> None:
    cluster = _statements("cluster")
    dist = next(i for i, s in enumerate(cluster) if s.startswith("ALTER TABLE {db}.reviewers ON CLUSTER"))
    problems = schema_differences(chdb_store, _statements("single"), cluster[:dist] + cluster[dist + 1:])
    assert any(p.startswith("reviewers: column changes of reviewers_local") for p in problems), problems
    local = next(i for i, s in enumerate(cluster) if s.startswith("ALTER TABLE {db}.reviewers_local"))
    problems = schema_differences(chdb_store, _statements("single"), cluster[:local] + cluster[local + 1:])
    assert any(p.startswith("reviewers: column ('role'") and "single-node only" in p for p in problems), problems
