"""Time bounds at the ends of the calendar: `0001-01-01` (a common "since the beginning" sentinel, and
Go's zero time), the same with an offset that pushes it before year 1 in UTC, and an age longer than the
calendar. No stored time lies outside what a DateTime64(3) column holds (1900..2299), so each of them
means "from the first stored time": the listing is the whole tenant, never a traceback (the CLI) or a
500 (`/api/traces`, `/traces`, `/dashboard` of the real serve app on loopback)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest

from ragtrace_cli.commands.traces import traces_main
from ragtrace_review import auth
from ragtrace_store.clock import STORE_TIME_MIN, parse_time_bound
from tests.collector._server import running
from tests.review.rows import label_record, write_labels

TOKEN = "bounds-tok"
BASE = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
COLS = ["tenant", "trace_id", "span_id", "service", "release", "route", "query", "start_time", "root_priority",
        "received_at"]
FAR_BACK = ["0001-01-01", "0001-01-01T00:00:00+09:00", "999999d", "-9999999999d"]


@pytest.fixture(scope="module")
def served(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, set[str], str]]:
    tenant = f"bounds-{uuid.uuid4().hex[:8]}"
    ids = {uuid.uuid4().hex for _ in range(3)}
    chdb_store.insert("queries", [(tenant, t, "sdk", "qa", "r1", "/ask", f"q{i}", BASE + timedelta(seconds=i), 3,
                                   BASE) for i, t in enumerate(sorted(ids))], COLS)
    write_labels(chdb_store, tenant, [label_record(t, "ok") for t in ids])  # what the dashboard draws
    _, reviewer_token = auth.add_reviewer(chdb_store, "tess", tenant=tenant)
    with running(chdb_store, str(tmp_path_factory.mktemp("spool")), tokens={TOKEN: tenant}) as (url, _app):
        yield url, ids, reviewer_token


@pytest.mark.parametrize("text", FAR_BACK)
def test_a_bound_before_the_stored_range_is_its_start(text: str) -> None:
    assert parse_time_bound(text, "since") == STORE_TIME_MIN


@pytest.mark.parametrize("since", FAR_BACK)
def test_traces_since_the_beginning_lists_everything(served: tuple[str, set[str], str], since: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    url, ids, _ = served
    assert traces_main(["--server", url, "--token", TOKEN, "--since", since, "--json"]) == 0
    assert {orjson.loads(line)["trace_id"] for line in capsys.readouterr().out.splitlines()} == ids
    assert traces_main(["--server", url, "--token", TOKEN, "--until", since, "--json"]) == 0
    out, err = capsys.readouterr()
    assert out == ""  # nothing was stored before the beginning
    # and stderr says so, as the table does on stdout (before, --json said nothing at all)
    assert f"ragtrace traces: no traces match --until {since!r}" in err


@pytest.mark.parametrize("since", ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00+09:00"])
def test_api_traces_since_year_one_is_not_a_500(served: tuple[str, set[str], str], since: str) -> None:
    url, ids, _ = served
    resp = httpx.get(f"{url}/api/traces", params={"since": since}, headers={"authorization": f"Bearer {TOKEN}"},
                     timeout=60)
    assert resp.status_code == 200, resp.text
    assert {orjson.loads(line)["trace_id"] for line in resp.content.splitlines()} == ids


@pytest.mark.parametrize("page", ["/traces", "/dashboard"])
def test_web_pages_since_year_one_are_not_a_500(served: tuple[str, set[str], str], page: str) -> None:
    url, ids, reviewer_token = served
    resp = httpx.get(f"{url}{page}", params={"since": "0001-01-01T00:00"}, timeout=60,
                     headers={"authorization": f"Bearer {reviewer_token}", "accept": "text/html"})
    assert resp.status_code == 200, resp.text[:500]
    if page == "/traces":
        assert all(t in resp.text for t in ids)
