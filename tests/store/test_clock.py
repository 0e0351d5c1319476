"""`ragtrace_store.clock`: one aware-UTC clock, and times that mean the same instant in every zone.

clickhouse-connect writes a naive datetime as the process's local time, and a zone-less
``DateTime64(3)`` parameter is read in the server's zone (for embedded chDB: the process's). So
each time the store hands out must be aware, and writing it back must not move it. The round trips
run in child processes under other zones (one embedded store per process), since the suite
normally runs in UTC, where naive and aware UTC look alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ragtrace_store import Store, as_utc, parse_duration, parse_time_bound, utc_now

T0 = datetime(2026, 3, 14, 12, 0, 0, 123000, tzinfo=UTC)


def test_utc_now_is_aware_utc() -> None:
    now = utc_now()
    assert now.tzinfo is UTC
    assert abs(now.timestamp() - time.time()) < 5


def test_as_utc() -> None:
    assert as_utc(T0) == T0 and as_utc(T0).tzinfo is UTC
    naive = as_utc(T0.replace(tzinfo=None))  # naive means UTC, never local time
    assert naive == T0 and naive.tzinfo is UTC
    tokyo = T0.astimezone(timezone(timedelta(hours=9)))
    assert tokyo.hour == 21 and as_utc(tokyo) == T0 and as_utc(tokyo).hour == 12 and as_utc(tokyo).tzinfo is UTC


def test_parse_time_bound_and_duration() -> None:
    assert parse_time_bound("2026-03-14T12:00:00.123", "since") == T0
    assert parse_time_bound("2026-03-14T12:00:00.123Z", "since") == T0
    assert parse_time_bound("2026-03-14T21:00:00.123+09:00", "since") == T0
    age = parse_time_bound("-90m", "since")
    assert age is not None and age.tzinfo is UTC and abs(utc_now() - age - timedelta(minutes=90)) < timedelta(seconds=5)
    assert parse_time_bound(None, "until") is None
    with pytest.raises(ValueError, match="--until 'soon'"):
        parse_time_bound("soon", "until")
    assert [parse_duration(x) for x in ("250ms", "30", "15m", "6h", "1d")] == [0.25, 30, 900, 21600, 86400]


def test_the_store_hands_out_aware_utc(chdb_store: Store) -> None:
    (got, now), = chdb_store.query_rows("SELECT {t:DateTime64(3, 'UTC')}, now64(3, 'UTC')", {"t": T0})
    assert got == T0 and got.tzinfo is not None and got.utcoffset() == timedelta(0)
    assert abs(now - utc_now()) < timedelta(seconds=30)  # comparable with the clock: no TypeError


# The child: write times the ways the code does (Arrow milliseconds like the collector, aware
# datetimes like the evaluator and the review UI), read them back, write the read values again.
ROUND_TRIP = textwrap.dedent("""
    import json, sys
    from datetime import UTC, datetime, timedelta
    from ragtrace_store import TraceFilter, open_store, utc_now
    from ragtrace_review import auth

    T0 = datetime(2026, 3, 14, 12, 0, 0, 123000, tzinfo=UTC)
    store = open_store(sys.argv[1])
    ms = int(T0.timestamp() * 1000)
    cols = dict(tenant=["t"], trace_id=["x"], span_id=["root"], query_id=["q"], service=["s"], release=["r"],
                environment=["e"], route=["/"], query=["?"], answer=["!"], answer_streamed=[False],
                status_code=["OK"], start_time=[ms], duration_ms=[1.0], root_priority=[3], received_at=[ms])
    store.insert_columns("queries", cols, frozenset({"start_time", "received_at"}))
    out = {}
    rec = next(store.read_traces(tenant="t"))
    out["start_time"] = rec.start_time.isoformat()
    out["json_start_time"] = rec.as_json()["start_time"]
    store.insert("gold", [("t", "", "x", "d", 1, "span", rec.start_time)],
                 ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])
    out["written_back"] = store.query_rows("SELECT added_at FROM ragtrace.gold WHERE tenant = 't'")[0][0].isoformat()
    naive = T0.replace(tzinfo=None)  # a naive bound means UTC
    out["since_naive"] = [r.trace_id for r in store.read_traces(tenant="t", since=naive)]
    out["until_naive"] = [r.trace_id for r in store.read_traces(tenant="t", until=naive)]
    where, params = TraceFilter(tenant="t", since=naive, until=naive + timedelta(milliseconds=1)).conditions()
    out["filter_window"] = store.query_rows(
        f"SELECT trace_id FROM ragtrace.queries FINAL WHERE {' AND '.join(where)}", params)[0][0]

    reviewer, _ = auth.add_reviewer(store, "ann", tenant="t")
    created = reviewer.created_at
    auth.set_disabled(store, reviewer, True)  # writes created_at back
    again = auth.set_disabled(store, auth.find_reviewer(store, "ann", tenant="t"), False)
    out["created_moved_s"] = abs((auth.find_reviewer(store, "ann", tenant="t").created_at - created).total_seconds())
    sid, _ = auth.create_session(store, again)
    (c, e), = store.query_rows("SELECT created_at, expires_at FROM ragtrace.review_sessions")
    out["session_starts_in_s"] = abs((c - utc_now()).total_seconds())
    out["session_ttl_h"] = (e - c).total_seconds() / 3600
    out["session_live"] = auth.session_for_id(store, sid) is not None
    auth.set_disabled(store, again, True)  # revokes the session: writes its times back
    (c2, e2), = store.query_rows("SELECT created_at, expires_at FROM ragtrace.review_sessions FINAL")
    out["revoked_moved_s"] = abs((c2 - c).total_seconds()) + abs((e2 - e).total_seconds())
    out["session_after_revoke"] = auth.session_for_id(store, sid) is not None
    store.close()
    print(json.dumps(out))
""")


@pytest.mark.parametrize("zone", ["Asia/Tokyo", "America/Los_Angeles"])
def test_times_survive_a_round_trip_in_any_zone(zone: str, tmp_path: Path) -> None:
    env = {**os.environ, "TZ": zone}
    proc = subprocess.run([sys.executable, "-c", ROUND_TRIP, str(tmp_path / "store")], env=env,
                          capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["start_time"] == out["json_start_time"] == "2026-03-14T12:00:00.123000+00:00"
    assert out["written_back"] == "2026-03-14T12:00:00.123000+00:00"  # a read time written back is unmoved
    assert out["since_naive"] == ["x"] and out["until_naive"] == []
    assert out["filter_window"] == "x"
    assert out["created_moved_s"] < 0.002 and out["revoked_moved_s"] < 0.002
    assert out["session_starts_in_s"] < 60 and out["session_ttl_h"] == pytest.approx(12)
    assert out["session_live"] and not out["session_after_revoke"]
