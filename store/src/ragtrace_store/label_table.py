"""The ``labels`` table: one row per (tenant, labeller manifest, trace) holding a `LabelRecord`.

A row's ``detail`` column is the record's JSON (`LabelRecord.to_json_line`); its other columns copy
values of the record for the engine's filters and counts, as the record's field declarations name
them (``column=``/``columns=`` in `ragtrace_store.labels`). So the column list (`LABEL_COLUMNS`), the
rows written (`label_row`, `write_labels`) and the records read back (`read_labels`) follow the
record: a field that a new column copies is its declaration plus the migration that adds the column.
A subclass of `LabelRecord` with more declared fields is written and read the same way, with its own
columns.

Reading, a column that copies a top-level key of the record stands for that key (the value the
engine filtered on is the value returned; every row written holds the same value in both); the
objects whose parts a column copies (``ranking_ok``, ``generation``) are read whole from ``detail``.
The newest version of a row wins, decided per key: `newest_labels_sql`, the one rule every reader of
labels goes through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

import orjson

from ragtrace_store.clock import as_utc, utc_now
from ragtrace_store.filters import TraceFilter
from ragtrace_store.label_fields import Column, columns_of, fail, paths_reader
from ragtrace_store.labels import LabelRecord

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = [
    "LABEL_COLUMNS",
    "RECORD_COLUMNS",
    "column_copying",
    "label_row",
    "newest_label_rows",
    "newest_labels_sql",
    "read_labels",
    "write_labels",
]

_R = TypeVar("_R", bound=LabelRecord)


@dataclass(frozen=True)
class _Layout:
    """A record class's rows of the ``labels`` table, worked out once per class."""

    #: the columns a row writes: the tenant, the columns that copy the record's values (in the
    #: record's declaration order), then ``detail`` and the two times
    names: tuple[str, ...]
    #: the copied columns' values in a record (a column's `Column.empty` where it has none)
    copies: Callable[[Any], tuple[Any, ...]]
    #: the columns a read takes back as the record's top-level keys, then ``detail``
    read: tuple[str, ...]
    #: the top-level keys those columns stand for
    restored: tuple[str, ...]


_LAYOUTS: dict[type, _Layout] = {}


def _layout(cls: type[LabelRecord]) -> _Layout:
    found = _LAYOUTS.get(cls)
    if found is None:
        copied = columns_of(cls)
        top = tuple(c for c in copied if len(c.path) == 1)
        found = _LAYOUTS[cls] = _Layout(
            names=("tenant", *(c.name for c in copied), "detail", "trace_time", "labelled_at"),
            copies=paths_reader(cls, tuple(c.path for c in copied), tuple(c.empty for c in copied)),
            read=(*(c.name for c in top), "detail"),
            restored=tuple(c.path[0] for c in top))
    return found


#: the columns that copy values of the record, in the record's declaration order
RECORD_COLUMNS: Final[tuple[Column, ...]] = columns_of(LabelRecord)

#: the columns of the ``labels`` table that a row writes, in `label_row` order (``groundedness`` is
#: MATERIALIZED from ``detail`` by the engine)
LABEL_COLUMNS: Final[tuple[str, ...]] = _layout(LabelRecord).names

_BY_PATH: Final = {c.path: c.name for c in RECORD_COLUMNS}


def column_copying(path: Sequence[str]) -> str | None:
    """The column that copies the value at ``path`` of the record's JSON object, if one does."""
    return _BY_PATH.get(tuple(path))


def label_row(record: LabelRecord, *, tenant: str, trace_time: datetime,
              labelled_at: datetime | None = None) -> tuple[Any, ...]:
    """The ``labels`` row of one record, in `LABEL_COLUMNS` order (its class's columns, for a subclass of
    `LabelRecord` that declares more); ``detail`` is `LabelRecord.to_json_line`."""
    return (tenant, *_layout(type(record)).copies(record), record.to_json_line(), as_utc(trace_time),
            as_utc(labelled_at) if labelled_at else utc_now())


def write_labels(store: Store, records: Iterable[LabelRecord], *, tenant: str,
                 trace_times: Mapping[str, datetime], labelled_at: datetime | None = None) -> int:
    """Insert one ``labels`` row per record (a newer row of the same (tenant, manifest, trace)
    replaces the older one); ``trace_times`` maps each trace id to its trace's start time (the
    table's partition key). Returns the number of rows written."""
    at = as_utc(labelled_at) if labelled_at else utc_now()
    rows: dict[type[LabelRecord], list[tuple[Any, ...]]] = {}  # by record class: each has its columns
    for rec in records:
        if rec.trace_id not in trace_times:
            fail(f"label record trace_id={rec.trace_id}", "no trace time given; pass the trace's start time "
                                                           "in trace_times")
        rows.setdefault(type(rec), []).append(label_row(rec, tenant=tenant, trace_time=trace_times[rec.trace_id],
                                                        labelled_at=at))
    for cls, of_class in rows.items():
        store.insert("labels", of_class, _layout(cls).names)
    return sum(len(r) for r in rows.values())


_READ_CHUNK = 5000


@overload
def read_labels(store: Store, *, tenant: str, manifest_id: str | None = None, release: str | None = None,
                service: str | None = None, trace_ids: Sequence[str] | None = None) -> list[LabelRecord]: ...


@overload
def read_labels(store: Store, *, tenant: str, manifest_id: str | None = None, release: str | None = None,
                service: str | None = None, trace_ids: Sequence[str] | None = None,
                record_class: type[_R]) -> list[_R]: ...


def read_labels(store: Store, *, tenant: str, manifest_id: str | None = None, release: str | None = None,
                service: str | None = None, trace_ids: Sequence[str] | None = None,
                record_class: type[LabelRecord] = LabelRecord) -> list[Any]:
    """The stored records matching the filters (the newest version of each row), as ``record_class``
    (a subclass of `LabelRecord` reads the columns it declares too).

    Ordered by manifest, the most recently labelled manifest first, then by trace time and trace
    id. The columns that copy a top-level key stand for it; ``detail`` holds the rest of the record.
    ``trace_ids`` are read in chunks, so any number may be given.
    """
    layout = _layout(record_class)
    rows = newest_label_rows(store, layout.read, tenant=tenant, manifest_id=manifest_id, release=release,
                             service=service, trace_ids=trace_ids)
    return [_from_row(record_class, layout.restored, tenant, row) for row in rows]


def newest_label_rows(store: Store, columns: Sequence[str], *, tenant: str, manifest_id: str | None = None,
                      release: str | None = None, service: str | None = None,
                      trace_ids: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
    """`read_labels`' rows (the newest version of each, the same filters and order) as ``columns``:
    SQL expressions over the table's columns, written by the caller's code (never input), e.g.
    ``JSONExtractRaw(detail, 'metrics')`` for a reader that needs one part of the record, not all of
    it validated into a `LabelRecord`."""
    where, params = TraceFilter(tenant=tenant, release=release, service=service).conditions()
    if manifest_id is not None:
        where.append("manifest_id = {manifest_id:String}")
        params["manifest_id"] = manifest_id

    table = store.table("labels")

    def sql(conds: list[str]) -> str:
        # the keys with a row that matches (by the table's key, so only their rows are read), then
        # the newest version of each and the filters on it
        keys = ["tenant = {tenant:String}",
                f"(manifest_id, trace_id) IN (SELECT manifest_id, trace_id FROM {table} WHERE {' AND '.join(conds)})"]
        return (f"SELECT {', '.join(columns)} FROM (SELECT *, max(labelled_at) OVER (PARTITION BY manifest_id) "
                f"AS newest FROM ({newest_labels_sql(store, keys, conds)})) "
                "ORDER BY newest DESC, manifest_id, trace_time, trace_id")

    if trace_ids is None:
        return store.query_rows(sql(where), params)
    ids = list(trace_ids)
    rows: list[tuple[Any, ...]] = []
    for i in range(0, len(ids), _READ_CHUNK):
        rows += store.query_rows(sql([*where, "trace_id IN {ids:Array(String)}"]),
                                 {**params, "ids": ids[i : i + _READ_CHUNK]})
    return rows


def newest_labels_sql(store: Store, keys: Sequence[str], values: Sequence[str] = (), *,
                      columns: Sequence[str] | None = None) -> str:
    """A subquery of the ``labels`` rows that are the newest version (``labelled_at``) of their
    (manifest, trace) and match the conditions: the store's one way of reading "the newest label",
    which every reader of labels goes through (`read_labels`, the comparisons' reads, listings,
    series, queues).

    ``keys`` (the tenant's ``tenant = {tenant:String}`` among them) are conditions on the key
    (tenant, manifest, trace id: a manifest, a list of ids, a set of keys), so they hold for every
    version of a key or for none and only those keys' rows are read; ``values`` are conditions on
    what a version says (a failure mode, a release, a time), applied to the newest version only, so
    an older version that matches never stands for a key whose newest does not. ``columns`` (SQL over
    the table's columns, written by the caller's code, never input) are what the subquery holds
    besides ``manifest_id`` and ``trace_id``, by default every column (``groundedness`` included).

    The strategy: ``FINAL`` over the key ranges ``keys`` select, ``keys`` as ``PREWHERE`` (applied to
    every version as it is read, before the versions are collapsed: right for a key condition, which
    every version of a key meets or none does) and ``values`` as ``WHERE`` (applied after). Exact under
    ReplacingMergeTree before its merges, which collapse versions only within a merge of one monthly
    partition (a label's trace time, the partition key, moves when its trace's root is decided again),
    because ``FINAL`` collapses them at read time, across parts and partitions, as long as
    ``optimize_move_to_prewhere_if_final = 0`` (else a value condition may be moved before the
    collapse, and an older version that matches stands for its key) and
    ``do_not_merge_across_partitions_select_final = 0``: ClickHouse's defaults, which `Store` pins
    for every query so that a server's profile cannot change them. Cost, against sorting each key's
    versions (``ORDER BY labelled_at DESC LIMIT 1 BY manifest_id, trace_id``, the other exact way),
    on chDB 26.9: 2 M labels in 41 unmerged parts (a newer version of 5 % of one manifest in another
    partition): the labels of 50 trace ids 4.5-5.6 ms against 5.7-6.9 (500 labels of them under every
    manifest: 6.6-9.8 against 8.4-10.3), a whole manifest's failure modes 31-39 against 37-47 ms, its
    every column 43-66 against 215-250 ms; at 10 M traces (one merged part), the 42,079 newest labels
    of two releases under one manifest 29 ms against 186 ms. ``FINAL`` without the keys as
    ``PREWHERE`` reads every column of every key range before the filter: 73 ms for the 50 ids. Ties
    (two versions of one key with the same ``labelled_at``, which one audit never writes) keep the
    one written last."""
    # `*` leaves out MATERIALIZED columns: groundedness (0007_web.sql) is named
    held = "*, groundedness" if columns is None else ", ".join(dict.fromkeys(("manifest_id", "trace_id", *columns)))
    # On a cluster each shard's FINAL collapses its own rows: exact, since a key's versions all sit
    # on one shard (labels are sharded by trace id); LIMIT 1 BY on the node that asks then keeps one
    # row of a key that two shards answer for (a shard's replica read twice; the test cluster, whose
    # two shards are one set of tables). A set of keys, no sort: nothing on one node.
    once = " LIMIT 1 BY manifest_id, trace_id" if store.variant == "cluster" else ""
    return (f"SELECT {held} FROM {store.table('labels')} FINAL PREWHERE {' AND '.join(keys)}"
            + (f" WHERE {' AND '.join(values)}" if values else "") + once)


def _from_row(cls: type[_R], restored: tuple[str, ...], tenant: str, row: Sequence[Any]) -> _R:
    *values, detail = row
    named = dict(zip(restored, values, strict=True))
    where = f"labels row tenant={tenant} manifest_id={named['manifest_id']} trace_id={named['trace_id']}"
    try:
        # orjson: the same values as json.loads, several times faster on the rows a compare reads
        rec = orjson.loads(detail) if detail else {}
    except orjson.JSONDecodeError as exc:
        fail(where, f"the detail column is not JSON ({exc.msg}); re-run `ragtrace audit --no-resume`")
    if not isinstance(rec, dict):
        fail(where, f"the detail column must be a JSON object, got {type(rec).__name__}; re-run "
                    "`ragtrace audit --no-resume`")
    rec.update(named)
    return cls.from_json(rec, where)
