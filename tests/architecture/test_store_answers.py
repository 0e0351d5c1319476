"""The store answers questions; the packages above it ask them. The collector, the evaluator, review
and the CLI hold no SQL: no query, command or insert through a `Store` (but the collector inserts the
rows it decodes through the store's insert calls), no table name resolved (``store.table``), no SQL
text, and none of the store's SQL fragments imported (its invariants, one winning root row per trace
and the newest label per key, are kept inside the store)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the packages that ask the store and never write its SQL
ASKING = {"ragtrace_evaluator": ROOT / "evaluator" / "src" / "ragtrace_evaluator",
          "ragtrace_review": ROOT / "review" / "src" / "ragtrace_review",
          "ragtrace_cli": ROOT / "cli" / "src" / "ragtrace_cli",
          # the collector writes the rows it decodes (the store's insert calls) and asks everything else
          "ragtrace_collector": ROOT / "collector" / "src" / "ragtrace_collector"}
#: the `Store` methods a package may call all the same: the collector is the one that inserts rows
ALLOWED = {"ragtrace_collector": frozenset({"insert_columns", "insert_arrow"})}
#: receivers whose methods share a name with a `Store`'s and are not the store (``pa.table(...)``)
NOT_A_STORE = frozenset({"pa", "pyarrow"})
#: a `Store`'s methods that take SQL or a table name
SQL_METHODS = frozenset({"query_rows", "command", "insert", "insert_columns", "insert_arrow", "table", "local_table"})
#: the store's SQL fragments (text spliced into a query), by name
FRAGMENTS = frozenset({"winners_sql", "rows_of", "window_band", "query_condition", "SDK_ROOT_PRIORITY", "TRACE_HASH",
                       "ROOT_ORDER", "ROOT_SPREAD", "newest_labels_sql"})
#: SQL in a string (an f-string's literal parts count one by one); prose that names a statement
#: ("ALTER TABLE ... MODIFY TTL" in a command's help) is not SQL
_SQL_TEXT = re.compile(r"\bSELECT\s|\b(INSERT INTO|ALTER TABLE|OPTIMIZE TABLE|CREATE TABLE|DROP TABLE)\s+[{\w]"
                       r"|\bFINAL\s+WHERE\b")


def sql_sites(path: Path, allowed: frozenset[str] = frozenset()) -> list[str]:
    """Where ``path`` writes SQL or asks for a fragment: ``line: what``. ``allowed``: `Store` methods
    not counted."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in SQL_METHODS - allowed
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id in NOT_A_STORE)):
            found.append(f"{node.lineno}: .{node.func.attr}(...)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _SQL_TEXT.search(node.value):
            found.append(f"{node.lineno}: SQL text {node.value[:60]!r}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragtrace_store"):
            found += [f"{node.lineno}: imports {a.name} from {node.module}" for a in node.names if a.name in FRAGMENTS]
            if node.module == "ragtrace_store.roots":
                found.append(f"{node.lineno}: imports ragtrace_store.roots")
        elif isinstance(node, ast.Attribute) and node.attr in FRAGMENTS:
            found.append(f"{node.lineno}: uses {node.attr}")
    return found


@pytest.mark.parametrize("package", sorted(ASKING))
def test_the_package_holds_no_sql(package: str) -> None:
    modules = sorted(ASKING[package].rglob("*.py"))
    assert modules
    allowed = ALLOWED.get(package, frozenset())
    sites = {str(m.relative_to(ROOT)): s for m in modules if (s := sql_sites(m, allowed))}
    assert sites == {}, "ask the store (a function of ragtrace_store that owns its SQL) instead:\n" + "\n".join(
        f"{m}:{s}" for m, lines in sites.items() for s in lines)


def test_the_scan_finds_sql_where_there_is_some() -> None:
    """The scan is not vacuous: the store's own modules write SQL and splice its fragments."""
    listing = sql_sites(ROOT / "store" / "src" / "ragtrace_store" / "listing.py")
    assert any(".query_rows(" in s for s in listing) and any("SQL text" in s for s in listing)
    assert any("imports winners_sql" in s for s in listing)
