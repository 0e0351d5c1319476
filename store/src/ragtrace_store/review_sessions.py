"""Browser sessions of the review UI, kept server-side so that they can end (logout, expiry, a
reviewer disabled) whatever a copied cookie says.

A session is keyed by the sha256 of its id (the id itself lives only in the signed cookie:
`ragtrace_review.auth`). Ending one writes a newer version of its row with ``revoked`` set.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ragtrace_store.clock import as_utc, utc_now

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["StoredSession", "revoke_sessions", "save_session", "stored_session"]

_COLUMNS = ["tenant", "session_hash", "reviewer_id", "csrf_token", "created_at", "expires_at", "revoked",
            "updated_at"]


@dataclass(frozen=True)
class StoredSession:
    tenant: str
    session_hash: str
    reviewer_id: str
    #: the token every form of the session carries
    csrf_token: str
    expires_at: datetime
    revoked: bool


def save_session(store: Store, *, tenant: str, session_hash: str, reviewer_id: str, csrf_token: str,
                 created_at: datetime, expires_at: datetime) -> None:
    """Start a session (not revoked)."""
    store.insert("review_sessions", [(tenant, session_hash, reviewer_id, csrf_token, created_at, expires_at, False,
                                      created_at)], _COLUMNS)


def stored_session(store: Store, session_hash: str) -> StoredSession | None:
    """The newest version of the session with this hash, None when there is none."""
    rows = store.query_rows(
        f"SELECT tenant, reviewer_id, csrf_token, expires_at, revoked FROM {store.table('review_sessions')} FINAL "
        "WHERE session_hash = {h:String}", {"h": session_hash})
    if not rows:
        return None
    tenant, reviewer_id, csrf, expires_at, revoked = rows[0]
    return StoredSession(str(tenant), session_hash, str(reviewer_id), str(csrf), as_utc(expires_at), bool(revoked))


def revoke_sessions(store: Store, *, session_hash: str | None = None, tenant: str | None = None,
                    reviewer_id: str | None = None) -> int:
    """End one session (``session_hash``) or every live session of a reviewer (``tenant`` and
    ``reviewer_id``); returns how many were live."""
    if session_hash is not None:
        where, params = "session_hash = {h:String}", {"h": session_hash}
    elif tenant is not None and reviewer_id is not None:
        where = "tenant = {tenant:String} AND reviewer_id = {rid:String}"
        params = {"tenant": tenant, "rid": reviewer_id}
    else:
        raise ValueError("revoke_sessions: name a session (session_hash) or a reviewer (tenant and reviewer_id)")
    rows: list[tuple[Any, ...]] = store.query_rows(
        f"SELECT tenant, session_hash, reviewer_id, csrf_token, created_at, expires_at "
        f"FROM {store.table('review_sessions')} FINAL WHERE {where} AND NOT revoked", params)
    now = utc_now()
    # the times go back as they came (aware UTC): a naive one would be written as local time
    store.insert("review_sessions", [(*r[:4], as_utc(r[4]), as_utc(r[5]), True, now) for r in rows], _COLUMNS)
    return len(rows)
