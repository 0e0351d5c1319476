"""What `/dashboard` shows of the production loop: the periodic audits' newest drift verdicts (per
service and failure mode, against the previous window and the anchor) and each anchor's failure-mode
rates, drawn as reference lines on the mode charts.

The anchors shown are the service filter's (its own, else the tenant's), or without a filter the
tenant's (over every service) and each service's own, at most `MAX_ANCHORS`. Their rates are counted
under the dashboard's manifest (`ragtrace_store.audit_windows.reference_counts`), as the audit counts
them; an anchor without labels under it has no line.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragtrace_store import Store
from ragtrace_store.anchors import Anchor, anchor_for, list_anchors
from ragtrace_store.audit_windows import WindowCounts, reference_counts
from ragtrace_store.drift_verdicts import DriftVerdict, latest_drift

__all__ = ["MAX_ANCHORS", "VERDICT_WORDS", "AnchorRates", "anchor_rates", "drift_rows"]

#: reference lines per chart at most (one per anchor)
MAX_ANCHORS = 4
VERDICT_WORDS = {1: "worse", -1: "better", 0: "no significant change", None: "undefined"}


@dataclass(frozen=True)
class AnchorRates:
    anchor: Anchor
    #: the services the rates pool ("" for every service of the tenant)
    service: str
    counts: WindowCounts

    def rate(self, mode: str) -> float | None:
        k, n = self.counts.mode(mode)
        return k / n if n else None

    def title(self, mode: str) -> str:
        k, n = self.counts.mode(mode)
        who = f"service {self.service}" if self.service else "every service"
        rate = f"{k}/{n} = {k / n * 100:.1f}%" if n else "undefined (n=0)"
        return f"anchor of {who}: {self.anchor.describe()}; {mode.replace('_', ' ')} {rate}"


def anchor_rates(store: Store, *, tenant: str, manifest_id: str | None, service: str | None) -> list[AnchorRates]:
    if manifest_id is None:
        return []
    if service is not None:
        found = anchor_for(store, tenant=tenant, service=service)
        anchors = [(found, service)] if found else []
    else:
        anchors = [(a, a.service) for a in list_anchors(store, tenant=tenant)][:MAX_ANCHORS]
    out = []
    for anchor, pooled_over in anchors:
        counts = reference_counts(store, tenant=tenant, manifest_id=manifest_id, service=pooled_over or None,
                                  release=anchor.release, since=anchor.start, until=anchor.end)
        if counts.complete:
            out.append(AnchorRates(anchor, pooled_over, counts))
    return out


def drift_rows(store: Store, *, tenant: str, manifest_id: str | None, service: str | None) -> list[DriftVerdict]:
    """The newest window's verdicts of each service (the anchor comparison first), worse ones first."""
    if manifest_id is None:
        return []
    rows = latest_drift(store, tenant=tenant, manifest_id=manifest_id, service=service)
    return sorted(rows, key=lambda d: (d.service, d.verdict != 1, d.against != "anchor", d.boundary))
