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
from datetime import datetime, timedelta

from ragtrace_review.errors import ReviewError
from ragtrace_store import DEFAULT_TENANT, Store, as_utc, utc_now

#: Tokens carry a recognisable prefix so a leaked one can be found by secret scanners.
TOKEN_PREFIX = "rtr_"
#: A reviewer labels queue items; a viewer may log in and read (traces, dashboard, queue progress)
#: but never posts a decision or fills a queue.
ROLE_REVIEWER = "reviewer"
ROLE_VIEWER = "viewer"
ROLES = (ROLE_REVIEWER, ROLE_VIEWER)
SESSION_TTL = timedelta(hours=12)
_NAME = re.compile(r"^[\w.@ -]{1,80}$")


@dataclass(frozen=True)
class Reviewer:
    reviewer_id: str
    tenant: str
    name: str
    disabled: bool
    created_at: datetime
    role: str = ROLE_REVIEWER

    @property
    def can_review(self) -> bool:
        """May post review decisions and put traces into queues (a viewer may not)."""
        return self.role == ROLE_REVIEWER


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


def _row_to_reviewer(row: tuple[object, ...]) -> Reviewer:
    reviewer_id, tenant, name, disabled, created_at, role = row
    return Reviewer(str(reviewer_id), str(tenant), str(name), bool(disabled), as_utc(created_at),  # type: ignore[arg-type]
                    str(role))


_REVIEWER_COLS = "reviewer_id, tenant, name, disabled, created_at, role"
_REVIEWER_INSERT = ["tenant", "reviewer_id", "name", "token_hash", "disabled", "created_at", "updated_at", "role"]


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
    reviewer_id = secrets.token_hex(8)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = utc_now()
    store.insert("reviewers", [(tenant, reviewer_id, name, hash_secret(token), False, now, now, role)],
                 _REVIEWER_INSERT)
    return Reviewer(reviewer_id, tenant, name, False, now, role), token


def list_reviewers(store: Store, *, tenant: str | None = DEFAULT_TENANT) -> list[Reviewer]:
    """Reviewers of one tenant (None: of every tenant), oldest first."""
    where, params = ("WHERE tenant = {tenant:String}", {"tenant": tenant}) if tenant is not None else ("", {})
    rows = store.query_rows(
        f"SELECT {_REVIEWER_COLS} FROM {store.table('reviewers')} FINAL {where} ORDER BY created_at, name",
        params,
    )
    return [_row_to_reviewer(r) for r in rows]


def find_reviewer(store: Store, name_or_id: str, *, tenant: str = DEFAULT_TENANT) -> Reviewer:
    for r in list_reviewers(store, tenant=tenant):
        if name_or_id in (r.name, r.reviewer_id):
            return r
    raise ReviewError(f"no reviewer {name_or_id!r} in tenant {tenant!r}; see `ragtrace reviewers list`")


def set_disabled(store: Store, reviewer: Reviewer, disabled: bool = True) -> Reviewer:
    """Disable (or re-enable) a reviewer. Disabling also ends every session of theirs."""
    token_hash = store.query_rows(
        f"SELECT token_hash FROM {store.table('reviewers')} FINAL "
        "WHERE tenant = {tenant:String} AND reviewer_id = {rid:String}",
        {"tenant": reviewer.tenant, "rid": reviewer.reviewer_id},
    )[0][0]
    # the new version of the row carries the role too: left out, it would fall back to the
    # column's DEFAULT and turn a disabled-then-enabled viewer into a reviewer
    store.insert(
        "reviewers",
        [(reviewer.tenant, reviewer.reviewer_id, reviewer.name, token_hash, disabled, reviewer.created_at, utc_now(),
          reviewer.role)],
        _REVIEWER_INSERT,
    )
    if disabled:
        _revoke_where(store, "tenant = {tenant:String} AND reviewer_id = {rid:String}",
                      {"tenant": reviewer.tenant, "rid": reviewer.reviewer_id})
    return Reviewer(reviewer.reviewer_id, reviewer.tenant, reviewer.name, disabled, reviewer.created_at, reviewer.role)


def reviewer_for_token(store: Store, token: str) -> Reviewer | None:
    """The enabled reviewer whose token this is, or None (unknown, malformed or disabled)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    rows = store.query_rows(
        f"SELECT {_REVIEWER_COLS}, token_hash FROM {store.table('reviewers')} FINAL "
        "WHERE token_hash = {h:String}",
        {"h": hash_secret(token)},
    )
    for row in rows:
        # The store matched on the hash already; compare again in constant time for good measure.
        if hmac.compare_digest(str(row[6]), hash_secret(token)) and not row[3]:
            return _row_to_reviewer(row[:6])
    return None


# --- sessions ---------------------------------------------------------------------------------
_SESSION_COLS = ["tenant", "session_hash", "reviewer_id", "csrf_token", "created_at", "expires_at",
                 "revoked", "updated_at"]


def create_session(store: Store, reviewer: Reviewer, *, ttl: timedelta = SESSION_TTL) -> tuple[str, str]:
    """Start a session; returns (session id for the cookie, CSRF token for its forms)."""
    session_id = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    now = utc_now()
    store.insert("review_sessions",
                 [(reviewer.tenant, hash_secret(session_id), reviewer.reviewer_id, csrf, now, now + ttl, False, now)],
                 _SESSION_COLS)
    return session_id, csrf


def session_for_id(store: Store, session_id: str) -> Session | None:
    """The live session of this id: not revoked, not expired, its reviewer still enabled."""
    rows = store.query_rows(
        f"SELECT s.reviewer_id, s.csrf_token, s.expires_at, s.revoked, s.tenant "
        f"FROM {store.table('review_sessions')} AS s FINAL WHERE s.session_hash = {{h:String}}",
        {"h": hash_secret(session_id)},
    )
    if not rows:
        return None
    reviewer_id, csrf, expires_at, revoked, tenant = rows[0]
    if revoked or as_utc(expires_at) <= utc_now():
        return None
    reviewer = next((r for r in list_reviewers(store, tenant=str(tenant)) if r.reviewer_id == reviewer_id), None)
    if reviewer is None or reviewer.disabled:
        return None
    return Session(reviewer, str(csrf), hash_secret(session_id))


def revoke_session(store: Store, session_hash: str) -> None:
    _revoke_where(store, "session_hash = {h:String}", {"h": session_hash})


def _revoke_where(store: Store, where: str, params: dict[str, object]) -> None:
    rows = store.query_rows(
        f"SELECT tenant, session_hash, reviewer_id, csrf_token, created_at, expires_at "
        f"FROM {store.table('review_sessions')} FINAL WHERE {where} AND NOT revoked",
        params,
    )
    now = utc_now()
    # the times go back as they came (aware UTC): a naive one would be written as local time
    store.insert("review_sessions", [(*r[:4], as_utc(r[4]), as_utc(r[5]), True, now) for r in rows], _SESSION_COLS)


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
