"""Time, one way: aware UTC everywhere it is stored or compared.

clickhouse-connect reads a naive `datetime` as local time, so nothing here returns a naive one.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def utc_now() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)


def as_utc(dt: datetime) -> datetime:
    """``dt`` in UTC; a naive value is taken to be UTC already (never local time)."""
    return dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)


def parse_duration(text: str) -> float:
    """Seconds from ``"250ms"``, ``"30s"``, ``"15m"``, ``"6h"``, ``"1d"`` or a bare number of seconds."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"invalid duration {text!r}: use a number with an optional unit ms|s|m|h|d, e.g. 15m")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_time_bound(text: str | None, name: str) -> datetime | None:
    """A `--since`/`--until` bound: an ISO 8601 time (naive means UTC; ``Z`` allowed) or an age
    before now (``15m``, ``6h``, ``2d``; a leading ``-`` is accepted). Returns an aware UTC time."""
    if text is None:
        return None
    text = text.strip()
    try:
        return utc_now() - timedelta(seconds=parse_duration(text.removeprefix("-")))
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--{name} {text!r}: give an ISO time (2026-01-31T12:00) or an age (15m, 6h, 2d)") from None
    return as_utc(dt)
