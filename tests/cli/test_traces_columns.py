"""What `ragtrace traces` prints means what a reader takes it to mean: the listing's `read` column says
whether the trace could be read whole (complete / incomplete / not-query), never "ok", which a reader took
for "no failure"; `traces show` numbers ranks from 1 as the web pages do, while its JSON keeps the
wire's 0-based ranks. Through the serve app on loopback over a real chDB store."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from ragtrace_cli.commands.traces import traces_main
from tests.collector._server import running
from tests.review.rows import FakeTrace, write_trace

TOKEN = "cols-tok"


@pytest.fixture(scope="module")
def served(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    tenant = f"cols-{uuid.uuid4().hex[:8]}"
    trace_id = uuid.uuid4().hex
    write_trace(chdb_store, tenant, FakeTrace(
        trace_id=trace_id, query="when did the bridge open?", answer="in 1932",
        retrieved=[("d-first", 0.9), ("d-second", 0.5)], reranked=[("d-second", 0.8), ("d-first", 0.7)],
        context=["d-second"], texts={"d-first": "first passage", "d-second": "second passage"}))
    with running(chdb_store, str(tmp_path_factory.mktemp("spool")), tokens={TOKEN: tenant}) as (url, _app):
        yield url, trace_id, tenant


def test_the_listing_says_how_a_trace_was_read_not_ok(served: tuple[str, str, str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    url, trace_id, _tenant = served
    assert traces_main(["--server", url, "--token", TOKEN]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("trace_id"))
    assert re.search(r"\bread\b", header) and not re.search(r"\bstate\b", header), header
    row = next(line for line in out.splitlines() if line.startswith(trace_id))
    assert re.search(r"\bcomplete\b", row) and not re.search(r"\bok\b", row), row
    assert "not whether it failed" in out


def test_show_numbers_ranks_from_one_like_the_web(served: tuple[str, str, str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    url, trace_id, _tenant = served
    assert traces_main(["show", trace_id, "--server", url, "--token", TOKEN]) == 0
    out = capsys.readouterr().out
    retrieved = out.split("== retrieved")[1].split("== reranked")[0]
    assert re.search(r"#1\s+d-first", retrieved) and re.search(r"#2\s+d-second", retrieved), retrieved
    assert "#0" not in out
    reranked = out.split("== reranked")[1].split("== context")[0]
    assert re.search(r"#1\s+d-second", reranked), reranked

    assert traces_main(["show", trace_id, "--server", url, "--token", TOKEN, "--json"]) == 0
    obj = orjson.loads(capsys.readouterr().out)
    assert [(d["id"], d["rank"]) for d in obj["retrieved"]] == [("d-first", 0), ("d-second", 1)]


def test_web_view_numbers_the_same_ranks(chdb_store: Any, served: tuple[str, str, str]) -> None:
    # the trace page's candidates table (review/view.py) shows the ranks the CLI shows
    from ragtrace_review.view import candidates

    _url, trace_id, tenant = served
    (record,) = chdb_store.read_traces(tenant=tenant, trace_ids=[trace_id])
    ranks = {c.doc_id: (c.retrieved_rank, c.reranked_rank) for c in candidates(record)}
    assert ranks == {"d-first": (1, 2), "d-second": (2, 1)}
