"""Reviewer accounts: who may log in to the review UI, for which tenant, in which role.

A reviewer's login token is never stored, only its sha256 (``token_hash``, made by the review
package); an account is a ReplacingMergeTree row whose newest version (``updated_at``) counts.
Tokens, sessions and cookies are `ragtrace_review.auth`'s; its sessions are kept by
`ragtrace_store.review_sessions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ragtrace_store.clock import as_utc, utc_now

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["ROLES", "ROLE_REVIEWER", "ROLE_VIEWER", "Reviewer", "reviewer_by_token_hash", "reviewers",
           "save_reviewer"]

#: A reviewer labels queue items; a viewer may log in and read (traces, dashboard, queue progress)
#: but never posts a decision or fills a queue.
ROLE_REVIEWER = "reviewer"
ROLE_VIEWER = "viewer"
ROLES = (ROLE_REVIEWER, ROLE_VIEWER)

_COLUMNS = "reviewer_id, tenant, name, disabled, created_at, role"
_INSERT = ["tenant", "reviewer_id", "name", "token_hash", "disabled", "created_at", "updated_at", "role"]


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


def _reviewer(row: tuple[object, ...]) -> Reviewer:
    reviewer_id, tenant, name, disabled, created_at, role = row
    return Reviewer(str(reviewer_id), str(tenant), str(name), bool(disabled), as_utc(created_at),  # type: ignore[arg-type]
                    str(role))


def reviewers(store: Store, *, tenant: str | None) -> list[Reviewer]:
    """The reviewers of one tenant (None: of every tenant), oldest first (then by name)."""
    where, params = ("WHERE tenant = {tenant:String}", {"tenant": tenant}) if tenant is not None else ("", {})
    rows = store.query_rows(
        f"SELECT {_COLUMNS} FROM {store.table('reviewers')} FINAL {where} ORDER BY created_at, name", params)
    return [_reviewer(r) for r in rows]


def save_reviewer(store: Store, reviewer: Reviewer, token_hash: str | None = None) -> None:
    """Write ``reviewer`` as its account's newest version. ``token_hash`` None keeps the stored one
    (an account changed, not created)."""
    if token_hash is None:
        token_hash = str(store.query_rows(
            f"SELECT token_hash FROM {store.table('reviewers')} FINAL "
            "WHERE tenant = {tenant:String} AND reviewer_id = {rid:String}",
            {"tenant": reviewer.tenant, "rid": reviewer.reviewer_id})[0][0])
    # every column is written: one left out would fall back to its DEFAULT (a viewer's role to "reviewer")
    store.insert("reviewers", [(reviewer.tenant, reviewer.reviewer_id, reviewer.name, token_hash, reviewer.disabled,
                                reviewer.created_at, utc_now(), reviewer.role)], _INSERT)


def reviewer_by_token_hash(store: Store, token_hash: str) -> list[tuple[Reviewer, str]]:
    """The accounts whose token has this hash, each with its stored hash (for a constant-time check)."""
    rows = store.query_rows(
        f"SELECT {_COLUMNS}, token_hash FROM {store.table('reviewers')} FINAL WHERE token_hash = {{h:String}}",
        {"h": token_hash})
    return [(_reviewer(r[:6]), str(r[6])) for r in rows]
