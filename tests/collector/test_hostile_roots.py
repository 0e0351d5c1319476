"""Roots that are not queries cost the readers of queries nothing (`ragtrace_store.query_roots`).

The attack's shape, scaled from 300,000 spans to 30,000: one OTLP request of parentless spans without
attributes (not even resource attributes), newer than every query, through the real collector over
loopback into the real engine. Beside it, queries of every kind: the SDK's; OpenInference chains whose
root and stage spans arrive in one request, or in two in either order; and roots that are not queries
(a retriever called outside a chain). The listing, its pages, its count and the audit's sample read the
same traces with the flood as without it, and read none of it: the first page hands Python its own
rows, the count stays exact under a bound far below the flood, the sample's engine reads stay far
below the flood's rows and it finds no stratum of the flood's.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragtrace import semconv as sc
from ragtrace_store import (
    SamplePlan,
    Store,
    TraceCount,
    TraceFilter,
    TraceListing,
    count_listing,
    count_traces,
    sample_traces,
)
from ragtrace_store.listing import root_page
from tests import otlp_builders as T
from tests.counting_store import CountingStore

from ._server import running

FLOOD = 30_000
TOKEN = "hostile"


def _post(url: str, req: ExportTraceServiceRequest) -> None:
    r = httpx.post(f"{url}/v1/traces", content=req.SerializeToString(), timeout=120,
                   headers={"content-type": "application/x-protobuf", "authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text


def flood(n: int) -> ExportTraceServiceRequest:
    """``n`` parentless spans without attributes, starting now (after every query of the test)."""
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    now = time.time_ns()
    for i in range(n):
        span = spans.add()
        span.trace_id, span.span_id, span.name = os.urandom(16), os.urandom(8), "x"
        span.start_time_unix_nano = now + i * 1000
        span.end_time_unix_nano = now + i * 1000 + 1_000_000
    return req


def _engine_rows(store: Any) -> int:
    return int(store.query_rows("SELECT value FROM system.events WHERE event = 'SelectedRows'")[0][0])


@pytest.fixture(scope="module")
def own_store(chdb_store: Any) -> Iterator[Store]:
    """A database of this module's own in the session's engine, so what the engine reads for a
    tenant is that tenant's (granules shared with other tests' tenants would count too)."""
    st = Store(chdb_store.client, f"hostile_{uuid.uuid4().hex[:8]}", location=chdb_store.location, embedded=True)
    st.lock = chdb_store.lock  # one engine, one lock
    st.migrate()
    try:
        yield st
    finally:
        st.command(f"DROP DATABASE IF EXISTS {st.database}")


@pytest.fixture(scope="module")
def flooded(own_store: Store, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str, dict[str, Any]]]:
    """A tenant's queries, what its readers answered before the flood, and the server after it."""
    tenant = f"flood-{uuid.uuid4().hex[:8]}"
    docs = T.corpus(30, size=120)
    start = time.time_ns() - 3_600_000_000_000  # an hour ago, a second apart
    with running(own_store, str(tmp_path_factory.mktemp("spool")), tokens={TOKEN: tenant}) as (url, app):
        sdk = [T.standard_trace(docs, i) for i in range(12)]
        chains = [T.standard_trace(docs, 20 + i, openinference_only=True) for i in range(6)]
        spans = []
        for k, tr in enumerate([*sdk, *chains]):
            trace = tr.spans()
            for s in trace:
                s.start_ns = start + k * 1_000_000_000
            spans.append(trace)
        _post(url, T.request([s for trace in spans[:12] for s in trace], release="r1"))
        _post(url, T.request([s for trace in spans[12:14] for s in trace], release="r2"))
        # a chain's stage spans first, its root in a later request; and the other way round
        for trace in spans[14:16]:
            _post(url, T.request(trace[1:], release="r2"))
            assert app.state.writer.flush(30)
            _post(url, T.request(trace[:1], release="r2"))
            assert app.state.writer.flush(30)
        for trace in spans[16:18]:
            _post(url, T.request(trace[:1], release="r2"))
            assert app.state.writer.flush(30)
            _post(url, T.request(trace[1:], release="r2"))
            assert app.state.writer.flush(30)
        # a retriever called outside any chain: a root, not a query
        _post(url, T.request([T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "retrieve",
                                         {sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: "q"}, start_ns=start)],
                             release="r1"))
        assert app.state.writer.flush(30)
        queries = {tr.trace_id for tr in [*sdk, *chains]}
        before = reads(own_store, url, tenant)
        assert set(before["listed"]) == queries and before["count"] == len(queries)
        _post(url, flood(FLOOD))
        assert app.state.writer.flush(120)
        yield url, tenant, before


def reads(store: Any, url: str, tenant: str) -> dict[str, Any]:
    """What the readers of a tenant's queries answer: the listing over HTTP page by page (5 a page), its
    total, the count, and a stratified sample."""
    listed, cursor = [], None
    headers = {"authorization": f"Bearer {TOKEN}"}
    while True:
        r = httpx.get(f"{url}/api/traces", params={"limit": 5, "total": "true", **({"cursor": cursor} if cursor
                                                                                   else {})},
                      headers=headers, timeout=60)
        assert r.status_code == 200, r.text
        listed += [orjson.loads(line)["trace_id"] for line in r.text.splitlines()]
        total = int(r.headers["ragtrace-total"])
        cursor = r.headers.get("ragtrace-next-cursor")
        if cursor is None:
            break
    flt = TraceFilter(tenant=tenant)
    sample = sample_traces(store, flt, SamplePlan(sample=4, stratify=("release",)))
    count = count_listing(store, TraceListing(flt), exact_up_to=None).queries
    return {"listed": listed, "total": total, "count": count, "sample": sample.trace_ids,
            "strata": set(sample.per_stratum), "rounds": sample.rounds}


def test_the_readers_of_queries_answer_as_before_the_flood(own_store: Store, flooded: Any) -> None:
    url, tenant, before = flooded
    assert reads(own_store, url, tenant) == before
    assert before["strata"] == {("r1",), ("r2",)} and before["rounds"] == 1
    # every root is still there: the queries, the lone retriever and the flood
    every = count_traces(own_store, TraceFilter(tenant=tenant), include_all=True, exact_up_to=None)
    assert (every.queries, every.others) == (len(before["listed"]) + 1 + FLOOD, 1 + FLOOD)


def test_the_listing_hands_over_its_page_not_the_flood(own_store: Store, flooded: Any) -> None:
    _url, tenant, before = flooded
    counting = CountingStore(own_store)
    page = root_page(counting, TraceListing(TraceFilter(tenant=tenant)), None, 10)
    assert [r[0] for r in page] == before["listed"][:10]
    # one round: its candidates (26 rows), the winners and their text (10 each); before query roots
    # the candidates were the newest root rows, the flood's, widened fourfold until past all of them
    assert counting.rows <= 26 + 10 + 10


def test_counting_and_sampling_read_none_of_the_flood(own_store: Store, flooded: Any) -> None:
    _url, tenant, before = flooded
    flt = TraceFilter(tenant=tenant)
    # exact under a bound far below the flood: only rows that can be queries are counted
    assert count_traces(own_store, flt, exact_up_to=100) == TraceCount(len(before["listed"]), None, True)
    for read in (lambda: count_listing(own_store, TraceListing(flt), exact_up_to=None),
                 lambda: sample_traces(own_store, flt, SamplePlan(sample=4, stratify=("release",))),
                 lambda: sample_traces(own_store, flt, SamplePlan(rate=0.5))):
        rows = _engine_rows(own_store)
        read()
        assert _engine_rows(own_store) - rows < FLOOD / 10


def test_the_flood_costs_the_writer_one_lookup(own_store: Store, tmp_path: Path) -> None:
    """The flood's roots are not queries: the writer asks the store about them once, and copies none."""
    tenant = f"flood-{uuid.uuid4().hex[:8]}"
    with running(own_store, str(tmp_path / "spool"), tokens={TOKEN: tenant}) as (url, app):
        _post(url, flood(2000))
        assert app.state.writer.flush(60)
    got = {t: own_store.query_rows(f"SELECT count() FROM {own_store.table(t)} WHERE tenant = {{t:String}}",
                                    {"t": tenant})[0][0] for t in ("queries", "other_roots", "query_roots")}
    assert got == {"queries": 2000, "other_roots": 2000, "query_roots": 0}
