"""The audit's sampling options: ``--shard i/n`` and ``--stratify a,b`` as `ragtrace_store.SamplePlan`
reads them, and the sampler version a stored manifest names.

The sample itself is the store's answer (`ragtrace_store.sample_traces`): deterministic by trace-id
hash, computed in the engine, Python handed the chosen ids only (`ragtrace_store.sampling` says how).
"""

from __future__ import annotations

import re
from typing import Any

from ragtrace_store import SamplingError

__all__ = ["parse_shard", "sampler_of", "stratify_arg"]

_SHARD = re.compile(r"^(\d+)/(\d+)$")


def sampler_of(manifest: dict[str, Any]) -> int:
    """The sampler version a stored manifest was sampled with: manifests written before the engine
    sampled name none and used version 1."""
    sampler = manifest.get("sampler")
    return int(sampler["version"]) if isinstance(sampler, dict) and "version" in sampler else 1


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` with 0 <= i < n -> ``(i, n)``."""
    m = _SHARD.match(text.strip())
    if not m:
        raise SamplingError(f"--shard {text!r}: use i/n, e.g. 0/4 (shards count from 0)")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise SamplingError(f"--shard {text!r}: need n >= 1 and 0 <= i < n")
    return i, n


def stratify_arg(text: str | None) -> tuple[str, ...]:
    """``"release,route"`` -> ``("release", "route")``; empty -> ()."""
    if not text:
        return ()
    return tuple(s.strip() for s in text.split(",") if s.strip())
