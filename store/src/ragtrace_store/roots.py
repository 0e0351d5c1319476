"""One root row per trace, decided in the engine without ``FINAL``.

A trace can have several rows in ``queries``: a batch retried or replayed from the spool (the same
span again, a later ``received_at``), or several spans claiming to be its root (an HTTP server span
above the SDK's pipeline span; ``root_priority`` in 0001_core.sql). ReplacingMergeTree collapses
them only when parts merge, and ``FINAL`` collapses them at read time by merging every part the
query reads, which for a filter that is not on the sort key is the whole table. Instead a reader
names the traces it needs and keeps, per trace, the row with the highest `ROOT_ORDER` (the highest
``root_priority``, as the table's version column says; then the newest ``received_at``; then the
span id, so a tie between two claimants is decided the same way every time). Filters on what a
row says (service, release, route, time) then apply to that winning row: a trace whose winner does
not match is not returned because another of its rows does. Unlike ``FINAL`` this also holds when
a trace's rows sit in different monthly partitions.

Naming the traces without reading all of them:

- a condition on the trace id itself (a range of `TRACE_HASH`, an evaluator shard, a list of ids)
  holds for every row of a trace or for none, so a scan restricted by it sees every row of every
  trace it returns (`winners_sql` with that condition);
- a condition on a row's values (a release, a time window) does not, so the reader first finds the
  traces with a matching row and then reads all rows of exactly those traces (`rows_of`): by
  `TRACE_HASH`, which the ``by_hash`` projection of migration 0005 keeps sorted, so that second
  read costs what the number of traces costs, not what the table costs.

For a time window the second step reads a trace's rows within `ROOT_SPREAD` of the window
(`window_band`, through the ``by_time`` projection) rather than by hash: the hashes of a window's
traces are spread over the whole hash range, so "all rows of these traces" would read most of the
table, while the root rows of one trace start within one request: the SDK's span, the HTTP span
above it and a gateway's (milliseconds before it), retried copies (the same start). A root row more
than `ROOT_SPREAD` from the window is not taken as the same query's: a window decides its traces
from the rows within the band, exactly so under duplicates and late spans (which keep their start
time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragtrace_store.client import Store
    from ragtrace_store.filters import TraceFilter

__all__ = ["ROOT_ORDER", "ROOT_SPREAD", "TRACE_HASH", "rows_of", "window_band", "winners_sql"]

#: The engine's 64-bit hash of a trace id: the key of the ``by_hash`` projection (migration 0005)
#: and the sampler's unit (`ragtrace_evaluator.audit.sampling`). XXH64 with seed 0, the standard
#: function (the `xxhash` package's ``xxh64_intdigest`` gives the same numbers), so a sample can be
#: recomputed outside ClickHouse.
TRACE_HASH = "xxHash64(trace_id)"

#: Which of a trace's root rows wins (the largest tuple).
ROOT_ORDER = "(root_priority, received_at, span_id)"

#: How far (in start time) from a time window a trace's root rows are still read for it (SQL interval).
#: The root claimants of one request start within its first moments (an HTTP server's or a
#: gateway's span milliseconds before the SDK's; a retried copy at the same time), and a request
#: still waiting minutes before its pipeline starts is past the timeouts gateways commonly set (60 s
#: by default in nginx's proxy and in AWS's load balancers). Five minutes leaves a wide margin; the
#: band it adds to a one-hour window is a sixth of the window, where an hour tripled it, and at
#: 100 M traces a month an hour's band (about 165,000 root rows) is still one query of the audit's sampler.
ROOT_SPREAD = "INTERVAL 5 MINUTE"


def winners_sql(store: Store, columns: Sequence[str], where: Sequence[str], *, by_sort: bool = False,
                table: str = "queries") -> str:
    """A subquery with one row per trace among the rows matching ``where`` (which must only hold
    conditions on the trace id, or `rows_of`): ``tenant``, ``trace_id`` and ``columns`` of the
    trace's winning row, each under its own name, so `TraceFilter` conditions apply to it as they
    are. ``where`` must include the tenant condition.

    ``by_sort`` keeps the first row of each trace in `ROOT_ORDER`, descending (``LIMIT 1 BY``),
    instead of ``argMax`` per trace: the same rows (ties only between identical root rows), and
    several times faster when many traces are read for a few columns (a count over a whole tenant:
    100,000 traces' two columns in 24 ms against 124 ms), but it sorts every row it reads.

    ``table``: ``queries`` (every root row) or ``query_roots`` (the root rows that can be queries:
    `ragtrace_store.query_roots`), which has the same columns but the text."""
    if not columns:
        raise ValueError("winners_sql: name at least one column of the winning row")
    if by_sort:
        order = ", ".join(f"{c} DESC" for c in ROOT_ORDER.strip("()").split(", "))
        return (f"SELECT tenant, trace_id, {', '.join(columns)} FROM {store.table(table)} "
                # one tenant (``where`` names it): by the trace id alone, a third cheaper than by both
                f"WHERE {' AND '.join(where)} ORDER BY {order} LIMIT 1 BY trace_id")
    unpack = ", ".join(f"w.{i} AS {name}" for i, name in enumerate(columns, start=1))
    return (f"SELECT tenant, trace_id, {unpack} FROM (SELECT tenant, trace_id, "
            f"argMax(tuple({', '.join(columns)}), {ROOT_ORDER}) AS w FROM {store.table(table)} "
            f"WHERE {' AND '.join(where)} GROUP BY tenant, trace_id)")


def rows_of(store: Store, where: Sequence[str], *, tail: str = "", table: str = "queries") -> str:
    """The condition "a row of a trace that has a row matching ``where``" (``tail``: an ORDER BY /
    LIMIT for that inner query, e.g. the newest K). Every row of such a trace matches it, so
    `winners_sql` over it decides each trace from all of its rows. ``table`` is where the matching
    row is looked for: ``query_roots`` (`ragtrace_store.query_roots`) finds only the traces with a
    root that can be a query.

    On a cluster the subquery reads the shard's own rows (`Store.local_table`): ``queries`` is
    sharded by trace id, so a trace's rows are all on one shard, and each shard finds its own traces
    (with ``tail``, its own newest K: together a superset of the newest K, which the outer query
    then takes) instead of the node that asks gathering every matching trace of every shard."""
    inner = f"SELECT {TRACE_HASH} FROM {store.local_table(table)} WHERE {' AND '.join(where)}"
    return f"{TRACE_HASH} IN ({inner}{' ' + tail if tail else ''})"


def window_band(flt: TraceFilter) -> list[str]:
    """Conditions keeping the root rows within `ROOT_SPREAD` of ``flt``'s time window (none without
    one), with ``flt.conditions()``'s parameters."""
    band = []
    if flt.since is not None:
        band.append(f"start_time >= {{since:DateTime64(3, 'UTC')}} - {ROOT_SPREAD}")
    if flt.until is not None:
        band.append(f"start_time < {{until:DateTime64(3, 'UTC')}} + {ROOT_SPREAD}")
    return band
