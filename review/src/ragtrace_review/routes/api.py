"""``/review/api``: the review UI's JSON for scripts (`ragtrace review ... --server`).

Reads take a session or a bearer token; writes (enqueue, storing gold) take a reviewer's bearer
token only (`ragtrace_review.deps.bearer_only`). Errors are ``{"error": "..."}`` saying what to fix.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.concurrency import run_in_threadpool

from ragtrace_review.calibrate import agreement_report, build_gold, store_gold
from ragtrace_review.deps import BearerSessionDep, SessionDep, StoreDep
from ragtrace_review.errors import ReviewError
from ragtrace_review.links import PREFIX
from ragtrace_review.queues import enqueue, progress, queue_names
from ragtrace_review.rendering import SECURITY_HEADERS

__all__ = ["EnqueueOptions", "router"]

router = APIRouter(prefix=f"{PREFIX}/api")


class EnqueueOptions(BaseModel):
    """The options `POST /review/api/queues/Q/enqueue` accepts, with their JSON types checked (strict:
    ``true`` is not a count, ``"20"`` not a number); `queues.enqueue` checks their ranges."""

    model_config = ConfigDict(extra="forbid", strict=True)

    labels: list[dict[str, Any]] | None = None
    per_mode: int = 20
    reviewers: int = 2
    manifest_id: str | None = None
    low_confidence: float = 0.6
    release: str | None = None
    service: str | None = None
    description: str = ""


@router.get("/queues")
def api_queues(session: SessionDep, store: StoreDep) -> JSONResponse:
    tenant = session.reviewer.tenant
    out = []
    for q in queue_names(store, tenant=tenant):
        p = progress(store, tenant=tenant, queue=q)
        out.append({"queue": p.queue, "items": p.items, "reviewers_per_item": p.reviewers_per_item,
                    "complete": p.complete, "decisions": p.decisions, "target": p.target,
                    "reviewers": [{"name": r.name, "decided": r.decided} for r in p.reviewers]})
    return JSONResponse({"tenant": tenant, "queues": out}, headers=SECURITY_HEADERS)


@router.get("/queues/{queue}/agreement")
def api_agreement(queue: str, session: SessionDep, store: StoreDep) -> JSONResponse:
    try:
        report = agreement_report(store, tenant=session.reviewer.tenant, queue=queue)
    except ReviewError as exc:
        return JSONResponse({"error": str(exc)}, status_code=404)
    return JSONResponse(report, headers=SECURITY_HEADERS)


@router.post("/queues/{queue}/enqueue")
async def api_enqueue(queue: str, request: Request, session: BearerSessionDep, store: StoreDep) -> JSONResponse:
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return JSONResponse({"error": "body must be a JSON object of enqueue options"}, status_code=400)
    allowed = sorted(EnqueueOptions.model_fields)
    unknown = sorted(str(k) for k in set(body) - set(allowed))
    if unknown:
        return JSONResponse({"error": f"unknown options {unknown}; allowed: {allowed}"}, status_code=400)
    try:
        options = EnqueueOptions.model_validate(body).model_dump(exclude_unset=True)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return JSONResponse({"error": f"invalid enqueue options: {problems}"}, status_code=400)
    try:
        res = await run_in_threadpool(lambda: enqueue(store, queue, tenant=session.reviewer.tenant, **options))
    except (ReviewError, TypeError, ValueError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse({"queue": res.queue, "tenant": res.tenant, "added": res.added,
                         "already_queued": res.already_queued, "candidates": res.candidates,
                         "reviewers_per_item": res.reviewers_per_item})


@router.get("/queues/{queue}/export")
def api_export(queue: str, session: SessionDep, store: StoreDep) -> JSONResponse:
    if queue not in queue_names(store, tenant=session.reviewer.tenant):
        return JSONResponse({"error": f"no queue {queue!r}"}, status_code=404)
    gold = build_gold(store, tenant=session.reviewer.tenant, queue=queue)
    return JSONResponse({"records": list(gold.records), "qrels": [list(q) for q in gold.qrels]},
                        headers=SECURITY_HEADERS)


@router.post("/queues/{queue}/gold")
def api_store_gold(queue: str, session: BearerSessionDep, store: StoreDep) -> JSONResponse:
    if queue not in queue_names(store, tenant=session.reviewer.tenant):
        return JSONResponse({"error": f"no queue {queue!r}"}, status_code=404)
    gold = build_gold(store, tenant=session.reviewer.tenant, queue=queue)
    return JSONResponse({"stored": store_gold(store, session.reviewer.tenant, gold)})
