"""One way to say which traces: the tenant / service / release / route / time / id filters of every
query over the store's per-trace tables (`queries`, `labels`).

`TraceFilter.conditions` returns SQL conditions and their parameters. Values only ever travel as
server-side parameters (``{name:Type}``), never in the SQL text; times bind as
``DateTime64(3, 'UTC')`` from aware UTC values, so a bound means the same instant whatever the
process's or the server's time zone (clickhouse-connect would read a naive value bound to a
zone-less type in the server's zone). A naive bound is taken to be UTC, and one beyond the range
of stored times is moved to its end (`ragtrace_store.clock.store_bound`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragtrace_store.clock import store_bound
from ragtrace_store.records import DEFAULT_TENANT

__all__ = ["PARAMETER_NAMES", "TraceFilter"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: the parameter names `TraceFilter.conditions` binds; a query adding its own uses other names
PARAMETER_NAMES = frozenset({"tenant", "service", "release", "route", "since", "until", "trace_ids"})


@dataclass(frozen=True)
class TraceFilter:
    """Traces of ``tenant``; every other field narrows when given (None: any).

    ``since`` is inclusive, ``until`` exclusive; both are stored as aware UTC (naive means UTC).
    ``trace_ids`` keeps the given ids only (an empty sequence matches nothing).
    """

    tenant: str = DEFAULT_TENANT
    service: str | None = None
    release: str | None = None
    route: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    trace_ids: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if self.since is not None:
            object.__setattr__(self, "since", store_bound(self.since))
        if self.until is not None:
            object.__setattr__(self, "until", store_bound(self.until))
        if self.trace_ids is not None:
            if isinstance(self.trace_ids, str):
                raise TypeError("trace_ids: give a sequence of trace ids, not one string")
            object.__setattr__(self, "trace_ids", tuple(self.trace_ids))

    def conditions(self, alias: str | None = None, *,
                   time_column: str = "start_time") -> tuple[list[str], dict[str, Any]]:
        """(SQL conditions to AND together, their server-side parameters).

        ``alias`` qualifies the columns (``q`` gives ``q.tenant = ...``); ``time_column`` is the
        column the time bounds apply to (``start_time`` in `queries`, ``trace_time`` in `labels`).
        The parameters are named as in `PARAMETER_NAMES`.
        """
        for name, ident in (("alias", alias), ("time_column", time_column)):
            if ident is not None and not _IDENT.match(ident):
                raise ValueError(f"{name} {ident!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
        col = f"{alias}." if alias else ""
        where = [f"{col}tenant = {{tenant:String}}"]
        params: dict[str, Any] = {"tenant": self.tenant}
        for name, value in (("service", self.service), ("release", self.release), ("route", self.route)):
            if value is not None:
                where.append(f"{col}{name} = {{{name}:String}}")
                params[name] = value
        if self.since is not None:
            where.append(f"{col}{time_column} >= {{since:DateTime64(3, 'UTC')}}")
            params["since"] = self.since
        if self.until is not None:
            where.append(f"{col}{time_column} < {{until:DateTime64(3, 'UTC')}}")
            params["until"] = self.until
        if self.trace_ids is not None:
            where.append(f"{col}trace_id IN {{trace_ids:Array(String)}}")
            params["trace_ids"] = list(self.trace_ids)
        return where, params
