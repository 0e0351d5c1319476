"""Reviewers, their login tokens and browser sessions.

A reviewer's token is shown once (by `ragtrace reviewers add`) and stored only as its sha256. A
browser logs in with it and gets a session: a random id whose sha256 keys a `review_sessions` row,
sent back in a cookie signed with HMAC so a forged or truncated cookie is refused before the store
is asked. Sessions end server-side (logout, expiry, or the reviewer being disabled), so a copied
cookie stops working too. Scripts may skip the browser and send ``Authorization: Bearer TOKEN``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from ragtrace_review.errors import ReviewError
from ragtrace_store import DEFAULT_TENANT, Store, utc_now
from ragtrace_store.review_sessions import revoke_sessions, save_session, stored_session
from ragtrace_store.reviewers import (
    ROLE_REVIEWER,
    ROLE_VIEWER,
    ROLES,
    Reviewer,
    reviewer_by_token_hash,
    reviewers,
    save_reviewer,
)

__all__ = ["ROLES", "ROLE_REVIEWER", "ROLE_VIEWER", "SESSION_TTL", "TOKEN_PREFIX", "Reviewer", "Session",
           "add_reviewer", "create_session", "find_reviewer", "hash_secret", "list_reviewers", "reviewer_for_token",
           "revoke_session", "session_for_id", "set_disabled", "sign", "unsign"]

#: Tokens carry a recognisable prefix so a leaked one can be found by secret scanners.
TOKEN_PREFIX = "rtr_"
SESSION_TTL = timedelta(hours=12)
_NAME = re.compile(r"^[\w.@ -]{1,80}$")


@dataclass(frozen=True)
class Session:
    """An authenticated request: who, for which tenant, and the CSRF token its forms must carry.

    ``csrf_token`` is None for bearer-token requests: they carry no ambient credential a hostile
    page could reuse, so CSRF does not apply to them.
    """

    reviewer: Reviewer
    csrf_token: str | None
    session_hash: str | None


def hash_secret(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def add_reviewer(store: Store, name: str, *, tenant: str = DEFAULT_TENANT,
                 role: str = ROLE_REVIEWER) -> tuple[Reviewer, str]:
    """Create a reviewer (``role`` "reviewer", or "viewer": may log in and read, never label);
    returns it and its login token (the only time the token exists in clear)."""
    if not _NAME.match(name):
        raise ReviewError(f"invalid reviewer name {name!r}: use 1-80 letters, digits, spaces or . @ - _")
    if role not in ROLES:
        raise ReviewError(f"invalid role {role!r}: use {' or '.join(ROLES)}")
    if any(r.name == name for r in list_reviewers(store, tenant=tenant)):
        raise ReviewError(f"tenant {tenant!r} already has a reviewer named {name!r}; pick another name")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    reviewer = Reviewer(secrets.token_hex(8), tenant, name, False, utc_now(), role)
    save_reviewer(store, reviewer, hash_secret(token))
    return reviewer, token


def list_reviewers(store: Store, *, tenant: str | None = DEFAULT_TENANT) -> list[Reviewer]:
    """Reviewers of one tenant (None: of every tenant), oldest first."""
    return reviewers(store, tenant=tenant)


def find_reviewer(store: Store, name_or_id: str, *, tenant: str = DEFAULT_TENANT) -> Reviewer:
    for r in list_reviewers(store, tenant=tenant):
        if name_or_id in (r.name, r.reviewer_id):
            return r
    raise ReviewError(f"no reviewer {name_or_id!r} in tenant {tenant!r}; see `ragtrace reviewers list`")


def set_disabled(store: Store, reviewer: Reviewer, disabled: bool = True) -> Reviewer:
    """Disable (or re-enable) a reviewer. Disabling also ends every session of theirs."""
    changed = Reviewer(reviewer.reviewer_id, reviewer.tenant, reviewer.name, disabled, reviewer.created_at,
                       reviewer.role)
    save_reviewer(store, changed)
    if disabled:
        revoke_sessions(store, tenant=reviewer.tenant, reviewer_id=reviewer.reviewer_id)
    return changed


def reviewer_for_token(store: Store, token: str) -> Reviewer | None:
    """The enabled reviewer whose token this is, or None (unknown, malformed or disabled)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    for reviewer, stored_hash in reviewer_by_token_hash(store, hash_secret(token)):
        # The store matched on the hash already; compare again in constant time for good measure.
        if hmac.compare_digest(stored_hash, hash_secret(token)) and not reviewer.disabled:
            return reviewer
    return None


# --- sessions ---------------------------------------------------------------------------------
def create_session(store: Store, reviewer: Reviewer, *, ttl: timedelta = SESSION_TTL) -> tuple[str, str]:
    """Start a session; returns (session id for the cookie, CSRF token for its forms)."""
    session_id = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    now = utc_now()
    save_session(store, tenant=reviewer.tenant, session_hash=hash_secret(session_id), reviewer_id=reviewer.reviewer_id,
                 csrf_token=csrf, created_at=now, expires_at=now + ttl)
    return session_id, csrf


def session_for_id(store: Store, session_id: str) -> Session | None:
    """The live session of this id: not revoked, not expired, its reviewer still enabled."""
    stored = stored_session(store, hash_secret(session_id))
    if stored is None or stored.revoked or stored.expires_at <= utc_now():
        return None
    reviewer = next((r for r in list_reviewers(store, tenant=stored.tenant) if r.reviewer_id == stored.reviewer_id),
                    None)
    if reviewer is None or reviewer.disabled:
        return None
    return Session(reviewer, stored.csrf_token, stored.session_hash)


def revoke_session(store: Store, session_hash: str) -> None:
    revoke_sessions(store, session_hash=session_hash)


# --- signed cookies ---------------------------------------------------------------------------
def sign(value: str, secret: bytes) -> str:
    mac = hmac.new(secret, value.encode("utf-8"), hashlib.sha256).hexdigest()
    return f"{value}.{mac}"


def unsign(signed: str, secret: bytes) -> str | None:
    """The value if the signature is valid, else None."""
    value, _, mac = signed.rpartition(".")
    if not value or not mac:
        return None
    expected = hmac.new(secret, value.encode("utf-8"), hashlib.sha256).hexdigest()
    return value if hmac.compare_digest(mac, expected) else None
