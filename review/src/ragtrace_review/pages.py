"""What the review UI shares with the pages mounted beside ``/review`` (`/traces`, `/dashboard`).

`ragtrace_review.web.mount` owns the sessions, the CSRF check and the templates; the page modules
(`traces_web`, `dashboard`) receive them as a `Pages` value, so every page has the same login, the
same tenant and the same Content-Security-Policy, and no module repeats the authentication code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote as _quote
from urllib.parse import urlencode

from fastapi.responses import HTMLResponse

from ragtrace_review import auth
from ragtrace_review.errors import ReviewError
from ragtrace_store import Store, parse_time_bound

TRACES = "/traces"
DASHBOARD = "/dashboard"
#: top-level paths of pages that take a browser session (the login page may send a user back to
#: them, and an anonymous HTML request there is redirected to the login page)
PAGE_PATHS = (TRACES, DASHBOARD)


@dataclass(frozen=True)
class Pages:
    """The review UI's plumbing, for page modules. ``current`` and ``check_csrf`` are FastAPI
    dependencies (the session, or `NotAuthenticated`; the session after the form's CSRF token was
    checked); ``render(template, status, **context)`` renders with the UI's templates and headers."""

    get_store: Callable[..., Store]
    current: Callable[..., auth.Session]
    check_csrf: Callable[..., Awaitable[auth.Session]]
    render: Callable[..., HTMLResponse]

    def page(self, name: str, session: auth.Session, status: int = 200, **ctx: Any) -> HTMLResponse:
        return self.render(name, status, reviewer=session.reviewer, csrf_token=session.csrf_token, **ctx)

    def error(self, session: auth.Session, status: int, message: str) -> HTMLResponse:
        return self.page("error.html", session, status, message=message)


def is_page_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PAGE_PATHS)


def blank(value: str | None) -> str | None:
    """A form field: the empty string (an "any" choice, an empty box) means not given."""
    if value is None:
        return None
    value = value.strip()
    return value or None


def time_window(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """``since`` and ``until`` from a form: each an ISO time (naive = UTC) or an age (``24h``, ``7d``).
    A value that is neither, and a window that ends before it starts (an age is that long ago, so
    since=1d&until=2d holds nothing), is a `ReviewError` saying what to change, as `ragtrace traces`
    refuses them: a page that only said "no trace matches" would look like an answer."""
    bounds: list[datetime | None] = []
    for name, raw in (("since", since), ("until", until)):
        value = blank(raw)
        try:
            bounds.append(parse_time_bound(value, name) if value is not None else None)
        except ValueError:
            raise ReviewError(f"{name} {value!r}: give an ISO time (2026-01-31T12:00Z) or an age (24h, 7d)") from None
    lo, hi = bounds
    if lo is not None and hi is not None and lo >= hi:
        raise ReviewError(f"since {lo:%Y-%m-%d %H:%M:%S} UTC is not before until {hi:%Y-%m-%d %H:%M:%S} UTC: no trace "
                          "can match; swap them (an age such as 2d means that long ago)")
    return lo, hi


def check_manifest(manifest: str | None, known: Sequence[str]) -> None:
    """A `ReviewError` for a ``manifest`` parameter naming no manifest with labels in the tenant (a typo,
    or one of another tenant): the page would list every trace as "not labelled", as if no audit had run."""
    if manifest is None or manifest in known:
        return
    choices = f"the manifests with labels here: {', '.join(known)}" if known else "no manifest has labels yet"
    raise ReviewError(f"manifest {manifest!r} has no labels in this tenant; {choices}")


def quote(part: str) -> str:
    """Percent-encode one path segment ('/' included: trace ids are arbitrary text)."""
    return _quote(part, safe="")


def url(path: str, params: Mapping[str, Any]) -> str:
    """``path?query`` with the given parameters (None and "" left out), percent-encoded."""
    kept = {k: v for k, v in params.items() if v is not None and v != ""}
    return f"{path}?{urlencode(kept)}" if kept else path
