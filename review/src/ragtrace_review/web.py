"""The review UI, mounted under ``/review`` of the collector's FastAPI app, with the trace explorer
and the dashboard beside it (``/traces``, ``/dashboard``) and reviewer administration (``/api/reviewers``).

Server-rendered Jinja2 pages (autoescape on: queries, passages and answers are untrusted text) with
one small static script for keyboard shortcuts; no inline script, and a Content-Security-Policy
that allows scripts only from this origin, so even a missed escape could not run injected code.

Authentication: a browser logs in with the reviewer's token and gets a session cookie (HMAC-signed,
HttpOnly, SameSite=Strict, Secure over https); every form carries the session's CSRF token. Scripts
may send ``Authorization: Bearer TOKEN`` instead (no cookie, so no CSRF). Anonymous requests get
a redirect to the login page (HTML GETs) or 401. The login page and the static assets are the only
public paths. A reviewer sees only their own tenant's queues.

`mount` is the one entry: it resolves the configuration into a `ReviewContext` on the app and adds
the route modules (`ragtrace_review.routes`, `ragtrace_review.explorer`), the refusal handlers
(`ragtrace_review.handlers`) and the static files. Routes take everything through
`ragtrace_review.deps`, so a test replaces any of it with ``app.dependency_overrides``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader
from starlette.routing import BaseRoute

from ragtrace_review import handlers
from ragtrace_review.cookies import SESSION_COOKIE
from ragtrace_review.deps import ReviewContext, ReviewSettings
from ragtrace_review.explorer import dashboard, traces
from ragtrace_review.limits import LoginLimiter
from ragtrace_review.links import PREFIX
from ragtrace_review.local_admin import LocalAdmin
from ragtrace_review.rendering import Renderer
from ragtrace_review.routes import api, login, queues, reviewers
from ragtrace_store import CLAIM_VERDICTS, FAILURE_MODES, Store

__all__ = ["SESSION_COOKIE", "mount", "templates"]

_HERE = Path(__file__).resolve().parent


def templates() -> Environment:
    """The UI's Jinja2 templates, with the store's vocabularies the forms offer."""
    # autoescape=True for every template, whatever its extension: all page text is untrusted.
    env = Environment(loader=FileSystemLoader(str(_HERE / "templates")), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    env.globals.update(prefix=PREFIX, failure_modes=FAILURE_MODES, claim_verdicts=CLAIM_VERDICTS)
    # None is "unknown" (relevance not labelled), never silently "no".
    env.filters["yesno"] = lambda v: "unknown" if v is None else ("yes" if v else "no")
    return env


def mount(app: FastAPI, get_store: Callable[[], Store], settings: Any = None, *,
          login_limiter: LoginLimiter | None = None, local_admin: LocalAdmin | None = None) -> APIRouter:
    """Add the ``/review`` pages, ``/api/reviewers``, ``/traces`` and ``/dashboard`` to ``app``.

    ``get_store`` returns the Store; ``settings`` is the collector's settings (``review_secret``,
    ``tokens``, ``admin_token``; None: none of them set); ``login_limiter`` counts failed logins per
    client (default: `ragtrace_review.limits`' limits); ``local_admin`` is the serving process's local
    admin credential (`ragtrace_review.local_admin`; None: none). Returns a router holding the app's
    routes under ``/review`` (its ``routes`` list them, e.g. for tests). One app takes the UI once.
    """
    if getattr(app.state, "review", None) is not None:
        raise ValueError("the review UI is already mounted on this app; mount it once per app")
    app.state.review = ReviewContext(get_store=get_store,
                                     settings=ReviewSettings.from_settings(settings, local_admin),
                                     renderer=Renderer(templates()), limiter=login_limiter or LoginLimiter())
    review = _add_routes(app, login.router, queues.router, api.router)
    _add_routes(app, reviewers.router)
    # the team's web view beside /review: the same sessions, tenants and templates
    _add_routes(app, traces.router, dashboard.router)
    # Static assets are public (a stylesheet and the shortcut script; nothing tenant-specific), so
    # the login page can use them.
    app.mount(f"{PREFIX}/static", StaticFiles(directory=str(_HERE / "static")), name="review-static")
    handlers.install(app)
    return APIRouter(routes=review)


def _add_routes(app: FastAPI, *routers: APIRouter) -> list[BaseRoute]:
    """Add every route of ``routers`` to ``app`` itself and return the routes added.

    Added one by one rather than with ``include_router`` (which in this FastAPI keeps an included
    router as one opaque entry): ``app.routes`` then lists every page, and each route takes its
    dependency overrides from ``app``.
    """
    added: list[BaseRoute] = []
    for router in routers:
        for route in router.routes:
            if not isinstance(route, APIRoute):
                raise TypeError(f"{route!r} of a review route module is not an APIRoute; add it to mount by hand")
            app.add_api_route(route.path, route.endpoint, methods=sorted(route.methods or ()), name=route.name,
                              response_class=route.response_class, include_in_schema=route.include_in_schema)
            added.append(app.router.routes[-1])
    return added
