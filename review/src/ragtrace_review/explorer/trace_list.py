"""Which traces `/traces` lists: the filters, the two sort orders and the page, as the store's
listing (`ragtrace_store.listing`) reads them.

A listing joins two tables: ``queries`` (one row per trace: time, release, service, route, query
text) and ``labels`` under one labeller manifest (failure mode or the ``incomplete`` outcome,
confidence, gold in context, generation verdict, groundedness). Labels of different manifests are
never mixed: the listing names its manifest, the most recently labelled one unless the caller
picks another. Whether a trace is incomplete (lost attributes or a stage) is what the audit
recorded for it under that manifest: an incomplete trace's label has outcome ``incomplete``.

The store filters, orders and pages (`ragtrace_store.trace_rows`); its cursor is the one of
`ragtrace traces` and ``/api/traces`` (`ragtrace_store.paging`), bound to the listing's filters
and order. This module checks what a person asked for and says what to fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ragtrace_review.errors import ReviewError
from ragtrace_store import (
    FAILURE_MODES,
    GENERATION_VERDICTS,
    CursorError,
    LabelFilter,
    Store,
    TraceFilter,
    TraceListing,
    as_utc,
    filter_values,
)
from ragtrace_store.listing import GOLD_IN_CONTEXT, SORTS
from ragtrace_store.manifest_usage import ManifestUse, manifest_uses, stored_manifests
from ragtrace_store.trace_rows import TraceRow, trace_rows

__all__ = ["SORTS", "ManifestInfo", "TraceListQuery", "TracePage", "TraceRow", "filter_options",
           "list_manifests", "list_traces", "manifest_infos"]

MAX_LIMIT = 200


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
        if self.gold_in_context not in (None, *GOLD_IN_CONTEXT):
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


# --- what the store can say ----------------------------------------------------------------------------
def _info(use: ManifestUse) -> ManifestInfo:
    return ManifestInfo(use.manifest_id, use.labels, use.labelled_at, manifest_summary(use.manifest), use.manifest)


def list_manifests(store: Store, tenant: str) -> list[ManifestInfo]:
    """The labeller manifests that labelled this tenant's traces, most recently used first."""
    return [_info(use) for use in manifest_uses(store, tenant)]


def manifest_infos(store: Store, manifest_ids: Sequence[str]) -> dict[str, ManifestInfo]:
    """The stored manifests of these ids (label counts not looked up: 0), by id."""
    return {m: _info(use) for m, use in stored_manifests(store, manifest_ids).items()}


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
    values = filter_values(store, tenant)
    return {"releases": list(values.releases), "services": list(values.services), "routes": list(values.routes)}


# --- the listing ---------------------------------------------------------------------------------------
def list_traces(store: Store, q: TraceListQuery) -> TracePage:
    """One page of traces matching ``q`` (see `TraceListQuery`), with the total count."""
    if (q.label_filtered or q.sort == "confidence") and q.manifest_id is None:
        return TracePage((), 0, None, q)  # nothing is labelled yet
    labels = None if q.manifest_id is None else LabelFilter(
        q.manifest_id, failure_mode=q.mode, generation=q.generation, gold_in_context=q.gold_in_context,
        incomplete=q.incomplete)
    listing = TraceListing(TraceFilter(tenant=q.tenant, service=q.service, release=q.release, route=q.route,
                                       since=q.since, until=q.until),
                           text=q.text, labels=labels, sort=q.sort, descending=q.descending)
    try:
        page = trace_rows(store, listing, cursor=q.cursor, limit=q.limit)
    except CursorError as exc:
        raise ReviewError(str(exc)) from exc
    return TracePage(page.rows, page.total, page.next_cursor, q)


def utc_iso(dt: datetime) -> str:
    """``2026-01-31T12:00:00Z``: the form the filter links carry."""
    return as_utc(dt).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
