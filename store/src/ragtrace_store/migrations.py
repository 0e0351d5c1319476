"""Schema migrations: numbered SQL files in ``ragtrace_store/migrations/single/``, one schema source.

The single-node DDL (``single/NNNN_name.sql``; statements separated by lines holding only ``;``,
every statement idempotent, ``{db}`` standing for the database) is the only schema there is.
``load_migrations("cluster")`` generates the clustered variant from it, statement by statement.
Every single-node ``CREATE TABLE IF NOT EXISTS {db}.<name> (...) ENGINE = <X>MergeTree(<args>) ...``
becomes two statements:

* ``CREATE TABLE IF NOT EXISTS {db}.<name>_local ON CLUSTER '{cluster}' (...)`` with
  ``ENGINE = Replicated<X>MergeTree('/clickhouse/tables/{shard}/{db}/<name>', '{replica}', <args>)``
  and everything else (columns, codecs, defaults, PARTITION BY, ORDER BY, TTL, SETTINGS, indexes)
  copied verbatim: the replicated table on every node;
* ``CREATE TABLE IF NOT EXISTS {db}.<name> ON CLUSTER '{cluster}' AS {db}.<name>_local``
  with ``ENGINE = Distributed('{cluster}', '{db}', '<name>_local', <sharding key>)``: what the
  collector and the evaluator read and write.

The one thing that cannot be derived, the sharding key, is declared in the single-node SQL by a
comment line directly before the table's ``CREATE TABLE``::

    -- cluster: shard by cityHash64(trace_id)
    CREATE TABLE IF NOT EXISTS {db}.spans
    ...

Rows that deduplicate together (one trace's spans, one passage hash, one tenant's review state)
must share a shard, or FINAL is wrong across shards; choose the key accordingly. A table without
the line, a line not followed by its CREATE TABLE, or a statement the generator does not know how
to translate (plain views, non-MergeTree engines, data-changing ALTERs, ...) is an error here rather
than a guess: extend ``cluster_statements`` when a migration needs one.

``CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.<name> TO {db}.<target> AS SELECT ... FROM
{db}.<source> ...`` (a SELECT that reads its source table only) becomes the same view as
``{db}.<name>_local ON CLUSTER '{cluster}'`` from ``<source>_local`` to ``<target>_local``: each shard
copies the rows inserted on it, so source and target must be sharded alike. ``INSERT INTO
{db}.<table> (columns) SELECT ...``, a backfill filling a table the migration creates from the rows
written before it, runs as it is, once, through the Distributed tables. A backfill is not
idempotent as a DDL statement is: it is for tables whose readers tolerate a row copied twice (a
migration interrupted after it runs it again). ``{cluster}`` is the cluster name
(replaced by `Store.migrate`); ``{shard}`` and ``{replica}`` are the servers' own macros.

``ALTER TABLE {db}.<name> <action>, ...`` becomes ``ALTER TABLE {db}.<name>_local ON CLUSTER
'{cluster}' <every action>`` (the data lives there) and, when some action changes a column
(``ADD | DROP | MODIFY | RENAME | COMMENT COLUMN``), ``ALTER TABLE {db}.<name> ON CLUSTER
'{cluster}' <those actions>``: a Distributed table has columns of its own and would otherwise not
see the change. Index, projection, TTL and setting actions apply to the ``_local`` table only.
Column and index actions must say ``IF [NOT] EXISTS``, so a migration interrupted half-way can run
again. Anything else (``UPDATE``, ``DELETE``, partition operations, ...) is refused: it changes
data, not the schema, and has no place in a migration.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

from ragtrace_store.errors import StoreError


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


def load_migrations(variant: str = "single") -> list[Migration]:
    """The migrations in version order: ``single`` as shipped in ``migrations/single/``, ``cluster``
    generated from them (see the module docstring)."""
    if variant not in ("single", "cluster"):
        raise StoreError(f"unknown schema variant {variant!r}: use 'single' or 'cluster'")
    return list(_single() if variant == "single" else _cluster())


@functools.cache
def _single() -> tuple[Migration, ...]:
    folder = resources.files("ragtrace_store").joinpath("migrations", "single")
    found = []
    for entry in folder.iterdir():
        m = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if not m:
            continue
        text = entry.read_text(encoding="utf-8")
        statements = tuple(s.strip() for s in re.split(r"^;\s*$", text, flags=re.M) if _has_sql(s))
        found.append(Migration(int(m.group(1)), m.group(2), statements))
    return tuple(sorted(found, key=lambda mig: mig.version))


@functools.cache
def _cluster() -> tuple[Migration, ...]:
    out = []
    for mig in _single():
        try:
            statements = tuple(s for stmt in mig.statements for s in cluster_statements(stmt))
        except StoreError as exc:
            raise StoreError(f"migration {mig.version:04d}_{mig.name}: {exc}") from None
        out.append(Migration(mig.version, mig.name, statements))
    return tuple(out)


_SHARD_BY = re.compile(r"^[ \t]*--[ \t]*cluster:[ \t]*shard by[ \t]+(?P<key>.+?)[ \t]*$", re.M | re.I)
_CREATE = re.compile(r"^[ \t]*CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+(?P<table>\{db\}\.(?P<name>\w+))",
                     re.M | re.I)
_ENGINE = re.compile(r"\bENGINE\s*=\s*(?P<engine>\w+)", re.I)


_ALTER = re.compile(r"^\s*ALTER\s+TABLE\s+(?P<table>\{db\}\.(?P<name>\w+))(\s+|$)", re.I)
#: ALTER actions that change a column: applied to the ``_local`` and to the Distributed table
_COLUMN_ACTION = re.compile(r"^(ADD|DROP|MODIFY|RENAME|COMMENT)\s+COLUMN\b", re.I)
#: ALTER actions that change only the stored data's layout: applied to the ``_local`` table
_LOCAL_ACTION = re.compile(r"^((ADD|DROP|MATERIALIZE|CLEAR)\s+(INDEX|PROJECTION)|MATERIALIZE\s+COLUMN|"
                           r"MODIFY\s+(TTL|SETTING|COMMENT)|RESET\s+SETTING|REMOVE\s+TTL)\b", re.I)
#: actions that must be idempotent (a migration interrupted half-way runs again)
_NEEDS_IF = re.compile(r"^(ADD|DROP|MODIFY|RENAME|COMMENT|CLEAR)\s+(COLUMN|INDEX|PROJECTION)\b", re.I)


def cluster_statements(stmt: str) -> list[str]:
    """The clustered statements for one single-node statement: its replicated ``_local`` table and
    the Distributed table on top (for an ALTER: the ALTER of each; for a materialized view: the view
    on the local tables; a backfill as it is: see the module docstring). Raises `StoreError` for
    anything it cannot translate faithfully."""
    code = _mask(stmt)
    if _ALTER.match(code):
        return _cluster_alter(stmt, code)
    if _VIEW.match(code):
        return [_cluster_view(stmt, code)]
    if _BACKFILL.match(code):
        return [_backfill(stmt, code)]
    create = _CREATE.search(code)
    if not create or code[:create.start()].strip():
        head = code.strip().split("\n", 1)[0][:80]
        raise StoreError(f"cannot generate the clustered variant of {head!r}: only "
                         "`CREATE TABLE IF NOT EXISTS {db}.<name> ... ENGINE = ...MergeTree` is supported")
    name = create.group("name")
    if re.search(r"\bON\s+CLUSTER\b", code, re.I):
        raise StoreError(f"table {name}: the single-node DDL must not say ON CLUSTER (it is generated)")
    if re.search(r"\bAS\s+SELECT\b|\bAS\s+\{db\}", code, re.I):
        raise StoreError(f"table {name}: CREATE TABLE ... AS is not supported; spell the columns out")

    # the sharding key: `-- cluster: shard by EXPR`, the line directly before CREATE TABLE
    keys = list(_SHARD_BY.finditer(stmt))
    before = stmt[:create.start()].rstrip("\n").rsplit("\n", 1)[-1]
    if len(keys) != 1 or not _SHARD_BY.fullmatch(before):
        raise StoreError(f"table {name}: put exactly one `-- cluster: shard by EXPR` line directly before "
                         "its CREATE TABLE (the Distributed table's sharding key)")
    key = keys[0].group("key")

    engines = list(_ENGINE.finditer(code))
    if len(engines) != 1:
        raise StoreError(f"table {name}: expected one ENGINE clause, found {len(engines)}")
    engine = engines[0]
    family = engine.group("engine")
    if not family.endswith("MergeTree") or family.startswith("Replicated"):
        raise StoreError(f"table {name}: engine {family} has no replicated twin to generate; use a "
                         "non-replicated *MergeTree engine")
    end = engine.end("engine")
    args = ""
    after = code[end:]
    if after.lstrip().startswith("("):
        open_at = end + (len(after) - len(after.lstrip()))
        close_at = _closing(code, open_at)
        args = stmt[open_at + 1:close_at].strip()
        end = close_at + 1
    replication = f"'/clickhouse/tables/{{shard}}/{{db}}/{name}', '{{replica}}'"
    replicated = f"Replicated{family}({replication}{', ' + args if args else ''})"

    local = (stmt[:create.start("table")] + f"{{db}}.{name}_local ON CLUSTER '{{cluster}}'"
             + stmt[create.end("table"):engine.start("engine")] + replicated + stmt[end:])
    distributed = (f"CREATE TABLE IF NOT EXISTS {{db}}.{name} ON CLUSTER '{{cluster}}' AS {{db}}.{name}_local\n"
                   f"ENGINE = Distributed('{{cluster}}', '{{db}}', '{name}_local', {key})")
    return [local, distributed]


_VIEW = re.compile(r"^\s*CREATE\s+MATERIALIZED\s+VIEW\s+IF\s+NOT\s+EXISTS\s+\{db\}\.(?P<name>\w+)\s+"
                   r"TO\s+\{db\}\.(?P<target>\w+)\s+AS\s+SELECT\b", re.I)
_BACKFILL = re.compile(r"^\s*INSERT\s+INTO\s+\{db\}\.\w+\b", re.I)
_BACKFILL_FORM = re.compile(r"^\s*INSERT\s+INTO\s+\{db\}\.\w+\s*\([^()]*\)\s*SELECT\b", re.I)
_TABLE_NAME = re.compile(r"\{db\}\.(\w+)")


def _cluster_view(stmt: str, code: str) -> str:
    """``CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.<name> TO {db}.<target> AS SELECT ... FROM
    {db}.<source> ...`` on every node, over the local tables: each shard's view copies the rows
    inserted into its ``<source>_local`` into its ``<target>_local`` (so the two must be sharded
    alike). The SELECT reads its source only: a view reading other tables would read them whole for
    every insert."""
    view = _VIEW.match(code)
    assert view is not None
    name = view.group("name")
    if re.search(r"\bON\s+CLUSTER\b", code, re.I):
        raise StoreError(f"view {name}: the single-node DDL must not say ON CLUSTER (it is generated)")
    sources = _TABLE_NAME.findall(code[view.end():])
    if len(sources) != 1:
        raise StoreError(f"view {name}: its SELECT must read exactly one table of the database (its source), "
                         f"found {len(sources)}")
    source = _TABLE_NAME.search(code, view.end())
    assert source is not None
    # edits by position (the masked text has the statement's), the last first
    edits = [(source.end(1), source.end(1), "_local"), (view.end("target"), view.end("target"), "_local"),
             (view.start("name"), view.end("name"), f"{name}_local ON CLUSTER '{{cluster}}'")]
    out = stmt
    for begin, end, text in edits:
        out = out[:begin] + text + out[end:]
    return out


def _backfill(stmt: str, code: str) -> str:
    """``INSERT INTO {db}.<table> (...) SELECT ...`` filling a table a migration creates from rows
    written before it: run as it is, through the Distributed tables (an INSERT has no ON CLUSTER,
    and it runs once, not once per node)."""
    if re.search(r"\bON\s+CLUSTER\b", code, re.I):
        raise StoreError("a backfill (INSERT INTO ... SELECT) must not say ON CLUSTER: it runs once, through the "
                         "Distributed tables")
    if not _BACKFILL_FORM.match(code):
        raise StoreError("a migration's INSERT is a backfill: `INSERT INTO {db}.<table> (columns) SELECT ...` "
                         "from rows already in the store")
    return stmt


def _cluster_alter(stmt: str, code: str) -> list[str]:
    """``ALTER TABLE {db}.<name> ...`` for the ``_local`` table, and for the Distributed table when
    a column changes."""
    alter = _ALTER.match(code)
    assert alter is not None
    name = alter.group("name")
    if re.search(r"\bON\s+CLUSTER\b", code, re.I):
        raise StoreError(f"ALTER of {name}: the single-node DDL must not say ON CLUSTER (it is generated)")
    # actions are re-joined on new lines, so a trailing comment must not swallow the next comma
    actions = _split_actions(_mask(stmt, strings=False), code, alter.end())
    if not actions:
        raise StoreError(f"ALTER of {name}: no action after the table name")
    column = []
    for text, masked in actions:
        head = " ".join(masked.split()[:3])
        if _COLUMN_ACTION.match(masked):
            column.append(text)
        elif not _LOCAL_ACTION.match(masked):
            raise StoreError(f"ALTER of {name}: cannot generate the clustered variant of {head!r}; only column, "
                             "index, projection, TTL and setting changes belong in a migration")
        if _NEEDS_IF.match(masked) and not re.search(r"\bIF\s+(NOT\s+)?EXISTS\b", masked, re.I):
            raise StoreError(f"ALTER of {name}: {head!r} must say IF NOT EXISTS / IF EXISTS, so the "
                             "migration can run again after an interruption")
    head = f"ALTER TABLE {{db}}.{name}"
    out = [f"{head}_local ON CLUSTER '{{cluster}}'\n" + ",\n".join(text for text, _ in actions)]
    if column:
        out.append(f"{head} ON CLUSTER '{{cluster}}'\n" + ",\n".join(column))
    return out


def _split_actions(stmt: str, code: str, start: int) -> list[tuple[str, str]]:
    """The comma-separated actions of an ALTER from ``start`` on, as ``(text, masked text)`` pairs,
    split at commas outside parentheses, quotes and comments."""
    out, depth, begin = [], 0, start
    for i in range(start, len(code) + 1):
        c = code[i] if i < len(code) else ","
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            text, masked = stmt[begin:i].strip(), code[begin:i].strip()
            if masked:
                out.append((text, masked))
            begin = i + 1
    return out


def _mask(sql: str, *, strings: bool = True) -> str:
    """``sql`` with comments and quoted strings/identifiers blanked (same length, newlines kept), so
    the clauses can be found by position without being fooled by their text. ``strings=False``
    blanks the comments only."""
    out = list(sql)
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "'\"`":
            j = i + 1
            while j < n and sql[j] != c:
                j += 2 if sql[j] == "\\" else 1
            j = min(j + 1, n)
            i += 1  # keep the opening quote
            j -= 1  # and the closing one
        else:
            i += 1
            continue
        if c in "'\"`" and not strings:
            i = j + 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j + 1 if c in "'\"`" else j
    return "".join(out)


def _closing(code: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == "(":
            depth += 1
        elif code[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise StoreError("unbalanced parentheses in the ENGINE clause")


def _has_sql(chunk: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in chunk.splitlines())
