"""An embedded insert larger than the slice bound goes in as several byte-bounded statements, every row
exactly once; an ordinary one stays one statement; a retry after a slice failed part-way is harmless."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest

from ragtrace_collector.assemble import assemble, assemble_body
from ragtrace_collector.rows import TIME_COLUMNS
from ragtrace_store import arrow_table
from ragtrace_store.insert_slices import column_bytes, row_bytes, slices, table_row_bytes
from tests import otlp_builders as T

KB = 1024


def test_slices_cover_every_row_once_within_the_bound() -> None:
    sizes = [700, 10, 10, 5000, 300, 300, 300, 2, 900, 40] * 7
    got = slices(sizes, 1000)
    assert [s for s, _ in got] == [0] + [e for _, e in got[:-1]] and got[-1][1] == len(sizes)
    for start, end in got:
        assert sum(sizes[start:end]) <= 1000 or end - start == 1  # a row larger than the bound goes alone
    assert slices([], 1000) == []
    assert slices([10] * 50, 1000) == [(0, 50)]  # within the bound: one slice


def test_slices_are_about_even_with_no_sliver_at_the_end() -> None:
    # 1,022 rows of 64 KB (a 64 MiB request of large values) by 32 MiB: three slices of ~340, not 511 + 511 + 0
    got = slices([65_736] * 1022, 32 * KB * KB)
    assert [end - start for start, end in got] == [340, 340, 342]
    # a few rows over a multiple of the bound join the last slice rather than making a part of their own
    assert slices([100] * 21, 1100) == [(0, 10), (10, 21)]
    assert len(slices([100] * 21, 1050)) == 3  # ... unless that breaks the bound


def test_estimated_bytes_count_strings_lists_numbers_and_nulls() -> None:
    columns: dict[str, list[Any]] = {"text": ["abc", "", "x" * 1000], "maybe": [None, "yy", None], "n": [1, 2, 3],
               "keys": [[], ["a", "b"], ["c"]]}
    per_row = row_bytes(columns)
    assert len(per_row) == 3 and per_row[2] > 1000 > per_row[0]
    assert sum(per_row) == sum(column_bytes(v) for v in columns.values())
    table = pa.table({"text": ["abc", "", "x" * 1000], "maybe": pa.array([None, "yy", None], pa.string()),
                      "n": pa.array([1, 2, 3], pa.int64()), "keys": [[], ["a", "b"], ["c"]]})
    arrow = table_row_bytes(table)
    assert len(arrow) == 3 and arrow[2] > 1000 > arrow[0]


def _large_value_rows(tenant: str, n: int, value_bytes: int) -> Any:
    specs = [T.SpanSpec(uuid.uuid4().hex, uuid.uuid4().hex[:16], "root",
                        {"input.value": f"{i:06d}" + "v" * value_bytes}) for i in range(n)]
    return assemble(T.request(specs), tenant, int(time.time() * 1000))


def _stored(store: Any, table: str, tenant: str) -> tuple[int, int, int]:
    """(rows, rows under FINAL, distinct spans) of ``table`` for ``tenant``."""
    t = store.table(table)
    raw = store.query_rows(f"SELECT count(), uniqExact(trace_id, span_id) FROM {t} WHERE tenant = {{t:String}}",
                           {"t": tenant})[0]
    final = store.query_rows(f"SELECT count() FROM {t} FINAL WHERE tenant = {{t:String}}", {"t": tenant})[0]
    return int(raw[0]), int(final[0]), int(raw[1])


def test_a_large_insert_goes_in_as_several_statements_every_row_once(chdb_store: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chdb_store, "insert_slice_bytes", 256 * KB)
    tenant = f"slices-{uuid.uuid4().hex[:8]}"
    rows = _large_value_rows(tenant, 40, 32 * KB)  # ~1.3 MB of attributes JSON: several slices
    before = chdb_store.insert_statements
    assert chdb_store.insert_columns("spans", rows.cols["spans"], TIME_COLUMNS) == 40
    statements = chdb_store.insert_statements - before
    assert 5 <= statements <= 8, statements  # ~1.3 MB in slices of at most 256 KB: 6
    assert _stored(chdb_store, "spans", tenant) == (40, 40, 40)
    got = chdb_store.query_rows(f"SELECT span_id, length(attributes) FROM {chdb_store.table('spans')} "
                                "WHERE tenant = {t:String} ORDER BY span_id", {"t": tenant})
    assert [s for s, _ in got] == sorted(rows.cols["spans"]["span_id"]) and all(n > 32 * KB for _, n in got)


def test_an_arrow_insert_is_sliced_alike(chdb_store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chdb_store, "insert_slice_bytes", 256 * KB)
    tenant = f"slices-arrow-{uuid.uuid4().hex[:8]}"
    rows = _large_value_rows(tenant, 30, 32 * KB)
    table = arrow_table(rows.cols["spans"], TIME_COLUMNS)
    before = chdb_store.insert_statements
    assert chdb_store.insert_arrow("spans", [table.slice(0, 10), table.slice(10)]) == 30
    assert chdb_store.insert_statements - before >= 4
    assert _stored(chdb_store, "spans", tenant) == (30, 30, 30)


def test_an_ordinary_batch_stays_one_statement(chdb_store: Any) -> None:
    """A full batch of the collector's writer (8,000 spans: 2,000 traces of 20 retrieved passages, 1 KB
    each; its documents are the largest table, 27 MB) is one statement per table."""
    tenant = f"slices-ordinary-{uuid.uuid4().hex[:8]}"
    docs = T.corpus(2000, size=1000)
    body = T.request([s for i in range(2000) for s in T.standard_trace(docs, i).spans()]).SerializeToString()
    rows = assemble_body(body, tenant, int(time.time() * 1000))
    assert rows.spans == 8000
    for table in ("documents", "spans", "queries"):
        before = chdb_store.insert_statements
        if table in rows.arrow:
            chdb_store.insert_arrow(table, rows.arrow[table])
        else:
            chdb_store.insert_columns(table, rows.cols[table], TIME_COLUMNS)
        assert chdb_store.insert_statements - before == 1, table
    assert chdb_store.query_rows(f"SELECT count() FROM {chdb_store.table('documents')} "
                                 "WHERE tenant = {t:String}", {"t": tenant})[0][0] == rows.count("documents")


def test_a_retry_after_a_slice_failed_part_way_stores_each_row_once(chdb_store: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """What the collector's writer does when an insert fails: it writes the whole batch again (retried,
    isolated or replayed from the spool). The slices that went in the first time are written twice;
    the table's key (ReplacingMergeTree) keeps one row of each."""
    monkeypatch.setattr(chdb_store, "insert_slice_bytes", 256 * KB)
    tenant = f"slices-retry-{uuid.uuid4().hex[:8]}"
    rows = _large_value_rows(tenant, 40, 32 * KB)
    real = type(chdb_store)._insert_arrow_table
    calls = {"n": 0}

    def third_fails(self: Any, conn: Any, table: str, batch: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the engine refused the third slice")
        real(self, conn, table, batch)

    monkeypatch.setattr(type(chdb_store), "_insert_arrow_table", third_fails)
    with pytest.raises(RuntimeError, match="third slice"):
        chdb_store.insert_columns("spans", rows.cols["spans"], TIME_COLUMNS)
    _, partial, _ = _stored(chdb_store, "spans", tenant)
    assert 0 < partial < 40  # the first two slices went in
    before = chdb_store.insert_statements
    assert chdb_store.insert_columns("spans", rows.cols["spans"], TIME_COLUMNS) == 40  # all of it again
    assert chdb_store.insert_statements - before >= 5
    raw, final, distinct = _stored(chdb_store, "spans", tenant)
    # the rows of the first two slices were written twice; the key keeps one of each (merges may
    # already have dropped the older copies: the raw count is at least one per span)
    assert raw >= 40 and final == distinct == 40


def test_the_engine_gives_memory_back_unless_a_statement_runs(chdb_store: Any) -> None:
    assert chdb_store.release_memory() is True
    held, release = threading.Event(), threading.Event()

    def statement() -> None:  # stands for a statement in progress: it holds the store's lock
        with chdb_store.lock:
            held.set()
            release.wait(10)

    worker = threading.Thread(target=statement)
    worker.start()
    try:
        assert held.wait(10)
        t0 = time.monotonic()
        assert chdb_store.release_memory() is False  # not waited for
        assert time.monotonic() - t0 < 0.5
    finally:
        release.set()
        worker.join()
