"""Why the HTTP layer refuses a request, and the answer each refusal gets.

The dependencies (`ragtrace_review.deps`) and the login route raise these; `install` registers one
handler per refusal on the app, so a route never builds a refusal itself and every page, ``/review``
and the explorer alike, refuses in the same words::

    NotAuthenticated        no session, no valid bearer token  -> HTML GET: 303 to the login page; else 401
    CsrfRejected            a form without its CSRF token      -> 403 (HTML)
    BearerRequired          an API write with a browser session -> 403 (JSON)
    ViewerRefused           an API write by a viewer            -> 403 (JSON)
    AdminClosed             /api/reviewers with no credential configured -> 403 (JSON)
    AdminUnauthenticated    /api/reviewers without its credential -> 401 (JSON), naming the credential
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from ragtrace_review.links import PREFIX, is_page_path
from ragtrace_review.rendering import SECURITY_HEADERS

__all__ = ["VIEWER_MESSAGE", "AdminClosed", "AdminUnauthenticated", "BearerRequired", "CsrfRejected",
           "NotAuthenticated", "ViewerRefused", "install"]

VIEWER_MESSAGE = "Viewers can read traces, the dashboard and queue progress, but not review or fill queues."


class NotAuthenticated(Exception):
    """No live session cookie and no valid bearer token."""


class CsrfRejected(Exception):
    """A form whose CSRF token is missing or does not match the session's (or the login nonce)."""


class BearerRequired(Exception):
    """A write of the JSON API sent with a browser session instead of a bearer token."""


class ViewerRefused(Exception):
    """A viewer (read-only role) asked for a write of the review API."""


class AdminClosed(Exception):
    """The reviewer administration API has no credential configured (no tokens, no admin token)."""


class AdminUnauthenticated(Exception):
    """`/api/reviewers` without one of its credentials (a reviewer's login does not open it).
    ``credential`` says which credential this server's configuration asks for."""

    def __init__(self, credential: str) -> None:
        super().__init__(credential)
        self.credential = credential


def _is_html_get(request: Request) -> bool:
    path = request.url.path
    return request.method == "GET" and "text/html" in request.headers.get("accept", "") \
        and (path.startswith(PREFIX) or is_page_path(path)) and not path.startswith(f"{PREFIX}/api/")


async def on_anonymous(request: Request, exc: Exception) -> Response:
    if _is_html_get(request):
        target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        return RedirectResponse(f"{PREFIX}/login?next={target}", status_code=303)
    return JSONResponse({"error": "log in at /review/login or send 'Authorization: Bearer TOKEN'"},
                        status_code=401, headers={"WWW-Authenticate": 'Bearer realm="ragtrace-review"'})


async def on_csrf(request: Request, exc: Exception) -> Response:
    return HTMLResponse("<h1>403: the form's CSRF token is missing or stale.</h1>"
                        "<p>Reload the page and submit again.</p>", status_code=403, headers=SECURITY_HEADERS)


async def on_cookie_write(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": "this API call needs 'Authorization: Bearer TOKEN', not a browser session"},
                        status_code=403)


async def on_viewer(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": VIEWER_MESSAGE}, status_code=403)


async def on_admin_closed(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": "reviewer administration over HTTP is off: the server has no tenant tokens "
                                  "and no RAGTRACE_ADMIN_TOKEN. Set RAGTRACE_ADMIN_TOKEN on the server and send "
                                  "it as --token, or manage reviewers with direct store access "
                                  "(`ragtrace reviewers ... --store STORE` while the server is stopped)"},
                        status_code=403)


async def on_admin_unauthenticated(request: Request, exc: Exception) -> Response:
    credential = exc.credential if isinstance(exc, AdminUnauthenticated) else "its credential"
    return JSONResponse({"error": f"/api/reviewers needs 'Authorization: Bearer TOKEN' with {credential}; "
                                  "a reviewer's token or login does not open it"},
                        status_code=401, headers={"WWW-Authenticate": 'Bearer realm="ragtrace-admin"'})


def install(app: FastAPI) -> None:
    """Answer every refusal of the UI on ``app`` (they hold for the explorer's pages too)."""
    app.add_exception_handler(NotAuthenticated, on_anonymous)
    app.add_exception_handler(CsrfRejected, on_csrf)
    app.add_exception_handler(BearerRequired, on_cookie_write)
    app.add_exception_handler(ViewerRefused, on_viewer)
    app.add_exception_handler(AdminClosed, on_admin_closed)
    app.add_exception_handler(AdminUnauthenticated, on_admin_unauthenticated)
