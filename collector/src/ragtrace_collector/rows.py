"""The rows the collector writes: each table's insert columns, and `Rows`, one request's rows.

Column order is the store's insert order (`Store.insert_columns` takes these names). Times are
integer milliseconds since the epoch (UTC) in the lists, ``timestamp[ms, UTC]`` in Arrow tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

#: Column order of every table the collector writes (the store's `insert_columns` takes these).
COLUMNS: dict[str, tuple[str, ...]] = {
    "spans": ("tenant", "trace_id", "span_id", "parent_span_id", "name", "kind", "service", "release",
              "environment", "start_time", "end_time", "status_code", "status_message", "attributes",
              "events", "resource", "dropped_attributes", "cut_attributes", "received_at"),
    "queries": ("tenant", "trace_id", "span_id", "query_id", "service", "release", "environment", "route",
                "query", "answer", "answer_streamed", "status_code", "start_time", "duration_ms",
                "root_priority", "kind", "received_at"),
    "documents": ("tenant", "trace_id", "span_id", "stage", "rank", "doc_id", "score", "content_hash",
                  "metadata", "top_k", "start_time", "received_at"),
    "passages": ("tenant", "content_hash", "content", "content_length", "truncated", "first_seen"),
    "gold": ("tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"),
    "feedback": ("tenant", "trace_id", "query_id", "span_id", "score", "comment", "added_at"),
    "reference_answers": ("tenant", "query_id", "trace_id", "reference", "source", "added_at"),
}
#: Columns holding DateTime64(3) values, as integer milliseconds since the epoch (UTC).
TIME_COLUMNS = frozenset({"start_time", "end_time", "received_at", "first_seen", "added_at"})


@dataclass
class Rows:
    """Column lists for each table plus what the sender should hear about. Mutable accumulator."""

    cols: dict[str, dict[str, list[Any]]] = field(
        default_factory=lambda: {t: {c: [] for c in cs} for t, cs in COLUMNS.items()})
    spans: int = 0
    rejected: int = 0
    #: spans whose sender dropped attributes (``dropped_attributes_count`` > 0)
    dropped_attribute_spans: int = 0
    #: reasons for rejected spans and warnings about dropped attributes, deduplicated
    messages: list[str] = field(default_factory=list)
    #: memory held, for the admission bound and the writer's bounded queue: the strings that grow with
    #: what was sent by their size in memory (a 64 KB query is held in the span's attributes and as the
    #: query: twice), the rest per row (`spans.SPAN_ROW_BYTES`, `spans.QUERY_ROW_BYTES`, the documents'
    #: per-row figures of the compiled walk)
    nbytes: int = 0
    #: rows as Arrow tables (columns in `COLUMNS` order), besides the lists: the compiled walk
    #: hands over ``documents`` this way (`ragtrace_collector.native_walk`)
    arrow: dict[str, list[Any]] = field(default_factory=dict)

    def count(self, table: str) -> int:
        first = COLUMNS[table][0]
        return len(self.cols[table][first]) + sum(int(t.num_rows) for t in self.arrow.get(table, ()))

    def columns(self, table: str) -> dict[str, list[Any]]:
        """All rows of ``table`` as column lists, the Arrow tables' after the lists' (times as
        integer milliseconds, as in the lists): what `Store.insert_columns` takes. A copy."""
        out = {name: list(values) for name, values in self.cols[table].items()}
        for tab in self.arrow.get(table, ()):
            for name in COLUMNS[table]:
                column = tab.column(name)
                if name in TIME_COLUMNS:
                    column = column.cast(pa.int64())
                out[name] += column.to_pylist()
        return out

    def extend(self, other: Rows) -> None:
        for table, cols in other.cols.items():
            mine = self.cols[table]
            for name, values in cols.items():
                mine[name].extend(values)
        for table, tables in other.arrow.items():
            self.arrow.setdefault(table, []).extend(tables)
        self.spans += other.spans
        self.rejected += other.rejected
        self.dropped_attribute_spans += other.dropped_attribute_spans
        self.nbytes += other.nbytes

    def note(self, message: str) -> None:
        if message not in self.messages and len(self.messages) < 20:
            self.messages.append(message)

    def error_message(self) -> str:
        return "; ".join(self.messages)
