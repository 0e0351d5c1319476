"""The UI's two cookies and the attributes every one of them goes out with.

``SESSION_COOKIE`` holds the signed session id (path ``/``: the session also opens ``/traces`` and
``/dashboard``); ``LOGIN_COOKIE`` holds the signed nonce of the login form's double-submit CSRF check
(path ``/review``, ten minutes). Both are HttpOnly and SameSite=Strict, and Secure over https.
"""

from __future__ import annotations

from fastapi import Request, Response

from ragtrace_review.links import PREFIX

__all__ = ["LOGIN_COOKIE", "SESSION_COOKIE", "set_cookie"]

SESSION_COOKIE = "ragtrace_review"
LOGIN_COOKIE = "ragtrace_review_login"


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int | None,
               path: str = PREFIX) -> None:
    """Set (or, with ``max_age`` 0, delete) a cookie of the UI."""
    # every cookie of the UI, deletions included, goes out with these attributes
    response.set_cookie(name, value, max_age=max_age, path=path, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
