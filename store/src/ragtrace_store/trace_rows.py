"""A page of a listing as rows to show: each trace's winning root row (time, release, service,
route, query text) beside its newest label under the listing's manifest (failure mode or the
``incomplete`` outcome, confidence, gold in context, groundedness, generation verdict).

The page is read by the listing's pager (`ragtrace_store.listing`) and continues after a cursor of
the one format (`ragtrace_store.paging`); the engine filters, orders and pages, and Python receives
one page of ids, then the display columns of exactly those traces. Labels of different manifests
are never mixed: a page shows the labels of one manifest (``listing.labels``), none without one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from ragtrace_store.clock import as_utc
from ragtrace_store.label_table import newest_labels_sql
from ragtrace_store.listing import ROOT_COLUMNS, TraceListing, confidence_page, count_listing, root_page
from ragtrace_store.paging import decode_cursor, encode_cursor
from ragtrace_store.roots import winners_sql

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["TraceRow", "TraceRowPage", "trace_rows"]


@dataclass(frozen=True)
class TraceRow:
    """One listed trace; label fields are None when the trace has no label under the manifest
    (and ``groundedness`` also when it is undefined: abstentions, claim-less answers)."""

    trace_id: str
    start_time: datetime | None
    release: str
    service: str
    route: str
    query: str
    labelled: bool
    failure_mode: str | None = None
    confidence: float | None = None
    gold_in_context: bool | None = None
    groundedness: float | None = None
    generation: str | None = None


@dataclass(frozen=True)
class TraceRowPage:
    rows: tuple[TraceRow, ...]
    #: the traces of the listing (all pages), exactly
    total: int
    #: the cursor of the next page, None on the last page
    next_cursor: str | None


#: the winning root row's columns a row shows, as `root_page` returns them (after the trace id)
_SHOWN = ("start_time", "release", "service", "route", "query")
#: where a column sits in a `root_page` row (the trace id first)
_AT = {c: 1 + i for i, c in enumerate(ROOT_COLUMNS)}


def trace_rows(store: Store, listing: TraceListing, *, cursor: str | None = None, limit: int = 50) -> TraceRowPage:
    """The page of ``listing`` after ``cursor`` (None: the first), at most ``limit`` rows, with the
    listing's exact total. A cursor of another listing raises `ragtrace_store.paging.CursorError`."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    after = None if cursor is None else decode_cursor(cursor, listing)
    keyed: list[tuple[str, Any, tuple[Any, ...] | None]]
    if listing.sort == "time":
        roots = root_page(store, listing, cast(tuple[datetime, str] | None, after), limit + 1)
        keyed = [(str(r[0]), r[_AT["start_time"]], tuple(r[_AT[c]] for c in _SHOWN)) for r in roots]
    else:
        keyed = [(t, k, None) for t, k in confidence_page(store, listing, cast(tuple[float, str] | None, after),
                                                          limit + 1)]
    total = count_listing(store, listing, exact_up_to=None).queries
    shown = keyed[:limit]
    next_cursor = encode_cursor(listing, shown[-1][1], shown[-1][0]) if len(keyed) > limit else None
    manifest = listing.labels.manifest_id if listing.labels is not None else None
    rows = _rows(store, listing.filter.tenant, manifest, [(t, root) for t, _, root in shown])
    return TraceRowPage(tuple(rows), total, next_cursor)


def _rows(store: Store, tenant: str, manifest_id: str | None,
          ids: Sequence[tuple[str, tuple[Any, ...] | None]]) -> list[TraceRow]:
    """The rows of exactly these traces, in this order: the winning root row (given, or read) and
    the newest label of the manifest, each per trace without FINAL."""
    if not ids:
        return []
    params: dict[str, Any] = {"tenant": tenant, "ids": [t for t, _ in ids], "manifest": manifest_id or ""}
    found = {t: root for t, root in ids if root is not None}
    missing = [t for t, root in ids if root is None]
    if missing:
        winners = winners_sql(store, _SHOWN, ["tenant = {tenant:String}", "trace_id IN {missing:Array(String)}"])
        found.update((str(r[0]), tuple(r[1:])) for r in store.query_rows(
            f"SELECT trace_id, {', '.join(_SHOWN)} FROM ({winners})", {**params, "missing": missing}))
    labels: dict[str, tuple[Any, ...]] = {}
    if manifest_id:
        newest = newest_labels_sql(store, ["tenant = {tenant:String}", "manifest_id = {manifest:String}",
                                           "trace_id IN {ids:Array(String)}"])
        labels = {str(r[0]): tuple(r[1:]) for r in store.query_rows(
            "SELECT trace_id, failure_mode, confidence, gold_in_context, groundedness, generation "
            f"FROM ({newest})", params)}
    out = []
    for trace_id, _ in ids:
        root, lab = found.get(trace_id), labels.get(trace_id)
        row = TraceRow(trace_id=trace_id, start_time=as_utc(root[0]) if root else None,
                       release=str(root[1]) if root else "", service=str(root[2]) if root else "",
                       route=str(root[3]) if root else "", query=str(root[4]) if root else "",
                       labelled=lab is not None)
        if lab is not None:
            row = replace(row, failure_mode=str(lab[0]), confidence=lab[1], gold_in_context=lab[2],
                          groundedness=lab[3], generation=str(lab[4]) or None)
        out.append(row)
    return out
