"""The ragtrace store: ClickHouse schema and migrations, the one client factory, the read model and
the labels contract. Everything above it (ingest, evaluator, review, the CLI) reads and writes
through it, and imports it by this package's public names.

A store is a directory (embedded chDB, the default) or a ClickHouse server URL; `open_store`
connects to either and applies pending migrations.
"""

from ragtrace_store.client import (
    DEFAULT_DATABASE,
    ENV_STORE,
    Store,
    arrow_table,
    default_store_path,
    is_server_url,
    open_store,
)
from ragtrace_store.clock import as_utc, parse_duration, parse_time_bound, utc_now
from ragtrace_store.errors import StoreError, StoreLockedError
from ragtrace_store.filters import TraceFilter
from ragtrace_store.migrations import Migration, load_migrations
from ragtrace_store.records import DEFAULT_TENANT, STAGES, DocumentRef, TraceRecord

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_TENANT",
    "ENV_STORE",
    "STAGES",
    "DocumentRef",
    "Migration",
    "Store",
    "StoreError",
    "StoreLockedError",
    "TraceFilter",
    "TraceRecord",
    "arrow_table",
    "as_utc",
    "default_store_path",
    "is_server_url",
    "load_migrations",
    "open_store",
    "parse_duration",
    "parse_time_bound",
    "utc_now",
]
