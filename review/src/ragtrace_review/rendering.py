"""How every HTML page of the UI is answered: a Jinja2 template, rendered with the UI's security headers.

The headers hold for every page, error pages included: a Content-Security-Policy that allows scripts,
styles and images only from this origin (so even a missed escape could not run injected code), no
framing, no sniffing, no referrer and no caching of pages that show a tenant's data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment

from ragtrace_review import auth

__all__ = ["SECURITY_HEADERS", "Renderer"]

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Renderer:
    """Renders the UI's templates (``env``, autoescaping) into responses with `SECURITY_HEADERS`."""

    env: Environment

    def render(self, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(**ctx)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def page(self, name: str, session: auth.Session, status: int = 200, **ctx: Any) -> HTMLResponse:
        """A page for a logged-in reader: the layout shows who it is and its forms carry the CSRF token."""
        return self.render(name, status, reviewer=session.reviewer, csrf_token=session.csrf_token, **ctx)

    def error(self, session: auth.Session, status: int, message: str) -> HTMLResponse:
        return self.page("error.html", session, status, message=message)
