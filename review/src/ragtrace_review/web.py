"""The review UI, mounted under ``/review`` of the collector's FastAPI app.

Server-rendered Jinja2 pages (autoescape on: queries, passages and answers are untrusted text) with
one small static script for keyboard shortcuts; no inline script, and a Content-Security-Policy
that allows scripts only from this origin, so even a missed escape could not run injected code.

Authentication: a browser logs in with the reviewer's token and gets a session cookie (HMAC-signed,
HttpOnly, SameSite=Strict, Secure over https); every form carries the session's CSRF token. Scripts
may send ``Authorization: Bearer TOKEN`` instead (no cookie, so no CSRF). Anonymous requests get
a redirect to the login page (HTML GETs) or 401. The login page and the static assets are the only
public paths. A reviewer sees only their own tenant's queues.
"""

# No `from __future__ import annotations` here: FastAPI must resolve the dependency annotations
# defined inside `mount` at runtime, and string annotations would be looked up in module globals.


import hmac
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote as _quote

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.concurrency import run_in_threadpool

from ragtrace_review import auth, dashboard, traces_web
from ragtrace_review.calibrate import agreement_report, build_gold, store_gold
from ragtrace_review.errors import ReviewError
from ragtrace_review.limits import LoginLimiter
from ragtrace_review.pages import Pages, is_page_path
from ragtrace_review.queues import (
    decided_by,
    enqueue,
    get_item,
    holds,
    next_item,
    progress,
    queue_names,
    record_decision,
)
from ragtrace_review.view import item_view
from ragtrace_store import CLAIM_VERDICTS, DEFAULT_TENANT, FAILURE_MODES, Store

ENV_SECRET = "RAGTRACE_REVIEW_SECRET"
SESSION_COOKIE = "ragtrace_review"
LOGIN_COOKIE = "ragtrace_review_login"
PREFIX = "/review"
_HERE = Path(__file__).resolve().parent

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


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


class NotAuthenticated(Exception):
    pass


class AdminUnauthenticated(Exception):
    """`/api/reviewers` without one of its credentials (a reviewer's login does not open it)."""


class CsrfRejected(Exception):
    pass


class BearerRequired(Exception):
    pass


class ViewerRefused(Exception):
    """A viewer (read-only role) asked for a write of the review API."""


VIEWER_MESSAGE = "Viewers can read traces, the dashboard and queue progress, but not review or fill queues."


class AdminClosed(Exception):
    """The reviewer administration API has no credential configured (no tokens, no admin token)."""


def _secret(settings: Any) -> bytes:
    """The cookie-signing key: settings.review_secret, else $RAGTRACE_REVIEW_SECRET, else random.

    A random key means sessions end when the process restarts; several collector replicas behind
    one load balancer need the same configured key.
    """
    value = getattr(settings, "review_secret", None) or os.environ.get(ENV_SECRET)
    return value.encode("utf-8") if value else secrets.token_bytes(32)


def _templates() -> Environment:
    # autoescape=True for every template, whatever its extension: all page text is untrusted.
    env = Environment(loader=FileSystemLoader(str(_HERE / "templates")), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    env.globals.update(prefix=PREFIX, failure_modes=FAILURE_MODES, claim_verdicts=CLAIM_VERDICTS)
    # None is "unknown" (relevance not labelled), never silently "no".
    env.filters["yesno"] = lambda v: "unknown" if v is None else ("yes" if v else "no")
    return env


def _is_html_get(request: Request) -> bool:
    path = request.url.path
    return request.method == "GET" and "text/html" in request.headers.get("accept", "") \
        and (path.startswith(PREFIX) or is_page_path(path)) and not path.startswith(f"{PREFIX}/api/")


def quote(part: str) -> str:
    """Percent-encode one path segment ('/' included: trace ids are arbitrary text)."""
    return _quote(part, safe="")


def _safe_next(target: str | None) -> str:
    """Only same-site review paths: an open redirect after login would be a phishing aid."""
    if target and not target.startswith("//") and "\\" not in target and (
            target.startswith(PREFIX + "/") or is_page_path(target.split("?", 1)[0])):
        return target
    return PREFIX + "/"


def mount(app: FastAPI, get_store: Callable[..., Store], settings: Any = None, *,
          login_limiter: LoginLimiter | None = None) -> APIRouter:
    """Add the ``/review`` pages to ``app``. ``get_store`` is a FastAPI dependency returning the Store;
    ``login_limiter`` counts failed logins per client (default: `ragtrace_review.limits`' limits).

    Returns the router (its ``routes`` list every review route, e.g. for tests).
    """
    secret = _secret(settings)
    env = _templates()
    limiter = login_limiter or LoginLimiter()
    router = APIRouter(prefix=PREFIX)
    StoreDep = Annotated[Store, Depends(get_store)]

    def render(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        html = env.get_template(name).render(**ctx)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int | None,
                   path: str = PREFIX) -> None:
        response.set_cookie(name, value, max_age=max_age, path=path, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")

    def current(request: Request, store: StoreDep) -> auth.Session:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            reviewer = auth.reviewer_for_token(store, header[7:].strip())
            if reviewer is None:
                raise NotAuthenticated()
            return auth.Session(reviewer, None, None)
        cookie = request.cookies.get(SESSION_COOKIE)
        session_id = auth.unsign(cookie, secret) if cookie else None
        session = auth.session_for_id(store, session_id) if session_id else None
        if session is None:
            raise NotAuthenticated()
        return session

    SessionDep = Annotated[auth.Session, Depends(current)]

    async def check_csrf(request: Request, session: SessionDep) -> auth.Session:
        if session.csrf_token is not None:
            form = await request.form()
            sent = form.get("csrf_token")
            if not isinstance(sent, str) or not hmac.compare_digest(sent, session.csrf_token):
                raise CsrfRejected()
        return session

    PostSessionDep = Annotated[auth.Session, Depends(check_csrf)]

    # --- login / logout ------------------------------------------------------------------
    @router.get("/login", response_class=HTMLResponse)
    def login_page(request: Request, next: str | None = None, error: str | None = None) -> Response:
        # Login CSRF: a double-submit token, since there is no session yet to hold one.
        nonce = secrets.token_urlsafe(24)
        resp = render("login.html", status=401 if error else 200, csrf_token=nonce, next=_safe_next(next),
                      error=error, reviewer=None)
        set_cookie(request, resp, LOGIN_COOKIE, auth.sign(nonce, secret), 600)
        return resp

    @router.post("/login")
    async def login(request: Request, store: StoreDep) -> Response:
        client = request.client.host if request.client else "-"
        wait = limiter.retry_after(client)
        if wait:
            # checked before the token is even looked at: a guess made while limited tells nothing
            limited = render("error.html", 429, message=f"Too many failed logins from your address; try again in "
                             f"{wait} seconds.", reviewer=None, csrf_token=None)
            limited.headers["Retry-After"] = str(wait)
            return limited
        form = await request.form()
        sent, token, target = form.get("csrf_token"), form.get("token"), form.get("next")
        cookie = request.cookies.get(LOGIN_COOKIE)
        nonce = auth.unsign(cookie, secret) if cookie else None
        if not isinstance(sent, str) or nonce is None or not hmac.compare_digest(sent, nonce):
            raise CsrfRejected()
        reviewer = auth.reviewer_for_token(store, token.strip()) if isinstance(token, str) else None
        if reviewer is None:
            limiter.failed(client)
            return RedirectResponse(f"{PREFIX}/login?error=1&next={_quote(_safe_next(str(target or '')))}",
                                    status_code=303)
        session_id, _ = auth.create_session(store, reviewer)
        resp = RedirectResponse(_safe_next(str(target or "")), status_code=303)
        # path "/": the session also opens /traces and /dashboard (SameSite=Strict keeps it first-party)
        set_cookie(request, resp, SESSION_COOKIE, auth.sign(session_id, secret),
                   int(auth.SESSION_TTL.total_seconds()), path="/")
        resp.delete_cookie(LOGIN_COOKIE, path=PREFIX)
        return resp

    @router.post("/logout")
    def logout(request: Request, session: PostSessionDep, store: StoreDep) -> Response:
        if session.session_hash:
            auth.revoke_session(store, session.session_hash)
        resp = RedirectResponse(f"{PREFIX}/login", status_code=303)
        resp.delete_cookie(SESSION_COOKIE, path="/")
        resp.delete_cookie(SESSION_COOKIE, path=PREFIX)  # a cookie from before sessions covered "/"
        return resp

    # --- pages ---------------------------------------------------------------------------
    @router.get("/", response_class=HTMLResponse)
    def queues_page(session: SessionDep, store: StoreDep) -> Response:
        tenant = session.reviewer.tenant
        queues = [progress(store, tenant=tenant, queue=q) for q in queue_names(store, tenant=tenant)]
        return render("queues.html", queues=queues, reviewer=session.reviewer, csrf_token=session.csrf_token)

    @router.get("/queues/{queue}", response_class=HTMLResponse)
    def queue_page(queue: str, session: SessionDep, store: StoreDep) -> Response:
        tenant = session.reviewer.tenant
        if queue not in queue_names(store, tenant=tenant):
            return render("error.html", 404, message=f"No queue named {queue!r}.", reviewer=session.reviewer,
                          csrf_token=session.csrf_token)
        prog = progress(store, tenant=tenant, queue=queue)
        mine = len(decided_by(store, session.reviewer, queue))
        return render("queue.html", queue=prog, mine=mine, reviewer=session.reviewer,
                      csrf_token=session.csrf_token)

    @router.get("/queues/{queue}/next")
    def next_page(queue: str, session: SessionDep, store: StoreDep) -> Response:
        if not session.reviewer.can_review:
            return render("error.html", 403, message=VIEWER_MESSAGE, reviewer=session.reviewer,
                          csrf_token=session.csrf_token)
        if queue not in queue_names(store, tenant=session.reviewer.tenant):
            return render("error.html", 404, message=f"No queue named {queue!r}.", reviewer=session.reviewer,
                          csrf_token=session.csrf_token)
        trace_id = next_item(store, session.reviewer, queue)
        if trace_id is None:
            prog = progress(store, tenant=session.reviewer.tenant, queue=queue)
            mine = len(decided_by(store, session.reviewer, queue))
            return render("done.html", queue=prog, mine=mine, reviewer=session.reviewer,
                          csrf_token=session.csrf_token)
        return RedirectResponse(f"{PREFIX}/queues/{quote(queue)}/items/{quote(trace_id)}", status_code=303)

    def _item_or_error(queue: str, trace_id: str, session: auth.Session, store: Store) -> Response | None:
        reviewer = session.reviewer
        if not reviewer.can_review:
            return render("error.html", 403, message=VIEWER_MESSAGE, reviewer=reviewer, csrf_token=session.csrf_token)
        if get_item(store, tenant=reviewer.tenant, queue=queue, trace_id=trace_id) is None:
            return render("error.html", 404, message="No such item in your queues.", reviewer=reviewer,
                          csrf_token=session.csrf_token)
        if trace_id in decided_by(store, reviewer, queue):
            return RedirectResponse(f"{PREFIX}/queues/{quote(queue)}/next", status_code=303)
        if not holds(store, reviewer, queue, trace_id):
            return render("error.html", 409, message="This item is not assigned to you; take the next one "
                          "from the queue page.", reviewer=reviewer, csrf_token=session.csrf_token)
        return None

    @router.get("/queues/{queue}/items/{trace_id}", response_class=HTMLResponse)
    def item_page(queue: str, trace_id: str, session: SessionDep, store: StoreDep) -> Response:
        blocked = _item_or_error(queue, trace_id, session, store)
        if blocked is not None:
            return blocked
        reviewer = session.reviewer
        item = get_item(store, tenant=reviewer.tenant, queue=queue, trace_id=trace_id)
        assert item is not None  # checked by _item_or_error
        view = item_view(store, item)
        prog = progress(store, tenant=reviewer.tenant, queue=queue)
        mine = len(decided_by(store, reviewer, queue))
        return render("item.html", item=item, view=view, queue=prog, mine=mine, reviewer=reviewer,
                      csrf_token=session.csrf_token)

    @router.post("/queues/{queue}/items/{trace_id}")
    async def decide(queue: str, trace_id: str, request: Request, session: PostSessionDep,
                     store: StoreDep) -> Response:
        blocked = _item_or_error(queue, trace_id, session, store)
        if blocked is not None:
            return blocked
        form = await request.form()
        item = get_item(store, tenant=session.reviewer.tenant, queue=queue, trace_id=trace_id)
        assert item is not None
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
            return render("error.html", 400, message=str(exc), reviewer=session.reviewer,
                          csrf_token=session.csrf_token)
        return RedirectResponse(f"{PREFIX}/queues/{quote(queue)}/next", status_code=303)

    # --- JSON for scripts ----------------------------------------------------------------
    @router.get("/api/queues")
    def api_queues(session: SessionDep, store: StoreDep) -> JSONResponse:
        tenant = session.reviewer.tenant
        out = []
        for q in queue_names(store, tenant=tenant):
            p = progress(store, tenant=tenant, queue=q)
            out.append({"queue": p.queue, "items": p.items, "reviewers_per_item": p.reviewers_per_item,
                        "complete": p.complete, "decisions": p.decisions, "target": p.target,
                        "reviewers": [{"name": r.name, "decided": r.decided} for r in p.reviewers]})
        return JSONResponse({"tenant": tenant, "queues": out}, headers=SECURITY_HEADERS)

    @router.get("/api/queues/{queue}/agreement")
    def api_agreement(queue: str, session: SessionDep, store: StoreDep) -> JSONResponse:
        try:
            report = agreement_report(store, tenant=session.reviewer.tenant, queue=queue)
        except ReviewError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        return JSONResponse(report, headers=SECURITY_HEADERS)

    # Writes through the JSON API take a bearer token only: a browser session's cookie would make
    # them reachable by cross-site requests, and these have no form to carry a CSRF token.
    def bearer_only(session: SessionDep) -> auth.Session:
        if session.csrf_token is not None:
            raise BearerRequired()
        if not session.reviewer.can_review:
            raise ViewerRefused()
        return session

    BearerDep = Annotated[auth.Session, Depends(bearer_only)]

    @router.post("/api/queues/{queue}/enqueue")
    async def api_enqueue(queue: str, request: Request, session: BearerDep, store: StoreDep) -> JSONResponse:
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

    @router.get("/api/queues/{queue}/export")
    def api_export(queue: str, session: SessionDep, store: StoreDep) -> JSONResponse:
        if queue not in queue_names(store, tenant=session.reviewer.tenant):
            return JSONResponse({"error": f"no queue {queue!r}"}, status_code=404)
        gold = build_gold(store, tenant=session.reviewer.tenant, queue=queue)
        return JSONResponse({"records": list(gold.records), "qrels": [list(q) for q in gold.qrels]},
                            headers=SECURITY_HEADERS)

    @router.post("/api/queues/{queue}/gold")
    def api_store_gold(queue: str, session: BearerDep, store: StoreDep) -> JSONResponse:
        if queue not in queue_names(store, tenant=session.reviewer.tenant):
            return JSONResponse({"error": f"no queue {queue!r}"}, status_code=404)
        gold = build_gold(store, tenant=session.reviewer.tenant, queue=queue)
        return JSONResponse({"stored": store_gold(store, session.reviewer.tenant, gold)})

    @router.get("", include_in_schema=False)
    def bare(session: SessionDep) -> Response:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    # --- reviewer administration, for the tenant's operators -------------------------------
    # Outside /review: these are authenticated like the collector's own API, by the tenant tokens of
    # settings.tokens. Without tenant tokens the rest of the collector is open (tenant "default"),
    # but creating reviewers hands out login tokens, so this API then takes the operator's admin
    # token (settings.admin_token, $RAGTRACE_ADMIN_TOKEN) and is closed when none is set. It is how
    # reviewers are managed while `ragtrace serve` owns an embedded store.
    tokens: dict[str, str] = dict(getattr(settings, "tokens", None) or {})
    admin_token = str(getattr(settings, "admin_token", "") or "")
    admins = tokens or ({admin_token: DEFAULT_TENANT} if admin_token else {})
    admin = APIRouter(prefix="/api/reviewers")

    def admin_tenant(request: Request) -> str:
        if not admins:
            raise AdminClosed()
        scheme, _, sent = request.headers.get("authorization", "").partition(" ")
        found = None
        for known, tenant in admins.items():
            if scheme.lower() == "bearer" and hmac.compare_digest(known.encode(), sent.strip().encode()):
                found = tenant
        if found is None:
            raise AdminUnauthenticated()
        return found

    AdminDep = Annotated[str, Depends(admin_tenant)]

    def _reviewer_json(r: auth.Reviewer) -> dict[str, Any]:
        return {"reviewer_id": r.reviewer_id, "name": r.name, "tenant": r.tenant, "disabled": r.disabled,
                "created_at": r.created_at.isoformat(), "role": r.role}

    @admin.get("")
    def api_list_reviewers(tenant: AdminDep, store: StoreDep) -> JSONResponse:
        return JSONResponse([_reviewer_json(r) for r in auth.list_reviewers(store, tenant=tenant)])

    @admin.post("")
    async def api_add_reviewer(request: Request, tenant: AdminDep, store: StoreDep) -> JSONResponse:
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
        return JSONResponse({**_reviewer_json(reviewer), "token": token}, headers={"Cache-Control": "no-store"})

    @admin.post("/{name}/{action}")
    def api_set_reviewer(name: str, action: str, tenant: AdminDep, store: StoreDep) -> JSONResponse:
        if action not in ("disable", "enable"):
            return JSONResponse({"error": "action must be 'disable' or 'enable'"}, status_code=404)
        try:
            reviewer = auth.set_disabled(store, auth.find_reviewer(store, name, tenant=tenant), action == "disable")
        except ReviewError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        return JSONResponse(_reviewer_json(reviewer))

    app.include_router(router)
    app.include_router(admin)
    # the team's web view beside /review: the same sessions, tenants and templates
    shared = Pages(get_store=get_store, current=current, check_csrf=check_csrf, render=render)
    traces_web.mount(app, shared)
    dashboard.mount(app, shared)
    # Static assets are public (a stylesheet and the shortcut script; nothing tenant-specific), so
    # the login page can use them.
    app.mount(f"{PREFIX}/static", StaticFiles(directory=str(_HERE / "static")), name="review-static")

    async def on_anonymous(request: Request, exc: Exception) -> Response:
        if _is_html_get(request):
            target = _quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
            return RedirectResponse(f"{PREFIX}/login?next={target}", status_code=303)
        return JSONResponse({"error": "log in at /review/login or send 'Authorization: Bearer TOKEN'"},
                            status_code=401, headers={"WWW-Authenticate": 'Bearer realm="ragtrace-review"'})

    async def on_csrf(request: Request, exc: Exception) -> Response:
        return HTMLResponse("<h1>403: the form's CSRF token is missing or stale.</h1>"
                            "<p>Reload the page and submit again.</p>", status_code=403, headers=SECURITY_HEADERS)

    app.add_exception_handler(NotAuthenticated, on_anonymous)
    async def on_cookie_write(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": "this API call needs 'Authorization: Bearer TOKEN', not a browser session"},
                            status_code=403)

    async def on_admin_closed(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": "reviewer administration over HTTP is off: the server has no tenant tokens "
                                      "and no RAGTRACE_ADMIN_TOKEN. Set RAGTRACE_ADMIN_TOKEN on the server and send "
                                      "it as --token, or manage reviewers with direct store access "
                                      "(`ragtrace reviewers ... --store STORE` while the server is stopped)"},
                            status_code=403)

    # which credential opens /api/reviewers depends on the server's configuration: say that one
    admin_credential = ("a tenant token of the server's --tokens (RAGTRACE_ADMIN_TOKEN opens it only on a server "
                        "without tenant tokens)" if tokens else "the server's RAGTRACE_ADMIN_TOKEN")

    async def on_admin_unauthenticated(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": f"/api/reviewers needs 'Authorization: Bearer TOKEN' with {admin_credential}; "
                                      "a reviewer's token or login does not open it"},
                            status_code=401, headers={"WWW-Authenticate": 'Bearer realm="ragtrace-admin"'})

    async def on_viewer(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": VIEWER_MESSAGE}, status_code=403)

    app.add_exception_handler(ViewerRefused, on_viewer)
    app.add_exception_handler(CsrfRejected, on_csrf)
    app.add_exception_handler(BearerRequired, on_cookie_write)
    app.add_exception_handler(AdminClosed, on_admin_closed)
    app.add_exception_handler(AdminUnauthenticated, on_admin_unauthenticated)
    return router
