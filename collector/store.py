"""The one store-client factory and schema migrator, shared by the collector and the evaluator.

A store is either a directory (embedded chDB, the default) or a ClickHouse server URL
``http(s)://user:password@host:8123/database``. Both are reached through clickhouse-connect, so
the code above this module never knows which one it talks to.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ragtrace_collector.records import (
    STAGE_CONTEXT,
    STAGE_RERANKED,
    STAGE_RETRIEVED,
    DocumentRef,
    TraceRecord,
)
from ragtrace_collector.settings import parse_duration

ENV_STORE = "RAGTRACE_STORE"
DEFAULT_TENANT = "default"
DEFAULT_DATABASE = "ragtrace"
_DB_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StoreError(Exception):
    """Base of every store error; the message says what to do."""


class StoreLockedError(StoreError):
    """The embedded store directory is owned by another process."""


def arrow_table(columns: dict[str, list[Any]], time_columns: frozenset[str] = frozenset()) -> Any:
    """Column lists as an Arrow table; ``time_columns`` hold integer milliseconds (UTC)."""
    import pyarrow as pa

    return pa.table({name: pa.array(values, type=pa.timestamp("ms", tz="UTC")) if name in time_columns
                     else pa.array(values) for name, values in columns.items()})


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


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


def load_migrations(variant: str = "single") -> list[Migration]:
    """Migrations shipped in ``deploy/clickhouse/<variant>/NNNN_name.sql``, in version order."""
    if variant not in ("single", "cluster"):
        raise StoreError(f"unknown schema variant {variant!r}: use 'single' or 'cluster'")
    folder = resources.files("ragtrace_collector.migrations").joinpath(variant)
    found = []
    for entry in folder.iterdir():
        m = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if not m:
            continue
        text = entry.read_text(encoding="utf-8")
        statements = tuple(s.strip() for s in re.split(r"^;\s*$", text, flags=re.M) if _has_sql(s))
        found.append(Migration(int(m.group(1)), m.group(2), statements))
    return sorted(found, key=lambda mig: mig.version)


def _has_sql(chunk: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in chunk.splitlines())


class Store:
    """A connected store: a clickhouse-connect client plus the database name.

    All SQL that interpolates user values uses server-side parameters (``{name:Type}``); only the
    database name (validated against ``[A-Za-z_][A-Za-z0-9_]*``) is formatted into statements.
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
        # clickhouse-connect clients are not safe for concurrent use; chDB even less so.
        self.lock = threading.RLock()

    # --- plumbing -------------------------------------------------------------------------
    def table(self, name: str) -> str:
        return f"{self.database}.{name}"

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
                       time_columns: frozenset[str] = frozenset()) -> int:
        """Insert column lists (all the same length) in one statement; returns the row count.

        ``time_columns`` hold DateTime64(3) values as integer milliseconds since the epoch (UTC).
        Embedded chDB takes the batch through Arrow (chDB's ``Python()`` table function, the
        engine's fastest input path); a server gets clickhouse-connect's Native insert over HTTP,
        which any ClickHouse >= 24.8 accepts. Either way it is one INSERT per call.
        """
        names = list(columns)
        n = len(columns[names[0]]) if names else 0
        if n == 0:
            return 0
        with self.lock:
            if self.embedded and self._arrow_ok:
                try:
                    self._insert_arrow(table, columns, time_columns)
                    return n
                except _ArrowPathUnavailable:
                    self._arrow_ok = False
            self.client.insert(self.table(table), [columns[c] for c in names], column_names=names,
                               column_oriented=True)
        return n

    def _insert_arrow(self, table: str, columns: dict[str, list[Any]], time_columns: frozenset[str]) -> None:
        try:
            import pyarrow  # noqa: F401 -- a missing pyarrow means the Native insert path

            conn = self.client._backend._handle.conn  # the engine connection clickhouse-connect holds
        except (ImportError, AttributeError) as exc:
            raise _ArrowPathUnavailable(str(exc)) from exc
        self._insert_arrow_table(conn, table, arrow_table(columns, time_columns))

    def _insert_arrow_table(self, conn: Any, table: str, ragtrace_batch: Any) -> None:
        # chDB's Python() table function reads `ragtrace_batch` from this frame
        cols = ", ".join(f"`{c}`" for c in ragtrace_batch.column_names)
        conn.query(f"INSERT INTO {self.table(table)} ({cols}) SELECT {cols} FROM Python(ragtrace_batch)")

    def insert_arrow(self, table: str, tables: list[Any]) -> int:
        """Insert Arrow tables with the same columns in one statement; returns the row count.
        Timestamps are DateTime64(3) columns. Embedded: straight through chDB's ``Python()``; a
        server gets the rows through `insert_columns`' Native insert."""
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
                    self._insert_arrow_table(conn, table, combined)
                    return n
        times = frozenset(name for name, col in zip(combined.column_names, combined.columns, strict=True)
                          if pa.types.is_timestamp(col.type))
        columns = {name: (col.cast(pa.int64()) if name in times else col).to_pylist()
                   for name, col in zip(combined.column_names, combined.columns, strict=True)}
        return self.insert_columns(table, columns, times)

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
            self.insert("schema_migrations", [(mig.version, mig.name, datetime.now())],
                        ["version", "name", "applied_at"])
            applied.append(mig)
        return applied

    def pending_migrations(self) -> list[Migration]:
        done = self.applied_versions()
        return [m for m in load_migrations(self.variant) if m.version not in done]

    # --- reading traces -------------------------------------------------------------------
    def read_traces(
        self,
        *,
        tenant: str = DEFAULT_TENANT,
        service: str | None = None,
        release: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        trace_ids: Sequence[str] | None = None,
        limit: int | None = None,
        with_content: bool = False,
    ) -> Iterator[TraceRecord]:
        """Assembled queries, newest first. Only traces whose root span has arrived are returned."""
        where = ["tenant = {tenant:String}"]
        params: dict[str, Any] = {"tenant": tenant}
        if service is not None:
            where.append("service = {service:String}")
            params["service"] = service
        if release is not None:
            where.append("release = {release:String}")
            params["release"] = release
        if since is not None:
            where.append("start_time >= {since:DateTime64(3)}")
            params["since"] = since
        if until is not None:
            where.append("start_time < {until:DateTime64(3)}")
            params["until"] = until
        if trace_ids is not None:
            where.append("trace_id IN {trace_ids:Array(String)}")
            params["trace_ids"] = list(trace_ids)
        # Pages of roots (keyset pagination on the sort order), each assembled before the next is
        # read, so memory stays bounded however large the store is.
        page = 500
        left = limit
        after: tuple[Any, str] | None = None
        while left is None or left > 0:
            cond = list(where)
            if after is not None:
                cond.append("(start_time < {after_t:DateTime64(3, 'UTC')} OR (start_time = "
                            "{after_t:DateTime64(3, 'UTC')} AND trace_id > {after_id:String}))")
                params["after_t"], params["after_id"] = after
            n = page if left is None else min(page, left)
            roots = self.query_rows(
                "SELECT trace_id, query_id, service, release, environment, route, start_time, query, answer "
                f"FROM {self.table('queries')} FINAL WHERE {' AND '.join(cond)} "
                f"ORDER BY start_time DESC, trace_id LIMIT {int(n)}", params)
            if not roots:
                return
            yield from self._assemble(tenant, roots, with_content)
            if len(roots) < n:
                return
            after = (roots[-1][6], roots[-1][0])
            if left is not None:
                left -= len(roots)

    def _assemble(self, tenant: str, roots: list[tuple[Any, ...]], with_content: bool) -> Iterator[TraceRecord]:
        ids = [r[0] for r in roots]
        params = {"tenant": tenant, "ids": ids}
        content_col = "p.content" if with_content else "''"
        docs = self.query_rows(
            f"SELECT d.trace_id, d.stage, d.span_id, d.rank, d.doc_id, d.score, d.content_hash, "
            f"{content_col}, d.metadata, d.top_k, d.start_time "
            f"FROM {self.table('documents')} AS d FINAL "
            + (f"LEFT JOIN (SELECT content_hash, argMax(content, content_length) AS content "
               f"FROM {self.table('passages')} "
               "WHERE tenant = {tenant:String} AND content_hash IN (SELECT content_hash FROM "
               f"{self.table('documents')} WHERE tenant = {{tenant:String}} AND trace_id IN {{ids:Array(String)}}) "
               "GROUP BY content_hash) AS p ON p.content_hash = d.content_hash "
               if with_content else "")
            + "WHERE d.tenant = {tenant:String} AND d.trace_id IN {ids:Array(String)} "
            "ORDER BY d.trace_id, d.stage, d.start_time, d.span_id, d.rank",
            params,
        )
        by_trace: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
        for row in docs:
            by_trace.setdefault(row[0], {}).setdefault(row[1], []).append(row)
        gold_rows = self.query_rows(
            f"SELECT trace_id, query_id, doc_id FROM {self.table('gold')} FINAL "
            "WHERE tenant = {tenant:String} AND relevance > 0 AND (trace_id IN {ids:Array(String)} "
            "OR query_id IN {qids:Array(String)})",
            {**params, "qids": [r[1] for r in roots if r[1]]},
        )
        gold_by_trace: dict[str, set[str]] = {}
        gold_by_query: dict[str, set[str]] = {}
        for trace_id, query_id, doc_id in gold_rows:
            if trace_id:
                gold_by_trace.setdefault(trace_id, set()).add(doc_id)
            elif query_id:
                gold_by_query.setdefault(query_id, set()).add(doc_id)
        ref_by_trace, ref_by_query = self._references(tenant, ids, [r[1] for r in roots if r[1]])
        answers = self._generation_answers([r[0] for r in roots if r[8] is None], tenant)
        for trace_id, query_id, service, release, env, route, start, query, answer in roots:
            stages = by_trace.get(trace_id, {})
            retrieved = _last_span(stages.get(STAGE_RETRIEVED, []), with_content)
            reranked = _last_span(stages.get(STAGE_RERANKED, []), with_content)
            context = _last_span(stages.get(STAGE_CONTEXT, []), with_content)
            derived = False
            if not context:
                # OpenInference-only instrumentation: the generator saw the reranker's top_k,
                # or the retriever's output when there was no reranker.
                derived = True
                if reranked:
                    top_k = next((r[9] for r in stages.get(STAGE_RERANKED, []) if r[9] is not None), None)
                    context = reranked[: int(top_k)] if top_k else reranked
                else:
                    context = retrieved
            gold = gold_by_trace.get(trace_id) or gold_by_query.get(query_id, set())
            yield TraceRecord(
                trace_id=trace_id, query_id=query_id, tenant=tenant, service=service, release=release,
                environment=env, route=route, start_time=start, query=query,
                answer=answer if answer is not None else answers.get(trace_id),
                retrieved=retrieved, reranked=reranked, context=context,
                gold_ids=tuple(sorted(gold)),
                reference=ref_by_trace.get(trace_id) or ref_by_query.get(query_id),
                complete=True, context_derived=derived,
            )

    def _references(self, tenant: str, trace_ids: list[str],
                    query_ids: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        """Reference answers ``(by trace id, by query id)``: one sent on a trace's spans
        (``ragtrace.reference.answer``) is keyed by its trace and wins for that trace; imported ones
        (trace_id '') apply to every trace of their query id."""
        rows = self.query_rows(
            f"SELECT query_id, trace_id, reference FROM {self.table('reference_answers')} FINAL "
            "WHERE tenant = {tenant:String} AND reference != '' AND (trace_id IN {ids:Array(String)} "
            "OR (trace_id = '' AND query_id IN {qids:Array(String)}))",
            {"tenant": tenant, "ids": trace_ids, "qids": query_ids},
        )
        by_trace = {t: ref for _q, t, ref in rows if t}
        by_query = {q: ref for q, t, ref in rows if not t}
        return by_trace, by_query

    def _generation_answers(self, trace_ids: list[str], tenant: str) -> dict[str, str]:
        """The answer of a query whose root has none: the last generation span's ``output.value``."""
        if not trace_ids:
            return {}
        rows = self.query_rows(
            f"SELECT trace_id, argMax(JSONExtractString(attributes, 'output.value'), end_time) "
            f"FROM {self.table('spans')} FINAL WHERE tenant = {{tenant:String}} AND kind = 'LLM' "
            "AND trace_id IN {ids:Array(String)} GROUP BY trace_id",
            {"tenant": tenant, "ids": trace_ids},
        )
        return {r[0]: r[1] for r in rows if r[1]}


def _last_span(rows: list[tuple[Any, ...]], with_content: bool) -> tuple[DocumentRef, ...]:
    """Documents of the stage's last span (a query that retrieved twice keeps the final list)."""
    if not rows:
        return ()
    last = rows[-1][2]
    return tuple(
        DocumentRef(id=r[4], rank=int(r[3]), score=r[5], content_hash=r[6],
                    content=(r[7] or None) if with_content else None, metadata=r[8])
        for r in rows
        if r[2] == last
    )


def parse_time_bound(text: str | None, name: str) -> datetime | None:
    """A `--since`/`--until` bound: an ISO 8601 time (naive means UTC; ``Z`` allowed) or an age
    before now (``15m``, ``6h``, ``2d``; a leading ``-`` is accepted). Returns an aware UTC time."""
    if text is None:
        return None
    text = text.strip()
    try:
        return datetime.now(UTC) - timedelta(seconds=parse_duration(text.removeprefix("-")))
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--{name} {text!r}: give an ISO time (2026-01-31T12:00) or an age (15m, 6h, 2d)") from None
    return dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)



def open_store(store: str | os.PathLike[str] | None = None, *, migrate: bool = True,
               variant: str = "single", cluster: str | None = None) -> Store:
    """Connect to a store: a directory (embedded chDB) or ``http(s)://user:password@host:port/db``.

    ``None`` means ``$RAGTRACE_STORE`` or the per-user default directory. Raises `StoreLockedError`
    when another process owns the embedded directory, `StoreError` for anything else.
    """
    import clickhouse_connect

    location = str(store) if store is not None else str(default_store_path())
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
            )
        except Exception as exc:
            raise StoreError(f"cannot reach the ClickHouse server at {url.hostname}:{url.port}: {exc}") from exc
        st = Store(client, database, location=_redacted(location), embedded=False, variant=variant, cluster=cluster)
    else:
        path = Path(location).expanduser()
        if path.exists() and not path.is_dir():
            raise StoreError(f"--store {path} is a file; give a directory (embedded store) or a server URL")
        path.mkdir(parents=True, exist_ok=True)
        try:
            client = clickhouse_connect.get_client(interface="chdb", path=str(path))
        except Exception as exc:
            if "lock" in str(exc).lower() or _locked_by_another_process(path):
                raise StoreLockedError(
                    f"the embedded store {path} is in use by another process (usually `ragtrace serve`). "
                    "An embedded store allows one process at a time: run this command through the "
                    "serving process (e.g. `ragtrace audit --server URL`), stop it first, or use a "
                    "ClickHouse server URL for --store."
                ) from exc
            raise StoreError(f"cannot open the embedded store {path}: {exc}") from exc
        st = Store(client, DEFAULT_DATABASE, location=str(path), embedded=True, variant=variant)
    if migrate:
        st.migrate()
    return st


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
