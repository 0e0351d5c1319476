"""Pages of a newest-first listing: the cursor that continues one, and how many traces it has.

A cursor names the position after the last trace shown (its start time and trace id, the listing's
order) and the filters it was made for; `read_traces` continues there (``cursor=``). It is opaque
text (base64url JSON), safe in a URL and on a command line, and refused with `CursorError` for
another listing's filters, so a page is never continued with different ones. A cursor stays valid
while traces arrive: new ones sort before it and do not shift the rest.

`count_traces` counts a listing's traces for a footer ("50 of 1,204"). It is exact (each trace's
winning root row, `ragtrace_store.roots`) while at most ``exact_up_to`` root rows match, which bounds
the engine's memory; above that it reports the matching root rows, an upper bound (a retried row
not yet merged counts twice), and says so (``exact`` False).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from ragtrace_store.errors import StoreError
from ragtrace_store.filters import TraceFilter
from ragtrace_store.roots import rows_of, window_band, winners_sql

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["EXACT_COUNT_ROWS", "CursorError", "TraceCount", "count_traces", "decode_cursor", "encode_cursor"]

#: up to this many matching root rows a count is exact (decided per trace); above, an upper bound
EXACT_COUNT_ROWS = 100_000


class CursorError(StoreError, ValueError):
    """A cursor that is not one, or belongs to another listing; the message says what to do."""


def _fingerprint(flt: TraceFilter, include_all: bool) -> str:
    fields = [flt.tenant, flt.service, flt.release, flt.route,
              flt.since.isoformat() if flt.since else None, flt.until.isoformat() if flt.until else None,
              sorted(flt.trace_ids) if flt.trace_ids is not None else None, include_all]
    return hashlib.sha256(orjson.dumps(fields)).hexdigest()[:12]


def encode_cursor(flt: TraceFilter, start_time: datetime, trace_id: str, *, include_all: bool = False) -> str:
    """The cursor after the trace (``start_time``, ``trace_id``) of the listing ``flt`` selects."""
    ms = int(start_time.astimezone(UTC).timestamp() * 1000) if start_time.tzinfo else int(
        start_time.replace(tzinfo=UTC).timestamp() * 1000)
    raw = orjson.dumps({"v": 1, "t": ms, "id": trace_id, "f": _fingerprint(flt, include_all)})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, flt: TraceFilter, *, include_all: bool = False) -> tuple[datetime, str]:
    """``(start_time, trace_id)`` the listing continues after; `CursorError` for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor.strip() + "=" * (-len(cursor.strip()) % 4))
        obj: Any = orjson.loads(raw)
        ms, trace_id, fp = int(obj["t"]), str(obj["id"]), str(obj["f"])
        if obj.get("v") != 1:
            raise ValueError("unknown version")
    except (binascii.Error, ValueError, TypeError, KeyError, orjson.JSONDecodeError):
        raise CursorError(f"cursor {cursor[:40]!r} is not a cursor of `ragtrace traces` or /api/traces: pass the "
                          "one printed under (or returned with) the previous page, or start without one") from None
    if fp != _fingerprint(flt, include_all):
        raise CursorError("this cursor continues a listing with other filters: repeat the --release, --service, "
                          "--since, --until, --all (and tenant) it was printed with, or start without a cursor")
    return datetime.fromtimestamp(ms / 1000, tz=UTC), trace_id


@dataclass(frozen=True)
class TraceCount:
    """How many traces a listing has: ``queries`` (what `read_traces` lists), ``others`` (roots that
    are not queries; None when not exact), and whether the numbers are exact."""

    queries: int
    others: int | None
    exact: bool


def count_traces(store: Store, flt: TraceFilter, *, include_all: bool = False,
                 exact_up_to: int | None = EXACT_COUNT_ROWS) -> TraceCount:
    """Count the traces of a listing; exact up to ``exact_up_to`` matching root rows (None: always,
    with memory that grows with them)."""
    from ragtrace_store.traces import SDK_ROOT_PRIORITY, query_condition

    where, params = flt.conditions()
    rows = int(store.query_rows(f"SELECT count() FROM {store.table('queries')} WHERE {' AND '.join(where)}",
                                params)[0][0])
    if exact_up_to is not None and rows > exact_up_to:
        return TraceCount(rows, None, False)
    among = (f"SELECT trace_id FROM {store.table('queries')} WHERE {' AND '.join(where)} "
             f"AND root_priority NOT IN (0, {SDK_ROOT_PRIORITY})")
    winners = winners_sql(store, ("service", "release", "route", "start_time", "root_priority", "kind"),
                          ["tenant = {tenant:String}", rows_of(store, where), *window_band(flt)])
    queries, total = (int(x) for x in store.query_rows(
        f"SELECT countIf({query_condition(store, flt, among=among)}), count() FROM ({winners}) "
        f"WHERE {' AND '.join(where)}", params)[0])
    return TraceCount(total if include_all else queries, total - queries, True)
