"""The one store-client factory and schema migrator, shared by the collector and the evaluator.

A store is either a directory (embedded chDB, the default) or a ClickHouse server URL
``http(s)://user:password@host:8123/database``. Both are reached through clickhouse-connect, so
the code above this module never knows which one it talks to.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ragtrace_store.clock import utc_now
from ragtrace_store.errors import StoreError, StoreLockedError
from ragtrace_store.insert_slices import SLICE_BYTES, column_bytes, row_bytes, slices, table_row_bytes
from ragtrace_store.migrations import Migration, load_migrations
from ragtrace_store.records import TraceRecord

log = logging.getLogger("ragtrace.store")

ENV_STORE = "RAGTRACE_STORE"
DEFAULT_DATABASE = "ragtrace"
_DB_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: trace ids per statement of `Store.command_over_traces` on a server (one Array(String) parameter)
_ID_CHUNK = 5000
#: a Distributed table's engine as system.tables.engine_full shows it; the cluster's name
_DISTRIBUTED = re.compile(r"^Distributed\('?([A-Za-z_][A-Za-z0-9_]*)'?\s*,")


#: the settings under which ``FINAL`` collapses a key's versions before a WHERE condition applies and
#: across partitions (both ClickHouse's defaults), pinned for every query of a `Store`
_FINAL_SETTINGS = {"optimize_move_to_prewhere_if_final": 0, "do_not_merge_across_partitions_select_final": 0}


def arrow_table(columns: dict[str, list[Any]], time_columns: frozenset[str] = frozenset()) -> Any:
    """Column lists as an Arrow table; ``time_columns`` hold integer milliseconds (UTC). A column of
    lists that are all empty is a list of strings (Arrow would infer lists of nulls, which no
    ``Array(String)`` column takes)."""
    import pyarrow as pa

    def array(name: str, values: list[Any]) -> Any:
        if name in time_columns:
            return pa.array(values, type=pa.timestamp("ms", tz="UTC"))
        got = pa.array(values)
        if pa.types.is_list(got.type) and pa.types.is_null(got.type.value_type):
            return got.cast(pa.list_(pa.string()))
        return got

    return pa.table({name: array(name, values) for name, values in columns.items()})


class _ArrowPathUnavailable(Exception):
    """chDB's Arrow input path is not reachable in this clickhouse-connect version."""


def default_store_path() -> Path:
    """``$RAGTRACE_STORE``, else ``$XDG_DATA_HOME/ragtrace/store`` (``~/.local/share/ragtrace/store``)."""
    env = os.environ.get(ENV_STORE)
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ragtrace" / "store"


def is_server_url(store: str) -> bool:
    return store.startswith(("http://", "https://"))


class Store:
    """A connected store: a clickhouse-connect client plus the database name.

    All SQL that interpolates user values uses server-side parameters (``{name:Type}``); only the
    database name (validated against ``[A-Za-z_][A-Za-z0-9_]*``) is formatted into statements.

    Times go in and come out aware (`ragtrace_store.clock`): `open_store` asks clickhouse-connect
    for aware datetimes (``tz_mode="aware"``), because it inserts a naive one as local time, so a
    naive value read back and written again would move by the process's UTC offset.
    """

    def __init__(self, client: Any, database: str, *, location: str, embedded: bool,
                 variant: str = "single", cluster: str | None = None) -> None:
        if not _DB_NAME.match(database):
            raise StoreError(f"invalid database name {database!r}: use letters, digits and '_'")
        self.client = client
        self.database = database
        self.location = location
        self.embedded = embedded
        self.variant = variant
        self.cluster = cluster
        self._arrow_ok = True
        self._purge_ok = True
        #: column bytes per embedded INSERT statement at most (`ragtrace_store.insert_slices`)
        self.insert_slice_bytes = SLICE_BYTES
        #: embedded INSERT statements run through Arrow so far (the slices of an insert each count)
        self.insert_statements = 0
        # clickhouse-connect clients are not safe for concurrent use; chDB even less so.
        self.lock = threading.RLock()
        # What FINAL returns depends on two settings; a server's profile may change them, so every
        # query of this store names their defaults (`ragtrace_store.label_table.newest_labels_sql` says why).
        for name, value in _FINAL_SETTINGS.items():
            self.client.set_client_setting(name, value)
        if variant == "cluster":
            self._read_as_cluster()

    def _read_as_cluster(self) -> None:
        # Every `IN (subquery)` and JOIN over a Distributed table means what it means on one node:
        # its subquery reads every shard, once, on the node that asks (GLOBAL). The engine's
        # default, 'deny', refuses such a query on any cluster of two shards or more; 'local' would
        # read each shard's own rows only, which is right only for tables sharded alike, so the
        # readers that can rely on that name the local table (`local_table`).
        self.client.set_client_setting("distributed_product_mode", "global")
        # A write through a Distributed table returns once it is on its shard, not queued on this
        # node: the collector's writer asks the store about the batches before (which roots are
        # queries, `ragtrace_store.query_roots`), and a queued batch would not be found.
        self.client.set_client_setting("distributed_foreground_insert", 1)

    def adopt_cluster(self) -> bool:
        """Read this store as the cluster it is when its ``queries`` is a Distributed table (what
        ``store migrate --variant cluster`` creates), whatever the caller assumed: commands that read
        (``audit``, ``compare``, ``traces``) are not told the variant. True when it is one."""
        if self.variant == "cluster":
            return True
        try:
            rows = self.query_rows("SELECT engine_full FROM system.tables WHERE database = {d:String} "
                                   "AND name = 'queries'", {"d": self.database})
        except Exception:  # no schema yet, or no right to read system tables: the caller's variant stands
            return False
        found = _DISTRIBUTED.match(str(rows[0][0])) if rows else None
        if found is None:
            return False
        self.variant, self.cluster = "cluster", found.group(1)
        self._read_as_cluster()
        return True

    # --- plumbing -------------------------------------------------------------------------
    def table(self, name: str) -> str:
        return f"{self.database}.{name}"

    def local_table(self, name: str) -> str:
        """The table holding this node's rows of ``name``: on a cluster its ``<name>_local`` (under a
        Distributed ``<name>``), else the table itself. Only for a subquery whose rows sit on the
        same shard as the rows it is asked about (one trace's rows: `ragtrace_store.roots.rows_of`),
        so each shard answers it from its own rows, and the node that asks holds no set of them."""
        return self.table(f"{name}_local" if self.variant == "cluster" else name)

    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        with self.lock:
            return self.client.command(sql, parameters=parameters)

    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        with self.lock:
            return list(self.client.query(sql, parameters=parameters).result_rows)

    def insert(self, table: str, rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> None:
        if not rows:
            return
        with self.lock:
            self.client.insert(self.table(table), rows, column_names=list(columns))

    def insert_columns(self, table: str, columns: dict[str, list[Any]],
                       time_columns: frozenset[str] = frozenset(), *, slice_bytes: int | None = None) -> int:
        """Insert column lists (all the same length); returns the row count.

        ``time_columns`` hold DateTime64(3) values as integer milliseconds since the epoch (UTC).
        Embedded chDB takes the batch through Arrow (chDB's ``Python()`` table function, the
        engine's fastest input path), one statement per ``slice_bytes`` of rows (default
        `insert_slice_bytes`; `ragtrace_store.insert_slices`: one for any ordinary batch); a server gets
        clickhouse-connect's Native insert over HTTP in one statement, which any ClickHouse >= 24.8
        accepts. A sliced insert is not atomic: the caller retries the whole call, which is harmless
        (the insert_slices module says why).
        """
        names = list(columns)
        n = len(columns[names[0]]) if names else 0
        if n == 0:
            return 0
        with self.lock:
            if self.embedded and self._arrow_ok:
                try:
                    self._insert_arrow(table, columns, time_columns, slice_bytes or self.insert_slice_bytes)
                    return n
                except _ArrowPathUnavailable:
                    self._arrow_ok = False
            self.client.insert(self.table(table), [columns[c] for c in names], column_names=names,
                               column_oriented=True)
        return n

    def _insert_arrow(self, table: str, columns: dict[str, list[Any]], time_columns: frozenset[str],
                      slice_bytes: int) -> None:
        try:
            import pyarrow  # noqa: F401 -- a missing pyarrow means the Native insert path

            conn = self.client._backend._handle.conn  # the engine connection clickhouse-connect holds
        except (ImportError, AttributeError) as exc:
            raise _ArrowPathUnavailable(str(exc)) from exc
        if sum(map(column_bytes, columns.values())) <= slice_bytes:
            self._insert_arrow_table(conn, table, arrow_table(columns, time_columns))
            return
        # one slice's Arrow copy at a time, each dropped before the next is made
        for start, end in slices(row_bytes(columns), slice_bytes):
            part = {name: values[start:end] for name, values in columns.items()}
            self._insert_arrow_table(conn, table, arrow_table(part, time_columns))
            del part
            self._purge_engine(conn)

    def _insert_arrow_table(self, conn: Any, table: str, ragtrace_batch: Any) -> None:
        # chDB's Python() table function reads `ragtrace_batch` from this frame
        cols = ", ".join(f"`{c}`" for c in ragtrace_batch.column_names)
        conn.query(f"INSERT INTO {self.table(table)} ({cols}) SELECT {cols} FROM Python(ragtrace_batch)")
        self.insert_statements += 1

    def _insert_arrow_slices(self, conn: Any, table: str, combined: Any, slice_bytes: int) -> None:
        """`_insert_arrow_table` ``slice_bytes`` of rows at a time (slices share the table's memory)."""
        if int(combined.nbytes) <= slice_bytes:
            self._insert_arrow_table(conn, table, combined)
            return
        for start, end in slices(table_row_bytes(combined), slice_bytes):
            self._insert_arrow_table(conn, table, combined.slice(start, end - start))
            self._purge_engine(conn)

    def _purge_engine(self, conn: Any) -> None:
        """Hand the engine's freed pages back to the system now (its allocator keeps them for
        seconds): so a sliced insert holds one slice's working memory, not one per slice. About a
        millisecond. An engine that cannot (built without jemalloc) is not asked again."""
        if not self._purge_ok:
            return
        try:
            conn.query("SYSTEM JEMALLOC PURGE")
        except Exception as exc:  # the engine's own error type; nothing is lost but the purge
            self._purge_ok = False
            log.info("the embedded engine cannot purge its allocator (%s); freed memory returns in its own time",
                     str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)

    def release_memory(self) -> bool:
        """Embedded: return the engine's freed memory to the system (after large work), unless a
        statement is running (this never waits for one); a server's memory is its own. Returns
        whether it did."""
        if not (self.embedded and self._purge_ok) or not self.lock.acquire(blocking=False):
            return False
        try:
            self._purge_engine(self.client._backend._handle.conn)
            return self._purge_ok
        except AttributeError:
            return False
        finally:
            self.lock.release()

    def insert_arrow(self, table: str, tables: list[Any], *, slice_bytes: int | None = None) -> int:
        """Insert Arrow tables with the same columns; returns the row count. Timestamps are
        DateTime64(3) columns. Embedded: straight through chDB's ``Python()``, sliced as
        `insert_columns`; a server gets the rows through `insert_columns`' Native insert."""
        import pyarrow as pa

        combined = tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")
        n = int(combined.num_rows)
        if n == 0:
            return 0
        with self.lock:
            if self.embedded and self._arrow_ok:
                try:
                    conn = self.client._backend._handle.conn
                except AttributeError:
                    self._arrow_ok = False
                else:
                    self._insert_arrow_slices(conn, table, combined, slice_bytes or self.insert_slice_bytes)
                    return n
        times = frozenset(name for name, col in zip(combined.column_names, combined.columns, strict=True)
                          if pa.types.is_timestamp(col.type))
        columns = {name: (col.cast(pa.int64()) if name in times else col).to_pylist()
                   for name, col in zip(combined.column_names, combined.columns, strict=True)}
        return self.insert_columns(table, columns, times, slice_bytes=slice_bytes)

    def command_over_traces(self, sql: str, tenant: str, trace_ids: Sequence[str]) -> None:
        """Run ``sql``, in which ``{traces}`` stands for a table of ``(tenant, trace_id)`` rows: these
        trace ids of ``tenant``. Embedded, the engine reads them in place from an Arrow table (chDB's
        ``Python()`` table function: 30,000 ids in about 20 ms, where binding them as a parameter
        cost ten times that); a server gets them as an ``Array(String)`` parameter, `_ID_CHUNK` at a
        time (the statement runs once per chunk). Repeated ids are harmless (the statement reads them
        as a set)."""
        if not trace_ids:
            return
        with self.lock:
            if self.embedded and self._arrow_ok:
                try:
                    import pyarrow as pa

                    conn = self.client._backend._handle.conn
                except (ImportError, AttributeError):
                    self._arrow_ok = False
                else:
                    # chDB's Python() table function reads `ragtrace_traces` from this frame
                    ragtrace_traces = pa.table({"tenant": pa.array([tenant] * len(trace_ids), pa.string()),  # noqa: F841
                                                "trace_id": pa.array(list(trace_ids), pa.string())})
                    conn.query(sql.replace("{traces}", "Python(ragtrace_traces)"))
                    return
        # sorted, so each chunk is one range of a table keyed by trace id
        ids = sorted(set(trace_ids))
        for i in range(0, len(ids), _ID_CHUNK):
            self.command(sql.replace("{traces}", "(SELECT {ot_tenant:String} AS tenant, "
                                                 "arrayJoin({ot_ids:Array(String)}) AS trace_id)"),
                         {"ot_tenant": tenant, "ot_ids": ids[i:i + _ID_CHUNK]})

    def close(self) -> None:
        # closing a dead connection must not mask the caller's error
        with self.lock, contextlib.suppress(Exception):
            self.client.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- schema ---------------------------------------------------------------------------
    def applied_versions(self) -> set[int]:
        try:
            rows = self.query_rows(f"SELECT version FROM {self.table('schema_migrations')} FINAL")
        except Exception:
            return set()
        return {int(r[0]) for r in rows}

    def migrate(self) -> list[Migration]:
        """Apply every migration not yet applied; idempotent. Returns those applied now."""
        if self.variant == "cluster":
            if not self.cluster or not _DB_NAME.match(self.cluster):
                raise StoreError("the clustered schema needs a cluster name (letters, digits, '_'): "
                                 "`ragtrace store migrate --variant cluster --cluster NAME`")
            on = f" ON CLUSTER '{self.cluster}'"
            # every node records the versions it has applied (DDL ON CLUSTER runs on all of them)
            engine = (f"ReplicatedReplacingMergeTree('/clickhouse/tables/{{shard}}/{self.database}/"
                      "schema_migrations', '{replica}')")
        else:
            on, engine = "", "ReplacingMergeTree"
        self.command(f"CREATE DATABASE IF NOT EXISTS {self.database}{on}")
        self.command(
            f"CREATE TABLE IF NOT EXISTS {self.table('schema_migrations')}{on} "
            "(version UInt32, name String, applied_at DateTime64(3, 'UTC')) "
            f"ENGINE = {engine} ORDER BY version"
        )
        done = self.applied_versions()
        applied = []
        for mig in load_migrations(self.variant):
            if mig.version in done:
                continue
            for stmt in mig.statements:
                sql = stmt.replace("{db}", self.database)
                if self.cluster:
                    sql = sql.replace("{cluster}", self.cluster)
                self.command(sql)
            self.insert("schema_migrations", [(mig.version, mig.name, utc_now())],
                        ["version", "name", "applied_at"])
            applied.append(mig)
        return applied

    def pending_migrations(self) -> list[Migration]:
        done = self.applied_versions()
        return [m for m in load_migrations(self.variant) if m.version not in done]

    # --- reading -------------------------------------------------------------------------
    def read_traces(self, **filters: Any) -> Iterator[TraceRecord]:
        """Assembled queries, newest first; see `ragtrace_store.traces.read_traces`."""
        from ragtrace_store.traces import read_traces

        return read_traces(self, **filters)


def open_store(store: str | os.PathLike[str] | None = None, *, migrate: bool = True,
               variant: str = "single", cluster: str | None = None) -> Store:
    """Connect to a store: a directory (embedded chDB) or ``http(s)://user:password@host:port/db``.

    ``None`` means ``$RAGTRACE_STORE`` or the per-user default directory. Raises `StoreLockedError`
    when another process owns the embedded directory, `StoreError` for anything else.
    """
    import clickhouse_connect

    location = str(store) if store is not None else str(default_store_path())
    if "://" in location and not is_server_url(location):
        # else clickhouse://host/db would become a directory "clickhouse:" under the current one
        raise StoreError(f"--store {_redacted(location)}: a server store is http(s)://user:password@host:8123/database "
                         "(ClickHouse's HTTP interface); an embedded store is a directory path")
    if is_server_url(location):
        url = urlparse(location)
        database = (url.path or "/").strip("/") or DEFAULT_DATABASE
        try:
            client = clickhouse_connect.get_client(
                host=url.hostname or "localhost",
                port=url.port or (8443 if url.scheme == "https" else 8123),
                username=unquote(url.username or "default"),
                password=unquote(url.password or ""),
                secure=url.scheme == "https",
                database="default",
                tz_mode="aware",
            )
        except Exception as exc:
            raise StoreError(f"cannot reach the ClickHouse server at {url.hostname}:{url.port}: {exc}") from exc
        st = Store(client, database, location=_redacted(location), embedded=False, variant=variant, cluster=cluster)
        st.adopt_cluster()
    else:
        path = Path(location).expanduser()
        if variant == "cluster":
            # an embedded engine is one node: it has no cluster to name (the cluster name would be
            # dropped here and the migration refuse the schema for lacking one)
            raise StoreError(f"--store {path} is an embedded store, one node: the clustered schema (--variant "
                             "cluster, serve --cluster) needs a ClickHouse server URL http(s)://user:password@"
                             "host:8123/database; drop the cluster option for an embedded store")
        if path.exists() and not path.is_dir():
            raise StoreError(f"--store {path} is a file; give a directory (embedded store) or a server URL")
        path.mkdir(parents=True, exist_ok=True)
        failure: Exception | None = None
        with _held_stderr() as held:
            try:
                client = clickhouse_connect.get_client(interface="chdb", path=str(path), tz_mode="aware")
            except Exception as exc:
                failure = exc
        if failure is not None and ("lock" in str(failure).lower() or _locked_by_another_process(path)):
            # the engine's own "Cannot lock file .../status" line is held back: this message says
            # the same in words that say what to do
            raise StoreLockedError(
                f"the embedded store {path} is in use by another process (usually `ragtrace serve`). "
                "An embedded store allows one process at a time: run this command through the "
                "serving process (e.g. `ragtrace audit --server URL`), stop it first, or use a "
                "ClickHouse server URL for --store."
            ) from failure
        held.release()  # anything else the engine wrote while it started reaches the user as before
        if failure is not None:
            raise StoreError(f"cannot open the embedded store {path}: {failure}") from failure
        st = Store(client, DEFAULT_DATABASE, location=str(path), embedded=True, variant=variant)
    if migrate:
        st.migrate()
    return st


class _HeldStderr:
    """What was written to file descriptor 2 while it was held; `release` writes it out."""

    data = b""

    def release(self) -> None:
        if self.data:
            os.write(2, self.data)


@contextlib.contextmanager
def _held_stderr() -> Iterator[_HeldStderr]:
    """File descriptor 2 into a temporary file for the block. chDB's engine writes to it directly
    (C++ ``std::cerr``, not Python's ``sys.stderr``) while it starts, e.g. "Code: 76. DB::Exception:
    Cannot lock file .../status" before the open fails; after the block the caller decides whether
    that reaches the user (`_HeldStderr.release`) or is replaced by a message of its own."""
    import tempfile

    held = _HeldStderr()
    with tempfile.TemporaryFile() as spool:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()  # what Python already buffered belongs before the hold
        saved = os.dup(2)
        os.dup2(spool.fileno(), 2)
        try:
            yield held
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            spool.seek(0)
            held.data = spool.read()


def _locked_by_another_process(path: Path) -> bool:
    """Whether a server process holds the embedded engine's lock on ``<path>/status``.

    chDB reports a held lock only on stderr and raises a generic "Failed to create connection",
    so after a failed open the lock itself is asked (flock, as ClickHouse takes it).
    """
    import fcntl

    status = path / "status"
    if not status.exists():
        return False
    try:
        with status.open("rb") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def _redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parsed = urlparse(url)
    if parsed.password:
        return url.replace(f":{parsed.password}@", ":***@")
    return url
