"""Which traces `/traces` lists: the filters, the two sort orders, keyset paging and the row shape.

A listing joins two tables: ``queries`` (one row per trace: time, release, service, route, query
text) and ``labels`` under one labeller manifest (failure mode or the ``incomplete`` outcome,
confidence, gold in context, generation verdict, groundedness). Labels of different manifests are
never mixed: the listing names its manifest, the most recently labelled one unless the caller
picks another. Whether a trace is incomplete (lost attributes or a stage) is what the audit
recorded for it under that manifest: an incomplete trace's label has outcome ``incomplete``.

The engine does the filtering, ordering and paging; Python receives one page of ids, then the
display columns of exactly those rows. Paging is by keyset (the last row's sort key travels in an
opaque cursor), so page 1,000 costs what page 1 costs and a trace arriving meanwhile does not shift
the pages. Every value is a server-side parameter.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from ragtrace_review.errors import ReviewError
from ragtrace_store import FAILURE_MODES, GENERATION_VERDICTS, FailureMode, Store, TraceFilter, as_utc
from ragtrace_store.labels import newest_labels_sql
from ragtrace_store.roots import rows_of, window_band, winners_sql
from ragtrace_store.traces import SDK_ROOT_PRIORITY, query_condition

__all__ = ["SORTS", "ManifestInfo", "TraceListQuery", "TracePage", "TraceRow", "filter_options",
           "list_manifests", "list_traces", "manifest_infos"]

SORTS = ("time", "confidence")
MAX_LIMIT = 200
#: ordering key of a label without confidence: after every real value (confidence is in [0, 1])
_NO_CONFIDENCE_ASC, _NO_CONFIDENCE_DESC = 2.0, -1.0


@dataclass(frozen=True)
class TraceListQuery:
    """What to list. None means "any" for every filter.

    ``since`` is inclusive, ``until`` exclusive (aware UTC; naive means UTC). ``text`` matches the
    query text case-insensitively as a plain substring. ``mode``, ``generation`` and
    ``gold_in_context`` filter on the label of ``manifest_id`` (the caller resolves the default);
    ``gold_in_context`` is "yes", "no" or "unknown" (no gold known); ``incomplete`` True keeps
    the traces labelled incomplete, False the labelled complete ones. ``sort`` is "time" (newest first when
    ``descending``) or "confidence" (lowest first unless ``descending``; only labelled traces).
    """

    tenant: str
    release: str | None = None
    service: str | None = None
    route: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None
    manifest_id: str | None = None
    mode: str | None = None
    generation: str | None = None
    gold_in_context: str | None = None
    incomplete: bool | None = None
    sort: str = "time"
    descending: bool = True
    cursor: str | None = None
    limit: int = 50

    def __post_init__(self) -> None:
        if self.sort not in SORTS:
            raise ReviewError(f"sort {self.sort!r}: use one of {', '.join(SORTS)}")
        if self.mode is not None and self.mode not in FAILURE_MODES:
            raise ReviewError(f"failure mode {self.mode!r}: use one of {', '.join(FAILURE_MODES)}")
        if self.generation is not None and self.generation not in GENERATION_VERDICTS:
            raise ReviewError(f"generation {self.generation!r}: use one of {', '.join(GENERATION_VERDICTS)}")
        if self.gold_in_context not in (None, "yes", "no", "unknown"):
            raise ReviewError(f"gold in context {self.gold_in_context!r}: use yes, no or unknown")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise ReviewError(f"limit must be between 1 and {MAX_LIMIT}, got {self.limit}")
        if self.text is not None and len(self.text) > 500:
            raise ReviewError("the text search is longer than 500 characters; shorten it")

    @property
    def label_filtered(self) -> bool:
        return (self.mode is not None or self.generation is not None or self.gold_in_context is not None
                or self.incomplete is not None)


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
class TracePage:
    rows: tuple[TraceRow, ...]
    #: traces matching the filters (all pages)
    total: int
    #: the cursor of the next page, None on the last page
    next_cursor: str | None
    query: TraceListQuery


@dataclass(frozen=True)
class ManifestInfo:
    manifest_id: str
    labels: int
    labelled_at: datetime | None
    #: a one-line summary of the manifest (labeller kinds, model ids, formula version)
    summary: str = ""
    manifest: dict[str, Any] = field(default_factory=dict, compare=False)


# --- cursors -------------------------------------------------------------------------------------------
def _encode_cursor(sort: str, descending: bool, key: float | int, trace_id: str) -> str:
    raw = json.dumps([sort, descending, key, trace_id], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str, sort: str, descending: bool) -> tuple[float | int, str]:
    """(sort key, trace id) of the row before the page; a cursor of another order is refused, as
    its key would mean nothing in this one."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        c_sort, c_desc, key, trace_id = json.loads(raw)
    except (ValueError, TypeError, binascii.Error):
        raise ReviewError("the page cursor is not valid; start again from the first page") from None
    if c_sort != sort or c_desc != descending:
        raise ReviewError("the page cursor belongs to another sort order; start again from the first page")
    if not isinstance(trace_id, str) or isinstance(key, bool) or not isinstance(key, int | float):
        raise ReviewError("the page cursor is not valid; start again from the first page")
    return key, trace_id


# --- what the store can say ----------------------------------------------------------------------------
def list_manifests(store: Store, tenant: str) -> list[ManifestInfo]:
    """The labeller manifests that labelled this tenant's traces, most recently used first."""
    rows = store.query_rows(
        f"SELECT l.manifest_id, l.n, l.at, m.manifest FROM (SELECT manifest_id, count() AS n, max(labelled_at) AS at "
        f"FROM {store.table('labels')} WHERE tenant = {{tenant:String}} GROUP BY manifest_id) AS l "
        f"LEFT JOIN (SELECT manifest_id, any(manifest) AS manifest FROM {store.table('manifests')} "
        "GROUP BY manifest_id) AS m ON m.manifest_id = l.manifest_id ORDER BY l.at DESC, l.manifest_id",
        {"tenant": tenant})
    out = []
    for manifest_id, n, at, text in rows:
        try:
            manifest = json.loads(text) if text else {}
        except ValueError:
            manifest = {}
        out.append(ManifestInfo(str(manifest_id), int(n), as_utc(at) if at else None,
                                manifest_summary(manifest) if isinstance(manifest, dict) else "",
                                manifest if isinstance(manifest, dict) else {}))
    return out


def manifest_infos(store: Store, manifest_ids: Sequence[str]) -> dict[str, ManifestInfo]:
    """The stored manifests of these ids (label counts not looked up: 0), by id."""
    if not manifest_ids:
        return {}
    out = {}
    for manifest_id, text in store.query_rows(
            f"SELECT manifest_id, any(manifest) FROM {store.table('manifests')} "
            "WHERE manifest_id IN {ids:Array(String)} GROUP BY manifest_id", {"ids": sorted(set(manifest_ids))}):
        try:
            manifest = json.loads(text) if text else {}
        except ValueError:
            manifest = {}
        manifest = manifest if isinstance(manifest, dict) else {}
        out[str(manifest_id)] = ManifestInfo(str(manifest_id), 0, None, manifest_summary(manifest), manifest)
    return out


def manifest_summary(manifest: dict[str, Any]) -> str:
    """A line a person can read: which labellers (kind, model), which formulas."""
    parts = []
    for role in ("grounding_labeller", "relevance_labeller"):
        lab = manifest.get(role)
        if isinstance(lab, dict):
            kind, model = lab.get("kind"), lab.get("model_id")
            parts.append(f"{role.split('_')[0]}: {kind or '?'}" + (f" ({model})" if model else ""))
    if manifest.get("formula_version"):
        parts.append(f"formulas {manifest['formula_version']}")
    return "; ".join(parts)


def filter_options(store: Store, tenant: str) -> dict[str, list[str]]:
    """The releases, services and routes of the tenant's traces (at most 200 of each), for the filter form."""
    rows = store.query_rows(
        "SELECT groupUniqArray(200)(release), groupUniqArray(200)(service), groupUniqArray(200)(route) "
        f"FROM {store.table('queries')} WHERE tenant = {{tenant:String}}", {"tenant": tenant})
    releases, services, routes = rows[0] if rows else ([], [], [])
    return {"releases": sorted(map(str, releases)), "services": sorted(map(str, services)),
            "routes": sorted(str(r) for r in routes if r)}


# --- the listing ---------------------------------------------------------------------------------------
#: the winning root row's columns a listing reads (`ragtrace_store.roots.winners_sql`)
_ROW_COLUMNS = ("service", "release", "route", "start_time", "root_priority", "kind", "query")
#: roots the ragtrace SDK did not mark: only these need `query_condition`'s look at their spans
_NOT_SDK = f"root_priority NOT IN (0, {SDK_ROOT_PRIORITY})"


def list_traces(store: Store, q: TraceListQuery) -> TracePage:
    """One page of traces matching ``q`` (see `TraceListQuery`), with the total count."""
    if (q.label_filtered or q.sort == "confidence") and q.manifest_id is None:
        return TracePage((), 0, None, q)  # nothing is labelled yet
    flt = TraceFilter(tenant=q.tenant, service=q.service, release=q.release, route=q.route, since=q.since,
                      until=q.until)
    rwhere, params = flt.conditions()  # conditions on a root row's values
    if q.text:
        rwhere.append("positionCaseInsensitiveUTF8(query, {text:String}) > 0")
        params["text"] = q.text
    lwhere = ["tenant = {tenant:String}", "manifest_id = {manifest:String}"]
    params["manifest"] = q.manifest_id or ""
    if q.mode is not None:
        lwhere.append("failure_mode = {mode:String}")
        params["mode"] = q.mode
    if q.generation is not None:
        lwhere.append("generation = {generation:String}")
        params["generation"] = q.generation
    if q.incomplete is not None:
        lwhere.append(f"failure_mode {'=' if q.incomplete else '!='} {{incomplete:String}}")
        params["incomplete"] = FailureMode.INCOMPLETE.value
    if q.gold_in_context is not None:
        lwhere.append("isNull(gold_in_context)" if q.gold_in_context == "unknown"
                      else "gold_in_context = {gic:Bool}")
        params["gic"] = q.gold_in_context == "yes"
    queries = store.table("queries")
    # each (manifest, trace)'s newest label that passes the label filters (what `labels FINAL` kept)
    newest = newest_labels_sql(store, lwhere[:2], lwhere[2:])  # keys: the tenant and the manifest
    # the roots that are queries, as read_traces decides it (not a retriever called on its own),
    # asking the spans only about the roots the SDK did not mark among those matching the filters
    # (a winning row that matches them is one of these)
    is_query = query_condition(store, flt, among=f"SELECT trace_id FROM {queries} WHERE {' AND '.join(rwhere)} "
                                                 f"AND {_NOT_SDK}")
    # what the filters and query_condition read of a winning row (the fewer, the faster the count)
    columns = ["root_priority", "kind", *(c for c, v in (("service", q.service), ("release", q.release),
                                                        ("route", q.route)) if v is not None)]
    columns += ["start_time"] * (q.since is not None or q.until is not None) + ["query"] * bool(q.text)
    if q.sort == "time" and q.label_filtered:
        rwhere.append(f"trace_id IN (SELECT trace_id FROM ({newest}))")
    # the traces whose winning root row matches (`ragtrace_store.roots`), not `queries FINAL`: a
    # filter on a row's values reads all rows of the traces with a matching row (within ROOT_SPREAD
    # of a time window, as `count_traces` does); without one, the conditions are on the trace id
    # alone and hold for every row of a trace
    by_value = (q.service, q.release, q.route, q.since, q.until, q.text) != (None,) * 6
    traces = ["tenant = {tenant:String}", rows_of(store, rwhere), *window_band(flt)] if by_value else rwhere
    matching = (f"SELECT trace_id FROM ({winners_sql(store, columns, traces, by_sort=True)}) "
                f"WHERE {' AND '.join([*rwhere, is_query])}")
    if q.sort == "time":
        total = int(store.query_rows(f"SELECT count() FROM ({matching})", params)[0][0])
        keyed = _time_page(store, q, rwhere, params)
    else:
        none = _NO_CONFIDENCE_DESC if q.descending else _NO_CONFIDENCE_ASC
        page_sql = (f"SELECT trace_id, ifNull(confidence, {none}) AS ck FROM ({newest}) "
                    f"WHERE trace_id IN ({matching})")
        total = int(store.query_rows(f"SELECT count() FROM ({page_sql})", params)[0][0])
        if q.cursor:
            key, after = _decode_cursor(q.cursor, "confidence", q.descending)
            page_sql = (f"SELECT trace_id, ck FROM ({page_sql}) WHERE (ck, trace_id) "
                        f"{'<' if q.descending else '>'} ({{c_key:Float64}}, {{c_id:String}})")
            params.update(c_key=float(key), c_id=after)
        direction = "DESC" if q.descending else "ASC"
        keyed = [(str(t), k, None) for t, k in store.query_rows(
            f"{page_sql} ORDER BY ck {direction}, trace_id {direction} LIMIT {q.limit + 1}", params)]
    shown = keyed[: q.limit]
    next_cursor = (_encode_cursor(q.sort, q.descending, shown[-1][1], shown[-1][0])
                   if len(keyed) > q.limit else None)
    rows = _rows(store, q.tenant, q.manifest_id, [(t, root) for t, _, root in shown])
    return TracePage(tuple(rows), total, next_cursor, q)


def _time_page(store: Store, q: TraceListQuery, rwhere: list[str],
               params: dict[str, Any]) -> list[tuple[str, int, tuple[Any, ...] | None]]:
    """The next ``q.limit + 1`` traces in time order after the cursor: ``(trace id, sort key in ms,
    its winning root row)``, exactly, without reading every trace.

    The newest (oldest, ascending) ``k`` root rows that match are the candidates; their traces'
    winning rows are decided from all their rows and filtered again, as `read_traces` pages. That
    is exact once the last winner kept sorts no later than the k-th candidate (a trace whose winner
    sorts before it has that row among the candidates) or when fewer than ``k`` rows match at all;
    otherwise ``k`` grows fourfold.
    """
    n = q.limit + 1
    direction, before = ("DESC", "<") if q.descending else ("ASC", ">")
    where = list(rwhere)
    if q.cursor:
        ms, after = _decode_cursor(q.cursor, "time", q.descending)
        where.append(f"(start_time, trace_id) {before} (fromUnixTimestamp64Milli({{c_key:Int64}}, 'UTC'), "
                     "{c_id:String})")
        params.update(c_key=int(ms), c_id=after)
    queries = store.table("queries")
    flt = TraceFilter(tenant=q.tenant, since=q.since)
    k = n + max(16, n // 4)
    while True:
        cands = store.query_rows(
            f"SELECT trace_id, toUnixTimestamp64Milli(start_time), root_priority FROM {queries} "
            f"WHERE {' AND '.join(where)} ORDER BY start_time {direction}, trace_id {direction} LIMIT {k}", params)
        if not cands:
            return []
        p = {**params, "cand_ids": list(dict.fromkeys(str(c[0]) for c in cands)),
             "qc_ids": sorted({str(c[0]) for c in cands if c[2] not in (0, SDK_ROOT_PRIORITY)})}
        winners = winners_sql(store, _ROW_COLUMNS, ["tenant = {tenant:String}", rows_of(
            store, ["tenant = {tenant:String}", "trace_id IN {cand_ids:Array(String)}"])])
        is_query = query_condition(store, flt, among="SELECT arrayJoin({qc_ids:Array(String)})")
        page = store.query_rows(
            f"SELECT trace_id, toUnixTimestamp64Milli(start_time), start_time, release, service, route, query "
            f"FROM ({winners}) WHERE {' AND '.join([*where, is_query])} "
            f"ORDER BY start_time {direction}, trace_id {direction} LIMIT {n}", p)
        cut = (cands[-1][1], cands[-1][0])
        last = (page[-1][1], page[-1][0]) if page else None
        # (time, id) tuples compare as the listing sorts: "no later" is >= newest first, <= oldest first
        settled = last is not None and (last >= cut if q.descending else last <= cut)
        if len(cands) < k or (len(page) == n and settled):
            return [(str(r[0]), int(r[1]), tuple(r[2:])) for r in page]
        k *= 4


def _rows(store: Store, tenant: str, manifest_id: str | None,
          ids: Sequence[tuple[str, tuple[Any, ...] | None]]) -> list[TraceRow]:
    """The display rows of exactly these traces, in this order: the winning root row (given, or
    read) and the newest label of the manifest, each per trace without FINAL."""
    if not ids:
        return []
    params: dict[str, Any] = {"tenant": tenant, "ids": [t for t, _ in ids], "manifest": manifest_id or ""}
    found = {t: root for t, root in ids if root is not None}
    missing = [t for t, root in ids if root is None]
    if missing:
        winners = winners_sql(store, ("start_time", "release", "service", "route", "query"),
                              ["tenant = {tenant:String}", "trace_id IN {missing:Array(String)}"])
        found.update((str(r[0]), tuple(r[1:])) for r in store.query_rows(
            f"SELECT trace_id, start_time, release, service, route, query FROM ({winners})",
            {**params, "missing": missing}))
    # the newest label row of each trace under the manifest (what FINAL would keep)
    labels = {str(r[0]): r[1] for r in store.query_rows(
        "SELECT trace_id, argMax(tuple(failure_mode, confidence, gold_in_context, groundedness, generation), "
        f"labelled_at) FROM {store.table('labels')} WHERE tenant = {{tenant:String}} AND manifest_id = "
        "{manifest:String} AND trace_id IN {ids:Array(String)} GROUP BY trace_id", params)} if manifest_id else {}
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


def utc_iso(dt: datetime) -> str:
    """``2026-01-31T12:00:00Z``: the form the filter links carry."""
    return as_utc(dt).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
