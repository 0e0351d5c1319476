"""The HTTP layer's dependencies: what a route of the UI may ask FastAPI for.

`ragtrace_review.web.mount` resolves the configuration once and leaves it on the app
(`ReviewContext`, ``app.state.review``); everything a route needs comes through the functions below,
each usable with ``Depends`` and each replaceable in a test with ``app.dependency_overrides``::

    get_context   the ReviewContext mount left on the app
    get_store     the Store (through the get_store the server gave mount)
    get_settings  ReviewSettings: the cookie key and the credentials of /api/reviewers
    get_renderer  the templates, rendered with the UI's security headers
    get_limiter   the failed-login counter
    get_session   who is asking: a session cookie or a bearer token, else NotAuthenticated
    check_csrf    the session, once a form's CSRF token matched it (bearer requests carry no form)
    bearer_only   the session of a JSON API write: bearer token only, not a viewer
    admin_tenant  the tenant of an operator's credential for /api/reviewers (or of the local admin
                  credential a serving process wrote for its own user, `ragtrace_review.local_admin`)

The ``...Dep`` aliases are the annotations routes use (``session: SessionDep``).
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from ragtrace_review import auth
from ragtrace_review.cookies import SESSION_COOKIE
from ragtrace_review.handlers import (
    AdminClosed,
    AdminUnauthenticated,
    BearerRequired,
    CsrfRejected,
    NotAuthenticated,
    ViewerRefused,
)
from ragtrace_review.limits import LoginLimiter
from ragtrace_review.local_admin import LocalAdmin
from ragtrace_review.rendering import Renderer
from ragtrace_store import DEFAULT_TENANT, Store

__all__ = ["ENV_SECRET", "AdminTenantDep", "BearerSessionDep", "ContextDep", "CsrfSessionDep", "LimiterDep",
           "RendererDep", "ReviewContext", "ReviewSettings", "SessionDep", "SettingsDep", "StoreDep", "admin_tenant",
           "bearer_only", "check_csrf", "get_context", "get_limiter", "get_renderer", "get_session", "get_settings",
           "get_store"]

ENV_SECRET = "RAGTRACE_REVIEW_SECRET"


@dataclass(frozen=True)
class ReviewSettings:
    """What the UI takes from the server's settings. Secrets stay out of ``repr``.

    ``secret`` signs the cookies. ``tenant_tokens`` (token -> tenant) are the collector's tenant
    tokens; ``admin_token`` opens `/api/reviewers` on a server without them.
    """

    secret: bytes = field(repr=False)
    tenant_tokens: Mapping[str, str] = field(default_factory=dict, repr=False)
    admin_token: str = field(default="", repr=False)
    #: the serving process's local admin credential (`ragtrace_review.local_admin`); it opens
    #: `/api/reviewers` for tenant "default" on a server without tenant tokens, from loopback only
    local_admin: LocalAdmin | None = field(default=None, repr=False)

    @property
    def local(self) -> LocalAdmin | None:
        """The local admin credential where it applies: not beside tenant tokens, which name the tenant."""
        return None if self.tenant_tokens else self.local_admin

    @classmethod
    def from_settings(cls, settings: Any, local_admin: LocalAdmin | None = None) -> ReviewSettings:
        """From the collector's settings (or anything with the same attributes; None: none set).

        The cookie key is ``settings.review_secret``, else $RAGTRACE_REVIEW_SECRET, else random. A
        random key means sessions end when the process restarts; several collector replicas behind
        one load balancer need the same configured key.
        """
        value = getattr(settings, "review_secret", None) or os.environ.get(ENV_SECRET)
        return cls(secret=value.encode("utf-8") if value else secrets.token_bytes(32),
                   tenant_tokens=dict(getattr(settings, "tokens", None) or {}),
                   admin_token=str(getattr(settings, "admin_token", "") or ""), local_admin=local_admin)

    @property
    def admins(self) -> Mapping[str, str]:
        """The credentials of `/api/reviewers`, each with the tenant it administers.

        Without tenant tokens the rest of the collector is open (tenant "default"), but creating
        reviewers hands out login tokens, so the API then takes the operator's admin token and is
        closed when none is set.
        """
        if self.tenant_tokens:
            return self.tenant_tokens
        return {self.admin_token: DEFAULT_TENANT} if self.admin_token else {}

    @property
    def admin_credential(self) -> str:
        """Which credential opens `/api/reviewers` on this server, in words for its 401."""
        if self.tenant_tokens:
            return ("a tenant token of the server's --tokens (RAGTRACE_ADMIN_TOKEN opens it only on a server "
                    "without tenant tokens)")
        if self.local is not None:
            return (f"the server's RAGTRACE_ADMIN_TOKEN, or from this machine its local admin credential, which "
                    f"only the user running the server can read in {self.local.path} (`ragtrace reviewers ... "
                    f"--server {self.local.url}` run as that user sends it; each use spends it)")
        return "the server's RAGTRACE_ADMIN_TOKEN"


@dataclass(frozen=True)
class ReviewContext:
    """What `mount` resolved for one app: the dependencies below read it from ``app.state.review``."""

    get_store: Callable[[], Store]
    settings: ReviewSettings
    renderer: Renderer
    limiter: LoginLimiter


def get_context(request: Request) -> ReviewContext:
    context = getattr(request.app.state, "review", None)
    if not isinstance(context, ReviewContext):
        raise RuntimeError("this app has the review UI's routes but no ReviewContext: add them with "
                           "ragtrace_review.web.mount(app, get_store, settings), not one router at a time")
    return context


ContextDep = Annotated[ReviewContext, Depends(get_context)]


def get_store(context: ContextDep) -> Store:
    return context.get_store()


def get_settings(context: ContextDep) -> ReviewSettings:
    return context.settings


def get_renderer(context: ContextDep) -> Renderer:
    return context.renderer


def get_limiter(context: ContextDep) -> LoginLimiter:
    return context.limiter


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[ReviewSettings, Depends(get_settings)]
RendererDep = Annotated[Renderer, Depends(get_renderer)]
LimiterDep = Annotated[LoginLimiter, Depends(get_limiter)]


def get_session(request: Request, store: StoreDep, settings: SettingsDep) -> auth.Session:
    """The session of a bearer token (no CSRF token: nothing ambient to forge) or of the signed
    session cookie; `NotAuthenticated` for neither, a wrong token, a forged cookie or an ended session."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        reviewer = auth.reviewer_for_token(store, header[7:].strip())
        if reviewer is None:
            raise NotAuthenticated()
        return auth.Session(reviewer, None, None)
    cookie = request.cookies.get(SESSION_COOKIE)
    session_id = auth.unsign(cookie, settings.secret) if cookie else None
    session = auth.session_for_id(store, session_id) if session_id else None
    if session is None:
        raise NotAuthenticated()
    return session


SessionDep = Annotated[auth.Session, Depends(get_session)]


async def check_csrf(request: Request, session: SessionDep) -> auth.Session:
    """The session, once the form's ``csrf_token`` matched a browser session's (`CsrfRejected` if not)."""
    if session.csrf_token is not None:
        form = await request.form()
        sent = form.get("csrf_token")
        if not isinstance(sent, str) or not hmac.compare_digest(sent, session.csrf_token):
            raise CsrfRejected()
    return session


CsrfSessionDep = Annotated[auth.Session, Depends(check_csrf)]


def bearer_only(session: SessionDep) -> auth.Session:
    """Writes through the JSON API take a bearer token only: a browser session's cookie would make
    them reachable by cross-site requests, and these have no form to carry a CSRF token."""
    if session.csrf_token is not None:
        raise BearerRequired()
    if not session.reviewer.can_review:
        raise ViewerRefused()
    return session


BearerSessionDep = Annotated[auth.Session, Depends(bearer_only)]


def admin_tenant(request: Request, settings: SettingsDep) -> str:
    """The tenant whose reviewers the caller administers: the one of the bearer credential it sent
    (`AdminClosed` when the server has none configured, `AdminUnauthenticated` for a wrong one)."""
    admins, local = settings.admins, settings.local
    if not admins and local is None:
        raise AdminClosed()
    scheme, _, sent = request.headers.get("authorization", "").partition(" ")
    found = None
    for known, tenant in admins.items():
        # every credential compared, in constant time, so the answer's timing does not say which matched
        if scheme.lower() == "bearer" and hmac.compare_digest(known.encode(), sent.strip().encode()):
            found = tenant
    if found is None and local is not None and scheme.lower() == "bearer" \
            and local.accept(sent.strip(), request.client.host if request.client else None, request.headers):
        found = DEFAULT_TENANT
    if found is None:
        raise AdminUnauthenticated(settings.admin_credential)
    return found


AdminTenantDep = Annotated[str, Depends(admin_tenant)]
