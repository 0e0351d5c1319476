"""Drift verdicts: what each periodic audit concluded, per service and failure mode, when it compared
its window with the previous window and with the anchor (the ``drift_verdicts`` table, migration 0012).

A verdict is 1 (significantly worse), -1 (significantly better), 0 (no significant change) or None
(undefined: a side with n = 0, no previous window, no anchor, or no anchor labels under the manifest).
The evaluator decides them (`ragtrace_evaluator.audit.drift`); the store keeps them for the dashboard
and for the metrics after a restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ragtrace_store.clock import as_utc, utc_now

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["AGAINST", "DriftVerdict", "latest_drift", "save_drift"]

#: what a window is compared with
AGAINST = ("previous", "anchor")
_COLUMNS = ("tenant", "service", "manifest_id", "window_start", "window_end", "boundary", "against", "reference",
            "verdict", "delta", "lower", "upper", "count", "n", "reference_count", "reference_n", "level",
            "family_alpha", "audited_at")


@dataclass(frozen=True)
class DriftVerdict:
    """One comparison of one failure mode (``boundary``) of ``service``'s window."""

    service: str
    manifest_id: str
    window_start: datetime
    window_end: datetime
    boundary: str
    against: str
    #: what the window was compared with, in words ("window 2026-…", "release v1", "… to …")
    reference: str
    verdict: int | None
    #: the window's rate minus the reference's, and its interval (None when undefined)
    delta: float | None
    lower: float | None
    upper: float | None
    count: int
    n: int
    reference_count: int
    reference_n: int
    #: the confidence of each interval, and the family-wise false-alarm bound of one comparison
    level: float
    family_alpha: float

    @property
    def rate(self) -> float | None:
        return self.count / self.n if self.n else None

    @property
    def reference_rate(self) -> float | None:
        return self.reference_count / self.reference_n if self.reference_n else None


def save_drift(store: Store, *, tenant: str, verdicts: Sequence[DriftVerdict],
               audited_at: datetime | None = None) -> None:
    when = as_utc(audited_at) if audited_at else utc_now()
    store.insert("drift_verdicts", [
        (tenant, v.service, v.manifest_id, as_utc(v.window_start), as_utc(v.window_end), v.boundary, v.against,
         v.reference, v.verdict, v.delta, v.lower, v.upper, v.count, v.n, v.reference_count, v.reference_n, v.level,
         v.family_alpha, when) for v in verdicts], _COLUMNS)


def latest_drift(store: Store, *, tenant: str, manifest_id: str | None = None,
                 service: str | None = None) -> list[DriftVerdict]:
    """Each service's verdicts from its newest audited window (under ``manifest_id``, else the
    manifest of the tenant's newest verdict), by service, against, boundary."""
    params: dict[str, object] = {"tenant": tenant}
    t = store.table("drift_verdicts")
    if manifest_id is None:
        manifest = f"(SELECT argMax(manifest_id, window_end) FROM {t} WHERE tenant = {{tenant:String}})"
    else:
        manifest, params["manifest"] = "{manifest:String}", manifest_id
    where = f"tenant = {{tenant:String}} AND manifest_id = {manifest}"
    if service is not None:
        where += " AND service = {service:String}"
        params["service"] = service
    rows = store.query_rows(
        "SELECT service, manifest_id, window_start, window_end, boundary, against, reference, verdict, delta, lower, "
        f"upper, count, n, reference_count, reference_n, level, family_alpha FROM {t} FINAL WHERE {where} AND "
        f"(service, window_end) IN (SELECT service, max(window_end) FROM {t} WHERE {where} GROUP BY service) "
        "ORDER BY service, against, boundary", params)
    return [_verdict(r) for r in rows]


def _opt(x: Any) -> float | None:
    return None if x is None else float(x)


def _verdict(r: Sequence[Any]) -> DriftVerdict:
    return DriftVerdict(
        service=str(r[0]), manifest_id=str(r[1]), window_start=as_utc(r[2]), window_end=as_utc(r[3]),
        boundary=str(r[4]), against=str(r[5]), reference=str(r[6]),
        verdict=None if r[7] is None else int(r[7]),
        delta=_opt(r[8]), lower=_opt(r[9]), upper=_opt(r[10]), count=int(r[11]), n=int(r[12]),
        reference_count=int(r[13]), reference_n=int(r[14]), level=float(r[15]),
        family_alpha=float(r[16]))
