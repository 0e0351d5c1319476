"""Whether a paired change is significant, and which way: the one rule the terminal tables, the HTML
tables and the report's plots colour by.

A change is significant when its confidence interval excludes 0. Its direction then depends on the
statistic (`metric_info`): worse or better when it has a better direction, "changed" when it has
none (an abstention rate, a contingency cell), so a significant move is never drawn like a flat one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

__all__ = ["Significance", "significance"]

Significance = Literal["worse", "better", "changed", "flat", "undefined"]


def significance(delta: float | None, ci: Sequence[float | None], direction: str | None) -> Significance:
    """``worse`` / ``better`` when ``ci`` excludes 0 and the statistic has a better ``direction``
    ("higher" or "lower"), ``changed`` when it excludes 0 and there is none, ``flat`` when it holds
    0 (or cannot be formed), ``undefined`` when the change itself is."""
    if not _finite(delta):
        return "undefined"
    lo, hi = ci
    if not (_finite(lo) and _finite(hi)):
        return "flat"
    assert lo is not None and hi is not None
    if lo <= 0.0 <= hi:
        return "flat"
    if direction is None:
        return "changed"
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction is 'higher', 'lower' or None, not {direction!r}")
    rose = lo > 0.0
    return "better" if rose == (direction == "higher") else "worse"


def _finite(x: float | None) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)
