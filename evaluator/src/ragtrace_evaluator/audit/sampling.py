"""Deterministic sampling and sharding by trace-id hash.

Every trace gets a uniform number ``u = h(trace_id)`` in [0, 1) from sha256, so a sample is a
property of the ids, not of the run: reruns, machines and shards agree.

- ``rate=F`` keeps traces with ``u < F`` (nested: the 10% sample is inside the 20% sample).
- ``sample=N`` keeps the N traces with the smallest ``u`` (bottom-N), per stratum when
  ``stratify`` names columns (``release``, ``route``): N per stratum, so a rare release or route
  gets as many traces as a busy one.
- ``shard=(i, n)`` then keeps the traces whose *second* hash falls in shard ``i`` of ``n``; the
  second hash is salted so shards are balanced whatever the sample, and the union of shards
  0..n-1 is exactly the unsharded sample.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

_SHARD = re.compile(r"^(\d+)/(\d+)$")
STRATA = ("release", "route")


class SamplingError(ValueError):
    """Invalid sampling options; the message names the option and the fix."""


def unit_hash(trace_id: str, salt: str = "") -> float:
    """A uniform number in [0, 1) from the first 8 bytes of sha256(salt + trace_id)."""
    digest = hashlib.sha256((salt + trace_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` with 0 <= i < n -> ``(i, n)``."""
    m = _SHARD.match(text.strip())
    if not m:
        raise SamplingError(f"--shard {text!r}: use i/n, e.g. 0/4 (shards count from 0)")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise SamplingError(f"--shard {text!r}: need n >= 1 and 0 <= i < n")
    return i, n


@dataclass(frozen=True)
class Candidate:
    """A trace eligible for sampling, with the columns it can be stratified by."""

    trace_id: str
    release: str = ""
    route: str = ""


@dataclass(frozen=True)
class SamplePlan:
    sample: int | None = None
    rate: float | None = None
    stratify: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.sample is not None and self.rate is not None:
            raise SamplingError("give --sample N or --rate F, not both")
        if self.sample is not None and self.sample < 1:
            raise SamplingError(f"--sample {self.sample}: must be >= 1")
        if self.rate is not None and not 0.0 < self.rate <= 1.0:
            raise SamplingError(f"--rate {self.rate}: must be in (0, 1]")
        for col in self.stratify:
            if col not in STRATA:
                raise SamplingError(f"--stratify {col!r}: use one or more of {', '.join(STRATA)}")


def select(candidates: Iterable[Candidate], plan: SamplePlan) -> list[str]:
    """Trace ids chosen by ``plan``, ordered by hash (a stable order for progress and resumption)."""
    scored = [(unit_hash(c.trace_id), c) for c in candidates]
    if plan.rate is not None:
        scored = [(u, c) for u, c in scored if u < plan.rate]
    if plan.sample is not None:
        strata: dict[tuple[str, ...], list[tuple[float, Candidate]]] = {}
        for u, c in scored:
            strata.setdefault(tuple(getattr(c, col) for col in plan.stratify), []).append((u, c))
        scored = [x for group in strata.values() for x in sorted(group, key=_key)[: plan.sample]]
    if plan.shard is not None:
        i, n = plan.shard
        scored = [(u, c) for u, c in scored if shard_of(c.trace_id, n) == i]
    return [c.trace_id for _, c in sorted(scored, key=_key)]


def shard_of(trace_id: str, n: int) -> int:
    return int(unit_hash(trace_id, salt="ragtrace-shard:") * n)


def _key(item: tuple[float, Candidate]) -> tuple[float, str]:
    return item[0], item[1].trace_id


def stratify_arg(text: str | None) -> tuple[str, ...]:
    """``"release,route"`` -> ``("release", "route")``; empty -> ()."""
    if not text:
        return ()
    return tuple(s.strip() for s in text.split(",") if s.strip())
