"""One pager for every listing of traces: `ragtrace traces` (on a store and through the collector),
`GET /api/traces` and the web's `/traces` list the same traces in the same order (ties by trace id,
the same way everywhere, also across page boundaries), continue one cursor format, refuse a cursor
made for other filters or another order, and refuse anything that is not a cursor with a clear
error (a 400 on the web, exit 2 on the command line), never a server error."""

from __future__ import annotations

import base64
import json
import re
import shlex
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import orjson
import pytest

from ragtrace_cli.commands.traces import traces_main
from ragtrace_review import auth
from ragtrace_store import (
    CursorError,
    LabelFilter,
    Store,
    TraceFilter,
    TraceListing,
    decode_cursor,
    encode_cursor,
    open_store,
)
from tests.collector._server import running

TOKEN = "one-pager-tok"
BASE = datetime(2026, 9, 14, 8, 0, tzinfo=UTC)
COLS = ["tenant", "trace_id", "span_id", "service", "release", "route", "query", "start_time", "root_priority",
        "received_at"]
#: traces per start time: every page boundary below falls inside a group of ties
TIES = 4
N = 6 * TIES


class Served:
    def __init__(self, url: str, store: Store, store_url: str, tenant: str, reviewer_token: str,
                 newest_first: list[str]) -> None:
        self.url, self.store, self.store_url, self.tenant = url, store, store_url, tenant
        self.reviewer_token, self.newest_first = reviewer_token, newest_first

    def api(self, **params: Any) -> httpx.Response:
        return httpx.get(f"{self.url}/api/traces", params=params, headers={"authorization": f"Bearer {TOKEN}"},
                         timeout=60)

    def page(self, path_and_query: str, **params: Any) -> httpx.Response:
        return httpx.get(f"{self.url}{path_and_query}", params=params or None, timeout=60, headers={
            "authorization": f"Bearer {self.reviewer_token}", "accept": "text/html"})


@pytest.fixture(scope="module")
def served(chdb_http_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """N SDK roots in groups of TIES at one start time (two releases), each with a retried copy."""
    tenant = f"pager-{uuid.uuid4().hex[:8]}"
    ids = [uuid.uuid4().hex for _ in range(N)]
    rows = [(tenant, t, "sdk", "qa", f"r{i % 2 + 1}", "/ask", f"question {i}", BASE + timedelta(minutes=i // TIES), 3,
             BASE) for i, t in enumerate(ids)]
    with open_store(chdb_http_server) as store:
        store.insert("queries", rows, COLS)
        store.insert("queries", [(*r[:9], BASE + timedelta(minutes=5)) for r in rows], COLS)
        _, reviewer_token = auth.add_reviewer(store, "pager", tenant=tenant)
        newest_first = [ids[i] for i in sorted(range(N), key=lambda i: (-(i // TIES), ids[i]))]
        with running(store, str(tmp_path_factory.mktemp("spool")), tokens={TOKEN: tenant},
                     review_secret="one-pager") as (url, _app):
            yield Served(url, store, chdb_http_server, tenant, reviewer_token, newest_first)


# --- the three readers, each following its own next-page links ----------------------------------------
def _api_pages(served: Served, limit: int) -> list[str]:
    seen, cursor = [], None
    while True:
        resp = served.api(limit=limit, **({"cursor": cursor} if cursor else {}))
        assert resp.status_code == 200, resp.text
        seen += [orjson.loads(line)["trace_id"] for line in resp.content.splitlines()]
        cursor = resp.headers.get("ragtrace-next-cursor")
        if not cursor:
            return seen


def _next_link(html: str) -> str:
    """The /traces page's link to its next page ('' on the last page)."""
    m = re.search(r'<a href="([^"]+)" id="next-page">', html)
    return m.group(1).replace("&amp;", "&") if m else ""


def _web_pages(served: Served, first: str) -> list[str]:
    seen, target = [], first
    while target:
        resp = served.page(target)
        assert resp.status_code == 200, resp.text[:500]
        seen += re.findall(r'<tr data-trace="([^"]+)">', resp.text)
        target = _next_link(resp.text)
    return seen


def _cli_pages(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`ragtrace traces --json` and every next-page command its footer prints."""
    seen = []
    while True:
        assert traces_main([*argv, "--json"] if "--json" not in argv else argv) == 0
        out, err = capsys.readouterr()
        seen += [orjson.loads(line)["trace_id"] for line in out.splitlines()]
        nxt = [line.strip() for line in err.replace("next page: ", "\n").splitlines()
               if line.strip().startswith("ragtrace traces ")]
        if not nxt:
            return seen
        argv = shlex.split(nxt[0])[2:]
        if "--token" in argv:  # the footer names the flag, not the credential
            argv[argv.index("--token") + 1] = TOKEN


def test_ties_sort_alike_in_the_cli_the_api_and_the_page(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    expected = served.newest_first
    # pages of 5 and 3 end inside groups of 4 ties: a cursor must continue within a group
    assert _api_pages(served, 5) == expected
    assert _web_pages(served, "/traces?limit=5") == expected
    assert _cli_pages(["--store", served.store_url, "--tenant", served.tenant, "--limit", "3"], capsys) == expected
    assert _cli_pages(["--server", served.url, "--token", TOKEN, "--limit", "5"], capsys) == expected
    # oldest first is the same listing read backwards (ties too)
    assert _web_pages(served, "/traces?limit=5&order=asc") == expected[::-1]
    # one cursor format: a cursor of /api/traces continues /traces (the same listing) where it stopped
    cursor = served.api(limit=6).headers["ragtrace-next-cursor"]
    resp = served.page(f"/traces?limit=7&cursor={cursor}")
    assert resp.status_code == 200 and re.findall(r'<tr data-trace="([^"]+)">', resp.text) == expected[6:13]


def test_a_cursor_of_other_filters_or_another_order_is_refused_everywhere(
        served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    cursor = served.api(limit=5).headers["ragtrace-next-cursor"]
    for params in ({"release": "r2"}, {"service": "other"}, {"since": "2026-01-01T00:00:00Z"}, {"all": "true"}):
        resp = served.api(limit=5, cursor=cursor, **params)
        assert resp.status_code == 400 and "other filters" in resp.json()["error"], params
    assert traces_main(["--store", served.store_url, "--tenant", served.tenant, "--release", "r2",
                        "--cursor", cursor]) == 2
    assert "--cursor: this cursor continues a listing with other filters" in capsys.readouterr().err
    assert traces_main(["--store", served.store_url, "--tenant", f"{served.tenant}-other", "--cursor", cursor]) == 2
    assert "other filters" in capsys.readouterr().err
    # /traces binds its cursors to its filters too (before, only to the sort order)
    web_cursor = parse_qs(urlsplit(_next_link(served.page("/traces?limit=5").text)).query)["cursor"][0]
    for other in ({"release": "r1"}, {"q": "question"}, {"route": "/other"}):
        resp = served.page("/traces", limit=5, cursor=web_cursor, **other)
        assert resp.status_code == 400 and "other filters" in resp.text, other
    resp = served.page("/traces", limit=5, order="asc", cursor=web_cursor)
    assert resp.status_code == 400 and "another sort order" in resp.text
    # the same filters continue, whatever page size is asked
    assert served.page("/traces", limit=9, cursor=web_cursor).status_code == 200


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _changed(cursor: str, **fields: Any) -> str:
    """A real cursor with some fields replaced (or removed, for None), re-encoded with Python's
    json (which writes integers of any size)."""
    obj = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    for name, value in fields.items():
        if value is None:
            obj.pop(name)
        else:
            obj[name] = value
    return _b64(json.dumps(obj).encode())


def _malformed(cursor: str) -> dict[str, str]:
    top_ms = (datetime(2299, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) \
        // timedelta(milliseconds=1)
    return {
        "garbage": "not-a-cursor", "not base64": "%%%", "non-ASCII": "curs\u00f6r", "too long": "A" * 5000,
        "base64 of text": _b64(b"hello"), "a JSON list": _b64(b"[1, 2]"), "a JSON number": _b64(b"17"),
        "the review's old cursor": _b64(json.dumps(["time", True, 1_790_000_000_000, "abc"]).encode()),
        "the CLI's old cursor": _changed(cursor, v=1, s=None, d=None),
        "a field missing": _changed(cursor, id=None), "an extra field": _changed(cursor, x=1),
        "time 2**70 ms": _changed(cursor, k=2**70), "time -2**70 ms": _changed(cursor, k=-(2**70)),
        "time 2**62 ms": _changed(cursor, k=2**62), "time a ms after the store's last": _changed(cursor, k=top_ms + 1),
        "time as a float": _changed(cursor, k=1.5e12), "time 1e300": _changed(cursor, k=1e300),
        "time as text": _changed(cursor, k="1790000000000"), "time as true": _changed(cursor, k=True),
        "trace id a number": _changed(cursor, id=7), "direction as text": _changed(cursor, d="desc"),
        "an unknown sort": _changed(cursor, s="size"), "fingerprint a list": _changed(cursor, f=[1]),
    }


def test_malformed_cursors_are_refused_cleanly(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    cursor = served.api(limit=5).headers["ragtrace-next-cursor"]
    listing = TraceListing(TraceFilter(tenant=served.tenant))
    assert decode_cursor(cursor, listing)[1] == served.newest_first[4]  # the real one decodes
    for name, bad in _malformed(cursor).items():
        with pytest.raises(CursorError, match="is not valid: it is not a cursor"):
            decode_cursor(bad, listing)
        resp = served.api(limit=5, cursor=bad)
        assert resp.status_code == 400 and "is not a cursor" in resp.json()["error"], name
        page = served.page("/traces", limit=5, cursor=bad)
        assert page.status_code == 400 and "is not valid: it is not a cursor" in page.text, name
        assert traces_main(["--store", served.store_url, "--tenant", served.tenant, "--cursor", bad]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("ragtrace traces: --cursor: the page cursor") and "Traceback" not in err, name


def test_a_cursor_round_trips_and_names_its_position() -> None:
    """The store's cursor on its own: the position it was made at comes back, for each order."""
    flt = TraceFilter(tenant="t", release="r1", since=datetime(2026, 1, 1, tzinfo=UTC))
    when = datetime(2026, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
    for descending in (True, False):
        listing = TraceListing(flt, descending=descending)
        assert decode_cursor(encode_cursor(listing, when, "abc"), listing) == (when, "abc")
        # a naive time is UTC, and the store's resolution is a millisecond
        naive = encode_cursor(listing, datetime(2026, 2, 3, 4, 5, 6, 789999), "abc")
        assert decode_cursor(naive, listing) == (when, "abc")
    by_confidence = TraceListing(flt, labels=LabelFilter("m1"), sort="confidence")
    assert by_confidence.descending is False  # least confident first by default
    assert decode_cursor(encode_cursor(by_confidence, 0.25, "x"), by_confidence) == (0.25, "x")
    with pytest.raises(CursorError, match="another sort order"):
        decode_cursor(encode_cursor(by_confidence, 0.25, "x"), TraceListing(flt))
    # the label filter is part of the listing's filters only when it narrows (or sorts)
    labelled = TraceListing(flt, labels=LabelFilter("m1", failure_mode="ok"))
    with pytest.raises(CursorError, match="other filters"):
        decode_cursor(encode_cursor(TraceListing(flt), when, "abc"), labelled)
    assert decode_cursor(encode_cursor(TraceListing(flt), when, "abc"), TraceListing(flt, labels=LabelFilter("m2")))
