"""The cost of the periodic audit's metrics at 1 M labelled traces, as ratios taken in the same run.

Targets (issue 34): computing the metrics (the window's counts, the previous window, the anchor's
counts, drift, the rows kept in the store: `judge_window`) costs at most 5 % of a periodic audit's
time (`run_periodic_audit`: sampling and labelling included), and ``GET /metrics`` answers within
100 ms.

The store (embedded chDB, in a temporary directory): ``--traces`` (1 M) traces over the 30 days before
the audited hour, every one labelled under the periodic audit's own labeller manifest (3 services x 5
releases, the failure modes drawn per trace from a fixed mix), written by the engine
(``INSERT ... SELECT FROM numbers()``); then, per round, ``--window`` real traces (HotpotQA dev
questions with their passages and a 3-sentence answer, a third of them with a changed number; built
as `audit_throughput.py` builds them and assembled by the collector's own code) in the current hour,
of which the periodic audit labels ``--sample`` with the offline labeller. The anchor is a release
of the bulk (about 70,000 labels of that service).

Measured:
- each round: `run_periodic_audit` over the round's window, and the part of it that is
  `judge_window` (the metrics' computation); the ratio of the two;
- the worst case: `judge_window` over a window holding every one of the 1 M labels;
- ``/metrics`` of the real `ragtrace serve` app (uvicorn on loopback) with the gauges at the
  cardinality bound (20 services x 5 releases, with drift), ``--scrapes`` requests: median, p95 and
  max latency; and rendering the exposition in-process.

The machine is shared: the load average before and after is printed beside the figures.

    .venv/bin/python benchmarks/audit_metrics.py [--traces 1000000] [--window 400] [--sample 200]
        [--rounds 2] [--scrapes 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
# tests/otlp_builders.py and audit_throughput's trace builder: the repository root on the path
sys.path.insert(0, str(ROOT))

TENANT = "default"
SERVICES = ("qa", "search", "chat")
RELEASES = ("v1", "v2", "v3", "v4", "v5")
#: the bulk's failure-mode mix (per mille): retrieval_gap, rank_inversion, under_use, fabrication, then ok
MIX = ((50, "retrieval_gap"), (100, "rank_inversion"), (140, "under_use"), (220, "fabrication"))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def manifest_of_the_periodic_audit(store: Any) -> str:
    """The manifest id `run_audit` uses with its defaults (what `ragtrace serve` audits under), from an
    audit of an empty window."""
    from ragtrace_evaluator.audit.run import run_audit

    far = datetime.now(UTC) + timedelta(days=3650)
    return str(run_audit(store, tenant=TENANT, since=far, until=far + timedelta(hours=1), sample=1)["manifest_id"])


def bulk(store: Any, n: int, manifest_id: str, end: datetime) -> float:
    """``n`` traces over the 30 days before ``end``, each with its label under ``manifest_id``."""
    from ragtrace_evaluator.audit.failure_modes import Evidence, label_trace
    from ragtrace_store import GoldSource

    t0 = time.perf_counter()
    span_ms = 30 * 86_400_000
    end_ms = int(end.timestamp() * 1000)
    start = f"(toInt64({end_ms - span_ms}) + intDiv(toInt64(number) * {span_ms}, {n}))"
    tid = "lower(hex(sipHash128(number, 'trace')))"
    service = "['qa', 'search', 'chat'][sipHash64(number, 's') % 3 + 1]"
    release = f"concat('v', toString(least(4, intDiv(number * 5, {n})) + 1))"
    q = store.table("queries")
    store.command(
        f"INSERT INTO {q} (tenant, trace_id, span_id, query_id, service, release, environment, route, query, answer, "
        "answer_streamed, status_code, start_time, duration_ms, root_priority, received_at, kind) "
        f"SELECT '{TENANT}', {tid}, lower(hex(sipHash64(number, 'root'))), concat('q', toString(number)), {service}, "
        f"{release}, 'prod', '/ask', concat('question ', toString(number)), 'an answer.', false, 'OK', "
        f"fromUnixTimestamp64Milli({start}, 'UTC'), 800, 3, fromUnixTimestamp64Milli({start} + 900, 'UTC'), 'CHAIN' "
        f"FROM numbers({n})")
    ev = Evidence(("d1", "d2"), ("d1", "d2"), ("d1",), frozenset({"d1"}), GoldSource.SPAN)
    template = label_trace(ev, None, answer="an answer", reference=None).to_record(
        trace_id="@T@", query_id="@Q@", release="@R@", service="@S@", manifest_id=manifest_id).to_json_line()
    cuts = []
    acc = 0
    for share, name in MIX:
        acc += share
        cuts.append((acc, name))
    mode = "multiIf(" + ", ".join(f"h < {c}, '{m}'" for c, m in cuts) + ", 'ok')"
    lab = store.table("labels")
    store.command(
        f"INSERT INTO {lab} (tenant, manifest_id, trace_id, query_id, service, release, failure_mode, gold_in_pool, "
        "gold_in_context, ranking_ok, generation, passed, score, confidence, detail, trace_time, labelled_at) "
        f"SELECT tenant, '{manifest_id}', trace_id, query_id, service, release, m, m != 'retrieval_gap', "
        "m NOT IN ('retrieval_gap', 'rank_inversion'), m != 'rank_inversion', if(m = 'retrieval_gap', '', "
        "multiIf(m = 'fabrication', 'contradicted', m = 'under_use', 'abstained', 'entailed')), m = 'ok', "
        "if(m = 'ok', 1.0, 0.0), 0.9, replaceOne(replaceOne(replaceOne({tpl:String}, '@T@', trace_id), '@Q@', "
        "query_id), '@R@', release), start_time, start_time + INTERVAL 1 HOUR "
        f"FROM (SELECT *, sipHash64(trace_id, 'mode') % 1000 AS h, {mode} AS m FROM {q} WHERE tenant = '{TENANT}' "
        f"AND root_priority = 3 AND kind = 'CHAIN')", {"tpl": template})
    return time.perf_counter() - t0


def ingest_window(store: Any, n: int, seed: int) -> None:
    """``n`` real traces of service qa, release v6, started now (the collector's own assembly)."""
    from benchmarks.audit_throughput import build_traces
    from ragtrace_collector.assemble import assemble
    from ragtrace_collector.rows import TIME_COLUMNS
    from tests.otlp_builders import request

    specs = build_traces(n, seed * n, answer_seed=seed)
    for i in range(0, len(specs), 100):
        spans = [s for spec in specs[i: i + 100] for s in spec.spans()]
        rows = assemble(request(spans, service="qa", release="v6"), TENANT, int(time.time() * 1000))
        for table in ("spans", "queries", "documents", "passages", "gold"):
            store.insert_columns(table, rows.columns(table), TIME_COLUMNS)


def at_the_bound(result: Any) -> Any:
    """``result`` spread over the default bound (20 services x 5 releases), with drift for each service."""
    from ragtrace_evaluator.audit.periodic import DEFAULT_RELEASES, DEFAULT_SERVICES

    base = result.releases[0]
    releases = tuple(replace(base, service=f"svc-{s:02d}", release=f"rel-{r:02d}")
                     for s in range(DEFAULT_SERVICES) for r in range(DEFAULT_RELEASES))
    drift = tuple(replace(d, service=f"svc-{s:02d}") for s in range(DEFAULT_SERVICES) for d in result.drift)
    return replace(result, releases=releases, drift=drift)


def scrape(store: Any, gauges: Any, n: int) -> dict[str, Any]:
    import httpx

    from ragtrace_cli.server import build_app
    from ragtrace_collector.metrics import Metrics
    from ragtrace_collector.settings import CollectorSettings
    from tests.loopback import serving
    from tests.otlp_builders import free_port

    metrics = Metrics()
    metrics.register_rendered(gauges.exposition)  # as `ragtrace serve` does
    t0 = time.perf_counter()
    for _ in range(20):
        text = metrics.render()
    render_ms = (time.perf_counter() - t0) / 20 * 1000
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="ragtrace-bench-spool-") as spool:
        settings = CollectorSettings(store=store.location, port=port, spool_dir=spool, spool_fsync=False)
        app = build_app(settings, store, metrics=metrics)
        with serving(app, port=port, lifespan="on") as url, httpx.Client(base_url=url, timeout=30) as client:
            client.get("/metrics")  # the connection and the first render
            times = []
            for _ in range(n):
                t = time.perf_counter()
                r = client.get("/metrics")
                times.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200
    times.sort()
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return {"series": series, "bytes": len(text), "render_ms": round(render_ms, 2),
            "median_ms": round(statistics.median(times), 2), "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
            "max_ms": round(times[-1], 2), "requests": n}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=int, default=1_000_000, help="labelled traces in the store")
    ap.add_argument("--window", type=int, default=400, help="new traces in each round's window")
    ap.add_argument("--sample", type=int, default=200, help="traces each periodic audit labels")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    from ragtrace_evaluator.audit.audit_gauges import AuditGauges
    from ragtrace_evaluator.audit.periodic import judge_window, run_periodic_audit
    from ragtrace_store import open_store
    from ragtrace_store.anchors import set_anchor

    print(load(), flush=True)
    out: dict[str, Any] = {"traces": args.traces, "load_before": os.getloadavg(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="ragtrace-bench-") as tmp:
        store = open_store(str(Path(tmp) / "store"))
        manifest = manifest_of_the_periodic_audit(store)
        now = datetime.now(UTC)
        hour = now.replace(minute=0, second=0, microsecond=0)
        out["build_seconds"] = round(bulk(store, args.traces, manifest, hour - timedelta(hours=1)), 1)
        labelled = store.query_rows(f"SELECT count() FROM {store.table('labels')} WHERE manifest_id = {{m:String}}",
                                    {"m": manifest})[0][0]
        print(f"built {args.traces:,} traces, {labelled:,} labelled under {manifest}, in {out['build_seconds']} s",
              flush=True)
        set_anchor(store, tenant=TENANT, service="qa", release="v1")
        # the window before the first round: its previous window
        judge_window(store, tenant=TENANT, manifest_id=manifest, start=hour - timedelta(hours=2),
                     end=hour - timedelta(hours=1))
        rounds = []
        start = hour - timedelta(hours=1)
        result = None
        for i in range(args.rounds):
            ingest_window(store, args.window, seed=i + 1)
            end = datetime.now(UTC) + timedelta(seconds=1)
            result = run_periodic_audit(store, tenant=TENANT, start=start, end=end, sample=args.sample)
            assert result.seconds is not None and result.judge_seconds is not None
            labels = sum(c.labels for c in result.services)
            row = {"round": i + 1, "window_labels": labels, "audit_s": round(result.seconds, 3),
                   "metrics_s": round(result.judge_seconds, 3),
                   "ratio": round(result.judge_seconds / result.seconds, 4),
                   "drift_anchor_worse": [d.boundary for d in result.drift if d.against == "anchor" and d.verdict == 1]}
            rounds.append(row)
            print(f"round {i + 1}: periodic audit {row['audit_s']:.2f} s, of which the metrics "
                  f"{row['metrics_s']:.3f} s = {row['ratio'] * 100:.2f} % (window: {labels} labels)", flush=True)
            start = end
        out["rounds"] = rounds
        assert result is not None
        t0 = time.perf_counter()
        whole = judge_window(store, tenant=TENANT, manifest_id=manifest, start=hour - timedelta(days=31),
                             end=datetime.now(UTC), save=False)
        worst = time.perf_counter() - t0
        audit_s = statistics.median(r["audit_s"] for r in rounds)
        out["worst_case"] = {"window_labels": sum(c.labels for c in whole.services), "metrics_s": round(worst, 3),
                             "ratio_to_median_audit": round(worst / audit_s, 4)}
        print(f"worst case: every label in one window ({out['worst_case']['window_labels']:,}): {worst:.3f} s "
              f"= {worst / audit_s * 100:.2f} % of the median periodic audit", flush=True)
        gauges = AuditGauges(interval_seconds=900)
        t0 = time.perf_counter()
        gauges.update(at_the_bound(result))  # renders the exposition, on the audit's thread
        out["gauges_update_s"] = round(time.perf_counter() - t0, 4)
        print(f"gauges at the bound rendered when the audit ends: {out['gauges_update_s']:.3f} s", flush=True)
        out["scrape"] = scrape(store, gauges, args.scrapes)
        s = out["scrape"]
        print(f"/metrics at the bound ({s['series']} series, {s['bytes']:,} bytes): median {s['median_ms']} ms, "
              f"p95 {s['p95_ms']} ms, max {s['max_ms']} ms over {s['requests']} requests; render alone "
              f"{s['render_ms']} ms", flush=True)
        store.close()
    out["load_after"] = os.getloadavg()
    # the metrics' whole cost per audit: its window's figures and drift, and rendering the gauges at the bound
    ratio = max((r["metrics_s"] + out["gauges_update_s"]) / r["audit_s"] for r in rounds)
    out["ratio_with_render"] = round(ratio, 4)
    print(f"\ntarget metrics <= 5 % of a periodic audit: {'met' if ratio <= 0.05 else 'NOT met'} "
          f"(worst round, with the gauges' rendering at the bound: {ratio * 100:.2f} %)")
    print(f"target /metrics <= 100 ms: {'met' if out['scrape']['p95_ms'] <= 100 else 'NOT met'} "
          f"(p95 {out['scrape']['p95_ms']} ms)")
    print(load())
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
