"""`ragtrace_store.TraceFilter`: the one builder of per-trace WHERE clauses, against the real engine
(the session's embedded chDB store; each test isolates itself by a unique tenant)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from ragtrace_store import Store, TraceFilter

T0 = datetime(2026, 3, 14, 12, 0, 0, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)
COLUMNS = ["tenant", "trace_id", "span_id", "query_id", "service", "release", "environment", "route", "query",
           "answer", "answer_streamed", "status_code", "start_time", "duration_ms", "received_at"]


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def _write(store: Store, tenant: str, rows: list[tuple[str, str, str, str, datetime]]) -> None:
    """(trace_id, service, release, route, start_time) rows in `queries`."""
    store.insert("queries", [(tenant, tid, "root", f"q-{tid}", svc, rel, "test", route, "query", "answer", False,
                              "OK", at, 1.0, at) for tid, svc, rel, route, at in rows], COLUMNS)


def _ids(store: Store, f: TraceFilter, alias: str | None = None) -> set[str]:
    where, params = f.conditions(alias)
    table = f"{store.table('queries')} AS {alias}" if alias else store.table("queries")
    col = f"{alias}." if alias else ""
    rows = store.query_rows(f"SELECT {col}trace_id FROM {table} FINAL WHERE {' AND '.join(where)}", params)
    return {str(r[0]) for r in rows}


@pytest.fixture
def stored(chdb_store: Store) -> tuple[Store, str]:
    tenant = _tenant()
    _write(chdb_store, tenant, [
        ("a", "svc", "v1", "/ask", T0 - MS),
        ("b", "svc", "v1", "/search", T0),
        ("c", "svc", "v2", "/ask", T0 + MS),
        ("d", "other", "v2", "/ask", T0 + timedelta(hours=1)),
    ])
    _write(chdb_store, _tenant(), [("a", "svc", "v1", "/ask", T0)])  # another tenant, same trace id
    return chdb_store, tenant


def test_each_field_narrows(stored: tuple[Store, str]) -> None:
    store, tenant = stored
    assert _ids(store, TraceFilter(tenant=tenant)) == {"a", "b", "c", "d"}
    assert _ids(store, TraceFilter(tenant=tenant, service="svc")) == {"a", "b", "c"}
    assert _ids(store, TraceFilter(tenant=tenant, release="v2")) == {"c", "d"}
    assert _ids(store, TraceFilter(tenant=tenant, route="/ask", release="v2", service="svc")) == {"c"}
    assert _ids(store, TraceFilter(tenant=tenant, trace_ids=["a", "d", "zz"])) == {"a", "d"}
    assert _ids(store, TraceFilter(tenant=tenant, trace_ids=[])) == set()
    assert _ids(store, TraceFilter(tenant=tenant, release="v1"), alias="q") == {"a", "b"}
    assert _ids(store, TraceFilter(tenant=_tenant())) == set()


def test_conditions_and_parameters() -> None:
    where, params = TraceFilter(tenant="t", release="v1", since=T0, trace_ids=("x",)).conditions("q")
    assert where == ["q.tenant = {tenant:String}", "q.release = {release:String}",
                     "q.start_time >= {since:DateTime64(3, 'UTC')}", "q.trace_id IN {trace_ids:Array(String)}"]
    assert params == {"tenant": "t", "release": "v1", "since": T0, "trace_ids": ["x"]}
    where, _ = TraceFilter(until=T0).conditions(time_column="trace_time")
    assert where == ["tenant = {tenant:String}", "trace_time < {until:DateTime64(3, 'UTC')}"]
    for bad in ("q; DROP TABLE x", "q.x", "1q", ""):
        with pytest.raises(ValueError, match="not an identifier"):
            TraceFilter().conditions(bad)
        with pytest.raises(ValueError, match="not an identifier"):
            TraceFilter().conditions(time_column=bad)
    with pytest.raises(TypeError, match="not one string"):
        TraceFilter(trace_ids="abc")
    f = TraceFilter(tenant="t", trace_ids=["x", "y"])
    assert f.trace_ids == ("x", "y") and hash(f) == hash(TraceFilter(tenant="t", trace_ids=("x", "y")))


@pytest.mark.parametrize("hostile", [
    "v1' OR '1'='1", "v1' OR 1=1 --", "{tenant:String}", "v1\\' OR 1=1 --", "v1\nOR 1=1", "v1'); DROP TABLE x; --",
])
def test_values_never_reach_the_sql_text(stored: tuple[Store, str], hostile: str) -> None:
    store, tenant = stored
    f = TraceFilter(tenant=tenant, release=hostile, service=hostile, route=hostile, trace_ids=[hostile])
    # the SQL text is the same whatever the values: they travel as server-side parameters only
    benign = TraceFilter(tenant="t", release="r", service="s", route="/x", trace_ids=["i"])
    assert f.conditions()[0] == benign.conditions()[0]
    assert _ids(store, f) == set()
    assert _ids(store, TraceFilter(tenant=hostile)) == set()  # not every tenant's rows
    assert _ids(store, TraceFilter(tenant=tenant, release=hostile)) == set()
    _write(store, tenant, [("h", "svc", hostile, "/ask", T0)])  # the value is stored and matched literally
    assert _ids(store, TraceFilter(tenant=tenant, release=hostile)) == {"h"}
    assert _ids(store, TraceFilter(tenant=tenant)) == {"a", "b", "c", "d", "h"}


TOKYO = timezone(timedelta(hours=9))
LOS_ANGELES = timezone(timedelta(hours=-8))
BOUNDS = {
    "naive (UTC)": T0.replace(tzinfo=None),
    "aware UTC": T0,
    "aware +09:00": T0.astimezone(TOKYO),
    "aware -08:00": T0.astimezone(LOS_ANGELES),
}


@pytest.mark.parametrize("bound", list(BOUNDS.values()), ids=list(BOUNDS))
def test_time_bounds_are_one_instant(stored: tuple[Store, str], bound: datetime) -> None:
    """since is inclusive, until exclusive, to the millisecond, however the bound is written."""
    store, tenant = stored
    assert TraceFilter(since=bound).since == T0 and TraceFilter(since=bound).since.tzinfo is UTC  # type: ignore[union-attr]
    assert _ids(store, TraceFilter(tenant=tenant, since=bound)) == {"b", "c", "d"}
    assert _ids(store, TraceFilter(tenant=tenant, until=bound)) == {"a"}
    assert _ids(store, TraceFilter(tenant=tenant, since=bound, until=bound + MS)) == {"b"}
    assert _ids(store, TraceFilter(tenant=tenant, since=bound - MS, until=bound + 2 * MS, service="svc"),
                alias="q") == {"a", "b", "c"}


def test_read_traces_uses_it(stored: tuple[Store, str]) -> None:
    store, tenant = stored
    for bound in BOUNDS.values():
        got: list[Any] = list(store.read_traces(tenant=tenant, since=bound, until=bound + timedelta(hours=1)))
        assert [r.trace_id for r in got] == ["c", "b"]  # newest first; d sits on the exclusive bound
