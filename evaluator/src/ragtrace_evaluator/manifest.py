"""The labeller manifest: everything that decides a label, hashed into a stable ``manifest_id``.

A manifest names the grounding and relevance labellers (their own ``manifest()``: kind, model id,
revision or file hash, thresholds), the audit options that change labels (stages, gold policy),
the formula version of the failure-mode rules, and the code version (package version plus the
git commit when the package runs from a checkout). Labels are stored keyed by ``manifest_id`` and
are never compared across manifests silently; a rerun under the same manifest resumes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from ragtrace_evaluator.audit.failure_modes import FORMULA_VERSION
from ragtrace_store.manifest_usage import save_manifest, stored_manifests

MANIFEST_VERSION = 1


@lru_cache(maxsize=1)
def code_version() -> dict[str, str | None]:
    """``{"package": "0.1.0", "git_commit": "<sha>" | None}``; computed once per process so one
    audit never straddles two commits."""
    try:
        version = metadata.version("ragtrace")
    except metadata.PackageNotFoundError:
        version = "unknown"
    commit = None
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
        if out.returncode == 0 and len(out.stdout.strip()) == 40:
            commit = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = None  # not a checkout, or git missing: the package version alone identifies the code
    return {"package": version, "git_commit": commit}


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace: the same manifest always serialises to the same bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def build_manifest(*, grounding: dict[str, Any] | None, relevance: dict[str, Any] | None,
                   stages: str, gold_policy: str, code: dict[str, str | None] | None = None,
                   sampler: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest dict. ``grounding``/``relevance`` are the labellers' ``manifest()`` (None = not used);
    ``sampler`` is the sampler that chose the traces (`ragtrace_store.sampling.Sampler.manifest`),
    so a label says how its trace came to be labelled; manifests written before the engine sampled
    have none (their sampler was version 1, `ragtrace_evaluator.audit.sampling.sampler_of`)."""
    out = {
        "manifest_version": MANIFEST_VERSION,
        "formula_version": FORMULA_VERSION,
        "stages": stages,
        "gold_policy": gold_policy,
        "grounding_labeller": grounding,
        "relevance_labeller": relevance,
        "code_version": code if code is not None else code_version(),
    }
    if sampler is not None:
        out["sampler"] = sampler
    return out


def manifest_id(manifest: dict[str, Any]) -> str:
    """First 16 hex characters of the sha256 of the canonical JSON."""
    return hashlib.sha256(canonical_json(manifest).encode("utf-8")).hexdigest()[:16]


def store_manifest(store: Any, manifest: dict[str, Any]) -> str:
    """Write the manifest into the store (`ragtrace_store.manifest_usage.save_manifest`: idempotent);
    returns its id."""
    mid = manifest_id(manifest)
    save_manifest(store, mid, canonical_json(manifest))
    return mid


def load_manifest(store: Any, mid: str) -> dict[str, Any] | None:
    """The stored manifest of this id, None when none is stored."""
    found = stored_manifests(store, [mid]).get(mid)
    return None if found is None else found.manifest
