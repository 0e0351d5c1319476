"""Drift anchors: the release or time window a team pins, per tenant and service, for every periodic
audit to compare its window with (`ragtrace anchor set|show|clear`).

A regression that slips through one sign-off becomes the next release's baseline, so a comparison with
the previous window alone calls a slow slide "no change" forever; a pinned anchor does not move.

One anchor per (tenant, service); service ``""`` is the tenant's anchor, in force for every service
without its own. Setting or clearing writes a new row (the ``anchors`` table, migration 0012); the
newest row of a key is in force and a cleared row means none. Times are aware UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ragtrace_store.clock import as_utc, store_bound, utc_now
from ragtrace_store.errors import StoreError

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["ALL_SERVICES", "Anchor", "AnchorError", "anchor_for", "clear_anchor", "list_anchors", "set_anchor"]

#: the service of a tenant-wide anchor
ALL_SERVICES = ""
_COLUMNS = ("tenant", "service", "release", "window_from", "window_to", "cleared", "set_at")
#: the longest release or service name an anchor takes (the store's names are no longer)
_NAME_MAX = 512


class AnchorError(StoreError, ValueError):
    """An anchor that cannot be set as asked; the message says what to give instead."""


@dataclass(frozen=True)
class Anchor:
    """A pinned reference: ``release``, or the time window [``start``, ``end``) (aware UTC)."""

    tenant: str
    service: str
    release: str | None
    start: datetime | None
    end: datetime | None
    set_at: datetime

    def describe(self) -> str:
        """The anchor in words (the drift verdicts' ``reference``, the dashboard's legend)."""
        if self.release is not None:
            return f"release {self.release}"
        assert self.start is not None and self.end is not None
        return f"{self.start.isoformat()} to {self.end.isoformat()}"

    def to_json(self) -> dict[str, str | None]:
        return {"tenant": self.tenant, "service": self.service, "release": self.release,
                "from": self.start.isoformat() if self.start else None,
                "to": self.end.isoformat() if self.end else None, "set_at": self.set_at.isoformat()}


def _check_name(what: str, value: str) -> None:
    if len(value) > _NAME_MAX:
        raise AnchorError(f"{what} is {len(value)} characters long: at most {_NAME_MAX}")
    if any(ord(c) < 32 for c in value):
        raise AnchorError(f"{what} {value[:60]!r} holds control characters: give the name as the traces carry it")


def set_anchor(store: Store, *, tenant: str, service: str = ALL_SERVICES, release: str | None = None,
               start: datetime | None = None, end: datetime | None = None,
               set_at: datetime | None = None) -> Anchor:
    """Pin ``release`` or the window [``start``, ``end``) as the anchor of ``service`` (``""``: every
    service of the tenant without its own). Exactly one of the two forms; the window's times must be
    aware (a naive time is refused: which zone it meant is a guess) and ``start`` before ``end``."""
    _check_name("service", service)
    if release is not None and (start is not None or end is not None):
        raise AnchorError("give the anchor as --release or as --from/--to, not both")
    if release is not None:
        if not release.strip():
            raise AnchorError("--release is empty: give the release name the traces carry (service.version)")
        _check_name("release", release)
    else:
        if start is None or end is None:
            raise AnchorError("give the anchor as --release RELEASE or as a window --from TIME --to TIME "
                              "(ISO 8601 with a zone, e.g. 2026-05-01T00:00Z)")
        for name, t in (("--from", start), ("--to", end)):
            if t.tzinfo is None or t.utcoffset() is None:
                raise AnchorError(f"{name} {t.isoformat()} has no time zone: add one (Z for UTC, or +02:00)")
        start, end = store_bound(start), store_bound(end)
        if start >= end:
            raise AnchorError(f"--from {start.isoformat()} is not before --to {end.isoformat()}: the window is empty")
    when = as_utc(set_at) if set_at else utc_now()
    store.insert("anchors", [(tenant, service, release or "", start, end, False, when)], _COLUMNS)
    return Anchor(tenant, service, release, start, end, when)


def clear_anchor(store: Store, *, tenant: str, service: str = ALL_SERVICES,
                 cleared_at: datetime | None = None) -> bool:
    """Remove the anchor of ``service``; False when there was none (nothing is written then)."""
    if _newest(store, tenant, [service]).get(service) is None:
        return False
    store.insert("anchors", [(tenant, service, "", None, None, True, as_utc(cleared_at) if cleared_at
                              else utc_now())], _COLUMNS)
    return True


def list_anchors(store: Store, *, tenant: str) -> list[Anchor]:
    """The tenant's anchors in force, by service (the tenant-wide one, service ``""``, first)."""
    return [a for _, a in sorted(_newest(store, tenant, None).items()) if a is not None]


def anchor_for(store: Store, *, tenant: str, service: str) -> Anchor | None:
    """The anchor in force for ``service``: its own, else the tenant's, else None."""
    found = _newest(store, tenant, [service, ALL_SERVICES])
    return found.get(service) or found.get(ALL_SERVICES)


def _newest(store: Store, tenant: str, services: list[str] | None) -> dict[str, Anchor | None]:
    """The newest row of each service's key (None where it is a clear)."""
    where = "tenant = {tenant:String}"
    params: dict[str, object] = {"tenant": tenant}
    if services is not None:
        where += " AND service IN {services:Array(String)}"
        params["services"] = services
    rows = store.query_rows(
        "SELECT service, argMax(tuple(release, window_from, window_to, cleared, set_at), set_at) "
        f"FROM {store.table('anchors')} WHERE {where} GROUP BY service", params)
    out: dict[str, Anchor | None] = {}
    for service, (release, start, end, cleared, set_at) in rows:
        out[str(service)] = None if cleared else Anchor(
            tenant, str(service), str(release) if release else None, as_utc(start) if start else None,
            as_utc(end) if end else None, as_utc(set_at))
    return out
