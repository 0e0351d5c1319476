"""The store's read paths at 1 M and 10 M traces, each beside the engine's own floor in the same run.

Builds an embedded store per size with the engine itself (``INSERT ... SELECT FROM numbers()``, not
through HTTP): ``queries`` rows for N traces over the 30 days before 2026-10-31 (one monthly
partition, merged into large parts, so a window has to be found, not pruned by part), five releases
deployed one after another (10 % of each release's traffic overlaps the next), four routes (one
rare); then, as unmerged parts, a retried copy of 1 % of the roots and a gateway's HTTP root claimant
(another service, release and route) over 0.5 %; ``documents`` for a 1 % slice (20 retrieved, 5
reranked, 5 context each) with 50,000 passages; and ``labels`` of that slice under one manifest, half of
whose query ids are golden questions asked in every release, so compare's read pairs about 43 % of them. The
store is written by the schema before migration 0005, then migrated (timed: the migration's cost).

Each path runs the code the product runs (`sample_traces`, `read_traces`, `count_traces`,
`releases_manifests` and `load_pair`), and its floor is a bare SQL query returning exactly the same
ids/rows on this data (checked equal), which may use what the generator knows (each trace's SDK root
is its first-written row with root_priority 3) and every key the store has. Both run alternately
three times in one worker process; the best time of each is kept, and the ratio path / floor
printed. Peak RSS: the worker's high-water mark is reset (/proc/self/clear_refs) before each run of
a path, so "extra RSS" is what that path added to the process (engine included: the store is
embedded), and "peak" is the process's high-water mark during it. ``ragtrace traces --json`` runs as
its own process (the CLI), at two limits, for its throughput and peak RSS. ``--without-keys`` also
times each path with the projections switched off (``optimize_use_projections=0``), which is what
the keys are worth. Compare's read is measured a second time beside a fairer floor that also keeps each
label's newest version and parses the parts of ``detail`` a comparison uses (the generator writes one version
and the first floor reads ``detail`` raw); the target is judged against the first.

    .venv/bin/python benchmarks/store_scale.py [--traces 1000000 10000000] [--dir DIR] [--json out.json]
        [--only rate,window,compare]

Building 10 M takes a few minutes on 2 cores; stores are kept in DIR (default a temporary directory,
removed unless --keep) and reused when DIR/N/built.json exists.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
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
TENANT = "bench"
MANIFEST = "bench-manifest-01"
RELEASES = ("v1", "v2", "v3", "v4", "v5")
#: bumped when the generated data changes: a kept store of another version is built again
GENERATOR = 2


# --- the worker's measurements ------------------------------------------------------------------------
def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def _reset_peak() -> None:
    # "5" resets VmHWM to the current RSS (Linux >= 4.0), so a path's peak is its own
    Path("/proc/self/clear_refs").write_text("5")


def measure(fn: Callable[[], Any], runs: int = 3) -> tuple[float, float, float, Any]:
    """(best seconds, extra peak RSS MB over the runs, the process's peak RSS MB, the last result)."""
    best, extra, peak, result = float("inf"), 0.0, 0.0, None
    for _ in range(runs):
        _reset_peak()
        before = _rss_kb("VmRSS")
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
        extra = max(extra, (_rss_kb("VmHWM") - before) / 1024)
        peak = max(peak, _rss_kb("VmHWM") / 1024)
    return best, extra, peak, result


# --- building -------------------------------------------------------------------------------------------
def build(path: Path, n: int) -> dict[str, Any]:
    from ragtrace_evaluator.audit.failure_modes import Evidence, label_trace
    from ragtrace_store import GoldSource, Store, load_migrations, open_store, utc_now

    if path.exists():
        shutil.rmtree(path)
    st: Store = open_store(str(path), migrate=False)
    timings: dict[str, float] = {}

    def timed(name: str, sql: str, params: dict[str, Any] | None = None) -> None:
        t0 = time.perf_counter()
        st.command(sql, params)
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0

    # the previous schema: every migration but 0005, recorded as Store.migrate records them
    st.command(f"CREATE DATABASE IF NOT EXISTS {st.database}")
    st.command(f"CREATE TABLE IF NOT EXISTS {st.table('schema_migrations')} (version UInt32, name String, "
               "applied_at DateTime64(3, 'UTC')) ENGINE = ReplacingMergeTree ORDER BY version")
    for mig in load_migrations("single"):
        if mig.version != 5:
            for stmt in mig.statements:
                st.command(stmt.replace("{db}", st.database))
            st.insert("schema_migrations", [(mig.version, mig.name, utc_now())], ["version", "name", "applied_at"])
    q, d = st.table("queries"), st.table("documents")
    # evenly over the whole span, up to its end (a rounded step would leave the last minutes empty)
    start = f"(toInt64({int(END.timestamp() * 1000) - SPAN_MS}) + intDiv(toInt64(number) * {SPAN_MS}, {n}))"
    tid = "lower(hex(sipHash128(number, 'trace')))"
    rel = (f"concat('v', toString(least(4, intDiv(number * 5, {n}) + if(sipHash64(number, 'r') % 10 = 0, 1, 0)) "
           "+ 1))")
    route = "['/ask', '/ask', '/search', '/chat', '/ask', '/search', '/ask', '/rare'][sipHash64(number, 'p') % 8 + 1]"
    cols = ("tenant, trace_id, span_id, query_id, service, release, environment, route, query, answer, "
            "answer_streamed, status_code, start_time, duration_ms, root_priority, received_at, kind")
    timed("queries", f"INSERT INTO {q} ({cols}) SELECT '{TENANT}', {tid}, lower(hex(sipHash64(number, 'root'))), "
          f"concat('q', toString(number)), 'qa', {rel}, 'prod', if({route} = '/rare' AND number % 50 != 0, "
          f"'/ask', {route}), concat('What does question ', toString(number), ' ask about?'), "
          "concat('The answer to it is ', toString(number), '. ', repeat('It is well documented. ', 6)), false, 'OK', "
          f"fromUnixTimestamp64Milli({start}, 'UTC'), 850.5, 3, fromUnixTimestamp64Milli({start} + 900, 'UTC'), "
          f"'CHAIN' FROM numbers({n})")
    # merged, as a month of traffic is after its merges: large parts, each spanning the month
    timed("optimize", f"OPTIMIZE TABLE {q} FINAL")
    # what production leaves unmerged: retried roots (1 %), a gateway's root claimant (0.5 %)
    timed("duplicates", f"INSERT INTO {q} ({cols}) SELECT * REPLACE (received_at + INTERVAL 5 SECOND AS received_at) "
          f"FROM {q} WHERE tenant = '{TENANT}' AND sipHash64(trace_id, 'dup') % 100 = 0")
    timed("duplicates", f"INSERT INTO {q} ({cols}) SELECT tenant, trace_id, 'gw', '', 'gateway', 'gw-1', 'prod', "
          "'/gw', '', NULL, false, 'OK', start_time - INTERVAL 3 MILLISECOND, 900, 1, received_at + INTERVAL 1 SECOND, "
          f"'SERVER' FROM {q} WHERE tenant = '{TENANT}' AND sipHash64(trace_id, 'gw') % 200 = 0")
    # documents for a 1 % slice; passages once per hash
    p = st.table("passages")
    timed("documents", f"INSERT INTO {p} (tenant, content_hash, content, content_length, truncated, first_seen) "
          f"SELECT '{TENANT}', lower(hex(sipHash64(number, 'passage'))), repeat(concat('Passage ', toString(number), "
          "' says something a query might need. '), 8) AS c, length(c), false, toDateTime64('2026-10-01', 3, 'UTC') "
          "FROM numbers(50000)")
    slice_n = n // 100
    docs = ("SELECT '{t}', {tid}, s, stage, r, concat('doc-', toString(pidx)), 1 - r / 40, "
            "lower(hex(sipHash64(pidx, 'passage'))), '', tk, fromUnixTimestamp64Milli({start}, 'UTC'), "
            "fromUnixTimestamp64Milli({start} + 900, 'UTC') FROM (SELECT intDiv(number, 30) * 100 AS number, "
            "number % 30 AS k, multiIf(k < 20, 'retrieved', k < 25, 'reranked', 'context') AS stage, "
            "multiIf(k < 20, k, k < 25, k - 20, k - 25) AS r, multiIf(k < 20, 's-ret', k < 25, 's-rr', 's-gen') AS s, "
            "if(stage = 'reranked', 5, NULL) AS tk, sipHash64(intDiv(number, 30), k) % 50000 AS pidx "
            f"FROM numbers({slice_n * 30}))")
    timed("documents", f"INSERT INTO {d} (tenant, trace_id, span_id, stage, rank, doc_id, score, content_hash, "
          "metadata, top_k, start_time, received_at) " + docs.format(t=TENANT, tid=tid, start=start))
    # labels of that slice under one manifest (the detail JSON is a real record's)
    ev = Evidence(("doc-1", "doc-2"), ("doc-1", "doc-2"), ("doc-1",), frozenset({"doc-1"}), GoldSource.SPAN)
    template = label_trace(ev, None, answer="an answer", reference=None).to_record(
        trace_id="@T@", query_id="@Q@", release="@R@", service="qa", manifest_id=MANIFEST).to_json_line()
    lab = st.table("labels")
    timed("labels", f"INSERT INTO {lab} (tenant, manifest_id, trace_id, query_id, service, release, failure_mode, "
          "gold_in_pool, gold_in_context, ranking_ok, generation, passed, score, confidence, detail, trace_time, "
          f"labelled_at) SELECT tenant, '{MANIFEST}', trace_id, {_paired_query_id(n)} AS qid, service, release, "
          "'ok', true, true, true, '', true, 1.0, 1.0, replaceOne(replaceOne(replaceOne({tpl:String}, '@T@', "
          "trace_id), '@Q@', qid), '@R@', release), start_time, toDateTime64('2026-11-01', 3, 'UTC') FROM "
          f"{q} WHERE tenant = '{TENANT}' AND root_priority = 3 AND trace_id IN (SELECT trace_id FROM {d} "
          f"WHERE tenant = '{TENANT}')", {"tpl": template})
    size_before = _size(st)
    t0 = time.perf_counter()
    applied = st.migrate()
    while st.query_rows("SELECT count() FROM system.mutations WHERE database = {d:String} AND NOT is_done",
                        {"d": st.database})[0][0]:
        time.sleep(0.2)
    migrate_s = time.perf_counter() - t0
    assert [m.version for m in applied] == [5], applied
    rows = st.query_rows(f"SELECT count(), uniqExact(trace_id) FROM {q}")[0]
    out = {"traces": n, "build_seconds": timings, "migrate_0005_seconds": round(migrate_s, 1),
           "queries_rows": int(rows[0]), "distinct_traces": int(rows[1]), "bytes_before_0005": size_before,
           "bytes_after_0005": _size(st)}
    st.close()
    return out


def _paired_query_id(n: int) -> str:
    """The labels' query id (SQL over the root row's): half of each release's offsets into its own
    range of trace numbers (the same half in every release, chosen by offset) are golden questions
    asked in every release, ``g<offset>``, so they pair across releases; the rest, and the traces
    that spilled into the next release, keep their own id and pair with nothing."""
    num = "toUInt64(substring(query_id, 2))"
    idx = f"intDiv({num} * 5, {n})"
    offset = f"({num} - {idx} * {n // 5})"
    return (f"if({idx} = toUInt64(substring(release, 2)) - 1 AND sipHash64({offset}, 'golden') % 2 = 0, "
            f"concat('g', toString({offset})), query_id)")


def _size(st: Any) -> dict[str, int]:
    return {t: int(b) for t, b in st.query_rows(
        "SELECT table, sum(bytes_on_disk) FROM system.parts WHERE database = {d:String} AND active GROUP BY table",
        {"d": st.database})}


# --- the paths and their floors -------------------------------------------------------------------------
def paths(path: Path, without_keys: bool, only: str = "") -> list[dict[str, Any]]:
    from ragtrace_evaluator.compare.records import load_pair, releases_manifests
    from ragtrace_store import SamplePlan, TraceFilter, count_traces, open_store, sample_traces

    st = open_store(str(path), migrate=False)
    q, d, p, lab = st.table("queries"), st.table("documents"), st.table("passages"), st.table("labels")
    everyone = TraceFilter(tenant=TENANT)
    hour = TraceFilter(tenant=TENANT, since=END - timedelta(hours=1), until=END)
    rate_top = 2**64 // 1000 + 1  # u < 0.001 of the range: the sampler's ceil(0.001 * 2^64)

    def rows(sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return st.query_rows(sql, params)

    # exactly one row per trace: the SDK root as first written (retried copies came 5 s later)
    sdk = f"tenant = '{TENANT}' AND root_priority = 3 AND received_at = start_time + toIntervalMillisecond(900)"
    by_release = (f"SELECT arrayJoin(groupArraySorted(1000)((xxHash64(trace_id), trace_id))).2 AS t FROM {q} "
                  f"WHERE {sdk} GROUP BY release")
    state: dict[str, Any] = {}

    def rate_path() -> list[str]:
        state["rate"] = sample_traces(st, everyone, SamplePlan(rate=0.001)).trace_ids
        return state["rate"]

    def rate_ids() -> list[str]:  # the rate sample's, chosen once (also when --only leaves its row out)
        return state["rate"] if "rate" in state else rate_path()

    def compare_path() -> tuple[list[str], list[str]]:
        # as `ragtrace compare --baseline v4 --candidate v5` reads: each side's manifest, then the pair
        found = releases_manifests(st, ["v4", "v5"], tenant=TENANT)
        a, b = load_pair(st, ("v4", found["v4"][0]), ("v5", found["v5"][0]), tenant=TENANT)
        return sorted(x.trace_id for x in (*a.labels, *b.labels)), sorted((*a.unpaired, *b.unpaired))

    cases: list[tuple[str, Callable[[], Any], Callable[[], Any], str]] = [
        ("audit selection, rate 0.001", rate_path,
         lambda: [r[0] for r in rows(f"SELECT trace_id FROM {q} WHERE {sdk} AND xxHash64(trace_id) < "
                                     f"{rate_top}")], "set"),
        ("audit selection, 1000 per release (5)",
         lambda: sample_traces(st, everyone, SamplePlan(sample=1000, stratify=("release",))).trace_ids,
         lambda: [r[0] for r in rows(by_release)], "set"),
        ("audit selection, 1000 per release, shard 3/8",
         lambda: sample_traces(st, everyone, SamplePlan(sample=1000, stratify=("release",), shard=(3, 8))).trace_ids,
         lambda: [r[0] for r in rows(f"SELECT t FROM ({by_release}) WHERE xxHash64(concat('ragtrace-shard:', t)) "
                                     "% 8 = 3")], "set"),
        ("reading the chosen traces' documents (rate 0.001 sample)",
         lambda: sorted((r.trace_id, len(r.retrieved)) for r in st.read_traces(tenant=TENANT, trace_ids=rate_ids(),
                                                                                 with_content=True)),
         lambda: _floor_docs(rows, q, d, p, rate_ids(), sdk), "docs"),
        ("traces --release v3 --limit 50",
         lambda: [r.trace_id for r in st.read_traces(tenant=TENANT, release="v3", limit=50)],
         lambda: [r[0] for r in rows(f"SELECT trace_id, query_id, service, release, environment, route, start_time, "
                                     f"query, answer FROM {q} WHERE {sdk} AND release = 'v3' ORDER BY start_time DESC, "
                                     "trace_id LIMIT 50")], "list"),
        ("traces footer: the count of release v3",
         lambda: count_traces(st, TraceFilter(tenant=TENANT, release="v3")).queries,
         lambda: _floor_count(rows, q, sdk), "count"),
        ("last-hour window, every trace (audit --since -1h --rate 1)",
         lambda: sample_traces(st, hour, SamplePlan(rate=1.0)).trace_ids,
         lambda: [r[0] for r in rows(f"SELECT trace_id FROM {q} WHERE {sdk} AND start_time >= "
                                     "{s:DateTime64(3, 'UTC')} AND start_time < {u:DateTime64(3, 'UTC')}",
                                     {"s": hour.since, "u": hour.until})], "set"),
        ("last-hour window, 1000 of it (audit --since -1h --sample 1000)",
         lambda: sample_traces(st, hour, SamplePlan(sample=1000)).trace_ids,
         lambda: [r[0] for r in rows(f"SELECT trace_id FROM {q} WHERE {sdk} AND start_time >= "
                                     "{s:DateTime64(3, 'UTC')} AND start_time < {u:DateTime64(3, 'UTC')} "
                                     "ORDER BY xxHash64(trace_id), trace_id LIMIT 1000",
                                     {"s": hour.since, "u": hour.until})], "set"),
        ("compare's read of two releases (v4, v5), paired in the engine", compare_path,
         lambda: _floor_compare(rows, lab), "sorted"),
        # a second, fairer floor for the same path (reported beside the first, which the target uses)
        ("compare's read, against a floor with the newest version and the parsed detail", compare_path,
         lambda: _floor_compare(rows, lab, fair=True), "sorted"),
    ]
    out = []
    for name, path_fn, floor_fn, kind in cases:
        if only and not any(word in name for word in only.split(",")):
            continue
        path_fn(), floor_fn()  # warm both (caches, the first query's planning)
        # alternately, so a change in the machine's load falls on both
        t_path = rss_path = peak_path = t_floor = rss_floor = float("inf")
        for _ in range(3):
            t, extra, peak, got = measure(path_fn, runs=1)
            t_path, rss_path, peak_path = min(t_path, t), _max(rss_path, extra), _max(peak_path, peak)
            t, extra, _peak, want = measure(floor_fn, runs=1)
            t_floor, rss_floor = min(t_floor, t), _max(rss_floor, extra)
        same = _same(kind, got, want)
        row = {"path": name, "seconds": round(t_path, 4), "floor_seconds": round(t_floor, 4),
               "ratio": round(t_path / t_floor, 2) if t_floor else None, "extra_rss_mb": round(rss_path, 1),
               "peak_rss_mb": round(peak_path, 1), "floor_extra_rss_mb": round(rss_floor, 1),
               "result_size": _size_of(got), "same_result": same}
        if without_keys:
            st.client.set_client_setting("optimize_use_projections", 0)
            row["seconds_without_keys"] = round(measure(path_fn, runs=1)[0], 4)
            row["floor_seconds_without_keys"] = round(measure(floor_fn, runs=1)[0], 4)
            st.client.set_client_setting("optimize_use_projections", 1)
        print(json.dumps(row), file=sys.stderr, flush=True)
        out.append(row)
    st.close()
    return out


def _floor_count(rows: Callable[..., list[tuple[Any, ...]]], q: str, sdk: str) -> int:
    """What the footer says: above EXACT_COUNT_ROWS matching root rows, their number (an upper bound,
    and said so); up to it, the traces exactly."""
    from ragtrace_store.listing import EXACT_COUNT_ROWS

    bound = int(rows(f"SELECT count() FROM {q} WHERE tenant = '{TENANT}' AND release = 'v3'")[0][0])
    if bound > EXACT_COUNT_ROWS:
        return bound
    return int(rows(f"SELECT count() FROM {q} WHERE {sdk} AND release = 'v3'")[0][0])


def _floor_compare(rows: Callable[..., list[tuple[Any, ...]]], lab: str, *,
                   fair: bool = False) -> tuple[list[str], list[str]]:
    """The paired labels of v4 and v5 read bare (one version per label, no duplicate query ids in a
    release: what the generator writes), and the query ids of each that the other lacks. ``fair``
    also does what the result needs and the generator's data do not show: the newest version of each
    label (LIMIT 1 BY over the key, read in key order) and the parts of the detail a comparison
    uses, parsed."""
    if fair:
        lab = (f"(SELECT * FROM {lab} WHERE tenant = '{TENANT}' AND manifest_id = '{MANIFEST}' ORDER BY tenant, "
               "manifest_id, trace_id, labelled_at DESC LIMIT 1 BY manifest_id, trace_id)")
    ids = {r: f"(SELECT query_id FROM {lab} WHERE tenant = '{TENANT}' AND release = '{r}')" for r in ("v4", "v5")}
    both = f"query_id IN {ids['v4']} AND query_id IN {ids['v5']}"
    detail = ("JSONExtract(detail, 'Tuple(metrics String, incomplete String, generation Tuple(refusal_justified "
              "String))'), isValidJSON(detail)" if fair else "detail")
    paired = rows(f"SELECT manifest_id, trace_id, query_id, release, service, failure_mode, gold_in_pool, "
                  f"gold_in_context, passed, score, confidence, {detail} FROM {lab} WHERE tenant = '{TENANT}' AND "
                  f"release IN ('v4', 'v5') AND {both}")
    alone = rows(f"SELECT groupArray(query_id) FROM {lab} WHERE tenant = '{TENANT}' AND release IN ('v4', 'v5') "
                 f"AND NOT ({both})")
    return sorted(r[1] for r in paired), sorted(alone[0][0])


def _max(a: float, b: float) -> float:
    return b if a == float("inf") else max(a, b)


def _floor_docs(rows: Callable[..., list[tuple[Any, ...]]], q: str, d: str, p: str, ids: list[str],
                sdk: str) -> list[tuple[str, int]]:
    """The same rows read bare: the traces' root rows, and their documents with passage text."""
    roots = rows(f"SELECT trace_id, query_id, service, release, environment, route, start_time, query, answer "
                 f"FROM {q} WHERE {sdk} AND trace_id IN {{ids:Array(String)}}", {"ids": ids})
    assert len(roots) == len(ids)
    got = rows(f"SELECT d.trace_id, countIf(d.stage = 'retrieved'), count(pp.content) FROM {d} AS d LEFT JOIN "
               f"(SELECT content_hash, any(content) AS content FROM {p} WHERE tenant = '{TENANT}' AND content_hash IN "
               f"(SELECT content_hash FROM {d} WHERE tenant = '{TENANT}' AND trace_id IN {{ids:Array(String)}}) "
               "GROUP BY content_hash) AS pp ON pp.content_hash = d.content_hash WHERE d.tenant = "
               f"'{TENANT}' AND d.trace_id IN {{ids:Array(String)}} GROUP BY d.trace_id", {"ids": ids})
    with_docs = {t: int(n) for t, n, _c in got}
    return sorted((t, with_docs.get(t, 0)) for t in ids)


def _same(kind: str, got: Any, want: Any) -> bool:
    if kind == "set":
        return sorted(got) == sorted(want) and len(set(got)) == len(got)
    return bool(got == want)


def _size_of(value: Any) -> int:
    if isinstance(value, tuple):  # compare's: (the paired labels, the unpaired query ids)
        return len(value[0])
    return len(value) if isinstance(value, list) else int(value)


def cli_rss(path: Path, limit: int) -> dict[str, Any]:
    """`ragtrace traces --json --limit L` as its own process: wall time and peak RSS."""
    exe = str(Path(sys.executable).with_name("ragtrace"))
    t0 = time.perf_counter()
    proc = subprocess.Popen([exe, "traces", "--store", str(path), "--tenant", TENANT, "--json", "--limit", str(limit)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    lines = sum(1 for _ in proc.stdout)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"limit": limit, "lines": lines, "seconds": round(time.perf_counter() - t0, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "exit": proc.returncode}


# --- the driver ---------------------------------------------------------------------------------------------
def _worker(args: list[str]) -> Any:
    """Run one phase in a fresh process (an embedded store belongs to one process; a fresh process
    also starts every peak-RSS figure from the same place) and return what it printed."""
    out = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True, check=False)
    sys.stderr.write(out.stderr)
    if out.returncode:
        sys.exit(f"worker {args} failed ({out.returncode})")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--dir", type=Path)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--without-keys", action="store_true", help="also time each path with projections off")
    ap.add_argument("--cli-limits", type=int, nargs="*", default=[1000, 50_000],
                    help="limits of the `ragtrace traces --json` runs (none: skip them)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", default="", help="measure only the paths whose name contains one of these "
                    "comma-separated words (e.g. compare,window)")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        phase, where = a.worker[0], Path(a.worker[1])
        if phase == "build":
            print(json.dumps(build(where, int(a.worker[2]))))
        else:
            print(json.dumps(paths(where, a.worker[2] == "1", a.worker[3] if len(a.worker) > 3 else "")))
        return
    base = a.dir or Path(tempfile.mkdtemp(prefix="store-scale-"))
    report = []
    try:
        for n in a.traces:
            where = base / str(n)
            marker = where / "built.json"
            built = json.loads(marker.read_text()) if marker.exists() else {}
            if built.get("generator") != GENERATOR:  # none yet, or built by another generator: build
                t0 = time.perf_counter()
                built = _worker(["build", str(where), str(n)])
                built["wall_seconds"] = round(time.perf_counter() - t0, 1)
                built["generator"] = GENERATOR
                marker.write_text(json.dumps(built))
            measured = _worker(["paths", str(where), "1" if a.without_keys else "0", a.only])
            cli = [cli_rss(where, limit) for limit in a.cli_limits]
            report.append({"build": built, "paths": measured, "traces_json": cli})
            _print(built, measured, cli)
    finally:
        if not a.keep and a.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    if a.json:
        a.json.write_text(json.dumps(report, indent=2) + "\n")


def _print(built: dict[str, Any], measured: list[dict[str, Any]], cli: list[dict[str, Any]]) -> None:
    n = built["traces"]
    b = built["build_seconds"]
    print(f"\n== {n:,} traces: built in {built.get('wall_seconds', '?')} s (queries {b['queries']:.0f} s, optimize "
          f"{b['optimize']:.0f} s, documents {b['documents']:.0f} s, labels {b['labels']:.0f} s); migration 0005 "
          f"{built['migrate_0005_seconds']} s; queries on disk {built['bytes_before_0005']['queries'] / 2**20:.0f} -> "
          f"{built['bytes_after_0005']['queries'] / 2**20:.0f} MiB; {built['queries_rows']:,} root rows for "
          f"{built['distinct_traces']:,} traces")
    keys = "seconds_without_keys" in measured[0]
    print(f"{'path':<62} {'s':>8} {'floor s':>8} {'ratio':>6} {'+RSS MB':>8} {'peak MB':>8} {'rows':>7} same"
          + (f" {'s, no keys':>11} {'floor, no keys':>14}" if keys else ""))
    for r in measured:
        print(f"{r['path']:<62} {r['seconds']:>8.3f} {r['floor_seconds']:>8.3f} {r['ratio']:>6} "
              f"{r['extra_rss_mb']:>8.1f} {r['peak_rss_mb']:>8.1f} {r['result_size']:>7} "
              f"{'yes' if r['same_result'] else 'NO'}"
              + (f" {r['seconds_without_keys']:>11.3f} {r['floor_seconds_without_keys']:>14.3f}" if keys else ""))
    for c in cli:
        print(f"ragtrace traces --json --limit {c['limit']}: {c['lines']} lines in {c['seconds']} s "
              f"({c['lines'] / c['seconds']:.0f} traces/s), peak RSS {c['peak_rss_mb']} MB (exit {c['exit']})")
    print(f"load average {os.getloadavg()[0]:.1f}; median ratio {statistics.median(r['ratio'] for r in measured)}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()
