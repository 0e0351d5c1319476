"""`ragtrace store migrate|status|retention`: store administration.

Exit codes: 0 success, 1 a statement failed, 2 usage error or a store that cannot be opened.
"""

from __future__ import annotations

import argparse
import sys

from ragtrace_cli.commands.common import EXIT_STORE, STORE_HELP, missing_store, open_or_report
from ragtrace_store import Store, default_store_path, load_migrations


def store_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ragtrace store", description="Store administration.")
    sub = p.add_subparsers(dest="action", required=True)
    m = sub.add_parser("migrate", help="apply pending schema migrations (idempotent)")
    m.add_argument("--store", help=STORE_HELP)
    m.add_argument("--variant", choices=["single", "cluster"], default="single",
                   help="single node, or a cluster (ReplicatedReplacingMergeTree + Distributed)")
    m.add_argument("--cluster", help="cluster name for --variant cluster (as in remote_servers)")
    m.add_argument("--print", action="store_true", dest="print_sql", help="print the SQL, apply nothing")
    s = sub.add_parser("status", help="schema version and row counts")
    s.add_argument("--store", help=STORE_HELP)
    r = sub.add_parser("retention", help="keep traces for N days (ALTER TABLE ... MODIFY TTL); 0 = forever")
    r.add_argument("--store", help=STORE_HELP)
    r.add_argument("--days", type=int, required=True)
    for sp in (s, r):
        sp.add_argument("--variant", choices=["single", "cluster"], default="single")
        sp.add_argument("--cluster", help="cluster name for --variant cluster")
    a = p.parse_args(argv)
    if a.cluster and a.variant == "single":  # else the single-node schema is used and the name dropped unsaid
        p.error(f"--cluster {a.cluster} names the cluster of --variant cluster; add --variant cluster (or drop "
                "--cluster for a single node)")
    if a.action == "migrate":
        if a.variant == "cluster" and not a.cluster:
            p.error("--variant cluster needs --cluster NAME")
        if a.print_sql:
            for mig in load_migrations(a.variant):
                print(f"-- {mig.version:04d}_{mig.name}")
                for stmt in mig.statements:
                    sql = stmt.replace("{cluster}", a.cluster) if a.cluster else stmt
                    print(sql.replace("{db}", "ragtrace") + "\n;")
            return 0
        store = open_or_report(a.store, migrate=False, command="store", variant=a.variant, cluster=a.cluster)
        if store is None:
            return 2
        with store:
            try:
                applied = store.migrate()
            except Exception as exc:
                print(f"ragtrace store migrate: failed: {exc}", file=sys.stderr)
                return 1
        names = [f"{x.version:04d}_{x.name}" for x in applied]
        print(f"applied {len(applied)} migration(s){': ' + ', '.join(names) if names else ' (up to date)'} "
              f"to {store.location}")
        return 0
    if a.variant == "cluster" and not a.cluster:
        p.error("--variant cluster needs --cluster NAME")
    if a.action == "retention" and not 0 <= a.days <= MAX_RETENTION_DAYS:
        p.error(f"--days must be in 0..{MAX_RETENTION_DAYS} (0 keeps forever), got {a.days}")
    missing = missing_store(str(a.store) if a.store is not None else str(default_store_path()))
    if missing:  # status and retention read a store; only migrate creates one
        print(f"ragtrace store {a.action}: {missing}", file=sys.stderr)
        return EXIT_STORE
    store = open_or_report(a.store, migrate=False, command="store", variant=a.variant, cluster=a.cluster)
    if store is None:
        return 2
    with store:
        if a.action == "status":
            versions = sorted(store.applied_versions())
            pending = [f"{x.version:04d}_{x.name}" for x in store.pending_migrations()]
            print(f"store      {store.location}")
            print(f"applied    {', '.join(f'{v:04d}' for v in versions) or 'none'}")
            print(f"pending    {', '.join(pending) or 'none'}")
            if not versions:
                return 0
            for table in ("queries", "spans", "documents", "passages", "gold", "reference_answers", "feedback",
                          "labels"):
                try:
                    # rows as stored (from the parts' metadata: instant at any size); a retried
                    # batch counts until its parts merge
                    n = store.query_rows(f"SELECT count() FROM {store.table(table)}")[0][0]
                except Exception:
                    continue
                print(f"{table:<17} {n} rows")
            return 0
        pending = [f"{x.version:04d}_{x.name}" for x in store.pending_migrations()]
        if pending:
            print(f"ragtrace store retention: the store {store.location} lacks migrations {', '.join(pending)}: "
                  f"run `ragtrace store migrate --store {store.location}` first", file=sys.stderr)
            return EXIT_STORE
        return _retention(store, a.days)


# Traffic ages out; gold, reference answers and reviews are curated labels and are kept.
_RETENTION = {"spans": "start_time", "queries": "start_time", "documents": "start_time", "feedback": "added_at",
              "labels": "trace_time"}
#: Passage text outlives the last document using it by at most this many days. A document is kept
#: until its start time + DAYS; its passage's last_seen is renewed at most every 6 hours (so it is
#: at most 12 hours behind the document's arrival) and a start time may lie up to a day ahead of
#: its arrival (the collector clamps it): 2 days cover both.
PASSAGE_MARGIN_DAYS = 2
#: The TTL is DateTime arithmetic, which wraps past 2106: 30000 days from 2026 is 1972, and every
#: row would expire at the next merge. This many days (+ the margin) stays far below the end.
MAX_RETENTION_DAYS = 10_000
_PASSAGE_SCHEMA = 6  # migration 0006 added passages.last_seen


def _retention(store: Store, days: int) -> int:
    ttl: dict[str, str] = {table: f"toDateTime({column}) + INTERVAL {int(days)} DAY"
                           for table, column in _RETENTION.items()}
    if days:
        # Passages have no trace time: they go when no document has used them for DAYS (+ margin).
        # Rows from before migration 0006 have no real last_seen; they count as seen when it was
        # applied (the first time: rows written since then carry a real last_seen), so the text of
        # traces that are still kept is never taken away by an upgrade.
        since = store.query_rows(f"SELECT min(applied_at) FROM {store.table('schema_migrations')} "
                                 "WHERE version = {v:UInt32}", {"v": _PASSAGE_SCHEMA})[0][0]
        since_ms = int(since.timestamp() * 1000)
        ttl["passages"] = (f"toDateTime(greatest(last_seen, fromUnixTimestamp64Milli(toInt64({since_ms}), 'UTC'))) "
                           f"+ INTERVAL {int(days) + PASSAGE_MARGIN_DAYS} DAY")
    else:
        ttl["passages"] = ""
    for table, expr in ttl.items():
        # on a cluster the TTL belongs to the replicated local tables, on every node
        target = (f"{store.table(table + '_local')} ON CLUSTER '{store.cluster}'"
                  if store.variant == "cluster" else store.table(table))
        sql = f"ALTER TABLE {target} " + (f"MODIFY TTL {expr}" if days else "REMOVE TTL")
        try:
            store.command(sql)
        except Exception as exc:
            if days == 0 and "TTL" in str(exc):
                continue  # no TTL to remove
            print(f"ragtrace store retention: {table}: {exc}", file=sys.stderr)
            return 1
    print(f"retention set to {days} day(s); passage text no kept document uses goes after "
          f"{days + PASSAGE_MARGIN_DAYS} day(s)" if days else "retention removed (keep forever)")
    return 0
