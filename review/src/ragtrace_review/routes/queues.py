"""The review pages: the tenant's queues, one queue, its next item, an item and the decision on it.

A reviewer takes items one at a time (``/next`` hands out the next one and holds it for them); an
item page shows the trace as the labeller saw it and posts the decision back. Viewers read the queue
pages but cannot take items or decide.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ragtrace_review import auth
from ragtrace_review.deps import CsrfSessionDep, RendererDep, SessionDep, StoreDep
from ragtrace_review.errors import ReviewError
from ragtrace_review.handlers import VIEWER_MESSAGE
from ragtrace_review.links import PREFIX, quote
from ragtrace_review.queues import decided_by, get_item, holds, next_item, progress, queue_names, record_decision
from ragtrace_review.rendering import Renderer
from ragtrace_review.view import item_view
from ragtrace_store import Store

__all__ = ["router"]

router = APIRouter(prefix=PREFIX)


@router.get("/", response_class=HTMLResponse)
def queues_page(session: SessionDep, store: StoreDep, renderer: RendererDep) -> Response:
    tenant = session.reviewer.tenant
    queues = [progress(store, tenant=tenant, queue=q) for q in queue_names(store, tenant=tenant)]
    return renderer.page("queues.html", session, queues=queues)


@router.get("", include_in_schema=False)
def bare(session: SessionDep) -> Response:
    return RedirectResponse(f"{PREFIX}/", status_code=307)


@router.get("/queues/{queue}", response_class=HTMLResponse)
def queue_page(queue: str, session: SessionDep, store: StoreDep, renderer: RendererDep) -> Response:
    tenant = session.reviewer.tenant
    if queue not in queue_names(store, tenant=tenant):
        return renderer.error(session, 404, f"No queue named {queue!r}.")
    prog = progress(store, tenant=tenant, queue=queue)
    mine = len(decided_by(store, session.reviewer, queue))
    return renderer.page("queue.html", session, queue=prog, mine=mine)


@router.get("/queues/{queue}/next")
def next_page(queue: str, session: SessionDep, store: StoreDep, renderer: RendererDep) -> Response:
    if not session.reviewer.can_review:
        return renderer.error(session, 403, VIEWER_MESSAGE)
    if queue not in queue_names(store, tenant=session.reviewer.tenant):
        return renderer.error(session, 404, f"No queue named {queue!r}.")
    trace_id = next_item(store, session.reviewer, queue)
    if trace_id is None:
        prog = progress(store, tenant=session.reviewer.tenant, queue=queue)
        mine = len(decided_by(store, session.reviewer, queue))
        return renderer.page("done.html", session, queue=prog, mine=mine)
    return RedirectResponse(f"{PREFIX}/queues/{quote(queue)}/items/{quote(trace_id)}", status_code=303)


def _item_or_error(queue: str, trace_id: str, session: auth.Session, store: Store,
                   renderer: Renderer) -> Response | None:
    """Why this reviewer may not see or decide this item now (a response saying so), or None."""
    reviewer = session.reviewer
    if not reviewer.can_review:
        return renderer.error(session, 403, VIEWER_MESSAGE)
    if get_item(store, tenant=reviewer.tenant, queue=queue, trace_id=trace_id) is None:
        return renderer.error(session, 404, "No such item in your queues.")
    if trace_id in decided_by(store, reviewer, queue):
        return RedirectResponse(f"{PREFIX}/queues/{quote(queue)}/next", status_code=303)
    if not holds(store, reviewer, queue, trace_id):
        return renderer.error(session, 409, "This item is not assigned to you; take the next one from the queue "
                                            "page.")
    return None


@router.get("/queues/{queue}/items/{trace_id}", response_class=HTMLResponse)
def item_page(queue: str, trace_id: str, session: SessionDep, store: StoreDep, renderer: RendererDep) -> Response:
    blocked = _item_or_error(queue, trace_id, session, store, renderer)
    if blocked is not None:
        return blocked
    reviewer = session.reviewer
    item = get_item(store, tenant=reviewer.tenant, queue=queue, trace_id=trace_id)
    if item is None:  # gone since _item_or_error looked (a queue dropped meanwhile)
        return renderer.error(session, 404, "No such item in your queues.")
    view = item_view(store, item)
    prog = progress(store, tenant=reviewer.tenant, queue=queue)
    mine = len(decided_by(store, reviewer, queue))
    return renderer.page("item.html", session, item=item, view=view, queue=prog, mine=mine)


@router.post("/queues/{queue}/items/{trace_id}")
async def decide(queue: str, trace_id: str, request: Request, session: CsrfSessionDep, store: StoreDep,
                 renderer: RendererDep) -> Response:
    blocked = _item_or_error(queue, trace_id, session, store, renderer)
    if blocked is not None:
        return blocked
    form = await request.form()
    item = get_item(store, tenant=session.reviewer.tenant, queue=queue, trace_id=trace_id)
    if item is None:
        return renderer.error(session, 404, "No such item in your queues.")
    gen = item.record.generation
    n_claims = len(gen.claims) if gen is not None else 0
    claims = [str(form.get(f"claim_{i}", "")) for i in range(n_claims)]
    shown = [str(v) for v in form.getlist("shown_doc")]
    relevant = {str(v) for v in form.getlist("relevant")}
    try:
        record_decision(store, session.reviewer, queue, trace_id,
                        failure_mode=str(form.get("failure_mode", "")), claims=claims,
                        relevance={d: d in relevant for d in shown}, note=str(form.get("note", "")).strip())
    except ReviewError as exc:
        return renderer.error(session, 400, str(exc))
    return RedirectResponse(f"{PREFIX}/queues/{quote(queue)}/next", status_code=303)
