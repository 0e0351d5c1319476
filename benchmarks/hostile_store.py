"""Listing, counting and sampling on a store flooded with roots that are not queries, beside the same
queries without them, in one run.

One request of 300,000 parentless spans without attributes (15 MB, well under every limit) adds
300,000 roots that are not queries. This benchmark builds one embedded store with two tenants that
hold the same N queries: ``clean`` nothing else, ``hostile`` also M such roots, posted the way the
attack posted them (OTLP protobuf requests of 300,000 spans through the collector's decode path and
its writer, `ragtrace_collector.writer.Writer`). The queries are written by the engine itself
(``INSERT ... SELECT FROM numbers()``): over the 30 days before 2026-10-31, five releases one after
another, four routes; each an SDK root (priority 3) with a retriever, a reranker and an LLM span, and 2 %
of them an OpenInference chain instead (a parentless CHAIN root, priority 2, and the same spans), which
is a query only because of its stage spans. The flood starts in the queries' last hour, as spans a
sender posts "now" do. Then every table is merged (``OPTIMIZE FINAL``), as the server's merges leave it
minutes later.

Each path runs the product's code (`read_traces`, `count_traces`, `count_listing`, `sample_traces`) on
both tenants, alternately, ``--runs`` times; the best time of each is kept and the ratio hostile /
clean printed, with each side's extra peak RSS (the process's high-water mark is reset before each
run through /proc/self/clear_refs; the store is embedded, so the engine's memory counts) and whether
both returned the same traces (they must). The target is a ratio of at most 2 for every path.

    .venv/bin/python benchmarks/hostile_store.py [--queries 1000000] [--roots 1000000] [--runs 3]
        [--dir DIR] [--keep] [--json out.json]

It also reports what the attack's requests cost the writer (each 300,000-span request from submit to
written, and the part of it spent deciding which roots are queries, `ragtrace_store.query_roots`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
END = datetime(2026, 10, 31, tzinfo=UTC)
SPAN_MS = 30 * 86_400_000
CLEAN, HOSTILE = "clean", "hostile"
#: spans per attack request, as the attack sent them
PER_REQUEST = 300_000


# --- measuring ------------------------------------------------------------------------------------------
def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


_READ = ("SelectedRows", "SelectedBytes")


def _engine_reads(st: Any) -> dict[str, int]:
    """The engine's counters of what its queries read (rows and bytes selected from tables), since
    it started: the difference over a run is what the run read, however busy the machine."""
    got = dict(st.query_rows("SELECT event, value FROM system.events WHERE event IN {e:Array(String)}",
                             {"e": list(_READ)}))
    return {e: int(got.get(e, 0)) for e in _READ}


def _run(st: Any, fn: Callable[[], Any]) -> tuple[float, float, dict[str, int], Any]:
    """(seconds, extra peak RSS MB, rows and bytes the engine read, result) of one run."""
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux >= 4.0)
    before = _rss_kb("VmRSS")
    reads = _engine_reads(st)
    t0 = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t0
    after = _engine_reads(st)
    return seconds, (_rss_kb("VmHWM") - before) / 1024, {e: after[e] - reads[e] for e in _READ}, result


# --- building -------------------------------------------------------------------------------------------
def build(path: Path, n: int, m: int) -> dict[str, Any]:
    from ragtrace_store import open_store

    if path.exists():
        shutil.rmtree(path)
    st = open_store(str(path))
    out: dict[str, Any] = {"queries": n, "roots": m}
    t0 = time.perf_counter()
    q, s = st.table("queries"), st.table("spans")
    # every column is a function of the query's number i (the spans' subquery numbers them i, k)
    start = f"(toInt64({int(END.timestamp() * 1000) - SPAN_MS}) + intDiv(toInt64(i) * {SPAN_MS}, {n}))"
    tid = "lower(hex(sipHash128(i, 'trace')))"
    root = "lower(hex(sipHash64(i, 'root')))"
    chain = "sipHash64(i, 'chain') % 50 = 0"  # 2 %: an OpenInference chain, not the SDK
    rel = f"concat('v', toString(least(4, intDiv(i * 5, {n})) + 1))"
    route = "['/ask', '/ask', '/search', '/chat'][sipHash64(i, 'p') % 4 + 1]"
    st.command(f"INSERT INTO {q} (tenant, trace_id, span_id, query_id, service, release, environment, route, query, "
               "answer, answer_streamed, status_code, start_time, duration_ms, root_priority, received_at, kind) "
               f"SELECT '{CLEAN}', {tid}, {root}, concat('q', toString(i)), 'qa', {rel}, 'prod', {route}, "
               "concat('What does question ', toString(i), ' ask about?'), "
               "concat('The answer to it is ', toString(i), '.'), false, 'OK', "
               f"fromUnixTimestamp64Milli({start}, 'UTC'), 850.5, if({chain}, 2, 3), "
               f"fromUnixTimestamp64Milli({start} + 900, 'UTC'), 'CHAIN' FROM (SELECT number AS i FROM numbers({n}))")
    # the root span and three stage spans below it per query
    st.command(f"INSERT INTO {s} (tenant, trace_id, span_id, parent_span_id, name, kind, service, release, "
               "environment, start_time, end_time, status_code, status_message, attributes, events, resource, "
               f"received_at) SELECT '{CLEAN}', {tid}, if(k = 0, {root}, lower(hex(sipHash64(i, k)))), "
               f"if(k = 0, '', {root}), ['pipeline', 'retrieve', 'rerank', 'generate'][k + 1], "
               f"['CHAIN', 'RETRIEVER', 'RERANKER', 'LLM'][k + 1], 'qa', {rel}, 'prod', "
               f"fromUnixTimestamp64Milli({start} + 10 * k, 'UTC'), fromUnixTimestamp64Milli({start} + 850, 'UTC'), "
               f"'OK', '', '{{}}', '', '{{}}', fromUnixTimestamp64Milli({start} + 900, 'UTC') "
               f"FROM (SELECT intDiv(number, 4) AS i, number % 4 AS k FROM numbers({4 * n}))")
    for table in ("queries", "spans"):  # the same queries under the other tenant
        st.command(f"INSERT INTO {st.table(table)} SELECT * REPLACE ('{HOSTILE}' AS tenant) "
                   f"FROM (SELECT * FROM {st.table(table)} WHERE tenant = '{CLEAN}')")
    marked = _mark_chains(st, n)
    out["queries_seconds"] = round(time.perf_counter() - t0, 1)
    out["chains_marked"] = marked
    out["attack"] = attack(st, path, m)
    t0 = time.perf_counter()
    for table in ("queries", "spans", "query_roots", "other_roots", "stage_traces"):
        if st.query_rows("EXISTS TABLE " + st.table(table))[0][0]:
            st.command(f"OPTIMIZE TABLE {st.table(table)} FINAL")
    out["optimize_seconds"] = round(time.perf_counter() - t0, 1)
    out["rows"] = {t: dict(st.query_rows(f"SELECT tenant, count() FROM {st.table(t)} GROUP BY tenant"))
                   for t in ("queries", "spans", "query_roots") if st.query_rows("EXISTS TABLE " + st.table(t))[0][0]}
    st.close()
    return out


def _mark_chains(st: Any, n: int) -> int:
    """The chains' roots, written here rather than by the collector, are asked of the store as the
    collector's writer asks it (`ragtrace_store.query_roots.mark_stored`); a store without it (the code
    before query roots) needs nothing."""
    try:
        from ragtrace_store.query_roots import mark_stored
    except ImportError:
        return 0
    for tenant in (CLEAN, HOSTILE):
        ids = [r[0] for r in st.query_rows(f"SELECT trace_id FROM {st.table('queries')} WHERE tenant = "
                                           "{t:String} AND root_priority = 2", {"t": tenant})]
        mark_stored(st, tenant, ids)
    return len(ids)


def attack(st: Any, path: Path, m: int) -> dict[str, Any]:
    """M parentless spans without attributes, in OTLP requests of `PER_REQUEST` through the collector's
    decode path and writer, starting in the hour before the requests arrive (as a sender posting them
    now makes them): newer than all but the newest queries."""
    import random

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    import ragtrace_collector.writer as writer_module
    from ragtrace_collector.ingest import decode_and_assemble
    from ragtrace_collector.metrics import Metrics
    from ragtrace_collector.spool import Spool
    from ragtrace_collector.writer import Writer

    marking = [0.0]
    mark = getattr(writer_module, "mark_batch", None)
    if mark is not None:  # time the writer's decision which roots are queries
        def timed_mark(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return mark(*args, **kwargs)
            finally:
                marking[0] += time.perf_counter() - t0
        writer_module.mark_batch = timed_mark  # type: ignore[attr-defined]
    rng = random.Random(31)
    writer = Writer(st, Spool(path.parent / f"{path.name}-spool", max_bytes=1 << 34), Metrics())
    writer.start()
    received_ms = int(END.timestamp() * 1000)
    first_ns = (received_ms - 3_600_000) * 1_000_000
    requests = []
    try:
        for done in range(0, m, PER_REQUEST):
            k = min(PER_REQUEST, m - done)
            req = ExportTraceServiceRequest()
            spans = req.resource_spans.add().scope_spans.add().spans
            for _ in range(k):
                span = spans.add()
                span.trace_id = rng.randbytes(16)
                span.span_id = rng.randbytes(8)
                span.name = "x"
                span.start_time_unix_nano = first_ns + rng.randrange(3_600_000) * 1_000_000
                span.end_time_unix_nano = span.start_time_unix_nano + 1_000_000
            body = req.SerializeToString()
            marking[0] = 0.0
            t0 = time.perf_counter()
            rows, spooled = decode_and_assemble(body, "application/x-protobuf", None, HOSTILE, received_ms, 1 << 27)
            decoded = time.perf_counter() - t0
            writer.submit(HOSTILE, received_ms, spooled, rows)
            if not writer.flush(1800):
                raise RuntimeError("the writer did not write the attack's request")
            requests.append({"spans": k, "bytes": len(body), "decode_seconds": round(decoded, 2),
                             "written_seconds": round(time.perf_counter() - t0 - decoded, 2),
                             "deciding_query_roots_seconds": round(marking[0], 2) if mark is not None else None})
    finally:
        writer.stop(60)
        if mark is not None:
            writer_module.mark_batch = mark  # type: ignore[attr-defined]
    return {"requests": requests}


# --- the paths ------------------------------------------------------------------------------------------
def paths(path: Path, n: int, runs: int) -> list[dict[str, Any]]:
    from ragtrace_store import (
        SamplePlan,
        TraceFilter,
        TraceListing,
        count_listing,
        count_traces,
        encode_cursor,
        open_store,
        sample_traces,
    )

    st = open_store(str(path), migrate=False)
    depth = n // 2
    # the position after the (depth)th newest query: the same in both tenants
    deep_t, deep_id = st.query_rows(
        f"SELECT start_time, trace_id FROM {st.table('queries')} WHERE tenant = '{CLEAN}' "
        f"ORDER BY start_time DESC, trace_id ASC LIMIT 1 OFFSET {depth - 1}")[0]
    week = (END - timedelta(days=7), END - timedelta(days=6))

    def ids(records: Any) -> list[str]:
        return [r.trace_id for r in records]

    cases: list[tuple[str, Callable[[str], Any]]] = [
        ("list: first page of 50 (/api/traces, ragtrace traces)",
         lambda t: ids(st.read_traces(tenant=t, limit=50))),
        ("list: 5,000 newest (ragtrace traces --json --limit 5000)",
         lambda t: ids(st.read_traces(tenant=t, limit=5000))),
        (f"page deep: 50 after the {depth:,}th (a cursor)",
         lambda t: ids(st.read_traces(tenant=t, limit=50, cursor=encode_cursor(
             TraceListing(TraceFilter(tenant=t)), deep_t, deep_id)))),
        ("list: a day a week ago, release v4, first 50",
         lambda t: ids(st.read_traces(tenant=t, release="v4", since=week[0], until=week[1], limit=50))),
        ("count: the footer's (exact up to 100,000 rows)",
         lambda t: count_traces(st, TraceFilter(tenant=t)).queries),
        ("count: exact (the web list's total)",
         lambda t: count_listing(st, TraceListing(TraceFilter(tenant=t)), exact_up_to=None).queries),
        ("count: exact, release v3",
         lambda t: count_listing(st, TraceListing(TraceFilter(tenant=t, release="v3")), exact_up_to=None).queries),
        ("sample: 500 per release (audit --sample 500 --stratify release)",
         lambda t: sample_traces(st, TraceFilter(tenant=t), SamplePlan(sample=500, stratify=("release",))).trace_ids),
        ("sample: 500 (audit --sample 500)",
         lambda t: sample_traces(st, TraceFilter(tenant=t), SamplePlan(sample=500)).trace_ids),
        ("sample: rate 0.01 (audit --rate 0.01)",
         lambda t: sample_traces(st, TraceFilter(tenant=t), SamplePlan(rate=0.01)).trace_ids),
    ]
    out = []
    for name, fn in cases:
        best = {CLEAN: float("inf"), HOSTILE: float("inf")}
        rss = {CLEAN: 0.0, HOSTILE: 0.0}
        reads: dict[str, dict[str, int]] = {}
        result: dict[str, Any] = {}
        for _ in range(runs):
            for tenant in (CLEAN, HOSTILE):
                seconds, extra, read, got = _run(st, lambda: fn(tenant))  # noqa: B023 -- called at once
                best[tenant] = min(best[tenant], seconds)
                rss[tenant] = max(rss[tenant], extra)
                reads[tenant] = read  # the same every run
                result[tenant] = got
        size = len(result[CLEAN]) if isinstance(result[CLEAN], list) else result[CLEAN]
        row = {"path": name, "clean_seconds": round(best[CLEAN], 4), "hostile_seconds": round(best[HOSTILE], 4),
               "ratio": round(best[HOSTILE] / best[CLEAN], 2), "clean_extra_rss_mb": round(rss[CLEAN], 1),
               "hostile_extra_rss_mb": round(rss[HOSTILE], 1), "clean_read": reads[CLEAN],
               "hostile_read": reads[HOSTILE],
               "read_bytes_ratio": round(reads[HOSTILE]["SelectedBytes"] / max(1, reads[CLEAN]["SelectedBytes"]), 2),
               "result": size, "same_result": result[CLEAN] == result[HOSTILE]}
        print(f"{name:<66} {row['clean_seconds']:>8.3f} {row['hostile_seconds']:>8.3f} {row['ratio']:>6} "
              f"{reads[CLEAN]['SelectedBytes'] / 2**20:>9.1f} {reads[HOSTILE]['SelectedBytes'] / 2**20:>9.1f} "
              f"{row['read_bytes_ratio']:>6} {row['clean_extra_rss_mb']:>7.1f} {row['hostile_extra_rss_mb']:>7.1f} "
              f"{'yes' if row['same_result'] else 'NO'}  {str(size)[:40]}", file=sys.stderr, flush=True)
        out.append(row)
    st.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=1_000_000)
    ap.add_argument("--roots", type=int, default=1_000_000, help="non-query roots posted to the hostile tenant")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", type=Path, help="where the store is built (kept, and reused when built.json is there)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    base = a.dir or Path(tempfile.mkdtemp(prefix="hostile-store-"))
    where = base / f"{a.queries}-{a.roots}"
    try:
        marker = where.parent / f"{where.name}.built.json"
        if marker.exists():
            built = json.loads(marker.read_text())
        else:
            t0 = time.perf_counter()
            built = build(where, a.queries, a.roots)
            built["wall_seconds"] = round(time.perf_counter() - t0, 1)
            marker.write_text(json.dumps(built))
        print(f"== {a.queries:,} queries; {a.roots:,} roots that are not queries on the hostile tenant; built in "
              f"{built['wall_seconds']} s", file=sys.stderr)
        for r in built["attack"]["requests"]:
            print(f"   attack request: {r['spans']:,} spans, {r['bytes'] / 2**20:.1f} MiB: decoded in "
                  f"{r['decode_seconds']} s, written in {r['written_seconds']} s (deciding query roots: "
                  f"{r['deciding_query_roots_seconds']} s)", file=sys.stderr)
        print(f"{'path':<66} {'clean s':>8} {'hostile':>8} {'ratio':>6} {'read MiB':>9} {'read MiB':>9} "
              f"{'ratio':>6} {'+RSS c':>7} {'+RSS h':>7} same", file=sys.stderr)
        measured = paths(where, a.queries, a.runs)
        report = {"build": built, "paths": measured, "pid": os.getpid()}
        if a.json:
            a.json.write_text(json.dumps(report, indent=2, default=str) + "\n")
    finally:
        if not a.keep and a.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
