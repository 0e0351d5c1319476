"""How fast the review UI answers on an embedded chDB store, and how fast `enqueue` fills a queue.

Reports ratios against an in-run baseline (the login page, which touches no store), so the numbers
mean the same on a fast or a slow machine:

    .venv/bin/python benchmarks/review_pages.py [--labels 5000] [--requests 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from fastapi import FastAPI
from fastapi.testclient import TestClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ragtrace_review import auth  # noqa: E402
from ragtrace_review.queues import enqueue, next_item  # noqa: E402
from ragtrace_review.web import mount  # noqa: E402
from ragtrace_store import open_store  # noqa: E402
from tests.review.rows import SAMPLE_CLAIMS, label_record, sample_trace, write_labels, write_trace  # noqa: E402

MODES = ("ok", "ok", "ok", "ok", "fabrication", "rank_inversion", "under_use", "retrieval_gap")


def _time(fn, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--labels", type=int, default=5000)
    ap.add_argument("--requests", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, open_store(tmp) as store:
        tenant = "bench"
        write_trace(store, tenant, sample_trace("bench-0"))
        records = [label_record(f"bench-{i}", MODES[i % len(MODES)], confidence=(i % 100) / 100,
                                claims=SAMPLE_CLAIMS) for i in range(args.labels)]
        write_labels(store, tenant, records)
        t0 = time.perf_counter()
        res = enqueue(store, "bench", None, per_mode=200, reviewers=2, tenant=tenant)
        t_enqueue = time.perf_counter() - t0
        reviewer, token = auth.add_reviewer(store, "bench", tenant=tenant)
        app = FastAPI()
        mount(app, lambda: store, SimpleNamespace(review_secret="bench"))
        client = TestClient(app, follow_redirects=False)
        html = {"authorization": f"Bearer {token}", "accept": "text/html"}
        first = next_item(store, reviewer, "bench")
        url = f"/review/queues/bench/items/{first}"
        # warm up templates and query caches
        client.get("/review/login")
        client.get(url, headers=html)
        base = _time(lambda: client.get("/review/login"), args.requests)
        item = _time(lambda: client.get(url, headers=html), args.requests)
        queues = _time(lambda: client.get("/review/", headers=html), args.requests)
        assign = _time(lambda: next_item(store, reviewer, "bench"), args.requests)
    med = statistics.median
    print(f"enqueue: {args.labels} labels -> {res.total_added} items in {t_enqueue * 1000:.0f} ms "
          f"({args.labels / t_enqueue:,.0f} labels/s)")
    print(f"baseline (login page, no store): median {med(base) * 1000:.1f} ms over {args.requests} requests")
    for name, xs in (("item page", item), ("queue list", queues), ("next_item (held)", assign)):
        print(f"{name:<18} median {med(xs) * 1000:.1f} ms = {med(xs) / med(base):.1f}x baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
