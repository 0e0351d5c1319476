"""`ragtrace store migrate|status|retention`: store administration.

Exit codes: 0 success, 1 a statement failed, 2 usage error or a store that cannot be opened.
"""

from __future__ import annotations

import argparse
import sys

from ragtrace_cli.commands.common import EXIT_STORE, STORE_HELP, missing_store, open_or_report
from ragtrace_store import Store, default_store_path, load_migrations
from ragtrace_store.retention import MAX_RETENTION_DAYS, PASSAGE_MARGIN_DAYS, RetentionError, set_retention
from ragtrace_store.status import table_rows

__all__ = ["MAX_RETENTION_DAYS", "PASSAGE_MARGIN_DAYS", "store_main"]


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
            # rows as stored (a retried batch counts until its parts merge)
            for table, n in table_rows(store).items():
                print(f"{table:<17} {n} rows")
            return 0
        pending = [f"{x.version:04d}_{x.name}" for x in store.pending_migrations()]
        if pending:
            print(f"ragtrace store retention: the store {store.location} lacks migrations {', '.join(pending)}: "
                  f"run `ragtrace store migrate --store {store.location}` first", file=sys.stderr)
            return EXIT_STORE
        return _retention(store, a.days)


def _retention(store: Store, days: int) -> int:
    try:
        set_retention(store, days)
    except RetentionError as exc:
        print(f"ragtrace store retention: {exc.table}: {exc}", file=sys.stderr)
        return 1
    print(f"retention set to {days} day(s); passage text no kept document uses goes after "
          f"{days + PASSAGE_MARGIN_DAYS} day(s)" if days else "retention removed (keep forever)")
    return 0
