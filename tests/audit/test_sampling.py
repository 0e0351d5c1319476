"""Sampling in the engine (`ragtrace_store.sampling`; the audit's options in
`ragtrace_evaluator.audit.sampling`) on the real chDB engine: it chooses exactly what a plain
recomputation in Python chooses (the hash recomputed here, not asked of the engine), reruns agree,
rates nest, shards partition the sample, every stratum gets N, and Python is handed the chosen ids
only. The store holds what production leaves behind: retried root rows, a second root claimant (an
HTTP server span of another service) and roots that are not queries."""

from __future__ import annotations

import hashlib
import math
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrace_evaluator.audit.sampling import parse_shard, sampler_of
from ragtrace_store import SamplePlan, SamplingError, TraceFilter, sample_traces, sampling
from ragtrace_store.query_roots import mark_stored
from tests.counting_store import CountingStore

from .xxh64 import xxh64

BASE = datetime(2026, 10, 7, 8, 0, tzinfo=UTC)
Q_COLS = ("tenant", "trace_id", "span_id", "query_id", "service", "release", "environment", "route", "query",
          "answer", "answer_streamed", "status_code", "start_time", "duration_ms", "root_priority", "received_at",
          "kind")
S_COLS = ("tenant", "trace_id", "span_id", "parent_span_id", "name", "kind", "service", "release", "environment",
          "start_time", "end_time", "status_code", "status_message", "attributes", "events", "resource",
          "received_at")
STAGE_KINDS = ("RETRIEVER", "RERANKER", "LLM")


@dataclass(frozen=True)
class Row:
    trace_id: str
    span_id: str
    service: str
    release: str
    route: str
    start: datetime
    priority: int
    received: datetime
    kind: str


def _hex(rng: random.Random, bits: int) -> str:
    return f"{rng.getrandbits(bits):0{bits // 4}x}"


def build(store: Any, tenant: str, n: int, seed: int, *, mark: bool = True) -> tuple[list[Row], set[str]]:
    """``n`` traces with the root rows production leaves: most from the SDK (priority 3); some
    retried (the same row again, received later); some under a gateway's HTTP span (priority 1,
    another service, release and route, 3 ms earlier, arriving later); some from OpenInference
    clients (a parentless CHAIN span, priority 2, with a retriever span); some a bare retriever
    call (priority 1, kind RETRIEVER, no stage span below it: not a query). Returns the rows and
    the traces that have a stage span. ``mark`` False leaves `query_roots` to a migration (a store
    written before it has none)."""
    rng = random.Random(seed)
    rows: list[Row] = []
    staged: set[str] = set()
    for i in range(n):
        tid, start = _hex(rng, 128), BASE + timedelta(seconds=7 * i, milliseconds=rng.randrange(1000))
        release = rng.choices(["r1", "r2", "r3"], weights=[6, 3, 1])[0]
        route = "/rare" if rng.random() < 0.02 else rng.choice(["/ask", "/search"])
        received = start + timedelta(milliseconds=800)
        kind_of_trace = rng.random()
        if kind_of_trace < 0.04:
            rows.append(Row(tid, _hex(rng, 64), "qa", release, route, start, 2, received, "CHAIN"))
            staged.add(tid)
            continue
        if kind_of_trace < 0.07:
            rows.append(Row(tid, _hex(rng, 64), "qa", release, route, start, 1, received, "RETRIEVER"))
            continue
        root = Row(tid, _hex(rng, 64), "qa", release, route, start, 3, received, "CHAIN")
        rows.append(root)
        staged.add(tid)  # the SDK's pipeline retrieves too
        if rng.random() < 0.15:  # a retried batch: the same span again
            rows.append(Row(**{**root.__dict__, "received": received + timedelta(seconds=5)}))
        if rng.random() < 0.2:  # the gateway's server span above it, exported after it
            rows.append(Row(tid, _hex(rng, 64), "gateway", "gw-7", "/gw", start - timedelta(milliseconds=3), 1,
                            received + timedelta(seconds=1), "SERVER"))
    _insert(store, tenant, rows, staged, mark)
    return rows, staged


def _insert(store: Any, tenant: str, rows: list[Row], staged: set[str], mark: bool = True) -> None:
    # three inserts, so the rows of one trace sit in different parts (nothing merged yet)
    for part in range(3):
        store.insert("queries", [
            (tenant, r.trace_id, r.span_id, "", r.service, r.release, "prod", r.route, "q?", "a.", False, "OK",
             r.start, 12.0, r.priority, r.received, r.kind)
            for k, r in enumerate(rows) if k % 3 == part], Q_COLS)
    store.insert("spans", [
        (tenant, t, f"{k:016x}", "", "retrieve", "RETRIEVER", "qa", "r1", "prod", BASE, BASE, "OK", "", "{}", "",
         "{}", BASE) for k, t in enumerate(sorted(staged))], S_COLS)
    # roots of priority 1 and 2 written here, not by the collector: which are queries is asked of the
    # store, as the collector's writer asks it (`ragtrace_store.query_roots`)
    if mark:
        mark_stored(store, tenant, [r.trace_id for r in rows if r.priority in (1, 2)])


# --- the plain recomputation ---------------------------------------------------------------------------
def unit(trace_id: str, version: int) -> int | float:
    if version == 1:
        return int.from_bytes(hashlib.sha256(trace_id.encode()).digest()[:8], "big") / 2**64
    return xxh64(trace_id.encode())


def shard_of(trace_id: str, n: int, version: int) -> int:
    salted = "ragtrace-shard:" + trace_id
    if version == 1:
        return int(int.from_bytes(hashlib.sha256(salted.encode()).digest()[:8], "big") / 2**64 * n)
    return xxh64(salted.encode()) % n


def query_winners(rows: list[Row], staged: set[str]) -> list[Row]:
    """Each trace's winning root row (highest priority, then newest, then span id), queries only."""
    winners: dict[str, Row] = {}
    for r in rows:
        w = winners.get(r.trace_id)
        if w is None or (r.priority, r.received, r.span_id) > (w.priority, w.received, w.span_id):
            winners[r.trace_id] = r
    return [w for w in winners.values()
            if w.priority in (0, 3) or (w.kind not in STAGE_KINDS and w.trace_id in staged)]


def reference(rows: list[Row], staged: set[str], plan: SamplePlan, *, release: str | None = None,
              since: datetime | None = None, until: datetime | None = None) -> list[str]:
    pool = [w for w in query_winners(rows, staged)
            if (release is None or w.release == release) and (since is None or w.start >= since)
            and (until is None or w.start < until)]
    scored = [(unit(w.trace_id, plan.sampler), w) for w in pool]
    if plan.rate is not None:
        top = plan.rate if plan.sampler == 1 else math.ceil(Fraction(plan.rate) * 2**64)
        scored = [(u, w) for u, w in scored if u < top]
    if plan.sample is not None:
        strata: dict[tuple[str, ...], list[tuple[Any, Row]]] = {}
        for u, w in scored:
            strata.setdefault(tuple(getattr(w, c) for c in plan.stratify), []).append((u, w))
        scored = [x for group in strata.values()
                  for x in sorted(group, key=lambda x: (x[0], x[1].trace_id))[: plan.sample]]
    if plan.shard is not None:
        i, n = plan.shard
        scored = [(u, w) for u, w in scored if shard_of(w.trace_id, n, plan.sampler) == i]
    return [w.trace_id for _u, w in sorted(scored, key=lambda x: (x[0], x[1].trace_id))]


@pytest.fixture(scope="module")
def traffic(chdb_store: Any) -> Iterator[tuple[str, list[Row], set[str]]]:
    # Background merges stopped for the module: the duplicates must stay in their own parts (as
    # between merges in production), and the counts of candidate rows and rounds that some tests
    # check are those of the unmerged rows. A merge at any moment would otherwise change them.
    tables = [chdb_store.table(t) for t in ("queries", "spans")]
    for t in tables:
        chdb_store.command(f"SYSTEM STOP MERGES {t}")
    try:
        tenant = f"sampling-{uuid.uuid4().hex[:8]}"
        rows, staged = build(chdb_store, tenant, 3000, seed=15)
        yield tenant, rows, staged
    finally:
        for t in tables:
            chdb_store.command(f"SYSTEM START MERGES {t}")


def ids(store: Any, tenant: str, plan: SamplePlan, **filters: Any) -> list[str]:
    return sample_traces(store, TraceFilter(tenant=tenant, **filters), plan).trace_ids


PLANS = [
    SamplePlan(rate=0.1), SamplePlan(rate=1.0), SamplePlan(sample=100), SamplePlan(sample=3000),
    SamplePlan(sample=7, stratify=("release", "route")), SamplePlan(sample=40, stratify=("route",)),
    SamplePlan(sample=25, stratify=("release",), shard=(1, 3)), SamplePlan(rate=0.3, shard=(0, 4)),
]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("plan", PLANS, ids=repr)
def test_the_engine_chooses_what_a_plain_recomputation_chooses(chdb_store: Any, traffic: Any, plan: SamplePlan,
                                                               version: int) -> None:
    tenant, rows, staged = traffic
    plan = SamplePlan(**{**plan.__dict__, "sampler": version})
    expected = reference(rows, staged, plan)
    assert expected  # a plan that chooses nothing would prove nothing
    assert ids(chdb_store, tenant, plan) == expected


def test_filters_and_windows_apply_to_the_winning_root(chdb_store: Any, traffic: Any) -> None:
    tenant, rows, staged = traffic
    since, until = BASE + timedelta(hours=1), BASE + timedelta(hours=3)
    for plan in (SamplePlan(sample=30), SamplePlan(rate=0.5), SamplePlan(sample=5, stratify=("route",))):
        assert ids(chdb_store, tenant, plan, release="r2") == reference(rows, staged, plan, release="r2")
        assert ids(chdb_store, tenant, plan, since=since, until=until) == reference(
            rows, staged, plan, since=since, until=until)
    # the gateway's rows are in the store, but never a trace's root: nothing to sample there
    assert ids(chdb_store, tenant, SamplePlan(sample=10), release="gw-7") == []
    per = sample_traces(chdb_store, TraceFilter(tenant=tenant), SamplePlan(sample=5, stratify=("release",)))
    assert {k: v for k, v in per.per_stratum.items() if v} == {("r1",): 5, ("r2",): 5, ("r3",): 5}


def test_reruns_agree_and_rates_nest(chdb_store: Any, traffic: Any) -> None:
    tenant, rows, staged = traffic
    queries = len(query_winners(rows, staged))
    chosen = {rate: set(ids(chdb_store, tenant, SamplePlan(rate=rate))) for rate in (0.05, 0.1, 0.2)}
    assert chosen[0.05] <= chosen[0.1] <= chosen[0.2]
    assert ids(chdb_store, tenant, SamplePlan(rate=0.1)) == ids(chdb_store, tenant, SamplePlan(rate=0.1))
    share = len(chosen[0.1]) / queries
    assert 0.1 - 5 * math.sqrt(0.09 / queries) < share < 0.1 + 5 * math.sqrt(0.09 / queries)
    small, big = ids(chdb_store, tenant, SamplePlan(sample=50)), ids(chdb_store, tenant, SamplePlan(sample=120))
    assert big[:50] == small  # bottom-N: a larger sample extends a smaller one


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 6), sample=st.integers(1, 400), stratified=st.booleans())
def test_shards_partition_the_sample(chdb_store: Any, traffic: Any, n: int, sample: int, stratified: bool) -> None:
    tenant = traffic[0]
    strata = ("release",) if stratified else ()
    whole = ids(chdb_store, tenant, SamplePlan(sample=sample, stratify=strata))
    parts = [ids(chdb_store, tenant, SamplePlan(sample=sample, stratify=strata, shard=(i, n))) for i in range(n)]
    assert sorted(x for p in parts for x in p) == sorted(whole)
    assert sum(len(p) for p in parts) == len(whole)


def test_every_stratum_gets_n_and_a_rare_one_all_it_has(chdb_store: Any, traffic: Any) -> None:
    tenant, rows, staged = traffic
    got = sample_traces(chdb_store, TraceFilter(tenant=tenant), SamplePlan(sample=60, stratify=("release", "route")))
    rare = sum(1 for w in query_winners(rows, staged) if (w.release, w.route) == ("r3", "/rare"))
    counts = {k: v for k, v in got.per_stratum.items() if v}
    assert counts[("r3", "/rare")] == rare < 60
    assert all(v == 60 for k, v in counts.items() if k[1] != "/rare")
    assert len(got.trace_ids) == sum(counts.values())


def test_thin_slices_take_more_rounds_and_choose_the_same(chdb_store: Any, traffic: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    tenant, rows, staged = traffic
    plan = SamplePlan(sample=90, stratify=("release",), shard=(0, 2))
    one = sample_traces(chdb_store, TraceFilter(tenant=tenant), plan)
    monkeypatch.setattr(sampling, "SLICE_ROWS", 37)  # a slice of at most 37 rows per stratum
    many = sample_traces(chdb_store, TraceFilter(tenant=tenant), plan)
    assert many.rounds > 5 and many.rounds > one.rounds
    assert many.trace_ids == one.trace_ids == reference(rows, staged, plan)


def test_python_is_handed_only_the_chosen_ids(chdb_store: Any, traffic: Any) -> None:
    tenant = traffic[0]
    counting = CountingStore(chdb_store)
    got = sample_traces(counting, TraceFilter(tenant=tenant), SamplePlan(sample=20, shard=(2, 5)))
    assert 0 < len(got.trace_ids) < 20 and got.rounds == 1
    # one row: the candidates' count, the chosen count, this shard's chosen ids (at most 20) and
    # whether the first part of the range was the whole of it: never the 3,459 candidate rows
    assert counting.values <= 3 + 20 < got.candidate_rows / 40


def _no_rounds(*_args: Any) -> None:
    raise AssertionError("the counted rounds ran: the one query was not used")


@pytest.mark.parametrize("plan", [SamplePlan(rate=0.3), SamplePlan(sample=200), SamplePlan(sample=50, shard=(1, 3)),
                                  SamplePlan(rate=1.0)], ids=repr)
def test_one_query_and_the_rounds_choose_the_same(chdb_store: Any, traffic: Any, plan: SamplePlan,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Without strata the selection is one query; over more rows than SLICE_ROWS the engine stops it
    and the counted rounds choose instead: the same traces, filters and window either way."""
    tenant, rows, staged = traffic
    since, until = BASE + timedelta(hours=1), BASE + timedelta(hours=3)
    for filters in ({}, {"release": "r2"}, {"since": since, "until": until}):
        with monkeypatch.context() as m:
            m.setattr(sampling, "_round", _no_rounds)
            one = sample_traces(chdb_store, TraceFilter(tenant=tenant, **filters), plan)
        with monkeypatch.context() as m:
            m.setattr(sampling, "SLICE_ROWS", 37)
            many = sample_traces(chdb_store, TraceFilter(tenant=tenant, **filters), plan)
        assert many.rounds > 1  # the one query was refused: these are the rounds'
        assert one.trace_ids == many.trace_ids == reference(rows, staged, plan, **filters)
        assert one.candidate_rows == many.candidate_rows and one.per_stratum == many.per_stratum


@pytest.mark.parametrize("first", [sampling._FIRST_SLICE, (0.0, 1.0)], ids=["1.25N+20", "too-small"])
def test_a_sample_reads_a_part_of_the_range_first(chdb_store: Any, traffic: Any, first: tuple[float, float],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The one query for a sample of N decides the winners of the traces in the part of u's range
    sized to hold about 1.25 N + 20 candidates; a part that holds fewer than N chosen traces (here
    one sized for a single candidate) is followed by the whole range: the same traces either way."""
    tenant, rows, staged = traffic
    since, until = BASE + timedelta(hours=1), BASE + timedelta(hours=3)
    monkeypatch.setattr(sampling, "_round", _no_rounds)
    monkeypatch.setattr(sampling, "_FIRST_SLICE", first)
    for plan in (SamplePlan(sample=200), SamplePlan(sample=50, shard=(1, 3))):
        for filters in ({}, {"release": "r2"}, {"since": since, "until": until}):
            counting = CountingStore(chdb_store)  # each query of the selection returns one row
            got = sample_traces(counting, TraceFilter(tenant=tenant, **filters), plan)
            assert got.trace_ids == reference(rows, staged, plan, **filters)
            if first == (0.0, 1.0):
                assert counting.rows >= 2  # the part held too few: the whole range was read after it


def test_the_hashes_are_pinned() -> None:
    # changing either would silently change every sample and every shard
    assert xxh64(b"0af7651916cd43dd8448eb211c80319c") == 0x82D8C03ACC9EB486
    assert unit("0af7651916cd43dd8448eb211c80319c", 1) == pytest.approx(0.08580714096926707, abs=1e-12)


def test_the_engine_computes_the_pinned_hashes(chdb_store: Any) -> None:
    tid = "0af7651916cd43dd8448eb211c80319c"
    for version in (1, 2):
        got = chdb_store.query_rows(f"SELECT {sampling.SAMPLERS[version].unit} FROM (SELECT {{t:String}} AS trace_id)",
                                    {"t": tid})[0][0]
        assert got == unit(tid, version)


def test_manifest_names_the_sampler(chdb_store: Any, traffic: Any) -> None:
    from ragtrace_evaluator.audit.run import run_audit
    from ragtrace_evaluator.manifest import load_manifest

    tenant = traffic[0]
    reports = {v: run_audit(chdb_store, tenant=tenant, sample=3, stages="retrieval", relevance_labeller=None,
                            sampler=v) for v in (1, 2)}
    for version, report in reports.items():
        stored = load_manifest(chdb_store, report["manifest_id"])
        assert stored is not None and sampler_of(stored) == version == report["sampling"]["sampler"]
        assert stored["sampler"]["unit"] == sampling.SAMPLERS[version].unit
    assert reports[1]["manifest_id"] != reports[2]["manifest_id"]
    assert sampler_of({"manifest_version": 1}) == 1  # written before the engine sampled


@pytest.mark.parametrize("text", ["1/1x", "2/2", "-1/3", "a/b", "0/0"])
def test_bad_shards(text: str) -> None:
    with pytest.raises(SamplingError, match="--shard"):
        parse_shard(text)


def test_bad_plans() -> None:
    with pytest.raises(SamplingError, match="not both"):
        SamplePlan(sample=1, rate=0.1)
    with pytest.raises(SamplingError, match="--rate"):
        SamplePlan(rate=1.5)
    with pytest.raises(SamplingError, match="--stratify"):
        SamplePlan(sample=3, stratify=("tenant",))
    with pytest.raises(SamplingError, match="--sampler 3: use one of 1, 2"):
        SamplePlan(sample=3, sampler=3)


def test_a_window_decides_from_the_root_rows_near_it(chdb_store: Any) -> None:
    """A trace with two SDK roots twenty minutes apart (two pipelines under one request, the later
    one received last, so it wins the trace): a window around the first sees the trace by its first
    root, a window around the second by the second, and no window both (ROOT_SPREAD is five
    minutes). A root claimant within the spread but outside a window still decides: one three
    minutes before it, outranking the root inside, keeps its trace out; one eight minutes before is
    not read."""
    tenant = f"band-{uuid.uuid4().hex[:8]}"
    t = BASE + timedelta(days=2)
    later = t + timedelta(minutes=20)
    rows = [Row("b" * 32, "s1", "qa", "r1", "/ask", t, 3, t + timedelta(seconds=1), "CHAIN"),
            Row("b" * 32, "s2", "qa", "r2", "/ask", later, 3, later + timedelta(seconds=1), "CHAIN")]
    _insert(chdb_store, tenant, rows, set())
    first = TraceFilter(tenant=tenant, since=t - timedelta(minutes=2), until=t + timedelta(minutes=2))
    second = TraceFilter(tenant=tenant, since=later - timedelta(minutes=2), until=later + timedelta(minutes=2))
    for flt in (first, second):
        assert sample_traces(chdb_store, flt, SamplePlan(rate=1.0)).trace_ids == ["b" * 32]
        assert sample_traces(chdb_store, flt, SamplePlan(sample=5)).trace_ids == ["b" * 32]
    assert sample_traces(chdb_store, TraceFilter(tenant=tenant, release="r1"), SamplePlan(rate=1.0)).trace_ids == []
    assert sample_traces(chdb_store, TraceFilter(tenant=tenant, release="r2"), SamplePlan(rate=1.0)).trace_ids == [
        "b" * 32]

    # two more traces, each with an SDK root inside a window and a later-received one before it: three
    # minutes before (within the spread: it wins, the trace is not the window's) and eight (beyond it:
    # not read, so the root inside decides)
    w0 = BASE + timedelta(days=3)
    window = TraceFilter(tenant=tenant, since=w0, until=w0 + timedelta(minutes=10))
    inside, seen = w0 + timedelta(minutes=1), w0 + timedelta(minutes=30)
    _insert(chdb_store, tenant, [
        Row("c" * 32, "s3", "qa", "r1", "/ask", inside, 3, inside + timedelta(seconds=1), "CHAIN"),
        Row("c" * 32, "s4", "qa", "r1", "/ask", w0 - timedelta(minutes=3), 3, seen, "CHAIN"),
        Row("d" * 32, "s5", "qa", "r1", "/ask", inside, 3, inside + timedelta(seconds=1), "CHAIN"),
        Row("d" * 32, "s6", "qa", "r1", "/ask", w0 - timedelta(minutes=8), 3, seen, "CHAIN")], set())
    for plan in (SamplePlan(rate=1.0), SamplePlan(sample=5)):
        assert sample_traces(chdb_store, window, plan).trace_ids == ["d" * 32]

