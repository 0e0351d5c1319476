"""One periodic audit (`ragtrace serve --audit-every`): label a sample of a window's traces, count the
window's labels per (service, release), and judge each service's drift against the previous window
and against its anchor.

`run_periodic_audit` = `run_audit` over [start, end) + `judge_window`. The window's figures are the
store's counts of the newest label of every trace in the window under the audit's labeller manifest
(`ragtrace_store.audit_windows`), so labels written by other audits of the same manifest in that
window count too. They are kept in the store (the window, its drift verdicts) for the dashboard, for
the next window's comparison and for the metrics after a restart.

Bounded: a sender names its own services and releases, so a window keeps the newest
``limits.services`` services of the tenant (by their newest labelled trace) and, of each, the newest
``limits.releases`` releases; the rest are counted in ``dropped_groups`` and never become metrics or
rows. A kept service's drift pools every release of it, kept or not.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ragtrace_evaluator.audit.drift import BOUNDARIES, FAMILY_ALPHA, DriftFamily, compare_modes
from ragtrace_evaluator.audit.run import run_audit
from ragtrace_store import Store, as_utc, utc_now
from ragtrace_store.anchors import anchor_for
from ragtrace_store.audit_windows import (
    WindowCounts,
    pooled,
    previous_window,
    reference_counts,
    save_window,
    window_counts,
)
from ragtrace_store.clock import STORE_TIME_MIN
from ragtrace_store.drift_verdicts import DriftVerdict, save_drift

__all__ = ["DEFAULT_RELEASES", "DEFAULT_SERVICES", "Limits", "WindowResult", "judge_window", "run_periodic_audit"]

#: the newest releases of a service, and the newest services of a tenant, that become metrics
DEFAULT_RELEASES = 5
DEFAULT_SERVICES = 20


@dataclass(frozen=True)
class Limits:
    """How many (service, release) groups one tenant's window may export (the label cardinality bound)."""

    releases: int = DEFAULT_RELEASES
    services: int = DEFAULT_SERVICES

    def __post_init__(self) -> None:
        for name in ("releases", "services"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} per window must be a whole number >= 1, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class WindowResult:
    """One periodic audit of one tenant: its window's counts and drift verdicts."""

    tenant: str
    manifest_id: str
    start: datetime
    end: datetime
    #: each kept service pooled over its releases, and the kept (service, release) groups
    services: tuple[WindowCounts, ...]
    releases: tuple[WindowCounts, ...]
    #: (service, release) groups of the window left out by `Limits`
    dropped_groups: int
    drift: tuple[DriftVerdict, ...]
    #: per (service, against): the comparison's false-alarm statement (`DriftFamily.summary_json`)
    families: dict[tuple[str, str], dict[str, Any]]
    audited_at: datetime
    #: the whole periodic audit's seconds (labelling included), and the part spent on the window's figures
    seconds: float | None = None
    judge_seconds: float | None = None


def _newest(groups: Sequence[WindowCounts], keep: int) -> list[WindowCounts]:
    return sorted(groups, key=lambda c: (c.last_trace_time or STORE_TIME_MIN, c.release), reverse=True)[:keep]


def _verdicts(service: str, manifest_id: str, start: datetime, end: datetime, against: str, reference: str,
              family: DriftFamily) -> list[DriftVerdict]:
    return [DriftVerdict(service, manifest_id, start, end, d.mode, against, reference, d.verdict, d.delta, d.lower,
                         d.upper, d.count, d.n, d.reference_count, d.reference_n, family.level, family.family_alpha)
            for d in family.differences]


def judge_window(store: Store, *, tenant: str, manifest_id: str, start: datetime, end: datetime,
                 limits: Limits = Limits(), family_alpha: float = FAMILY_ALPHA,
                 audited_at: datetime | None = None, save: bool = True) -> WindowResult:
    """The window [``start``, ``end``)'s counts under ``manifest_id`` and each kept service's drift
    against its previous stored window and its anchor; kept in the store when ``save``."""
    t0 = time.perf_counter()
    start, end = as_utc(start), as_utc(end)
    if start >= end:
        raise ValueError(f"the window's start {start.isoformat()} is not before its end {end.isoformat()}")
    when = as_utc(audited_at) if audited_at else utc_now()
    groups = window_counts(store, tenant=tenant, manifest_id=manifest_id, since=start, until=end)
    by_service: dict[str, list[WindowCounts]] = {}
    for g in groups:
        by_service.setdefault(g.service, []).append(g)
    recency = {s: max(g.last_trace_time or STORE_TIME_MIN for g in gs) for s, gs in by_service.items()}
    kept_services = sorted(by_service, key=lambda s: (recency[s], s), reverse=True)[:limits.services]
    services, releases, drift = [], [], []
    families: dict[tuple[str, str], dict[str, Any]] = {}
    for service in sorted(kept_services):
        whole = pooled(by_service[service], service=service)
        services.append(whole)
        releases += _newest(by_service[service], limits.releases)
        counts = [whole.mode(m) for m in BOUNDARIES]
        previous = previous_window(store, tenant=tenant, manifest_id=manifest_id, service=service, before=start)
        prev_family = compare_modes(counts, [previous.pooled.mode(m) for m in BOUNDARIES] if previous else None,
                                    family_alpha=family_alpha)
        prev_ref = (f"window {previous.start.isoformat()} to {previous.end.isoformat()}" if previous
                    else "no previous window under this labeller manifest")
        anchor = anchor_for(store, tenant=tenant, service=service)
        anchor_ref = anchor.describe() if anchor else "no anchor set (ragtrace anchor set)"
        anchor_counts = None
        if anchor is not None:
            ref = reference_counts(store, tenant=tenant, manifest_id=manifest_id, service=service,
                                   release=anchor.release, since=anchor.start, until=anchor.end)
            anchor_counts = [ref.mode(m) for m in BOUNDARIES]
            if not ref.complete:
                anchor_ref += " (no labels under this labeller manifest)"
        anchor_family = compare_modes(counts, anchor_counts, family_alpha=family_alpha)
        for against, ref_text, family in (("previous", prev_ref, prev_family), ("anchor", anchor_ref, anchor_family)):
            drift += _verdicts(service, manifest_id, start, end, against, ref_text, family)
            families[(service, against)] = family.summary_json() | {"reference": ref_text}
    if save:
        save_window(store, tenant=tenant, manifest_id=manifest_id, start=start, end=end, services=services,
                    releases=releases, audited_at=when)
        save_drift(store, tenant=tenant, verdicts=drift, audited_at=when)
    return WindowResult(tenant, manifest_id, start, end, tuple(services), tuple(releases),
                        len(groups) - len(releases), tuple(drift), families, when,
                        judge_seconds=time.perf_counter() - t0)


def run_periodic_audit(store: Store, *, tenant: str, start: datetime, end: datetime, sample: int,
                       limits: Limits = Limits(), family_alpha: float = FAMILY_ALPHA,
                       **audit_options: Any) -> WindowResult:
    """Audit a sample of ``sample`` traces of [``start``, ``end``) (`run_audit`; ``audit_options`` are
    passed to it), then `judge_window` under the audit's manifest."""
    t0 = time.perf_counter()
    report = run_audit(store, tenant=tenant, since=as_utc(start), until=as_utc(end), sample=sample, **audit_options)
    result = judge_window(store, tenant=tenant, manifest_id=report["manifest_id"], start=start, end=end,
                          limits=limits, family_alpha=family_alpha)
    return replace(result, seconds=time.perf_counter() - t0)
