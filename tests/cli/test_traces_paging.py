"""Listings in pages: `GET /api/traces` with its cursor (against the serve app on loopback) and
`ragtrace traces` with its footer (--limit, the total, the command for the next page), directly on a
store and through the collector. Pages concatenate to the whole listing, exactly once each."""

from __future__ import annotations

import shlex
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from ragtrace_cli.commands.traces import traces_main
from tests.collector._server import running

TOKEN = "paging-tok"
N = 45
BASE = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
COLS = ["tenant", "trace_id", "span_id", "service", "release", "route", "query", "start_time", "root_priority",
        "received_at"]


def _write(store: Any, tenant: str) -> list[str]:
    """N SDK roots, a retried copy of each, newest first by start time (ties of two)."""
    ids = [uuid.uuid4().hex for _ in range(N)]
    rows = [(tenant, t, "sdk", "qa", "r1", "/ask", f"q{i}", BASE + timedelta(seconds=i // 2), 3, BASE)
            for i, t in enumerate(ids)]
    store.insert("queries", rows, COLS)
    store.insert("queries", [(*r[:9], BASE + timedelta(minutes=5)) for r in rows], COLS)
    order = sorted(range(N), key=lambda i: (-(i // 2), ids[i]))
    return [ids[i] for i in order]


@pytest.fixture(scope="module")
def served(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    tenant = f"paging-{uuid.uuid4().hex[:8]}"
    expected = _write(chdb_store, tenant)
    with running(chdb_store, str(tmp_path_factory.mktemp("spool")), tokens={TOKEN: tenant}) as (url, _app):
        yield url, expected


def _get(url: str, **params: Any) -> httpx.Response:
    resp = httpx.get(f"{url}/api/traces", params=params, headers={"authorization": f"Bearer {TOKEN}"}, timeout=60)
    return resp


def test_api_pages_follow_the_cursor(served: tuple[str, list[str]]) -> None:
    url, expected = served
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        resp = _get(url, limit=7, **({"cursor": cursor} if cursor else {"total": "true"}))
        assert resp.status_code == 200
        page = [orjson.loads(line)["trace_id"] for line in resp.content.splitlines()]
        assert 0 < len(page) <= 7
        if cursor is None:
            assert (resp.headers["ragtrace-total"], resp.headers["ragtrace-total-exact"]) == (str(N), "true")
        seen += page
        pages += 1
        cursor = resp.headers.get("ragtrace-next-cursor")
        if not cursor:
            break
    assert seen == expected and pages == -(-N // 7)
    # a limit above a page's bound streams everything in one answer, without a cursor
    big = _get(url, limit=5000)
    assert [orjson.loads(x)["trace_id"] for x in big.content.splitlines()] == expected
    assert "ragtrace-next-cursor" not in big.headers


def test_a_cursor_of_other_filters_or_garbage_is_a_400(served: tuple[str, list[str]]) -> None:
    url, _ = served
    cursor = _get(url, limit=5).headers["ragtrace-next-cursor"]
    other = _get(url, limit=5, release="r2", cursor=cursor)
    assert other.status_code == 400 and "other filters" in other.json()["error"]
    junk = _get(url, limit=5, cursor="not-a-cursor")
    assert junk.status_code == 400 and "is not a cursor" in junk.json()["error"]


def _follow(argv: list[str], capsys: pytest.CaptureFixture[str], *, as_json: bool) -> tuple[list[str], int]:
    """Run `ragtrace traces` and every next-page command its footer prints; the ids listed and the
    number of commands run."""
    ids: list[str] = []
    runs = 0
    while True:
        assert traces_main(argv) == 0
        runs += 1
        out, err = capsys.readouterr()
        if as_json:
            ids += [orjson.loads(line)["trace_id"] for line in out.splitlines()]
            footer = err
        else:
            ids += [line.split()[0] for line in out.splitlines() if len(line) > 32 and line[:32].isalnum()
                    and not line.startswith("trace_id")]
            footer = out
        nxt = [line.strip() for line in footer.replace("next page: ", "\n").splitlines()
               if line.strip().startswith("ragtrace traces ")]
        if not nxt:
            return ids, runs
        argv = shlex.split(nxt[0])[2:]
        if "--token" in argv:  # the footer names the flag, not the credential
            argv[argv.index("--token") + 1] = TOKEN


def test_cli_through_the_collector_pages_and_says_how_to_go_on(served: tuple[str, list[str]],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    url, expected = served
    ids, runs = _follow(["--server", url, "--token", TOKEN, "--limit", "10", "--json"], capsys, as_json=True)
    assert ids == expected and runs == 5
    assert traces_main(["--server", url, "--token", TOKEN, "--limit", "10"]) == 0
    table = capsys.readouterr().out
    assert f"\n10 of {N} trace(s) shown, newest first (--limit 10). Next 10:\n  ragtrace traces --server {url}" in table
    assert "--token TOKEN --cursor " in table  # the credential is never echoed


def test_cli_on_a_store_pages_with_the_footer(chdb_http_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    from ragtrace_store import open_store

    tenant = f"paging-{uuid.uuid4().hex[:8]}"
    with open_store(chdb_http_server) as store:
        expected = _write(store, tenant)
    ids, runs = _follow(["--store", chdb_http_server, "--tenant", tenant, "--limit", "20"], capsys, as_json=False)
    assert ids == expected and runs == 3
    # the last page says so; a relative --since travels as the absolute time the cursor was made for
    assert traces_main(["--store", chdb_http_server, "--tenant", tenant, "--limit", "4", "--since", "3000d"]) == 0
    footer = capsys.readouterr().out
    assert f"4 of {N} trace(s) shown" in footer and "--since 20" in footer and "--since 3000d" not in footer
    # the age as the audit's help writes it, with a leading minus (argparse alone calls it a missing value)
    assert traces_main(["--store", chdb_http_server, "--tenant", tenant, "--limit", "4", "--since", "-3000d"]) == 0
    assert f"4 of {N} trace(s) shown" in capsys.readouterr().out
    assert traces_main(["--store", chdb_http_server, "--tenant", tenant, "--limit", "100"]) == 0
    assert f"\n{N} trace(s).\n" in capsys.readouterr().out
    # an empty listing names the filters that matched nothing (a mistyped release, most often)
    assert traces_main(["--store", chdb_http_server, "--tenant", tenant, "--release", "r9", "--since", "3000d"]) == 0
    assert capsys.readouterr().out.startswith("no traces match --release 'r9', --since '3000d' (")
    assert traces_main(["--store", chdb_http_server, "--tenant", f"{tenant}-none"]) == 0
    assert capsys.readouterr().out.startswith("no traces (a trace appears once its root span has arrived and the "
                                              "collector has written it")


class _Recorder:
    """Stands in for sys.stdout: records, in one log with the store's queries, when output is written."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        self.log, self.buffer = log, self

    def write(self, data: Any) -> int:
        self.log.append(("out", len(data)))
        return len(data)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("through", ["store", "collector"])
def test_a_long_listing_streams_in_bounded_store_reads(through: str, chdb_store: Any, chdb_http_server: str,
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long listing is paged (`traces --json` once held the whole listing: 1.7 GB at 72.8k traces): every
    store query of a listing returns a bounded number of rows, whatever --limit asks, and the first
    traces are written before the last page is read."""
    from ragtrace_store import open_store
    from ragtrace_store.client import Store

    n = 3000
    tenant = f"stream-{uuid.uuid4().hex[:8]}"
    # a month of its own: a part added to another test's partition can make the engine merge that
    # test's unmerged duplicates away
    base = datetime(2024, 1, 10, tzinfo=UTC)
    rows = [(tenant, uuid.uuid4().hex, "sdk", "qa", "r1", "/ask", f"q{i}", base + timedelta(seconds=i), 3, base)
            for i in range(n)]
    log: list[tuple[str, int]] = []
    real = Store.query_rows

    def counted(self: Store, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        got = real(self, sql, parameters)
        log.append(("query", len(got)))
        return got

    with ExitStack() as stack:
        if through == "store":
            with open_store(chdb_http_server) as store:
                store.insert("queries", rows, COLS)
            argv = ["--store", chdb_http_server, "--tenant", tenant]
        else:
            chdb_store.insert("queries", rows, COLS)
            url, _app = stack.enter_context(running(chdb_store, str(tmp_path / "spool"), tokens={TOKEN: tenant}))
            argv = ["--server", url, "--token", TOKEN]
        with monkeypatch.context() as patch:
            patch.setattr(Store, "query_rows", counted)
            patch.setattr(sys, "stdout", _Recorder(log))
            assert traces_main([*argv, "--json", "--limit", str(10 * n)]) == 0
    queries = [k for kind, k in log if kind == "query"]
    outs = [i for i, (kind, _k) in enumerate(log) if kind == "out"]
    last_query = max(i for i, (kind, _k) in enumerate(log) if kind == "query")
    assert len(outs) == n  # every trace, one line each
    assert max(queries) <= n // 3, queries  # no read holds the listing
    assert outs[0] < last_query  # written while the store is still being read


def test_cli_through_the_collector_reads_the_token_from_the_environment(
        served: tuple[str, list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # as `ragtrace audit --server` and `ragtrace reviewers --server` do; before, it sent no token (401)
    url, expected = served
    monkeypatch.setenv("RAGTRACE_TOKEN", TOKEN)
    assert traces_main(["--server", url, "--limit", "5", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [orjson.loads(line)["trace_id"] for line in out.splitlines()] == expected[:5]
    assert "--token" not in err  # the next page needs no --token either
    assert traces_main(["show", expected[0], "--server", url, "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["trace_id"] == expected[0]
    monkeypatch.setenv("RAGTRACE_TOKEN", "not-a-token")
    assert traces_main(["--server", url]) == 1
    assert "answered 401 (pass --token TOKEN or set $RAGTRACE_TOKEN)" in capsys.readouterr().err
