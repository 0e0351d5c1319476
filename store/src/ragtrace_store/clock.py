"""Time, one way: aware UTC everywhere it is stored or compared.

clickhouse-connect reads a naive `datetime` as local time, so nothing here returns a naive one.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

#: the instants a ``DateTime64(3, 'UTC')`` column can hold (ClickHouse's range for the type). No
#: stored time lies outside, so a query bound beyond either end selects what that end selects.
STORE_TIME_MIN = datetime(1900, 1, 1, tzinfo=UTC)
STORE_TIME_MAX = datetime(2299, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)


def utc_now() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)


def as_utc(dt: datetime) -> datetime:
    """``dt`` in UTC; a naive value is taken to be UTC already (never local time)."""
    return dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)


def store_bound(dt: datetime) -> datetime:
    """``dt`` as aware UTC (naive means UTC), moved into the range the store's times have.

    A bound before 1900 selects the same rows as 1900-01-01, and one that cannot be bound as it
    is must not reach the engine: clickhouse-connect writes a year below 1000 with fewer than four
    digits, which the server refuses, and an offset at either end of the calendar overflows."""
    try:
        utc = as_utc(dt)
    except OverflowError:  # e.g. 0001-01-01T00:00+09:00: the instant is before year 1 in UTC
        return STORE_TIME_MIN if dt.year < STORE_TIME_MIN.year else STORE_TIME_MAX
    return min(max(utc, STORE_TIME_MIN), STORE_TIME_MAX)


def parse_duration(text: str) -> float:
    """Seconds from ``"250ms"``, ``"30s"``, ``"15m"``, ``"6h"``, ``"1d"`` or a bare number of seconds."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"invalid duration {text!r}: use a number with an optional unit ms|s|m|h|d, e.g. 15m")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_time_bound(text: str | None, name: str) -> datetime | None:
    """A `--since`/`--until` bound: an ISO 8601 time (naive means UTC; ``Z`` allowed) or an age
    before now (``15m``, ``6h``, ``2d``; a leading ``-`` is accepted). Returns an aware UTC time
    within the store's range (`store_bound`)."""
    if text is None:
        return None
    text = text.strip()
    try:
        age = parse_duration(text.removeprefix("-"))
    except ValueError:
        pass
    else:
        try:
            return utc_now() - timedelta(seconds=age)
        except OverflowError:  # an age reaching before year 1: every stored time is after it
            return STORE_TIME_MIN
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--{name} {text!r}: give an ISO time (2026-01-31T12:00) or an age (15m, 6h, 2d)") from None
    return store_bound(dt)
