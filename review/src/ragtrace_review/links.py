"""The UI's addresses: where ``/review`` and the explorer's pages live, and how links to them are built.

Every path of the HTTP layer comes from here, so a login redirect, a queue link and a dashboard point
agree on where a page is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote as _quote
from urllib.parse import urlencode

__all__ = ["DASHBOARD", "PAGE_PATHS", "PREFIX", "TRACES", "is_page_path", "quote", "url"]

#: the review UI's root (queues, items, its JSON API, the login page)
PREFIX = "/review"
TRACES = "/traces"
DASHBOARD = "/dashboard"
#: top-level paths of pages that take a browser session (the login page may send a user back to
#: them, and an anonymous HTML request there is redirected to the login page)
PAGE_PATHS = (TRACES, DASHBOARD)


def is_page_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PAGE_PATHS)


def quote(part: str) -> str:
    """Percent-encode one path segment ('/' included: trace ids are arbitrary text)."""
    return _quote(part, safe="")


def url(path: str, params: Mapping[str, Any]) -> str:
    """``path?query`` with the given parameters (None and "" left out), percent-encoded."""
    kept = {k: v for k, v in params.items() if v is not None and v != ""}
    return f"{path}?{urlencode(kept)}" if kept else path
