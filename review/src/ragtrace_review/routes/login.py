"""``/review/login`` and ``/review/logout``: a reviewer's token in, a session cookie out.

The login form has no session to hold a CSRF token yet, so it uses a double-submit token: a random
nonce in the form and, signed, in a short-lived cookie. Failed logins are counted per client
(`ragtrace_review.limits`); a client over the limit is told to wait before its token is even looked at.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ragtrace_review import auth
from ragtrace_review.cookies import LOGIN_COOKIE, SESSION_COOKIE, set_cookie
from ragtrace_review.deps import CsrfSessionDep, LimiterDep, RendererDep, SettingsDep, StoreDep
from ragtrace_review.handlers import CsrfRejected
from ragtrace_review.links import PREFIX, is_page_path

__all__ = ["router", "safe_next"]

#: how long the login form's nonce cookie lives, in seconds
LOGIN_FORM_TTL = 600

router = APIRouter(prefix=PREFIX)


def safe_next(target: str | None) -> str:
    """Only same-site review paths: an open redirect after login would be a phishing aid."""
    if target and not target.startswith("//") and "\\" not in target and (
            target.startswith(PREFIX + "/") or is_page_path(target.split("?", 1)[0])):
        return target
    return PREFIX + "/"


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, renderer: RendererDep, settings: SettingsDep, next: str | None = None,
               error: str | None = None) -> Response:
    nonce = secrets.token_urlsafe(24)
    resp = renderer.render("login.html", status=401 if error else 200, csrf_token=nonce, next=safe_next(next),
                           error=error, reviewer=None)
    set_cookie(request, resp, LOGIN_COOKIE, auth.sign(nonce, settings.secret), LOGIN_FORM_TTL)
    return resp


@router.post("/login")
async def login(request: Request, store: StoreDep, settings: SettingsDep, renderer: RendererDep,
                limiter: LimiterDep) -> Response:
    client = request.client.host if request.client else "-"
    wait = limiter.retry_after(client)
    if wait:
        # checked before the token is even looked at: a guess made while limited tells nothing
        limited = renderer.render("error.html", 429, message=f"Too many failed logins from your address; try "
                                  f"again in {wait} seconds.", reviewer=None, csrf_token=None)
        limited.headers["Retry-After"] = str(wait)
        return limited
    form = await request.form()
    sent, token, target = form.get("csrf_token"), form.get("token"), form.get("next")
    cookie = request.cookies.get(LOGIN_COOKIE)
    nonce = auth.unsign(cookie, settings.secret) if cookie else None
    if not isinstance(sent, str) or nonce is None or not hmac.compare_digest(sent, nonce):
        raise CsrfRejected()
    reviewer = auth.reviewer_for_token(store, token.strip()) if isinstance(token, str) else None
    if reviewer is None:
        limiter.failed(client)
        return RedirectResponse(f"{PREFIX}/login?error=1&next={quote(safe_next(str(target or '')))}",
                                status_code=303)
    session_id, _ = auth.create_session(store, reviewer)
    resp = RedirectResponse(safe_next(str(target or "")), status_code=303)
    # path "/": the session also opens /traces and /dashboard (SameSite=Strict keeps it first-party)
    set_cookie(request, resp, SESSION_COOKIE, auth.sign(session_id, settings.secret),
               int(auth.SESSION_TTL.total_seconds()), path="/")
    set_cookie(request, resp, LOGIN_COOKIE, "", 0)
    return resp


@router.post("/logout")
def logout(request: Request, session: CsrfSessionDep, store: StoreDep) -> Response:
    if session.session_hash:
        auth.revoke_session(store, session.session_hash)
    resp = RedirectResponse(f"{PREFIX}/login", status_code=303)
    set_cookie(request, resp, SESSION_COOKIE, "", 0, path="/")
    set_cookie(request, resp, SESSION_COOKIE, "", 0)  # a cookie from before sessions covered "/"
    return resp
