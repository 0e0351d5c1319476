"""The filter fields ``/traces`` and ``/dashboard`` share, read from a query string: what a person
typed, checked, with a `ReviewError` that says what to change."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ragtrace_review.errors import ReviewError
from ragtrace_store import parse_time_bound

__all__ = ["blank", "check_manifest", "time_window"]


def blank(value: str | None) -> str | None:
    """A form field: the empty string (an "any" choice, an empty box) means not given."""
    if value is None:
        return None
    value = value.strip()
    return value or None


def time_window(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """``since`` and ``until`` from a form: each an ISO time (naive = UTC) or an age (``24h``, ``7d``).
    A value that is neither, and a window that ends before it starts (an age is that long ago, so
    since=1d&until=2d holds nothing), is a `ReviewError` saying what to change, as `ragtrace traces`
    refuses them: a page that only said "no trace matches" would look like an answer."""
    bounds: list[datetime | None] = []
    for name, raw in (("since", since), ("until", until)):
        value = blank(raw)
        try:
            bounds.append(parse_time_bound(value, name) if value is not None else None)
        except ValueError:
            raise ReviewError(f"{name} {value!r}: give an ISO time (2026-01-31T12:00Z) or an age (24h, 7d)") from None
    lo, hi = bounds
    if lo is not None and hi is not None and lo >= hi:
        raise ReviewError(f"since {lo:%Y-%m-%d %H:%M:%S} UTC is not before until {hi:%Y-%m-%d %H:%M:%S} UTC: no trace "
                          "can match; swap them (an age such as 2d means that long ago)")
    return lo, hi


def check_manifest(manifest: str | None, known: Sequence[str]) -> None:
    """A `ReviewError` for a ``manifest`` parameter naming no manifest with labels in the tenant (a typo,
    or one of another tenant): the page would list every trace as "not labelled", as if no audit had run."""
    if manifest is None or manifest in known:
        return
    choices = f"the manifests with labels here: {', '.join(known)}" if known else "no manifest has labels yet"
    raise ReviewError(f"manifest {manifest!r} has no labels in this tenant; {choices}")
