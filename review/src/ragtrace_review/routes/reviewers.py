"""``/api/reviewers``: reviewer administration for a tenant's operators.

Outside ``/review``: these are authenticated like the collector's own API, by the tenant tokens of
the server's settings, or on a server without tenant tokens by the operator's admin token, and
closed when neither is set (`ragtrace_review.deps.admin_tenant`). It is how reviewers are managed
while `ragtrace serve` owns an embedded store.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ragtrace_review import auth
from ragtrace_review.deps import AdminTenantDep, StoreDep
from ragtrace_review.errors import ReviewError

__all__ = ["router"]

router = APIRouter(prefix="/api/reviewers")


def _reviewer_json(r: auth.Reviewer) -> dict[str, Any]:
    return {"reviewer_id": r.reviewer_id, "name": r.name, "tenant": r.tenant, "disabled": r.disabled,
            "created_at": r.created_at.isoformat(), "role": r.role}


@router.get("")
def api_list_reviewers(tenant: AdminTenantDep, store: StoreDep) -> JSONResponse:
    return JSONResponse([_reviewer_json(r) for r in auth.list_reviewers(store, tenant=tenant)])


@router.post("")
async def api_add_reviewer(request: Request, tenant: AdminTenantDep, store: StoreDep) -> JSONResponse:
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("name"), str) \
            or not isinstance(body.get("role", auth.ROLE_REVIEWER), str):
        return JSONResponse({"error": 'body must be {"name": "...", "role": "reviewer" or "viewer"}'},
                            status_code=400)
    try:
        reviewer, token = auth.add_reviewer(store, body["name"], tenant=tenant,
                                            role=body.get("role", auth.ROLE_REVIEWER))
    except ReviewError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    # the token is shown this once: no cache may keep it
    return JSONResponse({**_reviewer_json(reviewer), "token": token}, headers={"Cache-Control": "no-store"})


@router.post("/{name}/{action}")
def api_set_reviewer(name: str, action: str, tenant: AdminTenantDep, store: StoreDep) -> JSONResponse:
    if action not in ("disable", "enable"):
        return JSONResponse({"error": "action must be 'disable' or 'enable'"}, status_code=404)
    try:
        reviewer = auth.set_disabled(store, auth.find_reviewer(store, name, tenant=tenant), action == "disable")
    except ReviewError as exc:
        return JSONResponse({"error": str(exc)}, status_code=404)
    return JSONResponse(_reviewer_json(reviewer))
