"""The batched store writer: one thread, one insert per table per batch, bounded memory.

Flow of one request: the HTTP handler assembles rows, appends the raw request to the spool
(durable), hands the rows to `Writer.submit`, then answers 200. The writer thread gathers rows
until ``batch_max_spans`` or ``batch_interval`` and writes each table once. When a batch is in
the store, the spool is told and drops segments with nothing pending.

When the store is down (an insert fails and a ping, `ragtrace_store.status.ping`, fails too) the
writer *spills*: it stops holding rows in memory, because the spool already has them, and keeps probing. When the
store answers again it replays the spooled segments from disk. Re-inserting something that was
already written is harmless: every table is a ReplacingMergeTree keyed by span (or trace, or
content hash), and readers keep the newest row of each key (ragtrace_store.roots).

A batch the store refuses while it otherwise works is split per request; a request it still
refuses (while others in the batch go in) is data the store cannot take: it is kept in
``<spool>/deadletter/`` and counted, not retried forever.

Backpressure: rows waiting for the writer are bounded by ``queue_max_bytes`` (429 beyond it);
the spool is bounded by its own limit (503 beyond it).

Memory: a batch's rows stay charged (`held_bytes`, which the collector's admission bound reads) until
its insert is done, with the insert's own working memory beside them (`insert_working_bytes`: the
embedded engine takes a large insert in byte-bounded slices, `ragtrace_store.insert_slices`, so that is
bounded whatever the rows' sizes). The rows are dropped as soon as the batch is written, and after a
large batch the freed memory is handed back to the system (`ragtrace_collector.memory.GiveBack`).
A sliced insert that fails part-way is retried, isolated or replayed whole, like a failed batch of
several tables: the slices that went in are written again, which the tables' keys make harmless.

Query roots: after each batch the writer decides which of its roots of priority 1 or 2 are queries
(`ragtrace_store.query_roots.mark_batch`: from the batch, or by looking up only the traces the batch
cannot settle), so that readers of queries never walk the roots that are not.

Passages: their text is written once per content hash (the cache below skips text the store has)
with ``last_seen``, which `ragtrace store retention` uses to remove text no kept document uses.
Every content hash a written document uses renews its passage's ``last_seen`` at most once per
``passage_refresh`` (`ragtrace_store.retention.renew_passages`: one server-side statement per batch,
only for hashes not renewed recently), whether the request carried the text or only the hash; cache
entries expire with it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import lz4.frame
import orjson

from ragtrace_collector import native_walk
from ragtrace_collector.assemble import assemble_body
from ragtrace_collector.memory import GiveBack
from ragtrace_collector.metrics import Metrics
from ragtrace_collector.rows import COLUMNS, TIME_COLUMNS, Rows
from ragtrace_collector.spool import Spool, SpoolError, SpoolFull
from ragtrace_store import arrow_table
from ragtrace_store.assembly import STAGE_KINDS
from ragtrace_store.insert_slices import SLICE_BYTES
from ragtrace_store.query_roots import mark_batch
from ragtrace_store.retention import renew_passages
from ragtrace_store.status import ping

log = logging.getLogger("ragtrace.collector.writer")

#: Insert order: what a reader joins *to* goes first, the query row (which makes a trace
#: visible to `read_traces`) last.
TABLE_ORDER = ("passages", "documents", "spans", "gold", "feedback", "reference_answers", "queries")
_PASSAGE_CACHE = 200_000
#: how often the ``last_seen`` of a passage in use is renewed, in seconds. `ragtrace store retention`
#: keeps passage text for its days plus a margin (``PASSAGE_MARGIN_DAYS`` in
#: `ragtrace_cli.commands.store`) that covers twice this and a span start up to a day ahead.
PASSAGE_REFRESH_S = 6 * 3600.0
#: hashes per renewal statement (they travel as one Array(String) parameter)
_RENEW_CHUNK = 2000
_TIMES = TIME_COLUMNS | {"last_seen"}
_LZ4_MAGIC = b"\x04\x22\x4d\x18"  # LZ4 frame magic; an OTLP request never starts with it
#: the working memory of an insert, per byte of rows it is given at once (the whole batch, or one slice
#: of a sliced insert): the Arrow copy, the engine's block, its sort and its compressed columns. Measured
#: (benchmarks/hostile_server.py --only insert-slices, peak over the rows): the 128 MiB of rows of a
#: 64 MiB request of 64 KB values +357 MiB in one statement per table, +126 MiB in slices of 32 MiB; a
#: full batch of ordinary traces (28 MiB of rows, one statement per table) +93 to +129 MiB.
INSERT_WORKING_FACTOR = 4


def insert_working_bytes(batch_bytes: int, slice_bytes: int) -> int:
    """What inserting a batch of rows estimated at ``batch_bytes`` holds besides the rows, when the store
    slices inserts at ``slice_bytes`` (0: it does not)."""
    at_once = min(batch_bytes, slice_bytes) if slice_bytes else batch_bytes
    return INSERT_WORKING_FACTOR * at_once


def insert_slice_bytes(limit: int) -> int:
    """The slice bound of the writer's inserts under a memory bound of ``limit`` bytes: the store's own
    (`ragtrace_store.insert_slices.SLICE_BYTES`), or smaller under a small bound, so that an insert's
    working memory (`insert_working_bytes`, at most `INSERT_WORKING_FACTOR` slices) is at most a
    quarter of the bound: 32 MiB and 128 MiB under the default 512 MiB."""
    return max(64 * 1024, min(SLICE_BYTES, limit // (4 * INSERT_WORKING_FACTOR)))


class Backpressure(Exception):
    """The collector cannot take more now; answer ``status`` with ``Retry-After: retry_after``."""

    def __init__(self, status: int, retry_after: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.retry_after = retry_after
        self.reason = reason


@dataclass
class _Item:
    rows: Rows
    seg: int
    at: float
    record: tuple[str, int, bytes] | None = None  # kept only to dead-letter it


class Writer:
    def __init__(self, store: Any, spool: Spool, metrics: Metrics, *, batch_max_spans: int = 8000,
                 batch_interval: float = 0.5, queue_max_bytes: int = 512 * 1024 * 1024,
                 probe_interval: float = 0.5, probe_max_interval: float = 5.0,
                 passage_refresh: float = PASSAGE_REFRESH_S, give_back: GiveBack | None = None,
                 insert_slice_bytes: int = SLICE_BYTES) -> None:
        native_walk.require()  # the spool's replay walks requests: never dead-letter them for want of it
        self.store = store
        self.spool = spool
        self.metrics = metrics
        self.batch_max_spans = batch_max_spans
        self.batch_interval = batch_interval
        self.queue_max_bytes = queue_max_bytes
        self.probe_interval = probe_interval
        self.probe_max_interval = probe_max_interval
        self._cond = threading.Condition()
        self._queue: deque[_Item] = deque()
        self._queued_spans = 0
        self._held_bytes = 0  # queued + in flight + the insert's working memory
        self._working = 0  # the insert's working memory, while a batch is written
        self.give_back = give_back
        #: the slice bound of this writer's inserts (the store's, or smaller: `insert_slice_bytes`)
        self.insert_slice_bytes = insert_slice_bytes
        self._busy = False
        self._stopping = False
        self._down = False
        self._replay_upto = 0
        self._thread: threading.Thread | None = None
        self._passages: OrderedDict[tuple[str, str], int] = OrderedDict()
        self.passage_refresh = passage_refresh
        self.clock: Callable[[], float] = time.time  # seconds since the epoch, for last_seen renewals
        # (tenant, hash) -> ms since the epoch from which the store's row is known to have
        # last_seen >= that minus `passage_refresh` (oldest first)
        self._renewed: OrderedDict[tuple[str, str], int] = OrderedDict()
        metrics.gauge("ragtrace_queue_bytes", "decoded rows waiting for the store", lambda: self._held_bytes)
        metrics.gauge("ragtrace_spool_bytes", "bytes in the local spool", spool.total_bytes)
        metrics.gauge("ragtrace_spool_segments", "spool segment files", lambda: len(spool.segments()))
        metrics.gauge("ragtrace_store_up", "1 when the last store write or probe succeeded",
                      lambda: 0.0 if self._down else 1.0)
        metrics.gauge("ragtrace_replay_pending", "1 while spooled segments wait to be replayed",
                      lambda: 1.0 if self._replay_upto else 0.0)

    # --- public ------------------------------------------------------------------------------
    def start(self) -> None:
        self._replay_upto = self.spool.open()
        if self._replay_upto:
            log.info("replaying spooled requests up to segment %d", self._replay_upto)
        self._thread = threading.Thread(target=self._run, name="ragtrace-writer", daemon=True)
        self._thread.start()

    @property
    def store_up(self) -> bool:
        return not self._down

    @property
    def rows_bytes(self) -> int:
        """Decoded rows queued or being written, bytes (estimated by the assembly)."""
        return self._held_bytes - self._working

    @property
    def working_bytes(self) -> int:
        """The working memory of the insert in progress, bytes (`insert_working_bytes`)."""
        return self._working

    @property
    def held_bytes(self) -> int:
        """Decoded rows queued or being written (estimated by the assembly), and the working memory of
        the insert in progress, bytes."""
        return self._held_bytes

    def admit(self, nbytes: int) -> None:
        """Raise `Backpressure` when rows of this size cannot be queued now."""
        with self._cond:
            if self._stopping:
                raise Backpressure(503, 5, "the collector is shutting down; retry another replica")
            rows = self._held_bytes - self._working  # the queue bound is on rows; admission counts both
            if rows and rows + nbytes > self.queue_max_bytes:
                raise Backpressure(429, 1, f"the store writer is behind ({rows} bytes queued, "
                                           f"limit {self.queue_max_bytes}, RAGTRACE_QUEUE_MAX_BYTES)")

    def submit(self, tenant: str, received_ms: int, body: bytes, rows: Rows,
               enqueue_via: Callable[[Callable[[], None]], None] | None = None) -> None:
        """Make the request durable (spool) and queue its rows. Returns when it may be acknowledged.
        ``body`` is the request's protobuf as an LZ4 frame (see `ingest.decode_and_assemble`).
        ``enqueue_via`` runs the final queueing step (the collector's admission hands the rows'
        charge over to the queue inside it)."""
        self.admit(rows.nbytes)
        try:
            seg = self.spool.append(tenant, received_ms, body, lz4=True)
        except SpoolFull as exc:
            raise Backpressure(503, 30, str(exc)) from exc
        except (SpoolError, OSError) as exc:  # closed while shutting down, disk error: not acknowledged
            raise Backpressure(503, 5, f"cannot make the request durable: {exc}") from exc
        item = _Item(rows, seg, time.monotonic(), (tenant, received_ms, body))

        def enqueue() -> None:
            with self._cond:
                self._queue.append(item)
                self._queued_spans += rows.spans
                self._held_bytes += rows.nbytes
                self._cond.notify_all()

        if enqueue_via is None:
            enqueue()
        else:
            enqueue_via(enqueue)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until everything queued and spooled is in the store (True) or the timeout passes."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.notify_all()
            while self._queue or self._busy or self._replay_upto or self._down:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def stop(self, timeout: float = 10.0) -> bool:
        """Write what is queued (up to ``timeout``), then close the spool. What is not written by
        then stays in the spool and is replayed on the next start. True when nothing was left."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        clean = True
        if self._thread is not None:
            self._thread.join(timeout)
            clean = not self._thread.is_alive()
        self.spool.close()
        return clean and not self._queue

    # --- the thread --------------------------------------------------------------------------
    def _run(self) -> None:
        backoff = self.probe_interval
        while True:
            try:
                if self._down:
                    if self._stopping:
                        return
                    self._spill()
                    if self._probe():
                        self._recover()
                        backoff = self.probe_interval
                    else:
                        with self._cond:
                            self._cond.wait(backoff)
                        backoff = min(backoff * 2, self.probe_max_interval)
                    continue
                if self._replay_upto and not self._stopping:
                    self._replay_one()
                items = self._gather()
                if items:
                    freed = self._write(items)
                    del items  # the rows go now, not when the next batch has been gathered
                    if self.give_back is not None:
                        self.give_back.after(freed)
                    continue
                with self._cond:
                    if self._stopping and not self._queue:
                        return
            except Exception:  # the writer thread must never die: log, back off, go on
                log.exception("unexpected error in the store writer; retrying")
                time.sleep(self.probe_interval)

    def _gather(self) -> list[_Item]:
        with self._cond:
            while True:
                if self._queue:
                    due = self._queue[0].at + self.batch_interval
                    now = time.monotonic()
                    if (self._queued_spans >= self.batch_max_spans or now >= due or self._stopping
                            or self._replay_upto):
                        break
                    self._cond.wait(due - now)
                    continue
                if self._stopping or self._replay_upto:
                    return []
                self._cond.wait(0.25)
                if not self._queue:
                    return []
            items: list[_Item] = []
            spans = 0
            while self._queue and (not items or spans + self._queue[0].rows.spans <= self.batch_max_spans):
                item = self._queue.popleft()
                spans += item.rows.spans
                items.append(item)
            self._queued_spans -= spans
            self._busy = True
            # charged before the insert starts, so admission sees it while the insert runs
            self._working = insert_working_bytes(sum(i.rows.nbytes for i in items), self.insert_slice_bytes)
            self._held_bytes += self._working
            return items

    def _release(self, items: list[_Item]) -> int:
        """The batch is written (or spooled): its rows and the insert's working memory are no longer
        held. Returns the rows' bytes."""
        with self._cond:
            freed = sum(i.rows.nbytes for i in items)
            self._held_bytes -= freed + self._working
            self._working = 0
            self._busy = False
            self._cond.notify_all()
        return freed

    def _write(self, items: list[_Item]) -> int:
        """Write a batch (see the module doc); returns the bytes its rows held."""
        try:
            self._insert([i.rows for i in items])
        except Exception as exc:
            self.metrics.inc("ragtrace_batch_failures_total")
            if not self._probe():
                log.warning("store unreachable (%s); spooling until it returns", _short(exc))
                self._go_down()
                return self._release(items)
            if len(items) == 1 or not self._isolate(items):
                log.warning("store refuses writes (%s); spooling until it accepts them", _short(exc))
                self._go_down()
                return self._release(items)
        counts: dict[int, int] = {}
        for i in items:
            counts[i.seg] = counts.get(i.seg, 0) + 1
        self.spool.done(counts)
        return self._release(items)

    def _isolate(self, items: list[_Item]) -> bool:
        """Write requests one by one. False if none went in (the store, not the data, is at fault)."""
        failed: list[tuple[_Item, Exception]] = []
        for item in items:
            try:
                self._insert([item.rows])
            except Exception as err:
                failed.append((item, err))
        if len(failed) == len(items):
            return False
        for bad, reason in failed:
            self._dead_letter(bad.record, reason)
        return True

    def _dead_letter(self, record: tuple[str, int, bytes] | None, exc: Exception) -> None:
        self.metrics.inc("ragtrace_deadletter_records_total")
        if record is None:
            return
        tenant, received_ms, body = record
        if body.startswith(_LZ4_MAGIC):  # queued records are compressed; replayed ones are not
            body = lz4.frame.decompress(body)
        folder = self.spool.dir / "deadletter"
        folder.mkdir(exist_ok=True)
        name = folder / f"{received_ms}-{abs(hash(body)) & 0xFFFFFFFF:08x}"
        name.with_suffix(".pb").write_bytes(body)
        name.with_suffix(".json").write_bytes(orjson.dumps({"tenant": tenant, "received_ms": received_ms,
                                                            "error": str(exc)[:2000]}))
        log.error("the store refused a request as data (%s); kept in %s", _short(exc), name)

    def _insert(self, parts: list[Rows]) -> None:
        if len(parts) == 1:
            rows = parts[0]
        else:
            rows = Rows()
            for part in parts:
                rows.extend(part)
        passages = self._new_passages(rows)
        for table in TABLE_ORDER:
            cols = passages if table == "passages" else rows.cols[table]
            tables = rows.arrow.get(table)
            if not cols[COLUMNS[table][0]] and not tables:
                continue
            t0 = time.perf_counter()
            statements = getattr(self.store, "insert_statements", 0)
            if tables:  # the walk's Arrow tables (documents); list rows of the same table join them: one insert
                if cols[COLUMNS[table][0]]:
                    tables = [*tables, arrow_table(cols, _TIMES)]
                n = self.store.insert_arrow(table, tables, slice_bytes=self.insert_slice_bytes)
            else:
                n = self.store.insert_columns(table, cols, _TIMES, slice_bytes=self.insert_slice_bytes)
            self.metrics.inc("ragtrace_store_insert_seconds_sum", time.perf_counter() - t0)
            self.metrics.inc("ragtrace_store_insert_seconds_count")
            # the embedded store counts its statements (slices); a server's insert is one
            self.metrics.inc("ragtrace_store_insert_statements_total",
                             max(1, getattr(self.store, "insert_statements", 0) - statements))
            self.metrics.inc("ragtrace_rows_written_total", n, table=table)
        # which of the batch's other roots are queries (the SDK's are marked by the store itself):
        # after the spans and queries, so what the batch cannot settle is found in the store
        mark_batch(self.store, rows.cols["queries"], _staged_traces(rows), _TIMES)
        self.metrics.inc("ragtrace_batches_total")
        self._remember_passages(passages)
        self._renew_passages(rows)

    @property
    def written_passages(self) -> Mapping[tuple[str, str], int]:
        """(tenant, content hash) → length of the passages written recently, negative for a
        truncated copy. Read by `assemble_body` in the request threads (lookups only)."""
        return self._passages

    def _new_passages(self, rows: Rows) -> dict[str, list[Any]]:
        """Passages not written recently (production repeats the same text millions of times)."""
        src = rows.cols["passages"]
        known = self._passages
        keep = [i for i, (t, h, n) in enumerate(zip(src["tenant"], src["content_hash"], src["content_length"],
                                                      strict=True))
                if abs(known.get((t, h), 0)) < n]
        # last_seen is the request's receive time (kept on replay), like first_seen
        if len(keep) == len(src["tenant"]):
            return {**src, "last_seen": src["first_seen"]}
        out = {c: [v[i] for i in keep] for c, v in src.items()}
        out["last_seen"] = out["first_seen"]
        return out

    def _remember_passages(self, cols: dict[str, list[Any]]) -> None:
        cache, renewed = self._passages, self._renewed
        for t, h, n, truncated, seen in zip(cols["tenant"], cols["content_hash"], cols["content_length"],
                                            cols["truncated"], cols["last_seen"], strict=True):
            cache[(t, h)] = -n if truncated else n
            cache.move_to_end((t, h))
            # A truncated copy loses to a longer one under FINAL, so its last_seen may not be the
            # row's: only a full copy counts as renewed; a truncated one is renewed by copying.
            if not truncated and seen > renewed.get((t, h), 0):
                renewed[(t, h)] = seen
                renewed.move_to_end((t, h))
        while len(cache) > _PASSAGE_CACHE:
            cache.popitem(last=False)

    def _renew_passages(self, rows: Rows) -> None:
        """Renew ``last_seen`` of the passages these rows' documents use (see the module doc)."""
        now = int(self.clock() * 1000)
        cutoff = now - int(self.passage_refresh * 1000)
        renewed = self._renewed
        stale: dict[str, list[str]] = {}
        for tenant, hashes in _document_hashes(rows).items():
            old = [h for h in hashes if renewed.get((tenant, h), 0) < cutoff]
            if old:
                stale[tenant] = old
        for tenant, hashes in stale.items():
            for i in range(0, len(hashes), _RENEW_CHUNK):
                chunk = hashes[i:i + _RENEW_CHUNK]
                try:
                    renew_passages(self.store, tenant, chunk, now_ms=now, cutoff_ms=cutoff)
                except Exception as exc:
                    # The documents are written; a renewal that failed is tried again with the
                    # next batch that uses these passages (they stay stale here).
                    log.warning("could not renew passage last_seen (%s); retrying with a later batch", _short(exc))
                    return
                for h in chunk:
                    renewed[(tenant, h)] = now
                    renewed.move_to_end((tenant, h))
                self.metrics.inc("ragtrace_passage_renewals_total", len(chunk))
        # Entries older than the interval are stale anyway; their text-cache entries go with them,
        # so the cache never skips text whose row retention may have removed in the meantime.
        while renewed:
            key, at = next(iter(renewed.items()))
            if at >= cutoff and len(renewed) <= 2 * _PASSAGE_CACHE:
                break
            renewed.popitem(last=False)
            self._passages.pop(key, None)

    # --- outage and replay -----------------------------------------------------------------
    def _probe(self) -> bool:
        try:
            ping(self.store)
            return True
        except Exception:
            return False

    def _go_down(self) -> None:
        self._down = True
        self._passages.clear()  # the store may have lost what we think it has
        self._renewed.clear()
        self._spill()

    def _spill(self) -> None:
        """Everything in memory is also in the spool: drop it and widen the replay horizon."""
        # Every segment before the open one goes to replay; the open one too once it holds records
        # (it is closed first). Items of later segments stay queued.
        horizon = self.spool.rotate() if self.spool.written_in_current() else self.spool.current - 1
        if horizon > 0:
            self.spool.forget(horizon)
            self._replay_upto = max(self._replay_upto, horizon)
        with self._cond:
            dropped = [i for i in self._queue if i.seg <= self._replay_upto]
            self._queue = deque(i for i in self._queue if i.seg > self._replay_upto)
            self._queued_spans = sum(i.rows.spans for i in self._queue)
            self._held_bytes -= sum(i.rows.nbytes for i in dropped)
            self._cond.notify_all()

    def _recover(self) -> None:
        self._spill()
        self._down = False
        log.info("store reachable again; replaying the spool")

    def _replay_one(self) -> None:
        segs = [s for s in self.spool.segments() if s <= self._replay_upto]
        if not segs:
            with self._cond:
                self._replay_upto = 0
                self._cond.notify_all()
            return
        seg = segs[0]
        batch: list[tuple[Rows, tuple[str, int, bytes]]] = []
        spans = 0
        n = 0
        for rec in self.spool.read(seg):
            try:
                rows = assemble_body(rec.body, rec.tenant, rec.received_ms)
            except Exception as exc:  # cannot happen for records we wrote; never block the spool on it
                self._dead_letter((rec.tenant, rec.received_ms, rec.body), exc)
                continue
            batch.append((rows, (rec.tenant, rec.received_ms, rec.body)))
            spans += rows.spans
            n += 1
            if spans >= self.batch_max_spans and not self._replay_batch(batch):
                return
            if spans >= self.batch_max_spans:
                batch, spans = [], 0
        if batch and not self._replay_batch(batch):
            return
        self.spool.delete(seg)
        self.metrics.inc("ragtrace_spool_replayed_records_total", n)

    def _replay_batch(self, batch: list[tuple[Rows, tuple[str, int, bytes]]]) -> bool:
        items = [_Item(rows, 0, 0.0, rec) for rows, rec in batch]
        try:
            self._insert([i.rows for i in items])
            return True
        except Exception as exc:
            self.metrics.inc("ragtrace_batch_failures_total")
            if self._probe() and len(items) > 1 and self._isolate(items):
                return True
            log.warning("replay interrupted (%s); will retry", _short(exc))
            self._down = True
            return False


def _staged_traces(rows: Rows) -> set[tuple[str, str]]:
    """The (tenant, trace id) pairs with a retriever, reranker or LLM span in ``rows``."""
    spans = rows.cols["spans"]
    return {(t, tid) for t, tid, kind in zip(spans["tenant"], spans["trace_id"], spans["kind"], strict=True)
            if kind in STAGE_KINDS}


def _document_hashes(rows: Rows) -> dict[str, list[str]]:
    """The distinct content hashes of the documents in ``rows``, by tenant (empty hashes left out)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, set[str]] = {}
    d = rows.cols["documents"]
    for tenant, h in zip(d["tenant"], d["content_hash"], strict=True):
        if h:
            out.setdefault(tenant, set()).add(h)
    by_tenant: dict[str, list[Any]] = {}
    for table in rows.arrow.get("documents", ()):
        # one table per request, so one tenant per table; the hashes are deduplicated in Arrow
        if table.num_rows:
            by_tenant.setdefault(table.column("tenant")[0].as_py(), []).append(table.column("content_hash"))
    for tenant, columns in by_tenant.items():
        unique = pc.unique(pa.chunked_array([c for col in columns for c in col.chunks], type=pa.string()))
        out.setdefault(tenant, set()).update(h for h in unique.to_pylist() if h)
    return {tenant: list(hashes) for tenant, hashes in out.items()}


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"
