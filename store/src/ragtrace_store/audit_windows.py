"""The counts behind each periodic audit's metrics: per (service, release), what the newest label of
each trace in a time window says, under one labeller manifest; and the windows already audited
(the ``audit_windows`` table, migration 0012), so the next audit can compare with the previous one.

The engine counts in one GROUP BY over the newest version of each trace's label
(`ragtrace_store.label_table.newest_labels_sql`), as the dashboard's series do; the counts carry their
denominators and never rates. The denominators (`WindowCounts`):

* failure modes: the complete labels (an ``incomplete`` trace has no mode, as in the audit's summary);
* abstention: the answers with a generation verdict (``judged``); pass: the same answers;
* grounded (every claim entailed): the judged answers that did not abstain;
* gold in context: the labels whose gold set is known.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ragtrace_store.clock import STORE_TIME_MIN, as_utc, utc_now
from ragtrace_store.filters import TraceFilter
from ragtrace_store.label_table import newest_labels_sql
from ragtrace_store.labels import FAILURE_MODES, FailureMode

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["AuditedWindow", "WindowCounts", "latest_window", "pooled", "previous_window", "reference_counts",
           "save_window", "window_counts"]

_INCOMPLETE = FailureMode.INCOMPLETE.value
_COLUMNS = ("tenant", "service", "release", "scope", "manifest_id", "window_start", "window_end", "labels", "complete",
            "modes", "judged", "abstained", "entailed", "passed", "gold_known", "gold_in_context", "last_trace_time",
            "audited_at")


@dataclass(frozen=True)
class WindowCounts:
    """One (service, release)'s newest labels in a window; ``release`` is ``""`` when pooled over releases."""

    service: str
    release: str
    #: labelled traces, incomplete ones included
    labels: int = 0
    #: complete labels: the failure modes' denominator
    complete: int = 0
    #: complete labels per failure mode (`FAILURE_MODES`)
    modes: dict[str, int] = field(default_factory=dict)
    #: answers with a generation verdict, those that abstained, those entailed, those that passed
    judged: int = 0
    abstained: int = 0
    entailed: int = 0
    passed: int = 0
    #: labels whose gold set is known, and those with a gold document in the context
    gold_known: int = 0
    gold_in_context: int = 0
    #: the newest trace time among the labels (which releases are newest); None when pooled or empty
    last_trace_time: datetime | None = None

    def mode(self, name: str) -> tuple[int, int]:
        """(count, n) of failure mode ``name``."""
        return self.modes.get(name, 0), self.complete


def pooled(counts: Iterable[WindowCounts], *, service: str) -> WindowCounts:
    """The sum of ``counts`` (e.g. every release of a service), as one release ``""``."""
    out = WindowCounts(service, "", modes=dict.fromkeys(FAILURE_MODES, 0))
    for c in counts:
        out = replace(out, labels=out.labels + c.labels, complete=out.complete + c.complete,
                      modes={m: out.modes[m] + c.modes.get(m, 0) for m in FAILURE_MODES},
                      judged=out.judged + c.judged, abstained=out.abstained + c.abstained,
                      entailed=out.entailed + c.entailed, passed=out.passed + c.passed,
                      gold_known=out.gold_known + c.gold_known, gold_in_context=out.gold_in_context + c.gold_in_context)
    return out


def _count(store: Store, flt: TraceFilter, manifest_id: str, *, by_release: bool) -> list[WindowCounts]:
    where, params = flt.conditions(time_column="trace_time")
    where.append("manifest_id = {manifest:String}")
    params["manifest"] = manifest_id
    keys = ["tenant = {tenant:String}", "manifest_id = {manifest:String}"]
    newest = newest_labels_sql(store, keys, [c for c in where if c not in keys],
                               columns=("service", "release", "failure_mode", "generation", "passed",
                                        "gold_in_context", "trace_time"))
    # fixed names from the labels contract, not input
    modes = ", ".join(f"countIf(failure_mode = '{m}')" for m in FAILURE_MODES)
    group = "service, release" if by_release else "service"
    release = "release" if by_release else "''"
    rows = store.query_rows(
        f"SELECT service, {release}, count(), countIf(failure_mode != '{_INCOMPLETE}'), "
        f"{modes}, countIf(generation != ''), countIf(generation = 'abstained'), countIf(generation = 'entailed'), "
        "countIf(passed AND generation != ''), countIf(isNotNull(gold_in_context)), "
        f"countIf(gold_in_context = true), max(trace_time) FROM ({newest}) GROUP BY {group} ORDER BY {group}", params)
    nm = len(FAILURE_MODES)
    out = []
    for row in rows:
        service, release, labels, complete = str(row[0]), str(row[1]), int(row[2]), int(row[3])
        mode_counts = [int(x) for x in row[4:4 + nm]]
        judged, abstained, entailed, passed, gold_known, gold_in_context, last = row[4 + nm:]
        out.append(WindowCounts(service, release, labels, complete, dict(zip(FAILURE_MODES, mode_counts, strict=True)),
                                int(judged), int(abstained), int(entailed), int(passed), int(gold_known),
                                int(gold_in_context), as_utc(last) if by_release else None))
    return out


def window_counts(store: Store, *, tenant: str, manifest_id: str, since: datetime,
                  until: datetime) -> list[WindowCounts]:
    """The manifest's newest labels of traces whose time is in [``since``, ``until``), per (service,
    release), ordered by service then release."""
    return _count(store, TraceFilter(tenant=tenant, since=since, until=until), manifest_id, by_release=True)


def reference_counts(store: Store, *, tenant: str, manifest_id: str, service: str | None,
                     release: str | None = None, since: datetime | None = None,
                     until: datetime | None = None) -> WindowCounts:
    """``service``'s (None: every service's) newest labels under the manifest, pooled: of ``release``
    (at any time) or of the traces in [``since``, ``until``) (every release). An anchor's counts."""
    found = _count(store, TraceFilter(tenant=tenant, service=service, release=release, since=since, until=until),
                   manifest_id, by_release=False)
    return pooled(found, service=service or "")


@dataclass(frozen=True)
class AuditedWindow:
    """One stored window of one service: its releases' counts (the newest few) and every release pooled."""

    service: str
    manifest_id: str
    start: datetime
    end: datetime
    #: the service's counts over every release in the window (what drift compares)
    pooled: WindowCounts
    #: the (service, release) groups kept (`save_window`'s ``releases``)
    releases: tuple[WindowCounts, ...]
    audited_at: datetime


def save_window(store: Store, *, tenant: str, manifest_id: str, start: datetime, end: datetime,
                services: Sequence[WindowCounts], releases: Sequence[WindowCounts],
                audited_at: datetime | None = None) -> None:
    """Keep one audit window: each service's counts pooled over its releases (``services``, one per
    service) and the (service, release) groups kept (``releases``)."""
    when = as_utc(audited_at) if audited_at else utc_now()
    rows = [(tenant, c.service, c.release if scope == "release" else "", scope, manifest_id, as_utc(start),
             as_utc(end), c.labels, c.complete, {m: c.modes.get(m, 0) for m in FAILURE_MODES}, c.judged, c.abstained,
             c.entailed, c.passed, c.gold_known, c.gold_in_context, c.last_trace_time or STORE_TIME_MIN, when)
            for scope, group in (("service", services), ("release", releases)) for c in group]
    store.insert("audit_windows", rows, _COLUMNS)


def _windows(store: Store, where: str, params: dict[str, object]) -> list[AuditedWindow]:
    rows = store.query_rows(
        "SELECT service, manifest_id, window_start, window_end, release, scope, labels, complete, modes, judged, "
        "abstained, entailed, passed, gold_known, gold_in_context, last_trace_time, audited_at "
        f"FROM {store.table('audit_windows')} FINAL WHERE {where} ORDER BY service, scope, release", params)
    by_key: dict[tuple[str, str, datetime, datetime], list[tuple[Any, ...]]] = {}
    for r in rows:
        by_key.setdefault((str(r[0]), str(r[1]), as_utc(r[2]), as_utc(r[3])), []).append(r)
    out = []
    for (service, manifest, start, end), rs in by_key.items():
        counts = [(str(r[5]), WindowCounts(
            service=service, release=str(r[4]), labels=int(r[6]), complete=int(r[7]),
            modes={m: int(r[8].get(m, 0)) for m in FAILURE_MODES}, judged=int(r[9]), abstained=int(r[10]),
            entailed=int(r[11]), passed=int(r[12]), gold_known=int(r[13]), gold_in_context=int(r[14]),
            last_trace_time=as_utc(r[15]) if r[5] == "release" else None)) for r in rs]
        whole = [c for scope, c in counts if scope == "service"]
        releases = tuple(c for scope, c in counts if scope == "release")
        out.append(AuditedWindow(service, manifest, start, end, whole[0] if whole else pooled(releases,
                                 service=service), releases, max(as_utc(r[16]) for r in rs)))
    return out


def previous_window(store: Store, *, tenant: str, manifest_id: str, service: str,
                    before: datetime) -> AuditedWindow | None:
    """The newest stored window of ``service`` under the manifest that ended at or before ``before``."""
    key = "tenant = {tenant:String} AND manifest_id = {manifest:String} AND service = {service:String}"
    found = _windows(store, f"{key} AND window_end = (SELECT max(window_end) FROM {store.table('audit_windows')} "
                     f"WHERE {key} AND window_end <= {{before:DateTime64(3, 'UTC')}})",
                     {"tenant": tenant, "manifest": manifest_id, "service": service, "before": as_utc(before)})
    return found[0] if found else None


def latest_window(store: Store, *, tenant: str) -> list[AuditedWindow]:
    """The tenant's newest audited window (every service of it, under its manifest); [] when none.
    What the metrics show again after a restart, before the next audit."""
    return _windows(store, "tenant = {tenant:String} AND (manifest_id, window_end) = (SELECT "
                    f"argMax(manifest_id, audited_at), max(window_end) FROM {store.table('audit_windows')} "
                    "WHERE tenant = {tenant:String})", {"tenant": tenant})
