"""``/traces`` (the filtered, paged list) and ``/traces/{trace_id}`` (one trace in full), with the
button that puts a trace into a review queue.

Same login, tenant and Content-Security-Policy as ``/review`` (`ragtrace_review.deps`). Viewers
read both pages; only reviewers may queue a trace. ``/traces/{trace_id}`` is the address other
tools link to (the compare report's movers).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from ragtrace_review import auth
from ragtrace_review.deps import CsrfSessionDep, RendererDep, SessionDep, StoreDep
from ragtrace_review.errors import ReviewError
from ragtrace_review.explorer.filters import blank, check_manifest, time_window
from ragtrace_review.explorer.trace_list import TraceListQuery, filter_options, list_manifests, list_traces
from ragtrace_review.explorer.trace_page import TracePageView, trace_page_view
from ragtrace_review.links import TRACES, quote, url
from ragtrace_review.queues import add_trace, latest_manifest, queue_names, reviewers_per_item
from ragtrace_review.rendering import Renderer
from ragtrace_store import FAILURE_MODES, GENERATION_VERDICTS, Store

__all__ = ["FILTERS", "router", "trace_url"]

#: the query parameters of /traces, in the order links carry them
FILTERS = ("release", "service", "route", "since", "until", "mode", "generation", "gold_in_context", "incomplete",
           "q", "manifest", "sort", "order", "limit")


def trace_url(trace_id: str, manifest: str | None = None) -> str:
    return url(f"{TRACES}/{quote(trace_id)}", {"manifest": manifest})


router = APIRouter(include_in_schema=False)


@router.get(TRACES)
def traces_page(request: Request, session: SessionDep, store: StoreDep, renderer: RendererDep) -> Response:
    tenant = session.reviewer.tenant
    raw = {k: blank(request.query_params.get(k)) for k in (*FILTERS, "cursor")}
    manifests = list_manifests(store, tenant)
    manifest = raw["manifest"] or (manifests[0].manifest_id if manifests else None)
    sort = raw["sort"] or "time"
    order = raw["order"] or ("desc" if sort == "time" else "asc")
    error, page = None, None
    try:
        check_manifest(raw["manifest"], [m.manifest_id for m in manifests])
        if order not in ("asc", "desc"):
            raise ReviewError(f"order {order!r}: use asc or desc")
        if raw["incomplete"] not in (None, "yes", "no"):
            raise ReviewError(f"incomplete {raw['incomplete']!r}: use yes or no")
        limit = raw["limit"] or "50"
        if not limit.isdigit():
            raise ReviewError(f"limit {limit!r}: give a number of rows")
        since, until = time_window(raw["since"], raw["until"])
        query = TraceListQuery(
            tenant=tenant, release=raw["release"], service=raw["service"], route=raw["route"],
            since=since, until=until,
            text=raw["q"], manifest_id=manifest, mode=raw["mode"], generation=raw["generation"],
            gold_in_context=raw["gold_in_context"],
            incomplete=None if raw["incomplete"] is None else raw["incomplete"] == "yes",
            sort=sort, descending=order == "desc", cursor=raw["cursor"], limit=int(limit))
        page = list_traces(store, query)
    except (ReviewError, ValueError) as exc:
        error = str(exc)
    params = {k: raw[k] for k in FILTERS}
    params["manifest"] = raw["manifest"]  # the default stays implicit, so links follow new audits
    return renderer.page(
        "traces.html", session, 400 if error else 200, page=page, error=error, params=params,
        options=filter_options(store, tenant), manifests=manifests, manifest=manifest, sort=sort, order=order,
        next_url=url(TRACES, {**params, "cursor": page.next_cursor}) if page and page.next_cursor else None,
        first_url=url(TRACES, params) if raw["cursor"] else None,
        sort_url=lambda s, o: url(TRACES, {**params, "sort": s, "order": o}),
        trace_url=lambda t: trace_url(t, raw["manifest"]),
        modes=FAILURE_MODES, generations=GENERATION_VERDICTS)


def _find(store: Store, tenant: str, trace_id: str, manifest: str | None) -> TracePageView:
    view = trace_page_view(store, tenant=tenant, trace_id=trace_id, manifest_id=manifest)
    if not view.found and trace_id != trace_id.lower():
        # OpenTelemetry ids are lower-case hex in the store; a pasted id may not be
        view = trace_page_view(store, tenant=tenant, trace_id=trace_id.lower(), manifest_id=manifest)
    return view


def _not_found(renderer: Renderer, session: auth.Session, trace_id: str) -> Response:
    return renderer.error(session, 404, f"No trace {trace_id!r} in tenant {session.reviewer.tenant!r} (or its "
                                        "root span has not arrived yet).")


@router.get(TRACES + "/{trace_id}")
def trace_page(trace_id: str, session: SessionDep, store: StoreDep, renderer: RendererDep,
               manifest: str | None = None, queued: str | None = None, already: str | None = None) -> Response:
    tenant = session.reviewer.tenant
    view = _find(store, tenant, trace_id, blank(manifest))
    if not view.found:
        return _not_found(renderer, session, trace_id)
    return renderer.page("trace.html", session, page=view, queued=blank(queued), already=already == "1",
                         list_url=url(TRACES, {"manifest": blank(manifest)}),
                         manifest_url=lambda m: trace_url(view.trace_id, m))


@router.post(TRACES + "/{trace_id}/queue")
async def queue_trace(trace_id: str, request: Request, session: CsrfSessionDep, store: StoreDep,
                      renderer: RendererDep) -> Response:
    reviewer = session.reviewer
    if not reviewer.can_review:
        return renderer.error(session, 403, "Viewers cannot put traces into review queues; ask a reviewer.")
    form = await request.form()
    name = str(form.get("new_queue") or "").strip() or str(form.get("queue") or "").strip()
    manifest = blank(str(form.get("manifest") or "")) or latest_manifest(store, reviewer.tenant)
    view = _find(store, reviewer.tenant, trace_id, manifest)
    if not view.found:  # else it would be told to run the audit on a trace that is not there
        return _not_found(renderer, session, trace_id)
    if view.label is None:
        return renderer.error(session, 400, "This trace has no label under that manifest, so there is nothing "
                                            "to review yet: run `ragtrace audit` first.")
    try:
        k_text = str(form.get("reviewers") or "2")
        if not k_text.isdigit():
            raise ReviewError(f"reviewers per item {k_text!r}: give a number")
        if name in queue_names(store, tenant=reviewer.tenant):
            k = reviewers_per_item(store, tenant=reviewer.tenant, queue=name)
        else:
            k = int(k_text)
        added = add_trace(store, name, view.label, tenant=reviewer.tenant, reviewers=k,
                          description=f"traces queued by hand from {TRACES}")
    except ReviewError as exc:
        return renderer.error(session, 400, str(exc))
    target = url(f"{TRACES}/{quote(trace_id)}", {"manifest": manifest, "queued": name,
                                                 "already": None if added else "1"})
    return RedirectResponse(target, status_code=303)
