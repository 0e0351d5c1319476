"""What the writer holds is counted: a batch's rows by what they hold in memory, and the insert's working
memory beside them, until the insert is done; a sliced insert that fails part-way is replayed with every
span stored once; after large work, freed memory goes back to the system."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import lz4.frame
import pytest

from ragtrace_collector.assemble import assemble_body
from ragtrace_collector.memory import GiveBack
from ragtrace_collector.metrics import Metrics
from ragtrace_collector.spool import Spool
from ragtrace_collector.writer import Writer, insert_working_bytes
from ragtrace_store import insert_slices
from ragtrace_store.insert_slices import SLICE_BYTES
from tests import hostile_bodies as H
from tests import otlp_builders as T

KB = 1024
MiB = 1024 * KB


def _held_by(make: Any) -> tuple[Any, int]:
    """``make()``'s result and the Python memory it holds (traced, after a collection)."""
    gc.collect()
    tracemalloc.start()
    try:
        got = make()
        gc.collect()
        return got, tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape", ["large-values", "tiny-spans", "ordinary"])
def test_rows_are_charged_what_they_hold(shape: str) -> None:
    """Before, a 64 KB value counted once though it is held twice (the span's attributes and the query),
    and an attribute-less span 200 bytes though it holds about 600."""
    docs = T.corpus(100, size=1000)
    body = {"large-values": lambda: H.large_values(4 * MiB),
            "tiny-spans": lambda: H.tiny_spans(20_000),
            "ordinary": lambda: T.request([s for i in range(100) for s in T.standard_trace(docs, i).spans()])
            .SerializeToString()}[shape]()
    assemble_body(body, "t", 1)  # caches filled once, as in a running collector
    # the rows are Python objects, their Arrow columns made of Python bytes: tracemalloc sees them
    rows, held = _held_by(lambda: assemble_body(body, "t", 1))
    assert 0.8 * held <= rows.nbytes <= 1.5 * held, (rows.nbytes, held)
    if shape == "large-values":
        assert rows.nbytes >= 2 * 4 * MiB * 0.97  # each value twice


class _Watched:
    """The real store, noting the writer's held bytes at each table insert."""

    def __init__(self, store: Any, writer: list[Writer]) -> None:
        self._store, self._writer, self.held_at_insert = store, writer, list[int]()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def insert_columns(self, *args: Any, **kwargs: Any) -> int:
        self.held_at_insert.append(self._writer[0].held_bytes)
        return int(self._store.insert_columns(*args, **kwargs))

    def insert_arrow(self, *args: Any, **kwargs: Any) -> int:
        self.held_at_insert.append(self._writer[0].held_bytes)
        return int(self._store.insert_arrow(*args, **kwargs))


def _large_request(tenant: str) -> tuple[bytes, Any]:
    body = H.large_values(2 * MiB, value_bytes=16 * KB)
    return body, assemble_body(body, tenant, int(time.time() * 1000))


def _stored(store: Any, table: str, tenant: str) -> tuple[int, int]:
    """(rows under FINAL, distinct traces) of ``table`` for ``tenant``."""
    row = store.query_rows(f"SELECT count(), uniqExact(trace_id) FROM {store.table(table)} FINAL "
                           "WHERE tenant = {t:String}", {"t": tenant})[0]
    return int(row[0]), int(row[1])


def test_a_batch_stays_charged_with_its_working_memory_until_written(chdb_store: Any, tmp_path: Path) -> None:
    tenant = f"held-{uuid.uuid4().hex[:8]}"
    body, rows = _large_request(tenant)
    ref: list[Writer] = []
    store = _Watched(chdb_store, ref)
    writer = Writer(store, Spool(tmp_path / "spool", max_bytes=1 << 30, fsync=False), Metrics(),
                    batch_interval=0.01)
    ref.append(writer)
    writer.start()
    try:
        writer.submit(tenant, 1, lz4.frame.compress(body), rows)
        assert writer.flush(60)
    finally:
        writer.stop()
    charged = rows.nbytes + insert_working_bytes(rows.nbytes, SLICE_BYTES)
    assert store.held_at_insert == [charged, charged]  # spans, then queries: both while the rows are held
    assert writer.held_bytes == 0
    assert _stored(chdb_store, "spans", tenant) == (rows.spans, rows.spans)


def test_a_slice_that_fails_part_way_is_replayed_and_every_span_stored_once(
        chdb_store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine refuses the third slice of the batch's spans once: the writer cannot tell the store
    from the data on one request, so it spools and replays the request; the first two slices are
    written twice and stored once."""
    tenant = f"replayed-{uuid.uuid4().hex[:8]}"
    body, rows = _large_request(tenant)
    real = type(chdb_store)._insert_arrow_table
    calls = {"n": 0}

    def third_fails_once(self: Any, conn: Any, table: str, batch: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the engine refused the third slice")
        real(self, conn, table, batch)

    monkeypatch.setattr(type(chdb_store), "_insert_arrow_table", third_fails_once)
    metrics = Metrics()
    writer = Writer(chdb_store, Spool(tmp_path / "spool", max_bytes=1 << 30, fsync=False), metrics,
                    batch_interval=0.01, probe_interval=0.05, insert_slice_bytes=256 * KB)
    before = chdb_store.insert_statements
    writer.start()
    try:
        writer.submit(tenant, 1, lz4.frame.compress(body), rows)
        assert writer.flush(60)
    finally:
        writer.stop()
    slices = len(insert_slices.slices(insert_slices.row_bytes(rows.cols["spans"]), 256 * KB))
    assert slices >= 4
    # two slices and the failed one, then the replay: every slice of the spans again, and the queries
    assert chdb_store.insert_statements - before >= 2 + slices + 1
    assert metrics.get("ragtrace_batch_failures_total") == 1
    assert metrics.get("ragtrace_spool_replayed_records_total") == 1
    assert metrics.get("ragtrace_deadletter_records_total") == 0
    assert _stored(chdb_store, "spans", tenant) == (rows.spans, rows.spans)  # each span once
    assert _stored(chdb_store, "queries", tenant) == (rows.spans, rows.spans)


def _wait(cond: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)  # a poll step: the wait ends as soon as the condition holds
    return bool(cond())


def test_give_back_only_after_large_work_and_at_most_once_per_interval() -> None:
    engine = threading.Event()
    metrics = Metrics()
    give_back = GiveBack(engine.set, metrics=metrics, min_bytes=10 * MiB, interval=0.5)
    give_back.start()
    try:
        assert give_back.after(MiB) is False  # small work: nothing
        time.sleep(0.2)  # what must not happen is checked over a span of time: the thread had time to act
        assert give_back.count == 0 and not engine.is_set()
        for _ in range(20):  # a burst of large work before the thread wakes: one give-back serves it
            assert give_back.after(64 * MiB) is True
        assert _wait(lambda: give_back.count == 1, 5) and engine.is_set()
        first = time.monotonic()
        for _ in range(20):  # asked again within the interval: one more give-back, once the interval is over
            give_back.after(64 * MiB)
        assert _wait(lambda: give_back.count == 2, 5)
        assert time.monotonic() - first >= 0.4
        time.sleep(0.7)  # longer than the interval: no third give-back comes unasked
        assert give_back.count == 2 and metrics.get("ragtrace_memory_give_backs_total") == 2
    finally:
        give_back.stop()
