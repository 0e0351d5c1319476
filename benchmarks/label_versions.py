"""Each label's newest version over whole manifests: ``FINAL`` over their key ranges against ``LIMIT 1 BY``.

Every label reader of the store keeps each (manifest, trace)'s newest label the way
`ragtrace_store.label_table.newest_labels_sql` does: ``FINAL`` over the key ranges its key conditions
select, given as ``PREWHERE`` (the third read below); the other exact way sorts each key's versions
with ``LIMIT 1 BY``. This times them on a store kept by ``benchmarks/store_scale.py --keep`` in two
layouts: the store's labels as built (one merged part), and the same labels re-written into
overlapping unmerged parts (``--parts`` batches by trace hash, then ``--relabel`` parts of newer
versions of a slice of them, as repeated audits and a re-label leave the table), in a scratch
database dropped afterwards. The reads must return the same rows (checked), each read best of
``--runs``.

    .venv/bin/python benchmarks/label_versions.py DIR/10000000 [--parts 40] [--relabel 10] [--runs 7]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

TENANT, MANIFEST = "bench", "bench-manifest-01"
COLUMNS = ("tenant, labelled_at, manifest_id, trace_id, query_id, release, service, failure_mode, gold_in_pool, "
           "gold_in_context, ranking_ok, generation, passed, score, trace_time, detail")
SIDES = "release IN ('v4', 'v5')"


def reads(table: str) -> dict[str, str]:
    keys = f"tenant = '{TENANT}' AND manifest_id = '{MANIFEST}'"
    return {
        "LIMIT 1 BY in key order": (f"SELECT * FROM (SELECT {COLUMNS} FROM {table} WHERE {keys} ORDER BY tenant, "
                                    "manifest_id, trace_id, labelled_at DESC LIMIT 1 BY manifest_id, trace_id) "
                                    f"WHERE {SIDES}"),
        "FINAL over the key range": (f"SELECT {COLUMNS} FROM {table} FINAL WHERE {keys} AND {SIDES} "
                                     "SETTINGS optimize_move_to_prewhere_if_final = 0"),
        "FINAL, keys as PREWHERE (the store's)": (f"SELECT {COLUMNS} FROM {table} FINAL PREWHERE {keys} WHERE {SIDES} "
                                                  "SETTINGS optimize_move_to_prewhere_if_final = 0"),
    }


def best_ms(conn: Any, sql: str, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        conn.query(sql, "Null")
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def measure(conn: Any, table: str, runs: int, layout: str) -> None:
    sqls = reads(table)
    counts = {name: conn.query(f"SELECT count() FROM ({sql})", "CSV").bytes().strip() for name, sql in sqls.items()}
    first, *others = sqls.values()
    differ = b"".join(conn.query(f"SELECT count() FROM (({first}) EXCEPT ({other}))", "CSV").bytes().strip()
                      for other in others)
    if len(set(counts.values())) != 1 or differ != b"0" * len(others):
        sys.exit(f"{layout}: the two reads differ ({counts}, {differ!r} rows of one not in the other)")
    parts = conn.query(f"SELECT count() FROM system.parts WHERE active AND database || '.' || table = '{table}'",
                       "CSV").bytes().strip().decode()
    times = {name: best_ms(conn, sql, runs) for name, sql in sqls.items()}
    ratio = times["FINAL over the key range"] / times["LIMIT 1 BY in key order"]
    print(f"{layout}: {parts} parts, {int(next(iter(counts.values()))):,} newest labels of v4 and v5; "
          + ", ".join(f"{name} {ms:.0f} ms" for name, ms in times.items()) + f"; FINAL / LIMIT 1 BY {ratio:.2f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("store", type=Path, help="a store kept by benchmarks/store_scale.py --keep (DIR/N)")
    ap.add_argument("--parts", type=int, default=40, help="batches the labels are re-written in (default 40)")
    ap.add_argument("--relabel", type=int, default=10, help="parts of newer versions, 1%% of the labels each")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args(argv)
    if not (args.store / "built.json").is_file():
        ap.error(f"{args.store} is not a store kept by benchmarks/store_scale.py --keep (no built.json)")
    if args.parts < 1 or args.relabel < 0 or args.runs < 1:
        ap.error("--parts and --runs must be at least 1, --relabel at least 0")
    from ragtrace_store import open_store

    st = open_store(str(args.store), migrate=False)
    conn = st.client._backend._handle.conn  # the embedded engine: FORMAT Null, nothing converted
    measure(conn, st.table("labels"), args.runs, "as built")
    conn.query("DROP DATABASE IF EXISTS bench_label_versions")
    conn.query("CREATE DATABASE bench_label_versions")
    try:
        scratch = "bench_label_versions.labels"
        conn.query(f"CREATE TABLE {scratch} AS {st.table('labels')}")
        conn.query(f"SYSTEM STOP MERGES {scratch}")
        for i in range(args.parts):
            conn.query(f"INSERT INTO {scratch} SELECT * FROM {st.table('labels')} "
                       f"WHERE cityHash64(trace_id) % {args.parts} = {i}")
        for i in range(args.relabel):
            conn.query(f"INSERT INTO {scratch} SELECT * REPLACE (labelled_at + INTERVAL 1 HOUR AS labelled_at) "
                       f"FROM {st.table('labels')} WHERE cityHash64(trace_id) % 100 = {i}")
        measure(conn, scratch, args.runs, f"{args.parts} parts + {args.relabel} of newer versions")
    finally:
        conn.query("DROP DATABASE bench_label_versions")


if __name__ == "__main__":
    main()
