"""Which labeller manifests labelled a tenant's traces: how many labels each wrote and when last,
the stored manifest text, the most recently used one, and what the other manifests said of the
same traces (a disagreement between labellers is a reason to review).

A manifest's text is parsed as JSON here; one that is not a JSON object reads as ``{}`` (the pages
that show it say nothing rather than fail).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ragtrace_store.clock import as_utc, utc_now
from ragtrace_store.label_table import newest_labels_sql

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["ManifestUse", "latest_manifest", "manifest_uses", "other_manifest_modes", "save_manifest",
           "stored_manifests"]


@dataclass(frozen=True)
class ManifestUse:
    """A manifest and its labels of one tenant (``labels`` 0 and ``labelled_at`` None when not
    counted: `stored_manifests`)."""

    manifest_id: str
    labels: int
    labelled_at: datetime | None
    #: the stored manifest, {} when it is missing or not a JSON object
    manifest: dict[str, Any] = field(default_factory=dict, compare=False)


def _parsed(text: Any) -> dict[str, Any]:
    try:
        manifest = json.loads(text) if text else {}
    except ValueError:
        return {}
    return manifest if isinstance(manifest, dict) else {}


def manifest_uses(store: Store, tenant: str) -> list[ManifestUse]:
    """The manifests that labelled this tenant's traces, most recently used first (then by id)."""
    rows = store.query_rows(
        f"SELECT l.manifest_id, l.n, l.at, m.manifest FROM (SELECT manifest_id, count() AS n, max(labelled_at) AS at "
        f"FROM {store.table('labels')} WHERE tenant = {{tenant:String}} GROUP BY manifest_id) AS l "
        f"LEFT JOIN (SELECT manifest_id, any(manifest) AS manifest FROM {store.table('manifests')} "
        "GROUP BY manifest_id) AS m ON m.manifest_id = l.manifest_id ORDER BY l.at DESC, l.manifest_id",
        {"tenant": tenant})
    return [ManifestUse(str(m), int(n), as_utc(at) if at else None, _parsed(text)) for m, n, at, text in rows]


def save_manifest(store: Store, manifest_id: str, manifest: str) -> None:
    """Store a manifest's text under its id (``manifests`` is a ReplacingMergeTree by id: saving one
    again is harmless)."""
    store.insert("manifests", [(manifest_id, manifest, utc_now())], ["manifest_id", "manifest", "created_at"])


def stored_manifests(store: Store, manifest_ids: Sequence[str]) -> dict[str, ManifestUse]:
    """The stored manifests of these ids, by id (their labels not counted)."""
    if not manifest_ids:
        return {}
    return {str(m): ManifestUse(str(m), 0, None, _parsed(text)) for m, text in store.query_rows(
        f"SELECT manifest_id, any(manifest) FROM {store.table('manifests')} "
        "WHERE manifest_id IN {ids:Array(String)} GROUP BY manifest_id", {"ids": sorted(set(manifest_ids))})}


def latest_manifest(store: Store, tenant: str) -> str | None:
    """The manifest that labelled this tenant's traces most recently, None before any audit."""
    rows = store.query_rows(
        f"SELECT manifest_id FROM {store.table('labels')} WHERE tenant = {{tenant:String}} "
        "GROUP BY manifest_id ORDER BY max(labelled_at) DESC LIMIT 1", {"tenant": tenant})
    return str(rows[0][0]) if rows else None


def other_manifest_modes(store: Store, tenant: str, trace_ids: Sequence[str],
                         manifest_ids: Collection[str]) -> dict[str, set[str]]:
    """``{trace id: failure modes}``: the newest label of each of these traces under every manifest
    other than ``manifest_ids``."""
    if not trace_ids:
        return {}
    # each other manifest's newest label of these traces, decided per key (no FINAL over labels)
    newest = newest_labels_sql(store, ["tenant = {tenant:String}", "trace_id IN {ids:Array(String)}",
                                       "manifest_id NOT IN {ms:Array(String)}"])
    modes: dict[str, set[str]] = {}
    for trace_id, mode in store.query_rows(f"SELECT trace_id, failure_mode FROM ({newest})",
                                           {"tenant": tenant, "ids": list(trace_ids), "ms": sorted(manifest_ids)}):
        modes.setdefault(str(trace_id), set()).add(str(mode))
    return modes
