"""Saved comparisons: `ragtrace compare --save` keeps its JSON report in the ``compare_reports``
table, so the web dashboard can show the latest comparison's gates without a file at hand.

A report is written once and never updated (each save has its own random ``report_id``); the
latest is the newest ``created_at`` of the tenant.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ragtrace_store.clock import as_utc, utc_now

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["SavedCompare", "latest_compare_report", "save_compare_report"]

_COLUMNS = ("tenant", "report_id", "baseline", "candidate", "manifest_ids", "tripped", "gates", "report", "created_at")


@dataclass(frozen=True)
class SavedCompare:
    report_id: str
    baseline: str
    candidate: str
    manifest_ids: tuple[str, ...]
    tripped: bool
    created_at: datetime
    #: the report's ``gates`` list (one object per gate: metric, kind, threshold, observed, status, reason, ...)
    gates: tuple[dict[str, Any], ...] = ()
    #: the report's ``gates_summary`` (e.g. the family-wise false-alarm rate), {} when absent
    summary: dict[str, Any] = field(default_factory=dict)


def save_compare_report(store: Store, report: Mapping[str, Any], *, tenant: str, baseline: str, candidate: str,
                        manifest_ids: Sequence[str] = (), created_at: datetime | None = None) -> str:
    """Store one JSON report of `ragtrace compare` (as `Comparison.to_json` gives it); returns its id."""
    gates = {"gates": report.get("gates", []), "gates_summary": report.get("gates_summary", {}),
             "tripped": report.get("tripped", [])}
    report_id = secrets.token_hex(8)
    store.insert("compare_reports", [(
        tenant, report_id, baseline, candidate, list(manifest_ids), bool(report.get("tripped")),
        json.dumps(gates, allow_nan=False, default=str), json.dumps(report, allow_nan=False, default=str),
        as_utc(created_at) if created_at else utc_now())], _COLUMNS)
    return report_id


def latest_compare_report(store: Store, *, tenant: str) -> SavedCompare | None:
    """The tenant's most recently saved comparison (without the whole report), or None."""
    rows = store.query_rows(
        f"SELECT report_id, baseline, candidate, manifest_ids, tripped, gates, created_at "
        f"FROM {store.table('compare_reports')} FINAL WHERE tenant = {{tenant:String}} "
        "ORDER BY created_at DESC, report_id LIMIT 1", {"tenant": tenant})
    if not rows:
        return None
    report_id, baseline, candidate, manifests, tripped, gates_json, created_at = rows[0]
    try:
        gates = json.loads(gates_json) if gates_json else {}
    except ValueError:
        gates = {}
    items = gates.get("gates") if isinstance(gates, dict) else None
    summary = gates.get("gates_summary") if isinstance(gates, dict) else None
    return SavedCompare(str(report_id), str(baseline), str(candidate), tuple(map(str, manifests)), bool(tripped),
                        as_utc(created_at),
                        tuple(g for g in items if isinstance(g, dict)) if isinstance(items, list) else (),
                        summary if isinstance(summary, dict) else {})
