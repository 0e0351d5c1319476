"""What the `ragtrace` subcommands share: the `--store` help text and opening a store with a
message that says what to do when it cannot be opened."""

from __future__ import annotations

import sys
from typing import Any

from ragtrace_store import Store, StoreError, StoreLockedError, default_store_path, open_store

STORE_HELP = ("a directory (embedded chDB) or http(s)://user:password@host:8123/database; "
              f"default $RAGTRACE_STORE or {default_store_path()}")


def open_or_report(store: str | None, *, migrate: bool, command: str, **kw: Any) -> Store | None:
    """The store, or None after printing why it cannot be opened (the caller exits with 2)."""
    try:
        return open_store(store, migrate=migrate, **kw)
    except StoreLockedError as exc:
        print(f"ragtrace {command}: {exc}", file=sys.stderr)
        if command == "traces":
            print("  To read while the collector runs: ragtrace traces --server http://HOST:4318 "
                  "[--token TOKEN] (reads through the serving process).", file=sys.stderr)
        return None
    except StoreError as exc:
        print(f"ragtrace {command}: {exc}", file=sys.stderr)
        return None
