"""A store wrapper that counts what the engine hands back to Python, for tests that check a read
returns what its result needs and not what the table holds."""

from __future__ import annotations

from typing import Any


class CountingStore:
    """Every attribute of ``store``; ``query_rows`` also counts the rows it returned (``rows``) and
    the values in them, an array counting as its length (``values``)."""

    def __init__(self, store: Any) -> None:
        self._store, self.rows, self.values = store, 0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def query_rows(self, sql: str, parameters: Any = None) -> list[tuple[Any, ...]]:
        rows = self._store.query_rows(sql, parameters)
        self.rows += len(rows)
        self.values += sum(len(v) if isinstance(v, list) else 1 for r in rows for v in r)
        return rows
