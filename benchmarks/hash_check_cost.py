"""What checking content hashes at ingest (issue 14, item 3) costs the native walk, in CPU time.

One request of ``--traces`` standard traces (a retriever with 20 candidates of ~1 KB, a reranker, a
generation span; passages drawn from ``--corpus`` distinct texts, so most of a request's passages are
distinct and each is hashed once). Three things are timed, each the median of ``--runs`` runs, in
process CPU time (on a shared machine wall time follows the other jobs):
the whole walk (`assemble.assemble_body`, which checks), parse + span tuples alone, and parse +
span tuples + `Request.verify` for every span with documents. verify − parse is the check's cost,
given twice: with the walk's cache of proven passages emptied before each run (every passage hashed
once per request, as before issue 35) and kept (the passages proven by an earlier request are
compared with the proven text instead: what a collector does with passages it has seen).

Usage:  .venv/bin/python benchmarks/hash_check_cost.py [--traces 100] [--corpus 5000] [--runs 30]
Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragtrace_collector import native_walk
from ragtrace_collector.assemble import assemble_body
from tests import otlp_builders as T


def cpu_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm up (key caches, the spare arena block)
    times = []
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--traces", type=int, default=100)
    ap.add_argument("--corpus", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    try:
        native = native_walk.require()
    except native_walk.NativeWalkMissing as exc:
        sys.exit(str(exc))
    docs = T.corpus(a.corpus, size=1000)
    body = T.request([s for i in range(a.traces) for s in T.standard_trace(docs, i * 7).spans()]).SerializeToString()

    def walk() -> None:
        assemble_body(body, "t", 0, None)

    def parse() -> None:
        native.parse(body).spans()

    def parse_and_verify() -> None:
        request = native.parse(body)
        for _, spans in request.spans():
            for span in spans:
                if span[10] is not None:
                    request.verify(span[10], "t")

    def parse_and_verify_cold() -> None:
        native.verified_cache(native_walk.VERIFIED_TEXT_BYTES)  # forget every proven passage
        parse_and_verify()

    whole, base = cpu_ms(walk, a.runs), cpu_ms(parse, a.runs)
    cold, warm = cpu_ms(parse_and_verify_cold, a.runs), cpu_ms(parse_and_verify, a.runs)
    print(f"{a.traces} traces, {len(body) / 1e6:.1f} MB: whole walk {whole:.2f} ms CPU; parse {base:.2f} ms")
    print(f"passages new:    parse + verify {cold:.2f} ms; the check {cold - base:.2f} ms = "
          f"{(cold - base) / whole:.0%} of the walk")
    print(f"passages proven: parse + verify {warm:.2f} ms; the check {warm - base:.2f} ms = "
          f"{(warm - base) / whole:.0%} of the walk")


if __name__ == "__main__":
    main()
